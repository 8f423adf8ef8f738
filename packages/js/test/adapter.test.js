// OMA's `adapter` (an LLMAdapter of one's own) through the package: the shared table
// fixtures/adapter/cases.json (also run through the Rust host and the Python package), each
// case's adapter answering from its script, sync and async; then what only JavaScript has
// (abort signals, iterables, values that are not JSON, the declaration's checks).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { Agent, OpenMultiAgent, runAgent } from '../src/index.js'

const table = JSON.parse(readFileSync(new URL('../../../fixtures/adapter/cases.json', import.meta.url), 'utf8'))
const ADAPTER = 'fixture-adapter'

/** An error with the fields a case gives (`name`, `message`, `code`, `status`). */
function thrown(fields) {
  const error = new Error(fields.message)
  error.name = fields.name
  if (fields.code !== undefined) error.code = fields.code
  if (fields.status !== undefined) error.status = fields.status
  return error
}

/** The case's adapter: answers from its script, async or not; records each call. */
function scripted(kase, calls, { sync }) {
  const script = [...(kase.script ?? [])]
  const take = (messages, options) => {
    const { abortSignal, ...rest } = options
    assert.ok(abortSignal instanceof AbortSignal, 'the call carries an abort signal')
    calls.push({ messages: JSON.parse(JSON.stringify(messages)), options: rest })
    const entry = script.shift()
    assert.ok(entry, `${kase.name}: the adapter is called as often as its script says`)
    return entry
  }
  const reply = (entry) => {
    if (entry.throws) throw thrown(entry.throws)
    return entry.response
  }
  const events = (entry) =>
    entry.events.map((event) => (event.type === 'error' ? { type: 'error', data: thrown(event.data) } : event))
  return {
    name: ADAPTER,
    chat: sync
      ? (messages, options) => reply(take(messages, options))
      : async (messages, options) => reply(take(messages, options)),
    stream: sync
      ? (messages, options) => events(take(messages, options))
      : async function* (messages, options) {
          const entry = take(messages, options)
          for (const event of events(entry)) {
            await null
            yield event
          }
        },
  }
}

function config(kase, adapter) {
  const { tools, ...agent } = kase.agent
  const out = { ...agent, adapter }
  if (tools) {
    out.tools = tools.map((name) => ({
      name,
      description: 'finds things',
      inputSchema: { type: 'object' },
      execute: () => kase.toolAnswers[name],
    }))
  }
  if (kase.call === 'stream') out.textDeltas = true
  return out
}

async function runCase(kase, sync) {
  const calls = []
  const agent = new Agent(config(kase, scripted(kase, calls, { sync })))
  const deltas = []
  let result
  if (kase.call === 'stream') {
    for await (const event of agent.stream(kase.input)) {
      if (event.type === 'text_delta') deltas.push(event.data)
      if (event.type === 'done') result = event.data
      if (event.type === 'error') result = event.data.result
    }
  } else {
    result = await agent.run(kase.input)
  }
  return { result, calls, deltas }
}

for (const kase of table.cases) {
  for (const sync of [false, true]) {
    test(`adapter table: ${kase.name} (${sync ? 'sync' : 'async'})`, async () => {
      const observed = await runCase(kase, sync)
      const expect = kase.expect
      for (const [key, value] of Object.entries(expect.result)) {
        assert.deepEqual(JSON.parse(JSON.stringify(observed.result[key] ?? null)), value, `${key}`)
      }
      if (expect.toolNames) assert.deepEqual(observed.result.toolCalls.map((c) => c.toolName), expect.toolNames)
      if (expect.calls) assert.deepEqual(observed.calls, expect.calls)
      if (expect.deltas) assert.deepEqual(observed.deltas, expect.deltas)
    })
  }
}

const response = (text, usage = { input_tokens: 3, output_tokens: 2 }) => ({
  id: 'r-1',
  content: [{ type: 'text', text }],
  model: 'm',
  stop_reason: 'end_turn',
  usage,
})

test('an adapter needs no provider, key or base URL, and OMA\'s names reach it', async () => {
  let options
  const adapter = {
    name: 'local',
    async chat(_messages, o) {
      options = o
      return response('fine')
    },
    async *stream() {},
  }
  const result = await runAgent({ name: 'a', model: 'local-model', adapter, systemPrompt: 'Be brief.', maxTokens: 9 }, 'hi')
  assert.equal(result.success, true)
  assert.equal(result.output, 'fine')
  assert.equal(options.model, 'local-model')
  assert.equal(options.systemPrompt, 'Be brief.')
  assert.equal(options.maxTokens, 9)
})

test('OpenMultiAgent.runAgent takes an agent with an adapter, as OMA\'s examples do', async () => {
  const adapter = { name: 'deterministic', async chat() { return response('completed') }, async *stream() {} }
  const oma = new OpenMultiAgent({})
  const result = await oma.runAgent({ name: 'demo', model: 'deterministic', adapter }, 'Run it.')
  assert.equal(result.success, true)
  assert.equal(result.output, 'completed')
})

test('a streamed run without textDeltas calls chat, as OMA\'s runner does', async () => {
  let streamed = 0
  const adapter = {
    name: 'local',
    async chat() { return response('whole') },
    async *stream() { streamed += 1 },
  }
  const events = []
  for await (const event of new Agent({ name: 'a', model: 'm', adapter }).stream('hi')) events.push(event)
  assert.equal(streamed, 0)
  assert.deepEqual(events.map((e) => e.type), ['text', 'done'])
  assert.equal(events[0].data, 'whole')
})

test('the caller\'s abort signal reaches the adapter, and a cancelled run does not wait for it', async () => {
  const controller = new AbortController()
  let seen
  const adapter = {
    name: 'slow',
    chat(_messages, options) {
      seen = options.abortSignal
      controller.abort()
      return new Promise(() => {})
    },
    async *stream() {},
  }
  const result = await new Agent({ name: 'a', model: 'm', adapter }).run('hi', { abortSignal: controller.signal })
  assert.equal(result.success, false)
  assert.equal(seen.aborted, true)
})

test('a call past callTimeoutMs fails with OMA\'s LLMCallTimeoutError', async () => {
  const adapter = { name: 'stuck', chat: () => new Promise(() => {}), async *stream() {} }
  const result = await new Agent({ name: 'a', model: 'm', adapter, callTimeoutMs: 50 }).run('hi')
  assert.equal(result.success, false)
  assert.equal(result.errorInfo.name, 'LLMCallTimeoutError')
})

test('an answer that is not JSON fails the run with a message, never a throw', async () => {
  const cyclic = response('x')
  cyclic.self = cyclic
  const adapter = { name: 'odd', async chat() { return cyclic }, async *stream() {} }
  const result = await new Agent({ name: 'a', model: 'm', adapter }).run('hi')
  assert.equal(result.success, false)
  assert.match(result.output, /the adapter's LLMResponse is not JSON/)
  const none = { name: 'none', async chat() { return undefined }, async *stream() {} }
  const empty = await new Agent({ name: 'a', model: 'm', adapter: none }).run('hi')
  assert.equal(empty.success, false)
  assert.match(empty.output, /the adapter's LLMResponse is not valid/)
})

test('a stream that is not iterable, or that throws, fails the run with what it threw', async () => {
  const notIterable = { name: 'n', async chat() { return response('x') }, stream: () => 42 }
  const a = await new Agent({ name: 'a', model: 'm', adapter: notIterable, textDeltas: true }).run('hi')
  assert.equal(a.success, true, 'run (not stream) calls chat')
  const events = []
  for await (const e of new Agent({ name: 'a', model: 'm', adapter: notIterable, textDeltas: true }).stream('hi')) events.push(e)
  assert.equal(events.at(-1).type, 'error')
  assert.match(events.at(-1).data.message, /adapter.stream must return an async iterable/)
  const throwing = {
    name: 't',
    async chat() { return response('x') },
    async *stream() {
      yield { type: 'text', data: 'a' }
      throw Object.assign(new Error('gone'), { status: 503 })
    },
  }
  const out = []
  for await (const e of new Agent({ name: 'a', model: 'm', adapter: throwing, textDeltas: true }).stream('hi')) out.push(e)
  assert.deepEqual(out.filter((e) => e.type === 'text_delta').map((e) => e.data), ['a'])
  assert.equal(out.at(-1).type, 'error')
  assert.equal(out.at(-1).errorInfo.httpStatus, 503)
})

test('the adapter declaration is checked when the agent is made', () => {
  const chat = async () => response('x')
  for (const [adapter, message] of [
    [42, /adapter must be an object/],
    [{ chat }, /adapter.name must be a non-empty string/],
    [{ name: 'a' }, /adapter.chat must be a function/],
    [{ name: 'a', chat, stream: 1 }, /adapter.stream must be a function/],
    [{ name: 'a', chat, capabilities: { echoesReasoning: 'always' } }, /echoesReasoning must be one of/],
  ]) {
    assert.throws(() => new Agent({ name: 'a', model: 'm', adapter }), message)
  }
  const agent = new Agent({ name: 'a', model: 'm', adapter: { name: 'a', chat, capabilities: { echoesReasoning: 'own-issued' } } })
  assert.equal(agent.name, 'a')
})
