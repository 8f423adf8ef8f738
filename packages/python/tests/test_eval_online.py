"""The online evaluation rules the core holds (fixtures/eval/online.json; the core's tests and
the JavaScript package run the same table): every row through the codec as the package calls
it, the answer and its key order, or OMA's error; then ``OnlineEvaluator`` through
``run_agent`` and ``run_agent_async`` as users call it: what its scorers see and its records
keep for the rows a run can make, and a slow, raising or failing scorer or store, a full queue,
a spent budget or a shutdown never failing or holding a run."""

import asyncio
import json
import os
import threading
import time

import pytest

import oma_component as oma
from oma_component.eval import InMemoryEvalStore, OnlineEvaluator, create_judge_scorer, define_scorer
from oma_component.eval._rules import online_step
from oma_component.eval.scorer import attach_score_cost_inputs

with open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "eval", "online.json"),
          encoding="utf-8") as f:
    TABLE = json.load(f)

CLASSES = {"TypeError": TypeError, "RangeError": ValueError, "Error": ValueError}

ROWS = [(step, row) for step in ("case", "record", "flush") for row in TABLE[step]]


@pytest.mark.parametrize("step,row", ROWS, ids=[f"{s}: {r['name']}" for s, r in ROWS])
def test_online_table(step, row):
    if "error" in row:
        with pytest.raises(CLASSES[row["error"]["name"]]) as raised:
            online_step(step, row["request"])
        assert str(raised.value) == row["error"]["message"]
    else:
        answer = online_step(step, row["request"])
        assert answer == row["expect"]
        assert json.dumps(answer) == json.dumps(row["expect"])  # key order


def test_every_step_has_rows():
    assert all(TABLE[step] for step in ("case", "record", "flush", "window"))


@pytest.mark.parametrize("row", TABLE["window"], ids=[r["name"] for r in TABLE["window"]])
def test_online_window_table(row):
    # Each step is given the window the step before it answered with.
    window = None
    for index, step in enumerate(row["steps"]):
        request = dict(step["request"]) if window is None else {**step["request"], "window": window}
        if "error" in step:
            with pytest.raises(CLASSES[step["error"]["name"]]) as raised:
                online_step(step["step"], request)
            assert str(raised.value) == step["error"]["message"], index
            continue
        answer = online_step(step["step"], request)
        window = answer.pop("window")
        assert json.dumps(answer) == json.dumps(step["expect"]), index  # and key order


@pytest.mark.parametrize("row", TABLE["evaluator"], ids=[r["name"] for r in TABLE["evaluator"]])
def test_online_evaluator_table(row):
    # The package's evaluator on the row's clock and draws (the same rows run through JavaScript's).
    clock = {"now": 0, "random": 0}
    usage = {"input_tokens": 4, "output_tokens": 3}
    diagnostics = []

    def judged(context):
        return attach_score_cost_inputs({"score": 1}, [
            {"usage": usage, "context": {"agentName": "j", "model": "m", "phase": "agent"}}])

    config = row["config"]
    budget = config.get("budget", {})
    evaluator = OnlineEvaluator(
        [define_scorer("judged", judged, version="1")], sample=config["sample"],
        budget={key: budget[camel] for key, camel in (("max_evaluations_per_minute", "maxEvaluationsPerMinute"),
                                                      ("max_cost_per_hour", "maxCostPerHour")) if camel in budget},
        estimate_cost=lambda usage, context: float("nan") if row["price"] is None else row["price"],
        on_diagnostic=lambda d: diagnostics.append([d["code"], d["count"], d["message"]]))
    evaluator._now = lambda: clock["now"]  # the row's clock and draws
    evaluator._random = lambda: clock["random"]
    for index, run in enumerate(row["runs"]):
        clock.update(run)
        identity = {"runId": f"run-{index}", "attempt": 1, "traceId": "t", "rootSpanId": "s"}
        evaluator.enqueue("Hi", {"output": "ok", "tokenUsage": usage, "identity": identity, "status": {"code": "ok"},
                                 "metadata": {}}, 1)
        evaluator.force_flush(timeout_ms=5000)
    assert evaluator.get_stats() == row["expect"]["stats"]
    assert diagnostics == row["expect"]["diagnostics"]


# -- OnlineEvaluator through run_agent, as users call it --------------------------------------


class Answering:
    """An LLM adapter that answers ``text``."""

    name = "online-table"

    def __init__(self, text):
        self.text = text

    def chat(self, messages, options):
        return {"id": "r", "content": [{"type": "text", "text": self.text}], "model": "m", "stop_reason": "end_turn",
                "usage": {"input_tokens": 3, "output_tokens": 2}}

    def stream(self, messages, options):
        raise AssertionError("not streamed")


def _seeing(seen):
    def score(context):
        seen.append(context["evalCase"]["input"])
        return {"score": 1, "reason": "seen with sk-abcdefghijklmnopqrstuvwx", "details": {"note": "token=abc123secret"}}

    return define_scorer("sees", score, version="1")


RUNNABLE = [r for r in TABLE["case"] if "error" not in r and isinstance(r["request"].get("input"), str)
            and isinstance(r["request"].get("output"), str)]


@pytest.mark.parametrize("row", RUNNABLE, ids=[r["name"] for r in RUNNABLE])
@pytest.mark.parametrize("api", ["sync", "asyncio"])
def test_run_agent_online_evaluation_follows_the_table(row, api):
    seen, store = [], InMemoryEvalStore()
    request = row["request"]
    evaluator = OnlineEvaluator([_seeing(seen)], sample=1, store=store,
                                store_payloads=request.get("storePayloads", "none"), diagnostics="silent")
    kwargs = dict(model="m", adapter=Answering(request["output"]), metadata={"row": "x"}, online_evaluation=evaluator)
    if api == "sync":
        result = oma.run_agent(request["input"], **kwargs)
    else:
        result = asyncio.run(oma.run_agent_async(request["input"], **kwargs))
    assert result["output"] == request["output"]
    assert evaluator.force_flush(timeout_ms=5000) == {"status": "ok", "accepted": 1, "exported": 1, "dropped": 0,
                                                      "failed": 0}
    assert seen == [row["expect"]["input"]]
    [record] = store.records()
    assert record.get("payload") == row["expect"].get("payload")
    assert record["source"] == "online" and record["metadata"] == {"row": "x"}
    assert record["reason"] == "seen with [redacted]" and record["details"] == {"note": "token=[redacted]"}
    identity = result["identity"]
    assert record["runRef"] == {k: identity[k] for k in ("runId", "attempt", "traceId", "rootSpanId")}
    assert record["usage"]["tokens"] == {"input_tokens": 3, "output_tokens": 2}


def test_online_evaluation_never_fails_or_holds_a_run():
    release = threading.Event()
    diagnostics = []

    def slow(context):
        release.wait(10)
        return {"score": 1}

    def broken(context):
        raise RuntimeError("scorer down")

    class FailingStore:
        def append(self, records):
            raise OSError("disk full")

    evaluator = OnlineEvaluator([define_scorer("slow", slow, version="1"), define_scorer("broken", broken, version="1")],
                                sample=1, max_queue_length=1, store=FailingStore(), on_diagnostic=diagnostics.append)
    try:
        started = time.monotonic()
        for _ in range(3):
            assert oma.run_agent("Hi", model="m", adapter=Answering("ok"), online_evaluation=evaluator)["success"]
        assert time.monotonic() - started < 5  # the runs were not held by the slow scorer
    finally:
        release.set()
    flushed = evaluator.force_flush(timeout_ms=5000)
    stats = evaluator.get_stats()
    # one sample being scored, one queued, the third dropped (a full queue)
    assert stats["sampled"] == 3 and stats["enqueued"] == 2 and stats["dropped"] == 1
    assert stats["completed"] == 2 and stats["failed"] == 2 and stats["storeFailed"] == 4
    assert flushed == {"status": "partial", "accepted": 2, "exported": 2, "dropped": 1, "failed": 6}
    assert {d["code"] for d in diagnostics} == {"queue_full", "scorer_failed", "store_append_failed"}
    assert evaluator.shutdown() == evaluator.shutdown()
    assert oma.run_agent("Hi", model="m", adapter=Answering("ok"), online_evaluation=evaluator)["success"]
    assert evaluator.get_stats()["dropped"] == 2  # a run after shutdown is not queued


def test_sampling_rules_and_a_rate_budget():
    seen = []
    evaluator = OnlineEvaluator([_seeing([])], sample=lambda c: seen.append(c["status"]["code"]) or False)
    oma.run_agent("Hi", model="m", adapter=Answering("ok"), online_evaluation=evaluator)
    assert seen == ["ok"] and evaluator.get_stats()["sampled"] == 0
    budgeted = OnlineEvaluator([_seeing([])], sample=1, budget={"max_evaluations_per_minute": 1}, diagnostics="silent")
    for _ in range(2):
        oma.run_agent("Hi", model="m", adapter=Answering("ok"), online_evaluation=budgeted)
    budgeted.force_flush(timeout_ms=5000)
    assert budgeted.get_stats()["enqueued"] == 1 and budgeted.get_stats()["dropped"] == 1


def test_configurations_refused_by_name():
    with pytest.raises(TypeError, match="at least one scorer"):
        OnlineEvaluator([], sample=1)
    with pytest.raises(ValueError, match=r"sample must be a number in \[0, 1\]"):
        OnlineEvaluator([_seeing([])], sample=2)
    with pytest.raises(TypeError, match="'max_tokens'"):
        OnlineEvaluator([_seeing([])], sample=1, budget={"max_tokens": 1})
    with pytest.raises(ValueError, match="budget.max_cost_per_hour must be a positive finite number"):
        OnlineEvaluator([_seeing([])], sample=1, budget={"max_cost_per_hour": 0})
    with pytest.raises(TypeError, match="estimate_cost must be a function"):
        OnlineEvaluator([_seeing([])], sample=1, estimate_cost=1)
    with pytest.raises(ValueError, match="max_concurrent must be a positive integer"):
        OnlineEvaluator([_seeing([])], sample=1, max_concurrent=0)
    with pytest.raises(TypeError, match="store_payloads"):
        OnlineEvaluator([_seeing([])], sample=1, store_payloads="all")
    with pytest.raises(TypeError, match="online_evaluation must be"):
        oma.run_agent("Hi", model="m", adapter=Answering("ok"), online_evaluation=object())


def _judge():
    """A judge scorer whose one judge answers a passing verdict (3 input and 2 output tokens)."""
    return create_judge_scorer("judge", version="1", judges=[
        {"name": "j", "model": "judge-model", "adapter": Answering('{"score": 1, "reason": "fine"}')}])


def test_a_cost_budget_prices_the_judges_usage_and_drops_runs_once_spent():
    priced, diagnostics = [], []

    def estimate(usage, context):
        priced.append((usage, context))
        return 0.6

    evaluator = OnlineEvaluator([_judge()], sample=1, budget={"max_cost_per_hour": 1}, estimate_cost=estimate,
                                on_diagnostic=diagnostics.append)
    for _ in range(3):
        assert oma.run_agent("Hi", model="m", adapter=Answering("ok"), online_evaluation=evaluator)["success"]
        evaluator.force_flush(timeout_ms=5000)
    # 0.6 spent after the first run, 1.2 after the second: the third finds the hour's budget spent
    stats = evaluator.get_stats()
    assert (stats["enqueued"], stats["completed"], stats["dropped"], stats["failed"]) == (2, 2, 1, 0)
    usage = {"input_tokens": 3, "output_tokens": 2}
    assert priced == [(usage, {"agentName": "j", "model": "judge-model", "phase": "agent"})] * 2
    assert [(d["code"], d["count"], d["message"]) for d in diagnostics] == [
        ("budget_exhausted", 1, "Online evaluation cost budget is exhausted.")]


def test_a_cost_budget_without_an_estimator_or_with_a_failing_one():
    diagnostics = []
    inactive = OnlineEvaluator([_seeing([])], sample=1, budget={"max_cost_per_hour": 1},
                               on_diagnostic=diagnostics.append)
    assert [d["message"] for d in diagnostics] == [
        "Cost budget is inactive because no estimateCost function was configured."]
    for _ in range(2):
        oma.run_agent("Hi", model="m", adapter=Answering("ok"), online_evaluation=inactive)
    assert inactive.force_flush(timeout_ms=5000)["status"] == "ok"
    diagnostics.clear()

    def broken(usage, context):
        raise RuntimeError("no price list")

    for estimate in (broken, lambda usage, context: float("nan")):
        failing = OnlineEvaluator([_judge()], sample=1, budget={"max_cost_per_hour": 1}, estimate_cost=estimate,
                                  on_diagnostic=diagnostics.append)
        oma.run_agent("Hi", model="m", adapter=Answering("ok"), online_evaluation=failing)
        assert failing.force_flush(timeout_ms=5000) == {"status": "partial", "accepted": 1, "exported": 1,
                                                        "dropped": 0, "failed": 1}
    assert [d["message"] for d in diagnostics] == [
        "Online evaluation cost could not be estimated; the cost budget remains best-effort."] * 2
