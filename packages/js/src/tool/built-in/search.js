// OMA's search built-ins: `glob` (file paths under a directory whose names match a glob) and
// `grep` (lines matching a regular expression, through ripgrep when `rg` runs, else a walk in
// Node). Both skip version-control, dependency and build directories and symlinks, report paths
// relative to the sandbox root, and cap their answers (500 paths, 100 lines by default).

import { Buffer, basename, join, lstat, readdir, readFile, relative, spawn, stat } from '#platform'
import { defineTool } from '../framework.js'
import { s } from './schema.js'
import { defaultWorkspaceDir, resolvePathWithinCwd } from './path-safety.js'

/** Directories the walk never enters. */
export const SKIP_DIRS = new Set(['.git', '.svn', '.hg', 'node_modules', '.next', 'dist', 'build'])

/** OMA's file-name glob: `*` any run, `?` one character, a leading `** /` ignored, no case. */
export function matchesGlob(filename, glob) {
  const pattern = glob.startsWith('**/') ? glob.slice(3) : glob
  const source = pattern.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.')
  return new RegExp(`^${source}$`, 'i').test(filename)
}

/** The files under `dir` (depth first, in directory order) whose names match `glob`. */
export async function collectFiles(dir, glob, signal, { maxFiles } = {}) {
  const found = []
  const full = () => maxFiles !== undefined && found.length >= maxFiles
  const walk = async (at) => {
    if (signal?.aborted || full()) return
    let names
    try {
      names = await readdir(at, { encoding: 'utf8' })
    } catch {
      return
    }
    for (const name of names) {
      if (signal?.aborted || full()) return
      const path = join(at, name)
      let info
      try {
        info = await lstat(path)
      } catch {
        continue
      }
      if (info.isSymbolicLink()) continue
      if (info.isDirectory()) {
        if (!SKIP_DIRS.has(name)) await walk(path)
      } else if (info.isFile() && (glob === undefined || matchesGlob(name, glob))) {
        found.push(path)
      }
    }
  }
  await walk(dir)
  return found
}

const DEFAULT_MAX_FILES = 500
const DEFAULT_MAX_RESULTS = 100
const why = (error) => (error instanceof Error ? error.message : 'Unknown error')

export const globTool = defineTool({
  name: 'glob',
  description:
    'List file paths under a directory that match an optional filename glob. ' +
    'Does not read file contents — use `grep` to search inside files. ' +
    'Skips common bulky directories (node_modules, .git, dist, etc.). ' +
    'Paths in the result are relative to the process working directory. ' +
    'Results are capped by `maxFiles`.',
  inputSchema: s.object({
    path: s.string().optional().describe('Absolute directory or file path to list. Defaults to the tool working directory.'),
    pattern: s.string().optional().describe(
      'Filename glob (e.g. "*.ts", "**/*.json"). When omitted, every file ' +
        'under the directory is listed (subject to maxFiles and skipped dirs).',
    ),
    maxFiles: s.number().int().positive().optional().describe(
      `Maximum number of file paths to return. Defaults to ${DEFAULT_MAX_FILES}.`,
    ),
  }),
  execute: async (input, context) => {
    const safe = await resolvePathWithinCwd(input.path ?? context?.cwd ?? defaultWorkspaceDir(), context)
    if (!safe.ok) return { data: safe.error, isError: true }
    const root = safe.path
    const maxFiles = input.maxFiles ?? DEFAULT_MAX_FILES
    let paths
    let capped = false
    try {
      if ((await stat(root)).isFile()) {
        if (input.pattern !== undefined && !matchesGlob(basename(root), input.pattern)) {
          return { data: 'No files matched.', isError: false }
        }
        paths = [relative(safe.root, root) || root]
      } else {
        const files = await collectFiles(root, input.pattern, context?.abortSignal, { maxFiles: maxFiles + 1 })
        capped = files.length > maxFiles
        paths = files.slice(0, maxFiles).map((file) => relative(safe.root, file) || file)
      }
    } catch (error) {
      return { data: `Cannot access path "${root}": ${why(error)}`, isError: true }
    }
    if (paths.length === 0) return { data: 'No files matched.', isError: false }
    const note = capped ? `\n\n(listing capped at ${maxFiles} paths; raise maxFiles for more)` : ''
    return { data: [...paths].sort((a, b) => a.localeCompare(b)).join('\n') + note, isError: false }
  },
})

let ripgrep
/** Whether `rg --version` runs (asked once per process). */
function ripgrepAvailable() {
  ripgrep ??= new Promise((resolve) => {
    const child = spawn('rg', ['--version'], { stdio: 'ignore' })
    child.on('close', (code) => resolve(code === 0))
    child.on('error', () => resolve(false))
  })
  return ripgrep
}

/** grep through ripgrep, run in the sandbox root on the path relative to it. */
function viaRipgrep(pattern, path, { glob, maxResults, root, signal }) {
  const args = ['--line-number', '--no-heading', '--color=never', `--max-count=${maxResults}`]
  if (glob !== undefined) args.push('--glob', glob)
  args.push('--', pattern, relative(root, path) || '.')
  return new Promise((resolve) => {
    const out = []
    const err = []
    const child = spawn('rg', args, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] })
    child.stdout.on('data', (chunk) => out.push(chunk))
    child.stderr.on('data', (chunk) => err.push(chunk))
    const onAbort = () => child.kill('SIGKILL')
    signal?.addEventListener('abort', onAbort, { once: true })
    child.on('close', (code) => {
      signal?.removeEventListener('abort', onAbort)
      const text = Buffer.concat(out).toString('utf8').trimEnd()
      // Exit 1 is "no match", not a failure.
      if (code !== 0 && code !== 1) {
        resolve({ data: `ripgrep failed (exit ${code}): ${Buffer.concat(err).toString('utf8').trim()}`, isError: true })
      } else {
        resolve(text.length === 0 ? { data: 'No matches found.', isError: false } : { data: text, isError: false })
      }
    })
    child.on('error', () => {
      signal?.removeEventListener('abort', onAbort)
      resolve({ data: 'ripgrep process error — run may be retried with the Node.js fallback.', isError: true })
    })
  })
}

/** grep in Node: files in walk order, lines in file order, up to `maxResults` lines. */
async function viaNode(regex, path, { glob, maxResults, root, signal }) {
  let files
  try {
    files = (await stat(path)).isFile() ? [path] : await collectFiles(path, glob, signal)
  } catch (error) {
    return { data: `Cannot access path "${path}": ${why(error)}`, isError: true }
  }
  const hits = []
  for (const file of files) {
    if (signal?.aborted || hits.length >= maxResults) break
    let text
    try {
      text = (await readFile(file)).toString('utf8')
    } catch {
      continue
    }
    const lines = text.split('\n')
    for (let i = 0; i < lines.length && hits.length < maxResults; i++) {
      regex.lastIndex = 0
      if (regex.test(lines[i])) hits.push(`${relative(root, file) || file}:${i + 1}:${lines[i]}`)
    }
  }
  if (hits.length === 0) return { data: 'No matches found.', isError: false }
  const note = hits.length >= maxResults ? `\n\n(results capped at ${maxResults}; use maxResults to raise the limit)` : ''
  return { data: hits.join('\n') + note, isError: false }
}

export const grepTool = defineTool({
  name: 'grep',
  description:
    'Search for a regular-expression pattern in one or more files. ' +
    'Returns matching lines with their file paths and 1-based line numbers. ' +
    'Use the `glob` parameter to restrict the search to specific file types ' +
    '(e.g. "*.ts"). ' +
    'To list matching file paths without reading contents, use the `glob` tool. ' +
    'Results are capped by `maxResults` to keep the response manageable.',
  inputSchema: s.object({
    pattern: s.string().describe('Regular expression pattern to search for in file contents.'),
    path: s.string().optional().describe(
      'Absolute directory or file path to search in. Defaults to the tool working directory.',
    ),
    glob: s.string().optional().describe(
      'Glob pattern to filter which files are searched (e.g. "*.ts", "**/*.json"). Only used when `path` is a directory.',
    ),
    maxResults: s.number().int().positive().optional().describe(
      `Maximum number of matching lines to return. Defaults to ${DEFAULT_MAX_RESULTS}.`,
    ),
  }),
  execute: async (input, context) => {
    const safe = await resolvePathWithinCwd(input.path ?? context?.cwd ?? defaultWorkspaceDir(), context)
    if (!safe.ok) return { data: safe.error, isError: true }
    const options = {
      glob: input.glob,
      maxResults: input.maxResults ?? DEFAULT_MAX_RESULTS,
      root: safe.root,
      signal: context?.abortSignal,
    }
    let regex
    try {
      regex = new RegExp(input.pattern)
    } catch {
      return { data: `Invalid regular expression: "${input.pattern}"`, isError: true }
    }
    return (await ripgrepAvailable())
      ? viaRipgrep(input.pattern, safe.path, options)
      : viaNode(regex, safe.path, options)
  },
})
