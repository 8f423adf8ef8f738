// A run's end as OMA's AgentRunResult: the component's result in OMA's form (identity, status,
// tool-call records, key order), `afterRun` applied as OMA applies it, and the results of runs
// that were cancelled or failed on this side.

import { errorFrom, errorMessage } from '../errors.js'
import { CANCELLED, drive, safely } from './runner.js'

/** No tokens used. */
export const ZERO_USAGE = Object.freeze({ input_tokens: 0, output_tokens: 0 })

function mediaSummary(part) {
  const location = part.source?.type === 'base64' ? 'inline data' : 'URL reference'
  if (part.type === 'image') return `[image: ${part.source?.media_type}; ${location}]`
  return `[file: ${part.filename}; ${part.source?.media_type}; ${location}]`
}

/** OMA's record of a tool result: its text, media named by a placeholder. */
function recordedOutput(output) {
  if (typeof output === 'string') return output
  if (!Array.isArray(output)) return output === undefined || output === null ? '' : String(output)
  return output.map((part) => (part?.type === 'text' ? part.text : mediaSummary(part ?? {}))).join('\n')
}

/** A failed AgentRunResult for `error`, classified as `status` and `kind`. */
function failedResult(run, error, status, kind) {
  const message = errorMessage(error)
  const info = { kind }
  if (error?.code !== undefined) info.code = String(error.code)
  if (error instanceof Error) info.name = error.name
  info.message = message.slice(0, 1024)
  info.retryable = kind === 'cancellation' ? false : Boolean(error?.retryable ?? true)
  return {
    success: false,
    identity: run.identity,
    status: { code: status, message: message.slice(0, 256) },
    errorInfo: info,
    output: message,
    messages: [],
    tokenUsage: { ...ZERO_USAGE },
    toolCalls: [],
    structured: undefined,
    ...(run.metadata ? { metadata: run.metadata } : {}),
    turns: 0,
    error,
  }
}

/** The result of a run its caller's signal cancelled: OMA's `Run cancelled by caller.` */
export function cancelledResult(run) {
  const error = new Error('Run cancelled by caller.')
  error.name = 'AbortError'
  return failedResult(run, error, 'cancelled', 'cancellation')
}

/** The component's AgentRunResult in OMA's form: identity, status, records, key order. */
function omaResult(raw, run) {
  const toolCalls = (raw.toolCalls ?? []).map((call, i) => {
    const timing = run.timings[i]
    return {
      toolName: call.toolName,
      input: call.input,
      output: recordedOutput(call.output),
      duration: timing?.end !== undefined ? Math.max(0, timing.end - timing.start) : 0,
    }
  })
  const success = Boolean(raw.success)
  const result = {
    success,
    identity: run.identity,
    status: raw.status ?? (success ? { code: 'ok' } : { code: 'error', message: String(raw.output ?? '').slice(0, 256) }),
    ...(raw.errorInfo ? { errorInfo: raw.errorInfo } : {}),
    output: raw.output,
    messages: raw.messages ?? [],
    tokenUsage: raw.tokenUsage ?? { ...ZERO_USAGE },
    toolCalls,
    // The zod schema's own output when it validated here; the component's value otherwise.
    structured: raw.structured === undefined ? undefined : run.structured !== undefined ? run.structured : raw.structured,
    ...(raw.loopDetected ? { loopDetected: true } : {}),
    ...(raw.budgetExceeded ? { budgetExceeded: true } : {}),
    ...(run.metadata ? { metadata: run.metadata } : {}),
    turns: raw.turns ?? 0,
  }
  if (!success && !raw.budgetExceeded) {
    result.error = errorFrom(raw.errorInfo ?? { name: 'Error', message: raw.output })
  }
  return result
}

/** OMA's ensureAgentOutcome after afterRun: the status agrees with `success`. */
function ensureOutcome(result, run) {
  let status = result.status
  let errorInfo = result.errorInfo
  if (result.budgetExceeded) {
    status = { code: 'budget_exhausted', ...(status?.message ? { message: status.message } : {}) }
  } else if (result.success && status?.code !== 'ok') {
    status = { code: 'ok' }
    errorInfo = undefined
  } else if (!result.success && (status === undefined || status.code === 'ok')) {
    status = { code: 'error', message: String(result.output ?? '').slice(0, 256) }
  }
  const out = { ...result, success: status.code === 'ok', identity: run.identity, status }
  if (errorInfo === undefined) delete out.errorInfo
  else out.errorInfo = errorInfo
  return out
}

/** The component's result in OMA's form, with `afterRun` applied to a success or a spent budget. */
export async function finish(raw, host, run) {
  let result = omaResult(raw, run)
  if (host.afterRun && (result.success || result.budgetExceeded)) {
    try {
      result = ensureOutcome(await host.afterRun(result), run)
    } catch (error) {
      const failed = failedResult(run, error instanceof Error ? error : new Error(String(error)), 'error', 'callback')
      return failed
    }
  }
  return result
}

/** The result of a run this host failed (a bug on this side): a failure of kind `unknown`. */
export function internalFailure(run, error) {
  return failedResult(run, error instanceof Error ? error : new Error(String(error)), 'error', 'unknown')
}

/**
 * Drives a session to its end and gives OMA's AgentRunResult; a finished `runAgent` reports its
 * `agent_complete` progress with that result. Never rejects.
 */
export async function complete(session, host, run) {
  const steps = drive(session, host, run)
  let raw
  try {
    for (;;) {
      const { done, value } = await steps.next()
      if (done) {
        raw = value
        break
      }
    }
  } catch (error) {
    return error === CANCELLED ? cancelledResult(run) : internalFailure(run, error)
  }
  if (run.signal?.aborted) return cancelledResult(run)
  const result = await finish(raw, host, run)
  if (run.completed) await safely(host.onProgress, { ...run.completed, data: result })
  return result
}
