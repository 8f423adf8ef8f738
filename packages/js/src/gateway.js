// oma-component/gateway: the HTTP a host performs to serve the gateway's HTTP contract
// (docs/gateway.md) with its own HTTP server, as packages/worker's gateway Worker does on
// Cloudflare Workers. The rules are not here: they are the `routes` world's request machine
// (oma_routes.wasm, the same Rust as oma_gateway.wasm), which the gateway's host transpiles and
// ships itself, so that this package carries the agent only. This module performs a gateway
// request's HTTP steps (`send`, `receive`, `wait`) with the package's own HTTP (transport.js:
// `redirect: 'manual'`, identity encoding, bodies streamed to the component and held to its
// byte limits, every read bounded by the step's timeout) and timers, and imports no component.
import { send, receive } from './transport.js'

/** An error whose `name` is `CANCELLED`: the request was aborted by its signal. */
function cancelled() {
  const error = new Error('the request was cancelled')
  error.name = 'CANCELLED'
  return error
}

/** `promise`, or a rejection with {@link cancelled} as soon as `signal` aborts. */
function abortable(promise, signal) {
  if (!signal) return promise
  if (signal.aborted) return Promise.reject(cancelled())
  let onAbort
  const aborted = new Promise((_, reject) => {
    onAbort = () => reject(cancelled())
    signal.addEventListener('abort', onAbort, { once: true })
  })
  return Promise.race([promise, aborted]).finally(() => signal.removeEventListener('abort', onAbort))
}

/**
 * The HTTP steps of one gateway request (`routes.Request` of oma_routes.wasm): `perform` takes a
 * `send`, `receive` or `wait` step and resolves with the answer to give the request (`response`,
 * `head`, `chunk`, `end`, `failure`, `waited`). One response is in flight at a time: a `send` or
 * a `wait` ends the one before, and `close` ends it when the request is over. A `signal` that
 * aborts rejects the step with an error named `CANCELLED` (the request in flight is aborted).
 */
export class HttpSteps {
  #exchange = null

  async perform(step, signal) {
    switch (step.tag) {
      case 'send': {
        this.close()
        const sent = await abortable(send(step.val, signal), signal)
        this.#exchange = sent.exchange
        return sent.answer
      }
      case 'receive': {
        const answer = await abortable(receive(this.#exchange), signal)
        // The response is over with anything but a chunk.
        if (answer.tag !== 'chunk') this.close()
        return answer
      }
      case 'wait': {
        this.close()
        let timer
        try {
          await abortable(new Promise((resolve) => { timer = setTimeout(resolve, Number(step.val)) }), signal)
        } finally {
          clearTimeout(timer)
        }
        return { tag: 'waited' }
      }
      default:
        throw new Error(`${step.tag} is not an HTTP step`)
    }
  }

  /** Ends the response in flight, if any (its connection is let go). */
  close() {
    this.#exchange?.close()
    this.#exchange = null
  }
}
