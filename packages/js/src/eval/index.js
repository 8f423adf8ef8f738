// `oma-component/eval` (OMA: `@open-multi-agent/core/eval`): eval sets, scorers, the offline
// runner with progress and reports, agent targets, gates, the in-memory evaluation store, OMA's
// built-in scorers and LLM judges.
// Nothing here imports Node's modules: the subpath is usable in a browser bundle.
export { defineEvalSet } from './evalset.js'
export { defineScorer } from './scorer.js'
export { runEvalSet } from './runner.js'
export { evaluateGate } from './gate.js'
export { EvalDefinitionError } from './values.js'
export { EVAL_STORE_SCHEMA_MAJOR, EvalStoreError, InMemoryEvalStore } from './store.js'
export { targetFromAgent } from './target.js'
export { createJudgeScorer } from './judge.js'
export {
  costBudgetScorer,
  createAnswerRelevancyScorer,
  dependencyUtilizationScorer,
  duplicateWorkScorer,
  noProgressScorer,
  structuredOutputComplianceScorer,
  toolCallSuccessScorer,
} from './scorers.js'
