"""Structured output (OMA's ``outputSchema``; ``output_schema`` here): the shared table
``fixtures/structured-output.json``, which the JavaScript suite and the Rust harness run too,
through both Python APIs; then a pydantic model as the schema, validated on this side.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any, Dict, List

import pytest

import oma_component as oma
from loopback import Reply, anthropic_text

HERE = os.path.dirname(os.path.abspath(__file__))
TABLE = json.load(open(os.path.join(HERE, "..", "..", "..", "fixtures", "structured-output.json"), encoding="utf-8"))
CASES: List[Dict[str, Any]] = TABLE["cases"]


def _run(api: str, config: Dict[str, Any], text: str) -> Any:
    if api == "sync":
        return oma.Agent(**config).run(text)
    return asyncio.run(oma.AsyncAgent(**config).run(text))


@pytest.mark.parametrize("api", ["sync", "async"])
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_structured_output_table(case: Dict[str, Any], api: str, loop: Any, anthropic: Dict[str, Any]) -> None:
    loop.script(*[Reply(body=anthropic_text(a, 10, 5)) for a in case["answers"]])
    config = dict(anthropic, system_prompt=case["systemPrompt"], output_schema=case["schema"])
    result = _run(api, config, "Rate it.")
    expect = case["expect"]
    assert result["success"] is expect["success"]
    assert result["structured"] == expect["structured"]
    assert result["output"] == expect["output"]
    assert [result["tokenUsage"]["input_tokens"], result["tokenUsage"]["output_tokens"]] == expect["tokens"]
    bodies = [r["body"] for r in loop.requests]
    assert len(bodies) == expect["requests"]
    for body in bodies:
        assert body["system"].startswith(case["systemPrompt"] + "\n\n## Output Format (REQUIRED)\n")
    if "feedback" in expect:
        last = bodies[1]["messages"][-1]
        assert last["role"] == "user"
        assert expect["feedback"] in last["content"][0]["text"]
    for key, value in expect.get("errorInfo", {}).items():
        assert result["errorInfo"][key] == value, key
    if not expect["success"]:
        assert isinstance(result["error"], oma.StructuredOutputValidationError)


@pytest.mark.parametrize("bad", TABLE["badSchemas"], ids=[b["name"] for b in TABLE["badSchemas"]])
def test_a_schema_that_is_no_schema_is_refused_before_any_request(bad: Dict[str, Any], loop: Any,
                                                                    anthropic: Dict[str, Any]) -> None:
    with pytest.raises((oma.OmaError, TypeError)) as raised:
        oma.Agent(**anthropic, output_schema=bad["schema"]).run("Rate it.")
    assert "output" in str(raised.value).lower() and "schema" in str(raised.value).lower()
    if not isinstance(raised.value, TypeError):
        assert "outputSchema" in str(raised.value) and bad["error"] in str(raised.value)
    assert loop.requests == []


def test_a_pydantic_model_validates_here(loop: Any, anthropic: Dict[str, Any]) -> None:
    pydantic = pytest.importorskip("pydantic")

    class Verdict(pydantic.BaseModel):  # type: ignore[name-defined,misc]
        mood: str
        score: float = pydantic.Field(ge=0, le=1)

    loop.script(Reply(body=anthropic_text('{"mood": "good", "score": 3}', 10, 5)),
                Reply(body=anthropic_text('{"mood": "good", "score": 0.5}', 10, 5)))
    result = oma.Agent(**anthropic, output_schema=Verdict).run("Rate it.")
    assert result["success"] is True
    assert isinstance(result["structured"], Verdict)
    assert result["structured"].score == 0.5
    first = loop.requests[0]["body"]
    # The model is shown the model's JSON Schema, as OMA shows a zod schema's.
    assert '"title": "Verdict"' in first["system"]
    feedback = loop.requests[1]["body"]["messages"][-1]["content"][0]["text"]
    assert "Error: Output validation failed:\n  - score: Input should be less than or equal to 1" in feedback
