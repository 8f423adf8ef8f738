// OMA's `ToolExecutor` (OMA: tool/executor.ts): runs a tool with OMA's checks (input
// validation through the tool's own schema before `execute`, the `onToolCall` gate, OMA's result
// rules and messages, output truncation), never rejecting: a failure is an `isError` result.

function message(error) {
  if (error instanceof Error) return error.message
  if (typeof error === 'string') return error
  return JSON.stringify(error)
}

function failure(text, metadata) {
  return metadata ? { data: text, isError: true, metadata } : { data: text, isError: true }
}

function parse(schema, value) {
  if (!schema || typeof schema.safeParse !== 'function') return { success: true, data: value }
  const parsed = schema.safeParse(value)
  if (parsed.success) return parsed
  const issues = (parsed.error?.issues ?? [])
    .map((issue) => `  • ${(issue.path ?? []).join('.')}: ${issue.message}`)
    .join('\n')
  return { success: false, issues }
}

/** OMA's `truncateToolOutput`: head (70%) and tail of a long text with a marker between. */
export function truncateToolOutput(data, maxChars) {
  if (data.length <= maxChars) return data
  const overhead = '\n\n[...truncated  characters...]\n\n'.length + String(data.length).length
  if (maxChars <= overhead) return data.slice(0, maxChars)
  const available = maxChars - overhead
  const head = Math.floor(available * 0.7)
  const tail = available - head
  return `${data.slice(0, head)}\n\n[...truncated ${data.length - head - tail} characters...]\n\n${data.slice(-tail)}`
}

function gateDecision(decision) {
  if (decision === null || typeof decision !== 'object') return undefined
  const { action, reason } = decision
  if (action !== 'allow' && action !== 'deny' && action !== 'suspend') return undefined
  if (reason !== undefined && typeof reason !== 'string') return undefined
  return action !== 'allow' && reason !== undefined ? { action, reason } : { action }
}

export class ToolExecutor {
  #registry
  #maxToolOutputChars
  #onToolCall
  #limit
  #running = 0
  #queue = []

  constructor(registry, options = {}) {
    this.#registry = registry
    this.#maxToolOutputChars = options.maxToolOutputChars
    this.#onToolCall = options.onToolCall
    this.#limit = options.maxConcurrency ?? 4
  }

  /** The registry the executor resolves names in. */
  get registry() {
    return this.#registry
  }

  /** Runs one tool by name; never rejects (failures are `isError: true` results). */
  async execute(toolName, input, context, options = {}) {
    const tool = this.#registry.get(toolName)
    if (tool === undefined) return failure(`Tool "${toolName}" is not registered in the ToolRegistry.`)
    return this.run(tool, input, context, options)
  }

  /** Runs `calls` ({id, name, input}) at most `maxConcurrency` at once; results by id. */
  async executeBatch(calls, context) {
    const results = new Map()
    await Promise.all(calls.map(async (call) => {
      await this.#slot()
      try {
        results.set(call.id, await this.execute(call.name, call.input, context))
      } finally {
        this.#release()
      }
    }))
    return results
  }

  async #slot() {
    if (this.#running < this.#limit) {
      this.#running++
      return
    }
    await new Promise((resolve) => this.#queue.push(resolve))
  }

  #release() {
    const next = this.#queue.shift()
    if (next) next()
    else this.#running--
  }

  /** Runs a tool definition (registered or not) with OMA's checks. */
  async run(tool, input, context, options = {}) {
    const aborted = () => context?.abortSignal?.aborted === true
    const abortedResult = (metadata) => failure(`Tool "${tool.name}" was aborted before execution began.`, metadata)
    if (aborted()) return abortedResult()
    const parsed = parse(tool.inputSchema, input)
    if (!parsed.success) return failure(`Invalid input for tool "${tool.name}":\n${parsed.issues}`)
    if (aborted()) return abortedResult()
    const gate = options.onToolCall ?? this.#onToolCall
    let gateMeta
    if (gate) {
      let decision
      try {
        decision = await gate({
          toolName: tool.name,
          input: parsed.data,
          agentName: context?.agent?.name,
          ...(tool.consequential === true ? { consequential: true } : {}),
          ...(context?.runId !== undefined ? { runId: context.runId } : {}),
          ...(context?.toolCallId !== undefined ? { toolCallId: context.toolCallId } : {}),
        })
      } catch (error) {
        return failure(`Tool "${tool.name}" onToolCall hook threw an error: ${message(error)}`)
      }
      gateMeta = gateDecision(decision)
      if (!gateMeta) return failure(`Tool "${tool.name}" onToolCall hook returned an invalid onToolCall decision.`)
      const meta = { toolCallGate: gateMeta }
      if (aborted()) return abortedResult(meta)
      if (gateMeta.action === 'deny') {
        return failure(`Tool "${tool.name}" denied by onToolCall${gateMeta.reason ? `: ${gateMeta.reason}` : '.'}`, meta)
      }
      if (gateMeta.action === 'suspend') {
        return failure(`Tool "${tool.name}" cannot suspend outside an orchestrated checkpointed task.`, meta)
      }
    }
    const meta = gateMeta ? { toolCallGate: gateMeta } : undefined
    let result
    try {
      result = await tool.execute(parsed.data, context)
    } catch (error) {
      return this.#truncate(tool, failure(`Tool "${tool.name}" threw an error: ${message(error)}`, meta))
    }
    if (result === null || typeof result !== 'object' || Array.isArray(result)) {
      return failure(`Invalid output for tool "${tool.name}": execute() must return a ToolResult object.`, meta)
    }
    if (result.isError !== undefined && typeof result.isError !== 'boolean') {
      return failure(`Invalid output for tool "${tool.name}": ToolResult.isError must be a boolean when provided.`, meta)
    }
    if (!result.isError && tool.outputSchema) {
      const checked = parse(tool.outputSchema, result.data)
      if (!checked.success) return failure(`Invalid output for tool "${tool.name}":\n${checked.issues}`, meta)
    }
    if (result.isError && typeof result.data !== 'string') {
      return failure(`Invalid output for tool "${tool.name}": error ToolResult.data must be a string.`, meta)
    }
    if (result.modelOutput === undefined && typeof result.data !== 'string') {
      return failure(`Invalid output for tool "${tool.name}": non-string ToolResult.data requires modelOutput.`, meta)
    }
    if (result.isError && result.modelOutput !== undefined && typeof result.modelOutput !== 'string') {
      return failure(`Invalid output for tool "${tool.name}": error modelOutput must be a string.`, meta)
    }
    const out = meta ? { ...result, metadata: { ...result.metadata, ...meta } } : result
    return this.#truncate(tool, out)
  }

  #truncate(tool, result) {
    const max = tool.maxOutputChars ?? this.#maxToolOutputChars
    if (result.modelOutput !== undefined || typeof result.data !== 'string' || max === undefined || max <= 0 || result.data.length <= max) {
      return result
    }
    return { ...result, data: truncateToolOutput(result.data, max) }
  }
}
