// A small schema kit for the built-in tools' inputs. The package imports no zod, yet the
// built-ins must behave as OMA's zod schemas do: the same JSON Schema sent to the model (this
// kit's objects carry a zod 3 shaped `_def`, so `zodToJsonSchema` reads them as it reads zod) and
// the same validation (`safeParse` with zod 3's issue messages and paths for the types used
// here: objects of strings, numbers and booleans, optional, `int`, `nonnegative`, `positive`,
// string `min`; unknown keys dropped). test/builtin-tools.test.js checks it against zod itself.

/** zod 3's name for the type of a value, as its messages print it. */
function received(value) {
  if (value === undefined) return 'undefined'
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'array'
  if (typeof value === 'number') return Number.isNaN(value) ? 'nan' : 'number'
  if (value instanceof Date) return 'date'
  if (value instanceof Map) return 'map'
  if (value instanceof Set) return 'set'
  if (value instanceof Promise) return 'promise'
  return typeof value
}

function typeIssue(expected, value, path) {
  const message = value === undefined ? 'Required' : `Expected ${expected}, received ${received(value)}`
  return { code: 'invalid_type', expected, received: received(value), path, message }
}

class Schema {
  constructor(def) {
    this._def = def
  }

  /** A copy carrying `description` (sent to the model as the property's description). */
  describe(description) {
    return new this.constructor({ ...this._def, description })
  }

  /** The schema made optional (absent is valid). */
  optional() {
    return new Optional({ typeName: 'ZodOptional', innerType: this })
  }

  /** zod's `safeParse`: `{success: true, data}` or `{success: false, error: {issues}}`. */
  safeParse(value) {
    const issues = []
    const data = this._check(value, [], issues)
    return issues.length === 0 ? { success: true, data } : { success: false, error: { issues } }
  }
}

class Optional extends Schema {
  _check(value, path, issues) {
    return value === undefined ? undefined : this._def.innerType._check(value, path, issues)
  }
}

class StringSchema extends Schema {
  /** At least `n` characters. */
  min(n) {
    return new StringSchema({ ...this._def, checks: [...this._def.checks, { kind: 'min', value: n }] })
  }

  _check(value, path, issues) {
    if (typeof value !== 'string') {
      issues.push(typeIssue('string', value, path))
      return value
    }
    for (const check of this._def.checks) {
      if (check.kind === 'min' && value.length < check.value) {
        issues.push({
          code: 'too_small', minimum: check.value, type: 'string', inclusive: true, exact: false, path,
          message: `String must contain at least ${check.value} character(s)`,
        })
      }
    }
    return value
  }
}

class NumberSchema extends Schema {
  #with(check) {
    return new NumberSchema({ ...this._def, checks: [...this._def.checks, check] })
  }

  /** An integer. */
  int() {
    return this.#with({ kind: 'int' })
  }

  /** At least 0. */
  nonnegative() {
    return this.#with({ kind: 'min', value: 0, inclusive: true })
  }

  /** Above 0. */
  positive() {
    return this.#with({ kind: 'min', value: 0, inclusive: false })
  }

  _check(value, path, issues) {
    if (typeof value !== 'number' || Number.isNaN(value)) {
      issues.push(typeIssue('number', value, path))
      return value
    }
    for (const check of this._def.checks) {
      if (check.kind === 'int' && !Number.isInteger(value)) {
        issues.push({ code: 'invalid_type', expected: 'integer', received: 'float', path, message: 'Expected integer, received float' })
      } else if (check.kind === 'min' && (check.inclusive ? value < check.value : value <= check.value)) {
        issues.push({
          code: 'too_small', minimum: check.value, type: 'number', inclusive: check.inclusive, exact: false, path,
          message: `Number must be greater than ${check.inclusive ? 'or equal to ' : ''}${check.value}`,
        })
      }
    }
    return value
  }
}

class BooleanSchema extends Schema {
  _check(value, path, issues) {
    if (typeof value !== 'boolean') issues.push(typeIssue('boolean', value, path))
    return value
  }
}

class ObjectSchema extends Schema {
  _check(value, path, issues) {
    if (value === null || typeof value !== 'object' || Array.isArray(value) || received(value) !== 'object') {
      issues.push(typeIssue('object', value, path))
      return value
    }
    const out = {}
    for (const [key, schema] of Object.entries(this._def.shape())) {
      const parsed = schema._check(value[key], [...path, key], issues)
      if (parsed !== undefined || key in value) out[key] = parsed
    }
    return out
  }
}

/** The kit, named as zod names its constructors. */
export const s = {
  string: () => new StringSchema({ typeName: 'ZodString', checks: [] }),
  number: () => new NumberSchema({ typeName: 'ZodNumber', checks: [] }),
  boolean: () => new BooleanSchema({ typeName: 'ZodBoolean' }),
  object: (shape) => new ObjectSchema({ typeName: 'ZodObject', shape: () => shape }),
}
