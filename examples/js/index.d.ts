// TypeScript declarations of oma-component: OMA's Agent and runAgent over oma_portable.wasm.

export interface TextBlock { type: 'text'; text: string }
export interface ReasoningBlock { type: 'reasoning'; text: string; signature?: string; redactedData?: string; provenance?: string }
export interface ToolUseBlock { type: 'tool_use'; id: string; name: string; input: Record<string, unknown>; signature?: string }
export interface Base64Source { type: 'base64'; media_type: string; data: string }
export interface UrlSource { type: 'url'; media_type: string; url: string }
export type MediaSource = Base64Source | UrlSource
export type ToolResultPart =
  | { type: 'text'; text: string }
  | { type: 'image'; source: MediaSource }
  | { type: 'file'; filename: string; source: MediaSource }
export type ToolResultContent = string | ToolResultPart[]
export interface ToolResultBlock { type: 'tool_result'; tool_use_id: string; content: ToolResultContent; is_error?: boolean }
export interface ImageBlock { type: 'image'; source: Base64Source }
export interface VideoBlock { type: 'video'; source: MediaSource }
export type ContentBlock = TextBlock | ReasoningBlock | ToolUseBlock | ToolResultBlock | ImageBlock | VideoBlock
export interface LLMMessage { role: 'user' | 'assistant'; content: ContentBlock[] }

export interface TokenUsage { input_tokens: number; output_tokens: number }

export interface ToolCallRecord { toolName: string; input: Record<string, unknown>; output: ToolResultContent; isError?: boolean }

export type RunStatusCode = 'error' | 'timeout' | 'rejected' | 'budget_exhausted'
export interface RunStatus { code: RunStatusCode; message?: string }
export interface StructuredTraceError {
  kind: 'validation' | 'budget' | 'callback' | 'provider' | 'unknown'
  code?: string
  name: string
  message: string
  retryable: boolean
  httpStatus?: number
  provider?: string
}

/** OMA's AgentRunResult. `status` and `errorInfo` are present after a failure. */
export interface AgentRunResult {
  success: boolean
  output: string
  messages: LLMMessage[]
  tokenUsage: TokenUsage
  toolCalls: ToolCallRecord[]
  turns: number
  budgetExceeded?: boolean
  status?: RunStatus
  errorInfo?: StructuredTraceError
}

/** OMA's StreamEvents (`text_delta` carries the provider's text pieces, `text` a turn's text). */
export type StreamEvent =
  | { type: 'text_delta'; data: string }
  | { type: 'reasoning'; data: string }
  | { type: 'text'; data: string }
  | { type: 'tool_use'; data: ToolUseBlock }
  | { type: 'tool_result'; data: ToolResultBlock }
  | { type: 'budget_exceeded'; data: TokenBudgetExceededError }
  | { type: 'done'; data: AgentRunResult }
  | { type: 'error'; data: OMAError & { result: AgentRunResult } }

export interface BeforeRunContext {
  agent: string
  /** The text blocks of the latest user message, joined with no separator. */
  prompt: string
  messages: LLMMessage[]
  /** The agent's configuration without hooks and secrets. */
  config: Record<string, unknown>
}
export interface BeforeRunResult { prompt: string; messages?: LLMMessage[] }

export interface ToolUseContext {
  agent: { name: string; role: string; model: string }
  toolUseId: string
  signature?: string
}

export interface ToolDefinition<I = any> {
  name: string
  description: string
  /** A JSON Schema object for the tool's input. */
  inputSchema?: Record<string, unknown>
  /** Returns text, OMA tool-result parts, or OMA's ToolResult `{data, isError}`; a throw is an error result. */
  execute(input: I, context: ToolUseContext):
    | ToolResultContent | { data: ToolResultContent; isError?: boolean }
    | Promise<ToolResultContent | { data: ToolResultContent; isError?: boolean }>
}

export interface ProcessBackend {
  kind: 'process'
  command: string
  args?: string[]
  cwd?: string
  env?: Record<string, string>
  timeoutMs?: number
}
/** Any external text-only backend: `send` gets the text and returns the output. */
export interface CustomBackend {
  kind: 'process' | 'acp'
  send(text: string, info: { kind: 'process' | 'acp' }): string | Promise<string>
}

export interface CallOptions {
  maxRetries?: number
  retryDelayMs?: number
  retryBackoff?: number
  timeoutMs?: number
  maxResponseBytes?: number
  /** `"open"` (default), `"offline"`, or a list of allowed origins. */
  egress?: 'open' | 'offline' | string[]
}

export interface AgentConfig {
  name: string
  model: string
  /** `anthropic`, `openai`, `gemini`, `bedrock`, `ai-sdk`, an OpenAI-compatible preset, or any name with `baseURL`. */
  provider: string
  /** As OMA's SDKs: Anthropic posts to `{baseURL}/v1/messages`, OpenAI-compatible to `{baseURL}/chat/completions`. */
  baseURL?: string
  apiKey?: string
  region?: string
  systemPrompt?: string
  maxTurns?: number
  maxTokenBudget?: number
  maxTokens?: number
  temperature?: number
  topP?: number
  topK?: number
  thinkingBudget?: number
  history?: LLMMessage[]
  beforeRun?: (context: BeforeRunContext) => BeforeRunResult | Promise<BeforeRunResult>
  tools?: ToolDefinition[]
  backend?: ProcessBackend | CustomBackend
  call?: CallOptions
}

export declare class Agent {
  /** Throws (synchronously) for an invalid configuration or history. */
  constructor(config: AgentConfig)
  readonly name: string
  /** Rejects with InvalidMessageError for invalid input; any later failure is `success: false`. */
  run(input: string | LLMMessage[]): Promise<AgentRunResult>
  /** Throws at the call for invalid input; a failure later is an `error` event. */
  stream(input: string | LLMMessage[]): AsyncGenerator<StreamEvent, void, undefined>
  prompt(input: string | ContentBlock[]): Promise<AgentRunResult>
  getHistory(): LLMMessage[]
  reset(): void
}

export interface ProgressEvent {
  type: 'agent_start' | 'budget_exceeded' | 'agent_complete'
  agent: string
  data: unknown
}
export interface EvaluationCase {
  agent: string
  /** The scorer input under the payload policy. */
  input: string
  payload?: { input: string; output: string } | null
  result: AgentRunResult
  durationMs: number
}
export interface RunAgentOptions {
  onProgress?: (event: ProgressEvent) => void | Promise<void>
  evaluation?: {
    sampleRate?: number
    storePayloads?: 'none' | 'redacted' | 'full' | boolean
    onCase?: (evaluationCase: EvaluationCase) => void | Promise<void>
  }
}

export declare function runAgent(config: AgentConfig, input: string | LLMMessage[], options?: RunAgentOptions): Promise<AgentRunResult>

export interface OMAErrorOptions { name?: string; code?: string; type?: string; retryable?: boolean; httpStatus?: number; provider?: string }
export declare class OMAError extends Error {
  constructor(message: string, options?: OMAErrorOptions)
  /** OMA's code; for a provider failure, the provider's own code when it sent one. */
  code?: string
  /** The provider's error type, when its error body has one (e.g. `invalid_request_error`). */
  type?: string
  retryable: boolean
  httpStatus?: number
  provider?: string
}
export declare class InvalidMessageError extends OMAError {}
export declare class UnsupportedContentBlockError extends OMAError {}
export declare class UnsupportedToolResultContentError extends OMAError {}
export declare class UnsupportedToolCallError extends OMAError {}
export declare class TokenBudgetExceededError extends OMAError {}
export declare class LLMCallTimeoutError extends OMAError {}
export declare class EgressPolicyError extends OMAError {}
export declare class ProviderError extends OMAError {}
export declare class SessionStateError extends OMAError {}
