// The shared table fixtures/observability/runs.json (the Python package runs it too): runs with
// `observability` on OpenMultiAgent against a scripted loopback provider, their records batched
// into a trace store (in memory, then a file), and the stored run read back by the result's
// identity.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { OpenMultiAgent } from 'oma-component'
import { BatchingTraceSink, InMemoryTraceStore, TraceStoreExporter } from 'oma-component/observability'
import { FileTraceStore } from 'oma-component/observability/file'
import { startServer } from './helpers/server.js'

const table = JSON.parse(readFileSync(new URL('../../../fixtures/observability/runs.json', import.meta.url), 'utf8'))

const stores = {
  memory: async () => ({ store: new InMemoryTraceStore(), close: async () => {} }),
  file: async () => {
    const dir = mkdtempSync(join(tmpdir(), 'oma-runs-'))
    const store = await FileTraceStore.open(join(dir, 'traces.ndjson'))
    return { store, close: async () => { await store.close(); rmSync(dir, { recursive: true, force: true }) } }
  },
}

/**
 * The case's agent. With `cancel: "tool"`, calling a tool aborts `controller` (the caller
 * cancels the run) and the tool's answer never comes; with `cancel: "before"`, the run is given
 * a signal already aborted.
 */
function agentOf(kase, baseURL, controller) {
  const { tools, ...agent } = kase.agent
  const out = { ...agent, model: 'claude-test', provider: 'anthropic', apiKey: 'sk-ant-test', baseURL }
  if (tools) {
    out.tools = tools.map((tool) => ({
      name: tool.name,
      description: tool.description,
      inputSchema: tool.inputSchema,
      execute: kase.cancel === 'tool'
        ? () => {
            controller.abort()
            return new Promise(() => {})
          }
        : () => tool.returns,
    }))
  }
  return out
}

for (const kase of table.cases) {
  for (const [kind, open] of Object.entries(stores)) {
    test(`runs table (${kind} store): ${kase.name}`, async () => {
      const server = await startServer()
      const { store, close } = await open()
      const sink = new BatchingTraceSink(new TraceStoreExporter(store), { diagnostics: 'silent' })
      try {
        server.queue(...kase.replies.map((reply) => ({ status: reply.status, json: reply.body })))
        const oma = new OpenMultiAgent({ observability: { sinks: [sink], ...(kase.capture ? { capture: kase.capture } : {}) } })
        const { prompt, ...options } = kase.run
        const controller = new AbortController()
        if (kase.cancel !== undefined) options.abortSignal = controller.signal
        if (kase.cancel === 'before') controller.abort()
        const result = await oma.runAgent(agentOf(kase, server.url, controller), prompt, options)
        assert.equal(result.success, kase.expect.result.success)
        assert.equal(result.status.code, kase.expect.result.status)
        if (kase.cancel === 'before') assert.equal(server.requests.length, 0, 'nothing is sent')
        assert.equal((await sink.forceFlush({ timeoutMs: 5_000 })).status, 'ok')
        const stored = await store.getRun(result.identity.runId, { includeRecords: true })
        assert.ok(stored, 'the run is stored under the result\'s run id')
        assert.equal(result.identity.runId, kase.run.runId)
        assert.equal(result.identity.traceId, stored.attempts[0].traceId)
        assert.equal(result.identity.rootSpanId, stored.attempts[0].rootSpanId)
        for (const [key, value] of Object.entries(kase.expect.run)) assert.deepEqual(stored[key], value, key)
        assert.deepEqual(stored.spans.map((s) => `${s.kind} ${s.name} ${s.status}`).sort(), kase.expect.spans)
        const counts = { span_start: 0, span_event: 0, span_end: 0 }
        for (const record of stored.records) counts[record.recordType]++
        assert.deepEqual(counts, kase.expect.records)
        for (const [span, attributes] of Object.entries(kase.expect.attributes)) {
          const found = stored.spans.filter((s) => `${s.kind} ${s.name}` === span)
          assert.equal(found.length, 1, span)
          for (const [key, value] of Object.entries(attributes)) assert.deepEqual(found[0].attributes[key], value, `${span}: ${key}`)
        }
      } finally {
        await sink.shutdown({ timeoutMs: 1_000 })
        await close()
        await server.close()
      }
    })
  }
}
