// OMA's materializeRun (OMA: observability/materialize.ts): one run's trace records, in any
// order, as OMA's stored run: its attempts, spans (a start and an end folded into one), agents,
// models, providers, token and cost totals and metadata.
//
// This is a rule, and rules belong to the component: it stands here, held to the shared table
// fixtures/observability/materialize.json (which the Python package runs too), until the
// component exports it.

const INPUT = ['oma.usage.input_tokens', 'gen_ai.usage.input_tokens']
const OUTPUT = ['oma.usage.output_tokens', 'gen_ai.usage.output_tokens']
const CACHE_READ = ['oma.usage.cache_read_input_tokens', 'gen_ai.usage.cache_read_input_tokens']
const CACHE_CREATE = ['oma.usage.cache_creation_input_tokens']
const REASONING = ['oma.usage.reasoning_output_tokens', 'oma.reasoning.output_tokens']
const MODELS = ['oma.llm.model', 'oma.model', 'gen_ai.request.model', 'gen_ai.response.model']
const PROVIDERS = ['oma.llm.provider', 'oma.provider', 'gen_ai.provider.name', 'gen_ai.system']
const META = 'oma.meta.'
const META_OVERRIDDEN = 'oma.meta._overridden'

const iso = (ms) => new Date(Math.trunc(ms)).toISOString()

function numberOf(attributes, keys) {
  for (const key of keys) {
    const value = attributes[key]
    if (typeof value === 'number' && Number.isFinite(value)) return value
  }
  return 0
}

function stringsOf(attributes, keys) {
  const out = []
  for (const key of keys) {
    const value = attributes[key]
    if (typeof value === 'string') out.push(value)
    else if (Array.isArray(value)) out.push(...value.filter((item) => typeof item === 'string'))
  }
  return out
}

const compareStrings = (a, b) => (a < b ? -1 : a > b ? 1 : 0)

function compareRecords(a, b) {
  return compareStrings(a.traceId, b.traceId) || a.sequence - b.sequence || compareStrings(a.recordId, b.recordId)
}

function compareSpans(a, b) {
  return compareStrings(a.traceId, b.traceId)
    || (a.startUnixMs ?? Number.MAX_SAFE_INTEGER) - (b.startUnixMs ?? Number.MAX_SAFE_INTEGER)
    || compareStrings(a.spanId, b.spanId)
}

const isRoot = (record, type) => record.recordType === type && record.kind === 'run' && !record.parentSpanId
const sorted = (set) => [...set].sort(compareStrings)

/**
 * The run the records describe (null for no records); `includeRecords` adds the records in
 * order (by trace, then sequence). The records given are not changed.
 */
export function materializeRun(recordsIn, options = {}) {
  if (!recordsIn || recordsIn.length === 0) return null
  const includeRecords = typeof options === 'boolean' ? options : Boolean(options?.includeRecords)
  const records = recordsIn.map((record) => ({ ...record })).sort(compareRecords)
  const runId = records[0].runId
  const folded = new Map()
  const agents = new Set()
  const tasks = new Set()
  const models = new Set()
  const providers = new Set()
  const costs = new Map()
  const tokens = { input_tokens: 0, output_tokens: 0, cache_read_input_tokens: 0, cache_creation_input_tokens: 0, reasoning_output_tokens: 0 }
  for (const record of records) {
    const key = `${record.traceId}:${record.spanId}`
    let span = folded.get(key)
    if (!span) folded.set(key, (span = { start: undefined, end: undefined, events: [] }))
    const type = record.recordType
    if (type === 'span_start') span.start ??= record
    else if (type === 'span_end') span.end ??= record
    else span.events.push(record)
    const attributes = record.attributes ?? {}
    for (const value of stringsOf(attributes, ['oma.agent.name'])) agents.add(value)
    for (const value of stringsOf(attributes, ['oma.task.id'])) tasks.add(value)
    for (const value of stringsOf(attributes, MODELS)) models.add(value)
    for (const value of stringsOf(attributes, PROVIDERS)) providers.add(value)
    if (type === 'span_end' && (record.kind === 'llm' || (record.kind === 'routing' && record.name === 'profile_execution_route'))) {
      tokens.input_tokens += numberOf(attributes, INPUT)
      tokens.output_tokens += numberOf(attributes, OUTPUT)
      tokens.cache_read_input_tokens += numberOf(attributes, CACHE_READ)
      tokens.cache_creation_input_tokens += numberOf(attributes, CACHE_CREATE)
      tokens.reasoning_output_tokens += numberOf(attributes, REASONING)
      const amount = numberOf(attributes, ['oma.cost.amount'])
      const [currency] = stringsOf(attributes, ['oma.cost.currency'])
      if (currency && amount !== 0) costs.set(currency, (costs.get(currency) ?? 0) + amount)
    }
    if (type === 'span_end' && record.error !== null && typeof record.error === 'object' && record.error.provider) {
      providers.add(record.error.provider)
    }
  }

  const spans = []
  for (const { start, end, events } of folded.values()) {
    const source = end ?? start
    if (!source) continue
    const span = { traceId: source.traceId, spanId: source.spanId }
    if (source.parentSpanId) span.parentSpanId = source.parentSpanId
    const kind = end?.kind || start?.kind
    const name = end?.name || start?.name
    const started = end && 'startUnixMs' in end ? end.startUnixMs : start?.startUnixMs
    if (kind) span.kind = kind
    if (name) span.name = name
    if (started !== undefined && started !== null) span.startUnixMs = started
    if (end) {
      span.endUnixMs = end.endUnixMs
      span.durationMs = end.durationMs
      span.status = end.status.code
    }
    span.attributes = { ...(start?.attributes ?? {}), ...(end?.attributes ?? {}) }
    span.links = [...((end?.links ?? start?.links) ?? [])]
    span.events = [...events]
    span.incomplete = end === undefined
    spans.push(span)
  }
  spans.sort(compareSpans)

  const byTrace = new Map()
  for (const record of records) {
    if (!byTrace.has(record.traceId)) byTrace.set(record.traceId, [])
    byTrace.get(record.traceId).push(record)
  }
  const attempts = []
  for (const [traceId, group] of byTrace) {
    const rootEnd = group.find((r) => isRoot(r, 'span_end'))
    const rootStart = group.find((r) => isRoot(r, 'span_start'))
    const startedMs = rootEnd ? rootEnd.startUnixMs : rootStart ? rootStart.startUnixMs : Math.min(...group.map((r) => r.timestampUnixMs))
    const attempt = { attempt: Math.min(...group.map((r) => r.attempt)), traceId }
    const rootSpan = (rootEnd ?? rootStart)?.spanId
    if (rootSpan) attempt.rootSpanId = rootSpan
    attempt.startedAt = iso(startedMs)
    if (rootEnd) {
      attempt.endedAt = iso(rootEnd.endUnixMs)
      attempt.durationMs = rootEnd.durationMs
      attempt.status = rootEnd.status.code
    }
    attempt.incomplete = !rootEnd || group.some((r) => r.recordType === 'span_start' && folded.get(`${r.traceId}:${r.spanId}`).end === undefined)
    attempts.push(attempt)
  }
  attempts.sort((a, b) => a.attempt - b.attempt || compareStrings(a.traceId, b.traceId))
  const latest = attempts.at(-1)
  const latestStart = records.find((r) => r.traceId === latest.traceId && isRoot(r, 'span_start'))
  const latestEnd = records.find((r) => r.traceId === latest.traceId && isRoot(r, 'span_end'))
  const rootAttributes = { ...(latestStart?.attributes ?? {}), ...(latestEnd?.attributes ?? {}) }
  const metadata = {}
  for (const [key, value] of Object.entries(rootAttributes)) {
    if (key.startsWith(META) && key !== META_OVERRIDDEN) metadata[key.slice(META.length)] = Array.isArray(value) ? [...value] : value
  }
  const startedAt = Math.min(...attempts.map((a) => Date.parse(a.startedAt)))
  const ended = attempts.filter((a) => 'endedAt' in a).map((a) => Date.parse(a.endedAt))
  const tokenSummary = { input_tokens: tokens.input_tokens, output_tokens: tokens.output_tokens }
  for (const key of ['cache_read_input_tokens', 'cache_creation_input_tokens', 'reasoning_output_tokens']) {
    if (tokens[key]) tokenSummary[key] = tokens[key]
  }
  const run = { schemaVersion: 2, runId, attempts, startedAt: iso(startedAt) }
  if (ended.length > 0) {
    run.endedAt = iso(Math.max(...ended))
    run.durationMs = Math.max(0, Math.max(...ended) - startedAt)
  }
  if (latest.status) run.status = latest.status
  if (Object.keys(metadata).length > 0) run.metadata = metadata
  Object.assign(run, {
    agents: sorted(agents),
    taskIds: sorted(tasks),
    models: sorted(models),
    providers: sorted(providers),
    tokens: tokenSummary,
    costs: [...costs.keys()].sort(compareStrings).map((currency) => ({ currency, amount: costs.get(currency) })),
    incomplete: attempts.some((a) => a.incomplete),
    spans,
  })
  if (includeRecords) run.records = records
  return run
}
