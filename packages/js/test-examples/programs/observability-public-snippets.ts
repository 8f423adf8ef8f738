// Mirrors the API surface of OMA's integrations/observability-v2/public-snippets (compile-only,
// as in OMA): the migration stages from `onTrace` to a LegacyCallbackTraceSink, an exporter of
// one's own behind a BatchingTraceSink, an InMemoryTraceStore, and a FileTraceStore's lifecycle
// around a run. Its OpenTelemetry line (`@open-multi-agent/otel`'s createOtelTraceSink) is
// otel-provider's program's, which needs the adapter built from OMA's checkout (OMA_DIR): see
// the harness's NEEDS_OTEL.
import { OpenMultiAgent, type AgentConfig, type TraceEvent } from '@open-multi-agent/core'
import {
  BatchingTraceSink,
  InMemoryTraceStore,
  LegacyCallbackTraceSink,
  TraceStoreExporter,
  type TraceExporter,
} from '@open-multi-agent/core/observability'
import { FileTraceStore } from '@open-multi-agent/core/observability/file'

declare const agent: AgentConfig
declare const prompt: string
declare const collector: { write(event: TraceEvent): void }
declare function postRecords(records: readonly unknown[], options: { signal: AbortSignal }): Promise<number>

export const legacyOnly = new OpenMultiAgent({
  onTrace(event) { collector.write(event) },
})

export const bridgeSink = new LegacyCallbackTraceSink((event) => collector.write(event))
export const bridged = new OpenMultiAgent({ observability: { sinks: [bridgeSink] } })

const exporter: TraceExporter = {
  async export(records, signal) {
    const sent = await postRecords(records, { signal })
    return { status: 'success', exported: sent }
  },
}
export const batchSink = new BatchingTraceSink(exporter)
export const batched = new OpenMultiAgent({ observability: { sinks: [batchSink] } })

export const memory = new InMemoryTraceStore()
export const storeSink = new BatchingTraceSink(new TraceStoreExporter(memory))

export async function traceToFile(path: string): Promise<void> {
  const store = await FileTraceStore.open(path)
  const sink = new BatchingTraceSink(new TraceStoreExporter(store))
  try {
    await new OpenMultiAgent({ observability: { sinks: [sink] } }).runAgent(agent, prompt)
    await sink.forceFlush({ timeoutMs: 1_000 })
    await store.flush()
  } finally {
    await sink.shutdown({ timeoutMs: 1_000 })
    await store.close()
  }
}
