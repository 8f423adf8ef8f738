// Mirrors the API surface of OMA's basics/single-agent example: OpenMultiAgent.runAgent with the
// built-in bash and file tools granted (writing inside the default `.agent-workspace` sandbox),
// onProgress, then Agent.stream on a registry filled by registerBuiltInTools, then two
// Agent.prompt turns with a sliding-window context strategy and getHistory.
import { join } from 'node:path'
import { OpenMultiAgent, Agent, ToolRegistry, ToolExecutor, registerBuiltInTools } from '@open-multi-agent/core'
import type { OrchestratorEvent } from '@open-multi-agent/core'

const target = join(process.cwd(), '.agent-workspace', 'single-agent', 'hello.txt')

const orchestrator = new OpenMultiAgent({
  defaultModel: 'claude-sonnet-4-6',
  onProgress: (event: OrchestratorEvent) => {
    if (event.type === 'agent_start' || event.type === 'agent_complete') console.log(`[${event.type}] ${event.agent}`)
  },
})

const result = await orchestrator.runAgent(
  {
    name: 'writer',
    model: 'claude-sonnet-4-6',
    systemPrompt: 'Write files with the file tools; check them with bash.',
    tools: ['bash', 'file_read', 'file_write'],
    maxTurns: 6,
  },
  `Write "hello" into ${target}, read it back, then show it with cat.`,
)
if (!result.success) {
  console.error('failed:', result.output)
  process.exit(1)
}
console.log('output:', result.output)
console.log('tokens:', result.tokenUsage.input_tokens, result.tokenUsage.output_tokens)
for (const call of result.toolCalls) console.log('tool:', call.toolName, JSON.stringify(call.input), JSON.stringify(call.output))

const registry = new ToolRegistry()
registerBuiltInTools(registry)
const streaming = new Agent(
  { name: 'explainer', model: 'claude-sonnet-4-6', systemPrompt: 'Be brief.', maxTurns: 3 },
  registry,
  new ToolExecutor(registry),
)
process.stdout.write('stream: ')
for await (const event of streaming.stream('What is a generic constraint?')) {
  if (event.type === 'text' && typeof event.data === 'string') process.stdout.write(event.data)
  else if (event.type === 'done') process.stdout.write('\n')
  else if (event.type === 'error') console.error('stream error:', event.data)
}

const tutor = new Agent(
  {
    name: 'tutor',
    model: 'claude-sonnet-4-6',
    systemPrompt: 'Short answers.',
    maxTurns: 2,
    contextStrategy: { type: 'sliding-window', maxTurns: 1 },
  },
  new ToolRegistry(),
  new ToolExecutor(new ToolRegistry()),
)
const first = await tutor.prompt('What is a type guard?')
console.log('turn 1:', first.output.slice(0, 200))
const second = await tutor.prompt('Show one.')
console.log('turn 2:', second.output.slice(0, 300))
console.log('history:', tutor.getHistory().length)
