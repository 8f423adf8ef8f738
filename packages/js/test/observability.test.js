// The trace sinks of `oma-component/observability`, imported as users do: the shared tables of
// fixtures/observability/ (batching, composite, processors, legacy; the Python package runs the
// same tables), then what is JavaScript's own: an exporter that hangs or is slow holding no emit,
// the queue staying bounded, a sync exporter never called inside emit.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { test } from 'node:test'

import {
  BatchingTraceSink,
  CompositeSink,
  DEFAULT_BATCHING_OPTIONS,
  FilteringSink,
  LegacyCallbackTraceSink,
  SensitiveDataProcessor,
  emptyTraceSinkStats,
} from 'oma-component/observability'
import { attachLegacyTraceEvent } from '../src/observability/legacy.js'
import { recordBytes, utf8LengthCounted } from '../src/observability/batching.js'

const table = (name) => JSON.parse(readFileSync(new URL(`../../../fixtures/observability/${name}`, import.meta.url), 'utf8'))
const RECORDS = table('records.json').records
const HANG_MS = 5_000

const record = (name) => structuredClone(RECORDS[name])
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

function nameOf(rec) {
  for (const [name, value] of Object.entries(RECORDS)) {
    try {
      assert.deepStrictEqual(rec, value)
      return name
    } catch {
      // not this one
    }
  }
  throw new assert.AssertionError({ message: `not a fixture record: ${JSON.stringify(rec)}` })
}

class Diagnostics {
  seen = []
  handler = (diagnostic) => {
    for (const key of Object.keys(diagnostic)) assert.ok(['code', 'severity', 'count', 'sinkName', 'message'].includes(key), key)
    assert.ok(['warning', 'error'].includes(diagnostic.severity) && diagnostic.count >= 1)
    this.seen.push(diagnostic)
  }

  get codes() {
    return this.seen.map((d) => d.code)
  }
}

/** What a scripted exporter method answers (see batching.json's contract). */
function answer(script, batchLength, signal) {
  if ('throws' in script) throw new Error(script.throws)
  if (script.hangs) {
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve({ status: 'success', exported: batchLength }), HANG_MS)
      signal.addEventListener('abort', () => {
        clearTimeout(timer)
        resolve({ status: 'success', exported: batchLength })
      }, { once: true })
    })
  }
  if ('returns' in script) return Promise.resolve(script.returns)
  const out = { ...script }
  if (out.exported === 'all') out.exported = batchLength
  return Promise.resolve(out)
}

function scriptedExporter(testCase) {
  const calls = []
  const exporter = {
    calls,
    export(records, signal) {
      const index = calls.length
      calls.push(records.map(nameOf))
      return answer(testCase.exporter[Math.min(index, testCase.exporter.length - 1)], records.length, signal)
    },
  }
  if ('exporterFlush' in testCase) exporter.forceFlush = (signal) => answer(testCase.exporterFlush, 0, signal)
  if ('exporterShutdown' in testCase) exporter.shutdown = (signal) => answer(testCase.exporterShutdown, 0, signal)
  return exporter
}

function optionsOf(caseOptions, diagnostics) {
  const out = { retryJitter: false, diagnosticIntervalMs: 0, scheduledDelayMs: 60_000, onDiagnostic: diagnostics.handler }
  for (const [key, value] of Object.entries(caseOptions)) {
    out[key] = value !== null && typeof value === 'object' && 'bytesOf' in value
      ? value.bytesOf.reduce((sum, name) => sum + recordBytes(RECORDS[name]), 0)
      : value
  }
  return out
}

function checkStats(stats, expected) {
  for (const [key, value] of Object.entries(expected)) {
    if (value === null) assert.ok(!(key in stats), `${key} should be absent: ${JSON.stringify(stats)}`)
    else assert.deepStrictEqual(stats[key], value, `${key} in ${JSON.stringify(stats)}`)
  }
}

async function waitUntil(predicate, timeoutMs = 5_000) {
  const deadline = Date.now() + timeoutMs
  while (!predicate()) {
    assert.ok(Date.now() < deadline, 'timed out')
    await sleep(5)
  }
}

async function runSteps(sink, steps, waitExports) {
  for (const step of steps) {
    if ('emit' in step) {
      for (let i = 0; i < (step.times ?? 1); i++) {
        const rec = record(step.emit)
        if ('legacy' in step) attachLegacyTraceEvent(rec, step.legacy)
        sink.emit(rec)
      }
    } else if ('emitCyclic' in step) {
      const rec = record(step.emitCyclic)
      rec.attributes.self = rec
      sink.emit(rec)
    } else if ('waitExports' in step) {
      await waitExports(step.waitExports)
    } else if ('flush' in step) {
      assert.deepStrictEqual(await sink.forceFlush(step.flush), step.expect)
    } else if ('shutdown' in step) {
      assert.deepStrictEqual(await sink.shutdown(step.shutdown), step.expect)
    } else if ('stats' in step) {
      checkStats(sink.getStats(), step.stats)
    } else {
      throw new Error(`unknown step ${JSON.stringify(step)}`)
    }
  }
}

const BATCHING = table('batching.json')
for (const testCase of BATCHING.cases) {
  test(`batching: ${testCase.name}`, async () => {
    const diagnostics = new Diagnostics()
    const exporter = scriptedExporter(testCase)
    const sink = new BatchingTraceSink(exporter, optionsOf(testCase.options, diagnostics))
    try {
      await runSteps(sink, testCase.steps, (n) => waitUntil(() => exporter.calls.length >= n))
      assert.deepStrictEqual(exporter.calls, testCase.expect.exports)
      assert.deepStrictEqual(diagnostics.codes, testCase.expect.diagnostics)
      if ('sinkName' in testCase.expect) {
        assert.deepStrictEqual([...new Set(diagnostics.seen.map((d) => d.sinkName))], [testCase.expect.sinkName])
      }
    } finally {
      await sink.shutdown({ timeoutMs: 100 })
    }
  })
}

for (const refused of BATCHING.refused) {
  test(`batching refuses a bad ${refused.option}`, () => {
    assert.throws(() => new BatchingTraceSink({ export: async () => ({ status: 'success', exported: 0 }) }, refused.options),
      (e) => e instanceof TypeError || e instanceof RangeError ? e.message.includes(refused.option) : false)
  })
}

function scriptedChild(spec) {
  const received = []
  const reply = (key) => {
    const script = spec[key] ?? { status: 'ok', accepted: 0, exported: 0, dropped: 0, failed: 0 }
    if ('throws' in script) return Promise.reject(new Error(script.throws))
    if (script.hangs) return new Promise((resolve) => setTimeout(resolve, HANG_MS).unref())
    return Promise.resolve({ ...script })
  }
  const child = {
    spec,
    received,
    emit(rec) {
      if (spec.emitThrows) throw new Error('emit refused')
      received.push(nameOf(rec))
    },
    forceFlush: () => reply('flush'),
    shutdown: () => reply('shutdown'),
  }
  if ('stats' in spec || spec.statsThrow) {
    child.getStats = () => {
      if (spec.statsThrow) throw new Error('no stats')
      return { ...spec.stats }
    }
  }
  return child
}

const COMPOSITE = table('composite.json')
for (const testCase of COMPOSITE.cases) {
  test(`composite: ${testCase.name}`, async () => {
    const diagnostics = new Diagnostics()
    const children = testCase.children.map(scriptedChild)
    const sink = new CompositeSink(children, { onDiagnostic: diagnostics.handler, diagnosticIntervalMs: 0 })
    await runSteps(sink, testCase.steps)
    const { expect } = testCase
    if ('received' in expect) assert.deepStrictEqual(children.filter((c) => c.spec.records).map((c) => c.received), expect.received)
    if (expect.diagnosticsUnordered) assert.deepStrictEqual([...diagnostics.codes].sort(), [...expect.diagnostics].sort())
    else assert.deepStrictEqual(diagnostics.codes, expect.diagnostics)
    const last = testCase.steps.at(-1)
    if ('stats' in last && Object.keys(last.stats).length >= 8) assert.deepStrictEqual(sink.getStats(), last.stats)
  })
}

function recording() {
  const records = []
  const ok = async () => ({ status: 'ok', accepted: 0, exported: 0, dropped: 0, failed: 0 })
  return { records, emit: (rec) => records.push(rec), forceFlush: ok, shutdown: ok }
}

const PROCESSORS = table('processors.json')
for (const testCase of PROCESSORS.cases) {
  test(`sensitive data processor: ${testCase.name}`, () => {
    const inner = recording()
    const sink = new SensitiveDataProcessor(inner, testCase.processor)
    const given = structuredClone(testCase.record)
    sink.emit(given)
    assert.deepStrictEqual(given, testCase.record, 'the processor changed the record it was given')
    assert.deepStrictEqual(inner.records, testCase.expect === null ? [] : [testCase.expect])
  })
}

test('sensitive data processor: a record it leaves as it is is handed on as a new record', () => {
  const inner = recording()
  const sink = new SensitiveDataProcessor(inner)
  const given = {
    recordType: 'span_end',
    name: 'chat',
    attributes: { 'oma.agent.name': 'assistant', 'oma.llm.turn': 1 },
    status: { code: 'ok' },
    error: { code: 'E' },
  }
  const before = structuredClone(given)
  sink.emit(given)
  const [handed] = inner.records
  assert.deepStrictEqual(handed, before)
  assert.notStrictEqual(handed, given)
  for (const key of ['attributes', 'status', 'error']) assert.notStrictEqual(handed[key], given[key], key)
  handed.attributes['oma.agent.name'] = 'changed'
  handed.status.code = 'error'
  assert.deepStrictEqual(given, before, 'the record given changed with the one handed on')
})

for (const refused of PROCESSORS.refused) {
  test(`sensitive data processor refuses a bad ${refused.option}`, () => {
    const name = refused.option.split('.').at(-1)
    assert.throws(() => new SensitiveDataProcessor(recording(), refused.processor), (e) => e.message.includes(name))
  })
}

for (const testCase of PROCESSORS.filtering) {
  test(`filtering: ${testCase.name}`, () => {
    const inner = recording()
    const keep = (rec) => {
      if ('throwsFor' in testCase.keep) {
        if (nameOf(rec) === testCase.keep.throwsFor) throw new Error('filter failed')
        return true
      }
      return Object.entries(testCase.keep).every(([k, v]) => rec[k] === v)
    }
    const sink = new FilteringSink(inner, keep)
    for (const name of testCase.emit) sink.emit(record(name))
    assert.deepStrictEqual(inner.records.map(nameOf), testCase.expect)
  })
}

function legacyCallback(kind, events) {
  if (kind === 'sync') return (event) => { events.push(event) }
  if (kind === 'syncThrows') {
    return (event) => {
      events.push(event)
      throw new Error('callback failed')
    }
  }
  return async (event) => {
    events.push(event)
    if (kind === 'asyncHangs') await new Promise((resolve) => setTimeout(resolve, HANG_MS).unref())
    await sleep(10)
    if (kind === 'asyncRejects') throw new Error('callback failed')
  }
}

const LEGACY = table('legacy.json')
for (const testCase of LEGACY.cases) {
  test(`legacy callback: ${testCase.name}`, async () => {
    const events = []
    const diagnostics = new Diagnostics()
    const sink = new LegacyCallbackTraceSink(legacyCallback(testCase.callback, events), {
      onDiagnostic: diagnostics.handler,
      diagnosticIntervalMs: 0,
    })
    await runSteps(sink, testCase.steps)
    assert.deepStrictEqual(events, testCase.expect.events)
    assert.deepStrictEqual(diagnostics.codes, testCase.expect.diagnostics)
  })
}

// -- JavaScript's own --------------------------------------------------------------------------

test("a record's size is the UTF-8 length of its JSON, counted natively or by the loop alike", () => {
  const texts = [
    '', 'plain ascii', 'caf\u00e9 \u00fc\u00df', '\u4f60\u597d', 'emoji \ud83d\ude00 pair',
    'lone \ud800 high', 'lone \udc00 low', 'end high \ud83d', '\u2028\u2029 and \u0000\u001f',
  ]
  const encoder = new TextEncoder()
  for (const text of texts) {
    assert.equal(utf8LengthCounted(text), encoder.encode(text).length, JSON.stringify(text))
    const rec = { ...record(Object.keys(RECORDS)[0]), attributes: { 'oma.text': text } }
    assert.equal(recordBytes(rec), encoder.encode(JSON.stringify(rec)).length, JSON.stringify(text))
  }
})

test('a hanging exporter holds no emit and the queue stays bounded', async () => {
  let release
  const released = new Promise((resolve) => { release = resolve })
  const sink = new BatchingTraceSink({
    export: async (records) => {
      await released
      return { status: 'success', exported: records.length }
    },
  }, { maxQueueRecords: 100, maxBatchRecords: 10, diagnostics: 'silent' })
  const started = performance.now()
  for (let i = 0; i < 5_000; i++) sink.emit(record('llm_end'))
  const elapsed = performance.now() - started
  await sleep(0)
  const stats = sink.getStats()
  assert.ok(stats.queuedRecords <= 100, JSON.stringify(stats))
  assert.equal(stats.accepted, 5_000)
  assert.equal(stats.dropped + stats.queuedRecords + stats.exported, 5_000)
  assert.ok(elapsed < 5_000, `${elapsed} ms`)
  release()
  assert.equal((await sink.shutdown({ timeoutMs: 3_000 })).status, 'partial')
})

test('an exporter is never called inside emit', async () => {
  let inEmit = false
  const seen = []
  const sink = new BatchingTraceSink({
    export(records) {
      seen.push(inEmit)
      return { status: 'success', exported: records.length }
    },
  }, { maxBatchRecords: 1, diagnostics: 'silent' })
  inEmit = true
  sink.emit(record('run_end'))
  inEmit = false
  assert.deepStrictEqual(await sink.forceFlush({ timeoutMs: 1_000 }), { status: 'ok', accepted: 1, exported: 1, dropped: 0, failed: 0 })
  assert.deepStrictEqual(seen, [false])
})

test('an export that never settles is abandoned at exportTimeoutMs and its signal aborted', async () => {
  const aborted = []
  const sink = new BatchingTraceSink({
    export: (records, signal) => new Promise(() => { signal.addEventListener('abort', () => aborted.push(true)) }),
  }, { exportTimeoutMs: 20, maxRetries: 1, retryDelayMs: 1, diagnostics: 'silent' })
  sink.emit(record('run_start'))
  const result = await sink.forceFlush({ timeoutMs: 2_000 })
  assert.deepStrictEqual(result, { status: 'error', accepted: 1, exported: 0, dropped: 0, failed: 1 })
  assert.equal(aborted.length, 2)
  assert.equal(sink.getStats().lastError, 'EXPORT_TIMEOUT')
})

test('warn mode writes one payload-free line; silent mode and a throwing handler stay quiet', () => {
  const lines = []
  const warn = console.warn
  console.warn = (...args) => lines.push(args.join(' '))
  try {
    const secret = record('run_start')
    secret.attributes.note = 'sk-abcdefghijklmnopqrstuv'
    const sink = new BatchingTraceSink({ export: async () => ({ status: 'success', exported: 0 }) }, { maxRecordBytes: 1 })
    sink.emit(secret)
    sink.emit(secret)
    assert.deepStrictEqual(lines, ['[open-multi-agent observability] record_too_large: Trace record exceeded the configured size limit or was not serializable.'])
    assert.equal(sink.getStats().dropped, 2)
    lines.length = 0
    new BatchingTraceSink({ export: async () => ({}) }, { maxRecordBytes: 1, diagnostics: 'silent' }).emit(record('run_start'))
    new BatchingTraceSink({ export: async () => ({}) }, { maxRecordBytes: 1, onDiagnostic: () => { throw new Error('x') } }).emit(record('run_start'))
    assert.deepStrictEqual(lines, [])
  } finally {
    console.warn = warn
  }
})

test("OMA's defaults, and sinks without counters report empty ones", () => {
  assert.deepStrictEqual({ ...DEFAULT_BATCHING_OPTIONS }, {
    maxQueueRecords: 2048, maxQueueBytes: 16 * 1024 * 1024, maxRecordBytes: 256 * 1024, maxBatchRecords: 512,
    scheduledDelayMs: 5000, exportTimeoutMs: 30000, maxRetries: 3, retryDelayMs: 1000, retryBackoff: 2, maxRetryDelayMs: 30000,
  })
  assert.deepStrictEqual(new CompositeSink([recording()]).getStats(), emptyTraceSinkStats())
  assert.deepStrictEqual(new FilteringSink(recording(), () => true).getStats(), emptyTraceSinkStats())
  assert.throws(() => new BatchingTraceSink({}), /export/)
})

test('oma-component/observability reaches no node:* module (a browser bundle takes it); /file does', () => {
  const reached = (entry) => {
    const seen = new Set()
    const specifiers = new Set()
    const visit = (url) => {
      if (seen.has(url.href)) return
      seen.add(url.href)
      const source = readFileSync(url, 'utf8')
      for (const [, spec] of source.matchAll(/^\s*(?:import|export)\s[^'"]*?from\s+'([^']+)'/gm)) {
        specifiers.add(spec)
        if (spec.startsWith('.')) visit(new URL(spec, url))
      }
    }
    visit(new URL(entry, import.meta.url))
    return [...specifiers]
  }
  assert.deepStrictEqual(reached('../src/observability/index.js').filter((s) => s.startsWith('node:')), [])
  assert.deepStrictEqual(reached('../src/observability/file.js').filter((s) => s.startsWith('node:')).sort(), ['node:crypto', 'node:fs', 'node:path'])
})
