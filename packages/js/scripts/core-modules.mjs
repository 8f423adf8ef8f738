// How the transpiled component gets its core modules, on Node and on Cloudflare Workers alike.
// Workers (workerd) compile no WebAssembly at run time ("Wasm code generation disallowed by
// embedder"), so neither the core modules jco inlines as base64 nor the ones it loads with
// `fetch(new URL(..., import.meta.url))` work there. What works is a core module imported
// statically (`import core from './x.core.wasm'`): the Workers bundler (wrangler's esbuild, or
// workerd's own `wasm` module type) hands the importer a compiled `WebAssembly.Module`.
//
// So the build transpiles with `--base64-cutoff 0` (every core module a file) and replaces each
// `fetchCompile(new URL('./NAME', import.meta.url))` by a module imported statically from
// `#oma-core/NAME`; `fetchCompile` itself (node:fs or fetch) is removed. package.json's
// `imports` resolve `#oma-core/NAME` to the `.wasm` file under the `workerd` condition, and
// otherwise to `gen/node/NAME.js`, a module written here that compiles the file on Node (top-level
// await). One generated module serves both, so the tarball carries it once.

import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

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
 * jco's output with its core modules imported statically from `prefix + NAME`, no run-time
 * compilation; returns the text and the core modules' file names. Throws when jco's code is not
 * what it expects (a jco upgrade must re-check it).
 */
export function staticCoreModules(js, prefix) {
  if (js.split(FETCH_COMPILE).length !== 2) {
    throw new Error('core-modules: fetchCompile is not the one jco 1.35.0 writes (exactly once)')
  }
  js = js.replace(FETCH_COMPILE, '')
  const loads = [...js.matchAll(/fetchCompile\(new URL\('\.\/([A-Za-z0-9_.-]+\.wasm)', import\.meta\.url\)\)/g)]
  if (loads.length === 0) throw new Error('core-modules: no core module is loaded with fetchCompile')
  const imports = []
  const cores = []
  loads.forEach((load, i) => {
    const name = `$oma_core_module${i}`
    imports.push(`import ${name} from '${prefix}${load[1]}';`)
    cores.push(load[1])
    js = js.replace(load[0], name)
  })
  if (/fetchCompile|import\.meta|import\(|base64Compile|WebAssembly\.compile\(/.test(js)) {
    throw new Error('core-modules: the output still loads or compiles WebAssembly at run time')
  }
  const header = '// oma-component (scripts/core-modules.mjs): core modules imported statically, for Node and Workers.\n'
  return { js: header + imports.join('\n') + '\n' + js, cores }
}

/** Writes `gen/node/NAME.js` for each core module: the module compiled from its file, for Node. */
export function writeNodeLoaders(gen, cores) {
  const dir = join(gen, 'node')
  mkdirSync(dir, { recursive: true })
  for (const core of cores) {
    writeFileSync(
      join(dir, `${core}.js`),
      `// oma-component: ${core} compiled for Node (Workers import the .wasm file itself).\n` +
        `import { readFile } from 'node:fs/promises'\n` +
        `export default await WebAssembly.compile(await readFile(new URL('../${core}', import.meta.url)))\n`,
    )
  }
}
