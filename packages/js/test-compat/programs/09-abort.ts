// Cancelling a run with an AbortSignal while the provider has not answered.
import { OpenMultiAgent, type RunStatusCode } from '@open-multi-agent/core'

const controller = new AbortController()
const oma = new OpenMultiAgent({ defaultModel: 'claude-sonnet-4-6', defaultProvider: 'anthropic' })
const started = Date.now()
let abortedAt = 0
setTimeout(() => { abortedAt = Date.now(); controller.abort() }, 800)
const result = await oma.runAgent({ name: 'patient' }, 'Take your time.', { abortSignal: controller.signal })
const code: RunStatusCode | undefined = result.status?.code
console.log(JSON.stringify({
  success: result.success,
  status: code,
  kind: result.errorInfo?.kind,
  withinHalfSecond: Date.now() - abortedAt < 500,
  tookAtLeastTheDelay: abortedAt - started >= 750,
}))
