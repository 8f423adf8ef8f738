// OMA's run identity (OMA: observability/identity.ts): the run id, the attempt and the W3C trace
// and root span ids every result and trace event of a run carries.

import { hex, uuid } from '../utils/random.js'

/** OMA's RunIdentity: a run id (a UUID unless given), attempt 1, W3C trace and span ids. */
export function runIdentity(runId) {
  if (runId !== undefined && (typeof runId !== 'string' || runId.length < 1 || runId.length > 128)) {
    throw new TypeError('runId must be a string of 1 to 128 characters')
  }
  return {
    runId: runId ?? uuid(),
    attempt: 1,
    traceId: hex(16),
    rootSpanId: hex(8),
  }
}
