// OMA's built-in scorers (OMA: eval/scorers/): cost budget, dependency utilization, duplicate
// work, no progress, structured-output compliance and tool-call success, and the answer-relevancy
// judge. What each computes is the component's rule (the codec's `score-builtin`,
// docs/evaluation.md#built-in-scorers); here each is made a scorer, its options checked when it
// is made, as OMA checks them.
import { JUDGE_OPTION_KEYS, judgeScorer } from './judge.js'
import { scoreBuiltin, toJson } from './rules.js'
import { defineScorer } from './scorer.js'

/** A scorer whose every score is the component's rule `name` with `options`. */
function builtin(name, options, context = (c) => ({ result: c.result, trace: c.trace })) {
  const described = scoreBuiltin(name, toJson(options ?? {}))
  const checked = JSON.stringify(described.options)
  return defineScorer({
    name: described.name,
    version: described.version,
    score(scorerContext) {
      return scoreBuiltin(name, checked, toJson(context(scorerContext)))
    },
  })
}

/** OMA's `costBudgetScorer({maxTokens?, maxCostAmount?})`: hard token and observed-cost ceilings. */
export function costBudgetScorer(options) {
  return builtin('cost_budget', options)
}

/** OMA's `dependencyUtilizationScorer()`: dependency chains of the trace's tasks completed. */
export function dependencyUtilizationScorer() {
  return builtin('dependency_utilization', {})
}

/** OMA's `duplicateWorkScorer({threshold?})`: pairwise uniqueness of a team's task outputs. */
export function duplicateWorkScorer(options = {}) {
  return builtin('duplicate_work', options)
}

/** OMA's `noProgressScorer({maxStallTurns?})`: consecutive failed task attempts with no tool call. */
export function noProgressScorer(options = {}) {
  return builtin('no_progress', options)
}

/** OMA's `toolCallSuccessScorer()`: the share of recorded tool calls that succeeded. */
export function toolCallSuccessScorer() {
  return builtin('tool_call_success', {})
}

/**
 * OMA's `structuredOutputComplianceScorer(schema?)`: the result's structured output is there,
 * and matches `schema` when one is given: a zod schema (checked here, with zod, as OMA checks
 * it) or a JSON Schema object (checked by the component).
 */
export function structuredOutputComplianceScorer(schema) {
  if (schema === undefined) return builtin('structured_output_compliance', {})
  if (schema !== null && typeof schema.safeParse === 'function') {
    return builtin('structured_output_compliance', { hostValidates: true }, (c) => {
      const present = c.result !== undefined && 'structured' in c.result && c.result.structured !== undefined
      return {
        result: c.result,
        ...(present ? { schemaValid: schema.safeParse(c.result.structured).success } : {}),
      }
    })
  }
  if (schema !== null && (typeof schema === 'object' || typeof schema === 'boolean')) {
    return builtin('structured_output_compliance', { schema })
  }
  throw new TypeError('structuredOutputComplianceScorer takes a zod schema or a JSON Schema object')
}

/**
 * OMA's `createAnswerRelevancyScorer(options)`: a judge scorer (`createJudgeScorer`'s options
 * but for `verdictSchema` and `judgePrompt`) named `answer_relevancy` unless named, asking each
 * judge OMA's relevancy question with OMA's default verdict schema.
 */
export function createAnswerRelevancyScorer(options) {
  if (options === null || typeof options !== 'object') throw new TypeError('createAnswerRelevancyScorer needs options with judges')
  for (const key of ['verdictSchema', 'judgePrompt']) {
    if (key in options) throw new TypeError(`createAnswerRelevancyScorer does not take "${key}": its prompt and verdict schema are OMA's`)
  }
  for (const key of Object.keys(options)) {
    if (!JUDGE_OPTION_KEYS.includes(key)) throw new TypeError(`createAnswerRelevancyScorer does not support the option "${key}"`)
  }
  return judgeScorer({ ...options, name: options.name ?? 'answer_relevancy' }, 'answer_relevancy')
}
