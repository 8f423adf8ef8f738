// AgentPool and Semaphore (OMA's API): the pool-wide cap, runs on one agent serialised, the
// registry's errors, runParallel's map (failures as results), runAny's round robin, run with a
// stream callback, getStatus and shutdown; and real Agents on a pool against a loopback provider.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Agent, AgentPool, Semaphore, ToolExecutor, ToolRegistry, registerBuiltInTools } from '../src/index.js'
import { startServer, anthropicMessage } from './helpers/server.js'

const tick = (ms = 5) => new Promise((resolve) => setTimeout(resolve, ms))

/** A stand-in agent that records how many runs overlap, pool-wide and on itself. */
function fakeAgent(name, meter, { fail = false, ms = 20 } = {}) {
  let status = 'idle'
  let own = 0
  return {
    name,
    ownMax: 0,
    resets: 0,
    async run(prompt) {
      meter.now++
      own++
      meter.max = Math.max(meter.max, meter.now)
      this.ownMax = Math.max(this.ownMax, own)
      status = 'running'
      await tick(ms)
      meter.now--
      own--
      meter.order.push(`${name}:${prompt}`)
      if (fail) { status = 'error'; throw new Error(`${name} broke`) }
      status = 'completed'
      return { success: true, output: `${name} says ${prompt}`, messages: [], tokenUsage: { input_tokens: 1, output_tokens: 2 }, toolCalls: [] }
    },
    async *stream(prompt) {
      yield { type: 'text', data: `${name}:${prompt}` }
      if (fail) { yield { type: 'error', data: new Error('stream broke') }; return }
      yield { type: 'done', data: { success: true, output: prompt, messages: [], tokenUsage: { input_tokens: 0, output_tokens: 0 }, toolCalls: [] } }
    },
    getState() { return { status, messages: [], tokenUsage: { input_tokens: 0, output_tokens: 0 } } },
    reset() { status = 'idle'; this.resets++ },
  }
}

const meter = () => ({ now: 0, max: 0, order: [] })

test('Semaphore: limit, active, pending, hand-over in arrival order, RangeError below 1', async () => {
  assert.throws(() => new Semaphore(0), { name: 'RangeError', message: 'Semaphore max must be at least 1, got 0' })
  const s = new Semaphore(2)
  await s.acquire()
  await s.acquire()
  const order = []
  const third = s.acquire().then(() => order.push('third'))
  const fourth = s.acquire().then(() => order.push('fourth'))
  assert.deepEqual([s.limit, s.active, s.pending], [2, 2, 2])
  s.release()
  await third
  assert.deepEqual([s.active, s.pending], [2, 1])
  s.release()
  await fourth
  assert.deepEqual(order, ['third', 'fourth'])
  s.release()
  s.release()
  assert.equal(s.active, 0)
  assert.equal(await s.run(async () => 'value'), 'value')
  await assert.rejects(s.run(async () => { throw new Error('inner') }), /inner/)
  assert.equal(s.active, 0)
})

test('runParallel holds the cap, keys results by agent, and turns a failure into a result', async () => {
  const m = meter()
  const pool = new AgentPool(2)
  for (const name of ['a', 'b', 'c']) pool.add(fakeAgent(name, m))
  pool.add(fakeAgent('bad', m, { fail: true }))
  assert.equal(pool.runConcurrencyLimit, 2)
  assert.equal(pool.availableRunSlots, 2)
  const results = await pool.runParallel([
    { agent: 'a', prompt: '1' }, { agent: 'b', prompt: '2' }, { agent: 'c', prompt: '3' }, { agent: 'bad', prompt: '4' }, { agent: 'ghost', prompt: '5' },
  ])
  assert.equal(m.max, 2)
  assert.deepEqual([...results.keys()], ['a', 'b', 'c', 'bad', 'ghost'])
  assert.equal(results.get('c').output, 'c says 3')
  assert.deepEqual(results.get('bad'), { success: false, output: 'bad broke', messages: [], tokenUsage: { input_tokens: 0, output_tokens: 0 }, toolCalls: [] })
  assert.equal(results.get('ghost').success, false)
  assert.equal(results.get('ghost').output, "AgentPool: agent 'ghost' is not registered. Registered agents: [a, b, c, bad]")
  assert.equal(pool.availableRunSlots, 2)
})

test('runs on one agent never overlap, and a waiting run holds no pool slot', async () => {
  const m = meter()
  const pool = new AgentPool(2)
  const a = fakeAgent('a', m)
  const b = fakeAgent('b', m)
  pool.add(a)
  pool.add(b)
  const runs = [pool.run('a', '1'), pool.run('a', '2'), pool.run('a', '3')]
  await tick(1)
  // a's second and third runs wait on a's lock, so b gets the free pool slot at once.
  const bStarted = Date.now()
  await pool.run('b', 'x')
  assert.ok(Date.now() - bStarted < 40)
  await Promise.all(runs)
  assert.equal(a.ownMax, 1)
  assert.deepEqual(m.order.filter((e) => e.startsWith('a:')), ['a:1', 'a:2', 'a:3'])
})

test('the registry: add twice, remove, get, list, unknown names', async () => {
  const pool = new AgentPool()
  assert.equal(pool.runConcurrencyLimit, 5)
  const a = fakeAgent('a', meter())
  pool.add(a)
  assert.throws(() => pool.add(fakeAgent('a', meter())), { message: "AgentPool: agent 'a' is already registered. Call remove('a') before re-adding." })
  assert.equal(pool.get('a'), a)
  assert.equal(pool.get('z'), undefined)
  assert.deepEqual(pool.list(), [a])
  await assert.rejects(pool.run('z', 'p'), { message: "AgentPool: agent 'z' is not registered. Registered agents: [a]" })
  pool.remove('a')
  assert.throws(() => pool.remove('a'), { message: "AgentPool: agent 'a' is not registered." })
  await assert.rejects(pool.runAny('p'), { message: 'AgentPool: cannot call runAny on an empty pool.' })
})

test('runAny goes round robin in insertion order; getStatus counts states; shutdown resets', async () => {
  const m = meter()
  const pool = new AgentPool(3)
  const agents = ['a', 'b', 'c'].map((n) => fakeAgent(n, m))
  agents.forEach((agent) => pool.add(agent))
  pool.add(fakeAgent('bad', m, { fail: true }))
  const outputs = []
  for (let i = 0; i < 3; i++) outputs.push((await pool.runAny(String(i))).output)
  assert.deepEqual(outputs, ['a says 0', 'b says 1', 'c says 2'])
  await assert.rejects(pool.runAny('3'), /bad broke/)
  assert.deepEqual(pool.getStatus(), { total: 4, idle: 0, running: 0, completed: 3, error: 1 })
  assert.equal((await pool.runAny('4')).output, 'a says 4')
  await pool.shutdown()
  assert.deepEqual(pool.getStatus(), { total: 4, idle: 4, running: 0, completed: 0, error: 0 })
  assert.deepEqual(agents.map((a) => a.resets), [1, 1, 1])
})

test('run and runEphemeral with a stream callback: events seen, a throwing callback ignored, error events rethrown', async () => {
  const pool = new AgentPool(1)
  pool.add(fakeAgent('a', meter()))
  const seen = []
  const result = await pool.run('a', 'hi', undefined, (event) => { seen.push(event.type); throw new Error('callback') })
  assert.equal(result.output, 'hi')
  assert.deepEqual(seen, ['text', 'done'])
  await assert.rejects(pool.runEphemeral(fakeAgent('e', meter(), { fail: true }), 'x', undefined, () => {}), /stream broke/)
  const noDone = { name: 'n', async *stream() { yield { type: 'text', data: 't' } } }
  assert.deepEqual(await pool.runEphemeral(noDone, 'x', undefined, () => {}), {
    success: false, output: '', messages: [], tokenUsage: { input_tokens: 0, output_tokens: 0 }, toolCalls: [],
  })
  assert.equal(pool.availableRunSlots, 1)
})

test('real Agents on a pool against a loopback provider: fan-out answers by agent, then one more run', async () => {
  const server = await startServer()
  try {
    server.setFallback(({ body }) => anthropicMessage(`answer to ${body.system}`, { usage: { input_tokens: 10, output_tokens: 4 } }))
    const build = (name) => {
      const registry = new ToolRegistry()
      registerBuiltInTools(registry)
      return new Agent({ name, model: 'claude-test', provider: 'anthropic', baseURL: server.url, apiKey: 'sk-ant-test-0123456789', systemPrompt: `I am ${name}`, maxTurns: 1 }, registry, new ToolExecutor(registry))
    }
    const pool = new AgentPool(2)
    for (const name of ['x', 'y', 'z']) pool.add(build(name))
    const results = await pool.runParallel([{ agent: 'x', prompt: 'p' }, { agent: 'y', prompt: 'p' }, { agent: 'z', prompt: 'p' }])
    assert.deepEqual([...results].map(([name, r]) => [name, r.success, r.output, r.tokenUsage.output_tokens]), [
      ['x', true, 'answer to I am x', 4], ['y', true, 'answer to I am y', 4], ['z', true, 'answer to I am z', 4],
    ])
    // Registered built-ins are not granted without `tools`: no tool definitions are sent.
    assert.ok(server.requests.every((r) => r.body.tools === undefined))
    assert.equal((await pool.run('x', 'again')).output, 'answer to I am x')
    assert.equal(server.requests.length, 4)
    assert.deepEqual(pool.getStatus(), { total: 3, idle: 0, running: 0, completed: 3, error: 0 })
  } finally {
    await server.close()
  }
})
