// Mirrors the API surface of OMA's patterns/eval-offline-regression example: an eval set of two
// cases, a rule scorer (defineScorer) and an answer-relevancy judge with a user-written
// LLMAdapter, two agent targets (targetFromAgent) with another adapter, runEvalSet twice with
// repeats and metadata, and evaluateGate of the candidate against the baseline.
import type { LLMAdapter, LLMMessage } from '@open-multi-agent/core'
import {
  createAnswerRelevancyScorer,
  defineEvalSet,
  defineScorer,
  evaluateGate,
  runEvalSet,
  targetFromAgent,
  type EvalRunReport,
} from '@open-multi-agent/core/eval'

function lastUserText(messages: LLMMessage[]): string {
  const user = [...messages].reverse().find((message) => message.role === 'user')
  return (user?.content ?? [])
    .filter((block): block is { type: 'text'; text: string } => block.type === 'text')
    .map((block) => block.text)
    .join('\n')
}

const targetAdapter: LLMAdapter = {
  name: 'local-target',
  async chat(messages, options) {
    const prompt = lastUserText(messages)
    return {
      id: `local-${options.model}`,
      content: [{ type: 'text', text: prompt.includes('3 * 3') ? '9' : 'Rome' }],
      model: options.model,
      stop_reason: 'end_turn',
      usage: { input_tokens: 6, output_tokens: 1 },
    }
  },
  async *stream() {},
}

const judgeAdapter: LLMAdapter = {
  name: 'local-judge',
  async chat(_messages, options) {
    return {
      id: 'local-judge-1',
      content: [{ type: 'text', text: '{"score":1,"reason":"answers exactly what was asked"}' }],
      model: options.model,
      stop_reason: 'end_turn',
      usage: { input_tokens: 25, output_tokens: 6 },
    }
  },
  async *stream() {},
}

const set = defineEvalSet({
  name: 'offline-regression-local',
  version: '2.0.0',
  cases: [
    { id: 'multiply', input: 'What is 3 * 3?', expected: '9', tags: ['critical'] },
    { id: 'capital', input: 'What is the capital of Italy?', expected: 'Rome' },
  ],
})

const exact = defineScorer({
  name: 'exact_match',
  version: '1',
  score({ output, evalCase }) {
    const pass = output === evalCase.expected
    return { score: pass ? 1 : 0, pass }
  },
})
const relevancy = createAnswerRelevancyScorer({
  version: 'local-prompt-v1',
  judges: [{
    name: 'local-relevancy-judge',
    model: 'local-judge-v1',
    adapter: judgeAdapter,
  }],
})

const targets = [
  {
    name: 'baseline-model',
    target: targetFromAgent({
      name: 'baseline-agent',
      model: 'local-baseline-v1',
      adapter: targetAdapter,
    }),
  },
  {
    name: 'candidate-model',
    target: targetFromAgent({
      name: 'candidate-agent',
      model: 'local-candidate-v2',
      systemPrompt: 'Reply with the answer only.',
      adapter: targetAdapter,
    }),
  },
] as const

const reports: EvalRunReport[] = []
for (const entry of targets) {
  reports.push(await runEvalSet(set, entry.target, {
    scorers: [exact, relevancy],
    repeats: 2,
    metadata: { target_name: entry.name },
  }))
}

const [baseline, candidate] = reports
if (baseline === undefined || candidate === undefined) throw new Error('Expected two reports.')
const verdict = evaluateGate(candidate, {
  schemaVersion: 1,
  thresholds: [
    { scorer: 'exact_match', metric: 'passRate', min: 1 },
    { scorer: 'answer_relevancy', metric: 'avg', min: 0.9 },
  ],
  maxScorerErrorRate: 0,
  maxTargetErrorRate: 0,
  baseline: { maxRegression: 0 },
}, baseline)

if (!verdict.pass) throw new Error(`Local gate failed: ${JSON.stringify(verdict.failures)}`)
console.log(JSON.stringify({
  targets: targets.map((target) => target.name),
  candidate: candidate.aggregates,
  verdict,
}, null, 2))
