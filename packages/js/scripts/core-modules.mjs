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
// `imports` resolve `#oma-core/NAME` to the `.wasm` file under the `workerd` condition, to a
// browser loader under `browser` (gen/web/ or gen/bytes/, see `writeLoaders`), and otherwise to
// `gen/node/NAME.js`; each loader is a module written here that compiles the file (top-level
// await). One generated module serves them all, so the tarball carries it once.

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
  const header = '// oma-component (scripts/core-modules.mjs): core modules imported statically, for Node, Workers and browsers.\n'
  return { js: header + imports.join('\n') + '\n' + js, cores }
}

/**
 * Writes the core modules' loaders, each module compiled from its file, one directory for each way
 * a host gets the file (package.json's `imports` choose among them by condition):
 *
 * - `gen/node/NAME.js` (Node, Deno, Bun): reads the file with node:fs.
 * - `gen/web/NAME.js` (the `browser` condition with `production` or `development`: Vite,
 *   webpack): `new URL('../NAME', import.meta.url)`, which these bundlers emit as an asset and
 *   point at, fetched and compiled with `WebAssembly.compileStreaming` (or from its bytes when
 *   the server does not say `application/wasm`).
 * - `gen/bytes/NAME.js` (the `browser` condition otherwise: esbuild): the file imported
 *   `with { type: 'bytes' }`, which esbuild inlines into the bundle; esbuild has no default loader
 *   for `.wasm` and leaves `new URL(...)` pointing at a file it does not copy.
 */
export function writeLoaders(gen, cores, kinds = ['node', 'web', 'bytes']) {
  for (const dir of kinds) mkdirSync(join(gen, dir), { recursive: true })
  const write = (dir, file, text) => {
    if (kinds.includes(dir)) writeFileSync(join(gen, dir, file), text)
  }
  for (const core of cores) {
    write(
      'node', `${core}.js`,
      `// oma-component: ${core} compiled for Node, Deno and Bun (Workers import the .wasm file itself).\n` +
        `import { readFile } from 'node:fs/promises'\n` +
        `export default await WebAssembly.compile(await readFile(new URL('../${core}', import.meta.url)))\n`,
    )
    write(
      'web', `${core}.js`,
      `// oma-component: ${core} for bundlers that emit \`new URL(file, import.meta.url)\` as an asset (Vite, webpack).\n` +
        `const response = await fetch(new URL('../${core}', import.meta.url))\n` +
        `if (!response.ok) throw new Error(\`cannot load ${core}: HTTP \${response.status} from \${response.url}\`)\n` +
        `export default await (/^application\\/wasm\\b/i.test(response.headers.get('content-type') ?? '')\n` +
        `  ? WebAssembly.compileStreaming(response)\n` +
        `  : response.arrayBuffer().then((bytes) => WebAssembly.compile(bytes)))\n`,
    )
    write(
      'bytes', `${core}.js`,
      `// oma-component: ${core} inlined by bundlers that import bytes (esbuild).\n` +
        `import bytes from '../${core}' with { type: 'bytes' }\n` +
        `export default await WebAssembly.compile(bytes)\n`,
    )
  }
}

/** The Node loaders only (gen/node/), for a package that is no browser's (packages/worker). */
export function writeNodeLoaders(gen, cores) {
  writeLoaders(gen, cores, ['node'])
}
