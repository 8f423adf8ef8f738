// A persistent conversation with prompt(), history restored into a second agent.
import { Agent, ToolExecutor, ToolRegistry, type AgentPromptInput, type LLMMessage } from '@open-multi-agent/core'

const registry = new ToolRegistry()
const executor = new ToolExecutor(registry)
const tutor = new Agent({ name: 'tutor', model: 'claude-sonnet-4-6', provider: 'anthropic' }, registry, executor)
await tutor.prompt('My name is Ada.')
const turn: AgentPromptInput = [{ type: 'text', text: 'What is my name?' }] as const
const second = await tutor.prompt(turn)
const saved: readonly LLMMessage[] = tutor.getHistory()
const restored = new Agent({ name: 'tutor', model: 'claude-sonnet-4-6', provider: 'anthropic', history: saved }, registry, executor)
tutor.reset()
console.log(JSON.stringify({
  output: second.output,
  history: saved.map((m) => m.role),
  restored: restored.getHistory().length,
  afterReset: tutor.getHistory().length,
}))
