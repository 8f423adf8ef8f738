// oma-component: OMA's Agent / runAgent over the `portable` world of oma_portable.wasm.
//
// The component never does I/O. Every run is a driver session that this module steps: it asks
// for the next step, performs it with the platform's means (fetch, timers, the caller's hook and
// tools, a child process), answers, and asks again until the session is `finished`.

import { driver } from '../gen/oma_portable.js'
import {
  InvalidMessageError,
  TokenBudgetExceededError,
  errorFrom,
  fromComponent,
} from './errors.js'
import { preflightMessages, preflightBlocks } from './guard.js'

export {
  OMAError,
  InvalidMessageError,
  UnsupportedContentBlockError,
  UnsupportedToolResultContentError,
  UnsupportedToolCallError,
  TokenBudgetExceededError,
  LLMCallTimeoutError,
  EgressPolicyError,
  ProviderError,
  SessionStateError,
} from './errors.js'

const CALL_KEYS = [
  'maxRetries', 'retryDelayMs', 'retryBackoff', 'timeoutMs', 'maxResponseBytes', 'deadlineMs', 'egress',
]
const PLAIN_KEYS = [
  'name', 'model', 'provider', 'baseURL', 'apiKey', 'region', 'systemPrompt', 'maxTurns',
  'maxTokenBudget', 'maxTokens', 'temperature', 'topP', 'topK', 'thinkingBudget', 'deadlineMs',
]

function callComponent(fn) {
  try {
    return fn()
  } catch (e) {
    throw fromComponent(e)
  }
}

// Session seeds come from the platform's CSPRNG, drawn 64 at a time (one draw per run costs
// more than a small run's own JavaScript).
const seeds = new BigUint64Array(64)
let seedsLeft = 0

function seed() {
  if (seedsLeft === 0) {
    globalThis.crypto.getRandomValues(seeds)
    seedsLeft = seeds.length
  }
  return seeds[--seedsLeft]
}

function sessionOptions() {
  return { payloads: 'json', seed: seed() }
}

function toolSchema(tool, index) {
  if (tool === null || typeof tool !== 'object' || typeof tool.name !== 'string') {
    throw new TypeError(
      `tools[${index}] must be a tool object {name, description, inputSchema, execute}`,
    )
  }
  const schema = tool.inputSchema ?? tool.input_schema ?? tool.parameters ?? {
    type: 'object',
    properties: {},
  }
  return { name: tool.name, description: tool.description ?? '', inputSchema: schema }
}

/** The component's JSON configuration (`agent.create-json`) and the host-side parts. */
function prepareConfig(config) {
  if (config === null || typeof config !== 'object') {
    throw new TypeError('the agent configuration must be an object')
  }
  const json = {}
  for (const key of PLAIN_KEYS) {
    if (config[key] !== undefined && config[key] !== null) json[key] = config[key]
  }
  // Both SDKs and the component's adapters append their path to baseURL the same way
  // (Anthropic: `{baseURL}/v1/messages`, OpenAI-compatible: `{baseURL}/chat/completions`).
  const tools = new Map()
  if (config.tools !== undefined) {
    if (!Array.isArray(config.tools)) throw new TypeError('tools must be an array of tool objects')
    json.tools = config.tools.map((tool, i) => {
      const schema = toolSchema(tool, i)
      tools.set(tool.name, tool)
      return schema
    })
  }
  if (config.beforeRun !== undefined && config.beforeRun !== null) {
    if (typeof config.beforeRun !== 'function') throw new TypeError('beforeRun must be a function')
    json.beforeRun = true
  }
  let backend = null
  if (config.backend !== undefined && config.backend !== null) {
    backend = config.backend
    json.backend = { kind: backend.kind }
  }
  if (config.history !== undefined) {
    preflightMessages(config.history)
    json.history = config.history
  }
  if (config.call !== undefined && config.call !== null) {
    json.call = {}
    for (const key of CALL_KEYS) {
      if (config.call[key] !== undefined) json.call[key] = config.call[key]
    }
  }
  return {
    json: JSON.stringify(json),
    host: {
      name: typeof config.name === 'string' ? config.name : 'agent',
      model: config.model,
      beforeRun: config.beforeRun ?? null,
      tools,
      backend,
    },
  }
}

function runInputJson(input) {
  if (typeof input === 'string') return JSON.stringify(input)
  preflightMessages(input)
  return JSON.stringify(input) ?? 'null'
}

function promptInputJson(input) {
  if (typeof input === 'string') return JSON.stringify(input)
  preflightBlocks(input)
  return JSON.stringify(input) ?? 'null'
}

// ---------------------------------------------------------------------------------------------
// The host loop

function failureKind(error, timedOut) {
  if (timedOut) return 'timed-out'
  const cause = error?.cause ?? {}
  const code = cause.code ?? error?.code ?? ''
  const name = error?.name ?? ''
  if (name === 'TimeoutError' || /TIMEOUT/.test(code)) return 'timed-out'
  if (code === 'ECONNREFUSED') return 'refused'
  if (
    code === 'ECONNRESET' || code === 'EPIPE' || code === 'UND_ERR_SOCKET' ||
    code === 'UND_ERR_CLOSED' || /terminated|other side closed/i.test(String(error?.message))
  ) {
    return 'reset'
  }
  return 'other'
}

function failureMessage(error) {
  const cause = error?.cause
  const parts = [String(error?.message ?? error)]
  if (cause && typeof cause === 'object') {
    if (cause.code) parts.push(String(cause.code))
    else if (cause.message) parts.push(String(cause.message))
  }
  return parts.join(': ').slice(0, 300)
}

/**
 * An in-flight HTTP exchange and its timer. The step's `timeoutMs` (the component has already cut
 * it to what is left of the call's and the run's deadlines) bounds connecting and the head; then,
 * for a streamed response, each gap between bytes, and for a whole response, everything up to
 * its last byte, so a provider that trickles a byte at a time cannot hold a non-streamed call
 * open past it. A streamed response that trickles ends at the call's or the run's deadline,
 * which the component checks after every chunk.
 */
class Exchange {
  constructor(timeoutMs, stream) {
    this.controller = new AbortController()
    this.timeoutMs = timeoutMs
    this.stream = stream
    this.timedOut = false
    this.timer = null
    this.reader = null
    this.arm()
  }
  arm() {
    this.disarm()
    this.timer = setTimeout(() => {
      this.timedOut = true
      this.controller.abort()
    }, this.timeoutMs)
  }
  disarm() {
    if (this.timer !== null) clearTimeout(this.timer)
    this.timer = null
  }
  close() {
    this.disarm()
    if (this.reader) this.reader.cancel().catch(() => {})
    this.reader = null
    this.controller.abort()
  }
  failure(error) {
    return {
      tag: 'failure',
      val: { kind: failureKind(error, this.timedOut), message: failureMessage(error) },
    }
  }
}

/**
 * The request's headers for fetch. The body comes as bytes (scripts/patch-gen.mjs), for which
 * fetch sets no `content-type`; where the component sets none, this adds the one fetch gives a
 * string body, so the wire is what it was with a string. It asks for `identity` encoding, where
 * fetch would ask for gzip, deflate and br and inflate what comes: the component refuses an
 * encoded body at its head, so no body is ever inflated past the response limit.
 */
function requestHeaders(request) {
  const headers = request.headers.filter(([name]) => name.toLowerCase() !== 'accept-encoding')
  headers.push(['accept-encoding', 'identity'])
  if (typeof request.body === 'string') return headers
  for (let i = 0; i < headers.length; i++) {
    if (headers[i][0].toLowerCase() === 'content-type') return headers
  }
  headers.push(['content-type', 'text/plain;charset=UTF-8'])
  return headers
}

/**
 * Sends a `send` step's request. Redirects are never followed (`redirect: 'manual'`): a 3xx is
 * handed to the component as it came, which makes it OMA's provider error, never retried, so
 * the key in the headers goes to the configured origin only. Every answer is a head followed by
 * chunks, streamed or not: the component counts the bytes against its response limit as they
 * arrive, and the run stops reading (and closes the connection) the moment it is passed.
 */
async function send(request) {
  const exchange = new Exchange(Number(request.timeoutMs), request.stream)
  try {
    const res = await fetch(request.url, {
      method: request.method,
      headers: requestHeaders(request),
      body: request.body,
      signal: exchange.controller.signal,
      redirect: 'manual',
    })
    if (res.type === 'opaqueredirect') {
      // A runtime that hides the redirect's status (browsers do): nothing of it is usable.
      exchange.close()
      return {
        exchange: null,
        answer: { tag: 'failure', val: { kind: 'other', message: 'the provider answered with a redirect, which is not followed' } },
      }
    }
    if (exchange.stream) exchange.disarm()
    exchange.reader = res.body ? res.body.getReader() : null
    return { exchange, answer: { tag: 'head', val: { status: res.status, headers: [...res.headers] } } }
  } catch (error) {
    const answer = exchange.failure(error)
    exchange.close()
    return { exchange: null, answer }
  }
}

async function receive(exchange) {
  if (!exchange || !exchange.reader) return { tag: 'end' }
  if (exchange.stream) exchange.arm()
  try {
    const { done, value } = await exchange.reader.read()
    if (exchange.stream || done) exchange.disarm()
    return done ? { tag: 'end' } : { tag: 'chunk', val: value }
  } catch (error) {
    exchange.disarm()
    return exchange.failure(error)
  }
}

function errorMessage(error) {
  if (error instanceof Error) return error.message
  return String(error)
}

function toolContent(value) {
  // A tool returns a string, OMA tool-result content parts, or OMA's ToolResult {data, isError}.
  if (typeof value === 'string') return { content: value, isError: false }
  if (Array.isArray(value)) return { content: value, isError: false }
  if (value && typeof value === 'object' && ('data' in value || 'content' in value)) {
    const inner = 'data' in value ? value.data : value.content
    const content = typeof inner === 'string' || Array.isArray(inner) ? inner : JSON.stringify(inner) ?? ''
    return { content, isError: Boolean(value.isError ?? value.is_error) }
  }
  if (value === undefined || value === null) return { content: '', isError: false }
  return { content: JSON.stringify(value) ?? String(value), isError: false }
}

async function callTool(host, call) {
  const tool = host.tools.get(call.name)
  if (!tool || typeof tool.execute !== 'function') {
    return { content: `Tool "${call.name}" is not registered`, isError: true }
  }
  try {
    const input = call.input ? JSON.parse(call.input) : {}
    const context = {
      agent: { name: host.name, role: 'assistant', model: host.model },
      toolUseId: call.id,
    }
    if (call.signature !== undefined) context.signature = call.signature
    return toolContent(await tool.execute(input, context))
  } catch (error) {
    return { content: errorMessage(error), isError: true }
  }
}

function answerTool(session, id, outcome) {
  let content
  try {
    content = JSON.stringify(outcome.content)
  } catch (error) {
    content = JSON.stringify(`tool result is not JSON data: ${errorMessage(error)}`)
    outcome = { ...outcome, isError: true }
  }
  try {
    session.answer({ tag: 'tool-json', val: { id, content, isError: outcome.isError } })
  } catch (e) {
    const error = fromComponent(e)
    if (!(error instanceof InvalidMessageError)) throw error
    // Content the component cannot read as OMA JSON: report it to the model as a failure.
    session.answer({
      tag: 'tool-json',
      val: { id, content: JSON.stringify(error.message), isError: true },
    })
  }
}

async function runProcess(backend, text) {
  const { spawn } = await import('node:child_process')
  return new Promise((resolve) => {
    let child
    try {
      child = spawn(backend.command, backend.args ?? [], {
        cwd: backend.cwd,
        env: backend.env ? { ...process.env, ...backend.env } : process.env,
        stdio: ['pipe', 'pipe', 'pipe'],
      })
    } catch (error) {
      resolve({ tag: 'err', val: errorMessage(error) })
      return
    }
    const out = []
    const err = []
    let timer = null
    if (backend.timeoutMs) {
      timer = setTimeout(() => child.kill('SIGKILL'), backend.timeoutMs)
    }
    child.stdout.on('data', (d) => out.push(d))
    child.stderr.on('data', (d) => err.push(d))
    child.on('error', (error) => {
      if (timer) clearTimeout(timer)
      resolve({ tag: 'err', val: errorMessage(error) })
    })
    child.on('close', (code, signal) => {
      if (timer) clearTimeout(timer)
      const stdout = Buffer.concat(out).toString('utf8')
      if (code === 0) resolve({ tag: 'ok', val: stdout })
      else {
        const stderr = Buffer.concat(err).toString('utf8').trim().slice(0, 500)
        const how = signal ? `signal ${signal}` : `code ${code}`
        resolve({
          tag: 'err',
          val: `process backend exited with ${how}${stderr ? `: ${stderr}` : ''}`,
        })
      }
    })
    child.stdin.on('error', () => {})
    child.stdin.end(text)
  })
}

async function external(host, request) {
  const backend = host.backend ?? {}
  try {
    if (typeof backend.send === 'function') {
      return { tag: 'ok', val: String(await backend.send(request.text, { kind: request.kind })) }
    }
    if (request.kind === 'process' && typeof backend.command === 'string') {
      return await runProcess(backend, request.text)
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

/** Describes what a session waits for, for an error message. */
function dueText(due) {
  return due.map((d) => (d.tag === 'tool' ? `tool ${d.val}` : d.tag)).join(', ')
}

/**
 * Steps a session to its end. Yields each `event` step's agent event; returns the parsed
 * AgentRunResult.
 *
 * HTTP steps are performed in turn. The hook, tools and external backends run as pending
 * answers: tool calls of one turn start at once and run concurrently, and while the session
 * waits for them it is asked again at the instant it names (`wake-at-ms`, the run's deadline),
 * so a hook or a tool that outlives the deadline ends the run with OMA's timeout instead of
 * holding it.
 */
async function* drive(session, host) {
  let exchange = null
  /** Answers under way, by the `due` they will answer: promises of `[key, answer]`. */
  const pending = new Map()
  try {
    for (;;) {
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
        const timer = wakeAtMs === undefined ? null : wakeAt(Number(wakeAtMs))
        const first = await Promise.race(
          timer ? [...pending.values(), timer.promise] : [...pending.values()],
        )
        timer?.cancel()
        if (first !== null) {
          const [key, answer] = first
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
          const context = JSON.parse(step.val.val)
          const answer = (async () => {
            try {
              const result = await host.beforeRun(context)
              return { tag: 'json', val: JSON.stringify(result) ?? 'null' }
            } catch (error) {
              return { tag: 'failed', val: errorMessage(error) }
            }
          })()
          pending.set(
            'before-run',
            answer.then((hook) => ['before-run', (s) => s.answer({ tag: 'hook', val: hook })]),
          )
          break
        }
        case 'send': {
          const sent = await send(step.val)
          exchange = sent.exchange
          session.answer(sent.answer)
          break
        }
        case 'receive': {
          const answer = await receive(exchange)
          if (answer.tag !== 'chunk') {
            if (exchange) exchange.close()
            exchange = null
          }
          session.answer(answer)
          break
        }
        case 'wait':
          await new Promise((resolve) => setTimeout(resolve, Number(step.val)))
          session.answer({ tag: 'waited' })
          break
        case 'call-tool': {
          const call = step.val
          const key = `tool:${call.id}`
          pending.set(
            key,
            callTool(host, call).then((outcome) => [key, (s) => answerTool(s, call.id, outcome)]),
          )
          break
        }
        case 'external-send': {
          const reply = external(host, step.val)
          pending.set(
            'external',
            reply.then((val) => ['external', (s) => s.answer({ tag: 'external', val })]),
          )
          break
        }
        case 'event':
          yield step.val
          break
        case 'progress':
          await safely(host.onProgress, {
            type: step.val.type,
            agent: step.val.agent,
            data: JSON.parse(step.val.data),
          })
          break
        case 'evaluation':
          await safely(host.onCase, JSON.parse(step.val.val))
          break
        default:
          throw new Error(`unknown step ${step.tag}`)
      }
    }
  } finally {
    if (exchange) exchange.close()
    session[Symbol.dispose ?? Symbol.for('dispose')]?.()
  }
}

function internalFailure(error) {
  const message = errorMessage(error)
  return {
    success: false,
    output: message,
    messages: [],
    tokenUsage: { input_tokens: 0, output_tokens: 0 },
    toolCalls: [],
    turns: 0,
    status: { code: 'error', message: message.slice(0, 256) },
    errorInfo: {
      kind: 'unknown',
      ...(error?.code ? { code: error.code } : {}),
      name: error?.name ?? 'Error',
      message: message.slice(0, 1024),
      retryable: false,
    },
  }
}

async function complete(session, host) {
  const steps = drive(session, host)
  try {
    for (;;) {
      const { done, value } = await steps.next()
      if (done) return value
    }
  } catch (error) {
    return internalFailure(error)
  }
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

function errorOfResult(result) {
  const info = result.errorInfo ?? { name: 'Error', message: result.output }
  const error = errorFrom(info)
  error.result = result
  return error
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
    case 'budget-exceeded':
      return { type: 'budget_exceeded', data: new TokenBudgetExceededError(event.val) }
    default:
      return null
  }
}

async function* streamEvents(session, host) {
  const steps = drive(session, host)
  let result
  try {
    for (;;) {
      const { done, value } = await steps.next()
      if (done) {
        result = value
        break
      }
      const event = streamEvent(value)
      if (event) yield event
    }
  } catch (error) {
    result = internalFailure(error)
  } finally {
    await steps.return?.()
  }
  if (result.success) yield { type: 'done', data: result }
  else yield { type: 'error', data: errorOfResult(result) }
}

// ---------------------------------------------------------------------------------------------
// The API

export class Agent {
  #agent
  #host

  /** Creates an agent; an invalid configuration or history throws here. */
  constructor(config) {
    const { json, host } = prepareConfig(config)
    this.#agent = callComponent(() => driver.Agent.createJson(json))
    this.#host = host
    this.name = host.name
  }

  /** A fresh run (history neither read nor written): OMA's AgentRunResult. */
  async run(input) {
    const text = runInputJson(input)
    const session = callComponent(() => this.#agent.runJson(text, sessionOptions()))
    return complete(session, this.#host)
  }

  /** As `run`, as OMA StreamEvents; invalid input throws here, at the call. */
  stream(input) {
    const text = runInputJson(input)
    const session = callComponent(() => this.#agent.streamJson(text, sessionOptions()))
    return streamEvents(session, this.#host)
  }

  /** One user turn (a string or content blocks) on the persistent history. */
  async prompt(input) {
    const text = promptInputJson(input)
    const session = callComponent(() => this.#agent.promptJson(text, sessionOptions()))
    return complete(session, this.#host)
  }

  /** A copy of the persistent history (OMA LLMMessage[]). */
  getHistory() {
    return JSON.parse(this.#agent.getHistoryJson())
  }

  /** Clears the persistent history. */
  reset() {
    this.#agent.reset()
  }
}

function storePayloads(value) {
  if (value === true) return 'full'
  if (value === undefined || value === null || value === false) return 'none'
  if (value === 'none' || value === 'redacted' || value === 'full') return value
  throw new TypeError('evaluation.storePayloads must be "none", "redacted" or "full"')
}

/** OMA's runAgent: a one-off agent, with progress events and online evaluation. */
export async function runAgent(config, input, options = {}) {
  const { json, host } = prepareConfig(config)
  const text = runInputJson(input)
  const evaluation = options.evaluation
  const runOptions = {
    progress: typeof options.onProgress === 'function',
    evaluation: evaluation
      ? {
          storePayloads: storePayloads(evaluation.storePayloads),
          sampleRate: evaluation.sampleRate ?? 1,
        }
      : undefined,
  }
  const session = callComponent(() =>
    driver.runAgentJson(json, text, runOptions, sessionOptions()),
  )
  return complete(session, {
    ...host,
    onProgress: options.onProgress,
    onCase: evaluation?.onCase,
  })
}
