#!/usr/bin/env node
// Node.js side of the benchmark "one Agent.run() of OMA against a loopback provider, on each
// benchmark workload".
//
// OMA (open-multi-agent, the TypeScript framework this project reproduces) is NOT vendored: it is
// loaded from the built package directory named by $OMA_DIR (the directory holding
// `dist/index.js`, i.e. `<checkout>/packages/core`). See README.md for how to build it.
//
// Usage:
//   OMA_DIR=<OMA checkout>/packages/core node run-bench.mjs [WORKLOAD_DIR]
// WORKLOAD_DIR defaults to $OMA_WORKLOADS, then ../../target/workloads relative to this file
// (written by `cargo run -p oma-host-tests --bin gen-workloads -- <dir>` from the repository root).
//
// Optional env: OMA_BENCH_MIN_ITERS (default 20), OMA_BENCH_MIN_MS (default 2000),
// OMA_BENCH_WARMUP (default 5 runs), OMA_BENCH_WARMUP_MS (default 500), OMA_BENCH_ONLY
// (comma-separated workload names), OMA_BENCH_SERVER=main (serve on the main thread instead of
// a worker thread).
//
// The loopback server runs on a worker thread of this process by default, like the Rust side's
// simulator (crates/loopback/src/simulator.rs: its own thread and runtime), so the server's work
// (reading and parsing the request body) overlaps with, rather than adds to, the client's.
//
// Output: one JSON object on stdout,
//   {"<workload>": {"median_us", "p10_us", "p90_us", "iterations"} | {"unsupported": "<msg>"}}
// and a human-readable table on stderr.

import { createServer } from 'node:http';
import { readFile, readdir } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { performance } from 'node:perf_hooks';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';

const here = path.dirname(fileURLToPath(import.meta.url));

// --- Canned provider answer (mirrors crates/loopback/src/canned.rs, Route::Anthropic, non-stream) ---
const CANNED_TEXT = 'Hello from the simulator.';
const CANNED_USAGE = [12, 6];

function cannedAnthropicBody(model) {
  return JSON.stringify({
    id: 'msg_sim_01',
    type: 'message',
    role: 'assistant',
    model,
    content: [{ type: 'text', text: CANNED_TEXT }],
    stop_reason: 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: CANNED_USAGE[0], output_tokens: CANNED_USAGE[1] },
  });
}

// Request stats shared with the server thread: [requests served, bytes of the last body].
let stats = new Int32Array(new SharedArrayBuffer(8));

function startServer() {
  const server = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      Atomics.store(stats, 1, body.length);
      Atomics.add(stats, 0, 1);
      const url = (req.url ?? '').split('?')[0];
      if (req.method !== 'POST' || !url.endsWith('/v1/messages')) {
        const err = JSON.stringify({
          type: 'error',
          error: { type: 'not_found_error', message: 'no such route (simulated)' },
        });
        res.writeHead(404, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(err) });
        res.end(err);
        return;
      }
      // Like canned.rs, echo the model named in the body (parse as a real server would).
      let model = '';
      try {
        const parsed = JSON.parse(body.toString('utf8'));
        if (typeof parsed.model === 'string') model = parsed.model;
      } catch {
        /* leave model empty, as canned.rs does */
      }
      const out = cannedAnthropicBody(model);
      res.writeHead(200, {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(out),
        'request-id': 'req_sim_01',
      });
      res.end(out);
    });
  });
  server.keepAliveTimeout = 60_000;
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
}

// Starts the server on a worker thread; resolves to { port, close }.
function startServerThread() {
  const worker = new Worker(new URL(import.meta.url), { workerData: { stats: stats.buffer } });
  return new Promise((resolve, reject) => {
    worker.once('error', reject);
    worker.once('message', (msg) => {
      resolve({ port: msg.port, close: () => worker.terminate() });
    });
  });
}

async function serverThreadMain() {
  stats = new Int32Array(workerData.stats);
  const server = await startServer();
  parentPort.postMessage({ port: server.address().port });
}

// --- Stats ---
function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  const idx = (sorted.length - 1) * p;
  const lo = Math.floor(idx);
  const hi = Math.ceil(idx);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (idx - lo);
}

const round1 = (x) => Math.round(x * 10) / 10;

// --- Main ---
async function main() {
  const omaDir = process.env.OMA_DIR;
  if (!omaDir) {
    console.error('OMA_DIR must name the built OMA package directory (containing dist/index.js).');
    process.exit(2);
  }
  const oma = await import(pathToFileURL(path.join(path.resolve(omaDir), 'dist/index.js')).href);
  const { Agent, ToolRegistry, ToolExecutor } = oma;

  const workloadDir = path.resolve(
    process.argv[2] ?? process.env.OMA_WORKLOADS ?? path.join(here, '../../target/workloads'),
  );
  const minIters = Number(process.env.OMA_BENCH_MIN_ITERS ?? 20);
  const minMs = Number(process.env.OMA_BENCH_MIN_MS ?? 2000);
  const warmup = Number(process.env.OMA_BENCH_WARMUP ?? 5);
  const warmupMs = Number(process.env.OMA_BENCH_WARMUP_MS ?? 500);
  const only = process.env.OMA_BENCH_ONLY ? new Set(process.env.OMA_BENCH_ONLY.split(',')) : null;

  const onMain = process.env.OMA_BENCH_SERVER === 'main';
  let port;
  let closeServer;
  if (onMain) {
    const server = await startServer();
    port = server.address().port;
    closeServer = () => {
      server.close();
      server.closeAllConnections?.();
    };
  } else {
    ({ port, close: closeServer } = await startServerThread());
  }
  const baseURL = `http://127.0.0.1:${port}`;

  const files = (await readdir(workloadDir).catch(() => [])).filter((f) => f.endsWith('.json')).sort();
  if (files.length === 0) {
    console.error(
      `no workloads (*.json) in ${workloadDir}; write them with ` +
        `\`cargo run -p oma-host-tests --bin gen-workloads -- ${workloadDir}\` from the repository root`,
    );
    process.exit(2);
  }

  const results = {};
  const table = [];
  for (const file of files) {
    const name = file.replace(/\.json$/, '');
    if (only && !only.has(name)) continue;
    const messages = JSON.parse(await readFile(path.join(workloadDir, file), 'utf8'));
    const big = name.includes('16mib');

    // One Agent per workload; its Anthropic adapter (and SDK client) is created lazily on the
    // first run (a warm-up) and reused, as an application reusing an agent would.
    const registry = new ToolRegistry();
    const agent = new Agent(
      {
        name: 'bench',
        model: 'claude-sonnet-4-6',
        provider: 'anthropic',
        apiKey: 'sk-bench',
        baseURL,
      },
      registry,
      new ToolExecutor(registry),
    );

    // First run doubles as the support probe.
    const probe = await agent.run(messages);
    if (!probe.success) {
      const msg = String(probe.error?.message ?? probe.output ?? 'run failed');
      const short = msg.length > 300 ? `${msg.slice(0, 300)}… (${msg.length} chars)` : msg;
      results[name] = { unsupported: short };
      table.push([name, 'unsupported', '', '', '', short.slice(0, 100)]);
      continue;
    }
    if (probe.output !== CANNED_TEXT) {
      console.error(`[${name}] unexpected output: ${JSON.stringify(probe.output)}`);
    }

    // Warm-up: `warmup` runs and at least `warmupMs` (just 2 runs for the 16 MiB case).
    const wu = big ? Math.min(warmup, 2) : warmup;
    const w0 = performance.now();
    for (let i = 1; i < wu || (!big && performance.now() - w0 < warmupMs); i++) {
      const r = await agent.run(messages);
      if (!r.success) console.error(`[${name}] warm-up run failed: ${r.output}`);
    }

    const needIters = big ? Math.max(5, Math.floor(minIters / 4)) : minIters;
    const samples = [];
    let failures = 0;
    const t0 = performance.now();
    while (samples.length < needIters || performance.now() - t0 < minMs) {
      const s = performance.now();
      const r = await agent.run(messages);
      const e = performance.now();
      if (!r.success) {
        failures += 1;
        console.error(`[${name}] ERROR: run failed: ${r.output}`);
        if (failures > 3) break;
        continue;
      }
      samples.push((e - s) * 1000);
      if (big && samples.length >= needIters) break; // keep the 16 MiB case short
      if (samples.length >= 100_000) break;
    }
    samples.sort((a, b) => a - b);
    const entry = {
      median_us: round1(percentile(samples, 0.5)),
      p10_us: round1(percentile(samples, 0.1)),
      p90_us: round1(percentile(samples, 0.9)),
      iterations: samples.length,
    };
    results[name] = entry;
    table.push([
      name,
      String(entry.median_us),
      String(entry.p10_us),
      String(entry.p90_us),
      String(entry.iterations),
      `request body ${Atomics.load(stats, 1)} B`,
    ]);
  }

  await closeServer();

  process.stdout.write(`${JSON.stringify(results)}\n`);

  const head = ['workload', 'median_us', 'p10_us', 'p90_us', 'iters', 'note'];
  const rows = [head, ...table];
  const widths = head.map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  console.error(
    `OMA on Node ${process.version}, loopback ${baseURL} (server on ${onMain ? 'main thread' : 'worker thread'}), ` +
      `${Atomics.load(stats, 0)} requests served`,
  );
  for (const r of rows) {
    console.error(r.map((c, i) => (i === 0 || i === 5 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ').trimEnd());
  }
}

(isMainThread ? main() : serverThreadMain()).catch((err) => {
  console.error(err);
  process.exit(1);
});
