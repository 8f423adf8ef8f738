// The watermark of a queue whose entries settle out of order (exports and scorers finish in
// any order): the highest entry id up to which every entry has settled, and the waits of
// `forceFlush` and `shutdown` for it. `BatchingTraceSink` and the online evaluator keep one.

import { unrefTimer } from './sink.js'

export class Watermark {
  #through = 0
  #ahead = new Set()
  #waiters = new Set()

  /** Every entry with an id up to this one has settled (ids start at 1). */
  get through() {
    return this.#through
  }

  /** Marks entry `id` settled, moves the watermark past it and every settled id after it, wakes the waits. */
  settle(id) {
    if (id === this.#through + 1) {
      this.#through = id
      while (this.#ahead.delete(this.#through + 1)) this.#through++
    } else if (id > this.#through) {
      this.#ahead.add(id)
    }
    for (const wake of this.#waiters) wake()
  }

  /**
   * Resolves true once every entry up to `target` has settled, false after `timeoutMs`; the
   * timer holds Node's process open only when `held` (see `unrefTimer`).
   */
  waitFor(target, timeoutMs, held = false) {
    return new Promise((resolve) => {
      let timer
      const check = () => {
        if (target > this.#through) return
        done(true)
      }
      const done = (value) => {
        this.#waiters.delete(check)
        if (timer !== undefined) clearTimeout(timer)
        resolve(value)
      }
      this.#waiters.add(check)
      timer = unrefTimer(() => done(false), Math.max(0, timeoutMs), held)
      check()
    })
  }
}
