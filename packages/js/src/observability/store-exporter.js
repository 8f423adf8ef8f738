// OMA's TraceStoreExporter (OMA: observability/store-exporter.ts): a TraceExporter appending
// each batch to a trace store. Exporting a batch twice is harmless: a store keeps one copy of
// each recordId.

import { TraceStoreError } from './store.js'

/**
 * Appends batches to `store`. A record the store refuses (a TraceStoreError) fails the batch
 * for good (`STORE_UNSUPPORTED_SCHEMA_VERSION` or `STORE_VALIDATION_FAILED`); any other failure
 * is retryable (`STORE_APPEND_FAILED`).
 */
export class TraceStoreExporter {
  #store

  constructor(store) {
    if (store === null || typeof store !== 'object' || typeof store.append !== 'function') {
      throw new TypeError('store must be a trace store (it has no append method)')
    }
    this.#store = store
  }

  async export(records, signal) {
    if (signal?.aborted) return { status: 'retryable', exported: 0, code: 'STORE_EXPORT_ABORTED' }
    try {
      await this.#store.append(records)
    } catch (error) {
      if (error instanceof TraceStoreError) {
        const code = error.code === 'UNSUPPORTED_SCHEMA_VERSION' ? 'STORE_UNSUPPORTED_SCHEMA_VERSION' : 'STORE_VALIDATION_FAILED'
        return { status: 'failure', exported: 0, code }
      }
      return { status: 'retryable', exported: 0, code: 'STORE_APPEND_FAILED' }
    }
    return { status: 'success', exported: records.length }
  }
}
