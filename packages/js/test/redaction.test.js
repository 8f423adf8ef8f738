// OMA's secret redaction as the package applies it on its side (a `bash` tool's output,
// classifyRunFailure's messages, the shell tool's environment filter): every row of the shared
// table (fixtures/redaction.json, recorded from OMA 1.16.1's own functions) through the
// package's functions, which call the component's rules (the core and both worlds run the same
// table).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { classifyRunFailure } from '../src/index.js'
import { isSensitiveName, redactSensitiveText } from '../src/utils/redaction.js'

const table = JSON.parse(readFileSync(new URL('../../../fixtures/redaction.json', import.meta.url), 'utf8'))

test('redactSensitiveText gives OMA\'s text for every row of the shared table', () => {
  assert.ok(table.texts.length >= 40)
  for (const { text, redacted } of table.texts) {
    assert.equal(redactSensitiveText(text), redacted, JSON.stringify(text))
  }
})

test('isSensitiveName (the shell tool\'s environment filter) agrees with OMA on every name of the shared table', () => {
  for (const { name, sensitive } of table.names) {
    assert.equal(isSensitiveName(name), sensitive, name)
  }
})

test('classifyRunFailure redacts its messages with the same rules, then cuts them', () => {
  for (const { text, redacted } of table.texts.filter((row) => row.text !== '')) {
    const { status, errorInfo } = classifyRunFailure(new Error(text))
    assert.equal(errorInfo.message, redacted.slice(0, 1024), JSON.stringify(text))
    assert.equal(status.message, redacted.slice(0, 256), JSON.stringify(text))
  }
})

test('a lone surrogate, which UTF-8 cannot carry to the component, comes back as U+FFFD', () => {
  assert.equal(redactSensitiveText('a\uD800 api_key=x'), 'a\uFFFD api_key=[redacted]')
  assert.equal(redactSensitiveText(''), '')
})
