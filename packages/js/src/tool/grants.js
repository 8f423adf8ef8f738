// Which tools an agent is granted (OMA: tool/grants.ts), as OMA grants them, and each granted
// tool in the JSON form the component is told of it.

import { zodToJsonSchema } from './framework.js'

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

/** A tool definition's JSON form for the component, and whether it follows OMA's rules. */
export function toolEntry(tool, where) {
  if (tool === null || typeof tool !== 'object' || typeof tool.name !== 'string') {
    throw new TypeError(`${where} must be a tool definition {name, description, inputSchema, execute}`)
  }
  const zod = tool.inputSchema !== undefined && typeof tool.inputSchema?.safeParse === 'function'
  const schema = tool.llmInputSchema ??
    (zod ? zodToJsonSchema(tool.inputSchema) : tool.inputSchema ?? tool.input_schema ?? tool.parameters) ??
    { type: 'object', properties: {} }
  return {
    json: { name: tool.name, description: tool.description ?? '', inputSchema: schema },
    tool,
    oma: zod || tool.llmInputSchema !== undefined,
  }
}

/** The tools of one run: `{json: [...], byName: Map}`. */
export function resolveTools(host) {
  const byName = new Map()
  const json = []
  const add = (entry, fromRegistry) => {
    if (byName.has(entry.json.name)) return
    byName.set(entry.json.name, { ...entry, fromRegistry })
    json.push(entry.json)
  }
  for (const entry of host.legacy) add(entry, false)
  const customTools = host.custom.map((entry) => entry.tool)
  for (const tool of grantedTools(host.registry, host.names, host.disallowed, customTools)) {
    const fromRegistry = host.registry.get(tool.name) === tool
    add(host.custom.find((entry) => entry.tool === tool) ?? toolEntry(tool, `tool "${tool.name}"`), fromRegistry)
  }
  return { json, byName }
}
