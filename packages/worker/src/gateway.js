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

/** A run answered whole: stepped to its end, then the reply its end gives. */
async function whole(run, signal) {
  const steps = driveRun(watched(run, () => {}), { signal })
  for (;;) {
    const { done } = await steps.next()
    if (done) break
  }
  const end = run.end(now())
  return end.tag === 'reply' ? end.val : hostError(new Error('a whole run ended as a stream'))
}

/**
 * A streamed run: resolves with the Response once the first request is sent (a `200` stream of
 * server-sent events, written as the run goes) or once the run ended before that (a whole
 * reply: `422`, `403`). `done` settles when the stream is over, with its status.
 */
function streamed(run, ctx, log) {
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
      const body = await readBody(request, verdict.val)
      if (body.failure) return finish(exchange.bodyFailed(body.failure))
      const answer = exchange.body(body.bytes, now(), seed())
      if (answer.tag === 'reply') return finish(answer.val)
      const run = answer.val
      if (run.streaming()) return await streamed(run, ctx, log)
      const reply = await whole(run, request.signal)
      const response = finish(reply)
      exportTraces(run, reply.status, ctx)
      return response
    } catch (error) {
      return finish(hostError(error))
    }
  },
}
