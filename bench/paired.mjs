#!/usr/bin/env node
// One `run()` per workload, the component and OMA on Node, back to back, as one paired table.
//
//   OMA_DIR=/path/to/open-multi-agent/packages/core node bench/paired.mjs [SECONDS] [--server thread|main]
//
// It generates the workloads with the project's own generator, runs the criterion benches
// `run/<workload>` (the component through wasmtime against the loopback simulator; SECONDS of
// measurement per workload, 3 by default) and `bare_post/<workload>` (the same request sent by
// the host alone: the floor of a run through this host), then `bench/oma-node/run-bench.mjs` (OMA's
// `Agent.run()` against an equivalent loopback server), and prints both medians, the ratio, and
// the machine's load average before, between and after. A ratio is only worth quoting when the
// load average stays low throughout: both halves must run on a quiet machine.
//
// `--server` says where both sides' loopback provider serves from: `thread` (the default) a
// thread of its own, so each request wakes another CPU; `main` the client's own thread (one
// event loop serving and calling, no cross-CPU wakeup). Both sides always get the same.

import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const args = process.argv.slice(2)
let server = 'thread'
const serverAt = args.indexOf('--server')
if (serverAt >= 0) {
  server = args[serverAt + 1]
  args.splice(serverAt, 2)
}
if (server !== 'thread' && server !== 'main') {
  console.error('--server is `thread` or `main`')
  process.exit(2)
}
const seconds = args[0] ?? '3'
// Both benchmarks read it: the provider serves from the same place on each side.
process.env.OMA_BENCH_SERVER = server

function load() {
  try {
    return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')
  } catch {
    return 'unknown'
  }
}

function run(command, args, options = {}) {
  const result = spawnSync(command, args, {
    cwd: root,
    encoding: 'utf8',
    maxBuffer: 64 << 20,
    stdio: ['ignore', 'pipe', 'inherit'],
    ...options,
  })
  if (result.status !== 0) {
    console.error(`${command} ${args.join(' ')} failed (${result.status ?? result.signal})`)
    process.exit(1)
  }
  return result.stdout
}

const UNITS = { ns: 1e-3, 'µs': 1, us: 1, ms: 1e3, s: 1e6 }

/** Criterion's `group/name  time: [low mid high]` lines of `group`, as medians in µs by name. */
function criterionMedians(text, group) {
  const medians = {}
  const pattern = new RegExp(`(?:^|\\n)${group}\\/([\\w-]+)\\s+time:\\s+\\[\\S+ \\S+ (\\S+) (\\S+) \\S+ \\S+\\]`, 'g')
  for (const match of text.matchAll(pattern)) {
    const factor = UNITS[match[3]]
    if (factor !== undefined) medians[match[1]] = Number(match[2]) * factor
  }
  return medians
}

if (!process.env.OMA_DIR) {
  console.error('set OMA_DIR to a build of OMA (see bench/oma-node/README.md)')
  process.exit(2)
}
const workloads = mkdtempSync(join(tmpdir(), 'oma-workloads-'))
console.error(`generating the workloads in ${workloads}`)
run('cargo', ['run', '-q', '--release', '-p', 'oma-host-tests', '--bin', 'gen-workloads', '--', workloads])

const before = load()
console.error('the component: cargo bench -p oma-host-tests --bench agent -- "^(run|bare_post)/"')
const criterion = run('cargo', [
  'bench', '-p', 'oma-host-tests', '--bench', 'agent', '--',
  '--measurement-time', seconds, '--warm-up-time', '1', '^(run|bare_post)/',
])
const between = load()
console.error('OMA on Node: bench/oma-node/run-bench.mjs')
const node = run(process.execPath, [join(root, 'bench/oma-node/run-bench.mjs'), workloads])
const after = load()

const ours = criterionMedians(criterion, 'run')
const floor = criterionMedians(criterion, 'bare_post')
const line = node.split('\n').find((l) => l.startsWith('{'))
const theirs = line ? JSON.parse(line) : {}

const rows = [['workload', 'oma-component run', 'OMA Agent.run', 'OMA / component', 'bare POST', 'run / bare POST']]
for (const name of Object.keys(ours)) {
  const peer = theirs[name]
  const mine = ours[name]
  const bare = floor[name]
  const against = bare ? [`${bare.toFixed(1)} µs`, `${(mine / bare).toFixed(2)}x`] : ['', '']
  if (peer?.median_us) {
    rows.push([name, `${mine.toFixed(1)} µs`, `${peer.median_us.toFixed(1)} µs`, `${(peer.median_us / mine).toFixed(2)}x`, ...against])
  } else {
    rows.push([name, `${mine.toFixed(1)} µs`, 'unsupported', '', ...against])
  }
}
console.log(`load average: before ${before}; between ${between}; after ${after}`)
console.log(`Node ${process.version}; loopback provider on ${server === 'main' ? "the client's own thread" : 'a thread of its own'}`)
for (const row of rows) console.log(`| ${row.join(' | ')} |`)
