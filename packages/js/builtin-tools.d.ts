// Types of OMA's built-in tools and `registerBuiltInTools` (exported from `oma-component`).
import type { ToolDefinition, ToolRegistry } from './index.js'

/** What a shell executor is asked to run a command with. */
export interface ShellExecOptions {
  /** Working directory inside the executor's environment. */
  readonly cwd?: string
  /** Deadline the executor enforces. */
  readonly timeoutMs: number
  /** Aborting it terminates the command. */
  readonly abortSignal?: AbortSignal
}

/** A command's captured result: 124 on timeout, 130 on abort, 127 when it cannot start. */
export interface ShellExecResult {
  readonly stdout: string
  readonly stderr: string
  readonly exitCode: number
}

/** OMA's default executor of the `bash` tool: `bash -c` on this machine (not a sandbox). */
export declare class LocalShellExecutor {
  exec(command: string, options: ShellExecOptions): Promise<ShellExecResult>
}

/** Options of `registerBuiltInTools`. */
export interface RegisterBuiltInToolsOptions {
  /** Also register `delegate_to_agent` (useful only in orchestrated team runs). */
  readonly includeDelegateTool?: boolean
}

export declare const bashTool: ToolDefinition<{ command: string; timeout?: number | undefined; cwd?: string | undefined }, string>
export declare const fileReadTool: ToolDefinition<{ path: string; offset?: number | undefined; limit?: number | undefined }, string>
export declare const fileWriteTool: ToolDefinition<{ path: string; content: string }, string>
export declare const fileEditTool: ToolDefinition<{ path: string; old_string: string; new_string: string; replace_all?: boolean | undefined }, string>
export declare const grepTool: ToolDefinition<{ pattern: string; path?: string | undefined; glob?: string | undefined; maxResults?: number | undefined }, string>
export declare const globTool: ToolDefinition<{ path?: string | undefined; pattern?: string | undefined; maxFiles?: number | undefined }, string>
export declare const delegateToAgentTool: ToolDefinition<{ target_agent: string; prompt: string }>

/** bash, file_read, file_write, file_edit, grep, glob. */
export declare const BUILT_IN_TOOLS: ToolDefinition<any, any>[]
/** The built-ins and delegate_to_agent. */
export declare const ALL_BUILT_IN_TOOLS_WITH_DELEGATE: ToolDefinition<any, any>[]

/** Registers the built-ins with `registry`; an agent uses those its `tools` grants. */
export declare function registerBuiltInTools(registry: ToolRegistry, options?: RegisterBuiltInToolsOptions): void
