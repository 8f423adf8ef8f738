// Mirrors the API surface of OMA's cookbook/translation-backtranslation example: three Agents
// (Anthropic, OpenAI with a baseURL, Anthropic) with zod outputSchemas (one a top-level array),
// an AgentPool(1), pool.run in sequence with `structured` passed along.
import { z } from 'zod'
import { Agent, AgentPool, ToolRegistry, ToolExecutor, registerBuiltInTools } from '@open-multi-agent/core'
import type { AgentConfig } from '@open-multi-agent/core'

const Forward = z.object({ language: z.string(), items: z.array(z.object({ index: z.number().int().positive(), text: z.string() })) })
type Forward = z.infer<typeof Forward>
const Back = z.object({ items: z.array(z.object({ index: z.number().int().positive(), text: z.string() })) })
type Back = z.infer<typeof Back>
const Drift = z.array(z.object({ index: z.number().int(), drift: z.enum(['none', 'minor', 'major']) }))
type Drift = z.infer<typeof Drift>

function build(config: AgentConfig): Agent {
  const registry = new ToolRegistry()
  registerBuiltInTools(registry)
  return new Agent(config, registry, new ToolExecutor(registry))
}

if (!process.env.ANTHROPIC_API_KEY || !process.env.OPENAI_API_KEY) {
  console.log('[skip]')
  process.exit(0)
}
const pool = new AgentPool(1)
pool.add(build({ name: 'forward', provider: 'anthropic', model: 'claude-sonnet-4-6', systemPrompt: 'Translate to French.', maxTurns: 1, temperature: 0, outputSchema: Forward }))
pool.add(build({ name: 'back', provider: 'openai', model: 'gpt-test', baseURL: process.env.OPENAI_BASE_URL, systemPrompt: 'Translate to English.', maxTurns: 1, temperature: 0, outputSchema: Back }))
pool.add(build({ name: 'judge', provider: 'anthropic', model: 'claude-sonnet-4-6', systemPrompt: 'Compare.', maxTurns: 1, temperature: 0, outputSchema: Drift }))

const forward = await pool.run('forward', JSON.stringify([{ index: 1, text: 'Builds must be reproducible.' }]))
if (!forward.success || !forward.structured) {
  console.error('forward failed:', forward.output)
  process.exit(1)
}
const back = await pool.run('back', JSON.stringify((forward.structured as Forward).items))
if (!back.success || !back.structured) {
  console.error('back failed:', back.output)
  process.exit(1)
}
const judged = await pool.run('judge', JSON.stringify((back.structured as Back).items))
if (!judged.success || !judged.structured) {
  console.error('judge failed:', judged.output)
  process.exit(1)
}
console.log(JSON.stringify(judged.structured as Drift))
