// oma-component: OMA's Agent / runAgent over the `portable` world of oma_portable.wasm.
//
// The component never does I/O. Every run is a driver session that this module steps: it asks
// for the next step, performs it with the platform's means (fetch, timers, the caller's hook and
// tools, a child process), answers, and asks again until the session is `finished`. Around it
// sits OMA's agent API: `Agent(config, registry?, executor?)`, `OpenMultiAgent.runAgent`, the
// tool framework (`tools.js`), OMA's error classes (`errors.js`) and OMA's result fields.

// `#oma-portable` (package.json `imports`): gen/, for Node and Workers alike (its core modules are
// imported as `#oma-core/NAME`: the .wasm files under the `workerd` condition, gen/node/ loaders
// elsewhere).
import { codec, driver } from '#oma-portable'
import {
  InvalidMessageError,
  TokenBudgetExceededError,
  errorFrom,
  fromComponent,
} from './errors.js'
import { preflightMessages, preflightBlocks } from './guard.js'
import { send, receive } from './transport.js'
import { ToolRegistry, ToolExecutor, grantedTools, zodToJsonSchema } from './tools.js'
import { registerBuiltInTools } from './builtin-tools/index.js'

export {
  OMAError,
  InvalidMessageError,
  UnsupportedContentBlockError,
  UnsupportedToolResultContentError,
  UnsupportedToolCallError,
  TokenBudgetExceededError,
  CostBudgetExceededError,
  LLMCallTimeoutError,
  EgressPolicyError,
  StructuredOutputValidationError,
  ProviderError,
  SessionStateError,
  isRetryableError,
} from './errors.js'
export { defineTool, ToolRegistry, ToolExecutor, zodToJsonSchema, truncateToolOutput } from './tools.js'
export { AgentPool, Semaphore } from './pool.js'
export {
  registerBuiltInTools, BUILT_IN_TOOLS, ALL_BUILT_IN_TOOLS_WITH_DELEGATE, bashTool, fileReadTool,
  fileWriteTool, fileEditTool, grepTool, globTool, delegateToAgentTool, LocalShellExecutor,
} from './builtin-tools/index.js'
export { classifyRunFailure } from './status.js'

// ---------------------------------------------------------------------------------------------
// Configuration

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
  adapter: 'custom LLM adapters',
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
  const value = globalThis.process?.env?.[name]
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
 * What the environment gives an agent's configuration that leaves it out, as OMA (and the SDKs it
 * drives) read it: the API key, the base URL and Bedrock's region. Which variables those are is
 * the component's table (`codec.environmentNames`, docs/api-keys.md), so that every package reads
 * the same ones.
 */
function fillFromEnvironment(json) {
  const names = codec.environmentNames(json.provider)
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

function isObject(value) {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}

/** Refuses keys of one of the package's own option objects that it does not know. */
function refuseUnknown(what, value, known) {
  if (!isObject(value)) throw new TypeError(`${what} must be an object`)
  for (const key of Object.keys(value)) {
    if (!known.includes(key)) {
      throw new TypeError(`${what} has an unknown key "${key}"; known keys: ${known.join(', ')}`)
    }
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

/** A tool definition's JSON form for the component, and whether it follows OMA's rules. */
function toolEntry(tool, where) {
  if (tool === null || typeof tool !== 'object' || typeof tool.name !== 'string') {
    throw new TypeError(`${where} must be a tool definition {name, description, inputSchema, execute}`)
  }
  const zod = tool.inputSchema !== undefined && typeof tool.inputSchema?.safeParse === 'function'
  const schema = tool.llmInputSchema ??
    (zod ? zodToJsonSchema(tool.inputSchema) : tool.inputSchema ?? tool.input_schema ?? tool.parameters) ??
    { type: 'object', properties: {} }
  return {
    json: { name: tool.name, description: tool.description ?? '', inputSchema: schema },
    tool,
    oma: zod || tool.llmInputSchema !== undefined,
  }
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

/**
 * OMA's `outputSchema` into the component's configuration (docs/agent.md#structured-output). A
 * zod schema is shown to the model as OMA shows it (OMA's `zodToJsonSchema`) and validates each
 * final answer on this side, with zod, as OMA does: the zod schema is returned for the host.
 * A plain JSON Schema object (or a boolean) is the component's to check. Anything else is a
 * TypeError naming the option, before any request.
 */
function structuredOutput(config, json) {
  const schema = config.outputSchema
  if (schema === undefined || schema === null) return null
  if (typeof schema?.safeParse === 'function') {
    json.outputSchema = zodToJsonSchema(schema)
    json.outputValidation = 'host'
    return schema
  }
  if (typeof schema === 'boolean' || isObject(schema)) {
    json.outputSchema = schema
    return null
  }
  throw new TypeError('outputSchema must be a zod schema or a JSON Schema object')
}

/** OMA's `validateOutput` message: one `  - <path>: <message>` line per zod issue. */
function zodIssues(error) {
  const issues = (error?.issues ?? [])
    .map((issue) => `  - ${issue.path.length > 0 ? issue.path.join('.') : '(root)'}: ${issue.message}`)
    .join('\n')
  return `Output validation failed:\n${issues}`
}

/**
 * The answer to a `validate-output` step: the host's zod schema parses the value read from the
 * final answer. A value that passes is kept (`run.structured`, zod's output, transforms and
 * all) and goes back as JSON; one that fails goes back as OMA's message, which the retry's
 * feedback quotes.
 */
function validateOutput(host, run, text) {
  try {
    const parsed = host.outputSchema.safeParse(JSON.parse(text))
    if (!parsed.success) return { tag: 'err', val: zodIssues(parsed.error) }
    run.structured = parsed.data
    let back
    try {
      back = JSON.stringify(parsed.data)
    } catch {
      back = undefined
    }
    return { tag: 'ok', val: back ?? text }
  } catch (error) {
    return { tag: 'err', val: errorMessage(error) }
  }
}

const BACKEND_KEYS = ['kind', 'command', 'args', 'cwd', 'env', 'timeoutMs', 'input', 'permission', 'send']

/**
 * Splits an OMA AgentConfig into the component's JSON configuration (without tools, which are
 * resolved per run from the registry) and what the host side needs.
 */
function prepareConfig(config, registry, executor) {
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
  json.provider ??= 'anthropic'
  json.model ??= 'external'
  fillFromEnvironment(json)
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

/** The tools of one run: `{json: [...], byName: Map}`. */
function resolveTools(host) {
  const byName = new Map()
  const json = []
  const add = (entry, fromRegistry) => {
    if (byName.has(entry.json.name)) return
    byName.set(entry.json.name, { ...entry, fromRegistry })
    json.push(entry.json)
  }
  for (const entry of host.legacy) add(entry, false)
  const customTools = host.custom.map((entry) => entry.tool)
  for (const tool of grantedTools(host.registry, host.names, host.disallowed, customTools)) {
    const fromRegistry = host.registry.get(tool.name) === tool
    add(host.custom.find((entry) => entry.tool === tool) ?? toolEntry(tool, `tool "${tool.name}"`), fromRegistry)
  }
  return { json, byName }
}

const RUN_OPTION_KEYS = [
  'abortSignal', 'runId', 'onToolCall', 'onToolResult', 'onMessage', 'onWarning', 'onTrace',
  'taskId', 'traceAgent', 'traceSpanId', 'traceParentId', 'identity', 'team', 'metadata',
]

function runOptions(options) {
  if (options === undefined || options === null) return {}
  refuseUnknown('run options', options, RUN_OPTION_KEYS)
  if (options.abortSignal !== undefined && !(options.abortSignal instanceof AbortSignal)) {
    throw new TypeError('abortSignal must be an AbortSignal')
  }
  return options
}

function callComponent(fn) {
  try {
    return fn()
  } catch (e) {
    throw fromComponent(e)
  }
}

// Session seeds and identities come from the platform's CSPRNG, drawn 64 at a time.
const seeds = new BigUint64Array(64)
let seedsLeft = 0

function seed() {
  if (seedsLeft === 0) {
    globalThis.crypto.getRandomValues(seeds)
    seedsLeft = seeds.length
  }
  return seeds[--seedsLeft]
}

function sessionOptions(run) {
  if (run?.onTrace === undefined) return { payloads: 'json', seed: seed() }
  // OMA's trace ids: the run's identity, the caller's span and parent, the agent's trace name.
  const o = run.options
  return {
    payloads: 'json',
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

/** OMA's `emitTrace`: a sink that throws, or whose promise rejects, changes nothing. */
function emitTrace(fn, event) {
  try {
    const result = fn(event)
    if (result && typeof result.catch === 'function') result.catch(() => {})
  } catch {
    // Observability never breaks a run.
  }
}

// Trace and span ids come from the platform's CSPRNG too, drawn 4 KiB at a time: two
// `getRandomValues` calls per run were a visible share of a small run.
const randomBytes = new Uint8Array(4096)
let randomUsed = randomBytes.length
const HEX = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, '0'))

/** `bytes` random bytes as lower-case hex. */
function hex(bytes) {
  if (randomUsed + bytes > randomBytes.length) {
    globalThis.crypto.getRandomValues(randomBytes)
    randomUsed = 0
  }
  let out = ''
  for (let i = randomUsed; i < randomUsed + bytes; i++) out += HEX[randomBytes[i]]
  randomUsed += bytes
  return out
}

/** OMA's RunIdentity: a run id (a UUID unless given), attempt 1, W3C trace and span ids. */
function runIdentity(runId) {
  if (runId !== undefined && (typeof runId !== 'string' || runId.length < 1 || runId.length > 128)) {
    throw new TypeError('runId must be a string of 1 to 128 characters')
  }
  return {
    runId: runId ?? globalThis.crypto.randomUUID(),
    attempt: 1,
    traceId: hex(16),
    rootSpanId: hex(8),
  }
}

/**
 * Strings at least this long whose place in the input is a media source's `data` go to the
 * component beside the JSON text (`run-json-parts`) instead of through `JSON.stringify`, which
 * scans every character of them for escapes (about 1 ms for 1 MiB of base64), and the
 * component's JSON parser, which scans them again. Below it, the one JSON text is cheaper.
 */
const BESIDE = 16 * 1024

function plainObject(value) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false
  const proto = Object.getPrototypeOf(value)
  return (proto === Object.prototype || proto === null) && typeof value.toJSON !== 'function'
}

function plainArray(value) {
  return Array.isArray(value) && Object.getPrototypeOf(value) === Array.prototype && typeof value.toJSON !== 'function'
}

/**
 * Whether a string goes beside the text: long, and well-formed UTF-16 (a lone surrogate, which
 * JSON would carry as an escape, stays in the text, so the component sees what JSON gives it).
 */
function beside(value) {
  return typeof value === 'string' && value.length >= BESIDE && value.isWellFormed?.() === true
}

/** `{...source, data: ''}` when `source.data` goes beside the text (recorded at `pointer`), else null. */
function sourceWithout(source, pointer, strings) {
  if (!plainObject(source) || !beside(source.data)) return null
  strings.push([pointer, source.data])
  return { ...source, data: '' }
}

/**
 * A content-block list with its long media data taken out (copies of the objects on the way,
 * the caller's input untouched), or the list itself when there is none. Each string taken out
 * is pushed to `strings` with its JSON Pointer (`at` is the list's).
 */
function blocksWithout(content, at, strings) {
  if (!plainArray(content)) return content
  let out = content
  for (let j = 0; j < content.length; j++) {
    const block = content[j]
    if (!plainObject(block)) continue
    let copy = null
    if (block.type === 'tool_result') {
      const parts = block.content
      if (!plainArray(parts)) continue
      let partsOut = parts
      for (let k = 0; k < parts.length; k++) {
        const part = parts[k]
        if (!plainObject(part)) continue
        const source = sourceWithout(part.source, `${at}/${j}/content/${k}/source/data`, strings)
        if (source === null) continue
        if (partsOut === parts) partsOut = parts.slice()
        partsOut[k] = { ...part, source }
      }
      if (partsOut !== parts) copy = { ...block, content: partsOut }
    } else {
      const source = sourceWithout(block.source, `${at}/${j}/source/data`, strings)
      if (source !== null) copy = { ...block, source }
    }
    if (copy === null) continue
    if (out === content) out = content.slice()
    out[j] = copy
  }
  return out
}

/** An input for the component: `{text}`, or `{text, strings}` with long media data beside it. */
function inputParts(value, list) {
  const strings = []
  const rest = list(value, strings)
  const text = JSON.stringify(rest) ?? 'null'
  return strings.length === 0 ? { text } : { text, strings }
}

function messagesWithout(messages, strings) {
  if (!plainArray(messages)) return messages
  let out = messages
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]
    if (!plainObject(message)) continue
    const content = blocksWithout(message.content, `/${i}/content`, strings)
    if (content === message.content) continue
    if (out === messages) out = messages.slice()
    out[i] = { ...message, content }
  }
  return out
}

function runInputJson(input, parts = true) {
  if (typeof input === 'string') return { text: JSON.stringify(input) }
  preflightMessages(input)
  if (!parts) return { text: JSON.stringify(input) ?? 'null' }
  return inputParts(input, messagesWithout)
}

function promptInputJson(input) {
  if (typeof input === 'string') return { text: JSON.stringify(input) }
  preflightBlocks(input)
  return inputParts(input, (blocks, strings) => blocksWithout(blocks, '', strings))
}

// ---------------------------------------------------------------------------------------------
// The host loop

function errorMessage(error) {
  if (error instanceof Error) return error.message
  return String(error)
}

/** What a run is cancelled with when the caller's signal aborts. */
const CANCELLED = Symbol('cancelled')

/** A promise that rejects with CANCELLED when `signal` aborts (never, without one). */
function cancellation(signal) {
  let dispose = () => {}
  const promise = new Promise((_, reject) => {
    if (!signal) return
    const onAbort = () => reject(CANCELLED)
    if (signal.aborted) reject(CANCELLED)
    else {
      signal.addEventListener('abort', onAbort, { once: true })
      dispose = () => signal.removeEventListener('abort', onAbort)
    }
  })
  promise.catch(() => {})
  return { promise, dispose: () => dispose() }
}

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

async function callTool(host, run, call) {
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

function answerTool(session, id, outcome) {
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

async function runProcess(backend, text, signal) {
  const { spawn } = await import('node:child_process')
  return new Promise((resolve) => {
    let child
    const mode = backend.input ?? 'stdin'
    const args = [...(backend.args ?? []), ...(mode === 'argument' ? [text] : [])]
    try {
      child = spawn(backend.command, args, {
        cwd: backend.cwd,
        env: backend.env ? { ...process.env, ...backend.env } : process.env,
        stdio: [mode === 'stdin' ? 'pipe' : 'ignore', 'pipe', 'pipe'],
      })
    } catch (error) {
      resolve({ tag: 'err', val: errorMessage(error) })
      return
    }
    const out = []
    const err = []
    let timer = null
    if (backend.timeoutMs) timer = setTimeout(() => child.kill('SIGKILL'), backend.timeoutMs)
    const onAbort = () => child.kill('SIGKILL')
    signal?.addEventListener('abort', onAbort, { once: true })
    const done = () => {
      if (timer) clearTimeout(timer)
      signal?.removeEventListener('abort', onAbort)
    }
    child.stdout.on('data', (d) => out.push(d))
    child.stderr.on('data', (d) => err.push(d))
    child.on('error', (error) => {
      done()
      resolve({ tag: 'err', val: errorMessage(error) })
    })
    child.on('close', (code, sig) => {
      done()
      const stdout = Buffer.concat(out).toString('utf8')
      if (code === 0) resolve({ tag: 'ok', val: stdout })
      else {
        const stderr = Buffer.concat(err).toString('utf8').trim().slice(0, 500)
        const how = sig ? `signal ${sig}` : `code ${code}`
        resolve({ tag: 'err', val: `process backend exited with ${how}${stderr ? `: ${stderr}` : ''}` })
      }
    })
    if (child.stdin) {
      child.stdin.on('error', () => {})
      child.stdin.end(text)
    }
  })
}

async function external(host, run, request) {
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

async function safely(fn, value) {
  if (typeof fn !== 'function') return
  try {
    await fn(value)
  } catch {
    // A throwing observer does not change the run.
  }
}

/** The steps that may come while a response body is still being read. */
const READING = new Set(['receive', 'event', 'progress', 'evaluation'])

/**
 * A timer that resolves with `null` at `atMs` (milliseconds since the Unix epoch) and can be
 * cancelled, so that a run that ends early leaves no timer keeping the process alive.
 */
function wakeAt(atMs) {
  let timer
  const promise = new Promise((resolve) => {
    timer = setTimeout(resolve, Math.max(0, atMs - Date.now()), null)
  })
  return { promise, cancel: () => clearTimeout(timer) }
}

function sleep(ms) {
  let timer
  const promise = new Promise((resolve) => {
    timer = setTimeout(resolve, ms)
  })
  return { promise, cancel: () => clearTimeout(timer) }
}

/** Describes what a session waits for, for an error message. */
function dueText(due) {
  return due.map((d) => (d.tag === 'tool' ? `tool ${d.val}` : d.tag)).join(', ')
}

/** The beforeRun hook's answer: only `prompt` and `messages` go back to the component. */
function hookAnswer(result) {
  if (!isObject(result)) return JSON.stringify(result) ?? 'null'
  const out = { prompt: result.prompt }
  if (result.messages !== undefined) out.messages = result.messages
  return JSON.stringify(out)
}

/**
 * Steps a session to its end. Yields each `event` step's agent event; returns the parsed
 * AgentRunResult. Throws CANCELLED when the caller's signal aborts: the request in flight is
 * aborted, a retry wait and pending hooks and tools are left, and the session is dropped.
 *
 * HTTP steps are performed in turn. The hook, tools and external backends run as pending
 * answers: tool calls of one turn start at once and run concurrently, and while the session
 * waits for them it is asked again at the instant it names (`wake-at-ms`, the run's deadline),
 * so a hook or a tool that outlives the deadline ends the run with OMA's timeout instead of
 * holding it.
 */
export { drive as driveSession }

async function* drive(session, host, run) {
  let exchange = null
  /**
   * Answers under way, by the `due` they will answer, and the ones that have settled, in the
   * order they settled: each settled answer is queued once, so a turn of n tools costs O(n) in
   * all (a race over every pending promise on each answer would cost O(n²)).
   */
  const pending = new Set()
  const ready = []
  let wake = null
  const settle = (key, promise) => {
    pending.add(key)
    promise.then(
      (answer) => {
        ready.push([key, answer])
        if (wake) wake()
      },
      (error) => {
        // The answers catch their callers' errors; one that still throws is this host's bug.
        ready.push([key, () => { throw error }])
        if (wake) wake()
      },
    )
  }
  const cancel = cancellation(run.signal)
  const race = (promise) => Promise.race([promise, cancel.promise])
  try {
    for (;;) {
      if (run.signal?.aborted) throw CANCELLED
      let polled
      try {
        polled = session.next(BigInt(Date.now()))
      } catch (e) {
        throw fromComponent(e)
      }
      if (polled.tag === 'finished') return JSON.parse(polled.val.val)
      if (polled.tag === 'waiting') {
        const { due, wakeAtMs } = polled.val
        if (pending.size === 0) {
          throw new Error(`the session waits for ${dueText(due)}, which this host does not owe`)
        }
        if (ready.length === 0) {
          const timer = wakeAtMs === undefined ? null : wakeAt(Number(wakeAtMs))
          const settled = new Promise((resolve) => { wake = resolve })
          try {
            await Promise.race([settled, ...(timer ? [timer.promise] : []), cancel.promise])
          } finally {
            wake = null
            timer?.cancel()
          }
        }
        // Every answer that has settled, before the session is asked again.
        for (const [key, answer] of ready.splice(0)) {
          pending.delete(key)
          answer(session)
        }
        continue
      }
      const step = polled.val
      if (exchange && !READING.has(step.tag)) {
        // The call is over with this response (its end, a limit, a retry's wait): the rest of
        // its body is not read.
        exchange.close()
        exchange = null
      }
      switch (step.tag) {
        case 'before-run': {
          const raw = JSON.parse(step.val.val)
          // OMA's context: the prompt, the messages, and the agent's configuration (without
          // hooks and secrets); `config` is the component's view of it, kept for older callers.
          const context = { prompt: raw.prompt, messages: raw.messages, agent: host.agentInfo, config: raw.config }
          const answer = (async () => {
            try {
              return { tag: 'json', val: hookAnswer(await host.beforeRun(context)) }
            } catch (error) {
              return { tag: 'failed', val: errorMessage(error) }
            }
          })()
          settle('before-run', answer.then((hook) => (s) => s.answer({ tag: 'hook', val: hook })))
          break
        }
        case 'send': {
          const sent = await race(send(step.val, run.signal))
          exchange = sent.exchange
          session.answer(sent.answer)
          break
        }
        case 'receive': {
          const answer = await race(receive(exchange))
          if (answer.tag !== 'chunk') {
            if (exchange) exchange.close()
            exchange = null
          }
          session.answer(answer)
          break
        }
        case 'wait': {
          const timer = sleep(Number(step.val))
          try {
            await race(timer.promise)
          } finally {
            timer.cancel()
          }
          session.answer({ tag: 'waited' })
          break
        }
        case 'call-tool': {
          const call = step.val
          const key = `tool:${call.id}`
          const timing = { start: Date.now(), end: undefined }
          run.timings.push(timing)
          settle(
            key,
            callTool(host, run, call).then((outcome) => {
              timing.end = Date.now()
              return (s) => answerTool(s, call.id, outcome)
            }),
          )
          break
        }
        case 'external-send': {
          const reply = external(host, run, step.val)
          settle('external', reply.then((val) => (s) => s.answer({ tag: 'external', val })))
          break
        }
        case 'decide-loop': {
          // OMA's onLoopDetected function: its word decides (terminate, warn, inject; anything
          // else goes on); what it throws fails the run.
          const info = { kind: step.val.kind, repetitions: step.val.repetitions, detail: step.val.detail }
          const answer = (async () => {
            try {
              return { tag: 'ok', val: String(await host.onLoopDetected(info)) }
            } catch (error) {
              return { tag: 'err', val: errorMessage(error) }
            }
          })()
          settle('loop-decision', answer.then((val) => (s) => s.answer({ tag: 'loop-decision', val })))
          break
        }
        case 'compress': {
          // OMA's custom strategy: the user's function gets the conversation and its estimate;
          // what it returns goes back as JSON for the component's checks (anything but a
          // non-empty message list ends the run with OMA's error), what it throws fails the run.
          const messages = JSON.parse(step.val.messages.val)
          const estimated = Number(step.val.estimatedTokens)
          const answer = (async () => {
            try {
              const returned = await host.compress(messages, estimated)
              return { tag: 'compressed-json', val: JSON.stringify(returned) ?? 'null' }
            } catch (error) {
              return { tag: 'compress-failed', val: errorMessage(error) }
            }
          })()
          settle('compress', answer.then((val) => (s) => s.answer(val)))
          break
        }
        case 'event':
          yield step.val
          break
        case 'progress': {
          const data = JSON.parse(step.val.data)
          const event = { type: step.val.type, agent: step.val.agent, data }
          if (event.type === 'budget_exceeded' && isObject(data) && typeof data.message === 'string') {
            event.data = errorFrom({ name: 'TokenBudgetExceededError', code: 'TOKEN_BUDGET_EXCEEDED', ...data })
          }
          if (event.type === 'agent_complete') {
            // OMA hands over the run's final result (after afterRun, with its status and
            // identity): reported by `complete` once that result exists.
            run.completed = event
            break
          }
          await safely(host.onProgress, event)
          break
        }
        case 'trace':
          if (run.onTrace !== undefined) emitTrace(run.onTrace, JSON.parse(step.val.val))
          break
        case 'validate-output':
          session.answer({ tag: 'validated', val: validateOutput(host, run, step.val) })
          break
        case 'evaluation': {
          const evaluationCase = JSON.parse(step.val.val)
          if (evaluationCase.payload === null || evaluationCase.payload === undefined) delete evaluationCase.payload
          await safely(host.onCase, evaluationCase)
          break
        }
        default:
          throw new Error(`unknown step ${step.tag}`)
      }
    }
  } finally {
    cancel.dispose()
    if (exchange) exchange.close()
    session[Symbol.dispose ?? Symbol.for('dispose')]?.()
  }
}

// ---------------------------------------------------------------------------------------------
// Results

const ZERO_USAGE = Object.freeze({ input_tokens: 0, output_tokens: 0 })

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

function cancelledResult(run) {
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

async function finish(raw, host, run) {
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

function internalFailure(run, error) {
  return failedResult(run, error instanceof Error ? error : new Error(String(error)), 'error', 'unknown')
}

async function complete(session, host, run) {
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

// ---------------------------------------------------------------------------------------------
// OMA StreamEvents

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

async function* streamEvents(session, host, run) {
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

// ---------------------------------------------------------------------------------------------
// The API

function newRun(host, options) {
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

export class Agent {
  #agent
  #host
  #json
  #toolsKey
  #state = { status: 'idle', messages: [], tokenUsage: { ...ZERO_USAGE } }

  /**
   * OMA's `new Agent(config, toolRegistry?, toolExecutor?)`. An invalid configuration or
   * history throws here. Tools named in `config.tools` come from the registry; `customTools`
   * and tools added with `addTool` are offered as well.
   */
  constructor(config, toolRegistry, toolExecutor) {
    const { json, host } = prepareConfig(config, toolRegistry, toolExecutor)
    this.#json = json
    this.#host = host
    const tools = resolveTools(host).json
    this.#toolsKey = JSON.stringify(tools)
    this.#agent = callComponent(() => driver.Agent.createJson(JSON.stringify({ ...json, tools })))
    this.name = host.name
    this.config = config
  }

  /** The component agent for this run's tools (re-made, history kept, when they changed). */
  #agentFor(run) {
    const key = JSON.stringify(run.tools.json)
    if (key !== this.#toolsKey) {
      const history = JSON.parse(this.#agent.getHistoryJson())
      const json = { ...this.#json, tools: run.tools.json, history }
      const previous = this.#agent
      this.#agent = callComponent(() => driver.Agent.createJson(JSON.stringify(json)))
      previous[Symbol.dispose ?? Symbol.for('dispose')]?.()
      this.#toolsKey = key
    }
    return this.#agent
  }

  async #settle(promise) {
    this.#state = { ...this.#state, status: 'running' }
    const result = await promise
    const usage = this.#state.tokenUsage
    this.#state = {
      status: result.success || result.budgetExceeded ? 'completed' : 'error',
      messages: [...result.messages],
      tokenUsage: {
        input_tokens: usage.input_tokens + result.tokenUsage.input_tokens,
        output_tokens: usage.output_tokens + result.tokenUsage.output_tokens,
      },
      ...(result.success || result.budgetExceeded ? {} : { error: result.error }),
    }
    return result
  }

  /** A fresh run (history neither read nor written): OMA's AgentRunResult. */
  async run(input, options) {
    const parts = runInputJson(input)
    const run = newRun(this.#host, options)
    if (run.signal?.aborted) return cancelledResult(run)
    const agent = this.#agentFor(run)
    const session = callComponent(() => parts.strings
      ? agent.runJsonParts(parts.text, parts.strings, sessionOptions(run))
      : agent.runJson(parts.text, sessionOptions(run)))
    return this.#settle(complete(session, this.#host, run))
  }

  /** As `run`, as OMA StreamEvents; invalid input throws here, at the call. */
  stream(input, options) {
    const parts = runInputJson(input)
    const run = newRun(this.#host, options)
    const agent = this.#agentFor(run)
    const session = callComponent(() => parts.strings
      ? agent.streamJsonParts(parts.text, parts.strings, sessionOptions(run))
      : agent.streamJson(parts.text, sessionOptions(run)))
    return streamEvents(session, this.#host, run)
  }

  /** One user turn (a string or content blocks) on the persistent history. */
  async prompt(input, options) {
    const parts = promptInputJson(input)
    const run = newRun(this.#host, options)
    if (run.signal?.aborted) return cancelledResult(run)
    const agent = this.#agentFor(run)
    const session = callComponent(() => parts.strings
      ? agent.promptJsonParts(parts.text, parts.strings, sessionOptions(run))
      : agent.promptJson(parts.text, sessionOptions(run)))
    return this.#settle(complete(session, this.#host, run))
  }

  /** A copy of the persistent history (OMA LLMMessage[]). */
  getHistory() {
    return JSON.parse(this.#agent.getHistoryJson())
  }

  /** Clears the persistent history. */
  reset() {
    this.#agent.reset()
    this.#state = { status: 'idle', messages: [], tokenUsage: { ...ZERO_USAGE } }
  }

  /** OMA's AgentState: `idle`, `running`, `completed` or `error`, with the last run's messages. */
  getState() {
    return { ...this.#state, messages: [...this.#state.messages] }
  }

  /** Registers a tool for the next runs (OMA's `addTool`). */
  addTool(tool) {
    this.#host.registry.register(tool, { runtimeAdded: true })
  }

  /** Removes a registered tool (no-op when absent). */
  removeTool(name) {
    this.#host.registry.deregister(name)
  }

  /** The names of the registered tools. */
  getTools() {
    return this.#host.registry.list().map((tool) => tool.name)
  }
}

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

async function runAgentWith(config, input, options, onProgress) {
  refuseUnknown('runAgent options', options, RUN_AGENT_KEYS)
  const evaluation = options.evaluation
  if (evaluation !== undefined && evaluation !== null) refuseUnknown('evaluation', evaluation, EVALUATION_KEYS)
  const effective = options.egressPolicy !== undefined && config.egressPolicy === undefined
    ? { ...config, egressPolicy: options.egressPolicy }
    : config
  // As OMA's orchestrator builds it: a fresh registry holding the built-in tools (granted by `tools`).
  const { json, host } = prepareConfig(effective, builtInRegistry())
  // runAgent's one-off agent takes its input as one JSON text (run-agent-json has no parts form).
  const text = runInputJson(input, false).text
  const run = newRun(host, {
    abortSignal: options.abortSignal, runId: options.runId, metadata: options.metadata,
    ...(typeof options.onTrace === 'function' ? { onTrace: options.onTrace, traceAgent: host.name } : {}),
  })
  if (run.signal?.aborted) return cancelledResult(run)
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
    driver.runAgentJson(JSON.stringify(json), text, runOptions, sessionOptions(run)),
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
 * `maxTokenBudget`, `egressPolicy`, `onToolCall`, `defaultCwd`, `defaultShellExecutor`) and its
 * `onProgress`. Teams and task graphs are not part of the package.
 */
export class OpenMultiAgent {
  #config

  constructor(config = {}) {
    if (!isObject(config)) throw new TypeError('the orchestrator configuration must be an object')
    const unknown = Object.keys(config).filter((key) => !ORCHESTRATOR_CONFIG_KEYS.has(key))
    if (unknown.length > 0) {
      throw new TypeError(
        `the orchestrator configuration has ${unknown.length === 1 ? 'an unknown key' : 'unknown keys'} ` +
          `${unknown.map((key) => `"${key}"`).join(', ')}; it takes OMA's OrchestratorConfig keys`,
      )
    }
    this.#config = config
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
    return runAgentWith(
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
    )
  }

}
