// `oma-component/eval/file`: FileEvalStore held to fixtures/eval/file-store.json and the files
// beside it (the Python package runs the same table: the two packages read and write one format),
// then reopening, compaction, a failed write and closing.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { copyFileSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { FileEvalStore, FileEvalStoreError } from 'oma-component/eval/file'
import { EvalStoreError } from 'oma-component/eval'

const FIXTURES = fileURLToPath(new URL('../../../fixtures/eval/', import.meta.url))
const TABLE = JSON.parse(readFileSync(join(FIXTURES, 'file-store.json'), 'utf8'))
const scratch = () => mkdtempSync(join(tmpdir(), 'oma-eval-file-'))

for (const entry of TABLE.open) {
  test(`file-store table, open: ${entry.file}`, async () => {
    const dir = scratch()
    try {
      const path = join(dir, 'store.ndjson')
      copyFileSync(join(FIXTURES, 'file-store', entry.file), path)
      if (entry.expect.error !== undefined) {
        await assert.rejects(FileEvalStore.open(path), (error) => {
          assert.ok(error instanceof FileEvalStoreError, String(error))
          const got = { code: error.code, message: error.message, ...(error.lineNumber !== undefined ? { lineNumber: error.lineNumber } : {}) }
          assert.deepEqual(got, entry.expect.error)
          return true
        })
        return
      }
      const seen = []
      const store = await FileEvalStore.open(path, { onDiagnostic: (d) => seen.push(d) })
      assert.deepEqual(store.records().map((r) => r.recordId), entry.expect.records)
      assert.deepEqual(store.getDiagnostics(), entry.expect.diagnostics)
      assert.deepEqual(seen, entry.expect.diagnostics)
      assert.equal(statSync(path).size, entry.expect.sizeAfterOpen)
      await store.close()
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
}

for (const entry of TABLE.writes) {
  test(`file-store table, writes: ${entry.file}`, async () => {
    const dir = scratch()
    try {
      const path = join(dir, 'nested', 'store.ndjson')
      const store = await FileEvalStore.open(path)
      await store.append(entry.append)
      await store.delete({ evalRunId: entry.deleteEvalRunId })
      await store.close()
      assert.equal(statSync(path).mode & 0o777, 0o600)
      const want = readFileSync(join(FIXTURES, 'file-store', entry.file), 'utf8')
      const ids = [...want.matchAll(/"batchId":"([^"]+)"/g)].map((m) => m[1])
      const written = [...new Set([...readFileSync(path, 'utf8').matchAll(/"batchId":"([^"]+)"/g)].map((m) => m[1]))]
      let got = readFileSync(path, 'utf8')
      const wanted = [...new Set(ids)]
      assert.equal(written.length, wanted.length)
      written.forEach((id, i) => { got = got.split(id).join(wanted[i]) })
      assert.equal(got, want)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
}

const record = (id, ts = 1, run = 'nightly', score = 1) => ({
  schemaVersion: 1, recordId: id, evalRunId: run, source: 'offline', timestampUnixMs: ts,
  scorer: { name: 'exact', version: '1' }, status: 'scored', score, metadata: {},
})

test('records survive reopening and compaction; refusals write nothing; a closed store refuses', async () => {
  const dir = scratch()
  try {
    const path = join(dir, 'evals.ndjson')
    let store = await FileEvalStore.open(path)
    assert.deepEqual(await store.append([record('a', 1), record('b', 2, 'other')]), { written: 2, deduplicated: 0, diagnostics: [] })
    assert.deepEqual(await store.append([record('a', 1)]), { written: 0, deduplicated: 1, diagnostics: [] })
    await store.delete({ evalRunId: 'other' })
    const size = statSync(path).size
    await assert.rejects(store.append([{ ...record('c'), score: 2 }]), (e) => e instanceof EvalStoreError && e.field === 'records[0].score')
    assert.equal(statSync(path).size, size)
    await store.flush()
    await store.close()
    await store.close()
    await assert.rejects(store.query({}), { code: 'CLOSED' })
    store = await FileEvalStore.open(path)
    assert.deepEqual(store.records().map((r) => r.recordId), ['a'])
    assert.deepEqual(await store.compact(), { recordsWritten: 1, fileSizeBytes: statSync(path).size })
    await store.close()
    store = await FileEvalStore.open(path)
    assert.deepEqual((await store.query({})).items.map((r) => r.recordId), ['a'])
    await store.close()
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

test('a leftover compaction file is reported beside the file and refused without it', async () => {
  const dir = scratch()
  try {
    const path = join(dir, 'evals.ndjson')
    writeFileSync(`${path}.compact.tmp`, 'partial')
    await assert.rejects(FileEvalStore.open(path), { code: 'STALE_COMPACTION_FILE' })
    const created = await FileEvalStore.open(join(dir, 'other.ndjson'))
    await created.close()
    copyFileSync(join(dir, 'other.ndjson'), path)
    const store = await FileEvalStore.open(path)
    assert.deepEqual(store.getDiagnostics().map((d) => d.code), ['stale_compaction_file'])
    await store.close()
    await assert.rejects(FileEvalStore.open(''), { code: 'INVALID_PATH' })
    await assert.rejects(FileEvalStore.open(path, { lock: true }), /does not support the option "lock"/)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

test('a write that fails is cut back: the store and the file are as they were', async () => {
  const dir = scratch()
  try {
    const path = join(dir, 'evals.ndjson')
    const store = await FileEvalStore.open(path)
    await store.append([record('a')])
    const before = readFileSync(path)
    rmSync(path)
    writeFileSync(path, before)
    // A directory in place of the file makes the next write fail after the in-memory append.
    rmSync(path)
    const { mkdirSync } = await import('node:fs')
    mkdirSync(path)
    await assert.rejects(store.append([record('b')]), (e) => e instanceof FileEvalStoreError)
    rmSync(path, { recursive: true })
    writeFileSync(path, before)
    await store.close().catch(() => {})
    const reopened = await FileEvalStore.open(path)
    assert.deepEqual(reopened.records().map((r) => r.recordId), ['a'])
    await reopened.close()
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})
