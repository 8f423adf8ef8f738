"""The shared behaviour table (fixtures/behaviour/cases.json), run through both Python APIs.

The JavaScript package runs the same table (packages/js/test/behaviour.test.js), so a difference
between the languages fails one of the two suites. The table's contract is in the file itself.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import time
from typing import Any, Callable, Dict, List, Optional

import pytest

import oma_component as oma
from loopback import Loopback, Reply

HERE = os.path.dirname(os.path.abspath(__file__))
TABLE = os.path.join(HERE, "..", "..", "..", "fixtures", "behaviour", "cases.json")
CASES: List[Dict[str, Any]] = json.load(open(TABLE, encoding="utf-8"))["cases"]
KEY = "sk-behaviour-SECRETSECRET0123"

CAMEL = {
    "baseURL": "base_url", "apiKey": "api_key", "systemPrompt": "system_prompt", "maxTurns": "max_turns",
    "maxTokenBudget": "max_token_budget", "maxTokens": "max_tokens", "topP": "top_p", "topK": "top_k",
    "thinkingBudget": "thinking_budget", "deadlineMs": "deadline_ms", "textDeltas": "text_deltas",
}
CALL = {"maxRetries": "max_retries", "retryDelayMs": "retry_delay_ms", "retryBackoff": "retry_backoff",
        "timeoutMs": "timeout_ms", "maxResponseBytes": "max_response_bytes", "deadlineMs": "deadline_ms"}


def matches(expected: Any, actual: Any, path: str = "$") -> Optional[str]:
    """Where ``actual`` differs from ``expected`` (objects: the keys given; lists: the same
    length, item by item; ``{"$startsWith": s}``), or None."""
    if isinstance(expected, dict) and set(expected) == {"$startsWith"}:
        if isinstance(actual, str) and actual.startswith(expected["$startsWith"]):
            return None
        return f"{path}: {actual!r} does not start with {expected['$startsWith']!r}"
    if isinstance(expected, dict) and set(expected) == {"$contains"}:
        if isinstance(actual, str) and expected["$contains"] in actual:
            return None
        return f"{path}: {actual!r} does not contain {expected['$contains']!r}"
    if isinstance(expected, dict) and set(expected) == {"$type"}:
        types = {"string": str, "number": (int, float), "boolean": bool, "object": dict}
        wanted = types[expected["$type"]]
        if isinstance(actual, wanted) and not (expected["$type"] == "number" and isinstance(actual, bool)):
            return None
        return f"{path}: {actual!r} is not a {expected['$type']}"
    if isinstance(actual, oma.OmaError):
        actual = plain_error(actual)
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return f"{path}: expected an object, got {actual!r}"
        for key, value in expected.items():
            if key not in actual:
                return f"{path}.{key}: missing in {actual!r}"
            found = matches(value, actual[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return f"{path}: expected {len(expected)} items, got {actual!r}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            found = matches(e, a, f"{path}[{i}]")
            if found:
                return found
        return None
    if expected != actual or type(expected) is not type(actual):
        return f"{path}: expected {expected!r}, got {actual!r}"
    return None


def plain_error(error: oma.OmaError) -> Dict[str, Any]:
    """An error as the table writes it: ``{name, message, code?, httpStatus?}`` (Python's
    ``http_status``)."""
    out: Dict[str, Any] = {"name": error.name, "message": error.message}
    if error.code is not None:
        out["code"] = error.code
    if error.http_status is not None:
        out["httpStatus"] = error.http_status
    return out


def plain(value: Any) -> Any:
    """An event's value as the table writes it: an error as ``{error: {...}, result}``."""
    if isinstance(value, oma.OmaError):
        out: Dict[str, Any] = {"error": plain_error(value)}
        if value.result is not None:
            out["result"] = value.result
        return out
    return value


def reply(spec: Dict[str, Any]) -> Reply:
    if spec.get("reset"):
        return Reply(reset=True)
    if "hangMs" in spec:
        return Reply(hang=spec["hangMs"] / 1000.0)
    if "sse" in spec:
        return Reply(spec.get("status", 200), sse=[e.encode() for e in spec["sse"]],
                     keep_alive=spec.get("keepAliveMs", 0) / 1000.0)
    return Reply(spec.get("status", 200), spec.get("json"))


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def configuration(case: Dict[str, Any], base: str, seen: "Observed") -> Dict[str, Any]:
    cfg = dict(case["agent"])
    kw: Dict[str, Any] = {"name": "table", "base_url": base, "api_key": KEY}
    for key, value in cfg.items():
        if key == "tools":
            kw["tools"] = [make_tool(t, seen) for t in value]
        elif key == "beforeRun":
            kw["before_run"] = behave(value, lambda ctx: setattr(seen, "hook_agent", ctx["agent"]))
        elif key == "call":
            kw["call"] = {CALL.get(k, k): v for k, v in value.items()}
        else:
            kw[CAMEL.get(key, key)] = value
    return kw


def behave(spec: Dict[str, Any], record: Optional[Callable[[Any], None]] = None) -> Callable[[Any], Any]:
    def fn(given: Any) -> Any:
        if spec.get("records") and record is not None:
            record(given)
        if "throws" in spec:
            raise RuntimeError(spec["throws"])
        return spec["returns"]

    return fn


def make_tool(spec: Dict[str, Any], seen: "Observed") -> Any:
    if spec.get("shape") == "oma":
        # OMA's dict shape; execute(input, context) gets the tool context.
        def execute(given: Any, context: Dict[str, Any]) -> Any:
            if spec.get("records"):
                seen.tool_context = context
            return behave(spec)(given)

        return {"name": spec["name"], "description": spec.get("description", ""),
                "inputSchema": {"type": "object"}, "execute": execute}
    return oma.Tool(spec["name"], spec.get("description", ""), {"type": "object"}, behave(spec))


class Observed:
    def __init__(self) -> None:
        self.progress: List[str] = []
        self.result: Any = None
        self.events: Optional[List[Any]] = None
        self.thrown: Optional[BaseException] = None
        self.history: Any = None
        self.progress_data: Dict[str, Any] = {}
        self.hook_agent: Any = None
        self.tool_context: Any = None
        self.tool_calls_seen: List[List[Any]] = []
        # The loopback provider, for a cancellation that waits until a request has reached it.
        self.provider: Any = None


def on_progress(case: Dict[str, Any], seen: Observed) -> Callable[[Any], None]:
    def observe(event: Any) -> None:
        seen.progress.append(event["type"])
        seen.progress_data[event["type"]] = event["data"]
        if case.get("observers", {}).get("onProgress") == "throws":
            raise RuntimeError("observer broke")

    return observe


def run_options(case: Dict[str, Any], seen: Observed) -> Dict[str, Any]:
    """The run's keyword options: the cancel token (cancelled from a timer thread) and the
    ``on_tool_call`` observer."""
    options: Dict[str, Any] = {}
    if case.get("runOptions", {}).get("onToolCall") == "records":
        options["on_tool_call"] = lambda name, given: seen.tool_calls_seen.append([name, given])
    if "cancelAfterMs" in case:
        token = oma.CancelToken()
        provider = seen.provider if any("hangMs" in r for r in case["replies"]) else None

        def cancel_later() -> None:
            # A provider that hangs is cancelled while it holds the request: the delay counts
            # from the request's arrival (at most 10 s away), so a loaded machine that sends
            # late still cancels a run that is waiting on the provider.
            deadline = time.monotonic() + 10.0
            while provider is not None and not provider.requests and time.monotonic() < deadline:
                time.sleep(0.005)
            time.sleep(case["cancelAfterMs"] / 1000.0)
            token.cancel()

        threading.Thread(target=cancel_later, daemon=True).start()
        options["cancel"] = token
    return options


def call_sync(case: Dict[str, Any], kw: Dict[str, Any], seen: Observed) -> None:
    method, given = case["call"], case["input"]
    try:
        options = run_options(case, seen)
        if method == "runAgent":
            seen.result = oma.run_agent(given, on_progress=on_progress(case, seen), **kw, **options)
            return
        agent = oma.Agent(**kw)
        if method == "run":
            seen.result = agent.run(given, **options)
        elif method == "prompt":
            seen.result = agent.prompt(given, **options)
            seen.history = agent.get_history()
        else:
            seen.events = [{**e, "data": plain(e["data"])} for e in agent.stream(given, **options)]
    except (oma.OmaError, TypeError) as e:
        seen.thrown = e


def call_async(case: Dict[str, Any], kw: Dict[str, Any], seen: Observed) -> None:
    method, given = case["call"], case["input"]

    async def main() -> None:
        options = run_options(case, seen)
        if method == "runAgent":
            seen.result = await oma.run_agent_async(given, on_progress=on_progress(case, seen), **kw, **options)
            return
        agent = oma.AsyncAgent(**kw)
        if method == "run":
            seen.result = await agent.run(given, **options)
        elif method == "prompt":
            seen.result = await agent.prompt(given, **options)
            seen.history = agent.get_history()
        else:
            seen.events = [{**e, "data": plain(e["data"])} async for e in agent.stream(given, **options)]

    try:
        asyncio.run(main())
    except (oma.OmaError, TypeError) as e:
        seen.thrown = e


@pytest.fixture(scope="module")
def provider():
    server = Loopback()
    yield server
    server.close()


@pytest.mark.parametrize("api", ["sync", "async"])
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_case(case, api, provider):
    provider.script(*[reply(r) for r in case["replies"]])
    base = f"http://127.0.0.1:{closed_port()}" if case.get("connection") == "refused" else provider.base
    seen = Observed()
    seen.provider = provider
    kw = configuration(case, case["agent"].get("baseURL", base), seen)
    started = time.monotonic()
    (call_sync if api == "sync" else call_async)(case, kw, seen)
    took_ms = (time.monotonic() - started) * 1000
    expect = case["expect"]
    if "throws" in expect:
        assert seen.thrown is not None, f"did not throw: {seen.result or seen.events}"
        thrown = seen.thrown
        name = thrown.name if isinstance(thrown, oma.OmaError) else type(thrown).__name__
        message = thrown.message if isinstance(thrown, oma.OmaError) else str(thrown)
        assert (problem := matches(expect["throws"], {"name": name, "message": message})) is None, problem
    else:
        assert seen.thrown is None, repr(seen.thrown)
    if "result" in expect:
        assert (problem := matches(expect["result"], seen.result)) is None, problem
    if "events" in expect:
        assert (problem := matches(expect["events"], seen.events)) is None, problem
    if "requests" in expect:
        assert len(provider.requests) == expect["requests"], provider.requests
    if "sent" in expect:
        body = provider.requests[expect["sent"]["request"]]["body"]
        assert (problem := matches(expect["sent"]["lastMessage"], body["messages"][-1])) is None, problem
    if "progress" in expect:
        assert seen.progress == expect["progress"]
    if "history" in expect:
        assert (problem := matches(expect["history"], seen.history)) is None, problem
    if "resultKeys" in expect:
        assert list(seen.result) == expect["resultKeys"]
    if "hookAgent" in expect:
        assert (problem := matches(expect["hookAgent"], seen.hook_agent)) is None, problem
        assert "api_key" not in seen.hook_agent and "apiKey" not in seen.hook_agent
        assert KEY not in json.dumps(seen.hook_agent, default=str)
    if "toolContext" in expect:
        assert (problem := matches(expect["toolContext"], seen.tool_context)) is None, problem
    if "toolCallsSeen" in expect:
        assert seen.tool_calls_seen == expect["toolCallsSeen"]
    for kind, data in expect.get("progressData", {}).items():
        assert (problem := matches(data, seen.progress_data.get(kind))) is None, problem
    if "withinMs" in expect:
        assert took_ms <= expect["withinMs"], f"took {took_ms:.0f} ms"
    assert KEY not in json.dumps([seen.result, seen.events], default=str)
