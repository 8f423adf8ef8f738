import { test, before, after, beforeEach } from 'node:test'
import assert from 'node:assert/strict'
import {
  Agent, runAgent, OpenMultiAgent, OMAError, InvalidMessageError, ProviderError, LLMCallTimeoutError,
  TokenBudgetExceededError, UnsupportedContentBlockError,
} from '../src/index.js'
import { startServer, anthropicMessage, anthropicToolUse, anthropicSse, openaiMessage } from './helpers/server.js'

let server
before(async () => { server = await startServer() })
after(async () => { await server.close() })
beforeEach(() => server.reset())

const KEY = 'sk-ant-test-SECRETKEY0123456789'

function agent(extra = {}) {
  return new Agent({ name: 'tester', model: 'claude-test', provider: 'anthropic', baseURL: server.url, apiKey: KEY, ...extra })
}

function noBigInt(value, path = '$') {
  if (typeof value === 'bigint') assert.fail(`BigInt at ${path}`)
  if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) noBigInt(v, `${path}.${k}`)
  }
}

async function collect(iterable) {
  const out = []
  for await (const e of iterable) out.push(e)
  return out
}

test('run with text: OMA AgentRunResult, Anthropic request at {baseURL}/v1/messages', async () => {
  server.queue(anthropicMessage('Hello from the loopback.'))
  const result = await agent({ systemPrompt: 'be brief', maxTokens: 100, temperature: 0.5 }).run('hi')
  assert.equal(result.success, true)
  assert.equal(result.output, 'Hello from the loopback.')
  assert.deepEqual(result.messages, [{ role: 'assistant', content: [{ type: 'text', text: 'Hello from the loopback.' }] }])
  assert.deepEqual(result.tokenUsage, { input_tokens: 12, output_tokens: 6 })
  assert.equal(result.turns, 1)
  assert.deepEqual(result.toolCalls, [])
  const [req] = server.requests
  assert.equal(req.method, 'POST')
  assert.equal(req.url, '/v1/messages')
  assert.equal(req.headers['x-api-key'], KEY)
  assert.equal(req.body.model, 'claude-test')
  assert.equal(req.body.max_tokens, 100)
  assert.equal(req.body.temperature, 0.5)
  assert.equal(req.body.system, 'be brief')
  assert.deepEqual(req.body.messages, [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }])
  noBigInt(result)
})

test('non-ASCII text crosses both ways intact (strings in, request bytes out, answer in)', async () => {
  // ASCII first, then non-ASCII (the string lowering keeps an ASCII prefix and encodes the rest),
  // non-ASCII first, and astral characters.
  const long = `${'a'.repeat(5000)}é${'ü'.repeat(3000)}`
  const texts = ['é', 'naïve café ☕', '日本語のテキスト', 'emoji 🌍🚀 end', long]
  server.queue(anthropicMessage('réponse: 你好 🌍'))
  const result = await agent({ systemPrompt: 'sé brief 🙂' }).run([
    { role: 'user', content: texts.map((text) => ({ type: 'text', text })) },
  ])
  assert.equal(result.success, true)
  assert.equal(result.output, 'réponse: 你好 🌍')
  const [req] = server.requests
  assert.equal(req.headers['content-type'], 'application/json')
  assert.equal(Number(req.headers['content-length']), Buffer.byteLength(req.text))
  assert.equal(req.body.system, 'sé brief 🙂')
  assert.deepEqual(req.body.messages[0].content.map((b) => b.text), texts)
})

test('run with OMA messages (image, history) sends them as given', async () => {
  server.queue(anthropicMessage('seen'))
  const messages = [
    { role: 'user', content: [{ type: 'text', text: 'first' }] },
    { role: 'assistant', content: [{ type: 'text', text: 'ok' }] },
    { role: 'user', content: [
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'aW1hZ2U=' } },
      { type: 'text', text: 'what is this?' },
    ] },
  ]
  const result = await agent().run(messages)
  assert.equal(result.success, true)
  assert.equal(result.output, 'seen')
  const sent = server.requests[0].body.messages
  assert.equal(sent.length, 3)
  assert.equal(sent[2].content[0].type, 'image')
  assert.equal(sent[2].content[0].source.data, 'aW1hZ2U=')
  // The input is copied: the result carries only what the run produced.
  assert.equal(result.messages.length, 1)
})

test('a conversation handed over again: what changed in place since the last run is what is sent', async () => {
  // The package keeps each message's JSON text for the next run that hands the same message
  // over (src/agent/input.js); a change at any depth, made in place, must still reach the wire.
  const a = agent()
  const turn = (i) => ({ role: i % 2 === 0 ? 'user' : 'assistant', content: [{ type: 'text', text: `turn ${i}` }] })
  const messages = [turn(0), turn(1), turn(2)]
  const sends = async (expected) => {
    server.reset()
    server.queue(anthropicMessage('ok'))
    const result = await a.run(messages)
    assert.equal(result.success, true, JSON.stringify(result.errorInfo))
    assert.deepEqual(server.requests[0].body.messages, expected ?? JSON.parse(JSON.stringify(messages)))
  }
  // The first run writes the list whole, the second keeps each message, the third reuses them.
  for (let i = 0; i < 3; i++) await sends()
  const changes = [
    () => { messages[1].content[0].text = 'changed in place' },
    () => { messages[2].content.push({ type: 'text', text: 'a block more' }) },
    () => { messages[2].content.splice(0, 1) },
    () => { messages[0].content[0] = { type: 'text', text: 'turn 0' } },
    () => { messages[0].content[0] = { text: 'turn 0 again', type: 'text' } },
    () => { messages[1].role = 'user'; messages[0].role = 'assistant'; messages.reverse() },
    () => { messages.push(turn(3), turn(4)) },
    () => { messages[3].content[0].text = 'déjà vu \u2028 "quoted"' },
    () => { messages.splice(1, 2) },
  ]
  for (const change of changes) {
    change()
    await sends()
    await sends()
  }
  // What a getter or a toJSON gives is read again on every run.
  let current = 'first'
  const getter = { role: 'user', content: [{ type: 'text', get text() { return current } }] }
  const custom = { role: 'assistant', content: [{ toJSON: () => ({ type: 'text', text: `${current}!` }) }] }
  messages.splice(0, messages.length, getter, custom, turn(2))
  for (const now of ['first', 'second', 'third']) {
    current = now
    await sends([
      { role: 'user', content: [{ type: 'text', text: now }] },
      { role: 'assistant', content: [{ type: 'text', text: `${now}!` }] },
      turn(2),
    ])
  }
  // A change that breaks OMA's rules is refused, kept text or not: nothing is sent.
  messages.splice(0, messages.length, turn(0), turn(1), turn(2))
  await sends()
  await sends()
  messages[2].content[0].text = 42
  server.reset()
  await assert.rejects(a.run(messages), (e) => e instanceof InvalidMessageError)
  assert.equal(server.requests.length, 0)
  // A message kept without the pre-walk reaching it (it came after one the component refuses,
  // where the walk stopped), handed over again alone: its `undefined` content, which JSON drops,
  // is refused with OMA's message and nothing is sent.
  const refused = { role: 'user', content: 'not a block list' }
  const hollow = { role: 'assistant', content: undefined }
  server.reset()
  for (let i = 0; i < 3; i++) {
    await assert.rejects(a.run([refused, hollow]), (e) => e instanceof InvalidMessageError
      && e.message === 'messages[0].content must be a ContentBlock[], got string')
  }
  for (let i = 0; i < 2; i++) {
    await assert.rejects(a.run([hollow]), (e) => e instanceof InvalidMessageError
      && e.message === 'messages[0].content must be a ContentBlock[], got undefined')
    assert.equal(server.requests.length, 0)
  }
})

test('long media data goes beside the JSON text: sent byte for byte, checked as in the text, input untouched', async () => {
  // 64 KiB of base64 in an image, a video and a tool result's image part: each one goes to the
  // component beside the JSON text (run-json-parts / stream-json-parts / prompt-json-parts, and
  // json-driver's run-agent for runAgent).
  const data = Buffer.alloc(48 * 1024, 7).toString('base64')
  const image = { type: 'image', source: { type: 'base64', media_type: 'image/png', data } }
  const messages = [
    { role: 'user', content: [{ type: 'text', text: 'look' }, image] },
    { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'snap', input: {} }] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: [{ type: 'text', text: 'shot' }, { ...image, extra: 1 }] }] },
  ]
  const before = JSON.stringify(messages)
  const a = agent()
  const config = { name: 'tester', model: 'claude-test', provider: 'anthropic', baseURL: server.url, apiKey: KEY }
  const calls = {
    run: async () => a.run(messages),
    stream: async () => (await collect(a.stream(messages))).at(-1).data,
    runAgent: async () => runAgent(config, messages),
    orchestrated: async () => new OpenMultiAgent().runAgent(config, messages),
  }
  for (const [call, made] of Object.entries(calls)) {
    server.reset()
    server.queue(anthropicMessage('seen'))
    const result = await made()
    assert.equal(result.success, true, `${call}: ${JSON.stringify(result.errorInfo)}`)
    const sent = server.requests[0].body.messages
    assert.deepEqual(sent[0].content[1], image)
    assert.deepEqual(sent[2].content[0].content[1], { type: 'image', source: image.source })
  }
  assert.equal(JSON.stringify(messages), before, 'the caller\'s input is not changed')
  server.reset()
  server.queue(anthropicMessage('seen'))
  const prompted = await a.prompt([image, { type: 'text', text: 'and this?' }])
  assert.equal(prompted.success, true)
  assert.deepEqual(server.requests[0].body.messages[0].content[0], image)
  assert.deepEqual(a.getHistory()[0].content[0], image)
  // A long value that breaks a media rule fails with the message it has in the JSON text.
  const bad = `${data.slice(0, -4)}@@@@`
  for (const [input, message] of [
    [[{ role: 'user', content: [{ type: 'video', source: { ...image.source, media_type: 'video/mp4', data: bad } }] }], 'messages[0].content[0].source.data must contain raw base64 data'],
    [[{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'x', content: [{ type: 'image', source: { ...image.source, data: bad } }] }] }], 'messages[0].content[0].content[0].source.data must contain raw base64 data'],
  ]) {
    const short = JSON.parse(JSON.stringify(input).replace(bad, '@@@@'))
    for (const value of [input, short]) {
      for (const run of [(v) => a.run(v), (v) => runAgent(config, v)]) {
        await assert.rejects(run(value), (e) => {
          assert.ok(e instanceof InvalidMessageError, String(e))
          assert.equal(e.message, message)
          return true
        })
      }
    }
  }
  // A lone surrogate stays in the JSON text: the component sees it as JSON carries it, long or not.
  for (const prefix of [data, 'AA']) {
    const lone = [{ role: 'user', content: [{ type: 'image', source: { ...image.source, data: `${prefix}\ud800` } }] }]
    await assert.rejects(a.run(lone), (e) => {
      assert.ok(e instanceof InvalidMessageError, String(e))
      assert.match(e.message, /^input must be JSON text: unexpected end of hex escape/)
      return true
    })
  }
  assert.equal(server.requests.length, 1)
})

test('OpenAI-compatible provider posts to {baseURL}/chat/completions', async () => {
  server.queue(openaiMessage('from openai'))
  const a = new Agent({ name: 'o', model: 'gpt-test', provider: 'openai', baseURL: `${server.url}/v1`, apiKey: 'sk-openai-XYZ' })
  const result = await a.run('hello')
  assert.equal(result.success, true)
  assert.equal(result.output, 'from openai')
  assert.deepEqual(result.tokenUsage, { input_tokens: 7, output_tokens: 3 })
  assert.equal(server.requests[0].url, '/v1/chat/completions')
  assert.equal(server.requests[0].headers.authorization, 'Bearer sk-openai-XYZ')
})

test('invalid input rejects with OMA InvalidMessageError messages; nothing is sent', async () => {
  const a = agent()
  const cases = [
    [[{ role: 'user', content: 'hi' }], 'messages[0].content must be a ContentBlock[], got string'],
    [null, 'messages must be an array, got null'],
    [undefined, 'messages must be an array, got undefined'],
    [42, 'messages must be an array, got number'],
    [() => 1, 'messages must be an array, got function'],
    [[undefined], 'messages[0] must be an object, got undefined'],
    [[null], 'messages[0] must be an object, got null'],
    [[() => 1], 'messages[0] must be an object, got function'],
    [[{ role: 'user' }], 'messages[0].content must be a ContentBlock[], got undefined'],
    [[{ role: 'user', content: () => [] }], 'messages[0].content must be a ContentBlock[], got function'],
    [[{ role: 'user', content: [undefined] }], 'messages[0].content[0] must be a content block with a string "type"'],
    [[{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'a', content: () => 'x' }] }],
      'messages[0].content[0].content must be a string or a non-empty content-part array, got function'],
    [[{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'a', content: undefined }] }],
      'messages[0].content[0].content must be a string or a non-empty content-part array, got undefined'],
    [[{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'a', content: 'x', is_error: () => true }] }],
      'messages[0].content[0].is_error must be a boolean when provided'],
    [[{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'a', content: 'x', is_error: null }] }],
      'messages[0].content[0].is_error must be a boolean when provided'],
    [[{ role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'video', source: { type: 'url', media_type: 'video/mp4', url: 'file:///tmp/x.mp4' } }] }],
      'messages[0].content[1].source.url must use HTTP or HTTPS'],
    [[{ role: 'user', content: [{ type: 'text', text: () => 'x' }] }],
      'messages must contain cloneable structured data (strings, arrays, and plain data objects)'],
    // Checks run in OMA's order: an earlier JSON-visible failure wins over a later function.
    [[{ role: 'user', content: 'x' }, { role: 'user', content: () => [] }], 'messages[0].content must be a ContentBlock[], got string'],
  ]
  for (const [input, message] of cases) {
    await assert.rejects(a.run(input), (e) => {
      assert.ok(e instanceof InvalidMessageError, `${message}: ${e}`)
      assert.ok(e instanceof Error)
      assert.equal(e.name, 'InvalidMessageError')
      assert.equal(e.code, 'INVALID_MESSAGE')
      assert.equal(e.retryable, false)
      assert.equal(e.message, message)
      return true
    })
  }
  assert.equal(server.requests.length, 0)
})

test('a cyclic tool_use.input is an InvalidMessageError, not a TypeError', async () => {
  const input = { a: 1 }
  input.self = input
  const messages = [{ role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'x', input }] }]
  await assert.rejects(agent().run(messages), (e) => {
    assert.ok(e instanceof InvalidMessageError)
    assert.match(e.message, /^messages\[0\]\.content\[0\]\.input\.self .*circular/)
    return true
  })
  assert.throws(() => agent().stream(messages), InvalidMessageError)
  assert.equal(server.requests.length, 0)
})

test('run, prompt and runAgent return rejecting promises; stream and the constructor throw synchronously', async () => {
  const a = agent()
  const p = a.run([{ role: 'user', content: 1 }])
  assert.ok(p instanceof Promise)
  await assert.rejects(p, InvalidMessageError)
  const q = a.prompt(null)
  assert.ok(q instanceof Promise)
  await assert.rejects(q, { name: 'InvalidMessageError', message: 'messages[0].content must be a ContentBlock[], got null' })
  const r = runAgent({ name: 'r', model: 'm', provider: 'anthropic', baseURL: server.url }, [1])
  assert.ok(r instanceof Promise)
  await assert.rejects(r, { message: 'messages[0] must be an object, got number' })
  assert.throws(() => a.stream([{ role: 'user', content: 'x' }]), {
    name: 'InvalidMessageError', message: 'messages[0].content must be a ContentBlock[], got string',
  })
  assert.throws(() => a.stream(undefined), { message: 'messages must be an array, got undefined' })
  assert.throws(() => agent({ history: [{ role: 'user', content: {} }] }), {
    name: 'InvalidMessageError', message: 'messages[0].content must be a ContentBlock[], got object',
  })
  assert.throws(() => agent({ history: [{ role: 'user', content: undefined }] }), {
    message: 'messages[0].content must be a ContentBlock[], got undefined',
  })
  // A configuration the component cannot use: a plain Error with OMA's fields.
  assert.throws(() => new Agent({ name: 'x', model: 'm', provider: 'no-such-provider' }), (e) => {
    assert.ok(e instanceof OMAError && e instanceof Error)
    assert.match(e.message, /unknown provider "no-such-provider"/)
    return true
  })
  assert.equal(server.requests.length, 0)
})

test("stream: OMA's events by default, no text_delta", async () => {
  server.queue(anthropicSse(['Hel', 'lo ', 'world']))
  const events = []
  for await (const e of agent().stream('hi')) events.push(e)
  assert.deepEqual(events.map((e) => e.type), ['text', 'done'])
  assert.equal(events[0].data, 'Hello world')
  assert.throws(() => agent({ textDeltas: 'yes' }), /textDeltas must be a boolean/)
})

test('stream: with textDeltas, text deltas as they arrive, the turn text, then done', async () => {
  server.queue(anthropicSse(['Hel', 'lo ', 'world'], { delayMs: 20 }))
  const a = agent({ textDeltas: true })
  const events = []
  const times = []
  const t0 = Date.now()
  for await (const e of a.stream('hi')) { events.push(e); times.push(Date.now() - t0) }
  assert.deepEqual(events.map((e) => e.type), ['text_delta', 'text_delta', 'text_delta', 'text', 'done'])
  assert.deepEqual(events.slice(0, 3).map((e) => e.data), ['Hel', 'lo ', 'world'])
  assert.equal(events[3].data, 'Hello world')
  const result = events[4].data
  assert.equal(result.success, true)
  assert.equal(result.output, 'Hello world')
  assert.equal(server.requests[0].body.stream, true)
  // Streamed: the first delta arrives before the last piece was written.
  assert.ok(times[0] < times[2], `deltas were not incremental: ${times}`)
  noBigInt(events)
})

test('stream: a provider failure is an error event; iteration does not throw', async () => {
  server.queue({ status: 500, json: { type: 'error', error: { type: 'api_error', message: 'boom' } } })
  const events = await collect(agent({ call: { maxRetries: 0 } }).stream('hi'))
  assert.equal(events.length, 1)
  assert.equal(events[0].type, 'error')
  const error = events[0].data
  assert.ok(error instanceof ProviderError && error instanceof Error)
  assert.equal(error.name, 'ProviderError')
  assert.equal(error.httpStatus, 500)
  // Anthropic's error.type is the provider's code, and its type.
  assert.equal(error.code, 'api_error')
  assert.equal(error.result.errorInfo.code, 'api_error')
  assert.equal(error.result.success, false)
})

test('prompt appends to history; getHistory copies; reset clears', async () => {
  server.queue(anthropicMessage('one'), anthropicMessage('two'))
  const seed = [{ role: 'user', content: [{ type: 'text', text: 'seed' }] }, { role: 'assistant', content: [{ type: 'text', text: 'seeded' }] }]
  const a = agent({ history: seed })
  const r1 = await a.prompt('first')
  assert.equal(r1.output, 'one')
  assert.equal(server.requests[0].body.messages.length, 3)
  const r2 = await a.prompt([{ type: 'text', text: 'second' }])
  assert.equal(r2.output, 'two')
  assert.equal(server.requests[1].body.messages.length, 5)
  const history = a.getHistory()
  assert.deepEqual(history.map((m) => m.content[0].text), ['seed', 'seeded', 'first', 'one', 'second', 'two'])
  history.pop()
  assert.equal(a.getHistory().length, 6)
  // run ignores history
  server.queue(anthropicMessage('fresh'))
  await a.run('alone')
  assert.equal(server.requests[2].body.messages.length, 1)
  assert.equal(a.getHistory().length, 6)
  a.reset()
  assert.deepEqual(a.getHistory(), [])
  // invalid prompt input leaves history unchanged
  await assert.rejects(a.prompt([null]), { message: 'messages[0].content[0] must be a content block with a string "type"' })
  assert.deepEqual(a.getHistory(), [])
})

test('async beforeRun: OMA context {prompt, messages, agent} (agent: the configuration, no secrets); the rewrite is sent', async () => {
  server.queue(anthropicMessage('hooked'))
  let seen
  const a = agent({
    systemPrompt: 'sys',
    credentials: { TOOL_TOKEN: 'tool-secret-value' },
    beforeRun: async (ctx) => {
      seen = ctx
      await new Promise((r) => setTimeout(r, 10))
      return { prompt: `${ctx.prompt} (rewritten)` }
    },
  })
  const result = await a.run([{ role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] }])
  assert.equal(result.success, true)
  assert.equal(seen.prompt, 'ab')
  assert.equal(seen.agent.name, 'tester')
  assert.equal(seen.agent.model, 'claude-test')
  assert.equal(seen.agent.systemPrompt, 'sys')
  assert.equal(seen.agent.baseURL, server.url)
  assert.equal('apiKey' in seen.agent, false)
  assert.equal('credentials' in seen.agent, false)
  assert.equal('beforeRun' in seen.agent, false)
  assert.equal(seen.messages.length, 1)
  assert.equal(seen.config.model, 'claude-test')
  assert.ok(!JSON.stringify(seen).includes(KEY))
  assert.ok(!JSON.stringify(seen).includes('tool-secret-value'))
  assert.deepEqual(server.requests[0].body.messages[0].content, [{ type: 'text', text: 'ab (rewritten)' }])
})

test('beforeRun may replace messages; a throwing hook fails the run (callback), nothing sent', async () => {
  server.queue(anthropicMessage('ok'))
  const replaced = agent({ beforeRun: (ctx) => ({ prompt: ctx.prompt, messages: [{ role: 'user', content: [{ type: 'text', text: 'other' }] }] }) })
  await replaced.run('orig')
  assert.deepEqual(server.requests[0].body.messages, [{ role: 'user', content: [{ type: 'text', text: 'other' }] }])

  server.reset()
  const failing = agent({ beforeRun: async () => { throw new Error('hook said no') } })
  const result = await failing.run('x')
  assert.equal(result.success, false)
  assert.equal(result.output, 'hook said no')
  assert.equal(result.status.code, 'error')
  assert.equal(result.errorInfo.kind, 'callback')
  assert.equal(server.requests.length, 0)

  const bad = agent({ beforeRun: () => ({ prompt: 5 }) })
  const r2 = await bad.run('x')
  assert.equal(r2.success, false)
  assert.equal(r2.output, 'beforeRun.prompt must be a string')
  const nullMessages = agent({ beforeRun: (ctx) => ({ prompt: ctx.prompt, messages: null }) })
  const r3 = await nullMessages.run('x')
  assert.equal(r3.errorInfo.name, 'InvalidMessageError')
  assert.equal(r3.output, 'messages must be an array, got null')
})

test('async tools and the tool loop; tool calls of one turn run concurrently', async () => {
  server.queue(
    anthropicToolUse([['t1', 'add', { a: 2, b: 3 }], ['t2', 'slow_echo', { text: 'hey' }]], 'calling'),
    anthropicToolUse([['t3', 'add', { a: 10, b: 1 }]]),
    anthropicMessage('the answers are 5, hey and 11'),
  )
  const log = []
  const tools = [
    { name: 'add', description: 'adds', inputSchema: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } } },
      execute: async ({ a, b }, ctx) => { log.push(`add:${ctx.toolUseId}:${ctx.agent.name}`); return String(a + b) } },
    { name: 'slow_echo', description: 'echoes slowly', inputSchema: { type: 'object' },
      execute: async ({ text }) => { log.push('slow:start'); await new Promise((r) => setTimeout(r, 50)); log.push('slow:end'); return [{ type: 'text', text }] } },
  ]
  const a = agent({ tools })
  const events = await collect(a.stream('compute'))
  const result = events.at(-1).data
  assert.equal(result.success, true, JSON.stringify(result))
  assert.equal(result.output, 'the answers are 5, hey and 11')
  assert.equal(result.turns, 3)
  assert.deepEqual(result.toolCalls.map((c) => c.toolName), ['add', 'slow_echo', 'add'])
  assert.equal(server.requests[0].body.tools[0].name, 'add')
  assert.deepEqual(server.requests[0].body.tools[0].input_schema.properties.a, { type: 'number' })
  const second = server.requests[1].body.messages.at(-1)
  assert.equal(second.role, 'user')
  assert.deepEqual(second.content.map((b) => [b.type, b.tool_use_id]), [['tool_result', 't1'], ['tool_result', 't2']])
  assert.equal(second.content[0].content, '5')
  const types = events.map((e) => e.type)
  assert.deepEqual(types.filter((t) => t === 'tool_use' || t === 'tool_result'), ['tool_use', 'tool_use', 'tool_result', 'tool_result', 'tool_use', 'tool_result'])
  const use = events.find((e) => e.type === 'tool_use').data
  assert.deepEqual(use, { type: 'tool_use', id: 't1', name: 'add', input: { a: 2, b: 3 } })
  const res = events.find((e) => e.type === 'tool_result' && e.data.tool_use_id === 't2').data
  assert.deepEqual(res.content, [{ type: 'text', text: 'hey' }])
  assert.ok(log.indexOf('slow:start') >= 0)
})

test('a tool result carries is_error as the tool gave isError: false is sent, absent stays absent (OMA)', async () => {
  server.queue(
    anthropicToolUse([['t1', 'said_false', {}], ['t2', 'said_nothing', {}], ['t3', 'oma_false', {}], ['t4', 'oma_nothing', {}]]),
    anthropicMessage('fine'),
  )
  const { defineTool } = await import('../src/index.js')
  const { z } = await import('zod')
  const a = agent({
    tools: [
      { name: 'said_false', description: 'd', inputSchema: { type: 'object' }, execute: async () => ({ data: 'a', isError: false }) },
      { name: 'said_nothing', description: 'd', inputSchema: { type: 'object' }, execute: async () => 'b' },
      defineTool({ name: 'oma_false', description: 'd', inputSchema: z.object({}), execute: async () => ({ data: 'c', isError: false }) }),
      defineTool({ name: 'oma_nothing', description: 'd', inputSchema: z.object({}), execute: async () => ({ data: 'd' }) }),
    ],
  })
  const result = await a.run('go')
  assert.equal(result.success, true)
  const sent = server.requests[1].body.messages.at(-1).content
  assert.deepEqual(sent.map((b) => [b.content, 'is_error' in b ? b.is_error : 'absent']),
    [['a', false], ['b', 'absent'], ['c', false], ['d', 'absent']])
  const produced = result.messages[1].content
  assert.deepEqual(produced.map((b) => ('is_error' in b ? b.is_error : 'absent')), [false, 'absent', false, 'absent'])
})

test('a failing tool and an unknown tool answer is_error: true; the run goes on', async () => {
  server.queue(
    anthropicToolUse([['t1', 'broken', {}], ['t2', 'missing', {}]]),
    anthropicMessage('recovered'),
  )
  const a = agent({ tools: [{ name: 'broken', description: 'fails', inputSchema: { type: 'object' }, execute: async () => { throw new Error('disk on fire') } }] })
  const result = await a.run('go')
  assert.equal(result.success, true)
  assert.equal(result.output, 'recovered')
  const results = server.requests[1].body.messages.at(-1).content
  assert.equal(results[0].is_error, true)
  assert.match(JSON.stringify(results[0].content), /disk on fire/)
  assert.equal(results[1].is_error, true)
  assert.match(JSON.stringify(results[1].content), /missing/)
  // OMA's records: text output and a duration, no error flag (the tool_result block has it).
  assert.deepEqual(result.toolCalls.map((c) => Object.keys(c).sort()), [['duration', 'input', 'output', 'toolName'], ['duration', 'input', 'output', 'toolName']])
  assert.equal(result.toolCalls[0].output, 'disk on fire')
  assert.match(result.toolCalls[1].output, /^Tool "missing" is not granted to this agent\./)
})

test('process backend: the prompt on stdin, stdout is the output', async () => {
  const echo = { kind: 'process', command: process.execPath, args: ['-e', 'process.stdin.pipe(process.stdout)'] }
  const a = new Agent({ name: 'proc', model: 'none', provider: 'anthropic', backend: echo, systemPrompt: 'SYSTEM' })
  const result = await a.run('echo me')
  assert.equal(result.success, true, JSON.stringify(result))
  assert.match(result.output, /echo me/)
  assert.match(result.output, /^SYSTEM\n\n/)
  assert.deepEqual(result.tokenUsage, { input_tokens: 0, output_tokens: 0 })
  // structured input is refused at the call
  await assert.rejects(a.run([{ role: 'user', content: [{ type: 'text', text: 'x' }] }]), {
    name: 'InvalidMessageError',
    message: 'The process external backend accepts string prompts only; structured messages or content blocks cannot be forwarded without loss.',
  })
  const failing = new Agent({ name: 'p', model: 'none', provider: 'anthropic', backend: { kind: 'process', command: process.execPath, args: ['-e', 'process.exit(3)'] } })
  const r2 = await failing.run('x')
  assert.equal(r2.success, false)
  assert.match(r2.output, /code 3/)
  assert.equal(server.requests.length, 0)
})

test('runAgent: progress events and online evaluation', async () => {
  server.queue(anthropicMessage('evaluated'))
  const progress = []
  const cases = []
  const result = await runAgent(
    { name: 'ra', model: 'claude-test', provider: 'anthropic', baseURL: server.url, apiKey: KEY },
    'question api_key=abc123',
    { onProgress: (e) => progress.push(e), evaluation: { sampleRate: 1, storePayloads: 'redacted', onCase: async (c) => { cases.push(c) } } },
  )
  assert.equal(result.success, true)
  assert.deepEqual(progress.map((e) => e.type), ['agent_start', 'agent_complete'])
  assert.deepEqual(progress[0], { type: 'agent_start', agent: 'ra', data: { prompt: 'question api_key=abc123' } })
  assert.equal(progress[1].data.output, 'evaluated')
  assert.equal(cases.length, 1)
  assert.equal(cases[0].agent, 'ra')
  assert.equal(cases[0].input, 'question api_key=[redacted]')
  assert.equal(cases[0].result.output, 'evaluated')
  assert.equal(typeof cases[0].durationMs, 'number')
  noBigInt({ progress, cases })

  server.queue(anthropicMessage('unsampled'))
  const none = []
  await runAgent({ name: 'ra', model: 'claude-test', provider: 'anthropic', baseURL: server.url }, [{ role: 'user', content: [{ type: 'text', text: 'q' }] }],
    { evaluation: { sampleRate: 0, onCase: (c) => none.push(c) } })
  assert.equal(none.length, 0)
})

test('provider error: success false with errorInfo; no key anywhere', async () => {
  server.queue({ status: 400, json: { type: 'error', error: { type: 'invalid_request_error', message: `bad key ${KEY}` } } })
  const result = await agent().run('hi')
  assert.equal(result.success, false)
  assert.equal(result.status.code, 'error')
  assert.equal(result.errorInfo.kind, 'provider')
  assert.equal(result.errorInfo.name, 'ProviderError')
  assert.equal(result.errorInfo.httpStatus, 400)
  assert.equal(result.errorInfo.provider, 'anthropic')
  assert.equal(result.errorInfo.retryable, false)
  assert.deepEqual(result.messages, [])
  assert.ok(!JSON.stringify(result).includes(KEY), JSON.stringify(result))
  assert.ok(!JSON.stringify(result).includes('SECRETKEY'))
})

test('retries: 429 then 200 with call.maxRetries', async () => {
  server.queue(
    { status: 429, headers: { 'retry-after': '0.08' }, json: { type: 'error', error: { type: 'rate_limit_error', message: 'slow down' } } },
    anthropicMessage('after retry'),
  )
  const a = agent({ call: { maxRetries: 2, retryDelayMs: 20 } })
  const t0 = Date.now()
  const result = await a.run('hi')
  assert.equal(result.success, true, JSON.stringify(result))
  assert.equal(result.output, 'after retry')
  assert.equal(server.requests.length, 2)
  // The provider's requested wait (80 ms) replaces the schedule's delay.
  assert.ok(Date.now() - t0 >= 70)
  // with maxRetries: 0, the 429 is the result
  server.reset()
  server.queue({ status: 429, json: { type: 'error', error: { type: 'rate_limit_error', message: 'slow down' } } })
  const r2 = await agent({ call: { maxRetries: 0 } }).run('hi')
  assert.equal(r2.success, false)
  assert.equal(r2.errorInfo.retryable, true)
  assert.equal(r2.errorInfo.code, 'rate_limit_error')
  assert.equal(server.requests.length, 1)
})

test('retries: without retry options, the provider SDK default retries a 500', async () => {
  // Anthropic's SDK: two retries, after about 0.5 s and 1 s.
  server.queue(
    { status: 500, json: { type: 'error', error: { type: 'api_error', message: 'boom' } } },
    anthropicMessage('second time'),
  )
  const t0 = Date.now()
  const result = await agent().run('hi')
  assert.equal(result.success, true, JSON.stringify(result))
  assert.equal(result.output, 'second time')
  assert.equal(server.requests.length, 2)
  assert.ok(Date.now() - t0 >= 350)
})

test('timeout: status timeout, LLMCallTimeoutError', async () => {
  server.queue({ hang: true })
  const t0 = Date.now()
  // One attempt: the provider's default policy would retry the timeout.
  const result = await agent({ call: { timeoutMs: 200, maxRetries: 0 } }).run('hi')
  assert.ok(Date.now() - t0 < 5000)
  assert.equal(result.success, false)
  assert.equal(result.status.code, 'timeout')
  assert.equal(result.errorInfo.name, 'LLMCallTimeoutError')
  assert.equal(result.errorInfo.code, 'LLM_CALL_TIMEOUT')
  assert.equal(result.errorInfo.kind, 'timeout', 'OMA classifies a timeout as kind timeout')
  assert.equal(result.errorInfo.retryable, true)
})

test('a refused connection is a failed result, not a rejection', async () => {
  const a = new Agent({ name: 'r', model: 'm', provider: 'anthropic', baseURL: 'http://127.0.0.1:1', apiKey: KEY })
  const result = await a.run('hi')
  assert.equal(result.success, false)
  assert.equal(result.errorInfo.kind, 'provider')
  assert.ok(!JSON.stringify(result).includes(KEY))
})

test('token budget: budget_exceeded, then done with the failed result (as OMA ends such a stream)', async () => {
  server.queue(anthropicMessage('expensive', { usage: { input_tokens: 50, output_tokens: 60 } }))
  const events = await collect(agent({ maxTokenBudget: 100 }).stream('hi'))
  assert.deepEqual(events.map((e) => e.type).filter((t) => t !== 'text_delta'), ['text', 'budget_exceeded', 'done'])
  const budget = events.find((e) => e.type === 'budget_exceeded')
  assert.ok(budget.data instanceof TokenBudgetExceededError)
  assert.equal(budget.data.message, 'Agent "tester" exceeded token budget: 110 tokens used (budget: 100)')
  assert.deepEqual([budget.data.agent, budget.data.tokensUsed, budget.data.budget], ['tester', 110, 100])
  const last = events.at(-1)
  assert.equal(last.data.success, false)
  assert.equal(last.data.budgetExceeded, true)
  assert.equal(last.data.status.code, 'budget_exhausted')
  assert.equal(last.data.errorInfo.kind, 'budget')
})

test('unsupported content: video on Anthropic fails the run, nothing sent', async () => {
  const messages = [{ role: 'user', content: [{ type: 'video', source: { type: 'url', media_type: 'video/mp4', url: 'https://example.com/v.mp4' } }] }]
  const result = await agent().run(messages)
  assert.equal(result.success, false)
  assert.equal(result.errorInfo.name, 'UnsupportedContentBlockError')
  assert.equal(result.errorInfo.code, 'UNSUPPORTED_CONTENT_BLOCK')
  assert.equal(server.requests.length, 0)
  assert.ok(result.error instanceof UnsupportedContentBlockError)
  assert.equal(result.error.provider, 'Anthropic Messages')
  assert.equal(result.error.blockType, 'video')
  assert.equal(result.error.retryable, false)
  assert.equal(result.errorInfo.message,
    'Anthropic Messages cannot represent the "video" content block: OMA does not map video for this adapter yet')
  const events = await collect(agent().stream(messages))
  assert.ok(events.at(-1).data instanceof UnsupportedContentBlockError)
  assert.equal(events.at(-1).data.blockType, 'video')
  const own = new UnsupportedContentBlockError('Gemini generateContent', 'video', 'why')
  assert.equal(own.message, 'Gemini generateContent cannot represent the "video" content block: why')
  assert.equal(own.code, 'UNSUPPORTED_CONTENT_BLOCK')
  assert.deepEqual([own.provider, own.blockType], ['Gemini generateContent', 'video'])
})

test("error classes carry OMA's name, code, constructor and fields", () => {
  const e = new InvalidMessageError('x')
  assert.ok(e instanceof OMAError && e instanceof Error)
  assert.equal(e.name, 'InvalidMessageError')
  assert.equal(e.code, 'INVALID_MESSAGE')
  const timeout = new LLMCallTimeoutError(500, 'a')
  assert.deepEqual([timeout.retryable, timeout.timeoutMs, timeout.agent, timeout.message], [true, 500, 'a', 'Agent "a" LLM call exceeded per-call timeout of 500ms'])
  assert.equal(new LLMCallTimeoutError(5).message, 'LLM call exceeded per-call timeout of 5ms')
  assert.equal(new ProviderError('p').code, undefined)
  const budget = new TokenBudgetExceededError('b', 12, 10)
  assert.equal(String(budget), 'TokenBudgetExceededError: Agent "b" exceeded token budget: 12 tokens used (budget: 10)')
  assert.deepEqual([budget.agent, budget.tokensUsed, budget.budget, budget.code, budget.retryable], ['b', 12, 10, 'TOKEN_BUDGET_EXCEEDED', false])
})

test('tool calls of one turn are executed concurrently', async () => {
  server.queue(anthropicToolUse([['a', 'wait', {}], ['b', 'wait', {}]]), anthropicMessage('done'))
  let started = 0
  let release
  const both = new Promise((r) => { release = r })
  const tools = [{
    name: 'wait', description: 'waits for its sibling', inputSchema: { type: 'object' },
    execute: async (_input, ctx) => {
      if (++started === 2) release()
      const how = await Promise.race([both.then(() => 'together'), new Promise((r) => setTimeout(() => r('alone'), 1000))])
      return `${how}:${ctx.toolUseId}`
    },
  }]
  const result = await agent({ tools }).run('x')
  assert.deepEqual(result.toolCalls.map((c) => c.output), ['together:a', 'together:b'])
})

test('a turn of many tool calls settling out of order: every answer reaches its call once', async () => {
  // Each settled answer is queued and handed to the session once; the calls settle in an order
  // unlike the one they were made in, some in the same tick.
  const n = 400
  const calls = Array.from({ length: n }, (_, i) => [`c${i}`, 'slot', { i }])
  server.queue(anthropicToolUse(calls), anthropicMessage('all done'))
  const tools = [{
    name: 'slot', description: 'answers after a delay of its own', inputSchema: { type: 'object' },
    execute: async ({ i }) => {
      await new Promise((r) => setTimeout(r, (i * 7919) % 23))
      return `answer ${i}`
    },
  }]
  const result = await agent({ tools, maxTurns: 3 }).run('go')
  assert.equal(result.success, true, JSON.stringify(result.errorInfo))
  assert.equal(result.output, 'all done')
  assert.equal(result.toolCalls.length, n)
  const sent = server.requests[1].body.messages.at(-1).content
  assert.deepEqual(sent.map((b) => b.tool_use_id), calls.map(([id]) => id))
  assert.deepEqual(sent.map((b) => b.content), calls.map((_, i) => `answer ${i}`))
})

test('breaking out of a stream abandons the run cleanly', async () => {
  server.queue(anthropicSse(['a', 'b', 'c', 'd', 'e'], { delayMs: 30 }))
  const a = agent({ textDeltas: true })
  const seen = []
  for await (const e of a.stream('hi')) {
    seen.push(e.type)
    if (e.type === 'text_delta') break
  }
  assert.deepEqual(seen, ['text_delta'])
  // the agent is still usable
  server.queue(anthropicMessage('after break'))
  assert.equal((await a.run('again')).output, 'after break')
})

test('egress allowlist: another origin is rejected before anything is sent', async () => {
  const result = await agent({ call: { egress: ['https://api.anthropic.com'] } }).run('hi')
  assert.equal(result.success, false)
  assert.equal(result.status.code, 'rejected')
  assert.equal(result.errorInfo.name, 'EgressPolicyError')
  assert.equal(result.errorInfo.kind, 'validation')
  assert.equal(server.requests.length, 0)
  // offline allows loopback only, which this server is
  server.queue(anthropicMessage('loopback ok'))
  assert.equal((await agent({ call: { egress: 'offline' } }).run('hi')).output, 'loopback ok')
})

test('a prompt with a failing run keeps the user turn and no reply', async () => {
  server.queue({ status: 500, json: { type: 'error', error: { type: 'api_error', message: 'down' } } })
  const a = agent({ call: { maxRetries: 0 } })
  const r = await a.prompt('hello?')
  assert.equal(r.success, false)
  assert.deepEqual(a.getHistory(), [{ role: 'user', content: [{ type: 'text', text: 'hello?' }] }])
})

test('a tool that outlives the run deadline ends the run with OMA timeout, not a hang', async () => {
  server.queue(anthropicToolUse([['t1', 'stuck', {}]]))
  let finish
  const stuck = new Promise((resolve) => { finish = resolve })
  const a = agent({
    deadlineMs: 300,
    tools: [{ name: 'stuck', description: 'never answers in time', inputSchema: { type: 'object' },
      execute: async () => { await stuck; return 'too late' } }],
  })
  const started = Date.now()
  const result = await a.run('go')
  const elapsed = Date.now() - started
  finish()
  assert.equal(result.success, false)
  assert.equal(result.status.code, 'timeout')
  // OMA's whole-run timeout, naming the run's limit (not a per-call one).
  assert.equal(result.errorInfo.name, 'TimeoutError')
  assert.match(result.errorInfo.message, /^Agent ".*" exceeded whole-run timeout of 300ms$/)
  assert.ok(elapsed >= 250 && elapsed < 2000, `ended after ${elapsed} ms`)
  assert.equal(server.requests.length, 1, 'nothing was sent after the deadline')
})

test('a beforeRun hook that outlives the run deadline ends the run with OMA timeout', async () => {
  let finish
  const stuck = new Promise((resolve) => { finish = resolve })
  const a = agent({ deadlineMs: 300, beforeRun: async (ctx) => { await stuck; return ctx } })
  const started = Date.now()
  const result = await a.run('go')
  finish()
  assert.equal(result.status.code, 'timeout')
  assert.ok(Date.now() - started < 2000)
  assert.equal(server.requests.length, 0, 'the hook never answered, so nothing was sent')
})

test("provider options: OMA's frequencyPenalty, presencePenalty, minP, parallelToolCalls, extraBody, thinking.effort", async () => {
  const options = {
    frequencyPenalty: 0.5, presencePenalty: -0.25, minP: 0.05, parallelToolCalls: false,
    thinking: { effort: 'high' }, extraBody: { temperature: 0.1, custom: { x: 1 }, model: 'not-this' },
  }
  server.queue(openaiMessage('from openai'))
  const a = new Agent({ name: 'o', model: 'gpt-test', provider: 'openai', baseURL: `${server.url}/v1`, apiKey: 'sk-openai-XYZ', ...options })
  assert.equal((await a.run('hi')).success, true)
  const body = server.requests[0].body
  assert.equal(body.frequency_penalty, 0.5)
  assert.equal(body.presence_penalty, -0.25)
  assert.equal(body.min_p, 0.05)
  assert.equal(body.parallel_tool_calls, false)
  assert.equal(body.reasoning_effort, 'high')
  assert.equal(body.temperature, 0.1)
  assert.deepEqual(body.custom, { x: 1 })
  assert.equal(body.model, 'gpt-test')
  // Anthropic's adapter carries the extra body and none of the OpenAI-track options, as OMA's.
  server.reset()
  server.queue(anthropicMessage('ok'))
  assert.equal((await agent(options).run('hi')).success, true)
  const anthropic = server.requests[0].body
  for (const key of ['frequency_penalty', 'presence_penalty', 'min_p', 'parallel_tool_calls', 'reasoning_effort']) {
    assert.equal(anthropic[key], undefined, key)
  }
  assert.deepEqual(anthropic.custom, { x: 1 })
})

test('provider options: a value of the wrong type names the option, before any request', async () => {
  assert.throws(() => agent({ frequencyPenalty: Number.NaN }), /frequencyPenalty must be a finite number/)
  assert.throws(() => agent({ minP: Infinity }), /minP must be a finite number/)
  for (const [key, value, pattern] of [
    ['presencePenalty', 'high', /`presencePenalty` must be a number, got string/],
    ['parallelToolCalls', 1, /`parallelToolCalls` must be a boolean/],
    ['extraBody', [1], /`extraBody` must be an object/],
    ['thinking', { effort: 'extreme' }, /`thinking.effort` must be "low", "medium", "high" or "max"/],
  ]) {
    assert.throws(() => agent({ [key]: value }), pattern, key)
  }
  assert.equal(server.requests.length, 0)
})

test("onTrace: OMA's llm_call, tool_call and agent events, one run id, a throwing sink changes nothing", async () => {
  server.queue(
    anthropicToolUse([['call_1', 'lookup', { q: 'x', password: 'hunter2' }]]),
    anthropicMessage('done'),
  )
  const lookup = { name: 'lookup', description: 'Looks up', inputSchema: { type: 'object' }, execute: async () => 'token=abcdef123456 found' }
  const events = []
  const onTrace = (event) => {
    events.push(event)
    throw new Error('a broken sink')
  }
  const result = await agent({ tools: [lookup] }).run('hi', { onTrace, runId: 'run-7', traceParentId: 'outer' })
  assert.equal(result.success, true)
  assert.deepEqual(events.map((e) => e.type), ['llm_call', 'tool_call', 'llm_call', 'agent'])
  const last = events.at(-1)
  assert.equal(result.identity.runId, 'run-7')
  for (const event of events) {
    assert.equal(event.runId, 'run-7')
    assert.equal(event.agent, 'tester')
    assert.equal(event.durationMs, event.endMs - event.startMs)
  }
  for (const event of events.slice(0, 3)) assert.equal(event.parentId, last.spanId)
  assert.equal(last.parentId, 'outer')
  assert.match(last.spanId, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
  assert.deepEqual(events[0].tokens, { input_tokens: 12, output_tokens: 6 })
  assert.equal(events[0].model, 'claude-test')
  assert.equal(events[0].phase, 'turn')
  assert.equal(events[2].turn, 2)
  assert.equal(events[1].tool, 'lookup')
  assert.equal(events[1].isError, false)
  assert.deepEqual(events[1].input, { q: 'x', password: '[redacted]' })
  assert.equal(events[1].output, 'token=[redacted]')
  assert.equal(last.turns, 2)
  assert.equal(last.toolCalls, 1)
  // No onTrace, no events; a run id is the run's own when none is given.
  server.queue(anthropicMessage('plain'))
  const seen = []
  await agent().run('hi', { onTrace: async (e) => { seen.push(e); throw new Error('rejects') } })
  assert.deepEqual(seen.map((e) => e.type), ['llm_call', 'agent'])
})

test("onTrace: a tool call an onToolCall gate decided carries OMA's gated, gateAction and redacted gateReason", async () => {
  server.queue(anthropicToolUse([['t1', 'lookup', { q: 1 }], ['t2', 'lookup', { q: 2 }]]), anthropicMessage('done'))
  const { defineTool } = await import('../src/index.js')
  const { z } = await import('zod')
  const lookup = defineTool({ name: 'lookup', description: 'd', inputSchema: z.object({ q: z.number() }), execute: async () => ({ data: 'found' }) })
  const events = []
  const onToolCall = ({ input }) => (input.q === 1 ? { action: 'allow' } : { action: 'deny', reason: 'password=hunter22 is wrong' })
  const result = await agent({ customTools: [lookup], onToolCall }).run('hi', { onTrace: (e) => events.push(e) })
  assert.equal(result.success, true)
  const calls = events.filter((e) => e.type === 'tool_call')
  assert.equal(calls.length, 2)
  const allowed = calls.find((e) => e.output === 'found')
  const denied = calls.find((e) => e.isError)
  assert.deepEqual([allowed.gated, allowed.gateAction, 'gateReason' in allowed], [true, 'allow', false])
  assert.deepEqual([denied.gated, denied.gateAction, denied.gateReason], [true, 'deny', 'password=[redacted]'])
  assert.deepEqual(Object.keys(denied).slice(Object.keys(denied).indexOf('isError'), Object.keys(denied).indexOf('isError') + 4),
    ['isError', 'gated', 'gateAction', 'gateReason'])
  // Without a gate, none of the fields.
  server.queue(anthropicToolUse([['t3', 'lookup', { q: 1 }]]), anthropicMessage('done'))
  const plain = []
  await agent({ customTools: [lookup] }).run('hi', { onTrace: (e) => plain.push(e) })
  assert.equal('gated' in plain.find((e) => e.type === 'tool_call'), false)
})

test('OpenMultiAgent onTrace traces runAgent with the agent name as traceAgent', async () => {
  server.queue(anthropicMessage('ok'))
  const events = []
  const oma = new OpenMultiAgent({ onTrace: (e) => events.push(e) })
  const result = await oma.runAgent({ name: 'solo', model: 'claude-test', provider: 'anthropic', baseURL: server.url, apiKey: KEY }, 'hi')
  assert.equal(result.success, true)
  assert.deepEqual(events.map((e) => [e.type, e.agent]), [['llm_call', 'solo'], ['agent', 'solo']])
  assert.equal(events[0].runId, result.identity.runId)
})
