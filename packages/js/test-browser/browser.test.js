// The packed tarball as a browser and Deno get it, with nothing but an ordinary bundler: installed
// into an empty project, a page that imports `oma-component` is bundled by esbuild
// (`--bundle --platform=browser --format=esm`, no other flag) and by Vite (`vite build`, no
// config), and each bundle runs in headless Chromium (Debian's package, driven by
// puppeteer-core: no browser is downloaded) against a loopback provider of another origin
// (provider.js, CORS); the same scenarios (scenarios.js: a run, a stream, a tool round trip,
// OMA's validation message, a cancelled run, the response limit, a redirect, the egress policy)
// run under Deno with `--allow-net` and `--allow-read` only, and under Bun.
//
// Environment: OMA_TARBALL (a tarball already packed; without it one is packed), OMA_CHROMIUM
// (default /usr/bin/chromium), OMA_DENO (default `deno` on PATH). ci.sh installs what is missing.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync, spawn } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import { tmpdir } from 'node:os'
import { dirname, extname, join, normalize } from 'node:path'
import { fileURLToPath } from 'node:url'
import puppeteer from 'puppeteer-core'
import { startProvider } from './provider.js'

const here = dirname(fileURLToPath(import.meta.url))
const pkg = join(here, '..')
const bin = (name) => join(here, 'node_modules', '.bin', name)

/**
 * A name for loopback that is not `localhost`: a page served from it over plain HTTP is not a
 * secure context (no `crypto.randomUUID`), as a page on a LAN address would be.
 */
const INSECURE_HOST = 'oma-page.test'

/**
 * Chromium's flags: headless, no sandbox (CI runs as root), no GPU, and nothing that calls home
 * (background networking, component updates, sync, first-run tasks, pings, crash reports); every
 * run gets a fresh profile. With those alone Chromium still looked up accounts.google.com and
 * clients2.google.com (seen with strace): every name but 127.0.0.1 (and INSECURE_HOST, which is
 * 127.0.0.1) fails inside Chromium, so no lookup leaves the machine.
 */
const CHROMIUM_FLAGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
  '--disable-sync', '--no-first-run', '--no-default-browser-check', '--no-pings', '--disable-breakpad',
  '--disable-domain-reliability', `--host-resolver-rules=MAP ${INSECURE_HOST} 127.0.0.1, MAP * ~NOTFOUND, EXCLUDE 127.0.0.1`,
]

const EXPECTED = {
  run: { success: true, output: 'answer to a run', status: { code: 'ok' } },
  stream: [
    { type: 'text_delta', data: 'Hel' }, { type: 'text_delta', data: 'lo ' }, { type: 'text_delta', data: 'stream' },
    { type: 'text', data: 'Hello stream' }, { type: 'done', output: 'Hello stream' },
  ],
  tool: { output: 'the sum is 5', turns: 2, tools: ['add'], seen: ['toolu_1'] },
  validation: { rejected: true, invalidMessage: true, message: 'messages[0].content must be a ContentBlock[], got string' },
  cancel: { success: false, status: { code: 'cancelled', message: 'Run cancelled by caller.' }, withinMs: true },
  limit: { success: false, overLimit: true },
  redirect: { success: false },
  egress: { success: false, refused: true },
}

/**
 * What a host sends for the scenarios: the run, the stream, the tool's two turns, the cancelled
 * run, the answer past the limit and the redirect (once each: not retried, not followed); not the
 * invalid messages, nor the run the egress policy refuses.
 */
const SENT = ['a run', 'a stream', 'a tool', 'a tool', 'a hang', 'a big answer', 'a redirect']

function run(command, args, options = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], ...options })
    let out = ''
    let err = ''
    child.stdout.on('data', (d) => { out += d })
    child.stderr.on('data', (d) => { err += d })
    const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error(`${command} timed out`)) }, 120000)
    child.on('error', (error) => { clearTimeout(timer); reject(error) })
    child.on('close', (code) => {
      clearTimeout(timer)
      code === 0 ? resolve(out) : reject(new Error(`${command} ${args.join(' ')}: exit ${code}: ${err}${out}`))
    })
  })
}

const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.wasm': 'application/wasm' }

/** A static server for the bundles, on loopback: the page's origin (not the provider's). */
async function serve(root) {
  const server = http.createServer((req, res) => {
    const path = normalize(join(root, decodeURIComponent(new URL(req.url, 'http://x').pathname)))
    if (!path.startsWith(root) || !existsSync(path)) {
      res.writeHead(404).end()
      return
    }
    res.writeHead(200, { 'content-type': TYPES[extname(path)] ?? 'application/octet-stream' })
    res.end(readFileSync(path))
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    // Chromium keeps its connections open: closed here, or close() waits for them.
    close: () => new Promise((resolve) => {
      server.close(() => resolve())
      server.closeAllConnections()
    }),
  }
}

/** The `node:*` modules a bundle imports (none is allowed in a browser bundle). */
function nodeImports(js) {
  return [...js.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*|\brequire\s*\(\s*|\bimport\s*)["'](node:[^"']+)["']/g)].map((m) => m[1])
}

let dir, app, provider, browser

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'oma-browser-'))
  let tarball = process.env.OMA_TARBALL
  if (!tarball) {
    const out = execFileSync('npm', ['pack', '--json', '--pack-destination', dir], { cwd: pkg, encoding: 'utf8' })
    tarball = join(dir, JSON.parse(out)[0].filename)
  }
  app = join(dir, 'app')
  mkdirSync(app)
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }))
  await run('npm', ['install', '--offline', '--no-audit', '--no-fund', tarball], { cwd: app })
  copyFileSync(join(here, 'scenarios.js'), join(app, 'scenarios.js'))
  writeFileSync(join(app, 'main.js'), [
    "import * as oma from 'oma-component'",
    "import { runScenarios } from './scenarios.js'",
    "window.omaOutcomes = runScenarios(oma, new URL(location.href).searchParams.get('provider'))",
    '  .then((outcomes) => ({ ...outcomes, secureContext: window.isSecureContext, randomUUID: typeof crypto.randomUUID }))',
    '',
  ].join('\n'))
  writeFileSync(join(app, 'index.html'), '<!doctype html>\n<title>oma-component</title>\n<script type="module" src="./main.js"></script>\n')
  provider = await startProvider()
})

after(async () => {
  await browser?.close()
  await provider?.close()
  if (dir) rmSync(dir, { recursive: true, force: true })
})

/**
 * Serves the bundle in `root` (at the root of its origin, as Vite's default `base` wants it),
 * opens its index.html in Chromium and resolves with the scenarios' outcomes.
 */
async function outcomesInChromium(root, host) {
  browser ??= await puppeteer.launch({
    executablePath: process.env.OMA_CHROMIUM || '/usr/bin/chromium',
    headless: true,
    pipe: true,
    args: CHROMIUM_FLAGS,
    userDataDir: mkdtempSync(join(dir, 'profile-')),
  })
  const pages = await serve(root)
  const page = await browser.newPage()
  const errors = []
  page.on('pageerror', (error) => errors.push(String(error)))
  page.on('console', (msg) => { if (msg.type() === 'error') errors.push(msg.text()) })
  try {
    await page.goto(`${pages.url.replace('127.0.0.1', host)}/index.html?provider=${encodeURIComponent(provider.url)}`, { waitUntil: 'load', timeout: 30000 })
    await page.waitForFunction(() => window.omaOutcomes !== undefined, { timeout: 30000 }).catch(() => {
      throw new Error(`the page never started its runs: ${errors.join('; ') || 'no error reported'}`)
    })
    return await page.evaluate(() => window.omaOutcomes)
  } finally {
    await page.close()
    await pages.close()
  }
}

/** The provider's requests since `from`, as the scenarios sent them. */
function sentSince(from) {
  const requests = provider.requests.slice(from)
  assert.deepEqual(requests.filter((r) => r.url !== '/v1/messages').map((r) => r.url), [], 'a redirect was followed')
  return requests
}

function checkOutcomes(outcomes) {
  for (const [name, expected] of Object.entries(EXPECTED)) assert.deepEqual(outcomes[name], expected, `${name}: ${JSON.stringify(outcomes[name])}`)
}

function checkBrowserRequests(requests) {
  assert.deepEqual(requests.map((r) => r.body?.messages?.[0]?.content?.[0]?.text), SENT)
  for (const request of requests) {
    assert.equal(request.url, '/v1/messages')
    assert.equal(request.headers['x-api-key'], 'sk-browser-test')
    // Anthropic's header for browsers, and the browser's own encoding (the JSON answers were gzipped).
    assert.equal(request.headers['anthropic-dangerous-direct-browser-access'], 'true')
    assert.match(request.headers['accept-encoding'], /\bgzip\b/)
    assert.match(request.headers['user-agent'], /^Mozilla\/5\.0 .*HeadlessChrome/)
  }
}

for (const bundler of ['esbuild', 'vite']) {
  test(`a page bundled by ${bundler} runs, streams, calls a tool, shows OMA's validation message and cancels in Chromium`, async () => {
    let out
    if (bundler === 'esbuild') {
      // Exactly the command: the bundle goes to stdout.
      const js = await run(bin('esbuild'), ['main.js', '--bundle', '--platform=browser', '--format=esm'], { cwd: app })
      mkdirSync(join(dir, 'esbuild'))
      writeFileSync(join(dir, 'esbuild', 'main.js'), js)
      copyFileSync(join(app, 'index.html'), join(dir, 'esbuild', 'index.html'))
      out = join(dir, 'esbuild')
      assert.deepEqual(nodeImports(js), [])
    } else {
      await run(bin('vite'), ['build'], { cwd: app })
      out = join(app, 'dist')
      const assets = readdirSync(join(out, 'assets'))
      assert.ok(assets.some((f) => f.endsWith('.wasm')), `vite emitted no .wasm asset: ${assets}`)
      for (const f of assets.filter((f) => f.endsWith('.js'))) assert.deepEqual(nodeImports(readFileSync(join(out, 'assets', f), 'utf8')), [], f)
    }
    const from = provider.requests.length
    // The esbuild page is served from 127.0.0.1 (a secure context), the Vite page from a name
    // that is not (no crypto.randomUUID: run ids come from crypto.getRandomValues).
    const secure = bundler === 'esbuild'
    const outcomes = await outcomesInChromium(out, secure ? '127.0.0.1' : INSECURE_HOST)
    assert.deepEqual([outcomes.secureContext, outcomes.randomUUID], secure ? [true, 'function'] : [false, 'undefined'])
    checkOutcomes(outcomes)
    checkBrowserRequests(sentSince(from))
  })
}

/** Writes `name` into the app: the scenarios run with the installed package, `url` its provider. */
function writeEntry(name, url) {
  writeFileSync(join(app, name), [
    "import * as oma from 'oma-component'",
    "import { runScenarios } from './scenarios.js'",
    `console.log(JSON.stringify(await runScenarios(oma, ${url})))`,
    '',
  ].join('\n'))
}

/** Checks a server runtime's outcomes and requests: no browser header, identity encoding. */
function checkServerRun(out, from) {
  checkOutcomes(JSON.parse(out.trim().split('\n').at(-1)))
  const requests = sentSince(from)
  assert.deepEqual(requests.map((r) => r.body?.messages?.[0]?.content?.[0]?.text), SENT)
  for (const request of requests) {
    assert.equal(request.headers['anthropic-dangerous-direct-browser-access'], undefined)
    assert.equal(request.headers['accept-encoding'], 'identity')
  }
}

test('the same scenarios run under Deno with --allow-net and --allow-read only', async () => {
  const deno = process.env.OMA_DENO || 'deno'
  writeEntry('deno.js', 'Deno.args[0]')
  // A fresh DENO_DIR (no cache of the user's) and no update check: Deno calls nowhere.
  const env = { PATH: process.env.PATH, HOME: dir, DENO_DIR: join(dir, 'deno-dir'), DENO_NO_UPDATE_CHECK: '1', NO_COLOR: '1' }
  const version = await run(deno, ['--version'], { env })
  const from = provider.requests.length
  const out = await run(
    deno,
    ['run', '--no-prompt', '--node-modules-dir=manual', '--allow-net=127.0.0.1', `--allow-read=${app}`, 'deno.js', provider.url],
    { cwd: app, env },
  )
  checkServerRun(out, from)
  console.log(`# ${version.split('\n')[0]}`)
})

// Bun from npm's binary package (test-browser's optional dependency, Linux x64 with glibc only).
const BUN = join(here, 'node_modules', '@oven', 'bun-linux-x64', 'bin', 'bun')
const bunInstallable = process.platform === 'linux' && process.arch === 'x64'

test('the same scenarios run under Bun', { skip: !bunInstallable && 'npm has Bun for Linux x64 here only' }, async () => {
  assert.ok(existsSync(BUN), `${BUN} is missing: run npm ci in test-browser/`)
  writeEntry('bun.js', 'process.argv[2]')
  // No package installs at run time (--no-install) and no crash reports (DO_NOT_TRACK).
  const env = { PATH: process.env.PATH, HOME: dir, DO_NOT_TRACK: '1', NO_COLOR: '1' }
  const version = await run(BUN, ['--version'], { env })
  const from = provider.requests.length
  const out = await run(BUN, ['run', '--no-install', 'bun.js', provider.url], { cwd: app, env })
  checkServerRun(out, from)
  console.log(`# bun ${version.trim()}`)
})
