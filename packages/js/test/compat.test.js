// The compatibility corpus (test-compat/): OMA-style programs type-check with `tsc --strict`
// against the package with only the import changed, and, run against a loopback provider, give
// the observations OMA gives (result keys, status, tool-call records, stream event sequences,
// cancellation within 500 ms). The observations OMA gave are recorded in
// test-compat/expected/; with OMA_DIR set (a built OMA packages/core) OMA is type-checked and run
// too, side by side. `text_delta` events and the `turns` key are the package's documented
// extensions and are left out of the comparison.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { emit, omaDir, prepare, programs, typecheck } from '../test-compat/compat.mjs'
import { startServer, anthropicMessage, anthropicToolUse } from './helpers/server.js'

const oma = omaDir()
const expectedDir = new URL('../test-compat/expected/', import.meta.url).pathname

const ERROR_400 = { status: 400, json: { type: 'error', error: { type: 'invalid_request_error', message: 'bad request' } } }

/** What the loopback provider answers for each program, in order. */
const SCENARIOS = {
  '01-single-agent': [anthropicMessage('A monad wraps values with composable context.')],
  '02-structured-input': [anthropicMessage('White.')],
  '03-custom-tool': [anthropicToolUse([['t1', 'add', { a: 2, b: 3 }]]), anthropicMessage('2 + 3 = 5.')],
  '04-registry-tools': [
    anthropicToolUse([['t1', 'lookup', { word: 'wasm' }], ['t2', 'lookup', { word: 7 }], ['t3', 'unused', {}]]),
    anthropicMessage('wasm means WebAssembly.'),
  ],
  '05-stream': [anthropicToolUse([['t1', 'clock', {}]], 'Let me check.'), anthropicMessage('It is 12:00.')],
  '06-before-run': [anthropicMessage('Hi!')],
  '07-prompt-history': [anthropicMessage('Nice to meet you, Ada.'), anthropicMessage('Your name is Ada.')],
  '08-token-budget': [
    anthropicMessage('An essay.', { usage: { input_tokens: 50, output_tokens: 60 } }),
    anthropicMessage('Again.', { usage: { input_tokens: 50, output_tokens: 60 } }),
  ],
  '09-abort': [{ hang: true }],
  '10-progress': [anthropicMessage('Hi.')],
  '11-rich-tool-result': [anthropicToolUse([['t1', 'render', { label: 'logo' }]]), anthropicMessage('A white pixel.')],
  '12-errors': [ERROR_400],
  '13-oma-surface': [anthropicMessage('Hello.'), anthropicMessage('Hi.'), ERROR_400],
}

function normalise(value) {
  if (Array.isArray(value)) {
    return value.filter((v) => v !== 'text_delta' && v !== 'turns').map(normalise)
  }
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, normalise(v)]))
  }
  return value
}

async function runProgram(file, server) {
  const child = spawn(process.execPath, [file], {
    env: {
      PATH: process.env.PATH,
      ANTHROPIC_API_KEY: 'sk-ant-compat-0123456789',
      ANTHROPIC_BASE_URL: server.url,
    },
  })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (d) => { stdout += d })
  child.stderr.on('data', (d) => { stderr += d })
  const code = await new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 30000)
    child.on('close', (c) => { clearTimeout(timer); resolve(c) })
  })
  assert.equal(code, 0, `${file} exited with ${code}: ${stderr}`)
  return JSON.parse(stdout.trim().split('\n').at(-1))
}

async function observe(outDir, name) {
  const server = await startServer()
  try {
    server.queue(...SCENARIOS[name])
    return { observed: await runProgram(join(outDir, `${name}.js`), server), requests: server.requests.length }
  } finally {
    await server.close()
  }
}

test('the corpus type-checks with tsc --strict against the package, the import changed only', () => {
  const result = typecheck(prepare('package', oma))
  assert.ok(result.ok, result.output)
  assert.equal(programs().length >= 12, true)
})

test('the corpus type-checks with tsc --strict against OMA', { skip: oma ? false : 'OMA_DIR is not set' }, () => {
  const result = typecheck(prepare('oma', oma))
  assert.ok(result.ok, result.output)
})

test('run against a loopback provider, the package observes what OMA observes', { timeout: 240000 }, async (t) => {
  const packageOut = emit(prepare('package', oma), 'package', oma)
  const omaOut = oma ? emit(prepare('oma', oma), 'oma', oma) : null
  for (const file of programs()) {
    const name = file.replace(/\.ts$/, '')
    await t.test(name, async () => {
      const expectedPath = join(expectedDir, `${name}.json`)
      const ours = await observe(packageOut, name)
      if (omaOut) {
        const theirs = await observe(omaOut, name)
        if (process.env.UPDATE_EXPECTED === '1') {
          writeFileSync(expectedPath, `${JSON.stringify(normalise(theirs.observed), null, 2)}\n`)
        }
        assert.deepEqual(normalise(ours.observed), normalise(theirs.observed), `${name}: package vs OMA`)
        assert.equal(ours.requests, theirs.requests, `${name}: provider requests`)
      }
      assert.ok(existsSync(expectedPath), `no recorded OMA observation for ${name}`)
      const expected = JSON.parse(readFileSync(expectedPath, 'utf8'))
      assert.deepEqual(normalise(ours.observed), expected, `${name}: package vs OMA's recorded observation`)
    })
  }
})
