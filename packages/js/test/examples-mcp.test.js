// The examples harness for OMA's MCP examples (test-examples/README.md): the program written
// like integrations/mcp-github, type-checked with `tsc --strict` against the package with only
// its imports changed, and run against the loopback provider with the stand-in `npx` starting
// the local MCP server (built with the official SDK); what it shows (exit code, output, every
// provider request) must equal test-examples/expected/. Kept apart from the single-agent
// examples so each file stays within the suite's per-file time.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { emit, expected, mcpPrograms, observe, omaDir, prepare, typecheck } from '../test-examples/harness.mjs'

const oma = omaDir()

test('the MCP programs type-check and each run shows what was recorded', { timeout: 300000 }, async (t) => {
  const dir = prepare('package', oma, mcpPrograms(), 'package-mcp')
  const checked = typecheck(dir)
  assert.ok(checked.ok, checked.output)
  const out = emit(dir, 'package', oma)
  const omaOut = oma ? emit(prepare('oma', oma, mcpPrograms(), 'oma-mcp'), 'oma', oma) : null
  for (const name of mcpPrograms()) {
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
