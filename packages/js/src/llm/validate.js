// A JavaScript-side pre-walk of OMA's shape guard (docs/messages.md), run before JSON.stringify.
//
// The component runs the guard itself on the JSON text, so this walk only has to catch what JSON
// cannot carry: `undefined`, functions, symbols and BigInts change their type word (`got
// undefined`, `got function`) or disappear when stringified. The walk follows the guard's check
// order and stops, leaving the verdict to the component, at the first failure JSON carries
// faithfully; it throws only where a value JSON cannot carry decides the message. After the
// guard, values that cannot be copied (functions, symbols anywhere in the tree) fail as OMA's
// structuredClone step fails, and cycles or BigInts (which JSON cannot carry) fail with an
// InvalidMessageError that names the path.

import { InvalidMessageError } from '../errors.js'

const STOP = Symbol('stop')

function word(value) {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'array'
  return typeof value
}

function nonJson(value) {
  const t = typeof value
  return t === 'undefined' || t === 'function' || t === 'symbol' || t === 'bigint'
}

function isObject(value) {
  return value !== null && typeof value === 'object'
}

const WS = /^[\s\uFEFF]*$/
const MIME = /^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*\/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*$/
const B64 = /^[A-Za-z0-9+/]*={0,2}$/
const B64_CHARS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'

function blank(s) {
  return WS.test(s)
}

function canonicalBase64(data) {
  if (!B64.test(data)) return false
  const body = data.replace(/=+$/, '')
  if (body.length === 0) return false
  if (data.length % 4 === 1 || body.length % 4 === 1) return false
  const last = B64_CHARS.indexOf(body[body.length - 1])
  if (body.length % 4 === 2 && last % 16 !== 0) return false
  if (body.length % 4 === 3 && last % 4 !== 0) return false
  return true
}

/**
 * Whether the media rules (docs/media.md) accept a source; values JSON drops act as absent. The
 * rules are the component's; this copy decides only where the walk stops (at media the
 * component will refuse with its own message), before anything crosses, and is held to the
 * component's verdict by test/media-parity.test.js over the shared tables.
 */
export function mediaOk(source) {
  if (!isObject(source) || Array.isArray(source)) return false
  const mt = source.media_type
  if (typeof mt !== 'string' || blank(mt) || !MIME.test(mt)) return false
  if (source.type === 'base64') {
    return typeof source.data === 'string' && !blank(source.data) && canonicalBase64(source.data)
  }
  if (source.type === 'url') {
    if (typeof source.url !== 'string' || blank(source.url)) return false
    let url
    try {
      url = new URL(source.url)
    } catch {
      return false
    }
    return url.protocol === 'http:' || url.protocol === 'https:'
  }
  return false
}

function toolResultContent(content, path, precise) {
  if (typeof content === 'string') return
  if (!Array.isArray(content)) {
    if (nonJson(content)) {
      throw new InvalidMessageError(
        `${path} must be a string or a non-empty content-part array, got ${word(content)}`,
      )
    }
    throw STOP
  }
  if (content.length === 0) throw STOP
  for (const part of content) {
    if (!isObject(part) || Array.isArray(part)) throw STOP
    if (part.type === 'text') {
      if (typeof part.text !== 'string') throw STOP
    } else if (part.type === 'image') {
      if (precise && !mediaOk(part.source)) throw STOP
    } else if (part.type === 'file') {
      if (typeof part.filename !== 'string' || blank(part.filename)) throw STOP
      if (precise && !mediaOk(part.source)) throw STOP
    } else {
      throw STOP
    }
  }
}

/**
 * The guard's walk. With `precise` false the media rules are assumed to pass (they are the
 * costly part: a base64 scan per image); see preflightMessages for why that is enough first.
 */
function guard(messages, prefix, precise) {
  if (!Array.isArray(messages)) {
    if (nonJson(messages)) {
      throw new InvalidMessageError(`${prefix} must be an array, got ${word(messages)}`)
    }
    throw STOP
  }
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]
    if (!isObject(message)) {
      if (nonJson(message)) {
        throw new InvalidMessageError(`${prefix}[${i}] must be an object, got ${word(message)}`)
      }
      throw STOP
    }
    const content = message.content
    if (!Array.isArray(content)) {
      if (nonJson(content)) {
        throw new InvalidMessageError(
          `${prefix}[${i}].content must be a ContentBlock[], got ${word(content)}`,
        )
      }
      throw STOP
    }
    for (let j = 0; j < content.length; j++) {
      const block = content[j]
      if (!isObject(block) || typeof block.type !== 'string') throw STOP
      if (block.type === 'tool_result') {
        const at = `${prefix}[${i}].content[${j}]`
        if (typeof block.tool_use_id !== 'string') throw STOP
        if (block.is_error !== undefined && typeof block.is_error !== 'boolean') {
          if (nonJson(block.is_error)) {
            throw new InvalidMessageError(`${at}.is_error must be a boolean when provided`)
          }
          throw STOP
        }
        toolResultContent(block.content, `${at}.content`, precise)
        if (block.is_error === true && typeof block.content !== 'string') throw STOP
      } else if (block.type === 'video') {
        if (precise && !mediaOk(block.source)) throw STOP
      }
    }
  }
}

const CLONE_MESSAGE =
  'messages must contain cloneable structured data (strings, arrays, and plain data objects)'

/** Functions and symbols anywhere (OMA's structuredClone fails); cycles and BigInts (JSON fails). */
function copyable(value, path, seen) {
  const t = typeof value
  if (t === 'function' || t === 'symbol') throw new InvalidMessageError(CLONE_MESSAGE)
  if (t === 'bigint') {
    throw new InvalidMessageError(`${path} must be JSON data, got bigint`)
  }
  if (value === null || t !== 'object') return
  if (typeof value.toJSON === 'function') return
  if (seen.has(value)) {
    throw new InvalidMessageError(`${path} must be JSON data: it contains a circular reference`)
  }
  seen.add(value)
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) copyable(value[i], `${path}[${i}]`, seen)
  } else {
    for (const key of Object.keys(value)) {
      const v = value[key]
      // An undefined property is absent in OMA JSON.
      if (v !== undefined) copyable(v, `${path}.${key}`, seen)
    }
  }
  seen.delete(value)
}

// Deeper than this, `plain` hands over to `copyable` (a cycle, or data that deep, is rare).
const PLAIN_DEPTH = 256

/**
 * Whether `value` holds only what JSON carries (no function, symbol or BigInt) within
 * PLAIN_DEPTH levels, visiting what `copyable` visits in the same order. A fast pass with no
 * path strings and no visited set: `copyable` runs only when this says no, and reports the
 * first problem with its path exactly as before (a cycle makes this pass reach the depth limit).
 */
function plain(value, depth) {
  if (value === null || typeof value !== 'object') {
    const t = typeof value
    return t !== 'function' && t !== 'symbol' && t !== 'bigint'
  }
  if (typeof value.toJSON === 'function') return true
  if (depth >= PLAIN_DEPTH) return false
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const v = value[i]
      if ((v !== null && typeof v === 'object') || typeof v === 'function' || typeof v === 'symbol' || typeof v === 'bigint') {
        if (!plain(v, depth + 1)) return false
      }
    }
    return true
  }
  const keys = Object.keys(value)
  for (let i = 0; i < keys.length; i++) {
    const v = value[keys[i]]
    if (v === undefined || v === null) continue
    const t = typeof v
    if (t === 'object' || t === 'function' || t === 'symbol' || t === 'bigint') {
      if (!plain(v, depth + 1)) return false
    }
  }
  return true
}

/**
 * Throws OMA's InvalidMessageError where JSON would change the guard's verdict on `messages`;
 * returns otherwise (the component checks the rest).
 */
export function preflightMessages(messages, prefix = 'messages') {
  // A quick pass first: the guard without the media rules, then `plain`. The precise walk can
  // only stop earlier than the quick one (at media the rules reject), never throw where the
  // quick one does not, so: a quick stop is a precise stop (return), and a quick pass followed
  // by a clean `plain` means nothing to throw either way. Anything else runs the precise walk.
  try {
    guard(messages, prefix, false)
  } catch (e) {
    if (e === STOP) return
    precisely(messages, prefix)
    return
  }
  if (plain(messages, 0)) return
  precisely(messages, prefix)
}

/**
 * Whether one message passes the guard's quick walk (no stop, nothing thrown) and holds only what
 * JSON carries, as an element of a list (`plain` one level down). The guard checks each message
 * of a list on its own, so a list of such messages passes `preflightMessages` as it is, wherever
 * they stand in it.
 */
export function messageClean(message) {
  try {
    guard([message], 'messages', false)
  } catch {
    return false
  }
  return plain(message, 1)
}

/** The exact walk: the guard with the media rules, then `copyable` with paths. */
function precisely(messages, prefix) {
  try {
    guard(messages, prefix, true)
  } catch (e) {
    if (e === STOP) return
    throw e
  }
  copyable(messages, prefix, new Set())
}

/** `prompt` blocks are checked as the single message `[{role: "user", content: blocks}]`. */
export function preflightBlocks(blocks) {
  preflightMessages([{ role: 'user', content: blocks }])
}

/** JSON text of a value that has passed a preflight. */
export function toJson(value) {
  return JSON.stringify(value)
}
