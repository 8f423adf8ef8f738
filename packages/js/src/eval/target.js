// OMA's `targetFromAgent` (OMA: eval/target.ts): one agent configuration as an eval target, each
// sample a `runAgent` run carrying the case, the repeat, the caller's metadata and the model's
// fingerprint as run metadata, cancelled with the evaluation's signal.

/** The agent run's metadata for one sample. */
function runMetadata(agent, context, options) {
  return {
    eval_case: context.caseId,
    eval_repeat: String(context.repeat),
    ...options?.metadata,
    ...(agent.model !== undefined ? { model: agent.model } : {}),
    ...(agent.provider !== undefined ? { provider: agent.provider } : {}),
  }
}

/**
 * OMA's `targetFromAgent(agent, {metadata?})`: a target that runs `agent` (an agent
 * configuration) on each case's input (text as it is, anything else as `String(input)`) and
 * gives `{output, result}`. The orchestrator is imported on first use, so the eval subpath loads
 * nothing of the agent runtime until a target runs.
 */
export function targetFromAgent(agent, options) {
  if (agent === null || typeof agent !== 'object') throw new TypeError('targetFromAgent needs an agent configuration')
  if (options !== undefined) {
    if (options === null || typeof options !== 'object') throw new TypeError('targetFromAgent options must be an object')
    for (const key of Object.keys(options)) {
      if (key !== 'metadata') throw new TypeError(`targetFromAgent does not support the option "${key}"`)
    }
  }
  return async (input, context) => {
    const { OpenMultiAgent } = await import('../orchestrator/orchestrator.js')
    const result = await new OpenMultiAgent().runAgent(agent, typeof input === 'string' ? input : String(input), {
      abortSignal: context.signal,
      metadata: runMetadata(agent, context, options),
    })
    return { output: result.output, result }
  }
}
