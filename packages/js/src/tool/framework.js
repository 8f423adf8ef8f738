// OMA's tool framework (OMA: tool/framework.ts): `defineTool`, `ToolRegistry` and the
// zod-to-JSON-Schema conversion OMA sends tool schemas with. The package imports no zod: a
// tool's schema is the caller's zod object, read through its `_def` (zod 3, as OMA 1.16.1 reads
// it). Running tools is executor.js; which tools an agent gets is grants.js.

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
