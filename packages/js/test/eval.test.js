// Evaluation (`oma-component/eval`): the shared tables fixtures/eval/*.json (eval sets, score
// results, the runner over scripted targets and scorers, aggregates, gates; the Python package
// runs the same tables), then what the tables cannot say (concurrency, timeouts, cancellation).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import {
  defineEvalSet, defineScorer, evaluateGate, runEvalSet, targetFromAgent, EvalDefinitionError, EvalStoreError, InMemoryEvalStore,
} from 'oma-component/eval'
import { checkScoreResult } from '../src/eval/scorer.js'
import { aggregateRecords } from '../src/eval/report.js'

const table = (name) => JSON.parse(readFileSync(new URL(`../../../fixtures/eval/${name}`, import.meta.url), 'utf8'))
const SETS = table('sets.json')
const REPORTS = table('reports.json')
const RUNNER = table('runner.json')

for (const entry of SETS.valid) {
  test(`sets table, valid: ${entry.name}`, () => {
    const given = structuredClone(entry.set)
    const defined = defineEvalSet(given)
    assert.deepEqual(defined, entry.expect)
    assert.ok(Object.isFrozen(defined) && Object.isFrozen(defined.cases[0]))
    assert.deepEqual(given, entry.set)
  })
}

for (const entry of SETS.invalid) {
  test(`sets table, invalid: ${entry.field}`, () => {
    assert.throws(() => defineEvalSet(entry.set), (error) => {
      assert.ok(error instanceof EvalDefinitionError)
      assert.equal(error.field, entry.field)
      if (entry.message !== undefined) assert.equal(error.message, entry.message)
      return true
    })
  })
}

for (const entry of SETS.scores) {
  test(`sets table, score result: ${JSON.stringify(entry.result)}`, () => {
    if (entry.error === null) assert.equal(checkScoreResult(entry.result), entry.result)
    else assert.throws(() => checkScoreResult(entry.result), { message: entry.error })
  })
}

for (const entry of REPORTS.aggregates) {
  test(`reports table, aggregates: ${entry.name}`, () => {
    assert.deepEqual(aggregateRecords(entry.records, entry.scorers, new Map(Object.entries(entry.tagsByCase))), entry.expect)
  })
}

for (const entry of REPORTS.gates) {
  test(`reports table, gate: ${entry.name}`, () => {
    assert.deepEqual(evaluateGate(entry.report, entry.policy, entry.baseline), entry.expect)
  })
}

for (const entry of REPORTS.refusedPolicies) {
  test(`reports table, refused policy: ${entry.field}`, () => {
    const report = { evalSet: { name: 's', version: '1' }, caseCount: 0, repeats: 1, records: [], aggregates: [], totals: { targetErrors: 0 } }
    assert.throws(() => evaluateGate(report, entry.policy), (error) => error instanceof EvalDefinitionError && error.field === entry.field)
  })
}

/** A scorer of the runner table (its contract): a rule, or answers by case id. */
function scriptedScorer(spec) {
  return {
    name: spec.name,
    ...(spec.version !== undefined ? { version: spec.version } : {}),
    ...(spec.timeoutMs !== undefined ? { timeoutMs: spec.timeoutMs } : {}),
    score(context) {
      if (spec.rule === 'exact') {
        const same = 'expected' in context.evalCase && context.output === context.evalCase.expected
        return { score: same ? 1 : 0, pass: same }
      }
      if (spec.rule === 'length') return { score: typeof context.output === 'string' ? 1 : 0 }
      const answer = spec.answers[context.evalCase.id]
      if (answer.throws !== undefined) throw new Error(answer.throws)
      if (answer.hangs) {
        return new Promise((resolve) => {
          const timer = setTimeout(() => resolve({ score: 1 }), 5000)
          context.signal.addEventListener('abort', () => { clearTimeout(timer); resolve({ score: 1 }) }, { once: true })
        })
      }
      return { ...answer }
    },
  }
}

class FailingStore extends InMemoryEvalStore {
  constructor(failFor) {
    super()
    this.failFor = new Set(failFor)
  }

  async append(records) {
    if (records.some((r) => this.failFor.has(r.caseId))) throw new Error('disk full')
    return super.append(records)
  }
}

async function runCase(entry) {
  const { cancelAfter, ...options } = entry.options ?? {}
  const progress = []
  const controller = new AbortController()
  let done = 0
  const store = entry.store !== undefined ? new FailingStore(entry.store.failFor ?? []) : undefined
  const report = await runEvalSet(defineEvalSet(entry.set), async (input, context) => {
    const answer = entry.target[context.caseId]
    if (answer.throws !== undefined) throw new Error(answer.throws)
    if ('returns' in answer) return answer.returns
    return { ...answer }
  }, {
    ...options,
    scorers: entry.scorers.map(scriptedScorer),
    signal: controller.signal,
    ...(store !== undefined ? { store } : {}),
    onProgress: (event) => {
      progress.push({ ...event })
      if (event.type === 'case_done' && cancelAfter !== undefined && ++done >= cancelAfter) controller.abort()
    },
  })
  assert.ok(report.records.every((r) => r.evalRunId === report.evalRunId))
  const records = report.records.map(({ recordId, evalRunId, timestampUnixMs, ...shown }) => {
    assert.equal(typeof shown.usage.durationMs, 'number')
    const { durationMs, ...usage } = shown.usage
    if (Object.keys(usage).length > 0) shown.usage = usage
    else delete shown.usage
    if (shown.error !== undefined) {
      const { name, ...error } = shown.error
      shown.error = error
    }
    return shown
  })
  const kept = Object.fromEntries(['caseCount', 'repeats', 'aborted', 'warnings', 'aggregates', 'totals']
    .filter((k) => k in report).map((k) => [k, report[k]]))
  const out = { records, progress, report: kept }
  if (store !== undefined) out.stored = store.records().map((r) => r.caseId)
  return out
}

for (const entry of RUNNER.cases) {
  test(`runner table: ${entry.name}`, async () => {
    assert.deepEqual(JSON.parse(JSON.stringify(await runCase(entry))), entry.expect)
  })
}

for (const entry of RUNNER.refused) {
  test(`runner table, refused: ${JSON.stringify(entry.options)}`, async () => {
    const set = defineEvalSet({ name: 's', version: '1', cases: [{ id: 'a', input: 1 }] })
    let called = false
    await assert.rejects(runEvalSet(set, async () => { called = true; return { output: 1 } }, { scorers: [], ...entry.options }),
      { message: entry.error })
    assert.equal(called, false)
  })
}

const STORE = table('store.json')

const storeError = (error) => ({ code: error.code, field: error.field, message: error.message })

for (const entry of STORE.append) {
  test(`store table, append refused: ${entry.name}`, async () => {
    const store = new InMemoryEvalStore()
    await assert.rejects(store.append(entry.records), (error) => {
      assert.ok(error instanceof EvalStoreError)
      assert.deepEqual(storeError(error), entry.error)
      return true
    })
    assert.deepEqual(store.records(), [])
  })
}

/** A step's outcome: what it resolved with, or the store's error. */
async function outcome(call) {
  try {
    return { value: await call() }
  } catch (error) {
    assert.ok(error instanceof EvalStoreError, String(error))
    return { error: storeError(error) }
  }
}

for (const scenario of STORE.scenarios) {
  test(`store table, scenario: ${scenario.name}`, async () => {
    const options = scenario.options ?? {}
    const store = new InMemoryEvalStore({
      ...(options.maxRecords !== undefined ? { maxRecords: options.maxRecords } : {}),
      ...(options.now !== undefined ? { now: () => options.now } : {}),
    })
    for (const step of scenario.steps) {
      let got
      if ('append' in step) got = await outcome(() => store.append(step.append))
      else if ('delete' in step) got = await outcome(() => store.delete(step.delete))
      else if ('retention' in step) got = await outcome(() => store.applyRetention(step.retention))
      else if ('query' in step) {
        got = await outcome(async () => {
          const pages = []
          let page = await store.query(step.query)
          pages.push(page.items.map((r) => r.recordId))
          while (step.follow && page.nextCursor !== undefined) {
            page = await store.query({ ...step.query, cursor: page.nextCursor })
            pages.push(page.items.map((r) => r.recordId))
          }
          if (!step.follow) assert.equal(page.nextCursor === undefined, true, 'a page without follow has no cursor in these tables')
          return pages
        })
      } else {
        assert.deepEqual(store.records().map((r) => r.recordId), step.records)
        continue
      }
      if ('error' in step) assert.deepEqual(got, { error: step.error }, JSON.stringify(step).slice(0, 200))
      else assert.deepEqual(got, { value: step.expect }, JSON.stringify(step).slice(0, 200))
    }
  })
}

test('cursors of another store, after a delete, or edited are INVALID_CURSOR; pages never leak records', async () => {
  const record = (id, ts) => ({
    schemaVersion: 1, recordId: id, evalRunId: 'run', source: 'offline', timestampUnixMs: ts,
    scorer: { name: 's' }, status: 'scored', score: 1, metadata: {},
  })
  const store = new InMemoryEvalStore()
  const other = new InMemoryEvalStore()
  await store.append([record('a', 1), record('b', 2), record('c', 3)])
  await other.append([record('a', 1), record('b', 2), record('c', 3)])
  const first = await store.query({ limit: 1 })
  await assert.rejects(other.query({ limit: 1, cursor: first.nextCursor }), { code: 'INVALID_CURSOR' })
  await assert.rejects(store.query({ limit: 1, order: 'time_asc', cursor: first.nextCursor }), { code: 'INVALID_CURSOR' })
  await store.append([record('d', 4)])
  const second = await store.query({ limit: 1, cursor: first.nextCursor })
  assert.deepEqual(second.items.map((r) => r.recordId), ['b'])
  await store.delete({ evalRunId: 'nothing' })
  await store.delete({ before: '1970-01-01T00:00:00.002Z' })
  await assert.rejects(store.query({ limit: 1, cursor: second.nextCursor }), { code: 'INVALID_CURSOR' })
  second.items[0].score = 0
  assert.equal((await store.query({})).items.find((r) => r.recordId === 'b').score, 1)
})

test('targetFromAgent runs each case through runAgent with its metadata; a gate reads the report', async () => {
  const { startServer, anthropicMessage } = await import('./helpers/server.js')
  const server = await startServer()
  try {
    server.setFallback(({ body }) => anthropicMessage(body.messages[0].content[0].text.includes('2 + 2') ? '4' : 'Lyon',
      { usage: { input_tokens: 10, output_tokens: 2 } }))
    const set = defineEvalSet({ name: 'smoke', version: '1', cases: [
      { id: 'sum', input: 'What is 2 + 2?', expected: '4', tags: ['math'] },
      { id: 'capital', input: 'Capital of France?', expected: 'Paris' },
    ] })
    const exact = defineScorer({ name: 'exact', version: '1', score: ({ output, evalCase }) => ({ score: output === evalCase.expected ? 1 : 0, pass: output === evalCase.expected }) })
    const seen = []
    const target = targetFromAgent({ name: 'a', model: 'claude-test', provider: 'anthropic', baseURL: server.url, apiKey: 'sk-ant-test-0123456789' },
      { metadata: { candidate: 'b' } })
    const report = await runEvalSet(set, target, { scorers: [exact], concurrency: 1, onProgress: (e) => seen.push(e.type) })
    assert.deepEqual(seen, ['case_start', 'case_done', 'case_start', 'case_done'])
    assert.deepEqual(report.records.map((r) => [r.caseId, r.score]), [['sum', 1], ['capital', 0]])
    assert.equal(report.records[0].metadata.eval_case, 'sum')
    assert.equal(report.records[0].metadata.candidate, 'b')
    assert.equal(report.records[0].metadata.model, 'claude-test')
    assert.equal(report.records[0].runRef.runId, report.records[0].runRef.runId.trim())
    assert.deepEqual(report.totals.tokens, { input_tokens: 20, output_tokens: 4 })
    assert.equal(server.requests.length, 2)
    const verdict = evaluateGate(report, { schemaVersion: 1, thresholds: [{ scorer: 'exact', metric: 'avg', min: 0.9 }] })
    assert.deepEqual(verdict.failures.map((f) => f.message), ['Gate metric "avg" for scorer "exact" is 0.5, below minimum 0.9.'])
  } finally {
    await server.close()
  }
})

test('a scorer past its timeoutMs is told by its signal and recorded as a timeout; samples run concurrently', async () => {
  const set = defineEvalSet({ name: 's', version: '1', cases: [{ id: 'a', input: 1 }, { id: 'b', input: 2 }, { id: 'c', input: 3 }] })
  let running = 0
  let most = 0
  let aborted = false
  const stuck = { name: 'stuck', version: '1', timeoutMs: 30, score: ({ signal }) => new Promise((resolve) => {
    signal.addEventListener('abort', () => { aborted = true; resolve({ score: 1 }) }, { once: true })
  }) }
  const report = await runEvalSet(set, async (input) => {
    running++
    most = Math.max(most, running)
    await new Promise((resolve) => setTimeout(resolve, 30))
    running--
    return { output: input }
  }, { scorers: [stuck], concurrency: 3 })
  assert.equal(most, 3)
  assert.equal(aborted, true)
  assert.deepEqual(report.records.map((r) => [r.status, r.error.kind, r.error.message]), Array(3).fill(['scorer_error', 'timeout', 'Scorer "stuck" timed out after 30ms.']))
  assert.equal(report.aggregates[0].errorCount, 3)
})

test('options and definitions that are not right are refused by name', async () => {
  const set = defineEvalSet({ name: 's', version: '1', cases: [{ id: 'a', input: 1 }] })
  await assert.rejects(runEvalSet(set, async () => ({ output: 1 }), { scorers: [], repeat: 2 }), /does not support the option "repeat"/)
  await assert.rejects(runEvalSet(set, async () => ({ output: 1 }), { scorers: [{ name: '', score: () => ({ score: 1 }) }] }), /scorers\[0\]/)
  assert.throws(() => defineScorer({ name: 'x', score: 1 }), { message: 'Scorer.score must be a function.' })
  assert.throws(() => targetFromAgent({ name: 'a', model: 'm' }, { executionRouting: {} }), /executionRouting/)
  assert.throws(() => new InMemoryEvalStore({ capacity: 3 }), (e) => e instanceof EvalStoreError && e.field === 'capacity')
})
