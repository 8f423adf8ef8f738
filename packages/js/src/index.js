// oma-component: OMA's Agent / runAgent over the `portable-json` world of oma_portable_json.wasm.
//
// The component never does I/O. Every run is a driver session that the package steps: it asks
// for the next step, performs it with the platform's means (fetch, timers, the caller's hook and
// tools, a child process), answers, and asks again until the session is `finished`. Around it
// sits OMA's agent API. This module is the public surface only; each job lives where OMA keeps
// it (README.md, "Layout"):
//
//   agent/agent.js                 Agent
//   orchestrator/orchestrator.js   OpenMultiAgent, runAgent
//   agent/                         configuration, input, the drive loop, tool calls, backends,
//                                  results, stream events, AgentPool
//   tool/                          the tool framework, the executor, grants, the built-in tools
//   errors.js, observability/      OMA's error classes, classifyRunFailure, trace sinks and stores
//   memory/                        SharedMemory and its InMemoryStore

export { Agent } from './agent/agent.js'
export { OpenMultiAgent, runAgent } from './orchestrator/orchestrator.js'
export { drive as driveSession } from './agent/runner.js'
export {
  OMAError,
  InvalidMessageError,
  UnsupportedContentBlockError,
  UnsupportedToolResultContentError,
  UnsupportedToolCallError,
  TokenBudgetExceededError,
  CostBudgetExceededError,
  LLMCallTimeoutError,
  EgressPolicyError,
  StructuredOutputValidationError,
  ProviderError,
  SessionStateError,
  isRetryableError,
} from './errors.js'
export { defineTool, ToolRegistry, zodToJsonSchema } from './tool/framework.js'
export { ToolExecutor, truncateToolOutput } from './tool/executor.js'
export { AgentPool, Semaphore } from './agent/pool.js'
export {
  registerBuiltInTools, BUILT_IN_TOOLS, ALL_BUILT_IN_TOOLS_WITH_DELEGATE, bashTool, fileReadTool,
  fileWriteTool, fileEditTool, grepTool, globTool, delegateToAgentTool, LocalShellExecutor,
} from './tool/built-in/index.js'
export { classifyRunFailure } from './observability/status.js'
export { InMemoryStore } from './memory/store.js'
export { SharedMemory } from './memory/shared.js'
// OMA's main entry carries its observability API too (what `@open-multi-agent/otel` imports).
export {
  BatchingTraceSink, CompositeSink, DEFAULT_BATCHING_OPTIONS, DiagnosticReporter, FilteringSink,
  InMemoryTraceStore, LegacyCallbackTraceSink, SensitiveDataProcessor, TRACE_STORE_SCHEMA_MAJOR,
  TraceStoreError, TraceStoreExporter, buildExecutionReceipt, emptyTraceSinkStats, materializeRun,
} from './observability/index.js'
