// The gateway's HTTP contract (docs/gateway.md: GET /healthz, POST /v1/validate, /v1/format and
// /v1/run, the OpenAI- and Anthropic-compatible routes) as a Cloudflare Worker. Every rule is the
// component's: each request is one `routes.Request` of oma_routes.wasm (the `routes` world, the
// same request machine as oma_gateway.wasm, transpiled by `npm run build:routes`), which decides
// the routes, the statuses and error bodies, the token, the body limit and the deadline, the
// limits, the provider calls, the streams, the log lines and the traces. The configuration is the
// Worker's bindings (`env`), read as the gateway reads its environment: every text binding by its
// name (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, OMA_GATEWAY_TOKEN, ...). This file only performs
// the request's steps: it reads the body within the limits it is given, writes the replies and
// the stream, performs the HTTP steps with the JavaScript package's transport (`HttpSteps` of
// `oma-component/gateway`) and the store steps on a Durable Object, and writes the log lines.
// The response is handed to the platform as soon as it exists; the steps after it (the tokens
// counted, the log line, the OpenTelemetry export) go on under `ctx.waitUntil`, so that they
// never delay or fail a client's answer.
//
// Per-token limits (OMA_GATEWAY_KEYS, docs/gateway.md#per-token-limits): without
// OMA_GATEWAY_LIMITS_BUCKET the component counts them in its own memory, which lives as long as
// this isolate (one count per isolate, not per Worker). With OMA_GATEWAY_LIMITS_BUCKET=<NAME>,
// `<NAME>` is a Durable Object namespace binding of the class exported here (`LimitsCounter`):
// the request hands out the additions that count it (`count`) and the names to forget
// (`forget`), performed on the object of the client's key (`idFromName` of the key's digest,
// never the token). Every isolate, everywhere, counts on that one object.
import { routes } from '#oma-routes'
import { HttpSteps } from 'oma-component/gateway'

const encoder = new TextEncoder()

/** The Worker's text bindings as the gateway's environment. */
function environment(env) {
  return Object.entries(env ?? {}).filter(([, value]) => typeof value === 'string')
}

function seed() {
  return crypto.getRandomValues(new BigUint64Array(1))[0]
}

function now() {
  return BigInt(Date.now())
}

function response(reply) {
  return new Response(reply.body, { status: reply.status, headers: reply.headers })
}

/** A failure of this host itself (never of a rule): a 500 in the gateway's error shape. */
function hostError(error) {
  const message = `the Worker failed: ${String(error?.message ?? error).slice(0, 200)}`
  return {
    status: 500,
    headers: [['content-type', 'application/json']],
    body: JSON.stringify({ error: { name: 'HostError', message, retryable: true } }),
  }
}

/**
 * The whole body, at most `limits.maxBytes` bytes, before `limits.deadlineAtMs`: the request's
 * input, `body` or `body-failed`.
 */
async function readBody(request, limits) {
  if (!request.body) return { tag: 'body', val: new Uint8Array(0) }
  const reader = request.body.getReader()
  const max = Number(limits.maxBytes)
  let timer
  const expired = new Promise((resolve) => {
    timer = setTimeout(resolve, Math.max(0, Number(limits.deadlineAtMs) - Date.now()), null)
  })
  const chunks = []
  let total = 0
  try {
    for (;;) {
      const read = await Promise.race([reader.read(), expired])
      if (read === null) return { tag: 'body-failed', val: { tag: 'timed-out' } }
      if (read.done) break
      total += read.value.byteLength
      if (total > max) return { tag: 'body-failed', val: { tag: 'too-large' } }
      chunks.push(read.value)
    }
  } catch (error) {
    return { tag: 'body-failed', val: { tag: 'broken', val: String(error?.message ?? error).slice(0, 200) } }
  } finally {
    clearTimeout(timer)
    reader.cancel().catch(() => {})
  }
  const bytes = new Uint8Array(total)
  let at = 0
  for (const chunk of chunks) {
    bytes.set(chunk, at)
    at += chunk.byteLength
  }
  return { tag: 'body', val: bytes }
}

/** How long a call to the limits' Durable Object may take before it counts as failed. */
const STORE_TIMEOUT_MS = 5_000

/**
 * The per-token limits' store: one Durable Object per client key (named by the key's digest),
 * holding that key's counts (a whole number per name, at most two minutes of them). A request
 * (`POST`, JSON `{add: [[name, n], ...], forget: [name, ...]}`, both optional: the component's
 * `count-ops` or `forget-ops`) adds each `n` to its name's count in order, deletes the `forget`
 * names, and answers `{counts}`, the new counts of the adds. An object runs one event at a time
 * and its storage calls hold back other events until they finish (its input gate), so a batch is
 * never interleaved with another: every isolate that counts on the object sees one count.
 */
export class LimitsCounter {
  constructor(ctx) {
    this.storage = ctx.storage
  }

  async fetch(request) {
    let batch
    try {
      batch = await request.json()
    } catch {
      return new Response('not a batch of counts', { status: 400 })
    }
    const add = batch?.add ?? []
    const forget = batch?.forget ?? []
    const valid = (op) => Array.isArray(op) && typeof op[0] === 'string' && Number.isSafeInteger(op[1]) && op[1] >= 0
    if (!Array.isArray(add) || !add.every(valid) || !Array.isArray(forget) || !forget.every((name) => typeof name === 'string')) {
      return new Response('not a batch of counts', { status: 400 })
    }
    const stored = add.length > 0 ? await this.storage.get(add.map(([name]) => name)) : new Map()
    const counts = []
    const changed = {}
    for (const [name, n] of add) {
      const count = (changed[name] ?? stored.get(name) ?? 0) + n
      counts.push(count)
      if (n > 0) changed[name] = count
    }
    if (Object.keys(changed).length > 0) await this.storage.put(changed)
    if (forget.length > 0) await this.storage.delete(forget)
    return Response.json({ counts })
  }
}

/**
 * Sends `batch` to the Durable Object of key `id` in the namespace bound as `store`
 * (`env[store]`): the counts it answered, or an error (a missing binding, a failed or slow call).
 */
async function storeCall(env, store, id, batch) {
  let timer
  try {
    const namespace = env?.[store]
    if (typeof namespace?.idFromName !== 'function') {
      throw new Error(`no Durable Object namespace is bound as ${store}`)
    }
    const stub = namespace.get(namespace.idFromName(id))
    const timeout = new Promise((resolve, reject) => {
      timer = setTimeout(() => reject(new Error('the limits store did not answer in time')), STORE_TIMEOUT_MS)
    })
    const call = (async () => {
      const response = await stub.fetch('https://limits.invalid/count', { method: 'POST', body: JSON.stringify(batch) })
      if (!response.ok) throw new Error(`the limits store answered ${response.status}`)
      return (await response.json())?.counts
    })()
    const counts = await Promise.race([call, timeout])
    if (!Array.isArray(counts) || !counts.every((n) => Number.isSafeInteger(n) && n >= 0)) {
      throw new Error('the limits store answered no counts')
    }
    return counts
  } finally {
    clearTimeout(timer)
  }
}

/**
 * Performs a `count` step's additions: the request's `counted` input, the new counts or why the
 * store failed (the component then answers `503`, or for the tokens after an answer, nothing).
 */
async function count(env, ops) {
  try {
    const counts = await storeCall(env, ops.store, ops.id, { add: ops.add.map(([name, n]) => [name, Number(n)]) })
    return { tag: 'counted', val: { tag: 'ok', val: BigUint64Array.from(counts, (n) => BigInt(n)) } }
  } catch (error) {
    return { tag: 'counted', val: { tag: 'err', val: String(error?.message ?? error).slice(0, 200) } }
  }
}

/** Performs a `forget` step: a store that fails only keeps the names longer. */
async function forget(env, ops) {
  await storeCall(env, ops.store, ops.id, { forget: ops.names }).catch(() => {})
}

/**
 * Steps `request` (a `routes.Request`) to its end: `answer` is called once with the Response
 * (a whole reply, or a stream written as the request goes on) as soon as there is one; the
 * promise settles when nothing is left (after the log line and the trace export). `signal` (the
 * client's) aborts the provider call in flight while no response exists yet.
 */
async function drive(request, incoming, env, answer, log) {
  const http = new HttpSteps()
  let answered = false
  let writer = null
  const respond = (value) => {
    answered = true
    answer(value)
  }
  try {
    for (;;) {
      const polled = request.next(now())
      if (polled.tag === 'finished') return
      if (polled.tag === 'waiting') throw new Error('the request waits for an answer this host did not owe')
      const step = polled.val
      switch (step.tag) {
        case 'read-body':
          request.answer(await readBody(incoming, step.val))
          break
        case 'count':
          request.answer(await count(env, step.val))
          break
        case 'forget':
          await forget(env, step.val)
          break
        case 'respond':
          respond(response(step.val))
          break
        case 'open-stream': {
          const { readable, writable } = new TransformStream()
          writer = writable.getWriter()
          respond(new Response(readable, { status: 200, headers: step.val }))
          request.answer({ tag: 'written', val: true })
          break
        }
        case 'write': {
          // A caller that went away fails the write: the request stops writing and sending.
          const written = await writer.write(encoder.encode(step.val)).then(() => true, () => false)
          request.answer({ tag: 'written', val: written })
          break
        }
        case 'close-stream':
          await writer.close().catch(() => {})
          break
        case 'log':
          console.error(step.val.trimEnd())
          break
        case 'send':
        case 'receive':
        case 'wait':
          request.answer(await http.perform(step, answered ? undefined : incoming.signal))
          break
        default:
          throw new Error(`the request handed out the step ${step.tag}, which this host does not know`)
      }
    }
  } catch (error) {
    if (!answered) {
      const reply = hostError(error)
      respond(response(reply))
      log(reply.status)
    } else {
      // A stream the request can no longer finish is ended, not left hanging.
      await writer?.close().catch(() => {})
    }
  } finally {
    http.close()
  }
}

export default {
  async fetch(incoming, env, ctx) {
    const started = Date.now()
    const url = new URL(incoming.url)
    const path = url.pathname + url.search
    const log = (status) => {
      console.error(routes.logLine(incoming.method, path, status, BigInt(Date.now() - started)).trimEnd())
    }
    let request
    try {
      const head = { method: incoming.method, path, headers: [...incoming.headers] }
      request = new routes.Request(environment(env), head, BigInt(started), seed())
    } catch (error) {
      const reply = hostError(error)
      log(reply.status)
      return response(reply)
    }
    return new Promise((answer) => {
      const done = drive(request, incoming, env, answer, log)
      ctx?.waitUntil?.(done)
    })
  },
}
