// OMA's LegacyCallbackTraceSink (OMA: observability/legacy-callback.ts): the bridge from trace
// records to the older `onTrace` callback, which receives OMA's seven legacy trace events
// (`llm_call`, `tool_call`, `agent`, ...) with their exact shape.
//
// A record that completes a legacy event carries it, out of sight of JSON and of every other
// sink (the package's runs attach them); the sink calls the callback with it and ignores every
// other record. A callback may return a promise: `forceFlush` waits for it.

import { DiagnosticReporter, checkDiagnosticOptions, flushResult, unrefTimer } from './sink.js'

const LEGACY_EVENT = Symbol('oma-component.legacyTraceEvent')

/** Makes `record` carry the legacy trace event it completes (a property JSON never shows). */
export function attachLegacyTraceEvent(record, event) {
  Object.defineProperty(record, LEGACY_EVENT, { value: event, enumerable: false, configurable: true })
  return record
}

/**
 * Calls `callback` with the legacy trace event each record carries. A callback that throws,
 * or whose promise rejects, is counted as failed and diagnosed; the run never sees it.
 */
export class LegacyCallbackTraceSink {
  #callback
  #diagnostics
  #pending = new Map()
  #nextId = 0
  #closing = false
  #shutdown
  #counts = { accepted: 0, exported: 0, failed: 0, dropped: 0 }

  constructor(callback, options = {}) {
    if (typeof callback !== 'function') throw new TypeError('callback must be a function of a trace event')
    checkDiagnosticOptions(options)
    this.#callback = callback
    this.#diagnostics = new DiagnosticReporter({ ...options, sinkName: options.sinkName ?? 'LegacyCallbackTraceSink' })
  }

  emit(record) {
    const event = record?.[LEGACY_EVENT]
    if (!event) return
    if (this.#closing) {
      this.#counts.dropped++
      this.#diagnostics.report('emit_after_shutdown', 'Legacy trace event rejected after sink shutdown began.')
      return
    }
    const id = ++this.#nextId
    this.#counts.accepted++
    let answer
    try {
      answer = this.#callback(event)
    } catch {
      this.#counts.failed++
      this.#diagnostics.report('sink_emit_failed', 'Legacy trace callback threw synchronously.', 'error')
      return
    }
    if (answer === null || (typeof answer !== 'object' && typeof answer !== 'function') || typeof answer.then !== 'function') {
      this.#counts.exported++
      return
    }
    const tracked = Promise.resolve(answer).then(
      () => { this.#counts.exported++ },
      () => {
        this.#counts.failed++
        this.#diagnostics.report('export_failed', 'Legacy trace callback rejected.', 'error')
      },
    ).finally(() => { this.#pending.delete(id) })
    this.#pending.set(id, tracked)
  }

  /** Waits for the callbacks' promises started before the call (30 s by default). */
  async forceFlush(options = {}) {
    const watermark = this.#nextId
    const work = [...this.#pending].filter(([id]) => id <= watermark).map(([, promise]) => promise)
    if (work.length > 0) {
      const completed = await new Promise((resolve) => {
        const timer = unrefTimer(() => resolve(false), Math.max(0, options?.timeoutMs ?? 30_000), true)
        Promise.all(work).then(() => {
          clearTimeout(timer)
          resolve(true)
        })
      })
      if (!completed) {
        this.#diagnostics.report('flush_timeout', 'Legacy trace callback flush timed out.')
        return flushResult(this.getStats(), 'timeout')
      }
    }
    return flushResult(this.getStats(), this.#status())
  }

  shutdown(options = {}) {
    if (this.#shutdown) return this.#shutdown
    this.#closing = true
    this.#shutdown = this.forceFlush(options)
    return this.#shutdown
  }

  getStats() {
    const queued = this.#pending.size
    return {
      ...this.#counts,
      retried: 0,
      queuedRecords: queued,
      queuedBytes: 0,
      queued,
      ...(this.#counts.failed > 0 ? { lastError: 'LEGACY_CALLBACK_FAILED', lastFailureCode: 'LEGACY_CALLBACK_FAILED' } : {}),
    }
  }

  #status() {
    if (this.#counts.failed === 0 && this.#counts.dropped === 0) return 'ok'
    return this.#counts.exported > 0 ? 'partial' : 'error'
  }
}
