"""Evaluation (``oma_component.eval``): the shared tables of fixtures/eval/ (sets, scores,
reports and gates, the in-memory store, the runner), then Python's own: asyncio concurrency,
blocking and ``async def`` targets and scorers, cancellation."""

import asyncio
import copy
import json
import os
import threading
import time
import warnings

import pytest
from eval_tables import run_case, snake

import oma_component as oma
from oma_component.eval import (
    EvalSetError,
    EvalStoreError,
    GatePolicyError,
    InMemoryEvalStore,
    define_eval_set,
    define_scorer,
    evaluate_gate,
    run_eval_set,
    run_eval_set_async,
)
from oma_component.eval.report import aggregate_records
from oma_component.eval.scorer import check_score_result

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "eval")


def table(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
        return json.load(f)


SETS, REPORTS, STORE, RUNNER = table("sets.json"), table("reports.json"), table("store.json"), table("runner.json")


def names(cases):
    return [c["name"] for c in cases]


@pytest.mark.parametrize("case", SETS["valid"], ids=names(SETS["valid"]))
def test_valid_sets(case):
    given = copy.deepcopy(case["set"])
    assert define_eval_set(given) == case["expect"]
    assert given == case["set"]


@pytest.mark.parametrize("case", SETS["invalid"], ids=[c["field"] or "set" for c in SETS["invalid"]])
def test_invalid_sets(case):
    with pytest.raises(EvalSetError) as raised:
        define_eval_set(case["set"])
    assert raised.value.field == case["field"]
    if "message" in case:
        assert str(raised.value) == case["message"]


@pytest.mark.parametrize("case", SETS["scores"], ids=[json.dumps(c["result"]) for c in SETS["scores"]])
def test_score_results(case):
    if case["error"] is None:
        assert check_score_result(case["result"]) == case["result"]
    else:
        with pytest.raises((TypeError, ValueError)) as raised:
            check_score_result(case["result"])
        assert str(raised.value) == case["error"]


@pytest.mark.parametrize("case", REPORTS["aggregates"], ids=names(REPORTS["aggregates"]))
def test_aggregates(case):
    scorers = [(s["name"], s.get("version")) for s in case["scorers"]]
    assert aggregate_records(case["records"], scorers, case["tagsByCase"]) == case["expect"]


@pytest.mark.parametrize("case", REPORTS["gates"], ids=names(REPORTS["gates"]))
def test_gates(case):
    assert evaluate_gate(case["report"], case["policy"], case.get("baseline")) == case["expect"]


@pytest.mark.parametrize("case", REPORTS["refusedPolicies"], ids=[c["field"] for c in REPORTS["refusedPolicies"]])
def test_refused_gate_policies(case):
    report = {"evalSet": {"name": "s", "version": "1"}, "caseCount": 0, "repeats": 1, "records": [], "aggregates": [],
              "totals": {"targetErrors": 0}}
    with pytest.raises(GatePolicyError) as raised:
        evaluate_gate(report, case["policy"])
    assert raised.value.field == case["field"]


@pytest.mark.parametrize("case", STORE["append"], ids=names(STORE["append"]))
def test_store_refuses_records(case):
    store = InMemoryEvalStore()
    with pytest.raises(EvalStoreError) as raised:
        store.append(case["records"])
    error = raised.value
    assert {"code": error.code, "field": error.field, "message": error.message} == case["error"]
    assert store.records() == []


def _outcome(call):
    try:
        return "expect", call()
    except EvalStoreError as error:
        return "error", {"code": error.code, "field": error.field, "message": error.message}


@pytest.mark.parametrize("case", STORE["scenarios"], ids=names(STORE["scenarios"]))
def test_store_scenarios(case):
    options = case.get("options", {})
    store = InMemoryEvalStore(max_records=options.get("maxRecords"),
                              now=(lambda: options["now"]) if "now" in options else None)
    for step in case["steps"]:
        if "append" in step:
            key, value = _outcome(lambda: store.append(step["append"]))
        elif "query" in step:
            def pages():
                kwargs = {snake(k): v for k, v in step["query"].items()}
                out = []
                while True:
                    page = store.query(**kwargs)
                    out.append([r["recordId"] for r in page["items"]])
                    if "nextCursor" not in page or not step.get("follow"):
                        return out
                    kwargs["cursor"] = page["nextCursor"]
            key, value = _outcome(pages)
        elif "delete" in step:
            key, value = _outcome(lambda: store.delete(**{snake(k): v for k, v in step["delete"].items()}))
        elif "retention" in step:
            key, value = _outcome(lambda: store.apply_retention(**{snake(k): v for k, v in step["retention"].items()}))
        else:
            assert [r["recordId"] for r in store.records()] == step["records"]
            continue
        assert key in step, (step, value)
        assert value == step[key]


def test_store_cursors_break_after_a_delete_and_never_leak_records():
    store = InMemoryEvalStore()
    records = STORE["scenarios"][2]["steps"][0]["append"]
    store.append(records)
    first = store.query(limit=2)
    assert len(first["items"]) == 2
    records[0]["score"] = 0  # the store kept copies
    assert store.query(limit=4, order="time_asc")["items"][0]["score"] == 1
    store.append([dict(records[0], recordId="late", timestampUnixMs=10)])
    assert [r["recordId"] for r in store.query(limit=2, cursor=first["nextCursor"])["items"]] == ["r2", "r1"]
    store.delete(eval_run_id="run-b")
    with pytest.raises(EvalStoreError) as raised:
        store.query(limit=2, cursor=first["nextCursor"])
    assert raised.value.code == "INVALID_CURSOR"
    with pytest.raises(EvalStoreError) as raised:
        store.query(limit=3, cursor=first["nextCursor"])
    assert raised.value.message == "Cursor does not match this query or is no longer valid."


@pytest.mark.parametrize("case", RUNNER["cases"], ids=names(RUNNER["cases"]))
def test_runner_table(case):
    assert run_case(case) == case["expect"]


@pytest.mark.parametrize("case", RUNNER["refused"], ids=[c["error"] for c in RUNNER["refused"]])
def test_runner_refuses_bad_options(case):
    with pytest.raises((TypeError, ValueError)) as raised:
        run_eval_set(RUNNER["cases"][0]["set"], lambda i, c: {"output": i}, scorers=[],
                     **{snake(k): v for k, v in case["options"].items()})
    assert str(raised.value) == case["error"]


# -- Python's own ---------------------------------------------------------------------------------

EIGHT = define_eval_set({"name": "eight", "version": "1",
                         "cases": [{"id": f"c{i}", "input": i, "expected": i} for i in range(8)]})


def exact(ctx):
    return {"score": 1.0 if ctx["output"] == ctx["evalCase"]["expected"] else 0.0}


def test_samples_run_concurrently_with_async_targets():
    running, peak = 0, 0

    async def target(value, context):
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.05)
        running -= 1
        return {"output": value}

    started = time.monotonic()
    report = asyncio.run(run_eval_set_async(EIGHT, target, scorers=[define_scorer("exact", exact, version="1")],
                                            concurrency=4))
    assert peak == 4 and time.monotonic() - started < 0.35
    assert report["aggregates"][0]["avg"] == 1 and len(report["records"]) == 8
    assert [r["caseId"] for r in report["records"]] == [f"c{i}" for i in range(8)]


def test_blocking_targets_and_scorers_run_on_threads():
    threads = set()

    def target(value, context):
        threads.add(threading.get_ident())
        time.sleep(0.05)
        return {"output": value}

    async def main():
        ticks = 0

        async def tick():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        beat = asyncio.create_task(tick())
        report = await run_eval_set_async(EIGHT, target, scorers=[define_scorer("exact", exact, version="1")],
                                          concurrency=8)
        beat.cancel()
        return report, ticks

    report, ticks = asyncio.run(main())
    assert ticks >= 3 and len(threads) > 1 and report["totals"]["targetErrors"] == 0


def test_a_hanging_scorer_is_given_up_at_its_timeout_and_told_so():
    told = threading.Event()

    def stuck(ctx):
        if ctx["signal"].wait(5):
            told.set()
        return {"score": 1}

    scorer = define_scorer("stuck", stuck, version="1", timeout_ms=30)
    started = time.monotonic()
    report = run_eval_set(EIGHT, lambda v, c: {"output": v}, scorers=[scorer], concurrency=8)
    assert time.monotonic() - started < 2
    assert {r["status"] for r in report["records"]} == {"scorer_error"}
    assert report["records"][0]["error"] == {"kind": "timeout", "name": "TimeoutError",
                                             "message": 'Scorer "stuck" timed out after 30ms.', "retryable": True}
    assert told.wait(2)


def test_the_cancel_token_reaches_targets_and_stops_the_run():
    token = oma.CancelToken()

    def target(value, context):
        assert context["signal"] is token
        if value == 1:
            token.cancel()
        return {"output": value}

    report = run_eval_set(EIGHT, target, scorers=[define_scorer("exact", exact, version="1")], concurrency=1,
                          cancel=token)
    assert report["aborted"] is True and [r["caseId"] for r in report["records"]] == ["c0", "c1"]


def test_run_eval_set_works_inside_a_running_loop():
    async def main():
        return run_eval_set(EIGHT, lambda v, c: {"output": v}, scorers=[define_scorer("exact", exact, version="1")])

    assert asyncio.run(main())["caseCount"] == 8


def test_define_scorer_warns_once_without_a_version_and_refuses_bad_definitions():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        define_scorer("unversioned-once", exact)
        define_scorer("unversioned-once", exact)
    assert [str(w.message) for w in caught] == [
        'Scorer "unversioned-once" has no version; baseline comparisons cannot detect scoring drift.']
    with pytest.raises(TypeError, match="Scorer.name"):
        define_scorer(" ", exact)
    with pytest.raises(TypeError, match="Scorer.score"):
        define_scorer("x", None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"scorers\[0\]"):
        run_eval_set(EIGHT, lambda v, c: {"output": v}, scorers=[object()])


def test_the_eval_store_receives_each_sample():
    store = InMemoryEvalStore()
    report = run_eval_set(EIGHT, lambda v, c: {"output": v}, scorers=[define_scorer("exact", exact, version="1")],
                          store=store, eval_run_id="nightly-1", metadata={"branch": "main"})
    kept = store.query(eval_run_id="nightly-1", limit=100)["items"]
    assert sorted(r["recordId"] for r in kept) == sorted(r["recordId"] for r in report["records"])
    assert all(r["metadata"] == {"branch": "main"} for r in kept)


def test_target_from_agent_runs_each_case_through_run_agent(loop, anthropic):
    from loopback import Reply, anthropic_text

    from oma_component.eval import target_from_agent

    loop.script(Reply(body=anthropic_text("4", input_tokens=8, output_tokens=1)),
                Reply(body=anthropic_text("Lyon", input_tokens=5, output_tokens=2)))
    smoke = define_eval_set({"name": "smoke", "version": "1", "cases": [
        {"id": "sum", "input": "What is 2 + 2?", "expected": "4"},
        {"id": "capital", "input": "Capital of France?", "expected": "Paris"}]})
    scorer = define_scorer("exact", exact, version="1")
    target = target_from_agent(name="candidate", metadata={"target": "candidate"}, **anthropic)
    report = run_eval_set(smoke, target, scorers=[scorer], concurrency=1)
    assert [r["score"] for r in report["records"]] == [1.0, 0.0]
    first = report["records"][0]
    assert first["metadata"] == {"eval_case": "sum", "eval_repeat": "1", "target": "candidate",
                                 "model": "claude-test", "provider": "anthropic"}
    assert first["usage"]["tokens"] == {"input_tokens": 8, "output_tokens": 1}
    assert set(first["runRef"]) == {"runId", "attempt", "traceId", "rootSpanId"} and first["runRef"]["attempt"] == 1
    assert report["totals"]["tokens"] == {"input_tokens": 13, "output_tokens": 3}
    assert [r["body"]["messages"][-1]["content"][0]["text"] for r in loop.requests] == [
        "What is 2 + 2?", "Capital of France?"]


def test_blocking_scorers_given_up_do_not_starve_later_samples():
    release = threading.Event()

    def stuck(ctx):
        release.wait(10)  # ignores its signal: its thread is left behind
        return {"score": 1}

    many = define_eval_set({"name": "many", "version": "1",
                            "cases": [{"id": f"c{i}", "input": i} for i in range(40)]})
    started = time.monotonic()
    report = run_eval_set(many, lambda v, c: {"output": v},
                          scorers=[define_scorer("stuck", stuck, version="1", timeout_ms=20)], concurrency=4)
    release.set()
    assert time.monotonic() - started < 8
    assert len(report["records"]) == 40 and {r["status"] for r in report["records"]} == {"scorer_error"}
