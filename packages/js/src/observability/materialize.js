// OMA's materializeRun and buildExecutionReceipt (OMA: observability/materialize.ts,
// observability/execution-receipt.ts). Both are rules, so both are the component's: the codec's
// `materialize-run` and `build-execution-receipt` (docs/observability.md), held to the shared
// tables fixtures/observability/materialize.json and receipt.json. This module only calls them.

import { codec } from '../component.js'
import { fromComponent } from '../errors.js'

/**
 * The run one run's records describe, in any order (OMA's `StoredRun`), or null for none;
 * `includeRecords` adds the records sorted by trace and sequence. The records given are not
 * changed. A record that is not what the schema says is refused with a TypeError naming it
 * (`records[3].traceId must be a string`).
 */
export function materializeRun(records, includeRecords = false) {
  if (!Array.isArray(records)) throw new TypeError('records must be an array of trace records')
  if (records.length === 0) return null
  const include = typeof includeRecords === 'boolean' ? includeRecords : Boolean(includeRecords?.includeRecords)
  let text
  try {
    text = codec.materializeRun(JSON.stringify(records), include)
  } catch (e) {
    const error = fromComponent(e)
    throw new TypeError(error instanceof Error ? error.message : String(error))
  }
  return JSON.parse(text)
}

/**
 * OMA's execution receipt of a run's result (an AgentRunResult, or a team's result) and,
 * optionally, its legacy trace events: the facts of the execution, never what the agents wrote.
 * It never throws on what it reads: what it cannot read makes the receipt `partial`.
 */
export function buildExecutionReceipt(result, trace) {
  const resultText = jsonOrNull(result)
  const traceText = trace === undefined ? undefined : jsonOrNull(trace)
  try {
    return JSON.parse(codec.buildExecutionReceipt(resultText, traceText))
  } catch (e) {
    throw fromComponent(e)
  }
}

/**
 * A value as the JSON text the component reads: what JSON cannot hold (a cycle, a BigInt, a
 * function) is read as null, which the receipt reports as partial, as OMA's reading of a value
 * it cannot walk does.
 */
function jsonOrNull(value) {
  try {
    return JSON.stringify(value) ?? 'null'
  } catch {
    return 'null'
  }
}
