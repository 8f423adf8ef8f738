// OMA's MCP tools (OMA: tool/mcp.ts, published as `@open-multi-agent/core/mcp`): an MCP server
// started over stdio with the official MCP SDK (`@modelcontextprotocol/sdk`, an optional peer
// dependency loaded only when `connectMCPTools` is called, as OMA loads it), its tools listed
// (every page) and turned into tool definitions the package's agents run. The stdio transport
// spawns a process, so this module is Node-only and reached only through the `./mcp` subpath;
// nothing the main entry or a browser bundle loads imports it.
//
// What a result becomes for the model (text `data`, media `modelOutput`, `isError`) and how tools
// are named are OMA's rules, written once per host language and held to one table
// (fixtures/mcp/results.json) by every package's tests.

const DEFAULT_REQUEST_TIMEOUT_MS = 60_000
const DEFAULT_MEDIA_TYPE = 'application/octet-stream'
const MEDIA_TYPE = /^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*\/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*$/
const CONFIG_KEYS = new Set(['command', 'args', 'env', 'cwd', 'namePrefix', 'requestTimeoutMs', 'clientName', 'clientVersion'])

/** Accepts any input, as OMA's `z.any()` does: the MCP server validates its own arguments. */
const ANY_INPUT = Object.freeze({ safeParse: (data) => ({ success: true, data }) })

/** The SDK's client and stdio transport, imported on first use. */
async function loadSdk() {
  try {
    const [{ Client }, { StdioClientTransport }] = await Promise.all([
      import('@modelcontextprotocol/sdk/client/index.js'),
      import('@modelcontextprotocol/sdk/client/stdio.js'),
    ])
    return { Client, StdioClientTransport }
  } catch (error) {
    if (error?.code === 'ERR_MODULE_NOT_FOUND' && String(error.message).includes('@modelcontextprotocol/sdk')) {
      throw new Error('connectMCPTools needs the MCP SDK: npm install @modelcontextprotocol/sdk', { cause: error })
    }
    throw error
  }
}

/** The tool's name as the model sees it: `prefix_name` with a (trimmed) prefix, `/` made `_`. */
export function normalizeToolName(rawName, namePrefix) {
  const prefix = typeof namePrefix === 'string' ? namePrefix.trim() : ''
  return (prefix !== '' ? `${prefix}_${rawName}` : rawName).replace(/\//g, '_')
}

/** Throws OMA's error when two listed tools get one name. */
export function assertUniqueToolNames(names, namePrefix) {
  const seen = new Map()
  for (const name of names) {
    const normalized = normalizeToolName(name, namePrefix)
    const previous = seen.get(normalized)
    if (previous !== undefined) {
      throw new Error(`Duplicate MCP tool name after normalization: "${normalized}" from "${previous}" and "${name}".`)
    }
    seen.set(normalized, name)
  }
}

const isRecord = (value) => value !== null && typeof value === 'object'
const pretty = (value) => {
  try {
    return JSON.stringify(value, null, 2)
  } catch {
    return String(value)
  }
}

/** One content block as a line of text, or undefined for a kind without a text form. */
function blockText(block) {
  const type = block.type
  if (type === 'text' && typeof block.text === 'string') return block.text
  if ((type === 'image' || type === 'audio') && typeof block.data === 'string') {
    const mime = typeof block.mimeType === 'string' ? block.mimeType : `${type}/*`
    return `[${type} ${mime}; base64 length=${block.data.length}]`
  }
  if (type === 'resource' && isRecord(block.resource)) {
    const r = block.resource
    const uri = typeof r.uri === 'string' ? r.uri : ''
    if (typeof r.text === 'string') return `[resource ${uri}]\n${r.text}`
    if (typeof r.blob === 'string') {
      const mime = typeof r.mimeType === 'string' ? r.mimeType : ''
      return `[resource ${uri}; mimeType=${mime}; blob base64 length=${r.blob.length}]`
    }
    return `[resource ${uri}]`
  }
  if (type === 'resource_link') {
    const uri = typeof block.uri === 'string' ? block.uri : ''
    const name = typeof block.name === 'string' ? block.name : ''
    const description = typeof block.description === 'string' ? block.description : ''
    const head = `[resource_link name=${JSON.stringify(name)} uri=${JSON.stringify(uri)}]`
    return description === '' ? head : `${head}\n${description}`
  }
  return undefined
}

/** Any block as text: its text form, or its type and JSON. */
function blockAsText(block) {
  const line = blockText(block)
  if (line !== undefined) return line
  try {
    return `[${String(block.type ?? 'unknown')}]\n${JSON.stringify(block, null, 2)}`
  } catch {
    return '[mcp content block]'
  }
}

/** The result's text (`ToolResult.data`): the legacy `toolResult`, the blocks, or JSON. */
function resultData(result) {
  if ('toolResult' in result && result.toolResult !== undefined) return pretty(result.toolResult)
  const lines = (Array.isArray(result.content) ? result.content : []).filter(isRecord).map(blockAsText)
  if (lines.length > 0) return lines.join('\n')
  if (result.structuredContent !== undefined) return pretty(result.structuredContent)
  try {
    return JSON.stringify(result)
  } catch {
    return 'MCP tool completed with non-text output.'
  }
}

const mediaType = (value) => (typeof value === 'string' && MEDIA_TYPE.test(value) ? value : undefined)

function httpUrl(value) {
  if (typeof value !== 'string') return undefined
  try {
    const { protocol } = new URL(value)
    return protocol === 'http:' || protocol === 'https:' ? value : undefined
  } catch {
    return undefined
  }
}

function fileName(value) {
  if (typeof value.name === 'string' && value.name.trim().length > 0) return value.name
  if (typeof value.uri === 'string') {
    let last
    try {
      last = new URL(value.uri).pathname.split('/').filter(Boolean).at(-1)
      if (last) return decodeURIComponent(last)
    } catch {
      last = value.uri.split('/').filter(Boolean).at(-1)
      if (last) return last
    }
  }
  return 'mcp-resource'
}

/** One block as tool-result parts, and whether it carries a medium. */
function blockParts(block) {
  if (block.type === 'text' && typeof block.text === 'string') {
    return { parts: [{ type: 'text', text: block.text }], media: false }
  }
  if (block.type === 'image' && typeof block.data === 'string') {
    const media = mediaType(block.mimeType)
    if (media !== undefined) {
      return { parts: [{ type: 'image', source: { type: 'base64', media_type: media, data: block.data } }], media: true }
    }
  }
  if (block.type === 'resource' && isRecord(block.resource) && typeof block.resource.text !== 'string' &&
      typeof block.resource.blob === 'string') {
    const resource = block.resource
    const filename = fileName(resource)
    const label = typeof resource.uri === 'string' && resource.uri.length > 0 ? `[resource ${resource.uri}]` : `[resource ${filename}]`
    return {
      parts: [
        { type: 'text', text: label },
        {
          type: 'file',
          filename,
          source: { type: 'base64', media_type: mediaType(resource.mimeType) ?? DEFAULT_MEDIA_TYPE, data: resource.blob },
        },
      ],
      media: true,
    }
  }
  if (block.type === 'resource_link') {
    const url = httpUrl(block.uri)
    if (url !== undefined) {
      const parts = []
      if (typeof block.description === 'string' && block.description.length > 0) parts.push({ type: 'text', text: block.description })
      parts.push({
        type: 'file',
        filename: fileName(block),
        source: { type: 'url', media_type: mediaType(block.mimeType) ?? DEFAULT_MEDIA_TYPE, url },
      })
      return { parts, media: true }
    }
  }
  // Audio, malformed media, links that are not http(s) and block kinds to come stay text.
  return { parts: [{ type: 'text', text: blockAsText(block) }], media: false }
}

/**
 * An MCP `tools/call` result (its JSON as the server sent it) as OMA's tool result: `{data,
 * modelOutput?, isError}`. `modelOutput` (text, image and file parts) is there only when the
 * result carries a medium and is not an error; otherwise the model gets `data`.
 */
export function toolResult(result) {
  const data = resultData(result)
  const isError = result.isError === true
  let modelOutput
  if (!isError) {
    const converted = (Array.isArray(result.content) ? result.content : []).filter(isRecord).map(blockParts)
    if (converted.some((item) => item.media)) {
      modelOutput = 'toolResult' in result && result.toolResult !== undefined
        ? [{ type: 'text', text: data }, ...converted.flatMap((item) => item.parts.filter((part) => part.type !== 'text'))]
        : converted.flatMap((item) => item.parts)
    }
  }
  return modelOutput !== undefined ? { data, modelOutput, isError } : { data, isError }
}

function checkConfig(config) {
  if (!isRecord(config) || Array.isArray(config)) throw new TypeError('connectMCPTools needs a configuration object {command, ...}')
  for (const key of Object.keys(config)) {
    if (!CONFIG_KEYS.has(key)) throw new TypeError(`connectMCPTools does not support the option "${key}"`)
  }
  const { command, args, env, cwd, namePrefix, requestTimeoutMs, clientName, clientVersion } = config
  if (typeof command !== 'string' || command === '') throw new TypeError('command must be a non-empty string')
  if (args !== undefined && (!Array.isArray(args) || !args.every((a) => typeof a === 'string'))) {
    throw new TypeError('args must be an array of strings')
  }
  if (env !== undefined && (!isRecord(env) || Array.isArray(env) ||
      !Object.values(env).every((v) => v === undefined || typeof v === 'string'))) {
    throw new TypeError('env must be an object of strings')
  }
  for (const [name, value] of [['cwd', cwd], ['namePrefix', namePrefix], ['clientName', clientName], ['clientVersion', clientVersion]]) {
    if (value !== undefined && typeof value !== 'string') throw new TypeError(`${name} must be a string`)
  }
  if (requestTimeoutMs !== undefined && !(typeof requestTimeoutMs === 'number' && requestTimeoutMs > 0)) {
    throw new TypeError(`requestTimeoutMs must be a number > 0, got ${String(requestTimeoutMs)}`)
  }
}

/** Every page of `tools/list`. */
async function listAllTools(client, requestOptions) {
  const tools = []
  let cursor
  do {
    const page = await client.listTools(cursor !== undefined ? { cursor } : {}, requestOptions)
    tools.push(...(page.tools ?? []))
    cursor = typeof page.nextCursor === 'string' && page.nextCursor !== '' ? page.nextCursor : undefined
  } while (cursor !== undefined)
  return tools
}

/**
 * OMA's `connectMCPTools`: starts `command` with `args` (in `cwd`, with `env`, which the SDK
 * merges into its safe default environment) as an MCP server over stdio, connects, lists every
 * tool and returns `{tools, disconnect}`. Connecting and each listing page are held to
 * `requestTimeoutMs` (60 s by default), each tool call too, and a run's abort signal cancels its
 * call. A call that fails is a failed tool result saying so, never an exception in the run; a
 * connection that fails closes the client and the server's process, then rejects.
 */
export async function connectMCPTools(config) {
  checkConfig(config)
  const { Client, StdioClientTransport } = await loadSdk()
  const transport = new StdioClientTransport({ command: config.command, args: config.args ?? [], env: config.env, cwd: config.cwd })
  const client = new Client(
    { name: config.clientName ?? 'open-multi-agent', version: config.clientVersion ?? '0.0.0' },
    { capabilities: {} },
  )
  const requestOptions = { timeout: config.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS }
  try {
    await client.connect(transport, requestOptions)
    const listed = await listAllTools(client, requestOptions)
    assertUniqueToolNames(listed.map((tool) => tool.name), config.namePrefix)
    const tools = listed.map((tool) => ({
      name: normalizeToolName(tool.name, config.namePrefix),
      description: tool.description ?? `MCP tool: ${tool.name}`,
      inputSchema: ANY_INPUT,
      llmInputSchema: isRecord(tool.inputSchema) && !Array.isArray(tool.inputSchema) ? tool.inputSchema : { type: 'object' },
      execute: async (input, context) => {
        try {
          const options = context?.abortSignal ? { ...requestOptions, signal: context.abortSignal } : requestOptions
          return toolResult(await client.callTool({ name: tool.name, arguments: input }, undefined, options))
        } catch (error) {
          return { data: `MCP tool "${tool.name}" failed: ${error instanceof Error ? error.message : String(error)}`, isError: true }
        }
      },
    }))
    return { tools, disconnect: async () => { await client.close() } }
  } catch (error) {
    await Promise.allSettled([client.close(), transport.close()])
    throw error
  }
}
