// OMA's BatchingTraceSink (OMA: observability/batching.ts): a bounded queue of trace records
// exported in batches, with OMA's limits, priorities, retries and diagnostics.
//
// `emit` only measures the record and queues it. When the queue would pass its record or byte
// limit, the oldest record of the lowest priority (stream chunks, then other events, then span
// starts; span ends last) that is not above the new record's gives way; when none may, the new
// record is dropped. A batch goes out when `maxBatchRecords` are queued, `scheduledDelayMs`
// after the first record of a quiet spell, or at a flush. Each export is held to
// `exportTimeoutMs`; a retryable answer (or a timeout, or a rejection) retries what was not
// delivered, `maxRetries` times with backoff and jitter; then the records count as failed.
// Nothing here throws into a run or waits for the exporter on the run's behalf.

import { DiagnosticReporter, checkDiagnosticOptions, flushResult, unrefTimer, withTimeout } from './sink.js'
import { Watermark } from './watermark.js'

/** OMA's defaults, by option (milliseconds and bytes). */
export const DEFAULT_BATCHING_OPTIONS = Object.freeze({
  maxQueueRecords: 2_048,
  maxQueueBytes: 16 * 1024 * 1024,
  maxRecordBytes: 256 * 1024,
  maxBatchRecords: 512,
  scheduledDelayMs: 5_000,
  exportTimeoutMs: 30_000,
  maxRetries: 3,
  retryDelayMs: 1_000,
  retryBackoff: 2,
  maxRetryDelayMs: 30_000,
})

/** Each numeric option: its least value and whether it must be an integer. */
const LIMITS = {
  maxQueueRecords: [1, true],
  maxQueueBytes: [1, true],
  maxRecordBytes: [1, true],
  maxBatchRecords: [1, true],
  scheduledDelayMs: [1, false],
  exportTimeoutMs: [1, false],
  maxRetries: [0, true],
  retryDelayMs: [0, false],
  retryBackoff: [1, false],
  maxRetryDelayMs: [1, false],
}

function numericOptions(options) {
  const out = {}
  for (const [name, [least, integer]] of Object.entries(LIMITS)) {
    const value = options[name]
    if (value === undefined) {
      out[name] = DEFAULT_BATCHING_OPTIONS[name]
      continue
    }
    if (typeof value !== 'number' || !Number.isFinite(value) || value < least || (integer && !Number.isInteger(value))) {
      throw new RangeError(`${name} must be ${integer ? 'an integer' : 'a number'} >= ${least}, got ${String(value)}`)
    }
    out[name] = value
  }
  if (options.retryJitter !== undefined && typeof options.retryJitter !== 'boolean') {
    throw new TypeError('retryJitter must be a boolean')
  }
  out.retryJitter = options.retryJitter ?? true
  return out
}

/** What survives a full queue longest: span ends, then starts, then events, stream chunks least. */
export function recordPriority(record) {
  if (record.recordType === 'span_end') return 3
  if (record.recordType === 'span_start') return 2
  return record.name === 'stream_chunk' ? 0 : 1
}

/**
 * The UTF-8 length of a string, counted without encoding it: Node's native count where there is
 * one (about a tenth of the loop's time for a record's text), else the loop. Both count a lone
 * surrogate as the three bytes of the replacement character it would be encoded as.
 */
const utf8Length = typeof globalThis.Buffer?.byteLength === 'function'
  ? (text) => globalThis.Buffer.byteLength(text, 'utf8')
  : utf8LengthCounted

/** The UTF-8 length of a string, counted unit by unit (for platforms without `Buffer`). */
export function utf8LengthCounted(text) {
  let bytes = text.length
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i)
    if (unit < 0x80) continue
    if (unit < 0x800) bytes += 1
    else if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      bytes += 2
      i++
    } else bytes += 2
  }
  return bytes
}

/** The record's size as compact UTF-8 JSON, or undefined when it is not JSON. */
export function recordBytes(record) {
  try {
    const text = JSON.stringify(record)
    return typeof text === 'string' ? utf8Length(text) : undefined
  } catch {
    return undefined
  }
}

const INVALID_RESULT = Object.freeze({ status: 'failure', exported: 0, code: 'INVALID_EXPORT_RESULT' })

/** An exporter's answer as OMA reads it: anything but a known status and a finite count fails. */
export function normalizeExportResult(value) {
  try {
    if (value === null || typeof value !== 'object') return { ...INVALID_RESULT }
    const { status, exported, retryAfterMs, code } = value
    if (status !== 'success' && status !== 'retryable' && status !== 'failure') return { ...INVALID_RESULT }
    if (typeof exported !== 'number' || !Number.isFinite(exported)) return { ...INVALID_RESULT }
    return {
      status,
      exported,
      ...(typeof retryAfterMs === 'number' && Number.isFinite(retryAfterMs) ? { retryAfterMs: Math.max(0, retryAfterMs) } : {}),
      ...(typeof code === 'string' ? { code: code.slice(0, 128) } : {}),
    }
  } catch {
    return { ...INVALID_RESULT }
  }
}

function delay(ms) {
  return ms > 0 ? new Promise((resolve) => unrefTimer(resolve, ms)) : Promise.resolve()
}

/** A TraceSink exporting records in batches through `exporter` (OMA's TraceExporter). */
export class BatchingTraceSink {
  #exporter
  #options
  #diagnostics
  #queue = []
  #stats = { accepted: 0, exported: 0, retried: 0, failed: 0, dropped: 0, queuedRecords: 0, queuedBytes: 0 }
  #nextId = 0
  #settled = new Watermark()
  #timer
  #worker
  #wake = false
  #closing = false
  #shutdown
  #exporterFlush

  constructor(exporter, options = {}) {
    if (exporter === null || typeof exporter !== 'object' || typeof exporter.export !== 'function') {
      throw new TypeError('exporter must have an export(records, signal) method')
    }
    checkDiagnosticOptions(options)
    this.#exporter = exporter
    this.#options = numericOptions(options)
    this.#diagnostics = new DiagnosticReporter({ ...options, sinkName: options.sinkName ?? 'BatchingTraceSink' })
  }

  /** Queues `record`; never throws, never waits. */
  emit(record) {
    try {
      this.#emit(record)
    } catch {
      // A run never sees its sink fail.
    }
  }

  #emit(record) {
    if (this.#closing) {
      this.#stats.dropped++
      this.#diagnostics.report('emit_after_shutdown', 'Trace record rejected after sink shutdown began.')
      return
    }
    const bytes = recordBytes(record)
    if (bytes === undefined || bytes > this.#options.maxRecordBytes) {
      this.#stats.dropped++
      this.#diagnostics.report('record_too_large', 'Trace record exceeded the configured size limit or was not serializable.')
      return
    }
    const incoming = { id: 0, record, bytes, priority: recordPriority(record) }
    if (!this.#makeRoom(incoming)) {
      this.#stats.dropped++
      this.#diagnostics.report('queue_full', 'Trace record dropped because the bounded queue is full.')
      return
    }
    incoming.id = ++this.#nextId
    this.#stats.accepted++
    this.#queue.push(incoming)
    this.#stats.queuedRecords++
    this.#stats.queuedBytes += bytes
    if (this.#queue.length >= this.#options.maxBatchRecords) this.#startWorker()
    else this.#schedule()
  }

  #makeRoom(incoming) {
    while (
      this.#stats.queuedRecords + 1 > this.#options.maxQueueRecords
      || this.#stats.queuedBytes + incoming.bytes > this.#options.maxQueueBytes
    ) {
      let index = -1
      let lowest = Infinity
      for (let i = 0; i < this.#queue.length; i++) {
        if (this.#queue[i].priority < lowest) {
          lowest = this.#queue[i].priority
          index = i
        }
      }
      if (index < 0 || lowest > incoming.priority) return false
      const [dropped] = this.#queue.splice(index, 1)
      this.#stats.queuedRecords--
      this.#stats.queuedBytes -= dropped.bytes
      this.#stats.dropped++
      this.#settled.settle(dropped.id)
      this.#diagnostics.report('queue_full', 'A lower-priority queued trace record was dropped to preserve bounded memory.')
    }
    return true
  }

  /**
   * Exports what was accepted before the call, then the exporter's own `forceFlush`, waiting
   * at most `timeoutMs` (`exportTimeoutMs` by default).
   */
  async forceFlush(options = {}) {
    const started = Date.now()
    const timeoutMs = Math.max(0, options?.timeoutMs ?? this.#options.exportTimeoutMs)
    const target = this.#nextId
    let completed = target <= this.#settled.through
    if (!completed) {
      this.#clearTimer()
      this.#startWorker()
      completed = await this.#settled.waitFor(target, timeoutMs, true)
    }
    const stats = this.getStats()
    if (!completed) {
      this.#diagnostics.report('flush_timeout', 'Trace flush timed out before its acceptance watermark settled.')
      return flushResult(stats, 'timeout')
    }
    const exporterStatus = await this.#flushExporter(Math.max(0, timeoutMs - (Date.now() - started)))
    if (exporterStatus === 'timeout') {
      this.#diagnostics.report('flush_timeout', 'Trace exporter forceFlush timed out.')
      return flushResult(this.getStats(), 'timeout')
    }
    if (exporterStatus === 'error') {
      this.#stats.lastError = 'EXPORTER_FLUSH_FAILED'
      this.#diagnostics.report('export_failed', 'Trace exporter forceFlush failed.', 'error')
      return flushResult(this.getStats(), stats.exported > 0 ? 'partial' : 'error')
    }
    return flushResult(stats, this.#resultStatus(stats))
  }

  /** Refuses records from now on, flushes, then shuts the exporter down; idempotent. */
  shutdown(options = {}) {
    if (this.#shutdown) return this.#shutdown
    this.#closing = true
    this.#clearTimer()
    this.#shutdown = this.#performShutdown(options ?? {}).catch(() => flushResult(this.getStats(), 'error'))
    return this.#shutdown
  }

  /** The sink's counters now. */
  getStats() {
    return {
      ...this.#stats,
      queued: this.#stats.queuedRecords,
      ...(this.#stats.lastError ? { lastFailureCode: this.#stats.lastError } : {}),
    }
  }

  #schedule() {
    if (this.#timer !== undefined || this.#worker || this.#queue.length === 0) return
    this.#timer = unrefTimer(() => {
      this.#timer = undefined
      this.#startWorker()
    }, this.#options.scheduledDelayMs)
  }

  #clearTimer() {
    if (this.#timer !== undefined) clearTimeout(this.#timer)
    this.#timer = undefined
  }

  #startWorker() {
    this.#wake = true
    if (this.#worker) return
    this.#clearTimer()
    this.#worker = this.#drain().catch(() => {}).finally(() => {
      this.#worker = undefined
      if (this.#queue.length > 0) {
        if (this.#wake || this.#closing) this.#startWorker()
        else this.#schedule()
      }
    })
  }

  async #drain() {
    while (this.#queue.length > 0) {
      this.#wake = false
      const batch = this.#queue.splice(0, this.#options.maxBatchRecords)
      await this.#exportBatch(batch)
      if (!this.#wake && !this.#closing && this.#queue.length < this.#options.maxBatchRecords) break
    }
  }

  async #exportBatch(batch) {
    let remaining = batch
    let retry = 0
    while (remaining.length > 0) {
      const records = remaining.map((entry) => entry.record)
      const outcome = await withTimeout(this.#options.exportTimeoutMs, (signal) => this.#exporter.export(records, signal))
      let result
      if (outcome.kind === 'timeout') {
        result = { status: 'retryable', exported: 0, code: 'EXPORT_TIMEOUT' }
        this.#diagnostics.report('export_timeout', 'Trace exporter exceeded its configured timeout.', 'error')
      } else if (outcome.kind === 'error') {
        result = { status: 'retryable', exported: 0, code: 'EXPORT_REJECTED' }
      } else {
        result = normalizeExportResult(outcome.value)
      }
      const delivered = Math.min(remaining.length, Math.max(0, Math.floor(result.exported)))
      for (const entry of remaining.slice(0, delivered)) {
        this.#stats.exported++
        this.#release(entry)
      }
      remaining = remaining.slice(delivered)
      if (remaining.length === 0) return
      if (result.status !== 'success') {
        this.#stats.lastError = result.code ?? (result.status === 'retryable' ? 'EXPORT_RETRYABLE' : 'EXPORT_FAILED')
      }
      if (result.status === 'retryable' && retry < this.#options.maxRetries) {
        retry++
        this.#stats.retried += remaining.length
        const nominal = result.retryAfterMs ?? Math.min(
          this.#options.retryDelayMs * this.#options.retryBackoff ** (retry - 1),
          this.#options.maxRetryDelayMs,
        )
        const wait = this.#options.retryJitter ? Math.floor(nominal / 2 + (Math.random() * nominal) / 2) : nominal
        this.#diagnostics.report('export_failed', 'Trace exporter reported a retryable delivery failure.')
        await delay(wait)
        continue
      }
      this.#stats.lastError = result.code ?? (result.status === 'success' ? 'PARTIAL_EXPORT' : 'EXPORT_FAILED')
      for (const entry of remaining) {
        this.#stats.failed++
        this.#release(entry)
      }
      this.#diagnostics.report('export_failed', 'Trace exporter permanently failed to deliver one or more records.', 'error')
      return
    }
  }

  #release(entry) {
    this.#stats.queuedRecords--
    this.#stats.queuedBytes -= entry.bytes
    this.#settled.settle(entry.id)
  }

  #resultStatus(stats) {
    if (stats.failed > 0 || stats.dropped > 0) return stats.exported > 0 ? 'partial' : 'error'
    return 'ok'
  }

  #flushExporter(timeoutMs) {
    if (typeof this.#exporter.forceFlush !== 'function') return Promise.resolve('ok')
    if (!this.#exporterFlush) {
      this.#exporterFlush = withTimeout(timeoutMs, (signal) => this.#exporter.forceFlush(signal), true)
        .then((outcome) => {
          if (outcome.kind === 'timeout') return 'timeout'
          return outcome.kind === 'value' && outcome.value?.status === 'success' ? 'ok' : 'error'
        })
        .finally(() => { this.#exporterFlush = undefined })
      return this.#exporterFlush
    }
    // A flush already running: wait for it, within this caller's bound.
    const running = this.#exporterFlush
    return withTimeout(timeoutMs, () => running, true).then((outcome) => (outcome.kind === 'value' ? outcome.value : 'timeout'))
  }

  async #performShutdown(options) {
    const started = Date.now()
    const totalMs = Math.max(0, options.timeoutMs ?? this.#options.exportTimeoutMs)
    const flushed = await this.forceFlush({ timeoutMs: totalMs })
    if (flushed.status === 'timeout') return flushed
    if (typeof this.#exporter.shutdown !== 'function') return flushed
    const outcome = await withTimeout(Math.max(0, totalMs - (Date.now() - started)), (signal) => this.#exporter.shutdown(signal), true)
    const failedStatus = flushed.status === 'ok' ? 'error' : 'partial'
    if (outcome.kind === 'timeout') {
      this.#stats.lastError = 'SHUTDOWN_TIMEOUT'
      this.#diagnostics.report('shutdown_failed', 'Trace exporter shutdown timed out.', 'error')
      return flushResult(this.getStats(), 'timeout')
    }
    if (outcome.kind === 'error') {
      this.#stats.lastError = 'SHUTDOWN_REJECTED'
      this.#diagnostics.report('shutdown_failed', 'Trace exporter shutdown rejected.', 'error')
      return flushResult(this.getStats(), failedStatus)
    }
    const answer = outcome.value
    if (answer === null || typeof answer !== 'object' || answer.status !== 'success') {
      const code = answer !== null && typeof answer === 'object' ? answer.code : undefined
      this.#stats.lastError = typeof code === 'string' && code ? code : 'SHUTDOWN_FAILED'
      this.#diagnostics.report('shutdown_failed', 'Trace exporter shutdown failed.', 'error')
      return flushResult(this.getStats(), failedStatus)
    }
    return flushed
  }
}
