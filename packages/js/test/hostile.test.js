// Hostile providers on loopback: redirects, bodies past the response limit, gzip bombs,
// trickling and stalling answers. Each test bounds its own time, so a regression fails instead
// of hanging.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import { execFile } from 'node:child_process'
import { gzipSync } from 'node:zlib'
import { Agent } from '../src/index.js'
import { anthropicMessage, anthropicSse } from './helpers/server.js'

const KEY = 'sk-ant-hostile-SECRETKEY0123456789'
const MiB = 1 << 20

/** A loopback listener: `handler(req, res, body)` answers; requests and sockets are recorded. */
async function listen(handler) {
  const requests = []
  const sockets = new Set()
  const server = http.createServer((req, res) => {
    const chunks = []
    req.on('data', (c) => chunks.push(c))
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8')
      requests.push({ method: req.method, url: req.url, headers: req.headers, text })
      handler(req, res, text)
    })
  })
  server.on('connection', (s) => { sockets.add(s); s.on('close', () => sockets.delete(s)) })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    requests,
    close: () => new Promise((resolve) => { for (const s of sockets) s.destroy(); server.close(() => resolve()) }),
  }
}

function agent(url, extra = {}) {
  return new Agent({ name: 'hostile', model: 'claude-test', provider: 'anthropic', baseURL: url, apiKey: KEY, ...extra })
}

/** Writes `total` bytes of `piece`-sized chunks, honouring backpressure; resolves with what was
 * written when the client went away or everything was out. */
function pour(res, total, piece) {
  return new Promise((resolve) => {
    let written = 0
    let closed = false
    res.on('close', () => { closed = true; resolve({ written, complete: written >= total }) })
    const more = () => {
      while (!closed && written < total) {
        written += piece.length
        if (!res.write(piece)) { res.once('drain', more); return }
      }
      if (!closed) res.end(() => resolve({ written, complete: true }))
    }
    more()
  })
}

for (const status of [301, 302, 307, 308]) {
  test(`a ${status} to another origin is a provider error; the other origin sees nothing, the key stays`, { timeout: 10000 }, async () => {
    const elsewhere = await listen((req, res) => res.end(JSON.stringify(anthropicMessage('stolen').json)))
    const provider = await listen((req, res) => {
      res.writeHead(status, { location: `${elsewhere.url}/v1/messages`, 'content-type': 'text/plain' })
      res.end('moved')
    })
    try {
      for (const stream of [false, true]) {
        const a = agent(provider.url, { call: { maxRetries: 2, retryDelayMs: 1 } })
        const result = stream
          ? (await collect(a.stream('hi'))).at(-1).data.result
          : await a.run('hi')
        assert.equal(result.success, false)
        assert.equal(result.status.code, 'error')
        assert.equal(result.errorInfo.kind, 'provider')
        assert.equal(result.errorInfo.name, 'ProviderError')
        assert.equal(result.errorInfo.httpStatus, status)
        assert.equal(result.errorInfo.retryable, false)
        assert.equal(result.errorInfo.message, `${status} moved`)
        assert.ok(!JSON.stringify(result).includes('SECRETKEY'), JSON.stringify(result))
      }
      // One attempt per run (a redirect is not asked again), and none of them followed.
      assert.equal(provider.requests.length, 2)
      assert.equal(elsewhere.requests.length, 0)
    } finally {
      await provider.close()
      await elsewhere.close()
    }
  })
}

async function collect(iterable) {
  const out = []
  for await (const e of iterable) out.push(e)
  return out
}

test('a body past the response limit stops the read: the provider sees the connection close early', { timeout: 20000 }, async () => {
  const total = 64 * MiB
  const piece = Buffer.alloc(64 * 1024, 'a')
  let poured
  const provider = await listen((req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' })
    poured = pour(res, total, piece)
  })
  try {
    const t0 = Date.now()
    const result = await agent(provider.url, { call: { maxResponseBytes: MiB } }).run('hi')
    assert.equal(result.success, false)
    assert.equal(result.errorInfo.name, 'ProviderError')
    assert.equal(result.errorInfo.message, `200 response body exceeds the limit of ${MiB} bytes`)
    assert.equal(result.errorInfo.retryable, false)
    const { written, complete } = await poured
    // Whole-body reads took all 64 MiB before the limit was applied; now the read stops past
    // 1 MiB, and what the provider got out is that plus the sockets' buffers.
    assert.equal(complete, false, `the provider wrote all ${written} bytes`)
    assert.ok(written < 16 * MiB, `the provider wrote ${written} bytes`)
    assert.ok(Date.now() - t0 < 5000)
    assert.equal(provider.requests[0].headers['accept-encoding'], 'identity')
  } finally {
    await provider.close()
  }
})

test('a streamed body past the limit stops the read too', { timeout: 20000 }, async () => {
  const piece = Buffer.from(`: ${'x'.repeat(64 * 1024 - 3)}\n`)
  let poured
  const provider = await listen((req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    poured = pour(res, 64 * MiB, piece)
  })
  try {
    const events = await collect(agent(provider.url, { call: { maxResponseBytes: MiB } }).stream('hi'))
    const last = events.at(-1)
    assert.equal(last.type, 'error')
    assert.match(last.data.message, /exceeds the limit of 1048576 bytes/)
    const { written, complete } = await poured
    assert.equal(complete, false, `the provider wrote all ${written} bytes`)
    assert.ok(written < 16 * MiB, `the provider wrote ${written} bytes`)
  } finally {
    await provider.close()
  }
})

test('a gzip bomb is refused at its head, never inflated; identity is what was asked for', { timeout: 20000 }, async () => {
  // 64 MiB of zeros in about 64 KiB: inflated, it would pass the 1 MiB limit 64 times over.
  const bomb = gzipSync(Buffer.alloc(64 * MiB), { level: 9 })
  assert.ok(bomb.length < MiB)
  const provider = await listen((req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' })
    res.end(bomb)
  })
  try {
    const before = process.memoryUsage().rss
    const t0 = Date.now()
    for (const stream of [false, true]) {
      const a = agent(provider.url, { call: { maxResponseBytes: MiB, maxRetries: 2, retryDelayMs: 1 } })
      const result = stream ? (await collect(a.stream('hi'))).at(-1).data.result : await a.run('hi')
      assert.equal(result.success, false)
      assert.equal(result.errorInfo.name, 'ProviderError')
      assert.equal(result.errorInfo.message, '200 the response body is content-encoded (gzip); only identity is accepted')
      assert.equal(result.errorInfo.retryable, false)
    }
    assert.ok(Date.now() - t0 < 3000)
    assert.ok(process.memoryUsage().rss - before < 128 * MiB, 'the bomb was not inflated')
    assert.equal(provider.requests.length, 2)
    for (const req of provider.requests) assert.equal(req.headers['accept-encoding'], 'identity')
  } finally {
    await provider.close()
  }
})

/** Answers with a head, then one byte every `everyMs` until the client leaves (or 20 s). */
function trickle(contentType, everyMs = 100) {
  return (req, res) => {
    res.writeHead(200, { 'content-type': contentType })
    res.write(contentType === 'text/event-stream' ? ':\n' : ' ')
    const timer = setInterval(() => res.write(contentType === 'text/event-stream' ? '\n' : ' '), everyMs)
    const stop = setTimeout(() => { clearInterval(timer); res.end() }, 20000)
    res.on('close', () => { clearInterval(timer); clearTimeout(stop) })
  }
}

/** The run timed out: by a call's limit (`LLMCallTimeoutError`) unless `name` says the run's. */
function assertTimedOut(result, t0, withinMs, name = 'LLMCallTimeoutError') {
  const elapsed = Date.now() - t0
  assert.equal(result.success, false, JSON.stringify(result))
  assert.equal(result.status.code, 'timeout', JSON.stringify(result.status))
  assert.equal(result.errorInfo.name, name)
  assert.ok(elapsed < withinMs, `the run took ${elapsed} ms`)
}

test('a whole response that trickles a byte at a time is cut at the call timeout', { timeout: 10000 }, async () => {
  const provider = await listen(trickle('application/json'))
  try {
    const t0 = Date.now()
    // One attempt: the provider's default policy would retry a timeout.
    const result = await agent(provider.url, { call: { timeoutMs: 400, maxRetries: 0 } }).run('hi')
    assertTimedOut(result, t0, 1500)
    assert.ok(Date.now() - t0 >= 350)
  } finally {
    await provider.close()
  }
})

test('a stream that stalls is cut at the call timeout', { timeout: 10000 }, async () => {
  const provider = await listen((req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    res.write(anthropicSse(['partial']).sse[0]) // message_start, then nothing
  })
  try {
    const t0 = Date.now()
    const events = await collect(agent(provider.url, { call: { timeoutMs: 400 } }).stream('hi'))
    assertTimedOut(events.at(-1).data.result, t0, 1500)
  } finally {
    await provider.close()
  }
})

test('a stream that trickles ends at the run deadline and at the call deadline', { timeout: 15000 }, async () => {
  const provider = await listen(trickle('text/event-stream'))
  try {
    // The run's deadline is OMA's whole-run timeout; the call's, a call timeout.
    for (const [extra, name] of [[{ deadlineMs: 600 }, 'TimeoutError'], [{ call: { deadlineMs: 600 } }, 'LLMCallTimeoutError']]) {
      const t0 = Date.now()
      const events = await collect(agent(provider.url, extra).stream('hi'))
      assertTimedOut(events.at(-1).data.result, t0, 2000, name)
    }
    // And a whole response under the run deadline, with the call timeout left at 120 s.
    const t0 = Date.now()
    const result = await agent(provider.url, { deadlineMs: 600 }).run('hi')
    assertTimedOut(result, t0, 2000, 'TimeoutError')
  } finally {
    await provider.close()
  }
})

test('concurrent requests time out each at its own deadline, a shorter one armed later first', { timeout: 15000 }, async () => {
  // The Node transport keeps every request's deadline under one timer set for the earliest:
  // a request armed after a longer one, with a shorter timeout, moves it.
  const provider = await listen(() => {}) // never answers
  try {
    const t0 = Date.now()
    let longDone = null
    const long = agent(provider.url, { call: { timeoutMs: 1500, maxRetries: 0 } }).run('hi').then((r) => { longDone = Date.now(); return r })
    await new Promise((resolve) => setTimeout(resolve, 50))
    const t1 = Date.now()
    const short = await agent(provider.url, { call: { timeoutMs: 300, maxRetries: 0 } }).run('hi')
    assertTimedOut(short, t1, 1000)
    assert.ok(Date.now() - t1 >= 250, `the shorter timed out after ${Date.now() - t1} ms`)
    assert.equal(longDone, null, 'the longer is still waiting')
    assertTimedOut(await long, t0, 3500)
    assert.ok(longDone - t0 >= 1400, `the longer timed out after ${longDone - t0} ms`)
  } finally {
    await provider.close()
  }
})

test('a finished run leaves no timer holding the process open, with a long call timeout', { timeout: 20000 }, async () => {
  const provider = await listen((req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end(JSON.stringify(anthropicMessage('bye').json))
  })
  try {
    const index = new URL('../src/index.js', import.meta.url).href
    const script = `import { Agent } from ${JSON.stringify(index)}
const agent = new Agent({ name: 'exit', model: 'claude-test', provider: 'anthropic', baseURL: ${JSON.stringify(provider.url)}, apiKey: 'k', call: { timeoutMs: 60000 } })
const result = await agent.run('hi')
console.log(result.output)`
    const t0 = Date.now()
    const out = await new Promise((resolve, reject) => {
      execFile(process.execPath, ['--input-type=module', '-e', script], { timeout: 15000 }, (error, stdout, stderr) => {
        if (error) reject(new Error(`${error.message}: ${stderr}`))
        else resolve(stdout)
      })
    })
    assert.equal(out.trim(), 'bye')
    assert.ok(Date.now() - t0 < 10000, `the process took ${Date.now() - t0} ms to end`)
  } finally {
    await provider.close()
  }
})

test('a small whole response handed over in one answer reads as the same response in chunks', { timeout: 20000 }, async () => {
  const good = JSON.stringify(anthropicMessage('héllo wörld').json)
  const bodies = {
    json: Buffer.from(good),
    bom: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(good)]),
    'not UTF-8': Buffer.concat([Buffer.from(good.slice(0, 40)), Buffer.from([0xff, 0xfe]), Buffer.from(good.slice(40))]),
    'an error': Buffer.from(JSON.stringify({ type: 'error', error: { type: 'invalid_request_error', message: 'bad' } })),
  }
  for (const [name, body] of Object.entries(bodies)) {
    const outcomes = []
    for (const sized of [true, false]) {
      // With a content-length the body comes with its head (one `response` answer); chunked,
      // it is a head, chunks and an end.
      const provider = await listen((req, res) => {
        res.writeHead(name === 'an error' ? 400 : 200, { 'content-type': 'application/json', ...(sized ? { 'content-length': body.length } : {}) })
        if (sized) res.end(body)
        else { res.write(body.subarray(0, 10)); setTimeout(() => res.end(body.subarray(10)), 5) }
      })
      try {
        const r = await agent(provider.url, { call: { maxRetries: 0 } }).run('hi')
        outcomes.push({ success: r.success, output: r.output, messages: r.messages, errorInfo: r.errorInfo, tokenUsage: r.tokenUsage })
      } finally {
        await provider.close()
      }
    }
    assert.deepEqual(outcomes[0], outcomes[1], name)
    if (name === 'json') assert.equal(outcomes[0].output, 'héllo wörld')
  }
  // A body cut short of its content-length is a reset connection, as in chunks.
  const provider = await listen((req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': 1000 })
    res.write('{"id":')
    setTimeout(() => res.destroy(), 20)
  })
  try {
    const r = await agent(provider.url, { call: { maxRetries: 0 } }).run('hi')
    assert.equal(r.success, false)
    assert.equal(r.errorInfo.name, 'ProviderError')
    assert.match(r.errorInfo.message, /^transport error/)
  } finally {
    await provider.close()
  }
})
