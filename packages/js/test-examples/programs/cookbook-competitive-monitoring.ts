// Mirrors the API surface of OMA's cookbook/competitive-monitoring example: Agents on registries
// filled by registerBuiltInTools with zod outputSchemas (number min/max, enums), three run at once
// with agent.run (Promise.all), then an aggregator over their `structured` results.
import { z } from 'zod'
import { Agent, ToolExecutor, ToolRegistry, registerBuiltInTools } from '@open-multi-agent/core'
import type { AgentConfig, AgentRunResult } from '@open-multi-agent/core'

const Claims = z.object({ claims: z.array(z.object({ claim: z.string(), confidence: z.number().min(0).max(1) })) })
type Claims = z.infer<typeof Claims>
const Report = z.object({ conflicts: z.array(z.object({ topic: z.string(), severity: z.enum(['minor', 'critical']) })), summary: z.string() })
type Report = z.infer<typeof Report>

function build(config: AgentConfig): Agent {
  const registry = new ToolRegistry()
  registerBuiltInTools(registry)
  return new Agent(config, registry, new ToolExecutor(registry))
}
const sources = ['feed-a', 'feed-b', 'feed-c'] as const
const monitors = sources.map((name) => build({ name, model: 'claude-sonnet-4-6', systemPrompt: `You read ${name}.`, maxTurns: 1, maxTokens: 800, temperature: 0.2, outputSchema: Claims }))
const aggregator = build({ name: 'aggregator', model: 'claude-sonnet-4-6', systemPrompt: 'Find conflicts.', maxTurns: 1, outputSchema: Report })

const runs: AgentRunResult[] = await Promise.all(monitors.map((agent, i) => agent.run(`Claims of ${sources[i]}: launch on day ${i + 14}.`)))
runs.forEach((r, i) => console.log(`${sources[i]} [${r.success ? 'OK' : 'FAILED'}] ${r.tokenUsage.output_tokens}`))
const claims = runs.map((r) => r.structured as Claims | undefined)
if (claims.some((c) => c === undefined)) {
  console.error('a monitor returned no structured output')
  process.exit(1)
}
const result = await aggregator.run(JSON.stringify(claims))
const report = result.structured as Report | undefined
if (!result.success || !report) {
  console.error('aggregator failed:', result.output)
  process.exit(1)
}
for (const c of report.conflicts) console.log(`${c.severity.toUpperCase()} ${c.topic}`)
console.log(report.summary)
