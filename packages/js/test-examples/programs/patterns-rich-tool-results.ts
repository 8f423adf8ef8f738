// Mirrors the API surface of OMA's patterns/rich-tool-results example: a defineTool with a zod
// outputSchema returning structured `data` and a `modelOutput` of text and an image, given as
// customTools and granted by name, run through OpenMultiAgent.runAgent with onProgress.
import { z } from 'zod'
import { defineTool, OpenMultiAgent } from '@open-multi-agent/core'
import type { AgentConfig } from '@open-multi-agent/core'

const DOT = 'iVBORw0KGgoAAAANSUhEUgAAAAIAAAABCAIAAAB7QOjdAAAADUlEQVR4nGP4zwAE/wEHAAH/4iOeWQAAAABJRU5ErkJggg=='

const thumbnail = defineTool({
  name: 'thumbnail',
  description: 'Make a thumbnail for an asset.',
  inputSchema: z.object({ asset: z.string() }),
  outputSchema: z.object({ id: z.string(), bytes: z.number().int().positive() }),
  execute: async ({ asset }) => ({
    data: { id: `thumb-${asset}`, bytes: Buffer.from(DOT, 'base64').byteLength },
    modelOutput: [
      { type: 'text', text: `Thumbnail of ${asset}.` },
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: DOT } },
    ],
  }),
})

const agent: AgentConfig = {
  name: 'thumbnailer',
  provider: 'anthropic',
  model: 'claude-sonnet-4-6',
  tools: ['thumbnail'],
  customTools: [thumbnail],
  systemPrompt: 'Make one thumbnail, look at it, describe it.',
}

const orchestrator = new OpenMultiAgent({
  onProgress(event) {
    if (event.type === 'agent_complete') console.log('complete')
  },
})
const result = await orchestrator.runAgent(agent, 'Thumbnail the logo.')
console.log(result.output)
console.log(JSON.stringify(result.toolCalls.map((c) => [c.toolName, c.input, c.output])))
