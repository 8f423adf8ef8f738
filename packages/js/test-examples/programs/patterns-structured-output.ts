// Mirrors the API surface of OMA's patterns/structured-output example: an AgentConfig with a zod
// outputSchema, run three times through OpenMultiAgent.runAgent, reading `structured` when the
// final answer validated and the raw output when it did not.
import { z } from 'zod'
import { OpenMultiAgent } from '@open-multi-agent/core'
import type { AgentConfig } from '@open-multi-agent/core'

const Verdict = z.object({
  title: z.string().describe('A short title'),
  mood: z.enum(['good', 'bad', 'meh']),
  score: z.number().min(0).max(1),
  tags: z.array(z.string()),
})
type Verdict = z.infer<typeof Verdict>

const rater: AgentConfig = {
  name: 'rater',
  model: 'claude-sonnet-4-6',
  systemPrompt: 'You rate short texts.',
  outputSchema: Verdict,
}
const orchestrator = new OpenMultiAgent({ defaultModel: 'claude-sonnet-4-6' })
for (const text of ['first text', 'second text', 'third text']) {
  const result = await orchestrator.runAgent(rater, `Rate: "${text}"`)
  if (result.structured) {
    const v = result.structured as Verdict
    console.log(`${v.mood} ${v.score} ${v.title} [${v.tags.join(', ')}]`)
  } else {
    console.log(`validation failed: ${result.output.slice(0, 100)}`)
  }
  console.log(`success ${result.success}, tokens ${result.tokenUsage.input_tokens}/${result.tokenUsage.output_tokens}`)
}
