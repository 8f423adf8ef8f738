// Orchestrator progress events around runAgent.
import { OpenMultiAgent, type OrchestratorEvent } from '@open-multi-agent/core'

const events: OrchestratorEvent[] = []
const oma = new OpenMultiAgent({
  defaultModel: 'claude-sonnet-4-6',
  defaultProvider: 'anthropic',
  onProgress: (event) => events.push(event),
})
const result = await oma.runAgent({ name: 'reporter', systemPrompt: 'Be brief.' }, 'Say hi.', { runId: 'run-42' })
console.log(JSON.stringify({
  events: events.map((e) => `${e.type}:${e.agent}`),
  runId: result.identity?.runId,
  status: result.status?.code,
}))
