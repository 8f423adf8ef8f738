#!/usr/bin/env node
// npm run build:routes: builds oma_routes.wasm (the `routes` world: the gateway's rules for a
// host that serves HTTP itself) with the repository's oma-guest-build command (`--world
// routes`), transpiles it with the JavaScript package's jco into gen/ (every core module a file,
// imported statically through `#oma-core/NAME`: package.json's `imports`), with the package's
// own speed patches and minifier. The gateway Worker (src/gateway.js) imports it as
// `#oma-routes`; the JavaScript package does not carry it.
//
// Environment:
//   OMA_PROFILE      cargo profile for the guest (default: wasm-release, the shipped build)
//   OMA_ROUTES_WASM  use this oma_routes.wasm instead of building one (no Rust needed)

import { spawnSync } from 'node:child_process'
import { existsSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { minifyGenerated } from '../../js/scripts/minify.mjs'
import { patchGenerated } from '../../js/scripts/patch-gen.mjs'
import { staticCoreModules, writeNodeLoaders } from '../../js/scripts/core-modules.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const pkg = resolve(here, '..')
const root = resolve(pkg, '..', '..')
const gen = join(pkg, 'gen')

function fail(message) {
  console.error(`build-routes: ${message}`)
  process.exit(1)
}

let wasm = process.env.OMA_ROUTES_WASM
if (wasm) {
  console.error(`build-routes: using OMA_ROUTES_WASM=${wasm}`)
} else {
  const profile = process.env.OMA_PROFILE || 'wasm-release'
  const args = ['run', '-q', '-p', 'oma-guest-build', '--', '--profile', profile, '--world', 'routes']
  console.error(`build-routes: building oma_routes.wasm: cargo ${args.join(' ')} (in ${root})`)
  const built = spawnSync('cargo', args, { cwd: root, stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' })
  if (built.error) fail(`cannot run cargo (${built.error.message}); set OMA_ROUTES_WASM`)
  if (built.status !== 0) fail(`cargo exited with ${built.status}`)
  wasm = built.stdout.trim().split('\n').find((l) => l.trim().endsWith('oma_routes.wasm'))?.trim()
  if (!wasm) fail(`no oma_routes.wasm path in cargo's output:\n${built.stdout}`)
}
if (!existsSync(wasm)) fail(`${wasm} does not exist`)
console.error(`build-routes: oma_routes.wasm is ${statSync(wasm).size} bytes`)

// jco is the JavaScript package's (packages/js/package-lock.json pins it).
const require = createRequire(join(root, 'packages', 'js', 'package.json'))
let jcoDir = dirname(require.resolve('@bytecodealliance/jco'))
while (!existsSync(join(jcoDir, 'package.json'))) jcoDir = dirname(jcoDir)
const jcoPkg = join(jcoDir, 'package.json')
const jcoBin = JSON.parse(readFileSync(jcoPkg, 'utf8')).bin
const jco = join(dirname(jcoPkg), typeof jcoBin === 'string' ? jcoBin : jcoBin.jco)

rmSync(gen, { recursive: true, force: true })
const transpile = spawnSync(
  process.execPath,
  [jco, 'transpile', wasm, '--name', 'oma_routes', '-o', gen, '--base64-cutoff', '0', '--quiet'],
  { cwd: pkg, stdio: 'inherit' },
)
if (transpile.status !== 0) fail(`jco transpile exited with ${transpile.status}`)

let js = readFileSync(join(gen, 'oma_routes.js'), 'utf8')
let cores
try {
  ;({ js, cores } = staticCoreModules(patchGenerated(js), '#oma-core/'))
} catch (e) {
  fail(e.message)
}
// The routes world imports nothing: the generated module imports only its own core modules.
const imports = [...js.matchAll(/^\s*import\s[^;]*?from\s+['"]([^'"]+)['"]/gm)].map((m) => m[1])
const foreign = imports.filter((spec) => !/^#oma-core\/[A-Za-z0-9_.-]+\.wasm$/.test(spec))
if (foreign.length > 0 || js.includes('preview2-shim')) {
  fail(`the transpiled component imports ${foreign.join(', ') || 'preview2-shim'}; expected only its core modules`)
}
try {
  writeFileSync(join(gen, 'oma_routes.js'), await minifyGenerated(js, 'gen/oma_routes.js'))
  writeNodeLoaders(gen, cores)
} catch (e) {
  fail(e.message)
}
console.error(`build-routes: gen/ ${readdirSync(gen).join(' ')} (core modules: ${cores.join(', ')})`)
