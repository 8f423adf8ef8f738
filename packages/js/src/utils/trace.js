// OMA's trace sink rule (OMA: utils/trace.ts): observability never breaks a run.

/** OMA's `emitTrace`: a sink that throws, or whose promise rejects, changes nothing. */
export function emitTrace(fn, event) {
  try {
    const result = fn(event)
    if (result && typeof result.catch === 'function') result.catch(() => {})
  } catch {
    // Observability never breaks a run.
  }
}
