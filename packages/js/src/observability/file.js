// `oma-component/observability/file`: OMA's FileTraceStore (OMA:
// `@open-multi-agent/core/observability/file`): the in-memory trace store kept in a durable
// NDJSON file (format `oma.file_trace_store` 1, the file the Python package reads and writes),
// for one process and one instance at a time, over the durable log FileEvalStore writes too
// (utils/durable-log.js). Node only: it uses node:fs, which is why it is a subpath of its own.

import path from 'node:path'

import { DurableLog, SchemaMajorError } from '../utils/durable-log.js'
import { InMemoryTraceStore } from './memory-store.js'
import { TraceStoreError } from './store.js'

export const FILE_TRACE_STORE_FORMAT = 'oma.file_trace_store'
export const FILE_TRACE_STORE_FORMAT_VERSION = 1

/**
 * The file store's lifecycle or file-system failure (OMA's codes: `CORRUPT_FILE`,
 * `UNSUPPORTED_TRACE_SCHEMA`, `RECOVERY_REQUIRED`, ...); never holds a record.
 */
export class FileTraceStoreError extends Error {
  constructor(code, message, { operation, path: filePath, lineNumber, causeCode } = {}) {
    super(message)
    this.name = 'FileTraceStoreError'
    this.code = code
    if (operation !== undefined) this.operation = operation
    if (filePath !== undefined) this.path = filePath
    if (lineNumber !== undefined) this.lineNumber = lineNumber
    if (causeCode !== undefined) this.causeCode = causeCode
  }
}

const FORMAT = {
  name: FILE_TRACE_STORE_FORMAT,
  schemaKey: 'traceSchemaMajor',
  schemaMajor: 2,
  label: 'FileTraceStore',
  unsupportedSchemaCode: 'UNSUPPORTED_TRACE_SCHEMA',
  schemaWords: 'trace schema',
  makeError: (code, message, details) => new FileTraceStoreError(code, message, details),
}

function replayInto(now) {
  const memory = new InMemoryTraceStore(now ? { now } : {})
  return {
    memory,
    apply(operation, payloads) {
      if (operation === 'append') {
        try {
          memory.appendSync(payloads)
        } catch (error) {
          if (error instanceof TraceStoreError && error.code === 'UNSUPPORTED_SCHEMA_VERSION') throw new SchemaMajorError()
          throw error
        }
        return
      }
      for (const payload of payloads) {
        if (payload === null || typeof payload !== 'object' || typeof payload.runId !== 'string' || payload.runId.length === 0) {
          throw new TypeError('invalid delete payload')
        }
        memory.deleteRunSync(payload.runId)
      }
    },
  }
}

/**
 * A trace store in a file; open it with `FileTraceStore.open(path, options)`. Its methods are
 * InMemoryTraceStore's, each written to the file before it resolves (a write that fails is cut
 * back and rejects, the store as it was), plus `flush` (fsync), `compact` and `close`. A
 * TraceStoreExporter over it is how a batching sink fills it.
 */
export class FileTraceStore {
  #log
  #memory
  #now
  #onDiagnostic

  /** Use `FileTraceStore.open`. */
  constructor(log, replay, now, onDiagnostic) {
    if (!(log instanceof DurableLog)) throw new TypeError('use FileTraceStore.open(path, options) to open a file trace store')
    this.#log = log
    this.#memory = replay.memory
    this.#now = now
    this.#onDiagnostic = onDiagnostic
  }

  /**
   * Opens (or creates, mode 0600, with its directory) the store at `filePath`, replays it and
   * cuts off an incomplete tail; `onDiagnostic` hears of that (file diagnostics) and of
   * records kept out on append (store diagnostics).
   */
  static async open(filePath, options = {}) {
    if (typeof filePath !== 'string' || filePath.length === 0 || filePath.includes('\0')) {
      throw new FileTraceStoreError('INVALID_PATH', 'FileTraceStore path must be a non-empty filesystem path.', { operation: 'open' })
    }
    if (options === null || typeof options !== 'object') throw new TypeError('options must be an object')
    const { now, onDiagnostic } = options
    if (now !== undefined && typeof now !== 'function') throw new TypeError('now must be a function')
    if (onDiagnostic !== undefined && typeof onDiagnostic !== 'function') throw new TypeError('onDiagnostic must be a function')
    const log = new DurableLog(path.resolve(filePath), FORMAT, onDiagnostic)
    const replay = log.open(() => replayInto(now))
    return new FileTraceStore(log, replay, now, onDiagnostic)
  }

  get filePath() {
    return this.#log.path
  }

  get compactionTempPath() {
    return this.#log.tempPath
  }

  /** What opening the file reported, as copies. */
  getDiagnostics() {
    return this.#log.diagnostics.map((d) => ({ ...d }))
  }

  async append(records) {
    let snapshot = records
    if (Array.isArray(records)) {
      try {
        snapshot = JSON.parse(JSON.stringify(records))
      } catch {
        throw new TraceStoreError('INVALID_ARGUMENT', 'records must be JSON-serializable.', 'records')
      }
    }
    return this.#log.run(() => {
      const result = this.#memory.appendSync(snapshot)
      if (snapshot.length > 0) this.#mutate('append', snapshot)
      for (const diagnostic of result.diagnostics) this.#tell(diagnostic)
      return result
    })
  }

  async getRun(runId, options = {}) {
    return this.#log.run(() => this.#memory.getRunSync(runId, options))
  }

  async queryRuns(query = {}) {
    return this.#log.run(() => this.#memory.queryRunsSync(query))
  }

  async deleteRun(runId) {
    return this.#log.run(() => this.#persist(this.#memory.deleteRunSync(runId)))
  }

  async delete(query) {
    return this.#log.run(() => this.#persist(this.#memory.deleteSync(query)))
  }

  async applyRetention(policy) {
    return this.#log.run(() => this.#persist(this.#memory.applyRetentionSync(policy)))
  }

  /** Every record kept, by run in the order runs started (copies). */
  records() {
    this.#log.checkUsable()
    return this.#memory.records()
  }

  /** fsyncs every write that completed before the call. */
  async flush() {
    return this.#log.run(() => this.#log.sync('flush'))
  }

  /**
   * Rewrites the file with only the live records (`{ recordsWritten, fileSizeBytes }`),
   * through a temp file beside it and an atomic rename.
   */
  async compact() {
    return this.#log.run(() => this.#log.compact(this.#memory.records()))
  }

  /** fsyncs and refuses later operations (`CLOSED`); idempotent. */
  close() {
    const next = this.#log.queue.then(() => this.#log.close())
    this.#log.queue = next.catch(() => {})
    return next
  }

  #tell(diagnostic) {
    try {
      this.#onDiagnostic?.({ ...diagnostic })
    } catch {
      // Diagnostics never affect storage.
    }
  }

  #persist(result) {
    if (result.runIds.length > 0) this.#mutate('delete', result.runIds.map((runId) => ({ runId })))
    return result
  }

  #mutate(operation, payloads) {
    this.#log.mutate(operation, payloads, () => replayInto(this.#now), (memory) => { this.#memory = memory })
  }
}
