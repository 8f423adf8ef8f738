// The online evaluation rules the core holds (fixtures/eval/online.json; the core's tests and the
// Python package run the same table): every row through the codec (the window rows as
// sequences of steps), the evaluator rows through the package's OnlineEvaluator on the row's
// clock and draws, then the rows a run can make through OpenMultiAgent's `evaluation` as users
// configure it, what its scorer sees and what its records keep checked against the table.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { OpenMultiAgent } from 'oma-component'
import { defineScorer, InMemoryEvalStore } from 'oma-component/eval'
import { onlineStep } from '../src/eval/rules.js'
import { OnlineEvaluator } from '../src/eval/online.js'
import { attachScoreCostInputs } from '../src/eval/scorer.js'

const TABLE = JSON.parse(readFileSync(new URL('../../../fixtures/eval/online.json', import.meta.url), 'utf8'))

for (const step of ['case', 'record', 'flush']) {
  test(`the online table's ${step} rows through the codec`, () => {
    assert.ok(TABLE[step].length > 0)
    for (const row of TABLE[step]) {
      if (row.error) {
        assert.throws(() => onlineStep(step, row.request), (e) => e.name === row.error.name && e.message === row.error.message, row.name)
      } else {
        const answer = onlineStep(step, row.request)
        assert.deepEqual(answer, row.expect, row.name)
        assert.equal(JSON.stringify(answer), JSON.stringify(row.expect), `${row.name}: key order`)
      }
    }
  })
}

test("the online table's window rows through the codec, each step on the window the last gave", () => {
  assert.ok(TABLE.window.length > 0)
  for (const row of TABLE.window) {
    let window
    for (const [index, step] of row.steps.entries()) {
      const name = `${row.name} (step ${index})`
      const request = window === undefined ? step.request : { ...step.request, window }
      if (step.error) {
        assert.throws(() => onlineStep(step.step, request), (e) => e.name === step.error.name && e.message === step.error.message, name)
        continue
      }
      const { window: next, ...answer } = onlineStep(step.step, request)
      assert.ok(next !== undefined, `${name}: a window`)
      assert.equal(JSON.stringify(answer), JSON.stringify(step.expect), name)
      window = next
    }
  }
})

for (const row of TABLE.evaluator) {
  test(`the online table's evaluator row through the package's evaluator: ${row.name}`, async () => {
    let now = 0
    let draw = 0
    const diagnostics = []
    const usage = { input_tokens: 4, output_tokens: 3 }
    const judged = defineScorer({
      name: 'judged',
      version: '1',
      score: () => attachScoreCostInputs({ score: 1 }, [{ usage, context: { agentName: 'j', model: 'm', phase: 'agent' } }]),
    })
    const evaluator = new OnlineEvaluator(
      { ...row.config, scorers: [judged], onDiagnostic: (d) => diagnostics.push([d.code, d.count, d.message]) },
      { now: () => now, random: () => draw, estimateCost: () => row.price ?? Number.NaN },
    )
    for (const [index, run] of row.runs.entries()) {
      now = run.now
      draw = run.random
      const identity = { runId: `run-${index}`, attempt: 1, traceId: 't', rootSpanId: 's' }
      evaluator.enqueue({ input: 'Hi', result: { output: 'ok', tokenUsage: usage, identity, status: { code: 'ok' }, metadata: {} }, durationMs: 1 })
      await evaluator.forceFlush({ timeoutMs: 5000 })
    }
    assert.deepEqual(evaluator.getStats(), row.expect.stats)
    assert.deepEqual(diagnostics, row.expect.diagnostics)
  })
}

/** An agent whose own adapter answers `output`. */
function agentAnswering(output) {
  return {
    name: 'online-agent',
    model: 'fixture-model',
    adapter: {
      name: 'online-table',
      async chat(_messages, options) {
        return { id: 'r', content: [{ type: 'text', text: output }], model: options.model, stop_reason: 'end_turn', usage: { input_tokens: 3, output_tokens: 2 } }
      },
      async *stream() {},
    },
  }
}

// The rows a run can make: a text prompt answered with a text.
const RUNNABLE = TABLE.case.filter((row) => !row.error && typeof row.request.input === 'string' && typeof row.request.output === 'string')

test('OpenMultiAgent evaluation: what scorers see and what records keep follow the table', async () => {
  assert.ok(RUNNABLE.length >= 4)
  for (const row of RUNNABLE) {
    const seen = []
    const store = new InMemoryEvalStore()
    const scorer = defineScorer({
      name: 'sees',
      version: '1',
      score: ({ evalCase }) => {
        seen.push(evalCase.input)
        return { score: 1, reason: 'seen with sk-abcdefghijklmnopqrstuvwx', details: { note: 'token=abc123secret' } }
      },
    })
    const orchestrator = new OpenMultiAgent({
      evaluation: { scorers: [scorer], sample: 1, store, ...(row.request.storePayloads ? { storePayloads: row.request.storePayloads } : {}), diagnostics: 'silent' },
    })
    const result = await orchestrator.runAgent(agentAnswering(row.request.output), row.request.input, { metadata: { row: 'x' } })
    assert.equal(result.output, row.request.output, row.name)
    assert.deepEqual(await orchestrator.evaluation.forceFlush({ timeoutMs: 5000 }), { status: 'ok', accepted: 1, exported: 1, dropped: 0, failed: 0 })
    assert.deepEqual(seen, [row.expect.input], row.name)
    const [record] = store.records()
    assert.deepEqual(record.payload, row.expect.payload, row.name)
    // The record is the core's: its reason and details redacted.
    assert.equal(record.reason, 'seen with [redacted]')
    assert.deepEqual(record.details, { note: 'token=[redacted]' })
    assert.deepEqual(record.runRef, {
      runId: result.identity.runId, attempt: result.identity.attempt, traceId: result.identity.traceId, rootSpanId: result.identity.rootSpanId,
    })
    await orchestrator.evaluation.shutdown()
  }
})
