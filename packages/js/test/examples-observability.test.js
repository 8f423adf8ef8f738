// The examples harness for OMA's observability examples (test-examples/README.md): a program
// written like each of integrations/observability-v2's, type-checked with `tsc --strict` against
// the package with only its imports changed, and run; what it shows (exit code, output, and no
// provider request: the programs answer with an LLM adapter of their own) must equal
// test-examples/expected/, recorded from the same programs on OMA. The compile-only program is
// type-checked and not run, as in OMA. With OMA_DIR set, OMA's own example files are
// type-checked against the package too, and the programs run on OMA live.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import {
  COMPILE_ONLY, OBSERVABILITY, OUT_OF_SCOPE, emit, expected, observabilityPrograms, observe, omaDir, prepare,
  prepareOmaObservabilityExamples, programs, typecheck,
} from '../test-examples/harness.mjs'

const oma = omaDir()

test('every one of OMA\'s 9 observability-v2 examples has a program here or a stated reason', () => {
  assert.equal(Object.keys(OBSERVABILITY).length, 9)
  for (const [example, program] of Object.entries(OBSERVABILITY)) {
    if (program === null) assert.ok(OUT_OF_SCOPE[example], `${example}: no program and no reason`)
    else assert.ok(programs().includes(program), `${example}: programs/${program}.ts is missing`)
  }
})

test('OMA\'s own observability example files type-check against the package, the imports changed only', { skip: oma ? false : 'OMA_DIR is not set' }, () => {
  const result = typecheck(prepareOmaObservabilityExamples(oma))
  assert.ok(result.ok, result.output)
})

test('the observability programs type-check and each run shows what OMA showed', { timeout: 300000 }, async (t) => {
  const dir = prepare('package', oma, observabilityPrograms(), 'package-observability')
  const checked = typecheck(dir)
  assert.ok(checked.ok, checked.output)
  const out = emit(dir, 'package', oma)
  const omaOut = oma ? emit(prepare('oma', oma, observabilityPrograms(), 'oma-observability'), 'oma', oma) : null
  for (const name of observabilityPrograms().filter((program) => !COMPILE_ONLY.includes(program))) {
    await t.test(name, async () => {
      const want = expected(name)
      assert.ok(want, `no recorded observation for ${name} (test-examples/expected/${name}.json)`)
      if (omaOut) assert.deepEqual((await observe(omaOut, name)).observed, want, `${name}: OMA live vs the recording`)
      const ours = await observe(out, name)
      assert.equal(ours.observed.exitCode, want.exitCode, `${name}: exit code (stderr: ${ours.stderr.slice(0, 400)})`)
      assert.equal(ours.observed.stdout, want.stdout, `${name}: printed output`)
      assert.deepEqual(ours.observed.requests, want.requests, `${name}: provider requests`)
    })
  }
})
