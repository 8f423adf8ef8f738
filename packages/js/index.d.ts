// TypeScript declarations of oma-component: OMA's agent API (open-multi-agent 1.16.1) over
// oma_portable_json.wasm (world `portable-json`). The names and shapes are OMA's, inputs
// `readonly` as OMA declares them; the package adds the `video` block, `text_delta` stream
// events and its own options (`call`, `deadlineMs`, `thinkingBudget`, `aws`, the `evaluation` of
// `runAgent`).

// ---------------------------------------------------------------------------------------------
// Content blocks and messages

export interface TextBlock { readonly type: 'text'; readonly text: string }
export interface ReasoningBlock {
  readonly type: 'reasoning'
  readonly text: string
  readonly signature?: string
  readonly redactedData?: string
  readonly provenance?: string
}
export interface ToolUseBlock {
  readonly type: 'tool_use'
  readonly id: string
  readonly name: string
  readonly input: Record<string, unknown>
  readonly signature?: string
}
export type ToolResultMediaSource =
  | { readonly type: 'base64'; readonly media_type: string; readonly data: string }
  | { readonly type: 'url'; readonly media_type: string; readonly url: string }
export interface ToolResultTextPart { readonly type: 'text'; readonly text: string }
export interface ToolResultImagePart { readonly type: 'image'; readonly source: ToolResultMediaSource }
export interface ToolResultFilePart { readonly type: 'file'; readonly filename: string; readonly source: ToolResultMediaSource }
export type ToolResultContentPart = ToolResultTextPart | ToolResultImagePart | ToolResultFilePart
export type ToolResultContent = string | readonly ToolResultContentPart[]
export interface ToolResultBlock {
  readonly type: 'tool_result'
  readonly tool_use_id: string
  readonly content: ToolResultContent
  readonly is_error?: boolean
}
/** OMA's inline image; the package also takes an image by URL (checked like a video URL). */
export interface ImageBlock {
  readonly type: 'image'
  readonly source:
    | { readonly type: 'base64'; readonly media_type: string; readonly data: string }
    | { readonly type: 'url'; readonly media_type: string; readonly url: string }
}
/** The package's: a video, inline or by URL (OMA 1.16.1 has no video block). */
export interface VideoBlock { readonly type: 'video'; readonly source: ToolResultMediaSource }
export type ContentBlock = ReasoningBlock | TextBlock | ToolUseBlock | ToolResultBlock | ImageBlock | VideoBlock
export interface LLMMessage {
  readonly role: 'user' | 'assistant'
  readonly content: ContentBlock[]
}
export type AgentRunInput = string | readonly LLMMessage[]
export type AgentPromptInput = string | readonly ContentBlock[]

/** The package's earlier names. */
export type Base64Source = Extract<ToolResultMediaSource, { type: 'base64' }>
export type UrlSource = Extract<ToolResultMediaSource, { type: 'url' }>
export type MediaSource = ToolResultMediaSource
export type ToolResultPart = ToolResultContentPart

export interface TokenUsage { readonly input_tokens: number; readonly output_tokens: number }

// ---------------------------------------------------------------------------------------------
// Outcomes

export type RunStatusCode =
  | 'ok' | 'error' | 'cancelled' | 'timeout' | 'budget_exhausted' | 'rejected' | 'suspended' | 'skipped'
export interface RunStatus { readonly code: RunStatusCode; readonly message?: string }
export type TraceErrorKind =
  | 'provider' | 'tool' | 'framework' | 'callback' | 'validation' | 'timeout' | 'cancellation'
  | 'budget' | 'store' | 'exporter' | 'unknown'
export interface StructuredTraceError {
  readonly kind: TraceErrorKind
  readonly code?: string
  readonly name?: string
  readonly message?: string
  readonly retryable?: boolean
  readonly httpStatus?: number
  readonly provider?: string
  readonly attempt?: number
}
export type TraceAttributeValue =
  | string | number | boolean | readonly string[] | readonly number[] | readonly boolean[]
export interface TraceLink {
  readonly traceId: string
  readonly spanId: string
  readonly relation: 'continued_from' | 'depends_on' | 'consumed' | 'delegated_from'
  readonly attributes?: Readonly<Record<string, TraceAttributeValue>>
}
export type RunIdentityLink = TraceLink
export interface RunIdentity {
  readonly runId: string
  readonly attempt: number
  readonly traceId: string
  readonly rootSpanId: string
  readonly links?: readonly TraceLink[]
}
export type RunFlag = 'consequential-no-independence' | 'governance-overridden' | 'review-skipped-due-to-budget'
export interface RunOutcomeFields {
  readonly identity?: RunIdentity
  readonly status?: RunStatus
  readonly errorInfo?: StructuredTraceError
  readonly metadata?: Readonly<Record<string, TraceAttributeValue>>
  readonly flags?: readonly RunFlag[]
  readonly confirmationRequired?: boolean
}

/** One tool call of a run: OMA's record (`output` is the result's text, media as placeholders). */
export interface ToolCallRecord {
  readonly toolName: string
  readonly input: Record<string, unknown>
  readonly output: string
  /** Wall-clock duration in milliseconds. */
  readonly duration: number
}

/** OMA's AgentRunResult; `turns` is the package's (the number of model calls). */
export interface AgentRunResult extends RunOutcomeFields {
  readonly success: boolean
  readonly output: string
  readonly messages: LLMMessage[]
  readonly tokenUsage: TokenUsage
  readonly toolCalls: ToolCallRecord[]
  readonly structured?: unknown
  readonly loopDetected?: boolean
  readonly budgetExceeded?: boolean
  /** The failure as an error object (absent on success and for a spent budget). */
  readonly error?: unknown
  readonly turns?: number
}

export interface AgentState {
  status: 'idle' | 'running' | 'completed' | 'error'
  messages: LLMMessage[]
  tokenUsage: TokenUsage
  error?: Error
}

// ---------------------------------------------------------------------------------------------
// Streaming

/**
 * OMA's StreamEvent. `text` is a turn's text; `text_delta` (the package's, with `textDeltas: true`) carries the
 * provider's text pieces as they arrive; `done` carries the AgentRunResult, `error` the error
 * with `errorInfo`.
 */
export interface StreamEvent {
  readonly type:
    | 'text' | 'text_delta' | 'reasoning' | 'tool_use' | 'tool_result' | 'loop_detected'
    | 'budget_exceeded' | 'done' | 'error'
  readonly data: unknown
  readonly errorInfo?: StructuredTraceError
}

// ---------------------------------------------------------------------------------------------
// Tools

/** The zod schema a tool takes (any zod 3 type: the package reads it, it does not import zod). */
export interface ZodSchemaLike<T = unknown> {
  readonly _output: T
  safeParse(data: unknown): { success: true; data: T } | { success: false; error: { issues: readonly { path: readonly (string | number)[]; message: string }[] } }
}
/** OMA's name for a zod schema in tool definitions. */
export type ZodSchema<T = any> = ZodSchemaLike<T>

export interface AgentInfo { readonly name: string; readonly role: string; readonly model: string }
export interface TeamInfo { readonly name: string; readonly agents: readonly string[] }
export interface ShellExecutor {
  exec(command: string, options?: Record<string, unknown>): Promise<unknown>
}

export interface ToolUseContext {
  readonly agent: AgentInfo
  readonly team?: TeamInfo
  /** The run's `abortSignal`, when the caller gave one. */
  readonly abortSignal?: AbortSignal
  readonly abortController?: AbortController
  readonly shellExecutor?: ShellExecutor
  readonly cwd?: string | null
  readonly metadata?: Readonly<Record<string, unknown>>
  readonly runId?: string
  readonly taskId?: string
  /** The model's id for this call. */
  readonly toolCallId?: string
  readonly credentials?: Readonly<Record<string, string>>
  /** The package's earlier name of `toolCallId`. */
  readonly toolUseId?: string
  /** Gemini's thought signature of the call, when the model sent one. */
  readonly signature?: string
}

export interface ToolCallContext {
  readonly toolName: string
  readonly input: Record<string, unknown>
  readonly agentName: string
  readonly consequential?: boolean
  readonly runId?: string
  readonly taskId?: string
  readonly toolCallId?: string
}
export type ToolCallDecision =
  | { readonly action: 'allow' }
  | { readonly action: 'deny'; readonly reason?: string }
  | { readonly action: 'suspend'; readonly reason?: string }
export type ToolCallGate = (context: ToolCallContext) => ToolCallDecision | Promise<ToolCallDecision>
export interface ToolCallGateMetadata { readonly action: ToolCallDecision['action']; readonly reason?: string }
export interface ToolResultMetadata {
  readonly tokenUsage?: TokenUsage
  readonly toolCallGate?: ToolCallGateMetadata
}
export interface ToolResult<TData = string> {
  readonly data: TData
  readonly modelOutput?: ToolResultContent
  readonly isError?: boolean
  readonly metadata?: ToolResultMetadata
}
export interface ToolDefinition<TInput = Record<string, unknown>, TData = string> {
  readonly name: string
  readonly description: string
  readonly inputSchema: ZodSchema<TInput>
  readonly consequential?: boolean
  readonly outputSchema?: ZodSchema<TData>
  readonly llmInputSchema?: Record<string, unknown>
  readonly maxOutputChars?: number
  execute(input: TInput, context: ToolUseContext): Promise<ToolResult<TData>>
}
export interface LLMToolDef {
  readonly name: string
  readonly description: string
  readonly inputSchema: Record<string, unknown>
}

// ---------------------------------------------------------------------------------------------
// Your own LLM adapter

/** OMA's LLMResponse: what an adapter's `chat` returns (and its stream's `done` event carries). */
export interface LLMResponse {
  readonly id: string
  readonly content: ContentBlock[]
  readonly model: string
  readonly stop_reason: string
  readonly usage: TokenUsage
}

/** OMA's LLMChatOptions: the model, then what the agent sets (unset options are left out). */
export interface LLMChatOptions {
  readonly model: string
  readonly tools?: readonly LLMToolDef[]
  readonly maxTokens?: number
  readonly temperature?: number
  readonly frequencyPenalty?: number
  readonly presencePenalty?: number
  readonly topP?: number
  readonly topK?: number
  readonly minP?: number
  readonly parallelToolCalls?: boolean
  readonly extraBody?: Record<string, unknown>
  readonly thinking?: ThinkingConfig
  readonly preserveReasoningAsText?: boolean
  readonly compressReasoningText?: boolean | { readonly minChars?: number }
  readonly systemPrompt?: string
  /** Aborts with the caller's signal and at the call's time limit (`callTimeoutMs`, 10 minutes by default). */
  readonly abortSignal?: AbortSignal
}

/** OMA's LLMStreamOptions: the same as LLMChatOptions. */
export interface LLMStreamOptions extends LLMChatOptions {}

/**
 * OMA's LLMAdapter: the model behind an agent, written by the application. `chat` answers one
 * call whole (a promise or a value); `stream` yields `text`, `reasoning`, `tool_use`, then `done`
 * with the LLMResponse or `error` with the error (an async or a plain iterable). An error thrown
 * keeps its `name`, `message`, `code` and `status` (or `statusCode`), which classify the run's
 * failure as OMA classifies it.
 */
export interface LLMAdapter {
  readonly name: string
  chat(messages: LLMMessage[], options: LLMChatOptions): Promise<LLMResponse> | LLMResponse
  stream(messages: LLMMessage[], options: LLMStreamOptions): AsyncIterable<StreamEvent> | Iterable<StreamEvent>
  /** How the adapter echoes reasoning blocks back to its model; left out means `'never'`. */
  readonly capabilities?: { readonly echoesReasoning: 'never' | 'own-issued' | 'tool-use-only' }
}

/** The package's earlier tool objects in `tools`: a JSON Schema and a lenient `execute`. */
export interface JsonSchemaTool<I = any> {
  name: string
  description: string
  /** A JSON Schema object for the tool's input. */
  inputSchema?: Record<string, unknown>
  /** Returns text, tool-result parts, or `{data, isError}`; a throw is an error result. */
  execute(input: I, context: ToolUseContext):
    | ToolResultContent | { data: ToolResultContent; isError?: boolean }
    | Promise<ToolResultContent | { data: ToolResultContent; isError?: boolean }>
}

export declare function defineTool<TInput, TData = string>(config: {
  name: string
  description: string
  inputSchema: ZodSchema<TInput>
  consequential?: boolean
  outputSchema?: ZodSchema<TData>
  llmInputSchema?: Record<string, unknown>
  maxOutputChars?: number
  execute: (input: TInput, context: ToolUseContext) => Promise<ToolResult<TData>>
}): ToolDefinition<TInput, TData>

export declare function zodToJsonSchema(schema: ZodSchema): Record<string, unknown>
export declare function truncateToolOutput(data: string, maxChars: number): string

export declare class ToolRegistry {
  register(tool: ToolDefinition<any, any>, options?: { runtimeAdded?: boolean }): void
  get(name: string): ToolDefinition<any, any> | undefined
  list(): ToolDefinition<any, any>[]
  getAll(): ToolDefinition<any, any>[]
  has(name: string): boolean
  unregister(name: string): void
  deregister(name: string): void
  toToolDefs(): LLMToolDef[]
  toRuntimeToolDefs(): LLMToolDef[]
  toLLMTools(): Array<{ name: string; description: string; input_schema: Record<string, unknown> }>
}

export interface ToolExecutorOptions {
  maxConcurrency?: number
  maxToolOutputChars?: number
  onToolCall?: ToolCallGate
}
export interface ToolExecutorExecutionOptions { readonly onToolCall?: ToolCallGate }
export interface BatchToolCall { id: string; name: string; input: Record<string, unknown> }
export declare class ToolExecutor {
  constructor(registry: ToolRegistry, options?: ToolExecutorOptions)
  execute(toolName: string, input: Record<string, unknown>, context: ToolUseContext, options?: ToolExecutorExecutionOptions): Promise<ToolResult<any>>
  executeBatch(calls: BatchToolCall[], context: ToolUseContext): Promise<Map<string, ToolResult<any>>>
}

// AgentPool and the built-in tools: declared in pool.d.ts and builtin-tools.d.ts.
export { AgentPool, Semaphore, PoolStatus } from './pool.js'
export {
  registerBuiltInTools, RegisterBuiltInToolsOptions, BUILT_IN_TOOLS, ALL_BUILT_IN_TOOLS_WITH_DELEGATE,
  bashTool, fileReadTool, fileWriteTool, fileEditTool, grepTool, globTool, delegateToAgentTool,
  LocalShellExecutor, ShellExecOptions, ShellExecResult,
} from './builtin-tools.js'

// OMA's observability API, also on the main entry as OMA has it: declared in observability.d.ts.
export {
  BatchingTraceSink, CompositeSink, DEFAULT_BATCHING_OPTIONS, DiagnosticReporter, FilteringSink,
  InMemoryTraceStore, LegacyCallbackTraceSink, SensitiveDataProcessor, TRACE_STORE_SCHEMA_MAJOR,
  TraceStoreError, TraceStoreExporter, buildExecutionReceipt, emptyTraceSinkStats, materializeRun,
} from './observability.js'
export type {
  SpanEndRecord, SpanEventName, SpanEventRecord, SpanKind, SpanStartRecord, TraceRecord, TraceRecordBase,
  AppendResult, BatchingTraceSinkOptions, DeleteResult, DiagnosticMode, DiagnosticOptions, ExportResult,
  ExecutionReceipt, ExecutionReceiptApprovalDecision, ExecutionReceiptDependencyEdge, FlushOptions,
  FlushResult, GetRunOptions, InMemoryTraceStoreOptions, MaterializedSpan, ObservabilityConfig,
  ObservabilityResource, Page, RetentionPolicy, RunAttemptSummary, RunCostSummary, RunSummary,
  RunTokenSummary, SensitiveDataProcessorOptions, TelemetryDiagnostic, TelemetryDiagnosticCode,
  TraceCapturePolicy, TraceDeleteQuery, TraceExporter, TraceFilter, TraceQuery, TraceSink,
  TraceSinkStats, TraceStore, TraceStoreDiagnostic, TraceStoreDiagnosticCode, TraceStoreErrorCode,
  StoredRun,
} from './observability.js'
import type { ObservabilityConfig } from './observability.js'

// ---------------------------------------------------------------------------------------------
// Shared memory (OMA: memory/shared.ts, memory/store.ts)

/** One entry of a MemoryStore. */
export interface MemoryEntry {
  readonly key: string
  readonly value: string
  readonly metadata?: Readonly<Record<string, unknown>>
  /** When the key was first written. */
  readonly createdAt: Date
  /** The SharedMemory turn at which the entry stops being read (set by `writeExpiring`). */
  readonly expiresAtTurn?: number
}
/** Where a SharedMemory keeps its entries (OMA's interface: bring your own, e.g. Redis). */
export interface MemoryStore {
  get(key: string): Promise<MemoryEntry | null>
  set(key: string, value: string, metadata?: Record<string, unknown>): Promise<void>
  compareAndSet?(key: string, expectedValue: string | null, value: string, metadata?: Record<string, unknown>): Promise<boolean>
  setWithExpiry?(key: string, value: string, expiresAtTurn: number, metadata?: Record<string, unknown>): Promise<void>
  list(): Promise<MemoryEntry[]>
  delete(key: string): Promise<void>
  clear(): Promise<void>
}
/** OMA's MemoryStore in a Map. */
export declare class InMemoryStore implements MemoryStore {
  get(key: string): Promise<MemoryEntry | null>
  set(key: string, value: string, metadata?: Record<string, unknown>): Promise<void>
  compareAndSet(key: string, expectedValue: string | null, value: string, metadata?: Record<string, unknown>): Promise<boolean>
  setWithExpiry(key: string, value: string, expiresAtTurn: number, metadata?: Record<string, unknown>): Promise<void>
  list(): Promise<MemoryEntry[]>
  delete(key: string): Promise<void>
  clear(): Promise<void>
  search(query: string): Promise<MemoryEntry[]>
  readonly size: number
  has(key: string): boolean
}
export type SharedMemoryValue =
  | string | number | boolean | null | readonly SharedMemoryValue[] | { readonly [key: string]: SharedMemoryValue }
export interface SharedMemoryEntry extends Omit<MemoryEntry, 'value'> {
  readonly value: SharedMemoryValue
}
export interface SharedMemoryWriteOptions {
  /** A zod schema the value must pass (its parsed value is stored). */
  readonly schema?: ZodSchema<SharedMemoryValue>
}
export interface MemoryEntrySnapshot {
  readonly key: string
  readonly value: string
  readonly metadata?: Readonly<Record<string, unknown>>
  readonly createdAt: string
  readonly expiresAtTurn?: number
}
export interface SharedMemorySnapshot {
  readonly version: 1
  readonly turnCount: number
  readonly entries: readonly MemoryEntrySnapshot[]
}
/** OMA's SharedMemory: agents' namespaced entries (`<agent>/<key>`), turn expiry, a Markdown summary. */
export declare class SharedMemory {
  constructor(store?: MemoryStore)
  advanceTurn(): void
  getTurnCount(): number
  setTurnCount(turnCount: number): void
  snapshot(): Promise<SharedMemorySnapshot>
  static fromSnapshot(snapshot: SharedMemorySnapshot, store?: MemoryStore): Promise<SharedMemory>
  restore(snapshot: SharedMemorySnapshot): Promise<void>
  write<TValue extends SharedMemoryValue>(agentName: string, key: string, value: TValue, metadata?: Record<string, unknown>, options?: SharedMemoryWriteOptions): Promise<void>
  writeExpiring(agentName: string, key: string, value: SharedMemoryValue, ttlTurns: number, metadata?: Record<string, unknown>, options?: SharedMemoryWriteOptions): Promise<void>
  read(key: string): Promise<SharedMemoryEntry | null>
  listAll(): Promise<SharedMemoryEntry[]>
  listByAgent(agentName: string): Promise<SharedMemoryEntry[]>
  getSummary(filter?: { taskIds?: string[] }): Promise<string>
  getStore(): MemoryStore
}

// ---------------------------------------------------------------------------------------------
// Agent configuration

export interface BeforeRunHookContext {
  /** The text blocks of the latest user message, joined with no separator. */
  readonly prompt: string
  readonly messages: readonly LLMMessage[]
  /** The agent's configuration, without `beforeRun`, `afterRun`, `apiKey`, `credentials` and `aws`. */
  readonly agent: AgentConfig
  /** The package's: the component's view of the configuration (no hooks, no secrets). */
  readonly config?: Record<string, unknown>
}
export interface BeforeRunHookResult {
  readonly prompt: string
  readonly messages?: readonly LLMMessage[]
  /** Informational, as in OMA: it is not read back. */
  readonly agent?: AgentConfig
}
/** The package's earlier names. */
export type BeforeRunContext = BeforeRunHookContext
export type BeforeRunResult = BeforeRunHookResult

export type EgressPolicy =
  | { readonly mode: 'offline' }
  | { readonly mode: 'allowlist'; readonly allowedOrigins: readonly string[] }

export interface ThinkingConfig {
  readonly enabled: boolean
  readonly budgetTokens?: number
  /** Not supported by the package (a configuration with it is refused). */
  readonly effort?: 'low' | 'medium' | 'high' | 'max'
}

/** OMA's process backend; `timeoutMs` is the package's (the child is killed past it). */
export interface ProcessAgentBackendConfig {
  readonly kind: 'process'
  readonly command: string
  readonly args?: readonly string[]
  readonly env?: Readonly<Record<string, string>>
  readonly cwd?: string
  readonly input?: 'stdin' | 'argument' | 'none'
  readonly timeoutMs?: number
}
/** OMA's ACP backend; the package speaks no ACP itself: give `send` (the package's). */
export interface AgentBackendConfig {
  readonly kind: 'acp'
  readonly command: string
  readonly args?: readonly string[]
  readonly env?: Readonly<Record<string, string>>
  readonly cwd?: string
  readonly permission?: 'auto-approve' | 'reject' | ((request: { title: string; kind?: string; optionKinds: readonly string[] }) => boolean | Promise<boolean>)
  readonly send?: (text: string, info: { kind: 'process' | 'acp'; abortSignal?: AbortSignal }) => string | Promise<string>
}
export interface AcpAgentBackendConfig extends AgentBackendConfig {}
/** The package's: any external text-only backend, `send` gets the text and returns the output. */
export interface CustomBackend {
  readonly kind: 'process' | 'acp'
  send(text: string, info: { kind: 'process' | 'acp'; abortSignal?: AbortSignal }): string | Promise<string>
}
export type ExternalAgentBackendConfig = AgentBackendConfig | ProcessAgentBackendConfig | CustomBackend
/** The package's earlier name. */
export type ProcessBackend = ProcessAgentBackendConfig

/** The package's provider-call options (see the README); unknown keys are refused. */
export interface CallOptions {
  readonly maxRetries?: number
  readonly retryDelayMs?: number
  readonly retryBackoff?: number
  /** Connecting and the head; then each gap of a stream, or a whole response to its last byte (120 s). */
  readonly timeoutMs?: number
  /** The largest response body, counted as it arrives (32 MiB). */
  readonly maxResponseBytes?: number
  /** One call with its retries and waits (10 min). */
  readonly deadlineMs?: number
  /** `"open"` (default), `"offline"`, or a list of allowed origins. */
  readonly egress?: 'open' | 'offline' | readonly string[]
}

/** The providers the component speaks (OMA's names), or any name with `baseURL`. */
export type SupportedProvider =
  | 'anthropic' | 'openai' | 'gemini' | 'bedrock' | 'ai-sdk' | 'grok' | 'minimax' | 'deepseek'
  | 'mimo' | 'doubao' | 'hunyuan' | 'qiniu' | 'azure-openai' | 'copilot' | (string & {})

/**
 * OMA's AgentConfig. Keys the package does not implement are typed as OMA types them and are
 * refused at run time with a message (see "OMA's agent API" in the README).
 */
export interface AgentConfig {
  readonly name: string
  readonly history?: readonly LLMMessage[]
  readonly description?: string
  readonly capabilities?: readonly string[]
  readonly costTier?: 'low' | 'medium' | 'high'
  readonly latencyClass?: 'low' | 'medium' | 'high'
  readonly permissionBoundary?: string
  /** Required outside OpenMultiAgent (which fills in `defaultModel`), unless `backend` is set. */
  readonly model?: string
  /**
   * OMA's own LLM adapter: every model call goes to its `chat` (its `stream` when `textDeltas`
   * asks for a streamed run's text pieces) instead of a provider; the answers are checked as OMA
   * types them. `provider` may be left out (when given, it only classifies failures).
   */
  readonly adapter?: LLMAdapter
  readonly backend?: ExternalAgentBackendConfig
  /** Default `anthropic`. */
  readonly provider?: SupportedProvider
  /** As OMA's SDKs: Anthropic posts to `{baseURL}/v1/messages`, OpenAI-compatible to `{baseURL}/chat/completions`. */
  readonly baseURL?: string
  readonly egressPolicy?: EgressPolicy
  /** Falls back to the provider's usual environment variable (`ANTHROPIC_API_KEY`, ...). */
  readonly apiKey?: string
  /** Bedrock; falls back to `AWS_REGION`, then `us-east-1`. */
  readonly region?: string
  readonly systemPrompt?: string
  readonly customTools?: readonly ToolDefinition<any, any>[]
  /** Names of registry tools; the package's JSON Schema tool objects are taken too. */
  readonly tools?: readonly (string | JsonSchemaTool)[]
  readonly disallowedTools?: readonly string[]
  readonly onToolCall?: ToolCallGate
  readonly toolPreset?: 'readonly' | 'readwrite' | 'full'
  readonly credentials?: Readonly<Record<string, string>>
  readonly shellExecutor?: ShellExecutor
  readonly cwd?: string | null
  readonly maxTurns?: number
  readonly maxTokens?: number
  readonly maxTokenBudget?: number
  readonly contextStrategy?: ContextStrategy
  readonly temperature?: number
  readonly frequencyPenalty?: number
  readonly presencePenalty?: number
  readonly topP?: number
  readonly topK?: number
  readonly minP?: number
  readonly parallelToolCalls?: boolean
  readonly extraBody?: Record<string, unknown>
  readonly thinking?: ThinkingConfig
  /** The most one run may take (the component's run deadline); past it the run ends with `timeout`. */
  readonly timeoutMs?: number
  /** The most one model call may take, its retries included (the component's `call.deadlineMs`). */
  readonly callTimeoutMs?: number
  readonly loopDetection?: LoopDetectionConfig
  readonly maxToolOutputChars?: number
  readonly compressToolResults?: boolean | { readonly minChars?: number }
  readonly preserveReasoningAsText?: boolean
  readonly compressReasoningText?: boolean | { readonly minChars?: number }
  /**
   * OMA's: the final answer must be JSON matching this zod schema (validated with zod, as OMA
   * does), or, the package's, this JSON Schema object (validated by the component). One retry
   * with OMA's feedback; the value is `result.structured`.
   */
  readonly outputSchema?: ZodSchema | { readonly [key: string]: unknown } | boolean
  readonly beforeRun?: (context: BeforeRunHookContext) => Promise<BeforeRunHookResult> | BeforeRunHookResult
  readonly afterRun?: (result: AgentRunResult) => Promise<AgentRunResult> | AgentRunResult
  /** The package's: the extended-thinking budget in tokens (as `thinking.budgetTokens`). */
  readonly thinkingBudget?: number
  /** The package's: as `timeoutMs`. */
  readonly deadlineMs?: number
  /** The package's provider-call options. */
  readonly call?: CallOptions
  /** The package's: SigV4 credentials for Bedrock. */
  readonly aws?: { readonly accessKeyId: string; readonly secretAccessKey: string; readonly sessionToken?: string }
  /**
   * The package's: `stream` also yields `text_delta` events (the provider's text pieces as they
   * arrive). Off by default: OMA's stream yields no such event.
   */
  readonly textDeltas?: boolean
}

export interface LoopDetectionConfig {
  readonly maxRepetitions?: number
  readonly loopDetectionWindow?: number
  readonly onLoopDetected?: 'warn' | 'terminate' | ((info: LoopDetectionInfo) => 'continue' | 'inject' | 'terminate' | Promise<'continue' | 'inject' | 'terminate'>)
}
export interface LoopDetectionInfo {
  readonly kind: 'tool_repetition' | 'text_repetition'
  readonly repetitions: number
  readonly detail: string
}
export type ContextStrategy =
  | { type: 'sliding-window'; maxTurns: number }
  | { type: 'summarize'; maxTokens: number; summaryModel?: string }
  | { type: 'compact'; maxTokens: number; preserveRecentTurns?: number; minToolResultChars?: number; minTextBlockChars?: number; textBlockExcerptChars?: number }
  | { type: 'custom'; compress: (messages: LLMMessage[], estimatedTokens: number) => Promise<LLMMessage[]> | LLMMessage[] }

/** OMA's per-run options of `run`, `stream` and `prompt`; the package acts on those documented. */
export interface RunOptions {
  /** Cancels the run: the request in flight, a retry wait, pending tools (which get the signal). */
  readonly abortSignal?: AbortSignal
  readonly runId?: string
  /** Fired just before each tool is dispatched. */
  readonly onToolCall?: (name: string, input: Record<string, unknown>) => void
  /** Fired after each tool result. */
  readonly onToolResult?: (name: string, result: ToolResult<any>) => void
  readonly onMessage?: (message: LLMMessage) => void
  readonly onWarning?: (message: string) => void
  readonly onTrace?: (event: TraceEvent) => void | Promise<void>
  readonly taskId?: string
  readonly traceAgent?: string
  readonly traceSpanId?: string
  readonly traceParentId?: string
  readonly metadata?: Readonly<Record<string, TraceAttributeValue>>
}

export declare class Agent {
  /** Throws (synchronously) for an invalid configuration or history. */
  constructor(config: AgentConfig, toolRegistry?: ToolRegistry, toolExecutor?: ToolExecutor)
  readonly name: string
  readonly config: AgentConfig
  /** Rejects with InvalidMessageError for invalid input; any later failure is `success: false`. */
  run(input: AgentRunInput, runOptions?: Partial<RunOptions>): Promise<AgentRunResult>
  /** Throws at the call for invalid input; a failure later is an `error` event. */
  stream(input: AgentRunInput, runOptions?: Partial<RunOptions>): AsyncGenerator<StreamEvent>
  prompt(input: AgentPromptInput, runOptions?: Partial<RunOptions>): Promise<AgentRunResult>
  getHistory(): LLMMessage[]
  getState(): AgentState
  reset(): void
  addTool(tool: ToolDefinition<any, any>): void
  removeTool(name: string): void
  getTools(): string[]
}

// ---------------------------------------------------------------------------------------------
// runAgent, OpenMultiAgent

export interface OrchestratorEvent {
  readonly type:
    | 'agent_start' | 'agent_complete' | 'task_start' | 'task_complete' | 'task_skipped'
    | 'task_retry' | 'approval_pending' | 'plan_revision' | 'recovery_decision'
    | 'budget_exceeded' | 'message' | 'warning' | 'error'
  readonly agent?: string
  readonly task?: string
  readonly data?: unknown
}
/** The package's earlier name. */
export type ProgressEvent = OrchestratorEvent

export interface RunIdentityOptions {
  readonly runId?: string
  readonly metadata?: Readonly<Record<string, TraceAttributeValue>>
  readonly egressPolicy?: EgressPolicy
}
export interface RunAgentOptions extends RunIdentityOptions {
  readonly abortSignal?: AbortSignal
}

/** OMA's OrchestratorConfig; the package applies the defaults, the budget and `onProgress`. */
export interface OrchestratorConfig {
  readonly maxConcurrency?: number
  readonly maxTokenBudget?: number
  readonly defaultModel?: string
  readonly defaultProvider?: SupportedProvider
  readonly defaultBaseURL?: string
  readonly defaultApiKey?: string
  readonly egressPolicy?: EgressPolicy
  readonly defaultCwd?: string | null
  readonly defaultShellExecutor?: ShellExecutor
  readonly onProgress?: (event: OrchestratorEvent) => void
  readonly onToolCall?: ToolCallGate
  readonly onTrace?: (event: TraceEvent) => void | Promise<void>
  /**
   * OMA's observability: every run's trace records (schema v2) to `sinks`, processed by
   * `capture`; the application owns the sinks' `forceFlush` and `shutdown`.
   */
  readonly observability?: ObservabilityConfig
  readonly onAgentStream?: (agentName: string, event: StreamEvent) => void
  /** Online evaluation of a sample of the orchestrator's settled runs (`oma-component/eval`). */
  readonly evaluation?: import('./eval.js').OnlineEvaluationConfig
}

export declare class OpenMultiAgent {
  constructor(config?: OrchestratorConfig)
  /** The online evaluation's lifecycle; a no-op without `evaluation`. */
  readonly evaluation: import('./eval.js').OnlineEvaluationLifecycle
  runAgent(config: AgentConfig, input: AgentRunInput, options?: RunAgentOptions): Promise<AgentRunResult>
}

/** An online-evaluation case of the package's `runAgent`. */
export interface EvaluationCase {
  readonly agent: string
  /** The scorer input under the payload policy. */
  readonly input: string
  /** Absent under `storePayloads: 'none'`. */
  readonly payload?: { readonly input: string; readonly output: string }
  readonly result: AgentRunResult
  readonly durationMs: number
}
/** The package's `runAgent` options: progress, online evaluation, and OMA's run options. */
export interface PackageRunAgentOptions extends RunAgentOptions {
  readonly onProgress?: (event: OrchestratorEvent) => void | Promise<void>
  readonly evaluation?: {
    readonly sampleRate?: number
    readonly storePayloads?: 'none' | 'redacted' | 'full' | boolean
    readonly onCase?: (evaluationCase: EvaluationCase) => void | Promise<void>
  }
}

export declare function runAgent(config: AgentConfig, input: AgentRunInput, options?: PackageRunAgentOptions): Promise<AgentRunResult>

// ---------------------------------------------------------------------------------------------
// Errors

export interface OMAErrorOptions { name?: string; code?: string; type?: string; retryable?: boolean; httpStatus?: number; provider?: string }
/** The package's base class of every error it reports. */
export declare class OMAError extends Error {
  constructor(message: string, options?: OMAErrorOptions)
  /** OMA's code; for a provider failure, the provider's own code when it sent one. */
  code?: string
  /** The provider's error type, when its error body has one (e.g. `invalid_request_error`). */
  type?: string
  retryable: boolean
  httpStatus?: number
  /** The HTTP status, as OMA's users read it from the provider SDKs' errors (`httpStatus` too). */
  status?: number
  provider?: string
}
export declare class InvalidMessageError extends OMAError {
  readonly code: 'INVALID_MESSAGE'
  constructor(message: string)
}
/** OMA's: an adapter with no wire mapping for a whole content block; terminal. */
export declare class UnsupportedContentBlockError extends OMAError {
  readonly code: 'UNSUPPORTED_CONTENT_BLOCK'
  /** The adapter that refused the block, e.g. `'Anthropic Messages'`. */
  readonly provider: string
  /** The refused block's type, e.g. `'video'`. */
  readonly blockType: ContentBlock['type']
  constructor(provider: string, blockType: ContentBlock['type'], detail?: string)
}
export declare class UnsupportedToolResultContentError extends OMAError {
  readonly code: 'UNSUPPORTED_TOOL_RESULT_CONTENT'
  readonly provider: string
  readonly contentType: string
  constructor(provider: string, contentType: string, detail?: string)
}
export declare class UnsupportedToolCallError extends OMAError {
  readonly code: 'UNSUPPORTED_TOOL_CALL'
  readonly provider: string
  readonly toolType: string
  constructor(provider: string, toolType: string)
}
export declare class TokenBudgetExceededError extends OMAError {
  readonly code: 'TOKEN_BUDGET_EXCEEDED'
  readonly agent: string
  readonly tokensUsed: number
  readonly budget: number
  constructor(agent: string, tokensUsed: number, budget: number)
}
export declare class CostBudgetExceededError extends OMAError {
  readonly code: 'COST_BUDGET_EXCEEDED'
  readonly agent: string
  readonly costUsed: number
  readonly budget: number
  constructor(agent: string, costUsed: number, budget: number)
}
export declare class LLMCallTimeoutError extends OMAError {
  readonly code: 'LLM_CALL_TIMEOUT'
  readonly timeoutMs: number
  readonly agent?: string
  constructor(timeoutMs: number, agent?: string)
}
export type EgressPolicyErrorReason = 'invalid-policy' | 'denied' | 'unsupported' | 'unresolved-target'
export declare class EgressPolicyError extends OMAError {
  readonly code: string
  readonly reason: EgressPolicyErrorReason
  readonly origin?: string
  constructor(reason: EgressPolicyErrorReason, message: string, provider?: string, origin?: string)
}
export declare class StructuredOutputValidationError extends OMAError {
  readonly code: 'STRUCTURED_OUTPUT_VALIDATION_FAILED'
  constructor(cause?: unknown)
}
export declare class ProviderError extends OMAError {
  constructor(message: string, options?: OMAErrorOptions)
}
export declare class SessionStateError extends OMAError {
  constructor(message: string, options?: OMAErrorOptions)
}
export declare function isRetryableError(error: unknown): boolean

/** The options of `classifyRunFailure`. */
export interface FailureClassificationOptions {
  readonly kind?: TraceErrorKind
  readonly provider?: string
  readonly attempt?: number
  readonly statusCode?: RunStatusCode
}
/**
 * OMA's `classifyRunFailure`: the `status` and `errorInfo` that describe a failure (budget,
 * timeout, egress refusal, cancellation, provider error or else), messages redacted and cut.
 */
export declare function classifyRunFailure(
  error: unknown,
  options?: FailureClassificationOptions,
): { status: RunStatus; errorInfo: StructuredTraceError }
/** Fields every trace event carries (OMA's `TraceEventBase`). */
export interface TraceEventBase {
  readonly runId: string
  readonly type: 'llm_call' | 'tool_call' | 'agent'
  readonly startMs: number
  readonly endMs: number
  readonly durationMs: number
  readonly agent: string
  readonly taskId?: string
  readonly spanId: string
  readonly parentId?: string
}
/** One model call that answered. */
export interface LLMCallTrace extends TraceEventBase {
  readonly type: 'llm_call'
  readonly model: string
  readonly phase: 'turn' | 'summary'
  readonly turn: number
  readonly tokens: TokenUsage
}
/** One answered tool call; `input` redacted, `output` as text with media as placeholders. */
export interface ToolCallTrace extends TraceEventBase {
  readonly type: 'tool_call'
  readonly tool: string
  readonly isError: boolean
  readonly input?: Record<string, unknown>
  readonly output?: string
}
/** One run of an agent. */
export interface AgentTrace extends TraceEventBase {
  readonly type: 'agent'
  readonly turns: number
  readonly tokens: TokenUsage
  readonly toolCalls: number
}
/** OMA's trace events as `onTrace` receives them. */
export type TraceEvent = LLMCallTrace | ToolCallTrace | AgentTrace
