// One run's options and state on the host side (OMA: RunOptions in agent/runner.ts): the
// caller's options checked, the run's identity, its tools, and the options its session is made
// with (seed, trace ids, trace records).

import { runIdentity } from '../observability/identity.js'
import { recordOptions } from '../observability/run-records.js'
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
 * tools (resolved now, so a tool added later is not part of a run under way). `observability`
 * (the orchestrator's checked `observability` option, see observability/run-records.js) turns
 * on the run's trace records and names the sinks they go to.
 */
export function newRun(host, options, observability) {
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
  if (observability !== undefined) run.observability = observability
  return run
}

/**
 * The options a run's session is made with: a fresh seed, trace ids when traced the legacy way
 * (by `onTrace`, or by a `LegacyCallbackTraceSink` reading the events its records carry), and
 * the records' options when the run has sinks.
 */
export function sessionOptions(run) {
  const out = { seed: seed() }
  if (run?.onTrace !== undefined || run?.observability?.legacy) {
    // OMA's trace ids: the run's identity, the caller's span and parent, the agent's trace name.
    const o = run.options
    out.trace = {
      runId: run.identity.runId,
      spanId: o.traceSpanId || undefined,
      parentId: o.traceParentId || undefined,
      agent: o.traceAgent,
      taskId: o.taskId,
    }
  }
  if (run?.observability !== undefined) out.records = recordOptions(run)
  return out
}
