// OMA's built-in tools on Node (bash, file_read, file_write, file_edit, grep, glob,
// delegate_to_agent) and registerBuiltInTools: their schemas validate as zod validates OMA's (and
// as the shared table of input checks says, fixtures/builtin-tools/inputs.json),
// their JSON Schemas are what OMA sends, and each tool's output, limits, errors and sandbox
// follow OMA's rules. Run directly, through a ToolExecutor (as an agent runs them).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { fileURLToPath } from 'node:url'
import { join } from 'node:path'
import { z } from 'zod'
import {
  ALL_BUILT_IN_TOOLS_WITH_DELEGATE, BUILT_IN_TOOLS, LocalShellExecutor, bashTool, delegateToAgentTool,
  fileEditTool, fileReadTool, fileWriteTool, globTool, grepTool, registerBuiltInTools,
} from '../src/tool/built-in/index.js'
import { ToolExecutor } from '../src/tool/executor.js'
import { ToolRegistry, zodToJsonSchema } from '../src/tool/framework.js'
import { safeShellEnv } from '../src/tool/shell/local.js'

/** A fresh sandbox root (real path) and a context whose cwd is it. */
function sandbox() {
  const root = realpathSync(mkdtempSync(join(tmpdir(), 'oma-builtin-')))
  return { root, context: { agent: { name: 'a', role: 'r', model: 'm' }, cwd: root }, done: () => rmSync(root, { recursive: true, force: true }) }
}

/** zod twins of the built-ins' input schemas (types and checks only): the reference. */
const ZOD = {
  bash: z.object({ command: z.string(), timeout: z.number().optional(), cwd: z.string().optional() }),
  file_read: z.object({ path: z.string(), offset: z.number().int().nonnegative().optional(), limit: z.number().int().positive().optional() }),
  file_write: z.object({ path: z.string(), content: z.string() }),
  file_edit: z.object({ path: z.string(), old_string: z.string(), new_string: z.string(), replace_all: z.boolean().optional() }),
  grep: z.object({ pattern: z.string(), path: z.string().optional(), glob: z.string().optional(), maxResults: z.number().int().positive().optional() }),
  glob: z.object({ path: z.string().optional(), pattern: z.string().optional(), maxFiles: z.number().int().positive().optional() }),
  delegate_to_agent: z.object({ target_agent: z.string().min(1), prompt: z.string().min(1) }),
}

const INPUTS = [
  undefined, null, 'text', 7, [], {},
  { command: 'ls' }, { command: 'ls', timeout: 'soon', extra: 1 }, { command: 3, cwd: 4 }, { command: 'x', timeout: NaN },
  { path: '/a' }, { path: '/a', offset: -1, limit: 0 }, { path: '/a', offset: 1.5, limit: 2.5 }, { path: '/a', offset: -1.5 },
  { path: '/a', content: 'c' }, { path: '/a', content: null }, { path: '/a', old_string: 'x', new_string: 'y', replace_all: 'yes' },
  { path: '/a', old_string: 'x', new_string: 'y', replace_all: true, more: [1] },
  { pattern: '.*', maxResults: 0 }, { pattern: '.*', maxResults: 3, glob: '*.ts' }, { pattern: 1, path: true },
  { maxFiles: 2 }, { maxFiles: -3, pattern: null }, { target_agent: '', prompt: '' }, { target_agent: 'b', prompt: 'p' },
  { path: undefined, offset: undefined },
]

function shape(parsed) {
  if (parsed.success) return { success: true, data: parsed.data }
  return { success: false, issues: parsed.error.issues.map((i) => ({ path: i.path, message: i.message })) }
}

test('the built-ins validate every input as the zod schemas of OMA do (same data, same issues)', () => {
  for (const tool of ALL_BUILT_IN_TOOLS_WITH_DELEGATE) {
    for (const input of INPUTS) {
      assert.deepEqual(shape(tool.inputSchema.safeParse(input)), shape(ZOD[tool.name].safeParse(input)), `${tool.name} ${JSON.stringify(input)}`)
    }
  }
})

test('the shared table of input checks (fixtures/builtin-tools/inputs.json, run by the Python package too) is zod\'s verdict, and the built-ins give it', async () => {
  const { cases } = JSON.parse(readFileSync(fileURLToPath(new URL('../../../fixtures/builtin-tools/inputs.json', import.meta.url)), 'utf8'))
  assert.ok(cases.length > 30)
  const registry = new ToolRegistry()
  registerBuiltInTools(registry)
  const executor = new ToolExecutor(registry)
  const byName = Object.fromEntries(BUILT_IN_TOOLS.map((t) => [t.name, t]))
  const text = (parsed, name) => `Invalid input for tool "${name}":\n` + parsed.error.issues.map((i) => `  • ${i.path.join('.')}: ${i.message}`).join('\n')
  for (const { tool, input, data, error } of cases) {
    const label = `${tool} ${JSON.stringify(input)}`
    for (const parsed of [ZOD[tool].safeParse(input), byName[tool].inputSchema.safeParse(input)]) {
      if (error === undefined) assert.deepEqual(parsed, { success: true, data }, label)
      else assert.equal(text(parsed, tool), error, label)
    }
    // An input the check refuses fails before the tool runs, with the table's text.
    if (error !== undefined) assert.deepEqual(await executor.execute(tool, input, {}), { data: error, isError: true }, label)
  }
})

test('the shared table of answers (fixtures/builtin-tools/texts.json, run by the Python package too): texts, slices, counts, sorting and caps', async () => {
  const table = JSON.parse(readFileSync(fileURLToPath(new URL('../../../fixtures/builtin-tools/texts.json', import.meta.url)), 'utf8'))
  const { root, context, done } = sandbox()
  try {
    for (const [name, content] of Object.entries(table.files)) {
      mkdirSync(join(root, name, '..'), { recursive: true })
      writeFileSync(join(root, name), content)
    }
    const tools = Object.fromEntries(BUILT_IN_TOOLS.map((t) => [t.name, t]))
    for (const { tool, input, expect } of table.cases) {
      const r = await tools[tool].execute(JSON.parse(JSON.stringify(input).replaceAll('{root}', root)), context)
      assert.deepEqual({ data: r.data.replaceAll(root, '{root}'), isError: r.isError }, expect, `${tool} ${JSON.stringify(input)}`)
    }
  } finally {
    done()
  }
})

test('the built-ins are OMA\'s six in OMA\'s order, and send the JSON Schema their zod twins send', () => {
  assert.deepEqual(BUILT_IN_TOOLS.map((t) => t.name), ['bash', 'file_read', 'file_write', 'file_edit', 'grep', 'glob'])
  assert.deepEqual(ALL_BUILT_IN_TOOLS_WITH_DELEGATE.map((t) => t.name).at(-1), 'delegate_to_agent')
  assert.deepEqual(BUILT_IN_TOOLS.filter((t) => t.consequential).map((t) => t.name), ['bash', 'file_write', 'file_edit'])
  for (const tool of ALL_BUILT_IN_TOOLS_WITH_DELEGATE) {
    const ours = zodToJsonSchema(tool.inputSchema)
    // The twin with the built-in's descriptions copied on: only the structure is compared.
    const strip = (schema) => JSON.parse(JSON.stringify(schema, (k, v) => (k === 'description' ? undefined : v)))
    assert.deepEqual(strip(ours), strip(zodToJsonSchema(ZOD[tool.name])), tool.name)
    for (const property of Object.values(ours.properties)) assert.equal(typeof property.description, 'string')
  }
  assert.deepEqual(zodToJsonSchema(bashTool.inputSchema).required, ['command'])
  assert.match(zodToJsonSchema(bashTool.inputSchema).properties.timeout.description, /Defaults to 30000 ms\.$/)
})

test('the definitions are the shared fixture the Python package is checked against too', () => {
  const shared = JSON.parse(readFileSync(fileURLToPath(new URL('../../../fixtures/builtin-tools/definitions.json', import.meta.url)), 'utf8'))
  assert.deepEqual(
    ALL_BUILT_IN_TOOLS_WITH_DELEGATE.map((t) => ({ name: t.name, description: t.description, consequential: t.consequential === true, inputSchema: zodToJsonSchema(t.inputSchema) })),
    shared,
  )
})

test('registerBuiltInTools registers the six (and delegate_to_agent on request); twice throws', () => {
  const registry = new ToolRegistry()
  registerBuiltInTools(registry)
  assert.deepEqual(registry.list().map((t) => t.name), ['bash', 'file_read', 'file_write', 'file_edit', 'grep', 'glob'])
  assert.throws(() => registerBuiltInTools(registry), /a tool named "bash" is already registered/)
  const withDelegate = new ToolRegistry()
  registerBuiltInTools(withDelegate, { includeDelegateTool: true })
  assert.equal(withDelegate.has('delegate_to_agent'), true)
})

test('file_write, file_read and file_edit: OMA\'s texts, line numbering, slices and replacement rules', async () => {
  const { root, context, done } = sandbox()
  try {
    const path = join(root, 'sub', 'dir', 'a.txt')
    let r = await fileWriteTool.execute({ path, content: 'one\ntwo\nthree\n' }, context)
    assert.deepEqual(r, { data: `Created "${path}" (4 lines, 14 bytes).`, isError: false })
    r = await fileWriteTool.execute({ path, content: 'alpha\nbeta\ngamma\nbeta' }, context)
    assert.deepEqual(r, { data: `Updated "${path}" (4 lines, 21 bytes).`, isError: false })
    r = await fileReadTool.execute({ path }, context)
    assert.deepEqual(r, { data: '1\talpha\n2\tbeta\n3\tgamma\n4\tbeta', isError: false })
    r = await fileReadTool.execute({ path, offset: 2, limit: 2 }, context)
    assert.deepEqual(r, { data: '2\tbeta\n3\tgamma\n\n(showing lines 2–3 of 4)', isError: false })
    r = await fileReadTool.execute({ path, offset: 9 }, context)
    assert.deepEqual(r, { data: `File "${path}" has 4 lines but offset 9 is beyond the end.`, isError: true })
    r = await fileEditTool.execute({ path, old_string: 'beta', new_string: 'B' }, context)
    assert.equal(r.isError, true)
    assert.match(r.data, /^`old_string` appears 2 times in /)
    r = await fileEditTool.execute({ path, old_string: 'missing', new_string: 'B' }, context)
    assert.match(r.data, /^The string to replace was not found in/)
    r = await fileEditTool.execute({ path, old_string: 'beta', new_string: 'B', replace_all: true }, context)
    assert.deepEqual(r, { data: `Replaced 2 occurrences in "${path}".`, isError: false })
    r = await fileEditTool.execute({ path, old_string: 'gamma', new_string: '<$&>' }, context)
    assert.deepEqual(r, { data: `Replaced 1 occurrence in "${path}".`, isError: false })
    // One replacement treats `$&` as String.prototype.replace does (OMA's behaviour).
    assert.equal(readFileSync(path, 'utf8'), 'alpha\nB\n<gamma>\nB')
    r = await fileReadTool.execute({ path: join(root, 'nope.txt') }, context)
    assert.equal(r.isError, true)
    assert.match(r.data, /^Could not read file ".*nope\.txt": ENOENT/)
  } finally {
    done()
  }
})

test('the sandbox: relative paths, paths outside, symlinks out, a missing root, cwd null', async () => {
  const { root, context, done } = sandbox()
  const outside = realpathSync(mkdtempSync(join(tmpdir(), 'oma-outside-')))
  try {
    writeFileSync(join(outside, 'secret.txt'), 'secret')
    let r = await fileReadTool.execute({ path: 'rel.txt' }, context)
    assert.deepEqual(r, { data: 'Path "rel.txt" must be absolute. Built-in filesystem tools require absolute paths.', isError: true })
    r = await fileReadTool.execute({ path: join(root, '..', 'x') }, context)
    assert.match(r.data, /is outside the agent's working directory/)
    symlinkSync(outside, join(root, 'link'))
    r = await fileReadTool.execute({ path: join(root, 'link', 'secret.txt') }, context)
    assert.equal(r.isError, true)
    assert.match(r.data, /is outside the agent's working directory/)
    r = await fileWriteTool.execute({ path: join(root, 'link', 'new.txt'), content: 'x' }, context)
    assert.match(r.data, /is outside the agent's working directory/)
    r = await grepTool.execute({ pattern: 'secret', path: join(root, 'link') }, context)
    assert.match(r.data, /is outside/)
    const missing = { ...context, cwd: join(root, 'fresh') }
    r = await fileReadTool.execute({ path: join(root, 'fresh', 'a') }, missing)
    assert.match(r.data, /^Could not resolve working directory/)
    r = await fileWriteTool.execute({ path: join(root, 'fresh', 'a'), content: 'x' }, missing)
    assert.equal(r.isError, false)
    r = await fileReadTool.execute({ path: join(outside, 'secret.txt') }, { ...context, cwd: null })
    assert.deepEqual(r, { data: '1\tsecret', isError: false })
  } finally {
    done()
    rmSync(outside, { recursive: true, force: true })
  }
})

test('glob and grep: sorted relative paths, skipped directories, caps and their notes', async () => {
  const { root, context, done } = sandbox()
  try {
    for (const file of ['b.ts', 'a.ts', 'c.md', 'src/d.ts', 'node_modules/x.ts', '.git/y.ts']) {
      mkdirSync(join(root, file, '..'), { recursive: true })
      writeFileSync(join(root, file), `hello ${file}\nbye\n`)
    }
    let r = await globTool.execute({ pattern: '**/*.ts' }, context)
    assert.deepEqual(r, { data: 'a.ts\nb.ts\nsrc/d.ts', isError: false })
    r = await globTool.execute({ maxFiles: 2 }, context)
    assert.equal(r.data.split('\n\n')[1], '(listing capped at 2 paths; raise maxFiles for more)')
    r = await globTool.execute({ pattern: '*.none' }, context)
    assert.deepEqual(r, { data: 'No files matched.', isError: false })
    r = await grepTool.execute({ pattern: 'hello .*\\.md' }, context)
    assert.deepEqual(r, { data: 'c.md:1:hello c.md', isError: false })
    r = await grepTool.execute({ pattern: '(' }, context)
    assert.deepEqual(r, { data: 'Invalid regular expression: "("', isError: true })
    r = await grepTool.execute({ pattern: 'nothing-here' }, context)
    assert.deepEqual(r, { data: 'No matches found.', isError: false })
    r = await grepTool.execute({ pattern: 'hello', glob: '*.ts', path: join(root, 'src') }, context)
    assert.deepEqual(r, { data: 'src/d.ts:1:hello src/d.ts', isError: false })
  } finally {
    done()
  }
})

test('bash: output layout, exit codes as errors, redaction, timeout (124), abort (130), a safe environment', async () => {
  const { root, context, done } = sandbox()
  try {
    let r = await bashTool.execute({ command: 'echo out; echo err >&2' }, context)
    assert.deepEqual(r, { data: 'out\n\n--- stderr ---\nerr\n', isError: false })
    r = await bashTool.execute({ command: 'exit 3' }, context)
    assert.deepEqual(r, { data: '(command exited with code 3, no output)', isError: true })
    r = await bashTool.execute({ command: 'true' }, context)
    assert.deepEqual(r, { data: '(command completed with no output)', isError: false })
    r = await bashTool.execute({ command: 'echo nope; exit 2' }, context)
    assert.deepEqual(r, { data: 'nope\n\n\n(exit code: 2)', isError: true })
    r = await bashTool.execute({ command: 'echo api_key=abc123 sk-abcdefghijklmnop1234', cwd: root }, context)
    assert.equal(r.data, 'api_key=[redacted]\n')
    const started = Date.now()
    r = await bashTool.execute({ command: 'sleep 5', timeout: 150 }, context)
    assert.deepEqual(r, { data: '(command exited with code 124, no output)', isError: true })
    assert.ok(Date.now() - started < 3000)
    const controller = new AbortController()
    setTimeout(() => controller.abort(), 100)
    r = await bashTool.execute({ command: 'sleep 5' }, { ...context, abortSignal: controller.signal })
    assert.deepEqual(r, { data: '(command exited with code 130, no output)', isError: true })
    r = await bashTool.execute({ command: 'pwd', cwd: root }, context)
    assert.equal(r.data, `${root}\n`)
    assert.deepEqual(safeShellEnv({ PATH: '/bin', HOME: '/h', OPENAI_API_KEY: 'k', FOO: 'x' }), { PATH: '/bin', HOME: '/h' })
  } finally {
    done()
  }
})

test('bash with a custom executor: its result, its rejection, and a non-cooperating one bounded', async () => {
  const calls = []
  const exec = { async exec(command, options) { calls.push([command, options.timeoutMs, options.cwd]); return { stdout: 'hi', stderr: '', exitCode: 0 } } }
  let r = await bashTool.execute({ command: 'anything', cwd: '/w' }, { shellExecutor: exec })
  assert.deepEqual(r, { data: 'hi', isError: false })
  assert.deepEqual(calls, [['anything', 30000, '/w']])
  r = await bashTool.execute({ command: 'x' }, { shellExecutor: { exec: async () => { throw new Error('no shell') } } })
  assert.deepEqual(r, { data: 'no shell\n\n(exit code: 127)', isError: true })
  const stubborn = { exec: () => new Promise(() => {}) }
  const started = Date.now()
  r = await bashTool.execute({ command: 'x', timeout: 50 }, { shellExecutor: stubborn })
  assert.deepEqual(r, { data: '(command exited with code 124, no output)', isError: true })
  assert.ok(Date.now() - started < 1000)
  assert.ok(new LocalShellExecutor() instanceof LocalShellExecutor)
})

test('through a ToolExecutor: invalid input gets OMA\'s message, the gate sees bash as consequential', async () => {
  const { context, done } = sandbox()
  try {
    const registry = new ToolRegistry()
    registerBuiltInTools(registry)
    const seen = []
    const executor = new ToolExecutor(registry, { onToolCall: (ctx) => { seen.push([ctx.toolName, ctx.consequential]); return { action: 'deny', reason: 'no' } } })
    let r = await executor.execute('file_read', { path: '/x', offset: -1 }, context)
    assert.deepEqual(r, { data: 'Invalid input for tool "file_read":\n  • offset: Number must be greater than or equal to 0', isError: true })
    r = await executor.execute('bash', { command: 'rm -rf /' }, context)
    assert.equal(r.data, 'Tool "bash" denied by onToolCall: no')
    assert.deepEqual(seen, [['bash', true]])
    r = await delegateToAgentTool.execute({ target_agent: 'b', prompt: 'p' }, context)
    assert.equal(r.isError, true)
    assert.match(r.data, /^delegate_to_agent is only available during orchestrated team runs/)
  } finally {
    done()
  }
})
