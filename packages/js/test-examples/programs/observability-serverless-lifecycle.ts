// Mirrors the API surface of OMA's integrations/observability-v2/serverless-lifecycle example: a
// warm, shared BatchingTraceSink whose exporter never answers (bounded by `exportTimeoutMs` and no
// retries), flushed for a few milliseconds at the end of each invocation and never shut down; the
// run's result is not held up by it.
import { OpenMultiAgent, type AgentConfig, type LLMAdapter, type LLMResponse, type TraceSink } from '@open-multi-agent/core'
import { BatchingTraceSink, type TraceExporter } from '@open-multi-agent/core/observability'

function reply(text: string): LLMResponse {
  return { id: 'local-1', content: [{ type: 'text', text }], model: 'local-model', stop_reason: 'end_turn', usage: { input_tokens: 4, output_tokens: 3 } }
}

const adapter: LLMAdapter = {
  name: 'local-model',
  async chat() { return reply('invoked') },
  async *stream() {},
}

const agent: AgentConfig = { name: 'function-demo', model: 'local-model', adapter }

async function runDemo(sink: TraceSink, runId: string) {
  const oma = new OpenMultiAgent({ observability: { sinks: [sink] } })
  return oma.runAgent(agent, 'Handle one invocation.', { runId })
}

const stuckExporter: TraceExporter = {
  async export() { return new Promise(() => {}) },
}
const warmSink = new BatchingTraceSink(stuckExporter, { diagnostics: 'silent', exportTimeoutMs: 100, maxRetries: 0 })

export async function invoke() {
  const result = await runDemo(warmSink, 'program-serverless-lifecycle')
  const telemetry = await warmSink.forceFlush({ timeoutMs: 5 })
  return { success: result.success, telemetry: telemetry.status }
}

// The platform keeps an invocation alive while it runs: a referenced interval stands in for it.
const platform = setInterval(() => {}, 1_000)
try {
  console.log(await invoke())
} finally {
  clearInterval(platform)
}
