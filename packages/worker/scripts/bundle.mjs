#!/usr/bin/env node
// npm run bundle -- [ENTRY] [OUTDIR]: bundles a Worker the way Workers' own bundling does
// (esbuild, ES module output, the `workerd`, `worker` and `browser` export conditions), with
// every `.wasm` import kept as an import of a file beside the bundle, under its own name, for
// workerd to load as a `wasm` module (a compiled WebAssembly.Module), and minified, as wrangler
// does with `minify = true` (set in wrangler.toml and wrangler-probe.toml). Prints the files and
// their gzipped sizes as JSON.
import { build } from 'esbuild'
import { readFileSync, readdirSync, rmSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { gzipSync } from 'node:zlib'

const here = dirname(fileURLToPath(import.meta.url))

/** Bundles `entry` into `outdir`; returns {files: [{name, bytes, gzipBytes}], gzipBytes}. */
export async function bundle(entry, outdir) {
  rmSync(outdir, { recursive: true, force: true })
  await build({
    entryPoints: { worker: entry },
    outdir,
    bundle: true,
    format: 'esm',
    target: 'es2022',
    platform: 'neutral',
    conditions: ['workerd', 'worker', 'browser'],
    mainFields: ['module', 'main'],
    loader: { '.wasm': 'copy' },
    assetNames: '[name]',
    // The package's process backends import node:child_process when one is used; a Worker
    // cannot run a process, and with nodejs_compat workerd provides the node: modules.
    external: ['node:*'],
    logLevel: 'warning',
    // wrangler's `minify = true`: without it esbuild prints the package's minified jco module
    // out again readable (401 KB -> 643 KB, 54 -> 72 KB gzipped) beside the package's sources.
    minify: true,
  })
  const files = readdirSync(outdir).map((name) => {
    const bytes = readFileSync(join(outdir, name))
    return { name, bytes: bytes.length, gzipBytes: gzipSync(bytes, { level: 9 }).length }
  })
  return { files, gzipBytes: files.reduce((sum, f) => sum + f.gzipBytes, 0) }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const entry = resolve(process.argv[2] ?? join(here, '..', 'src', 'probe.js'))
  const outdir = resolve(process.argv[3] ?? join(here, '..', 'dist'))
  console.log(JSON.stringify(await bundle(entry, outdir), null, 2))
}
