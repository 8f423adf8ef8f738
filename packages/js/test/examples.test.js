// The examples harness (test-examples/): a program per OMA single-agent example, type-checked with
// `tsc --strict` against the package with only the import changed, and run against a loopback
// provider; what each run shows (exit code, printed output, every provider request) must equal
// what the same program showed on OMA (test-examples/expected/, recorded once against OMA
// 1.16.1). Programs whose feature is still missing are `todo` with the reason, reported on every
// run. With OMA_DIR set (a built OMA packages/core) OMA's own example files are type-checked
// against the package too, and the programs are run on OMA live as well.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import {
  EXAMPLES, INTEGRATIONS, OMA_TYPECHECKED, OUT_OF_SCOPE, PENDING, emit, expected, observe, omaDir, prepare, prepareOmaExamples, programs,
  singleAgentPrograms, typecheck,
} from '../test-examples/harness.mjs'

const oma = omaDir()

test('every one of OMA\'s 15 single-agent examples has a program here or a stated reason', () => {
  assert.equal(Object.keys(EXAMPLES).length, 15)
  for (const [example, program] of Object.entries(EXAMPLES)) {
    if (program === null) assert.ok(OUT_OF_SCOPE[example], `${example}: no program and no reason`)
    else assert.ok(programs().includes(program), `${example}: programs/${program}.ts is missing`)
  }
  assert.deepEqual(Object.keys(PENDING).filter((p) => !programs().includes(p)), [])
})

test('every one of OMA\'s 3 MCP examples has a program here or a stated reason', () => {
  assert.equal(Object.keys(INTEGRATIONS).length, 3)
  for (const [example, program] of Object.entries(INTEGRATIONS)) {
    if (program === null) assert.ok(OUT_OF_SCOPE[example], `${example}: no program and no reason`)
    else assert.ok(programs().includes(program), `${example}: programs/${program}.ts is missing`)
  }
})

for (const [example, reason] of Object.entries(OUT_OF_SCOPE)) {
  test(`${example}: out of the package`, { skip: reason }, () => {})
}

test('the programs type-check with tsc --strict against the package, the import changed only', () => {
  const result = typecheck(prepare('package', oma, singleAgentPrograms()))
  assert.ok(result.ok, result.output)
})

test('OMA\'s own example files type-check against the package, the imports changed only', { skip: oma ? false : 'OMA_DIR is not set' }, () => {
  const { dir, names } = prepareOmaExamples(oma)
  assert.equal(names.length, 15 + OMA_TYPECHECKED.length)
  const result = typecheck(dir)
  assert.ok(result.ok, result.output)
})

test('run against a loopback provider, each program shows what it showed on OMA', { timeout: 600000 }, async (t) => {
  const out = emit(prepare('package', oma, singleAgentPrograms()), 'package', oma)
  const omaOut = oma ? emit(prepare('oma', oma, singleAgentPrograms()), 'oma', oma) : null
  for (const name of singleAgentPrograms()) {
    const pending = PENDING[name]
    await t.test(name, pending ? { todo: pending } : {}, async (st) => {
      const want = expected(name)
      assert.ok(want, `no recorded OMA observation for ${name} (test-examples/expected/${name}.json)`)
      if (omaOut) assert.deepEqual((await observe(omaOut, name)).observed, want, `${name}: OMA live vs its recording`)
      const ours = await observe(out, name)
      const same = JSON.stringify(ours.observed) === JSON.stringify(want)
      if (pending && same) st.diagnostic(`${name} now matches OMA: remove it from PENDING in test-examples/harness.mjs`)
      assert.equal(ours.observed.exitCode, want.exitCode, `${name}: exit code (stderr: ${ours.stderr.slice(0, 400)})`)
      assert.equal(ours.observed.stdout, want.stdout, `${name}: printed output`)
      assert.equal(ours.observed.requests.length, want.requests.length, `${name}: number of provider requests`)
      assert.deepEqual(ours.observed.requests, want.requests, `${name}: provider requests`)
    })
  }
})
