// A zod-typed tool through customTools, run by OpenMultiAgent.runAgent.
import { z } from 'zod'
import { OpenMultiAgent, defineTool, type ToolCallRecord } from '@open-multi-agent/core'

const add = defineTool({
  name: 'add',
  description: 'Add two integers.',
  inputSchema: z.object({
    a: z.number().int().describe('first addend'),
    b: z.number().int().describe('second addend'),
  }),
  execute: async ({ a, b }) => ({ data: String(a + b) }),
})

const oma = new OpenMultiAgent({ defaultModel: 'claude-sonnet-4-6' })
const result = await oma.runAgent(
  { name: 'calculator', provider: 'anthropic', customTools: [add], maxTurns: 3 },
  'What is 2 + 3?',
)
const records: ToolCallRecord[] = result.toolCalls
console.log(JSON.stringify({
  success: result.success,
  status: result.status?.code,
  output: result.output,
  toolCalls: records.map((r) => ({ toolName: r.toolName, input: r.input, output: r.output, duration: typeof r.duration })),
  recordKeys: records.map((r) => Object.keys(r).sort()),
}))
