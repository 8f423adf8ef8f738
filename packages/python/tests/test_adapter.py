"""OMA's ``adapter`` (an LLM adapter of one's own) through the package: the shared table
``fixtures/adapter/cases.json`` (also run through the Rust host and the JavaScript package),
each case's adapter answering from its script, with the sync API and asyncio, with plain and
``async def`` adapters; then what only Python has (iterables, values that are not JSON, the
declaration's checks)."""

from __future__ import annotations

import asyncio
import json
import os
import re
from typing import Any, AsyncIterator, Dict, Iterator, List, Mapping

import pytest

from oma_component import Agent, AsyncAgent, LLMChatOptions, LLMMessage, LLMResponse, run_agent

_TABLE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "adapter", "cases.json")
with open(_TABLE, encoding="utf-8") as f:
    CASES: List[Dict[str, Any]] = json.load(f)["cases"]

ADAPTER = "fixture-adapter"
#: The table's OMA names, as the package's keyword arguments.
KEYWORDS = {"name": "name", "model": "model", "systemPrompt": "system_prompt", "maxTokens": "max_tokens",
            "temperature": "temperature", "maxTokenBudget": "max_token_budget", "call": "call"}


def thrown(fields: Mapping[str, Any]) -> Exception:
    """An exception of the class the case names, with its code and status."""
    error = type(fields["name"], (Exception,), {})(fields["message"])
    if "code" in fields:
        error.code = fields["code"]  # type: ignore[attr-defined]
    if "status" in fields:
        error.status = fields["status"]  # type: ignore[attr-defined]
    return error


class Scripted:
    """The case's adapter: answers from its script; records each call."""

    name = ADAPTER

    def __init__(self, case: Mapping[str, Any]) -> None:
        self.script = list(case.get("script", []))
        self.calls: List[Dict[str, Any]] = []
        self.case = case["name"]

    def take(self, messages: List[LLMMessage], options: LLMChatOptions) -> Dict[str, Any]:
        self.calls.append({"messages": json.loads(json.dumps(messages)), "options": dict(options)})
        assert self.script, f"{self.case}: the adapter is called as often as its script says"
        return self.script.pop(0)

    @staticmethod
    def reply(entry: Mapping[str, Any]) -> Any:
        if "throws" in entry:
            raise thrown(entry["throws"])
        return entry["response"]

    @staticmethod
    def events(entry: Mapping[str, Any]) -> List[Dict[str, Any]]:
        return [{"type": "error", "data": thrown(e["data"])} if e["type"] == "error" else e
                for e in entry["events"]]


class SyncScripted(Scripted):
    def chat(self, messages: List[LLMMessage], options: LLMChatOptions) -> LLMResponse:
        return self.reply(self.take(messages, options))  # type: ignore[no-any-return]

    def stream(self, messages: List[LLMMessage], options: LLMChatOptions) -> Iterator[Dict[str, Any]]:
        yield from self.events(self.take(messages, options))


class AsyncScripted(Scripted):
    async def chat(self, messages: List[LLMMessage], options: LLMChatOptions) -> LLMResponse:
        await asyncio.sleep(0)
        return self.reply(self.take(messages, options))  # type: ignore[no-any-return]

    async def stream(self, messages: List[LLMMessage], options: LLMChatOptions) -> AsyncIterator[Dict[str, Any]]:
        for event in self.events(self.take(messages, options)):
            await asyncio.sleep(0)
            yield event


def answering(text: str) -> Any:
    """A tool that answers ``text``."""
    return lambda _input: text


def arguments(case: Mapping[str, Any], adapter: Scripted) -> Dict[str, Any]:
    kwargs: Dict[str, Any] = {KEYWORDS[k]: v for k, v in case["agent"].items() if k != "tools"}
    answers = case.get("toolAnswers", {})
    kwargs["tools"] = [{"name": name, "description": "finds things", "inputSchema": {"type": "object"},
                        "execute": answering(answers[name])}
                       for name in case["agent"].get("tools", [])]
    kwargs["adapter"] = adapter
    kwargs["text_deltas"] = case["call"] == "stream"
    return kwargs


def check(case: Mapping[str, Any], result: Mapping[str, Any], calls: List[Any], deltas: List[str]) -> None:
    expect = case["expect"]
    for key, value in expect["result"].items():
        assert json.loads(json.dumps(result.get(key))) == value, key
    if "toolNames" in expect:
        assert [c["toolName"] for c in result["toolCalls"]] == expect["toolNames"]
    if "calls" in expect:
        assert calls == expect["calls"]
    if "deltas" in expect:
        assert deltas == expect["deltas"]


def run_sync(case: Mapping[str, Any], adapter: Scripted) -> Any:
    agent = Agent(**arguments(case, adapter))
    deltas: List[str] = []
    if case["call"] != "stream":
        return agent.run(case["input"]), deltas
    result: Any = None
    for event in agent.stream(case["input"]):
        if event["type"] == "text_delta":
            deltas.append(event["data"])
        elif event["type"] == "done":
            result = event["data"]
        elif event["type"] == "error":
            result = event["data"].result  # type: ignore[union-attr]
    return result, deltas


async def run_async(case: Mapping[str, Any], adapter: Scripted) -> Any:
    agent = AsyncAgent(**arguments(case, adapter))
    deltas: List[str] = []
    if case["call"] != "stream":
        return await agent.run(case["input"]), deltas
    result: Any = None
    async for event in agent.stream(case["input"]):
        if event["type"] == "text_delta":
            deltas.append(event["data"])
        elif event["type"] == "done":
            result = event["data"]
        elif event["type"] == "error":
            result = event["data"].result  # type: ignore[union-attr]
    return result, deltas


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
@pytest.mark.parametrize("kind", [SyncScripted, AsyncScripted], ids=["plain", "async-def"])
def test_the_adapter_table_sync_api(case: Dict[str, Any], kind: Any) -> None:
    adapter = kind(case)
    result, deltas = run_sync(case, adapter)
    check(case, result, adapter.calls, deltas)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
@pytest.mark.parametrize("kind", [SyncScripted, AsyncScripted], ids=["plain", "async-def"])
def test_the_adapter_table_asyncio(case: Dict[str, Any], kind: Any) -> None:
    adapter = kind(case)
    result, deltas = asyncio.run(run_async(case, adapter))
    check(case, result, adapter.calls, deltas)


def response(text: str) -> LLMResponse:
    return {"id": "r-1", "content": [{"type": "text", "text": text}], "model": "m", "stop_reason": "end_turn",
            "usage": {"input_tokens": 3, "output_tokens": 2}}


class Fixed:
    """A deterministic adapter, as OMA's examples write them."""

    name = "local"

    def __init__(self, text: str = "fine") -> None:
        self.text = text
        self.options: List[Any] = []

    def chat(self, messages: List[LLMMessage], options: LLMChatOptions) -> LLMResponse:
        self.options.append(options)
        return response(self.text)

    def stream(self, messages: List[LLMMessage], options: LLMChatOptions) -> Iterator[Dict[str, Any]]:
        raise AssertionError("stream is called only for text_deltas")


def test_an_adapter_needs_no_provider_or_key_and_run_agent_takes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    adapter = Fixed()
    result = run_agent("hi", model="local-model", adapter=adapter, system_prompt="Be brief.", max_tokens=9)
    assert result["success"] is True and result["output"] == "fine"
    assert adapter.options == [{"model": "local-model", "maxTokens": 9, "systemPrompt": "Be brief."}]


def test_a_streamed_run_without_text_deltas_calls_chat() -> None:
    events = list(Agent(model="m", adapter=Fixed("whole")).stream("hi"))
    assert [e["type"] for e in events] == ["text", "done"]


def test_answers_that_are_not_json_or_not_iterable_fail_the_run_with_a_message() -> None:
    class Odd(Fixed):
        def chat(self, messages: List[LLMMessage], options: LLMChatOptions) -> Any:
            return {"id": "x", "content": [{"type": "text", "text": object()}]}

    result = Agent(model="m", adapter=Odd()).run("hi")
    assert result["success"] is False
    assert re.search(r"the adapter's LLMResponse is not JSON", result["output"])

    class Flat(Fixed):
        def stream(self, messages: List[LLMMessage], options: LLMChatOptions) -> Any:
            return 42

    events = list(Agent(model="m", adapter=Flat(), text_deltas=True).stream("hi"))
    assert events[-1]["type"] == "error"
    assert "adapter.stream must return an iterable" in str(events[-1]["data"])


def test_a_stream_that_raises_keeps_its_status() -> None:
    class Failing(Fixed):
        async def stream(self, messages: List[LLMMessage], options: LLMChatOptions) -> AsyncIterator[Dict[str, Any]]:
            yield {"type": "text", "data": "a"}
            error = RuntimeError("gone")
            error.status = 503  # type: ignore[attr-defined]
            raise error

    async def collect() -> List[Any]:
        return [e async for e in AsyncAgent(model="m", adapter=Failing(), text_deltas=True).stream("hi")]

    for events in (list(Agent(model="m", adapter=Failing(), text_deltas=True).stream("hi")), asyncio.run(collect())):
        assert [e["data"] for e in events if e["type"] == "text_delta"] == ["a"]
        assert events[-1]["type"] == "error"
        assert events[-1]["data"].result["errorInfo"]["httpStatus"] == 503


def test_the_declaration_is_checked_when_the_agent_is_made() -> None:
    class NoName(Fixed):
        name = ""

    class NoChat:
        name = "n"

    class Wrong(Fixed):
        capabilities = {"echoes_reasoning": "always"}

    for adapter, message in [(NoName(), "adapter.name"), (NoChat(), "adapter.chat"), (Wrong(), "echoes_reasoning")]:
        with pytest.raises(TypeError, match=message):
            Agent(model="m", adapter=adapter)

    class Declared(Fixed):
        capabilities = {"echoes_reasoning": "own-issued"}

    assert Agent(model="m", adapter=Declared()).run("hi")["success"] is True
