// Caller-owned history with an image block, through runAgent (readonly inputs).
import { OpenMultiAgent, type AgentRunInput, type ContentBlock, type LLMMessage } from '@open-multi-agent/core'

const pixel = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNk+A8AAQUBAScY42YAAAAASUVORK5CYII='
const question: readonly ContentBlock[] = [
  { type: 'text', text: 'What colour is this pixel?' },
  { type: 'image', source: { type: 'base64', media_type: 'image/png', data: pixel } },
]
const history: readonly LLMMessage[] = [
  { role: 'user', content: [{ type: 'text', text: 'Describe only what you see.' }] },
  { role: 'assistant', content: [{ type: 'text', text: 'Understood.' }] },
  { role: 'user', content: [...question] },
]
const input: AgentRunInput = history

const oma = new OpenMultiAgent({ defaultProvider: 'anthropic', defaultModel: 'claude-sonnet-4-6' })
const result = await oma.runAgent({ name: 'vision' }, input)
console.log(JSON.stringify({
  keys: Object.keys(result).sort(),
  success: result.success,
  status: result.status?.code,
  output: result.output,
  messages: result.messages.length,
}))
