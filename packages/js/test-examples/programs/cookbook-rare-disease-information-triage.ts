// Mirrors the API surface of OMA's cookbook/rare-disease-information-triage example: Agents on empty
// registries with zod outputSchemas, source agents run at once with agent.run and retried while
// `structured` is missing, then a downstream agent over their structured outputs only.
import { z } from 'zod'
import { Agent, ToolExecutor, ToolRegistry } from '@open-multi-agent/core'
import type { AgentConfig, AgentRunResult } from '@open-multi-agent/core'

const Finding = z.object({ source: z.string(), points: z.array(z.string()), risk: z.enum(['low', 'high']) })
type Finding = z.infer<typeof Finding>
const Decision = z.object({ decision: z.enum(['proceed', 'hold']), reasons: z.array(z.string()) })
type Decision = z.infer<typeof Decision>

const base = { provider: 'anthropic' as const, model: 'claude-sonnet-4-6', maxTurns: 1, tools: [] as string[] }
function build(config: AgentConfig): Agent {
  const registry = new ToolRegistry()
  return new Agent(config, registry, new ToolExecutor(registry))
}
async function attempt(name: string, agent: Agent, prompt: string): Promise<AgentRunResult> {
  for (let n = 1; n <= 3; n += 1) {
    const result = await agent.run(prompt)
    if (result.success && result.structured) return result
    console.warn(`retry ${name} ${n}: ${result.output.slice(0, 80)}`)
  }
  return agent.run(prompt)
}
function need<T>(name: string, result: AgentRunResult): T {
  if (!result.success || !result.structured) {
    console.error(`${name} gave no structured output`)
    process.exit(1)
  }
  return result.structured as T
}

const names = ['one', 'two'] as const
const sources = names.map((name) => build({ ...base, name, systemPrompt: `Audit source ${name}.`, outputSchema: Finding }))
const judge = build({ ...base, name: 'judge', systemPrompt: 'Decide from the findings.', outputSchema: Decision })
const found = await Promise.all(sources.map((agent, i) => attempt(names[i], agent, `Source ${names[i]} text.`)))
const findings = found.map((r, i) => need<Finding>(names[i], r))
for (const f of findings) console.log(`${f.source}: ${f.risk} (${f.points.length})`)
const decision = need<Decision>('judge', await attempt('judge', judge, JSON.stringify(findings)))
console.log(`${decision.decision}: ${decision.reasons.join('; ')}`)
