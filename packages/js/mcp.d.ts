// Types for `oma-component/mcp` (OMA: `@open-multi-agent/core/mcp`).
import type { ToolDefinition } from './index.js'

export interface ConnectMCPToolsConfig {
  /** The MCP server's command, started over stdio. */
  command: string
  args?: string[]
  /** Added to the SDK's default environment for the server's process. */
  env?: Record<string, string | undefined>
  cwd?: string
  /**
   * Put before each MCP tool's name with `_` for the tool's (and the model's) name: prefix
   * `github` and MCP tool `search_issues` give `github_search_issues`. A `/` becomes `_`.
   */
  namePrefix?: string
  /** Milliseconds for connecting, each `tools/list` page and each tool call; 60000 by default. */
  requestTimeoutMs?: number
  /** The client's name and version sent to the server (`open-multi-agent`, `0.0.0`). */
  clientName?: string
  clientVersion?: string
}

export interface ConnectedMCPTools {
  tools: ToolDefinition[]
  /** Closes the connection and ends the server's process. */
  disconnect: () => Promise<void>
}

/** Starts an MCP server over stdio and gives its tools as tool definitions. */
export declare function connectMCPTools(config: ConnectMCPToolsConfig): Promise<ConnectedMCPTools>
