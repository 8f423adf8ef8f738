// What a json-driver session hands out, stepped by hand through the component: a `stream`
// session hands out the run's `event` steps (its caller yields them), and a `run`, `prompt` or
// `run-agent` session passes over them (its result holds what they say), saving the host a
// boundary call for each, with the same result either way.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { driver } from '../src/component.js'
import { anthropicMessage, anthropicMessageSse } from './helpers/server.js'

const CONFIG = { name: 'stepper', model: 'claude-test', provider: 'anthropic', baseURL: 'http://127.0.0.1:9', apiKey: 'k' }

/** The model's two turns: a text with a tool call, then the final text. */
const TURNS = [
  anthropicMessage([{ type: 'text', text: 'calling' }, { type: 'tool_use', id: 't1', name: 'echo', input: { v: 1 } }], { stop: 'tool_use' }).json,
  anthropicMessage('done').json,
]

/**
 * Steps `session` to its end, answering each request with the next turn (as SSE for a streamed
 * request) and each tool call with `echoed`; gives the steps' tags in order and the result.
 */
function stepThrough(session) {
  const tags = []
  let turn = 0
  for (;;) {
    const polled = session.next(BigInt(Date.now()))
    if (polled.tag === 'finished') return { tags, result: JSON.parse(polled.val) }
    assert.equal(polled.tag, 'step', `waiting on ${JSON.stringify(polled.val?.due)}`)
    const step = polled.val
    tags.push(step.tag === 'event' ? `event:${step.val.tag}` : step.tag)
    if (step.tag === 'send') {
      const message = TURNS[turn++]
      const streamed = step.val.stream
      const body = streamed ? anthropicMessageSse(message).join('') : JSON.stringify(message)
      const type = streamed ? 'text/event-stream' : 'application/json'
      session.answer({ tag: 'response', val: { status: 200, headers: [['content-type', type]], body } })
    } else if (step.tag === 'call-tool') {
      session.answer({ tag: 'tool-json', val: { id: step.val.id, content: '"echoed"', isError: undefined, gate: undefined } })
    }
  }
}

const TOOLS = {
  tools: [{ name: 'echo', description: 'echo', inputSchema: { type: 'object', properties: { v: { type: 'number' } } } }],
}

test('only a stream session hands out its run\'s events; the others give the same result without them', () => {
  const options = { seed: 0n, trace: undefined, records: undefined }
  const make = {
    stream: () => driver.Agent.create(JSON.stringify({ ...CONFIG, ...TOOLS })).stream('"go"', options),
    run: () => driver.Agent.create(JSON.stringify({ ...CONFIG, ...TOOLS })).run('"go"', options),
    prompt: () => driver.Agent.create(JSON.stringify({ ...CONFIG, ...TOOLS })).prompt('"go"', options),
    runAgent: () => driver.runAgent(JSON.stringify({ ...CONFIG, ...TOOLS }), '"go"', [], { progress: false, evaluation: undefined }, options),
  }
  const seen = {}
  for (const [name, session] of Object.entries(make)) seen[name] = stepThrough(session())
  const streamed = seen.stream.tags.filter((tag) => tag.startsWith('event:'))
  for (const kind of ['event:text', 'event:tool-use', 'event:tool-result']) {
    assert.ok(streamed.includes(kind), `stream: ${seen.stream.tags}`)
  }
  for (const name of ['run', 'prompt', 'runAgent']) {
    const { tags, result } = seen[name]
    assert.deepEqual(tags, ['send', 'call-tool', 'send'], name)
    assert.equal(result.success, true, `${name}: ${JSON.stringify(result)}`)
    assert.equal(result.output, 'done')
    assert.deepEqual(result.messages, seen.stream.result.messages, name)
    assert.deepEqual(result.toolCalls.map((c) => c.toolName), ['echo'])
  }
  // The stream's own steps but its events are the others'.
  assert.deepEqual(seen.stream.tags.filter((tag) => !tag.startsWith('event:')), ['send', 'call-tool', 'send'])
})
