#!/usr/bin/env node
// OMA (open-multi-agent, TypeScript) behind a minimal `node:http` server that does the job of the
// gateway's `POST /v1/run` (docs/gateway.md) per request: read the body, parse the JSON, check
// the request's fields, then `new Agent(config).run(messages | prompt)`: OMA validates the
// structured input (`assertValidMessages` and its copy), runs the one-turn loop against the
// provider, and the `AgentRunResult` is answered as JSON.
//
// OMA is not vendored: it is loaded from `$OMA_DIR/dist/index.js` (`<checkout>/packages/core`
// built; see bench/oma-node/README.md). Without OMA_DIR this exits with status 2.
//
// Usage:
//   OMA_DIR=<OMA checkout>/packages/core node oma-server.mjs [--addr 127.0.0.1:PORT]
//     [--max-seconds S] [--workers N]
//
// Configuration comes from the environment, as the gateway's does: `<PROVIDER>_API_KEY` and
// `<PROVIDER>_BASE_URL` (`ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL`, ...),
// `OMA_GATEWAY_MAX_BODY_BYTES` (32 MiB), `OMA_GATEWAY_DEADLINE_MS` (120000, OMA's `timeoutMs`).
//
// Routes: `GET /healthz`, `POST /v1/run`. Errors have the gateway's body
// `{"error": {"name", "code", "message", "retryable"}}`: 400 not JSON, 404, 405, 413, 422 (a
// wrong field, or OMA refused the input: its error class's name and code).
//
// `--workers N` (default 1) runs N processes with `node:cluster` sharing the port; one process is
// the plain, minimal server and the default.
//
// The server prints `oma-server: listening on http://ADDR` on stderr once it accepts, and exits by
// itself after `--max-seconds` (600 by default).

import cluster from 'node:cluster';
import { createServer } from 'node:http';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

function parseArgs(argv) {
  const out = { host: '127.0.0.1', port: 0, maxSeconds: 600, workers: 1 };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) fail(`${arg} needs a value`);
      return argv[++i];
    };
    if (arg === '--addr') {
      const text = value();
      const m = /^(127\.\d+\.\d+\.\d+|localhost|\[::1\]):(\d+)$/.exec(text);
      if (!m) fail(`--addr ${text}: a loopback HOST:PORT (127.x.y.z, localhost or [::1])`);
      out.host = m[1] === '[::1]' ? '::1' : m[1];
      out.port = Number(m[2]);
    } else if (arg === '--max-seconds') {
      out.maxSeconds = Number(value());
      if (!(out.maxSeconds > 0)) fail('--max-seconds: a positive number');
    } else if (arg === '--workers') {
      out.workers = Number(value());
      if (!Number.isInteger(out.workers) || out.workers < 1) fail('--workers: a positive integer');
    } else {
      fail(`unknown argument ${arg}`);
    }
  }
  return out;
}

function fail(message) {
  console.error(`oma-server: ${message}`);
  console.error('usage: OMA_DIR=DIR node oma-server.mjs [--addr 127.0.0.1:PORT] [--max-seconds S] [--workers N]');
  process.exit(2);
}

const args = parseArgs(process.argv.slice(2));
const omaDir = process.env.OMA_DIR;
if (!omaDir) {
  fail('OMA_DIR must name the built OMA package directory (<checkout>/packages/core, holding dist/index.js); see bench/oma-node/README.md');
}

// Exits by itself, whatever happens to whoever started it.
setTimeout(() => {
  console.error(`oma-server: --max-seconds ${args.maxSeconds} passed, exiting`);
  process.exit(0);
}, args.maxSeconds * 1000).unref();

if (args.workers > 1 && cluster.isPrimary) {
  // The primary only forks and waits; the workers share the listening socket.
  for (let i = 0; i < args.workers; i++) cluster.fork();
  let listening = 0;
  cluster.on('listening', (_worker, address) => {
    if (++listening === args.workers) {
      console.error(`oma-server: listening on http://${fmtAddr(address.address, address.port)} (${args.workers} workers)`);
    }
  });
  cluster.on('exit', (_worker, code) => {
    console.error(`oma-server: a worker exited (${code}); exiting`);
    process.exit(1);
  });
  // Keep the primary alive until --max-seconds.
  setInterval(() => {}, 1 << 30);
} else {
  await serve();
}

function fmtAddr(host, port) {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

async function serve() {
  let oma;
  try {
    oma = await import(pathToFileURL(path.join(path.resolve(omaDir), 'dist/index.js')).href);
  } catch (err) {
    console.error(`oma-server: cannot load OMA from ${omaDir}/dist/index.js: ${err.message}`);
    process.exit(2);
  }
  const { Agent, ToolRegistry, ToolExecutor } = oma;

  const maxBody = Number(process.env.OMA_GATEWAY_MAX_BODY_BYTES ?? 33554432);
  const deadlineMs = Number(process.env.OMA_GATEWAY_DEADLINE_MS ?? 120000);
  // No tools (a gateway run has none): one empty registry serves every agent.
  const registry = new ToolRegistry();
  const executor = new ToolExecutor(registry);

  const server = createServer((req, res) => {
    handle(req, res).catch((err) => {
      // Anything unexpected: a 500 with the error's name, never a crash.
      if (!res.headersSent) sendError(res, 500, err?.name ?? 'Error', 'INTERNAL', String(err?.message ?? err));
      else res.destroy();
    });
  });
  server.keepAliveTimeout = 60_000;
  server.headersTimeout = 65_000;
  server.requestTimeout = 0;

  async function handle(req, res) {
    const url = (req.url ?? '/').split('?')[0];
    if (url === '/healthz') {
      if (req.method !== 'GET') return methodNotAllowed(res, 'GET');
      return sendJson(res, 200, '{"status":"ok"}');
    }
    if (url !== '/v1/run') {
      req.resume();
      return sendError(res, 404, 'Error', 'NOT_FOUND', `no route ${url}`);
    }
    if (req.method !== 'POST') {
      req.resume();
      return methodNotAllowed(res, 'POST');
    }

    const body = await readBody(req, maxBody);
    if (body === null) {
      return sendError(res, 413, 'Error', 'PAYLOAD_TOO_LARGE', `the body is larger than ${maxBody} bytes`);
    }
    let request;
    try {
      request = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(body));
    } catch (err) {
      return sendError(res, 400, 'Error', 'MALFORMED_JSON', `the body is not JSON: ${err.message}`);
    }
    const checked = checkRequest(request);
    if (typeof checked === 'string') return sendError(res, 422, 'Error', undefined, checked);

    const env = checked.provider.toUpperCase().replace(/[^A-Z0-9]/g, '_');
    const config = {
      name: 'gateway',
      provider: checked.provider,
      model: checked.model,
      timeoutMs: deadlineMs,
      ...(process.env[`${env}_API_KEY`] !== undefined ? { apiKey: process.env[`${env}_API_KEY`] } : {}),
      ...(process.env[`${env}_BASE_URL`] !== undefined ? { baseURL: process.env[`${env}_BASE_URL`] } : {}),
      ...(checked.system !== undefined ? { systemPrompt: checked.system } : {}),
      ...(checked.maxTurns !== undefined ? { maxTurns: checked.maxTurns } : {}),
      ...(checked.maxTokenBudget !== undefined ? { maxTokenBudget: checked.maxTokenBudget } : {}),
      ...(checked.maxTokens !== undefined ? { maxTokens: checked.maxTokens } : {}),
      ...(checked.temperature !== undefined ? { temperature: checked.temperature } : {}),
    };

    let result;
    try {
      // One Agent per request, as a fresh run of the gateway: no state carried between requests
      // (a reused Agent appends every run's messages to its state).
      const agent = new Agent(config, registry, executor);
      result = await agent.run(checked.input);
    } catch (err) {
      // OMA's input validation throws (InvalidMessageError, UnsupportedContentBlockError, ...).
      return sendError(res, 422, err?.name ?? 'Error', err?.code, String(err?.message ?? err));
    }
    return sendJson(res, 200, JSON.stringify(result, errorReplacer));
  }

  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(args.port, args.host, resolve);
  });
  if (!cluster.isWorker) {
    const a = server.address();
    console.error(`oma-server: listening on http://${fmtAddr(a.address, a.port)}`);
  }
}

// The request's fields, as the gateway reads them; a string is the reason it is refused.
function checkRequest(r) {
  if (r === null || typeof r !== 'object' || Array.isArray(r)) return 'the request must be a JSON object';
  if (typeof r.provider !== 'string' || r.provider === '') return '"provider" must be a non-empty string';
  if (typeof r.model !== 'string' || r.model === '') return '"model" must be a non-empty string';
  const hasMessages = r.messages !== undefined;
  const hasPrompt = r.prompt !== undefined;
  if (hasMessages === hasPrompt) return 'exactly one of "messages" and "prompt" is required';
  if (hasPrompt && typeof r.prompt !== 'string') return '"prompt" must be a string';
  if (hasMessages && !Array.isArray(r.messages)) return '"messages" must be an array';
  if (r.system !== undefined && typeof r.system !== 'string') return '"system" must be a string';
  for (const key of ['maxTurns', 'maxTokenBudget', 'maxTokens']) {
    if (r[key] !== undefined && !(Number.isInteger(r[key]) && r[key] > 0)) return `"${key}" must be a positive integer`;
  }
  if (r.temperature !== undefined && typeof r.temperature !== 'number') return '"temperature" must be a number';
  return { ...r, input: hasMessages ? r.messages : r.prompt };
}

function errorReplacer(_key, value) {
  return value instanceof Error ? { name: value.name, message: value.message } : value;
}

function readBody(req, limit) {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > limit) {
      req.resume();
      resolve(null);
      return;
    }
    const chunks = [];
    let size = 0;
    let over = false;
    req.on('data', (chunk) => {
      size += chunk.length;
      if (size > limit) over = true;
      if (!over) chunks.push(chunk);
    });
    req.on('end', () => resolve(over ? null : Buffer.concat(chunks, size)));
    req.on('error', reject);
  });
}

function sendJson(res, status, text, extra = {}) {
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    ...extra,
  });
  res.end(text);
}

function sendError(res, status, name, code, message, extra) {
  const error = { name, ...(code !== undefined ? { code } : {}), message, retryable: false };
  sendJson(res, status, JSON.stringify({ error }), extra);
}

function methodNotAllowed(res, allow) {
  sendError(res, 405, 'Error', 'METHOD_NOT_ALLOWED', `use ${allow}`, { allow });
}
