// What the package takes from Node (and from Deno, Bun and Workers, which provide Node's
// modules): the file system, paths, child processes, `process`, `Buffer` and the environment.
// package.json's `imports` give `#platform` this module under the `node` and `workerd`
// conditions and web.js everywhere else, so that a browser bundle imports no `node:*` module.
// Only the built-in tools, the local shell, process backends, the environment fallback of the
// configuration and the transport's Node path use it.

export { lstat, mkdir, readdir, readFile, realpath, stat, writeFile } from 'node:fs/promises'
export { basename, dirname, isAbsolute, join, relative, resolve } from 'node:path'
export { spawn } from 'node:child_process'

/** `[node:http, node:https, node:url]`, which the transport loads when it loads on Node. */
export function httpModules() {
  return Promise.all([import('node:http'), import('node:https'), import('node:url')])
}

/** Node's `process` global (Workers without `nodejs_compat` have none). */
export const process = globalThis.process

/** Node's `Buffer` global. */
export const Buffer = globalThis.Buffer

/**
 * The environment variable `name`, or undefined. Deno asks for a permission to read the
 * environment (and prompts for it on a terminal): there a variable is read only when that
 * permission is granted already, so that a program run with `--allow-net --allow-read` alone
 * reads none and is never interrupted.
 */
export function environmentVariable(name) {
  const deno = globalThis.Deno
  if (deno !== undefined) {
    let state
    try {
      state = deno.permissions.querySync({ name: 'env', variable: name }).state
    } catch {
      return undefined
    }
    return state === 'granted' ? deno.env.get(name) : undefined
  }
  return globalThis.process?.env?.[name]
}
