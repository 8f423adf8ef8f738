// Mirrors the API surface of OMA's cookbook/meeting-summarizer example: four Agents on registries
// filled by registerBuiltInTools, two with zod outputSchemas, an AgentPool(3) whose run() is
// called for three of them at once (Promise.all), `structured` read back, then one more run.
import { z } from 'zod'
import { Agent, AgentPool, ToolRegistry, ToolExecutor, registerBuiltInTools } from '@open-multi-agent/core'
import type { AgentConfig, AgentRunResult } from '@open-multi-agent/core'

const Tasks = z.object({ items: z.array(z.object({ task: z.string(), owner: z.string(), due: z.string().optional() })) })
type Tasks = z.infer<typeof Tasks>
const Moods = z.object({ people: z.array(z.object({ name: z.string(), tone: z.enum(['up', 'flat', 'down']) })) })
type Moods = z.infer<typeof Moods>

function build(config: AgentConfig): Agent {
  const registry = new ToolRegistry()
  registerBuiltInTools(registry)
  return new Agent(config, registry, new ToolExecutor(registry))
}

const NOTES = 'Ana: I will ship the beta Friday. Ben: I am worried about the docs. Ana: Ben owns docs.'
const pool = new AgentPool(3)
pool.add(build({ name: 'summary', model: 'claude-sonnet-4-6', systemPrompt: 'Summarise the notes.', maxTurns: 1 }))
pool.add(build({ name: 'tasks', model: 'claude-sonnet-4-6', systemPrompt: 'Extract tasks.', maxTurns: 1, outputSchema: Tasks }))
pool.add(build({ name: 'moods', model: 'claude-sonnet-4-6', systemPrompt: 'Rate each tone.', maxTurns: 1, outputSchema: Moods }))
pool.add(build({ name: 'report', model: 'claude-sonnet-4-6', systemPrompt: 'Merge into a report.', maxTurns: 1 }))

const names = ['summary', 'tasks', 'moods'] as const
const runs = await Promise.all(names.map(async (name) => ({ name, result: await pool.run(name, NOTES) })))
const byName = new Map<string, AgentRunResult>()
for (const { name, result } of runs) {
  byName.set(name, result)
  console.log(`${name} [${result.success ? 'OK' : 'FAILED'}] ${result.tokenUsage.output_tokens}`)
  if (!result.success) {
    console.error(`${name} failed: ${result.output}`)
    process.exit(1)
  }
}
const tasks = byName.get('tasks')!.structured as Tasks | undefined
const moods = byName.get('moods')!.structured as Moods | undefined
if (!tasks || !moods) {
  console.error('structured output missing')
  process.exit(1)
}
const report = await pool.run('report', `${byName.get('summary')!.output}\n${JSON.stringify(tasks)}\n${JSON.stringify(moods)}`)
console.log(report.output)
