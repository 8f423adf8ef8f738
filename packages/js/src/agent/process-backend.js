// The `process` external backend on Node (OMA: agent/process-backend.ts): the agent's text sent
// to a command's stdin (or as its last argument) and its stdout read back. Node-only:
// node:child_process comes through `#platform` (platform/node.js); in a browser the run fails with
// an error saying that a process backend needs Node, Deno or Bun.

import { Buffer, process, spawn } from '#platform'
import { errorMessage } from '../errors.js'

/**
 * Runs the backend's command with `text` on stdin (or as its last argument, `input: 'argument'`)
 * under its `timeoutMs` and the run's signal: `{tag: 'ok', val: stdout}` on exit code 0, else
 * `{tag: 'err', val}` naming the code or signal with the start of stderr.
 */
export async function runProcess(backend, text, signal) {
  return new Promise((resolve) => {
    let child
    const mode = backend.input ?? 'stdin'
    const args = [...(backend.args ?? []), ...(mode === 'argument' ? [text] : [])]
    try {
      child = spawn(backend.command, args, {
        cwd: backend.cwd,
        env: backend.env ? { ...process.env, ...backend.env } : process.env,
        stdio: [mode === 'stdin' ? 'pipe' : 'ignore', 'pipe', 'pipe'],
      })
    } catch (error) {
      resolve({ tag: 'err', val: errorMessage(error) })
      return
    }
    const out = []
    const err = []
    let timer = null
    if (backend.timeoutMs) timer = setTimeout(() => child.kill('SIGKILL'), backend.timeoutMs)
    const onAbort = () => child.kill('SIGKILL')
    signal?.addEventListener('abort', onAbort, { once: true })
    const done = () => {
      if (timer) clearTimeout(timer)
      signal?.removeEventListener('abort', onAbort)
    }
    child.stdout.on('data', (d) => out.push(d))
    child.stderr.on('data', (d) => err.push(d))
    child.on('error', (error) => {
      done()
      resolve({ tag: 'err', val: errorMessage(error) })
    })
    child.on('close', (code, sig) => {
      done()
      const stdout = Buffer.concat(out).toString('utf8')
      if (code === 0) resolve({ tag: 'ok', val: stdout })
      else {
        const stderr = Buffer.concat(err).toString('utf8').trim().slice(0, 500)
        const how = sig ? `signal ${sig}` : `code ${code}`
        resolve({ tag: 'err', val: `process backend exited with ${how}${stderr ? `: ${stderr}` : ''}` })
      }
    })
    if (child.stdin) {
      child.stdin.on('error', () => {})
      child.stdin.end(text)
    }
  })
}
