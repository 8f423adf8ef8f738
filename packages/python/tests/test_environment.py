"""The shared environment table (fixtures/environment.json), through both Python APIs: an agent
that leaves ``api_key`` or ``base_url`` out takes them from the provider's usual variables.

The JavaScript package runs the same table (packages/js/test/environment.test.js), so a
difference between the languages fails one of the two suites. The table's contract is in the
file itself.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any, Dict, List

import pytest

import oma_component as oma
from loopback import Reply

HERE = os.path.dirname(os.path.abspath(__file__))
TABLE = json.load(open(os.path.join(HERE, "..", "..", "..", "fixtures", "environment.json"), encoding="utf-8"))
CASES: List[Dict[str, Any]] = TABLE["cases"]
NAMED = sorted({name for case in CASES for name in case["env"]})
REFUSAL = {"error": {"type": "invalid_request_error", "message": "scripted refusal"}}


def carries(request: Dict[str, Any], text: str) -> bool:
    return text in request["path"] or any(text in str(v) for v in request["headers"].values())


@pytest.mark.parametrize("api", ["sync", "async"])
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_environment_table(case: Dict[str, Any], api: str, loop: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in NAMED:
        monkeypatch.delenv(name, raising=False)
    for name, value in case["env"].items():
        monkeypatch.setenv(name, value.replace("$LOOPBACK", loop.base))
    loop.script(Reply(status=400, body=REFUSAL))
    config: Dict[str, Any] = dict(model="m", provider=case["provider"], call={"egress": [loop.base]})
    if not case.get("baseURLFromEnvironment"):
        config["base_url"] = loop.base
    if "apiKey" in case:
        config["api_key"] = case["apiKey"]
    try:
        if api == "sync":
            result = oma.Agent(**config).run("hi")
        else:
            result = asyncio.run(oma.AsyncAgent(**config).run("hi"))
        succeeded = result["success"]
    except oma.OmaError:
        succeeded = False
    assert not succeeded, "the loopback refuses every request"
    expect = case["expect"]
    assert len(loop.requests) == expect["requests"], loop.requests
    if "sends" in expect:
        assert carries(loop.requests[0], expect["sends"]), loop.requests[0]
    for text in expect.get("sendsNot", []):
        for request in loop.requests:
            assert not carries(request, text), (text, request)


def test_the_names_are_the_components_table() -> None:
    names = oma.environment_names("gemini")
    assert names == {"api_key": ["GEMINI_API_KEY", "GOOGLE_API_KEY"], "base_url": None, "region": [],
                     "default_region": None}
    bedrock = oma.environment_names("bedrock")
    assert bedrock["api_key"] == ["AWS_BEARER_TOKEN_BEDROCK"]
    assert (bedrock["region"], bedrock["default_region"]) == (["AWS_REGION"], "us-east-1")
    assert oma.environment_names("my-llm") == {"api_key": [], "base_url": None, "region": [], "default_region": None}
