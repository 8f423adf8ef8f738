// Small shared pieces of the evaluation modules (OMA: eval/): trace attribute values, the typed
// errors that name a field, frozen copies.

/** A string, finite number or boolean, or an array of one kind of them (OMA's TraceAttributeValue). */
export function isTraceAttribute(value) {
  if (typeof value === 'string' || typeof value === 'boolean') return true
  if (typeof value === 'number') return Number.isFinite(value)
  if (!Array.isArray(value)) return false
  if (value.length === 0) return true
  const kind = typeof value[0]
  if (kind !== 'string' && kind !== 'number' && kind !== 'boolean') return false
  return value.every((item) => typeof item === kind && (kind !== 'number' || Number.isFinite(item)))
}

export const isRecord = (value) => value !== null && typeof value === 'object' && !Array.isArray(value)

/** Freezes a value and everything in it (OMA freezes defined eval sets). */
export function deepFreeze(value) {
  if (value === null || typeof value !== 'object' || Object.isFrozen(value)) return value
  Object.freeze(value)
  for (const child of Object.values(value)) deepFreeze(child)
  return value
}

/** A definition that is not one: `field` says where, in OMA's spelling (`cases[1].id`). */
export class EvalDefinitionError extends TypeError {
  constructor(field, message) {
    super(message)
    this.name = 'EvalDefinitionError'
    this.field = field
  }
}

/** Refuses a key that is not one of `known`, by name: nothing a caller sent is dropped. */
export function refuseUnknown(value, known, where, what) {
  for (const key of Object.keys(value)) {
    if (!known.includes(key)) {
      throw new EvalDefinitionError(`${where}${key}`, `${where}${key} is not a field of ${what} (known: ${known.join(', ')})`)
    }
  }
}
