// Mirrors the API surface of OMA's integrations/observability-v2/batching-exporter example: an
// application's own TraceExporter counting what it is handed, behind a BatchingTraceSink given
// to OpenMultiAgent's `observability`; the run's records drained with forceFlush.
import { OpenMultiAgent, type AgentConfig, type LLMAdapter, type LLMResponse, type TraceSink } from '@open-multi-agent/core'
import { BatchingTraceSink, type TraceExporter } from '@open-multi-agent/core/observability'

function reply(text: string): LLMResponse {
  return { id: 'local-1', content: [{ type: 'text', text }], model: 'local-model', stop_reason: 'end_turn', usage: { input_tokens: 4, output_tokens: 3 } }
}

const adapter: LLMAdapter = {
  name: 'local-model',
  async chat() { return reply('exported in a batch') },
  async *stream() {},
}

const agent: AgentConfig = { name: 'exporter-demo', model: 'local-model', adapter }

async function runDemo(sink: TraceSink, runId: string) {
  const oma = new OpenMultiAgent({ observability: { sinks: [sink] } })
  return oma.runAgent(agent, 'Trace this run for an exporter.', { runId })
}

let delivered = 0
const exporter: TraceExporter = {
  async export(records) {
    delivered += records.length
    return { status: 'success', exported: records.length }
  },
}
const sink = new BatchingTraceSink(exporter, { diagnostics: 'silent' })

try {
  const result = await runDemo(sink, 'program-batching-exporter')
  const delivery = await sink.forceFlush({ timeoutMs: 1_000 })
  console.log({ runId: result.identity?.runId, exported: delivered, delivery: delivery.status })
} finally {
  await sink.shutdown({ timeoutMs: 1_000 })
}
