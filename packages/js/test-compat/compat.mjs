// The compatibility corpus: OMA-style TypeScript programs (programs/*.ts, written against
// `@open-multi-agent/core` 1.16.1) type-checked with `tsc --strict` against OMA and against
// this package with only the import changed, and emitted as JavaScript so that the tests can
// run them against a loopback provider (test/compat.test.js).
//
// OMA is not vendored and is not on the npm registry this project uses: the OMA half needs
// OMA_DIR, a built checkout of OMA's packages/core (see test-compat/README.md).

import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
export const pkg = resolve(here, '..')
export const programsDir = join(here, 'programs')
const OMA_SPECIFIER = '@open-multi-agent/core'

export function programs() {
  return readdirSync(programsDir).filter((f) => f.endsWith('.ts')).sort()
}

/** OMA's built package directory from OMA_DIR, or null when it is not set up. */
export function omaDir(env = process.env) {
  const dir = env.OMA_DIR
  if (!dir) return null
  const root = resolve(dir)
  if (!existsSync(join(root, 'dist', 'index.d.ts')) || !existsSync(join(root, 'dist', 'index.js'))) {
    throw new Error(`OMA_DIR=${dir} has no dist/index.d.ts and dist/index.js (build OMA's packages/core first)`)
  }
  return root
}

function tsc() {
  return join(pkg, 'node_modules', 'typescript', 'bin', 'tsc')
}

/**
 * Writes the corpus for one side into .gen/<side>/: the programs (the import swapped to
 * `oma-component` for the package), a package.json (ES modules) and a strict tsconfig whose
 * `paths` point the import (and zod) at that side's declarations.
 */
export function prepare(side, oma) {
  const dir = join(here, '.gen', side)
  rmSync(dir, { recursive: true, force: true })
  mkdirSync(join(dir, 'src'), { recursive: true })
  const specifier = side === 'oma' ? OMA_SPECIFIER : 'oma-component'
  for (const file of programs()) {
    let text = readFileSync(join(programsDir, file), 'utf8')
    if (side !== 'oma') text = text.split(`'${OMA_SPECIFIER}'`).join(`'${specifier}'`)
    writeFileSync(join(dir, 'src', file), text)
  }
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ private: true, type: 'module' }))
  const paths = side === 'oma'
    ? { [OMA_SPECIFIER]: [join(oma, 'dist', 'index.d.ts')], zod: [join(oma, 'node_modules', 'zod')] }
    : { 'oma-component': [join(pkg, 'index.d.ts')], zod: [join(pkg, 'node_modules', 'zod')] }
  const zodDir = side === 'oma' && !existsSync(join(oma, 'node_modules', 'zod'))
    ? join(oma, '..', '..', 'node_modules', 'zod')
    : null
  if (zodDir) paths.zod = [zodDir]
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({
    compilerOptions: {
      strict: true,
      target: 'ES2022',
      module: 'NodeNext',
      moduleResolution: 'NodeNext',
      skipLibCheck: true,
      types: ['node'],
      typeRoots: [join(pkg, 'node_modules', '@types')],
      paths,
      outDir: 'out',
      rootDir: 'src',
    },
    include: ['src/*.ts'],
  }, null, 2))
  return dir
}

/** Runs `tsc --strict` over one side; returns {ok, output, errors: {file: count}}. */
export function typecheck(dir, { emit = false } = {}) {
  const args = [tsc(), '-p', join(dir, 'tsconfig.json'), '--pretty', 'false']
  if (!emit) args.push('--noEmit')
  const run = spawnSync(process.execPath, args, { cwd: dir, encoding: 'utf8' })
  const output = `${run.stdout}${run.stderr}`
  const errors = {}
  for (const line of output.split('\n')) {
    const m = /^src\/([^()]+)\(\d+,\d+\): error/.exec(line)
    if (m) errors[m[1]] = (errors[m[1]] ?? 0) + 1
  }
  return { ok: run.status === 0, output, errors }
}

/** Emits one side's JavaScript; returns the directory of the runnable programs. */
export function emit(dir, side, oma) {
  const checked = typecheck(dir, { emit: true })
  if (!checked.ok) throw new Error(`the ${side} corpus does not compile:\n${checked.output}`)
  const out = join(dir, 'out')
  const target = side === 'oma'
    ? pathToFileURL(join(oma, 'dist', 'index.js')).href
    : pathToFileURL(join(pkg, 'src', 'index.js')).href
  const specifier = side === 'oma' ? OMA_SPECIFIER : 'oma-component'
  for (const file of readdirSync(out).filter((f) => f.endsWith('.js'))) {
    const path = join(out, file)
    writeFileSync(path, readFileSync(path, 'utf8').split(`'${specifier}'`).join(`'${target}'`))
  }
  return out
}

// `node test-compat/compat.mjs`: type-check both sides and print a summary.
if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const oma = omaDir()
  const sides = oma ? ['oma', 'package'] : ['package']
  if (!oma) console.log('# OMA_DIR is not set: type-checking the package side only')
  // One line per program and side, and a summary that counts the same lines.
  let passed = 0
  let failed = 0
  for (const side of sides) {
    const result = typecheck(prepare(side, oma))
    let sideFailed = 0
    for (const file of programs()) {
      const n = result.errors[file] ?? 0
      console.log(`${n === 0 ? 'ok' : 'not ok'} - ${side}: ${file}${n ? ` (${n} errors)` : ''}`)
      if (n === 0) passed++
      else sideFailed++
    }
    if (!result.ok && sideFailed === 0) {
      // tsc failed outside the programs (the package's own types, say): one more failure.
      console.log(`not ok - ${side}: tsc failed outside the programs`)
      sideFailed++
    }
    failed += sideFailed
    if (!result.ok) console.log(result.output)
  }
  console.log(`${passed} passed, ${failed} failed (${programs().length} programs, ${sides.join(' and ')})`)
  process.exit(failed ? 1 : 0)
}
