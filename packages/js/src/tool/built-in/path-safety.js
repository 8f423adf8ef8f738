// OMA's sandbox for the built-in filesystem tools. A path must be absolute and, after every
// symlink is resolved, lie inside the agent's working directory: `cwd` of the tool context
// (`AgentConfig.cwd`, or the orchestrator's `defaultCwd`), `<process.cwd()>/.agent-workspace`
// when unset, no sandbox at all when it is `null`. Only `file_write` creates a missing root.

import { basename, dirname, isAbsolute, join, mkdir, process, realpath, relative, resolve } from '#platform'

/** The default sandbox's directory name, under `process.cwd()`. */
export const DEFAULT_WORKSPACE_DIRNAME = '.agent-workspace'

/** `<process.cwd()>/.agent-workspace`. */
export function defaultWorkspaceDir() {
  return resolve(process.cwd(), DEFAULT_WORKSPACE_DIRNAME)
}

const inside = (candidate, root) => {
  const rel = relative(root, candidate)
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel))
}

/** The real path of `path`, or of its longest existing prefix with the rest appended. */
async function realpathOfPrefix(path) {
  try {
    return await realpath(path)
  } catch {
    const parent = dirname(path)
    if (parent === path) return path
    return join(await realpathOfPrefix(parent), basename(path))
  }
}

const outside = (candidate, root) => ({
  ok: false,
  error:
    `Path "${candidate}" is outside the agent's working directory "${root}". ` +
    'Built-in filesystem tools are sandboxed to this directory; ' +
    'set OrchestratorConfig.defaultCwd / AgentConfig.cwd to widen it, ' +
    'or AgentConfig.cwd: null to disable the sandbox.',
})

const reason = (error) => (error instanceof Error ? error.message : 'Unknown error')

/**
 * Resolves `inputPath` for a tool: `{ok: true, path, root}` with the symlink-free path (handed to
 * the fs calls, so a link swapped after the check cannot redirect them), or `{ok: false, error}`.
 */
export async function resolvePathWithinCwd(inputPath, context, { ensureRoot = false } = {}) {
  if (context?.cwd === null) return { ok: true, path: inputPath, root: '/' }
  if (!isAbsolute(inputPath)) {
    return {
      ok: false,
      error: `Path "${inputPath}" must be absolute. Built-in filesystem tools require absolute paths.`,
    }
  }
  const root = resolve(context?.cwd ?? defaultWorkspaceDir())
  let realRoot
  try {
    realRoot = await realpath(root)
  } catch (error) {
    if (!ensureRoot) {
      return { ok: false, error: `Could not resolve working directory "${root}": ${reason(error)}` }
    }
    try {
      await mkdir(root, { recursive: true })
      realRoot = await realpath(root)
    } catch (mkdirError) {
      return { ok: false, error: `Could not create or resolve working directory "${root}": ${reason(mkdirError)}` }
    }
  }
  const candidate = resolve(inputPath)
  if (!inside(candidate, root)) return outside(candidate, realRoot)
  const real = await realpathOfPrefix(candidate)
  if (!inside(real, realRoot)) return outside(candidate, realRoot)
  return { ok: true, path: real, root: realRoot }
}
