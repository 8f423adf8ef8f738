// A run's trace records on their way to the sinks of `OpenMultiAgent`'s `observability` option
// (OMA: observability/runtime.ts). The component makes the records, already processed by the
// run's capture policy (docs/observability.md); this module turns them on for a run, hands each
// batch to the sinks as it comes, and reads the run's identity from its root span.

import { CompositeSink } from './composite.js'
import { LegacyCallbackTraceSink, attachLegacyTraceEvent } from './legacy.js'
import { isObject, refuseUnknown } from '../utils/options.js'

const OBSERVABILITY_KEYS = ['sinks', 'resource', 'capture', 'onDiagnostic']
const RESOURCE_KEYS = ['serviceName', 'serviceVersion', 'deploymentEnvironment', 'release']

/**
 * OMA's `ObservabilityConfig` checked: `{ sinks, resource?, capture?, onDiagnostic? }`, or
 * undefined when there are no sinks (OMA makes no records then). The sinks are joined as OMA
 * joins them: one `CompositeSink` named `OpenMultiAgent` reporting to `onDiagnostic`, so a
 * sink that throws never keeps a record from the others. The capture policy goes to the
 * component, which applies OMA's sensitive-data processing to every record before a sink sees
 * it (OMA wraps each sink but the legacy bridge in a `SensitiveDataProcessor` with it). A
 * `LegacyCallbackTraceSink` among them turns on the legacy events its records carry.
 * `resource` is OMA's too: checked and kept, and, as in OMA 1.16.1, carried by no record.
 */
export function observabilityOf(config) {
  if (config === undefined) return undefined
  refuseUnknown('observability', config, OBSERVABILITY_KEYS)
  const { sinks, resource, capture, onDiagnostic } = config
  if (!Array.isArray(sinks)) throw new TypeError('observability.sinks must be an array of trace sinks')
  sinks.forEach((sink, i) => {
    if (sink === null || typeof sink !== 'object' || typeof sink.emit !== 'function') {
      throw new TypeError(`observability.sinks[${i}] is not a trace sink (it has no emit method)`)
    }
  })
  if (resource !== undefined) {
    refuseUnknown('observability.resource', resource, RESOURCE_KEYS)
    for (const [key, value] of Object.entries(resource)) {
      if (value !== undefined && typeof value !== 'string') throw new TypeError(`observability.resource.${key} must be a string`)
    }
  }
  if (capture !== undefined && !isObject(capture)) throw new TypeError('observability.capture must be an object')
  if (onDiagnostic !== undefined && typeof onDiagnostic !== 'function') {
    throw new TypeError('observability.onDiagnostic must be a function')
  }
  if (sinks.length === 0) return undefined
  return {
    sink: new CompositeSink(sinks, { sinkName: 'OpenMultiAgent', ...(onDiagnostic ? { onDiagnostic } : {}) }),
    capture: capture === undefined ? undefined : { ...capture },
    legacy: sinks.some((sink) => sink instanceof LegacyCallbackTraceSink),
  }
}

/** The session's `records` option for `run`: its capture policy, run id and metadata. */
export function recordOptions(run) {
  const { capture } = run.observability
  return JSON.stringify({
    ...(capture !== undefined ? { capture } : {}),
    runId: run.identity.runId,
    ...(run.metadata !== undefined ? { metadata: run.metadata } : {}),
  })
}

/**
 * Hands one `trace-records` step's records to the run's sinks, each with the legacy event it
 * completes (for a `LegacyCallbackTraceSink`), and takes the run's trace and root span ids from
 * its root span (the run's `identity`, as OMA's result carries it). Nothing a sink does reaches
 * the run: `emit` is called without waiting, and what it throws or rejects with is counted and
 * diagnosed by the composite sink.
 */
export function deliverRecords(run, batch) {
  const sink = run.observability?.sink
  for (const { json, legacy } of batch) {
    const record = JSON.parse(json)
    if (record.recordType === 'span_start' && record.kind === 'run' && record.parentSpanId === undefined) {
      run.identity = { ...run.identity, traceId: record.traceId, rootSpanId: record.spanId }
    }
    if (sink === undefined) continue
    if (legacy !== undefined && legacy !== null) attachLegacyTraceEvent(record, JSON.parse(legacy))
    sink.emit(record)
  }
}
