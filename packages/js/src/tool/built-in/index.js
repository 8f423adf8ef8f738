// OMA's built-in tools on Node and `registerBuiltInTools`: bash, file_read, file_write,
// file_edit, grep and glob (and delegate_to_agent on request), with OMA's names, descriptions,
// input schemas, limits and sandbox.

import { bashTool } from './bash.js'
import { delegateToAgentTool } from './delegate.js'
import { fileEditTool, fileReadTool, fileWriteTool } from './files.js'
import { globTool, grepTool } from './search.js'

export { LocalShellExecutor } from '../shell/local.js'
export { bashTool, delegateToAgentTool, fileEditTool, fileReadTool, fileWriteTool, globTool, grepTool }

/** The built-ins in OMA's order (without `delegate_to_agent`). */
export const BUILT_IN_TOOLS = [bashTool, fileReadTool, fileWriteTool, fileEditTool, grepTool, globTool]

/** The built-ins and `delegate_to_agent`. */
export const ALL_BUILT_IN_TOOLS_WITH_DELEGATE = [...BUILT_IN_TOOLS, delegateToAgentTool]

/**
 * Registers every built-in with `registry` (`delegate_to_agent` too with
 * `{includeDelegateTool: true}`). An agent still uses only those its `tools` grants.
 */
export function registerBuiltInTools(registry, options) {
  for (const tool of BUILT_IN_TOOLS) registry.register(tool)
  if (options?.includeDelegateTool) registry.register(delegateToAgentTool)
}
