// OMA's trace store contract (OMA: observability/store.ts): the schema major a store takes and
// TraceStoreError, the typed refusal every store gives for bad input.

/** The record schema major a store takes. */
export const TRACE_STORE_SCHEMA_MAJOR = 2

/**
 * A store refused its input: `code` (`INVALID_ARGUMENT`, `INVALID_CURSOR` or
 * `UNSUPPORTED_SCHEMA_VERSION`), `field` (where, e.g. `records[0].sequence`) and OMA's message.
 */
export class TraceStoreError extends Error {
  constructor(code, message, field) {
    super(message)
    this.name = 'TraceStoreError'
    this.code = code
    if (field !== undefined) this.field = field
  }
}
