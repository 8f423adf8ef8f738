// npm's `openai` client against the gateway's OpenAI-compatible route, as its users write it
// (`new OpenAI({ baseURL: <gateway>/v1, apiKey: <token> })`): plain and streamed. Run by run.sh
// with `node --test`; the gateway (OMA_GATEWAY_URL, OMA_GATEWAY_TOKEN) fronts a loopback provider.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import OpenAI from 'openai'

const CANNED_TEXT = 'Hello from the simulator.'
const client = new OpenAI({
  baseURL: `${process.env.OMA_GATEWAY_URL}/v1`,
  apiKey: process.env.OMA_GATEWAY_TOKEN,
  timeout: 30_000,
  maxRetries: 0,
})

test('a plain completion', async () => {
  const answer = await client.chat.completions.create({
    model: 'anthropic/claude-sonnet-4-6',
    messages: [{ role: 'user', content: 'Hello?' }],
  })
  assert.equal(answer.choices[0].message.content, CANNED_TEXT)
  assert.equal(answer.usage.total_tokens, 18)
})

test('a streamed completion', async () => {
  const stream = await client.chat.completions.create({
    model: 'openai/gpt-4o',
    messages: [{ role: 'user', content: 'Hello?' }],
    stream: true,
  })
  let text = ''
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? ''
  assert.equal(text, CANNED_TEXT)
})

test('a refusal is a BadRequestError with OMA\'s message', async () => {
  await assert.rejects(
    client.chat.completions.create({
      model: 'openai/gpt-4o',
      messages: [{ role: 'user', content: [{ type: 'video_url', video_url: { url: 'file:///etc/passwd' } }] }],
    }),
    (error) => error instanceof OpenAI.BadRequestError && /http/i.test(error.message),
  )
})
