// OMA's LocalShellExecutor: `bash -c` on this machine, with an environment cut down to a few
// harmless variables (none whose name looks like a secret), a deadline, cancellation by an
// AbortSignal, and the whole process group killed on either. Exit codes: 124 on timeout, 130 on
// abort, 127 when bash cannot start. Not a sandbox: the command has this process's rights.

import { Buffer, process, spawn } from '#platform'
import { isSensitiveName } from '../../utils/redaction.js'

const ENV_ALLOWED = new Set(['HOME', 'LANG', 'LC_ALL', 'LOGNAME', 'PATH', 'SHELL', 'TEMP', 'TERM', 'TMP', 'TMPDIR', 'USER'])

/** The environment a command gets: the allowed names of `env`, never a secret-looking one. */
export function safeShellEnv(env) {
  const out = {}
  for (const [name, value] of Object.entries(env)) {
    if (value !== undefined && ENV_ALLOWED.has(name) && !isSensitiveName(name)) out[name] = value
  }
  return out
}

/** Kills a child and its process group (POSIX), or its tree with taskkill (Windows). */
export function killProcessTree(child) {
  if (child.pid === undefined) {
    child.kill('SIGKILL')
    return
  }
  if (process.platform === 'win32') {
    const killer = spawn('taskkill', ['/pid', String(child.pid), '/T', '/F'], { stdio: 'ignore' })
    killer.on('error', () => child.kill('SIGKILL'))
    killer.on('exit', (code) => { if (code !== 0) child.kill('SIGKILL') })
    return
  }
  try {
    process.kill(-child.pid, 'SIGKILL')
  } catch {
    child.kill('SIGKILL')
  }
}

/** Runs commands with `bash -c` on the host (OMA's default executor of the `bash` tool). */
export class LocalShellExecutor {
  /** `{stdout, stderr, exitCode}` of `command` run with `{cwd?, timeoutMs, abortSignal?}`. */
  exec(command, options) {
    if (options?.abortSignal?.aborted) return Promise.resolve({ stdout: '', stderr: '', exitCode: 130 })
    return new Promise((resolve) => {
      const out = []
      const err = []
      const child = spawn('bash', ['-c', command], {
        cwd: options?.cwd,
        detached: process.platform !== 'win32',
        env: safeShellEnv(process.env),
        stdio: ['ignore', 'pipe', 'pipe'],
      })
      child.stdout.on('data', (chunk) => out.push(chunk))
      child.stderr.on('data', (chunk) => err.push(chunk))
      let ended = null
      let settled = false
      const finish = (exitCode, stderr) => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        options?.abortSignal?.removeEventListener('abort', onAbort)
        resolve({
          stdout: stderr === undefined ? Buffer.concat(out).toString('utf8') : '',
          stderr: stderr ?? Buffer.concat(err).toString('utf8'),
          exitCode,
        })
      }
      const stop = (why) => {
        ended = why
        killProcessTree(child)
      }
      const timer = setTimeout(() => stop('timeout'), options?.timeoutMs)
      const onAbort = () => stop('abort')
      options?.abortSignal?.addEventListener('abort', onAbort, { once: true })
      const code = (exit) => (ended === 'timeout' ? 124 : ended === 'abort' ? 130 : exit ?? 1)
      // `close` (exited and drained) normally; `exit` after a kill, as descendants may hold the pipes.
      child.on('close', (exit) => finish(code(exit)))
      child.on('exit', (exit) => { if (ended !== null) finish(code(exit)) })
      child.on('error', (error) => finish(127, error.message))
    })
  }
}
