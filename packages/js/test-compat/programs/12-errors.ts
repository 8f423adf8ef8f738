// Failure handling: status codes, errorInfo kinds, error classes and their fields.
import {
  Agent, InvalidMessageError, LLMCallTimeoutError, TokenBudgetExceededError, ToolExecutor, ToolRegistry,
  type AgentRunResult, type RunStatusCode, type StructuredTraceError, type TraceErrorKind,
} from '@open-multi-agent/core'

function describe(result: AgentRunResult): string {
  const code: RunStatusCode = result.status?.code ?? 'error'
  switch (code) {
    case 'ok': return 'ok'
    case 'cancelled': return 'cancelled'
    case 'timeout': return 'timeout'
    case 'budget_exhausted': return 'budget'
    default: return `failed:${code}`
  }
}
const info: StructuredTraceError | undefined = undefined as StructuredTraceError | undefined
const kind: TraceErrorKind | undefined = info?.kind
const budget = new TokenBudgetExceededError('a', 12, 10)
const timeout = new LLMCallTimeoutError(500, 'a')
const registry = new ToolRegistry()
const agent = new Agent({ name: 'strict', model: 'claude-sonnet-4-6', provider: 'anthropic' }, registry, new ToolExecutor(registry))
let rejected = ''
try {
  await agent.run([{ role: 'user', content: 'not blocks' }] as never)
} catch (error) {
  if (error instanceof InvalidMessageError) rejected = `${error.code}: ${error.message}`
}
const failed = await agent.run('This will fail.')
console.log(JSON.stringify({
  fields: [budget.tokensUsed, budget.budget, budget.code, timeout.timeoutMs, timeout.code, kind ?? null],
  rejected,
  failed: { described: describe(failed), kind: failed.errorInfo?.kind, httpStatus: failed.errorInfo?.httpStatus, retryable: failed.errorInfo?.retryable },
}))
