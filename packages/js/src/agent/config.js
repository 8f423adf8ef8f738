// An OMA AgentConfig made into the component's JSON configuration and what the host side keeps
// (hooks, tools, backends, callbacks): every key checked, OMA's keys the package does not
// implement refused by name, unknown keys refused, and what the environment gives an agent that
// leaves its key, base URL or region out.

import { environmentVariable } from '#platform'
import { codec } from '../component.js'
import { preflightMessages } from '../llm/validate.js'
import { ToolExecutor } from '../tool/executor.js'
import { ToolRegistry } from '../tool/framework.js'
import { toolEntry } from '../tool/grants.js'
import { isObject, refuseUnknown } from '../utils/options.js'
import { adapterDeclaration } from './llm-adapter.js'
import { structuredOutput } from './structured-output.js'

/** Keys of OMA's AgentConfig passed to the component as they are. */
const PLAIN_KEYS = [
  'name', 'model', 'provider', 'baseURL', 'apiKey', 'region', 'systemPrompt', 'maxTurns',
  'maxTokenBudget', 'maxTokens', 'temperature', 'topP', 'topK',
  // OMA's provider options: each wire format carries them as OMA's adapter does.
  'frequencyPenalty', 'presencePenalty', 'minP', 'parallelToolCalls', 'extraBody',
]
/**
 * OMA's context and loop options, passed to the component as they are; it checks them (a wrong
 * type or a missing field is a typed error naming the field, before any request).
 */
const CONTEXT_KEYS = [
  'contextStrategy', 'loopDetection', 'compressToolResults', 'preserveReasoningAsText',
  'compressReasoningText',
]
/** The package's own keys, passed to the component as they are. */
const PACKAGE_PLAIN_KEYS = ['thinkingBudget', 'deadlineMs', 'aws']

/**
 * OMA AgentConfig keys the package does not implement. Each would change what is sent or how a
 * run goes, so a configuration that sets one is refused rather than run differently.
 */
const UNSUPPORTED = {
  toolPreset: "OMA's built-in tools",
}

/**
 * Every key of OMA 1.16.1's AgentConfig (acted on, ignored or refused above) and the package's
 * own keys. Any other key is refused with a TypeError naming it: a misspelt option would
 * otherwise be dropped without a word.
 */
const OMA_CONFIG_KEYS = [
  'name', 'history', 'description', 'capabilities', 'costTier', 'latencyClass', 'permissionBoundary',
  'model', 'adapter', 'backend', 'provider', 'baseURL', 'egressPolicy', 'apiKey', 'region', 'systemPrompt',
  'customTools', 'tools', 'disallowedTools', 'onToolCall', 'toolPreset', 'credentials', 'shellExecutor',
  'cwd', 'maxTurns', 'maxTokens', 'maxTokenBudget', 'contextStrategy', 'temperature', 'frequencyPenalty',
  'presencePenalty', 'topP', 'topK', 'minP', 'parallelToolCalls', 'extraBody', 'thinking', 'timeoutMs',
  'callTimeoutMs', 'loopDetection', 'maxToolOutputChars', 'compressToolResults', 'preserveReasoningAsText',
  'compressReasoningText', 'outputSchema', 'beforeRun', 'afterRun',
]
/** The package's own configuration keys (README, "API"). */
const PACKAGE_CONFIG_KEYS = ['thinkingBudget', 'deadlineMs', 'call', 'aws', 'textDeltas']
const CONFIG_KEYS = new Set([...OMA_CONFIG_KEYS, ...PACKAGE_CONFIG_KEYS])

/** Refuses configuration keys that are neither OMA's nor the package's, naming them all. */
function refuseUnknownConfigKeys(config) {
  const unknown = Object.keys(config).filter((key) => !CONFIG_KEYS.has(key))
  if (unknown.length === 0) return
  const names = unknown.map((key) => `"${key}"`).join(', ')
  throw new TypeError(
    `the agent configuration has ${unknown.length === 1 ? 'an unknown key' : 'unknown keys'} ${names}; ` +
      "it takes OMA's AgentConfig keys and the package's thinkingBudget, deadlineMs, call, aws and textDeltas",
  )
}

function environment(name) {
  const value = environmentVariable(name)
  return typeof value === 'string' && value !== '' ? value : undefined
}

/** The first of `names` that is set and not empty. */
function firstFromEnvironment(names) {
  for (const name of names) {
    const value = environment(name)
    if (value !== undefined) return value
  }
  return undefined
}

/**
 * The component's table of environment variable names for `provider`, asked once per provider
 * (`runAgent` prepares a configuration on every run; the table never changes). At most
 * ENV_NAMES_KEPT providers are kept, so that made-up provider names cannot grow it.
 */
const envNames = new Map()
const ENV_NAMES_KEPT = 64

function environmentNames(provider) {
  let names = envNames.get(provider)
  if (names === undefined) {
    names = codec.environmentNames(provider)
    if (envNames.size < ENV_NAMES_KEPT) envNames.set(provider, names)
  }
  return names
}

/**
 * What the environment gives an agent's configuration that leaves it out, as OMA (and the SDKs it
 * drives) read it: the API key, the base URL and Bedrock's region. Which variables those are is
 * the component's table (`codec.environmentNames`, docs/api-keys.md), so that every package reads
 * the same ones.
 */
function fillFromEnvironment(json) {
  const names = environmentNames(json.provider)
  if (json.apiKey === undefined) {
    const key = firstFromEnvironment(names.apiKey)
    if (key !== undefined) json.apiKey = key
  }
  if (json.baseURL === undefined && names.baseUrl !== undefined) {
    const url = environment(names.baseUrl)
    if (url !== undefined) json.baseURL = url
  }
  if (json.region === undefined) {
    const region = firstFromEnvironment(names.region) ?? names.defaultRegion
    if (region !== undefined) json.region = region
  }
}

function callTimeout(config) {
  const call = config.call === undefined || config.call === null ? undefined : config.call
  if (call !== undefined && !isObject(call)) throw new TypeError('call must be an object')
  const out = call === undefined ? undefined : { ...call }
  if (config.callTimeoutMs !== undefined && config.callTimeoutMs > 0) {
    // OMA's per-call bound: one model call with whatever its transport retries.
    if (out?.deadlineMs === undefined) return { ...out, deadlineMs: config.callTimeoutMs }
  }
  return out
}

function egress(config, call) {
  const policy = config.egressPolicy
  if (policy === undefined || policy === null) return call
  if (call?.egress !== undefined) {
    throw new TypeError('set either egressPolicy or call.egress, not both')
  }
  if (policy.mode === 'offline') return { ...call, egress: 'offline' }
  if (policy.mode === 'allowlist' && Array.isArray(policy.allowedOrigins)) {
    return { ...call, egress: [...policy.allowedOrigins] }
  }
  throw new TypeError('egressPolicy must be {mode: "offline"} or {mode: "allowlist", allowedOrigins}')
}

/**
 * Copies OMA's context and loop options into the component's configuration, and returns the
 * callbacks that stay on this side (a `custom` strategy's `compress`, an `onLoopDetected`
 * function), which the session asks for by steps.
 */
function contextOptions(config, json) {
  for (const key of CONTEXT_KEYS) {
    if (config[key] !== undefined && config[key] !== null) json[key] = config[key]
  }
  const loop = config.loopDetection
  let onLoopDetected
  if (isObject(loop) && loop.onLoopDetected === 'callback') {
    // The component's word for a function on this side, not one of OMA's.
    throw new TypeError('`loopDetection.onLoopDetected` must be "warn", "terminate" or a function')
  }
  if (isObject(loop) && typeof loop.onLoopDetected === 'function') {
    // OMA's function stays here: the session asks it (a `decide-loop` step) on each loop.
    onLoopDetected = loop.onLoopDetected
    json.loopDetection = { ...loop, onLoopDetected: 'callback' }
  }
  const strategy = config.contextStrategy
  if (isObject(strategy) && strategy.type === 'custom') {
    // OMA's `compress(messages, estimatedTokens)` stays here: the session asks for it before
    // every request (a `compress` step) and checks what it returns.
    if (typeof strategy.compress !== 'function') {
      throw new TypeError('contextStrategy.compress must be a function for contextStrategy.type "custom"')
    }
    json.contextStrategy = { type: 'custom' }
    return { compress: strategy.compress, onLoopDetected }
  }
  return { onLoopDetected }
}

const BACKEND_KEYS = ['kind', 'command', 'args', 'cwd', 'env', 'timeoutMs', 'input', 'permission', 'send']

/**
 * Splits an OMA AgentConfig into the component's JSON configuration (without tools, which are
 * resolved per run from the registry) and what the host side needs.
 */
export function prepareConfig(config, registry, executor) {
  if (config === null || typeof config !== 'object') {
    throw new TypeError('the agent configuration must be an object')
  }
  refuseUnknownConfigKeys(config)
  for (const key of Object.keys(UNSUPPORTED)) {
    if (config[key] !== undefined) {
      throw new TypeError(
        `${key} (${UNSUPPORTED[key]}) is not supported by oma-component; see "OMA's agent API" in its README`,
      )
    }
  }
  const name = typeof config.name === 'string' ? config.name : 'agent'
  if (config.model === undefined && (config.backend === undefined || config.backend === null)) {
    throw new Error(
      `Agent "${name}" has no model. Set 'model' in its config, or a 'backend', ` +
        `or run it through OpenMultiAgent to inherit 'defaultModel'.`,
    )
  }
  const json = {}
  for (const key of [...PLAIN_KEYS, ...PACKAGE_PLAIN_KEYS]) {
    if (config[key] !== undefined && config[key] !== null) json[key] = config[key]
  }
  const callbacks = contextOptions(config, json)
  const outputSchema = structuredOutput(config, json)
  for (const key of ['frequencyPenalty', 'presencePenalty', 'minP']) {
    // JSON would carry NaN or Infinity as null, dropping the option without a word.
    if (typeof json[key] === 'number' && !Number.isFinite(json[key])) {
      throw new TypeError(`${key} must be a finite number, got ${json[key]}`)
    }
  }
  // OMA's LLMAdapter: the object stays here and answers the session's model calls; the
  // component is told its name and reasoning declaration. No provider is assumed for it, and the
  // environment's keys are not read, since no provider request is made.
  let adapter = null
  if (config.adapter !== undefined && config.adapter !== null) {
    json.adapter = adapterDeclaration(config.adapter)
    adapter = config.adapter
  } else {
    json.provider ??= 'anthropic'
  }
  json.model ??= 'external'
  if (adapter === null) fillFromEnvironment(json)
  if (config.thinking !== undefined && config.thinking !== null) {
    if (config.thinking.effort !== undefined) {
      // OMA's ThinkingConfig as it is: the component maps `effort` per wire format (and
      // checks it), and keeps `enabled: false` for DeepSeek's thinking switch.
      if (json.thinkingBudget !== undefined) {
        throw new TypeError('set either thinking or thinkingBudget, not both')
      }
      json.thinking = { ...config.thinking }
      if (json.thinking.enabled === true) json.thinking.budgetTokens ??= 1024
    } else if (config.thinking.enabled === true && json.thinkingBudget === undefined) {
      json.thinkingBudget = config.thinking.budgetTokens ?? 1024
    }
  }
  if (config.timeoutMs !== undefined && config.timeoutMs > 0 && json.deadlineMs === undefined) {
    // OMA's whole-run bound is the component's run deadline.
    json.deadlineMs = config.timeoutMs
  }
  const call = egress(config, callTimeout(config))
  if (call !== undefined) json.call = call
  if (config.beforeRun !== undefined && config.beforeRun !== null) {
    if (typeof config.beforeRun !== 'function') throw new TypeError('beforeRun must be a function')
    json.beforeRun = true
  }
  if (config.afterRun !== undefined && config.afterRun !== null && typeof config.afterRun !== 'function') {
    throw new TypeError('afterRun must be a function')
  }
  if (config.textDeltas !== undefined && typeof config.textDeltas !== 'boolean') {
    throw new TypeError('textDeltas must be a boolean')
  }
  let backend = null
  if (config.backend !== undefined && config.backend !== null) {
    backend = config.backend
    refuseUnknown('backend', backend, BACKEND_KEYS)
    json.backend = { kind: backend.kind }
  }
  if (config.history !== undefined) {
    preflightMessages(config.history)
    json.history = config.history
  }
  // Tools: names from the registry (OMA's `tools`), the package's tool objects in `tools`,
  // and OMA's `customTools`.
  const names = []
  const legacy = []
  if (config.tools !== undefined && config.tools !== null) {
    if (!Array.isArray(config.tools)) throw new TypeError('tools must be an array of tool names')
    config.tools.forEach((tool, i) => {
      if (typeof tool === 'string') names.push(tool)
      else legacy.push(toolEntry(tool, `tools[${i}]`))
    })
  }
  const custom = []
  if (config.customTools !== undefined && config.customTools !== null) {
    if (!Array.isArray(config.customTools)) throw new TypeError('customTools must be an array of tool definitions')
    config.customTools.forEach((tool, i) => custom.push(toolEntry(tool, `customTools[${i}]`)))
  }
  const reg = registry ?? new ToolRegistry()
  const exec = executor ?? new ToolExecutor(reg, { maxToolOutputChars: config.maxToolOutputChars })
  // The hooks and the secrets are left out of `ctx.agent` (`agentInfo` below).
  const { beforeRun, afterRun, apiKey, credentials, aws, ...agentInfo } = config
  return {
    json,
    host: {
      name,
      model: config.model ?? json.model,
      role: config.systemPrompt?.slice(0, 50) ?? 'assistant',
      beforeRun: config.beforeRun ?? null,
      afterRun: config.afterRun ?? null,
      // The `custom` context strategy's function and OMA's `onLoopDetected` function.
      compress: callbacks.compress ?? null,
      onLoopDetected: callbacks.onLoopDetected ?? null,
      onToolCall: config.onToolCall,
      credentials: config.credentials,
      cwd: config.cwd,
      shellExecutor: config.shellExecutor,
      // `stream` yields OMA's events; the provider's text pieces (`text_delta`) only when asked.
      textDeltas: config.textDeltas === true,
      // OMA's LLMAdapter, which answers the session's model calls (`call-model` steps).
      adapter,
      backend,
      registry: reg,
      executor: exec,
      // A runner for tools outside the registry (customTools), with the agent's output limit.
      loose: new ToolExecutor(new ToolRegistry(), { maxToolOutputChars: config.maxToolOutputChars }),
      names: config.tools === undefined || config.tools === null ? undefined : names,
      disallowed: config.disallowedTools,
      legacy,
      custom,
      // OMA's `ctx.agent`: the configuration without the hooks and without secrets (the key,
      // the tools' credentials, SigV4 credentials).
      agentInfo,
      // A zod outputSchema, which validates each final answer here (`validate-output` steps).
      outputSchema,
    },
  }
}
