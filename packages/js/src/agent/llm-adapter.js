// The agent's own LLM adapter (OMA's AgentConfig.adapter): the object is kept on this side and
// the component's configuration names it. Each model call comes as a `call-model` step; the
// adapter's `chat` (or, for a run that asked for text pieces, its `stream`) answers it, and what
// it returns goes back as OMA JSON for the component to check (docs/agent.md, "Your own LLM
// adapter"). Nothing here judges an answer: a malformed one is the component's to refuse.

import { errorMessage } from '../errors.js'
import { isObject } from '../utils/options.js'

/** OMA's `LLMAdapter.capabilities.echoesReasoning` words. */
const ECHOES_REASONING = ['never', 'own-issued', 'tool-use-only']

/**
 * Checks OMA's `adapter` and returns the component's declaration of it (`{name, capabilities?}`):
 * an object with a string `name` and a `chat` function, `stream` a function when given.
 */
export function adapterDeclaration(adapter) {
  if (!isObject(adapter)) throw new TypeError('adapter must be an object with name, chat and stream')
  if (typeof adapter.name !== 'string' || adapter.name === '') {
    throw new TypeError('adapter.name must be a non-empty string')
  }
  if (typeof adapter.chat !== 'function') throw new TypeError('adapter.chat must be a function')
  if (adapter.stream !== undefined && typeof adapter.stream !== 'function') {
    throw new TypeError('adapter.stream must be a function')
  }
  const declaration = { name: adapter.name }
  const capabilities = adapter.capabilities
  if (capabilities !== undefined && capabilities !== null) {
    if (!isObject(capabilities)) throw new TypeError('adapter.capabilities must be an object')
    const echoes = capabilities.echoesReasoning
    if (echoes !== undefined) {
      if (!ECHOES_REASONING.includes(echoes)) {
        throw new TypeError(`adapter.capabilities.echoesReasoning must be one of ${ECHOES_REASONING.map((w) => `"${w}"`).join(', ')}`)
      }
      declaration.capabilities = { echoesReasoning: echoes }
    }
  }
  return declaration
}

/** An HTTP status as the component takes it (`u16`), or undefined. */
function statusOf(error) {
  for (const status of [error.status, error.statusCode]) {
    if (Number.isInteger(status) && status >= 0 && status <= 65535) return status
  }
  return undefined
}

/**
 * What an adapter threw (or its stream yielded as an `error` event), as the component's
 * `thrown-error`: its class name, message, code and HTTP status, by which the component
 * classifies the run's failure as OMA does.
 */
export function thrownError(error) {
  if (error === null || (typeof error !== 'object' && typeof error !== 'function')) {
    return { name: 'Error', message: String(error) }
  }
  const name = typeof error.name === 'string' && error.name !== '' ? error.name : 'Error'
  const message = typeof error.message === 'string' ? error.message : errorMessage(error)
  const out = { name, message }
  if (typeof error.code === 'string' || typeof error.code === 'number') out.code = String(error.code)
  const status = statusOf(error)
  if (status !== undefined) out.status = status
  return out
}

/** An adapter's value as JSON text, or a failure saying why it has none. */
function jsonText(value, what) {
  let text
  try {
    text = JSON.stringify(value)
  } catch (error) {
    return { failed: { name: 'TypeError', message: `the adapter's ${what} is not JSON: ${errorMessage(error)}` } }
  }
  return { text: text ?? 'null' }
}

/** One event of an adapter's stream as the component reads it (`{type, data}`). */
function eventAnswer(event) {
  if (isObject(event) && event.type === 'error') {
    // The error the stream yielded: its fields, which JSON would drop from an Error.
    const data = event.data
    return { tag: 'model-event', val: JSON.stringify({ type: 'error', data: thrownError(data) }) }
  }
  const json = jsonText(event, 'stream event')
  if (json.failed) return { tag: 'model-failed', val: json.failed }
  return { tag: 'model-event', val: json.text }
}

/** Whether the stream ends with this event (the component asks for nothing after it). */
function lastEvent(event) {
  return isObject(event) && (event.type === 'done' || event.type === 'error')
}

/** The abort signal a call hands its adapter: the caller's and the call's time limit. */
function callSignal(runSignal, timeoutMs) {
  const timeout = timeoutMs > 0 ? AbortSignal.timeout(timeoutMs) : undefined
  const signals = [runSignal, timeout].filter((s) => s !== undefined && s !== null)
  if (signals.length <= 1) return signals[0]
  return AbortSignal.any(signals)
}

/**
 * One model call of a run, as the drive loop performs it. `call` is the step's JSON: the
 * conversation, OMA's `LLMChatOptions`, whether the run streams and the call's time limit.
 * `first()` starts the call and resolves with the first answer; for a stream, `next()` resolves
 * with each further answer as the session asks for it, and `close()` lets go of the stream.
 */
export function modelCall(adapter, call, { textDeltas, signal }) {
  const abortSignal = callSignal(signal, Number(call.timeoutMs ?? 0))
  const options = abortSignal === undefined ? call.options : { ...call.options, abortSignal }
  let iterator = null
  let over = false
  const close = () => {
    over = true
    const it = iterator
    iterator = null
    if (it && typeof it.return === 'function') {
      // A stream let go of early; what its cleanup throws changes nothing.
      Promise.resolve().then(() => it.return()).catch(() => {})
    }
  }
  const pull = async () => {
    let step
    try {
      step = await iterator.next()
    } catch (error) {
      close()
      return { tag: 'model-failed', val: thrownError(error) }
    }
    if (step.done) {
      close()
      return { tag: 'model-end' }
    }
    const answer = eventAnswer(step.value)
    if (answer.tag !== 'model-event' || lastEvent(step.value)) close()
    return answer
  }
  const first = async () => {
    try {
      if (call.stream && textDeltas && typeof adapter.stream === 'function') {
        const stream = adapter.stream(call.messages, options)
        const make = stream?.[Symbol.asyncIterator] ?? stream?.[Symbol.iterator]
        if (typeof make !== 'function') {
          return { tag: 'model-failed', val: { name: 'TypeError', message: 'adapter.stream must return an async iterable of stream events' } }
        }
        iterator = make.call(stream)
        return await pull()
      }
      const response = await adapter.chat(call.messages, options)
      const json = jsonText(response, 'LLMResponse')
      if (json.failed) return { tag: 'model-failed', val: json.failed }
      return { tag: 'model-response', val: json.text }
    } catch (error) {
      return { tag: 'model-failed', val: thrownError(error) }
    }
  }
  return {
    first,
    /** Whether the stream has more to give when asked. */
    streaming: () => !over && iterator !== null,
    next: pull,
    close,
  }
}
