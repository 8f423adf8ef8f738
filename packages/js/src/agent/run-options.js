// One run's options and state on the host side (OMA: RunOptions in agent/runner.ts): the
// caller's options checked, the run's identity, its tools, and the options its session is made
// with (seed, trace ids).

import { runIdentity } from '../observability/identity.js'
import { resolveTools } from '../tool/grants.js'
import { refuseUnknown } from '../utils/options.js'
import { seed } from '../utils/random.js'

const RUN_OPTION_KEYS = [
  'abortSignal', 'runId', 'onToolCall', 'onToolResult', 'onMessage', 'onWarning', 'onTrace',
  'taskId', 'traceAgent', 'traceSpanId', 'traceParentId', 'identity', 'team', 'metadata',
]

/** The caller's run options, unknown keys refused. */
function runOptions(options) {
  if (options === undefined || options === null) return {}
  refuseUnknown('run options', options, RUN_OPTION_KEYS)
  if (options.abortSignal !== undefined && !(options.abortSignal instanceof AbortSignal)) {
    throw new TypeError('abortSignal must be an AbortSignal')
  }
  return options
}

/**
 * One run's state: its checked options, abort signal, identity, tool timings, metadata and
 * tools (resolved now, so a tool added later is not part of a run under way).
 */
export function newRun(host, options) {
  const opts = runOptions(options)
  const run = {
    options: opts,
    signal: opts.abortSignal,
    identity: runIdentity(opts.runId),
    timings: [],
    metadata: opts.metadata,
    tools: resolveTools(host),
  }
  if (typeof opts.onTrace === 'function') run.onTrace = opts.onTrace
  return run
}

/** The options a run's session is made with: a fresh seed, and trace ids when traced. */
export function sessionOptions(run) {
  if (run?.onTrace === undefined) return { seed: seed() }
  // OMA's trace ids: the run's identity, the caller's span and parent, the agent's trace name.
  const o = run.options
  return {
    seed: seed(),
    trace: {
      runId: run.identity.runId,
      spanId: o.traceSpanId || undefined,
      parentId: o.traceParentId || undefined,
      agent: o.traceAgent,
      taskId: o.taskId,
    },
  }
}
