// classifyRunFailure, as users import it, over the shared table (fixtures/run-failures.json):
// every error the table describes gets exactly OMA's status and errorInfo. The Python package
// runs the same table through its evaluation runner's classification.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { classifyRunFailure } from '../src/index.js'
import { errorFrom } from '../src/errors.js'

const table = JSON.parse(readFileSync(new URL('../../../fixtures/run-failures.json', import.meta.url), 'utf8'))

/** The error a row describes (see the table's `contract`). */
function errorOf(row) {
  if (row.oma !== undefined) {
    return errorFrom({ name: row.oma, code: row.code, message: row.message, retryable: row.retryable })
  }
  if (row.cancellation) return Object.assign(new Error(row.message), { name: 'AbortError' })
  const error = row.cause !== undefined ? new Error(row.message, { cause: errorOf(row.cause) }) : new Error(row.message)
  if (row.name !== undefined) error.name = row.name
  for (const key of ['code', 'status', 'statusCode', 'httpStatus']) {
    if (key in row) error[key] = row[key]
  }
  return error
}

test('classifyRunFailure classifies every error of the shared table as OMA does', () => {
  assert.ok(table.cases.length >= 20)
  for (const { name, error, options, expect } of table.cases) {
    assert.deepEqual(classifyRunFailure(errorOf(error), options), expect, name)
  }
})
