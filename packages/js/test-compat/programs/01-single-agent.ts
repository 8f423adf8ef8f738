// A single agent with an injected registry and executor, one string prompt.
import { Agent, ToolExecutor, ToolRegistry, type AgentRunResult } from '@open-multi-agent/core'

const registry = new ToolRegistry()
const executor = new ToolExecutor(registry)
const agent = new Agent(
  {
    name: 'writer',
    model: 'claude-sonnet-4-6',
    provider: 'anthropic',
    systemPrompt: 'Answer in one sentence.',
    maxTurns: 2,
    maxTokens: 256,
    temperature: 0.2,
  },
  registry,
  executor,
)

const result: AgentRunResult = await agent.run('What is a monad?')
const code: string | undefined = result.status?.code
console.log(JSON.stringify({
  keys: Object.keys(result).sort(),
  success: result.success,
  output: result.output,
  status: code,
  identity: result.identity ? Object.keys(result.identity).sort() : null,
  usage: result.tokenUsage.input_tokens + result.tokenUsage.output_tokens,
  state: agent.getState().status,
}))
