// What the Worker tests share: a loopback provider that answers every request with one Anthropic
// message (usage 12 + 6 = 18 tokens) and records what it was sent, free loopback ports, and
// workerd started in a process group of its own and killed when the tests end.
import { spawn } from 'node:child_process'
import http from 'node:http'
import net from 'node:net'
import { once } from 'node:events'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { after } from 'node:test'

/** This package's directory. */
export const pkg = join(dirname(fileURLToPath(import.meta.url)), '..')

/**
 * Starts the provider on a free loopback port, answering `text`. `requests` holds what each
 * request carried (url, headers, body), in order; `url` is its base URL; `close()` stops it.
 */
export async function startProvider(text) {
  const requests = []
  const server = http.createServer((req, res) => {
    const chunks = []
    req.on('data', (c) => chunks.push(c))
    req.on('end', () => {
      requests.push({ url: req.url, headers: req.headers, body: Buffer.concat(chunks).toString() })
      const body = JSON.stringify({
        id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-test',
        content: [{ type: 'text', text }],
        stop_reason: 'end_turn', stop_sequence: null, usage: { input_tokens: 12, output_tokens: 6 },
      })
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) })
      res.end(body)
    })
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return {
    requests,
    url: `http://127.0.0.1:${server.address().port}`,
    close: () => server.close(),
  }
}

/** A loopback port nothing listens on (a socket bound, then closed). */
export async function freePort() {
  const server = net.createServer().listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address()
  await new Promise((resolve) => server.close(resolve))
  return port
}

/**
 * Starts npm's workerd (this package's, pinned) with `args` in `cwd` and the environment `env`
 * (besides PATH), in a process group of its own: its output is collected in `output`, and the
 * group is killed when the file's tests end, then `cleanup` runs.
 */
export function startWorkerd(args, { cwd, env = {}, cleanup = () => {} }) {
  const output = []
  const workerd = spawn(join(pkg, 'node_modules', '.bin', 'workerd'), args, {
    cwd,
    env: { PATH: process.env.PATH, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  })
  workerd.stdout.on('data', (d) => output.push(d))
  workerd.stderr.on('data', (d) => output.push(d))
  after(() => {
    try { process.kill(-workerd.pid, 'SIGKILL') } catch {}
    cleanup()
  })
  return { workerd, output }
}
