// OMA's `OpenMultiAgent` for single agents (OMA: orchestrator/orchestrator.ts) and the package's
// `runAgent`: a one-off agent with the orchestrator's defaults, OMA's built-in tools registered
// (granted by `tools`), progress events and online evaluation. Teams and task graphs are not
// part of the package.

import { callComponent, driver } from '../component.js'
import { prepareConfig } from '../agent/config.js'
import { runInputJson } from '../agent/input.js'
import { complete } from '../agent/result.js'
import { newRun, sessionOptions } from '../agent/run-options.js'
import { registerBuiltInTools } from '../tool/built-in/index.js'
import { ToolRegistry } from '../tool/framework.js'
import { observabilityOf } from '../observability/run-records.js'
import { isObject, refuseUnknown } from '../utils/options.js'
import { createOnlineEvaluator, NOOP_ONLINE_EVALUATION } from '../eval/online.js'

/** `evaluation.storePayloads` as the component's word: `none`, `redacted` or `full`. */
function storePayloads(value) {
  if (value === true) return 'full'
  if (value === undefined || value === null || value === false) return 'none'
  if (value === 'none' || value === 'redacted' || value === 'full') return value
  throw new TypeError('evaluation.storePayloads must be "none", "redacted" or "full"')
}

const RUN_AGENT_KEYS = ['onProgress', 'evaluation', 'abortSignal', 'runId', 'metadata', 'egressPolicy', 'onTrace']
const EVALUATION_KEYS = ['sampleRate', 'storePayloads', 'onCase']

/** A fresh registry with OMA's built-in tools registered (none is granted without `tools`). */
function builtInRegistry() {
  const registry = new ToolRegistry()
  registerBuiltInTools(registry)
  return registry
}

/**
 * A one-off agent run with `runAgent`'s options: progress to `onProgress` (the orchestrator's,
 * else the options'), online evaluation cases to `evaluation.onCase`, trace records to the
 * orchestrator's sinks (`observability`, from `observabilityOf`).
 */
async function runAgentWith(config, input, options, onProgress, observability) {
  refuseUnknown('runAgent options', options, RUN_AGENT_KEYS)
  const evaluation = options.evaluation
  if (evaluation !== undefined && evaluation !== null) refuseUnknown('evaluation', evaluation, EVALUATION_KEYS)
  const effective = options.egressPolicy !== undefined && config.egressPolicy === undefined
    ? { ...config, egressPolicy: options.egressPolicy }
    : config
  // As OMA's orchestrator builds it: a fresh registry holding the built-in tools (granted by `tools`).
  const { json, host } = prepareConfig(effective, builtInRegistry())
  // The input as Agent.run gives it: its long media data beside the JSON text.
  const parts = runInputJson(input)
  const traced = typeof options.onTrace === 'function'
  const run = newRun(host, {
    abortSignal: options.abortSignal, runId: options.runId, metadata: options.metadata,
    ...(traced ? { onTrace: options.onTrace } : {}),
    // OMA names the agent's trace events after the agent whenever they are made (for onTrace,
    // or for a LegacyCallbackTraceSink among the sinks).
    ...(traced || observability?.legacy ? { traceAgent: host.name } : {}),
  }, observability)
  // A signal already aborted still makes a session: the drive loop cancels it before its first
  // step, so the run's trace opens and closes cancelled (the core's rule) and nothing is sent.
  json.tools = run.tools.json
  const progress = onProgress ?? options.onProgress
  const runOptions = {
    progress: typeof progress === 'function',
    evaluation: evaluation
      ? {
          storePayloads: storePayloads(evaluation.storePayloads),
          sampleRate: evaluation.sampleRate ?? 1,
        }
      : undefined,
  }
  const session = callComponent(() =>
    driver.runAgent(JSON.stringify(json), parts.text, parts.strings ?? [], runOptions, sessionOptions(run)),
  )
  return complete(session, { ...host, onProgress: progress, onCase: evaluation?.onCase }, run)
}

/**
 * The package's `runAgent(config, input, {onProgress, evaluation, abortSignal, runId,
 * metadata})`: a one-off agent, with progress events and online evaluation.
 */
export async function runAgent(config, input, options = {}) {
  return runAgentWith(config, input, options ?? {})
}

/** Every key of OMA 1.16.1's OrchestratorConfig; any other is refused, named. */
const ORCHESTRATOR_CONFIG_KEYS = new Set([
  'maxConcurrency', 'schedulingStrategy', 'schedulingWeights', 'strictAssignees', 'executionRouter',
  'executionRouting', 'maxDelegationDepth', 'maxTokenBudget', 'maxCostBudget', 'estimateCost', 'defaultModel',
  'defaultProvider', 'defaultBaseURL', 'defaultApiKey', 'egressPolicy', 'checkpoint', 'recovery',
  'defaultToolPreset', 'defaultCwd', 'defaultShellExecutor', 'onProgress', 'evaluation', 'observability',
  'onTrace', 'onToolCall', 'requireConsequentialConfirmation', 'onApproval', 'onTaskDispatch', 'onPlanReady',
  'onAgentStream',
])

/**
 * OMA's `OpenMultiAgent`, for single agents: `runAgent(config, input, options)` with the
 * orchestrator's defaults (`defaultModel`, `defaultProvider`, `defaultBaseURL`, `defaultApiKey`,
 * `maxTokenBudget`, `egressPolicy`, `onToolCall`, `defaultCwd`, `defaultShellExecutor`), its
 * `onProgress`, `onTrace`, `observability` (each run's trace records to its sinks; the
 * application owns their `forceFlush` and `shutdown`, as in OMA) and its online `evaluation`
 * (`orchestrator.evaluation`: `forceFlush`, `shutdown`, `getStats`). Teams and task graphs are
 * not part of the package.
 */
export class OpenMultiAgent {
  #config
  #observability
  #evaluator

  constructor(config = {}) {
    if (!isObject(config)) throw new TypeError('the orchestrator configuration must be an object')
    const unknown = Object.keys(config).filter((key) => !ORCHESTRATOR_CONFIG_KEYS.has(key))
    if (unknown.length > 0) {
      throw new TypeError(
        `the orchestrator configuration has ${unknown.length === 1 ? 'an unknown key' : 'unknown keys'} ` +
          `${unknown.map((key) => `"${key}"`).join(', ')}; it takes OMA's OrchestratorConfig keys`,
      )
    }
    // OMA's orchestrator hands every run's trace records to `observability.sinks`.
    this.#observability = observabilityOf(config.observability)
    this.#config = config
    this.#evaluator = createOnlineEvaluator(config.evaluation, config.estimateCost)
    /** OMA's online evaluation lifecycle: `forceFlush`, `shutdown`, `getStats` (a no-op without `evaluation`). */
    this.evaluation = this.#evaluator ?? NOOP_ONLINE_EVALUATION
  }

  /** Runs one agent with the orchestrator's defaults: OMA's AgentRunResult. */
  async runAgent(config, input, options = {}) {
    if (!isObject(config)) throw new TypeError('the agent configuration must be an object')
    const src = this.#config
    const budgets = [config.maxTokenBudget, src.maxTokenBudget].filter((b) => b !== undefined)
    const effective = {
      ...config,
      model: config.model ?? src.defaultModel,
      provider: config.provider ?? src.defaultProvider,
      baseURL: config.baseURL ?? src.defaultBaseURL,
      apiKey: config.apiKey ?? src.defaultApiKey,
      ...(budgets.length ? { maxTokenBudget: Math.min(...budgets) } : {}),
      egressPolicy: config.egressPolicy ?? src.egressPolicy,
      onToolCall: config.onToolCall ?? src.onToolCall,
      cwd: config.cwd === undefined ? src.defaultCwd : config.cwd,
      shellExecutor: config.shellExecutor ?? src.defaultShellExecutor,
    }
    for (const key of Object.keys(effective)) {
      if (effective[key] === undefined) delete effective[key]
    }
    const opts = options ?? {}
    refuseUnknown('runAgent options', opts, ['abortSignal', 'runId', 'metadata', 'egressPolicy'])
    const { abortSignal, runId, metadata, egressPolicy } = opts
    // Online evaluation scores the run after it settles, off its path (OMA: eval/online.ts).
    const evaluated = this.#evaluator === undefined
      ? undefined
      : { input: Array.isArray(input) ? structuredClone(input) : input, startedAtMs: Date.now() }
    const result = await runAgentWith(
      effective,
      input,
      {
        ...(abortSignal ? { abortSignal } : {}),
        ...(runId !== undefined ? { runId } : {}),
        ...(metadata !== undefined ? { metadata } : {}),
        ...(egressPolicy !== undefined ? { egressPolicy } : {}),
        // OMA's OrchestratorConfig.onTrace, with the agent's name as traceAgent.
        ...(typeof src.onTrace === 'function' ? { onTrace: src.onTrace } : {}),
      },
      typeof src.onProgress === 'function' ? src.onProgress : undefined,
      this.#observability,
    )
    if (evaluated !== undefined) {
      this.#evaluator.enqueue({ input: evaluated.input, result, durationMs: Date.now() - evaluated.startedAtMs })
    }
    return result
  }

}
