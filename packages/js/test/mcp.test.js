// MCP tools (`oma-component/mcp`): the shared table fixtures/mcp/results.json (how a result
// reaches the model, how tools are named; the Python package runs the same table), then a local
// MCP server built with the official SDK (test/helpers/mcp-server.mjs, over stdio) connected
// through the subpath as users import it and used by agents against the loopback provider.
import { test, before, after, beforeEach } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { connectMCPTools } from 'oma-component/mcp'
import { Agent, ToolExecutor, ToolRegistry } from 'oma-component'
import { assertUniqueToolNames, normalizeToolName, toolResult } from '../src/tool/mcp.js'
import { startServer, anthropicMessage, anthropicToolUse } from './helpers/server.js'

const TABLE = JSON.parse(readFileSync(new URL('../../../fixtures/mcp/results.json', import.meta.url), 'utf8'))
const SERVER = fileURLToPath(new URL('./helpers/mcp-server.mjs', import.meta.url))
const KEY = 'sk-ant-test-SECRETKEY0123456789'

let provider
before(async () => { provider = await startServer() })
after(async () => { await provider.close() })
beforeEach(() => provider.reset())

const byName = (connected) => Object.fromEntries(connected.tools.map((t) => [t.name, t]))
const agent = (tools) => new Agent({
  name: 'mcp', model: 'claude-test', provider: 'anthropic', baseURL: provider.url, apiKey: KEY, customTools: tools,
})

for (const entry of TABLE.results) {
  test(`results table: ${entry.name}`, () => {
    assert.deepEqual(toolResult(entry.result), entry.expect)
  })
}

for (const entry of TABLE.names) {
  test(`names table: ${JSON.stringify(entry.prefix)} ${JSON.stringify(entry.names)}`, () => {
    if (entry.error !== undefined) {
      assert.throws(() => assertUniqueToolNames(entry.names, entry.prefix ?? undefined), { message: entry.error })
    } else {
      assertUniqueToolNames(entry.names, entry.prefix ?? undefined)
      assert.deepEqual(entry.names.map((n) => normalizeToolName(n, entry.prefix ?? undefined)), entry.expect)
    }
  })
}

test('tools are listed across pages with OMA\'s names, descriptions and schemas; calls reach the server', async () => {
  const connected = await connectMCPTools({
    command: process.execPath, args: [SERVER], namePrefix: 'local', env: { MCP_TEST_VALUE: 'from-env' },
  })
  try {
    const tools = byName(connected)
    assert.deepEqual(Object.keys(tools), ['local_echo', 'local_files_read', 'local_picture', 'local_fail', 'local_slow',
      'local_mixed', 'local_structured', 'local_env'])
    assert.equal(tools.local_echo.description, 'Echoes its text')
    assert.equal(tools.local_files_read.description, 'MCP tool: files/read')
    assert.deepEqual(tools.local_echo.llmInputSchema, { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] })
    const context = { agent: { name: 't', role: 't', model: 'm' } }
    assert.deepEqual(await tools.local_echo.execute({ text: 'hi' }, context), { data: 'echo: hi (from open-multi-agent/0.0.0)', isError: false })
    assert.equal((await tools.local_env.execute({}, context)).data, 'from-env')
    assert.deepEqual(await tools.local_fail.execute({}, context), { data: 'it broke', isError: true })
    assert.deepEqual(await tools.local_structured.execute({}, context), { data: '{\n  "temperature": 18,\n  "unit": "C"\n}', isError: false })
    // Registered the way OMA's examples do: the registry and executor run them like any tool.
    const registry = new ToolRegistry()
    for (const tool of connected.tools) registry.register(tool)
    const ran = await new ToolExecutor(registry).execute('local_files_read', { anything: [1, 2] }, context)
    assert.deepEqual(ran, { data: 'file contents', isError: false })
  } finally {
    await connected.disconnect()
  }
})

test('an agent sends the server\'s schemas and gets the results, media as parts', async () => {
  const connected = await connectMCPTools({ command: process.execPath, args: [SERVER], namePrefix: 'local' })
  try {
    provider.queue(
      anthropicToolUse([['tu_1', 'local_picture', {}], ['tu_2', 'local_mixed', {}], ['tu_3', 'local_fail', {}]]),
      anthropicMessage('A red pixel and some files.'),
    )
    const result = await agent(connected.tools).run('show me')
    assert.equal(result.success, true)
    assert.equal(result.output, 'A red pixel and some files.')
    const sent = Object.fromEntries(provider.requests[0].body.tools.map((t) => [t.name, t]))
    assert.deepEqual(sent.local_echo.input_schema.required, ['text'])
    assert.equal(sent.local_files_read.description, 'MCP tool: files/read')
    const answers = provider.requests[1].body.messages.at(-1).content
    const [picture, mixed, failed] = answers.filter((b) => b.type === 'tool_result')
    assert.deepEqual([picture.tool_use_id, mixed.tool_use_id, failed.tool_use_id], ['tu_1', 'tu_2', 'tu_3'])
    assert.deepEqual(picture.content[0], { type: 'text', text: 'a red pixel' })
    assert.equal(picture.content[1].type, 'image')
    assert.equal(picture.content[1].source.media_type, 'image/png')
    assert.deepEqual(mixed.content.slice(0, 3).map((p) => p.text), [
      '[audio audio/wav; base64 length=8]', '[resource memo://notes/today.md]\nbuy milk', '[resource file:///reports/q1%20summary.pdf]'])
    assert.equal(failed.is_error, true)
    assert.equal(failed.content, 'it broke')
    const documents = answers.filter((b) => b.type === 'document').map((b) => [b.title, b.source])
    assert.deepEqual(documents, [
      ['q1 summary.pdf', { type: 'base64', media_type: 'application/pdf', data: 'JVBERi0=' }],
      ['spec', { type: 'url', url: 'https://example.com/docs/spec.pdf' }],
    ])
  } finally {
    await connected.disconnect()
  }
})

test('a call past requestTimeoutMs, an aborted call and a call after disconnect are failed tool results', async () => {
  const connected = await connectMCPTools({
    command: process.execPath, args: [SERVER], requestTimeoutMs: 3000, clientName: 'my-app', clientVersion: '2.1.0',
  })
  const tools = byName(connected)
  const context = { agent: { name: 't', role: 't', model: 'm' } }
  assert.equal((await tools.echo.execute({ text: 'x' }, context)).data, 'echo: x (from my-app/2.1.0)')
  const started = Date.now()
  const late = await tools.slow.execute({ ms: 60000 }, context)
  assert.ok(Date.now() - started >= 2900 && Date.now() - started < 15000)
  assert.equal(late.isError, true)
  assert.match(late.data, /^MCP tool "slow" failed: .*timed out/i)
  const abort = new AbortController()
  const call = tools.slow.execute({ ms: 60000 }, { ...context, abortSignal: abort.signal })
  setTimeout(() => abort.abort(new Error('stop now')), 50)
  const aborted = await call
  assert.equal(aborted.isError, true)
  assert.match(aborted.data, /^MCP tool "slow" failed: /)
  assert.deepEqual(await tools.slow.execute({ ms: 0 }, context), { data: 'done', isError: false })
  await connected.disconnect()
  const closed = await tools.echo.execute({ text: 'late' }, context)
  assert.equal(closed.isError, true)
  assert.match(closed.data, /^MCP tool "echo" failed: /)
})

test('names that collide, a server that exits and a missing command reject the connection', async () => {
  await assert.rejects(connectMCPTools({ command: process.execPath, args: [SERVER, 'duplicate'] }),
    { message: 'Duplicate MCP tool name after normalization: "a_b" from "a/b" and "a_b".' })
  await assert.rejects(connectMCPTools({ command: process.execPath, args: [SERVER, 'crash'], requestTimeoutMs: 5000 }))
  await assert.rejects(connectMCPTools({ command: fileURLToPath(new URL('./no-such-command', import.meta.url)), requestTimeoutMs: 5000 }))
})

test('bad options are refused by name before anything starts', async () => {
  for (const [config, name] of [
    [{ command: '' }, 'command'],
    [{ command: 'x', args: 'a b' }, 'args'],
    [{ command: 'x', env: { A: 1 } }, 'env'],
    [{ command: 'x', requestTimeoutMs: 0 }, 'requestTimeoutMs'],
    [{ command: 'x', namePrefix: 3 }, 'namePrefix'],
    [{ command: 'x', transport: 'http' }, 'transport'],
  ]) {
    await assert.rejects(connectMCPTools(config), (error) => error instanceof TypeError && error.message.includes(name))
  }
})
