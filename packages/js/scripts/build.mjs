#!/usr/bin/env node
// npm run build: builds oma_portable.wasm alone with cargo (the repository's oma-guest-build
// command, `--world portable`), transpiles it with jco into gen/ (every core module a file),
// applies scripts/patch-gen.mjs, imports the core modules statically as `#oma-core/NAME` and
// writes their Node loaders (scripts/core-modules.mjs: one module for Node and Workers), and
// minifies it (scripts/minify.mjs). It prints each step, cargo's progress, and a line every 20 s
// that cargo is quiet.
//
// Environment:
//   OMA_PROFILE        cargo profile for the guest (default: wasm-release, the shipped build;
//                      `release` builds faster)
//   OMA_PORTABLE_WASM  use this oma_portable.wasm instead of building one (no Rust needed)

import { spawn, spawnSync } from 'node:child_process'
import { existsSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { minifyGenerated } from './minify.mjs'
import { patchGenerated } from './patch-gen.mjs'
import { staticCoreModules, writeNodeLoaders } from './core-modules.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const pkg = resolve(here, '..')
const root = resolve(pkg, '..', '..')

function fail(message) {
  console.error(`build: ${message}`)
  process.exit(1)
}

const started = Date.now()
const elapsed = () => `${((Date.now() - started) / 1000).toFixed(0)} s`

/** Runs cargo, its progress on stderr as it comes, with a line every 20 s while it is quiet. */
function cargoBuild(profile) {
  const args = ['run', '-p', 'oma-guest-build', '--', '--profile', profile, '--world', 'portable']
  console.error(`build: [1/3] building oma_portable.wasm: cargo ${args.join(' ')} (in ${root}); a few minutes the first time`)
  return new Promise((resolvePath) => {
    const child = spawn('cargo', args, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let quietSince = Date.now()
    child.stdout.on('data', (d) => { stdout += d })
    child.stderr.on('data', (d) => {
      quietSince = Date.now()
      process.stderr.write(d)
    })
    const ticker = setInterval(() => {
      if (Date.now() - quietSince >= 20000) {
        console.error(`build: still building (${elapsed()})`)
        quietSince = Date.now()
      }
    }, 5000)
    child.on('error', (error) => {
      clearInterval(ticker)
      fail(`cannot run cargo (${error.message}); install Rust with rustup, or set OMA_PORTABLE_WASM`)
    })
    child.on('close', (code) => {
      clearInterval(ticker)
      if (code !== 0) fail(`cargo exited with ${code}`)
      const line = stdout.trim().split('\n').find((l) => l.trim().endsWith('oma_portable.wasm'))
      if (!line) fail(`no oma_portable.wasm path in cargo's output:\n${stdout}`)
      resolvePath(line.trim())
    })
  })
}

let wasm = process.env.OMA_PORTABLE_WASM
if (wasm) console.error(`build: [1/3] using OMA_PORTABLE_WASM=${wasm}`)
else wasm = await cargoBuild(process.env.OMA_PROFILE || 'wasm-release')
if (!existsSync(wasm)) fail(`${wasm} does not exist`)
console.error(`build: oma_portable.wasm is ${statSync(wasm).size} bytes (${elapsed()})`)
// The package ships only the transpiled component (gen/); an older build's copy is removed.
rmSync(join(pkg, 'wasm'), { recursive: true, force: true })

const require = createRequire(import.meta.url)
// jco's package.json is not exported; find the package directory from its main entry.
let jcoDir = dirname(require.resolve('@bytecodealliance/jco'))
while (!existsSync(join(jcoDir, 'package.json'))) jcoDir = dirname(jcoDir)
const jcoPkg = join(jcoDir, 'package.json')
const jcoBin = JSON.parse(readFileSync(jcoPkg, 'utf8')).bin
const jco = join(dirname(jcoPkg), typeof jcoBin === 'string' ? jcoBin : jcoBin.jco)

rmSync(join(pkg, 'gen'), { recursive: true, force: true })
console.error('build: [2/3] transpiling it with jco into gen/')
const transpile = spawnSync(
  process.execPath,
  [jco, 'transpile', wasm, '--name', 'oma_portable', '-o', join(pkg, 'gen'), '--base64-cutoff', '0', '--quiet'],
  { cwd: pkg, stdio: 'inherit' },
)
if (transpile.status !== 0) fail(`jco transpile exited with ${transpile.status}`)

// Speed patches to jco's output (see scripts/patch-gen.mjs); each fails the build when jco's
// code is not what it expects.
console.error('build: [3/3] patching and checking the transpiled module')
let js = readFileSync(join(pkg, 'gen', 'oma_portable.js'), 'utf8')
let cores
try {
  // One module for Node and Workers: its core modules are imported statically through
  // `#oma-core/NAME` (package.json's `imports`), which Workers resolve to the `.wasm` file itself
  // (their bundler hands over a compiled `WebAssembly.Module`) and Node to a small module that
  // compiles the file (scripts/core-modules.mjs).
  ;({ js, cores } = staticCoreModules(patchGenerated(js), '#oma-core/'))
} catch (e) {
  fail(e.message)
}

// The portable world imports nothing: the generated module imports only its own core modules.
const imports = [...js.matchAll(/^\s*import\s[^;]*?from\s+['"]([^'"]+)['"]/gm)].map((m) => m[1])
const dynamic = [...js.matchAll(/import\(['"]([^'"]+)['"]\)/g)].map((m) => m[1])
const foreign = [...imports, ...dynamic].filter((spec) => !/^#oma-core\/[A-Za-z0-9_.-]+\.wasm$/.test(spec))
if (foreign.length > 0 || js.includes('preview2-shim')) {
  fail(`the transpiled component imports ${foreign.join(', ') || 'preview2-shim'}; expected only its core modules`)
}
try {
  writeFileSync(join(pkg, 'gen', 'oma_portable.js'), await minifyGenerated(js, 'gen/oma_portable.js'))
  writeNodeLoaders(join(pkg, 'gen'), cores)
} catch (e) {
  fail(e.message)
}
console.error(`build: gen/ ${readdirSync(join(pkg, 'gen')).join(' ')} (core modules imported: ${cores.length}; minified), done in ${elapsed()}`)

