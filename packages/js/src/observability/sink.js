// What every trace sink of `oma-component/observability` shares (OMA: observability/sink.ts):
// empty counters, flush results made from counters, and the diagnostics reporter through which
// a sink tells its operator about problems of the telemetry itself (never about a record).

/** A sink's counters before anything happened. */
export function emptyTraceSinkStats() {
  return { accepted: 0, exported: 0, retried: 0, failed: 0, dropped: 0, queuedRecords: 0, queuedBytes: 0, queued: 0 }
}

/** `sink.getStats()`, or empty counters when it has none or it throws. */
export function statsOf(sink) {
  try {
    if (typeof sink.getStats === 'function') {
      const stats = sink.getStats()
      if (stats !== null && typeof stats === 'object') return stats
    }
  } catch {
    // A child's counters are telemetry: never let them fail the caller.
  }
  return emptyTraceSinkStats()
}

/** A flush result with `stats`' counts. */
export function flushResult(stats, status) {
  return { status, accepted: stats.accepted, exported: stats.exported, dropped: stats.dropped, failed: stats.failed }
}

/** Refuses diagnostics options that are not ones (OMA takes them as they come; we name them). */
export function checkDiagnosticOptions(options) {
  if (options === null || typeof options !== 'object') throw new TypeError('options must be an object')
  const { diagnostics, onDiagnostic, diagnosticIntervalMs, sinkName } = options
  if (diagnostics !== undefined && diagnostics !== 'warn' && diagnostics !== 'silent') {
    throw new TypeError(`diagnostics must be 'warn' or 'silent', got ${JSON.stringify(diagnostics)}`)
  }
  if (onDiagnostic !== undefined && typeof onDiagnostic !== 'function') {
    throw new TypeError('onDiagnostic must be a function')
  }
  if (diagnosticIntervalMs !== undefined && !(typeof diagnosticIntervalMs === 'number' && diagnosticIntervalMs >= 0)) {
    throw new RangeError(`diagnosticIntervalMs must be a number >= 0, got ${String(diagnosticIntervalMs)}`)
  }
  if (sinkName !== undefined && typeof sinkName !== 'string') throw new TypeError('sinkName must be a string')
}

/**
 * A timer. Background work (a scheduled export, an export's own bound, a retry's delay) uses
 * one that does not keep Node's process alive: telemetry never holds an exit. A caller awaiting
 * `forceFlush` or `shutdown` holds the process for at most its bound (`held`), so that the
 * records of a program's last run are delivered before it exits.
 */
export function unrefTimer(callback, delayMs, held = false) {
  const timer = setTimeout(callback, delayMs)
  if (!held && typeof timer === 'object' && typeof timer?.unref === 'function') timer.unref()
  return timer
}

/**
 * Counts telemetry problems by code and reports them, at most once per code in each
 * `diagnosticIntervalMs` (60 s by default), to `onDiagnostic`, else (unless `diagnostics` is
 * 'silent') with `console.warn`. A diagnostic holds a fixed message, no record or error text;
 * a handler that throws is ignored.
 */
export class DiagnosticReporter {
  #options
  #counts = new Map()
  #last = new Map()

  constructor(options = {}) {
    checkDiagnosticOptions(options)
    this.#options = { ...options }
  }

  report(code, message, severity = 'warning') {
    const count = (this.#counts.get(code) ?? 0) + 1
    this.#counts.set(code, count)
    const now = Date.now()
    const interval = this.#options.diagnosticIntervalMs ?? 60_000
    if (now - (this.#last.get(code) ?? -Infinity) < interval) return
    this.#last.set(code, now)
    const diagnostic = { code, severity, count, ...(this.#options.sinkName ? { sinkName: this.#options.sinkName } : {}), message }
    try {
      if (this.#options.onDiagnostic) this.#options.onDiagnostic(diagnostic)
      else if (this.#options.diagnostics !== 'silent') console.warn(`[open-multi-agent observability] ${code}: ${message}`)
    } catch {
      // A diagnostic handler is telemetry too: never throw or recurse.
    }
  }
}

/**
 * Calls `operation(signal)` and waits at most `timeoutMs` for its promise: gives
 * `{ kind: 'value', value }`, `{ kind: 'error' }` or `{ kind: 'timeout' }` (then `signal` is
 * aborted so a long operation may give up). A synchronous throw is an error, never a throw;
 * the operation starts on a later microtask. `held`: see `unrefTimer`.
 */
export function withTimeout(timeoutMs, operation, held = false) {
  const controller = new AbortController()
  return new Promise((resolve) => {
    let settled = false
    const timer = unrefTimer(() => {
      if (settled) return
      settled = true
      controller.abort(new Error('telemetry operation timed out'))
      resolve({ kind: 'timeout' })
    }, Math.max(0, timeoutMs), held)
    const finish = (outcome) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      resolve(outcome)
    }
    // Called on a later microtask, never inside the caller's own frame (an `emit`).
    Promise.resolve()
      .then(() => operation(controller.signal))
      .then((v) => finish({ kind: 'value', value: v }), () => finish({ kind: 'error' }))
  })
}
