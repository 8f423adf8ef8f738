// The gateway's HTTP contract (docs/gateway.md: GET /healthz, POST /v1/validate, /v1/format and
// /v1/run, streamed as server-sent events with `Accept: text/event-stream`) as a Cloudflare
// Worker. Every rule is the component's (`routes` of oma_routes.wasm, the `routes` world, built
// from the same Rust rules as oma_gateway.wasm and transpiled by `npm run build:routes`): the routes, the statuses and error bodies, the bearer token, the
// body limit and the deadline, the egress allowlist, the log line. The configuration is the
// Worker's bindings (`env`), read as the gateway reads its environment: every text binding by
// its name (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, OMA_GATEWAY_TOKEN, ...). This file only moves
// bytes: it reads the request within the limits the component gives, writes the replies it
// gives, steps a run with the JavaScript package's HTTP loop (`driveRun`) and fetch, and sends
// the OpenTelemetry export the component makes of an answered run (`run.exportTraces`) with
// `ctx.waitUntil`, after the response, so that it never delays or fails a client's answer.
//
// Per-token limits (OMA_GATEWAY_KEYS, docs/gateway.md#per-token-limits) are the component's
// rules too. Without OMA_GATEWAY_LIMITS_BUCKET it counts them in its own memory, which lives as
// long as this isolate (one count per isolate, not per Worker). With
// OMA_GATEWAY_LIMITS_BUCKET=<NAME>, `<NAME>` is a Durable Object namespace binding of the class
// exported here (`LimitsCounter`): the component hands out the operations that count a request
// (`request.limits`) and after the answer its tokens (`run.countUsage`), this file performs them
// on the object of the client's key (`idFromName` of the key's digest, never the token), and
// the component decides from the counts (`request.counted`). Every isolate, everywhere, counts
// on that one object.
import { routes } from '#oma-routes'
import { driveRun } from 'oma-component/gateway'

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

function respond(reply) {
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
 * The whole body, at most `limits.maxBytes` bytes, before `limits.deadlineAtMs`: `{ bytes }`, or
 * `{ failure }` (a `body-failure` for `request.bodyFailed`).
 */
async function readBody(request, limits) {
  if (!request.body) return { bytes: new Uint8Array(0) }
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
      if (read === null) return { failure: { tag: 'timed-out' } }
      if (read.done) break
      total += read.value.byteLength
      if (total > max) return { failure: { tag: 'too-large' } }
      chunks.push(read.value)
    }
  } catch (error) {
    return { failure: { tag: 'broken', val: String(error?.message ?? error).slice(0, 200) } }
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
  return { bytes }
}

/**
 * The run as `driveRun` steps it, telling `onSend` when a request is about to be sent (a
 * stream's head goes out then, as the gateway's does).
 */
function watched(run, onSend) {
  return {
    next(nowMs) {
      const polled = run.next(nowMs)
      if (polled.tag === 'step' && polled.val.tag === 'send') onSend()
      return polled
    },
    answer(answer) {
      return run.answer(answer)
    },
  }
}

/**
 * Sends the request's trace export, if the component makes one (an OTLP endpoint is configured),
 * once the response is over: kept alive with `ctx.waitUntil`, bounded by the export's own
 * timeout; an export the collector did not take is only logged (the gateway's line).
 */
function dropped(reason) {
  console.error(routes.exportDroppedLine(reason).trimEnd())
}

function exportTraces(run, status, ctx) {
  let request
  try {
    request = run.exportTraces(status, now())
  } catch {
    return
  }
  if (!request) return
  const sending = fetch(request.url, {
    method: request.method,
    headers: request.headers,
    body: request.body,
    signal: AbortSignal.timeout(Number(request.timeoutMs)),
  })
    .then((response) => {
      if (!response.ok) dropped(`the collector answered ${response.status}`)
      return response.body?.cancel()
    })
    .catch((error) => {
      dropped(error?.name === 'TimeoutError' ? 'it timed out' : 'the request failed')
    })
  ctx?.waitUntil?.(sending)
}

/** How long a call to the limits' Durable Object may take before it counts as failed. */
const STORE_TIMEOUT_MS = 5_000

/**
 * The per-token limits' store: one Durable Object per client key (named by the key's digest),
 * holding that key's counts (a whole number per name, at most two minutes of them). A request
 * (`POST`, JSON `{add: [[name, n], ...], forget: [name, ...]}`, the component's `count-ops`)
 * adds each `n` to its name's count in order and answers `{counts}`, the new counts; then, when
 * the last count is 1 (the first request of a minute), deletes the `forget` names. An object
 * runs one event at a time and its storage calls hold back other events until they finish (its
 * input gate), so a batch is never interleaved with another: every isolate that counts on the
 * object sees one count.
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
    const add = Array.isArray(batch?.add) ? batch.add : null
    const forget = Array.isArray(batch?.forget) ? batch.forget : []
    const valid = (op) => Array.isArray(op) && typeof op[0] === 'string' && Number.isSafeInteger(op[1]) && op[1] >= 0
    if (!add || !add.every(valid)) {
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
    if (forget.length > 0 && counts.at(-1) === 1) {
      await this.storage.delete(forget.filter((name) => typeof name === 'string'))
    }
    return Response.json({ counts })
  }
}

/**
 * Performs the component's `count-ops` on the Durable Object namespace they name (`env[store]`),
 * on the object of their key: the `result` `request.counted` takes, the new counts or why the
 * store failed (a missing binding, a failed or slow call: the component then answers `503`).
 */
async function applyCounts(env, ops) {
  let timer
  try {
    const namespace = env?.[ops.store]
    if (typeof namespace?.idFromName !== 'function') {
      throw new Error(`no Durable Object namespace is bound as ${ops.store}`)
    }
    const stub = namespace.get(namespace.idFromName(ops.id))
    const body = JSON.stringify({ add: ops.add.map(([name, n]) => [name, Number(n)]), forget: ops.forget })
    const timeout = new Promise((resolve, reject) => {
      timer = setTimeout(() => reject(new Error('the limits store did not answer in time')), STORE_TIMEOUT_MS)
    })
    const call = (async () => {
      const response = await stub.fetch('https://limits.invalid/count', { method: 'POST', body })
      if (!response.ok) throw new Error(`the limits store answered ${response.status}`)
      return (await response.json())?.counts
    })()
    const counts = await Promise.race([call, timeout])
    if (!Array.isArray(counts) || !counts.every((n) => Number.isSafeInteger(n) && n >= 0)) {
      throw new Error('the limits store answered no counts')
    }
    return { tag: 'ok', val: BigUint64Array.from(counts, (n) => BigInt(n)) }
  } catch (error) {
    return { tag: 'err', val: String(error?.message ?? error).slice(0, 200) }
  } finally {
    clearTimeout(timer)
  }
}

/**
 * Counts the tokens an ended run used against its key's token limit: nothing to do when the
 * component counted them in its memory or no token limit applies; a store that fails changes
 * nothing for the answer.
 */
async function countUsage(run, env) {
  let ops
  try {
    ops = run.countUsage(now())
  } catch {
    return
  }
  if (ops) await applyCounts(env, ops)
}

/** A run answered whole: stepped to its end, its usage counted, then the reply its end gives. */
async function whole(run, signal, env) {
  const steps = driveRun(watched(run, () => {}), { signal })
  for (;;) {
    const { done } = await steps.next()
    if (done) break
  }
  const end = run.end(now())
  await countUsage(run, env)
  return end.tag === 'reply' ? end.val : hostError(new Error('a whole run ended as a stream'))
}

/**
 * A streamed run: resolves with the Response once the first request is sent (a `200` stream of
 * server-sent events, written as the run goes) or once the run ended before that (a whole
 * reply: `422`, `403`). `done` settles when the stream is over, with its status.
 */
function streamed(run, ctx, log, env) {
  const controller = new AbortController()
  const { readable, writable } = new TransformStream()
  const writer = writable.getWriter()
  let open
  const opened = new Promise((resolve) => {
    open = resolve
  })
  const stream = () => open(new Response(readable, { status: 200, headers: run.streamHeaders() }))
  const write = (text) =>
    writer.write(encoder.encode(text)).catch(() => {
      // The caller went away: the run stops, nothing more is sent for it.
      controller.abort()
    })
  const pump = (async () => {
    let streaming = false
    const begin = () => {
      if (!streaming) stream()
      streaming = true
    }
    try {
      const steps = driveRun(watched(run, begin), { signal: controller.signal })
      for (;;) {
        const { done } = await steps.next()
        if (done) break
        const text = run.eventText()
        if (text !== undefined) {
          begin()
          await write(text)
        }
      }
      const end = run.end(now())
      await countUsage(run, env)
      if (end.tag === 'reply' && !streaming) {
        open(respond(end.val))
        log(end.val.status)
        exportTraces(run, end.val.status, ctx)
        return
      }
      begin()
      if (end.tag === 'last-event') await write(end.val)
    } catch (error) {
      if (!streaming) {
        const reply = hostError(error)
        open(respond(reply))
        log(reply.status)
        return
      }
    }
    await writer.close().catch(() => {})
    log(200)
    exportTraces(run, 200, ctx)
  })()
  ctx?.waitUntil?.(pump)
  return opened
}

export default {
  async fetch(request, env, ctx) {
    const started = Date.now()
    const url = new URL(request.url)
    const path = url.pathname + url.search
    const log = (status) => {
      console.error(routes.logLine(request.method, path, status, BigInt(Date.now() - started)).trimEnd())
    }
    const finish = (reply) => {
      log(reply.status)
      return respond(reply)
    }
    try {
      const head = { method: request.method, path, headers: [...request.headers] }
      const exchange = new routes.Request(environment(env), head, BigInt(started))
      const verdict = exchange.head()
      if (verdict.tag === 'reply') return finish(verdict.val)
      // The key's limits, before the body is read.
      const limited = exchange.limits(BigInt(started))
      if (limited.tag === 'reply') return finish(limited.val)
      if (limited.tag === 'count') {
        const refused = exchange.counted(await applyCounts(env, limited.val))
        if (refused) return finish(refused)
      }
      const body = await readBody(request, verdict.val)
      if (body.failure) return finish(exchange.bodyFailed(body.failure))
      const answer = exchange.body(body.bytes, now(), seed())
      if (answer.tag === 'reply') return finish(answer.val)
      const run = answer.val
      if (run.streaming()) return await streamed(run, ctx, log, env)
      const reply = await whole(run, request.signal, env)
      const response = finish(reply)
      exportTraces(run, reply.status, ctx)
      return response
    } catch (error) {
      return finish(hostError(error))
    }
  },
}
