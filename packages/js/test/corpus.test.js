// The recorded-response corpus (fixtures/corpus/) through the package as its users call it:
// every recording is served byte for byte by a loopback server of this file's own (a stream one
// event per write, 1 ms apart, as the Rust harness's simulator does) and read by the OMA
// `Agent`: `run` for a recording answered to a plain request, `stream` for a streamed one. Each
// result is compared with the hand-written expectation in manifest.json, with the rules of
// host-tests/tests/all/corpus.rs for a run (success, the first message, the token usage;
// for an error, `errorInfo`'s kind, name, httpStatus, retryable, provider, code and a piece of
// its message).
//
// Field names: the package's AgentRunResult is OMA's, the same names the Rust test reads from
// `run_result_json` (`success`, `messages`, `tokenUsage`, `errorInfo`); nothing is renamed. An
// `httpStatus` or `code` the expectation gives as null is compared with an absent field, as
// in Rust (an absent JSON member reads as null there).
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import { readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Agent } from '../src/index.js'

const CORPUS = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'fixtures', 'corpus')
const MANIFEST = JSON.parse(readFileSync(join(CORPUS, 'manifest.json'), 'utf8'))

/** The key every agent is given; it must not show in any result. */
const KEY = 'sk-corpus-SECRET-5d81'
/** The pause between two chunks of a recorded stream. */
const CHUNK_DELAY_MS = 1
/** The placeholder for an id the component makes up for Gemini. */
const GEMINI_ID = '<gemini-id>'

/**
 * Cases this package cannot run, with why. Empty: every recording runs. A case listed here that
 * passes fails the test, so the list cannot outlive its reason.
 */
const CANNOT_RUN = new Map()

// ------------------------------------------------------------------------------------------
// The body of a recording in the pieces it is flushed in (corpus.rs `chunks`).

/** Splits a server-sent event stream after each blank line (LF or CRLF), keeping every byte. */
export function sseEvents(bytes) {
  const events = []
  let start = 0
  let i = 0
  while (i < bytes.length) {
    let end = -1
    if (bytes[i] === 0x0d && bytes[i + 1] === 0x0a && bytes[i + 2] === 0x0d && bytes[i + 3] === 0x0a) end = i + 4
    else if (bytes[i] === 0x0a && bytes[i + 1] === 0x0a) end = i + 2
    if (end >= 0) {
      events.push(bytes.subarray(start, end))
      start = end
      i = end
    } else {
      i += 1
    }
  }
  if (start < bytes.length) events.push(bytes.subarray(start))
  return events
}

const CRC_TABLE = (() => {
  const table = new Uint32Array(256)
  for (let n = 0; n < 256; n++) {
    let c = n
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1
    table[n] = c >>> 0
  }
  return table
})()

function crc32(bytes) {
  let c = 0xffffffff
  for (const b of bytes) c = CRC_TABLE[(c ^ b) & 0xff] ^ (c >>> 8)
  return (c ^ 0xffffffff) >>> 0
}

/**
 * One AWS event-stream message: total length, headers length, prelude CRC, headers (each a
 * name, the string type 7 and a 2-byte length), the payload, the message CRC; all big-endian.
 */
export function awsEventMessage(headers, payload) {
  const parts = []
  for (const [name, value] of headers) {
    const n = Buffer.from(name, 'utf8')
    const v = Buffer.from(value, 'utf8')
    const head = Buffer.alloc(1 + n.length + 1 + 2)
    head.writeUInt8(n.length, 0)
    n.copy(head, 1)
    head.writeUInt8(7, 1 + n.length)
    head.writeUInt16BE(v.length, 2 + n.length)
    parts.push(head, v)
  }
  const block = Buffer.concat(parts)
  const total = 12 + block.length + payload.length + 4
  const prelude = Buffer.alloc(8)
  prelude.writeUInt32BE(total, 0)
  prelude.writeUInt32BE(block.length, 4)
  const preludeCrc = Buffer.alloc(4)
  preludeCrc.writeUInt32BE(crc32(prelude), 0)
  const body = Buffer.concat([prelude, preludeCrc, block, payload])
  const messageCrc = Buffer.alloc(4)
  messageCrc.writeUInt32BE(crc32(body), 0)
  return Buffer.concat([body, messageCrc])
}

function chunks(c) {
  const bytes = readFileSync(join(CORPUS, c.file))
  switch (c.framing) {
    case 'whole':
      return [bytes]
    case 'sse':
      return sseEvents(bytes)
    case 'aws-eventstream': {
      const exceptions = new Set(c.exceptions ?? [])
      return bytes.toString('utf8').split('\n').filter((line) => line.trim() !== '').map((line) => {
        const event = JSON.parse(line)
        const kinds = Object.keys(event)
        assert.equal(kinds.length, 1, `one event per line: ${line}`)
        const kind = kinds[0]
        // serde_json's `to_string` of the payload: compact, members in the order read.
        const payload = Buffer.from(JSON.stringify(event[kind]), 'utf8')
        return exceptions.has(kind)
          ? awsEventMessage([[':exception-type', kind], [':content-type', 'application/json'], [':message-type', 'exception']], payload)
          : awsEventMessage([[':event-type', kind], [':content-type', 'application/json'], [':message-type', 'event']], payload)
      })
    }
    default:
      throw new Error(`${c.name}: unknown framing ${c.framing}`)
  }
}

// ------------------------------------------------------------------------------------------
// The loopback provider: each request is answered with the scripted recording.

let server
let url
let scripted = null
let requests = 0
const sockets = new Set()

before(async () => {
  server = http.createServer((req, res) => {
    req.resume()
    req.on('end', () => {
      requests += 1
      const reply = scripted
      scripted = null
      if (reply === null) {
        res.writeHead(599, { 'content-type': 'text/plain' })
        res.end('no recording scripted for this request')
        return
      }
      serve(res, reply).catch(() => res.destroy())
    })
  })
  server.on('connection', (s) => { sockets.add(s); s.on('close', () => sockets.delete(s)) })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  url = `http://127.0.0.1:${server.address().port}`
})

after(async () => {
  for (const s of sockets) s.destroy()
  await new Promise((resolve) => server.close(() => resolve()))
})

/** One piece: sent whole with a content-length; several: chunked, one write each, 1 ms apart. */
async function serve(res, { status, headers, pieces }) {
  const head = Object.entries(headers ?? {})
  if (pieces.length === 1) {
    res.writeHead(status, [...head, ['content-length', String(pieces[0].length)]].flat())
    res.end(pieces[0])
    return
  }
  res.writeHead(status, [...head, ['transfer-encoding', 'chunked']].flat())
  res.flushHeaders()
  for (const [i, piece] of pieces.entries()) {
    if (i > 0) await new Promise((resolve) => setTimeout(resolve, CHUNK_DELAY_MS))
    if (res.destroyed) return
    res.write(piece)
  }
  res.end()
}

// ------------------------------------------------------------------------------------------
// The comparison (corpus.rs `matches`, `compare_error`, `compare`).

/** `gemini-<epoch ms>-<7 base36 characters>`. */
function isGeminiId(id) {
  return /^gemini-[0-9]+-[0-9a-z]{7}$/.test(id)
}

/** Whether `actual` is `expected` (JSON equality, object members in any order), `<gemini-id>`
 * standing for any id the component makes up. `undefined` counts as null, as an absent member
 * does in Rust's `Value` indexing. */
function matches(expected, actual) {
  if (actual === undefined) actual = null
  if (expected === GEMINI_ID && typeof actual === 'string') return isGeminiId(actual)
  if (Array.isArray(expected)) {
    return Array.isArray(actual) && expected.length === actual.length && expected.every((e, i) => matches(e, actual[i]))
  }
  if (expected !== null && typeof expected === 'object') {
    if (actual === null || typeof actual !== 'object' || Array.isArray(actual)) return false
    const keys = Object.keys(expected)
    const actualKeys = Object.keys(actual).filter((k) => actual[k] !== undefined)
    return keys.length === actualKeys.length && keys.every((k) => k in actual && matches(expected[k], actual[k]))
  }
  return expected === actual
}

function differ(out, field, expected, actual) {
  if (!matches(expected ?? null, actual)) {
    out.push({ field, detail: `expected ${JSON.stringify(expected ?? null)}, got ${JSON.stringify(actual ?? null)}` })
  }
}

function compareError(out, expected, actual) {
  for (const field of ['name', 'httpStatus', 'retryable', 'provider', 'code']) differ(out, field, expected[field], actual?.[field])
  if (typeof expected.message_contains === 'string') {
    const message = typeof actual?.message === 'string' ? actual.message : ''
    if (!message.includes(expected.message_contains)) {
      out.push({ field: 'message', detail: `${JSON.stringify(message)} does not contain ${JSON.stringify(expected.message_contains)}` })
    }
  }
}

/** A run's result against the case's expectation: a response or an error. */
function compare(c, result) {
  const out = []
  const { response, error } = c.expect
  if (response) {
    differ(out, 'success', true, result.success)
    differ(out, 'content', { role: 'assistant', content: response.content }, result.messages?.[0])
    differ(out, 'usage', response.usage, result.tokenUsage)
  } else {
    differ(out, 'success', false, result.success)
    differ(out, 'kind', 'provider', result.errorInfo?.kind)
    compareError(out, error, result.errorInfo)
  }
  return out
}

/** The fields the work a case waits for changes. */
function affected(needs) {
  switch (needs) {
    case 'error-code': return ['code']
    case 'gemini-partial-args': return ['content']
    default: throw new Error(`unknown needs ${needs}`)
  }
}

// ------------------------------------------------------------------------------------------
// One case through the package.

function agentFor(c) {
  return new Agent({
    name: 'corpus',
    model: c.model,
    provider: c.provider,
    baseURL: url,
    apiKey: KEY,
    ...(c.provider === 'bedrock' ? { region: 'us-east-1' } : {}),
    maxTurns: 1,
    // One attempt, as in the Rust worlds: each recording is one answer.
    call: { maxRetries: 0, timeoutMs: 30000 },
  })
}

const INPUT = [{ role: 'user', content: [{ type: 'text', text: 'Hi' }] }]

/** `run` for a plain recording; `stream` for a streamed one, its result from the last event
 * (`done`'s data, or the `error` event's error's `result`). */
async function runCase(c) {
  const agent = agentFor(c)
  if (!c.stream) return { result: await agent.run(INPUT), via: 'run' }
  const events = []
  for await (const event of agent.stream(INPUT)) events.push(event)
  const last = events.at(-1)
  if (last?.type === 'done') return { result: last.data, via: 'stream', events }
  if (last?.type === 'error') {
    assert.ok(last.data instanceof Error, `${c.name}: the error event carries an Error`)
    assert.deepEqual(last.errorInfo, last.data.result.errorInfo, `${c.name}: the error event's errorInfo is the result's`)
    return { result: last.data.result, via: 'stream', events }
  }
  throw new Error(`${c.name}: a stream that ends with ${JSON.stringify(last)}`)
}

// ------------------------------------------------------------------------------------------

test('every recording gives the documented result through Agent.run / Agent.stream', { timeout: 30000 }, async () => {
  const merged = new Set(MANIFEST.merged)
  const failures = []
  const expectedFailures = []
  const passingEarly = []
  const started = Date.now()
  for (const c of MANIFEST.cases) {
    const needs = c.needs && !merged.has(c.needs) ? c.needs : null
    scripted = { status: c.status, headers: c.headers, pieces: chunks(c) }
    const before = requests
    let outcome
    try {
      outcome = await runCase(c)
    } catch (error) {
      failures.push(`${c.name}: threw ${error?.stack ?? error}`)
      continue
    }
    const label = `${c.name} [${outcome.via}]`
    if (requests - before !== 1 || scripted !== null) {
      failures.push(`${label}: ${requests - before} requests reached the provider, not 1`)
    }
    scripted = null
    const shown = JSON.stringify(outcome.result) + JSON.stringify(outcome.events ?? [], (k, v) => (v instanceof Error ? { message: v.message, ...v } : v))
    if (shown.includes(KEY) || shown.includes('SECRET')) failures.push(`${label}: the key shows in ${shown}`)
    const mismatches = compare(c, outcome.result)
    const reason = CANNOT_RUN.get(c.name)
    if (reason !== undefined) {
      if (mismatches.length === 0) failures.push(`${label}: passes, but is listed as one the package cannot run (${reason}); take it off the list`)
      continue
    }
    for (const m of mismatches) {
      const line = `${label}: ${m.field}: ${m.detail}`
      if (needs && affected(needs).includes(m.field)) expectedFailures.push(`${line} (needs ${needs})`)
      else failures.push(line)
    }
    if (needs && mismatches.length === 0) passingEarly.push(`${c.name} (needs ${needs})`)
  }
  for (const line of expectedFailures) console.error(`corpus: xfail ${line}`)
  for (const name of passingEarly) console.error(`corpus: ${name} already passes`)
  console.error(`corpus: ${MANIFEST.cases.length} recordings in ${Date.now() - started} ms`)
  for (const name of CANNOT_RUN.keys()) {
    assert.ok(MANIFEST.cases.some((c) => c.name === name), `CANNOT_RUN names ${name}, which is not in the manifest`)
  }
  assert.equal(failures.length, 0, `${failures.length} mismatches:\n${failures.join('\n')}`)
})

test('the SSE splitter keeps every byte and cuts after each blank line', () => {
  const body = Buffer.from('event: a\ndata: 1\n\ndata: 2\r\n\r\ndata: 3')
  const events = sseEvents(body)
  assert.deepEqual(events.map((e) => e.toString()), ['event: a\ndata: 1\n\n', 'data: 2\r\n\r\n', 'data: 3'])
  assert.deepEqual(Buffer.concat(events), body)
})

test('the AWS event-stream framing carries the CRCs the format defines', () => {
  // CRC-32 (IEEE) of "123456789" is 0xCBF43926.
  assert.equal(crc32(Buffer.from('123456789')), 0xcbf43926)
  const message = awsEventMessage([[':event-type', 'messageStop']], Buffer.from('{}'))
  assert.equal(message.readUInt32BE(0), message.length)
  assert.equal(message.readUInt32BE(8), crc32(message.subarray(0, 8)))
  assert.equal(message.readUInt32BE(message.length - 4), crc32(message.subarray(0, message.length - 4)))
})
