// The guard's pre-walk (src/llm/validate.js) keeps a copy of the media rules, to stop where the
// component will refuse a source with its own message. It must agree with the component's rules
// on every source: each row of the shared media tables (fixtures/media-rules.json, the tables
// of docs/media.md) and every media source of the guard and typing tables (fixtures/accept.json,
// reject.json, guard_cases.json), judged by both, in a video block and in tool-result image and
// file parts.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { driver } from '../src/component.js'
import { mediaOk } from '../src/llm/validate.js'

const fixture = (name) => JSON.parse(readFileSync(new URL(`../../../fixtures/${name}`, import.meta.url), 'utf8'))

/** The sources of the media tables: each value in the field its table is about. */
function tableSources() {
  const rules = fixture('media-rules.json')
  const rows = []
  for (const values of Object.values(rules.mime)) {
    for (const mt of values) rows.push({ type: 'base64', media_type: mt, data: 'AAAA' })
  }
  for (const values of Object.values(rules.base64)) {
    for (const data of values) rows.push({ type: 'base64', media_type: 'video/mp4', data })
  }
  for (const values of Object.values(rules.url)) {
    for (const url of values) rows.push({ type: 'url', media_type: 'video/mp4', url })
  }
  return rows
}

/** Every `source` object in the guard and typing tables' inputs. */
function fixtureSources() {
  const found = []
  const walk = (value) => {
    if (Array.isArray(value)) value.forEach(walk)
    else if (value !== null && typeof value === 'object') {
      if (value.source !== undefined) found.push(value.source)
      Object.values(value).forEach(walk)
    }
  }
  for (const name of ['accept.json', 'reject.json', 'guard_cases.json']) walk(fixture(name))
  return found
}

/** An agent of the component whose run input is judged (no run is stepped: nothing is sent). */
const judge = driver.Agent.create(JSON.stringify({ model: 'm', provider: 'openai', apiKey: 'k' }))

/**
 * The component's verdict on `source` at `place`: whether a run's input holding it is accepted
 * (a run's messages pass the same guard and typing as every OMA JSON message list).
 */
function componentAccepts(source, place) {
  const content = place === 'video'
    ? [{ type: 'video', source }]
    : [{
        type: 'tool_result',
        tool_use_id: 't',
        content: [place === 'image' ? { type: 'image', source } : { type: 'file', filename: 'f.bin', source }],
      }]
  try {
    judge.run(JSON.stringify([{ role: 'user', content }]), { seed: 0n })
    return true
  } catch (e) {
    const message = e?.payload?.message ?? e?.message ?? String(e)
    assert.match(message, /source/, `the component refused something other than the source: ${message}`)
    return false
  }
}

test('the pre-walk\'s media rules agree with the component\'s on every source of the shared tables', () => {
  const sources = [...tableSources(), ...fixtureSources()]
  assert.ok(sources.length > 100, `${sources.length} sources`)
  let accepted = 0
  for (const source of sources) {
    for (const place of ['video', 'image', 'file']) {
      const expected = componentAccepts(source, place)
      assert.equal(mediaOk(source), expected, `${place}: ${JSON.stringify(source)}`)
      if (expected) accepted++
    }
  }
  assert.ok(accepted > 0 && accepted < sources.length * 3, 'both verdicts occur')
})
