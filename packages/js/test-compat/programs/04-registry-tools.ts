// Tools registered in a ToolRegistry and granted by name; one tool input fails validation.
import { z } from 'zod'
import { Agent, ToolExecutor, ToolRegistry, defineTool, type ToolUseContext } from '@open-multi-agent/core'

const seen: string[] = []
const registry = new ToolRegistry()
registry.register(defineTool({
  name: 'lookup',
  description: 'Look up a word in the glossary.',
  inputSchema: z.object({ word: z.string() }),
  execute: async ({ word }, context: ToolUseContext) => {
    seen.push(`${context.agent.name}:${word}`)
    return { data: word === 'wasm' ? 'WebAssembly' : 'unknown' }
  },
}))
registry.register(defineTool({
  name: 'unused',
  description: 'Not granted to the agent.',
  inputSchema: z.object({}),
  execute: async () => ({ data: 'never' }),
}))
const agent = new Agent(
  { name: 'glossary', model: 'claude-sonnet-4-6', provider: 'anthropic', tools: ['lookup'] },
  registry,
  new ToolExecutor(registry),
)
const result = await agent.run('Define wasm.')
console.log(JSON.stringify({
  success: result.success,
  output: result.output,
  seen,
  tools: agent.getTools().sort(),
  toolCalls: result.toolCalls.map(({ toolName, output }) => ({ toolName, output })),
}))
