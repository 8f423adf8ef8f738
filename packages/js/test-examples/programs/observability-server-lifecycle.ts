// Mirrors the API surface of OMA's integrations/observability-v2/server-lifecycle example: a
// long-lived HTTP server on the loopback address whose own SIGTERM handler stops intake, then
// drains and shuts down the trace sink; a run traced into an InMemoryTraceStore meanwhile.
import { createServer, type Server } from 'node:http'
import { OpenMultiAgent, type AgentConfig, type LLMAdapter, type LLMResponse, type TraceSink } from '@open-multi-agent/core'
import { BatchingTraceSink, InMemoryTraceStore, TraceStoreExporter } from '@open-multi-agent/core/observability'

function reply(text: string): LLMResponse {
  return { id: 'local-1', content: [{ type: 'text', text }], model: 'local-model', stop_reason: 'end_turn', usage: { input_tokens: 4, output_tokens: 3 } }
}

const adapter: LLMAdapter = {
  name: 'local-model',
  async chat() { return reply('served') },
  async *stream() {},
}

const agent: AgentConfig = { name: 'server-demo', model: 'local-model', adapter }

async function runDemo(sink: TraceSink, runId: string) {
  const oma = new OpenMultiAgent({ observability: { sinks: [sink] } })
  return oma.runAgent(agent, 'Handle one request.', { runId })
}

function listening(server: Server): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject)
      resolve()
    })
  })
}

function closed(server: Server): Promise<void> {
  return new Promise((resolve, reject) => {
    server.close((error) => (error ? reject(error) : resolve()))
  })
}

const store = new InMemoryTraceStore()
const sink = new BatchingTraceSink(new TraceStoreExporter(store), { diagnostics: 'silent' })
const server = createServer((_request, response) => response.end('up'))
let markStopped!: () => void
const stopped = new Promise<void>((resolve) => { markStopped = resolve })

async function stop(): Promise<void> {
  await closed(server)
  await sink.forceFlush({ timeoutMs: 2_000 })
  await sink.shutdown({ timeoutMs: 2_000 })
  markStopped()
}

process.once('SIGTERM', () => { void stop().catch((error) => { console.error(error); markStopped() }) })
await listening(server)
await runDemo(sink, 'program-server-lifecycle')
setTimeout(() => process.kill(process.pid, 'SIGTERM'), 10).unref()
await stopped
console.log('server and telemetry stopped')
