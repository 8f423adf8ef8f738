// `#platform` in browsers and other runtimes without Node's modules (package.json's `imports`
// give node.js to Node, Deno, Bun and Workers): the same names as node.js, none of which works.
// The built-in file and shell tools, the local shell and process backends need a file system
// and processes; here each fails at its first use with an error that says so (a tool call
// becomes an error result with that message, a process backend fails its run), and the
// environment has no variables. The built-in tools' definitions stay available, and the `bash`
// tool runs with a `shellExecutor` of the caller's.

function unavailable(what) {
  return new Error(
    `${what} is not available in this runtime: the built-in file and shell tools and process backends need Node, Deno or Bun`,
  )
}

const failing = (what) => () => {
  throw unavailable(what)
}
const rejecting = (what) => async () => {
  throw unavailable(what)
}

export const lstat = rejecting('node:fs/promises')
export const mkdir = rejecting('node:fs/promises')
export const readdir = rejecting('node:fs/promises')
export const readFile = rejecting('node:fs/promises')
export const realpath = rejecting('node:fs/promises')
export const stat = rejecting('node:fs/promises')
export const writeFile = rejecting('node:fs/promises')

export const basename = failing('node:path')
export const dirname = failing('node:path')
export const isAbsolute = failing('node:path')
export const join = failing('node:path')
export const relative = failing('node:path')
export const resolve = failing('node:path')

export const spawn = failing('node:child_process')

/** Stands for Node's global: any property read throws. */
const absent = (what) => new Proxy({}, { get: () => { throw unavailable(what) } })

export const process = absent('process')
export const Buffer = absent('Buffer')

/** No `node:http`: the transport sends with `fetch`. */
export async function httpModules() {
  return null
}

/** There is no environment to read: every variable is unset. */
export function environmentVariable() {
  return undefined
}
