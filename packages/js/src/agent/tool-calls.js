// A `call-tool` step performed: the granted tool run as OMA runs it (the registry's executor
// for OMA tools, with the `onToolCall` gate; the package's plain tool objects as they are), the
// run's observers told, and the outcome answered to the session.

import { InvalidMessageError, errorMessage, fromComponent } from '../errors.js'

function toolContent(value) {
  // The package's tool objects return a string, OMA tool-result parts, or `{data, isError}`.
  // `isError` is passed on as the tool said it (OMA sends `is_error: false` when a tool says
  // false, and no field when it says nothing).
  if (typeof value === 'string') return { content: value, isError: undefined }
  if (Array.isArray(value)) return { content: value, isError: undefined }
  if (value && typeof value === 'object' && ('data' in value || 'content' in value || 'modelOutput' in value)) {
    const inner = value.modelOutput ?? ('data' in value ? value.data : value.content)
    const content = typeof inner === 'string' || Array.isArray(inner) ? inner : JSON.stringify(inner) ?? ''
    const said = value.isError ?? value.is_error
    return { content, isError: said === undefined ? undefined : Boolean(said) }
  }
  if (value === undefined || value === null) return { content: '', isError: undefined }
  return { content: JSON.stringify(value) ?? String(value), isError: undefined }
}

function toolContext(host, run, call) {
  const context = {
    agent: { name: host.name, role: host.role, model: host.model },
    toolUseId: call.id,
    toolCallId: call.id,
    runId: run.identity.runId,
  }
  if (call.signature !== undefined) context.signature = call.signature
  if (run.signal) context.abortSignal = run.signal
  if (host.cwd !== undefined) context.cwd = host.cwd
  if (host.credentials !== undefined) context.credentials = host.credentials
  if (host.shellExecutor !== undefined) context.shellExecutor = host.shellExecutor
  return context
}

/**
 * Runs a `call-tool` step's tool and gives `{content, isError, gate?}`: a tool the agent was not
 * granted is not run (OMA's default-deny), OMA tools go through the executor and its gate, the
 * package's plain tool objects are called as they are (what one throws is a failed result).
 */
export async function callTool(host, run, call) {
  let input
  try {
    input = call.input ? JSON.parse(call.input) : {}
  } catch {
    input = {}
  }
  try {
    run.options.onToolCall?.(call.name, input)
  } catch {
    // An observer that throws does not change the run.
  }
  const entry = run.tools.byName.get(call.name)
  const context = toolContext(host, run, call)
  let outcome
  if (!entry) {
    // OMA's default-deny: a tool the agent was not granted (registered or not) is not run.
    outcome = {
      content:
        `Tool "${call.name}" is not granted to this agent. ` +
        'Built-in tools are opt-in: grant it via the agent\'s "tools" allowlist or ' +
        '"toolPreset" (or set the orchestrator\'s "defaultToolPreset").',
      isError: true,
    }
  } else if (entry.oma) {
    const result = entry.fromRegistry && typeof host.executor.execute === 'function'
      ? await host.executor.execute(call.name, input, context, { onToolCall: host.onToolCall })
      : await host.loose.run(entry.tool, input, context, { onToolCall: host.onToolCall })
    try {
      run.options.onToolResult?.(call.name, result)
    } catch {
      // As above.
    }
    // OMA's result block carries `result.isError` as the tool gave it: `false` is sent.
    outcome = { content: result.modelOutput ?? result.data, isError: result.isError }
    // The gate's decision, for the trace (OMA's gated, gateAction, gateReason).
    const gate = result.metadata?.toolCallGate
    if (gate && typeof gate.action === 'string') {
      outcome.gate = { action: gate.action, reason: typeof gate.reason === 'string' ? gate.reason : undefined }
    }
  } else if (typeof entry.tool.execute !== 'function') {
    outcome = { content: `Tool "${call.name}" has no execute function`, isError: true }
  } else {
    try {
      outcome = toolContent(await entry.tool.execute(input, context))
    } catch (error) {
      outcome = { content: errorMessage(error), isError: true }
    }
    try {
      run.options.onToolResult?.(call.name, { data: outcome.content, isError: outcome.isError ?? false })
    } catch {
      // As above.
    }
  }
  return outcome
}

/**
 * Answers a tool call. Content the component cannot read as OMA JSON goes back as a failed
 * result naming why, so the model sees the failure instead of the run ending.
 */
export function answerTool(session, id, outcome) {
  let content
  try {
    content = JSON.stringify(outcome.content ?? '')
  } catch (error) {
    content = JSON.stringify(`tool result is not JSON data: ${errorMessage(error)}`)
    outcome = { ...outcome, isError: true }
  }
  try {
    session.answer({ tag: 'tool-json', val: { id, content, isError: outcome.isError, gate: outcome.gate } })
  } catch (e) {
    const error = fromComponent(e)
    if (!(error instanceof InvalidMessageError)) throw error
    // Content the component cannot read as OMA JSON: report it to the model as a failure.
    session.answer({
      tag: 'tool-json',
      val: { id, content: JSON.stringify(error.message), isError: true, gate: outcome.gate },
    })
  }
}
