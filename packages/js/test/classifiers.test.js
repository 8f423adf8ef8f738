// The `oma-component/classifiers` subpath, imported through the package's own name as users
// import it: classifyBashCommand gives, for each command of the shared table
// (fixtures/bash-risk.json, recorded from OMA 1.16.1's own classifier), OMA's level and reason.
// The rule is the component's; the core and both worlds run the same table.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { classifyBashCommand } from 'oma-component/classifiers'

const table = JSON.parse(readFileSync(new URL('../../../fixtures/bash-risk.json', import.meta.url), 'utf8'))

test('classifyBashCommand agrees with OMA on every command of the shared table', () => {
  assert.ok(table.cases.length >= 40)
  for (const { command, level, reason } of table.cases) {
    assert.deepEqual(classifyBashCommand(command), { level, reason }, JSON.stringify(command))
  }
})

test('a non-string command is review, as in OMA', () => {
  for (const command of [42, undefined, null, { command: 'rm -rf /' }]) {
    assert.deepEqual(classifyBashCommand(command), { level: 'review', reason: 'Empty or non-string command; cannot classify.' })
  }
})
