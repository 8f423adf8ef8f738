"""Mistakes the types must catch (check.sh expects each of the marked lines to fail)."""

from __future__ import annotations

from typing import Any, Dict

import oma_component as oma
from oma_component import eval as oma_eval
from oma_component import observability as obs


@oma.tool
def add(args: Dict[str, Any]) -> str:
    return str(args["a"] + args["b"])


def mistakes(agent: oma.Agent) -> None:
    result = agent.run("hi")
    print(result["sucess"])  # TYPO: a key that does not exist
    for event in agent.stream("hi"):
        if event["type"] == "text_delta":
            print(event["text"])  # TYPO: the delta is in "data"
    add(1)  # TYPO: the decorated function keeps its parameter types
    count: int = add({"a": 1})  # TYPO: and its return type
    oma.Agent(model="m", provider="anthropic", call={"timeout": 5})  # TYPO: no such call option


def telemetry(sink: obs.BatchingTraceSink) -> None:
    print(sink.force_flush()["staus"])  # TYPO: a flush result has "status"
    obs.SensitiveDataProcessor(sink, capture={"toolInput": "redacted"})  # TYPO: capture keys are snake_case
    oma.run_agent("hi", model="m", observability={"sink": [sink]})  # TYPO: the key is "sinks"


def scoring(report: oma_eval.EvalRunReport) -> None:
    print(report["aggregates"][0]["average"])  # TYPO: the aggregate's mean is "avg"
