// OMA's `defineEvalSet` (OMA: eval/evalset.ts): an eval set checked, copied, trimmed (names,
// versions and case ids, as OMA's schema trims them) and frozen.
import { EvalDefinitionError, deepFreeze, isRecord, isTraceAttribute, refuseUnknown } from './values.js'

const SET_KEYS = ['name', 'version', 'description', 'cases', 'defaults']
const CASE_KEYS = ['id', 'input', 'expected', 'tags', 'metadata']

function trimmed(value, field) {
  if (typeof value !== 'string' || value.trim() === '') throw new EvalDefinitionError(field, `${field} must be a non-empty string`)
  return value.trim()
}

function positive(value, field) {
  if (!Number.isInteger(value) || value < 1) throw new EvalDefinitionError(field, `${field} must be a positive integer`)
  return value
}

const copy = (value) => (value === undefined ? undefined : structuredClone(value))

function evalCase(value, index) {
  const where = `cases[${index}]`
  if (!isRecord(value)) throw new EvalDefinitionError(where, `${where} must be an object`)
  refuseUnknown(value, CASE_KEYS, `${where}.`, 'an eval case')
  if (!('input' in value)) throw new EvalDefinitionError(`${where}.input`, `${where}.input is required`)
  const out = { id: trimmed(value.id, `${where}.id`), input: copy(value.input) }
  if ('expected' in value && value.expected !== undefined) out.expected = copy(value.expected)
  if (value.tags !== undefined) {
    if (!Array.isArray(value.tags) || !value.tags.every((t) => typeof t === 'string')) {
      throw new EvalDefinitionError(`${where}.tags`, `${where}.tags must be an array of strings`)
    }
    out.tags = [...value.tags]
  }
  if (value.metadata !== undefined) {
    if (!isRecord(value.metadata)) throw new EvalDefinitionError(`${where}.metadata`, `${where}.metadata must be an object`)
    for (const [key, item] of Object.entries(value.metadata)) {
      if (!isTraceAttribute(item)) {
        throw new EvalDefinitionError(`${where}.metadata.${key}`,
          `${where}.metadata.${key} must be a string, number, boolean or an array of one of them`)
      }
    }
    out.metadata = copy(value.metadata)
  }
  return out
}

/**
 * OMA's `defineEvalSet`: the set checked (an `EvalDefinitionError` naming the field for a
 * missing or empty name, version or case id, no cases, tags that are not strings, metadata
 * that is not trace attributes, defaults that are not positive integers, or a key that is not
 * one), copied and frozen; a case id used twice throws OMA's `EvalSet case id "x" must be unique.`
 */
export function defineEvalSet(set) {
  if (!isRecord(set)) throw new EvalDefinitionError('', 'an eval set must be an object')
  refuseUnknown(set, SET_KEYS, '', 'an eval set')
  const out = { name: trimmed(set.name, 'name'), version: trimmed(set.version, 'version') }
  if (set.description !== undefined) {
    if (typeof set.description !== 'string') throw new EvalDefinitionError('description', 'description must be a string')
    out.description = set.description
  }
  if (!Array.isArray(set.cases) || set.cases.length === 0) throw new EvalDefinitionError('cases', 'cases must be a non-empty array')
  out.cases = set.cases.map(evalCase)
  const ids = new Set()
  for (const { id } of out.cases) {
    if (ids.has(id)) throw new EvalDefinitionError('cases', `EvalSet case id "${id}" must be unique.`)
    ids.add(id)
  }
  if (set.defaults !== undefined) {
    if (!isRecord(set.defaults)) throw new EvalDefinitionError('defaults', 'defaults must be an object')
    refuseUnknown(set.defaults, ['repeats', 'concurrency'], 'defaults.', 'eval set defaults')
    out.defaults = {}
    for (const [key, value] of Object.entries(set.defaults)) {
      if (value !== undefined) out.defaults[key] = positive(value, `defaults.${key}`)
    }
  }
  return deepFreeze(out)
}
