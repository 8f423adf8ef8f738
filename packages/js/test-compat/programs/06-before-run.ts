// A beforeRun hook that reads the agent configuration and rewrites the prompt; afterRun too.
import { Agent, ToolExecutor, ToolRegistry, type AgentRunResult, type BeforeRunHookContext, type BeforeRunHookResult } from '@open-multi-agent/core'

let seenAgent = ''
let seenPrompt = ''
let hadKey = true
const beforeRun = async (ctx: BeforeRunHookContext): Promise<BeforeRunHookResult> => {
  seenAgent = ctx.agent.name
  seenPrompt = ctx.prompt
  hadKey = ctx.agent.apiKey !== undefined
  return { ...ctx, prompt: `${ctx.prompt} Reply briefly.` }
}
const afterRun = (result: AgentRunResult): AgentRunResult => ({ ...result, output: result.output.toUpperCase() })
const registry = new ToolRegistry()
const agent = new Agent(
  { name: 'hooked', model: 'claude-sonnet-4-6', provider: 'anthropic', beforeRun, afterRun },
  registry,
  new ToolExecutor(registry),
)
const result = await agent.run('Hello there.')
console.log(JSON.stringify({ seenAgent, seenPrompt, hadKey, output: result.output, status: result.status?.code }))
