"""The file evaluation store (``oma_component.eval.file.FileEvalStore``): the table
fixtures/eval/file-store.json (files opened as they are, what a store writes), then durability:
reopening, a failed write cut back, compaction, closing, stale temp files, threads."""

import builtins
import json
import os
import re
import shutil
import threading

import pytest

from oma_component.eval import EvalStoreError
from oma_component.eval.file import FileEvalStore, FileEvalStoreError

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "eval")
with open(os.path.join(FIXTURES, "file-store.json"), encoding="utf-8") as f:
    TABLE = json.load(f)


def record(rid, ts=1, run="nightly", score=1):
    return {"schemaVersion": 1, "recordId": rid, "evalRunId": run, "source": "offline", "timestampUnixMs": ts,
            "scorer": {"name": "exact", "version": "1"}, "status": "scored", "score": score, "metadata": {}}


@pytest.mark.parametrize("case", TABLE["open"], ids=[c["file"] for c in TABLE["open"]])
def test_open_table(case, tmp_path):
    path = tmp_path / "store.ndjson"
    shutil.copyfile(os.path.join(FIXTURES, "file-store", case["file"]), path)
    seen = []
    expect = case["expect"]
    if "error" in expect:
        with pytest.raises(FileEvalStoreError) as raised:
            FileEvalStore.open(path, on_diagnostic=seen.append)
        error = raised.value
        got = {"code": error.code, "message": error.message}
        if error.line_number is not None:
            got["lineNumber"] = error.line_number
        assert got == expect["error"]
        assert error.path == str(path)
        return
    store = FileEvalStore.open(path, on_diagnostic=seen.append)
    assert [r["recordId"] for r in store.records()] == expect["records"]
    assert seen == expect["diagnostics"] == store.get_diagnostics()
    assert os.path.getsize(path) == expect["sizeAfterOpen"]
    store.close()


@pytest.mark.parametrize("case", TABLE["writes"], ids=["writes"])
def test_writes_table(case, tmp_path):
    path = tmp_path / "new" / "store.ndjson"
    store = FileEvalStore.open(path)
    store.append(case["append"])
    store.delete(eval_run_id=case["deleteEvalRunId"])
    store.close()
    text = path.read_text(encoding="utf-8")
    for i, batch in enumerate(dict.fromkeys(re.findall(r'"batchId":"([^"]+)"', text))):
        text = text.replace(batch, f"b-{i + 1}")
    with open(os.path.join(FIXTURES, "file-store", case["file"]), encoding="utf-8") as f:
        assert text == f.read()
    assert os.stat(path).st_mode & 0o777 == 0o600


def test_records_survive_reopening_and_compaction(tmp_path):
    path = tmp_path / "s.ndjson"
    store = FileEvalStore.open(path)
    store.append([record("a", 1), record("b", 2, run="old"), record("c", 3)])
    store.append([record("a", 1)])  # kept once
    store.apply_retention(max_records=2)
    store.flush()
    store.close()
    again = FileEvalStore.open(path)
    assert [r["recordId"] for r in again.records()] == ["b", "c"]
    size = os.path.getsize(path)
    assert again.compact() == {"recordsWritten": 2, "fileSizeBytes": os.path.getsize(path)}
    assert os.path.getsize(path) < size and not os.path.exists(again.compaction_temp_path)
    again.append([record("d", 4)])
    again.close()
    assert [r["recordId"] for r in FileEvalStore.open(path).records()] == ["b", "c", "d"]


def test_a_failed_write_is_cut_back_and_acknowledges_nothing(tmp_path, monkeypatch):
    path = tmp_path / "s.ndjson"
    store = FileEvalStore.open(path)
    store.append([record("a")])
    size = os.path.getsize(path)
    real_open = builtins.open

    class HalfWriter:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, data):
            self.f.write(data[: len(data) // 2])
            self.f.flush()
            raise OSError(28, "No space left on device")

    def failing_open(file, mode="r", *args, **kwargs):
        f = real_open(file, mode, *args, **kwargs)
        return HalfWriter(f) if mode == "ab" else f

    monkeypatch.setattr(builtins, "open", failing_open)
    with pytest.raises(FileEvalStoreError) as raised:
        store.append([record("b")])
    assert raised.value.code == "WRITE_FAILED" and raised.value.cause_code == "ENOSPC"
    monkeypatch.setattr(builtins, "open", real_open)
    assert os.path.getsize(path) == size
    assert [r["recordId"] for r in store.records()] == ["a"]
    store.append([record("b")])
    store.close()
    assert [r["recordId"] for r in FileEvalStore.open(path).records()] == ["a", "b"]


def test_refusals_change_nothing_and_a_closed_store_refuses(tmp_path):
    path = tmp_path / "s.ndjson"
    store = FileEvalStore.open(path)
    size = os.path.getsize(path)
    with pytest.raises(EvalStoreError):
        store.append([record("bad", score=2)])
    with pytest.raises(EvalStoreError, match="JSON-serializable"):
        store.append([dict(record("x"), metadata={"n": float("nan")})])
    assert os.path.getsize(path) == size
    store.close()
    store.close()
    assert store.is_closed
    with pytest.raises(FileEvalStoreError) as raised:
        store.query()
    assert (raised.value.code, raised.value.message) == ("CLOSED", "FileEvalStore is closing or closed.")


def test_stale_compaction_files(tmp_path):
    path = tmp_path / "s.ndjson"
    (tmp_path / "s.ndjson.compact.tmp").write_text("half")
    with pytest.raises(FileEvalStoreError) as raised:
        FileEvalStore.open(path)
    assert raised.value.code == "STALE_COMPACTION_FILE" and not path.exists()
    FileEvalStore.open(tmp_path / "t.ndjson").close()
    (tmp_path / "t.ndjson.compact.tmp").write_text("half")
    seen = []
    FileEvalStore.open(tmp_path / "t.ndjson", on_diagnostic=seen.append).close()
    assert [d["code"] for d in seen] == ["stale_compaction_file"]
    with pytest.raises(FileEvalStoreError) as raised:
        FileEvalStore.open("")
    assert raised.value.code == "INVALID_PATH"


def test_appends_from_threads_are_serialized(tmp_path):
    path = tmp_path / "s.ndjson"
    store = FileEvalStore.open(path)

    def write(n):
        for i in range(25):
            store.append([record(f"{n}-{i}", ts=i)])

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    store.close()
    assert len(FileEvalStore.open(path).records()) == 100
