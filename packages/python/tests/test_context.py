"""OMA's loop detection and context options through the package (snake_case keywords), against
the loopback provider: the same cases as the JavaScript suite's ``context.test.js``."""

import pytest

import oma_component as oma
from loopback import Reply, anthropic_text, anthropic_tool_use
from test_agent import _tool_sse, add_tool


def same():
    return Reply(body=anthropic_tool_use([{"id": "c", "name": "add", "input": {"a": 1, "b": 1}}]))


def test_a_loop_is_warned_then_ended_with_loop_detected(loop, anthropic):
    loop.script(*[Reply(sse=_tool_sse()) for _ in range(3)])
    agent = oma.Agent(tools=[add_tool()], loop_detection={"max_repetitions": 2}, **anthropic)
    events = list(agent.stream("go"))
    loops = [e["data"] for e in events if e["type"] == "loop_detected"]
    assert len(loops) == 2
    assert loops[0]["kind"] == "tool_repetition" and loops[0]["repetitions"] == 2
    assert 'Tool call "add" with identical arguments has repeated 2 times' in loops[0]["detail"]
    assert events[-1]["type"] == "done"
    result = events[-1]["data"]
    assert result["success"] and result["loopDetected"]
    assert len(loop.requests) == 3
    warned = loop.requests[2]["body"]["messages"][4]["content"]
    assert warned[0]["type"] == "tool_result"
    assert warned[1]["text"].startswith("WARNING: You appear to be repeating the same tool calls")


def test_terminate_and_bad_settings(loop, anthropic):
    loop.script(same(), same())
    agent = oma.Agent(tools=[add_tool()], loop_detection={"max_repetitions": 2, "on_loop_detected": "terminate"},
                      **anthropic)
    result = agent.run("go")
    assert result["success"] and result["loopDetected"]
    assert len(result["toolCalls"]) == 1
    assert len(loop.requests) == 2
    loop.script()
    for kwargs, message in [
        (dict(loop_detection={"max_repetitions": 0}), "`loopDetection.maxRepetitions` must be a positive integer"),
        (dict(loop_detection={"on_loop_detected": "stop"}), '`loopDetection.onLoopDetected` must be "warn" or "terminate"'),
        (dict(context_strategy={"type": "sliding-window"}), "missing field `contextStrategy.maxTurns`"),
        (dict(context_strategy={"type": "summarize"}), "missing field `contextStrategy.maxTokens`"),
        (dict(context_strategy={"type": "summarize", "max_tokens": 9, "summary_model": 3}),
         "`contextStrategy.summaryModel` must be"),
        (dict(compress_tool_results="yes"), "`compressToolResults` must be a boolean or {minChars: number}"),
        (dict(preserve_reasoning_as_text="yes"), "`preserveReasoningAsText` must be a boolean"),
    ]:
        with pytest.raises(oma.OmaError) as caught:
            oma.Agent(**kwargs, **anthropic)
        assert message in str(caught.value), (kwargs, str(caught.value))
    with pytest.raises(TypeError, match="must be 'warn', 'terminate' or a function"):
        oma.Agent(loop_detection={"on_loop_detected": "callback"}, **anthropic)
    with pytest.raises(TypeError, match=r"context_strategy\['compress'\] must be callable"):
        oma.Agent(context_strategy={"type": "custom"}, **anthropic)
    assert loop.requests == []


def test_summarize_asks_for_a_summary_before_the_turn(loop, anthropic):
    # The same case as the JavaScript suite's: a summary request of its own (traced as phase
    # `summary`), the first user turn's image kept, the old turns' video a placeholder.
    loop.script(Reply(body=anthropic_text("- asked about a clip", 12, 6)), Reply(body=anthropic_text("answered", 12, 6)))
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    video = {"type": "video", "source": {"type": "url", "media_type": "video/mp4", "url": "https://example.com/clip.mp4"}}
    conversation = [
        {"role": "user", "content": [image, {"type": "text", "text": "first"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "an old answer " * 8}]},
        {"role": "user", "content": [video, {"type": "text", "text": "and this clip?"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "a recent answer"}]},
        {"role": "user", "content": [{"type": "text", "text": "latest"}]},
    ]
    traces = []
    agent = oma.Agent(context_strategy={"type": "summarize", "max_tokens": 10, "summary_model": "claude-mini"},
                      on_trace=traces.append, **anthropic)
    result = agent.run(conversation)
    assert result["success"] and result["output"] == "answered"
    summary, turn = [r["body"] for r in loop.requests]
    assert summary["model"] == "claude-mini" and "tools" not in summary and len(summary["messages"]) == 1
    assert summary["messages"][0]["content"][0]["text"].startswith("Summarize the following conversation history")
    text = summary["messages"][0]["content"][1]["text"]
    assert text.startswith('\n\nConversation:\n{"role":"assistant"')
    assert '{"type":"text","text":"[video: video/mp4]"}' in text and "example.com" not in text
    assert len(turn["messages"]) == 3 and turn["messages"][0]["content"][0] == image
    assert [b["text"] for b in turn["messages"][2]["content"]] == \
        ["[Conversation summary]\n- asked about a clip\n\n", "latest"]
    assert result["tokenUsage"] == {"input_tokens": 24, "output_tokens": 12}
    calls = [(e["phase"], e["turn"], e["model"]) for e in traces if e["type"] == "llm_call"]
    assert calls == [("summary", 1, "claude-mini"), ("turn", 1, "claude-test")]


def test_custom_strategy_compress_is_called_before_every_request(loop, anthropic):
    # The same case as the JavaScript suite's: OMA's compress(messages, estimated_tokens).
    loop.script(Reply(body=anthropic_tool_use([{"id": "a", "name": "add", "input": {"a": 1, "b": 40}}])),
                Reply(body=anthropic_text("done")))
    seen = []

    def keep_last(messages, estimated_tokens):
        seen.append((len(messages), estimated_tokens))
        return messages[-1:]

    agent = oma.Agent(tools=[add_tool()], context_strategy={"type": "custom", "compress": keep_last}, **anthropic)
    result = agent.run("go")
    assert result["success"]
    assert [n for n, _ in seen] == [1, 3] and seen[0][1] == 1
    assert loop.requests[0]["body"]["messages"] == [{"role": "user", "content": [{"type": "text", "text": "go"}]}]
    assert len(loop.requests[1]["body"]["messages"]) == 1
    assert loop.requests[1]["body"]["messages"][0]["content"][0]["type"] == "tool_result"
    assert len(result["messages"]) == 3

    def broken(messages, estimated_tokens):
        raise RuntimeError("strategy broke")

    for compress, message in [
        (lambda m, e: [], "contextStrategy.custom.compress must return a non-empty LLMMessage[]"),
        (lambda m, e: None, "contextStrategy.custom.compress must return a non-empty LLMMessage[]"),
        (lambda m, e: [{"role": "user", "content": "not blocks"}], "messages[0].content must be"),
        (broken, "strategy broke"),
    ]:
        loop.script()
        failed = oma.Agent(context_strategy={"type": "custom", "compress": compress}, **anthropic).run("go")
        assert failed["success"] is False and failed["output"].startswith(message), failed["output"]
        assert loop.requests == []


def test_inline_video_counts_in_the_token_estimate(loop, anthropic):
    # OMA 1.18.0: a strategy sees a video conversation at its weight (the JavaScript suite's case).
    loop.script(Reply(body=anthropic_text("seen")))
    seen = []

    def compress(messages, estimated_tokens):
        seen.append(estimated_tokens)
        return [{"role": "user", "content": [{"type": "text", "text": "a clip was shown"}]}]

    clip = {"type": "video", "source": {"type": "base64", "media_type": "video/mp4", "data": "A" * 4000}}
    result = oma.Agent(context_strategy={"type": "custom", "compress": compress}, **anthropic).run(
        [{"role": "user", "content": [clip, {"type": "text", "text": "hi"}]}])
    assert result["success"], result["output"]
    # (4000 characters of data + 9 of MIME type + 32 + 2 of text) / 4, rounded up.
    assert seen == [1011]
    assert loop.requests[0]["body"]["messages"][0]["content"][0]["text"] == "a clip was shown"


def test_async_custom_strategy_awaits_an_async_compress(loop, anthropic):
    import asyncio

    loop.script(Reply(body=anthropic_text("done")))

    async def compress(messages, estimated_tokens):
        await asyncio.sleep(0)
        return messages

    async def main():
        agent = oma.AsyncAgent(context_strategy={"type": "custom", "compress": compress}, **anthropic)
        return await agent.run("go")

    assert asyncio.run(main())["success"]
    assert len(loop.requests) == 1


def test_on_loop_detected_function_decides(loop, anthropic):
    # The same case as the JavaScript suite's: announced, then asked; OMA's words decide.
    loop.script(*[Reply(sse=_tool_sse()) for _ in range(4)])
    asked = []
    words = ["continue", "inject", "warn"]

    def decide(info):
        asked.append((info["kind"], info["repetitions"]))
        return words.pop(0)

    agent = oma.Agent(tools=[add_tool()], loop_detection={"max_repetitions": 2, "on_loop_detected": decide},
                      **anthropic)
    events = list(agent.stream("go"))
    assert asked == [("tool_repetition", 2), ("tool_repetition", 3), ("tool_repetition", 4)]
    assert len([e for e in events if e["type"] == "loop_detected"]) == 3
    result = events[-1]["data"]
    assert result["success"] and result["loopDetected"]
    assert len(loop.requests) == 4
    warned = loop.requests[3]["body"]["messages"][-1]["content"]
    assert warned[1]["text"].startswith("WARNING: You appear to be repeating the same tool calls")

    def broken(info):
        raise RuntimeError("decider broke")

    loop.script(same(), same())
    failed = oma.Agent(tools=[add_tool()], loop_detection={"max_repetitions": 2, "on_loop_detected": broken},
                       **anthropic).run("go")
    assert failed["success"] is False and failed["output"] == "decider broke"
    assert len(loop.requests) == 2


def test_sliding_window_and_tool_result_compression(loop, anthropic):
    def call(n):
        return Reply(body=anthropic_tool_use([{"id": f"c{n}", "name": "add", "input": {"a": n, "b": 40}}]))
    loop.script(call(1), call(2), call(3), Reply(body=anthropic_text("done")))
    agent = oma.Agent(tools=[add_tool()], context_strategy={"type": "sliding-window", "max_turns": 2},
                      compress_tool_results={"min_chars": 2}, **anthropic)
    result = agent.run("go")
    assert result["success"] and len(result["messages"]) == 7
    sent = [r["body"]["messages"] for r in loop.requests]
    assert sent[1][2]["content"][0]["content"] == "41"
    assert sent[2][2]["content"][0]["content"] == "[Tool output compressed — 2 chars, already processed]"
    assert len(sent[3]) == 5
    assert sent[3][0]["content"][0]["text"] == "go"
    assert sent[3][2]["content"][0]["text"] == "[Earlier conversation history truncated — 1 turn(s) removed]\n\n"


def test_reasoning_as_cut_thinking_text(loop, anthropic):
    conversation = [
        {"role": "user", "content": [{"type": "text", "text": "q"}]},
        {"role": "assistant", "content": [{"type": "reasoning", "text": "r" * 100, "provenance": "openai"},
                                          {"type": "text", "text": "a"}]},
        {"role": "user", "content": [{"type": "text", "text": "q2"}]},
    ]
    loop.script(*[Reply(body=anthropic_text("ok")) for _ in range(3)])
    oma.Agent(**anthropic).run(conversation)
    oma.Agent(preserve_reasoning_as_text=True, **anthropic).run(conversation)
    oma.Agent(preserve_reasoning_as_text=True, compress_reasoning_text={"min_chars": 30}, **anthropic).run(conversation)
    sent = [r["body"]["messages"][1]["content"] for r in loop.requests]
    assert sent[0] == [{"type": "text", "text": "a"}]
    assert sent[1][0]["text"] == "<thinking>" + "r" * 100 + "</thinking>"
    assert sent[2][0]["text"] == "<thinking>" + "r" * 10 + "...[truncated]..." + "r" * 3 + "</thinking>"
