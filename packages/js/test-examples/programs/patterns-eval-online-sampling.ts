// Mirrors the API surface of OMA's patterns/eval-online-sampling example: an OpenMultiAgent with
// online `evaluation` (a cost-budget scorer, every run sampled, a bounded queue, a rate budget,
// a FileEvalStore), one runAgent with a user-written LLMAdapter, then the evaluation flushed and
// its stats printed, the store flushed and closed.
import { OpenMultiAgent, type LLMAdapter } from '@open-multi-agent/core'
import { costBudgetScorer } from '@open-multi-agent/core/eval'
import { FileEvalStore } from '@open-multi-agent/core/eval/file'

const adapter: LLMAdapter = {
  name: 'local-online',
  async chat(_messages, options) {
    return {
      id: 'local-online-1',
      content: [{ type: 'text', text: 'Scoring happens once this answer is back.' }],
      model: options.model,
      stop_reason: 'end_turn',
      usage: { input_tokens: 15, output_tokens: 9 },
    }
  },
  async *stream() {},
}

const path = process.env['OMA_EVAL_STORE_PATH'] ?? './eval-results/online.ndjson'
const store = await FileEvalStore.open(path)
const orchestrator = new OpenMultiAgent({
  evaluation: {
    scorers: [costBudgetScorer({ maxTokens: 50 })],
    sample: 1,
    maxConcurrent: 1,
    maxQueueLength: 5,
    budget: { maxEvaluationsPerMinute: 5 },
    store,
  },
})

try {
  const result = await orchestrator.runAgent({
    name: 'online-local',
    model: 'local-model-1',
    adapter,
  }, 'When does online scoring happen?')

  const flush = await orchestrator.evaluation.forceFlush({ timeoutMs: 5_000 })
  await store.flush()
  console.log(JSON.stringify({
    businessOutput: result.output,
    evaluation: flush,
    stats: orchestrator.evaluation.getStats(),
    store: path,
  }, null, 2))
} finally {
  await orchestrator.evaluation.shutdown({ timeoutMs: 5_000 })
  await store.flush()
  await store.close()
}
