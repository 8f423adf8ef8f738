// The shared behaviour table (fixtures/behaviour/cases.json) through the package's public API
// (`new Agent({...}).run/stream/prompt`, `runAgent`). The Python package runs the same table
// (packages/python/tests/test_behaviour.py), so a difference between the languages fails one of
// the two suites. The table's contract is in the file itself.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import net from 'node:net'
import { readFileSync } from 'node:fs'
import { Agent, runAgent } from '../src/index.js'

const table = JSON.parse(
  readFileSync(new URL('../../../fixtures/behaviour/cases.json', import.meta.url), 'utf8'),
)
const KEY = 'sk-behaviour-SECRETSECRET0123'

/** A loopback provider serving each case's replies in order; records every request. */
function startProvider() {
  const state = { replies: [], requests: [] }
  const server = http.createServer((req, res) => {
    const chunks = []
    req.on('data', (c) => chunks.push(c))
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8')
      let body
      try {
        body = JSON.parse(text)
      } catch {
        body = text
      }
      state.requests.push({ url: req.url, headers: req.headers, body })
      const reply = state.replies.shift()
      if (!reply) {
        res.writeHead(500, { 'content-type': 'application/json' })
        res.end('{"error":"no reply scripted"}')
        return
      }
      if (reply.reset) {
        req.socket.resetAndDestroy()
        return
      }
      if (reply.hangMs !== undefined) {
        const timer = setTimeout(() => req.socket.destroy(), reply.hangMs)
        req.socket.on('close', () => clearTimeout(timer))
        return
      }
      const status = reply.status ?? 200
      if (reply.sse) {
        res.writeHead(status, { 'content-type': 'text/event-stream' })
        for (const event of reply.sse) res.write(event)
        if (reply.keepAliveMs !== undefined) {
          // A comment that often, for ever (until the client goes, or 30 s pass).
          const timer = setInterval(() => res.write(': keep-alive\n\n'), reply.keepAliveMs)
          const stop = setTimeout(() => res.destroy(), 30000)
          res.on('close', () => { clearInterval(timer); clearTimeout(stop) })
          return
        }
        res.end()
        return
      }
      const data = JSON.stringify(reply.json)
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) })
      res.end(data)
    })
  })
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      resolve({
        url: `http://127.0.0.1:${server.address().port}`,
        state,
        close: () => new Promise((done) => {
          server.closeAllConnections?.()
          server.close(() => done())
        }),
      })
    })
  })
}

/** A loopback port nothing listens on. */
function closedPort() {
  return new Promise((resolve) => {
    const s = net.createServer()
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

/** Where `actual` differs from `expected` (objects: the keys given; lists: the same length,
 * item by item; `{$startsWith}`), or null. */
function matches(expected, actual, path = '$') {
  if (expected && typeof expected === 'object' && !Array.isArray(expected)) {
    const keys = Object.keys(expected)
    if (keys.length === 1 && keys[0] === '$startsWith') {
      return typeof actual === 'string' && actual.startsWith(expected.$startsWith)
        ? null
        : `${path}: ${JSON.stringify(actual)} does not start with ${JSON.stringify(expected.$startsWith)}`
    }
    if (keys.length === 1 && keys[0] === '$contains') {
      return typeof actual === 'string' && actual.includes(expected.$contains)
        ? null
        : `${path}: ${JSON.stringify(actual)} does not contain ${JSON.stringify(expected.$contains)}`
    }
    if (keys.length === 1 && keys[0] === '$type') {
      const type = actual !== null && typeof actual === 'object' && !Array.isArray(actual) ? 'object' : typeof actual
      return type === expected.$type ? null : `${path}: ${JSON.stringify(actual)} is not a ${expected.$type}`
    }
    if (actual instanceof Error) actual = plainError(actual)
    if (!actual || typeof actual !== 'object' || Array.isArray(actual)) {
      return `${path}: expected an object, got ${JSON.stringify(actual)}`
    }
    for (const key of keys) {
      if (!(key in actual)) return `${path}.${key}: missing in ${JSON.stringify(actual)}`
      const found = matches(expected[key], actual[key], `${path}.${key}`)
      if (found) return found
    }
    return null
  }
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual) || actual.length !== expected.length) {
      return `${path}: expected ${expected.length} items, got ${JSON.stringify(actual)}`
    }
    for (let i = 0; i < expected.length; i++) {
      const found = matches(expected[i], actual[i], `${path}[${i}]`)
      if (found) return found
    }
    return null
  }
  return Object.is(expected, actual) ? null : `${path}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`
}

/** An error as the table writes it: `{name, message, code?, httpStatus?}`. */
function plainError(error) {
  const out = { name: error.name, message: error.message }
  if (error.code !== undefined) out.code = error.code
  if (error.httpStatus !== undefined) {
    // OMA's users read the HTTP status as `status`: the two always agree.
    assert.equal(error.status, error.httpStatus, 'status and httpStatus differ')
    out.httpStatus = error.httpStatus
  }
  return out
}

/** An event's value as the table writes it: an error as `{error: {...}, result}`. */
function plain(value) {
  if (value instanceof Error) {
    const out = { error: plainError(value) }
    if (value.result !== undefined) out.result = value.result
    return out
  }
  return value
}

/** A tool or hook that returns or throws what the table says; `records` keeps its second argument. */
function behave(spec, record) {
  return (first, second) => {
    if (spec.records) record(second ?? first)
    if ('throws' in spec) throw new Error(spec.throws)
    return spec.returns
  }
}

function configuration(kase, base, seen) {
  const config = { name: 'table', baseURL: base, apiKey: KEY }
  for (const [key, value] of Object.entries(kase.agent)) {
    if (key === 'tools') {
      // OMA's shape and the package's tool objects are the same plain object here.
      config.tools = value.map((t) => ({
        name: t.name,
        description: t.description ?? '',
        inputSchema: { type: 'object' },
        execute: behave(t, (context) => { seen.toolContext = context }),
      }))
    } else if (key === 'beforeRun') {
      config.beforeRun = behave(value, (context) => { seen.hookAgent = context.agent })
    } else {
      config[key] = value
    }
  }
  return config
}

let provider
before(async () => { provider = await startProvider() })
after(async () => { await provider.close() })

for (const kase of table.cases) {
  test(kase.name, async () => {
    provider.state.replies = [...kase.replies]
    provider.state.requests = []
    const base = kase.connection === 'refused' ? `http://127.0.0.1:${await closedPort()}` : provider.url
    const seen = { progress: [], progressData: {}, toolCallsSeen: [] }
    const onProgress = (event) => {
      seen.progress.push(event.type)
      seen.progressData[event.type] = event.data
      if (kase.observers?.onProgress === 'throws') throw new Error('observer broke')
    }
    const options = {}
    if (kase.runOptions?.onToolCall === 'records') {
      options.onToolCall = (name, input) => seen.toolCallsSeen.push([name, input])
    }
    let timer
    if (kase.cancelAfterMs !== undefined) {
      const controller = new AbortController()
      // A provider that hangs is cancelled while it holds the request: the delay counts from
      // the request's arrival (at most 10 s away), as the Python suite counts it.
      const hangs = kase.replies.some((r) => r.hangMs !== undefined)
      const since = Date.now()
      const arm = () => {
        if (hangs && provider.state.requests.length === 0 && Date.now() - since < 10000) {
          timer = setTimeout(arm, 5)
          return
        }
        timer = setTimeout(() => controller.abort(), kase.cancelAfterMs)
      }
      arm()
      options.abortSignal = controller.signal
    }
    const started = Date.now()
    try {
      const config = configuration(kase, kase.agent.baseURL ?? base, seen)
      if (kase.call === 'runAgent') {
        seen.result = await runAgent(config, kase.input, { onProgress, ...(options.abortSignal ? { abortSignal: options.abortSignal } : {}) })
      } else {
        const agent = new Agent(config)
        if (kase.call === 'run') seen.result = await agent.run(kase.input, options)
        else if (kase.call === 'prompt') {
          seen.result = await agent.prompt(kase.input, options)
          seen.history = agent.getHistory()
        } else {
          seen.events = []
          for await (const event of agent.stream(kase.input, options)) {
            seen.events.push({ ...event, data: plain(event.data) })
          }
        }
      }
    } catch (error) {
      seen.thrown = error
    } finally {
      clearTimeout(timer)
    }
    const took = Date.now() - started
    const expect = kase.expect
    if (expect.throws) {
      assert.ok(seen.thrown, `did not throw: ${JSON.stringify(seen.result ?? seen.events)}`)
      assert.equal(matches(expect.throws, { name: seen.thrown.name, message: seen.thrown.message }), null)
    } else {
      assert.equal(seen.thrown, undefined, String(seen.thrown?.stack ?? seen.thrown))
    }
    if (expect.result) assert.equal(matches(expect.result, seen.result), null)
    if (expect.events) assert.equal(matches(expect.events, seen.events), null)
    if (expect.requests !== undefined) assert.equal(provider.state.requests.length, expect.requests)
    if (expect.sent) {
      const body = provider.state.requests[expect.sent.request].body
      assert.equal(matches(expect.sent.lastMessage, body.messages.at(-1)), null)
    }
    if (expect.progress) assert.deepEqual(seen.progress, expect.progress)
    if (expect.history) assert.equal(matches(expect.history, seen.history), null)
    if (expect.resultKeys) assert.deepEqual(Object.keys(seen.result), expect.resultKeys)
    if (expect.hookAgent) {
      assert.equal(matches(expect.hookAgent, seen.hookAgent), null)
      assert.ok(!('apiKey' in seen.hookAgent), 'ctx.agent holds apiKey')
      assert.ok(!JSON.stringify(seen.hookAgent).includes(KEY), 'ctx.agent holds the key')
    }
    if (expect.toolContext) assert.equal(matches(expect.toolContext, seen.toolContext), null)
    if (expect.toolCallsSeen) assert.deepEqual(seen.toolCallsSeen, expect.toolCallsSeen)
    for (const [type, data] of Object.entries(expect.progressData ?? {})) {
      assert.equal(matches(data, seen.progressData[type]), null)
    }
    if (expect.withinMs !== undefined) assert.ok(took <= expect.withinMs, `took ${took} ms`)
    assert.ok(!JSON.stringify([seen.result, seen.events]).includes(KEY))
  })
}
