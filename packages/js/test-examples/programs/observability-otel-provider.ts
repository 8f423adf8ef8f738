// Mirrors the API surface of OMA's integrations/observability-v2/otel-provider example (and the
// demo runtime its examples share): OMA's OpenTelemetry adapter (`@open-multi-agent/otel`'s
// createOtelTraceSink) on an application-owned BasicTracerProvider whose SimpleSpanProcessor
// feeds an InMemorySpanExporter, an OpenMultiAgent with `observability: { sinks }` running an
// agent whose LLMAdapter answers locally, the sink flushed and shut down before the provider.
// Besides the example's summary it prints each finished span as the adapter made it from the
// run's records (name, kind, parent, status, events and the attributes that are not ids or
// times), so that the records the package makes are compared with OMA's through the adapter.
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base'
import { createOtelTraceSink } from '@open-multi-agent/otel'
import { OpenMultiAgent, type AgentConfig, type LLMAdapter, type LLMResponse, type TraceSink } from '@open-multi-agent/core'

function reply(text: string): LLMResponse {
  return { id: 'local-1', content: [{ type: 'text', text }], model: 'local-model', stop_reason: 'end_turn', usage: { input_tokens: 5, output_tokens: 4 } }
}

const adapter: LLMAdapter = {
  name: 'local-model',
  async chat() { return reply('spans handed to the provider') },
  async *stream() {},
}

const agent: AgentConfig = { name: 'otel-demo', model: 'local-model', adapter }

async function runDemo(sink: TraceSink, runId: string) {
  const oma = new OpenMultiAgent({ observability: { sinks: [sink] } })
  return oma.runAgent(agent, 'Trace this run into OpenTelemetry.', { runId })
}

// What differs from run to run (ids, times) is left out of the printed attributes, and so is the
// model the provider says answered: the component records it on a chat span (the adapter maps it
// to gen_ai.response.model), OMA 1.16.1's core does not, and OMA's example prints neither.
const VARYING = new Set(['oma.record.id', 'oma.trace.id', 'oma.span.id', 'oma.parent_span.id', 'oma.run.id'])
const ADDED = new Set(['oma.llm.response_model', 'gen_ai.response.model'])

const exporter = new InMemorySpanExporter()
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
const sink = createOtelTraceSink({ tracerProvider: provider, metadata: { environment: 'program' } })

try {
  const result = await runDemo(sink, 'program-otel-provider')
  await sink.forceFlush({ timeoutMs: 1_000 })
  const spans = exporter.getFinishedSpans()
  console.log({ runId: result.identity?.runId, spans: spans.length, root: spans.at(-1)?.name })
  const names = new Map(spans.map((span) => [span.spanContext().spanId, span.name]))
  for (const span of spans) {
    const parent = span.parentSpanContext?.spanId
    const attributes = Object.fromEntries(Object.entries(span.attributes).filter(([key]) => !VARYING.has(key) && !ADDED.has(key)).sort(([a], [b]) => a.localeCompare(b)))
    console.log(JSON.stringify({
      name: span.name,
      kind: span.kind,
      parent: parent === undefined ? null : names.get(parent) ?? 'unknown',
      sameTrace: span.spanContext().traceId === spans.at(-1)?.spanContext().traceId,
      status: span.status,
      events: span.events.map((event) => event.name),
      attributes,
    }))
  }
} finally {
  // The adapter does not own the provider: OMA's side is drained first, then the provider closed.
  await sink.shutdown({ timeoutMs: 1_000 })
  await provider.shutdown()
}
