"""Runs with ``observability=`` (OMA's ``observability: {sinks}``): the table of
fixtures/observability/runs.json through ``run_agent`` and ``run_agent_async`` into an in-memory
and a file store, the run's identity against its records, and sinks that raise, hang, are slow
or fall behind never failing or holding a run."""

import asyncio
import json
import os
import re
import threading
import time

import pytest

import oma_component as oma
from loopback import Reply
from oma_component.observability import (
    BatchingTraceSink,
    InMemoryTraceStore,
    LegacyCallbackTraceSink,
    TraceStoreExporter,
)
from oma_component.observability import delivery
from oma_component.observability.file import FileTraceStore

from conftest import KEY

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "observability")
with open(os.path.join(FIXTURES, "runs.json"), encoding="utf-8") as f:
    RUNS = json.load(f)["cases"]


def snake(name):
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


class Recorder:
    """A sink that keeps what it gets."""

    def __init__(self):
        self.records = []
        self.lock = threading.Lock()

    def emit(self, record):
        with self.lock:
            self.records.append(record)

    def force_flush(self, *, timeout_ms=None):
        return {"status": "ok", "accepted": len(self.records), "exported": len(self.records), "dropped": 0, "failed": 0}

    def shutdown(self, *, timeout_ms=None):
        return self.force_flush()


def _tool(spec, token):
    returns = spec["returns"]

    def fn(args):
        if token is not None:
            token.cancel()  # the caller cancels the run; this answer comes long after it
            threading.Event().wait(2)
        return returns

    return oma.Tool(name=spec["name"], description=spec["description"], input_schema=spec["inputSchema"], fn=fn)


def _arguments(case, loop):
    agent = case["agent"]
    token = oma.CancelToken() if case.get("cancel") in ("tool", "before") else None
    if case.get("cancel") == "before":
        token.cancel()  # the caller cancelled before the run started
    kwargs = dict(name=agent["name"], model="claude-test", provider="anthropic", base_url=loop.base, api_key=KEY,
                  call={"egress": "offline", "timeout_ms": 5000, "max_retries": 0},
                  tools=[_tool(t, token) for t in agent.get("tools", [])])
    if token is not None:
        kwargs["cancel"] = token
    run = case["run"]
    kwargs["run_id"] = run["runId"]
    if "metadata" in run:
        kwargs["metadata"] = run["metadata"]
    return kwargs


def _observability(case, sinks):
    config = {"sinks": sinks}
    if "capture" in case:
        config["capture"] = {snake(k): v for k, v in case["capture"].items()}
    return config


def _store(kind, tmp_path):
    return InMemoryTraceStore() if kind == "memory" else FileTraceStore.open(tmp_path / "traces.ndjson")


def _check(case, result, store):
    expect = case["expect"]
    assert {"success": result["success"], "status": result["status"]["code"]} == expect["result"]
    run = store.get_run(case["run"]["runId"], include_records=True)
    assert run is not None
    for key, value in expect["run"].items():
        assert run.get(key) == value, key
    assert sorted(f'{s["kind"]} {s["name"]} {s["status"]}' for s in run["spans"]) == expect["spans"]
    counts = {"span_start": 0, "span_event": 0, "span_end": 0}
    for record in run["records"]:
        counts[record["recordType"]] += 1
    assert counts == expect["records"]
    for name, attributes in expect["attributes"].items():
        spans = [s for s in run["spans"] if f'{s["kind"]} {s["name"]}' == name]
        assert len(spans) == 1, name
        assert {k: spans[0]["attributes"].get(k) for k in attributes} == attributes, name
    identity = result["identity"]
    attempt = run["attempts"][0]
    assert identity["runId"] == case["run"]["runId"]
    assert (identity["traceId"], identity["rootSpanId"]) == (attempt["traceId"], attempt["rootSpanId"])
    assert KEY not in json.dumps(run)


@pytest.mark.parametrize("kind", ["memory", "file"])
@pytest.mark.parametrize("case", RUNS, ids=[c["name"] for c in RUNS])
def test_runs_table(case, kind, loop, tmp_path):
    loop.script(*[Reply(r["status"], r["body"]) for r in case["replies"]])
    store = _store(kind, tmp_path)
    sink = BatchingTraceSink(TraceStoreExporter(store), diagnostics="silent")
    result = oma.run_agent(case["run"]["prompt"], observability=_observability(case, [sink]),
                           **_arguments(case, loop))
    assert sink.force_flush(timeout_ms=5_000)["status"] == "ok"
    _check(case, result, store)
    if case.get("cancel") == "before":
        assert loop.requests == []  # nothing is sent
    if kind == "file":
        store.close()
        again = FileTraceStore.open(tmp_path / "traces.ndjson")
        _check(case, result, again)
        again.close()


@pytest.mark.parametrize("case", RUNS, ids=[c["name"] for c in RUNS])
def test_runs_table_async(case, loop, tmp_path):
    loop.script(*[Reply(r["status"], r["body"]) for r in case["replies"]])
    store = InMemoryTraceStore()
    sink = BatchingTraceSink(TraceStoreExporter(store), diagnostics="silent")

    async def main():
        return await oma.run_agent_async(case["run"]["prompt"], observability=_observability(case, [sink]),
                                         **_arguments(case, loop))

    result = asyncio.run(main())
    assert sink.force_flush(timeout_ms=5_000)["status"] == "ok"
    _check(case, result, store)


def test_records_come_in_order_and_name_the_result(loop, anthropic):
    sink = Recorder()
    result = oma.run_agent("Hi", observability={"sinks": [sink]}, **anthropic)
    assert result["success"]
    records = sink.records
    assert [r["sequence"] for r in records] == list(range(1, len(records) + 1))
    assert {r["runId"] for r in records} == {result["identity"]["runId"]}
    assert {r["traceId"] for r in records} == {result["identity"]["traceId"]}
    root = [r for r in records if r["kind"] == "run" and r["recordType"] == "span_end"]
    assert root[0]["spanId"] == result["identity"]["rootSpanId"]
    assert root[0]["status"] == {"code": "ok"}


def test_two_sinks_each_get_every_record_and_a_legacy_sink_its_events(loop, anthropic):
    first, events = Recorder(), []
    result = oma.run_agent("Hi", observability={"sinks": [first, LegacyCallbackTraceSink(events.append)]},
                           **anthropic)
    assert result["success"] and len(first.records) == 6
    assert sorted(e["type"] for e in events) == ["agent", "llm_call"]
    assert {e["runId"] for e in events} == {result["identity"]["runId"]}


def test_no_sinks_no_records(loop, anthropic):
    result = oma.run_agent("Hi", observability={"sinks": []}, **anthropic)
    assert result["success"]


def test_a_sink_that_raises_never_fails_the_run(loop, anthropic):
    class Broken:
        def emit(self, record):
            raise RuntimeError("sink down")

    diagnostics, other = [], Recorder()
    result = oma.run_agent("Hi", observability={"sinks": [Broken(), other], "on_diagnostic": diagnostics.append},
                           **anthropic)
    assert result["success"] and len(other.records) == 6
    assert diagnostics and diagnostics[0]["code"] == "sink_emit_failed"
    assert diagnostics[0]["sinkName"] == "OpenMultiAgent"


def test_a_sink_that_hangs_or_is_slow_never_holds_the_run(loop, anthropic):
    release = threading.Event()

    class Hanging:
        def emit(self, record):
            release.wait(30)

    class Slow(Recorder):
        def emit(self, record):
            time.sleep(0.3)
            super().emit(record)

    hanging, slow, other = Hanging(), Slow(), Recorder()
    try:
        for _ in range(2):
            started = time.monotonic()
            result = oma.run_agent("Hi", observability={"sinks": [hanging, slow, other]}, **anthropic)
            assert result["success"]
            assert time.monotonic() - started < 1.5
        assert len(other.records) == 12  # the other sink is not held by either
    finally:
        release.set()
    deadline = time.monotonic() + 10
    while len(slow.records) < 12 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(slow.records) == 12  # the slow one gets every record, later


def test_a_sink_that_falls_behind_has_a_bounded_queue(loop, anthropic, monkeypatch):
    monkeypatch.setattr(delivery, "MAX_QUEUE_RECORDS", 4)
    release = threading.Event()
    got = []

    class Hanging:
        def emit(self, record):
            release.wait(30)
            got.append(record)

    diagnostics = []
    hanging = Hanging()
    try:
        result = oma.run_agent("Hi", observability={"sinks": [hanging], "on_diagnostic": diagnostics.append},
                               **anthropic)
        assert result["success"]
        assert [d["code"] for d in diagnostics] == ["queue_full"]
    finally:
        release.set()
    deadline = time.monotonic() + 5
    while len(got) < 5 and time.monotonic() < deadline:
        time.sleep(0.02)
    # one record in the sink's hands, four queued; the sixth was dropped
    assert len(got) == 5 and got[-1]["recordType"] == "span_end"


def test_an_async_run_delivers_off_the_loop(loop, anthropic):
    sink = Recorder()

    async def main():
        ticks = 0

        async def tick():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        ticker = asyncio.ensure_future(tick())
        result = await oma.run_agent_async("Hi", observability={"sinks": [sink]}, **anthropic)
        ticker.cancel()
        return result

    result = asyncio.run(main())
    assert result["success"] and len(sink.records) == 6


def test_the_configuration_is_checked_before_the_run(loop, anthropic):
    with pytest.raises(TypeError, match="unknown key 'sink'"):
        oma.run_agent("Hi", observability={"sink": []}, **anthropic)
    with pytest.raises(TypeError, match="needs 'sinks'"):
        oma.run_agent("Hi", observability={}, **anthropic)
    with pytest.raises(TypeError, match=r"sinks'\]\[0\] is not a trace sink"):
        oma.run_agent("Hi", observability={"sinks": [object()]}, **anthropic)
    with pytest.raises(TypeError, match="unknown key 'toolInput'"):
        oma.run_agent("Hi", observability={"sinks": [Recorder()], "capture": {"toolInput": "redacted"}}, **anthropic)
    with pytest.raises(ValueError, match="capture.stream_events"):
        oma.run_agent("Hi", observability={"sinks": [Recorder()], "capture": {"stream_events": "some"}}, **anthropic)
    with pytest.raises(TypeError, match="resource'\\] has an unknown key 'name'"):
        oma.run_agent("Hi", observability={"sinks": [Recorder()], "resource": {"name": "x"}}, **anthropic)
    # metadata the records refuse, with OMA's message, before any request
    with pytest.raises(oma.OmaError):
        oma.run_agent("Hi", observability={"sinks": [Recorder()]}, metadata={"oma.x": "y"}, **anthropic)
    assert loop.requests == []


def test_a_cancelled_task_ends_its_open_spans_cancelled(loop, anthropic):
    # asyncio's own cancellation (the awaiting task) closes the run's trace as the token does.
    loop.script(Reply(body={"id": "m", "type": "message", "role": "assistant", "model": "claude-test",
                            "content": [{"type": "tool_use", "id": "t1", "name": "wait", "input": {}}],
                            "stop_reason": "tool_use", "usage": {"input_tokens": 2, "output_tokens": 1}}))
    sink, events = Recorder(), []
    started = threading.Event()

    async def wait(args):
        started.set()
        await asyncio.sleep(30)
        return "never"

    tool = oma.Tool(name="wait", description="Waits", input_schema={"type": "object"}, fn=wait)

    async def main():
        task = asyncio.ensure_future(oma.run_agent_async(
            "Hi", tools=[tool], observability={"sinks": [sink, LegacyCallbackTraceSink(events.append)]},
            **anthropic))
        while not started.is_set():
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    deadline = time.monotonic() + 5
    while len([r for r in sink.records if r["recordType"] == "span_end"]) < 4 and time.monotonic() < deadline:
        time.sleep(0.02)
    ends = {r["name"]: r for r in sink.records if r["recordType"] == "span_end"}
    assert sorted(ends) == ["chat", "execute_tool", "invoke_agent", "oma.run"]
    for name in ("execute_tool", "invoke_agent", "oma.run"):
        assert ends[name]["status"] == {"code": "cancelled", "message": "Run cancelled by caller."}
        assert ends[name]["error"]["kind"] == "cancellation"
    assert ends["chat"]["status"] == {"code": "ok"}
    assert [e["type"] for e in events if e["type"] == "agent"] == ["agent"]
