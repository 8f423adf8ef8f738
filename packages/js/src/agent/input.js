// Run and prompt input for the component (OMA: agent/input.ts): checked first by the shape
// guard's pre-walk (llm/validate.js), then written as JSON text, with long media data handed
// beside the text rather than through it.

import { messageClean, preflightBlocks, preflightMessages } from '../llm/validate.js'

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
function inputParts(value, list, write = JSON.stringify) {
  const strings = []
  const rest = list(value, strings)
  const text = write(rest) ?? 'null'
  return strings.length === 0 ? { text } : { text, strings }
}

/**
 * Messages' JSON texts kept for a conversation handed over again (OMA's `run(messages)` takes
 * the whole history each time, mostly the same message objects): `JSON.stringify` checks every
 * character of every string for escapes, a tenth of a run with a 51-turn history. Each plain
 * message's text is kept with a flat copy of what it held (keys, primitives and the shape of
 * its objects and arrays, in `JSON.stringify`'s order); the text is used again only when a walk
 * of the message finds exactly that (`sameAs`), so a message changed in place, at any depth, is
 * written again. Keyed weakly by the message object: kept while the caller keeps it.
 */
const kept = new WeakMap()

/**
 * The first messages of lists written whole. A list none of whose messages is kept, and whose
 * first message was not handed over before, is written whole (one `JSON.stringify` of the list
 * is about twice as fast as one per message), so a caller that makes new message objects for
 * every run pays about what it paid before (one entry here a run, not one a message); the next
 * run that hands the same first message over writes and keeps each message.
 */
const seen = new WeakSet()

/** Messages whose text is longer than this are written each time (the copy would double them). */
const KEEP_MAX = 256 * 1024

// Markers of an object and an array in a flat copy (never equal to a primitive).
const OBJECT = {}
const ARRAY = {}

// Deeper than this a message is not kept (`JSON.stringify` then judges it as before).
const FLAT_DEPTH = 64

/**
 * Appends `value`'s flat copy to `out`; false for what `JSON.stringify` may write differently
 * from one call to the next, or not at all (a `toJSON`, an object that is not plain, a function,
 * symbol or BigInt, a cycle), which is then never kept.
 */
function flatten(value, out, depth) {
  if (value === null || typeof value !== 'object') {
    const t = typeof value
    if (t === 'function' || t === 'symbol' || t === 'bigint') return false
    out.push(value)
    return true
  }
  if (depth >= FLAT_DEPTH) return false
  if (plainArray(value)) {
    out.push(ARRAY, value.length)
    for (let i = 0; i < value.length; i++) if (!flatten(value[i], out, depth + 1)) return false
    return true
  }
  if (!plainObject(value)) return false
  const keys = Object.keys(value)
  out.push(OBJECT, keys.length)
  for (let i = 0; i < keys.length; i++) {
    out.push(keys[i])
    if (!flatten(value[keys[i]], out, depth + 1)) return false
  }
  return true
}

/**
 * Whether `value` holds what `flat` recorded from position `at`: the index after it, or -1. A
 * flat copy holds only plain objects and arrays and primitives, so equal copies are written to
 * the same text.
 */
function sameAs(value, flat, at, depth) {
  if (value === null || typeof value !== 'object') return flat[at] === value ? at + 1 : -1
  if (depth >= FLAT_DEPTH) return -1
  const marker = flat[at]
  if (marker === ARRAY) {
    if (!plainArray(value) || flat[at + 1] !== value.length) return -1
    at += 2
    for (let i = 0; i < value.length && at >= 0; i++) at = sameAs(value[i], flat, at, depth + 1)
    return at
  }
  if (marker !== OBJECT || !plainObject(value)) return -1
  const keys = Object.keys(value)
  if (flat[at + 1] !== keys.length) return -1
  at += 2
  for (let i = 0; i < keys.length && at >= 0; i++) {
    if (flat[at] !== keys[i]) return -1
    at = sameAs(value[keys[i]], flat, at + 1, depth + 1)
  }
  return at
}

/** The kept text of `message` if it still holds what it held when kept, else undefined. */
function keptText(message) {
  const entry = kept.get(message)
  if (entry === undefined) return undefined
  if (sameAs(message, entry.flat, 0, 0) === entry.flat.length) return entry.text
  kept.delete(message)
  return undefined
}

/**
 * A message's JSON text, kept for the next run when it can be, with whether the message is clean
 * (`messageClean`: it passes the shape guard's quick walk and holds only JSON).
 */
function keepText(message) {
  const flat = []
  const keep = flatten(message, flat, 0)
  const text = JSON.stringify(message)
  if (keep && text.length <= KEEP_MAX) kept.set(message, { text, flat, clean: messageClean(message) })
  return text
}

/**
 * The text of a list handed over again whose every message is kept, unchanged (`sameAs`) and
 * clean, else undefined. Such a list passes the pre-walk (`preflightMessages` checks each
 * message on its own, and each passed it when kept), holds no long media data (a message that
 * had some was copied, never kept), and is written as `messagesText` would write it: the checks
 * before the text is written are this one walk.
 */
function keptListText(messages) {
  if (!plainArray(messages) || messages.length === 0) return undefined
  const last = listTexts.get(messages)
  let same = last !== undefined && last.items.length === messages.length
  const texts = new Array(messages.length)
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]
    if (!plainObject(message)) return undefined
    const entry = kept.get(message)
    if (entry === undefined || !entry.clean || sameAs(message, entry.flat, 0, 0) !== entry.flat.length) return undefined
    texts[i] = entry.text
    if (same && (last.items[i] !== message || last.texts[i] !== entry.text)) same = false
  }
  if (same) return last.text
  const text = `[${texts.join(',')}]`
  listTexts.set(messages, { items: messages.slice(), texts, text })
  return text
}

/**
 * The last text `keptListText` wrote for a list, with the messages and texts it was written
 * from: the same list holding the same messages, each still as kept, has that text again, which
 * is not joined (nor, once the component has read it, flattened) again.
 */
const listTexts = new WeakMap()

/**
 * `JSON.stringify(messages)`, with the texts of messages handed over unchanged before used
 * again (`kept`; `seen` for when to start keeping). `original` is the caller's list: a message that `messagesWithout`
 * copied (its media taken out) is new on every run and is written each time. A list with
 * anything but plain objects is written whole, as before (`toJSON` is called with the
 * element's index as its key only then).
 */
function messagesText(messages, original) {
  if (!plainArray(messages) || !messages.every(plainObject)) return JSON.stringify(messages)
  const texts = new Array(messages.length)
  let known = messages.length > 0 && seen.has(messages[0])
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]
    if (message !== original[i]) continue
    texts[i] = keptText(message)
    if (texts[i] !== undefined) known = true
  }
  if (!known) {
    if (messages.length > 0) seen.add(messages[0])
    return JSON.stringify(messages)
  }
  let text = '['
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]
    if (i > 0) text += ','
    if (texts[i] !== undefined) text += texts[i]
    else if (message === original[i]) text += keepText(message)
    else text += JSON.stringify(message)
  }
  return `${text}]`
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
  const text = keptListText(input)
  if (text !== undefined) return { text }
  preflightMessages(input)
  return inputParts(input, messagesWithout, (messages) => messagesText(messages, input))
}

/** `prompt` input (a string or content blocks) for the component, as `runInputJson` gives it. */
export function promptInputJson(input) {
  if (typeof input === 'string') return { text: JSON.stringify(input) }
  preflightBlocks(input)
  return inputParts(input, (blocks, strings) => blocksWithout(blocks, '', strings))
}
