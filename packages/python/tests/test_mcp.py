"""MCP tools (``oma_component.mcp``): the shared table fixtures/mcp/results.json (how a result
reaches the model, how tools are named), then a local MCP server built with the official SDK
(tests/mcp_server.py, over stdio) connected through both APIs and used by agents against the
loopback provider."""

import asyncio
import json
import os
import sys
import time

import pytest
from loopback import Reply, anthropic_text, anthropic_tool_use

import oma_component as oma
from oma_component.mcp import connect_mcp_tools, connect_mcp_tools_async
from oma_component.mcp._content import check_unique_names, normalize_tool_name, tool_result

HERE = os.path.dirname(__file__)
SERVER = [os.path.join(HERE, "mcp_server.py")]
with open(os.path.join(HERE, "..", "..", "..", "fixtures", "mcp", "results.json"), encoding="utf-8") as f:
    TABLE = json.load(f)


@pytest.mark.parametrize("case", TABLE["results"], ids=[c["name"] for c in TABLE["results"]])
def test_results_table(case):
    assert tool_result(case["result"]) == case["expect"]


@pytest.mark.parametrize("case", TABLE["names"], ids=[f"{c['prefix']!r}-{c['names']}" for c in TABLE["names"]])
def test_names_table(case):
    if "error" in case:
        with pytest.raises(ValueError) as raised:
            check_unique_names(case["names"], case["prefix"])
        assert str(raised.value) == case["error"]
    else:
        check_unique_names(case["names"], case["prefix"])
        assert [normalize_tool_name(n, case["prefix"]) for n in case["names"]] == case["expect"]


@pytest.fixture(scope="module")
def server_tools():
    with connect_mcp_tools(command=sys.executable, args=SERVER, name_prefix="local",
                           env={"MCP_TEST_VALUE": "from-env"}) as connected:
        yield connected


def by_name(connected):
    return {t.name: t for t in connected.tools}


def test_tools_are_listed_across_pages_with_oma_names_and_descriptions(server_tools):
    tools = by_name(server_tools)
    assert list(tools) == ["local_echo", "local_files_read", "local_picture", "local_fail", "local_slow",
                           "local_mixed", "local_structured", "local_env"]
    assert tools["local_echo"].description == "Echoes its text"
    assert tools["local_files_read"].description == "MCP tool: files/read"
    assert tools["local_echo"].input_schema == {
        "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


def test_calls_reach_the_server_with_the_client_info_and_environment(server_tools):
    tools = by_name(server_tools)
    assert tools["local_echo"]({"text": "hi"}) == oma.ToolResult("echo: hi (from open-multi-agent/0.0.0)", is_error=False)
    assert tools["local_env"]({}).content == "from-env"
    failed = tools["local_fail"]({})
    assert failed == oma.ToolResult("it broke", is_error=True)


def test_media_results_reach_the_model(loop, anthropic, server_tools):
    loop.script(Reply(body=anthropic_tool_use([{"id": "tu_1", "name": "local_picture", "input": {}},
                                               {"id": "tu_2", "name": "local_mixed", "input": {}}])),
                Reply(body=anthropic_text("A red pixel and some files.")))
    result = oma.Agent(name="mcp", tools=server_tools.tools, **anthropic).run("show me")
    assert result["success"], result.get("errorInfo")
    sent = {t["name"]: t for t in loop.requests[0]["body"]["tools"]}
    assert sent["local_echo"]["input_schema"]["required"] == ["text"]
    answers = loop.requests[1]["body"]["messages"][-1]["content"]
    picture, mixed = answers[0]["content"], answers[1]["content"]
    assert [answers[0]["tool_use_id"], answers[1]["tool_use_id"]] == ["tu_1", "tu_2"]
    assert picture[0] == {"type": "text", "text": "a red pixel"}
    assert picture[1]["type"] == "image" and picture[1]["source"]["media_type"] == "image/png"
    assert [p["text"] for p in mixed[:3]] == [
        "[audio audio/wav; base64 length=8]", "[resource memo://notes/today.md]\nbuy milk",
        "[resource file:///reports/q1%20summary.pdf]"]
    # The blob and the http link are files: Anthropic's format sends them as documents after the results.
    documents = [(b["title"], b["source"]) for b in answers if b["type"] == "document"]
    assert documents == [
        ("q1 summary.pdf", {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}),
        ("spec", {"type": "url", "url": "https://example.com/docs/spec.pdf"})]


def test_a_failed_call_is_a_failed_tool_result_in_the_run(loop, anthropic, server_tools):
    loop.script(Reply(body=anthropic_tool_use([{"id": "tu_1", "name": "local_fail", "input": {}}])),
                Reply(body=anthropic_text("It failed.")))
    result = oma.Agent(name="mcp", tools=server_tools.tools, **anthropic).run("try")
    assert result["success"]
    answer = loop.requests[1]["body"]["messages"][-1]["content"][0]
    assert answer["is_error"] is True and answer["content"] == "it broke"


def test_a_call_past_the_request_timeout_fails_as_oma_says():
    # The bound holds the server's start too (its initialize answer): long enough for that here.
    with connect_mcp_tools(command=sys.executable, args=SERVER, request_timeout_ms=8_000) as connected:
        slow = by_name(connected)["slow"]
        started = time.monotonic()
        answer = slow({"ms": 60_000})
        assert 7 < time.monotonic() - started < 20
        assert answer.is_error is True
        assert isinstance(answer.content, str) and answer.content.startswith('MCP tool "slow" failed: ')
        assert by_name(connected)["slow"]({"ms": 0}).content == "done"
    closed = slow({"ms": 0})
    assert closed.is_error is True and "closed" in str(closed.content)


def test_client_name_and_version_are_sent():
    with connect_mcp_tools(command=sys.executable, args=SERVER, client_name="my-app", client_version="2.1.0") as c:
        assert by_name(c)["echo"]({"text": "x"}).content == "echo: x (from my-app/2.1.0)"


def test_names_that_collide_refuse_the_connection():
    with pytest.raises(ValueError) as raised:
        connect_mcp_tools(command=sys.executable, args=SERVER + ["duplicate"])
    assert str(raised.value) == 'Duplicate MCP tool name after normalization: "a_b" from "a/b" and "a_b".'


def test_a_server_that_exits_or_a_missing_command_raises():
    with pytest.raises(Exception):
        connect_mcp_tools(command=sys.executable, args=SERVER + ["crash"], request_timeout_ms=5_000)
    with pytest.raises(OSError):
        connect_mcp_tools(command=os.path.join(HERE, "no-such-command"))


@pytest.mark.parametrize("kwargs, message", [
    ({"command": ""}, "command"),
    ({"command": "x", "args": "a b"}, "args"),
    ({"command": "x", "env": {"A": 1}}, "env"),
    ({"command": "x", "request_timeout_ms": 0}, "request_timeout_ms"),
])
def test_bad_arguments_are_refused_by_name(kwargs, message):
    with pytest.raises((TypeError, ValueError), match=message):
        connect_mcp_tools(**kwargs)


def test_the_asyncio_api_connects_without_blocking_and_cancels_calls(loop, anthropic):
    async def main():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        beat = asyncio.create_task(ticker())
        async with await connect_mcp_tools_async(command=sys.executable, args=SERVER, name_prefix="a") as connected:
            assert ticks > 0  # the loop ran while the server started
            tools = by_name(connected)
            assert asyncio.iscoroutinefunction(tools["a_echo"].fn)
            assert (await tools["a_echo"]({"text": "yo"})).content == "echo: yo (from open-multi-agent/0.0.0)"
            loop.script(Reply(body=anthropic_tool_use([{"id": "tu_1", "name": "a_echo", "input": {"text": "q"}}])),
                        Reply(body=anthropic_text("done")))
            result = await oma.AsyncAgent(name="mcp", tools=connected.tools, **anthropic).run("echo")
            assert result["success"] and result["toolCalls"][0]["output"] == "echo: q (from open-multi-agent/0.0.0)"
            call = asyncio.create_task(tools["a_slow"]({"ms": 10_000}))
            await asyncio.sleep(0.2)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            assert (await tools["a_slow"]({"ms": 0})).content == "done"
        beat.cancel()
        closed = await tools["a_echo"]({"text": "late"})
        assert closed.is_error is True

    asyncio.run(main())
