// The examples harness for OMA's observability examples (test-examples/README.md): a program
// written like each of integrations/observability-v2's, type-checked with `tsc --strict` against
// the package with only its imports changed, and run; what it shows (exit code, output, and no
// provider request: the programs answer with an LLM adapter of their own) must equal
// test-examples/expected/, recorded from the same programs on OMA. The compile-only program is
// type-checked and not run, as in OMA. With OMA_DIR set, OMA's own example files are
// type-checked against the package too, the programs run on OMA live, and OMA's OpenTelemetry
// adapter (`@open-multi-agent/otel`, not on the registry) is built from OMA's checkout, so that
// otel-provider's program runs on both sides and the adapter's source is type-checked against
// the package; without OMA_DIR that program is skipped with its reason.
import { after, test } from 'node:test'
import assert from 'node:assert/strict'
import {
  COMPILE_ONLY, NEEDS_OTEL, OBSERVABILITY, OMA_OTEL_FILES, OTEL_SKIP, OUT_OF_SCOPE, PENDING, emit, expected, observabilityPrograms,
  observe, omaDir, otelProject, prepare, prepareOmaObservabilityExamples, programs, typecheck, typecheckOtelSource,
} from '../test-examples/harness.mjs'

const oma = omaDir()
const otel = oma ? otelProject(oma) : null
after(() => otel?.close())
const otelSkip = otel ? false : oma ? 'OMA\'s checkout has no packages/otel' : OTEL_SKIP

test('every one of OMA\'s 9 observability-v2 examples has a program here or a stated reason', () => {
  assert.equal(Object.keys(OBSERVABILITY).length, 9)
  for (const [example, program] of Object.entries(OBSERVABILITY)) {
    if (program === null) assert.ok(OUT_OF_SCOPE[example], `${example}: no program and no reason`)
    else assert.ok(programs().includes(program), `${example}: programs/${program}.ts is missing`)
  }
})

const withOtel = otel ? `, ${OMA_OTEL_FILES.join(' and ')} with @open-multi-agent/otel installed` : ''
test(`OMA's own observability example files type-check against the package, the imports changed only${withOtel}`, { skip: oma ? false : 'OMA_DIR is not set' }, () => {
  const result = typecheck(prepareOmaObservabilityExamples(oma, otel))
  assert.ok(result.ok, result.output)
})

test('OMA\'s OpenTelemetry adapter source type-checks against the package as its @open-multi-agent/core', { skip: otelSkip }, () => {
  const result = typecheckOtelSource(otel)
  assert.ok(result.ok, result.output)
})

for (const name of NEEDS_OTEL) {
  if (!otel) test(`${name}: run`, { skip: otelSkip }, () => {})
}

test('the observability programs type-check and each run shows what OMA showed', { timeout: 300000 }, async (t) => {
  const names = observabilityPrograms().filter((program) => otel || !NEEDS_OTEL.includes(program))
  const dir = prepare('package', oma, names, 'package-observability', otel)
  const checked = typecheck(dir)
  assert.ok(checked.ok, checked.output)
  const out = emit(dir, 'package', oma)
  const omaOut = oma ? emit(prepare('oma', oma, names, 'oma-observability', otel), 'oma', oma) : null
  for (const name of names.filter((program) => !COMPILE_ONLY.includes(program))) {
    const pending = PENDING[name]
    await t.test(name, pending ? { todo: pending } : {}, async (st) => {
      const want = expected(name)
      assert.ok(want, `no recorded observation for ${name} (test-examples/expected/${name}.json)`)
      if (omaOut) assert.deepEqual((await observe(omaOut, name)).observed, want, `${name}: OMA live vs the recording`)
      const ours = await observe(out, name)
      if (pending && JSON.stringify(ours.observed) === JSON.stringify(want)) {
        st.diagnostic(`${name} now matches OMA: remove it from PENDING in test-examples/harness.mjs`)
      }
      assert.equal(ours.observed.exitCode, want.exitCode, `${name}: exit code (stderr: ${ours.stderr.slice(0, 400)})`)
      assert.equal(ours.observed.stdout, want.stdout, `${name}: printed output`)
      assert.deepEqual(ours.observed.requests, want.requests, `${name}: provider requests`)
    })
  }
})
