#!/usr/bin/env node
// One `run()` per workload against a loopback Anthropic provider: this package's Agent.run(),
// and, when OMA is available, OMA's Agent.run() in the same process against the same server.
//
// Usage (from examples/js, after `npm run build`):
//   cargo run -q -p oma-harness --bin gen-workloads -- ../../target/workloads   # once, at the root
//   [OMA_DIR=<OMA checkout>/packages/core] node bench/run.mjs [WORKLOAD_DIR]
//
// WORKLOAD_DIR defaults to $OMA_WORKLOADS, then ../../target/workloads. OMA is loaded from
// $OMA_DIR/dist/index.js (see bench/oma-node/README.md for building it) and skipped when absent.
// Knobs: BENCH_MIN_ITERS (20), BENCH_MIN_MS (1500), BENCH_WARMUP (5), BENCH_ONLY=a,b.
// Output: a table on stderr and one JSON object on stdout.

import { createServer } from 'node:http'
import { readFile, readdir } from 'node:fs/promises'
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { performance } from 'node:perf_hooks'
import { Agent } from '../src/index.js'

const here = dirname(fileURLToPath(import.meta.url))
const CANNED = 'Hello from the simulator.'

function startServer() {
  const server = createServer((req, res) => {
    const chunks = []
    req.on('data', (c) => chunks.push(c))
    req.on('end', () => {
      let model = ''
      try { model = JSON.parse(Buffer.concat(chunks).toString('utf8')).model ?? '' } catch {}
      const body = JSON.stringify({
        id: 'msg_sim_01', type: 'message', role: 'assistant', model,
        content: [{ type: 'text', text: CANNED }], stop_reason: 'end_turn', stop_sequence: null,
        usage: { input_tokens: 12, output_tokens: 6 },
      })
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) })
      res.end(body)
    })
  })
  return new Promise((r) => server.listen(0, '127.0.0.1', () => r(server)))
}

function percentile(sorted, p) {
  if (sorted.length === 0) return NaN
  const i = Math.min(sorted.length - 1, Math.max(0, Math.round(p * (sorted.length - 1))))
  return sorted[i]
}

const minIters = Number(process.env.BENCH_MIN_ITERS ?? 20)
const minMs = Number(process.env.BENCH_MIN_MS ?? 1500)
const warmup = Number(process.env.BENCH_WARMUP ?? 5)
const only = process.env.BENCH_ONLY ? new Set(process.env.BENCH_ONLY.split(',')) : null

async function measure(run, messages, big) {
  const probe = await run(messages)
  if (!probe.success) {
    const msg = String(probe.output ?? 'run failed')
    return { unsupported: msg.length > 200 ? `${msg.slice(0, 200)}… (${msg.length} chars)` : msg }
  }
  if (probe.output !== CANNED) return { unsupported: `unexpected output ${JSON.stringify(probe.output)}` }
  for (let i = 1; i < (big ? 2 : warmup); i++) await run(messages)
  const need = big ? 5 : minIters
  const samples = []
  const t0 = performance.now()
  while (samples.length < need || (!big && performance.now() - t0 < minMs)) {
    const s = performance.now()
    const r = await run(messages)
    const e = performance.now()
    if (!r.success) return { unsupported: `a timed run failed: ${r.output}` }
    samples.push((e - s) * 1000)
  }
  samples.sort((a, b) => a - b)
  const round = (x) => Math.round(x)
  return { median_us: round(percentile(samples, 0.5)), p10_us: round(percentile(samples, 0.1)), p90_us: round(percentile(samples, 0.9)), iterations: samples.length }
}

async function main() {
  const dir = resolve(process.argv[2] ?? process.env.OMA_WORKLOADS ?? join(here, '..', '..', '..', 'target', 'workloads'))
  if (!existsSync(dir)) {
    console.error(`no workloads in ${dir}; run \`cargo run -q -p oma-harness --bin gen-workloads -- ${dir}\` at the repository root`)
    process.exit(2)
  }
  let oma = null
  const omaDir = process.env.OMA_DIR
  if (omaDir && existsSync(join(omaDir, 'dist', 'index.js'))) {
    oma = await import(pathToFileURL(join(resolve(omaDir), 'dist', 'index.js')).href)
  } else {
    console.error(`OMA not available (${omaDir ? `${omaDir}/dist/index.js is missing` : 'OMA_DIR is not set'}); measuring oma-component only`)
  }
  const server = await startServer()
  const baseURL = `http://127.0.0.1:${server.address().port}`
  const config = { name: 'bench', model: 'claude-sonnet-4-6', provider: 'anthropic', apiKey: 'sk-bench', baseURL }
  const files = (await readdir(dir)).filter((f) => f.endsWith('.json')).sort()
  const results = {}
  for (const file of files) {
    const name = file.replace(/\.json$/, '')
    if (only && !only.has(name)) continue
    const messages = JSON.parse(await readFile(join(dir, file), 'utf8'))
    const big = name.includes('16mib')
    const ours = new Agent(config)
    const entry = { component: await measure((m) => ours.run(m), messages, big) }
    if (oma) {
      const registry = new oma.ToolRegistry()
      const theirs = new oma.Agent(config, registry, new oma.ToolExecutor(registry))
      entry.oma = await measure((m) => theirs.run(m), messages, big)
      if (entry.oma.median_us && entry.component.median_us) {
        entry.ratio = Math.round((entry.component.median_us / entry.oma.median_us) * 100) / 100
      }
    }
    results[name] = entry
    const fmt = (r) => (r?.median_us ? `${r.median_us} (${r.p10_us}–${r.p90_us}, n=${r.iterations})` : r ? `unsupported: ${r.unsupported.slice(0, 60)}` : '-')
    console.error(`${name.padEnd(16)} component ${fmt(entry.component).padEnd(40)} oma ${fmt(entry.oma).padEnd(40)} ratio ${entry.ratio ?? '-'}`)
  }
  server.close()
  const meta = {
    node: process.version,
    loadavg: readFileSync('/proc/loadavg', 'utf8').trim(),
    oma: oma ? 'loaded' : 'absent',
  }
  console.log(JSON.stringify({ meta, results }, null, 2))
}

await main()
