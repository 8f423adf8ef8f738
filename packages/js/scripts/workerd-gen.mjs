// The Workers build of the package (`npm run build` calls it after the Node build): Cloudflare
// Workers (workerd) compile no WebAssembly at run time ("Wasm code generation disallowed by
// embedder"), so neither the core modules jco inlines as base64 nor the ones it loads with
// `fetch(new URL(..., import.meta.url))` work there. What works is a core module imported
// statically (`import core from './x.core.wasm'`): the Workers bundler (wrangler's esbuild, or
// workerd's own `wasm` module type) hands the importer a compiled `WebAssembly.Module`.
//
// This makes `workerd/gen/`, which `#oma-portable` (package.json's `imports`, the specifier
// src/ imports the component by) resolves to under the `workerd` condition: jco's
// transpilation with `--base64-cutoff 0` (every core module a file), the same speed patches as
// gen/ (scripts/patch-gen.mjs), and each `fetchCompile(new URL('./NAME', import.meta.url))`
// replaced by the module imported statically from './NAME'; `fetchCompile` itself (node:fs or
// fetch) is removed, so the module imports nothing but its own core modules.
//
// Node is unchanged: `default` still resolves `#oma-portable` to gen/.

import { spawnSync } from 'node:child_process'
import { readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { minifyGenerated } from './minify.mjs'
import { patchGenerated } from './patch-gen.mjs'

const FETCH_COMPILE = `const isNode = typeof process !== 'undefined' && process.versions && process.versions.node;
let _fs;
async function fetchCompile (url) {
  if (isNode) {
    _fs = _fs || await import('node:fs/promises');
    return WebAssembly.compile(await _fs.readFile(url));
  }
  return fetch(url).then(WebAssembly.compileStreaming);
}
`

/**
 * jco's output for Workers: the core modules imported statically, no run-time compilation.
 * Throws when jco's code is not what it expects (a jco upgrade must re-check it).
 */
export function staticCoreModules(js) {
  if (js.split(FETCH_COMPILE).length !== 2) {
    throw new Error('workerd-gen: fetchCompile is not the one jco 1.35.0 writes (exactly once)')
  }
  js = js.replace(FETCH_COMPILE, '')
  const loads = [...js.matchAll(/fetchCompile\(new URL\('\.\/([A-Za-z0-9_.-]+\.wasm)', import\.meta\.url\)\)/g)]
  if (loads.length === 0) throw new Error('workerd-gen: no core module is loaded with fetchCompile')
  const imports = []
  loads.forEach((load, i) => {
    const name = `$oma_core_module${i}`
    imports.push(`import ${name} from './${load[1]}';`)
    js = js.replace(load[0], name)
  })
  if (/fetchCompile|import\.meta|import\(|base64Compile|WebAssembly\.compile\(/.test(js)) {
    throw new Error('workerd-gen: the output still loads or compiles WebAssembly at run time')
  }
  const header = '// oma-component (scripts/workerd-gen.mjs): core modules imported statically, for Workers.\n'
  return header + imports.join('\n') + '\n' + js
}

/** Transpiles `wasm` into `pkg/workerd/gen` for Workers. */
export async function buildWorkerd({ pkg, wasm, jco, fail }) {
  const out = join(pkg, 'workerd')
  rmSync(out, { recursive: true, force: true })
  const gen = join(out, 'gen')
  const transpile = spawnSync(
    process.execPath,
    [jco, 'transpile', wasm, '--name', 'oma_portable', '-o', gen, '--base64-cutoff', '0', '--quiet'],
    { cwd: pkg, stdio: 'inherit' },
  )
  if (transpile.status !== 0) fail(`jco transpile (workerd) exited with ${transpile.status}`)
  const file = join(gen, 'oma_portable.js')
  let js = readFileSync(file, 'utf8')
  try {
    js = staticCoreModules(patchGenerated(js))
  } catch (e) {
    fail(e.message)
  }
  writeFileSync(file, js)
  const imports = [...js.matchAll(/^\s*import\s[^;]*?from\s+['"]([^'"]+)['"]/gm)].map((m) => m[1])
  const foreign = imports.filter((spec) => !/^\.\/oma_portable\.core\d*\.wasm$/.test(spec))
  if (foreign.length > 0) fail(`the Workers transpilation imports ${foreign.join(', ')}`)
  try {
    writeFileSync(file, await minifyGenerated(js, 'workerd/gen/oma_portable.js'))
  } catch (e) {
    fail(e.message)
  }
  console.error(`build: workerd/gen/ ${readdirSync(gen).join(' ')} (core modules imported: ${imports.length})`)
}
