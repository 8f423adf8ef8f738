// OMA's Agent from the oma-component package, as an OMA program writes it: a conversation with an
// image, a tool the model calls, and the run's result. The "provider" is a few lines of node:http
// on 127.0.0.1 that answers in OpenAI's format (first a tool call, then text), so the example runs
// offline; point `baseURL` at a real OpenAI-compatible endpoint (and set `apiKey`) to use one.
//
//   cd packages/js && npm install && npm run build      # once: builds the package
//   cd examples/js && npm install && npm start
import http from 'node:http'
import { readFile } from 'node:fs/promises'
import { Agent } from 'oma-component'

const replies = [
  { choices: [{ index: 0, finish_reason: 'tool_calls', message: { role: 'assistant', content: null,
    tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'lookup_port', arguments: '{"city":"Lisbon"}' } }] } }],
    usage: { prompt_tokens: 40, completion_tokens: 9 } },
  { choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content: 'Yes, a harbour: ferries leave it from Cais do Sodré.' } }],
    usage: { prompt_tokens: 61, completion_tokens: 12 } },
]
const requests = []
const provider = http.createServer(async (req, res) => {
  let body = ''
  for await (const chunk of req) body += chunk
  requests.push(JSON.parse(body))
  const reply = replies[Math.min(requests.length - 1, replies.length - 1)]
  res.setHeader('content-type', 'application/json')
  res.end(JSON.stringify({ id: `chatcmpl-${requests.length}`, object: 'chat.completion', created: 0, model: 'gpt-4o', ...reply }))
})
await new Promise((resolve) => provider.listen(0, '127.0.0.1', resolve))
const baseURL = `http://127.0.0.1:${provider.address().port}/v1`

// The conversation's first message (text and an image) from the examples' OMA JSON.
const conversation = JSON.parse(await readFile(new URL('../conversations/vision.json', import.meta.url), 'utf8'))

const agent = new Agent({
  name: 'guide', model: 'gpt-4o', provider: 'openai', baseURL, apiKey: 'sk-example',
  tools: [{
    name: 'lookup_port',
    description: 'Where ferries leave from in a city',
    inputSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    execute: async ({ city }) => ({ data: `${city}: Cais do Sodré` }),
  }],
})
try {
  const result = await agent.run(conversation)
  console.log(`success: ${result.success}`)
  console.log(`output: ${result.output}`)
  console.log(`tool calls: ${result.toolCalls.map((call) => call.toolName).join(', ')}`)
  console.log(`provider requests: ${requests.length}; tokens: ${JSON.stringify(result.tokenUsage)}`)
  process.exitCode = result.success && requests.length === 2 ? 0 : 1
} finally {
  provider.close()
}
