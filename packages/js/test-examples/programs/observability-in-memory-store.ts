// Mirrors the API surface of OMA's integrations/observability-v2/in-memory-store example (and the
// demo runtime its examples share): an OpenMultiAgent with `observability: { sinks }` running an
// agent whose LLMAdapter answers locally, a BatchingTraceSink feeding an InMemoryTraceStore
// through a TraceStoreExporter, the run read back by `result.identity.runId`.
import { OpenMultiAgent, type AgentConfig, type LLMAdapter, type LLMResponse, type TraceSink } from '@open-multi-agent/core'
import { BatchingTraceSink, InMemoryTraceStore, TraceStoreExporter } from '@open-multi-agent/core/observability'

function reply(text: string): LLMResponse {
  return { id: 'local-1', content: [{ type: 'text', text }], model: 'local-model', stop_reason: 'end_turn', usage: { input_tokens: 4, output_tokens: 3 } }
}

const adapter: LLMAdapter = {
  name: 'local-model',
  async chat() { return reply('traced and stored') },
  async *stream() {},
}

const agent: AgentConfig = { name: 'store-demo', model: 'local-model', adapter }

async function runDemo(sink: TraceSink, runId: string) {
  const oma = new OpenMultiAgent({ observability: { sinks: [sink] } })
  return oma.runAgent(agent, 'Trace this run.', { runId })
}

const store = new InMemoryTraceStore()
const sink = new BatchingTraceSink(new TraceStoreExporter(store), { diagnostics: 'silent' })

try {
  const result = await runDemo(sink, 'program-in-memory-store')
  await sink.forceFlush({ timeoutMs: 1_000 })
  const stored = await store.getRun(result.identity!.runId)
  console.log({ runId: stored?.runId, status: stored?.status, spans: stored?.spans.length })
} finally {
  await sink.shutdown({ timeoutMs: 1_000 })
}
