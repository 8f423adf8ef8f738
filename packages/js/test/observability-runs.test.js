// `observability: { sinks }` on OpenMultiAgent, as OMA's users write it: each run's trace
// records (made by the component) handed to the sinks, the run's identity read from them, the
// stores reading the run back, and OMA's rule that a sink which throws, rejects, hangs or is slow
// never fails or holds a run. The runs use an LLM adapter of their own, so nothing leaves the
// process.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { z } from 'zod'
import { OpenMultiAgent, defineTool } from 'oma-component'
import {
  BatchingTraceSink,
  InMemoryTraceStore,
  LegacyCallbackTraceSink,
  TraceStoreExporter,
  buildExecutionReceipt,
  materializeRun,
} from 'oma-component/observability'

const response = (content, stop = 'end_turn') => ({
  id: 'r-1',
  content,
  model: 'deterministic-local-adapter',
  stop_reason: stop,
  usage: { input_tokens: 3, output_tokens: 2 },
})

/** An adapter answering from a script of responses, in order; the requests it got are kept. */
function scripted(...answers) {
  const requests = []
  return {
    requests,
    adapter: {
      name: 'deterministic-local-adapter',
      async chat(messages) {
        requests.push(JSON.parse(JSON.stringify(messages)))
        return answers.shift() ?? response([{ type: 'text', text: 'done' }])
      },
      async *stream() {},
    },
  }
}

const agent = (adapter, extra = {}) => ({ name: 'observed', model: 'deterministic-local-adapter', adapter, ...extra })

/** A sink keeping every record it is handed (and the legacy event each carries, by symbol). */
function collecting() {
  const records = []
  return {
    records,
    emit(record) { records.push(record) },
    async forceFlush() { return { status: 'ok', accepted: records.length, exported: records.length, dropped: 0, failed: 0 } },
    async shutdown() { return this.forceFlush() },
  }
}

test('a run with a store behind a batching sink: the stored run is the result\'s, identity included', async () => {
  const store = new InMemoryTraceStore()
  const sink = new BatchingTraceSink(new TraceStoreExporter(store), { diagnostics: 'silent' })
  const { adapter } = scripted()
  try {
    const oma = new OpenMultiAgent({ observability: { sinks: [sink] } })
    const result = await oma.runAgent(agent(adapter), 'Run the demo.', { runId: 'example-in-memory-store', metadata: { experiment: 'b' } })
    assert.equal(result.success, true)
    assert.equal(result.identity.runId, 'example-in-memory-store')
    assert.deepEqual(result.metadata, { experiment: 'b' })
    const delivery = await sink.forceFlush({ timeoutMs: 1_000 })
    assert.equal(delivery.status, 'ok')
    const stored = await store.getRun(result.identity.runId, { includeRecords: true })
    assert.equal(stored.runId, 'example-in-memory-store')
    assert.equal(stored.status, 'ok')
    // Spans are ordered by start time, then span id: the run's and the agent's spans often
    // start in the same millisecond, so their order is the (random) span ids'.
    assert.deepEqual(stored.spans.map((s) => [s.kind, s.name, s.status]).sort(), [
      ['agent', 'invoke_agent', 'ok'], ['llm', 'chat', 'ok'], ['run', 'oma.run', 'ok'],
    ])
    assert.deepEqual(stored.metadata, { experiment: 'b' })
    assert.deepEqual(stored.agents, ['observed'])
    assert.deepEqual(stored.tokens, { input_tokens: 3, output_tokens: 2 })
    // OMA's identity: the records' trace and root span.
    const root = stored.spans.find((s) => s.kind === 'run')
    assert.deepEqual(result.identity, { runId: 'example-in-memory-store', attempt: 1, traceId: root.traceId, rootSpanId: root.spanId })
    assert.equal(stored.attempts[0].rootSpanId, result.identity.rootSpanId)
    assert.deepEqual(materializeRun(stored.records), (({ records, ...rest }) => rest)(stored))
  } finally {
    await sink.shutdown({ timeoutMs: 1_000 })
  }
})

test('records come in sequence with tool spans, and a run with sinks asks the model what a run without them asks', async () => {
  const lookup = defineTool({
    name: 'lookup',
    description: 'looks a word up',
    inputSchema: z.object({ word: z.string() }),
    execute: async ({ word }) => ({ data: `${word}: a small bird` }),
  })
  const answers = () => [
    response([{ type: 'tool_use', id: 't1', name: 'lookup', input: { word: 'wren', apiKey: 'sk-secret-0123456789' } }], 'tool_use'),
    response([{ type: 'text', text: 'A wren is a small bird.' }]),
  ]
  const sink = collecting()
  const withSinks = scripted(...answers())
  const oma = new OpenMultiAgent({ observability: { sinks: [sink], capture: { toolInput: 'redacted', toolOutput: 'redacted' } } })
  const result = await oma.runAgent(agent(withSinks.adapter, { customTools: [lookup] }), 'What is a wren?')
  assert.equal(result.success, true)
  const plain = scripted(...answers())
  await new OpenMultiAgent({}).runAgent(agent(plain.adapter, { customTools: [lookup] }), 'What is a wren?')
  assert.deepEqual(withSinks.requests, plain.requests)

  const { records } = sink
  assert.deepEqual(records.map((r) => r.sequence), records.map((_, i) => i + 1))
  assert.ok(records.every((r) => r.runId === result.identity.runId && r.traceId === result.identity.traceId))
  const ends = records.filter((r) => r.recordType === 'span_end')
  assert.deepEqual(ends.map((r) => r.kind), ['llm', 'tool', 'llm', 'agent', 'run'])
  const tool = ends.find((r) => r.kind === 'tool')
  assert.equal(tool.attributes['oma.tool.name'], 'lookup')
  // The capture policy went to the component: the input redacted, the output kept.
  assert.equal(JSON.parse(tool.attributes['oma.tool.input']).apiKey, '[redacted]')
  assert.equal(tool.attributes['oma.tool.output'], 'wren: a small bird')
})

test('without a capture policy no tool content reaches a sink', async () => {
  const sink = collecting()
  const lookup = defineTool({ name: 'lookup', description: 'l', inputSchema: z.object({}), execute: async () => ({ data: 'private' }) })
  const { adapter } = scripted(response([{ type: 'tool_use', id: 't1', name: 'lookup', input: {} }], 'tool_use'))
  await new OpenMultiAgent({ observability: { sinks: [sink] } }).runAgent(agent(adapter, { customTools: [lookup] }), 'go')
  const tool = sink.records.find((r) => r.recordType === 'span_end' && r.kind === 'tool')
  assert.equal(tool.attributes['oma.tool.input'], undefined)
  assert.equal(tool.attributes['oma.tool.output'], undefined)
})

test('a sink that throws, rejects, hangs or is slow never fails or holds the run; the others get every record', async () => {
  const diagnostics = []
  const good = collecting()
  const throwing = { emit() { throw new Error('boom') }, forceFlush: async () => ({}), shutdown: async () => ({}) }
  const rejecting = { emit: async () => { throw new Error('later boom') }, forceFlush: async () => ({}), shutdown: async () => ({}) }
  const hanging = { emit: () => new Promise(() => {}), forceFlush: () => new Promise(() => {}), shutdown: () => new Promise(() => {}) }
  // A slow exporter behind OMA's batching sink: the run never waits for an export.
  let exports = 0
  const slow = new BatchingTraceSink({ export: () => { exports++; return new Promise(() => {}) } }, {
    diagnostics: 'silent', maxBatchRecords: 1, exportTimeoutMs: 60_000, maxRetries: 0,
  })
  const { adapter } = scripted()
  const oma = new OpenMultiAgent({
    observability: { sinks: [throwing, rejecting, hanging, slow, good], onDiagnostic: (d) => diagnostics.push(d) },
  })
  const result = await oma.runAgent(agent(adapter), 'go')
  assert.equal(result.success, true)
  assert.equal(result.output, 'done')
  assert.equal(good.records.length, 6)
  assert.ok(exports >= 1, 'the slow export started')
  await new Promise((resolve) => setImmediate(resolve))
  assert.ok(diagnostics.some((d) => d.code === 'sink_emit_failed' && d.sinkName === 'OpenMultiAgent'), JSON.stringify(diagnostics))
  const flushed = await slow.forceFlush({ timeoutMs: 20 })
  assert.equal(flushed.status, 'timeout')
})

test('a full batching queue drops by OMA\'s priorities and the run goes on', async () => {
  const sink = new BatchingTraceSink({ export: () => new Promise(() => {}) }, {
    diagnostics: 'silent', maxQueueRecords: 2, maxBatchRecords: 512, scheduledDelayMs: 60_000,
  })
  const { adapter } = scripted()
  const result = await new OpenMultiAgent({ observability: { sinks: [sink] } }).runAgent(agent(adapter), 'go')
  assert.equal(result.success, true)
  const stats = sink.getStats()
  assert.equal(stats.queuedRecords, 2)
  assert.equal(stats.accepted - stats.dropped, 2)
  assert.ok(stats.dropped >= 4)
})

test('a batching sink counts each record at its JSON size, whatever the numbers and text it holds and whatever a sink before it changed', async () => {
  const encoder = new TextEncoder()
  const size = (record) => encoder.encode(JSON.stringify(record)).length
  const held = () => {
    const sink = new BatchingTraceSink({ export: () => new Promise(() => {}) }, {
      diagnostics: 'silent', maxBatchRecords: 512, scheduledDelayMs: 60_000,
    })
    const seen = collecting()
    return { sink, seen }
  }
  // Numbers JavaScript writes differently from the component (fractions, exponents, 16 digits
  // and more, -0), text past ASCII, and plain ones.
  const metadata = [
    { plain: 'x', count: 7 },
    { ratio: 0.1, whole: 2.0, huge: 1e21, tiny: 1.5e-7, negative_zero: -0, big: 12345678901234567890 },
    { text: 'caf\u00e9 \u4f60\u597d \ud83d\ude00', quote: 'a "b" \\ c\n\t\u0001' },
  ]
  for (const meta of metadata) {
    const { sink, seen } = held()
    const { adapter } = scripted()
    const result = await new OpenMultiAgent({ observability: { sinks: [sink, seen] } }).runAgent(agent(adapter), 'go', { metadata: meta })
    assert.equal(result.success, true)
    assert.equal(sink.getStats().queuedBytes, seen.records.reduce((sum, r) => sum + size(r), 0), JSON.stringify(meta))
  }
  // A sink before the batching one that changes each record: the batching sink counts the
  // record as it gets it.
  const { sink, seen } = held()
  const changing = { emit(record) { record.note = 'changed \u00e9'.repeat(3); record.sequence += 0.5 } }
  const { adapter } = scripted()
  const result = await new OpenMultiAgent({ observability: { sinks: [changing, sink, seen] } }).runAgent(agent(adapter), 'go')
  assert.equal(result.success, true)
  assert.ok(seen.records.every((r) => r.note !== undefined))
  assert.equal(sink.getStats().queuedBytes, seen.records.reduce((sum, r) => sum + size(r), 0))
})

test('a LegacyCallbackTraceSink among the sinks gets OMA\'s legacy events, as onTrace does', async () => {
  const bridged = []
  const traced = []
  const { adapter } = scripted()
  const oma = new OpenMultiAgent({
    onTrace: (event) => { traced.push(event) },
    observability: { sinks: [new LegacyCallbackTraceSink((event) => { bridged.push(event) })] },
  })
  const result = await oma.runAgent(agent(adapter), 'go', { runId: 'legacy-run' })
  assert.equal(result.success, true)
  assert.deepEqual(bridged.map((e) => e.type), ['llm_call', 'agent'])
  assert.deepEqual(bridged, traced)
  assert.ok(bridged.every((e) => e.runId === 'legacy-run' && e.agent === 'observed'))
})

test('no sinks, no records: the run is as before and its identity is the package\'s own', async () => {
  const { adapter } = scripted()
  const result = await new OpenMultiAgent({ observability: { sinks: [] } }).runAgent(agent(adapter), 'go')
  assert.equal(result.success, true)
  assert.match(result.identity.traceId, /^[0-9a-f]{32}$/)
  assert.match(result.identity.rootSpanId, /^[0-9a-f]{16}$/)
})

test('what the observability option cannot take is refused by name, before any run', async () => {
  const sink = collecting()
  assert.throws(() => new OpenMultiAgent({ observability: { sinks: [sink], exporters: [] } }), /observability has an unknown key "exporters"/)
  assert.throws(() => new OpenMultiAgent({ observability: {} }), /observability.sinks must be an array/)
  assert.throws(() => new OpenMultiAgent({ observability: { sinks: [{}] } }), /observability.sinks\[0\] is not a trace sink/)
  assert.throws(() => new OpenMultiAgent({ observability: { sinks: [sink], resource: { region: 'x' } } }), /observability.resource has an unknown key "region"/)
  assert.throws(() => new OpenMultiAgent({ observability: { sinks: [sink], onDiagnostic: 1 } }), /onDiagnostic must be a function/)
  const { adapter, requests } = scripted()
  const oma = new OpenMultiAgent({ observability: { sinks: [sink], capture: { prompts: 'redacted' } } })
  await assert.rejects(oma.runAgent(agent(adapter), 'go'), /observability options are not valid: .*prompts/)
  await assert.rejects(
    new OpenMultiAgent({ observability: { sinks: [sink] } }).runAgent(agent(adapter), 'go', { metadata: { 'oma.x': 1 } }),
    /metadata key "oma.x" uses the reserved "oma." prefix./,
  )
  assert.equal(requests.length, 0)
  assert.equal(sink.records.length, 0)
})

test('buildExecutionReceipt reads a run\'s result and legacy events (the component\'s rule)', async () => {
  const events = []
  const { adapter } = scripted()
  const result = await new OpenMultiAgent({ onTrace: (e) => { events.push(e) } }).runAgent(agent(adapter), 'go')
  const receipt = buildExecutionReceipt(result, events)
  assert.equal(receipt.mode, 'single')
  assert.deepEqual(receipt.rolesExecuted, ['observed'])
  assert.deepEqual(receipt.totalTokens, { input: 3, output: 2 })
  assert.equal(receipt.partial, false)
  assert.equal(buildExecutionReceipt(result).partial, true)
})

test('a run cancelled by a sink as its first record arrives: every record handed out is delivered, every span started ends cancelled, no model call is made', async () => {
  // The session hands out the records that need no answer together with the step after them
  // (json-driver's `steps`); an abort seen among them still leaves the sinks a whole trace.
  const controller = new AbortController()
  const { adapter, requests } = scripted()
  const sink = collecting()
  const aborting = { emit() { controller.abort() } }
  const oma = new OpenMultiAgent({ observability: { sinks: [aborting, sink] } })
  const result = await oma.runAgent(agent(adapter), 'Run the demo.', { abortSignal: controller.signal })
  assert.deepEqual(result.status, { code: 'cancelled', message: 'Run cancelled by caller.' })
  assert.equal(requests.length, 0)
  const started = sink.records.filter((r) => r.recordType === 'span_start').map((r) => r.spanId)
  const ended = sink.records.filter((r) => r.recordType === 'span_end')
  assert.ok(started.length >= 2, 'the run\'s and the agent\'s spans started')
  assert.deepEqual(ended.map((r) => r.spanId).sort(), [...started].sort())
  for (const end of ended) assert.equal(end.status.code, 'cancelled', end.name)
  assert.deepEqual(sink.records.map((r) => r.sequence), sink.records.map((_, i) => i + 1), 'in sequence, none missing')
})

test('a run cancelled while its model call is in flight: the call\'s, the agent\'s and the run\'s spans end cancelled, and onTrace gets the agent event', async () => {
  const controller = new AbortController()
  const adapter = {
    name: 'deterministic-local-adapter',
    chat() {
      controller.abort()
      return new Promise(() => {})
    },
    async *stream() {},
  }
  const sink = collecting()
  const traces = []
  const oma = new OpenMultiAgent({ observability: { sinks: [sink] }, onTrace: (event) => traces.push(event) })
  const result = await oma.runAgent(agent(adapter), 'Run the demo.', { abortSignal: controller.signal })
  assert.equal(result.success, false)
  assert.deepEqual(result.status, { code: 'cancelled', message: 'Run cancelled by caller.' })
  const ends = sink.records.filter((r) => r.recordType === 'span_end')
  assert.deepEqual(ends.map((r) => [r.name, r.status.code, r.error?.kind]), [
    ['chat', 'cancelled', 'cancellation'],
    ['invoke_agent', 'cancelled', 'cancellation'],
    ['oma.run', 'cancelled', 'cancellation'],
  ])
  assert.equal(sink.records.filter((r) => r.recordType === 'span_start').length, 3)
  assert.deepEqual(traces.map((e) => e.type), ['agent'], 'the legacy view is closed too')
  assert.equal(traces[0].runId, result.identity.runId)
})
