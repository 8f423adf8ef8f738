// The package on Cloudflare Workers: src/probe.js bundled as Workers bundle (esbuild with the
// `workerd` condition, scripts/bundle.mjs) and served by `workerd serve workerd.capnp` (npm's
// workerd, pinned), its fetch confined to loopback, against a loopback provider in this process.
// Checks that the Workers build loads where no WebAssembly may be compiled at run time, that a
// run reaches the provider with the Worker's fetch and gives OMA's result, that invalid input is
// OMA's error with nothing sent, and records the cold start and the bundle size, which it holds to
// its ceiling (gzipped).

import { join } from 'node:path'
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { bundle } from '../scripts/bundle.mjs'
import { freePort, pkg, startProvider, startWorkerd } from './support.js'

const KEY = 'sk-worker-test-SECRET-5150'
const START_TIMEOUT_MS = 60_000

const provider = await startProvider('Hello from the loopback provider.')
const { requests } = provider

const built = await bundle(join(pkg, 'src', 'probe.js'), join(pkg, 'dist'))
const port = await freePort()
const started = performance.now()
const { workerd, output } = startWorkerd(
  ['serve', 'workerd.capnp', '--socket-addr', `http=127.0.0.1:${port}`],
  {
    cwd: pkg,
    env: { ANTHROPIC_API_KEY: KEY, ANTHROPIC_BASE_URL: provider.url },
    cleanup: () => provider.close(),
  },
)

async function call(body) {
  const res = await fetch(`http://127.0.0.1:${port}/run`, {
    method: 'POST',
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(20_000),
  })
  return { status: res.status, json: await res.json() }
}

/** The first answer from the Worker, and how long after workerd's start it came. */
async function firstAnswer() {
  for (;;) {
    if (workerd.exitCode !== null) throw new Error(`workerd exited:\n${Buffer.concat(output)}`)
    if (performance.now() - started > START_TIMEOUT_MS) throw new Error('workerd did not answer in time')
    try {
      const answer = await call('Hello?')
      return { answer, ms: performance.now() - started }
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
  }
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]
}

test('the Workers build runs under workerd: a run reaches the loopback provider', async () => {
  const { answer, ms } = await firstAnswer()
  assert.equal(answer.status, 200)
  assert.equal(answer.json.success, true, JSON.stringify(answer.json))
  assert.equal(answer.json.output, 'Hello from the loopback provider.')
  assert.deepEqual(answer.json.tokenUsage, { input_tokens: 12, output_tokens: 6 })
  assert.equal(requests.length, 1)
  assert.equal(requests[0].url, '/v1/messages')
  assert.equal(requests[0].headers['x-api-key'], KEY)
  assert.equal(JSON.parse(requests[0].body).messages[0].content[0].text, 'Hello?')

  const warm = []
  for (let i = 0; i < 20; i++) {
    const t = performance.now()
    const { json } = await call('Hello?')
    warm.push(performance.now() - t)
    assert.equal(json.success, true)
  }
  const sizes = Object.fromEntries(built.files.map((f) => [f.name, f.gzipBytes]))
  console.log(`# workerd: first answer ${ms.toFixed(0)} ms after start (cold start with one run); ` +
    `warm run median ${median(warm).toFixed(2)} ms over ${warm.length}; ` +
    `bundle ${(built.gzipBytes / 1024).toFixed(0)} KiB gzipped ${JSON.stringify(sizes)}`)
  // The ceiling of docs/performance.md ("What users download") for the package as it ships (its
  // default `wasm-release` build: 553,282 bytes on 3 December 2026, plus about 2%; 567,975 bytes
  // on 6 December 2026 once OMA's bash classifier moved into the component, plus about 1%; 617,426
  // bytes that day with OMA's trace records, materializeRun and the receipt, plus about 2%;
  // 634,450 bytes that day with the agent's own LLM adapter, plus about 2%; 550,895 bytes that
  // day with the package's own world, `portable-json`, which carries none of the typed exports'
  // glue, plus about 2%; 592,986 bytes that day with OMA's evaluation rules in the component and
  // the online evaluator, plus about 2%; 607,679 bytes that day once the component's message
  // reading without a `Value` (+7.7 KB gzipped) and the online evaluation's rules in the
  // component met on main, plus about 2%; 584,700 bytes that day once the core's sorts and JSON parsing were each
  // compiled once (issue 40), plus about 2%; 600,732 bytes on 7 December 2026 with the codec's
  // sensitive-data processing and its reading of a record in parts, plus about 0.4%). The 450 KiB goal is missed
  // by the core module alone (about 538 KB gzipped); an `OMA_PROFILE=wasm-size` build is smaller and
  // slower on long conversations, an `OMA_PROFILE=release` build larger.
  const ceiling = 603_000
  assert.ok(built.gzipBytes <= ceiling,
    `the bundle is ${built.gzipBytes} bytes gzipped, over its ceiling of ${ceiling} bytes`)
})

test('invalid input is OMA\'s InvalidMessageError and nothing is sent', async () => {
  const before = requests.length
  const { status, json } = await call([{ role: 'user', content: 'hi' }])
  assert.equal(status, 422)
  assert.deepEqual(json.error, {
    name: 'InvalidMessageError',
    code: 'INVALID_MESSAGE',
    message: 'messages[0].content must be a ContentBlock[], got string',
  })
  assert.equal(requests.length, before)
})

test('the key never reaches a result or workerd\'s output', async () => {
  const { json } = await call('Hello?')
  assert.ok(!JSON.stringify(json).includes('SECRET'))
  assert.ok(!Buffer.concat(output).toString().includes('SECRET'))
})
