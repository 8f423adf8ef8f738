// oma-component/gateway: the I/O a host needs to serve the gateway's HTTP contract
// (docs/gateway.md) with its own HTTP server, as packages/worker's gateway Worker does on
// Cloudflare Workers. The rules are not here: they are the `routes` world's (oma_routes.wasm,
// the same Rust as oma_gateway.wasm), which the gateway's host transpiles and ships itself, so
// that this package carries the agent only. This module steps a gateway run (`routes.Run`) with
// the package's own HTTP (transport.js: `redirect: 'manual'`, identity encoding, bodies streamed
// to the component and held to its byte limits, every read bounded by the step's timeout) and
// timers, and imports no component.
import { send, receive } from './transport.js'

/** An error whose `name` is `CANCELLED`: the run was aborted by its signal. */
function cancelled() {
  const error = new Error('the run was cancelled')
  error.name = 'CANCELLED'
  return error
}

/** A promise that rejects when `signal` aborts, and a way to stop listening. */
function cancellation(signal) {
  let onAbort
  const promise = new Promise((_, reject) => {
    if (!signal) return
    onAbort = () => reject(cancelled())
    if (signal.aborted) onAbort()
    else signal.addEventListener('abort', onAbort, { once: true })
  })
  promise.catch(() => {})
  return { promise, dispose: () => signal?.removeEventListener('abort', onAbort) }
}

/**
 * Steps a gateway run (`routes.Run`, or anything with its `next(nowMs)` and `answer(answer)`) to
 * its end. A gateway run hands out only HTTP steps (`send`, `receive`, `wait`) and `event` steps:
 * each event is yielded as it comes (the run's `eventText()` is its server-sent text); returns
 * the finished run's report. Throws an error named `CANCELLED` when `options.signal` aborts
 * (the request in flight is aborted).
 */
export async function* driveRun(run, options = {}) {
  const signal = options.signal
  const cancel = cancellation(signal)
  const race = (promise) => Promise.race([promise, cancel.promise])
  let exchange = null
  try {
    for (;;) {
      if (signal?.aborted) throw cancelled()
      const polled = run.next(BigInt(Date.now()))
      if (polled.tag === 'finished') return polled.val
      if (polled.tag === 'waiting') {
        throw new Error('the gateway run waits for an answer no gateway host owes')
      }
      const step = polled.val
      if (exchange && step.tag !== 'receive' && step.tag !== 'event') {
        // The call is over with this response (a limit, a retry's wait): the rest is not read.
        exchange.close()
        exchange = null
      }
      switch (step.tag) {
        case 'send': {
          const sent = await race(send(step.val, signal))
          exchange = sent.exchange
          run.answer(sent.answer)
          break
        }
        case 'receive': {
          const answer = await race(receive(exchange))
          if (answer.tag !== 'chunk') {
            exchange?.close()
            exchange = null
          }
          run.answer(answer)
          break
        }
        case 'wait': {
          let timer
          try {
            await race(new Promise((resolve) => { timer = setTimeout(resolve, Number(step.val)) }))
          } finally {
            clearTimeout(timer)
          }
          run.answer({ tag: 'waited' })
          break
        }
        case 'event':
          yield step.val
          break
        default:
          throw new Error(`a gateway run handed out the step ${step.tag}, which no gateway host performs`)
      }
    }
  } finally {
    cancel.dispose()
    exchange?.close()
  }
}
