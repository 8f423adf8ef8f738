// A loopback Anthropic-shaped provider for test-browser/, answering pages of another origin
// (CORS: preflights answered, `content-encoding` exposed to the page). What it answers depends on
// the request: `a stream` an SSE text stream, `a tool` a tool call then (with its result) a text,
// `a hang` nothing at all (for cancellation), `a big answer` 200 KB of text, `a redirect` a 302
// (to /followed, which nothing may ask for), anything else a text. A JSON answer is gzipped
// when the request accepts gzip (a browser does; the package asks for identity elsewhere), so a
// page gets a body its browser decoded. Every request is recorded.
import http from 'node:http'
import { gzipSync } from 'node:zlib'

const CORS = {
  'access-control-allow-origin': '*',
  'access-control-expose-headers': 'content-encoding, content-length, request-id',
}

function message(content, stop = 'end_turn') {
  return {
    id: 'msg_browser', type: 'message', role: 'assistant', model: 'claude-test', content,
    stop_reason: stop, stop_sequence: null, usage: { input_tokens: 9, output_tokens: 4 },
  }
}

function sse(pieces) {
  const events = [
    ['message_start', { type: 'message_start', message: { ...message([]), stop_reason: null, usage: { input_tokens: 9, output_tokens: 1 } } }],
    ['content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }],
    ...pieces.map((text) => ['content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } }]),
    ['content_block_stop', { type: 'content_block_stop', index: 0 }],
    ['message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: pieces.length } }],
    ['message_stop', { type: 'message_stop' }],
  ]
  return events.map(([event, data]) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`)
}

/** The first user text of the request and the tool results it carries. */
function read(body) {
  const first = body?.messages?.[0]?.content
  const text = typeof first === 'string' ? first : (first ?? []).find((b) => b.type === 'text')?.text ?? ''
  const results = (body?.messages ?? []).flatMap((m) => (Array.isArray(m.content) ? m.content : [])).filter((b) => b.type === 'tool_result')
  return { text, results }
}

export async function startProvider() {
  const requests = []
  const sockets = new Set()
  const server = http.createServer((req, res) => {
    if (req.method === 'OPTIONS') {
      res.writeHead(204, {
        ...CORS,
        'access-control-allow-methods': 'POST',
        'access-control-allow-headers': req.headers['access-control-request-headers'] ?? '',
        'access-control-max-age': '600',
      })
      res.end()
      return
    }
    const chunks = []
    req.on('data', (c) => chunks.push(c))
    req.on('end', () => {
      let body = null
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'))
      } catch {}
      requests.push({ method: req.method, url: req.url, headers: req.headers, body })
      const { text, results } = read(body)
      if (text === 'a hang') return // never answers: the page cancels the run
      if (text === 'a redirect') {
        res.writeHead(302, { ...CORS, location: '/followed', 'content-length': '0' })
        res.end()
        return
      }
      if (body?.stream === true) {
        res.writeHead(200, { ...CORS, 'content-type': 'text/event-stream' })
        for (const piece of sse(['Hel', 'lo ', 'stream'])) res.write(piece)
        res.end()
        return
      }
      let answer
      if (text === 'a tool' && results.length === 0) {
        answer = message([{ type: 'tool_use', id: 'toolu_1', name: 'add', input: { a: 2, b: 3 } }], 'tool_use')
      } else if (text === 'a tool') {
        answer = message([{ type: 'text', text: `the sum is ${results[0].content}` }])
      } else if (text === 'a big answer') {
        answer = message([{ type: 'text', text: ' '.repeat(200000) }])
      } else {
        answer = message([{ type: 'text', text: `answer to ${text}` }])
      }
      const json = Buffer.from(JSON.stringify(answer))
      const gzip = /\bgzip\b/.test(req.headers['accept-encoding'] ?? '')
      const out = gzip ? gzipSync(json) : json
      res.writeHead(200, {
        ...CORS,
        'content-type': 'application/json',
        'content-length': String(out.length),
        ...(gzip ? { 'content-encoding': 'gzip' } : {}),
      })
      res.end(out)
    })
  })
  server.on('connection', (s) => {
    sockets.add(s)
    s.on('close', () => sockets.delete(s))
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    requests,
    close: () => new Promise((resolve) => {
      for (const s of sockets) s.destroy()
      server.close(() => resolve())
    }),
  }
}
