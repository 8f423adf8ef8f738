// The package's HTTP transport for `send` and `receive` steps: the platform's `fetch`, no
// redirects followed, identity encoding, bodies read as streams and handed to the component
// chunk by chunk, every read bounded by the step's timeout.

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
 * for a streamed response, each gap between bytes, and for a whole response, everything up to
 * its last byte, so a provider that trickles a byte at a time cannot hold a non-streamed call
 * open past it. A streamed response that trickles ends at the call's or the run's deadline,
 * which the component checks after every chunk.
 */
export class Exchange {
  constructor(timeoutMs, stream, signal) {
    this.controller = new AbortController()
    // The run's abort signal (the caller's `abortSignal`) aborts the request too.
    this.signal = signal
    this.onAbort = () => this.close()
    signal?.addEventListener('abort', this.onAbort, { once: true })
    this.timeoutMs = timeoutMs
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
    }, this.timeoutMs)
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
 * The request's headers for fetch. The body comes as bytes (scripts/patch-gen.mjs), for which
 * fetch sets no `content-type`; where the component sets none, this adds the one fetch gives a
 * string body, so the wire is what it was with a string. It asks for `identity` encoding, where
 * fetch would ask for gzip, deflate and br and inflate what comes: the component refuses an
 * encoded body at its head, so no body is ever inflated past the response limit.
 */
function requestHeaders(request) {
  const headers = request.headers.filter(([name]) => name.toLowerCase() !== 'accept-encoding')
  headers.push(['accept-encoding', 'identity'])
  if (typeof request.body === 'string') return headers
  for (let i = 0; i < headers.length; i++) {
    if (headers[i][0].toLowerCase() === 'content-type') return headers
  }
  headers.push(['content-type', 'text/plain;charset=UTF-8'])
  return headers
}

/**
 * Sends a `send` step's request. Redirects are never followed (`redirect: 'manual'`): a 3xx is
 * handed to the component as it came, which makes it OMA's provider error, never retried, so
 * the key in the headers goes to the configured origin only. Every answer is a head followed by
 * chunks, streamed or not: the component counts the bytes against its response limit as they
 * arrive, and the run stops reading (and closes the connection) the moment it is passed.
 */
export async function send(request, signal) {
  const exchange = new Exchange(Number(request.timeoutMs), request.stream, signal)
  try {
    const res = await fetch(request.url, {
      method: request.method,
      headers: requestHeaders(request),
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
    return { exchange, answer: { tag: 'head', val: { status: res.status, headers: [...res.headers] } } }
  } catch (error) {
    const answer = exchange.failure(error)
    exchange.close()
    return { exchange: null, answer }
  }
}

export async function receive(exchange) {
  if (!exchange || !exchange.reader) return { tag: 'end' }
  if (exchange.stream) exchange.arm()
  try {
    const { done, value } = await exchange.reader.read()
    if (exchange.stream || done) exchange.disarm()
    return done ? { tag: 'end' } : { tag: 'chunk', val: value }
  } catch (error) {
    exchange.disarm()
    return exchange.failure(error)
  }
}

