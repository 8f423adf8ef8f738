// OMA's record processors (OMA: observability/processors.ts): FilteringSink keeps the records
// a predicate accepts; SensitiveDataProcessor is the privacy boundary in front of a sink (an
// optional attribute allowlist, credentials and reasoning removed, content kept only where the
// capture policy allows, secrets redacted with the component's rules, strings cut).

import { redactSensitiveText } from '../utils/redaction.js'
import { statsOf } from './sink.js'

class DelegatingSink {
  #sink

  constructor(sink) {
    if (sink === null || typeof sink !== 'object' || typeof sink.emit !== 'function') {
      throw new TypeError('sink must be a trace sink (it has no emit method)')
    }
    this.#sink = sink
  }

  /** The wrapped sink (for subclasses). */
  get sink() {
    return this.#sink
  }

  forceFlush(options) {
    return this.#sink.forceFlush(options)
  }

  shutdown(options) {
    return this.#sink.shutdown(options)
  }

  getStats() {
    return statsOf(this.#sink)
  }
}

/** Hands on the records `filter(record)` accepts; a filter that throws drops the record only. */
export class FilteringSink extends DelegatingSink {
  #filter

  constructor(sink, filter) {
    super(sink)
    if (typeof filter !== 'function') throw new TypeError('filter must be a function of a record')
    this.#filter = filter
  }

  emit(record) {
    let keep
    try {
      keep = this.#filter(record)
    } catch {
      return
    }
    if (keep) this.sink.emit(record)
  }
}

const STRUCTURED_SECRET = /(^|[._-])(authorization|cookie|set_cookie|api[_-]?key|password|passwd|secret|access[_-]?token|refresh[_-]?token|private[_-]?key)($|[._-])/i
const REASONING_CONTENT = /(^|[._-])(reasoning|thinking|chain[_-]?of[_-]?thought|signed[_-]?reasoning)[._-](content|text|data)($|[._-])/i

/** The capture policy's keys, each with its choices (maxContentChars: an integer >= 0). */
const CAPTURE_CHOICES = {
  prompt: ['none', 'redacted'],
  completion: ['none', 'redacted'],
  toolInput: ['none', 'redacted'],
  toolOutput: ['none', 'redacted'],
  errorMessage: ['code-only', 'redacted'],
  stack: [true, false],
  streamEvents: ['none', 'first', 'all'],
}
const CAPTURE_DEFAULTS = {
  prompt: 'none',
  completion: 'none',
  toolInput: 'none',
  toolOutput: 'none',
  errorMessage: 'redacted',
  stack: false,
  streamEvents: 'first',
  maxContentChars: 4_096,
}

/** The capture policy with OMA's defaults; an unknown key or value is refused by name. */
export function capturePolicy(capture) {
  const policy = { ...CAPTURE_DEFAULTS }
  if (capture === undefined) return policy
  if (capture === null || typeof capture !== 'object' || Array.isArray(capture)) throw new TypeError('capture must be an object')
  for (const [key, value] of Object.entries(capture)) {
    if (!Object.hasOwn(CAPTURE_DEFAULTS, key)) {
      throw new TypeError(`capture has an unknown key '${key}'; known keys: ${Object.keys(CAPTURE_DEFAULTS).join(', ')}`)
    }
    if (value === undefined) continue
    if (key === 'maxContentChars') {
      if (!Number.isInteger(value) || value < 0) throw new RangeError(`capture.maxContentChars must be an integer >= 0, got ${String(value)}`)
    } else if (!CAPTURE_CHOICES[key].includes(value)) {
      const choices = CAPTURE_CHOICES[key].map((c) => JSON.stringify(c)).join(' or ')
      throw new TypeError(`capture.${key} must be ${choices}, got ${JSON.stringify(value)}`)
    }
    policy[key] = value
  }
  return policy
}

function contentKind(key) {
  const normal = key.toLowerCase().replaceAll('-', '_')
  if (normal.includes('prompt')) return 'prompt'
  if (normal.includes('completion')) return 'completion'
  if (normal.includes('tool.input') || normal.includes('tool_input') || normal.includes('tool.arguments')) return 'toolInput'
  if (normal.includes('tool.output') || normal.includes('tool_output') || normal.includes('tool.result')) return 'toolOutput'
  return undefined
}

function safeValue(value, maxChars) {
  if (typeof value === 'string') return redactSensitiveText(value).slice(0, maxChars)
  if (Array.isArray(value) && value.every((item) => typeof item === 'string')) {
    return value.map((item) => redactSensitiveText(item).slice(0, maxChars))
  }
  return value
}

/**
 * Hands each record on with its attributes filtered, in this order: only the keys of
 * `attributeAllowlist` (when given); no key naming a credential or reasoning content; prompt,
 * completion, tool input and output keys only where `capture` says 'redacted'; every string
 * redacted and cut to `maxContentChars`. Stream chunk events are dropped with
 * `streamEvents: 'none'`. A span end's status message is redacted and cut to 256 characters,
 * its error message to 1024 (left out with `errorMessage: 'code-only'`). The record given is
 * never changed; a malformed one is dropped.
 */
export class SensitiveDataProcessor extends DelegatingSink {
  #allow
  #capture

  constructor(sink, options = {}) {
    super(sink)
    if (options === null || typeof options !== 'object') throw new TypeError('options must be an object')
    for (const key of Object.keys(options)) {
      if (key !== 'attributeAllowlist' && key !== 'capture') {
        throw new TypeError(`SensitiveDataProcessor has no option '${key}' (attributeAllowlist, capture)`)
      }
    }
    const { attributeAllowlist } = options
    if (attributeAllowlist !== undefined && (!Array.isArray(attributeAllowlist) || !attributeAllowlist.every((k) => typeof k === 'string'))) {
      throw new TypeError('attributeAllowlist must be an array of attribute names')
    }
    this.#allow = attributeAllowlist === undefined ? undefined : new Set(attributeAllowlist)
    this.#capture = capturePolicy(options.capture)
  }

  emit(record) {
    let processed
    try {
      processed = this.process(record)
    } catch {
      return
    }
    if (processed !== undefined) this.sink.emit(processed)
  }

  /** The record as the wrapped sink gets it, or undefined when it is dropped. */
  process(record) {
    const capture = this.#capture
    const attributes = {}
    for (const [key, value] of Object.entries(record.attributes)) {
      if (this.#allow !== undefined && !this.#allow.has(key)) continue
      if (STRUCTURED_SECRET.test(key) || REASONING_CONTENT.test(key)) continue
      const kind = contentKind(key)
      if (kind !== undefined && capture[kind] === 'none') continue
      attributes[key] = safeValue(value, capture.maxContentChars)
    }
    const out = { ...record, attributes }
    if (record.recordType === 'span_event') {
      return record.name === 'stream_chunk' && capture.streamEvents === 'none' ? undefined : out
    }
    if (record.recordType === 'span_start') return out
    const status = { ...record.status }
    if (status.message) status.message = redactSensitiveText(String(status.message)).slice(0, 256)
    out.status = status
    if (record.error !== undefined && record.error !== null) {
      const error = { ...record.error }
      const message = capture.errorMessage === 'code-only' ? undefined : record.error.message
      if (message) error.message = redactSensitiveText(String(message)).slice(0, 1024)
      else delete error.message
      out.error = error
    }
    return out
  }
}
