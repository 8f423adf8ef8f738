// Types of `oma-component/gateway`: the HTTP steps a host performs for a gateway request of the
// `routes` world (oma_routes.wasm, which the gateway's host transpiles and ships itself; this
// package carries the agent only). docs/gateway.md describes the HTTP contract;
// packages/worker/src/gateway.js is a host built on this module (Cloudflare Workers).
import type { jsonDriver as driver } from './gen/oma_portable_json.js'

/** A gateway request's HTTP step: send a request, read more of its response, or wait. */
export type HttpStep = Extract<driver.Step, { tag: 'send' } | { tag: 'receive' } | { tag: 'wait' }>

/** The answer to an {@link HttpStep}, as the request takes it. */
export type HttpAnswer = Extract<
  driver.Answer,
  | { tag: 'response' }
  | { tag: 'head' }
  | { tag: 'chunk' }
  | { tag: 'end' }
  | { tag: 'failure' }
  | { tag: 'waited' }
>

/**
 * The HTTP steps of one gateway request, performed with the package's own I/O: each request
 * sent with `fetch` (`redirect: 'manual'`, identity encoding), each body streamed to the
 * component and held to its byte limits, every read bounded by the step's timeout, and retry
 * waits. One response is in flight at a time.
 */
export class HttpSteps {
  /**
   * Performs `step` and resolves with its answer. Rejects with an error named `CANCELLED` when
   * `signal` aborts (the request in flight is aborted).
   */
  perform(step: HttpStep, signal?: AbortSignal): Promise<HttpAnswer>
  /** Ends the response in flight, if any. */
  close(): void
}
