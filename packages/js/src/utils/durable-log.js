// The durable file OMA's file stores write (docs/file-stores.md): an append-only NDJSON log, one
// process and one instance per file. A header line names the format, its version and the schema
// major of what it holds; every change is a batch (`batch_start` with the item count and the
// SHA-256 of the items, one `batch_item` per item, `batch_commit`). Opening replays committed
// batches, reports and cuts off an interrupted tail, and refuses anything else out of place with
// its line. The Python package writes and reads the same files (its `_durable.py`). Node-only:
// reached only through the file stores' subpaths.
import { createHash, randomUUID } from 'node:crypto'
import {
  closeSync, fchmodSync, fsyncSync, ftruncateSync, mkdirSync, openSync, readFileSync, renameSync, statSync, writeSync,
} from 'node:fs'
import { dirname } from 'node:path'

const DIRECTORY_SYNC_UNSUPPORTED = new Set(['EINVAL', 'ENOTSUP', 'EOPNOTSUPP', 'EISDIR', 'EPERM'])

/** The SHA-256 (hex) of each payload's JSON text and a newline. */
export function checksum(payloads) {
  const hash = createHash('sha256')
  for (const payload of payloads) hash.update(`${JSON.stringify(payload)}\n`, 'utf8')
  return hash.digest('hex')
}

/** The lines of one batch, each ending in a newline. */
export function batchText(operation, payloads, batchId = randomUUID()) {
  const sha = checksum(payloads)
  const lines = [JSON.stringify({ type: 'batch_start', formatVersion: 1, batchId, operation, itemCount: payloads.length, payloadSha256: sha })]
  payloads.forEach((payload, index) => lines.push(JSON.stringify({ type: 'batch_item', batchId, index, payload })))
  lines.push(JSON.stringify({ type: 'batch_commit', batchId, itemCount: payloads.length, payloadSha256: sha }))
  return `${lines.join('\n')}\n`
}

/** Thrown by a replay for records of a schema major the store does not take. */
export class SchemaMajorError extends Error {}

const isInt = (value) => Number.isInteger(value)
const nonEmpty = (value) => typeof value === 'string' && value.length > 0
const isObject = (value) => value !== null && typeof value === 'object' && !Array.isArray(value)

/**
 * One store's file. `format` is `{name, schemaKey, schemaMajor, label, unsupportedSchemaCode,
 * schemaWords, makeError(code, message, details)}`; every public method runs after the previous
 * one finished (`run`).
 */
export class DurableLog {
  constructor(path, format, onDiagnostic) {
    this.path = path
    this.tempPath = `${path}.compact.tmp`
    this.format = format
    this.state = 'open'
    this.diagnostics = []
    this.onDiagnostic = onDiagnostic
    this.queue = Promise.resolve()
  }

  header() {
    return { type: 'file_header', format: this.format.name, formatVersion: 1, [this.format.schemaKey]: this.format.schemaMajor }
  }

  error(code, message, operation, cause, lineNumber) {
    return this.format.makeError(code, message, {
      operation, path: this.path, ...(lineNumber !== undefined ? { lineNumber } : {}),
      ...(cause?.code !== undefined ? { causeCode: cause.code } : {}),
    })
  }

  corruption(message, line) {
    return this.error('CORRUPT_FILE', message, 'recover', undefined, line)
  }

  diagnose(code, message, lineNumber) {
    const diagnostic = { code, severity: 'warning', ...(lineNumber !== undefined ? { lineNumber } : {}), message }
    this.diagnostics.push(diagnostic)
    try {
      this.onDiagnostic?.({ ...diagnostic })
    } catch {
      // diagnostics never affect storage
    }
  }

  /** Creates the file when missing, then replays it (cutting off an interrupted tail). */
  open(makeReplay) {
    const tempExists = this.#exists(this.tempPath)
    const exists = this.#exists(this.path)
    if (!exists && tempExists) {
      throw this.error('STALE_COMPACTION_FILE',
        'A compaction temp file exists without the target file; refusing to create an empty store.', 'open')
    }
    if (!exists) this.#create()
    if (tempExists) {
      this.diagnose('stale_compaction_file', 'A stale compaction temp file was found; the committed target file remains authoritative.')
    }
    return this.read(makeReplay, true)
  }

  #exists(path) {
    try {
      statSync(path)
      return true
    } catch (error) {
      if (error.code === 'ENOENT') return false
      throw this.error('OPEN_FAILED', `${this.format.label} could not inspect its filesystem path.`, 'open', error)
    }
  }

  #create() {
    const failed = (error) => this.error('OPEN_FAILED', `${this.format.label} could not create its data file.`, 'open.create', error)
    let fd
    try {
      mkdirSync(dirname(this.path), { recursive: true })
      fd = openSync(this.path, 'wx', 0o600)
    } catch (error) {
      if (error.code === 'EEXIST') return
      throw failed(error)
    }
    try {
      fchmodSync(fd, 0o600)
      writeSync(fd, `${JSON.stringify(this.header())}\n`)
      fsyncSync(fd)
    } catch (error) {
      throw failed(error)
    } finally {
      closeSync(fd)
    }
    this.syncDirectory('open.create')
  }

  /** Replays the committed batches into a fresh `makeReplay()` (`{apply(operation, payloads)}`). */
  read(makeReplay, repair) {
    const label = this.format.label
    let raw
    try {
      raw = readFileSync(this.path)
    } catch (error) {
      throw this.error('READ_FAILED', `${label} could not read its data file.`, 'recover.read', error)
    }
    const target = makeReplay()
    let offset = 0
    let lineNumber = 0
    let committed = 0
    let header = false
    let pending
    while (offset < raw.length) {
      const newline = raw.indexOf(0x0a, offset)
      if (newline < 0) {
        this.diagnose('trailing_partial_line', 'A trailing partial NDJSON line was ignored and will be truncated.', lineNumber + 1)
        break
      }
      lineNumber++
      const following = newline + 1
      if (newline === offset) throw this.error('CORRUPT_FILE', `${label} encountered an empty complete NDJSON line.`, 'recover', undefined, lineNumber)
      const value = this.#object(raw.subarray(offset, newline), lineNumber)
      if (!header) {
        this.#header(value, lineNumber)
        header = true
        committed = offset = following
        continue
      }
      if (value.type === 'batch_start') {
        if (pending !== undefined) throw this.corruption('A new batch began before the prior batch committed.', lineNumber)
        if (value.formatVersion !== 1 || !nonEmpty(value.batchId) || (value.operation !== 'append' && value.operation !== 'delete') ||
            !isInt(value.itemCount) || value.itemCount < 0 || !nonEmpty(value.payloadSha256)) {
          throw this.corruption('A batch_start envelope is malformed.', lineNumber)
        }
        pending = { start: value, payloads: [], line: lineNumber }
      } else if (value.type === 'batch_item') {
        if (pending === undefined) throw this.corruption('A batch item appeared without a batch start.', lineNumber)
        if (!nonEmpty(value.batchId) || !isInt(value.index) || value.index < 0 || !('payload' in value)) {
          throw this.corruption('A batch_item envelope is malformed.', lineNumber)
        }
        if (value.batchId !== pending.start.batchId || value.index !== pending.payloads.length) {
          throw this.corruption('A batch item has a mismatched id or non-contiguous index.', lineNumber)
        }
        if (pending.payloads.length >= pending.start.itemCount) throw this.corruption('A batch contains more items than declared.', lineNumber)
        pending.payloads.push(value.payload)
      } else if (value.type === 'batch_commit') {
        if (pending === undefined) throw this.corruption('A batch commit appeared without a batch start.', lineNumber)
        if (!nonEmpty(value.batchId) || !isInt(value.itemCount) || value.itemCount < 0 || !nonEmpty(value.payloadSha256)) {
          throw this.corruption('A batch_commit envelope is malformed.', lineNumber)
        }
        const { start } = pending
        if (value.batchId !== start.batchId || value.itemCount !== start.itemCount || pending.payloads.length !== start.itemCount ||
            value.payloadSha256 !== start.payloadSha256 || checksum(pending.payloads) !== start.payloadSha256) {
          throw this.corruption('A committed batch failed its id, count, or checksum validation.', lineNumber)
        }
        this.#apply(target, start.operation, pending.payloads, lineNumber)
        pending = undefined
        committed = following
      } else {
        throw this.corruption(`${label} encountered an unknown envelope line type.`, lineNumber)
      }
      offset = following
    }
    if (!header) throw this.error('CORRUPT_FILE', `${label} has no complete version header.`, 'recover')
    if (pending !== undefined) this.diagnose('incomplete_batch', 'An uncommitted trailing batch was ignored and will be truncated.', pending.line)
    if ((offset < raw.length || pending !== undefined) && repair) {
      try {
        this.#truncate(committed)
      } catch (error) {
        throw this.error('RECOVERY_FAILED', `${label} could not truncate an incomplete tail during recovery.`, 'recover.truncate', error)
      }
    }
    return target
  }

  #object(bytes, line) {
    let value
    try {
      value = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes))
    } catch {
      value = undefined
    }
    if (!isObject(value)) throw this.error('CORRUPT_FILE', `${this.format.label} encountered an invalid complete NDJSON line.`, 'recover', undefined, line)
    return value
  }

  #header(value, line) {
    const f = this.format
    if (value.type !== 'file_header' || value.format !== f.name) throw this.corruption(`${f.label} header format is invalid.`, line)
    if (value.formatVersion !== 1) {
      throw this.error('UNSUPPORTED_FILE_FORMAT', `${f.label} file format version is unsupported.`, 'recover.header', undefined, line)
    }
    if (value[f.schemaKey] !== f.schemaMajor) {
      throw this.error(f.unsupportedSchemaCode, `${f.label} ${f.schemaWords} major is unsupported.`, 'recover.header', undefined, line)
    }
  }

  #apply(target, operation, payloads, line) {
    try {
      target.apply(operation, payloads)
    } catch (error) {
      if (error instanceof SchemaMajorError) {
        throw this.error(this.format.unsupportedSchemaCode, `A committed batch contains an unsupported ${this.format.schemaWords} major.`,
          'recover.batch', undefined, line)
      }
      throw this.error('CORRUPT_FILE', 'A committed batch contains invalid data.', 'recover.batch', undefined, line)
    }
  }

  checkUsable() {
    const label = this.format.label
    if (this.state === 'failed') throw this.error('RECOVERY_REQUIRED', `${label} requires reopen/recovery before further operations.`, 'operation')
    if (this.state !== 'open') throw this.error('CLOSED', `${label} is closing or closed.`, 'operation')
  }

  /** Appends one batch; a failed write is cut back (or the log fails for good). */
  write(operation, payloads) {
    const label = this.format.label
    let start
    try {
      start = statSync(this.path).size
    } catch (error) {
      throw this.error('WRITE_FAILED', `${label} could not inspect its data file before writing.`, 'append.stat', error)
    }
    let fd
    try {
      fd = openSync(this.path, 'a')
      writeSync(fd, batchText(operation, payloads))
    } catch (error) {
      const failure = this.error('WRITE_FAILED', `${label} append did not complete; the mutation was not acknowledged.`, 'append.write', error)
      try {
        this.#truncate(start)
      } catch (rollback) {
        this.state = 'failed'
        throw this.error('RECOVERY_REQUIRED', `${label} could not roll back a failed append; reopen is required.`, 'append.rollback', rollback)
      }
      throw failure
    } finally {
      if (fd !== undefined) closeSync(fd)
    }
  }

  /**
   * Appends one batch for a store whose memory already holds the change. When the write fails,
   * `restore` gets the memory replayed from the file (what was acknowledged) and the failure is
   * rethrown; a file that cannot be replayed fails the log for good.
   */
  mutate(operation, payloads, makeReplay, restore) {
    try {
      this.write(operation, payloads)
    } catch (error) {
      if (this.state !== 'failed') {
        let memory
        try {
          memory = this.read(makeReplay, false).memory
        } catch {
          this.state = 'failed'
          throw this.error('RECOVERY_REQUIRED', `${this.format.label} could not rebuild state after a failed mutation.`, 'rollback')
        }
        restore(memory)
      }
      throw error
    }
  }

  #truncate(length) {
    const fd = openSync(this.path, 'r+')
    try {
      ftruncateSync(fd, length)
      fsyncSync(fd)
    } finally {
      closeSync(fd)
    }
  }

  sync(operation) {
    try {
      const fd = openSync(this.path, 'r')
      try {
        fsyncSync(fd)
      } finally {
        closeSync(fd)
      }
    } catch (error) {
      throw this.error('SYNC_FAILED', `${this.format.label} could not fsync its data file.`, operation, error)
    }
  }

  syncDirectory(operation) {
    try {
      const fd = openSync(dirname(this.path), 'r')
      try {
        fsyncSync(fd)
      } finally {
        closeSync(fd)
      }
    } catch (error) {
      if (DIRECTORY_SYNC_UNSUPPORTED.has(error.code)) {
        this.diagnose('directory_sync_unsupported', 'The platform/filesystem does not support directory fsync; rename durability is best-effort.')
        return
      }
      throw this.error('SYNC_FAILED', `${this.format.label} could not fsync the parent directory after an atomic rename.`, operation, error)
    }
  }

  /** Rewrites the file as one append batch of `payloads`, through the temp file and a rename. */
  compact(payloads) {
    const label = this.format.label
    let body = `${JSON.stringify(this.header())}\n`
    if (payloads.length > 0) body += batchText('append', payloads, `compact-${checksum(payloads).slice(0, 24)}`)
    let renamed = false
    try {
      const fd = openSync(this.tempPath, 'w', 0o600)
      try {
        fchmodSync(fd, 0o600)
        writeSync(fd, body)
        fsyncSync(fd)
      } finally {
        closeSync(fd)
      }
      try {
        renameSync(this.tempPath, this.path)
        renamed = true
      } catch (error) {
        throw this.error('RENAME_FAILED', `${label} compaction could not atomically replace the target; the original remains authoritative.`,
          'compact.rename', error)
      }
      this.syncDirectory('compact')
      return { recordsWritten: payloads.length, fileSizeBytes: statSync(this.path).size }
    } catch (error) {
      if (error?.code === 'RENAME_FAILED' || error?.code === 'SYNC_FAILED') throw error
      throw this.error('COMPACTION_FAILED', renamed
        ? `${label} replaced the compacted file but could not confirm the final durability step.`
        : `${label} compaction failed before replacing the committed target file.`, 'compact', error)
    }
  }

  /** Syncs and refuses later operations (idempotent). */
  close() {
    if (this.state === 'closed') return
    if (this.state === 'failed') {
      this.state = 'closed'
      throw this.error('RECOVERY_REQUIRED', `${this.format.label} cannot close cleanly after an unrecoverable write failure.`, 'close')
    }
    this.state = 'closing'
    try {
      this.sync('close')
    } finally {
      this.state = 'closed'
    }
  }

  /** Runs `operation` after every earlier one, once the log is usable. */
  run(operation) {
    const next = this.queue.then(() => {
      this.checkUsable()
      return operation()
    })
    this.queue = next.catch(() => {})
    return next
  }
}
