// Mirrors the API surface of OMA's basics/structured-input example: a typed LLMMessage history
// (user, assistant, then user text and a base64 image) given to OpenMultiAgent.runAgent with a
// default provider and model.
import { OpenMultiAgent, type LLMMessage } from '@open-multi-agent/core'

// A 2x1 PNG made for this test.
const PIXELS = 'iVBORw0KGgoAAAANSUhEUgAAAAIAAAABCAIAAAB7QOjdAAAADUlEQVR4nGP4zwAE/wEHAAH/4iOeWQAAAABJRU5ErkJggg=='

const messages: LLMMessage[] = [
  { role: 'user', content: [{ type: 'text', text: 'Only describe what is visible.' }] },
  { role: 'assistant', content: [{ type: 'text', text: 'Agreed.' }] },
  {
    role: 'user',
    content: [
      { type: 'text', text: 'Describe this picture in one line.' },
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PIXELS } },
    ],
  },
]

const oma = new OpenMultiAgent({ defaultProvider: 'anthropic', defaultModel: process.env.OMA_MODEL ?? 'claude-sonnet-4-6' })
const result = await oma.runAgent({ name: 'looker' }, messages)
if (!result.success) throw new Error(result.output)
console.log(result.output)
