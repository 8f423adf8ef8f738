// Streaming: the event sequence, text and tool events, and the final result.
import { z } from 'zod'
import { Agent, ToolExecutor, ToolRegistry, defineTool, type AgentRunResult, type StreamEvent, type ToolUseBlock } from '@open-multi-agent/core'

const registry = new ToolRegistry()
registry.register(defineTool({
  name: 'clock',
  description: 'The current time.',
  inputSchema: z.object({}),
  execute: async () => ({ data: '12:00' }),
}))
const agent = new Agent(
  { name: 'streamer', model: 'claude-sonnet-4-6', provider: 'anthropic', tools: ['clock'] },
  registry,
  new ToolExecutor(registry),
)
const types: string[] = []
let text = ''
let final: AgentRunResult | undefined
const tools: string[] = []
for await (const event of agent.stream('What time is it?')) {
  const e: StreamEvent = event
  types.push(e.type)
  if (e.type === 'text' && typeof e.data === 'string') text += e.data
  else if (e.type === 'tool_use') tools.push((e.data as ToolUseBlock).name)
  else if (e.type === 'done') final = e.data as AgentRunResult
  else if (e.type === 'error') console.error('stream error', e.errorInfo?.kind)
}
console.log(JSON.stringify({ types, text, tools, success: final?.success, status: final?.status?.code }))
