// Structured output (OMA's outputSchema) through the package's public API: the shared table
// fixtures/structured-output.json (the Python suite and the Rust harness run it too) with the
// schema as a JSON Schema object, then a zod schema, validated here with zod as OMA does.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import { readFileSync } from 'node:fs'
import { z } from 'zod'
import { Agent, StructuredOutputValidationError } from '../src/index.js'

const table = JSON.parse(
  readFileSync(new URL('../../../fixtures/structured-output.json', import.meta.url), 'utf8'),
)

let server
let loopback
let answers = []
const requests = []

before(async () => {
  server = http.createServer((req, res) => {
    const chunks = []
    req.on('data', (c) => chunks.push(c))
    req.on('end', () => {
      requests.push(JSON.parse(Buffer.concat(chunks).toString('utf8')))
      const text = answers[Math.min(requests.length - 1, answers.length - 1)]
      if (requests.at(-1).stream === true) {
        const usage = { input_tokens: 10, output_tokens: 5 }
        const events = [
          { type: 'message_start', message: { id: 'm', type: 'message', role: 'assistant', content: [], model: 'claude-sonnet-4-6', stop_reason: null, usage } },
          { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
          { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } },
          { type: 'content_block_stop', index: 0 },
          { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 5 } },
          { type: 'message_stop' },
        ]
        res.writeHead(200, { 'content-type': 'text/event-stream' })
        res.end(events.map((e) => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`).join(''))
        return
      }
      const body = JSON.stringify({
        id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-sonnet-4-6',
        content: [{ type: 'text', text }], stop_reason: 'end_turn',
        usage: { input_tokens: 10, output_tokens: 5 },
      })
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) })
      res.end(body)
    })
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  loopback = `http://127.0.0.1:${server.address().port}`
})

after(() => server.close())

function agent(outputSchema, systemPrompt) {
  return new Agent({
    name: 'rater', model: 'claude-sonnet-4-6', provider: 'anthropic', apiKey: 'sk-test',
    baseURL: loopback, systemPrompt, outputSchema,
  })
}

for (const c of table.cases) {
  test(`table: ${c.name}`, async () => {
    answers = c.answers
    requests.length = 0
    const result = await agent(c.schema, c.systemPrompt).run('Rate it.')
    const expect = c.expect
    assert.equal(result.success, expect.success)
    assert.deepEqual(result.structured ?? null, expect.structured)
    assert.equal(result.output, expect.output)
    assert.deepEqual([result.tokenUsage.input_tokens, result.tokenUsage.output_tokens], expect.tokens)
    assert.equal(requests.length, expect.requests)
    for (const body of requests) {
      assert.ok(body.system.startsWith(`${c.systemPrompt}\n\n## Output Format (REQUIRED)\n`), body.system)
    }
    if (expect.feedback !== undefined) {
      const last = requests[1].messages.at(-1)
      assert.equal(last.role, 'user')
      assert.ok(last.content[0].text.includes(expect.feedback), last.content[0].text)
    }
    for (const [key, value] of Object.entries(expect.errorInfo ?? {})) {
      assert.deepEqual(result.errorInfo[key], value, key)
    }
    if (!expect.success) assert.ok(result.error instanceof StructuredOutputValidationError)
  })
}

for (const bad of table.badSchemas) {
  test(`a schema that is no schema is refused before any request: ${bad.name}`, async () => {
    requests.length = 0
    assert.throws(() => agent(bad.schema, undefined), (error) => {
      assert.match(error.message, /outputSchema/)
      if (!(error instanceof TypeError)) assert.ok(error.message.includes(bad.error), error.message)
      return true
    })
    assert.equal(requests.length, 0)
  })
}

test('a zod schema validates with zod: its messages in the feedback, its output as structured', async () => {
  const Verdict = z.object({
    title: z.string().describe('A short title'),
    score: z.number().min(0).max(1),
  }).transform((v) => ({ ...v, rated: true }))
  answers = ['{"title": "Fine", "score": 3}', '{"title": "Fine", "score": 0.5, "extra": 1}']
  requests.length = 0
  const result = await agent(Verdict, 'You rate.').run('Rate it.')
  assert.equal(result.success, true)
  // zod's own output: unknown keys dropped, the transform applied.
  assert.deepEqual(result.structured, { title: 'Fine', score: 0.5, rated: true })
  assert.equal(requests.length, 2)
  // The schema is shown as OMA's zodToJsonSchema writes it (no bounds on numbers).
  assert.ok(requests[0].system.includes('"description": "A short title"'), requests[0].system)
  const feedback = requests[1].messages.at(-1).content[0].text
  assert.ok(
    feedback.includes('Error: Output validation failed:\n  - score: Number must be less than or equal to 1'),
    feedback,
  )
})

test('a stream sends the instruction and validates nothing, as OMA', async () => {
  answers = ['not JSON']
  requests.length = 0
  let done
  for await (const event of agent({ type: 'object' }, 'You rate.').stream('Rate it.')) {
    if (event.type === 'done') done = event.data
  }
  assert.equal(done.success, true)
  assert.equal(done.structured, undefined)
  assert.equal(requests.length, 1)
  assert.ok(requests[0].system.includes('## Output Format (REQUIRED)'))
})
