// OMA's InMemoryTraceStore (OMA: observability/in-memory-store.ts): the reference trace store,
// for tests and short-lived local runs. Records are checked with OMA's messages, kept once per
// recordId (a second end of one span is kept out and reported), read back by run as OMA
// materializes them, listed in pages with opaque cursors, deleted by run, query or retention.

import { materializeRun } from './materialize.js'
import { TRACE_STORE_SCHEMA_MAJOR, TraceStoreError } from './store.js'

const STATUS_CODES = ['ok', 'error', 'cancelled', 'timeout', 'budget_exhausted', 'rejected', 'suspended', 'skipped']
const SPAN_KINDS = ['run', 'routing', 'agent', 'task', 'llm', 'tool', 'plan', 'consensus', 'checkpoint', 'callback']
const EVENT_NAMES = ['retry_scheduled', 'budget_exhausted', 'first_chunk', 'approval_decision', 'checkpoint_failed',
  'telemetry_diagnostic', 'loop_detected', 'stream_chunk', 'consensus_verdict']
const LINK_RELATIONS = ['continued_from', 'depends_on', 'consumed', 'delegated_from']

const fail = (field, message, code = 'INVALID_ARGUMENT') => new TraceStoreError(code, message, field)
const isObject = (value) => value !== null && typeof value === 'object' && !Array.isArray(value)

function nonEmpty(value, field) {
  if (typeof value !== 'string' || value.length === 0) throw fail(field, `${field} must be a non-empty string.`)
}

function finite(value, field, least = 0) {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < least) throw fail(field, `${field} must be a finite number >= ${least}.`)
}

function integer(value, field) {
  if (!Number.isInteger(value)) throw fail(field, `${field} must be an integer.`)
}

function isAttribute(value) {
  const scalar = (item) => typeof item === 'string' || typeof item === 'boolean' || (typeof item === 'number' && Number.isFinite(item))
  if (scalar(value)) return true
  if (!Array.isArray(value) || !value.every(scalar)) return false
  return new Set(value.map((item) => typeof item)).size <= 1
}

/** Throws a TraceStoreError (OMA's message) when `record` is not a trace record of schema 2. */
export function checkRecord(record, index) {
  const prefix = `records[${index}]`
  if (!isObject(record)) throw fail(prefix, `${prefix} must be an object.`)
  const version = record.schemaVersion
  if (version !== TRACE_STORE_SCHEMA_MAJOR) {
    if (typeof version === 'number') {
      throw fail(`${prefix}.schemaVersion`, `Unsupported TraceRecord schema major ${version}; supported major is ${TRACE_STORE_SCHEMA_MAJOR}.`, 'UNSUPPORTED_SCHEMA_VERSION')
    }
    throw fail(`${prefix}.schemaVersion`, `${prefix}.schemaVersion must be ${TRACE_STORE_SCHEMA_MAJOR}.`)
  }
  nonEmpty(record.recordId, `${prefix}.recordId`)
  finite(record.sequence, `${prefix}.sequence`, 1)
  integer(record.sequence, `${prefix}.sequence`)
  finite(record.timestampUnixMs, `${prefix}.timestampUnixMs`)
  nonEmpty(record.runId, `${prefix}.runId`)
  finite(record.attempt, `${prefix}.attempt`, 1)
  integer(record.attempt, `${prefix}.attempt`)
  nonEmpty(record.traceId, `${prefix}.traceId`)
  nonEmpty(record.spanId, `${prefix}.spanId`)
  if (record.parentSpanId !== undefined && record.parentSpanId !== null) nonEmpty(record.parentSpanId, `${prefix}.parentSpanId`)
  const type = record.recordType
  if (!['span_start', 'span_event', 'span_end'].includes(type)) throw fail(`${prefix}.recordType`, `${prefix}.recordType is invalid.`)
  if (!isObject(record.attributes)) throw fail(`${prefix}.attributes`, `${prefix}.attributes must be an object.`)
  for (const [key, value] of Object.entries(record.attributes)) {
    if (!isAttribute(value)) throw fail(`${prefix}.attributes.${key}`, `${prefix}.attributes.${key} is not a supported trace attribute.`)
  }
  if (type === 'span_start' || type === 'span_end') {
    nonEmpty(record.kind, `${prefix}.kind`)
    if (!SPAN_KINDS.includes(record.kind)) throw fail(`${prefix}.kind`, `${prefix}.kind is invalid.`)
    nonEmpty(record.name, `${prefix}.name`)
    finite(record.startUnixMs, `${prefix}.startUnixMs`)
  }
  if (type === 'span_event') {
    nonEmpty(record.name, `${prefix}.name`)
    if (!EVENT_NAMES.includes(record.name)) throw fail(`${prefix}.name`, `${prefix}.name is not a supported event name.`)
  }
  if (record.links !== undefined && record.links !== null) {
    if (!Array.isArray(record.links)) throw fail(`${prefix}.links`, `${prefix}.links must be an array.`)
    record.links.forEach((link, i) => {
      const field = `${prefix}.links[${i}]`
      if (!isObject(link)) throw fail(field, `${field} must be an object.`)
      nonEmpty(link.traceId, `${field}.traceId`)
      nonEmpty(link.spanId, `${field}.spanId`)
      if (!LINK_RELATIONS.includes(link.relation)) throw fail(`${field}.relation`, `${field}.relation is invalid.`)
    })
  }
  if (type === 'span_end') {
    finite(record.endUnixMs, `${prefix}.endUnixMs`)
    finite(record.durationMs, `${prefix}.durationMs`)
    if (!isObject(record.status) || !STATUS_CODES.includes(record.status.code)) throw fail(`${prefix}.status.code`, `${prefix}.status.code is invalid.`)
    if (record.status.message !== undefined && record.status.message !== null && typeof record.status.message !== 'string') {
      throw fail(`${prefix}.status.message`, `${prefix}.status.message must be a string.`)
    }
  }
}

function stringList(value, field) {
  if (value === undefined || value === null) return undefined
  const values = typeof value === 'string' ? [value] : value
  if (!Array.isArray(values) || values.length === 0 || values.some((v) => typeof v !== 'string' || v.length === 0)) {
    throw fail(field, `${field} must contain non-empty strings.`)
  }
  return [...new Set(values)].sort()
}

function statusList(value, field) {
  const values = stringList(value, field)
  if (values && values.some((v) => !STATUS_CODES.includes(v))) throw fail(field, `${field} contains an unsupported status.`)
  return values
}

function timeOf(value, field) {
  if (value === undefined || value === null) return undefined
  const parsed = typeof value === 'string' && value.length > 0 ? Date.parse(value) : NaN
  if (!Number.isFinite(parsed)) throw fail(field, `${field} must be a valid ISO-8601 timestamp.`)
  return parsed
}

const QUERY_KEYS = ['runId', 'startedAfter', 'startedBefore', 'status', 'agent', 'taskId', 'model', 'provider', 'limit', 'cursor', 'order']

function normalizeQuery(query) {
  if (!isObject(query)) throw fail('query', 'query must be an object.')
  for (const key of Object.keys(query)) {
    if (!QUERY_KEYS.includes(key)) throw fail(key, `query has no key ${key}.`)
  }
  const limit = query.limit ?? 50
  if (!Number.isInteger(limit) || limit < 1 || limit > 500) throw fail('limit', 'limit must be an integer from 1 through 500.')
  if (query.order !== undefined && query.order !== 'started_asc' && query.order !== 'started_desc') {
    throw fail('order', 'order must be started_asc or started_desc.')
  }
  const after = timeOf(query.startedAfter, 'startedAfter')
  const before = timeOf(query.startedBefore, 'startedBefore')
  if (after !== undefined && before !== undefined && after >= before) throw fail('startedAfter', 'startedAfter must be before startedBefore.')
  return {
    limit,
    order: query.order ?? 'started_desc',
    after,
    before,
    runIds: stringList(query.runId, 'runId'),
    status: statusList(query.status, 'status'),
    agent: stringList(query.agent, 'agent'),
    taskId: stringList(query.taskId, 'taskId'),
    model: stringList(query.model, 'model'),
    provider: stringList(query.provider, 'provider'),
  }
}

function identity(q) {
  return JSON.stringify([q.runIds ?? null, q.after ?? null, q.before ?? null, q.status ?? null, q.agent ?? null,
    q.taskId ?? null, q.model ?? null, q.provider ?? null, q.order])
}

function matches(summary, q) {
  const started = Date.parse(summary.startedAt)
  const anyOf = (actual, wanted) => wanted === undefined || wanted.some((w) => actual.includes(w))
  return (q.runIds === undefined || q.runIds.includes(summary.runId))
    && (q.after === undefined || started >= q.after)
    && (q.before === undefined || started < q.before)
    && (q.status === undefined || q.status.includes(summary.status))
    && anyOf(summary.agents, q.agent) && anyOf(summary.taskIds, q.taskId)
    && anyOf(summary.models, q.model) && anyOf(summary.providers, q.provider)
}

function compareRuns(a, b) {
  const diff = Date.parse(a.startedAt) - Date.parse(b.startedAt)
  return diff || (a.runId < b.runId ? -1 : a.runId > b.runId ? 1 : 0)
}

/** FNV-1a over UTF-16 units, in base 36: a cursor's check against tampering by accident. */
function hash(text) {
  let value = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    value ^= text.charCodeAt(i)
    value = Math.imul(value, 0x01000193)
  }
  return (value >>> 0).toString(36)
}

const copy = (value) => JSON.parse(JSON.stringify(value))

/**
 * OMA's non-durable trace store. `now` (milliseconds since the epoch) is the clock retention
 * reads; `onDiagnostic` hears of records kept out (a recordId seen with another payload, a
 * second end of one span). The TraceStore methods are async, as OMA's; each has a synchronous
 * twin (`appendSync`, `getRunSync`, ...), which the file store replays and writes in step with.
 */
export class InMemoryTraceStore {
  #now
  #onDiagnostic
  #entries = []
  #seen = new Map()
  #firstEnd = new Map()
  #revision = 0
  #arrival = 0
  #deleteEpoch = 0
  #secret = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`

  constructor(options = {}) {
    if (!isObject(options)) throw new TypeError('options must be an object')
    if (options.now !== undefined && typeof options.now !== 'function') throw new TypeError('now must be a function')
    if (options.onDiagnostic !== undefined && typeof options.onDiagnostic !== 'function') throw new TypeError('onDiagnostic must be a function')
    this.#now = options.now ?? Date.now
    this.#onDiagnostic = options.onDiagnostic
  }

  /** Keeps `records` (all or none, each once). */
  async append(records) {
    return this.appendSync(records)
  }

  /** The run materialized (with its records in order when asked), or null. */
  async getRun(runId, options = {}) {
    return this.getRunSync(runId, options)
  }

  /**
   * One page of run summaries (`nextCursor` when more follow; a cursor reads the store as it
   * was at the first page and fails once runs were deleted).
   */
  async queryRuns(query = {}) {
    return this.queryRunsSync(query)
  }

  async deleteRun(runId) {
    return this.deleteRunSync(runId)
  }

  /** Deletes the runs a query matches (no limit, cursor or order), oldest first. */
  async delete(query) {
    return this.deleteSync(query)
  }

  /**
   * Deletes runs that started more than `maxAgeMs` ago and all but the newest `maxRuns`; with
   * `statuses`, only among runs that ended with one of them (alone: all of those).
   */
  async applyRetention(policy) {
    return this.applyRetentionSync(policy)
  }

  // The same, synchronously: for the file store, which replays and writes in step with them.

  appendSync(records) {
    if (!Array.isArray(records)) throw fail('records', 'records must be an array.')
    records.forEach(checkRecord)
    const copies = records.map((record, i) => {
      try {
        return copy(record)
      } catch {
        throw fail(`records[${i}]`, `records[${i}] must be JSON-serializable.`)
      }
    })
    const diagnostics = []
    const seen = new Map(this.#seen)
    const ends = new Map(this.#firstEnd)
    const writes = []
    let deduplicated = 0
    for (const record of copies) {
      const fingerprint = JSON.stringify(record)
      const where = { runId: record.runId, traceId: record.traceId, spanId: record.spanId }
      const existing = seen.get(record.recordId)
      if (existing) {
        deduplicated++
        if (existing.fingerprint !== fingerprint) {
          diagnostics.push({ code: 'record_id_collision', ...where, message: 'A recordId already existed with a different payload; the first record was retained.' })
        }
        continue
      }
      if (record.recordType === 'span_end') {
        const span = `${record.traceId}:${record.spanId}`
        if (ends.has(span)) {
          deduplicated++
          diagnostics.push({ code: 'duplicate_span_end', ...where, message: 'A duplicate span_end was ignored; the first accepted end remains authoritative.' })
          seen.set(record.recordId, { runId: record.runId, fingerprint })
          continue
        }
        ends.set(span, record.recordId)
      }
      writes.push(record)
      seen.set(record.recordId, { runId: record.runId, fingerprint })
    }
    if (writes.length > 0) {
      this.#revision++
      for (const record of writes) this.#entries.push({ record, revision: this.#revision, arrival: ++this.#arrival })
    }
    this.#seen = seen
    this.#firstEnd = ends
    for (const diagnostic of diagnostics) {
      try {
        this.#onDiagnostic?.({ ...diagnostic })
      } catch {
        // Diagnostics are fail-open.
      }
    }
    return copy({ written: writes.length, deduplicated, diagnostics })
  }

  getRunSync(runId, options = {}) {
    nonEmpty(runId, 'runId')
    const run = materializeRun(this.#entries.filter((e) => e.record.runId === runId).map((e) => e.record), Boolean(options?.includeRecords))
    return run === null ? null : copy(run)
  }

  queryRunsSync(query = {}) {
    const q = normalizeQuery(query)
    const id = identity(q)
    let snapshot = this.#revision
    let after
    if (query.cursor !== undefined) {
      const state = this.#decode(query.cursor)
      if (state.query !== id || state.deleteEpoch !== this.#deleteEpoch) {
        throw fail('cursor', 'Cursor does not match this query or is no longer valid.', 'INVALID_CURSOR')
      }
      snapshot = state.snapshotRevision
      after = state
    }
    const summaries = this.#summaries(snapshot).filter((s) => matches(s, q)).sort(compareRuns)
    if (q.order === 'started_desc') summaries.reverse()
    let start = 0
    if (after) {
      start = summaries.findIndex((s) => s.startedAt === after.startedAt && s.runId === after.runId) + 1
      if (start === 0) throw fail('cursor', 'Cursor position is not present in the query snapshot.', 'INVALID_CURSOR')
    }
    const items = summaries.slice(start, start + q.limit)
    const page = { items }
    if (start + items.length < summaries.length && items.length > 0) {
      const last = items.at(-1)
      page.nextCursor = this.#encode({ snapshotRevision: snapshot, deleteEpoch: this.#deleteEpoch, query: id, startedAt: last.startedAt, runId: last.runId })
    }
    return copy(page)
  }

  deleteRunSync(runId) {
    nonEmpty(runId, 'runId')
    return this.#deleteRuns([runId])
  }

  deleteSync(query) {
    if (isObject(query) && ('cursor' in query || 'limit' in query || 'order' in query)) {
      throw fail('query', 'delete does not accept cursor, limit, or order.')
    }
    const q = normalizeQuery({ ...(query ?? {}), limit: 500 })
    return this.#deleteRuns(this.#summaries(this.#revision).filter((s) => matches(s, q)).sort(compareRuns).map((s) => s.runId))
  }

  applyRetentionSync(policy) {
    if (!isObject(policy)) throw fail('policy', 'policy must be an object.')
    const { maxAgeMs, maxRuns } = policy
    if (maxAgeMs === undefined && maxRuns === undefined && policy.statuses === undefined) {
      throw fail('policy', 'Retention policy must set maxAgeMs, maxRuns, or statuses.')
    }
    if (maxAgeMs !== undefined) finite(maxAgeMs, 'maxAgeMs')
    if (maxRuns !== undefined && (!Number.isInteger(maxRuns) || maxRuns < 0)) throw fail('maxRuns', 'maxRuns must be a non-negative integer.')
    const statuses = statusList(policy.statuses, 'statuses')
    const summaries = this.#summaries(this.#revision)
    const scoped = summaries.filter((s) => !statuses || (s.status !== undefined && statuses.includes(s.status)))
    const doomed = new Set()
    if (maxAgeMs !== undefined) {
      const cutoff = this.#now() - maxAgeMs
      for (const s of scoped) if (Date.parse(s.startedAt) < cutoff) doomed.add(s.runId)
    }
    if (maxRuns !== undefined) {
      for (const s of [...scoped].sort(compareRuns).reverse().slice(maxRuns)) doomed.add(s.runId)
    } else if (maxAgeMs === undefined && statuses) {
      for (const s of scoped) doomed.add(s.runId)
    }
    return this.#deleteRuns(summaries.filter((s) => doomed.has(s.runId)).sort(compareRuns).map((s) => s.runId))
  }

  /** Every record kept, by run in the order runs started, each run's in order (copies). */
  records() {
    const out = []
    for (const summary of this.#summaries(this.#revision).sort(compareRuns)) {
      const run = materializeRun(this.#entries.filter((e) => e.record.runId === summary.runId).map((e) => e.record), true)
      if (run) out.push(...run.records)
    }
    return copy(out)
  }

  #summaries(snapshot) {
    const byRun = new Map()
    for (const { record, revision } of this.#entries) {
      if (revision > snapshot) continue
      if (!byRun.has(record.runId)) byRun.set(record.runId, [])
      byRun.get(record.runId).push(record)
    }
    const out = []
    for (const group of byRun.values()) {
      const run = materializeRun(group)
      if (run) {
        const { spans: _spans, records: _records, ...summary } = run
        out.push(summary)
      }
    }
    return out
  }

  #deleteRuns(runIds) {
    const wanted = new Set(runIds)
    const present = new Set(this.#entries.filter((e) => wanted.has(e.record.runId)).map((e) => e.record.runId))
    const deleted = [...new Set(runIds)].filter((id) => present.has(id))
    if (deleted.length === 0) return { runsDeleted: 0, recordsDeleted: 0, runIds: [] }
    const before = this.#entries.length
    this.#entries = this.#entries.filter((e) => !wanted.has(e.record.runId))
    for (const [recordId, { runId }] of this.#seen) if (wanted.has(runId)) this.#seen.delete(recordId)
    this.#firstEnd = new Map()
    for (const { record } of [...this.#entries].sort((a, b) => a.arrival - b.arrival)) {
      if (record.recordType === 'span_end') this.#firstEnd.set(`${record.traceId}:${record.spanId}`, record.recordId)
    }
    this.#deleteEpoch++
    return { runsDeleted: deleted.length, recordsDeleted: before - this.#entries.length, runIds: deleted }
  }

  #encode(state) {
    const body = encodeURIComponent(JSON.stringify(state))
    return `oma-ts1.${body}.${hash(`${this.#secret}:${body}`)}`
  }

  #decode(cursor) {
    if (typeof cursor !== 'string' || cursor.length === 0) throw fail('cursor', 'cursor must be an opaque non-empty string.', 'INVALID_CURSOR')
    const match = /^oma-ts1\.(.+)\.([a-z0-9]+)$/.exec(cursor)
    if (!match || hash(`${this.#secret}:${match[1]}`) !== match[2]) {
      throw fail('cursor', 'Cursor is invalid or has been tampered with.', 'INVALID_CURSOR')
    }
    try {
      const state = JSON.parse(decodeURIComponent(match[1]))
      if (!isObject(state) || !['snapshotRevision', 'deleteEpoch', 'query', 'startedAt', 'runId'].every((k) => k in state)) throw new Error('incomplete')
      return state
    } catch {
      throw fail('cursor', 'Cursor payload is invalid.', 'INVALID_CURSOR')
    }
  }
}
