// OMA's `defineScorer` (OMA: eval/scorer.ts): a named, optionally versioned scorer whose every
// result is checked; what it throws, rejects or returns wrongly is a scorer error, never a zero.
import { isTraceAttribute } from './values.js'

const warned = new Set()

/** `value` when it is a score result; otherwise throws OMA's error for it. */
export function checkScoreResult(value) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new TypeError('Scorer must return a ScoreResult object.')
  }
  if (typeof value.score !== 'number' || !Number.isFinite(value.score) || value.score < 0 || value.score > 1) {
    throw new RangeError('ScoreResult.score must be a finite number in the range [0, 1].')
  }
  if (value.pass !== undefined && typeof value.pass !== 'boolean') throw new TypeError('ScoreResult.pass must be a boolean when provided.')
  if (value.reason !== undefined && typeof value.reason !== 'string') throw new TypeError('ScoreResult.reason must be a string when provided.')
  if (value.details !== undefined) {
    if (value.details === null || typeof value.details !== 'object' || Array.isArray(value.details)) {
      throw new TypeError('ScoreResult.details must be a trace-attribute record when provided.')
    }
    if (!Object.values(value.details).every(isTraceAttribute)) {
      throw new TypeError('ScoreResult.details values must be valid TraceAttributeValue values.')
    }
  }
  return value
}

/**
 * OMA's `defineScorer`: `{name, version?, timeoutMs?, score(context)}` checked and frozen, its
 * results checked as they come (sync or async). A scorer without a version is warned of once
 * (a baseline cannot tell when its scoring changed), as OMA warns.
 */
export function defineScorer(scorer) {
  if (scorer === null || typeof scorer !== 'object') throw new TypeError('Scorer must be an object.')
  if (typeof scorer.name !== 'string' || scorer.name.trim().length === 0) throw new TypeError('Scorer.name must be a non-empty string.')
  if (typeof scorer.score !== 'function') throw new TypeError('Scorer.score must be a function.')
  if (scorer.version !== undefined && typeof scorer.version !== 'string') throw new TypeError('Scorer.version must be a string when provided.')
  if (scorer.timeoutMs !== undefined && typeof scorer.timeoutMs !== 'number') throw new TypeError('Scorer.timeoutMs must be a number when provided.')
  if (scorer.version === undefined && !warned.has(scorer.name)) {
    warned.add(scorer.name)
    console.warn(`[open-multi-agent eval] Scorer "${scorer.name}" has no version; baseline comparisons cannot detect scoring drift.`)
  }
  const score = scorer.score
  return Object.freeze({
    ...scorer,
    score(context) {
      const result = score.call(scorer, context)
      if (result !== null && typeof result === 'object' && typeof result.then === 'function') {
        return Promise.resolve(result).then(checkScoreResult)
      }
      return checkScoreResult(result)
    },
  })
}

const COST_INPUTS = Symbol('oma.eval.score_cost_inputs')

/**
 * Attaches the model usage a scorer spent (its judges' token usage, each with its cost context)
 * to a score result or an error, unseen by JSON and by the result's checks: online evaluation
 * reads it for its cost budget (OMA's `attachScoreCostInputs`).
 */
export function attachScoreCostInputs(target, inputs) {
  if (inputs.length === 0 || target === null || typeof target !== 'object') return target
  Object.defineProperty(target, COST_INPUTS, {
    value: Object.freeze(inputs.map((input) => Object.freeze({
      usage: Object.freeze({ ...input.usage }),
      context: Object.freeze({ ...input.context }),
    }))),
    enumerable: false,
    configurable: true,
  })
  return target
}

/** The model usage attached to a score result or error, or none. */
export function scoreCostInputs(value) {
  if ((value === null || typeof value !== 'object') && typeof value !== 'function') return []
  return value[COST_INPUTS] ?? []
}
