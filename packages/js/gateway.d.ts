// Types of `oma-component/gateway`: the gateway's HTTP rules (`routes`, the component's export,
// typed by jco from wit/routes.wit) and the package's session loop that steps a `/v1/run`.
// docs/gateway.md describes the HTTP contract; packages/worker/src/gateway.js is a host built on
// this module (Cloudflare Workers).
import type { driver } from './gen/oma_portable.js'

/**
 * The gateway's rules, as the component exports them: `new routes.Request(environment, head,
 * nowMs)`, then `head()`, `body(bytes, nowMs, seed)` or `bodyFailed(failure)`, and for a run
 * `next`/`answer` (through {@link driveSession}), `eventText()` and `end(nowMs)`; `logLine` for
 * the request's log line. Times are milliseconds since the epoch as `bigint`.
 */
export { routes } from './gen/oma_portable.js'

/** What {@link driveSession} steps: a driver session, or a gateway run (`routes.Run`). */
export interface SteppedSession {
  /** The next step at `nowMs`; throws the component's error on misuse. */
  next(nowMs: bigint): driver.Poll
  /** The answer to the step or due the session asked for. */
  answer(answer: driver.Answer): void
}

/** The host side of a run the gateway drives: none of OMA's hooks, tools or backends. */
export type GatewayHost = Record<string, never>

/** How a run is driven. */
export interface DriveOptions {
  /** Aborts the run: the request in flight is aborted and the session dropped. */
  signal?: AbortSignal
  /** Where the loop records each tool call's timing (empty for the gateway, which runs none). */
  timings: Array<{ start: number; end: number | undefined }>
}

/**
 * Steps `session` to its end with the package's own I/O: each request sent with `fetch`
 * (`redirect: 'manual'`, identity encoding), each body streamed to the component and held to its
 * byte limits, every read bounded by the step's timeout, retry waits and the run's deadline.
 * Yields each agent event as it comes; returns the finished session's report (parsed JSON).
 * Throws an error named `CANCELLED` when `options.signal` aborts.
 */
export function driveSession(
  session: SteppedSession,
  host: GatewayHost,
  options: DriveOptions,
): AsyncGenerator<driver.AgentEvent, unknown, void>
