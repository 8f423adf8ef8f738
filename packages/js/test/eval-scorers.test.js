// OMA's built-in scorers, LLM judges and online evaluation (`oma-component/eval`, OMA's
// `evaluation` on OpenMultiAgent): the shared table fixtures/eval/scorers.json through the
// package's factories as users call them (the core, the codec and the Python package run the
// same table), judges run as agents with a user-written LLMAdapter, and the online evaluator
// against a scripted adapter and stores.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { z } from 'zod'
import { OpenMultiAgent } from 'oma-component'
import {
  costBudgetScorer, createAnswerRelevancyScorer, createJudgeScorer, defineScorer, dependencyUtilizationScorer,
  duplicateWorkScorer, InMemoryEvalStore, noProgressScorer, runEvalSet, defineEvalSet, structuredOutputComplianceScorer,
  toolCallSuccessScorer,
} from 'oma-component/eval'

const TABLE = JSON.parse(readFileSync(new URL('../../../fixtures/eval/scorers.json', import.meta.url), 'utf8'))

const FACTORIES = {
  cost_budget: (o) => costBudgetScorer(o),
  dependency_utilization: () => dependencyUtilizationScorer(),
  duplicate_work: (o) => duplicateWorkScorer(o),
  no_progress: (o) => noProgressScorer(o),
  structured_output_compliance: (o) => structuredOutputComplianceScorer(o.schema),
  tool_call_success: () => toolCallSuccessScorer(),
}

/** A scorer context as the runner gives it; a team's agentResults as the Map OMA's results hold. */
function context(given) {
  const result = given.result === undefined ? undefined
    : given.result.agentResults === undefined ? given.result
      : { ...given.result, agentResults: new Map(Object.entries(given.result.agentResults)) }
  return {
    evalCase: { id: 'case-1', input: 'input', expected: 'expected' },
    output: 'output',
    ...(result !== undefined ? { result } : {}),
    ...(given.trace !== undefined ? { trace: given.trace } : {}),
    metadata: {},
    signal: new AbortController().signal,
  }
}

const sameError = (error, wanted) => {
  assert.equal(error.constructor.name, wanted.name)
  assert.equal(error.message, wanted.message)
  return true
}

for (const row of TABLE.scorers) {
  test(`scorers table: ${row.name}`, () => {
    const scorer = FACTORIES[row.scorer](row.options)
    assert.equal(scorer.name, row.scorer)
    assert.equal(scorer.version, '1')
    if (row.error !== undefined) assert.throws(() => scorer.score(context(row.context)), (e) => sameError(e, row.error))
    else assert.equal(JSON.stringify(scorer.score(context(row.context))), JSON.stringify(row.expect))
  })
}

for (const row of TABLE.options) {
  test(`scorer options table: ${row.scorer} ${JSON.stringify(row.options)}`, () => {
    if (row.error !== undefined) assert.throws(() => FACTORIES[row.scorer](row.options), (e) => sameError(e, row.error))
    else assert.equal(FACTORIES[row.scorer](row.options).name, row.expect.name)
  })
}

test('a zod schema is checked with zod; an option OMA does not have is refused by name', () => {
  const scorer = structuredOutputComplianceScorer(z.object({ answer: z.number() }))
  const scored = (structured) => scorer.score(context({ result: { success: true, output: 'x', structured } }))
  assert.equal(scored({ answer: 42 }).score, 1)
  assert.equal(scored({ answer: 'no' }).reason, 'Structured output did not match the supplied schema.')
  assert.equal(scored(undefined).details.structured_present, false)
  assert.throws(() => costBudgetScorer({ maxTokens: 5, budget: 1 }), /the option "budget"/)
  assert.throws(() => createAnswerRelevancyScorer({ judges: [{ name: 'j' }], judgePrompt: 'x' }), /does not take "judgePrompt"/)
})

/** A user-written LLMAdapter answering `answer(prompt, model)`, keeping every prompt it was asked. */
function judgeAdapter(answer) {
  const prompts = []
  return {
    prompts,
    adapter: {
      name: 'judge-fixture',
      async chat(messages, options) {
        const prompt = messages.at(-1).content.map((b) => b.text).join('')
        prompts.push(prompt)
        return {
          id: 'j', content: [{ type: 'text', text: answer(prompt, options.model) }], model: options.model,
          stop_reason: 'end_turn', usage: { input_tokens: 3, output_tokens: 2 },
        }
      },
      async *stream() {},
    },
  }
}

for (const row of TABLE.judge.options) {
  test(`judge options table: ${JSON.stringify(row.options)}`, () => {
    const make = () => createJudgeScorer({ name: 'judge', version: '1', ...row.options })
    if (row.error !== undefined) assert.throws(make, (e) => sameError(e, row.error))
    else assert.equal(make().timeoutMs, row.expect.timeoutMs)
  })
}

for (const row of TABLE.judge.prompts) {
  test(`judge prompts table: ${row.name}`, async () => {
    const { prompts, adapter } = judgeAdapter(() => '{"score":1,"reason":"r","pass":true}')
    const { preset, instruction, schema, input, expected, output, metadata } = row.request
    const judges = [{ name: 'j', model: 'm', adapter }]
    const scorer = preset !== undefined
      ? createAnswerRelevancyScorer({ version: '1', judges })
      : createJudgeScorer({ name: 'judge', version: '1', judges, ...(instruction !== undefined ? { judgePrompt: () => instruction } : {}), ...(schema !== undefined ? { verdictSchema: schema } : {}) })
    await scorer.score({
      evalCase: { id: 'c', input, ...(expected !== undefined ? { expected } : {}) }, output, metadata, signal: new AbortController().signal,
    })
    assert.equal(prompts[0], row.expect.prompt)
  })
}

for (const row of TABLE.judge.verdicts) {
  test(`judge verdicts table: ${row.name}`, async () => {
    const { judge, output, value, schema } = row.request
    const { adapter } = judgeAdapter(() => (output !== undefined ? output : JSON.stringify(value)))
    const scorer = createJudgeScorer({
      // A judge named by its backend runs here with the adapter (the table's backend is not one to start).
      name: 'judge', version: '1', judges: [{ name: judge.name, model: judge.model ?? 'unused', adapter }],
      // A value the host checks: with a zod schema that takes anything.
      ...(value !== undefined ? { verdictSchema: z.any() } : schema !== undefined ? { verdictSchema: schema } : {}),
    })
    const scoring = scorer.score({ evalCase: { id: 'c', input: 'i' }, output: 'o', metadata: {}, signal: new AbortController().signal })
    if (row.error !== undefined) {
      await assert.rejects(scoring, (e) => sameError(e, row.error))
      return
    }
    const scored = await scoring
    const verdict = row.expect
    assert.equal(scored.score, verdict.score)
    assert.equal(scored.pass, verdict.pass)
    assert.equal(scored.reason, verdict.reason === undefined || verdict.reason === '' ? undefined : `${verdict.judge}: ${verdict.reason}`)
    if (judge.model !== undefined) assert.deepEqual(scored.details, { judges: [verdict.judge], models: [verdict.model], scores: [verdict.score] })
  })
}

for (const row of TABLE.judge.aggregates) {
  test(`judge aggregates table: ${row.name}`, async () => {
    const judges = row.request.verdicts.map((v) => ({
      name: v.judge, model: v.model,
      adapter: judgeAdapter(() => JSON.stringify({ score: v.score, ...(v.pass !== undefined ? { pass: v.pass } : {}), ...(v.reason !== undefined ? { reason: v.reason } : {}) })).adapter,
    }))
    const scorer = createJudgeScorer({ name: 'panel', version: '1', judges, quorum: row.request.quorum, verdictSchema: z.any() })
    const scored = await scorer.score({ evalCase: { id: 'c', input: 'i' }, output: 'o', metadata: {}, signal: new AbortController().signal })
    assert.equal(JSON.stringify(scored), JSON.stringify(row.expect))
  })
}

test('an answer-relevancy judge in an offline evaluation: its agent runs, its score is recorded', async () => {
  const { prompts, adapter } = judgeAdapter((prompt) => (prompt.includes('an unrelated answer') ? '{"score":0.1,"reason":"off topic"}' : '{"score":0.75,"reason":"mostly relevant"}'))
  const relevancy = createAnswerRelevancyScorer({ version: 'v1', judges: [{ name: 'judge', model: 'judge-model', adapter }] })
  const set = defineEvalSet({ name: 's', version: '1', cases: [{ id: 'a', input: 'Capital of France?', expected: 'Paris' }, { id: 'b', input: 'Anything' }] })
  const report = await runEvalSet(set, async (input) => ({ output: input === 'Anything' ? 'an unrelated answer' : 'Paris.' }), { scorers: [relevancy], concurrency: 1 })
  assert.deepEqual(report.records.map((r) => [r.caseId, r.scorer.name, r.score, r.reason]), [
    ['a', 'answer_relevancy', 0.75, 'judge: mostly relevant'],
    ['b', 'answer_relevancy', 0.1, 'judge: off topic'],
  ])
  assert.ok(prompts[0].startsWith('Evaluate only answer relevancy.'))
  assert.ok(prompts[1].includes('## Expected output\n(not provided)'))
})

test('a judge that fails, times out or is aborted is a scorer error, never a score', async () => {
  const failing = { name: 'j', model: 'm', adapter: { name: 'x', async chat() { throw new Error('judge down') }, async *stream() {} } }
  const hanging = { name: 'j', model: 'm', adapter: { name: 'x', chat: () => new Promise(() => {}), async *stream() {} } }
  const ctx = { evalCase: { id: 'c', input: 'i' }, output: 'o', metadata: {}, signal: new AbortController().signal }
  await assert.rejects(createJudgeScorer({ name: 'a', version: '1', judges: [failing] }).score(ctx), /judge down/)
  await assert.rejects(createJudgeScorer({ name: 'b', version: '1', judges: [hanging], timeoutMs: 50 }).score(ctx), { name: 'TimeoutError', message: 'Judge scorer exceeded timeout of 50ms.' })
  const controller = new AbortController()
  const aborted = createJudgeScorer({ name: 'c', version: '1', judges: [hanging] }).score({ ...ctx, signal: controller.signal })
  controller.abort()
  await assert.rejects(aborted, { name: 'AbortError' })
})

// ---------------------------------------------------------------------------------------------
// Online evaluation

const ADAPTER = {
  name: 'online-fixture',
  async chat(_messages, options) {
    return { id: 'r', content: [{ type: 'text', text: 'Done.' }], model: options.model, stop_reason: 'end_turn', usage: { input_tokens: 12, output_tokens: 7 } }
  },
  async *stream() {},
}
const AGENT = { name: 'online-agent', model: 'fixture-model', adapter: ADAPTER }

test('online evaluation scores a sampled run after it returns, into the store, and flushes', async () => {
  const store = new InMemoryEvalStore()
  const results = []
  const orchestrator = new OpenMultiAgent({
    evaluation: { scorers: [costBudgetScorer({ maxTokens: 100 }), costBudgetScorer({ maxTokens: 10 })], sample: 1, store, storePayloads: 'full', onResult: (r) => results.push(r) },
  })
  const result = await orchestrator.runAgent(AGENT, 'Say done.', { metadata: { tenant: 'a' } })
  assert.equal(result.output, 'Done.')
  assert.equal(store.records().length, 0, 'scoring happens after the run returns')
  assert.deepEqual(await orchestrator.evaluation.forceFlush({ timeoutMs: 5000 }), { status: 'ok', accepted: 1, exported: 2, dropped: 0, failed: 0 })
  assert.deepEqual(orchestrator.evaluation.getStats(), { sampled: 1, enqueued: 1, completed: 2, dropped: 0, failed: 0, storeFailed: 0 })
  const [within, over] = store.records()
  assert.equal(within.source, 'online')
  assert.equal(within.runRef.runId, result.identity.runId)
  assert.deepEqual(within.metadata, { tenant: 'a' })
  assert.deepEqual([within.score, within.pass, over.score, over.pass], [1, true, 0, false])
  assert.deepEqual(within.usage, { tokens: { input_tokens: 12, output_tokens: 7 }, durationMs: within.usage.durationMs })
  assert.deepEqual(within.payload, { input: 'Say done.', output: 'Done.' })
  assert.equal(results.length, 2)
  assert.deepEqual(await orchestrator.evaluation.shutdown(), await orchestrator.evaluation.shutdown())
  await orchestrator.runAgent(AGENT, 'again')
  assert.equal(orchestrator.evaluation.getStats().dropped, 1, 'a run after shutdown is not queued')
})

test('online evaluation never fails a run: a throwing scorer, a failing store, a full queue, a spent budget', async () => {
  const diagnostics = []
  const throwing = defineScorer({ name: 'boom', version: '1', score() { throw new Error('scorer down') } })
  const failingStore = { async append() { throw new Error('disk full') } }
  const orchestrator = new OpenMultiAgent({
    evaluation: { scorers: [throwing], sample: 1, store: failingStore, maxQueueLength: 1, budget: { maxEvaluationsPerMinute: 2 }, onDiagnostic: (d) => diagnostics.push(d) },
  })
  const runs = await Promise.all([1, 2, 3].map((i) => orchestrator.runAgent(AGENT, `run ${i}`)))
  assert.ok(runs.every((r) => r.success))
  const flushed = await orchestrator.evaluation.forceFlush({ timeoutMs: 5000 })
  const stats = orchestrator.evaluation.getStats()
  assert.equal(stats.sampled, 3)
  assert.equal(stats.enqueued + stats.dropped, 3)
  assert.ok(stats.dropped >= 1)
  assert.equal(stats.storeFailed, stats.enqueued)
  assert.equal(flushed.status, 'error')
  const codes = diagnostics.map((d) => d.code)
  assert.ok(codes.includes('scorer_failed') && codes.includes('store_append_failed'), codes.join())
  assert.ok(diagnostics.every((d) => !JSON.stringify(d).includes('run 1')), 'diagnostics carry no run content')
})

test('online evaluation: sampling rules, zero sampling, and configurations refused by name', async () => {
  const seen = []
  const orchestrator = new OpenMultiAgent({
    evaluation: { scorers: [toolCallSuccessScorer()], sample: (c) => { seen.push(c.status.code); return false }, diagnostics: 'silent' },
  })
  await orchestrator.runAgent(AGENT, 'x')
  assert.deepEqual(seen, ['ok'])
  assert.equal(orchestrator.evaluation.getStats().sampled, 0)
  const none = new OpenMultiAgent({ evaluation: { scorers: [toolCallSuccessScorer()], sample: 0 } })
  await none.runAgent(AGENT, 'x')
  assert.deepEqual(none.evaluation.getStats(), { sampled: 0, enqueued: 0, completed: 0, dropped: 0, failed: 0, storeFailed: 0 })
  assert.throws(() => new OpenMultiAgent({ evaluation: { scorers: [], sample: 1 } }), { message: 'OnlineEvaluationConfig.scorers must contain at least one scorer.' })
  assert.throws(() => new OpenMultiAgent({ evaluation: { scorers: [toolCallSuccessScorer()], sample: 2 } }), RangeError)
  assert.throws(() => new OpenMultiAgent({ evaluation: { scorers: [toolCallSuccessScorer()], sample: 1, sampling: 1 } }), /"sampling"/)
  assert.throws(() => new OpenMultiAgent({ evaluation: { scorers: [toolCallSuccessScorer()], sample: 1, maxConcurrent: 0 } }), { message: 'maxConcurrent must be a positive integer.' })
})

/** A judge scorer whose one judge answers a passing verdict (4 input and 3 output tokens). */
function verdictJudge() {
  const adapter = {
    name: 'verdict-fixture',
    async chat(_messages, options) {
      return { id: 'v', content: [{ type: 'text', text: '{"score": 1, "reason": "fine"}' }], model: options.model, stop_reason: 'end_turn', usage: { input_tokens: 4, output_tokens: 3 } }
    },
    async *stream() {},
  }
  return createJudgeScorer({ name: 'judge', version: '1', judges: [{ name: 'j', model: 'judge-model', adapter }] })
}

test("online evaluation's cost budget prices the judges' usage with estimateCost and drops runs once spent", async () => {
  const priced = []
  const diagnostics = []
  const orchestrator = new OpenMultiAgent({
    estimateCost: (usage, context) => { priced.push([usage, context]); return 0.6 },
    evaluation: { scorers: [verdictJudge()], sample: 1, budget: { maxCostPerHour: 1 }, onDiagnostic: (d) => diagnostics.push(d) },
  })
  for (let i = 0; i < 3; i++) {
    assert.ok((await orchestrator.runAgent(AGENT, 'x')).success)
    await orchestrator.evaluation.forceFlush({ timeoutMs: 5000 })
  }
  // 0.6 spent after the first run, 1.2 after the second: the third finds the hour's budget spent.
  const { enqueued, completed, dropped, failed } = orchestrator.evaluation.getStats()
  assert.deepEqual([enqueued, completed, dropped, failed], [2, 2, 1, 0])
  const usage = { input_tokens: 4, output_tokens: 3 }
  assert.deepEqual(priced, [[usage, { agentName: 'j', model: 'judge-model', phase: 'agent' }], [usage, { agentName: 'j', model: 'judge-model', phase: 'agent' }]])
  assert.deepEqual(diagnostics.map((d) => [d.code, d.count, d.message]), [['budget_exhausted', 1, 'Online evaluation cost budget is exhausted.']])

  const inactive = []
  const unpriced = new OpenMultiAgent({ evaluation: { scorers: [verdictJudge()], sample: 1, budget: { maxCostPerHour: 1 }, onDiagnostic: (d) => inactive.push(d) } })
  assert.deepEqual(inactive.map((d) => d.message), ['Cost budget is inactive because no estimateCost function was configured.'])
  await unpriced.runAgent(AGENT, 'x')
  assert.equal((await unpriced.evaluation.forceFlush({ timeoutMs: 5000 })).status, 'ok')

  const unestimated = []
  for (const estimateCost of [() => { throw new Error('no price list') }, () => Number.NaN]) {
    const failing = new OpenMultiAgent({ estimateCost, evaluation: { scorers: [verdictJudge()], sample: 1, budget: { maxCostPerHour: 1 }, onDiagnostic: (d) => unestimated.push(d) } })
    await failing.runAgent(AGENT, 'x')
    assert.deepEqual(await failing.evaluation.forceFlush({ timeoutMs: 5000 }), { status: 'partial', accepted: 1, exported: 1, dropped: 0, failed: 1 })
  }
  assert.deepEqual(unestimated.map((d) => d.message), Array(2).fill('Online evaluation cost could not be estimated; the cost budget remains best-effort.'))
})
