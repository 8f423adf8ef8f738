"""The trace sinks of ``oma_component.observability``: the shared tables of
fixtures/observability/ (batching, composite, processors, legacy; the JavaScript package runs
the same), then what is Python's own: threads, ``async def`` exporters, a hanging exporter
holding nothing."""

import asyncio
import copy
import json
import os
import re
import threading
import time

import pytest

from oma_component.observability import (
    BatchingTraceSink,
    CompositeSink,
    FilteringSink,
    LegacyCallbackTraceSink,
    SensitiveDataProcessor,
    TraceStoreError,
    TraceStoreExporter,
    empty_trace_sink_stats,
)
from oma_component.observability.batching import record_bytes
from oma_component.observability.legacy import attach_legacy_trace_event

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "observability")


def table(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
        return json.load(f)


RECORDS = table("records.json")["records"]
HANG_S = 5.0


def snake(name):
    """An OMA option name in Python's spelling (maxQueueRecords -> max_queue_records)."""
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


def record(name):
    return copy.deepcopy(RECORDS[name])


def ids(cases):
    return [c["name"] for c in cases]


class Diagnostics:
    def __init__(self):
        self.seen = []

    def __call__(self, diagnostic):
        assert set(diagnostic) <= {"code", "severity", "count", "sinkName", "message"}
        assert diagnostic["severity"] in ("warning", "error") and diagnostic["count"] >= 1
        self.seen.append(diagnostic)

    @property
    def codes(self):
        return [d["code"] for d in self.seen]


def answer(script, batch_len, signal):
    """What a scripted exporter method answers (see batching.json's contract)."""
    if "throws" in script:
        raise RuntimeError(script["throws"])
    if script.get("hangs"):
        signal.wait(HANG_S)
        return {"status": "success", "exported": batch_len}
    if "returns" in script:
        return script["returns"]
    out = dict(script)
    if out.get("exported") == "all":
        out["exported"] = batch_len
    return out


class ScriptedExporter:
    def __init__(self, case):
        self.answers = case["exporter"]
        self.calls = []
        self.lock = threading.Lock()
        if "exporterFlush" in case:
            self.force_flush = lambda signal: answer(case["exporterFlush"], 0, signal)
        if "exporterShutdown" in case:
            self.shutdown = lambda signal: answer(case["exporterShutdown"], 0, signal)

    def export(self, records, signal):
        with self.lock:
            index = len(self.calls)
            self.calls.append([name_of(r) for r in records])
        return answer(self.answers[min(index, len(self.answers) - 1)], len(records), signal)


def name_of(rec):
    for name, value in RECORDS.items():
        if value == rec:
            return name
    raise AssertionError(f"not a fixture record: {rec!r}")


def options_of(case_options, diagnostics=None):
    out = {"retry_jitter": False, "diagnostic_interval_ms": 0, "scheduled_delay_ms": 60_000}
    if diagnostics is not None:
        out["on_diagnostic"] = diagnostics
    for key, value in case_options.items():
        if isinstance(value, dict) and "bytesOf" in value:
            value = sum(record_bytes(RECORDS[n]) for n in value["bytesOf"])
        out[snake(key)] = value
    return out


def check_stats(stats, expected):
    for key, value in expected.items():
        if value is None:
            assert key not in stats, key
        else:
            assert stats.get(key) == value, (key, stats)


def wait_until(predicate, timeout_s=5.0):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def run_steps(sink, steps, emit_extra=None):
    for step in steps:
        if "emit" in step:
            for _ in range(step.get("times", 1)):
                rec = record(step["emit"])
                if "legacy" in step:
                    rec = attach_legacy_trace_event(rec, step["legacy"])
                sink.emit(rec)
        elif "emitCyclic" in step:
            rec = record(step["emitCyclic"])
            rec["attributes"]["self"] = rec
            sink.emit(rec)
        elif "waitExports" in step:
            emit_extra(step)
        elif "flush" in step:
            assert sink.force_flush(timeout_ms=step["flush"].get("timeoutMs")) == step["expect"]
        elif "shutdown" in step:
            assert sink.shutdown(timeout_ms=step["shutdown"].get("timeoutMs")) == step["expect"]
        elif "stats" in step:
            check_stats(sink.get_stats(), step["stats"])
        else:
            raise AssertionError(f"unknown step {step}")


BATCHING = table("batching.json")


@pytest.mark.parametrize("case", BATCHING["cases"], ids=ids(BATCHING["cases"]))
def test_batching_table(case):
    diagnostics = Diagnostics()
    exporter = ScriptedExporter(case)
    sink = BatchingTraceSink(exporter, **options_of(case["options"], diagnostics))
    try:
        run_steps(sink, case["steps"], lambda step: wait_until(lambda: len(exporter.calls) >= step["waitExports"]))
        assert exporter.calls == case["expect"]["exports"]
        assert diagnostics.codes == case["expect"]["diagnostics"]
        if "sinkName" in case["expect"]:
            assert {d.get("sinkName") for d in diagnostics.seen} == {case["expect"]["sinkName"]}
    finally:
        sink.shutdown(timeout_ms=100)


@pytest.mark.parametrize("case", BATCHING["refused"], ids=[c["option"] for c in BATCHING["refused"]])
def test_batching_refuses_bad_options(case):
    kwargs = {snake(k): v for k, v in case["options"].items()}
    with pytest.raises(ValueError, match=re.escape(snake(case["option"]))):
        BatchingTraceSink(ScriptedExporter({"exporter": []}), **kwargs)


class ScriptedChild:
    """A child sink of composite.json."""

    def __init__(self, spec):
        self.spec = spec
        self.received = []
        if "stats" in spec or spec.get("statsThrow"):
            self.get_stats = self._stats

    def emit(self, rec):
        if self.spec.get("emitThrows"):
            raise RuntimeError("emit refused")
        self.received.append(name_of(rec))

    def _answer(self, key):
        script = self.spec.get(key, {"status": "ok", "accepted": 0, "exported": 0, "dropped": 0, "failed": 0})
        if "throws" in script:
            raise RuntimeError(script["throws"])
        if script.get("hangs"):
            time.sleep(HANG_S)
        return dict(script)

    def force_flush(self, *, timeout_ms=None):
        return self._answer("flush")

    def shutdown(self, *, timeout_ms=None):
        return self._answer("shutdown")

    def _stats(self):
        if self.spec.get("statsThrow"):
            raise RuntimeError("no stats")
        return dict(self.spec["stats"])


COMPOSITE = table("composite.json")


@pytest.mark.parametrize("case", COMPOSITE["cases"], ids=ids(COMPOSITE["cases"]))
def test_composite_table(case):
    diagnostics = Diagnostics()
    children = [ScriptedChild(spec) for spec in case["children"]]
    sink = CompositeSink(children, on_diagnostic=diagnostics, diagnostic_interval_ms=0)
    run_steps(sink, case["steps"])
    expect = case["expect"]
    if "received" in expect:
        assert [c.received for c in children if c.spec.get("records")] == expect["received"]
    if expect.get("diagnosticsUnordered"):
        assert sorted(diagnostics.codes) == sorted(expect["diagnostics"])
    else:
        assert diagnostics.codes == expect["diagnostics"]
    if "stats" in case["steps"][-1] and len(case["steps"][-1]["stats"]) >= 8:
        assert sink.get_stats() == case["steps"][-1]["stats"]


class Recording:
    def __init__(self):
        self.records = []

    def emit(self, rec):
        self.records.append(rec)

    def force_flush(self, *, timeout_ms=None):
        return {"status": "ok", "accepted": 0, "exported": 0, "dropped": 0, "failed": 0}

    shutdown = force_flush


PROCESSORS = table("processors.json")


def processor_kwargs(options):
    kwargs = {}
    if "attributeAllowlist" in options:
        kwargs["attribute_allowlist"] = options["attributeAllowlist"]
    if "capture" in options:
        kwargs["capture"] = {snake(k): v for k, v in options["capture"].items()}
    return kwargs


@pytest.mark.parametrize("case", PROCESSORS["cases"], ids=ids(PROCESSORS["cases"]))
def test_sensitive_data_processor_table(case):
    inner = Recording()
    sink = SensitiveDataProcessor(inner, **processor_kwargs(case["processor"]))
    given = copy.deepcopy(case["record"])
    sink.emit(given)
    assert given == case["record"], "the processor changed the record it was given"
    assert inner.records == ([] if case["expect"] is None else [case["expect"]])


def test_sensitive_data_processor_hands_on_a_new_record_it_leaves_as_it_is():
    inner = Recording()
    sink = SensitiveDataProcessor(inner)
    given = {
        "recordType": "span_end", "name": "chat",
        "attributes": {"oma.agent.name": "assistant", "oma.llm.turn": 1},
        "status": {"code": "ok"}, "error": {"code": "E"},
    }
    before = copy.deepcopy(given)
    sink.emit(given)
    [handed] = inner.records
    assert handed == before
    assert handed is not given
    for key in ("attributes", "status", "error"):
        assert handed[key] is not given[key], key
    handed["attributes"]["oma.agent.name"] = "changed"
    handed["status"]["code"] = "error"
    assert given == before, "the record given changed with the one handed on"


@pytest.mark.parametrize("case", PROCESSORS["refused"], ids=[c["option"] for c in PROCESSORS["refused"]])
def test_sensitive_data_processor_refuses_bad_options(case):
    option = case["option"].split(".")
    name = ".".join([option[0]] + [snake(o) for o in option[1:]])
    with pytest.raises((TypeError, ValueError), match=re.escape(name.split(".")[-1])):
        SensitiveDataProcessor(Recording(), **processor_kwargs(case["processor"]))


@pytest.mark.parametrize("case", PROCESSORS["filtering"], ids=ids(PROCESSORS["filtering"]))
def test_filtering_table(case):
    inner = Recording()

    def keep(rec):
        if "throwsFor" in case["keep"]:
            if rec == RECORDS[case["keep"]["throwsFor"]]:
                raise RuntimeError("filter failed")
            return True
        return all(rec.get(k) == v for k, v in case["keep"].items())

    sink = FilteringSink(inner, keep)
    for name in case["emit"]:
        sink.emit(record(name))
    assert [name_of(r) for r in inner.records] == case["expect"]


LEGACY = table("legacy.json")


def legacy_callback(kind, events):
    if kind == "sync":
        return events.append
    if kind == "syncThrows":
        def throws(event):
            events.append(event)
            raise RuntimeError("callback failed")
        return throws

    async def later(event):
        events.append(event)
        if kind == "asyncHangs":
            await asyncio.sleep(HANG_S)
        await asyncio.sleep(0.01)
        if kind == "asyncRejects":
            raise RuntimeError("callback failed")
    return later


@pytest.mark.parametrize("case", LEGACY["cases"], ids=ids(LEGACY["cases"]))
def test_legacy_callback_table(case):
    events = []
    diagnostics = Diagnostics()
    sink = LegacyCallbackTraceSink(legacy_callback(case["callback"], events), on_diagnostic=diagnostics,
                                   diagnostic_interval_ms=0)
    run_steps(sink, case["steps"])
    assert events == case["expect"]["events"]
    assert diagnostics.codes == case["expect"]["diagnostics"]


# -- Python's own ---------------------------------------------------------------------------------


def test_an_async_exporter_is_awaited_on_one_loop():
    loops = []

    class AsyncExporter:
        async def export(self, records, signal):
            loops.append(asyncio.get_running_loop())
            await asyncio.sleep(0)
            return {"status": "success", "exported": len(records)}

    sink = BatchingTraceSink(AsyncExporter(), max_batch_records=1, diagnostics="silent")
    for name in ("run_start", "run_end", "llm_end"):
        sink.emit(record(name))
    assert sink.force_flush(timeout_ms=2000) == {"status": "ok", "accepted": 3, "exported": 3, "dropped": 0, "failed": 0}
    assert len(loops) == 3 and len(set(map(id, loops))) == 1


def test_an_async_exporter_that_hangs_is_cancelled_at_the_export_timeout():
    cancelled = threading.Event()

    class Stuck:
        async def export(self, records, signal):
            try:
                await asyncio.sleep(HANG_S)
            except asyncio.CancelledError:
                cancelled.set()
                raise
            return {"status": "success", "exported": len(records)}

    sink = BatchingTraceSink(Stuck(), export_timeout_ms=30, max_retries=0, diagnostics="silent")
    sink.emit(record("run_start"))
    assert sink.force_flush(timeout_ms=2000)["status"] == "error"
    assert cancelled.wait(2)
    assert sink.get_stats()["lastError"] == "EXPORT_TIMEOUT"


def test_a_hanging_exporter_holds_no_emit_and_the_queue_stays_bounded():
    release = threading.Event()

    class Hanging:
        def export(self, records, signal):
            release.wait(HANG_S)
            return {"status": "success", "exported": len(records)}

    sink = BatchingTraceSink(Hanging(), max_queue_records=100, max_batch_records=10, diagnostics="silent")
    started = time.perf_counter()
    for _ in range(5_000):
        sink.emit(record("llm_end"))
    elapsed = time.perf_counter() - started
    stats = sink.get_stats()
    assert stats["queuedRecords"] <= 100
    # Each span end gives way to the next (the newest of one priority are kept).
    assert stats["accepted"] == 5_000 and stats["dropped"] == 5_000 - stats["queuedRecords"]
    assert elapsed < 5, elapsed  # 5,000 records measured and queued, never waiting on the exporter
    release.set()
    assert sink.shutdown(timeout_ms=3000)["status"] == "partial"


def test_emits_from_many_threads_are_all_accounted_for():
    exported = []

    class Collect:
        def export(self, records, signal):
            exported.extend(records)
            return {"status": "success", "exported": len(records)}

    sink = BatchingTraceSink(Collect(), max_batch_records=7, diagnostics="silent")

    def emit_many():
        for _ in range(200):
            sink.emit(record("run_start"))

    threads = [threading.Thread(target=emit_many) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sink.force_flush(timeout_ms=5000) == {"status": "ok", "accepted": 800, "exported": 800, "dropped": 0, "failed": 0}
    assert len(exported) == 800


def test_warn_mode_logs_a_payload_free_line(caplog):
    sink = BatchingTraceSink(ScriptedExporter({"exporter": []}), max_record_bytes=1)
    secret = record("run_start")
    secret["attributes"]["note"] = "sk-abcdefghijklmnopqrstuv"
    with caplog.at_level("WARNING", logger="oma_component.observability"):
        sink.emit(secret)
        sink.emit(secret)
    assert [r.getMessage() for r in caplog.records] == [
        "[open-multi-agent observability] record_too_large: "
        "Trace record exceeded the configured size limit or was not serializable."]
    assert sink.get_stats()["dropped"] == 2


def test_silent_mode_and_a_raising_handler_stay_quiet(caplog):
    def handler(diagnostic):
        raise RuntimeError("handler broke")

    with caplog.at_level("WARNING", logger="oma_component.observability"):
        BatchingTraceSink(ScriptedExporter({"exporter": []}), max_record_bytes=1, diagnostics="silent").emit(
            record("run_start"))
        BatchingTraceSink(ScriptedExporter({"exporter": []}), max_record_bytes=1, on_diagnostic=handler).emit(
            record("run_start"))
    assert caplog.records == []


def test_a_batching_sink_needs_an_exporter():
    with pytest.raises(TypeError, match="export"):
        BatchingTraceSink(object())  # type: ignore[arg-type]


class MemoryAppendStore:
    def __init__(self, error=None):
        self.error = error
        self.batches = []

    def append(self, records):
        if self.error is not None:
            raise self.error
        self.batches.append(list(records))
        return {"written": len(records), "deduplicated": 0, "diagnostics": []}


@pytest.mark.parametrize("error, expected", [
    (None, {"status": "success", "exported": 2}),
    (TraceStoreError("UNSUPPORTED_SCHEMA_VERSION", "unsupported"),
     {"status": "failure", "exported": 0, "code": "STORE_UNSUPPORTED_SCHEMA_VERSION"}),
    (TraceStoreError("INVALID_ARGUMENT", "bad"), {"status": "failure", "exported": 0, "code": "STORE_VALIDATION_FAILED"}),
    (OSError("disk full"), {"status": "retryable", "exported": 0, "code": "STORE_APPEND_FAILED"}),
])
def test_the_store_exporter_maps_store_failures(error, expected):
    store = MemoryAppendStore(error)
    assert TraceStoreExporter(store).export([record("run_start"), record("run_end")], threading.Event()) == expected
    aborted = threading.Event()
    aborted.set()
    assert TraceStoreExporter(store).export([record("run_start")], aborted) == {
        "status": "retryable", "exported": 0, "code": "STORE_EXPORT_ABORTED"}


def test_sinks_report_empty_stats_for_children_without_counters():
    assert CompositeSink([Recording()]).get_stats() == empty_trace_sink_stats()
    assert FilteringSink(Recording(), lambda r: True).get_stats() == empty_trace_sink_stats()


def test_an_exporter_that_never_returns_holds_at_most_a_few_threads():
    from oma_component.observability.batching import MAX_ABANDONED_EXPORTS

    release = threading.Event()

    class Never:
        def export(self, records, signal):
            release.wait(HANG_S)
            return {"status": "success", "exported": len(records)}

    sink = BatchingTraceSink(Never(), export_timeout_ms=20, max_retries=2, retry_delay_ms=1, max_batch_records=1,
                             diagnostics="silent")
    try:
        for _ in range(10):
            sink.emit(record("run_end"))
        result = sink.force_flush(timeout_ms=3_000)
        assert result["status"] == "error" and result["failed"] == 10
        alive = [t for t in threading.enumerate() if t.name == "oma-trace-export"]
        assert len(alive) <= MAX_ABANDONED_EXPORTS
        assert sink.get_stats()["lastError"] == "EXPORT_TIMEOUT"
    finally:
        release.set()
