#!/usr/bin/env node
// The gateway benchmark: `oma-host serve` beside Portkey's gateway and LiteLLM's proxy in one
// run, after the public LLM-gateway benchmark's method (a zero-delay loopback provider, added
// latency at concurrency 1, throughput held under p99 bounds, memory idle, steady and after a
// burst), with a streaming lane and a translation lane. Loopback only, every step bounded. See
// README.md here.
//
//   node bench/gateway-bench/run.mjs            # the full run, written to bench/gateway-bench/
//   node bench/gateway-bench/run.mjs --short    # the short run CI can afford, to target/
//
// Environment: SIDES ("oma-host portkey litellm"; the provider alone, `direct`, is always
// measured), WORKLOADS, CONCURRENCY, CELL_SECONDS, WARMUP_SECONDS, OUT_DIR, SKIP_BUILD=1,
// PORTKEY_VERSION (1.15.2), LITELLM_VERSION (1.108.7), CHUNK_GAP_MS (5), BURST (256).

import { spawn, spawnSync, execFileSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const here = path.dirname(fileURLToPath(import.meta.url))
const root = path.resolve(here, '../..')
const short = process.argv.includes('--short')
const env = process.env

const SIDES = (env.SIDES ?? 'oma-host portkey litellm').split(/\s+/).filter(Boolean)
const WORKLOADS = (env.WORKLOADS ?? (short ? 'chat-small' : 'chat-small chat-history-51 tools-rich-20 vision-1mib'))
  .split(/\s+/).filter(Boolean)
const CONCURRENCY = (env.CONCURRENCY ?? (short ? '1 4 16' : '1 2 4 8 16 32 64'))
  .split(/\s+/).map(Number)
const CELL_SECONDS = Number(env.CELL_SECONDS ?? (short ? 2 : 6))
const WARMUP_SECONDS = Number(env.WARMUP_SECONDS ?? 1)
const P99_BOUNDS_MS = [1, 5, 10]
const CHUNK_GAP_MS = Number(env.CHUNK_GAP_MS ?? 5)
const BURST = Number(env.BURST ?? (short ? 64 : 256))
const IDLE_AFTER_BURST_S = short ? 2 : 5
const PORTKEY_VERSION = env.PORTKEY_VERSION ?? '1.15.2'
const LITELLM_VERSION = env.LITELLM_VERSION ?? '1.108.7'
const OUT_DIR = path.resolve(env.OUT_DIR ?? (short ? path.join(root, 'target/gateway-bench') : here))
const SERVER_SECONDS = short ? 300 : 1800

const MODEL = 'claude-sonnet-4-6'
const CHAT_MODEL = `anthropic/${MODEL}`
const OPENAI_MODEL = 'gpt-4o-mini'
const KEY = 'sk-bench'
const CANNED = 'simulator'

const target = path.join(root, 'target')
const bin = (name) => path.join(target, 'release', name)
const GATEWAY_WASM = path.join(target, 'oma-guest/wasm32-wasip2/wasm-release/oma_gateway.wasm')
const work = path.join(target, 'gateway-bench', `run-${new Date().toISOString().replace(/[:.]/g, '-')}`)
fs.mkdirSync(work, { recursive: true })

const say = (...args) => console.error('gateway-bench:', ...args)
const die = (message) => { say(message); cleanup(); process.exit(2) }
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const running = new Set()

function cleanup () {
  for (const child of running) {
    try { process.kill(-child.pid, 'SIGKILL') } catch {}
  }
  running.clear()
}
process.on('exit', cleanup)
process.on('SIGINT', () => { cleanup(); process.exit(130) })

// --- Builds, inputs and the peers' installs --------------------------------------------------

if (env.SKIP_BUILD !== '1') {
  say('building (release): oma-host, loopback-provider, gen-workloads, bench-load and the guest')
  const built = spawnSync('cargo', ['build', '--release', '-p', 'oma-host', '-p', 'oma-host-tests',
    '--bin', 'oma-host', '--bin', 'loopback-provider', '--bin', 'gen-workloads', '--bin', 'bench-load'],
  { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] })
  if (built.status !== 0) die('the build failed')
}
for (const name of ['oma-host', 'loopback-provider', 'gen-workloads', 'bench-load']) {
  if (!fs.existsSync(bin(name))) die(`${bin(name)} is missing (cargo build --release)`)
}
if (SIDES.includes('oma-host') && !fs.existsSync(GATEWAY_WASM)) die(`${GATEWAY_WASM} is missing`)

const workloadsDir = path.join(target, 'workloads')
if (WORKLOADS.some((w) => !fs.existsSync(path.join(workloadsDir, `${w}.json`)))) {
  execFileSync(bin('gen-workloads'), [workloadsDir], { stdio: ['ignore', 'ignore', 'inherit'] })
}

// The request bodies, written once: the workload as OpenAI chat messages (the converter of the
// Python benchmark, packages/python/bench/litellm_paired.py), the same bytes to every side.
const bodies = path.join(work, 'bodies')
fs.mkdirSync(bodies, { recursive: true })
const convert = `
import json, sys
sys.path.insert(0, sys.argv[1])
from litellm_paired import to_openai
src, dst, model, stream = sys.argv[2:]
with open(src) as f:
    messages = json.load(f)
body = {"model": model, "messages": to_openai(messages), "max_tokens": 256}
if stream == "1":
    body["stream"] = True
with open(dst, "w") as f:
    json.dump(body, f, separators=(",", ":"))
`
for (const w of new Set([...WORKLOADS, 'chat-small'])) {
  const src = path.join(workloadsDir, `${w}.json`)
  for (const [suffix, stream] of [['chat', '0'], ['stream', '1']]) {
    if (suffix === 'stream' && w !== 'chat-small') continue
    execFileSync('python3', ['-c', convert, path.join(root, 'packages/python/bench'), src,
      path.join(bodies, `${w}.${suffix}.json`), CHAT_MODEL, stream])
  }
}
// The translation lane: an Anthropic Messages request for an OpenAI-compatible model.
const anthropicBody = (model) => JSON.stringify({
  model,
  max_tokens: 256,
  messages: [{ role: 'user', content: 'Say hello in one short sentence.' }]
})
fs.writeFileSync(path.join(bodies, 'translate.oma-host.json'), anthropicBody(`openai/${OPENAI_MODEL}`))
fs.writeFileSync(path.join(bodies, 'translate.portkey.json'), anthropicBody(OPENAI_MODEL))
fs.writeFileSync(path.join(bodies, 'translate.litellm.json'), anthropicBody(`openai/${OPENAI_MODEL}`))
// The provider alone gets what the gateways send it: an OpenAI chat completion.
fs.writeFileSync(path.join(bodies, 'translate.direct.json'), JSON.stringify({
  model: OPENAI_MODEL, max_tokens: 256, messages: [{ role: 'user', content: 'Say hello in one short sentence.' }]
}))

const portkeyDir = path.join(target, 'gateway-bench', `portkey-${PORTKEY_VERSION}`)
const portkeyMain = path.join(portkeyDir, 'node_modules/@portkey-ai/gateway/build/start-server.js')
if (SIDES.includes('portkey') && !fs.existsSync(portkeyMain)) {
  say(`installing @portkey-ai/gateway@${PORTKEY_VERSION} into ${portkeyDir} (npm, no install scripts)`)
  fs.mkdirSync(portkeyDir, { recursive: true })
  fs.writeFileSync(path.join(portkeyDir, 'package.json'), '{"private": true}\n')
  const installed = spawnSync('npm', ['install', '--ignore-scripts', '--no-audit', '--no-fund',
    `@portkey-ai/gateway@${PORTKEY_VERSION}`], { cwd: portkeyDir, stdio: ['ignore', 'ignore', 'inherit'] })
  if (installed.status !== 0) die('npm install of Portkey\'s gateway failed')
}
const litellmVenv = path.join(target, 'gateway-bench', `litellm-${LITELLM_VERSION}`)
const litellmBin = path.join(litellmVenv, 'bin/litellm')
if (SIDES.includes('litellm') && !fs.existsSync(litellmBin)) {
  say(`installing litellm[proxy]==${LITELLM_VERSION} into ${litellmVenv} (PyPI, a few minutes)`)
  for (const args of [['-m', 'venv', litellmVenv]]) {
    if (spawnSync('python3', args, { stdio: 'inherit' }).status !== 0) die('python3 -m venv failed')
  }
  const pip = spawnSync(path.join(litellmVenv, 'bin/python'), ['-m', 'pip', 'install', '-q',
    `litellm[proxy]==${LITELLM_VERSION}`], { stdio: ['ignore', 'ignore', 'inherit'] })
  if (pip.status !== 0) die('pip install of litellm[proxy] failed')
}

// --- Processes ---------------------------------------------------------------------------------

/** When set, the file `start` traces the next server's connect() calls into (strace). */
let traceConnects = null

/** Starts a command in a process group of its own, bounded by `timeout`; output to `log`. */
function start (command, args, { envVars = {}, log }) {
  const out = fs.openSync(log, 'a')
  const wrap = traceConnects ? ['strace', '-f', '-qq', '-e', 'trace=connect', '-o', traceConnects] : []
  const child = spawn('timeout', ['-k', '5', String(SERVER_SECONDS), ...wrap, command, ...args], {
    cwd: work,
    env: { PATH: env.PATH, HOME: env.HOME, ...envVars },
    stdio: ['ignore', out, out],
    detached: true
  })
  running.add(child)
  child.on('exit', () => running.delete(child))
  return child
}

function stop (child) {
  if (!child) return
  try { process.kill(-child.pid, 'SIGTERM') } catch {}
  running.delete(child)
}

async function waitFor (predicate, seconds, what) {
  const until = Date.now() + seconds * 1000
  while (Date.now() < until) {
    if (await predicate()) return
    await sleep(100)
  }
  throw new Error(`${what}: not ready after ${seconds} s`)
}

async function listeningUrl (log, seconds) {
  let url
  await waitFor(() => {
    const text = fs.existsSync(log) ? fs.readFileSync(log, 'utf8') : ''
    url = text.match(/listening on (http:\/\/[0-9.:]+)/)?.[1]
    return Boolean(url)
  }, seconds, log)
  return url
}

async function answers (url) {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(2000) })
    return response.status < 500
  } catch { return false }
}

const freePort = () => Number(execFileSync('python3', ['-c',
  'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])']).toString())

/** The pids of `pid` and all its descendants. */
function tree (pid) {
  const children = new Map()
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      if (!children.has(ppid)) children.set(ppid, [])
      children.get(ppid).push(Number(entry))
    } catch {}
  }
  const out = []
  const stack = [pid]
  while (stack.length) {
    const p = stack.pop()
    out.push(p)
    stack.push(...(children.get(p) ?? []))
  }
  // The `timeout` and `strace` above a server are not the server.
  return out.filter((p) => {
    try { return !['timeout', 'strace'].includes(fs.readFileSync(`/proc/${p}/comm`, 'utf8').trim()) } catch { return false }
  })
}

const TICK = Number(execFileSync('getconf', ['CLK_TCK']).toString()) || 100

/** CPU seconds (user + system) of a process tree; `timeout` and `strace` cost nearly nothing. */
function cpuSeconds (pid) {
  let ticks = 0
  for (const p of tree(pid)) {
    try {
      const stat = fs.readFileSync(`/proc/${p}/stat`, 'utf8')
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      ticks += Number(fields[11]) + Number(fields[12])
    } catch {}
  }
  return ticks / TICK
}

/** Resident memory of a process tree, in MiB: VmRSS now, and the sum of each one's VmHWM. */
function memory (pid) {
  let rss = 0
  let hwm = 0
  for (const p of tree(pid)) {
    try {
      const status = fs.readFileSync(`/proc/${p}/status`, 'utf8')
      rss += Number(status.match(/VmRSS:\s+(\d+)/)?.[1] ?? 0)
      hwm += Number(status.match(/VmHWM:\s+(\d+)/)?.[1] ?? 0)
    } catch {}
  }
  return { rss: rss / 1024, hwm: hwm / 1024 }
}

/** The CPU time the whole machine spent busy, in seconds (all cores). */
function machineBusy () {
  const fields = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number)
  const idle = fields[3] + fields[4]
  return (fields.slice(0, 8).reduce((a, b) => a + b, 0) - idle) / TICK
}

const loadavg = () => os.loadavg().map((l) => l.toFixed(2)).join(' / ')

/** One `bench-load` run; its JSON report. */
function load ({ url, body, headers = [], connections = 1, seconds, requests, warmup = 0, expect = CANNED }) {
  const args = ['--url', url, '--body', body, '--connections', String(connections),
    '--warmup', String(warmup), '--timeout-ms', '30000']
  if (seconds != null) args.push('--seconds', String(seconds))
  if (requests != null) args.push('--requests', String(requests))
  for (const header of ['content-type: application/json', ...headers]) args.push('--header', header)
  if (expect) args.push('--expect', expect)
  const out = execFileSync(bin('bench-load'), args, { maxBuffer: 64 << 20 })
  return JSON.parse(out.toString())
}

// --- The provider ------------------------------------------------------------------------------

const providers = {}
for (const [name, gap] of [['whole', 0], ['paced', CHUNK_GAP_MS]]) {
  const log = path.join(work, `provider-${name}.log`)
  const child = start(bin('loopback-provider'), ['--threads', '1', '--max-seconds', String(SERVER_SECONDS),
    '--chunk-gap-ms', String(gap)], { log })
  providers[name] = { child, url: await listeningUrl(log, 30) }
}

// --- The sides ---------------------------------------------------------------------------------

/** How each side is started and asked. `direct` is the provider itself. */
const sides = {
  direct: {
    async start (provider) { return { child: null, url: provider } },
    chatPath: '/v1/chat/completions',
    translatePath: '/v1/chat/completions',
    headers: () => []
  },
  'oma-host': {
    async start (provider) {
      const log = path.join(work, `oma-host-${Date.now()}.log`)
      const child = start(bin('oma-host'), ['serve', '--addr', '127.0.0.1:0', '--component', GATEWAY_WASM], {
        log,
        envVars: {
          ANTHROPIC_BASE_URL: provider,
          ANTHROPIC_API_KEY: KEY,
          OPENAI_BASE_URL: `${provider}/v1`,
          OPENAI_API_KEY: KEY,
          OMA_GATEWAY_EGRESS: provider
        }
      })
      return { child, url: await listeningUrl(log, 120) }
    },
    chatPath: '/v1/chat/completions',
    translatePath: '/v1/messages',
    headers: (lane) => lane === 'translate' ? ['anthropic-version: 2023-06-01', `x-api-key: ${KEY}`] : []
  },
  portkey: {
    async start (provider) {
      const port = freePort()
      const log = path.join(work, `portkey-${Date.now()}.log`)
      const child = start('node', [portkeyMain, `--port=${port}`, '--headless'], {
        log, envVars: { NODE_ENV: 'production', ENVIRONMENT: 'production' }
      })
      const url = `http://127.0.0.1:${port}`
      await waitFor(() => answers(url), 60, 'portkey')
      return { child, url, provider }
    },
    chatPath: '/v1/chat/completions',
    translatePath: '/v1/messages',
    headers: (lane, provider) => lane === 'translate'
      ? ['x-portkey-provider: openai', `x-portkey-custom-host: ${provider}/v1`, `authorization: Bearer ${KEY}`,
          'anthropic-version: 2023-06-01']
      : ['x-portkey-provider: anthropic', `x-portkey-custom-host: ${provider}/v1`, `x-api-key: ${KEY}`,
          `authorization: Bearer ${KEY}`]
  },
  litellm: {
    master: `sk-bench-master-${Math.random().toString(16).slice(2)}`,
    async start (provider) {
      const port = freePort()
      const config = path.join(work, 'litellm.yaml')
      fs.writeFileSync(config, `model_list:
  - model_name: ${CHAT_MODEL}
    litellm_params:
      model: ${CHAT_MODEL}
      api_base: ${provider}
      api_key: os.environ/ANTHROPIC_API_KEY
  - model_name: openai/${OPENAI_MODEL}
    litellm_params:
      model: openai/${OPENAI_MODEL}
      api_base: ${provider}/v1
      api_key: os.environ/OPENAI_API_KEY
litellm_settings:
  telemetry: false
`)
      const log = path.join(work, `litellm-${Date.now()}.log`)
      const child = start(litellmBin, ['--config', config, '--host', '127.0.0.1', '--port', String(port),
        '--num_workers', '1'], {
        log,
        envVars: {
          ANTHROPIC_API_KEY: KEY,
          OPENAI_API_KEY: KEY,
          LITELLM_MASTER_KEY: this.master,
          LITELLM_LOCAL_MODEL_COST_MAP: 'True',
          LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS: 'True',
          LITELLM_LOCAL_POLICY_TEMPLATES: 'True',
          LITELLM_LOCAL_AUTOROUTER_PRESETS: 'True',
          LITELLM_LOCAL_BLOG_POSTS: 'True',
          LITELLM_MODE: 'PRODUCTION',
          LITELLM_LOG: 'ERROR',
          LITELLM_TELEMETRY: 'False',
          NO_PROXY: '*'
        }
      })
      const url = `http://127.0.0.1:${port}`
      await waitFor(() => answers(`${url}/health/liveliness`), 180, 'litellm')
      return { child, url }
    },
    chatPath: '/v1/chat/completions',
    translatePath: '/v1/messages',
    headers () { return [`authorization: Bearer ${this.master}`, 'anthropic-version: 2023-06-01'] }
  }
}

// --- Measuring ---------------------------------------------------------------------------------

const machine = {
  date: new Date().toISOString(),
  cores: os.cpus().length,
  cpu: os.cpus()[0]?.model,
  memory_gib: (os.totalmem() / 2 ** 30).toFixed(1),
  kernel: os.release(),
  node: process.version,
  commit: spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root }).stdout?.toString().trim(),
  rustc: spawnSync('rustc', ['--version'], { cwd: root }).stdout?.toString().trim(),
  portkey: PORTKEY_VERSION,
  litellm: LITELLM_VERSION,
  load_before: loadavg(),
  mode: short ? 'short' : 'full'
}
say(`machine: ${machine.cores} cores, load ${machine.load_before}`)

/** A cell: `connections` busy for `seconds` after a warm-up, with the server's CPU and the rest
 * of the machine's over the measured window. */
function cell (side, server, pid, body, lane, connections, seconds = CELL_SECONDS) {
  const url = server.url + (lane === 'translate' ? side.translatePath : side.chatPath)
  const headers = side.headers(lane, server.provider)
  if (WARMUP_SECONDS > 0) load({ url, body, headers, connections, seconds: WARMUP_SECONDS })
  const cpu0 = pid ? cpuSeconds(pid) : 0
  const busy0 = machineBusy()
  const report = load({ url, body, headers, connections, seconds })
  const cpu = pid ? cpuSeconds(pid) - cpu0 : null
  const busy = machineBusy() - busy0
  return {
    connections,
    ok: report.ok,
    failed: report.failed,
    statuses: report.statuses,
    rps: report.rps,
    latency: report.latency_ms,
    first_chunk: report.first_chunk_ms,
    gap: report.gap_ms,
    cpu_ms_per_request: cpu != null && report.ok ? (cpu * 1000) / report.ok : null,
    machine_busy_cores: busy / report.seconds,
    load: loadavg()
  }
}

/** Whether a side answers a lane at all: one request, with the canned text. */
let lastProbe = ''
function probe (side, server, body, lane) {
  const url = server.url + (lane === 'translate' ? side.translatePath : side.chatPath)
  try {
    const report = load({ url, body, headers: side.headers(lane, server.provider), requests: 1 })
    lastProbe = `statuses ${JSON.stringify(report.statuses)}`
    return report.ok > 0 && report.failed === 0
  } catch (error) {
    lastProbe = String(error.message ?? error)
    return false
  }
}

/** Starts `side` under strace, asks it every lane once, and stops the run if it connected
 * anywhere but loopback or a Unix socket (telemetry, a price list, a package index). */
async function checkConnections (name, side) {
  const file = path.join(work, `${name}.strace`)
  traceConnects = file
  let server
  try {
    server = await side.start(providers.whole.url)
  } finally {
    traceConnects = null
  }
  for (const w of WORKLOADS) probe(side, server, path.join(bodies, `${w}.chat.json`), 'chat')
  probe(side, server, path.join(bodies, `translate.${name}.json`), 'translate')
  probe(side, server, path.join(bodies, 'chat-small.stream.json'), 'chat')
  stop(server.child)
  await sleep(1000)
  const calls = fs.readFileSync(file, 'utf8').split('\n').filter((line) => line.includes('connect('))
  const outside = calls.filter((line) => !/AF_UNIX|AF_UNSPEC|inet_addr\("127\.0\.0\.1"\)|inet_pton\(AF_INET6, "::1"/.test(line))
  if (outside.length) die(`${name} connected outside loopback:\n${outside.join('\n')}`)
  return calls.length
}

const results = { machine, sides: {} }
for (const name of ['direct', ...SIDES]) {
  const side = sides[name]
  if (!side) die(`unknown side ${name}`)
  const out = { lanes: {} }
  results.sides[name] = out
  if (name !== 'direct' && spawnSync('strace', ['-V']).status === 0) {
    say(`${name}: checking its connections under strace`)
    try {
      out.connect_calls_checked = await checkConnections(name, side)
    } catch (error) {
      out.error = String(error.message ?? error)
      say(`${name}: ${out.error}`)
      continue
    }
  }
  say(`${name}: starting`)
  let server
  try {
    server = await side.start(providers.whole.url)
  } catch (error) {
    out.error = String(error.message ?? error)
    say(`${name}: ${out.error}`)
    continue
  }
  const serverPid = server.child?.pid
  await sleep(1000)
  if (serverPid) out.rss_idle_mib = memory(serverPid).rss
  for (const w of WORKLOADS) {
    const body = path.join(bodies, `${w}.chat.json`)
    if (!probe(side, server, body, 'chat')) {
      out.lanes[w] = { error: `the probe request failed (${lastProbe})` }
      say(`${name}: ${w}: the probe request failed (${lastProbe})`)
      continue
    }
    const cells = []
    for (const c of CONCURRENCY) {
      const measured = cell(side, server, serverPid, body, 'chat', c)
      if (serverPid) measured.rss_mib = memory(serverPid).rss
      cells.push(measured)
      say(`${name}: ${w} c${c}: ${measured.rps.toFixed(0)} req/s, p50 ${measured.latency?.p50} ms, p99 ${measured.latency?.p99} ms, ` +
        `${measured.cpu_ms_per_request?.toFixed(3) ?? '-'} ms CPU/req, failed ${measured.failed}`)
    }
    const held = Object.fromEntries(P99_BOUNDS_MS.map((bound) => [bound,
      Math.max(0, ...cells.filter((c) => c.failed === 0 && c.latency && c.latency.p99 <= bound).map((c) => c.rps))]))
    out.lanes[w] = { cells, rps_under_p99: held }
  }
  if (serverPid) out.rss_steady_mib = memory(serverPid).rss
  // The translation lane: Anthropic in, OpenAI out.
  const translateBody = path.join(bodies, `translate.${name}.json`)
  if (probe(side, server, translateBody, 'translate')) {
    out.lanes.translate = cell(side, server, serverPid, translateBody, 'translate', 1)
    say(`${name}: translate c1: p50 ${out.lanes.translate.latency?.p50} ms`)
  } else {
    out.lanes.translate = { error: `the probe request failed (${lastProbe})` }
    say(`${name}: translate: the probe request failed (${lastProbe})`)
  }
  // Memory after a burst: BURST connections of chat-small, then idle.
  if (serverPid) {
    const body = path.join(bodies, 'chat-small.chat.json')
    load({ url: server.url + side.chatPath, body, headers: side.headers('chat', server.provider), connections: BURST, seconds: short ? 2 : 5 })
    const atEnd = memory(serverPid)
    await sleep(IDLE_AFTER_BURST_S * 1000)
    out.rss_burst_mib = { at_end: atEnd.rss, after_idle: memory(serverPid).rss, peak: atEnd.hwm }
  }
  stop(server.child)
  // The streaming lane, against the paced provider.
  try {
    server = await side.start(providers.paced.url)
    const body = path.join(bodies, 'chat-small.stream.json')
    if (probe(side, server, body, 'chat')) {
      out.lanes.stream = cell(side, server, server.child?.pid, body, 'chat', 1)
      say(`${name}: stream c1: first chunk p50 ${out.lanes.stream.first_chunk?.p50} ms, gap p50 ${out.lanes.stream.gap?.p50} ms`)
    } else {
      out.lanes.stream = { error: `the probe request failed (${lastProbe})` }
    }
  } catch (error) {
    out.lanes.stream = { error: String(error.message ?? error) }
  }
  stop(server?.child)
  await sleep(500)
}
machine.load_after = loadavg()
for (const p of Object.values(providers)) stop(p.child)

fs.mkdirSync(OUT_DIR, { recursive: true })
fs.writeFileSync(path.join(OUT_DIR, 'results.json'), JSON.stringify(results, null, 2) + '\n')
fs.writeFileSync(path.join(OUT_DIR, 'results.md'), report(results))
say(`wrote ${path.join(OUT_DIR, 'results.md')} (raw logs in ${work})`)

// --- The report --------------------------------------------------------------------------------

function report ({ machine, sides }) {
  const fmt = (n, digits = 2) => n == null || Number.isNaN(n) ? '-' : Number(n).toFixed(digits)
  const lines = []
  lines.push('# Gateway benchmark results', '')
  lines.push(`${machine.mode} run, ${machine.date}, commit \`${machine.commit}\`; ${machine.cores} cores (${machine.cpu}), ` +
    `${machine.memory_gib} GiB, Linux ${machine.kernel}, Node ${machine.node}, ${machine.rustc}; Portkey's gateway ` +
    `${machine.portkey}, LiteLLM's proxy ${machine.litellm}. Load average (1/5/15 min) before ${machine.load_before}, ` +
    `after ${machine.load_after}. Cells of ${CELL_SECONDS} s after ${WARMUP_SECONDS} s of warm-up.`, '')
  const direct = sides.direct?.lanes ?? {}
  for (const w of WORKLOADS) {
    lines.push(`## ${w}`, '')
    lines.push('| side | p50 ms (c1) | p99 ms (c1) | added p50 / p99 ms | CPU ms/req (c1) | req/s at p99 <= 1 / 5 / 10 ms | highest req/s (conc., p99 ms) | failed |')
    lines.push('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
    const base = direct[w]?.cells?.[0]?.latency
    for (const [name, side] of Object.entries(sides)) {
      const lane = side.lanes?.[w]
      if (!lane || lane.error) { lines.push(`| ${name} | ${lane?.error ?? side.error ?? 'not run'} | | | | | | |`); continue }
      const c1 = lane.cells.find((c) => c.connections === 1) ?? lane.cells[0]
      const best = lane.cells.reduce((a, b) => (b.rps > a.rps ? b : a))
      const added = name === 'direct' || !base ? '-' : `${fmt(c1.latency.p50 - base.p50)} / ${fmt(c1.latency.p99 - base.p99)}`
      const held = P99_BOUNDS_MS.map((b) => fmt(lane.rps_under_p99[b], 0)).join(' / ')
      const failed = lane.cells.reduce((n, c) => n + c.failed, 0)
      lines.push(`| ${name} | ${fmt(c1.latency.p50)} | ${fmt(c1.latency.p99)} | ${added} | ${fmt(c1.cpu_ms_per_request, 3)} | ${held} | ` +
        `${fmt(best.rps, 0)} (${best.connections}, ${fmt(best.latency.p99)}) | ${failed} |`)
    }
    lines.push('')
  }
  lines.push('## Streaming (chat-small, the provider sends each event ' + CHUNK_GAP_MS + ' ms apart) and translation (Anthropic in, OpenAI out), concurrency 1', '')
  lines.push('| side | first chunk p50 / p99 ms | added to the first chunk p50 ms | inter-chunk gap p50 / p99 ms | translate p50 / p99 ms | added p50 ms | translate CPU ms/req |')
  lines.push('| --- | ---: | ---: | ---: | ---: | ---: | ---: |')
  const baseStream = direct.stream?.first_chunk
  const baseTranslate = direct.translate?.latency
  for (const [name, side] of Object.entries(sides)) {
    const s = side.lanes?.stream
    const t = side.lanes?.translate
    const streamCols = !s || s.error ? [s?.error ?? 'not run', '', ''] : [
      `${fmt(s.first_chunk?.p50)} / ${fmt(s.first_chunk?.p99)}`,
      name === 'direct' || !baseStream ? '-' : fmt(s.first_chunk.p50 - baseStream.p50),
      `${fmt(s.gap?.p50)} / ${fmt(s.gap?.p99)}`]
    const translateCols = !t || t.error ? [t?.error ?? 'not run', '', ''] : [
      `${fmt(t.latency?.p50)} / ${fmt(t.latency?.p99)}`,
      name === 'direct' || !baseTranslate ? '-' : fmt(t.latency.p50 - baseTranslate.p50),
      fmt(t.cpu_ms_per_request, 3)]
    lines.push(`| ${name} | ${[...streamCols, ...translateCols].join(' | ')} |`)
  }
  lines.push('', '## Memory (resident MiB of the server\'s processes)', '')
  lines.push(`| side | idle | steady (after the cells) | at the end of a burst of ${BURST} connections | ${IDLE_AFTER_BURST_S} s after it | peak |`)
  lines.push('| --- | ---: | ---: | ---: | ---: | ---: |')
  for (const [name, side] of Object.entries(sides)) {
    if (name === 'direct') continue
    const b = side.rss_burst_mib ?? {}
    lines.push(`| ${name} | ${fmt(side.rss_idle_mib, 1)} | ${fmt(side.rss_steady_mib, 1)} | ${fmt(b.at_end, 1)} | ${fmt(b.after_idle, 1)} | ${fmt(b.peak, 1)} |`)
  }
  lines.push('')
  return lines.join('\n')
}
