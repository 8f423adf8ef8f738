// OMA's online evaluation (OMA: eval/online.ts): `evaluation` on `OpenMultiAgent` scores a
// sample of its settled top-level runs after they return, in the background, with a bounded
// queue, a concurrency limit, a rate budget and an optional cost budget. It never fails or
// holds a run: what a scorer throws is a `scorer_error` record, a full queue or an exhausted
// budget drops the sample, a store that fails drops the records, and each of these is reported
// as a diagnostic (at most one per kind a minute). `forceFlush` and `shutdown` wait for what was
// queued (docs/evaluation.md#online-evaluation).
import { unrefTimer } from '../observability/sink.js'
import { classifyRunFailure } from '../observability/status.js'
import { Watermark } from '../observability/watermark.js'
import { uuid } from '../utils/random.js'
import { onlineStep, toJson } from './rules.js'
import { checkScoreResult, scoreCostInputs } from './scorer.js'

const DEFAULT_MAX_CONCURRENT = 1
const DEFAULT_MAX_QUEUE_LENGTH = 100
const DEFAULT_FLUSH_TIMEOUT_MS = 30_000
const DIAGNOSTIC_INTERVAL_MS = 60_000
const CONFIG_KEYS = ['scorers', 'sample', 'maxConcurrent', 'maxQueueLength', 'budget', 'store', 'storePayloads', 'onResult',
  'onDiagnostic', 'diagnostics']
const BUDGET_KEYS = ['maxEvaluationsPerMinute', 'maxCostPerHour']

/** A scorer that did not answer within its `timeoutMs` (named `TimeoutError`, as OMA names it). */
class ScorerTimeoutError extends Error {
  constructor(scorer, timeoutMs) {
    super(`Scorer "${scorer}" timed out after ${timeoutMs}ms.`)
    this.name = 'TimeoutError'
  }
}

function positiveInteger(value, fallback, name) {
  if (value === undefined) return fallback
  if (!Number.isInteger(value) || value < 1) throw new RangeError(`${name} must be a positive integer.`)
  return value
}

function positiveFinite(value, name) {
  if (value === undefined) return undefined
  if (!Number.isFinite(value) || value <= 0) throw new RangeError(`${name} must be a positive finite number.`)
  return value
}

/**
 * A value as the rules take it: a string as it is, else its JSON value; what JSON cannot hold
 * (a function, a cycle, a BigInt) as its text.
 */
function jsonValue(value) {
  if (typeof value === 'string') return value
  try {
    const text = toJson(value)
    return text === undefined ? String(value) : JSON.parse(text)
  } catch {
    return String(value)
  }
}

/** A run's answer: an agent's output, a consensus answer, else a team's coordinator or agents. */
function resultOutput(result) {
  if ('output' in result) return result.output
  if ('answer' in result) return result.answer
  const results = result.agentResults instanceof Map ? result.agentResults : new Map(Object.entries(result.agentResults ?? {}))
  const coordinator = results.get('coordinator')?.output
  if (coordinator !== undefined) return coordinator
  return [...results.values()].map((r) => r.output).filter(Boolean).join('\n\n---\n\n')
}

const resultTokens = (result) => ('totalTokenUsage' in result ? result.totalTokenUsage : result.tokenUsage)

function scoreWithTimeout(scorer, context) {
  if (scorer.timeoutMs === undefined) return Promise.resolve().then(() => scorer.score(context)).then(checkScoreResult)
  const timeoutMs = Math.max(0, scorer.timeoutMs)
  const controller = new AbortController()
  return new Promise((resolve, reject) => {
    const timer = unrefTimer(() => {
      const error = new ScorerTimeoutError(scorer.name, timeoutMs)
      controller.abort(error)
      reject(error)
    }, timeoutMs)
    Promise.resolve().then(() => scorer.score({ ...context, signal: controller.signal })).then(checkScoreResult).then(
      (value) => { clearTimeout(timer); resolve(value) },
      (error) => { clearTimeout(timer); reject(error) },
    )
  })
}

const EMPTY_STATS = Object.freeze({ sampled: 0, enqueued: 0, completed: 0, dropped: 0, failed: 0, storeFailed: 0 })
const EMPTY_FLUSH = Object.freeze({ status: 'ok', accepted: 0, exported: 0, dropped: 0, failed: 0 })

/** The lifecycle of an orchestrator without online evaluation: nothing to flush, no counts. */
export const NOOP_ONLINE_EVALUATION = Object.freeze({
  async forceFlush() { return EMPTY_FLUSH },
  async shutdown() { return EMPTY_FLUSH },
  getStats() { return EMPTY_STATS },
})

/** One orchestrator's online evaluator: bounded, best effort, never in a run's way. */
export class OnlineEvaluator {
  #scorers
  #sample
  #maxConcurrent
  #maxQueueLength
  #maxEvaluationsPerMinute
  #maxCostPerHour
  #store
  #storePayloads
  #onResult
  #onDiagnostic
  #diagnostics
  #now
  #random
  #estimateCost
  #queue = []
  #reservations = []
  #costs = []
  #diagnosticCounts = new Map()
  #diagnosticEmitted = new Map()
  #stats = { sampled: 0, enqueued: 0, completed: 0, dropped: 0, failed: 0, storeFailed: 0 }
  #evalRunId = `online_eval_${uuid()}`
  #nextId = 0
  #settled = new Watermark()
  #active = 0
  #scheduled
  #closing = false
  #shutdown

  /** `config` is OMA's `OnlineEvaluationConfig`; `runtime` holds `estimateCost` (and, for tests, `now`, `random`). */
  constructor(config, runtime = {}) {
    if (config === null || typeof config !== 'object') throw new TypeError('OnlineEvaluationConfig must be an object')
    for (const key of Object.keys(config)) {
      if (!CONFIG_KEYS.includes(key)) throw new TypeError(`OnlineEvaluationConfig does not support the option "${key}"`)
    }
    if (config.budget !== undefined) {
      if (config.budget === null || typeof config.budget !== 'object') throw new TypeError('OnlineEvaluationConfig.budget must be an object')
      for (const key of Object.keys(config.budget)) {
        if (!BUDGET_KEYS.includes(key)) throw new TypeError(`OnlineEvaluationConfig.budget does not support the option "${key}"`)
      }
    }
    if (!Array.isArray(config.scorers) || config.scorers.length === 0) {
      throw new TypeError('OnlineEvaluationConfig.scorers must contain at least one scorer.')
    }
    if (typeof config.sample !== 'function' && (typeof config.sample !== 'number' || !Number.isFinite(config.sample) || config.sample < 0 || config.sample > 1)) {
      throw new RangeError('OnlineEvaluationConfig.sample must be a number in [0, 1] or a function.')
    }
    if (config.storePayloads !== undefined && !['none', 'redacted', 'full'].includes(config.storePayloads)) {
      throw new TypeError('OnlineEvaluationConfig.storePayloads must be none, redacted, or full.')
    }
    this.#scorers = Object.freeze([...config.scorers])
    this.#sample = config.sample
    this.#maxConcurrent = positiveInteger(config.maxConcurrent, DEFAULT_MAX_CONCURRENT, 'maxConcurrent')
    this.#maxQueueLength = positiveInteger(config.maxQueueLength, DEFAULT_MAX_QUEUE_LENGTH, 'maxQueueLength')
    const perMinute = config.budget?.maxEvaluationsPerMinute
    this.#maxEvaluationsPerMinute = perMinute === undefined ? undefined : positiveInteger(perMinute, perMinute, 'budget.maxEvaluationsPerMinute')
    this.#maxCostPerHour = positiveFinite(config.budget?.maxCostPerHour, 'budget.maxCostPerHour')
    this.#store = config.store
    this.#storePayloads = config.storePayloads ?? 'none'
    this.#onResult = config.onResult
    this.#onDiagnostic = config.onDiagnostic
    this.#diagnostics = config.diagnostics ?? 'warn'
    this.#now = runtime.now ?? Date.now
    this.#random = runtime.random ?? Math.random
    this.#estimateCost = runtime.estimateCost
    if (this.#maxCostPerHour !== undefined && this.#estimateCost === undefined) {
      this.#report('budget_exhausted', 'Cost budget is inactive because no estimateCost function was configured.')
    }
  }

  /** Decides, budgets and queues one settled top-level run (`{input, result, durationMs}`); true when queued. */
  enqueue(sample) {
    if (this.#closing) {
      this.#stats.dropped++
      this.#report('enqueue_after_shutdown', 'Online evaluation rejected after shutdown began.')
      return false
    }
    const identity = sample.result.identity
    if (identity === undefined) {
      this.#stats.failed++
      this.#report('scorer_failed', 'Online evaluation skipped a run without runtime identity.', 'error')
      return false
    }
    const context = Object.freeze({
      identity,
      status: sample.result.status ?? { code: 'error', message: 'Run settled without a normalized status.' },
      metadata: Object.freeze({ ...sample.result.metadata }),
      durationMs: Math.max(0, sample.durationMs),
    })
    if (!this.#shouldSample(context)) return false
    this.#stats.sampled++
    if (this.#queue.length >= this.#maxQueueLength) {
      this.#stats.dropped++
      this.#report('queue_full', 'Online evaluation sample dropped because the bounded queue is full.')
      return false
    }
    const now = this.#now()
    this.#prune(now)
    if (this.#costExhausted()) {
      this.#stats.dropped++
      this.#report('budget_exhausted', 'Online evaluation cost budget is exhausted.')
      return false
    }
    if (!this.#reserve(this.#nextId + 1, this.#scorers.length, now)) {
      this.#stats.dropped++
      this.#report('budget_exhausted', 'Online evaluation rate budget is exhausted.')
      return false
    }
    this.#stats.enqueued++
    this.#queue.push({ id: ++this.#nextId, sample, context })
    this.#schedule()
    return true
  }

  /** Waits (up to `timeoutMs`, 30 s unless set) for every sample queued so far. */
  async forceFlush(options = {}) {
    const target = this.#nextId
    if (target <= this.#settled.through) return this.#flushResult(false)
    this.#clearSchedule()
    this.#startWorkers()
    const done = await this.#settled.waitFor(target, options.timeoutMs ?? DEFAULT_FLUSH_TIMEOUT_MS)
    if (!done) {
      this.#report('flush_timeout', 'Online evaluation flush timed out before queued samples settled.')
      return this.#flushResult(true)
    }
    return this.#flushResult(false)
  }

  /** Takes no more samples and flushes; the same promise on every call. */
  shutdown(options = {}) {
    if (this.#shutdown) return this.#shutdown
    this.#closing = true
    this.#clearSchedule()
    this.#shutdown = this.forceFlush(options)
    return this.#shutdown
  }

  getStats() {
    return { ...this.#stats }
  }

  #shouldSample(context) {
    if (typeof this.#sample === 'number') return this.#random() < this.#sample
    try {
      return this.#sample(context) === true
    } catch {
      this.#report('scorer_failed', 'Online sampling rule failed; the run was not sampled.', 'error')
      return false
    }
  }

  #schedule() {
    if (this.#scheduled !== undefined || this.#active > 0) return
    this.#scheduled = unrefTimer(() => {
      this.#scheduled = undefined
      this.#startWorkers()
    }, 0)
  }

  #clearSchedule() {
    if (this.#scheduled !== undefined) clearTimeout(this.#scheduled)
    this.#scheduled = undefined
  }

  #startWorkers() {
    while (this.#active < this.#maxConcurrent) {
      const entry = this.#queue.shift()
      if (entry === undefined) break
      this.#active++
      this.#process(entry).catch(() => {
        this.#stats.failed++
        this.#report('scorer_failed', 'Online evaluation worker failed unexpectedly.', 'error')
      }).finally(() => {
        this.#active--
        this.#settled.settle(entry.id)
        this.#startWorkers()
      })
    }
  }

  async #process(entry) {
    this.#prune(this.#now())
    if (this.#costExhausted()) {
      this.#release(entry.id)
      this.#stats.dropped++
      this.#report('budget_exhausted', 'Online evaluation cost budget is exhausted.')
      return
    }
    const { sample, context } = entry
    const output = resultOutput(sample.result)
    // What scorers see of the input and what the records keep: the core's rules.
    const seen = onlineStep('case', {
      storePayloads: this.#storePayloads,
      ...(sample.input !== undefined ? { input: jsonValue(sample.input) } : {}),
      ...(output !== undefined ? { output: jsonValue(output) } : {}),
    })
    const evalCase = Object.freeze({ id: context.identity.runId, input: seen.input, metadata: context.metadata })
    const payload = seen.payload
    const signal = new AbortController().signal
    const usage = () => ({ tokens: resultTokens(sample.result), durationMs: context.durationMs })
    const records = []
    for (const scorer of this.#scorers) {
      try {
        const scored = await scoreWithTimeout(scorer, { evalCase, output, result: sample.result, metadata: context.metadata, signal })
        this.#stats.completed++
        this.#recordCost(scored)
        records.push(this.#record(context, scorer, usage(), payload, { score: scored }))
      } catch (error) {
        this.#stats.failed++
        this.#recordCost(error)
        const timeout = error instanceof ScorerTimeoutError
        const errorInfo = classifyRunFailure(error, timeout ? { kind: 'timeout', statusCode: 'timeout' } : {}).errorInfo
        records.push(this.#record(context, scorer, usage(), payload, { error: errorInfo }))
        this.#report('scorer_failed', 'Online evaluation scorer failed; a scorer_error record was produced.', 'error', scorer.name)
      }
    }
    if (this.#store !== undefined) {
      try {
        await this.#store.append(records)
      } catch {
        this.#stats.storeFailed += records.length
        this.#report('store_append_failed', 'Online evaluation records were discarded because EvalStore append failed.', 'error')
        return
      }
    }
    for (const record of records) {
      try {
        this.#onResult?.(record)
      } catch {
        this.#stats.failed++
      }
    }
  }

  /** One scorer's record (the core's rule: reason and string details redacted and bounded). */
  #record(context, scorer, usage, payload, outcome) {
    const { runId, attempt, traceId, rootSpanId } = context.identity
    const record = onlineStep('record', {
      evalRunId: this.#evalRunId,
      recordId: `eval_record_${uuid()}`,
      timestampUnixMs: this.#now(),
      scorer: { name: scorer.name, ...(scorer.version !== undefined ? { version: scorer.version } : {}) },
      identity: { runId, attempt, traceId, rootSpanId },
      metadata: context.metadata,
      usage,
      ...(payload !== undefined ? { payload } : {}),
      ...outcome,
    })
    if (record.details !== undefined) Object.freeze(record.details)
    return record
  }

  /** Adds what a scorer's judges cost (by `estimateCost`) to the hour's cost budget. */
  #recordCost(scored) {
    if (this.#maxCostPerHour === undefined || this.#estimateCost === undefined) return
    let amount = 0
    try {
      for (const input of scoreCostInputs(scored)) {
        const estimated = this.#estimateCost(input.usage, input.context)
        if (!Number.isFinite(estimated) || estimated < 0) throw new Error('estimateCost returned an invalid amount.')
        amount += estimated
      }
    } catch {
      this.#stats.failed++
      this.#report('budget_exhausted', 'Online evaluation cost could not be estimated; the cost budget remains best-effort.')
      return
    }
    if (amount > 0) this.#costs.push({ at: this.#now(), amount })
  }

  #prune(now) {
    while (this.#reservations[0] && this.#reservations[0].at <= now - 60_000) this.#reservations.shift()
    while (this.#costs[0] && this.#costs[0].at <= now - 3_600_000) this.#costs.shift()
  }

  #reserve(entryId, count, now) {
    if (this.#maxEvaluationsPerMinute === undefined) return true
    const used = this.#reservations.reduce((sum, r) => sum + r.count, 0)
    if (used + count > this.#maxEvaluationsPerMinute) return false
    this.#reservations.push({ entryId, at: now, count })
    return true
  }

  #release(entryId) {
    const index = this.#reservations.findIndex((r) => r.entryId === entryId)
    if (index >= 0) this.#reservations.splice(index, 1)
  }

  #costExhausted() {
    if (this.#maxCostPerHour === undefined || this.#estimateCost === undefined) return false
    return this.#costs.reduce((sum, c) => sum + c.amount, 0) >= this.#maxCostPerHour
  }

  /** One diagnostic per kind a minute, counting the ones held back; never thrown. */
  #report(code, message, severity = 'warning', scorerName) {
    const count = (this.#diagnosticCounts.get(code) ?? 0) + 1
    this.#diagnosticCounts.set(code, count)
    const now = this.#now()
    if (now - (this.#diagnosticEmitted.get(code) ?? -Infinity) < DIAGNOSTIC_INTERVAL_MS) return
    this.#diagnosticCounts.set(code, 0)
    this.#diagnosticEmitted.set(code, now)
    const diagnostic = { code, severity, count, ...(scorerName !== undefined ? { scorerName } : {}), message }
    try {
      if (this.#onDiagnostic !== undefined) this.#onDiagnostic(diagnostic)
      else if (this.#diagnostics !== 'silent') console.warn(`[open-multi-agent evaluation] ${code}: ${message}`)
    } catch {
      this.#stats.failed++
    }
  }

  /** OMA's flush result of the counts (the core's rule); `timeout` when the wait ran out. */
  #flushResult(timedOut) {
    return onlineStep('flush', { stats: this.#stats, ...(timedOut ? { timedOut: true } : {}) })
  }
}

/** The evaluator of an orchestrator's `evaluation`: none when it is absent or samples nothing. */
export function createOnlineEvaluator(config, estimateCost) {
  if (config === undefined || config === null) return undefined
  if (typeof config?.sample === 'number') {
    if (!Number.isFinite(config.sample) || config.sample < 0 || config.sample > 1) {
      throw new RangeError('OnlineEvaluationConfig.sample must be a number in [0, 1] or a function.')
    }
    if (config.sample === 0) return undefined
  }
  return new OnlineEvaluator(config, { estimateCost })
}
