// The gateway Worker's per-token limits (OMA_GATEWAY_KEYS) under `workerd serve`, against a
// loopback provider in this process. src/gateway.js is bundled here (scripts/bundle.mjs, with
// gen/ as `npm run build:routes` or `npm run bundle:gateway` leaves it) into a temporary
// directory, beside a workerd configuration written for the test:
//
// - two Worker services, `a` and `b`, on two sockets: two isolates, each with its own instance
//   of the routes component (its own memory), both with OMA_GATEWAY_LIMITS_BUCKET=LIMITS bound to
//   ONE Durable Object namespace (the class `LimitsCounter`, defined by `a`, reached from `b`
//   with `serviceName`): requests alternating between them are held to one count;
// - a third service, `solo`, without the bucket: counted in its isolate's memory;
// - a fourth, `unbound`, whose bucket names no binding: a limited request is a 503, never let
//   through uncounted.
//
// Loopback only (the Workers' fetch goes to a network service that allows local addresses), each
// request with a timeout, workerd killed with its process group at the end.

import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { bundle } from '../scripts/bundle.mjs'
import { freePort, pkg, startProvider, startWorkerd } from './support.js'

const START_TIMEOUT_MS = 60_000
const PROVIDER_KEY = 'sk-limits-test-SECRET-7070'
const KEYS = { 'key-3': { rpm: 3 }, 'key-tpm': { tpm: 20 } }

if (!existsSync(join(pkg, 'gen', 'oma_routes.js'))) {
  throw new Error('gen/oma_routes.js is missing: run `npm run bundle:gateway` (or `npm run build:routes`) first')
}

// The provider: every answer uses 12 + 6 = 18 tokens.
const provider = await startProvider('Counted.')

const dir = mkdtempSync(join(tmpdir(), 'oma-worker-limits-'))
const built = await bundle(join(pkg, 'src', 'gateway.js'), dir)
const ports = { a: await freePort(), b: await freePort(), solo: await freePort(), unbound: await freePort() }

/** A capnp text literal. */
const text = (value) => JSON.stringify(value)

/** The text bindings of a Worker: the provider, the keys, and the bucket when given. */
function bindings(bucket) {
  const vars = {
    ANTHROPIC_API_KEY: PROVIDER_KEY,
    ANTHROPIC_BASE_URL: provider.url,
    OMA_GATEWAY_KEYS: JSON.stringify(KEYS),
    OMA_GATEWAY_DEADLINE_MS: '20000',
  }
  if (bucket) vars.OMA_GATEWAY_LIMITS_BUCKET = bucket
  return Object.entries(vars).map(([name, value]) => `(name = ${text(name)}, text = ${text(value)})`)
}

const modules = built.files
  .map((f) => f.name)
  .sort((x, y) => (x === 'worker.js' ? -1 : y === 'worker.js' ? 1 : x.localeCompare(y)))
  .map((name) => name === 'worker.js'
    ? `(name = "worker.js", esModule = embed "worker.js")`
    : `(name = ${text(name)}, wasm = embed ${text(name)})`)
  .join(',\n    ')

function worker(extra, bucketBinding, bucket) {
  return `(
  modules = [
    ${modules}
  ],
  compatibilityDate = "2026-11-17",
  ${extra}
  bindings = [
    ${[...bindings(bucket), ...(bucketBinding ? [bucketBinding] : [])].join(',\n    ')}
  ],
  globalOutbound = "loopback",
)`
}

writeFileSync(join(dir, 'limits.capnp'), `using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "a", worker = .a),
    (name = "b", worker = .b),
    (name = "solo", worker = .solo),
    (name = "unbound", worker = .unbound),
    (name = "loopback", network = (allow = ["local"])),
  ],
  sockets = [
    (name = "a", address = "127.0.0.1:${ports.a}", http = (), service = "a"),
    (name = "b", address = "127.0.0.1:${ports.b}", http = (), service = "b"),
    (name = "solo", address = "127.0.0.1:${ports.solo}", http = (), service = "solo"),
    (name = "unbound", address = "127.0.0.1:${ports.unbound}", http = (), service = "unbound"),
  ],
);

const a :Workerd.Worker = ${worker(
  `durableObjectNamespaces = [(className = "LimitsCounter", uniqueKey = "oma-gateway-limits-test")],
  durableObjectStorage = (inMemory = void),`,
  '(name = "LIMITS", durableObjectNamespace = "LimitsCounter")',
  'LIMITS',
)};

const b :Workerd.Worker = ${worker(
  '',
  '(name = "LIMITS", durableObjectNamespace = (className = "LimitsCounter", serviceName = "a"))',
  'LIMITS',
)};

const solo :Workerd.Worker = ${worker('', null, null)};

const unbound :Workerd.Worker = ${worker('', null, 'LIMITS')};
`)

const { workerd, output } = startWorkerd(['serve', 'limits.capnp'], {
  cwd: dir,
  cleanup: () => {
    provider.close()
    rmSync(dir, { recursive: true, force: true })
  },
})

async function call(service, path, { key, body, method = 'POST' } = {}) {
  const headers = { 'content-type': 'application/json' }
  if (key) headers.authorization = `Bearer ${key}`
  const res = await fetch(`http://127.0.0.1:${ports[service]}${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(20_000),
  })
  return { status: res.status, headers: res.headers, json: await res.json() }
}

const RUN = { provider: 'anthropic', model: 'claude-test', prompt: 'Count me.' }
const CHAT = { model: 'anthropic/claude-test', messages: [{ role: 'user', content: 'Count me.' }] }

/** Waits until every service answers `/healthz`. */
async function ready() {
  const started = Date.now()
  for (const service of Object.keys(ports)) {
    for (;;) {
      if (workerd.exitCode !== null) throw new Error(`workerd exited:\n${Buffer.concat(output)}`)
      if (Date.now() - started > START_TIMEOUT_MS) {
        throw new Error(`workerd did not answer in time:\n${Buffer.concat(output)}`)
      }
      try {
        await call(service, '/healthz', { method: 'GET' })
        break
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
    }
  }
}
await ready()

/** Whether `refused` is the route's 429 with `retry-after` within the minute. */
function assertRefused(refused, code, what) {
  assert.equal(refused.status, 429, JSON.stringify(refused.json))
  const retry = Number(refused.headers.get('retry-after'))
  assert.ok(Number.isInteger(retry) && retry >= 1 && retry <= 60, `retry-after: ${retry}`)
  assert.equal(refused.json.error.code, code, JSON.stringify(refused.json))
  assert.ok(refused.json.error.message.includes(what), refused.json.error.message)
}

/**
 * Runs `attempt` until it is not split by a minute's edge (the windows are minutes of the wall
 * clock): started with at least 15 s of the minute left.
 */
async function withinOneMinute(attempt) {
  const left = 60_000 - (Date.now() % 60_000)
  if (left < 15_000) await new Promise((resolve) => setTimeout(resolve, left + 50))
  return attempt()
}

test('two Worker isolates bound to one Durable Object namespace hold a key to one count', async () => {
  for (const service of ['a', 'b']) {
    const { status, json } = await call(service, '/healthz', { method: 'GET' })
    assert.equal(status, 200)
    assert.deepEqual(json, { status: 'ok', limits: 'shared' })
  }
  await withinOneMinute(async () => {
    const before = provider.requests.length
    // key-3 may make 3 requests a minute: alternating between the isolates, the fourth is
    // refused wherever it lands (two routes, each in its own error shape).
    for (const [service, path, body] of [['a', '/v1/run', RUN], ['b', '/v1/run', RUN], ['a', '/v1/run', RUN]]) {
      const { status, json } = await call(service, path, { key: 'key-3', body })
      assert.equal(status, 200, `${service}: ${JSON.stringify(json)}`)
      assert.equal(json.success, true, JSON.stringify(json))
    }
    assertRefused(await call('b', '/v1/run', { key: 'key-3', body: RUN }), 'RATE_LIMITED', '3 requests per minute')
    assertRefused(
      await call('a', '/v1/chat/completions', { key: 'key-3', body: CHAT }),
      'rate_limit_exceeded',
      '3 requests per minute',
    )
    assert.equal(provider.requests.length - before, 3, 'a refused request reaches no provider')
  })
})

test('a run\'s tokens are counted in the Durable Object after its answer', async () => {
  await withinOneMinute(async () => {
    // key-tpm may use 20 tokens a minute; each answer uses 18: the first two are admitted (the
    // second while the count is under 20), the third is refused on the other isolate.
    for (const service of ['b', 'a']) {
      const { status, json } = await call(service, '/v1/run', { key: 'key-tpm', body: RUN })
      assert.equal(status, 200, JSON.stringify(json))
      assert.deepEqual(json.tokenUsage, { input_tokens: 12, output_tokens: 6 })
    }
    assertRefused(await call('b', '/v1/run', { key: 'key-tpm', body: RUN }), 'RATE_LIMITED', '20 tokens per minute')
  })
})

test('without the bucket, one isolate counts in its own memory', async () => {
  const { json } = await call('solo', '/healthz', { method: 'GET' })
  assert.deepEqual(json, { status: 'ok', limits: 'per-instance' })
  await withinOneMinute(async () => {
    for (let i = 0; i < 3; i++) {
      const { status, json } = await call('solo', '/v1/run', { key: 'key-3', body: RUN })
      assert.equal(status, 200, JSON.stringify(json))
    }
    assertRefused(await call('solo', '/v1/run', { key: 'key-3', body: RUN }), 'RATE_LIMITED', '3 requests per minute')
  })
  // The key never reaches an answer or workerd's output; neither does the provider's.
  const logs = Buffer.concat(output).toString()
  assert.ok(!logs.includes('SECRET'), logs)
})

test('a bucket that names no Durable Object binding is a 503 for a limited request', async () => {
  const before = provider.requests.length
  const refused = await call('unbound', '/v1/run', { key: 'key-3', body: RUN })
  assert.equal(refused.status, 503, JSON.stringify(refused.json))
  assert.equal(refused.headers.get('retry-after'), '1')
  assert.equal(refused.json.error.code, 'LIMITS_UNAVAILABLE')
  assert.ok(!JSON.stringify(refused.json).includes('binding'), 'the store\'s error is not shown')
  assert.equal(provider.requests.length, before)
})
