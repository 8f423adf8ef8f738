// The package's HTTP transport for `send` and `receive` steps: on Node (and Bun), `node:http` and
// `node:https` with keep-alive agents; elsewhere (Workers, Deno, browsers) the platform's
// `fetch`. Either way: no redirects followed, identity encoding (in a browser, the encoding the
// browser negotiates and decodes), bodies read as streams and handed to the component chunk by
// chunk, every read bounded by the step's timeout. Node's modules come through `#platform`, so
// that a browser bundle has none.
//
// Why two: on Node, `fetch` (undici) costs about 110 µs more per loopback request than
// `node:http` (WHATWG streams, Headers, AbortSignal plumbing), which is most of a small run. Both
// paths send the same request line, headers and body (the headers `fetch` adds on its own are
// added by the Node path too) and hand the component the same answers.

import { httpModules } from '#platform'

/** Node's `http` and `https` modules, or null where this is not Node (or Node's modules are a shim). */
const nodeModules = await (async () => {
  const proc = globalThis.process
  if (typeof proc?.versions?.node !== 'string' || proc.release?.name !== 'node') return null
  // Workers with nodejs_compat look like Node but their http client is fetch underneath.
  if (globalThis.navigator?.userAgent === 'Cloudflare-Workers') return null
  // So does Deno, whose fetch is its own client; its node:http keeps a reused keep-alive
  // connection open when a request on it is destroyed (a cancelled run), which holds the
  // program open.
  if (globalThis.Deno !== undefined) return null
  try {
    const modules = await httpModules()
    if (modules === null) return null
    const [http, https, url] = modules
    return {
      http,
      https,
      urlToHttpOptions: url.urlToHttpOptions,
      agents: {
        'http:': new http.Agent({ keepAlive: true }),
        'https:': new https.Agent({ keepAlive: true }),
      },
    }
  } catch {
    return null
  }
})()

function failureKind(error, timedOut) {
  if (timedOut) return 'timed-out'
  const cause = error?.cause ?? {}
  const code = cause.code ?? error?.code ?? ''
  const name = error?.name ?? ''
  if (name === 'TimeoutError' || /TIMEOUT/.test(code)) return 'timed-out'
  if (code === 'ECONNREFUSED') return 'refused'
  if (
    code === 'ECONNRESET' || code === 'EPIPE' || code === 'UND_ERR_SOCKET' ||
    code === 'UND_ERR_CLOSED' || /terminated|other side closed/i.test(String(error?.message))
  ) {
    return 'reset'
  }
  return 'other'
}

function failureMessage(error) {
  const cause = error?.cause
  const parts = [String(error?.message ?? error)]
  if (cause && typeof cause === 'object') {
    if (cause.code) parts.push(String(cause.code))
    else if (cause.message) parts.push(String(cause.message))
  }
  return parts.join(': ').slice(0, 300)
}

/**
 * An in-flight HTTP exchange and its timer. The step's `timeoutMs` (the component has already cut
 * it to what is left of the call's and the run's deadlines) bounds connecting and the head; then,
 * for a streamed response, each gap between bytes, and for any response everything up to its
 * last byte, so a provider that trickles a byte at a time, or sends keep-alives for ever, cannot
 * hold a call open past it (the component checks the same bound after every chunk).
 */
export class Exchange {
  constructor(timeoutMs, stream, signal) {
    this.controller = new AbortController()
    // The run's abort signal (the caller's `abortSignal`) aborts the request too.
    this.signal = signal
    this.onAbort = () => this.close()
    signal?.addEventListener('abort', this.onAbort, { once: true })
    this.timeoutMs = timeoutMs
    // The whole exchange ends by then, however its bytes come.
    this.until = Date.now() + timeoutMs
    this.stream = stream
    this.timedOut = false
    this.timer = null
    this.reader = null
    this.arm()
  }
  arm() {
    this.disarm()
    this.timer = setTimeout(() => {
      this.timedOut = true
      this.controller.abort()
    }, Math.max(0, Math.min(this.timeoutMs, this.until - Date.now())))
  }
  disarm() {
    if (this.timer !== null) clearTimeout(this.timer)
    this.timer = null
  }
  close() {
    this.disarm()
    this.signal?.removeEventListener('abort', this.onAbort)
    if (this.reader) this.reader.cancel().catch(() => {})
    this.reader = null
    this.controller.abort()
  }
  failure(error) {
    return {
      tag: 'failure',
      val: { kind: failureKind(error, this.timedOut), message: failureMessage(error) },
    }
  }
}

/**
 * Whether this is a browser (a page or a web worker): every browser's `navigator.userAgent` starts
 * with `Mozilla/`, and no server runtime's does (Node's, Deno's and Bun's name themselves, Workers'
 * is `Cloudflare-Workers`). Browsers own `accept-encoding`: a page cannot ask for identity, the
 * browser negotiates compression and hands over the body decoded.
 */
const BROWSER = typeof globalThis.navigator?.userAgent === 'string' && globalThis.navigator.userAgent.startsWith('Mozilla/')

/**
 * The request's headers for fetch. The body comes as bytes (scripts/patch-gen.mjs), for which
 * fetch sets no `content-type`; where the component sets none, this adds the one fetch gives a
 * string body, so the wire is what it was with a string. Outside browsers it asks for `identity`
 * encoding, where fetch would ask for gzip, deflate and br and inflate what comes: the component
 * refuses an encoded body at its head, so no body is ever inflated past the response limit. In a
 * browser, which decodes what it negotiated (`decodedHead`), it leaves the encoding to the
 * browser and, for Anthropic (a request with `anthropic-version`), says that the call comes from a
 * browser (`anthropic-dangerous-direct-browser-access: true`), which Anthropic's API asks of
 * browsers.
 */
function requestHeaders(request, browser = false) {
  const headers = request.headers.filter(([name]) => name.toLowerCase() !== 'accept-encoding')
  if (browser) {
    const names = new Set(headers.map(([name]) => name.toLowerCase()))
    if (names.has('anthropic-version') && !names.has(ANTHROPIC_BROWSER_HEADER)) {
      headers.push([ANTHROPIC_BROWSER_HEADER, 'true'])
    }
  } else {
    headers.push(['accept-encoding', 'identity'])
  }
  if (typeof request.body === 'string') return headers
  for (let i = 0; i < headers.length; i++) {
    if (headers[i][0].toLowerCase() === 'content-type') return headers
  }
  headers.push(['content-type', 'text/plain;charset=UTF-8'])
  return headers
}

const ANTHROPIC_BROWSER_HEADER = 'anthropic-dangerous-direct-browser-access'

/**
 * A response's head as the component is to see it. In a browser the body arrives decoded, so a
 * `content-encoding` the page can see (a provider that exposes it to CORS) and the
 * `content-length` of the encoded body describe bytes the component never gets: both are left out
 * when the body was encoded. The component still counts the decoded bytes against its response
 * limit as they arrive, so a body that inflates past it is cut there.
 */
function decodedHead(res, browser) {
  const headers = [...res.headers]
  if (!browser) return headers
  const encoding = res.headers.get('content-encoding')
  if (encoding === null || encoding.trim().toLowerCase() === 'identity') return headers
  return headers.filter(([name]) => name !== 'content-encoding' && name !== 'content-length')
}

/**
 * Sends a `send` step's request with `fetch`. Redirects are never followed (`redirect:
 * 'manual'`): a 3xx is handed to the component as it came, which makes it OMA's provider error,
 * never retried, so the key in the headers goes to the configured origin only. Every answer is a
 * head followed by chunks, streamed or not: the component counts the bytes against its response
 * limit as they arrive, and the run stops reading (and closes the connection) the moment it is
 * passed.
 */
async function fetchSend(request, signal) {
  const exchange = new Exchange(Number(request.timeoutMs), request.stream, signal)
  try {
    const res = await fetch(request.url, {
      method: request.method,
      headers: requestHeaders(request, BROWSER),
      body: request.body,
      signal: exchange.controller.signal,
      redirect: 'manual',
    })
    if (res.type === 'opaqueredirect') {
      // A runtime that hides the redirect's status (browsers do): nothing of it is usable.
      exchange.close()
      return {
        exchange: null,
        answer: { tag: 'failure', val: { kind: 'other', message: 'the provider answered with a redirect, which is not followed' } },
      }
    }
    if (exchange.stream) exchange.disarm()
    exchange.reader = res.body ? res.body.getReader() : null
    return { exchange, answer: { tag: 'head', val: { status: res.status, headers: decodedHead(res, BROWSER) } } }
  } catch (error) {
    const answer = exchange.failure(error)
    exchange.close()
    return { exchange: null, answer }
  }
}

Exchange.prototype.read = async function read() {
  if (!this.reader) return { tag: 'end' }
  if (this.stream) this.arm()
  try {
    const { done, value } = await this.reader.read()
    if (this.stream || done) this.disarm()
    return done ? { tag: 'end' } : { tag: 'chunk', val: value }
  } catch (error) {
    this.disarm()
    return this.failure(error)
  }
}

/** A connection that closed before the response's end: what `fetch` calls `terminated`. */
function closedEarly() {
  const error = new Error('terminated: the connection closed before the response ended')
  error.code = 'ECONNRESET'
  return error
}

const TIMER_MAX_MS = 2 ** 31 - 1

/**
 * The Node exchanges' deadlines under one timer, set for the earliest: arming and disarming
 * (per request, and per read of a stream) is a set's add and delete, not a timer made and
 * cleared. The timer is moved only for an earlier deadline; when it fires it times out what is
 * due and is set for the earliest left. Unref'd: the sockets it bounds hold the process open.
 */
const deadlines = {
  /** The exchanges armed, each with its `deadline` (`performance.now()`'s clock). */
  armed: new Set(),
  timer: null,
  /** When the timer fires, while it is set. */
  due: 0,
  add(exchange, deadline) {
    exchange.deadline = deadline
    this.armed.add(exchange)
    if (this.timer === null || deadline < this.due) this.schedule(deadline)
  },
  delete(exchange) {
    this.armed.delete(exchange)
  },
  schedule(due) {
    if (this.timer !== null) clearTimeout(this.timer)
    this.due = due
    // Node takes a delay past 2^31 - 1 ms as 1 ms: a longer one fires early, to be set again.
    this.timer = setTimeout(() => this.fire(), Math.min(TIMER_MAX_MS, Math.max(0, due - performance.now())))
    this.timer.unref?.()
  },
  /** Times out every exchange whose deadline has passed, then waits for the earliest left. */
  fire() {
    this.timer = null
    const now = performance.now()
    let next = Infinity
    for (const exchange of [...this.armed]) {
      if (exchange.deadline <= now) {
        this.armed.delete(exchange)
        exchange.expire()
      } else if (exchange.deadline < next) {
        next = exchange.deadline
      }
    }
    if (next !== Infinity && (this.timer === null || next < this.due)) this.schedule(next)
  },
}

/**
 * An in-flight exchange over `node:http` / `node:https`: the same timer rules as `Exchange`,
 * its deadlines kept by `deadlines`' one timer.
 * The body is read with backpressure: a chunk that nobody asked for yet pauses the response
 * until `read` takes it, so a body past the response limit stops at the sockets' buffers.
 */
class NodeExchange {
  constructor(timeoutMs, stream, signal) {
    this.req = null
    this.res = null
    this.signal = signal
    this.onAbort = () => this.close()
    signal?.addEventListener('abort', this.onAbort, { once: true })
    this.timeoutMs = timeoutMs
    // The whole exchange ends by then, however its bytes come (on `deadlines`' clock).
    this.until = performance.now() + timeoutMs
    this.stream = stream
    this.timedOut = false
    /** When `deadlines` times this exchange out while it is armed. */
    this.deadline = 0
    /** Chunks that arrived before `read` asked for them. */
    this.queue = []
    /** The `read` waiting for the next chunk, the end or a failure. */
    this.waiter = null
    this.ended = false
    this.error = null
    this.closed = false
    this.gather = null
    this.arm()
  }
  arm() {
    deadlines.add(this, Math.min(performance.now() + this.timeoutMs, this.until))
  }
  disarm() {
    deadlines.delete(this)
  }
  /** Its deadline passed while armed. */
  expire() {
    this.timedOut = true
    this.abort(new Error('the step timed out'))
  }
  /** Ends the exchange with `error` unless it is over already. */
  abort(error) {
    if (this.ended || this.error) return
    this.fail(error)
    this.req?.destroy()
  }
  fail(error) {
    if (this.ended || this.error) return
    this.error = error
    const gather = this.gather
    if (gather !== null) {
      this.gather = null
      gather(null)
      return
    }
    this.wake()
  }
  /** The gathered body's end: its text for a whole `response` answer, if it is UTF-8. */
  gathered() {
    const gather = this.gather
    this.gather = null
    const bytes = this.queue.length === 1 ? this.queue[0] : Buffer.concat(this.queue)
    let text
    try {
      text = STRICT_UTF8.decode(bytes)
    } catch {
      // Not UTF-8: the component gets the bytes as they are and says so.
      this.queue = [bytes]
      gather(null)
      return
    }
    this.queue = []
    this.disarm()
    gather(text)
  }
  wake() {
    const waiter = this.waiter
    if (waiter === null) return
    this.waiter = null
    waiter(this.take())
  }
  /** The next answer from what has arrived, or null when nothing has. */
  take() {
    const queue = this.queue
    if (queue.length > 0) {
      this.queue = []
      const val = queue.length === 1 ? queue[0] : Buffer.concat(queue)
      if (!this.ended) this.res.resume()
      return { tag: 'chunk', val }
    }
    if (this.error) {
      this.disarm()
      return this.failure(this.error)
    }
    if (this.ended) {
      this.disarm()
      return { tag: 'end' }
    }
    return null
  }
  /**
   * Takes a response: its body is queued as it arrives. With `gather`, the body is first
   * gathered whole: `gather(text)` gets it at its end as text, or `gather(null)` (answer with
   * the head; what came follows as chunks) when it is not UTF-8 or the exchange fails first.
   */
  attach(res, gather = null) {
    this.res = res
    this.gather = gather
    res.on('data', (chunk) => {
      this.queue.push(chunk)
      if (this.gather !== null) return
      if (this.waiter !== null) this.wake()
      else res.pause()
    })
    res.on('end', () => {
      this.ended = true
      if (this.gather !== null) this.gathered()
      else this.wake()
    })
    res.on('error', (error) => this.fail(error))
    res.on('close', () => {
      if (!this.ended) this.fail(closedEarly())
    })
  }
  read() {
    if (this.stream) this.arm()
    const now = this.take()
    if (now !== null) {
      if (this.stream) this.disarm()
      return Promise.resolve(now)
    }
    return new Promise((resolve) => {
      this.waiter = (answer) => {
        if (this.stream) this.disarm()
        resolve(answer)
      }
    })
  }
  close() {
    this.disarm()
    this.signal?.removeEventListener('abort', this.onAbort)
    if (this.closed) return
    this.closed = true
    // A response read to its end leaves its socket to the agent for the next request.
    if (!this.ended) {
      this.fail(new Error('the exchange was closed'))
      this.req?.destroy()
    }
  }
  failure(error) {
    return {
      tag: 'failure',
      val: { kind: failureKind(error, this.timedOut), message: nodeFailureMessage(error) },
    }
  }
}

function nodeFailureMessage(error) {
  const message = String(error?.message ?? error)
  const code = error?.code
  return (code && !message.includes(code) ? `${message}: ${code}` : message).slice(0, 300)
}

/** A BOM stays in the text, as it is in the bytes; bytes that are not UTF-8 throw. */
const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

/**
 * The most body a whole (not streamed) response may have, by its `content-length`, to be handed
 * to the component as one `response` answer when it has all arrived with its head: one call
 * instead of a head, a chunk and an end (three `answer`s and two more `next`s). The component
 * reads such an answer exactly as that head, chunk and end.
 */
const WHOLE_MAX = 64 * 1024

function gatherable(res) {
  const length = res.headers['content-length']
  if (length === undefined || !/^\d+$/.test(length)) return false
  return Number(length) <= WHOLE_MAX
}

/** Headers that `fetch` sends when the request does not set them, in the order it adds them. */
const FETCH_DEFAULTS = [['accept', '*/*'], ['accept-language', '*'], ['sec-fetch-mode', 'cors'], ['user-agent', 'node']]

/**
 * The request's header lines for `node:http`, as `fetch` would send them: `host` and
 * `connection` first, the request's headers (with `requestHeaders`' rules), `fetch`'s defaults
 * where absent, and the body's length.
 */
function nodeHeaders(request, url, length) {
  const own = requestHeaders(request)
  const raw = ['host', url.host, 'connection', 'keep-alive']
  const names = new Set()
  for (const [name, value] of own) {
    const lower = name.toLowerCase()
    if (lower === 'host' || lower === 'connection' || lower === 'content-length') continue
    names.add(lower)
    raw.push(name, value)
  }
  for (const [name, value] of FETCH_DEFAULTS) if (!names.has(name)) raw.push(name, value)
  if (length > 0 || request.method !== 'GET') raw.push('content-length', String(length))
  return raw
}

/**
 * A response's headers as `fetch` gives them: names in lower case, sorted, repeated ones joined
 * with `, ` (`set-cookie` apart, one entry each).
 */
function responseHeaders(rawHeaders) {
  const joined = new Map()
  const cookies = []
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i].toLowerCase()
    const value = rawHeaders[i + 1]
    if (name === 'set-cookie') cookies.push(value)
    else joined.set(name, joined.has(name) ? `${joined.get(name)}, ${value}` : value)
  }
  const out = [...joined]
  for (const value of cookies) out.push(['set-cookie', value])
  return out.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
}

/**
 * The last request URL's parse, its module and the request options Node makes of it: a run's
 * model calls go to one URL, and parsing it and reading its parts again cost a microsecond or
 * two of every request.
 */
let lastTarget = null

function nodeTarget(text) {
  if (lastTarget !== null && lastTarget.text === text) return lastTarget
  const url = new URL(text)
  const mod = url.protocol === 'https:' ? nodeModules.https : url.protocol === 'http:' ? nodeModules.http : null
  if (mod === null) throw new TypeError(`fetch failed: the URL scheme ${url.protocol} is not supported`)
  lastTarget = { text, url, mod, options: nodeModules.urlToHttpOptions(url) }
  return lastTarget
}

/** As `fetchSend`, over `node:http` / `node:https` (which follow no redirects either). */
function nodeSend(request, signal) {
  const exchange = new NodeExchange(Number(request.timeoutMs), request.stream, signal)
  return new Promise((resolve) => {
    let settled = false
    const settle = (answer) => {
      if (settled) return
      settled = true
      if (answer.tag === 'failure' || answer.tag === 'response') {
        exchange.close()
        resolve({ exchange: null, answer })
      } else {
        if (exchange.stream) exchange.disarm()
        resolve({ exchange, answer })
      }
    }
    exchange.waiter = (answer) => {
      if (answer.tag === 'failure') settle(answer)
    }
    try {
      const { url, mod, options } = nodeTarget(request.url)
      const body = typeof request.body === 'string' ? Buffer.from(request.body, 'utf8') : request.body
      const length = body?.length ?? 0
      // What `mod.request(url, {...})` makes of the URL (`urlToHttpOptions`), and the rest.
      const req = mod.request({
        ...options,
        method: request.method,
        agent: nodeModules.agents[url.protocol],
        setHost: false,
        headers: nodeHeaders(request, url, length),
      })
      exchange.req = req
      req.on('response', (res) => {
        exchange.waiter = null
        const head = { status: res.statusCode, headers: responseHeaders(res.rawHeaders) }
        if (!exchange.stream && gatherable(res)) {
          exchange.attach(res, (text) => settle(
            text === null ? { tag: 'head', val: head } : { tag: 'response', val: { ...head, body: text } },
          ))
          return
        }
        exchange.attach(res)
        settle({ tag: 'head', val: head })
      })
      req.on('error', (error) => {
        if (exchange.res === null) settle(exchange.failure(exchange.error ?? error))
        else exchange.fail(error)
      })
      if (exchange.error) {
        req.destroy()
        settle(exchange.failure(exchange.error))
        return
      }
      req.end(length > 0 ? body : undefined)
    } catch (error) {
      settle(exchange.failure(error))
    }
  })
}

/**
 * Sends a `send` step's request: the Node path where there is one, else `fetch`. Resolves with
 * the exchange (null once it is over) and the answer: a `head`, a whole `response` (Node, a small
 * body that came with its head), or a `failure`.
 */
export function send(request, signal) {
  return nodeModules !== null ? nodeSend(request, signal) : fetchSend(request, signal)
}

/** Reads a `receive` step's answer from the exchange: the next `chunk`, the `end` or a `failure`. */
export function receive(exchange) {
  return exchange ? exchange.read() : Promise.resolve({ tag: 'end' })
}
