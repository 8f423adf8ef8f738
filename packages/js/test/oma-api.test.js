// OMA's agent API through the package, against a loopback provider: the tool framework (zod
// schemas, the registry's grants, the executor's rules), OMA's result fields (status, identity,
// tool-call records), cancellation, timeouts, afterRun, the API key from the environment, and
// the package's own options refusing unknown keys.
import { test, before, after, beforeEach } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { z } from 'zod'
import {
  Agent, OpenMultiAgent, ToolRegistry, ToolExecutor, defineTool, zodToJsonSchema, runAgent,
  TokenBudgetExceededError, LLMCallTimeoutError, ProviderError, isRetryableError, classifyRunFailure,
} from '../src/index.js'
import { startServer, anthropicMessage, anthropicToolUse, anthropicSse, openaiMessage } from './helpers/server.js'

let server
before(async () => { server = await startServer() })
after(async () => { await server.close() })
beforeEach(() => server.reset())

const KEY = 'sk-ant-api-test-SECRET0123456789'

function config(extra = {}) {
  return { name: 'oma', model: 'claude-test', provider: 'anthropic', baseURL: server.url, apiKey: KEY, ...extra }
}

async function collect(iterable) {
  const out = []
  for await (const e of iterable) out.push(e)
  return out
}

const add = defineTool({
  name: 'add',
  description: 'Adds two integers',
  inputSchema: z.object({
    a: z.number().int().describe('first'),
    b: z.number().int(),
    note: z.string().optional(),
    mode: z.enum(['sum', 'concat']).default('sum'),
  }),
  execute: async ({ a, b }) => ({ data: String(a + b) }),
})

test('zod schemas become the JSON Schema OMA sends; the request carries it', async () => {
  assert.deepEqual(zodToJsonSchema(add.inputSchema), {
    type: 'object',
    properties: {
      a: { type: 'number', description: 'first' },
      b: { type: 'number' },
      note: { type: 'string' },
      mode: { type: 'string', enum: ['sum', 'concat'], default: 'sum' },
    },
    required: ['a', 'b'],
  })
  assert.deepEqual(zodToJsonSchema(z.array(z.union([z.string(), z.null()])).nullable()), {
    type: ['array', 'null'], items: { anyOf: [{ type: 'string' }, { type: 'null' }] },
  })
  assert.deepEqual(zodToJsonSchema(z.record(z.literal(1))), { type: 'object', additionalProperties: { const: 1 } })
  server.queue(anthropicToolUse([['t1', 'add', { a: 2, b: 3 }]]), anthropicMessage('5'))
  const result = await new Agent(config({ customTools: [add] })).run('2+3?')
  assert.equal(result.success, true)
  assert.deepEqual(server.requests[0].body.tools, [{
    name: 'add', description: 'Adds two integers', input_schema: zodToJsonSchema(add.inputSchema),
  }])
  assert.equal(server.requests[1].body.messages.at(-1).content[0].content, '5')
})

test("the registry's grants: tools by name, runtime tools always, disallowedTools removed", async () => {
  const registry = new ToolRegistry()
  const echo = defineTool({ name: 'echo', description: 'e', inputSchema: z.object({ s: z.string() }), execute: async ({ s }) => ({ data: s }) })
  const hidden = defineTool({ name: 'hidden', description: 'h', inputSchema: z.object({}), execute: async () => ({ data: 'no' }) })
  registry.register(echo)
  registry.register(hidden)
  assert.throws(() => registry.register(echo), /a tool named "echo" is already registered/)
  const agent = new Agent(config({ tools: ['echo'], customTools: [add], disallowedTools: ['add'] }), registry, new ToolExecutor(registry))
  server.queue(anthropicMessage('a'))
  await agent.run('x')
  assert.deepEqual(server.requests[0].body.tools.map((t) => t.name), ['echo'])
  // a tool added at run time is offered from the next run on; history is kept
  server.queue(anthropicMessage('first'))
  await agent.prompt('remember')
  agent.addTool(defineTool({ name: 'late', description: 'l', inputSchema: z.object({}), execute: async () => ({ data: 'late' }) }))
  assert.deepEqual(agent.getTools().sort(), ['echo', 'hidden', 'late'])
  server.queue(anthropicMessage('second'))
  await agent.prompt('again')
  assert.deepEqual(server.requests[2].body.tools.map((t) => t.name), ['echo', 'late'])
  assert.equal(server.requests[2].body.messages.length, 3)
  assert.equal(agent.getHistory().length, 4)
  agent.removeTool('late')
  server.queue(anthropicMessage('third'))
  await agent.run('y')
  assert.deepEqual(server.requests[3].body.tools.map((t) => t.name), ['echo'])
})

test("the executor's rules: invalid input, a non-object result, a throw, the gate, truncation", async () => {
  const bad = defineTool({ name: 'bad', description: 'b', inputSchema: z.object({}), execute: async () => 'plain string' })
  const boom = defineTool({ name: 'boom', description: 'b', inputSchema: z.object({}), execute: async () => { throw new Error('kaput') } })
  const long = defineTool({ name: 'long', description: 'l', inputSchema: z.object({}), maxOutputChars: 60, execute: async () => ({ data: 'x'.repeat(200) }) })
  const gated = []
  server.queue(
    anthropicToolUse([['t1', 'add', { a: 'two', b: 3 }], ['t2', 'bad', {}], ['t3', 'boom', {}], ['t4', 'long', {}], ['t5', 'add', { a: 1, b: 1 }]]),
    anthropicMessage('done'),
  )
  const result = await new Agent(config({
    customTools: [add, bad, boom, long],
    onToolCall: (ctx) => {
      gated.push(`${ctx.toolName}:${ctx.agentName}`)
      return ctx.input.a === 1 ? { action: 'deny', reason: 'no ones' } : { action: 'allow' }
    },
  })).run('go')
  assert.equal(result.success, true)
  const outputs = result.toolCalls.map((c) => c.output)
  assert.equal(outputs[0], 'Invalid input for tool "add":\n  • a: Expected number, received string')
  assert.equal(outputs[1], 'Invalid output for tool "bad": execute() must return a ToolResult object.')
  assert.equal(outputs[2], 'Tool "boom" threw an error: kaput')
  assert.equal(outputs[3].length, 60)
  assert.match(outputs[3], /\[\.\.\.truncated \d+ characters\.\.\.\]/)
  assert.equal(outputs[4], 'Tool "add" denied by onToolCall: no ones')
  assert.deepEqual(gated, ['bad:oma', 'boom:oma', 'long:oma', 'add:oma'])
  const sent = server.requests[1].body.messages.at(-1).content
  assert.deepEqual(sent.map((b) => b.is_error), [true, true, true, undefined, true])
})

test("a successful result has OMA's status, identity, structured and tool-call records with durations", async () => {
  const slow = defineTool({
    name: 'slow', description: 's', inputSchema: z.object({}),
    execute: async () => { await new Promise((r) => setTimeout(r, 60)); return { data: { id: 1 }, modelOutput: [{ type: 'text', text: 'slow done' }, { type: 'image', source: { type: 'url', media_type: 'image/png', url: 'https://example.com/a.png' } }] } },
  })
  server.queue(anthropicToolUse([['t1', 'slow', {}]]), anthropicMessage('ok'))
  const result = await new Agent(config({ customTools: [slow] })).run('x', { runId: 'run-7', metadata: { experiment: 'a' } })
  assert.deepEqual(Object.keys(result), ['success', 'identity', 'status', 'output', 'messages', 'tokenUsage', 'toolCalls', 'structured', 'metadata', 'turns'])
  assert.deepEqual(result.status, { code: 'ok' })
  assert.equal(result.identity.runId, 'run-7')
  assert.equal(result.identity.attempt, 1)
  assert.match(result.identity.traceId, /^[0-9a-f]{32}$/)
  assert.match(result.identity.rootSpanId, /^[0-9a-f]{16}$/)
  assert.deepEqual(result.metadata, { experiment: 'a' })
  assert.equal(result.toolCalls.length, 1)
  const [call] = result.toolCalls
  assert.deepEqual(Object.keys(call), ['toolName', 'input', 'output', 'duration'])
  assert.equal(call.output, 'slow done\n[image: image/png; URL reference]')
  assert.ok(call.duration >= 50 && call.duration < 2000, `duration ${call.duration}`)
  // without a runId, a fresh UUID each run
  server.queue(anthropicMessage('a'), anthropicMessage('b'))
  const a = new Agent(config())
  const [r1, r2] = [await a.run('1'), await a.run('2')]
  assert.match(r1.identity.runId, /^[0-9a-f-]{36}$/)
  assert.notEqual(r1.identity.runId, r2.identity.runId)
})

test('abortSignal cancels an in-flight request within 500 ms: run, prompt, stream, runAgent', async () => {
  const cases = [
    ['run', (a, signal) => a.run('x', { abortSignal: signal })],
    ['prompt', (a, signal) => a.prompt('x', { abortSignal: signal })],
    ['runAgent', (_a, signal) => runAgent(config(), 'x', { abortSignal: signal })],
    ['OpenMultiAgent.runAgent', (_a, signal) => new OpenMultiAgent({ defaultApiKey: KEY }).runAgent({ name: 'o', model: 'm', baseURL: server.url }, 'x', { abortSignal: signal })],
  ]
  for (const [name, start] of cases) {
    server.reset()
    server.queue({ hang: true })
    const agent = new Agent(config())
    const controller = new AbortController()
    const pending = start(agent, controller.signal)
    await new Promise((r) => setTimeout(r, 150))
    const t0 = Date.now()
    controller.abort()
    const result = await pending
    const took = Date.now() - t0
    assert.ok(took < 500, `${name}: ${took} ms`)
    assert.equal(result.success, false, name)
    assert.deepEqual(result.status, { code: 'cancelled', message: 'Run cancelled by caller.' }, name)
    assert.deepEqual(result.errorInfo, { kind: 'cancellation', name: 'AbortError', message: 'Run cancelled by caller.', retryable: false }, name)
    assert.equal(server.requests.length, 1, name)
    if (name === 'prompt') assert.deepEqual(agent.getHistory(), [], 'a cancelled prompt leaves history as it was')
  }
  // a stream ends with an error event carrying errorInfo
  server.reset()
  server.queue(anthropicSse(['a', 'b', 'c', 'd', 'e', 'f'], { delayMs: 200 }))
  const controller = new AbortController()
  const events = []
  const t0 = Date.now()
  for await (const e of new Agent({ ...config(), textDeltas: true }).stream('x', { abortSignal: controller.signal })) {
    events.push(e)
    if (e.type === 'text_delta' && e.data === 'a') controller.abort()
  }
  assert.ok(Date.now() - t0 < 1000)
  const last = events.at(-1)
  assert.equal(last.type, 'error')
  assert.equal(last.errorInfo.kind, 'cancellation')
  assert.equal(last.data.name, 'AbortError')
  // already aborted: nothing is sent
  server.reset()
  const r = await new Agent(config()).run('x', { abortSignal: AbortSignal.abort() })
  assert.equal(r.status.code, 'cancelled')
  assert.equal(server.requests.length, 0)
})

test('abortSignal ends a retry wait and reaches tools, which get the signal', async () => {
  server.queue({ status: 503, json: { type: 'error', error: { type: 'overloaded_error', message: 'busy' } } })
  const controller = new AbortController()
  const pending = new Agent(config({ call: { maxRetries: 3, retryDelayMs: 20000 } })).run('x', { abortSignal: controller.signal })
  await new Promise((r) => setTimeout(r, 200))
  const t0 = Date.now()
  controller.abort()
  const result = await pending
  assert.ok(Date.now() - t0 < 500)
  assert.equal(result.status.code, 'cancelled')
  assert.equal(server.requests.length, 1)

  server.reset()
  let toolSignal
  const waiting = defineTool({
    name: 'waiting', description: 'w', inputSchema: z.object({}),
    execute: async (_input, ctx) => {
      toolSignal = ctx.abortSignal
      await new Promise((resolve) => ctx.abortSignal.addEventListener('abort', resolve, { once: true }))
      return { data: 'stopped' }
    },
  })
  server.queue(anthropicToolUse([['t1', 'waiting', {}]]), anthropicMessage('never'))
  const c2 = new AbortController()
  const p2 = new Agent(config({ customTools: [waiting] })).run('x', { abortSignal: c2.signal })
  await new Promise((r) => setTimeout(r, 200))
  c2.abort()
  const r2 = await p2
  assert.equal(r2.status.code, 'cancelled')
  assert.equal(toolSignal.aborted, true)
  assert.equal(server.requests.length, 1)
})

test('abortSignal leaves a pending beforeRun hook and kills a process backend', async () => {
  const controller = new AbortController()
  let finish
  const hook = new Promise((resolve) => { finish = resolve })
  const pending = new Agent(config({ beforeRun: async (ctx) => { await hook; return ctx } })).run('x', { abortSignal: controller.signal })
  await new Promise((r) => setTimeout(r, 100))
  let t0 = Date.now()
  controller.abort()
  const hooked = await pending
  finish()
  assert.ok(Date.now() - t0 < 500)
  assert.equal(hooked.status.code, 'cancelled')
  assert.equal(server.requests.length, 0)

  const pidFile = join(tmpdir(), `oma-sleeper-${process.pid}.pid`)
  const sleeper = { kind: 'process', command: process.execPath, args: ['-e', `require('fs').writeFileSync(${JSON.stringify(pidFile)}, String(process.pid)); setTimeout(() => {}, 30000)`] }
  const c2 = new AbortController()
  const p2 = new Agent({ name: 'proc', backend: sleeper }).run('x', { abortSignal: c2.signal })
  // The backend is running once it has written its pid (a loaded machine takes a while to start
  // Node), and no later than that.
  for (let waited = 0; !existsSync(pidFile) && waited < 20000; waited += 50) {
    await new Promise((r) => setTimeout(r, 50))
  }
  t0 = Date.now()
  c2.abort()
  const r2 = await p2
  assert.ok(Date.now() - t0 < 500)
  assert.equal(r2.status.code, 'cancelled')
  const pid = Number(readFileSync(pidFile, 'utf8'))
  rmSync(pidFile, { force: true })
  await new Promise((r) => setTimeout(r, 200))
  assert.throws(() => process.kill(pid, 0), { code: 'ESRCH' }, 'the backend process was killed')
})

test('timeoutMs bounds the run and callTimeoutMs each model call: OMA timeout', async () => {
  server.queue({ hang: true })
  let t0 = Date.now()
  const run = await new Agent(config({ timeoutMs: 300 })).run('x')
  assert.ok(Date.now() - t0 < 2000)
  assert.equal(run.status.code, 'timeout')
  // OMA's: a plain Error named TimeoutError that names the agent and the run's limit.
  assert.equal(run.errorInfo.name, 'TimeoutError')
  assert.equal(run.error.name, 'TimeoutError')
  assert.ok(!(run.error instanceof LLMCallTimeoutError))
  assert.match(run.error.message, /^Agent ".*" exceeded whole-run timeout of 300ms$/)
  server.reset()
  server.queue({ hang: true })
  t0 = Date.now()
  const call = await new Agent(config({ callTimeoutMs: 300 })).run('x')
  assert.ok(Date.now() - t0 < 2000)
  assert.equal(call.status.code, 'timeout')
  assert.equal(call.errorInfo.name, 'LLMCallTimeoutError')
})

test('afterRun rewrites a successful result; a throwing afterRun fails it as a callback', async () => {
  server.queue(anthropicMessage('lower'))
  const up = await new Agent(config({ afterRun: async (r) => ({ ...r, output: r.output.toUpperCase() }) })).run('x')
  assert.equal(up.output, 'LOWER')
  assert.deepEqual(up.status, { code: 'ok' })
  server.queue(anthropicMessage('fine'))
  const thrown = await new Agent(config({ afterRun: () => { throw new Error('rejected by afterRun') } })).run('x')
  assert.equal(thrown.success, false)
  assert.equal(thrown.output, 'rejected by afterRun')
  assert.equal(thrown.errorInfo.kind, 'callback')
  // afterRun turning a result into a failure: the status follows
  server.queue(anthropicMessage('fine'))
  const flipped = await new Agent(config({ afterRun: (r) => ({ ...r, success: false }) })).run('x')
  assert.equal(flipped.status.code, 'error')
  // not called for a failed run
  let called = false
  server.queue({ status: 400, json: { type: 'error', error: { type: 'invalid_request_error', message: 'no' } } })
  await new Agent(config({ afterRun: (r) => { called = true; return r } })).run('x')
  assert.equal(called, false)
})

test('error stream events carry errorInfo and the error', async () => {
  server.queue({ status: 401, json: { type: 'error', error: { type: 'authentication_error', message: 'who?' } } })
  const events = await collect(new Agent(config()).stream('x'))
  assert.equal(events.length, 1)
  const [e] = events
  assert.equal(e.type, 'error')
  assert.ok(e.data instanceof ProviderError)
  assert.equal(e.errorInfo.kind, 'provider')
  assert.equal(e.errorInfo.httpStatus, 401)
  assert.equal(e.data.result.success, false)
  assert.equal(isRetryableError(e.data), false)
})

test("evaluation cases carry no payload under 'none'", async () => {
  server.queue(anthropicMessage('a'), anthropicMessage('b'))
  const cases = []
  await runAgent(config(), 'q', { evaluation: { sampleRate: 1, storePayloads: 'none', onCase: (c) => cases.push(c) } })
  await runAgent(config(), 'q', { evaluation: { sampleRate: 1, storePayloads: 'full', onCase: (c) => cases.push(c) } })
  assert.equal('payload' in cases[0], false)
  assert.deepEqual(cases[1].payload, { input: 'q', output: 'b' })
})

test("the package's own options refuse unknown keys; OMA keys it does not implement are refused by name", async () => {
  assert.throws(() => new Agent(config({ call: { maxRetry: 2 } })), /unknown field `call\.maxRetry`, expected one of `maxRetries`/)
  await assert.rejects(runAgent(config(), 'x', { onProgres: () => {} }), /runAgent options has an unknown key "onProgres"/)
  await assert.rejects(runAgent(config(), 'x', { evaluation: { sampleRatio: 1 } }), /evaluation has an unknown key "sampleRatio"/)
  await assert.rejects(new Agent(config()).run('x', { abortSignl: null }), /run options has an unknown key "abortSignl"/)
  assert.throws(() => new Agent(config({ backend: { kind: 'process', command: 'x', argz: [] } })), /backend has an unknown key "argz"/)
  assert.throws(() => new Agent(config({ contextStrategy: { type: 'custom', compress: 'not a function' } })), /contextStrategy.compress must be a function/)
  assert.throws(() => new Agent(config({ toolPreset: 'readonly' })), /toolPreset \(OMA's built-in tools\) is not supported/)
  assert.throws(() => new Agent(config({ outputSchema: 'an object' })), /outputSchema must be a zod schema or a JSON Schema object/)
  assert.throws(() => new Agent({ name: 'nomodel' }), /^Error: Agent "nomodel" has no model\./)
  assert.equal(server.requests.length, 0)
  // call options reach the component as given
  server.queue({ status: 500, json: { type: 'error', error: { type: 'api_error', message: 'x' } } }, anthropicMessage('second try'))
  const retried = await new Agent(config({ call: { maxRetries: 1, retryDelayMs: 1 } })).run('x')
  assert.equal(retried.output, 'second try')
})

test("the API key and base URL come from the provider's usual environment variables", async () => {
  const saved = { ...process.env }
  try {
    process.env.ANTHROPIC_API_KEY = 'sk-ant-from-env'
    process.env.ANTHROPIC_BASE_URL = server.url
    server.queue(anthropicMessage('env'))
    const r = await new Agent({ name: 'e', model: 'claude-test' }).run('x')
    assert.equal(r.output, 'env')
    assert.equal(server.requests[0].headers['x-api-key'], 'sk-ant-from-env')
    // an explicit key wins
    server.queue(anthropicMessage('explicit'))
    await new Agent({ name: 'e', model: 'claude-test', apiKey: 'sk-explicit' }).run('x')
    assert.equal(server.requests[1].headers['x-api-key'], 'sk-explicit')
    process.env.OPENAI_API_KEY = 'sk-openai-from-env'
    server.queue(openaiMessage('o'))
    await new Agent({ name: 'o', model: 'gpt', provider: 'openai', baseURL: `${server.url}/v1` }).run('x')
    assert.equal(server.requests[2].headers.authorization, 'Bearer sk-openai-from-env')
    // the key never reaches the hook's context or the result
    let ctx
    server.queue(anthropicMessage('hooked'))
    const hooked = await new Agent({ name: 'e', model: 'claude-test', beforeRun: (c) => { ctx = c; return c } }).run('x')
    assert.ok(!JSON.stringify(ctx).includes('sk-ant-from-env'))
    assert.ok(!JSON.stringify(hooked).includes('sk-ant-from-env'))
  } finally {
    for (const key of Object.keys(process.env)) if (!(key in saved)) delete process.env[key]
    Object.assign(process.env, saved)
  }
})

test('Gemini takes GEMINI_API_KEY, then GOOGLE_API_KEY', async () => {
  const saved = { ...process.env }
  const gemini = { status: 200, json: { candidates: [{ content: { role: 'model', parts: [{ text: 'g' }] }, finishReason: 'STOP' }], usageMetadata: { promptTokenCount: 1, candidatesTokenCount: 1 } } }
  try {
    delete process.env.GEMINI_API_KEY
    process.env.GOOGLE_API_KEY = 'google-key'
    server.queue(gemini, gemini)
    await new Agent({ name: 'g', model: 'gemini-test', provider: 'gemini', baseURL: server.url }).run('x')
    process.env.GEMINI_API_KEY = 'gemini-key'
    await new Agent({ name: 'g', model: 'gemini-test', provider: 'gemini', baseURL: server.url }).run('x')
    const keys = server.requests.map((r) => r.headers['x-goog-api-key'] ?? new URL(r.url, 'http://x').searchParams.get('key'))
    assert.deepEqual(keys, ['google-key', 'gemini-key'])
  } finally {
    for (const key of Object.keys(process.env)) if (!(key in saved)) delete process.env[key]
    Object.assign(process.env, saved)
  }
})

test("OpenMultiAgent.runAgent applies the orchestrator's defaults, budget and onProgress", async () => {
  const events = []
  const oma = new OpenMultiAgent({
    defaultModel: 'claude-default', defaultBaseURL: server.url, defaultApiKey: KEY, maxTokenBudget: 100,
    onProgress: (e) => events.push(e),
  })
  server.queue(anthropicMessage('big', { usage: { input_tokens: 60, output_tokens: 60 } }))
  const result = await oma.runAgent({ name: 'child', maxTokenBudget: 1000 }, 'x')
  assert.equal(server.requests[0].body.model, 'claude-default')
  assert.equal(server.requests[0].headers['x-api-key'], KEY)
  assert.equal(result.status.code, 'budget_exhausted')
  assert.deepEqual(events.map((e) => e.type), ['agent_start', 'budget_exceeded', 'agent_complete'])
  const budget = events[1].data
  assert.ok(budget instanceof TokenBudgetExceededError)
  assert.deepEqual([budget.tokensUsed, budget.budget], [120, 100])
  await assert.rejects(new OpenMultiAgent().runAgent({ name: 'none' }, 'x'), /Agent "none" has no model/)
})

test("getState follows OMA's lifecycle; the process backend takes OMA's input modes", async () => {
  server.queue(anthropicMessage('s'))
  const a = new Agent(config())
  assert.equal(a.getState().status, 'idle')
  await a.run('x')
  assert.equal(a.getState().status, 'completed')
  assert.deepEqual(a.getState().tokenUsage, { input_tokens: 12, output_tokens: 6 })
  const arg = new Agent({ name: 'p', backend: { kind: 'process', command: process.execPath, args: ['-e', 'process.stdout.write(process.argv.at(-1))'], input: 'argument' } })
  const r = await arg.run('as an argument')
  assert.equal(r.success, true, JSON.stringify(r))
  assert.match(r.output, /as an argument$/)
})

test('unknown configuration keys are refused with a TypeError naming them', () => {
  assert.throws(() => new Agent({ ...config(), tmperature: 0.2, maxTurn: 3 }), (e) => {
    assert.ok(e instanceof TypeError)
    assert.match(e.message, /unknown keys "tmperature", "maxTurn"/)
    return true
  })
  assert.throws(() => new OpenMultiAgent({ defaultModel: 'm', onProgres: () => {} }), /unknown key "onProgres"/)
  // Every OMA key is known (those the package ignores or refuses say so themselves).
  assert.doesNotThrow(() => new Agent({ ...config(), description: 'd', capabilities: ['x'], costTier: 'low', textDeltas: true }))
  assert.doesNotThrow(() => new OpenMultiAgent({ maxConcurrency: 2, onTrace: () => {}, observability: { sinks: [] } }))
  // What the package's runs cannot honour yet is refused by name, not ignored.
  assert.doesNotThrow(() => new OpenMultiAgent({ observability: { sinks: [{ emit() {} }] } }))
  // OMA's online evaluation is honoured; the package's own runAgent sampling keys are not its keys.
  assert.throws(() => new OpenMultiAgent({ evaluation: { sampleRate: 1 } }), /does not support the option "sampleRate"/)
})

test('classifyRunFailure classifies as OMA does, redacting secrets', () => {
  const budget = classifyRunFailure(new TokenBudgetExceededError('a', 10, 5))
  assert.deepEqual(budget.status.code, 'budget_exhausted')
  assert.equal(budget.errorInfo.kind, 'budget')
  assert.equal(classifyRunFailure(new LLMCallTimeoutError(300)).status.code, 'timeout')
  const aborted = Object.assign(new Error('stop'), { name: 'AbortError' })
  assert.deepEqual(classifyRunFailure(aborted), {
    status: { code: 'cancelled', message: 'stop' },
    errorInfo: { kind: 'cancellation', name: 'AbortError', message: 'stop', retryable: false },
  })
  const provider = classifyRunFailure(Object.assign(new Error('apiKey=sk-abcdefghijklmnopqrstuvwx failed'), { status: 429 }), { attempt: 2 })
  assert.equal(provider.errorInfo.kind, 'provider')
  assert.equal(provider.errorInfo.httpStatus, 429)
  assert.equal(provider.errorInfo.retryable, true)
  assert.equal(provider.errorInfo.attempt, 2)
  assert.ok(!provider.errorInfo.message.includes('sk-abcdef'), provider.errorInfo.message)
  assert.ok(!provider.status.message.includes('sk-abcdef'))
  assert.equal(classifyRunFailure('plain text', { kind: 'tool', statusCode: 'error' }).errorInfo.kind, 'tool')
  assert.equal(classifyRunFailure(new Error('x'), { provider: 'openai' }).errorInfo.provider, 'openai')
})
