// `oma-component/observability`: OMA's observability API (OMA:
// `@open-multi-agent/core/observability`): the trace sinks a run's records go to and the
// exporters and stores behind them. Nothing here touches node:* (the file store, which does,
// is `oma-component/observability/file`).

export { DiagnosticReporter, emptyTraceSinkStats } from './sink.js'
export { BatchingTraceSink, DEFAULT_BATCHING_OPTIONS } from './batching.js'
export { CompositeSink } from './composite.js'
export { FilteringSink, SensitiveDataProcessor } from './processors.js'
export { LegacyCallbackTraceSink } from './legacy.js'
export { buildExecutionReceipt, materializeRun } from './materialize.js'
export { InMemoryTraceStore } from './memory-store.js'
export { TraceStoreExporter } from './store-exporter.js'
export { TRACE_STORE_SCHEMA_MAJOR, TraceStoreError } from './store.js'
