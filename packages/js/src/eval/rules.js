// The component's evaluation rules (the codec's `score-builtin`, `judge` and
// `online-evaluation`, docs/evaluation.md): JSON in and out, their failures thrown as the classes
// OMA throws (`TypeError`, `RangeError`, `Error`) with OMA's messages.
import { codec } from '../component.js'

const CLASSES = { TypeError, RangeError, Error }

/** The parsed answer of `call`, a codec call giving JSON text; its typed error thrown as OMA's class. */
function rule(call) {
  let text
  try {
    text = call()
  } catch (e) {
    const payload = e !== null && typeof e === 'object' && 'payload' in e ? e.payload : undefined
    if (payload !== null && typeof payload === 'object' && typeof payload.message === 'string') {
      throw new (CLASSES[payload.name] ?? Error)(payload.message)
    }
    throw e
  }
  return JSON.parse(text)
}

/** Text the component can carry: a lone surrogate becomes U+FFFD. */
const wellFormed = (text) => text.toWellFormed()

/** A built-in scorer described (`context` undefined) or a sample scored. */
export function scoreBuiltin(scorer, options, context) {
  return rule(() => codec.scoreBuiltin(scorer, wellFormed(options), context === undefined ? undefined : wellFormed(context)))
}

/** One step of a judge scorer (`options`, `prompt`, `extract`, `verdict`, `aggregate`). */
export function judgeStep(step, request) {
  return rule(() => codec.judge(step, wellFormed(toJson(request))))
}

/** One step of the online evaluation rules (`case`, `record`, `flush`). */
export function onlineStep(step, request) {
  return rule(() => codec.onlineEvaluation(step, wellFormed(toJson(request))))
}

/**
 * JSON text of a run's result, trace or any value handed to the rules: a `Map` (a team's
 * `agentResults`) as an object of its entries, what JSON cannot hold left out as JSON leaves it.
 */
export function toJson(value) {
  return JSON.stringify(value, (_key, item) => (item instanceof Map ? Object.fromEntries(item) : item))
}
