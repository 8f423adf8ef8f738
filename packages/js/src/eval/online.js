// OMA's online evaluation (OMA: eval/online.ts): `evaluation` on `OpenMultiAgent` scores a
// sample of its settled top-level runs after they return, in the background, with a bounded
// queue, a concurrency limit, a rate budget and an optional cost budget. It never fails or
// holds a run: what a scorer throws is a `scorer_error` record, a full queue or an exhausted
// budget drops the sample, a store that fails drops the records, and each of these is reported
// as a diagnostic (at most one per kind a minute). `forceFlush` and `shutdown` wait for what was
// queued (docs/evaluation.md#online-evaluation). The sampling comparison, the queue bound, the
// budgets' windows and the diagnostics' throttle are the core's steps (`admit`, `start`, `cost`,
// `report`) on a window state this evaluator holds and hands back, with its clock.
import { unrefTimer } from '../observability/sink.js'
import { classifyRunFailure } from '../observability/status.js'
import { Watermark } from '../observability/watermark.js'
import { uuid } from '../utils/random.js'
import { onlineStep, toJson } from './rules.js'
import { checkScoreResult, scoreCostInputs } from './scorer.js'

const DEFAULT_MAX_CONCURRENT = 1
const DEFAULT_MAX_QUEUE_LENGTH = 100
const DEFAULT_FLUSH_TIMEOUT_MS = 30_000
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
  #budget
  #costBudget
  #store
  #storePayloads
  #onResult
  #onDiagnostic
  #diagnostics
  #now
  #random
  #estimateCost
  #queue = []
  #window = {}
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
    const maxEvaluationsPerMinute = perMinute === undefined ? undefined : positiveInteger(perMinute, perMinute, 'budget.maxEvaluationsPerMinute')
    const maxCostPerHour = positiveFinite(config.budget?.maxCostPerHour, 'budget.maxCostPerHour')
    this.#store = config.store
    this.#storePayloads = config.storePayloads ?? 'none'
    this.#onResult = config.onResult
    this.#onDiagnostic = config.onDiagnostic
    this.#diagnostics = config.diagnostics ?? 'warn'
    this.#now = runtime.now ?? Date.now
    this.#random = runtime.random ?? Math.random
    this.#estimateCost = runtime.estimateCost
    // The cost budget is in force only with an estimator to count the judges' cost with.
    this.#costBudget = maxCostPerHour !== undefined && this.#estimateCost !== undefined
    this.#budget = {
      ...(maxEvaluationsPerMinute !== undefined ? { maxEvaluationsPerMinute } : {}),
      ...(this.#costBudget ? { maxCostPerHour } : {}),
    }
    if (maxCostPerHour !== undefined && !this.#costBudget) this.#report('cost_inactive')
  }

  /** Decides, budgets and queues one settled top-level run (`{input, result, durationMs}`); true when queued. */
  enqueue(sample) {
    if (this.#closing) {
      this.#stats.dropped++
      this.#report('after_shutdown')
      return false
    }
    const identity = sample.result.identity
    if (identity === undefined) {
      this.#stats.failed++
      this.#report('no_identity')
      return false
    }
    const context = Object.freeze({
      identity,
      status: sample.result.status ?? { code: 'error', message: 'Run settled without a normalized status.' },
      metadata: Object.freeze({ ...sample.result.metadata }),
      durationMs: Math.max(0, sample.durationMs),
    })
    let drawn
    if (typeof this.#sample === 'number') {
      drawn = { sample: this.#sample, random: this.#random() }
    } else {
      try {
        drawn = { sample: this.#sample(context) === true }
      } catch {
        this.#report('sampling_failed')
        return false
      }
    }
    let admitted
    try {
      admitted = this.#step('admit', {
        budget: this.#budget,
        entryId: this.#nextId + 1,
        evaluations: this.#scorers.length,
        queueLength: this.#queue.length,
        maxQueueLength: this.#maxQueueLength,
        ...drawn,
      })
    } catch {
      // Not reached with the evaluator's own values; a run is never failed by its evaluation.
      this.#stats.failed++
      return false
    }
    if (admitted.outcome === 'skipped') return false
    this.#stats.sampled++
    if (admitted.outcome !== 'queued') {
      this.#stats.dropped++
      this.#emit(admitted.diagnostic)
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
      this.#report('flush_timeout')
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
        this.#report('worker_failed')
      }).finally(() => {
        this.#active--
        this.#settled.settle(entry.id)
        this.#startWorkers()
      })
    }
  }

  async #process(entry) {
    // A cost budget spent while the run waited drops it (the core gives its reservation back).
    const started = this.#step('start', { budget: this.#budget, entryId: entry.id })
    if (started.outcome !== 'score') {
      this.#stats.dropped++
      this.#emit(started.diagnostic)
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
        this.#report('scorer_failed', scorer.name)
      }
    }
    if (this.#store !== undefined) {
      try {
        await this.#store.append(records)
      } catch {
        this.#stats.storeFailed += records.length
        this.#report('store_failed')
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

  /**
   * Counts what a scorer's judges cost (by `estimateCost`, the amounts checked by the core)
   * against the hour's cost budget; an estimator that throws ends the count there.
   */
  #recordCost(scored) {
    if (!this.#costBudget) return
    const amounts = []
    for (const input of scoreCostInputs(scored)) {
      let estimated
      try {
        estimated = this.#estimateCost(input.usage, input.context)
      } catch {
        amounts.push(null)
        break
      }
      // What JSON carries of it: a number as it is (NaN and infinities as null), else null.
      amounts.push(typeof estimated === 'number' ? estimated : null)
    }
    const counted = this.#step('cost', { amounts })
    if (counted.outcome !== 'recorded') {
      this.#stats.failed++
      this.#emit(counted.diagnostic)
    }
  }

  /** One step of the core's window rules on the evaluator's clock and window; the next window kept. */
  #step(step, request) {
    const answer = onlineStep(step, { now: this.#now(), window: this.#window, ...request })
    this.#window = answer.window
    return answer
  }

  /** An event of the evaluator's through the core's throttle (one diagnostic per kind a minute). */
  #report(event, scorerName) {
    this.#emit(this.#step('report', { event, ...(scorerName !== undefined ? { scorerName } : {}) }).diagnostic)
  }

  /** A diagnostic the throttle let through, to `onDiagnostic` (else a warning); never thrown. */
  #emit(diagnostic) {
    if (diagnostic === undefined) return
    try {
      if (this.#onDiagnostic !== undefined) this.#onDiagnostic(diagnostic)
      else if (this.#diagnostics !== 'silent') console.warn(`[open-multi-agent evaluation] ${diagnostic.code}: ${diagnostic.message}`)
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
