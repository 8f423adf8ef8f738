// Trace stores of `oma-component/observability` and `/observability/file`, imported as users do:
// the shared tables of fixtures/observability/ (materialize, the in-memory store, the file
// store's files; the Python package runs the same), then a batching sink filling each store
// through the store exporter, and the file store's durability.
import assert from 'node:assert/strict'
import fs, { copyFileSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { syncBuiltinESMExports } from 'node:module'
import { join } from 'node:path'
import { test } from 'node:test'

import {
  BatchingTraceSink,
  InMemoryTraceStore,
  TraceStoreError,
  TraceStoreExporter,
  buildExecutionReceipt,
  materializeRun,
} from 'oma-component/observability'
import { FileTraceStore, FileTraceStoreError } from 'oma-component/observability/file'

const table = (name) => JSON.parse(readFileSync(new URL(`../../../fixtures/observability/${name}`, import.meta.url), 'utf8'))
const RECORDS = table('records.json').records
const MATERIALIZE = table('materialize.json')
const STORE = table('store.json')
const RUN = table('file-store.json').writes[0].append.map((name) => RECORDS[name])

for (const testCase of MATERIALIZE.cases) {
  test(`materializeRun: ${testCase.name}`, () => {
    const given = structuredClone(testCase.records)
    assert.deepStrictEqual(materializeRun(given, testCase.includeRecords ?? false), testCase.expect)
    assert.deepStrictEqual(given, testCase.records)
  })
}

for (const [i, testCase] of MATERIALIZE.refused.entries()) {
  test(`materializeRun refuses, naming ${testCase.field} (${i + 1})`, () => {
    assert.throws(() => materializeRun(structuredClone(testCase.records)), (error) => {
      assert.ok(error instanceof TypeError, String(error))
      assert.ok(error.message.includes(testCase.field), error.message)
      return true
    })
  })
}

for (const testCase of table('receipt.json').cases) {
  test(`buildExecutionReceipt: ${testCase.name}`, () => {
    const receipt = 'trace' in testCase ? buildExecutionReceipt(testCase.result, testCase.trace) : buildExecutionReceipt(testCase.result)
    assert.equal(JSON.stringify(receipt), JSON.stringify(testCase.expect))
  })
}

const errorOf = (error) => {
  assert.ok(error instanceof TraceStoreError, String(error))
  return { code: error.code, field: error.field, message: error.message }
}

for (const testCase of STORE.append) {
  test(`store refuses: ${testCase.name}`, async () => {
    const store = new InMemoryTraceStore()
    await assert.rejects(store.append(testCase.records), (e) => {
      assert.deepStrictEqual(errorOf(e), testCase.error)
      return true
    })
    assert.deepStrictEqual(store.records(), [])
  })
}

function runSummary(run, include) {
  if (run === null) return null
  return {
    runId: run.runId, status: run.status ?? null, incomplete: run.incomplete, agents: run.agents, models: run.models,
    spans: run.spans.length, records: include ? run.records.length : null,
  }
}

for (const testCase of STORE.scenarios) {
  test(`store: ${testCase.name}`, async () => {
    const now = testCase.options?.now
    const store = new InMemoryTraceStore(now === undefined ? {} : { now: () => now })
    for (const step of testCase.steps) {
      const outcome = async () => {
        if ('append' in step) return store.append(step.append)
        if ('getRun' in step) {
          const include = step.includeRecords ?? false
          return runSummary(await store.getRun(step.getRun, { includeRecords: include }), include)
        }
        if ('queryRuns' in step) {
          const query = { ...step.queryRuns }
          const pages = []
          for (;;) {
            const page = await store.queryRuns(query)
            pages.push(page.items.map((s) => s.runId))
            if (!('nextCursor' in page) || !step.follow) return pages
            query.cursor = page.nextCursor
          }
        }
        if ('deleteRun' in step) return store.deleteRun(step.deleteRun)
        if ('delete' in step) return store.delete(step.delete)
        return store.applyRetention(step.retention)
      }
      let got
      try {
        got = ['expect', await outcome()]
      } catch (error) {
        got = ['error', errorOf(error)]
      }
      assert.ok(got[0] in step, `${JSON.stringify(step).slice(0, 300)} gave ${JSON.stringify(got).slice(0, 300)}`)
      assert.deepStrictEqual(got[1], step[got[0]], JSON.stringify(step).slice(0, 300))
    }
  })
}

test('a batching sink fills a store through the store exporter, and a batch exported twice is kept once', async () => {
  const store = new InMemoryTraceStore()
  const sink = new BatchingTraceSink(new TraceStoreExporter(store), { diagnostics: 'silent' })
  for (const record of RUN) sink.emit(structuredClone(record))
  assert.equal((await sink.forceFlush({ timeoutMs: 2_000 })).status, 'ok')
  const run = await store.getRun('run-1')
  assert.equal(run.status, 'ok')
  assert.equal(run.spans.length, 4)
  for (const record of RUN) sink.emit(structuredClone(record))
  assert.equal((await sink.shutdown({ timeoutMs: 2_000 })).status, 'ok')
  assert.equal(store.records().length, 10)
})

test('the store exporter maps store failures as OMA does', async () => {
  const signal = new AbortController().signal
  const failing = (error) => new TraceStoreExporter({ append: async () => { throw error } })
  const two = [RECORDS.run_start, RECORDS.run_end]
  assert.deepStrictEqual(await new TraceStoreExporter(new InMemoryTraceStore()).export(two, signal), { status: 'success', exported: 2 })
  assert.deepStrictEqual(await failing(new TraceStoreError('UNSUPPORTED_SCHEMA_VERSION', 'x')).export(two, signal),
    { status: 'failure', exported: 0, code: 'STORE_UNSUPPORTED_SCHEMA_VERSION' })
  assert.deepStrictEqual(await failing(new TraceStoreError('INVALID_ARGUMENT', 'x')).export(two, signal),
    { status: 'failure', exported: 0, code: 'STORE_VALIDATION_FAILED' })
  assert.deepStrictEqual(await failing(new Error('disk full')).export(two, signal), { status: 'retryable', exported: 0, code: 'STORE_APPEND_FAILED' })
  assert.deepStrictEqual(await new TraceStoreExporter(new InMemoryTraceStore()).export(two, AbortSignal.abort()),
    { status: 'retryable', exported: 0, code: 'STORE_EXPORT_ABORTED' })
  assert.throws(() => new TraceStoreExporter({}), /append/)
})

// -- the file store (`oma-component/observability/file`) ---------------------------------------

const FILES = table('file-store.json')
const fixtureFile = (name) => new URL(`../../../fixtures/observability/file-store/${name}`, import.meta.url)
const scratch = () => mkdtempSync(join(tmpdir(), 'oma-trace-store-'))

for (const testCase of FILES.open) {
  test(`file store opens ${testCase.file}`, async () => {
    const dir = scratch()
    try {
      const file = join(dir, 'traces.ndjson')
      copyFileSync(fixtureFile(testCase.file), file)
      const seen = []
      const { expect } = testCase
      if ('error' in expect) {
        await assert.rejects(FileTraceStore.open(file, { onDiagnostic: (d) => seen.push(d) }), (e) => {
          assert.ok(e instanceof FileTraceStoreError, String(e))
          const got = { code: e.code, message: e.message }
          if (e.lineNumber !== undefined) got.lineNumber = e.lineNumber
          assert.deepStrictEqual(got, expect.error)
          return true
        })
        return
      }
      const store = await FileTraceStore.open(file, { onDiagnostic: (d) => seen.push(d) })
      assert.deepStrictEqual((await store.queryRuns({ order: 'started_asc' })).items.map((s) => s.runId), expect.runs)
      assert.equal(store.records().length, expect.records)
      assert.deepStrictEqual(seen, expect.diagnostics)
      assert.equal(statSync(file).size, expect.sizeAfterOpen)
      await store.close()
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
}

test('the file store writes the file the table holds, byte for byte', async () => {
  const [testCase] = FILES.writes
  const dir = scratch()
  try {
    const file = join(dir, 'traces.ndjson')
    const store = await FileTraceStore.open(file)
    await store.append(testCase.append.map((name) => RECORDS[name]))
    await store.deleteRun(testCase.deleteRun)
    await store.close()
    assert.equal(statSync(file).mode & 0o777, 0o600)
    let text = readFileSync(file, 'utf8')
    const batches = [...new Set([...text.matchAll(/"batchId":"([^"]+)"/g)].map((m) => m[1]))]
    batches.forEach((batch, i) => { text = text.replaceAll(batch, `b-${i + 1}`) })
    assert.equal(text, readFileSync(fixtureFile(testCase.file), 'utf8'))
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

test('a batching sink fills a file store, which reads back the same after reopening', async () => {
  const dir = scratch()
  try {
    const file = join(dir, 'nested', 't.ndjson')
    const store = await FileTraceStore.open(file)
    const sink = new BatchingTraceSink(new TraceStoreExporter(store), { diagnostics: 'silent' })
    for (const record of RUN) sink.emit(structuredClone(record))
    assert.equal((await sink.forceFlush({ timeoutMs: 2_000 })).status, 'ok')
    for (const record of RUN) sink.emit(structuredClone(record))
    assert.equal((await sink.shutdown({ timeoutMs: 2_000 })).status, 'ok')
    const run = await store.getRun('run-1')
    assert.equal(run.spans.length, 4)
    assert.equal(store.records().length, 10)
    await store.flush()
    await store.close()
    const again = await FileTraceStore.open(file)
    assert.deepStrictEqual(await again.getRun('run-1'), run)
    await again.close()
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

test('the file store cuts back a failed write and refuses work once closed', async () => {
  const dir = scratch()
  const write = fs.writeSync
  const restore = () => {
    fs.writeSync = write
    syncBuiltinESMExports()
  }
  try {
    const file = join(dir, 't.ndjson')
    const store = await FileTraceStore.open(file)
    await store.append(RUN.slice(0, 3))
    const size = statSync(file).size
    fs.writeSync = (fd, text) => {
      write(fd, text.slice(0, 40))  // a torn write: part of the batch, then a failure
      throw Object.assign(new Error('permission denied'), { code: 'EACCES' })
    }
    syncBuiltinESMExports()
    await assert.rejects(store.append(RUN.slice(3)), (e) => e instanceof FileTraceStoreError && e.code === 'WRITE_FAILED' && e.causeCode === 'EACCES')
    restore()
    assert.equal(statSync(file).size, size)
    assert.equal(store.records().length, 3)
    assert.equal((await store.compact()).recordsWritten, 3)
    await store.close()
    await store.close()
    await assert.rejects(store.append(RUN.slice(3)), (e) => e.code === 'CLOSED')
    const again = await FileTraceStore.open(file)
    assert.equal(again.records().length, 3)
    await again.close()
  } finally {
    restore()
    rmSync(dir, { recursive: true, force: true })
  }
})

test('a file store path must be one', async () => {
  await assert.rejects(FileTraceStore.open(''), (e) => e instanceof FileTraceStoreError && e.code === 'INVALID_PATH')
})
