// Types of `oma-component/observability` (OMA's `@open-multi-agent/core/observability`): the
// trace records (schema v2) a sink receives, the sinks, and what they give back.

import type { AgentRunResult, RunFlag, RunStatus, StructuredTraceError, TraceAttributeValue, TraceEvent, TraceLink } from './index.js'

export type { TraceAttributeValue, TraceLink }

/** The operation a span stands for. */
export type SpanKind = 'run' | 'routing' | 'agent' | 'task' | 'llm' | 'tool' | 'plan' | 'consensus' | 'checkpoint' | 'callback'

/** The events a span may carry. */
export type SpanEventName =
  | 'retry_scheduled' | 'budget_exhausted' | 'first_chunk' | 'approval_decision' | 'checkpoint_failed'
  | 'telemetry_diagnostic' | 'loop_detected' | 'stream_chunk' | 'consensus_verdict' | 'recovery_decision'
  | 'plan_revision_applied'

/** What every record holds. */
export interface TraceRecordBase {
  readonly schemaVersion: 2
  readonly recordId: string
  /** Strictly increasing within one `traceId`. */
  readonly sequence: number
  readonly timestampUnixMs: number
  readonly runId: string
  readonly attempt: number
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
}

/** A span began. */
export interface SpanStartRecord extends TraceRecordBase {
  readonly recordType: 'span_start'
  readonly kind: SpanKind
  readonly name: string
  readonly startUnixMs: number
  readonly attributes: Readonly<Record<string, TraceAttributeValue>>
  readonly links?: readonly TraceLink[]
}

/** Something happened within a span. */
export interface SpanEventRecord extends TraceRecordBase {
  readonly recordType: 'span_event'
  readonly name: SpanEventName
  readonly attributes: Readonly<Record<string, TraceAttributeValue>>
}

/** A span ended; its `attributes` are the span's whole final set. */
export interface SpanEndRecord extends TraceRecordBase {
  readonly recordType: 'span_end'
  readonly kind: SpanKind
  readonly name: string
  readonly startUnixMs: number
  readonly endUnixMs: number
  readonly durationMs: number
  readonly status: RunStatus
  readonly attributes: Readonly<Record<string, TraceAttributeValue>>
  readonly error?: StructuredTraceError
  readonly links?: readonly TraceLink[]
}

export type TraceRecord = SpanStartRecord | SpanEventRecord | SpanEndRecord

export interface FlushOptions {
  readonly timeoutMs?: number
}

/** What `forceFlush` and `shutdown` report, with the sink's counts. */
export interface FlushResult {
  readonly status: 'ok' | 'partial' | 'timeout' | 'error'
  readonly accepted: number
  readonly exported: number
  readonly dropped: number
  readonly failed: number
}

/**
 * An exporter's answer for one batch: `exported` is how many records at its head were
 * delivered; `retryable` retries the rest, `failure` gives them up, and a short `success`
 * gives the rest up too.
 */
export interface ExportResult {
  readonly status: 'success' | 'retryable' | 'failure'
  readonly exported: number
  readonly retryAfterMs?: number
  readonly code?: string
}

/** Delivers batches of records somewhere; `signal` aborts when the sink stopped waiting. */
export interface TraceExporter {
  export(records: readonly TraceRecord[], signal: AbortSignal): Promise<ExportResult>
  forceFlush?(signal: AbortSignal): Promise<ExportResult>
  shutdown?(signal: AbortSignal): Promise<ExportResult>
}

/** A sink's counters. */
export interface TraceSinkStats {
  readonly accepted: number
  readonly exported: number
  readonly retried: number
  readonly failed: number
  readonly dropped: number
  readonly queuedRecords: number
  readonly queuedBytes: number
  readonly lastError?: string
  /** The same as `queuedRecords`. */
  readonly queued: number
  /** The same as `lastError`. */
  readonly lastFailureCode?: string
}

export type TelemetryDiagnosticCode =
  | 'sink_emit_failed' | 'queue_full' | 'record_too_large' | 'export_failed' | 'export_timeout'
  | 'flush_timeout' | 'shutdown_failed' | 'emit_after_shutdown'

/** A problem of the telemetry itself; its message is fixed and holds no record or error text. */
export interface TelemetryDiagnostic {
  readonly code: TelemetryDiagnosticCode
  readonly severity: 'warning' | 'error'
  /** How many times `code` happened so far (reports of one code are rate limited). */
  readonly count: number
  readonly sinkName?: string
  readonly message: string
}

export type DiagnosticMode = 'warn' | 'silent'

export interface DiagnosticOptions {
  /** `warn` (default): a diagnostic nobody takes goes to `console.warn`; `silent`: nowhere. */
  readonly diagnostics?: DiagnosticMode
  readonly onDiagnostic?: (diagnostic: TelemetryDiagnostic) => void
  /** At most one report per code in this many milliseconds (60000). */
  readonly diagnosticIntervalMs?: number
  readonly sinkName?: string
}

/**
 * Takes the trace records of runs. `emit` accepts one record without blocking and without
 * throwing; `forceFlush` delivers what was accepted before it; `shutdown` flushes, then
 * refuses later records (idempotent).
 */
export interface TraceSink {
  emit(record: TraceRecord): void
  forceFlush(options?: FlushOptions): Promise<FlushResult>
  shutdown(options?: FlushOptions): Promise<FlushResult>
  getStats?(): TraceSinkStats
}

/** The service the records come from. */
export interface ObservabilityResource {
  readonly serviceName?: string
  readonly serviceVersion?: string
  readonly deploymentEnvironment?: string
  readonly release?: string
}

/**
 * What content a sink may see: prompts, completions, tool input and output are left out
 * unless `redacted`; error messages are redacted (or left out with `code-only`);
 * `maxContentChars` (4096) cuts each string.
 */
export interface TraceCapturePolicy {
  readonly prompt?: 'none' | 'redacted'
  readonly completion?: 'none' | 'redacted'
  readonly toolInput?: 'none' | 'redacted'
  readonly toolOutput?: 'none' | 'redacted'
  readonly errorMessage?: 'code-only' | 'redacted'
  readonly stack?: boolean
  readonly streamEvents?: 'none' | 'first' | 'all'
  readonly maxContentChars?: number
}

/** The `observability` option of a run. */
export interface ObservabilityConfig {
  readonly sinks: readonly TraceSink[]
  readonly resource?: ObservabilityResource
  readonly capture?: TraceCapturePolicy
  readonly onDiagnostic?: (diagnostic: TelemetryDiagnostic) => void
}

/** A sink's counters before anything happened. */
export declare function emptyTraceSinkStats(): TraceSinkStats

/** Counts telemetry problems by code and reports them, rate limited per code. */
export declare class DiagnosticReporter {
  constructor(options?: DiagnosticOptions)
  report(code: TelemetryDiagnosticCode, message: string, severity?: TelemetryDiagnostic['severity']): void
}

/** OMA's defaults of `BatchingTraceSink`. */
export declare const DEFAULT_BATCHING_OPTIONS: Readonly<{
  maxQueueRecords: 2048
  maxQueueBytes: number
  maxRecordBytes: number
  maxBatchRecords: 512
  scheduledDelayMs: 5000
  exportTimeoutMs: 30000
  maxRetries: 3
  retryDelayMs: 1000
  retryBackoff: 2
  maxRetryDelayMs: 30000
}>

export interface BatchingTraceSinkOptions extends DiagnosticOptions {
  /** Records queued at most (2048); a positive integer. */
  readonly maxQueueRecords?: number
  /** Bytes queued at most, as compact UTF-8 JSON (16 MiB). */
  readonly maxQueueBytes?: number
  /** A larger record is dropped (256 KiB). */
  readonly maxRecordBytes?: number
  readonly maxBatchRecords?: number
  readonly scheduledDelayMs?: number
  readonly exportTimeoutMs?: number
  /** Retries after the first export attempt (3). */
  readonly maxRetries?: number
  readonly retryDelayMs?: number
  /** At least 1. */
  readonly retryBackoff?: number
  readonly maxRetryDelayMs?: number
  /** Draw each retry delay between half and all of it (true). */
  readonly retryJitter?: boolean
}

/**
 * A bounded queue of records exported in batches; a full queue gives way by priority (stream
 * chunks first, span ends last). An option out of range is refused by name.
 */
export declare class BatchingTraceSink implements TraceSink {
  constructor(exporter: TraceExporter, options?: BatchingTraceSinkOptions)
  emit(record: TraceRecord): void
  forceFlush(options?: FlushOptions): Promise<FlushResult>
  shutdown(options?: FlushOptions): Promise<FlushResult>
  getStats(): TraceSinkStats
}

/** Hands every record to several sinks; one failing child never stops the others. */
export declare class CompositeSink implements TraceSink {
  constructor(sinks: readonly TraceSink[], options?: DiagnosticOptions)
  emit(record: TraceRecord): void
  forceFlush(options?: FlushOptions): Promise<FlushResult>
  shutdown(options?: FlushOptions): Promise<FlushResult>
  getStats(): TraceSinkStats
}

export type TraceFilter = (record: TraceRecord) => boolean

/** Hands on the records a filter accepts; a filter that throws drops only that record. */
export declare class FilteringSink implements TraceSink {
  constructor(sink: TraceSink, filter: TraceFilter)
  emit(record: TraceRecord): void
  forceFlush(options?: FlushOptions): Promise<FlushResult>
  shutdown(options?: FlushOptions): Promise<FlushResult>
  getStats(): TraceSinkStats
}

export interface SensitiveDataProcessorOptions {
  /** Only these attribute keys pass (before credentials are removed). */
  readonly attributeAllowlist?: readonly string[]
  readonly capture?: TraceCapturePolicy
}

/** The privacy boundary in front of a sink (see `TraceCapturePolicy`). */
export declare class SensitiveDataProcessor implements TraceSink {
  constructor(sink: TraceSink, options?: SensitiveDataProcessorOptions)
  emit(record: TraceRecord): void
  forceFlush(options?: FlushOptions): Promise<FlushResult>
  shutdown(options?: FlushOptions): Promise<FlushResult>
  getStats(): TraceSinkStats
}

/** Hands OMA's legacy trace events (the `onTrace` callback's) the records complete to `callback`. */
export declare class LegacyCallbackTraceSink implements TraceSink {
  constructor(callback: (event: TraceEvent) => void | Promise<void>, options?: DiagnosticOptions)
  emit(record: TraceRecord): void
  forceFlush(options?: FlushOptions): Promise<FlushResult>
  shutdown(options?: FlushOptions): Promise<FlushResult>
  getStats(): TraceSinkStats
}

/** The record schema major a store takes. */
export declare const TRACE_STORE_SCHEMA_MAJOR: 2

export type TraceStoreErrorCode = 'INVALID_ARGUMENT' | 'INVALID_CURSOR' | 'UNSUPPORTED_SCHEMA_VERSION'

/** A store refused its input: `code`, `field` (where, e.g. `records[0].sequence`) and OMA's message. */
export declare class TraceStoreError extends Error {
  constructor(code: TraceStoreErrorCode, message: string, field?: string)
  readonly name: 'TraceStoreError'
  readonly code: TraceStoreErrorCode
  readonly field?: string
}

export type TraceStoreDiagnosticCode = 'duplicate_span_end' | 'record_id_collision'

/** A record a store kept only once. */
export interface TraceStoreDiagnostic {
  readonly code: TraceStoreDiagnosticCode
  readonly runId: string
  readonly traceId: string
  readonly spanId: string
  readonly message: string
}

export interface AppendResult {
  readonly written: number
  readonly deduplicated: number
  readonly diagnostics: readonly TraceStoreDiagnostic[]
}

export interface DeleteResult {
  readonly runsDeleted: number
  readonly recordsDeleted: number
  /** The runs deleted, oldest first. */
  readonly runIds: readonly string[]
}

export interface Page<T> {
  readonly items: readonly T[]
  readonly nextCursor?: string
}

export interface RunAttemptSummary {
  readonly attempt: number
  readonly traceId: string
  readonly rootSpanId?: string
  readonly startedAt: string
  readonly endedAt?: string
  readonly durationMs?: number
  readonly status?: RunStatus['code']
  readonly incomplete: boolean
}

export interface RunTokenSummary {
  readonly input_tokens: number
  readonly output_tokens: number
  readonly cache_read_input_tokens?: number
  readonly cache_creation_input_tokens?: number
  readonly reasoning_output_tokens?: number
}

export interface RunCostSummary {
  readonly amount: number
  readonly currency: string
}

/** One run as a store lists it (times as ISO-8601 text). */
export interface RunSummary {
  readonly schemaVersion: 2
  readonly runId: string
  readonly attempts: readonly RunAttemptSummary[]
  readonly startedAt: string
  readonly endedAt?: string
  readonly durationMs?: number
  /** Absent while no run record has ended. */
  readonly status?: RunStatus['code']
  readonly metadata?: Readonly<Record<string, TraceAttributeValue>>
  readonly agents: readonly string[]
  readonly taskIds: readonly string[]
  readonly models: readonly string[]
  readonly providers: readonly string[]
  readonly tokens: RunTokenSummary
  readonly costs: readonly RunCostSummary[]
  readonly incomplete: boolean
}

/** A span with its start and end folded into one. */
export interface MaterializedSpan {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly kind?: SpanKind
  readonly name?: string
  readonly startUnixMs?: number
  readonly endUnixMs?: number
  readonly durationMs?: number
  readonly status?: RunStatus['code']
  readonly attributes: Readonly<Record<string, TraceAttributeValue>>
  readonly links: readonly TraceLink[]
  readonly events: readonly SpanEventRecord[]
  readonly incomplete: boolean
}

/** One run with its spans (and, when asked, its records in order). */
export interface StoredRun extends RunSummary {
  readonly spans: readonly MaterializedSpan[]
  readonly records?: readonly TraceRecord[]
}

export interface GetRunOptions {
  readonly includeRecords?: boolean
}

/** Which runs: a run matches when it has any of each list's values. */
export interface TraceDeleteQuery {
  readonly runId?: string | readonly string[]
  /** Inclusive, ISO-8601. */
  readonly startedAfter?: string
  /** Exclusive, ISO-8601. */
  readonly startedBefore?: string
  readonly status?: readonly RunStatus['code'][]
  readonly agent?: readonly string[]
  readonly taskId?: readonly string[]
  readonly model?: readonly string[]
  readonly provider?: readonly string[]
}

export interface TraceQuery extends TraceDeleteQuery {
  /** 1 to 500 (50). */
  readonly limit?: number
  /** A page's `nextCursor`. */
  readonly cursor?: string
  readonly order?: 'started_desc' | 'started_asc'
}

/** Runs that started more than `maxAgeMs` ago and all but the newest `maxRuns`, among `statuses` when given. */
export interface RetentionPolicy {
  readonly maxAgeMs?: number
  readonly maxRuns?: number
  readonly statuses?: readonly RunStatus['code'][]
}

/** Where records are kept and read back by run; `append` is atomic per batch and keeps one copy of each recordId. */
export interface TraceStore {
  append(records: readonly TraceRecord[]): Promise<AppendResult>
  getRun(runId: string, options?: GetRunOptions): Promise<StoredRun | null>
  queryRuns(query?: TraceQuery): Promise<Page<RunSummary>>
  deleteRun(runId: string): Promise<DeleteResult>
  delete(query: TraceDeleteQuery): Promise<DeleteResult>
  applyRetention(policy: RetentionPolicy): Promise<DeleteResult>
}

export interface InMemoryTraceStoreOptions {
  /** The clock retention reads (milliseconds since the epoch). */
  readonly now?: () => number
  readonly onDiagnostic?: (diagnostic: TraceStoreDiagnostic) => void
}

/** OMA's non-durable trace store, for tests and short-lived local runs. */
export declare class InMemoryTraceStore implements TraceStore {
  constructor(options?: InMemoryTraceStoreOptions)
  append(records: readonly TraceRecord[]): Promise<AppendResult>
  getRun(runId: string, options?: GetRunOptions): Promise<StoredRun | null>
  queryRuns(query?: TraceQuery): Promise<Page<RunSummary>>
  deleteRun(runId: string): Promise<DeleteResult>
  delete(query: TraceDeleteQuery): Promise<DeleteResult>
  applyRetention(policy: RetentionPolicy): Promise<DeleteResult>
  /** Every record kept, by run in the order runs started, each run's in order (copies). */
  records(): TraceRecord[]
}

/** A TraceExporter appending each batch to a store (a refused record fails the batch for good). */
export declare class TraceStoreExporter implements TraceExporter {
  constructor(store: Pick<TraceStore, 'append'>)
  export(records: readonly TraceRecord[], signal: AbortSignal): Promise<ExportResult>
}

/**
 * One run's records, in any order, as OMA's stored run (null for no records); a record that is
 * not what the schema says is refused with a TypeError naming it.
 */
export declare function materializeRun(records: readonly TraceRecord[], includeRecords?: boolean): StoredRun | null

/** A dependency between tasks of two different worker roles. */
export interface ExecutionReceiptDependencyEdge {
  readonly from: string
  readonly to: string
}

/** An approval decision the result carries. */
export interface ExecutionReceiptApprovalDecision {
  readonly requestId: string
  readonly scope: 'plan' | 'task_round' | 'task_dispatch' | 'tool_call'
  readonly requestHash: string
  readonly decision: 'approved' | 'rejected'
  readonly reviewerId: string
  readonly reviewerDisplayName?: string
  readonly decidedAt: string
}

/** The facts of an execution, from its result and legacy trace events (never from agent text). */
export interface ExecutionReceipt {
  readonly id?: string
  readonly routingDecisionId?: string
  readonly routingDecisionSpanId?: string
  readonly flags?: readonly RunFlag[]
  readonly mode: 'single' | 'multi-agent'
  readonly rolesExecuted: readonly string[]
  readonly workerInstancesExecuted?: readonly string[]
  readonly taskRolesExecuted?: readonly string[]
  readonly executionOrder: readonly string[]
  readonly dependencyEdges: readonly ExecutionReceiptDependencyEdge[]
  readonly independentRolesCount: number
  readonly independentReviewOccurred: boolean
  readonly approvalDecisions?: readonly ExecutionReceiptApprovalDecision[]
  readonly totalTokens: { readonly input: number; readonly output: number } | null
  readonly durationMs: number | null
  /** Something the receipt needed could not be read. */
  readonly partial: boolean
}

/**
 * OMA's execution receipt of a run's result (an AgentRunResult, or a team's result as OMA
 * makes it) and, optionally, its legacy trace events; never throws on what it reads.
 */
export declare function buildExecutionReceipt(result: AgentRunResult | object, trace?: readonly TraceEvent[]): ExecutionReceipt
