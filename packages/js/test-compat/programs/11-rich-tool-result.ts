// A tool that returns application data plus a model-visible image.
import { z } from 'zod'
import { OpenMultiAgent, defineTool, type ToolResultContentPart } from '@open-multi-agent/core'

const pixel = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNk+A8AAQUBAScY42YAAAAASUVORK5CYII='
const preview: readonly ToolResultContentPart[] = [
  { type: 'text', text: 'Preview ready.' },
  { type: 'image', source: { type: 'base64', media_type: 'image/png', data: pixel } },
]
const render = defineTool({
  name: 'render',
  description: 'Render a preview.',
  inputSchema: z.object({ label: z.string() }),
  outputSchema: z.object({ id: z.string() }),
  execute: async ({ label }) => ({ data: { id: `preview-${label}` }, modelOutput: preview }),
})
const oma = new OpenMultiAgent()
const result = await oma.runAgent(
  { name: 'reviewer', model: 'claude-sonnet-4-6', provider: 'anthropic', tools: ['render'], customTools: [render] },
  'Render the logo and describe it.',
)
console.log(JSON.stringify({ success: result.success, toolCalls: result.toolCalls.map((c) => c.output) }))
