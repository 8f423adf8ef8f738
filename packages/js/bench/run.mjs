#!/usr/bin/env node
// One `run()` per workload against a loopback Anthropic provider: this package's Agent.run(),
// and, when OMA is available, OMA's Agent.run() in the same process against the same server.
//
// Usage (from packages/js, after `npm run build`):
//   cargo run -q -p oma-host-tests --bin gen-workloads -- ../../target/workloads   # once, at the root
//   [OMA_DIR=<OMA checkout>/packages/core] node bench/run.mjs [WORKLOAD_DIR]
//
// WORKLOAD_DIR defaults to $OMA_WORKLOADS, then ../../target/workloads. OMA is loaded from
// $OMA_DIR/dist/index.js (see bench/oma-node/README.md for building it) and skipped when absent.
// BASE_DIR=<a copy of this package, built> adds a third side, that copy run as this package's side
// is (in every mode below), for measuring a change against the code before it in the same run
// (`before` in the output).
// Knobs: BENCH_MIN_ITERS (20), BENCH_MIN_MS (1500), BENCH_WARMUP (5 runs a side, then
// alternating runs for BENCH_WARMUP_MS, 1000), BENCH_ROUNDS (6),
// BENCH_ONLY=a,b; BENCH_TRACE=1 traces this package's runs (onTrace, events dropped); BENCH_SINK=1
// runs both sides as `new OpenMultiAgent({ observability: { sinks: [sink] } }).runAgent(config,
// messages)`, each with its own BatchingTraceSink over an exporter that takes every batch (the
// trace records made, processed, queued and exported on every run); BENCH_RUN_AGENT=1 runs both
// sides through `OpenMultiAgent.runAgent` without sinks (what BENCH_SINK=1 adds records to). The
// two sides are warmed
// together and then alternate in rounds (see measure).
// Output: a table on stderr and one JSON object on stdout.

import { createServer } from 'node:http'
import { readFile, readdir } from 'node:fs/promises'
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { performance } from 'node:perf_hooks'
import { Agent, OpenMultiAgent } from '../src/index.js'
import { BatchingTraceSink } from '../src/observability/index.js'

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
const warmupMs = Number(process.env.BENCH_WARMUP_MS ?? 1000)
const rounds = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 6))
const only = process.env.BENCH_ONLY ? new Set(process.env.BENCH_ONLY.split(',')) : null

/** One side: `run(messages)` and its samples; `unsupported` once a run fails. */
function side(run) {
  return { run, samples: [], unsupported: null }
}

async function probe(s, messages) {
  const r = await s.run(messages)
  if (!r.success) {
    const msg = String(r.output ?? 'run failed')
    s.unsupported = msg.length > 200 ? `${msg.slice(0, 200)}… (${msg.length} chars)` : msg
  } else if (r.output !== CANNED) {
    s.unsupported = `unexpected output ${JSON.stringify(r.output)}`
  }
}

/** A timed block of at least `iters` runs and `ms` milliseconds. */
async function block(s, messages, iters, ms) {
  const t0 = performance.now()
  for (let n = 0; n < iters || performance.now() - t0 < ms; n++) {
    const start = performance.now()
    const r = await s.run(messages)
    const end = performance.now()
    if (!r.success) {
      s.unsupported = `a timed run failed: ${r.output}`
      return
    }
    s.samples.push((end - start) * 1000)
  }
}

/**
 * Times the sides on one workload. Both are probed and warmed first; then they alternate in
 * `rounds` rounds (the first side of a round alternates too), each round a block per side of at
 * least minIters/rounds runs and minMs/rounds ms. Whichever side runs first on a workload is
 * otherwise the slower one (Node's shared fetch machinery, the loopback server and the heap warm
 * up with it), and a load that changes over the seconds of a run reaches both sides alike.
 */
async function measure(sides, messages, big) {
  for (const s of sides) await probe(s, messages)
  const live = () => sides.filter((s) => !s.unsupported)
  for (let i = 1; i < (big ? 2 : warmup); i++) for (const s of live()) await s.run(messages)
  // Then on, alternating, for warmupMs: a fresh process takes about a thousand runs of either
  // side to reach its steady speed (V8 optimising the JavaScript of both, the heap growing), so
  // a first workload measured after a few runs measured the warming as much as the side.
  const warmEnd = performance.now() + (big ? 0 : warmupMs)
  while (performance.now() < warmEnd) for (const s of live()) await s.run(messages)
  const r = big ? 5 : rounds
  const iters = big ? 1 : Math.ceil(minIters / r)
  const ms = big ? 0 : minMs / r
  for (let k = 0; k < r; k++) {
    const order = k % 2 === 0 ? live() : live().reverse()
    for (const s of order) await block(s, messages, iters, ms)
  }
  return sides.map((s) => {
    if (s.unsupported) return { unsupported: s.unsupported }
    const samples = s.samples.sort((a, b) => a - b)
    const round = (x) => Math.round(x)
    return { median_us: round(percentile(samples, 0.5)), p10_us: round(percentile(samples, 0.1)), p90_us: round(percentile(samples, 0.9)), iterations: samples.length }
  })
}

async function main() {
  const loadBefore = readFileSync('/proc/loadavg', 'utf8').trim()
  const dir = resolve(process.argv[2] ?? process.env.OMA_WORKLOADS ?? join(here, '..', '..', '..', 'target', 'workloads'))
  if (!existsSync(dir)) {
    console.error(`no workloads in ${dir}; run \`cargo run -q -p oma-host-tests --bin gen-workloads -- ${dir}\` at the repository root`)
    process.exit(2)
  }
  let oma = null
  const omaDir = process.env.OMA_DIR
  if (omaDir && existsSync(join(omaDir, 'dist', 'index.js'))) {
    oma = await import(pathToFileURL(join(resolve(omaDir), 'dist', 'index.js')).href)
  } else {
    console.error(`OMA not available (${omaDir ? `${omaDir}/dist/index.js is missing` : 'OMA_DIR is not set'}); measuring oma-component only`)
  }
  let base = null
  if (process.env.BASE_DIR) {
    base = await import(pathToFileURL(join(resolve(process.env.BASE_DIR), 'src', 'index.js')).href)
  }
  const server = await startServer()
  const baseURL = `http://127.0.0.1:${server.address().port}`
  const config = { name: 'bench', model: 'claude-sonnet-4-6', provider: 'anthropic', apiKey: 'sk-bench', baseURL }
  // BENCH_SINK=1: an exporter that takes every batch (the same for both sides).
  const sinks = process.env.BENCH_SINK === '1'
  const orchestrated = process.env.BENCH_RUN_AGENT === '1'
  const takeAll = { async export(records) { return { status: 'success', exported: records.length } } }
  // BENCH_TRACE=1: every run of this package traced (OMA's onTrace), the events dropped.
  const traced = process.env.BENCH_TRACE === '1' ? { onTrace: () => {} } : undefined
  const files = (await readdir(dir)).filter((f) => f.endsWith('.json')).sort()
  const results = {}
  for (const file of files) {
    const name = file.replace(/\.json$/, '')
    if (only && !only.has(name)) continue
    const messages = JSON.parse(await readFile(join(dir, file), 'utf8'))
    const big = name.includes('16mib')
    const sides = []
    if (sinks || orchestrated) {
      const observability = (Sink) => (sinks ? { observability: { sinks: [new Sink(takeAll, { diagnostics: 'silent' })] } } : {})
      const ours = new OpenMultiAgent(observability(BatchingTraceSink))
      sides.push(side((m) => ours.runAgent(config, m)))
      if (oma) {
        const theirs = new oma.OpenMultiAgent(observability(oma.BatchingTraceSink))
        sides.push(side((m) => theirs.runAgent(config, m)))
      }
    } else {
      const ours = new Agent(config)
      sides.push(side((m) => ours.run(m, traced)))
      if (oma) {
        const registry = new oma.ToolRegistry()
        const theirs = new oma.Agent(config, registry, new oma.ToolExecutor(registry))
        sides.push(side((m) => theirs.run(m)))
      }
    }
    if (base) {
      // The code before a change, run as this package's side is (traced with BENCH_TRACE=1,
      // through runAgent with BENCH_SINK=1 or BENCH_RUN_AGENT=1).
      if (sinks || orchestrated) {
        const before = new base.OpenMultiAgent(sinks ? { observability: { sinks: [new base.BatchingTraceSink(takeAll, { diagnostics: 'silent' })] } } : {})
        sides.push(side((m) => before.runAgent(config, m)))
      } else {
        const before = new base.Agent(config)
        sides.push(side((m) => before.run(m, traced)))
      }
    }
    const measured = await measure(sides, messages, big)
    const component = measured[0]
    const omaResult = oma ? measured[1] : null
    const beforeResult = base ? measured[oma ? 2 : 1] : null
    const entry = { component }
    const ratio = (a, b) => (a?.median_us && b?.median_us ? Math.round((a.median_us / b.median_us) * 100) / 100 : undefined)
    if (omaResult) {
      entry.oma = omaResult
      entry.ratio = ratio(entry.component, entry.oma)
      // How many times faster than OMA: OMA's median over the component's.
      entry.speedup = ratio(entry.oma, entry.component)
    }
    if (beforeResult) {
      entry.before = beforeResult
      entry.before_speedup = ratio(entry.before, entry.component)
      if (omaResult) entry.before_vs_oma = ratio(entry.oma, entry.before)
    }
    results[name] = entry
    const fmt = (r) => (r?.median_us ? `${r.median_us} (${r.p10_us}–${r.p90_us}, n=${r.iterations})` : r ? `unsupported: ${r.unsupported.slice(0, 60)}` : '-')
    const extra = beforeResult ? ` before ${fmt(entry.before).padEnd(36)} oma/before ${entry.before_vs_oma ?? '-'}` : ''
    console.error(`${name.padEnd(16)} component ${fmt(entry.component).padEnd(36)} oma ${fmt(entry.oma).padEnd(36)} oma/component ${entry.speedup ?? '-'}${extra}`)
  }
  server.close()
  const meta = {
    node: process.version,
    loadavg_before: loadBefore,
    loadavg_after: readFileSync('/proc/loadavg', 'utf8').trim(),
    oma: oma ? 'loaded' : 'absent',
    sinks: process.env.BENCH_SINK === '1',
    runAgent: process.env.BENCH_SINK === '1' || process.env.BENCH_RUN_AGENT === '1',
  }
  console.log(JSON.stringify({ meta, results }, null, 2))
}

await main()
