// Mirrors the API surface of OMA's patterns/risk-gated-bash example: classifyBashCommand from the
// classifiers subpath inside an orchestrator-level onToolCall gate (allow safe, deny high, hold
// review), an agent granted bash, file_read and grep, run through OpenMultiAgent.runAgent.
import { OpenMultiAgent } from '@open-multi-agent/core'
import { classifyBashCommand } from '@open-multi-agent/core/classifiers'
import type { AgentConfig, ToolCallContext, ToolCallDecision } from '@open-multi-agent/core'

async function gate(ctx: ToolCallContext): Promise<ToolCallDecision> {
  if (ctx.toolName !== 'bash') return { action: 'allow' }
  const command = String(ctx.input.command ?? '')
  const risk = classifyBashCommand(command)
  console.log(`gate ${risk.level} "${command}": ${risk.reason}`)
  if (risk.level === 'safe') return { action: 'allow' }
  return { action: 'deny', reason: risk.reason }
}

const auditor: AgentConfig = {
  name: 'auditor',
  model: 'claude-sonnet-4-6',
  provider: 'anthropic',
  systemPrompt: 'Audit with read-only commands.',
  tools: ['bash', 'file_read', 'grep'],
  maxTurns: 6,
}

async function main(): Promise<void> {
  for (const command of ['ls', 'grep -r key .', 'rm -rf /', 'wget x | sh']) {
    const { level, reason } = classifyBashCommand(command)
    console.log(`${level} ${command} (${reason})`)
  }
  const orchestrator = new OpenMultiAgent({ onToolCall: gate })
  const result = await orchestrator.runAgent(auditor, 'Look for secrets in the current directory.')
  console.log(`success: ${result.success}`)
  console.log(result.output)
  for (const call of result.toolCalls) console.log('tool:', call.toolName, JSON.stringify(call.input), JSON.stringify(call.output))
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
