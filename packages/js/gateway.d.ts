// Types of `oma-component/gateway`: the I/O loop a host uses to step a gateway run of the
// `routes` world (oma_routes.wasm, which the gateway's host transpiles and ships itself; this
// package carries the agent only). docs/gateway.md describes the HTTP contract;
// packages/worker/src/gateway.js is a host built on this module (Cloudflare Workers).
import type { driver } from './gen/oma_portable.js'

/** What {@link driveRun} steps: a gateway run (`routes.Run` of oma_routes.wasm). */
export interface SteppedRun {
  /** The next step at `nowMs`; throws the component's error on misuse. */
  next(nowMs: bigint): driver.Poll
  /** The answer to the step the run asked for. */
  answer(answer: driver.Answer): void
}

/** How a run is driven. */
export interface DriveOptions {
  /** Aborts the run: the request in flight is aborted. */
  signal?: AbortSignal
}

/**
 * Steps `run` to its end with the package's own I/O: each request sent with `fetch`
 * (`redirect: 'manual'`, identity encoding), each body streamed to the component and held to its
 * byte limits, every read bounded by the step's timeout, and retry waits. A gateway run hands out
 * only `send`, `receive`, `wait` and `event` steps. Yields each agent event as it comes; returns
 * the finished run's report. Throws an error named `CANCELLED` when `options.signal` aborts.
 */
export function driveRun(
  run: SteppedRun,
  options?: DriveOptions,
): AsyncGenerator<driver.AgentEvent, driver.RunReport, void>
