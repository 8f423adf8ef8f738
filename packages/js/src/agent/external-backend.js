// An `external-send` step performed: the agent's text to its external backend (OMA's `process`
// and `acp` kinds) through the caller's `backend.send`, or a process on Node.

import { errorMessage } from '../errors.js'
import { runProcess } from './process-backend.js'

/**
 * The answer to an `external-send` step: `{tag: 'ok', val: text}` from the backend, or
 * `{tag: 'err', val: message}` (a backend that throws or cannot run fails the run, not the host).
 */
export async function external(host, run, request) {
  const backend = host.backend ?? {}
  try {
    if (typeof backend.send === 'function') {
      const info = { kind: request.kind }
      if (run.signal) info.abortSignal = run.signal
      return { tag: 'ok', val: String(await backend.send(request.text, info)) }
    }
    if (request.kind === 'process' && typeof backend.command === 'string') {
      return await runProcess(backend, request.text, run.signal)
    }
    return {
      tag: 'err',
      val: `the ${request.kind} backend needs ${
        request.kind === 'process' ? 'backend.command or ' : ''
      }backend.send(text)`,
    }
  } catch (error) {
    return { tag: 'err', val: errorMessage(error) }
  }
}
