// OMA's `bash` built-in: runs a command through the context's shell executor (the host's
// `bash -c` by default), bounded by the input's `timeout` (30 s by default) and the run's abort
// signal, and answers stdout, then stderr under a marker, then the exit code when it is not 0, all
// with secrets redacted; a non-zero exit is an error result. A custom executor that ignores the
// deadline or the abort is abandoned 100 ms after it (124 / 130, OMA's codes).

import { defineTool } from '../framework.js'
import { s } from './schema.js'
import { redactSensitiveText } from '../../utils/redaction.js'
import { LocalShellExecutor } from '../shell/local.js'

const DEFAULT_TIMEOUT_MS = 30_000
const GRACE_MS = 100
const LOCAL = new LocalShellExecutor()

const cancelled = (why) => ({ stdout: '', stderr: '', exitCode: why === 'timeout' ? 124 : 130 })

/** Runs `command` on a custom executor, bounded even when the executor does not cooperate. */
async function bounded(executor, command, options, signal) {
  if (executor instanceof LocalShellExecutor) {
    return executor.exec(command, { cwd: options.cwd, timeoutMs: options.timeoutMs, abortSignal: signal })
  }
  if (signal?.aborted) return cancelled('abort')
  const inner = new AbortController()
  let why
  let grace
  let timer
  let giveUp
  const abandoned = new Promise((resolve) => { giveUp = resolve })
  const terminate = (reason) => {
    if (why !== undefined) return
    why = reason
    inner.abort()
    grace = setTimeout(() => giveUp({ abandoned: reason }), GRACE_MS)
  }
  const onAbort = () => terminate('abort')
  signal?.addEventListener('abort', onAbort, { once: true })
  try {
    const running = executor.exec(command, { cwd: options.cwd, timeoutMs: options.timeoutMs, abortSignal: inner.signal })
      .then((result) => ({ result }))
      .catch((error) => {
        if (why !== undefined) return { result: cancelled(why) }
        throw error
      })
    if (signal?.aborted) terminate('abort')
    timer = setTimeout(() => terminate('timeout'), options.timeoutMs)
    const outcome = await Promise.race([running, abandoned])
    if (outcome.abandoned !== undefined) return cancelled(outcome.abandoned)
    if (why !== undefined) return { ...outcome.result, exitCode: cancelled(why).exitCode }
    return outcome.result
  } catch (error) {
    if (why !== undefined) return cancelled(why)
    throw error
  } finally {
    clearTimeout(timer)
    clearTimeout(grace)
    signal?.removeEventListener('abort', onAbort)
  }
}

/** stdout; stderr (labelled when stdout is there too); the exit code when not 0; or a note. */
function render(stdout, stderr, exitCode) {
  const parts = []
  if (stdout.length > 0) parts.push(stdout)
  if (stderr.length > 0) parts.push(stdout.length > 0 ? `--- stderr ---\n${stderr}` : stderr)
  if (parts.length === 0) {
    return exitCode === 0 ? '(command completed with no output)' : `(command exited with code ${exitCode}, no output)`
  }
  if (exitCode !== 0) parts.push(`\n(exit code: ${exitCode})`)
  return parts.join('\n')
}

export const bashTool = defineTool({
  name: 'bash',
  consequential: true,
  description:
    'Execute a bash command and return its stdout and stderr. ' +
    'Use this for file system operations, running scripts, installing packages, ' +
    'and any task that requires shell access. ' +
    'The command runs in a non-interactive shell (bash -c). ' +
    'Long-running commands should use the timeout parameter.',
  inputSchema: s.object({
    command: s.string().describe('The bash command to execute.'),
    timeout: s.number().optional().describe(
      `Timeout in milliseconds before the command is forcibly killed. Defaults to ${DEFAULT_TIMEOUT_MS} ms.`,
    ),
    cwd: s.string().optional().describe('Working directory in which to run the command.'),
  }),
  execute: async (input, context) => {
    let result
    try {
      result = await bounded(
        context?.shellExecutor ?? LOCAL,
        input.command,
        { cwd: input.cwd, timeoutMs: input.timeout ?? DEFAULT_TIMEOUT_MS },
        context?.abortSignal,
      )
    } catch (error) {
      result = { stdout: '', stderr: error instanceof Error ? error.message : String(error), exitCode: 127 }
    }
    return {
      data: redactSensitiveText(render(result.stdout, result.stderr, result.exitCode)),
      isError: result.exitCode !== 0,
    }
  },
})
