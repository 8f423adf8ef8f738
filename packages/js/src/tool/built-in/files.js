// OMA's file built-ins: `file_read` (numbered lines, `offset` / `limit` slices), `file_write`
// (create or overwrite, parents created) and `file_edit` (one exact replacement, or all with
// `replace_all`), every path through OMA's sandbox (path-safety.js), every failure an error
// result with OMA's text.

import { Buffer, dirname, mkdir, readFile, stat, writeFile } from '#platform'
import { defineTool } from '../framework.js'
import { s } from './schema.js'
import { resolvePathWithinCwd } from './path-safety.js'

const why = (error, fallback) => (error instanceof Error ? error.message : fallback)
const plural = (n, word) => `${n} ${word}${n === 1 ? '' : 's'}`

export const fileReadTool = defineTool({
  name: 'file_read',
  description:
    'Read the contents of a file from disk. ' +
    'Returns the file contents with line numbers prefixed in the format "N\\t<line>". ' +
    'Use `offset` and `limit` to read large files in chunks without loading the ' +
    'entire file into the context window.',
  inputSchema: s.object({
    path: s.string().describe('Absolute path to the file to read.'),
    offset: s.number().int().nonnegative().optional().describe(
      '1-based line number to start reading from. When omitted the file is read from the beginning.',
    ),
    limit: s.number().int().positive().optional().describe(
      'Maximum number of lines to return. ' +
        'When omitted all lines from `offset` to the end of the file are returned.',
    ),
  }),
  execute: async (input, context) => {
    const safe = await resolvePathWithinCwd(input.path, context)
    if (!safe.ok) return { data: safe.error, isError: true }
    let text
    try {
      text = (await readFile(safe.path)).toString('utf8')
    } catch (error) {
      return { data: `Could not read file "${safe.path}": ${why(error, 'Unknown error reading file.')}`, isError: true }
    }
    const lines = text.split('\n')
    if (lines.length > 0 && lines.at(-1) === '') lines.pop()
    const total = lines.length
    const start = input.offset !== undefined ? Math.max(0, input.offset - 1) : 0
    if (start >= total && total > 0) {
      return {
        data: `File "${safe.path}" has ${plural(total, 'line')} but offset ${input.offset} is beyond the end.`,
        isError: true,
      }
    }
    const end = input.limit !== undefined ? Math.min(start + input.limit, total) : total
    const numbered = lines.slice(start, end).map((line, i) => `${start + i + 1}\t${line}`).join('\n')
    const note = end < total ? `\n\n(showing lines ${start + 1}–${end} of ${total})` : ''
    return { data: numbered + note, isError: false }
  },
})

export const fileWriteTool = defineTool({
  name: 'file_write',
  consequential: true,
  description:
    'Write content to a file, creating it (and any missing parent directories) if it ' +
    'does not already exist, or overwriting it if it does. ' +
    'Prefer this tool for creating new files; use file_edit for targeted in-place edits ' +
    'of existing files.',
  inputSchema: s.object({
    path: s.string().describe('Absolute path to the file to write. The path must be absolute (starting with /).'),
    content: s.string().describe('The full content to write to the file.'),
  }),
  execute: async (input, context) => {
    const safe = await resolvePathWithinCwd(input.path, context, { ensureRoot: true })
    if (!safe.ok) return { data: safe.error, isError: true }
    const existed = await stat(safe.path).then(() => true, () => false)
    const parent = dirname(safe.path)
    try {
      await mkdir(parent, { recursive: true })
    } catch (error) {
      return { data: `Failed to create parent directory "${parent}": ${why(error, 'Unknown error creating directories.')}`, isError: true }
    }
    try {
      await writeFile(safe.path, input.content, 'utf8')
    } catch (error) {
      return { data: `Failed to write file "${safe.path}": ${why(error, 'Unknown error writing file.')}`, isError: true }
    }
    const lineCount = input.content.split('\n').length
    const bytes = Buffer.byteLength(input.content, 'utf8')
    return {
      data: `${existed ? 'Updated' : 'Created'} "${safe.path}" (${plural(lineCount, 'line')}, ${bytes} bytes).`,
      isError: false,
    }
  },
})

/** Non-overlapping occurrences of `needle` (0 for an empty needle). */
function occurrences(haystack, needle) {
  if (needle.length === 0) return 0
  let count = 0
  for (let at = haystack.indexOf(needle); at !== -1; at = haystack.indexOf(needle, at + needle.length)) count++
  return count
}

export const fileEditTool = defineTool({
  name: 'file_edit',
  consequential: true,
  description:
    'Edit a file by replacing a specific string with new content. ' +
    'The `old_string` must appear verbatim in the file. ' +
    'By default the tool errors if `old_string` appears more than once — ' +
    'use `replace_all: true` to replace every occurrence. ' +
    'Use file_write when you need to create a new file or rewrite it entirely.',
  inputSchema: s.object({
    path: s.string().describe('Absolute path to the file to edit.'),
    old_string: s.string().describe(
      'The exact string to find and replace. Must match character-for-character including whitespace and newlines.',
    ),
    new_string: s.string().describe('The replacement string that will be inserted in place of `old_string`.'),
    replace_all: s.boolean().optional().describe(
      'When true, replace every occurrence of `old_string` instead of requiring it to be unique. Defaults to false.',
    ),
  }),
  execute: async (input, context) => {
    const safe = await resolvePathWithinCwd(input.path, context)
    if (!safe.ok) return { data: safe.error, isError: true }
    let original
    try {
      original = (await readFile(safe.path)).toString('utf8')
    } catch (error) {
      return { data: `Could not read "${safe.path}": ${why(error, 'Unknown error reading file.')}`, isError: true }
    }
    const count = occurrences(original, input.old_string)
    if (count === 0) {
      return {
        data:
          `The string to replace was not found in "${safe.path}".\n` +
          'Make sure `old_string` matches the file contents exactly, including indentation and line endings.',
        isError: true,
      }
    }
    const all = input.replace_all ?? false
    if (count > 1 && !all) {
      return {
        data:
          `\`old_string\` appears ${count} times in "${safe.path}". ` +
          'Provide a more specific string to uniquely identify the section you want ' +
          'to replace, or set `replace_all: true` to replace every occurrence.',
        isError: true,
      }
    }
    // One replacement goes through String.prototype.replace, as OMA's does (`$&` and the like in
    // `new_string` act as replacement patterns); replace_all splices the text literally.
    const updated = all
      ? original.split(input.old_string).join(input.new_string)
      : original.replace(input.old_string, input.new_string)
    try {
      await writeFile(safe.path, updated, 'utf8')
    } catch (error) {
      return { data: `Failed to write "${safe.path}": ${why(error, 'Unknown error writing file.')}`, isError: true }
    }
    const replaced = all ? count : 1
    return { data: `Replaced ${plural(replaced, 'occurrence')} in "${safe.path}".`, isError: false }
  },
})
