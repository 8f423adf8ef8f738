"""A typical user program, sync and async; CI holds it to ``mypy --strict`` and pyright.

It is type-checked, not run (it would need a provider): see check.sh.
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any, AsyncIterator, Dict, Iterator, List, Sequence

import oma_component as oma
from oma_component import observability as obs
from oma_component import eval as oma_eval
from oma_component.mcp import connect_mcp_tools, connect_mcp_tools_async


@oma.tool(description="Adds two numbers", input_schema={
    "type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}})
def add(args: Dict[str, Any]) -> str:
    return str(args["a"] + args["b"])


@oma.tool
async def lookup(args: Dict[str, Any]) -> List[oma.ToolResultPart]:
    """Looks a thing up."""
    await asyncio.sleep(0)
    return [{"type": "text", "text": f"found {args.get('q')}"}]


def hook(ctx: oma.BeforeRunContext) -> oma.BeforeRunResult:
    agent: Dict[str, Any] = ctx["agent"]  # the configuration, without secrets
    print(agent["name"], len(ctx["messages"]), ctx["config"].get("model"))
    return {"prompt": ctx["prompt"].strip()}


def multiply(args: Dict[str, Any], context: Dict[str, Any]) -> Dict[str, Any]:
    """OMA's tool shape: ``execute(input, context)`` returning ``{"data", "isError"}``."""
    return {"data": str(args["a"] * args["b"]), "isError": False, "call": context["toolCallId"]}


MULTIPLY: oma.OmaTool = {"name": "multiply", "description": "Multiplies", "execute": multiply,
                         "inputSchema": {"type": "object"}}


def report(result: oma.AgentRunResult) -> str:
    """Every key of OMA's AgentRunResult."""
    identity: oma.RunIdentity = result["identity"]
    status: oma.RunStatus = result["status"]
    structured: Any = result["structured"]
    calls = [(c["toolName"], c["input"], c["output"], c["duration"]) for c in result["toolCalls"]]
    head = f"{identity['runId']} #{identity['attempt']} {identity['traceId']}/{identity['rootSpanId']}"
    if result["success"]:
        print(len(result["messages"]), calls, structured, result.get("metadata"), result.get("budgetExceeded"))
        return (f"{head} {status['code']}: {result['output']} "
                f"({result['tokenUsage']['output_tokens']} tokens, {result['turns']} turns)")
    info = result.get("errorInfo")
    error = result.get("error")
    if error is not None:
        print(error.name, error.code, error.http_status, error.retryable)
    message = status.get("message", "")
    return f"{head} failed ({status['code']}, {message}): {info['name']}: {info['message']}" if info else "failed"


def main_sync() -> None:
    # The decorated function keeps its type: calling it is still checked.
    total: str = add({"a": 1, "b": 2})
    assert total == "3"
    agent = oma.Agent(name="helper", model="claude-sonnet-4-6", provider="anthropic",
                      api_key=os.environ.get("ANTHROPIC_API_KEY"), system_prompt="Be brief.",
                      tools=[add, lookup, MULTIPLY], before_run=hook, text_deltas=True,
                      call={"timeout_ms": 30_000, "deadline_ms": 60_000, "max_retries": 2, "retry_delay_ms": 500,
                            "retry_backoff": 2.0, "max_response_bytes": 1 << 20, "egress": "open"})
    token = oma.CancelToken()
    threading.Timer(30, token.cancel).start()
    seen: List[str] = []
    print(report(agent.run("What is 2 + 3?", cancel=token, run_id="run-1", metadata={"user": "u1"},
                           on_tool_call=lambda name, given: seen.append(name),
                           on_tool_result=lambda name, r: seen.append(f"{name}: {r['data']}"))))
    print(token.cancelled, seen)
    messages: List[oma.LLMMessage] = [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]
    for event in agent.stream(messages):
        if event["type"] == "text_delta":
            print(event["data"], end="")
        elif event["type"] == "tool_use":
            print(event["data"]["name"])
        elif event["type"] == "error":
            error: oma.OmaError = event["data"]
            print(error.name, error.message, error.result.get("status") if error.result else None)
        elif event["type"] == "done":
            print(report(event["data"]))
    history: List[oma.LLMMessage] = agent.get_history()
    print(len(history), oma.validate(messages)[0]["role"])
    try:
        oma.validate("not json")
    except oma.InvalidMessageError as e:
        print(e.to_dict()["message"])
    progress: List[oma.ProgressEvent] = []
    result = oma.run_agent("summarise", model="gpt-4o", provider="openai", on_progress=progress.append,
                           evaluation={"store_payloads": "redacted", "sample_rate": 0.5}, cancel=token)
    print(report(result), [p["type"] for p in progress])


class FixedAdapter:
    """OMA's LLMAdapter of the user's: answers every call with the model's name."""

    name = "fixed"
    capabilities = {"echoes_reasoning": "never"}

    def chat(self, messages: List[oma.LLMMessage], options: oma.LLMChatOptions) -> oma.LLMResponse:
        return {"id": "r-1", "content": [{"type": "text", "text": options["model"]}], "model": options["model"],
                "stop_reason": "end_turn", "usage": {"input_tokens": len(messages), "output_tokens": 1}}

    def stream(self, messages: List[oma.LLMMessage], options: oma.LLMStreamOptions) -> Iterator[oma.AdapterStreamEvent]:
        yield {"type": "text", "data": options["model"]}
        yield {"type": "done", "data": self.chat(messages, options)}


class AsyncFixedAdapter:
    """The same with ``async def``, as an asyncio application writes it."""

    name = "fixed-async"

    async def chat(self, messages: List[oma.LLMMessage], options: oma.LLMChatOptions) -> oma.LLMResponse:
        return FixedAdapter().chat(messages, options)

    async def stream(self, messages: List[oma.LLMMessage],
                     options: oma.LLMStreamOptions) -> AsyncIterator[oma.AdapterStreamEvent]:
        yield {"type": "done", "data": FixedAdapter().chat(messages, options)}


def adapters() -> None:
    adapter: oma.LLMAdapter = FixedAdapter()
    print(report(oma.Agent(model="local", adapter=adapter).run("hi")))
    print(report(oma.run_agent("hi", model="local", adapter=FixedAdapter())))


async def main_async() -> None:
    print(report(await oma.AsyncAgent(model="local", adapter=AsyncFixedAdapter(), text_deltas=True).run("hi")))
    async with oma.AsyncAgent(name="helper", model="claude-sonnet-4-6", provider="anthropic",
                              tools=[add, lookup], deadline_ms=60_000) as agent:
        result = await agent.run("What is 2 + 3?")
        print(report(result))
        async for event in agent.stream("Tell me more"):
            if event["type"] == "reasoning":
                print(event["data"])
            elif event["type"] == "budget_exceeded":
                budget: oma.TokenBudgetExceededError = event["data"]
                print(budget.message)
        print(report(await agent.prompt("and then?")))

    async def on_progress(event: oma.ProgressEvent) -> None:
        print(event["agent"], event["type"])

    print(report(await oma.run_agent_async("hi", model="gpt-4o", provider="openai", on_progress=on_progress)))
    task = asyncio.create_task(oma.AsyncAgent(model="m", provider="anthropic").run("slow"))
    task.cancel()
    # The provider defaults to anthropic; a token cancels from any thread.
    print(report(await oma.AsyncAgent(model="m").run("x", cancel=oma.CancelToken(), run_id="r")))


class CountingExporter:
    """A trace exporter of the user's: counts what it is given."""

    def __init__(self) -> None:
        self.exported = 0

    def export(self, records: Sequence[obs.TraceRecord], signal: threading.Event) -> obs.ExportResult:
        self.exported += len(records)
        return {"status": "success", "exported": len(records)}


def observability() -> None:
    def on_diagnostic(diagnostic: obs.TelemetryDiagnostic) -> None:
        print(diagnostic["code"], diagnostic["count"])

    batching = obs.BatchingTraceSink(CountingExporter(), max_queue_records=1_000, on_diagnostic=on_diagnostic)
    private = obs.SensitiveDataProcessor(batching, capture={"tool_input": "redacted", "max_content_chars": 200})
    sink: obs.TraceSink = obs.CompositeSink([private, obs.FilteringSink(batching, lambda r: r["recordType"] == "span_end")])
    delivery: obs.FlushResult = sink.force_flush(timeout_ms=1_000)
    print(delivery["status"], delivery["exported"], batching.get_stats()["queuedRecords"])
    store = obs.InMemoryTraceStore()
    config: obs.ObservabilityConfig = {"sinks": [obs.BatchingTraceSink(obs.TraceStoreExporter(store)), sink],
                                       "capture": {"tool_input": "redacted"}, "on_diagnostic": on_diagnostic}
    result = oma.run_agent("hi", model="claude-sonnet-4-6", run_id="order-1", observability=config)
    run = store.get_run(result["identity"]["runId"])
    if run is not None:
        print(run.get("status"), run["tokens"]["input_tokens"], obs.build_execution_receipt(result)["partial"])


def mcp_tools() -> None:
    with connect_mcp_tools(command="npx", args=["-y", "@modelcontextprotocol/server-github"],
                           env={"GITHUB_TOKEN": os.environ.get("GITHUB_TOKEN", "")}, name_prefix="github") as github:
        agent = oma.Agent(name="triage", model="claude-sonnet-4-6", tools=github.tools)
        print(agent.run("List the open issues")["output"])


async def mcp_tools_async() -> None:
    async with await connect_mcp_tools_async(command="uvx", args=["mcp-server-fetch"]) as fetch:
        names: List[str] = [t.name for t in fetch.tools]
        print(names, (await oma.AsyncAgent(model="m", tools=fetch.tools).run("fetch it"))["output"])


def evaluation() -> None:
    cases = oma_eval.define_eval_set({"name": "smoke", "version": "1", "cases": [
        {"id": "sum", "input": "What is 2 + 2?", "expected": "4", "tags": ["math"]}]})

    def exact(ctx: oma_eval.ScorerContext) -> oma_eval.ScoreResult:
        same = ctx["output"] == ctx["evalCase"].get("expected")
        return {"score": 1.0 if same else 0.0, "pass": same}

    report: oma_eval.EvalRunReport = oma_eval.run_eval_set(
        cases, oma_eval.target_from_agent(name="candidate", model="claude-sonnet-4-6"),
        scorers=[oma_eval.define_scorer("exact", exact, version="1")], repeats=2,
        store=oma_eval.InMemoryEvalStore())
    verdict = oma_eval.evaluate_gate(report, {"schemaVersion": 1, "thresholds": [
        {"scorer": "exact", "metric": "passRate", "min": 1}]})
    print(verdict["pass"], [f["message"] for f in verdict["failures"]], report["aggregates"][0]["avg"])


if __name__ == "__main__":
    main_sync()
    adapters()
    asyncio.run(main_async())
