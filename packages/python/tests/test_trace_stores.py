"""Trace stores (``oma_component.observability``): the tables of fixtures/observability/
(materialize, the in-memory store, the file store's files), then a batching sink filling
each store through the store exporter, and the file store's durability."""

import builtins
import copy
import json
import os
import re
import shutil

import pytest

from oma_component.observability import (
    BatchingTraceSink,
    InMemoryTraceStore,
    TraceStoreError,
    TraceStoreExporter,
    build_execution_receipt,
    materialize_run,
)
from oma_component import OmaError
from oma_component.observability.file import FileTraceStore, FileTraceStoreError

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "observability")


def table(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
        return json.load(f)


RECORDS = table("records.json")["records"]
MATERIALIZE, STORE, FILES = table("materialize.json"), table("store.json"), table("file-store.json")
RECEIPT = table("receipt.json")
RUN = [RECORDS[n] for n in FILES["writes"][0]["append"]]


def snake(name):
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


@pytest.mark.parametrize("case", MATERIALIZE["cases"], ids=[c["name"] for c in MATERIALIZE["cases"]])
def test_materialize_table(case):
    given = copy.deepcopy(case["records"])
    assert materialize_run(given, case.get("includeRecords", False)) == case["expect"]
    assert given == case["records"]


@pytest.mark.parametrize("case", MATERIALIZE["refused"], ids=[c["field"] for c in MATERIALIZE["refused"]])
def test_materialize_refuses_what_the_schema_does_not_allow(case):
    with pytest.raises(OmaError) as raised:
        materialize_run(case["records"])
    assert case["field"] in raised.value.message


def test_materialize_takes_a_list_only():
    with pytest.raises(TypeError):
        materialize_run("[]")  # type: ignore[arg-type]
    assert materialize_run([]) is None


@pytest.mark.parametrize("case", RECEIPT["cases"], ids=[c["name"] for c in RECEIPT["cases"]])
def test_receipt_table(case):
    receipt = build_execution_receipt(case["result"], case["trace"]) if "trace" in case \
        else build_execution_receipt(case["result"])
    assert receipt == case["expect"]
    # keys in OMA's order
    assert json.dumps(receipt) == json.dumps(case["expect"])


@pytest.mark.parametrize("case", STORE["append"], ids=[c["name"] for c in STORE["append"]])
def test_store_refuses_records(case):
    store = InMemoryTraceStore()
    with pytest.raises(TraceStoreError) as raised:
        store.append(case["records"])
    assert {"code": raised.value.code, "field": raised.value.field, "message": raised.value.message} == case["error"]
    assert store.records() == []


def _run_summary(run, include):
    if run is None:
        return None
    return {"runId": run["runId"], "status": run.get("status"), "incomplete": run["incomplete"], "agents": run["agents"],
            "models": run["models"], "spans": len(run["spans"]), "records": len(run["records"]) if include else None}


@pytest.mark.parametrize("case", STORE["scenarios"], ids=[c["name"] for c in STORE["scenarios"]])
def test_store_scenarios(case):
    now = case.get("options", {}).get("now")
    store = InMemoryTraceStore(now=(lambda: now) if now is not None else None)
    for step in case["steps"]:
        def outcome():
            if "append" in step:
                return store.append(step["append"])
            if "getRun" in step:
                include = step.get("includeRecords", False)
                return _run_summary(store.get_run(step["getRun"], include_records=include), include)
            if "queryRuns" in step:
                kwargs, pages = {snake(k): v for k, v in step["queryRuns"].items()}, []
                while True:
                    page = store.query_runs(**kwargs)
                    pages.append([s["runId"] for s in page["items"]])
                    if "nextCursor" not in page or not step.get("follow"):
                        return pages
                    kwargs["cursor"] = page["nextCursor"]
            if "deleteRun" in step:
                return store.delete_run(step["deleteRun"])
            if "delete" in step:
                return store.delete(**{snake(k): v for k, v in step["delete"].items()})
            return store.apply_retention(**{snake(k): v for k, v in step["retention"].items()})

        try:
            got = ("expect", outcome())
        except TraceStoreError as error:
            got = ("error", {"code": error.code, "field": error.field, "message": error.message})
        assert got[0] in step, (step, got)
        assert got[1] == step[got[0]]


@pytest.mark.parametrize("case", FILES["open"], ids=[c["file"] for c in FILES["open"]])
def test_file_store_open_table(case, tmp_path):
    path = tmp_path / "traces.ndjson"
    shutil.copyfile(os.path.join(FIXTURES, "file-store", case["file"]), path)
    seen = []
    expect = case["expect"]
    if "error" in expect:
        with pytest.raises(FileTraceStoreError) as raised:
            FileTraceStore.open(path, on_diagnostic=seen.append)
        got = {"code": raised.value.code, "message": raised.value.message}
        if raised.value.line_number is not None:
            got["lineNumber"] = raised.value.line_number
        assert got == expect["error"]
        return
    store = FileTraceStore.open(path, on_diagnostic=seen.append)
    assert [s["runId"] for s in store.query_runs(order="started_asc")["items"]] == expect["runs"]
    assert len(store.records()) == expect["records"]
    assert seen == expect["diagnostics"]
    assert os.path.getsize(path) == expect["sizeAfterOpen"]
    store.close()


def test_file_store_writes_table(tmp_path):
    case = FILES["writes"][0]
    path = tmp_path / "traces.ndjson"
    store = FileTraceStore.open(path)
    store.append([RECORDS[n] for n in case["append"]])
    store.delete_run(case["deleteRun"])
    store.close()
    text = path.read_text(encoding="utf-8")
    for i, batch in enumerate(dict.fromkeys(re.findall(r'"batchId":"([^"]+)"', text))):
        text = text.replace(batch, f"b-{i + 1}")
    with open(os.path.join(FIXTURES, "file-store", case["file"]), encoding="utf-8") as f:
        assert text == f.read()


@pytest.mark.parametrize("kind", ["memory", "file"])
def test_a_batching_sink_fills_a_store_through_the_exporter(kind, tmp_path):
    store = InMemoryTraceStore() if kind == "memory" else FileTraceStore.open(tmp_path / "t.ndjson")
    sink = BatchingTraceSink(TraceStoreExporter(store), diagnostics="silent")
    for record in RUN:
        sink.emit(copy.deepcopy(record))
    assert sink.force_flush(timeout_ms=2_000)["status"] == "ok"
    run = store.get_run("run-1")
    assert run is not None and run["status"] == "ok" and len(run["spans"]) == 4
    for record in RUN:  # exported again: the store keeps one copy of each
        sink.emit(copy.deepcopy(record))
    assert sink.shutdown(timeout_ms=2_000)["status"] == "ok"
    assert len(store.records()) == 10
    if kind == "file":
        store.flush()
        store.close()
        again = FileTraceStore.open(tmp_path / "t.ndjson")
        assert again.get_run("run-1") == run


def test_the_file_store_cuts_back_a_failed_write(tmp_path, monkeypatch):
    path = tmp_path / "t.ndjson"
    store = FileTraceStore.open(path)
    store.append(RUN[:3])
    size = os.path.getsize(path)
    real_open = builtins.open

    def failing_open(file, mode="r", *args, **kwargs):
        if mode == "ab":
            raise PermissionError(13, "Permission denied")
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", failing_open)
    with pytest.raises(FileTraceStoreError) as raised:
        store.append(RUN[3:])
    monkeypatch.setattr(builtins, "open", real_open)
    assert raised.value.code == "WRITE_FAILED" and os.path.getsize(path) == size
    assert len(store.records()) == 3
    assert store.compact()["recordsWritten"] == 3
    store.close()
    with pytest.raises(FileTraceStoreError) as raised:
        store.append(RUN[3:])
    assert raised.value.code == "CLOSED"
    assert len(FileTraceStore.open(path).records()) == 3
