"""OMA's built-in scorers and LLM judges (``oma_component.eval``): the shared table
fixtures/eval/scorers.json through the package's factories as users call them (the core, the
codec and the JavaScript package run the same table), and judges run as agents with a
user-written LLM adapter."""

import asyncio
import json
import os
from typing import Any, Dict, List

import pytest

from oma_component.eval import (
    cost_budget_scorer,
    create_answer_relevancy_scorer,
    create_judge_scorer,
    define_eval_set,
    dependency_utilization_scorer,
    duplicate_work_scorer,
    no_progress_scorer,
    run_eval_set,
    structured_output_compliance_scorer,
    tool_call_success_scorer,
)
from oma_component.eval._rules import judge_step

with open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "eval", "scorers.json"),
          encoding="utf-8") as f:
    TABLE = json.load(f)

CLASSES = {"TypeError": TypeError, "RangeError": ValueError, "Error": ValueError}

FACTORIES = {
    "cost_budget": lambda o: cost_budget_scorer(max_tokens=o.get("maxTokens"), max_cost_amount=o.get("maxCostAmount")),
    "dependency_utilization": lambda o: dependency_utilization_scorer(),
    "duplicate_work": lambda o: duplicate_work_scorer(threshold=o.get("threshold")),
    "no_progress": lambda o: no_progress_scorer(max_stall_turns=o.get("maxStallTurns")),
    "structured_output_compliance": lambda o: structured_output_compliance_scorer(o.get("schema")),
    "tool_call_success": lambda o: tool_call_success_scorer(),
}

# Python has no `undefined`: a result's `structured` of None is no structured output, so the row
# whose structured output is JSON null is JavaScript's alone.
SCORER_ROWS = [row for row in TABLE["scorers"] if row["name"] != "structured: present without a schema passes, null included"]


def context(given: Dict[str, Any]) -> Dict[str, Any]:
    out: Dict[str, Any] = {"evalCase": {"id": "case-1", "input": "input", "expected": "expected"}, "output": "output",
                           "metadata": {}}
    out.update({key: given[key] for key in ("result", "trace") if key in given})
    return out


@pytest.mark.parametrize("row", SCORER_ROWS, ids=[row["name"] for row in SCORER_ROWS])
def test_the_shared_scorer_table(row):
    scorer = FACTORIES[row["scorer"]](row["options"])
    assert (scorer.name, scorer.version) == (row["scorer"], "1")
    if "error" in row:
        with pytest.raises(CLASSES[row["error"]["name"]]) as raised:
            scorer.score(context(row["context"]))
        assert str(raised.value) == row["error"]["message"]
    else:
        assert json.dumps(scorer.score(context(row["context"]))) == json.dumps(row["expect"])


@pytest.mark.parametrize("row", TABLE["options"], ids=[f"{r['scorer']} {r['options']}" for r in TABLE["options"]])
def test_the_shared_option_table(row):
    # JavaScript's null (an option left to its default) is Python's None; its strings are not numbers either.
    if "error" in row:
        with pytest.raises(CLASSES[row["error"]["name"]]) as raised:
            FACTORIES[row["scorer"]](row["options"])
        assert str(raised.value) == row["error"]["message"]
    else:
        assert FACTORIES[row["scorer"]](row["options"]).name == row["expect"]["name"]


@pytest.mark.parametrize("step,key,request_key", [("options", "options", "options"), ("prompt", "prompts", "request"),
                                                    ("verdict", "verdicts", "request"),
                                                    ("aggregate", "aggregates", "request")])
def test_the_shared_judge_tables_through_the_rules(step, key, request_key):
    for row in TABLE["judge"][key]:
        if "error" in row:
            with pytest.raises(CLASSES[row["error"]["name"]]) as raised:
                judge_step(step, row[request_key])
            assert str(raised.value) == row["error"]["message"]
        else:
            assert json.dumps(judge_step(step, row[request_key])) == json.dumps(row["expect"])


class JudgeAdapter:
    """A user-written LLM adapter answering every judge prompt with ``answer(prompt)``."""

    name = "judge-fixture"

    def __init__(self, answer):
        self.answer = answer
        self.prompts: List[str] = []

    async def chat(self, messages, options):
        prompt = "".join(b["text"] for b in messages[-1]["content"])
        self.prompts.append(prompt)
        await asyncio.sleep(0)
        return {"id": "j", "content": [{"type": "text", "text": self.answer(prompt)}], "model": options["model"],
                "stop_reason": "end_turn", "usage": {"input_tokens": 3, "output_tokens": 2}}

    async def stream(self, messages, options):
        yield {"type": "done", "data": await self.chat(messages, options)}


@pytest.mark.parametrize("row", TABLE["judge"]["prompts"], ids=[r["name"] for r in TABLE["judge"]["prompts"]])
def test_a_judge_is_asked_the_tables_prompt(row):
    adapter = JudgeAdapter(lambda _p: '{"score":1,"reason":"r"}')
    request = row["request"]
    judges = [{"name": "j", "model": "m", "adapter": adapter}]
    if "preset" in request:
        scorer = create_answer_relevancy_scorer(version="1", judges=judges)
    else:
        scorer = create_judge_scorer("judge", version="1", judges=judges,
                                     judge_prompt=request.get("instruction"), verdict_schema=request.get("schema"))
    case = {"id": "c", "input": request["input"]}
    if "expected" in request:
        case["expected"] = request["expected"]
    if "schema" in request:
        adapter.answer = lambda _p: '{"score":1,"pass":true}'
    asyncio.run(scorer.score({"evalCase": case, "output": request["output"], "metadata": request["metadata"]}))
    assert adapter.prompts[0] == row["expect"]["prompt"]


def test_a_relevancy_judge_in_an_offline_evaluation():
    adapter = JudgeAdapter(lambda p: '{"score":0.1,"reason":"off topic"}' if "an unrelated answer" in p
                           else '{"score":0.75,"reason":"mostly relevant"}')
    relevancy = create_answer_relevancy_scorer(version="v1", judges=[{"name": "judge", "model": "judge-model",
                                                                       "adapter": adapter}])
    cases = define_eval_set({"name": "s", "version": "1", "cases": [
        {"id": "a", "input": "Capital of France?", "expected": "Paris"}, {"id": "b", "input": "Anything"}]})
    report = run_eval_set(cases, lambda value, _c: {"output": "an unrelated answer" if value == "Anything" else "Paris."},
                          scorers=[relevancy], concurrency=1)
    assert [(r["caseId"], r["scorer"]["name"], r["score"], r["reason"]) for r in report["records"]] == [
        ("a", "answer_relevancy", 0.75, "judge: mostly relevant"), ("b", "answer_relevancy", 0.1, "judge: off topic")]
    assert adapter.prompts[0].startswith("Evaluate only answer relevancy.")
    assert "## Expected output\n(not provided)" in adapter.prompts[1]


def test_a_pydantic_verdict_schema_is_checked_with_pydantic():
    pydantic = pytest.importorskip("pydantic")

    class Verdict(pydantic.BaseModel):
        score: float
        passed: bool

    adapter = JudgeAdapter(lambda _p: '{"score": 0.5, "passed": true}')
    scorer = create_judge_scorer("strict", version="1", judges=[{"name": "j", "model": "m", "adapter": adapter}],
                                 verdict_schema=Verdict)
    scored = asyncio.run(scorer.score({"evalCase": {"id": "c", "input": "i"}, "output": "o", "metadata": {}}))
    assert scored == {"score": 0.5, "details": {"judges": ["j"], "models": ["m"], "scores": [0.5]}}
    assert '"passed"' in adapter.prompts[0]
    adapter.answer = lambda _p: '{"score": 0.5}'
    with pytest.raises(ValueError, match="Output validation failed:\n  - passed: "):
        asyncio.run(scorer.score({"evalCase": {"id": "c", "input": "i"}, "output": "o", "metadata": {}}))


def test_a_judge_that_fails_or_times_out_raises():
    class Down(JudgeAdapter):
        async def chat(self, messages, options):
            raise RuntimeError("judge down")

    class Hangs(JudgeAdapter):
        async def chat(self, messages, options):
            await asyncio.sleep(5)

    ctx = {"evalCase": {"id": "c", "input": "i"}, "output": "o", "metadata": {}}
    with pytest.raises(Exception, match="judge down"):
        asyncio.run(create_judge_scorer("a", version="1", judges=[{"name": "j", "model": "m", "adapter": Down(str)}])
                    .score(ctx))
    with pytest.raises(TimeoutError, match="Judge scorer exceeded timeout of 50ms."):
        asyncio.run(create_judge_scorer("b", version="1", timeout_ms=50,
                                        judges=[{"name": "j", "model": "m", "adapter": Hangs(str)}]).score(ctx))
    with pytest.raises(ValueError, match="JudgeScorerOptions.quorum"):
        create_judge_scorer("c", judges=[{"name": "j", "model": "m"}], quorum=3)
