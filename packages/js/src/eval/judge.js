// OMA's `createJudgeScorer` (OMA: eval/judge.ts): a scorer that asks one or more judge agents to
// grade a sample and scores it by their verdicts. The prompt, the reading of each answer and
// the aggregate (mean score, quorum of passes, reasons) are the component's rules (the codec's
// `judge`, docs/evaluation.md#judges); running the judges is this side's: each is an `Agent`
// built as OMA builds it, run on the prompt in turn under the scorer's deadline.
import { judgeStep } from './rules.js'
import { attachScoreCostInputs, defineScorer, scoreCostInputs } from './scorer.js'

/** The options `createJudgeScorer` takes (OMA's `JudgeScorerOptions`). */
export const JUDGE_OPTION_KEYS = ['name', 'version', 'judges', 'quorum', 'verdictSchema', 'judgePrompt', 'timeoutMs']

/** What the rules read of a judge's configuration: its name, model and backend's kind. */
function judgeShape(judge) {
  if (judge === null || typeof judge !== 'object') return judge
  return {
    name: judge.name,
    ...(judge.model != null ? { model: judge.model } : {}),
    ...(judge.backend ? { backend: { kind: judge.backend.kind ?? null } } : {}),
  }
}

function abortError(signal) {
  if (signal.reason instanceof Error) return signal.reason
  const error = new Error('Judge scorer was aborted.')
  error.name = 'AbortError'
  return error
}

/** A signal aborted with the caller's, or with OMA's `TimeoutError` after `timeoutMs`. */
function deadline(callerSignal, timeoutMs) {
  const controller = new AbortController()
  const onAbort = () => controller.abort(callerSignal.reason)
  callerSignal.addEventListener('abort', onAbort, { once: true })
  if (callerSignal.aborted) onAbort()
  const timer = timeoutMs === undefined ? undefined : setTimeout(() => {
    const error = new Error(`Judge scorer exceeded timeout of ${timeoutMs}ms.`)
    error.name = 'TimeoutError'
    controller.abort(error)
  }, timeoutMs)
  timer?.unref?.()
  return {
    signal: controller.signal,
    dispose() {
      callerSignal.removeEventListener('abort', onAbort)
      if (timer !== undefined) clearTimeout(timer)
    },
  }
}

/** `promise`, or the signal's abort error when it comes first. */
async function raceWithAbort(promise, signal) {
  if (signal.aborted) throw abortError(signal)
  let onAbort
  const aborted = new Promise((_resolve, reject) => {
    onAbort = () => reject(abortError(signal))
    signal.addEventListener('abort', onAbort, { once: true })
  })
  try {
    return await Promise.race([promise, aborted])
  } finally {
    signal.removeEventListener('abort', onAbort)
  }
}

/** A value of the prompt as the rules take it: absent when undefined, text when JSON has none. */
function promptValue(value) {
  if (value === undefined || typeof value === 'string') return value
  return JSON.stringify(value) === undefined ? String(value) : value
}

/**
 * One judge's verdict on `prompt`: the judge runs as an agent of its own (OMA's `buildAgent`: a
 * fresh registry with the built-in tools), its answer read against the verdict schema.
 */
async function runJudge(judge, checked, prompt, schema, signal) {
  // Loaded when a judge first runs, so the eval subpath loads no agent runtime until then.
  const [{ Agent }, { ToolRegistry }, { registerBuiltInTools }] = await Promise.all([
    import('../agent/agent.js'), import('../tool/framework.js'), import('../tool/built-in/index.js'),
  ])
  const registry = new ToolRegistry()
  registerBuiltInTools(registry)
  const result = await new Agent(judge, registry).run(prompt, { abortSignal: signal })
  const costInput = {
    usage: result.tokenUsage,
    context: {
      agentName: judge.name,
      model: checked.model,
      phase: 'agent',
      ...(judge.provider !== undefined ? { provider: judge.provider } : {}),
    },
  }
  if (!result.success) {
    const error = result.error instanceof Error
      ? result.error
      : new Error(result.errorInfo?.message ?? `Judge "${judge.name}" failed.`)
    throw attachScoreCostInputs(error, [costInput])
  }
  try {
    let verdict
    if (schema.zod !== undefined) {
      const { zodIssues } = await import('../agent/structured-output.js')
      const { value } = judgeStep('extract', { output: result.output })
      const parsed = schema.zod.safeParse(value)
      if (!parsed.success) throw new Error(zodIssues(parsed.error))
      verdict = judgeStep('verdict', { judge: checked, value: parsed.data ?? null })
    } else {
      verdict = judgeStep('verdict', { judge: checked, output: result.output, ...(schema.json !== undefined ? { schema: schema.json } : {}) })
    }
    return { verdict, costInput }
  } catch (error) {
    if (error instanceof Error) attachScoreCostInputs(error, [costInput])
    throw error
  }
}

/**
 * OMA's `createJudgeScorer({name, version?, judges, quorum?, verdictSchema?, judgePrompt?,
 * timeoutMs?})`. `verdictSchema` is a zod schema (checked here, with zod, as OMA checks it) or a
 * JSON Schema object (checked by the component); OMA's `{score, reason}` schema without one.
 * `judgePrompt` is the instruction, or a function of the scorer's context giving it.
 */
export function createJudgeScorer(options) {
  return judgeScorer(options, undefined)
}

/** A judge scorer; with `preset` (`answer_relevancy`), OMA's prompt and verdict schema for it. */
export function judgeScorer(options, preset) {
  if (options === null || typeof options !== 'object') throw new TypeError('createJudgeScorer needs options with a name and judges')
  for (const key of Object.keys(options)) {
    if (!JUDGE_OPTION_KEYS.includes(key)) throw new TypeError(`createJudgeScorer does not support the option "${key}"`)
  }
  const judges = Array.isArray(options.judges) ? options.judges.map((judge) => ({ ...judge })) : options.judges
  const checked = judgeStep('options', {
    judges: Array.isArray(judges) ? judges.map(judgeShape) : judges ?? null,
    ...(options.quorum !== undefined ? { quorum: options.quorum } : {}),
    ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
  })
  const verdictSchema = options.verdictSchema
  let schema
  if (verdictSchema === undefined) schema = { shown: undefined }
  else if (verdictSchema !== null && typeof verdictSchema.safeParse === 'function') schema = { zod: verdictSchema }
  else if (verdictSchema !== null && typeof verdictSchema === 'object') schema = { json: verdictSchema, shown: verdictSchema }
  else throw new TypeError('JudgeScorerOptions.verdictSchema must be a zod schema or a JSON Schema object')
  const judgePrompt = options.judgePrompt
  if (judgePrompt !== undefined && typeof judgePrompt !== 'string' && typeof judgePrompt !== 'function') {
    throw new TypeError('JudgeScorerOptions.judgePrompt must be a string or a function')
  }
  const timeoutMs = checked.timeoutMs
  return defineScorer({
    name: options.name,
    ...(options.version !== undefined ? { version: options.version } : {}),
    ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
    async score(context) {
      if (schema.zod !== undefined && schema.shown === undefined) {
        const { zodToJsonSchema } = await import('../tool/framework.js')
        schema.shown = zodToJsonSchema(schema.zod)
      }
      let instruction
      if (preset === undefined && judgePrompt !== undefined) {
        const given = typeof judgePrompt === 'function' ? judgePrompt(context) : judgePrompt
        // OMA joins the prompt's lines: nothing for null or undefined, anything else as text.
        instruction = given == null ? '' : String(given)
      }
      const request = {
        ...(preset !== undefined ? { preset } : {}),
        ...(instruction !== undefined ? { instruction } : {}),
        input: promptValue(context.evalCase?.input),
        expected: promptValue(context.evalCase?.expected),
        output: promptValue(context.output),
        metadata: promptValue(context.metadata),
        ...(schema.shown !== undefined ? { schema: schema.shown } : {}),
      }
      const { prompt } = judgeStep('prompt', request)
      const limit = deadline(context.signal ?? new AbortController().signal, timeoutMs)
      const verdicts = []
      const costInputs = []
      try {
        try {
          for (const [index, judge] of judges.entries()) {
            const judged = await raceWithAbort(runJudge(judge, checked.judges[index], prompt, schema, limit.signal), limit.signal)
            verdicts.push(judged.verdict)
            costInputs.push(judged.costInput)
          }
        } catch (error) {
          if (error instanceof Error) attachScoreCostInputs(error, [...costInputs, ...scoreCostInputs(error)])
          throw error
        }
        return attachScoreCostInputs(judgeStep('aggregate', { verdicts, quorum: checked.quorum }), costInputs)
      } finally {
        limit.dispose()
      }
    },
  })
}
