// OMA's record processors (OMA: observability/processors.ts): FilteringSink keeps the records
// a predicate accepts; SensitiveDataProcessor is the privacy boundary in front of a sink (an
// optional attribute allowlist, credentials and reasoning removed, content kept only where the
// capture policy allows, secrets redacted, strings cut), whose rule is the component's.

import { codec } from '../component.js'
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

/** Calls the component's processing; its refusal thrown as the class OMA's contract names. */
function processRecord(options, record) {
  try {
    return codec.processTraceRecord(options, record)
  } catch (e) {
    const payload = e !== null && typeof e === 'object' && 'payload' in e ? e.payload : undefined
    if (payload !== null && typeof payload === 'object' && typeof payload.message === 'string') {
      throw new (payload.name === 'RangeError' ? RangeError : TypeError)(payload.message)
    }
    throw e
  }
}

/**
 * Hands each record on as OMA's sensitive-data processing leaves it: only the keys of
 * `attributeAllowlist` (when given); no key naming a credential or reasoning content; prompt,
 * completion, tool input and output keys only where `capture` says 'redacted'; every string
 * redacted and cut to `maxContentChars`; stream chunk events dropped with
 * `streamEvents: 'none'`; a span end's status message redacted and cut to 256 characters, its
 * error message to 1024 (left out with `errorMessage: 'code-only'`). The rule is the
 * component's (the codec's `process-trace-record`, the processing every record of a run already
 * passed), which also checks the options: one that is not OMA's throws a TypeError (unknown, or
 * of the wrong type) or a RangeError (not one of its choices) naming it. The record given is
 * never changed; one the component cannot read is dropped.
 */
export class SensitiveDataProcessor extends DelegatingSink {
  #options

  constructor(sink, options = {}) {
    super(sink)
    if (options === null || typeof options !== 'object') throw new TypeError('options must be an object')
    this.#options = JSON.stringify(options).toWellFormed()
    processRecord(this.#options, undefined)
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

  /**
   * The record as the wrapped sink gets it, or undefined when it is dropped. The component
   * answers a record its rule leaves as it is with the text it was given, and such a record is
   * handed on as a copy made here instead of one read from that text.
   */
  process(record) {
    const json = recordJson(record)
    const text = processRecord(this.#options, json)
    if (text === undefined) return undefined
    return text === json ? copyOf(record) : JSON.parse(text)
  }
}

/**
 * A new record with the fields of `record`, its attributes, status and error copied (the ones
 * processing may change), as OMA's processor hands on a new record even when nothing changed.
 */
function copyOf(record) {
  const copy = { ...record, attributes: { ...record.attributes } }
  if (record.status !== null && typeof record.status === 'object') copy.status = { ...record.status }
  if (record.error !== null && typeof record.error === 'object') copy.error = { ...record.error }
  return copy
}

/** A lone surrogate's escape, which JSON.stringify writes and UTF-8 cannot carry. */
const LONE_SURROGATE = /\\u[dD][89a-fA-F]/

/** JSON text of a record for the component: a lone surrogate in a string becomes U+FFFD. */
function recordJson(record) {
  const text = JSON.stringify(record)
  if (text === undefined || !LONE_SURROGATE.test(text)) return text
  return JSON.stringify(record, (_key, value) => (typeof value === 'string' ? value.toWellFormed() : value))
}
