// Run and prompt input for the component (OMA: agent/input.ts): checked first by the shape
// guard's pre-walk (llm/validate.js), then written as JSON text, with long media data handed
// beside the text rather than through it.

import { preflightBlocks, preflightMessages } from '../llm/validate.js'

/**
 * Strings at least this long whose place in the input is a media source's `data` go to the
 * component beside the JSON text (`run-json-parts`) instead of through `JSON.stringify`, which
 * scans every character of them for escapes (about 1 ms for 1 MiB of base64), and the
 * component's JSON parser, which scans them again. Below it, the one JSON text is cheaper.
 */
const BESIDE = 16 * 1024

function plainObject(value) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false
  const proto = Object.getPrototypeOf(value)
  return (proto === Object.prototype || proto === null) && typeof value.toJSON !== 'function'
}

function plainArray(value) {
  return Array.isArray(value) && Object.getPrototypeOf(value) === Array.prototype && typeof value.toJSON !== 'function'
}

/**
 * Whether a string goes beside the text: long, and well-formed UTF-16 (a lone surrogate, which
 * JSON would carry as an escape, stays in the text, so the component sees what JSON gives it).
 */
function beside(value) {
  return typeof value === 'string' && value.length >= BESIDE && value.isWellFormed?.() === true
}

/** `{...source, data: ''}` when `source.data` goes beside the text (recorded at `pointer`), else null. */
function sourceWithout(source, pointer, strings) {
  if (!plainObject(source) || !beside(source.data)) return null
  strings.push([pointer, source.data])
  return { ...source, data: '' }
}

/**
 * A content-block list with its long media data taken out (copies of the objects on the way,
 * the caller's input untouched), or the list itself when there is none. Each string taken out
 * is pushed to `strings` with its JSON Pointer (`at` is the list's).
 */
function blocksWithout(content, at, strings) {
  if (!plainArray(content)) return content
  let out = content
  for (let j = 0; j < content.length; j++) {
    const block = content[j]
    if (!plainObject(block)) continue
    let copy = null
    if (block.type === 'tool_result') {
      const parts = block.content
      if (!plainArray(parts)) continue
      let partsOut = parts
      for (let k = 0; k < parts.length; k++) {
        const part = parts[k]
        if (!plainObject(part)) continue
        const source = sourceWithout(part.source, `${at}/${j}/content/${k}/source/data`, strings)
        if (source === null) continue
        if (partsOut === parts) partsOut = parts.slice()
        partsOut[k] = { ...part, source }
      }
      if (partsOut !== parts) copy = { ...block, content: partsOut }
    } else {
      const source = sourceWithout(block.source, `${at}/${j}/source/data`, strings)
      if (source !== null) copy = { ...block, source }
    }
    if (copy === null) continue
    if (out === content) out = content.slice()
    out[j] = copy
  }
  return out
}

/** An input for the component: `{text}`, or `{text, strings}` with long media data beside it. */
function inputParts(value, list) {
  const strings = []
  const rest = list(value, strings)
  const text = JSON.stringify(rest) ?? 'null'
  return strings.length === 0 ? { text } : { text, strings }
}

/** A message list with its long media data taken out, as `blocksWithout` does for blocks. */
function messagesWithout(messages, strings) {
  if (!plainArray(messages)) return messages
  let out = messages
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]
    if (!plainObject(message)) continue
    const content = blocksWithout(message.content, `/${i}/content`, strings)
    if (content === message.content) continue
    if (out === messages) out = messages.slice()
    out[i] = { ...message, content }
  }
  return out
}

/**
 * `run`/`stream`/`runAgent` input (a prompt string or OMA messages) for the component: `{text}`,
 * or `{text, strings}` when long media data goes beside the text.
 */
export function runInputJson(input) {
  if (typeof input === 'string') return { text: JSON.stringify(input) }
  preflightMessages(input)
  return inputParts(input, messagesWithout)
}

/** `prompt` input (a string or content blocks) for the component, as `runInputJson` gives it. */
export function promptInputJson(input) {
  if (typeof input === 'string') return { text: JSON.stringify(input) }
  preflightBlocks(input)
  return inputParts(input, (blocks, strings) => blocksWithout(blocks, '', strings))
}
