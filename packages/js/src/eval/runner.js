// OMA's `runEvalSet` (OMA: eval/runner.ts): every case of an eval set (times `repeats`) through a
// target, each sample scored by every scorer in turn, `concurrency` samples at a time, each
// sample's records kept in a store when one is given, and a report with per-scorer aggregates.
import { classifyRunFailure } from '../observability/status.js'
import { redactSensitiveText } from '../utils/redaction.js'
import { uuid } from '../utils/random.js'
import { aggregateRecords } from './report.js'
import { checkScoreResult } from './scorer.js'
import { isRecord } from './values.js'

const DEFAULT_REPEATS = 1
const DEFAULT_CONCURRENCY = 2
const TARGET_SCORER_NAME = '_target'
const PAYLOAD_MAX_CHARS = 8 * 1024
const OPTION_KEYS = ['scorers', 'repeats', 'concurrency', 'filterTags', 'metadata', 'traceStore', 'store', 'evalRunId',
  'storePayloads', 'signal', 'onProgress']

/** A scorer that did not answer within its `timeoutMs` (named `TimeoutError`, as OMA names it). */
class ScorerTimeoutError extends Error {
  constructor(scorer, timeoutMs) {
    super(`Scorer "${scorer}" timed out after ${timeoutMs}ms.`)
    this.name = 'TimeoutError'
  }
}

const createId = (prefix) => `${prefix}_${uuid()}`

function positiveInteger(value, name) {
  if (!Number.isInteger(value) || value < 1) throw new RangeError(`${name} must be a positive integer.`)
  return value
}

function emit(options, event) {
  try {
    options.onProgress?.(event)
  } catch {
    // observing never changes an evaluation
  }
}

function stringify(value) {
  if (typeof value === 'string') return value
  try {
    const json = JSON.stringify(value)
    return json === undefined ? String(value) : json
  } catch {
    return String(value)
  }
}

function truncate(text) {
  if (text.length <= PAYLOAD_MAX_CHARS) return text
  const marker = `\n[truncated at ${PAYLOAD_MAX_CHARS} characters]`
  return `${text.slice(0, PAYLOAD_MAX_CHARS - marker.length)}${marker}`
}

function payloadFor(mode, input, output, expected) {
  if (mode === 'none') return undefined
  const text = (value) => {
    const bounded = truncate(stringify(value))
    return mode === 'redacted' ? truncate(redactSensitiveText(bounded)) : bounded
  }
  return {
    ...(input !== undefined ? { input: text(input) } : {}),
    ...(output !== undefined ? { output: text(output) } : {}),
    ...(expected !== undefined ? { expected: text(expected) } : {}),
  }
}

function resultTokens(result) {
  if (result === undefined) return undefined
  return 'totalTokenUsage' in result ? result.totalTokenUsage : result.tokenUsage
}

function resultCosts(result) {
  if (result === undefined) return []
  if (Array.isArray(result.costs)) return result.costs
  return result.cost === undefined ? [] : [result.cost]
}

function runRefOf(identity) {
  if (identity === undefined) return undefined
  return { runId: identity.runId, attempt: identity.attempt, traceId: identity.traceId, rootSpanId: identity.rootSpanId }
}

function scoreWithTimeout(scorer, context) {
  if (scorer.timeoutMs === undefined) return Promise.resolve().then(() => scorer.score(context)).then(checkScoreResult)
  const timeoutMs = Math.max(0, scorer.timeoutMs)
  const controller = new AbortController()
  const abort = () => controller.abort(context.signal.reason)
  if (context.signal.aborted) abort()
  else context.signal.addEventListener('abort', abort, { once: true })
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      const error = new ScorerTimeoutError(scorer.name, timeoutMs)
      controller.abort(error)
      context.signal.removeEventListener('abort', abort)
      reject(error)
    }, timeoutMs)
    Promise.resolve().then(() => scorer.score({ ...context, signal: controller.signal })).then(checkScoreResult).then(
      (value) => { clearTimeout(timer); context.signal.removeEventListener('abort', abort); resolve(value) },
      (error) => { clearTimeout(timer); context.signal.removeEventListener('abort', abort); reject(error) },
    )
  })
}

function baseRecord(evalRunId, set, evalCase, repeat, metadata) {
  return {
    schemaVersion: 1,
    recordId: createId('eval_record'),
    evalRunId,
    source: 'offline',
    timestampUnixMs: Date.now(),
    evalSet: { name: set.name, version: set.version },
    caseId: evalCase.id,
    repeat,
    metadata,
  }
}

async function runSample(set, evalCase, repeat, target, options, evalRunId, signal) {
  emit(options, { type: 'case_start', caseId: evalCase.id, repeat })
  const contextMetadata = Object.freeze({ ...evalCase.metadata, ...options.metadata })
  const mode = options.storePayloads ?? 'none'
  const started = Date.now()
  let targetOutput
  try {
    targetOutput = await target(evalCase.input, { caseId: evalCase.id, repeat, signal, metadata: contextMetadata })
    if (targetOutput === null || typeof targetOutput !== 'object' || !('output' in targetOutput)) {
      throw new TypeError('EvalTarget must return a TargetOutput object with an output field.')
    }
  } catch (error) {
    const payload = payloadFor(mode, evalCase.input, undefined, evalCase.expected)
    const record = {
      ...baseRecord(evalRunId, set, evalCase, repeat, contextMetadata),
      scorer: { name: TARGET_SCORER_NAME },
      status: 'target_error',
      usage: { durationMs: Date.now() - started },
      error: classifyRunFailure(error).errorInfo,
      ...(payload !== undefined ? { payload } : {}),
    }
    emit(options, { type: 'target_error', caseId: evalCase.id, repeat })
    emit(options, { type: 'case_done', caseId: evalCase.id, repeat })
    return { records: [record], costs: [], targetError: true }
  }
  const durationMs = Date.now() - started
  const result = isRecord(targetOutput.result) ? targetOutput.result : undefined
  const tokens = resultTokens(result)
  const costs = resultCosts(result)
  const metadata = Object.freeze({ ...contextMetadata, ...result?.metadata })
  const runRef = runRefOf(result?.identity)
  const payload = payloadFor(mode, evalCase.input, targetOutput.output, evalCase.expected)
  const trace = options.traceStore !== undefined && result?.identity !== undefined
    ? (await options.traceStore.getRun(result.identity.runId)) ?? undefined
    : undefined
  const usage = { ...(tokens !== undefined ? { tokens } : {}), ...(costs.length === 1 ? { cost: costs[0] } : {}), durationMs }
  const records = []
  for (const scorer of options.scorers) {
    const identity = { name: scorer.name, ...(scorer.version !== undefined ? { version: scorer.version } : {}) }
    try {
      const scored = await scoreWithTimeout(scorer, {
        evalCase,
        output: targetOutput.output,
        ...(result !== undefined ? { result } : {}),
        ...(trace !== undefined ? { trace } : {}),
        metadata,
        signal,
      })
      records.push({
        ...baseRecord(evalRunId, set, evalCase, repeat, metadata),
        scorer: identity,
        status: 'scored',
        score: scored.score,
        ...(scored.pass !== undefined ? { pass: scored.pass } : {}),
        ...(scored.reason !== undefined ? { reason: scored.reason } : {}),
        ...(scored.details !== undefined ? { details: scored.details } : {}),
        ...(runRef !== undefined ? { runRef } : {}),
        usage: { ...usage },
        ...(payload !== undefined ? { payload } : {}),
      })
    } catch (error) {
      const timeout = error instanceof ScorerTimeoutError
      records.push({
        ...baseRecord(evalRunId, set, evalCase, repeat, metadata),
        scorer: identity,
        status: 'scorer_error',
        ...(runRef !== undefined ? { runRef } : {}),
        usage: { ...usage },
        error: classifyRunFailure(error, timeout ? { kind: 'timeout', statusCode: 'timeout' } : {}).errorInfo,
        ...(payload !== undefined ? { payload } : {}),
      })
      emit(options, { type: 'scorer_error', caseId: evalCase.id, repeat, scorer: scorer.name })
    }
  }
  emit(options, { type: 'case_done', caseId: evalCase.id, repeat })
  return { records, ...(tokens !== undefined ? { tokens } : {}), costs, targetError: false }
}

function checkOptions(set, target, options) {
  if (!isRecord(set) || !Array.isArray(set.cases)) throw new TypeError('runEvalSet needs an eval set (defineEvalSet)')
  if (typeof target !== 'function') throw new TypeError('runEvalSet needs a target function (input, context) => TargetOutput')
  if (!isRecord(options)) throw new TypeError('runEvalSet needs options with scorers')
  for (const key of Object.keys(options)) {
    if (!OPTION_KEYS.includes(key)) throw new TypeError(`runEvalSet does not support the option "${key}"`)
  }
  if (!Array.isArray(options.scorers)) throw new TypeError('scorers must be an array of scorers')
  options.scorers.forEach((scorer, index) => {
    if (!isRecord(scorer) || typeof scorer.name !== 'string' || scorer.name.trim() === '' || typeof scorer.score !== 'function') {
      throw new TypeError(`scorers[${index}] must have a non-empty name and a score(context) method`)
    }
  })
  if (options.storePayloads !== undefined && !['none', 'redacted', 'full'].includes(options.storePayloads)) {
    throw new TypeError(`storePayloads must be 'none', 'redacted' or 'full', got ${JSON.stringify(options.storePayloads)}`)
  }
  if (options.signal !== undefined && !(options.signal instanceof AbortSignal)) throw new TypeError('signal must be an AbortSignal')
  if (options.evalRunId !== undefined && (typeof options.evalRunId !== 'string' || options.evalRunId.trim().length === 0)) {
    throw new TypeError('evalRunId must be a non-empty string when provided.')
  }
}

/**
 * OMA's `runEvalSet(set, target, options)`: runs every selected case (`filterTags`: any of
 * them) `repeats` times through `target`, `concurrency` samples at a time (the set's defaults,
 * then 1 and 2), scores each sample with every scorer in turn and resolves with the report. A
 * target's failure is a `target_error` record, a scorer's (or its `timeoutMs` passing) a
 * `scorer_error` record, never a score of zero; `store.append` failing is a warning in the
 * report; `signal` stops taking samples (the report says `aborted`); `onProgress` sees
 * `case_start`, `target_error`, `scorer_error` and `case_done`.
 */
export async function runEvalSet(set, target, options) {
  checkOptions(set, target, options)
  const startedAtUnixMs = Date.now()
  const repeats = positiveInteger(options.repeats ?? set.defaults?.repeats ?? DEFAULT_REPEATS, 'repeats')
  const concurrency = positiveInteger(options.concurrency ?? set.defaults?.concurrency ?? DEFAULT_CONCURRENCY, 'concurrency')
  const evalRunId = options.evalRunId ?? createId('eval_run')
  const filter = options.filterTags === undefined || options.filterTags.length === 0 ? undefined : new Set(options.filterTags)
  const cases = set.cases.filter((c) => filter === undefined || c.tags?.some((tag) => filter.has(tag)) === true)
  const jobs = cases.flatMap((evalCase) => Array.from({ length: repeats }, (_, i) => ({ evalCase, repeat: i + 1 })))
  const signal = options.signal ?? new AbortController().signal
  const samples = new Array(jobs.length)
  const storeWarnings = new Array(jobs.length)
  let cursor = 0
  const worker = async () => {
    while (!signal.aborted) {
      const index = cursor++
      const job = jobs[index]
      if (job === undefined) return
      const sample = await runSample(set, job.evalCase, job.repeat, target, options, evalRunId, signal)
      samples[index] = sample
      if (options.store !== undefined) {
        try {
          await options.store.append(sample.records)
        } catch {
          storeWarnings[index] = `Evaluation records for case "${job.evalCase.id}" repeat ${job.repeat} were not persisted.`
        }
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(concurrency, jobs.length) }, () => worker()))
  const completed = samples.filter((s) => s !== undefined)
  const records = completed.flatMap((s) => s.records)
  const usages = completed.flatMap((s) => (s.tokens === undefined ? [] : [s.tokens]))
  const tokens = usages.length === 0 ? undefined : usages.reduce((sum, u) => ({
    input_tokens: sum.input_tokens + u.input_tokens,
    output_tokens: sum.output_tokens + u.output_tokens,
  }), { input_tokens: 0, output_tokens: 0 })
  const amounts = new Map()
  for (const cost of completed.flatMap((s) => s.costs)) amounts.set(cost.currency, (amounts.get(cost.currency) ?? 0) + cost.amount)
  const costs = amounts.size === 0 ? undefined
    : [...amounts.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([currency, amount]) => ({ currency, amount }))
  const warnings = storeWarnings.filter((w) => w !== undefined)
  return {
    schemaVersion: 1,
    evalRunId,
    startedAtUnixMs,
    durationMs: Date.now() - startedAtUnixMs,
    evalSet: { name: set.name, version: set.version },
    metadata: Object.freeze({ ...options.metadata }),
    caseCount: cases.length,
    repeats,
    ...(signal.aborted ? { aborted: true } : {}),
    ...(warnings.length > 0 ? { warnings } : {}),
    records,
    aggregates: aggregateRecords(records, options.scorers, new Map(cases.map((c) => [c.id, c.tags ?? []]))),
    totals: {
      ...(tokens !== undefined ? { tokens } : {}),
      ...(costs !== undefined ? { costs } : {}),
      targetErrors: completed.filter((s) => s.targetError).length,
    },
  }
}
