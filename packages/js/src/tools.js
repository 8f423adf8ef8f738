// OMA's tool framework: `defineTool`, `ToolRegistry`, `ToolExecutor` and the zod-to-JSON-Schema
// conversion, with OMA's behaviour (the registry's grants, input validation before `execute`,
// the `onToolCall` gate, OMA's result rules and its messages, output truncation). The package
// imports no zod: a tool's schema is the caller's zod object, used through its own `safeParse`
// and read through its `_def` (zod 3, as OMA 1.16.1 reads it).

/** OMA's `defineTool`: the definition as given, with only the keys that were set. */
export function defineTool(config) {
  if (config === null || typeof config !== 'object') {
    throw new TypeError('defineTool needs a tool definition {name, description, inputSchema, execute}')
  }
  const tool = { name: config.name, description: config.description, inputSchema: config.inputSchema }
  for (const key of ['consequential', 'outputSchema', 'llmInputSchema', 'maxOutputChars']) {
    if (config[key] !== undefined) tool[key] = config[key]
  }
  tool.execute = config.execute
  return tool
}

// ---------------------------------------------------------------------------------------------
// zod (v3) to JSON Schema, as OMA sends tool schemas

function described(def, schema) {
  return def.description !== undefined ? { ...schema, description: def.description } : schema
}

const OPTIONAL_KINDS = new Set(['ZodOptional', 'ZodDefault', 'ZodNullable'])

function convert(schema) {
  const def = schema?._def ?? {}
  switch (def.typeName) {
    case 'ZodString': return described(def, { type: 'string' })
    case 'ZodNumber': return described(def, { type: 'number' })
    case 'ZodBigInt': return described(def, { type: 'integer' })
    case 'ZodBoolean': return described(def, { type: 'boolean' })
    case 'ZodNull':
    case 'ZodUndefined':
    case 'ZodVoid': return described(def, { type: 'null' })
    case 'ZodDate': return described(def, { type: 'string', format: 'date-time' })
    case 'ZodLiteral': return described(def, { const: def.value })
    case 'ZodEnum': return described(def, { type: 'string', enum: def.values })
    case 'ZodNativeEnum':
      return described(def, {
        enum: Object.values(def.values).filter((v) => typeof v === 'string' || typeof v === 'number'),
      })
    case 'ZodArray': return described(def, { type: 'array', items: convert(def.type) })
    case 'ZodTuple': return described(def, { type: 'array', prefixItems: def.items.map(convert) })
    case 'ZodObject': {
      const properties = {}
      const required = []
      for (const [key, value] of Object.entries(def.shape())) {
        properties[key] = convert(value)
        if (!OPTIONAL_KINDS.has(value?._def?.typeName)) required.push(key)
      }
      const out = { type: 'object', properties }
      if (required.length > 0) out.required = required
      return described(def, out)
    }
    case 'ZodRecord': return described(def, { type: 'object', additionalProperties: convert(def.valueType) })
    case 'ZodOptional':
    case 'ZodEffects': {
      const inner = convert(def.typeName === 'ZodOptional' ? def.innerType : def.schema)
      return described(def, inner)
    }
    case 'ZodNullable': {
      const inner = convert(def.innerType)
      if (typeof inner.type === 'string') return described(def, { ...inner, type: [inner.type, 'null'] })
      return described(def, { anyOf: [inner, { type: 'null' }] })
    }
    case 'ZodDefault': return described(def, { ...convert(def.innerType), default: def.defaultValue() })
    case 'ZodUnion':
    case 'ZodDiscriminatedUnion':
      return described(def, { anyOf: [...def.options].map(convert) })
    case 'ZodIntersection': return described(def, { allOf: [convert(def.left), convert(def.right)] })
    case 'ZodBranded': return described(def, convert(def.type))
    case 'ZodReadonly':
    case 'ZodCatch': return described(def, convert(def.innerType))
    case 'ZodPipeline': return described(def, convert(def.in))
    case 'ZodNever': return described(def, { not: {} })
    default: return described(def, {})
  }
}

/** OMA's `zodToJsonSchema`: the JSON Schema OMA sends for a zod schema (`{}` where it has none). */
export function zodToJsonSchema(schema) {
  return convert(schema)
}

// ---------------------------------------------------------------------------------------------
// ToolRegistry

export class ToolRegistry {
  #tools = new Map()
  #runtime = new Set()

  /** Adds a tool; a second tool of the same name throws (OMA's message). */
  register(tool, options) {
    if (tool === null || typeof tool !== 'object' || typeof tool.name !== 'string') {
      throw new TypeError('ToolRegistry.register needs a tool definition (see defineTool)')
    }
    if (this.#tools.has(tool.name)) {
      throw new Error(
        `ToolRegistry: a tool named "${tool.name}" is already registered. ` +
          'Use a unique name or deregister the existing one first.',
      )
    }
    this.#tools.set(tool.name, tool)
    if (options?.runtimeAdded === true) this.#runtime.add(tool.name)
  }

  get(name) {
    return this.#tools.get(name)
  }

  list() {
    return [...this.#tools.values()]
  }

  getAll() {
    return this.list()
  }

  has(name) {
    return this.#tools.has(name)
  }

  unregister(name) {
    this.#tools.delete(name)
    this.#runtime.delete(name)
  }

  deregister(name) {
    this.unregister(name)
  }

  /** `{name, description, inputSchema}` for each tool: `llmInputSchema` or the zod conversion. */
  toToolDefs() {
    return this.list().map((tool) => ({
      name: tool.name,
      description: tool.description,
      inputSchema: tool.llmInputSchema ?? zodToJsonSchema(tool.inputSchema),
    }))
  }

  /** As `toToolDefs`, only for tools added at run time (`agent.addTool`, `customTools`). */
  toRuntimeToolDefs() {
    return this.toToolDefs().filter((tool) => this.#runtime.has(tool.name))
  }

  /** Anthropic-style `{name, description, input_schema}` for each tool. */
  toLLMTools() {
    return this.list().map((tool) => {
      if (tool.llmInputSchema !== undefined) {
        return { name: tool.name, description: tool.description, input_schema: { type: 'object', ...tool.llmInputSchema } }
      }
      const schema = zodToJsonSchema(tool.inputSchema)
      return {
        name: tool.name,
        description: tool.description,
        input_schema: {
          type: 'object',
          properties: schema.properties ?? {},
          ...(schema.required !== undefined ? { required: schema.required } : {}),
        },
      }
    })
  }

  /** Whether `name` was added at run time. */
  isRuntime(name) {
    return this.#runtime.has(name)
  }
}

/**
 * The tools an agent is granted, as OMA grants them: registry tools only through `tools` (an
 * allowlist; none without it), tools added at run time always, `disallowedTools` removed from
 * both; then the agent's `customTools`.
 */
export function grantedTools(registry, allowed, disallowed, custom) {
  const denied = new Set(disallowed ?? [])
  const out = []
  const seen = new Set()
  for (const tool of registry.list()) {
    const runtime = registry.isRuntime?.(tool.name) ?? false
    if (!runtime && (allowed === undefined || !allowed.includes(tool.name))) continue
    if (denied.has(tool.name)) continue
    out.push(tool)
    seen.add(tool.name)
  }
  for (const tool of custom ?? []) {
    if (denied.has(tool.name) || seen.has(tool.name)) continue
    out.push(tool)
    seen.add(tool.name)
  }
  return out
}

// ---------------------------------------------------------------------------------------------
// ToolExecutor

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
