// Checks shared by the package's option objects: a misspelt or unknown key is refused by name,
// never dropped.

/** Whether `value` is a plain object (not null, not an array). */
export function isObject(value) {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}

/** Refuses keys of one of the package's own option objects that it does not know. */
export function refuseUnknown(what, value, known) {
  if (!isObject(value)) throw new TypeError(`${what} must be an object`)
  for (const key of Object.keys(value)) {
    if (!known.includes(key)) {
      throw new TypeError(`${what} has an unknown key "${key}"; known keys: ${known.join(', ')}`)
    }
  }
}
