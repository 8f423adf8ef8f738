// Mirrors the API surface of OMA's integrations/observability-v2/cli-lifecycle example: a
// short-lived program that owns its telemetry: a run traced into a FileTraceStore, then, on the
// way out, the sink drained, the store fsynced, the sink shut down and the store closed, before
// the process exits by itself.
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
  async chat() { return reply('command finished') },
  async *stream() {},
}

const agent: AgentConfig = { name: 'cli-demo', model: 'local-model', adapter }

async function runDemo(sink: TraceSink, runId: string) {
  const oma = new OpenMultiAgent({ observability: { sinks: [sink] } })
  return oma.runAgent(agent, 'Run once and exit.', { runId })
}

const directory = await mkdtemp(join(tmpdir(), 'program-cli-lifecycle-'))
const store = await FileTraceStore.open(join(directory, 'traces.ndjson'))
const sink = new BatchingTraceSink(new TraceStoreExporter(store), { diagnostics: 'silent' })

try {
  const result = await runDemo(sink, 'program-cli-lifecycle')
  console.log({ success: result.success, runId: result.identity?.runId })
} finally {
  await sink.forceFlush({ timeoutMs: 2_000 })
  await store.flush()
  await sink.shutdown({ timeoutMs: 2_000 })
  await store.close()
  await rm(directory, { recursive: true, force: true })
}
