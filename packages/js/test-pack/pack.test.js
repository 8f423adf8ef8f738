// The packaging test: the npm tarball installs into an empty project with no Rust on PATH (no
// cargo, rustc or rustup: PATH is filtered) and works there against a loopback provider, from
// JavaScript and from strict TypeScript. It holds only what runs: the sources, the transpiled
// portable-json world (gen/oma_portable_json.js, its core modules and their Node and browser loaders), the types and
// the README; and the same module serves Node and Workers.
//
// OMA_TARBALL names a tarball already packed (ci.sh packs once); without it the test packs one.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync, spawn } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { delimiter, dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { startServer, anthropicMessage } from '../test/helpers/server.js'

const pkg = join(dirname(fileURLToPath(import.meta.url)), '..')
const RUST = ['cargo', 'rustc', 'rustup']

/** PATH without any directory that holds a Rust tool, plus a directory with node alone. */
function pathWithoutRust(scratch) {
  const bin = join(scratch, 'bin')
  mkdirSync(bin)
  symlinkSync(process.execPath, join(bin, 'node'))
  const kept = (process.env.PATH ?? '').split(delimiter).filter((dir) => dir && !RUST.some((tool) => existsSync(join(dir, tool))))
  return [bin, ...kept].join(delimiter)
}

function run(command, args, options) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, options)
    let out = ''
    let err = ''
    child.stdout.on('data', (d) => { out += d })
    child.stderr.on('data', (d) => { err += d })
    const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error(`${command} timed out`)) }, 120000)
    child.on('close', (code) => { clearTimeout(timer); code === 0 ? resolve(out) : reject(new Error(`${command} ${args.join(' ')}: exit ${code}: ${err}${out}`)) })
  })
}

test('the tarball installs and runs with no Rust on PATH, from JavaScript and strict TypeScript', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'oma-pack-'))
  const server = await startServer()
  try {
    let tarball = process.env.OMA_TARBALL
    if (!tarball) {
      const out = execFileSync('npm', ['pack', '--json', '--pack-destination', dir], { cwd: pkg, encoding: 'utf8' })
      tarball = join(dir, JSON.parse(out)[0].filename)
    }
    const listing = execFileSync('tar', ['tzf', tarball], { encoding: 'utf8' }).trim().split('\n').map((f) => f.replace(/^package\//, ''))
    const files = listing.filter((f) => !f.endsWith('/')).sort()
    assert.deepEqual(files, [
      'README.md', 'builtin-tools.d.ts', 'classifiers.d.ts', 'eval-file.d.ts', 'eval.d.ts', 'gateway.d.ts',
      'gen/bytes/oma_portable_json.core.wasm.js', 'gen/bytes/oma_portable_json.core2.wasm.js',
      'gen/bytes/oma_portable_json.core3.wasm.js',
      'gen/interfaces/oma-agent-exchange.d.ts', 'gen/interfaces/oma-agent-json-codec.d.ts',
      'gen/interfaces/oma-agent-json-driver.d.ts', 'gen/interfaces/oma-agent-outcome.d.ts',
      'gen/interfaces/oma-agent-types.d.ts', 'gen/interfaces/oma-agent-wire.d.ts',
      'gen/node/oma_portable_json.core.wasm.js', 'gen/node/oma_portable_json.core2.wasm.js',
      'gen/node/oma_portable_json.core3.wasm.js', 'gen/oma_portable_json.core.wasm', 'gen/oma_portable_json.core2.wasm',
      'gen/oma_portable_json.core3.wasm', 'gen/oma_portable_json.d.ts', 'gen/oma_portable_json.js',
      'gen/web/oma_portable_json.core.wasm.js', 'gen/web/oma_portable_json.core2.wasm.js',
      'gen/web/oma_portable_json.core3.wasm.js',
      'index.d.ts', 'mcp.d.ts', 'observability-file.d.ts', 'observability.d.ts', 'package.json',
      'pool.d.ts', 'src/agent/agent.js', 'src/agent/config.js', 'src/agent/external-backend.js',
      'src/agent/input.js', 'src/agent/llm-adapter.js', 'src/agent/pool.js', 'src/agent/process-backend.js', 'src/agent/result.js',
      'src/agent/run-options.js', 'src/agent/runner.js', 'src/agent/stream.js', 'src/agent/structured-output.js',
      'src/agent/tool-calls.js', 'src/classifiers.js', 'src/component.js', 'src/errors.js', 'src/gateway.js',
      'src/index.js', 'src/llm/validate.js', 'src/mcp.js', 'src/memory/shared.js', 'src/memory/store.js', 'src/observability/batching.js', 'src/observability/composite.js',
      'src/observability/file.js',
      'src/observability/identity.js', 'src/observability/index.js', 'src/observability/legacy.js',
      'src/observability/materialize.js', 'src/observability/memory-store.js', 'src/observability/processors.js',
      'src/observability/run-records.js', 'src/observability/sink.js', 'src/observability/status.js', 'src/observability/store-exporter.js',
      'src/observability/store.js', 'src/observability/watermark.js',
      'src/orchestrator/orchestrator.js', 'src/platform/node.js', 'src/platform/web.js', 'src/tool/built-in/bash.js', 'src/tool/built-in/delegate.js',
      'src/eval/evalset.js', 'src/eval/file.js', 'src/eval/gate.js', 'src/eval/index.js', 'src/eval/judge.js', 'src/eval/online.js',
      'src/eval/report.js', 'src/eval/rules.js', 'src/eval/runner.js', 'src/eval/scorer.js', 'src/eval/scorers.js', 'src/eval/store.js',
      'src/eval/target.js', 'src/eval/values.js',
      'src/tool/built-in/files.js', 'src/tool/built-in/index.js', 'src/tool/built-in/path-safety.js',
      'src/tool/built-in/schema.js', 'src/tool/built-in/search.js', 'src/tool/executor.js', 'src/tool/framework.js',
      'src/tool/grants.js', 'src/tool/mcp.js', 'src/tool/shell/local.js', 'src/transport.js', 'src/utils/durable-log.js', 'src/utils/options.js',
      'src/utils/random.js', 'src/utils/redaction.js', 'src/utils/trace.js',
    ].sort())
    const size = statSync(tarball).size
    assert.ok(size < 1_500_000, `the tarball is ${size} bytes`)

    const PATH = pathWithoutRust(dir)
    const env = { PATH, HOME: process.env.HOME, npm_config_cache: process.env.npm_config_cache ?? join(process.env.HOME ?? dir, '.npm') }
    await assert.rejects(run('sh', ['-c', 'command -v cargo || command -v rustc'], { env }), 'a Rust tool is still on PATH')
    const app = join(dir, 'app')
    mkdirSync(app)
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }))
    const npmCli = join(dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'bin', 'npm-cli.js')
    const npm = existsSync(npmCli) ? [process.execPath, [npmCli]] : ['npm', []]
    await run(npm[0], [...npm[1], 'install', '--offline', '--no-audit', '--no-fund', tarball], { cwd: app, env })
    assert.deepEqual(readdirSync(join(app, 'node_modules')).filter((n) => !n.startsWith('.')), ['oma-component'])

    // Every file the package's `imports` name, under every condition (Node's, the `workerd`
    // one Workers' bundlers set and the `browser` ones), is in the installed package: the same
    // module serves them all, and each core module it imports resolves to the .wasm file on
    // Workers and to a loader elsewhere.
    const installed = join(app, 'node_modules', 'oma-component')
    const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8'))
    const gen = readFileSync(join(installed, 'gen', 'oma_portable_json.js'), 'utf8')
    const cores = [...gen.matchAll(/from\s*['"]#oma-core\/([^'"]+)['"]/g)].map((m) => m[1])
    assert.deepEqual(cores.sort(), ['oma_portable_json.core.wasm', 'oma_portable_json.core2.wasm', 'oma_portable_json.core3.wasm'])
    const targets = (value) => (typeof value === 'string' ? [value] : Object.values(value).flatMap(targets))
    const coreTargets = targets(manifest.imports['#oma-core/*'])
    assert.equal(coreTargets.length, 5)
    for (const core of cores) {
      for (const target of coreTargets.map((t) => t.replace('*', core))) {
        assert.ok(existsSync(join(installed, target)), `#oma-core/${core} -> ${target} is missing`)
      }
    }
    for (const target of targets(manifest.imports['#platform'])) assert.ok(existsSync(join(installed, target)), target)
    assert.ok(existsSync(join(installed, manifest.imports['#oma-portable-json'])))

    writeFileSync(join(app, 'main.js'), `
      import { Agent, InvalidMessageError } from 'oma-component'
      const agent = new Agent({ name: 'packed', model: 'claude-test', provider: 'anthropic', baseURL: process.env.BASE_URL, apiKey: 'sk-packed' })
      const result = await agent.run('hello from the tarball')
      let rejected = ''
      try { await agent.run([{ role: 'user', content: 'x' }]) } catch (e) { rejected = (e instanceof InvalidMessageError) + ' ' + e.message }
      console.log(JSON.stringify({ output: result.output, status: result.status, rejected }))
    `)
    server.queue(anthropicMessage('packed answer'))
    const stdout = await run(process.execPath, ['main.js'], { cwd: app, env: { ...env, BASE_URL: server.url } })
    assert.deepEqual(JSON.parse(stdout.trim().split('\n').at(-1)), {
      output: 'packed answer', status: { code: 'ok' },
      rejected: 'true messages[0].content must be a ContentBlock[], got string',
    })
    assert.equal(server.requests[0].url, '/v1/messages')

    // The installed types, from an OMA-style program with only the import changed.
    writeFileSync(join(app, 'main.ts'), `
      import { Agent, ToolRegistry, ToolExecutor, type AgentRunResult, type LLMMessage } from 'oma-component'
      const registry = new ToolRegistry()
      const agent = new Agent({ name: 'typed', model: 'claude-test' }, registry, new ToolExecutor(registry))
      const history: readonly LLMMessage[] = [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }]
      const result: AgentRunResult = await agent.run(history)
      const code: 'ok' | string | undefined = result.status?.code
      console.log(code, result.toolCalls.map((c) => c.duration))
    `)
    // AgentPool, the built-in tools and the classifiers subpath, typed from the installed package.
    writeFileSync(join(app, 'pool.ts'), `
      import { Agent, AgentPool, ToolRegistry, ToolExecutor, registerBuiltInTools, type PoolStatus } from 'oma-component'
      import { classifyBashCommand, type BashRiskAssessment } from 'oma-component/classifiers'
      const registry = new ToolRegistry()
      registerBuiltInTools(registry)
      const pool = new AgentPool(2)
      pool.add(new Agent({ name: 'a', model: 'claude-test', tools: ['bash', 'grep'] }, registry, new ToolExecutor(registry)))
      const results: Map<string, { success: boolean }> = await pool.runParallel([{ agent: 'a', prompt: 'p' }])
      const status: PoolStatus = pool.getStatus()
      const risk: BashRiskAssessment = classifyBashCommand('ls')
      console.log(results.size, status.total, risk.level)
    `)
    // The observability subpath, typed: an exporter of OMA's shape behind OMA's sinks.
    writeFileSync(join(app, 'observability.ts'), `
      import {
        BatchingTraceSink, CompositeSink, InMemoryTraceStore, SensitiveDataProcessor, TraceStoreExporter,
        type ExportResult, type FlushResult, type StoredRun, type TraceExporter, type TraceRecord,
      } from 'oma-component/observability'
      const seen: TraceRecord[] = []
      const exporter: TraceExporter = {
        async export(records: readonly TraceRecord[], signal: AbortSignal): Promise<ExportResult> {
          if (signal.aborted) return { status: 'retryable', exported: 0 }
          seen.push(...records)
          return { status: 'success', exported: records.length }
        },
      }
      const sink = new CompositeSink([new SensitiveDataProcessor(new BatchingTraceSink(exporter, { maxBatchRecords: 64 }), { capture: { prompt: 'redacted' } })])
      const flushed: FlushResult = await sink.shutdown({ timeoutMs: 1000 })
      const store = new InMemoryTraceStore()
      const stored = new BatchingTraceSink(new TraceStoreExporter(store))
      await stored.forceFlush()
      const run: StoredRun | null = await store.getRun('run-1', { includeRecords: true })
      console.log(flushed.status, seen.length, run?.spans.length, (await store.queryRuns({ limit: 10 })).items.length)
    `)
    writeFileSync(join(app, 'pool.js'), `
      import { AgentPool, registerBuiltInTools, ToolRegistry } from 'oma-component'
      import { classifyBashCommand } from 'oma-component/classifiers'
      const registry = new ToolRegistry()
      registerBuiltInTools(registry)
      console.log(JSON.stringify([new AgentPool(2).runConcurrencyLimit, registry.list().map((t) => t.name), classifyBashCommand('rm -rf /').level]))
    `)
    assert.deepEqual(JSON.parse((await run(process.execPath, ['pool.js'], { cwd: app, env })).trim()),
      [2, ['bash', 'file_read', 'file_write', 'file_edit', 'grep', 'glob'], 'high'])
    // The eval, eval/file and mcp subpaths: an evaluation kept in both stores, and connectMCPTools
    // saying what to install when the optional MCP SDK is not there (as here).
    writeFileSync(join(app, 'subpaths.js'), `
      import { defineEvalSet, defineScorer, runEvalSet, InMemoryEvalStore } from 'oma-component/eval'
      import { FileEvalStore } from 'oma-component/eval/file'
      import { connectMCPTools } from 'oma-component/mcp'
      const set = defineEvalSet({ name: 'packed', version: '1', cases: [{ id: 'a', input: 'x', expected: 'x' }] })
      const same = defineScorer({ name: 'same', version: '1', score: (c) => ({ score: c.output === c.evalCase.expected ? 1 : 0 }) })
      const memory = new InMemoryEvalStore()
      const file = await FileEvalStore.open('evals/records.ndjson')
      const one = await runEvalSet(set, async (input) => ({ output: input }), { scorers: [same], store: memory })
      await runEvalSet(set, async (input) => ({ output: input }), { scorers: [same], store: file })
      await file.close()
      const reopened = await FileEvalStore.open('evals/records.ndjson')
      let mcp = ''
      try { await connectMCPTools({ command: 'none' }) } catch (e) { mcp = e.message }
      console.log(JSON.stringify([one.aggregates[0].avg, memory.records().length, reopened.records().length, mcp]))
    `)
    assert.deepEqual(JSON.parse((await run(process.execPath, ['subpaths.js'], { cwd: app, env })).trim()),
      [1, 1, 1, 'connectMCPTools needs the MCP SDK: npm install @modelcontextprotocol/sdk'])
    writeFileSync(join(app, 'subpaths.ts'), `
      import { defineEvalSet, evaluateGate, runEvalSet, type EvalRunReport, type GateVerdict } from 'oma-component/eval'
      import { FileEvalStore } from 'oma-component/eval/file'
      import { connectMCPTools, type ConnectedMCPTools } from 'oma-component/mcp'
      export async function check(): Promise<[GateVerdict, number]> {
        const store = await FileEvalStore.open('evals.ndjson')
        const report: EvalRunReport = await runEvalSet(defineEvalSet({ name: 's', version: '1', cases: [{ id: 'a', input: 1 }] }),
          async (input) => ({ output: input }), { scorers: [], store })
        const mcp: ConnectedMCPTools = await connectMCPTools({ command: 'server', namePrefix: 'p' })
        await mcp.disconnect()
        return [evaluateGate(report, { schemaVersion: 1, thresholds: [] }), mcp.tools.length]
      }
    `)
    // A gateway host written in TypeScript, as a Worker would be: the HTTP steps of a request
    // are typed (a wrong call is an error, not an implicit any).
    const gateway = `
      import { HttpSteps, type HttpStep } from 'oma-component/gateway'
      // A gateway host performs the HTTP steps its routes component (oma_routes.wasm) hands out
      // with the package's I/O; here a list of waits stands in for them.
      export async function serve(steps: HttpStep[]): Promise<number> {
        const http = new HttpSteps()
        let answered = 0
        try {
          for (const step of steps) {
            const answer = await http.perform(step, new AbortController().signal)
            if (answer.tag === 'waited') answered += 1
          }
        } finally {
          http.close()
        }
        return answered
      }
    `
    writeFileSync(join(app, 'gateway.ts'), gateway)
    // The same program with a mistake: a status is a number, not a string.
    writeFileSync(join(app, 'gateway-wrong.ts'), gateway.replace('Promise<number>', 'Promise<string>'))
    const tsconfig = (files) => JSON.stringify({
      compilerOptions: { strict: true, noEmit: true, target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', lib: ['ES2022', 'DOM', 'ESNext.Disposable'], types: [] },
      files,
    })
    writeFileSync(join(app, 'tsconfig.json'), tsconfig(['main.ts', 'gateway.ts', 'pool.ts', 'observability.ts', 'subpaths.ts']))
    writeFileSync(join(app, 'tsconfig-wrong.json'), tsconfig(['gateway-wrong.ts']))
    await assert.rejects(
      run(process.execPath, [join(pkg, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig-wrong.json'], { cwd: app, env }),
      /TS2322/,
    )
    await run(process.execPath, [join(pkg, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'], { cwd: app, env })
  } finally {
    await server.close()
    rmSync(dir, { recursive: true, force: true })
  }
})
