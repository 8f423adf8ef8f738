#!/usr/bin/env node
// npm run build: builds oma_portable_json.wasm (cargo builds the `portable-json` world's core
// module, jco makes it a component: no Rust host tool is built), transpiles it with jco into gen/
// (every core module a file),
// applies scripts/patch-gen.mjs, imports the core modules statically as `#oma-core/NAME` and
// writes their Node loaders (scripts/core-modules.mjs: one module for Node and Workers), and
// minifies it (scripts/minify.mjs). It prints each step, cargo's progress, and a line every 20 s
// that cargo is quiet.
//
// Environment:
//   OMA_PROFILE        cargo profile for the guest (default: wasm-release, the shipped build;
//                      wasm-size is 16% smaller gzipped and slower on long conversations
//                      (Cargo.toml, docs/performance.md); `release` builds faster)
//   OMA_PORTABLE_WASM  use this oma_portable_json.wasm instead of building one (no Rust needed)

import { spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { minifyGenerated } from './minify.mjs'
import { patchGenerated } from './patch-gen.mjs'
import { staticCoreModules, writeLoaders } from './core-modules.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const pkg = resolve(here, '..')
const root = resolve(pkg, '..', '..')

function fail(message) {
  console.error(`build: ${message}`)
  process.exit(1)
}

const started = Date.now()
const elapsed = () => `${((Date.now() - started) / 1000).toFixed(0)} s`

/**
 * Builds oma_portable_json.wasm: cargo builds the `portable-json` world's core module for
 * wasm32-unknown-unknown (the guest's own target directory, target/oma-guest, shared with
 * oma-guest-build), and jco, which the build needs anyway, makes it a component (`jco new`,
 * wit-component inside jco). No host tool is compiled for a build that runs it once.
 * Progress goes to stderr as it comes, with a line every 20 s while cargo is quiet.
 */
async function cargoBuild(profile) {
  ensureTarget('wasm32-unknown-unknown')
  const targetDir = join(root, 'target', 'oma-guest')
  const args = ['build', '--package', 'oma-portable-json', '--lib', '--target', 'wasm32-unknown-unknown',
    '--profile', profile, '--target-dir', targetDir]
  console.error(`build: [1/3] building oma_portable_json.wasm: cargo ${args.join(' ')} (in ${root}); a few minutes the first time`)
  await new Promise((done) => {
    const child = spawn('cargo', args, { cwd: root, stdio: ['ignore', 'ignore', 'pipe'] })
    let quietSince = Date.now()
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
      done()
    })
  })
  const profileDir = { dev: 'debug', test: 'debug', bench: 'release' }[profile] ?? profile
  const core = join(targetDir, 'wasm32-unknown-unknown', profileDir, 'oma_portable_json.wasm')
  const out = join(targetDir, 'js', profileDir)
  mkdirSync(out, { recursive: true })
  const component = join(out, 'oma_portable_json.wasm')
  const made = spawnSync(process.execPath, [jco, 'new', core, '-o', component], { cwd: pkg, stdio: 'inherit' })
  if (made.status !== 0) fail(`jco new exited with ${made.status}`)
  return component
}

/** Adds the standard library for `target` with rustup where it is missing, as oma-guest-build does. */
function ensureTarget(target) {
  const sysroot = spawnSync('rustc', ['--print', 'sysroot'], { encoding: 'utf8' })
  if (sysroot.status === 0 && existsSync(join(sysroot.stdout.trim(), 'lib', 'rustlib', target, 'lib'))) return
  console.error(`build: installing the ${target} standard library with \`rustup target add ${target}\``)
  const added = spawnSync('rustup', ['target', 'add', target], { stdio: ['ignore', 'ignore', 'inherit'] })
  if (added.error) fail(`the guest needs the ${target} standard library and rustup is not on PATH to add it`)
  if (added.status !== 0) fail(`\`rustup target add ${target}\` failed`)
}

const require = createRequire(import.meta.url)
// jco's package.json is not exported; find the package directory from its main entry.
let jcoDir = dirname(require.resolve('@bytecodealliance/jco'))
while (!existsSync(join(jcoDir, 'package.json'))) jcoDir = dirname(jcoDir)
const jcoPkg = join(jcoDir, 'package.json')
const jcoBin = JSON.parse(readFileSync(jcoPkg, 'utf8')).bin
const jco = join(dirname(jcoPkg), typeof jcoBin === 'string' ? jcoBin : jcoBin.jco)

let wasm = process.env.OMA_PORTABLE_WASM
if (wasm) console.error(`build: [1/3] using OMA_PORTABLE_WASM=${wasm}`)
else wasm = await cargoBuild(process.env.OMA_PROFILE || 'wasm-release')
if (!existsSync(wasm)) fail(`${wasm} does not exist`)
console.error(`build: oma_portable_json.wasm is ${statSync(wasm).size} bytes (${elapsed()})`)
// The package ships only the transpiled component (gen/); an older build's copy is removed.
rmSync(join(pkg, 'wasm'), { recursive: true, force: true })


rmSync(join(pkg, 'gen'), { recursive: true, force: true })
console.error('build: [2/3] transpiling it with jco into gen/')
const transpile = spawnSync(
  process.execPath,
  [jco, 'transpile', wasm, '--name', 'oma_portable_json', '-o', join(pkg, 'gen'), '--base64-cutoff', '0', '--quiet'],
  { cwd: pkg, stdio: 'inherit' },
)
if (transpile.status !== 0) fail(`jco transpile exited with ${transpile.status}`)

// Speed patches to jco's output (see scripts/patch-gen.mjs); each fails the build when jco's
// code is not what it expects.
console.error('build: [3/3] patching and checking the transpiled module')
let js = readFileSync(join(pkg, 'gen', 'oma_portable_json.js'), 'utf8')
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

// The world imports nothing: the generated module imports only its own core modules.
const imports = [...js.matchAll(/^\s*import\s[^;]*?from\s+['"]([^'"]+)['"]/gm)].map((m) => m[1])
const dynamic = [...js.matchAll(/import\(['"]([^'"]+)['"]\)/g)].map((m) => m[1])
const foreign = [...imports, ...dynamic].filter((spec) => !/^#oma-core\/[A-Za-z0-9_.-]+\.wasm$/.test(spec))
if (foreign.length > 0 || js.includes('preview2-shim')) {
  fail(`the transpiled component imports ${foreign.join(', ') || 'preview2-shim'}; expected only its core modules`)
}
try {
  writeFileSync(join(pkg, 'gen', 'oma_portable_json.js'), await minifyGenerated(js, 'gen/oma_portable_json.js'))
  writeLoaders(join(pkg, 'gen'), cores)
} catch (e) {
  fail(e.message)
}
console.error(`build: gen/ ${readdirSync(join(pkg, 'gen')).join(' ')} (core modules imported: ${cores.length}; minified), done in ${elapsed()}`)

