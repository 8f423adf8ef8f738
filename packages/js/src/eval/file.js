// `oma-component/eval/file` (OMA: `@open-multi-agent/core/eval/file`): `FileEvalStore`, the
// in-memory evaluation store kept in a durable NDJSON file (format `oma.file_eval_store` 1,
// docs/file-stores.md; the Python package reads and writes the same files), for one process at
// a time. Node-only: it reads and writes files.
import { resolve } from 'node:path'
import { DurableLog, SchemaMajorError } from '../utils/durable-log.js'
import { EvalStoreError, INTERNALS, InMemoryEvalStore } from './store.js'

export const FILE_EVAL_STORE_FORMAT = 'oma.file_eval_store'
export const FILE_EVAL_STORE_FORMAT_VERSION = 1

/**
 * The file store's lifecycle or file-system failure (OMA's codes: `INVALID_PATH`, `OPEN_FAILED`,
 * `READ_FAILED`, `WRITE_FAILED`, `SYNC_FAILED`, `CORRUPT_FILE`, `UNSUPPORTED_FILE_FORMAT`,
 * `UNSUPPORTED_EVAL_SCHEMA`, `RECOVERY_FAILED`, `STALE_COMPACTION_FILE`, `RENAME_FAILED`,
 * `COMPACTION_FAILED`, `CLOSED`, `RECOVERY_REQUIRED`); it never holds a record.
 */
export class FileEvalStoreError extends Error {
  constructor(code, message, details = {}) {
    super(message)
    this.name = 'FileEvalStoreError'
    this.code = code
    for (const key of ['operation', 'path', 'lineNumber', 'causeCode']) {
      if (details[key] !== undefined) this[key] = details[key]
    }
  }
}

const FORMAT = {
  name: FILE_EVAL_STORE_FORMAT,
  schemaKey: 'evalSchemaMajor',
  schemaMajor: 1,
  label: 'FileEvalStore',
  unsupportedSchemaCode: 'UNSUPPORTED_EVAL_SCHEMA',
  schemaWords: 'evaluation schema',
  makeError: (code, message, details) => new FileEvalStoreError(code, message, details),
}

/** A fresh in-memory store that committed batches are replayed into. */
function replay(now) {
  const memory = new InMemoryEvalStore(now !== undefined ? { now } : {})
  const inner = memory[INTERNALS]()
  return {
    memory,
    apply(operation, payloads) {
      if (operation === 'append') {
        try {
          inner.append(payloads)
        } catch (error) {
          if (error instanceof EvalStoreError && error.code === 'UNSUPPORTED_SCHEMA_VERSION') throw new SchemaMajorError()
          throw error
        }
        return
      }
      const ids = payloads.map((payload) => {
        if (payload === null || typeof payload !== 'object' || typeof payload.recordId !== 'string' || payload.recordId === '') {
          throw new TypeError('invalid delete payload')
        }
        return payload.recordId
      })
      inner.deleteRecordIds(ids)
    },
  }
}

/**
 * An evaluation store in a file: open it with `FileEvalStore.open(path, {now?, onDiagnostic?})`.
 * Its methods are `InMemoryEvalStore`'s, each written to the file before it resolves (a write
 * that fails is cut back and rejects, the store as it was), plus `flush()`, `compact()`,
 * `close()` and `getDiagnostics()`.
 */
export class FileEvalStore {
  #log
  #memory
  #now

  constructor(log, memory, now) {
    this.#log = log
    this.#memory = memory
    this.#now = now
  }

  /** Opens (or creates, mode 0600, with its directory) the store at `path` and replays it. */
  static async open(path, options = {}) {
    if (typeof path !== 'string' || path.length === 0 || path.includes('\0')) {
      throw new FileEvalStoreError('INVALID_PATH', 'FileEvalStore path must be a non-empty filesystem path.', { operation: 'open' })
    }
    if (options === null || typeof options !== 'object') throw new TypeError('FileEvalStore.open options must be an object')
    for (const key of Object.keys(options)) {
      if (key !== 'now' && key !== 'onDiagnostic') throw new TypeError(`FileEvalStore.open does not support the option "${key}"`)
    }
    if (options.onDiagnostic !== undefined && typeof options.onDiagnostic !== 'function') throw new TypeError('onDiagnostic must be a function')
    const log = new DurableLog(resolve(path), FORMAT, options.onDiagnostic)
    const opened = log.open(() => replay(options.now))
    return new FileEvalStore(log, opened.memory, options.now)
  }

  get filePath() { return this.#log.path }
  get compactionTempPath() { return this.#log.tempPath }
  get isClosed() { return this.#log.state === 'closed' }

  /** What opening reported (partial lines, incomplete batches, stale temp files), as copies. */
  getDiagnostics() {
    return this.#log.diagnostics.map((d) => ({ ...d }))
  }

  append(records) {
    return this.#log.run(async () => {
      let snapshot = records
      if (Array.isArray(records)) {
        try {
          snapshot = JSON.parse(JSON.stringify(records))
        } catch {
          throw new EvalStoreError('INVALID_ARGUMENT', 'records must be JSON-serializable.', 'records')
        }
      }
      const result = await this.#memory.append(snapshot)
      if (snapshot.length > 0) this.#mutate('append', snapshot)
      return result
    })
  }

  query(query = {}) {
    return this.#log.run(() => this.#memory.query(query))
  }

  delete(query) {
    return this.#log.run(() => this.#deleting(() => this.#memory.delete(query)))
  }

  applyRetention(policy) {
    return this.#log.run(() => this.#deleting(() => this.#memory.applyRetention(policy)))
  }

  /** Every record, in the order they were appended (copies). */
  records() {
    this.#log.checkUsable()
    return this.#memory.records()
  }

  /** Syncs every write that completed before the call to disk. */
  flush() {
    return this.#log.run(() => this.#log.sync('flush'))
  }

  /** Rewrites the file with only the live records: `{recordsWritten, fileSizeBytes}`. */
  compact() {
    return this.#log.run(() => this.#log.compact(this.#memory.records()))
  }

  /** Syncs and refuses later operations (`CLOSED`); idempotent. */
  close() {
    const next = this.#log.queue.then(() => this.#log.close())
    this.#log.queue = next.catch(() => {})
    return next
  }

  async #deleting(remove) {
    const before = this.#memory.records().map((r) => r.recordId)
    const result = await remove()
    const remaining = new Set(this.#memory.records().map((r) => r.recordId))
    const gone = before.filter((id) => !remaining.has(id))
    if (gone.length > 0) this.#mutate('delete', gone.map((recordId) => ({ recordId })))
    return result
  }

  #mutate(operation, payloads) {
    this.#log.mutate(operation, payloads, () => replay(this.#now), (memory) => { this.#memory = memory })
  }
}
