// Mirrors the API surface of OMA's integrations/observability-v2/file-trace-store example: a
// FileTraceStore (`@open-multi-agent/core/observability/file`) opened in a temporary directory,
// filled through a BatchingTraceSink and a TraceStoreExporter by an OpenMultiAgent run with a
// local LLMAdapter; the sink drained, the store flushed, the run read back, everything closed.
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { OpenMultiAgent, type AgentConfig, type LLMAdapter, type LLMResponse, type TraceSink } from '@open-multi-agent/core'
import { BatchingTraceSink, TraceStoreExporter } from '@open-multi-agent/core/observability'
import { FileTraceStore } from '@open-multi-agent/core/observability/file'

function reply(text: string): LLMResponse {
  return { id: 'local-1', content: [{ type: 'text', text }], model: 'local-model', stop_reason: 'end_turn', usage: { input_tokens: 4, output_tokens: 3 } }
}

const adapter: LLMAdapter = {
  name: 'local-model',
  async chat() { return reply('written to a file') },
  async *stream() {},
}

const agent: AgentConfig = { name: 'file-demo', model: 'local-model', adapter }

async function runDemo(sink: TraceSink, runId: string) {
  const oma = new OpenMultiAgent({ observability: { sinks: [sink] } })
  return oma.runAgent(agent, 'Trace this run to a file.', { runId })
}

const directory = await mkdtemp(join(tmpdir(), 'program-file-trace-store-'))
const store = await FileTraceStore.open(join(directory, 'traces.ndjson'))
const sink = new BatchingTraceSink(new TraceStoreExporter(store), { diagnostics: 'silent' })

try {
  const result = await runDemo(sink, 'program-file-trace-store')
  await sink.forceFlush({ timeoutMs: 1_000 })
  await store.flush()
  const stored = await store.getRun(result.identity!.runId)
  console.log({ runId: stored?.runId, status: stored?.status, spans: stored?.spans.length })
} finally {
  await sink.shutdown({ timeoutMs: 1_000 })
  await store.close()
  await rm(directory, { recursive: true, force: true })
}
