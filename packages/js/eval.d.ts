// Types for `oma-component/eval` (OMA: `@open-multi-agent/core/eval`).
import type { AgentConfig, AgentRunResult, RunIdentity, RunStatus, StructuredTraceError, TokenUsage, TraceAttributeValue, ZodSchema } from './index.js'
import type { FlushOptions, FlushResult } from './observability.js'

/** A cost in one currency. */
export interface RunCostSummary { readonly amount: number; readonly currency: string }

export interface EvalCase {
  readonly id: string
  readonly input: unknown
  readonly expected?: unknown
  readonly tags?: readonly string[]
  readonly metadata?: Readonly<Record<string, TraceAttributeValue>>
}

/** A versioned collection of evaluation cases. Bump `version` whenever cases change. */
export interface EvalSet {
  readonly name: string
  readonly version: string
  readonly description?: string
  readonly cases: readonly EvalCase[]
  readonly defaults?: { readonly repeats?: number; readonly concurrency?: number }
}

/** Checks, copies and freezes an eval set; an `EvalDefinitionError` names what is wrong. */
export declare function defineEvalSet(set: EvalSet): EvalSet

/** A definition (eval set, gate policy) that is not one: `field` says where (`cases[1].id`). */
export declare class EvalDefinitionError extends TypeError {
  readonly field: string
}

export interface ScorerContext {
  readonly evalCase: EvalCase
  readonly output: unknown
  readonly result?: AgentRunResult
  readonly trace?: unknown
  readonly metadata: Readonly<Record<string, TraceAttributeValue>>
  readonly signal: AbortSignal
}

/** A score in [0, 1]. A scorer's failure is thrown, never a score of zero. */
export interface ScoreResult {
  readonly score: number
  readonly pass?: boolean
  readonly reason?: string
  readonly details?: Readonly<Record<string, TraceAttributeValue>>
}

export interface Scorer {
  readonly name: string
  readonly version?: string
  readonly timeoutMs?: number
  score(context: ScorerContext): Promise<ScoreResult> | ScoreResult
}

export declare function defineScorer(scorer: Scorer): Scorer

export interface EvalTargetContext {
  readonly caseId: string
  readonly repeat: number
  readonly signal: AbortSignal
  readonly metadata: Readonly<Record<string, TraceAttributeValue>>
}

export interface TargetOutput {
  readonly output: unknown
  readonly result?: AgentRunResult
}

export type EvalTarget = (input: unknown, context: EvalTargetContext) => Promise<TargetOutput>

export interface TargetFromRunOptions {
  readonly metadata?: Readonly<Record<string, TraceAttributeValue>>
}

/** One agent configuration as a target: each sample a `runAgent` run. */
export declare function targetFromAgent(agent: AgentConfig, options?: TargetFromRunOptions): EvalTarget

export interface EvalRecord {
  readonly schemaVersion: 1
  readonly recordId: string
  readonly evalRunId: string
  readonly source: 'offline' | 'online'
  readonly timestampUnixMs: number
  readonly evalSet?: { readonly name: string; readonly version: string }
  readonly caseId?: string
  readonly repeat?: number
  readonly scorer: { readonly name: string; readonly version?: string }
  readonly status: 'scored' | 'scorer_error' | 'target_error' | 'skipped'
  readonly score?: number
  readonly pass?: boolean
  readonly reason?: string
  readonly details?: Readonly<Record<string, TraceAttributeValue>>
  readonly runRef?: { readonly runId: string; readonly attempt: number; readonly traceId: string; readonly rootSpanId: string }
  readonly metadata: Readonly<Record<string, TraceAttributeValue>>
  readonly usage?: { readonly tokens?: TokenUsage; readonly cost?: RunCostSummary; readonly durationMs?: number }
  readonly error?: StructuredTraceError
  readonly payload?: { readonly input?: string; readonly output?: string; readonly expected?: string }
}

export interface ScorerAggregate {
  readonly scorer: { readonly name: string; readonly version?: string }
  readonly scoredCount: number
  readonly errorCount: number
  readonly avg: number
  readonly p50: number
  readonly p95: number
  readonly min: number
  readonly max: number
  readonly passRate?: number
  readonly byTag?: Readonly<Record<string, ScorerAggregate>>
}

export interface EvalRunReport {
  readonly schemaVersion: 1
  readonly evalRunId: string
  readonly startedAtUnixMs: number
  readonly durationMs: number
  readonly evalSet: { readonly name: string; readonly version: string }
  readonly metadata: Readonly<Record<string, TraceAttributeValue>>
  readonly caseCount: number
  readonly repeats: number
  readonly aborted?: boolean
  readonly warnings?: readonly string[]
  readonly records: readonly EvalRecord[]
  readonly aggregates: readonly ScorerAggregate[]
  readonly totals: { readonly tokens?: TokenUsage; readonly costs?: readonly RunCostSummary[]; readonly targetErrors: number }
}

export interface EvalProgressEvent {
  readonly type: 'case_start' | 'case_done' | 'scorer_error' | 'target_error'
  readonly caseId: string
  readonly repeat: number
  readonly scorer?: string
}

export interface RunEvalOptions {
  readonly scorers: readonly Scorer[]
  readonly repeats?: number
  readonly concurrency?: number
  readonly filterTags?: readonly string[]
  readonly metadata?: Readonly<Record<string, TraceAttributeValue>>
  /** Gives scorers the run's trace: anything with `getRun(runId)`. */
  readonly traceStore?: { getRun(runId: string): Promise<unknown> | unknown }
  readonly store?: EvalStore
  readonly evalRunId?: string
  readonly storePayloads?: 'none' | 'redacted' | 'full'
  readonly signal?: AbortSignal
  readonly onProgress?: (event: EvalProgressEvent) => void
}

export declare function runEvalSet(set: EvalSet, target: EvalTarget, options: RunEvalOptions): Promise<EvalRunReport>

export type GateMetric = 'avg' | 'p50' | 'p95' | 'min' | 'passRate'
export interface GateThreshold {
  readonly scorer: string
  readonly metric: GateMetric
  readonly min?: number
  readonly max?: number
  readonly tag?: string
}
export interface GatePolicy {
  readonly schemaVersion: 1
  readonly thresholds: readonly GateThreshold[]
  readonly maxScorerErrorRate?: number
  readonly maxTargetErrorRate?: number
  readonly baseline?: {
    readonly maxRegression?: number
    readonly perScorer?: Readonly<Record<string, number>>
    readonly allowSetMismatch?: boolean
  }
}
export interface GateFailure {
  readonly kind: 'threshold' | 'regression' | 'scorer_health' | 'target_health' | 'baseline_mismatch' | 'missing_scorer'
  readonly scorer?: string
  readonly metric?: string
  readonly tag?: string
  readonly actual: number
  readonly limit: number
  readonly message: string
}
export interface GateVerdict {
  readonly pass: boolean
  readonly failures: readonly GateFailure[]
  readonly warnings: readonly string[]
}

export declare function evaluateGate(report: EvalRunReport, policy: GatePolicy, baseline?: EvalRunReport): GateVerdict

export declare const EVAL_STORE_SCHEMA_MAJOR: 1
export type EvalStoreErrorCode = 'INVALID_ARGUMENT' | 'INVALID_CURSOR' | 'UNSUPPORTED_SCHEMA_VERSION'
export declare class EvalStoreError extends Error {
  readonly code: EvalStoreErrorCode
  readonly field?: string
  constructor(code: EvalStoreErrorCode, message: string, field?: string)
}

export interface EvalQuery {
  readonly evalRunId?: string | readonly string[]
  readonly runId?: string | readonly string[]
  readonly evalSetName?: string
  readonly scorer?: readonly string[]
  readonly source?: 'offline' | 'online'
  readonly status?: readonly EvalRecord['status'][]
  readonly after?: string
  readonly before?: string
  readonly limit?: number
  readonly cursor?: string
  readonly order?: 'time_desc' | 'time_asc'
}
export interface EvalDeleteQuery {
  readonly evalRunId?: string | readonly string[]
  readonly evalSetName?: string
  readonly before?: string
}
export interface EvalRetentionPolicy {
  readonly maxAgeMs?: number
  readonly maxRecords?: number
  readonly sources?: readonly EvalRecord['source'][]
}
export interface AppendResult { readonly written: number; readonly deduplicated: number; readonly diagnostics: readonly unknown[] }
export interface DeleteResult { readonly runsDeleted: number; readonly recordsDeleted: number; readonly runIds: readonly string[] }
export interface Page<T> { readonly items: readonly T[]; readonly nextCursor?: string }

export interface EvalStore {
  append(records: readonly EvalRecord[]): Promise<AppendResult>
  query(query?: EvalQuery): Promise<Page<EvalRecord>>
  delete(query: EvalDeleteQuery): Promise<DeleteResult>
  applyRetention(policy: EvalRetentionPolicy): Promise<DeleteResult>
}

export interface InMemoryEvalStoreOptions {
  readonly maxRecords?: number
  readonly now?: () => number
}

export declare class InMemoryEvalStore implements EvalStore {
  constructor(options?: InMemoryEvalStoreOptions)
  append(records: readonly EvalRecord[]): Promise<AppendResult>
  query(query?: EvalQuery): Promise<Page<EvalRecord>>
  delete(query: EvalDeleteQuery): Promise<DeleteResult>
  applyRetention(policy: EvalRetentionPolicy): Promise<DeleteResult>
  /** The records kept, in the order they were appended. */
  records(): EvalRecord[]
}

/** OMA's `createJudgeScorer` options: each judge an agent configuration run on the prompt. */
export interface JudgeScorerOptions {
  readonly name: string
  readonly version?: string
  readonly judges: readonly AgentConfig[]
  /** Judges that must say pass for the scorer to pass; half of them rounded up by default. */
  readonly quorum?: number
  /** A zod schema, or a JSON Schema object; OMA's `{score, reason}` by default. */
  readonly verdictSchema?: ZodSchema | Readonly<Record<string, unknown>>
  readonly judgePrompt?: string | ((context: ScorerContext) => string)
  readonly timeoutMs?: number
}

/** A scorer whose judges grade each sample; the mean of their scores, a quorum of passes. */
export declare function createJudgeScorer(options: JudgeScorerOptions): Scorer

export interface AnswerRelevancyScorerOptions extends Omit<JudgeScorerOptions, 'name' | 'verdictSchema' | 'judgePrompt'> {
  readonly name?: string
}
/** OMA's answer-relevancy judge (named `answer_relevancy` unless named). */
export declare function createAnswerRelevancyScorer(options: AnswerRelevancyScorerOptions): Scorer

export interface CostBudgetScorerOptions {
  readonly maxTokens?: number
  readonly maxCostAmount?: number
}
/** Hard token and observed-cost ceilings (`cost_budget`). */
export declare function costBudgetScorer(options: CostBudgetScorerOptions): Scorer
/** Dependency-bearing tasks completed with every dependency successful (`dependency_utilization`). */
export declare function dependencyUtilizationScorer(): Scorer
export interface DuplicateWorkScorerOptions {
  /** Similarity at or above this counts as duplicate work; 0.8 by default. */
  readonly threshold?: number
}
/** Pairwise uniqueness of a team's task outputs (`duplicate_work`). */
export declare function duplicateWorkScorer(options?: DuplicateWorkScorerOptions): Scorer
export interface NoProgressScorerOptions {
  /** Consecutive stalled attempts allowed; 2 by default. */
  readonly maxStallTurns?: number
}
/** Consecutive failed task attempts that called no tool (`no_progress`). */
export declare function noProgressScorer(options?: NoProgressScorerOptions): Scorer
/** Structured output present, and matching `schema` (zod or JSON Schema) when given. */
export declare function structuredOutputComplianceScorer(schema?: ZodSchema | Readonly<Record<string, unknown>>): Scorer
/** The share of recorded tool calls that succeeded (`tool_call_success`). */
export declare function toolCallSuccessScorer(): Scorer

/** What a sampling rule sees of a settled run. */
export interface OnlineSampleContext {
  readonly identity: RunIdentity
  readonly status: RunStatus
  readonly metadata: Readonly<Record<string, TraceAttributeValue>>
  readonly durationMs: number
}

export interface EvalDiagnostic {
  readonly code: 'queue_full' | 'budget_exhausted' | 'scorer_failed' | 'store_append_failed' | 'flush_timeout' | 'enqueue_after_shutdown'
  readonly severity: 'warning' | 'error'
  /** Occurrences since the last diagnostic of this code was emitted. */
  readonly count: number
  readonly scorerName?: string
  /** A fixed message: never run content or credentials. */
  readonly message: string
}

/** `evaluation` of `OpenMultiAgent`: scorers run on a sample of settled runs, after they return. */
export interface OnlineEvaluationConfig {
  readonly scorers: readonly Scorer[]
  /** A share in [0, 1], or a rule deciding per settled run. */
  readonly sample: number | ((context: OnlineSampleContext) => boolean)
  readonly maxConcurrent?: number
  readonly maxQueueLength?: number
  readonly budget?: { readonly maxEvaluationsPerMinute?: number; readonly maxCostPerHour?: number }
  readonly store?: EvalStore
  readonly storePayloads?: 'none' | 'redacted' | 'full'
  readonly onResult?: (record: EvalRecord) => void
  readonly onDiagnostic?: (diagnostic: EvalDiagnostic) => void
  readonly diagnostics?: 'warn' | 'silent'
}

export interface OnlineEvaluationStats {
  readonly sampled: number
  readonly enqueued: number
  readonly completed: number
  readonly dropped: number
  readonly failed: number
  readonly storeFailed: number
}

export interface OnlineEvaluationLifecycle {
  forceFlush(options?: FlushOptions): Promise<FlushResult>
  shutdown(options?: FlushOptions): Promise<FlushResult>
  getStats(): OnlineEvaluationStats
}
