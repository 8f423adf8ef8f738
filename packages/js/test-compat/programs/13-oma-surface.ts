// What an OMA program reads beyond the basics: the stream's event set, `status` in the
// `agent_complete` progress payload, a provider error's HTTP `status`, and classifyRunFailure.
import { Agent, OpenMultiAgent, ToolExecutor, ToolRegistry, classifyRunFailure, type OrchestratorEvent } from '@open-multi-agent/core'

const registry = new ToolRegistry()
const agent = new Agent({ name: 'surface', model: 'claude-sonnet-4-6', provider: 'anthropic' }, registry, new ToolExecutor(registry))
const types: string[] = []
for await (const event of agent.stream('Hi')) types.push(event.type)

const completed: OrchestratorEvent[] = []
const oma = new OpenMultiAgent({
  defaultModel: 'claude-sonnet-4-6',
  defaultProvider: 'anthropic',
  onProgress: (event) => { if (event.type === 'agent_complete') completed.push(event) },
})
const ok = await oma.runAgent({ name: 'reporter' }, 'Say hi.')
const payload = completed[0]?.data as { status?: { code: string }; success?: boolean } | undefined

const failed = await agent.run('This one fails.')
const error = failed.error as { status?: number } | undefined

const upstream = Object.assign(new Error('upstream said no'), { status: 503 })
const classified = classifyRunFailure(upstream, { provider: 'anthropic' })

console.log(JSON.stringify({
  types,
  ok: ok.success,
  completeStatus: payload?.status?.code,
  completeSuccess: payload?.success,
  failedStatus: failed.status?.code,
  errorStatus: error?.status,
  httpStatus: failed.errorInfo?.httpStatus,
  classified,
}))
