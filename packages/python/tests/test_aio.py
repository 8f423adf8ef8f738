"""The asyncio API: AsyncAgent, run_agent_async, async and sync tools and hooks, concurrency,
the run's deadline over tools and hooks, cancellation, and one runtime for both APIs."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from typing import Any, Dict, List

import pytest

import oma_component as oma
from conftest import KEY
from loopback import Reply, anthropic_sse, anthropic_text, anthropic_tool_use


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_run_stream_prompt(loop, anthropic):
    async def main() -> None:
        agent = oma.AsyncAgent(name="aio", system_prompt="Be brief.", text_deltas=True, **anthropic)
        result = await agent.run("Hello")
        assert result["success"] and result["output"] == "Hello from the loopback."
        assert loop.requests[-1]["headers"]["x-api-key"] == KEY
        loop.script(Reply(sse=anthropic_sse(["The ", "answer."]), delay=0.01))
        events = [e async for e in agent.stream("q")]
        assert [e["data"] for e in events if e["type"] == "text_delta"] == ["The ", "answer."]
        assert {"type": "text", "data": "The answer."} in events
        assert events[-1]["type"] == "done" and events[-1]["data"]["output"] == "The answer."
        assert (await agent.prompt("one"))["success"]
        assert len(agent.get_history()) == 2
        assert (await agent.prompt([{"type": "text", "text": "two"}]))["success"]
        assert len(agent.get_history()) == 4
        agent.reset()
        assert agent.get_history() == []
        assert KEY not in json.dumps([result, events[-1]["data"]])

    run(main())


def test_the_same_events_as_the_sync_api(loop, anthropic):
    def shape(events: List[Any]) -> List[Any]:
        out = []
        for e in events:
            def own(result: Any) -> Any:
                # Each run has its own identity; the error is compared by name and message.
                if not isinstance(result, dict):
                    return result
                return {k: v for k, v in result.items() if k not in ("identity", "error")}

            data = e["data"]
            if isinstance(data, oma.OmaError):
                data = (data.name, data.message, own(data.result))
            out.append((e["type"], own(data)))
        return out

    for script in ([Reply(sse=anthropic_sse(["a", "b"]))],
                   [Reply(400, {"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}})]):
        loop.script(*script)
        sync_events = list(oma.Agent(**anthropic).stream("go", seed=7))
        loop.script(*script)

        async def main() -> List[Any]:
            return [e async for e in oma.AsyncAgent(**anthropic).stream("go", seed=7)]

        assert shape(run(main())) == shape(sync_events)
        assert len(sync_events) > 1 or sync_events[0]["type"] == "error"


def test_invalid_input_raises_at_the_call(loop, anthropic):
    agent = oma.AsyncAgent(**anthropic)
    with pytest.raises(oma.InvalidMessageError, match="messages must be an array, got object"):
        agent.stream({"role": "user"})  # type: ignore[arg-type]

    async def main() -> None:
        with pytest.raises(oma.InvalidMessageError, match="got null"):
            await agent.run(None)  # type: ignore[arg-type]

    run(main())
    assert loop.requests == []


def test_async_tools_of_one_turn_run_concurrently(loop, anthropic):
    # Each tool waits until both have started: run one after the other, the first would wait
    # for ever (bounded at 10 s, then it reports that it was alone). No clock decides the test.
    started: List[str] = []
    both = asyncio.Event()

    @oma.tool(description="waits")
    async def slow(args: Dict[str, Any]) -> str:
        started.append(args["n"])
        if len(started) == 2:
            both.set()
        try:
            await asyncio.wait_for(both.wait(), 10)
        except asyncio.TimeoutError:
            return f"alone {args['n']}"
        return f"done {args['n']}"

    loop.script(Reply(body=anthropic_tool_use([{"id": "a", "name": "slow", "input": {"n": "a"}},
                                               {"id": "b", "name": "slow", "input": {"n": "b"}}])),
                Reply(body=anthropic_text("both")))

    async def main() -> Any:
        return await oma.AsyncAgent(tools=[slow], **anthropic).run("go")

    result = run(main())
    assert result["success"], result
    assert [c["output"] for c in result["toolCalls"]] == ["done a", "done b"]
    assert sorted(started) == ["a", "b"]


def test_a_turn_of_many_tools_settling_out_of_order(loop, anthropic):
    # Each settled answer is queued once and handed to the session; the calls settle in an
    # order unlike the one they were made in, several in the same tick.
    n = 400

    @oma.tool(description="answers after a delay of its own")
    async def slot(args: Dict[str, Any]) -> str:
        await asyncio.sleep(((args["i"] * 7919) % 23) / 1000)
        return f"answer {args['i']}"

    calls = [{"id": f"c{i}", "name": "slot", "input": {"i": i}} for i in range(n)]
    loop.script(Reply(body=anthropic_tool_use(calls)), Reply(body=anthropic_text("all done")))
    result = run(oma.AsyncAgent(tools=[slot], **anthropic).run("go"))
    assert result["success"], result.get("errorInfo")
    assert result["output"] == "all done"
    assert [c["output"] for c in result["toolCalls"]] == [f"answer {i}" for i in range(n)]


def test_sync_tools_and_hooks_work_in_the_async_api(loop, anthropic):
    threads: List[str] = []

    def add(args: Dict[str, Any]) -> str:
        threads.append(threading.current_thread().name)
        return str(args["a"] + args["b"])

    def hook(ctx: oma.BeforeRunContext) -> oma.BeforeRunResult:
        return {"prompt": ctx["prompt"].upper()}

    loop.script(Reply(body=anthropic_tool_use([{"id": "a", "name": "add", "input": {"a": 2, "b": 3}}])),
                Reply(body=anthropic_text("5")))
    result = run(oma.AsyncAgent(tools=[oma.Tool("add", "adds", {"type": "object"}, add)], before_run=hook,
                                **anthropic).run("sum"))
    assert result["success"] and result["toolCalls"][0]["output"] == "5"
    assert threads and threads[0] != threading.main_thread().name
    assert loop.requests[0]["body"]["messages"][0]["content"][0]["text"] == "SUM"


def test_async_hook_and_failing_async_tool(loop, anthropic):
    async def hook(ctx: oma.BeforeRunContext) -> Dict[str, Any]:
        await asyncio.sleep(0.01)
        return {"prompt": "rewritten"}

    async def broken(args: Dict[str, Any]) -> str:
        raise RuntimeError("disk on fire")

    loop.script(Reply(body=anthropic_tool_use([{"id": "a", "name": "broken", "input": {}}])),
                Reply(body=anthropic_text("recovered")))
    result = run(oma.AsyncAgent(tools=[oma.Tool("broken", "fails", {"type": "object"}, broken)], before_run=hook,
                                **anthropic).run("x"))
    assert result["success"]
    call = dict(result["toolCalls"][0])
    assert isinstance(call.pop("duration"), int)
    assert call == {"toolName": "broken", "input": {}, "output": "disk on fire"}
    assert loop.requests[0]["body"]["messages"][0]["content"][0]["text"] == "rewritten"


def test_an_async_tool_in_the_sync_api_is_awaited(loop, anthropic):
    async def later(args: Dict[str, Any]) -> str:
        await asyncio.sleep(0.01)
        return "awaited"

    loop.script(Reply(body=anthropic_tool_use([{"id": "a", "name": "later", "input": {}}])),
                Reply(body=anthropic_text("ok")))
    result = oma.Agent(tools=[oma.Tool("later", "", {"type": "object"}, later)], **anthropic).run("x")
    assert result["toolCalls"][0]["output"] == "awaited"


@pytest.mark.parametrize("kind", ["async", "sync"])
def test_the_deadline_holds_a_tool(loop, anthropic, kind):
    cancelled = threading.Event()

    async def forever(args: Dict[str, Any]) -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    def blocking(args: Dict[str, Any]) -> str:
        time.sleep(3)
        return "late"

    fn = forever if kind == "async" else blocking
    loop.script(Reply(body=anthropic_tool_use([{"id": "a", "name": "t", "input": {}}])))
    agent = oma.AsyncAgent(tools=[oma.Tool("t", "", {"type": "object"}, fn)], deadline_ms=400, **anthropic)
    t0 = time.monotonic()
    result = run(agent.run("x"))
    took = time.monotonic() - t0
    assert result["success"] is False and result["status"]["code"] == "timeout", result
    assert took < 1.5, took
    if kind == "async":
        assert cancelled.is_set()


def test_the_deadline_holds_an_async_hook(loop, anthropic):
    async def hook(ctx: Any) -> Any:
        await asyncio.sleep(30)

    t0 = time.monotonic()
    result = run(oma.AsyncAgent(before_run=hook, deadline_ms=300, **anthropic).run("x"))
    assert result["status"]["code"] == "timeout" and time.monotonic() - t0 < 1.5
    assert loop.requests == []


class Stall:
    """A provider that sends a stream's head and first event, then holds the connection;
    records when the client closes it."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.base = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.closed = threading.Event()
        self.requests = 0
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.settimeout(10)
            try:
                conn.recv(65536)
                self.requests += 1
                head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                event = anthropic_sse(["partial"])[0]
                conn.sendall(head + b"%x\r\n%s\r\n" % (len(event), event))
                while conn.recv(1):  # b"" once the client closed its end
                    pass
                self.closed.set()
            except OSError:
                self.closed.set()
            finally:
                conn.close()

    def close(self) -> None:
        self.sock.close()


def test_cancelling_the_task_closes_the_request_and_raises(anthropic):
    stall = Stall()
    try:
        kw = dict(anthropic, base_url=stall.base)
        agent = oma.AsyncAgent(**kw)

        async def main() -> None:
            seen: List[Any] = []

            async def consume() -> None:
                async for event in agent.stream("x"):
                    seen.append(event)

            task = asyncio.create_task(consume())
            while stall.requests == 0:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert all(e["type"] not in ("done", "error") for e in seen)

            # a prompt cancelled mid-run leaves the history as it was
            before = agent.get_history()
            prompt = asyncio.create_task(agent.prompt("never committed"))
            await asyncio.sleep(0.2)
            prompt.cancel()
            with pytest.raises(asyncio.CancelledError):
                await prompt
            assert agent.get_history() == before

        run(main())
        assert stall.closed.wait(2), "the provider's connection was not closed"
    finally:
        stall.close()


def test_asyncio_timeout_around_a_run(anthropic):
    stall = Stall()
    try:
        agent = oma.AsyncAgent(**dict(anthropic, base_url=stall.base))

        async def main() -> None:
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.3):
                    await agent.run("x")

        t0 = time.monotonic()
        run(main())
        assert time.monotonic() - t0 < 1.5
        assert stall.closed.wait(2)
    finally:
        stall.close()


def test_run_agent_async_with_observers_that_raise(loop, anthropic):
    progress: List[Any] = []
    cases: List[Any] = []

    async def on_progress(event: oma.ProgressEvent) -> None:
        progress.append(event["type"])
        raise RuntimeError("observer broke")

    def on_case(case: oma.EvaluationCase) -> None:
        cases.append(case)
        raise ValueError("also broke")

    result = run(oma.run_agent_async("summarise", name="ra", on_progress=on_progress,
                                     evaluation={"store_payloads": "full", "sample_rate": 1.0}, on_case=on_case,
                                     **anthropic))
    assert result["success"], result
    assert progress == ["agent_start", "agent_complete"]
    assert len(cases) == 1 and cases[0]["agent"] == "ra"


def test_one_runtime_for_both_apis_and_both_at_once(loop, anthropic):
    sync_agent = oma.Agent(**anthropic)
    async_agent = oma.AsyncAgent(**anthropic)
    assert sync_agent._rt is async_agent._rt is oma.default_runtime()
    results: List[bool] = []

    def sync_runs() -> None:
        for _ in range(15):
            results.append(sync_agent.run("s")["success"])

    thread = threading.Thread(target=sync_runs)
    thread.start()

    async def main() -> List[bool]:
        out = await asyncio.gather(*(async_agent.run("a") for _ in range(15)))
        for r in out:
            assert r["success"], r
        return [r["success"] for r in out]

    async_results = run(main())
    thread.join(30)
    assert async_results == [True] * 15 and results == [True] * 15


def test_async_agent_takes_provider_options(loop, openai):
    async def main() -> Any:
        agent = oma.AsyncAgent(**openai, frequency_penalty=0.5, min_p=0.05, parallel_tool_calls=False,
                               thinking={"effort": "low"}, extra_body={"custom": 1})
        return await agent.run("hi")

    result = run(main())
    assert result["success"]
    body = loop.requests[-1]["body"]
    assert (body["frequency_penalty"], body["min_p"], body["parallel_tool_calls"]) == (0.5, 0.05, False)
    assert body["reasoning_effort"] == "low" and body["custom"] == 1


def test_async_agent_on_trace(loop, anthropic):
    events: List[Dict[str, Any]] = []

    async def sink(event: Dict[str, Any]) -> None:
        events.append(event)
        raise RuntimeError("a broken async sink")

    async def main() -> Any:
        return await oma.AsyncAgent(on_trace=sink, **anthropic).run("hi")

    assert run(main())["success"]
    assert [e["type"] for e in events] == ["llm_call", "agent"]
    assert events[0]["parentId"] == events[1]["spanId"]
