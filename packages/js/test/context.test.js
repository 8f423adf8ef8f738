// OMA's loopDetection, contextStrategy, compressToolResults, preserveReasoningAsText and
// compressReasoningText through the package, against the loopback provider.
import { test, before, after, beforeEach } from 'node:test'
import assert from 'node:assert/strict'
import { z } from 'zod'
import { Agent, defineTool } from '../src/index.js'
import { startServer, anthropicMessage, anthropicToolUse } from './helpers/server.js'

let server
before(async () => { server = await startServer() })
after(async () => { await server.close() })
beforeEach(() => server.reset())

const lookup = defineTool({
  name: 'lookup',
  description: 'Looks up',
  inputSchema: z.object({ q: z.string() }),
  execute: async () => ({ data: 'x'.repeat(40) }),
})

function agent(extra = {}) {
  return new Agent({
    name: 'looper', model: 'claude-test', provider: 'anthropic', baseURL: server.url, apiKey: 'sk-test',
    customTools: [lookup], ...extra,
  })
}

async function collect(iterable) {
  const out = []
  for await (const e of iterable) out.push(e)
  return out
}

const same = () => anthropicToolUse([['c', 'lookup', { q: 'same' }]])

test('loopDetection: warned once, then the run ends with loopDetected and loop_detected events', async () => {
  server.queue(same(), same(), same())
  const events = await collect(agent({ loopDetection: { maxRepetitions: 2 } }).stream('go'))
  const loops = events.filter((e) => e.type === 'loop_detected')
  assert.equal(loops.length, 2)
  assert.equal(loops[0].data.kind, 'tool_repetition')
  assert.equal(loops[0].data.repetitions, 2)
  assert.match(loops[0].data.detail, /Tool call "lookup" with identical arguments has repeated 2 times/)
  const done = events.at(-1)
  assert.equal(done.type, 'done')
  assert.equal(done.data.success, true)
  assert.equal(done.data.loopDetected, true)
  assert.equal(server.requests.length, 3)
  const warned = server.requests[2].body.messages[4].content
  assert.equal(warned[0].type, 'tool_result')
  assert.match(warned[1].text, /^WARNING: You appear to be repeating the same tool calls/)
})

test("loopDetection: 'terminate' ends at the first loop; bad settings are typed errors before any request", async () => {
  server.queue(same(), same())
  const result = await agent({ loopDetection: { maxRepetitions: 2, onLoopDetected: 'terminate' } }).run('go')
  assert.equal(result.success, true)
  assert.equal(result.loopDetected, true)
  assert.equal(result.toolCalls.length, 1)
  assert.equal(server.requests.length, 2)
  server.reset()
  assert.throws(() => agent({ loopDetection: { maxRepetitions: 0 } }), /`loopDetection.maxRepetitions` must be a positive integer/)
  assert.throws(() => agent({ loopDetection: { onLoopDetected: 'stop' } }), /`loopDetection.onLoopDetected` must be "warn" or "terminate"/)
  assert.throws(() => agent({ loopDetection: { onLoopDetected: 'callback' } }), /`loopDetection.onLoopDetected` must be "warn", "terminate" or a function/)
  assert.throws(() => agent({ contextStrategy: { type: 'sliding-window' } }), /missing field `contextStrategy.maxTurns`/)
  assert.throws(() => agent({ contextStrategy: { type: 'compact', maxTokens: '9' } }), /`contextStrategy.maxTokens` must be/)
  assert.throws(() => agent({ contextStrategy: { type: 'summarize' } }), /missing field `contextStrategy.maxTokens`/)
  assert.throws(() => agent({ contextStrategy: { type: 'summarize', maxTokens: 9, summaryModel: 3 } }), /`contextStrategy.summaryModel` must be/)
  assert.throws(() => agent({ compressToolResults: 'yes' }), /`compressToolResults` must be a boolean or \{minChars: number\}/)
  assert.throws(() => agent({ preserveReasoningAsText: 'yes' }), /`preserveReasoningAsText` must be a boolean/)
  assert.equal(server.requests.length, 0)
})

test('loopDetection.onLoopDetected as a function: announced, then asked; its word decides; a throw fails the run', async () => {
  server.queue(same(), same(), same(), same())
  const asked = []
  const words = ['continue', 'inject', 'warn']
  const events = await collect(agent({
    loopDetection: { maxRepetitions: 2, onLoopDetected: async (info) => { asked.push(info); return words.shift() } },
  }).stream('go'))
  assert.deepEqual(asked.map((i) => [i.kind, i.repetitions]), [['tool_repetition', 2], ['tool_repetition', 3], ['tool_repetition', 4]])
  assert.equal(events.filter((e) => e.type === 'loop_detected').length, 3)
  const done = events.at(-1)
  assert.equal(done.data.success, true)
  assert.equal(done.data.loopDetected, true)
  assert.equal(server.requests.length, 4)
  const warned = server.requests[3].body.messages.at(-1).content
  assert.match(warned[1].text, /^WARNING: You appear to be repeating the same tool calls/)

  server.reset()
  server.queue(same(), same())
  const failed = await agent({ loopDetection: { maxRepetitions: 2, onLoopDetected: () => { throw new Error('decider broke') } } }).run('go')
  assert.equal(failed.success, false)
  assert.equal(failed.output, 'decider broke')
  assert.equal(server.requests.length, 2)
  server.reset()
  server.queue(same(), same())
  const ended = await agent({ loopDetection: { maxRepetitions: 2, onLoopDetected: () => 'terminate' } }).run('go')
  assert.equal(ended.success, true)
  assert.equal(ended.loopDetected, true)
  assert.equal(ended.toolCalls.length, 1)
})

test('contextStrategy sliding-window and compressToolResults shrink what is sent, not the result', async () => {
  server.queue(
    anthropicToolUse([['a', 'lookup', { q: '1' }]]),
    anthropicToolUse([['b', 'lookup', { q: '2' }]]),
    anthropicToolUse([['c', 'lookup', { q: '3' }]]),
    anthropicMessage('done'),
  )
  const result = await agent({
    contextStrategy: { type: 'sliding-window', maxTurns: 2 },
    compressToolResults: { minChars: 10 },
  }).run('go')
  assert.equal(result.success, true)
  assert.equal(result.messages.length, 7)
  const sent = server.requests.map((r) => r.body.messages)
  assert.equal(sent[1][2].content[0].content, 'x'.repeat(40))
  assert.equal(sent[2][2].content[0].content, '[Tool output compressed — 40 chars, already processed]')
  assert.equal(sent[3].length, 5)
  assert.equal(sent[3][0].content[0].text, 'go')
  assert.equal(sent[3][2].content[0].text, '[Earlier conversation history truncated — 1 turn(s) removed]\n\n')
})

test('contextStrategy summarize: a summary request (traced as phase summary) before the turn; media kept or placeholders', async () => {
  server.queue(anthropicMessage('- asked about a clip'), anthropicMessage('answered'))
  const image = { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } }
  const video = { type: 'video', source: { type: 'url', media_type: 'video/mp4', url: 'https://example.com/clip.mp4' } }
  const input = [
    { role: 'user', content: [image, { type: 'text', text: 'first' }] },
    { role: 'assistant', content: [{ type: 'text', text: 'an old answer '.repeat(8) }] },
    { role: 'user', content: [video, { type: 'text', text: 'and this clip?' }] },
    { role: 'assistant', content: [{ type: 'text', text: 'a recent answer' }] },
    { role: 'user', content: [{ type: 'text', text: 'latest' }] },
  ]
  const traces = []
  const result = await agent({ contextStrategy: { type: 'summarize', maxTokens: 10, summaryModel: 'claude-mini' } })
    .run(input, { onTrace: (e) => traces.push(e) })
  assert.equal(result.success, true)
  assert.equal(result.output, 'answered')
  assert.equal(server.requests.length, 2)
  const [summary, turn] = server.requests.map((r) => r.body)
  assert.equal(summary.model, 'claude-mini')
  assert.equal(summary.tools, undefined)
  assert.equal(summary.messages.length, 1)
  assert.match(summary.messages[0].content[0].text, /^Summarize the following conversation history for an LLM\./)
  const conversation = summary.messages[0].content[1].text
  assert.ok(conversation.startsWith('\n\nConversation:\n{"role":"assistant"'), conversation)
  assert.ok(conversation.includes('{"type":"text","text":"[video: video/mp4]"}'), conversation)
  assert.ok(!conversation.includes('example.com'))
  assert.equal(turn.model, 'claude-test')
  assert.equal(turn.messages.length, 3)
  assert.deepEqual(turn.messages[0].content[0], image, 'the first user turn keeps its image')
  assert.deepEqual(turn.messages[2].content.map((b) => b.text), ['[Conversation summary]\n- asked about a clip\n\n', 'latest'])
  assert.deepEqual(result.tokenUsage, { input_tokens: 24, output_tokens: 12 }, 'the summary call counts')
  assert.deepEqual(result.messages.length, 1)
  const calls = traces.filter((e) => e.type === 'llm_call').map((e) => [e.phase, e.turn, e.model])
  assert.deepEqual(calls, [['summary', 1, 'claude-mini'], ['turn', 1, 'claude-test']])
})

test('contextStrategy custom: compress(messages, estimatedTokens) before every request; its answer is checked', async () => {
  server.queue(anthropicToolUse([['a', 'lookup', { q: '1' }]]), anthropicMessage('done'))
  const seen = []
  const result = await agent({
    contextStrategy: {
      type: 'custom',
      compress: async (messages, estimatedTokens) => {
        seen.push([messages.length, estimatedTokens])
        return messages.slice(-1)
      },
    },
  }).run('go')
  assert.equal(result.success, true)
  assert.deepEqual(seen, [[1, 1], [3, 13]])
  assert.deepEqual(server.requests[0].body.messages, [{ role: 'user', content: [{ type: 'text', text: 'go' }] }])
  assert.equal(server.requests[1].body.messages.length, 1)
  assert.equal(server.requests[1].body.messages[0].content[0].type, 'tool_result')
  assert.equal(result.messages.length, 3, 'the result keeps every message')

  // OMA's rules for what it returns: nothing sent, the run fails with the reason.
  for (const [compress, message] of [
    [() => [], /^contextStrategy\.custom\.compress must return a non-empty LLMMessage\[\]$/],
    [() => undefined, /^contextStrategy\.custom\.compress must return a non-empty LLMMessage\[\]$/],
    [() => [{ role: 'user', content: 'not blocks' }], /^messages\[0\]\.content must be/],
    [() => { throw new Error('strategy broke') }, /^strategy broke$/],
  ]) {
    server.reset()
    const failed = await agent({ contextStrategy: { type: 'custom', compress } }).run('go')
    assert.equal(failed.success, false)
    assert.match(failed.output, message)
    assert.equal(server.requests.length, 0)
  }
  assert.throws(() => agent({ contextStrategy: { type: 'custom' } }), /contextStrategy\.compress must be a function/)
})

test('inline video counts in the token estimate (OMA 1.18.0), so a strategy sees a video conversation at its weight', async () => {
  server.queue(anthropicMessage('seen'))
  const seen = []
  const clip = { type: 'video', source: { type: 'base64', media_type: 'video/mp4', data: 'A'.repeat(4000) } }
  const result = await agent({
    contextStrategy: {
      type: 'custom',
      compress: (messages, estimatedTokens) => {
        seen.push(estimatedTokens)
        return [{ role: 'user', content: [{ type: 'text', text: 'a clip was shown' }] }]
      },
    },
  }).run([{ role: 'user', content: [clip, { type: 'text', text: 'hi' }] }])
  assert.equal(result.success, true, result.output)
  // (4000 characters of data + 9 of MIME type + 32 + 2 of text) / 4, rounded up; 1 without the video.
  assert.deepEqual(seen, [1011])
  assert.equal(server.requests[0].body.messages[0].content[0].text, 'a clip was shown')
})

test('preserveReasoningAsText sends foreign reasoning as <thinking> text, cut by compressReasoningText', async () => {
  const conversation = [
    { role: 'user', content: [{ type: 'text', text: 'q' }] },
    { role: 'assistant', content: [
      { type: 'reasoning', text: 'r'.repeat(100), provenance: 'openai' },
      { type: 'text', text: 'a' },
    ] },
    { role: 'user', content: [{ type: 'text', text: 'q2' }] },
  ]
  server.queue(anthropicMessage('ok'), anthropicMessage('ok'), anthropicMessage('ok'))
  await agent().run(conversation)
  await agent({ preserveReasoningAsText: true }).run(conversation)
  await agent({ preserveReasoningAsText: true, compressReasoningText: { minChars: 30 } }).run(conversation)
  const sent = server.requests.map((r) => r.body.messages[1].content)
  assert.deepEqual(sent[0], [{ type: 'text', text: 'a' }])
  assert.equal(sent[1][0].text, `<thinking>${'r'.repeat(100)}</thinking>`)
  assert.equal(sent[2][0].text, `<thinking>${'r'.repeat(10)}...[truncated]...${'r'.repeat(3)}</thinking>`)
})
