import json
import sys
import time
from typing import Any, Dict, List

import pytest

import oma_component as oma
from conftest import KEY
from loopback import Reply, anthropic_sse, anthropic_text, anthropic_tool_use, openai_sse, openai_text

USER = [{"role": "user", "content": [{"type": "text", "text": "Describe."},
                                     {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                                  "data": "iVBORw0KGgo="}}]}]


def no_key(value):
    # A failed result holds its error, an exception: written as its text.
    assert KEY not in json.dumps(value, default=str)


def test_run_text(loop, anthropic):
    agent = oma.Agent(name="writer", system_prompt="Be brief.", max_tokens=64, **anthropic)
    result = agent.run("Hello")
    assert result["success"] is True
    assert result["output"] == "Hello from the loopback."
    assert result["tokenUsage"] == {"input_tokens": 12, "output_tokens": 7}
    assert result["turns"] == 1
    assert result["messages"] == [{"role": "assistant", "content": [{"type": "text", "text": "Hello from the loopback."}]}]
    req = loop.requests[-1]
    assert req["path"] == "/v1/messages"
    assert req["headers"]["x-api-key"] == KEY
    assert req["body"]["system"] == "Be brief."
    assert req["body"]["messages"] == [{"role": "user", "content": "Hello"}] or \
        req["body"]["messages"][0]["content"][0]["text"] == "Hello"
    no_key(result)


def test_run_messages_openai(loop, openai):
    agent = oma.Agent(**openai)
    result = agent.run(USER)
    assert result["success"] and result["output"] == "Hello from OpenAI loopback."
    sent = loop.requests[-1]["body"]["messages"][0]["content"]
    assert sent[1]["type"] == "image_url"
    assert sent[1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert loop.requests[-1]["headers"]["authorization"] == f"Bearer {KEY}"
    no_key(result)


def test_invalid_input_raises_with_omas_message(loop, anthropic):
    agent = oma.Agent(before_run=lambda ctx: pytest.fail("hook called"), **anthropic)
    bad = [{"role": "user", "content": [{"type": "video", "source": {"type": "url", "media_type": "video/mp4",
                                                                      "url": "ftp://example.com/a.mp4"}}]}]
    with pytest.raises(oma.InvalidMessageError) as info:
        agent.run(bad)
    e = info.value
    assert e.name == "InvalidMessageError" and e.code == "INVALID_MESSAGE" and e.retryable is False
    assert e.message == "messages[0].content[0].source.url must use HTTP or HTTPS"
    with pytest.raises(oma.InvalidMessageError, match="messages must be an array, got null"):
        agent.run(None)  # type: ignore[arg-type]
    with pytest.raises(oma.InvalidMessageError):
        agent.stream(bad)
    assert loop.requests == []


def test_invalid_json_shape_message(loop, anthropic):
    agent = oma.Agent(**anthropic)
    with pytest.raises(oma.InvalidMessageError) as info:
        agent.run([{"role": "user", "content": "not a list"}])
    assert "messages[0].content" in info.value.message


def test_stream_events_with_deltas(loop, anthropic):
    loop.script(Reply(sse=anthropic_sse(["The ", "answer ", "is 42."]), delay=0.01))
    # OMA's events by default: the turn's text, no deltas.
    assert [e["type"] for e in oma.Agent(**anthropic).stream("q")] == ["text", "done"]
    loop.script(Reply(sse=anthropic_sse(["The ", "answer ", "is 42."]), delay=0.01))
    agent = oma.Agent(**anthropic, text_deltas=True)
    events = list(agent.stream("q"))
    deltas = [e["data"] for e in events if e["type"] == "text_delta"]
    assert deltas == ["The ", "answer ", "is 42."]
    assert {"type": "text", "data": "The answer is 42."} in events
    assert events[-1]["type"] == "done" and events[-1]["data"]["output"] == "The answer is 42."
    assert loop.requests[-1]["body"]["stream"] is True
    no_key(events)


def test_stream_openai(loop, openai):
    loop.script(Reply(sse=openai_sse(["a", "b", "c"])))
    events = list(oma.Agent(**openai, text_deltas=True).stream("q"))
    assert [e["data"] for e in events if e["type"] == "text_delta" and e["data"]] == ["a", "b", "c"]
    assert events[-1]["data"]["output"] == "abc"
    assert events[-1]["data"]["tokenUsage"] == {"input_tokens": 5, "output_tokens": 3}


def test_stream_error_event(loop, anthropic):
    loop.script(Reply(400, {"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}))
    events = list(oma.Agent(**anthropic).stream("q"))
    error = events[-1]["data"]
    assert events[-1]["type"] == "error" and isinstance(error, oma.ProviderError)
    assert error.message == "400 bad" and error.http_status == 400
    assert error.result is not None and error.result["success"] is False


def test_prompt_history_reset(loop, anthropic):
    seed = [{"role": "user", "content": [{"type": "text", "text": "earlier"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "noted"}]}]
    agent = oma.Agent(history=seed, **anthropic)
    assert agent.get_history() == seed
    result = agent.prompt("next")
    assert result["success"]
    history = agent.get_history()
    assert len(history) == 4
    assert history[2] == {"role": "user", "content": [{"type": "text", "text": "next"}]}
    assert history[3]["role"] == "assistant"
    assert len(loop.requests[-1]["body"]["messages"]) == 3
    copy = agent.get_history()
    copy.clear()
    assert len(agent.get_history()) == 4
    agent.prompt([{"type": "text", "text": "blocks"}])
    assert len(agent.get_history()) == 6
    agent.reset()
    assert agent.get_history() == []
    # run ignores the history
    agent.run("fresh")
    assert len(loop.requests[-1]["body"]["messages"]) == 1
    assert agent.get_history() == []


def test_failed_prompt_keeps_user_turn_only(loop, anthropic):
    loop.script(Reply(401, {"type": "error", "error": {"type": "authentication_error", "message": "no"}}))
    agent = oma.Agent(**anthropic)
    result = agent.prompt("hi")
    assert result["success"] is False
    assert agent.get_history() == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


def test_invalid_history_fails_creation(anthropic):
    with pytest.raises(oma.InvalidMessageError):
        oma.Agent(history=[{"role": "user", "content": [{"type": "video", "source": {"type": "url",
                  "media_type": "video/mp4", "url": "file:///etc/passwd"}}]}], **anthropic)


def test_before_run_hook_rewrites(loop, anthropic):
    seen = []

    def hook(ctx):
        seen.append(ctx)
        return {"prompt": "rewritten by hook"}

    agent = oma.Agent(name="hooked", before_run=hook, **anthropic)
    result = agent.run(USER)
    assert result["success"]
    ctx = seen[0]
    assert ctx["agent"] == "hooked" or ctx["agent"].get("name") == "hooked"
    assert ctx["prompt"] == "Describe."
    assert ctx["messages"] == USER
    no_key(ctx)
    sent = loop.requests[-1]["body"]["messages"][0]["content"]
    assert sent[0] == {"type": "text", "text": "rewritten by hook"}
    assert sent[1]["type"] == "image"


def test_before_run_hook_replaces_messages(loop, anthropic):
    replacement = [{"role": "user", "content": [{"type": "text", "text": "replaced"}]}]
    agent = oma.Agent(before_run=lambda ctx: {"prompt": ctx["prompt"], "messages": replacement}, **anthropic)
    assert agent.run("original")["success"]
    assert loop.requests[-1]["body"]["messages"][0]["content"][0]["text"] == "replaced"


def test_before_run_hook_raises(loop, anthropic):
    def hook(ctx):
        raise ValueError("hook exploded")

    result = oma.Agent(before_run=hook, **anthropic).run("x")
    assert result["success"] is False
    assert result["output"] == "hook exploded"
    assert result["errorInfo"]["kind"] == "callback"
    assert loop.requests == []


def test_before_run_bad_answer(loop, anthropic):
    result = oma.Agent(before_run=lambda ctx: {"prompt": 3}, **anthropic).run("x")
    assert result["success"] is False
    assert result["errorInfo"]["message"] == "beforeRun.prompt must be a string"
    result = oma.Agent(before_run=lambda ctx: {"prompt": "p", "messages": None}, **anthropic).run("x")
    assert result["errorInfo"]["message"] == "messages must be an array, got null"


def add_tool():
    return oma.Tool("add", "Adds two numbers", {"type": "object", "properties": {"a": {"type": "number"},
                                                                              "b": {"type": "number"}}},
                    lambda args: str(args["a"] + args["b"]))


def test_tool_loop(loop, anthropic):
    loop.script(
        Reply(body=anthropic_tool_use([{"id": "toolu_1", "name": "add", "input": {"a": 2, "b": 3}},
                                       {"id": "toolu_2", "name": "add", "input": {"a": 10, "b": 1}}])),
        Reply(body=anthropic_tool_use([{"id": "toolu_3", "name": "add", "input": {"a": 5, "b": 11}}])),
        Reply(body=anthropic_text("The sums are 5, 11 and 16.")),
    )
    agent = oma.Agent(tools=[add_tool()], **anthropic)
    result = agent.run("add things")
    assert result["success"] and result["turns"] == 3
    assert result["output"] == "The sums are 5, 11 and 16."
    assert [c["output"] for c in result["toolCalls"]] == ["5", "11", "16"]
    assert result["toolCalls"][0]["toolName"] == "add"
    assert loop.requests[0]["body"]["tools"][0]["name"] == "add"
    second = loop.requests[1]["body"]["messages"]
    assert second[-1]["content"][0]["type"] == "tool_result"
    assert second[-1]["content"][0]["tool_use_id"] == "toolu_1"
    assert [b["tool_use_id"] for b in second[-1]["content"]] == ["toolu_1", "toolu_2"]


def test_tool_events_in_stream(loop, anthropic):
    loop.script(Reply(sse=_tool_sse()), Reply(sse=anthropic_sse(["two"])))
    events = list(oma.Agent(tools=[add_tool()], **anthropic).stream("go"))
    types = [e["type"] for e in events]
    assert "tool_use" in types and "tool_result" in types
    use = next(e for e in events if e["type"] == "tool_use")["data"]
    assert use["name"] == "add" and use["input"] == {"a": 1, "b": 1}
    res = next(e for e in events if e["type"] == "tool_result")["data"]
    assert res["tool_use_id"] == use["id"] and res["content"] == "2"
    assert events[-1]["type"] == "done" and events[-1]["data"]["output"] == "two"


def _tool_sse():
    import json as j

    def ev(name, data):
        return f"event: {name}\ndata: {j.dumps(data)}\n\n".encode()
    return [
        ev("message_start", {"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant",
           "content": [], "model": "claude-test", "stop_reason": None, "usage": {"input_tokens": 3, "output_tokens": 1}}}),
        ev("content_block_start", {"type": "content_block_start", "index": 0,
           "content_block": {"type": "tool_use", "id": "tu_1", "name": "add", "input": {}}}),
        ev("content_block_delta", {"type": "content_block_delta", "index": 0,
           "delta": {"type": "input_json_delta", "partial_json": "{\"a\": 1, "}}),
        ev("content_block_delta", {"type": "content_block_delta", "index": 0,
           "delta": {"type": "input_json_delta", "partial_json": "\"b\": 1}"}}),
        ev("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 5}}),
        ev("message_stop", {"type": "message_stop"}),
    ]


def test_a_tool_result_carries_is_error_as_the_tool_gave_it(loop, anthropic):
    # OMA sends `is_error: false` when a tool says false, and no field when it says nothing.
    loop.script(
        Reply(body=anthropic_tool_use([{"id": "a", "name": "said_false", "input": {}},
                                       {"id": "b", "name": "said_nothing", "input": {}},
                                       {"id": "c", "name": "oma_false", "input": {}},
                                       {"id": "d", "name": "plain", "input": {}}])),
        Reply(body=anthropic_text("fine")),
    )
    agent = oma.Agent(tools=[
        oma.Tool("said_false", "d", {"type": "object"}, lambda args: oma.ToolResult("a", is_error=False)),
        oma.Tool("said_nothing", "d", {"type": "object"}, lambda args: oma.ToolResult("b")),
        oma.Tool("oma_false", "d", {"type": "object"}, lambda args: {"data": "c", "isError": False}),
        oma.Tool("plain", "d", {"type": "object"}, lambda args: "d"),
    ], **anthropic)
    result = agent.run("x")
    assert result["success"]
    sent = loop.requests[1]["body"]["messages"][-1]["content"]
    assert [(b["content"], b.get("is_error", "absent")) for b in sent] == \
        [("a", False), ("b", "absent"), ("c", False), ("d", "absent")]
    produced = result["messages"][1]["content"]
    assert [b.get("is_error", "absent") for b in produced] == [False, "absent", False, "absent"]


def test_failing_and_unknown_tool(loop, anthropic):
    def broken(args):
        raise RuntimeError("disk on fire")

    loop.script(
        Reply(body=anthropic_tool_use([{"id": "a", "name": "broken", "input": {}},
                                       {"id": "b", "name": "missing", "input": {}}])),
        Reply(body=anthropic_text("recovered")),
    )
    agent = oma.Agent(tools=[oma.Tool("broken", "fails", {"type": "object"}, broken)], **anthropic)
    result = agent.run("x")
    assert result["success"] and result["output"] == "recovered"
    calls = result["toolCalls"]
    # OMA's records: no error flag (the tool result sent says it), a duration in ms.
    assert "disk on fire" in calls[0]["output"] and "isError" not in calls[0]
    assert [sorted(c) for c in calls] == [["duration", "input", "output", "toolName"]] * 2
    assert all(isinstance(c["duration"], int) and c["duration"] >= 0 for c in calls)
    sent = loop.requests[1]["body"]["messages"][-1]["content"]
    assert sent[0]["is_error"] is True and sent[1]["is_error"] is True


def test_rich_tool_result(loop, anthropic):
    parts = [{"type": "text", "text": "see image"},
             {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]
    loop.script(Reply(body=anthropic_tool_use([{"id": "a", "name": "shot", "input": {}}])),
                Reply(body=anthropic_text("ok")))
    agent = oma.Agent(tools=[oma.Tool("shot", "screenshot", {"type": "object"}, lambda a: parts)], **anthropic)
    result = agent.run("x")
    assert result["success"], result
    assert result["toolCalls"][0]["output"] == parts
    content = loop.requests[1]["body"]["messages"][-1]["content"][0]["content"]
    assert content[1]["type"] == "image"


def test_oma_tool_result_with_model_output(loop, anthropic):
    # OMA's ToolResult: the model gets modelOutput when there is one, data otherwise.
    parts = [{"type": "text", "text": "chart"},
             {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]
    loop.script(Reply(body=anthropic_tool_use([{"id": "a", "name": "chart", "input": {}},
                                               {"id": "b", "name": "plain", "input": {}}])),
                Reply(body=anthropic_text("ok")))
    tools = [{"name": "chart", "inputSchema": {"type": "object"},
              "execute": lambda a: {"data": "[chart]", "modelOutput": parts, "isError": False}},
             {"name": "plain", "inputSchema": {"type": "object"},
              "execute": lambda a: {"data": "text only", "modelOutput": None}}]
    assert oma.Agent(tools=tools, **anthropic).run("x")["success"]
    sent = loop.requests[1]["body"]["messages"][-1]["content"]
    assert sent[0]["content"][1]["type"] == "image" and sent[0]["content"][0]["text"] == "chart"
    assert sent[0]["is_error"] is False
    assert sent[1]["content"] == "text only"


def test_broken_tool_answer_fails_run(loop, anthropic):
    bad = [{"type": "image", "source": {"type": "url", "media_type": "image/png", "url": "ftp://x/y.png"}}]
    loop.script(Reply(body=anthropic_tool_use([{"id": "a", "name": "shot", "input": {}}])))
    agent = oma.Agent(tools=[oma.Tool("shot", "s", {"type": "object"}, lambda a: bad)], **anthropic)
    result = agent.run("x")
    assert result["success"] is False
    assert "HTTP or HTTPS" in result["output"]


def test_process_backend(loop, anthropic):
    script = "import sys; data = sys.stdin.read(); print('echo:' + data.upper(), end='')"
    backend = oma.ProcessBackend([sys.executable, "-c", script], timeout=30)
    agent = oma.Agent(model="local", provider="anthropic", system_prompt="sys", backend=backend)
    result = agent.run("hello there")
    assert result["success"], result
    assert result["output"] == "echo:SYS\n\nHELLO THERE"
    assert result["tokenUsage"] == {"input_tokens": 0, "output_tokens": 0}
    with pytest.raises(oma.InvalidMessageError, match="accepts string prompts only"):
        agent.run(USER)
    failing = oma.Agent(model="local", provider="anthropic",
                        backend=oma.ProcessBackend([sys.executable, "-c", "import sys; sys.exit(3)"]))
    result = failing.run("x")
    assert result["success"] is False and "exited with code 3" in result["output"]
    assert loop.requests == []


def test_callable_acp_backend():
    agent = oma.Agent(model="m", provider="anthropic", backend=oma.CallableBackend(lambda t: f"[{t}]", kind="acp"))
    assert agent.run("ping")["output"] == "[ping]"


def test_run_agent_progress_and_evaluation(loop, anthropic):
    progress, cases = [], []
    result = oma.run_agent("summarise", name="ra", on_progress=progress.append,
                           evaluation={"store_payloads": "full", "sample_rate": 1.0}, on_case=cases.append, **anthropic)
    assert result["success"]
    assert [p["type"] for p in progress] == ["agent_start", "agent_complete"]
    assert progress[0]["agent"] == "ra" and progress[0]["data"] == {"prompt": "summarise"}
    assert progress[1]["data"]["output"] == result["output"]
    assert len(cases) == 1
    case = cases[0]
    assert case["agent"] == "ra" and case["input"] == "summarise"
    assert case["result"]["output"] == result["output"]
    assert isinstance(case["durationMs"], int)
    no_key([progress, cases, result])


def test_run_agent_evaluation_none_policy(loop, anthropic):
    cases = []
    oma.run_agent(USER, evaluation={"store_payloads": "none"}, on_case=cases.append, **anthropic)
    assert cases[0]["input"] == "[array input omitted; 1 items]"
    assert cases[0]["payload"] is None


def test_run_agent_budget(loop, anthropic):
    progress = []
    result = oma.run_agent("x", name="b", max_token_budget=5, on_progress=progress.append, **anthropic)
    assert result["success"] is False and result["budgetExceeded"] is True
    assert result["status"]["code"] == "budget_exhausted"
    assert result["errorInfo"]["name"] == "TokenBudgetExceededError"
    assert [p["type"] for p in progress] == ["agent_start", "budget_exceeded", "agent_complete"]


def test_run_agent_invalid_input_raises_before_progress(loop, anthropic):
    progress = []
    with pytest.raises(oma.InvalidMessageError):
        oma.run_agent([{"role": "robot", "content": []}], on_progress=progress.append, **anthropic)
    assert progress == []


def test_provider_error_is_a_failed_result(loop, anthropic):
    loop.script(Reply(400, {"type": "error", "error": {"type": "invalid_request_error",
                                                       "message": f"bad key {KEY} given"}}))
    result = oma.Agent(**anthropic).run("x")
    assert result["success"] is False
    info = result["errorInfo"]
    assert info["kind"] == "provider" and info["httpStatus"] == 400 and info["retryable"] is False
    assert info["name"] == "ProviderError" and info["provider"] == "anthropic"
    # Anthropic's error.type is the provider's code.
    assert info["code"] == "invalid_request_error"
    assert result["status"]["code"] == "error"
    no_key(result)
    assert len(loop.requests) == 1


def test_the_default_policy_retries_a_500(loop, anthropic):
    # No retry options: Anthropic's SDK default, two retries after about 0.5 s and 1 s.
    loop.script(Reply(500, {"type": "error", "error": {"type": "api_error", "message": "boom"}}),
                Reply(body=anthropic_text("second time")))
    t0 = time.monotonic()
    result = oma.Agent(**anthropic).run("x")
    assert result["success"] and result["output"] == "second time"
    assert len(loop.requests) == 2
    assert time.monotonic() - t0 >= 0.35


def test_retries_429_then_200(loop, anthropic):
    loop.script(Reply(429, {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}),
                Reply(503, {"error": "busy"}),
                Reply(body=anthropic_text("third time")))
    cfg = dict(anthropic, call={"egress": "offline", "max_retries": 3, "retry_delay_ms": 20, "timeout_ms": 5000})
    t0 = time.monotonic()
    result = oma.Agent(**cfg).run("x")
    assert result["success"] and result["output"] == "third time"
    assert len(loop.requests) == 3
    assert time.monotonic() - t0 < 5


def test_terminal_error_not_retried(loop, anthropic):
    loop.script(Reply(400, {"error": {"message": "no"}}))
    cfg = dict(anthropic, call={"egress": "offline", "max_retries": 3, "retry_delay_ms": 10})
    assert oma.Agent(**cfg).run("x")["success"] is False
    assert len(loop.requests) == 1


def test_timeout(loop, anthropic):
    loop.script(Reply(hang=2.0))
    # One attempt: a timeout is retried by the provider's default policy otherwise.
    cfg = dict(anthropic, call={"egress": "offline", "timeout_ms": 200, "max_retries": 0})
    t0 = time.monotonic()
    result = oma.Agent(**cfg).run("x")
    assert time.monotonic() - t0 < 1.8
    assert result["success"] is False
    assert result["status"]["code"] == "timeout"
    assert result["errorInfo"]["name"] == "LLMCallTimeoutError"
    assert result["errorInfo"]["message"] == "LLM call exceeded per-call timeout of 200ms"


def test_timeout_then_retry_succeeds(loop, anthropic):
    loop.script(Reply(hang=1.0), Reply(body=anthropic_text("after timeout")))
    cfg = dict(anthropic, call={"egress": "offline", "timeout_ms": 200, "max_retries": 1, "retry_delay_ms": 10})
    assert oma.Agent(**cfg).run("x")["output"] == "after timeout"


def test_connection_refused(anthropic):
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    cfg = dict(anthropic, base_url=f"http://127.0.0.1:{port}")
    result = oma.Agent(**cfg).run("x")
    assert result["success"] is False and result["errorInfo"]["kind"] == "provider"
    no_key(result)


def test_egress_offline_refuses_remote(loop):
    agent = oma.Agent(model="m", provider="anthropic", api_key=KEY, call={"egress": "offline"})
    result = agent.run("x")
    assert result["success"] is False
    assert result["status"]["code"] == "rejected"
    assert result["errorInfo"]["name"] == "EgressPolicyError"
    assert loop.requests == []


def test_unsupported_video_on_anthropic_fails_run(loop, anthropic):
    video = [{"role": "user", "content": [{"type": "video", "source": {"type": "url", "media_type": "video/mp4",
                                                                        "url": "https://example.com/v.mp4"}}]}]
    result = oma.Agent(**anthropic).run(video)
    assert result["success"] is False
    assert result["errorInfo"]["name"] == "UnsupportedContentBlockError"
    assert result["errorInfo"]["provider"] == "anthropic"
    error = list(oma.Agent(**anthropic).stream(video))[-1]["data"]
    assert isinstance(error, oma.UnsupportedContentBlockError)
    assert error.provider == "Anthropic Messages" and error.block_type == "video"
    assert loop.requests == []


def test_seeded_runs_are_deterministic(loop, anthropic):
    a = oma.Agent(**anthropic)

    def seeded() -> Any:
        # The identity is the run's own (a new run id, trace and span ids each time).
        result = dict(a.run("x", seed=7))
        assert result.pop("identity")["attempt"] == 1
        return result

    assert seeded() == seeded()


def test_agent_context_manager(loop, anthropic):
    with oma.Agent(**anthropic) as agent:
        assert agent.run("x")["success"]


def test_a_tool_that_outlives_the_deadline_ends_the_run_with_a_timeout(loop, anthropic):
    loop.script(Reply(body=anthropic_tool_use([{"id": "t1", "name": "stuck", "input": {}}])))
    release = __import__("threading").Event()

    def stuck(_args):
        release.wait(5)
        return "too late"

    agent = oma.Agent(tools=[oma.Tool("stuck", "never in time", {"type": "object"}, stuck)],
                      deadline_ms=300, **anthropic)
    started = time.monotonic()
    result = agent.run("go")
    elapsed = time.monotonic() - started
    release.set()
    assert result["success"] is False
    assert result["status"]["code"] == "timeout"
    # OMA's whole-run timeout, naming the run's limit (not a per-call one).
    assert result["errorInfo"]["name"] == "TimeoutError"
    assert result["errorInfo"]["message"].endswith('" exceeded whole-run timeout of 300ms')
    assert result["error"].name == "TimeoutError" and not isinstance(result["error"], oma.LLMCallTimeoutError)
    assert 0.25 <= elapsed < 2.0, elapsed
    assert len(loop.requests) == 1, "nothing was sent after the deadline"


def test_a_hook_that_outlives_the_deadline_ends_the_run_with_a_timeout(loop, anthropic):
    release = __import__("threading").Event()

    def hook(ctx):
        release.wait(5)
        return ctx

    agent = oma.Agent(before_run=hook, deadline_ms=300, **anthropic)
    started = time.monotonic()
    result = agent.run("go")
    release.set()
    assert result["status"]["code"] == "timeout"
    assert time.monotonic() - started < 2.0
    assert loop.requests == [], "the hook never answered, so nothing was sent"


def test_the_api_key_comes_from_the_providers_variable(loop, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env-SECRET123")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-oai-from-env-SECRET456")
    call = {"egress": "offline"}
    result = oma.Agent(model="m", provider="anthropic", base_url=loop.base, call=call).run("hi")
    assert result["success"] and loop.requests[-1]["headers"]["x-api-key"] == "sk-ant-from-env-SECRET123"
    assert "from-env" not in json.dumps(result)
    oma.Agent(model="m", provider="openai", base_url=loop.base + "/v1", call=call).run("hi")
    assert loop.requests[-1]["headers"]["authorization"] == "Bearer sk-oai-from-env-SECRET456"
    oma.run_agent("hi", model="m", provider="anthropic", base_url=loop.base, call=call)
    assert loop.requests[-1]["headers"]["x-api-key"] == "sk-ant-from-env-SECRET123"
    oma.Agent(model="m", provider="anthropic", base_url=loop.base, api_key="given", call=call).run("hi")
    assert loop.requests[-1]["headers"]["x-api-key"] == "given"  # an explicit key wins
    monkeypatch.setenv("ANTHROPIC_API_KEY", "")  # empty counts as unset
    oma.Agent(model="m", provider="anthropic", base_url=loop.base, call=call).run("hi")
    assert "x-api-key" not in loop.requests[-1]["headers"]


def test_observers_that_raise_change_nothing(loop, anthropic):
    seen = []

    def broken(event):
        seen.append(event.get("type", "case"))
        raise RuntimeError("observer broke")

    result = oma.run_agent("x", name="o", on_progress=broken, on_case=broken,
                           evaluation={"store_payloads": "none"}, **anthropic)
    assert result["success"] is True
    assert seen == ["agent_start", "agent_complete", "case"]


def test_long_media_goes_beside_the_json_text(loop, anthropic):
    # A 1 MiB base64 image (in a block and in a tool result's parts) reaches the provider byte
    # for byte, through the driver's *-json-parts entry points; the caller's input is unchanged,
    # and a long value that breaks the media rules gets OMA's message as before.
    import base64
    import copy

    data = base64.b64encode(bytes(range(256)) * 3072).decode()  # 768 KiB -> 1 MiB of base64
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "look"}, image]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "shot", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [image]}]},
    ]
    before = copy.deepcopy(messages)
    loop.script(Reply(body=anthropic_text("seen")))
    result = oma.Agent(**anthropic).run(messages)
    assert result["success"], result.get("errorInfo")
    assert messages == before
    sent = loop.requests[0]["body"]["messages"]
    assert sent[0]["content"][1]["source"]["data"] == data
    assert sent[2]["content"][0]["content"][0]["source"]["data"] == data
    # prompt() takes blocks: the same path for a content-block list
    loop.script(Reply(body=anthropic_text("again")))
    agent = oma.Agent(**anthropic)
    assert agent.prompt([{"type": "text", "text": "and this"}, image])["success"]
    assert loop.requests[0]["body"]["messages"][-1]["content"][1]["source"]["data"] == data
    # a long video that is not base64 is refused with the message a short one gets, naming its place
    def video(n):
        return [{"role": "user", "content": [{"type": "video", "source": {
            "type": "base64", "media_type": "video/mp4", "data": "*" * n}}]}]

    def refusal(messages):
        try:
            result = oma.Agent(**anthropic).run(messages)
        except oma.InvalidMessageError as e:
            return e.message
        assert not result["success"]
        return result["output"]

    long, short = refusal(video(20 * 1024)), refusal(video(8))
    assert long == short and "messages[0].content[0]" in long, (long, short)


def test_oma_tool_dicts_work_and_other_shapes_get_a_type_error_saying_what_to_write(loop, anthropic):
    loop.script(Reply(body=anthropic_tool_use([{"id": "t1", "name": "add", "input": {"a": 2, "b": 3}}])),
                Reply(body=anthropic_text("5")))
    seen: List[Any] = []

    def add(args: Dict[str, Any]) -> Dict[str, Any]:  # one parameter: no context
        return {"data": str(args["a"] + args["b"])}

    agent = oma.Agent(tools=[{"name": "add", "description": "Adds", "inputSchema": {"type": "object"},
                              "execute": add}], **anthropic)
    result = agent.run("2+3", on_tool_result=lambda name, r: seen.append((name, r)))
    assert result["success"] and result["toolCalls"][0]["output"] == "5"
    assert seen == [("add", {"data": "5", "isError": False})]
    assert loop.requests[0]["body"]["tools"][0]["name"] == "add"
    for bad in ({"name": "add"}, {"execute": add}, "add", {"name": "add", "execute": add, "inputSchema": "zod"}):
        with pytest.raises(TypeError) as info:
            oma.Agent(tools=[bad], **anthropic)  # type: ignore[list-item]
        assert "tools[0]" in str(info.value)
    with pytest.raises(TypeError, match='"inputSchema": dict, "execute": callable'):
        oma.Agent(tools=[{"name": "add"}], **anthropic)  # type: ignore[typeddict-item]


def test_an_unknown_call_option_is_named_with_the_python_names(anthropic):
    with pytest.raises(TypeError) as info:
        oma.Agent(**{**anthropic, "call": {"max_retrys": 1}})
    message = str(info.value)
    assert "'max_retrys'" in message and "max_retries" in message and "maxRetries" not in message


def test_the_provider_defaults_to_anthropic(loop, anthropic):
    kw = {k: v for k, v in anthropic.items() if k != "provider"}
    assert oma.Agent(**kw).run("x")["success"]
    assert loop.requests[-1]["path"] == "/v1/messages"


def test_a_sync_run_is_cancelled_from_another_thread(loop, anthropic):
    import threading

    # A prompt waiting on a stalled provider: cancelled at once, the history as it was.
    agent = oma.Agent(**anthropic)
    loop.script(Reply(hang=3))
    token = oma.CancelToken()
    threading.Timer(0.15, token.cancel).start()
    started = time.monotonic()
    result = agent.prompt("x", cancel=token)
    assert time.monotonic() - started < 1.0
    assert result["status"] == {"code": "cancelled", "message": "Run cancelled by caller."}
    assert result["errorInfo"]["kind"] == "cancellation" and isinstance(result["error"], oma.OmaError)
    assert agent.get_history() == []
    # A tool that blocks: the run leaves it.
    loop.script(Reply(body=anthropic_tool_use([{"id": "t1", "name": "slow", "input": {}}])))
    release = threading.Event()
    slow = oma.Tool("slow", "blocks", {"type": "object"}, lambda _: release.wait(5) and "late")
    token = oma.CancelToken()
    threading.Timer(0.15, token.cancel).start()
    started = time.monotonic()
    result = oma.Agent(tools=[slow], **anthropic).run("go", cancel=token)
    release.set()
    assert time.monotonic() - started < 1.0 and result["status"]["code"] == "cancelled"
    # A token cancelled before the run: nothing is sent.
    loop.script()
    assert oma.Agent(**anthropic).run("x", cancel=token)["status"]["code"] == "cancelled"
    assert loop.requests == []


def test_an_unknown_evaluation_option_is_named_with_the_python_names(anthropic):
    with pytest.raises(TypeError, match="'sample_rat'; known keys: store_payloads, sample_rate"):
        oma.run_agent("x", **{**anthropic, "evaluation": {"sample_rat": 1.0}})


PROVIDER_OPTIONS = dict(frequency_penalty=0.5, presence_penalty=-0.25, min_p=0.05, parallel_tool_calls=False,
                        thinking={"effort": "high"},
                        extra_body={"temperature": 0.1, "custom": {"x": 1}, "model": "not-this"})


def test_provider_options_reach_the_wire_as_omas_adapters_send_them(loop, openai, anthropic):
    assert oma.Agent(**openai, **PROVIDER_OPTIONS).run("hi")["success"]
    body = loop.requests[-1]["body"]
    assert (body["frequency_penalty"], body["presence_penalty"], body["min_p"]) == (0.5, -0.25, 0.05)
    assert body["parallel_tool_calls"] is False and body["reasoning_effort"] == "high"
    assert body["temperature"] == 0.1 and body["custom"] == {"x": 1} and body["model"] == "gpt-test"
    # Anthropic's adapter carries the extra body and none of the OpenAI-track options, as OMA's.
    assert oma.run_agent("hi", **anthropic, **PROVIDER_OPTIONS)["success"]
    body = loop.requests[-1]["body"]
    for key in ("frequency_penalty", "presence_penalty", "min_p", "parallel_tool_calls", "reasoning_effort"):
        assert key not in body, key
    assert body["custom"] == {"x": 1}


@pytest.mark.parametrize("options, message", [
    (dict(frequency_penalty=float("nan")), "frequencyPenalty must be a finite number"),
    (dict(presence_penalty="high"), "`presencePenalty` must be a number, got string"),
    (dict(parallel_tool_calls=1), "`parallelToolCalls` must be a boolean"),
    (dict(extra_body=[1]), "`extraBody` must be an object"),
    (dict(thinking={"effort": "extreme"}), '`thinking.effort` must be "low", "medium", "high" or "max"'),
    (dict(thinking={"budget": 5}), "unknown field `thinking.budget`"),
])
def test_bad_provider_options_name_the_field_before_any_request(loop, openai, options, message):
    with pytest.raises((ValueError, oma.OmaError)) as info:
        oma.Agent(**openai, **options)
    assert message in str(info.value)
    assert loop.requests == []


def test_on_trace_gets_omas_trace_events_and_a_raising_sink_changes_nothing(loop, anthropic):
    loop.script(Reply(body=anthropic_tool_use([{"id": "c1", "name": "lookup", "input": {"q": "x", "password": "p"}}])),
                Reply(body=anthropic_text("done")))
    events = []

    def sink(event):
        events.append(event)
        raise RuntimeError("a broken sink")

    tool = oma.Tool("lookup", "Looks up", {"type": "object"}, lambda a: "token=abcdef123456 found")
    result = oma.Agent(tools=[tool], on_trace=sink, **anthropic).run("hi")
    assert result["success"]
    assert [e["type"] for e in events] == ["llm_call", "tool_call", "llm_call", "agent"]
    agent = events[-1]
    assert len({e["runId"] for e in events}) == 1
    assert all(e["parentId"] == agent["spanId"] for e in events[:3])
    assert all(e["durationMs"] == e["endMs"] - e["startMs"] for e in events)
    assert events[1]["input"] == {"q": "x", "password": "[redacted]"}
    assert events[1]["output"] == "token=[redacted]" and events[1]["isError"] is False
    assert (agent["turns"], agent["toolCalls"], agent["agent"]) == (2, 1, "agent")
    # run_agent takes it too; without on_trace nothing is traced.
    seen = []
    assert oma.run_agent("hi", on_trace=seen.append, **anthropic)["success"]
    assert [e["type"] for e in seen] == ["llm_call", "agent"]
