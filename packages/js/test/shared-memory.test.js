// OMA's SharedMemory and InMemoryStore, imported as OMA's programs import them (the interview
// cookbook seeds one by hand and puts its summary into prompts): namespaced writes, JSON values,
// the Markdown summary, turn expiry, snapshots, and what is refused with OMA's messages.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { z } from 'zod'
import { InMemoryStore, SharedMemory } from 'oma-component'

test('writes are namespaced by agent; strings stay text, other values are kept as JSON', async () => {
  const memory = new SharedMemory()
  await memory.write('candidate', 'resume', 'Ten years of Rust.')
  await memory.write('role', 'spec', { level: 'senior', skills: ['wasm', 'rust'] }, { source: 'hr' })
  const spec = await memory.read('role/spec')
  assert.deepEqual(spec.value, { level: 'senior', skills: ['wasm', 'rust'] })
  assert.deepEqual(spec.metadata, { source: 'hr', sharedMemoryValueEncoding: 'json', agent: 'role' })
  assert.ok(spec.createdAt instanceof Date)
  assert.equal((await memory.read('candidate/resume')).value, 'Ten years of Rust.')
  assert.equal(await memory.read('resume'), null)
  assert.deepEqual((await memory.listByAgent('candidate')).map((e) => e.key), ['candidate/resume'])
  assert.equal((await memory.getStore().get('role/spec')).value, '{"level":"senior","skills":["wasm","rust"]}')
  assert.equal(await memory.getSummary(), [
    '## Shared Team Memory', '', '### candidate', '- resume: Ten years of Rust.', '',
    '### role', '- spec: {"level":"senior","skills":["wasm","rust"]}',
  ].join('\n'))
  assert.equal(await new SharedMemory().getSummary(), '')
})

test('a long value is cut to 200 characters in the summary; taskIds keeps task results only', async () => {
  const memory = new SharedMemory()
  await memory.write('writer', 'task:t1:result', 'x'.repeat(250))
  await memory.write('writer', 'task:t2:result', 'second')
  await memory.write('writer', 'notes', 'kept out by the filter')
  const summary = await memory.getSummary({ taskIds: ['t1'] })
  assert.equal(summary, `## Shared Team Memory\n\n### writer\n- task:t1:result: ${'x'.repeat(197)}…`)
})

test('entries written to expire stop being read at their turn, and stay in the store', async () => {
  const memory = new SharedMemory()
  await memory.writeExpiring('a', 'soon', 'brief', 2)
  memory.advanceTurn()
  assert.equal((await memory.read('a/soon')).value, 'brief')
  memory.advanceTurn()
  assert.equal(await memory.read('a/soon'), null)
  assert.deepEqual(await memory.listAll(), [])
  assert.equal(memory.getStore().size, 1)
  await assert.rejects(memory.writeExpiring('a', 'k', 'v', 0), { name: 'RangeError', message: /ttlTurns must be an integer ≥ 1 \(got 0\)/ })
})

test('snapshots restore entries and the turn counter; reserved keys are neither shown nor restored', async () => {
  const store = new InMemoryStore()
  await store.set('__oma_approval__/r1', 'pending')
  const memory = new SharedMemory(store)
  await memory.write('a', 'k', [1, 2])
  memory.setTurnCount(3)
  const snapshot = await memory.snapshot()
  assert.equal(snapshot.version, 1)
  assert.equal(snapshot.turnCount, 3)
  assert.deepEqual(snapshot.entries.map((e) => e.key), ['a/k'])
  assert.equal(typeof snapshot.entries[0].createdAt, 'string')
  assert.equal(await memory.read('__oma_approval__/r1'), null)
  const restored = await SharedMemory.fromSnapshot(snapshot)
  assert.equal(restored.getTurnCount(), 3)
  assert.deepEqual((await restored.read('a/k')).value, [1, 2])
  await assert.rejects(restored.restore({ version: 2, turnCount: 0, entries: [] }), /unsupported snapshot version 2/)
})

test('values JSON cannot carry, values a schema refuses and stores without the interface are refused', async () => {
  const memory = new SharedMemory()
  await assert.rejects(memory.write('a', 'k', { n: Number.NaN }), { name: 'TypeError', message: 'SharedMemory.write: value at <root>.n must be a finite number.' })
  const loop = { }
  loop.self = loop
  await assert.rejects(memory.write('a', 'k', loop), /value at <root>.self contains a circular reference/)
  await assert.rejects(memory.write('a', 'k', 'text', undefined, { schema: z.number() }), /SharedMemory.write: value failed schema validation:\n {2}• <root>: Expected number, received string/)
  await memory.write('a', 'n', '7', undefined, { schema: z.coerce.number() })
  assert.equal((await memory.read('a/n')).value, 7)
  assert.throws(() => new SharedMemory({ get() {} }), /`store` must implement the MemoryStore interface \(methods: get, set, list, delete, clear\)/)
})

test('InMemoryStore: compare-and-set, search, size', async () => {
  const store = new InMemoryStore()
  assert.equal(await store.compareAndSet('k', null, 'one'), true)
  assert.equal(await store.compareAndSet('k', 'two', 'three'), false)
  assert.equal(await store.compareAndSet('k', 'one', 'Two'), true)
  assert.deepEqual((await store.search('two')).map((e) => e.key), ['k'])
  assert.equal(store.size, 1)
  assert.equal(store.has('k'), true)
  await store.clear()
  assert.equal(store.size, 0)
})
