// Mirrors the API surface of OMA's patterns/fan-out-aggregate example: four Agents built on
// registries filled by registerBuiltInTools (none granted), an AgentPool(3), runParallel over
// three of them, then pool.run on the fourth with their outputs, and the token totals.
import { Agent, AgentPool, ToolRegistry, ToolExecutor, registerBuiltInTools } from '@open-multi-agent/core'
import type { AgentConfig, AgentRunResult } from '@open-multi-agent/core'

function build(config: AgentConfig): Agent {
  const registry = new ToolRegistry()
  registerBuiltInTools(registry)
  return new Agent(config, registry, new ToolExecutor(registry))
}

const roles = ['north', 'south', 'east'] as const
const pool = new AgentPool(3)
for (const role of roles) {
  pool.add(build({ name: role, model: 'claude-sonnet-4-6', systemPrompt: `You argue for the ${role}.`, maxTurns: 1, temperature: 0.4 }))
}
pool.add(build({ name: 'judge', model: 'claude-sonnet-4-6', systemPrompt: 'You weigh the arguments.', maxTurns: 1, temperature: 0.3 }))

const question = 'Where should the new office be?'
const results: Map<string, AgentRunResult> = await pool.runParallel(roles.map((role) => ({ agent: role, prompt: question })))
for (const role of roles) {
  const r = results.get(role)!
  console.log(`${role} [${r.success ? 'OK' : 'FAILED'}] ${r.tokenUsage.output_tokens}: ${r.output}`)
}
for (const role of roles) {
  if (!results.get(role)!.success) {
    console.error(`${role} failed: ${results.get(role)!.output}`)
    process.exit(1)
  }
}
const verdict = await pool.run('judge', roles.map((role) => `${role}: ${results.get(role)!.output}`).join('\n'))
if (!verdict.success) {
  console.error('judge failed:', verdict.output)
  process.exit(1)
}
console.log('verdict:', verdict.output)
let input = verdict.tokenUsage.input_tokens
let output = verdict.tokenUsage.output_tokens
for (const role of roles) {
  input += results.get(role)!.tokenUsage.input_tokens
  output += results.get(role)!.tokenUsage.output_tokens
}
console.log('total:', input, output)
console.log('status:', JSON.stringify(pool.getStatus()))
