// A token budget: the stream reports budget_exceeded and ends with done; run() fails with budget.
import { Agent, TokenBudgetExceededError, ToolExecutor, ToolRegistry, type AgentRunResult } from '@open-multi-agent/core'

const registry = new ToolRegistry()
const agent = new Agent(
  { name: 'thrifty', model: 'claude-sonnet-4-6', provider: 'anthropic', maxTokenBudget: 10 },
  registry,
  new ToolExecutor(registry),
)
const types: string[] = []
let budget: { used: number; budget: number } | undefined
let last: AgentRunResult | undefined
for await (const event of agent.stream('Write a long essay.')) {
  types.push(event.type)
  if (event.type === 'budget_exceeded' && event.data instanceof TokenBudgetExceededError) {
    budget = { used: event.data.tokensUsed, budget: event.data.budget }
  }
  if (event.type === 'done') last = event.data as AgentRunResult
}
const run = await agent.run('Again.')
console.log(JSON.stringify({
  types,
  budget,
  streamed: { success: last?.success, budgetExceeded: last?.budgetExceeded, status: last?.status?.code },
  run: { success: run.success, status: run.status?.code, kind: run.errorInfo?.kind, budgetExceeded: run.budgetExceeded },
}))
