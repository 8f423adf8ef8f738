// OMA's evaluation store contract and `InMemoryEvalStore` (OMA: eval/store.ts): records checked
// on append (OMA's `EvalStoreError` codes, fields and messages), appended atomically per batch
// and deduplicated by record id, queried newest first (or oldest first) in pages whose cursors
// hold a snapshot of the store, deleted by query or by a retention policy.
import { uuid } from '../utils/random.js'

export const EVAL_STORE_SCHEMA_MAJOR = 1

const STATUSES = ['scored', 'scorer_error', 'target_error', 'skipped']
const SOURCES = ['offline', 'online']
const ERROR_KINDS = ['provider', 'tool', 'framework', 'callback', 'validation', 'timeout', 'cancellation', 'budget',
  'store', 'exporter', 'unknown']
const CURSOR = /^oma-es1\.(.+)\.([a-z0-9]+)$/

/** The file store's synchronous access to an in-memory store (not exported by the subpath). */
export const INTERNALS = Symbol('oma-component.eval-store-internals')

/** A store refusal: `code` (`INVALID_ARGUMENT`, `INVALID_CURSOR`, `UNSUPPORTED_SCHEMA_VERSION`) and the field. */
export class EvalStoreError extends Error {
  constructor(code, message, field) {
    super(message)
    this.name = 'EvalStoreError'
    this.code = code
    this.field = field
  }
}

const invalid = (field, message) => new EvalStoreError('INVALID_ARGUMENT', message, field)
const isObject = (value) => value !== null && typeof value === 'object' && !Array.isArray(value)

function object(value, field) {
  if (!isObject(value)) throw invalid(field, `${field} must be an object.`)
}
function nonEmpty(value, field) {
  if (typeof value !== 'string' || value.length === 0) throw invalid(field, `${field} must be a non-empty string.`)
}
function optionalString(value, field) {
  if (value !== undefined && typeof value !== 'string') throw invalid(field, `${field} must be a string.`)
}
function atLeast(value, field, min = 0) {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min) throw invalid(field, `${field} must be a finite number >= ${min}.`)
}
function integer(value, field, min = 0) {
  atLeast(value, field, min)
  if (!Number.isInteger(value)) throw invalid(field, `${field} must be an integer.`)
}

function attribute(value) {
  if (typeof value === 'string' || typeof value === 'boolean') return true
  if (typeof value === 'number') return Number.isFinite(value)
  if (!Array.isArray(value)) return false
  return new Set(value.map((item) => typeof item)).size <= 1 &&
    value.every((item) => typeof item === 'string' || typeof item === 'boolean' || (typeof item === 'number' && Number.isFinite(item)))
}
function attributes(value, field) {
  object(value, field)
  for (const [key, child] of Object.entries(value)) {
    if (!attribute(child)) throw invalid(`${field}.${key}`, `${field}.${key} is not a supported trace attribute.`)
  }
}

/** Throws the store's error for the first thing wrong with `records[index]`. */
function checkRecord(record, index) {
  const at = `records[${index}]`
  object(record, at)
  if (record.schemaVersion !== EVAL_STORE_SCHEMA_MAJOR) {
    if (typeof record.schemaVersion === 'number') {
      throw new EvalStoreError('UNSUPPORTED_SCHEMA_VERSION',
        `Unsupported EvalRecord schema major ${record.schemaVersion}; supported major is ${EVAL_STORE_SCHEMA_MAJOR}.`, `${at}.schemaVersion`)
    }
    throw invalid(`${at}.schemaVersion`, `${at}.schemaVersion must be ${EVAL_STORE_SCHEMA_MAJOR}.`)
  }
  nonEmpty(record.recordId, `${at}.recordId`)
  nonEmpty(record.evalRunId, `${at}.evalRunId`)
  if (!SOURCES.includes(record.source)) throw invalid(`${at}.source`, `${at}.source is invalid.`)
  integer(record.timestampUnixMs, `${at}.timestampUnixMs`)
  if (record.evalSet !== undefined) {
    object(record.evalSet, `${at}.evalSet`)
    nonEmpty(record.evalSet.name, `${at}.evalSet.name`)
    nonEmpty(record.evalSet.version, `${at}.evalSet.version`)
  }
  optionalString(record.caseId, `${at}.caseId`)
  if (record.repeat !== undefined) integer(record.repeat, `${at}.repeat`, 1)
  object(record.scorer, `${at}.scorer`)
  nonEmpty(record.scorer.name, `${at}.scorer.name`)
  optionalString(record.scorer.version, `${at}.scorer.version`)
  if (!STATUSES.includes(record.status)) throw invalid(`${at}.status`, `${at}.status is invalid.`)
  if (record.score !== undefined) {
    atLeast(record.score, `${at}.score`)
    if (record.score > 1) throw invalid(`${at}.score`, `${at}.score must be <= 1.`)
  }
  if (record.pass !== undefined && typeof record.pass !== 'boolean') throw invalid(`${at}.pass`, `${at}.pass must be a boolean.`)
  optionalString(record.reason, `${at}.reason`)
  if (record.details !== undefined) attributes(record.details, `${at}.details`)
  if (record.runRef !== undefined) {
    object(record.runRef, `${at}.runRef`)
    nonEmpty(record.runRef.runId, `${at}.runRef.runId`)
    integer(record.runRef.attempt, `${at}.runRef.attempt`, 1)
    nonEmpty(record.runRef.traceId, `${at}.runRef.traceId`)
    nonEmpty(record.runRef.rootSpanId, `${at}.runRef.rootSpanId`)
  }
  attributes(record.metadata, `${at}.metadata`)
  if (record.usage !== undefined) {
    const usage = record.usage
    object(usage, `${at}.usage`)
    if (usage.tokens !== undefined) {
      object(usage.tokens, `${at}.usage.tokens`)
      integer(usage.tokens.input_tokens, `${at}.usage.tokens.input_tokens`)
      integer(usage.tokens.output_tokens, `${at}.usage.tokens.output_tokens`)
    }
    if (usage.cost !== undefined) {
      object(usage.cost, `${at}.usage.cost`)
      atLeast(usage.cost.amount, `${at}.usage.cost.amount`)
      nonEmpty(usage.cost.currency, `${at}.usage.cost.currency`)
    }
    if (usage.durationMs !== undefined) atLeast(usage.durationMs, `${at}.usage.durationMs`)
  }
  if (record.error !== undefined) {
    const error = record.error
    object(error, `${at}.error`)
    if (!ERROR_KINDS.includes(error.kind)) throw invalid(`${at}.error.kind`, `${at}.error.kind is invalid.`)
    for (const key of ['code', 'name', 'message', 'provider']) optionalString(error[key], `${at}.error.${key}`)
    if (error.retryable !== undefined && typeof error.retryable !== 'boolean') {
      throw invalid(`${at}.error.retryable`, `${at}.error.retryable must be a boolean.`)
    }
    if (error.httpStatus !== undefined) integer(error.httpStatus, `${at}.error.httpStatus`)
    if (error.attempt !== undefined) integer(error.attempt, `${at}.error.attempt`, 1)
  }
  if (record.payload !== undefined) {
    object(record.payload, `${at}.payload`)
    for (const key of ['input', 'output', 'expected']) optionalString(record.payload[key], `${at}.payload.${key}`)
  }
}

function jsonCopy(value, field) {
  let text
  try {
    text = JSON.stringify(value)
  } catch {
    text = undefined
  }
  if (text === undefined) throw invalid(field, `${field} must be JSON-serializable.`)
  return JSON.parse(text)
}

function names(value, field) {
  if (value === undefined) return undefined
  const list = typeof value === 'string' ? [value] : value
  if (!Array.isArray(list) || list.length === 0 || list.some((item) => typeof item !== 'string' || item.length === 0)) {
    throw invalid(field, `${field} must contain non-empty strings.`)
  }
  return [...new Set(list)].sort()
}
function nameArray(value, field) {
  if (value === undefined) return undefined
  if (!Array.isArray(value)) throw invalid(field, `${field} must be an array of non-empty strings.`)
  return names(value, field)
}
function oneOf(value, field, allowed, what) {
  const list = nameArray(value, field)
  if (list && list.some((item) => !allowed.includes(item))) throw invalid(field, `${field} contains an unsupported ${what}.`)
  return list
}
function date(value, field) {
  if (value === undefined) return undefined
  const ms = typeof value === 'string' && value.length > 0 ? Date.parse(value) : NaN
  if (!Number.isFinite(ms)) throw invalid(field, `${field} must be a valid ISO-8601 timestamp.`)
  return ms
}

const QUERY_KEYS = ['evalRunId', 'runId', 'evalSetName', 'scorer', 'source', 'status', 'after', 'before', 'limit', 'cursor', 'order']

function normalize(query) {
  if (!isObject(query)) throw invalid('query', 'query must be an object.')
  for (const key of Object.keys(query)) {
    if (!QUERY_KEYS.includes(key)) throw invalid(key, `${key} is not a field of an evaluation query.`)
  }
  const limit = query.limit ?? 100
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw invalid('limit', 'limit must be an integer from 1 through 1000.')
  if (query.order !== undefined && query.order !== 'time_asc' && query.order !== 'time_desc') {
    throw invalid('order', 'order must be time_asc or time_desc.')
  }
  const afterMs = date(query.after, 'after')
  const beforeMs = date(query.before, 'before')
  if (afterMs !== undefined && beforeMs !== undefined && afterMs >= beforeMs) throw invalid('after', 'after must be before before.')
  if (query.evalSetName !== undefined) nonEmpty(query.evalSetName, 'evalSetName')
  if (query.source !== undefined && !SOURCES.includes(query.source)) throw invalid('source', 'source must be offline or online.')
  const filter = {
    evalRunIds: names(query.evalRunId, 'evalRunId'),
    runIds: names(query.runId, 'runId'),
    evalSetName: query.evalSetName,
    scorers: nameArray(query.scorer, 'scorer'),
    source: query.source,
    statuses: oneOf(query.status, 'status', STATUSES, 'status'),
    afterMs,
    beforeMs,
    order: query.order ?? 'time_desc',
  }
  return { filter, limit }
}

function matches(record, f) {
  return (!f.evalRunIds || f.evalRunIds.includes(record.evalRunId)) &&
    (!f.runIds || (record.runRef !== undefined && f.runIds.includes(record.runRef.runId))) &&
    (f.evalSetName === undefined || record.evalSet?.name === f.evalSetName) &&
    (!f.scorers || f.scorers.includes(record.scorer.name)) &&
    (f.source === undefined || record.source === f.source) &&
    (!f.statuses || f.statuses.includes(record.status)) &&
    (f.afterMs === undefined || record.timestampUnixMs >= f.afterMs) &&
    (f.beforeMs === undefined || record.timestampUnixMs < f.beforeMs)
}

function byTime(order) {
  return (a, b) => {
    const stable = a.timestampUnixMs - b.timestampUnixMs || a.recordId.localeCompare(b.recordId)
    return order === 'time_asc' ? stable : -stable
  }
}

/** FNV-1a, base 36: the cursor's seal against another store's or an edited cursor. */
function seal(text) {
  let h = 0x811c9dc5
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193)
  return (h >>> 0).toString(36)
}

/** A store in memory, for tests and short local runs (nothing survives the process). */
export class InMemoryEvalStore {
  #entries = []
  #ids = new Set()
  #revision = 0
  #epoch = 0
  #secret = uuid()
  #now
  #maxRecords

  constructor(options = {}) {
    if (!isObject(options)) throw invalid('options', 'options must be an object.')
    for (const key of Object.keys(options)) {
      if (key !== 'maxRecords' && key !== 'now') throw invalid(key, `${key} is not an option of InMemoryEvalStore.`)
    }
    if (options.maxRecords !== undefined) {
      integer(options.maxRecords, 'maxRecords')
      this.#maxRecords = options.maxRecords
    }
    if (options.now !== undefined && typeof options.now !== 'function') throw invalid('now', 'now must be a function.')
    this.#now = options.now ?? Date.now
  }

  /** Appends a batch (all or nothing), skipping record ids already kept: `{written, deduplicated, diagnostics}`. */
  async append(records) {
    return this.#append(records)
  }

  #append(records) {
    if (!Array.isArray(records)) throw invalid('records', 'records must be an array.')
    records.forEach(checkRecord)
    const copies = records.map((record, i) => jsonCopy(record, `records[${i}]`))
    const staged = new Set()
    const writes = []
    let deduplicated = 0
    for (const record of copies) {
      if (this.#ids.has(record.recordId) || staged.has(record.recordId)) {
        deduplicated++
        continue
      }
      staged.add(record.recordId)
      writes.push(record)
    }
    if (this.#maxRecords !== undefined && this.#entries.length + writes.length > this.#maxRecords) {
      throw invalid('records', `append would exceed the InMemoryEvalStore maxRecords capacity of ${this.#maxRecords}.`)
    }
    if (writes.length > 0) this.#revision++
    for (const record of writes) {
      this.#entries.push({ record, revision: this.#revision })
      this.#ids.add(record.recordId)
    }
    return { written: writes.length, deduplicated, diagnostics: [] }
  }

  /** One page of the records the query selects: `{items, nextCursor?}`. */
  async query(query = {}) {
    const { filter, limit } = normalize(query)
    const identity = JSON.stringify(filter)
    let revision = this.#revision
    let after
    if (query.cursor !== undefined) {
      const state = this.#open(query.cursor)
      if (state.query !== identity || state.epoch !== this.#epoch) {
        throw new EvalStoreError('INVALID_CURSOR', 'Cursor does not match this query or is no longer valid.', 'cursor')
      }
      revision = state.revision
      after = state
    }
    const selected = this.#entries.filter((e) => e.revision <= revision).map((e) => e.record)
      .filter((r) => matches(r, filter)).sort(byTime(filter.order))
    let start = 0
    if (after) {
      start = selected.findIndex((r) => r.timestampUnixMs === after.timestampUnixMs && r.recordId === after.recordId) + 1
      if (start === 0) throw new EvalStoreError('INVALID_CURSOR', 'Cursor position is not present in the query snapshot.', 'cursor')
    }
    const items = selected.slice(start, start + limit)
    const last = items.at(-1)
    const nextCursor = start + items.length < selected.length && last !== undefined
      ? this.#close({ revision, epoch: this.#epoch, query: identity, timestampUnixMs: last.timestampUnixMs, recordId: last.recordId })
      : undefined
    return jsonCopy({ items, ...(nextCursor !== undefined ? { nextCursor } : {}) }, 'page')
  }

  /** Deletes the records of the given eval runs, set, or older than `before`. */
  async delete(query) {
    if (!isObject(query)) throw invalid('query', 'query must be an object.')
    for (const key of Object.keys(query)) {
      if (!['evalRunId', 'evalSetName', 'before'].includes(key)) throw invalid(key, `${key} is not a field of an evaluation delete query.`)
    }
    const runs = names(query.evalRunId, 'evalRunId')
    if (query.evalSetName !== undefined) nonEmpty(query.evalSetName, 'evalSetName')
    const beforeMs = date(query.before, 'before')
    return this.#remove(this.#entries.map((e) => e.record).filter((r) => (!runs || runs.includes(r.evalRunId)) &&
      (query.evalSetName === undefined || r.evalSet?.name === query.evalSetName) &&
      (beforeMs === undefined || r.timestampUnixMs < beforeMs)))
  }

  /** Deletes by age (`maxAgeMs`), beyond the newest `maxRecords`, and/or of `sources`. */
  async applyRetention(policy) {
    if (!isObject(policy)) throw invalid('policy', 'policy must be an object.')
    for (const key of Object.keys(policy)) {
      if (!['maxAgeMs', 'maxRecords', 'sources'].includes(key)) throw invalid(key, `${key} is not a field of a retention policy.`)
    }
    if (policy.maxAgeMs === undefined && policy.maxRecords === undefined && policy.sources === undefined) {
      throw invalid('policy', 'Retention policy must set maxAgeMs, maxRecords, or sources.')
    }
    if (policy.maxAgeMs !== undefined) atLeast(policy.maxAgeMs, 'maxAgeMs')
    if (policy.maxRecords !== undefined) integer(policy.maxRecords, 'maxRecords')
    const sources = oneOf(policy.sources, 'sources', SOURCES, 'source')
    const scoped = this.#entries.map((e) => e.record).filter((r) => !sources || sources.includes(r.source))
    const doomed = new Set()
    if (policy.maxAgeMs !== undefined) {
      const cutoff = this.#now() - policy.maxAgeMs
      for (const r of scoped) if (r.timestampUnixMs < cutoff) doomed.add(r)
    }
    if (policy.maxRecords !== undefined) {
      for (const r of [...scoped].sort(byTime('time_desc')).slice(policy.maxRecords)) doomed.add(r)
    } else if (policy.maxAgeMs === undefined) {
      for (const r of scoped) doomed.add(r)
    }
    return this.#remove([...doomed])
  }

  /** The records kept, in the order they were appended (copies). */
  records() {
    return jsonCopy(this.#entries.map((e) => e.record), 'records')
  }

  /** For the file store: synchronous append, deletion by record ids, and the live records. */
  [INTERNALS]() {
    return {
      append: (records) => this.#append(records),
      deleteRecordIds: (ids) => {
        const wanted = new Set(ids)
        return this.#remove(this.#entries.map((e) => e.record).filter((r) => wanted.has(r.recordId)))
      },
      records: () => this.records(),
    }
  }

  #remove(records) {
    if (records.length === 0) return { runsDeleted: 0, recordsDeleted: 0, runIds: [] }
    const gone = new Set(records)
    this.#entries = this.#entries.filter((e) => !gone.has(e.record))
    for (const r of records) this.#ids.delete(r.recordId)
    this.#epoch++
    const runIds = [...new Set([...records].sort(byTime('time_asc')).map((r) => r.evalRunId))]
    return { runsDeleted: runIds.length, recordsDeleted: records.length, runIds }
  }

  #close(state) {
    const body = encodeURIComponent(JSON.stringify(state))
    return `oma-es1.${body}.${seal(`${this.#secret}:${body}`)}`
  }

  #open(cursor) {
    if (typeof cursor !== 'string' || cursor.length === 0) {
      throw new EvalStoreError('INVALID_CURSOR', 'cursor must be an opaque non-empty string.', 'cursor')
    }
    const match = CURSOR.exec(cursor)
    if (!match || seal(`${this.#secret}:${match[1]}`) !== match[2]) {
      throw new EvalStoreError('INVALID_CURSOR', 'Cursor is invalid or has been tampered with.', 'cursor')
    }
    try {
      const state = JSON.parse(decodeURIComponent(match[1]))
      if (!Number.isInteger(state.revision) || !Number.isInteger(state.epoch) || typeof state.query !== 'string' ||
          !Number.isInteger(state.timestampUnixMs) || typeof state.recordId !== 'string') throw new Error('invalid')
      return state
    } catch {
      throw new EvalStoreError('INVALID_CURSOR', 'Cursor payload is invalid.', 'cursor')
    }
  }
}
