// OMA's CompositeSink (OMA: observability/composite.ts): one sink handing every record to
// several, where one child's failure never keeps a record from the others.

import { DiagnosticReporter, checkDiagnosticOptions, statsOf, unrefTimer } from './sink.js'

/** How long a child's flush or shutdown may take when the caller gives no bound. */
const DEFAULT_CHILD_TIMEOUT_MS = 30_000

function isSink(value) {
  return value !== null && typeof value === 'object' && typeof value.emit === 'function'
}

/** Several flush results as one: ok when all are, timeout or error when all are that, else partial. */
function combine(results) {
  const all = (status) => results.every((r) => r.status === status)
  const status = all('ok') ? 'ok' : all('timeout') ? 'timeout' : all('error') ? 'error' : 'partial'
  const sum = (key) => results.reduce((total, r) => total + r[key], 0)
  return { status, accepted: sum('accepted'), exported: sum('exported'), dropped: sum('dropped'), failed: sum('failed') }
}

function isFlushResult(value) {
  return value !== null && typeof value === 'object' && typeof value.status === 'string'
}

/**
 * Hands each record to every sink of `sinks`, in order; one that throws (or whose `emit`
 * returns a promise that rejects) is counted and diagnosed (`sink_emit_failed`) and the others
 * still get the record. `forceFlush` and `shutdown` run on all children at once, each held to
 * `timeoutMs` (30 s by default).
 */
export class CompositeSink {
  #sinks
  #diagnostics
  #closing = false
  #emitFailures = 0
  #shutdown

  constructor(sinks, options = {}) {
    if (!Array.isArray(sinks)) throw new TypeError('sinks must be an array of trace sinks')
    sinks.forEach((sink, i) => {
      if (!isSink(sink)) throw new TypeError(`sinks[${i}] is not a trace sink (it has no emit method)`)
    })
    checkDiagnosticOptions(options)
    this.#sinks = [...sinks]
    this.#diagnostics = new DiagnosticReporter({ ...options, sinkName: options.sinkName ?? 'CompositeSink' })
  }

  emit(record) {
    if (this.#closing) {
      this.#diagnostics.report('emit_after_shutdown', 'Trace record rejected after composite shutdown began.')
      return
    }
    for (const sink of this.#sinks) {
      try {
        const answer = sink.emit(record)
        // `emit` returns nothing; one that returns a promise is not waited for, and its
        // rejection counts as the throw it stands for (never an unhandled rejection).
        if (answer !== null && typeof answer === 'object' && typeof answer.then === 'function') {
          Promise.resolve(answer).catch(() => this.#emitFailed())
        }
      } catch {
        this.#emitFailed()
      }
    }
  }

  async forceFlush(options = {}) {
    return combine(await Promise.all(this.#sinks.map((sink) => this.#callChild(sink, 'flush', options ?? {}))))
  }

  shutdown(options = {}) {
    if (this.#shutdown) return this.#shutdown
    this.#closing = true
    this.#shutdown = Promise.all(this.#sinks.map((sink) => this.#callChild(sink, 'shutdown', options ?? {}))).then(combine)
    return this.#shutdown
  }

  getStats() {
    const stats = this.#sinks.map(statsOf)
    const sum = (key) => stats.reduce((total, s) => total + (s[key] ?? 0), 0)
    const last = [...stats].reverse().find((s) => s.lastError)?.lastError
    return {
      accepted: sum('accepted'),
      exported: sum('exported'),
      retried: sum('retried'),
      failed: sum('failed') + this.#emitFailures,
      dropped: sum('dropped'),
      queuedRecords: sum('queuedRecords'),
      queuedBytes: sum('queuedBytes'),
      queued: sum('queuedRecords'),
      ...(last ? { lastError: last, lastFailureCode: last } : {}),
    }
  }

  #emitFailed() {
    this.#emitFailures++
    this.#diagnostics.report('sink_emit_failed', 'A child trace sink threw while accepting a record.', 'error')
  }

  #callChild(sink, operation, options) {
    const timeoutMs = Math.max(0, options.timeoutMs ?? DEFAULT_CHILD_TIMEOUT_MS)
    return new Promise((resolve) => {
      let settled = false
      const finish = (result) => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        resolve(result)
      }
      const failed = (status, code, message) => {
        const stats = statsOf(sink)
        this.#diagnostics.report(code, message, 'error')
        finish({
          status,
          accepted: stats.accepted,
          exported: stats.exported,
          dropped: stats.dropped,
          failed: stats.failed + (status === 'error' ? 1 : 0),
        })
      }
      const timer = unrefTimer(() => {
        if (settled) return
        failed('timeout', operation === 'flush' ? 'flush_timeout' : 'shutdown_failed', `A child trace sink ${operation} operation timed out.`)
      }, timeoutMs, true)
      const rejected = () => failed('error', operation === 'flush' ? 'export_failed' : 'shutdown_failed', `A child trace sink rejected ${operation}.`)
      Promise.resolve()
        .then(() => (operation === 'flush' ? sink.forceFlush(options) : sink.shutdown(options)))
        .then((result) => (isFlushResult(result) ? finish(result) : rejected()), rejected)
    })
  }
}
