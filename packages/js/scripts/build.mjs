#!/usr/bin/env node
// npm run build: builds oma_portable.wasm with cargo (the repository's oma-guest-build command),
// copies it to wasm/, transpiles it with jco into gen/, and applies scripts/patch-gen.mjs; then
// makes the Workers build in workerd/ (scripts/workerd-gen.mjs: a second transpilation whose core
// modules are imported statically, chosen by the `workerd` export condition).
//
// Environment:
//   OMA_PROFILE        cargo profile for the guest (default: wasm-release, the shipped build;
//                      `release` builds faster)
//   OMA_PORTABLE_WASM  use this oma_portable.wasm instead of building one (no Rust needed)

import { spawnSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { patchGenerated } from './patch-gen.mjs'
import { buildWorkerd } from './workerd-gen.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const pkg = resolve(here, '..')
const root = resolve(pkg, '..', '..')

function fail(message) {
  console.error(`build: ${message}`)
  process.exit(1)
}

let wasm = process.env.OMA_PORTABLE_WASM
if (!wasm) {
  const profile = process.env.OMA_PROFILE || 'wasm-release'
  console.error(`build: cargo run -q -p oma-guest-build -- --profile ${profile} (in ${root})`)
  const cargo = spawnSync('cargo', ['run', '-q', '-p', 'oma-guest-build', '--', '--profile', profile], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'inherit'],
    encoding: 'utf8',
  })
  if (cargo.error) fail(`cannot run cargo (${cargo.error.message}); install Rust with rustup`)
  if (cargo.status !== 0) fail(`cargo exited with ${cargo.status}`)
  const lines = cargo.stdout.trim().split('\n')
  wasm = lines.find((line) => line.trim().endsWith('oma_portable.wasm')) ?? lines[1]
  if (!wasm) fail(`no oma_portable.wasm path in cargo's output:\n${cargo.stdout}`)
  wasm = wasm.trim()
}

mkdirSync(join(pkg, 'wasm'), { recursive: true })
copyFileSync(wasm, join(pkg, 'wasm', 'oma_portable.wasm'))

const require = createRequire(import.meta.url)
// jco's package.json is not exported; find the package directory from its main entry.
let jcoDir = dirname(require.resolve('@bytecodealliance/jco'))
while (!existsSync(join(jcoDir, 'package.json'))) jcoDir = dirname(jcoDir)
const jcoPkg = join(jcoDir, 'package.json')
const jcoBin = JSON.parse(readFileSync(jcoPkg, 'utf8')).bin
const jco = join(dirname(jcoPkg), typeof jcoBin === 'string' ? jcoBin : jcoBin.jco)

rmSync(join(pkg, 'gen'), { recursive: true, force: true })
const transpile = spawnSync(
  process.execPath,
  [jco, 'transpile', join(pkg, 'wasm', 'oma_portable.wasm'), '--name', 'oma_portable', '-o', join(pkg, 'gen'), '--quiet'],
  { cwd: pkg, stdio: 'inherit' },
)
if (transpile.status !== 0) fail(`jco transpile exited with ${transpile.status}`)

// Speed patches to jco's output (see scripts/patch-gen.mjs); each fails the build when jco's
// code is not what it expects.
let js = readFileSync(join(pkg, 'gen', 'oma_portable.js'), 'utf8')
try {
  js = patchGenerated(js)
} catch (e) {
  fail(e.message)
}
writeFileSync(join(pkg, 'gen', 'oma_portable.js'), js)

// The portable world imports nothing: the generated module must import no shim at all.
const imports = [...js.matchAll(/^\s*import\s[^;]*?from\s+['"]([^'"]+)['"]/gm)].map((m) => m[1])
const dynamic = [...js.matchAll(/import\(['"]([^'"]+)['"]\)/g)].map((m) => m[1])
const foreign = [...imports, ...dynamic].filter((spec) => !/^node:(fs\/promises)$/.test(spec))
if (foreign.length > 0 || js.includes('preview2-shim')) {
  fail(`the transpiled component imports ${foreign.join(', ') || 'preview2-shim'}; expected nothing`)
}
console.error(`build: gen/ ${readdirSync(join(pkg, 'gen')).join(' ')} (no imports)`)

// The Workers build: the same component, transpiled a second time for workerd.
buildWorkerd({ pkg, wasm: join(pkg, 'wasm', 'oma_portable.wasm'), jco, fail })
