// The drive loop (OMA: agent/runner.ts's run loop): a driver session stepped to its end. Each
// step is performed with the platform's means (HTTP through transport.js, timers, the caller's
// hook, tools, loop and context callbacks, external backends) and answered, until the session is
// `finished`.

import { errorFrom, errorMessage, fromComponent } from '../errors.js'
import { deliverRecords } from '../observability/run-records.js'
import { receive, send } from '../transport.js'
import { isObject } from '../utils/options.js'
import { emitTrace } from '../utils/trace.js'
import { external } from './external-backend.js'
import { modelCall } from './llm-adapter.js'
import { validateOutput } from './structured-output.js'
import { answerTool, callTool } from './tool-calls.js'

/** What a run is cancelled with when the caller's signal aborts. */
export const CANCELLED = Symbol('cancelled')

/** A promise that rejects with CANCELLED when `signal` aborts; null without a signal. */
function cancellation(signal) {
  if (!signal) return { promise: null, dispose: () => {} }
  let dispose = () => {}
  const promise = new Promise((_, reject) => {
    const onAbort = () => reject(CANCELLED)
    if (signal.aborted) reject(CANCELLED)
    else {
      signal.addEventListener('abort', onAbort, { once: true })
      dispose = () => signal.removeEventListener('abort', onAbort)
    }
  })
  promise.catch(() => {})
  return { promise, dispose: () => dispose() }
}

/** Calls an observer; what it throws or rejects with changes nothing. */
export async function safely(fn, value) {
  if (typeof fn !== 'function') return
  try {
    await fn(value)
  } catch {
    // A throwing observer does not change the run.
  }
}

/**
 * The steps that may come while a response body is still being read (a streamed answer's first
 * piece makes a `first_chunk` record).
 */
const READING = new Set(['receive', 'event', 'progress', 'evaluation', 'trace-records'])

/**
 * A timer that resolves with `null` at `atMs` (milliseconds since the Unix epoch) and can be
 * cancelled, so that a run that ends early leaves no timer keeping the process alive.
 */
function wakeAt(atMs) {
  let timer
  const promise = new Promise((resolve) => {
    timer = setTimeout(resolve, Math.max(0, atMs - Date.now()), null)
  })
  return { promise, cancel: () => clearTimeout(timer) }
}

function sleep(ms) {
  let timer
  const promise = new Promise((resolve) => {
    timer = setTimeout(resolve, ms)
  })
  return { promise, cancel: () => clearTimeout(timer) }
}

/** Describes what a session waits for, for an error message. */
function dueText(due) {
  return due.map((d) => (d.tag === 'tool' ? `tool ${d.val}` : d.tag)).join(', ')
}

/** The beforeRun hook's answer: only `prompt` and `messages` go back to the component. */
function hookAnswer(result) {
  if (!isObject(result)) return JSON.stringify(result) ?? 'null'
  const out = { prompt: result.prompt }
  if (result.messages !== undefined) out.messages = result.messages
  return JSON.stringify(out)
}

/**
 * Closes the trace of a run its caller cancelled: the session, told so, hands out the records
 * that end the run's open spans with status `cancelled` and the legacy events (OMA ends its
 * spans the same way when the signal aborts), which go to the sinks and `onTrace` as any
 * others; then its result, OMA's cancelled one, which `cancelledResult` gives the caller.
 */
function closeCancelled(session, run) {
  try {
    session.cancel(BigInt(Date.now()))
    // Bounded: the session owes only the trace's end before its result.
    for (let i = 0; i < 64; i++) {
      const polled = session.next(BigInt(Date.now()))
      if (polled.tag !== 'step') return
      const step = polled.val
      if (step.tag === 'trace-records') deliverRecords(run, step.val)
      else if (step.tag === 'trace' && run.onTrace !== undefined) emitTrace(run.onTrace, JSON.parse(step.val))
    }
  } catch {
    // The run is over either way: the caller gets OMA's cancelled result.
  }
}

/**
 * Steps a session to its end. Yields each `event` step's agent event; returns the parsed
 * AgentRunResult. Throws CANCELLED when the caller's signal aborts: the request in flight is
 * aborted, a retry wait and pending hooks and tools are left, the session closes the run's
 * trace (its open spans end as `cancelled`), and it is dropped.
 *
 * HTTP steps are performed in turn. The hook, tools and external backends run as pending
 * answers: tool calls of one turn start at once and run concurrently, and while the session
 * waits for them it is asked again at the instant it names (`wake-at-ms`, the run's deadline),
 * so a hook or a tool that outlives the deadline ends the run with OMA's timeout instead of
 * holding it.
 */
export async function* drive(session, host, run) {
  let exchange = null
  /**
   * Answers under way, by the `due` they will answer, and the ones that have settled, in the
   * order they settled: each settled answer is queued once, so a turn of n tools costs O(n) in
   * all (a race over every pending promise on each answer would cost O(n²)).
   */
  const pending = new Set()
  const ready = []
  let wake = null
  const settle = (key, promise) => {
    pending.add(key)
    promise.then(
      (answer) => {
        ready.push([key, answer])
        if (wake) wake()
      },
      (error) => {
        // The answers catch their callers' errors; one that still throws is this host's bug.
        ready.push([key, () => { throw error }])
        if (wake) wake()
      },
    )
  }
  /** The adapter's model call in flight (its stream, which the session reads event by event). */
  let model = null
  const cancel = cancellation(run.signal)
  const race = (promise) => (cancel.promise === null ? promise : Promise.race([promise, cancel.promise]))
  try {
    for (;;) {
      if (run.signal?.aborted) throw CANCELLED
      let polled
      try {
        polled = session.next(BigInt(Date.now()))
      } catch (e) {
        throw fromComponent(e)
      }
      if (polled.tag === 'finished') return JSON.parse(polled.val)
      if (polled.tag === 'waiting') {
        const { due, wakeAtMs } = polled.val
        if (model?.streaming() && !pending.has('model') && due.some((d) => d.tag === 'model')) {
          // The session asks for the adapter's stream's next event.
          const call = model
          settle('model', call.next().then((answer) => (s) => s.answer(answer)))
        }
        if (pending.size === 0) {
          throw new Error(`the session waits for ${dueText(due)}, which this host does not owe`)
        }
        if (ready.length === 0) {
          const timer = wakeAtMs === undefined ? null : wakeAt(Number(wakeAtMs))
          const settled = new Promise((resolve) => { wake = resolve })
          try {
            await Promise.race([settled, ...(timer ? [timer.promise] : []), ...(cancel.promise ? [cancel.promise] : [])])
          } finally {
            wake = null
            timer?.cancel()
          }
        }
        // Every answer that has settled, before the session is asked again.
        for (const [key, answer] of ready.splice(0)) {
          pending.delete(key)
          answer(session)
        }
        continue
      }
      const step = polled.val
      if (exchange && !READING.has(step.tag)) {
        // The call is over with this response (its end, a limit, a retry's wait): the rest of
        // its body is not read.
        exchange.close()
        exchange = null
      }
      switch (step.tag) {
        case 'before-run': {
          const raw = JSON.parse(step.val)
          // OMA's context: the prompt, the messages, and the agent's configuration (without
          // hooks and secrets); `config` is the component's view of it, kept for older callers.
          const context = { prompt: raw.prompt, messages: raw.messages, agent: host.agentInfo, config: raw.config }
          const answer = (async () => {
            try {
              return { tag: 'ok', val: hookAnswer(await host.beforeRun(context)) }
            } catch (error) {
              return { tag: 'err', val: errorMessage(error) }
            }
          })()
          settle('before-run', answer.then((hook) => (s) => s.answer({ tag: 'hook', val: hook })))
          break
        }
        case 'send': {
          const sent = await race(send(step.val, run.signal))
          exchange = sent.exchange
          session.answer(sent.answer)
          break
        }
        case 'receive': {
          const answer = await race(receive(exchange))
          if (answer.tag !== 'chunk') {
            if (exchange) exchange.close()
            exchange = null
          }
          session.answer(answer)
          break
        }
        case 'wait': {
          const timer = sleep(Number(step.val))
          try {
            await race(timer.promise)
          } finally {
            timer.cancel()
          }
          session.answer({ tag: 'waited' })
          break
        }
        case 'call-tool': {
          const call = step.val
          const key = `tool:${call.id}`
          const timing = { start: Date.now(), end: undefined }
          run.timings.push(timing)
          settle(
            key,
            callTool(host, run, call).then((outcome) => {
              timing.end = Date.now()
              return (s) => answerTool(s, call.id, outcome)
            }),
          )
          break
        }
        case 'call-model': {
          // The agent's own LLM adapter instead of an HTTP request: `chat`'s response, or its
          // stream's events one by one; the component checks each answer.
          if (!host.adapter) throw new Error('the session calls an LLM adapter this agent does not have')
          model?.close()
          model = modelCall(host.adapter, JSON.parse(step.val), { textDeltas: host.textDeltas, signal: run.signal })
          settle('model', model.first().then((answer) => (s) => s.answer(answer)))
          break
        }
        case 'external-send': {
          const reply = external(host, run, step.val)
          settle('external', reply.then((val) => (s) => s.answer({ tag: 'external', val })))
          break
        }
        case 'decide-loop': {
          // OMA's onLoopDetected function: its word decides (terminate, warn, inject; anything
          // else goes on); what it throws fails the run.
          const info = { kind: step.val.kind, repetitions: step.val.repetitions, detail: step.val.detail }
          const answer = (async () => {
            try {
              return { tag: 'ok', val: String(await host.onLoopDetected(info)) }
            } catch (error) {
              return { tag: 'err', val: errorMessage(error) }
            }
          })()
          settle('loop-decision', answer.then((val) => (s) => s.answer({ tag: 'loop-decision', val })))
          break
        }
        case 'compress': {
          // OMA's custom strategy: the user's function gets the conversation and its estimate;
          // what it returns goes back as JSON for the component's checks (anything but a
          // non-empty message list ends the run with OMA's error), what it throws fails the run.
          const messages = JSON.parse(step.val.messages)
          const estimated = Number(step.val.estimatedTokens)
          const answer = (async () => {
            try {
              const returned = await host.compress(messages, estimated)
              return { tag: 'compressed-json', val: JSON.stringify(returned) ?? 'null' }
            } catch (error) {
              return { tag: 'compress-failed', val: errorMessage(error) }
            }
          })()
          settle('compress', answer.then((val) => (s) => s.answer(val)))
          break
        }
        case 'event':
          yield step.val
          break
        case 'progress': {
          const data = JSON.parse(step.val.data)
          const event = { type: step.val.type, agent: step.val.agent, data }
          if (event.type === 'budget_exceeded' && isObject(data) && typeof data.message === 'string') {
            event.data = errorFrom({ name: 'TokenBudgetExceededError', code: 'TOKEN_BUDGET_EXCEEDED', ...data })
          }
          if (event.type === 'agent_complete') {
            // OMA hands over the run's final result (after afterRun, with its status and
            // identity): reported by `complete` once that result exists.
            run.completed = event
            break
          }
          await safely(host.onProgress, event)
          break
        }
        case 'trace':
          if (run.onTrace !== undefined) emitTrace(run.onTrace, JSON.parse(step.val))
          break
        case 'trace-records':
          // Handed to the sinks now, in order; nothing is waited for and no answer is owed.
          deliverRecords(run, step.val)
          break
        case 'validate-output':
          session.answer({ tag: 'validated', val: validateOutput(host, run, step.val) })
          break
        case 'evaluation': {
          const evaluationCase = JSON.parse(step.val)
          if (evaluationCase.payload === null || evaluationCase.payload === undefined) delete evaluationCase.payload
          await safely(host.onCase, evaluationCase)
          break
        }
        default:
          throw new Error(`unknown step ${step.tag}`)
      }
    }
  } catch (error) {
    if (error === CANCELLED) closeCancelled(session, run)
    throw error
  } finally {
    cancel.dispose()
    model?.close()
    if (exchange) exchange.close()
    session[Symbol.dispose ?? Symbol.for('dispose')]?.()
  }
}
