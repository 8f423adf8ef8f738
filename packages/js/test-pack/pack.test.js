// The packaging test: `npm pack` gives a tarball that installs into an empty directory (offline:
// the package has no dependencies) and works there against a loopback provider.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync, spawn } from 'node:child_process'
import { mkdtempSync, writeFileSync, rmSync, readdirSync, existsSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { startServer, anthropicMessage } from '../test/helpers/server.js'

const pkg = join(dirname(fileURLToPath(import.meta.url)), '..')
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'

test('npm pack -> npm install <tarball> in an empty directory -> a run works', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'oma-pack-'))
  const server = await startServer()
  try {
    const out = execFileSync(npm, ['pack', '--json', '--pack-destination', dir], { cwd: pkg, encoding: 'utf8' })
    const [info] = JSON.parse(out)
    const files = info.files.map((f) => f.path)
    for (const needed of ['src/index.js', 'src/errors.js', 'src/guard.js', 'gen/oma_portable.js', 'gen/oma_portable.core.wasm', 'wasm/oma_portable.wasm', 'index.d.ts', 'package.json']) {
      assert.ok(files.includes(needed), `${needed} is not in the tarball`)
    }
    assert.ok(!files.some((f) => f.startsWith('test') || f.startsWith('node_modules')))
    const tarball = join(dir, info.filename)
    const app = join(dir, 'app')
    execFileSync('mkdir', ['-p', app])
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }))
    execFileSync(npm, ['install', '--offline', '--no-audit', '--no-fund', tarball], { cwd: app, stdio: 'pipe' })
    assert.ok(existsSync(join(app, 'node_modules', 'oma-component', 'gen', 'oma_portable.core.wasm')))
    assert.deepEqual(readdirSync(join(app, 'node_modules')).filter((n) => !n.startsWith('.')), ['oma-component'])
    writeFileSync(join(app, 'main.js'), `
      import { Agent, InvalidMessageError } from 'oma-component'
      const agent = new Agent({ name: 'packed', model: 'claude-test', provider: 'anthropic', baseURL: process.env.BASE_URL, apiKey: 'sk-packed' })
      const result = await agent.run('hello from the tarball')
      let rejected = ''
      try { await agent.run([{ role: 'user', content: 'x' }]) } catch (e) { rejected = (e instanceof InvalidMessageError) + ' ' + e.message }
      console.log(JSON.stringify({ output: result.output, success: result.success, rejected }))
    `)
    server.queue(anthropicMessage('packed answer'))
    const stdout = await new Promise((resolve, reject) => {
      const child = spawn(process.execPath, ['main.js'], { cwd: app, env: { ...process.env, BASE_URL: server.url } })
      let text = ''
      let err = ''
      child.stdout.on('data', (d) => { text += d })
      child.stderr.on('data', (d) => { err += d })
      const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error('the packed script timed out')) }, 60000)
      child.on('close', (code) => { clearTimeout(timer); code === 0 ? resolve(text) : reject(new Error(`exit ${code}: ${err}`)) })
    })
    const got = JSON.parse(stdout.trim().split('\n').at(-1))
    assert.deepEqual(got, {
      output: 'packed answer', success: true,
      rejected: 'true messages[0].content must be a ContentBlock[], got string',
    })
    assert.equal(server.requests[0].url, '/v1/messages')
  } finally {
    await server.close()
    rmSync(dir, { recursive: true, force: true })
  }
})
