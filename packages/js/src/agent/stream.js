// A streamed run as OMA's StreamEvents: the session's agent events in OMA's shapes, then `done`
// with the result or `error`.

import { errorFrom } from '../errors.js'
import { cancelledResult, finish, internalFailure } from './result.js'
import { CANCELLED, drive } from './runner.js'

function mediaSource(source) {
  if (source.tag === 'base64') {
    return { type: 'base64', media_type: source.val.mediaType, data: source.val.data }
  }
  return { type: 'url', media_type: source.val.mediaType, url: source.val.url }
}

function resultContent(content) {
  if (content.tag === 'text') return content.val
  return content.val.map((part) => {
    if (part.tag === 'text') return { type: 'text', text: part.val }
    if (part.tag === 'image') return { type: 'image', source: mediaSource(part.val) }
    return { type: 'file', filename: part.val.filename, source: mediaSource(part.val.source) }
  })
}

function toolUseBlock(block) {
  const out = { type: 'tool_use', id: block.id, name: block.name, input: JSON.parse(block.input || '{}') }
  if (block.signature !== undefined) out.signature = block.signature
  return out
}

/** An agent event of the component as OMA's StreamEvent, or null for one OMA does not stream. */
function streamEvent(event) {
  switch (event.tag) {
    case 'text-delta':
      return { type: 'text_delta', data: event.val }
    case 'reasoning-delta':
      return { type: 'reasoning', data: event.val }
    case 'text':
      return { type: 'text', data: event.val }
    case 'tool-use':
      return { type: 'tool_use', data: toolUseBlock(event.val) }
    case 'tool-result': {
      const block = {
        type: 'tool_result',
        tool_use_id: event.val.toolUseId,
        content: resultContent(event.val.content),
      }
      if (event.val.isError !== undefined) block.is_error = event.val.isError
      return { type: 'tool_result', data: block }
    }
    case 'loop-detected':
      return {
        type: 'loop_detected',
        data: { kind: event.val.kind, repetitions: event.val.repetitions, detail: event.val.detail },
      }
    case 'budget-exceeded':
      return {
        type: 'budget_exceeded',
        data: errorFrom({ name: 'TokenBudgetExceededError', code: 'TOKEN_BUDGET_EXCEEDED', message: event.val }),
      }
    default:
      return null
  }
}

/** The last event of a stream: `done` for a success or a spent budget (as OMA), else `error`. */
function lastEvent(result) {
  if (result.success || result.budgetExceeded) return { type: 'done', data: result }
  const error = result.error instanceof Error ? result.error : errorFrom(result.errorInfo ?? { name: 'Error', message: result.output })
  // The failed result stays reachable from the error (the package's older `error.result`).
  Object.defineProperty(error, 'result', { value: result, enumerable: false, configurable: true, writable: true })
  return { type: 'error', data: error, ...(result.errorInfo ? { errorInfo: result.errorInfo } : {}) }
}

/**
 * Drives a streamed session: yields OMA's StreamEvents as the session hands out agent events
 * (`text_delta` only with `textDeltas`), then `done` or `error`. Never throws.
 */
export async function* streamEvents(session, host, run) {
  const steps = drive(session, host, run)
  let result
  try {
    for (;;) {
      const { done, value } = await steps.next()
      if (done) {
        result = run.signal?.aborted ? cancelledResult(run) : await finish(value, host, run)
        break
      }
      const event = streamEvent(value)
      if (event && (event.type !== 'text_delta' || host.textDeltas)) yield event
    }
  } catch (error) {
    result = error === CANCELLED ? cancelledResult(run) : internalFailure(run, error)
  } finally {
    await steps.return?.()
  }
  yield lastEvent(result)
}
