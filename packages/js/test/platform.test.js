// What the package takes from its platform (src/platform/, `#platform`): run ids outside secure
// contexts, the browser module's failures, and Deno's environment read only with a permission
// already granted. The browser itself is tested in test-browser/ (a real Chromium).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Agent } from '../src/index.js'
import { uuid } from '../src/utils/random.js'
import { runIdentity } from '../src/observability/identity.js'
import * as node from '../src/platform/node.js'
import * as web from '../src/platform/web.js'
import { startServer, anthropicMessage } from './helpers/server.js'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

/** Runs `fn` with `crypto.randomUUID` missing, as on a page that is not a secure context. */
async function withoutRandomUUID(fn) {
  Object.defineProperty(globalThis.crypto, 'randomUUID', { value: undefined, configurable: true, writable: true })
  try {
    return await fn()
  } finally {
    delete globalThis.crypto.randomUUID
  }
}

test('run ids are version 4 UUIDs without crypto.randomUUID (a page that is not a secure context)', async () => {
  await withoutRandomUUID(async () => {
    assert.equal(globalThis.crypto.randomUUID, undefined)
    const ids = Array.from({ length: 200 }, () => uuid())
    for (const id of ids) assert.match(id, UUID)
    assert.equal(new Set(ids).size, ids.length)
    const server = await startServer()
    try {
      server.queue(anthropicMessage('no randomUUID'))
      const agent = new Agent({ name: 'a', model: 'claude-test', provider: 'anthropic', baseURL: server.url, apiKey: 'sk-x' })
      // A run makes its identity with no randomUUID (it failed with a TypeError before).
      const result = await agent.run('hello')
      assert.equal(result.output, 'no randomUUID')
      assert.equal(server.requests.length, 1)
      assert.match(runIdentity().runId, UUID)
    } finally {
      await server.close()
    }
  })
  assert.equal(typeof globalThis.crypto.randomUUID, 'function')
  assert.match(uuid(), UUID)
})

test('the browser platform has the names of the Node one, and each fails saying what it needs', async () => {
  assert.deepEqual(Object.keys(web).sort(), Object.keys(node).sort())
  const needs = /is not available in this runtime: the built-in file and shell tools and process backends need Node, Deno or Bun$/
  await assert.rejects(web.readFile('x'), needs)
  await assert.rejects(web.mkdir('x'), needs)
  assert.throws(() => web.join('a', 'b'), needs)
  assert.throws(() => web.spawn('bash'), needs)
  assert.throws(() => web.process.env, needs)
  assert.throws(() => web.Buffer.concat([]), needs)
  assert.equal(web.environmentVariable('PATH'), undefined)
  assert.equal(await web.httpModules(), null)
})

test("on Deno an environment variable is read only when the program may read it already (no prompt)", () => {
  const read = []
  const fakeDeno = (state) => ({
    permissions: { querySync: ({ name, variable }) => (name === 'env' && variable === 'OMA_X' ? { state } : { state: 'denied' }) },
    env: { get: (name) => { read.push(name); return 'value' } },
  })
  const saved = Object.getOwnPropertyDescriptor(globalThis, 'Deno')
  try {
    globalThis.Deno = fakeDeno('prompt')
    assert.equal(node.environmentVariable('OMA_X'), undefined)
    globalThis.Deno = fakeDeno('denied')
    assert.equal(node.environmentVariable('OMA_X'), undefined)
    assert.deepEqual(read, [])
    globalThis.Deno = fakeDeno('granted')
    assert.equal(node.environmentVariable('OMA_X'), 'value')
    assert.deepEqual(read, ['OMA_X'])
  } finally {
    if (saved) Object.defineProperty(globalThis, 'Deno', saved)
    else delete globalThis.Deno
  }
  process.env.OMA_PLATFORM_TEST = 'node value'
  try {
    assert.equal(node.environmentVariable('OMA_PLATFORM_TEST'), 'node value')
  } finally {
    delete process.env.OMA_PLATFORM_TEST
  }
})
