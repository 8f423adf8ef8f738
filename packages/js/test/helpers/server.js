// A loopback provider for the tests: node:http on 127.0.0.1:0, answering Anthropic- and
// OpenAI-shaped JSON and SSE. Responses are queued per test; every request is recorded.
import http from 'node:http'

export function anthropicMessage(content, { usage = { input_tokens: 12, output_tokens: 6 }, stop = 'end_turn', model = 'claude-test' } = {}) {
  if (typeof content === 'string') content = [{ type: 'text', text: content }]
  return {
    status: 200,
    json: {
      id: 'msg_1', type: 'message', role: 'assistant', model, content,
      stop_reason: stop, stop_sequence: null, usage,
    },
  }
}

export function anthropicToolUse(calls, text) {
  const content = []
  if (text) content.push({ type: 'text', text })
  for (const [id, name, input] of calls) content.push({ type: 'tool_use', id, name, input })
  return anthropicMessage(content, { stop: 'tool_use' })
}

export function openaiMessage(text, { usage = { prompt_tokens: 7, completion_tokens: 3 } } = {}) {
  return {
    status: 200,
    json: {
      id: 'chatcmpl-1', object: 'chat.completion', created: 1, model: 'gpt-test',
      choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }],
      usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens },
    },
  }
}

/** An Anthropic SSE stream of text deltas. */
export function anthropicSse(pieces, { delayMs = 0 } = {}) {
  const events = [
    ['message_start', { type: 'message_start', message: { id: 'msg_s', type: 'message', role: 'assistant', model: 'claude-test', content: [], stop_reason: null, usage: { input_tokens: 10, output_tokens: 1 } } }],
    ['content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }],
    ...pieces.map((text) => ['content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } }]),
    ['content_block_stop', { type: 'content_block_stop', index: 0 }],
    ['message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: pieces.length } }],
    ['message_stop', { type: 'message_stop' }],
  ]
  return { status: 200, sse: events.map(([event, data]) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`), delayMs }
}

/** The SSE form of a non-streaming Anthropic message (for requests with `stream: true`). */
export function anthropicMessageSse(message) {
  const events = [['message_start', { type: 'message_start', message: { ...message, content: [], stop_reason: null, usage: { input_tokens: message.usage.input_tokens, output_tokens: 0 } } }]]
  message.content.forEach((block, index) => {
    if (block.type === 'text') {
      events.push(['content_block_start', { type: 'content_block_start', index, content_block: { type: 'text', text: '' } }])
      events.push(['content_block_delta', { type: 'content_block_delta', index, delta: { type: 'text_delta', text: block.text } }])
    } else if (block.type === 'tool_use') {
      events.push(['content_block_start', { type: 'content_block_start', index, content_block: { type: 'tool_use', id: block.id, name: block.name, input: {} } }])
      events.push(['content_block_delta', { type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: JSON.stringify(block.input) } }])
    }
    events.push(['content_block_stop', { type: 'content_block_stop', index }])
  })
  events.push(['message_delta', { type: 'message_delta', delta: { stop_reason: message.stop_reason, stop_sequence: null }, usage: { output_tokens: message.usage.output_tokens } }])
  events.push(['message_stop', { type: 'message_stop' }])
  return events.map(([event, data]) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`)
}

export async function startServer() {
  const queue = []
  const requests = []
  let fallback = anthropicMessage('default answer')
  const sockets = new Set()
  const server = http.createServer((req, res) => {
    const chunks = []
    req.on('data', (c) => chunks.push(c))
    req.on('end', async () => {
      const text = Buffer.concat(chunks).toString('utf8')
      let body = null
      try { body = JSON.parse(text) } catch {}
      requests.push({ method: req.method, url: req.url, headers: req.headers, body, text })
      let spec = queue.length ? queue.shift() : fallback
      if (typeof spec === 'function') spec = await spec({ url: req.url, body, headers: req.headers })
      if (spec.hang) return // never answers (timeouts)
      if (spec.delayFirstMs) await new Promise((r) => setTimeout(r, spec.delayFirstMs))
      if (body?.stream === true && spec.json?.type === 'message' && (spec.status ?? 200) === 200) {
        spec = { ...spec, sse: anthropicMessageSse(spec.json) }
      }
      if (spec.sse) {
        res.writeHead(spec.status ?? 200, { 'content-type': 'text/event-stream', ...(spec.headers ?? {}) })
        for (const piece of spec.sse) {
          res.write(piece)
          if (spec.delayMs) await new Promise((r) => setTimeout(r, spec.delayMs))
        }
        res.end()
        return
      }
      const payload = spec.json !== undefined ? JSON.stringify(spec.json) : (spec.body ?? '')
      res.writeHead(spec.status ?? 200, { 'content-type': 'application/json', ...(spec.headers ?? {}) })
      res.end(payload)
    })
  })
  server.on('connection', (s) => { sockets.add(s); s.on('close', () => sockets.delete(s)) })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address()
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    queue: (...specs) => queue.push(...specs),
    setFallback: (spec) => { fallback = spec },
    reset: () => { queue.length = 0; requests.length = 0; fallback = anthropicMessage('default answer') },
    close: () => new Promise((resolve) => { for (const s of sockets) s.destroy(); server.close(() => resolve()) }),
  }
}
