// The durable file OMA's file stores write (OMA: observability/file-store.ts): an append-only
// NDJSON log, one process and one instance per file. Node only (node:fs): only
// `oma-component/observability/file` imports it, so a browser bundle never reaches it.
//
// The first line is a header naming the format, its version and the schema major of what it
// holds. Every mutation (an append of records, a deletion by id) is a batch of lines: a
// `batch_start` with the item count and the SHA-256 of the items (each item's JSON text and a
// newline), one `batch_item` per item, a `batch_commit` repeating count and checksum. On opening,
// committed batches are replayed; an incomplete final batch or a partial last line is reported
// and cut off, so an interrupted write is replayed whole or not at all; anything else that does
// not parse is corruption, refused with the line it is on. A failed write is cut back to where it
// began; compaction rewrites the live items through a temporary file and an atomic rename. The
// file is created with mode 0600. The same files the Python package reads and writes.
//
// The file is read and written with node:fs's synchronous calls: each operation is whole
// before the next begins, in call order, as one instance per file needs.

import { createHash, randomUUID } from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'

/** Directory fsync errors meaning "not supported here". */
const DIRECTORY_SYNC_UNSUPPORTED = new Set(['EINVAL', 'ENOTSUP', 'EOPNOTSUPP', 'EISDIR', 'EPERM'])

/** The SHA-256 (hex) of each payload's JSON text and a newline. */
export function checksum(payloads) {
  const digest = createHash('sha256')
  for (const payload of payloads) digest.update(`${JSON.stringify(payload)}\n`, 'utf8')
  return digest.digest('hex')
}

/** The lines of one batch, each ending in a newline. */
export function batchText(operation, payloads, batchId = randomUUID()) {
  const sha = checksum(payloads)
  const lines = [JSON.stringify({ type: 'batch_start', formatVersion: 1, batchId, operation, itemCount: payloads.length, payloadSha256: sha })]
  payloads.forEach((payload, index) => lines.push(JSON.stringify({ type: 'batch_item', batchId, index, payload })))
  lines.push(JSON.stringify({ type: 'batch_commit', batchId, itemCount: payloads.length, payloadSha256: sha }))
  return `${lines.join('\n')}\n`
}

/** Raised by a replay for records of a schema major the store does not take. */
export class SchemaMajorError extends Error {}

const isInt = (value) => Number.isInteger(value)
const nonEmpty = (value) => typeof value === 'string' && value.length > 0

/**
 * The file of one store. `format`: { name, schemaKey, schemaMajor, label, ErrorClass,
 * unsupportedSchemaCode, schemaWords }.
 */
export class DurableLog {
  constructor(filePath, format, onDiagnostic) {
    this.path = filePath
    this.tempPath = `${filePath}.compact.tmp`
    this.format = format
    this.state = 'open'
    this.diagnostics = []
    this.onDiagnostic = onDiagnostic
  }

  header() {
    return { type: 'file_header', format: this.format.name, formatVersion: 1, [this.format.schemaKey]: this.format.schemaMajor }
  }

  error(code, message, operation, cause, lineNumber) {
    return new this.format.ErrorClass(code, message, { operation, path: this.path, lineNumber, causeCode: typeof cause?.code === 'string' ? cause.code : undefined })
  }

  corruption(message, line) {
    return this.error('CORRUPT_FILE', message, 'recover', undefined, line)
  }

  diagnose(code, message, lineNumber) {
    const diagnostic = lineNumber === undefined ? { code, severity: 'warning', message } : { code, severity: 'warning', lineNumber, message }
    this.diagnostics.push(diagnostic)
    try {
      this.onDiagnostic?.({ ...diagnostic })
    } catch {
      // Diagnostics never affect storage.
    }
  }

  /** Creates the file when missing, then reads it back (cutting off an incomplete tail). */
  open(makeReplay) {
    const tempExists = this.#exists(this.tempPath)
    const targetExists = this.#exists(this.path)
    if (!targetExists && tempExists) {
      throw this.error('STALE_COMPACTION_FILE', 'A compaction temp file exists without the target file; refusing to create an empty store.', 'open')
    }
    if (!targetExists) this.#create()
    if (tempExists) this.diagnose('stale_compaction_file', 'A stale compaction temp file was found; the committed target file remains authoritative.')
    const replay = this.read(makeReplay, true)
    if (process.platform === 'win32') {
      this.diagnose('minimal_permissions_not_enforced', 'This platform does not enforce POSIX mode 0600; protect the file with platform access controls.')
    }
    return replay
  }

  #exists(target) {
    try {
      fs.statSync(target)
      return true
    } catch (error) {
      if (error?.code === 'ENOENT') return false
      throw this.error('OPEN_FAILED', `${this.format.label} could not inspect its filesystem path.`, 'open', error)
    }
  }

  #create() {
    const label = this.format.label
    let fd
    try {
      fs.mkdirSync(path.dirname(this.path), { recursive: true })
      fd = fs.openSync(this.path, 'wx', 0o600)
    } catch (error) {
      if (error?.code === 'EEXIST') return
      throw this.error('OPEN_FAILED', `${label} could not create its data file.`, 'open.create', error)
    }
    try {
      fs.fchmodSync(fd, 0o600)
      fs.writeSync(fd, `${JSON.stringify(this.header())}\n`)
      fs.fsyncSync(fd)
    } catch (error) {
      throw this.error('OPEN_FAILED', `${label} could not create its data file.`, 'open.create', error)
    } finally {
      fs.closeSync(fd)
    }
    this.syncDirectory('open.create')
  }

  /** Replays the committed batches of the file into a fresh `makeReplay()` ({ apply(operation, payloads) }). */
  read(makeReplay, repair) {
    const label = this.format.label
    let raw
    try {
      raw = fs.readFileSync(this.path)
    } catch (error) {
      throw this.error('READ_FAILED', `${label} could not read its data file.`, 'recover.read', error)
    }
    const target = makeReplay()
    let offset = 0
    let lineNumber = 0
    let committed = 0
    let header
    let pending
    const decoder = new TextDecoder('utf-8', { fatal: true })
    while (offset < raw.length) {
      const newline = raw.indexOf(0x0a, offset)
      if (newline < 0) {
        this.diagnose('trailing_partial_line', 'A trailing partial NDJSON line was ignored and will be truncated.', lineNumber + 1)
        break
      }
      lineNumber++
      const line = raw.subarray(offset, newline)
      const following = newline + 1
      if (line.length === 0) throw this.error('CORRUPT_FILE', `${label} encountered an empty complete NDJSON line.`, 'recover', undefined, lineNumber)
      let value
      try {
        value = JSON.parse(decoder.decode(line))
      } catch {
        value = undefined
      }
      if (value === null || typeof value !== 'object' || Array.isArray(value)) {
        throw this.error('CORRUPT_FILE', `${label} encountered an invalid complete NDJSON line.`, 'recover', undefined, lineNumber)
      }
      if (header === undefined) {
        header = this.#checkHeader(value, lineNumber)
        committed = offset = following
        continue
      }
      if (value.type === 'batch_start') {
        if (pending) throw this.corruption('A new batch began before the prior batch committed.', lineNumber)
        if (value.formatVersion !== 1 || !nonEmpty(value.batchId) || !['append', 'delete'].includes(value.operation)
          || !isInt(value.itemCount) || value.itemCount < 0 || !nonEmpty(value.payloadSha256)) {
          throw this.corruption('A batch_start envelope is malformed.', lineNumber)
        }
        pending = { start: value, payloads: [], line: lineNumber }
      } else if (value.type === 'batch_item') {
        if (!pending) throw this.corruption('A batch item appeared without a batch start.', lineNumber)
        if (!nonEmpty(value.batchId) || !isInt(value.index) || value.index < 0 || !('payload' in value)) {
          throw this.corruption('A batch_item envelope is malformed.', lineNumber)
        }
        if (value.batchId !== pending.start.batchId || value.index !== pending.payloads.length) {
          throw this.corruption('A batch item has a mismatched id or non-contiguous index.', lineNumber)
        }
        if (pending.payloads.length >= pending.start.itemCount) throw this.corruption('A batch contains more items than declared.', lineNumber)
        pending.payloads.push(value.payload)
      } else if (value.type === 'batch_commit') {
        if (!pending) throw this.corruption('A batch commit appeared without a batch start.', lineNumber)
        if (!nonEmpty(value.batchId) || !isInt(value.itemCount) || value.itemCount < 0 || !nonEmpty(value.payloadSha256)) {
          throw this.corruption('A batch_commit envelope is malformed.', lineNumber)
        }
        const { start } = pending
        if (value.batchId !== start.batchId || value.itemCount !== start.itemCount || pending.payloads.length !== start.itemCount
          || value.payloadSha256 !== start.payloadSha256 || checksum(pending.payloads) !== start.payloadSha256) {
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
    if (header === undefined) throw this.error('CORRUPT_FILE', `${label} has no complete version header.`, 'recover')
    const partial = offset < raw.length
    if (pending) this.diagnose('incomplete_batch', 'An uncommitted trailing batch was ignored and will be truncated.', pending.line)
    if ((partial || pending) && repair) {
      try {
        this.#truncate(committed)
      } catch (error) {
        throw this.error('RECOVERY_FAILED', `${label} could not truncate an incomplete tail during recovery.`, 'recover.truncate', error)
      }
    }
    return target
  }

  #checkHeader(value, line) {
    const { format } = this
    if (value.type !== 'file_header' || value.format !== format.name) throw this.corruption(`${format.label} header format is invalid.`, line)
    if (value.formatVersion !== 1) {
      throw this.error('UNSUPPORTED_FILE_FORMAT', `${format.label} file format version is unsupported.`, 'recover.header', undefined, line)
    }
    if (value[format.schemaKey] !== format.schemaMajor) {
      throw this.error(format.unsupportedSchemaCode, `${format.label} ${format.schemaWords} major is unsupported.`, 'recover.header', undefined, line)
    }
    return this.header()
  }

  #apply(target, operation, payloads, line) {
    try {
      target.apply(operation, payloads)
    } catch (error) {
      if (error instanceof SchemaMajorError) {
        throw this.error(this.format.unsupportedSchemaCode, `A committed batch contains an unsupported ${this.format.schemaWords} major.`, 'recover.batch', undefined, line)
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
      start = fs.statSync(this.path).size
    } catch (error) {
      throw this.error('WRITE_FAILED', `${label} could not inspect its data file before writing.`, 'append.stat', error)
    }
    try {
      fs.appendFileSync(this.path, batchText(operation, payloads), 'utf8')
    } catch (error) {
      const failure = this.error('WRITE_FAILED', `${label} append did not complete; the mutation was not acknowledged.`, 'append.write', error)
      try {
        this.#truncate(start)
      } catch (rollback) {
        this.state = 'failed'
        throw this.error('RECOVERY_REQUIRED', `${label} could not roll back a failed append; reopen is required.`, 'append.rollback', rollback)
      }
      throw failure
    }
  }

  #truncate(length) {
    const fd = fs.openSync(this.path, 'r+')
    try {
      fs.ftruncateSync(fd, length)
      fs.fsyncSync(fd)
    } finally {
      fs.closeSync(fd)
    }
  }

  /** fsyncs the file. */
  sync(operation) {
    try {
      const fd = fs.openSync(this.path, 'r')
      try {
        fs.fsyncSync(fd)
      } finally {
        fs.closeSync(fd)
      }
    } catch (error) {
      throw this.error('SYNC_FAILED', `${this.format.label} could not fsync its data file.`, operation, error)
    }
  }

  syncDirectory(operation) {
    try {
      const fd = fs.openSync(path.dirname(this.path), 'r')
      try {
        fs.fsyncSync(fd)
      } finally {
        fs.closeSync(fd)
      }
    } catch (error) {
      if (DIRECTORY_SYNC_UNSUPPORTED.has(error?.code)) {
        this.diagnose('directory_sync_unsupported', 'The platform/filesystem does not support directory fsync; rename durability is best-effort.')
        return
      }
      throw this.error('SYNC_FAILED', `${this.format.label} could not fsync the parent directory after an atomic rename.`, operation, error)
    }
  }

  /** Rewrites the file as one append batch of `payloads` (through the temp file). */
  compact(payloads) {
    const label = this.format.label
    let body = `${JSON.stringify(this.header())}\n`
    if (payloads.length > 0) body += batchText('append', payloads, `compact-${checksum(payloads).slice(0, 24)}`)
    let renamed = false
    try {
      const fd = fs.openSync(this.tempPath, 'w', 0o600)
      try {
        fs.fchmodSync(fd, 0o600)
        fs.writeSync(fd, body)
        fs.fsyncSync(fd)
      } finally {
        fs.closeSync(fd)
      }
      try {
        fs.renameSync(this.tempPath, this.path)
        renamed = true
      } catch (error) {
        throw this.error('RENAME_FAILED', `${label} compaction could not atomically replace the target; the original remains authoritative.`, 'compact.rename', error)
      }
      this.syncDirectory('compact')
      return { recordsWritten: payloads.length, fileSizeBytes: fs.statSync(this.path).size }
    } catch (error) {
      if (error instanceof this.format.ErrorClass) throw error
      const message = renamed
        ? `${label} replaced the compacted file but could not confirm the final durability step.`
        : `${label} compaction failed before replacing the committed target file.`
      throw this.error('COMPACTION_FAILED', message, 'compact', error)
    }
  }

  /** fsyncs and refuses later operations (idempotent). */
  close() {
    const label = this.format.label
    if (this.state === 'closed') return
    if (this.state === 'failed') {
      this.state = 'closed'
      throw this.error('RECOVERY_REQUIRED', `${label} cannot close cleanly after an unrecoverable write failure.`, 'close')
    }
    this.state = 'closing'
    try {
      this.sync('close')
    } finally {
      this.state = 'closed'
    }
  }

  /** `operation()` after checking the log is usable. */
  run(operation) {
    this.checkUsable()
    return operation()
  }
}
