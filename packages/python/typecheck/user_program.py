"""A typical user program, sync and async; CI holds it to ``mypy --strict`` and pyright.

It is type-checked, not run (it would need a provider): see check.sh.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, Dict, List

import oma_component as oma


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
    return {"prompt": ctx["prompt"].strip()}


def report(result: oma.AgentRunResult) -> str:
    if result["success"]:
        return f"{result['output']} ({result['tokenUsage']['output_tokens']} tokens, {result['turns']} turns)"
    info = result.get("errorInfo")
    return f"failed: {info['name']}: {info['message']}" if info else "failed"


def main_sync() -> None:
    # The decorated function keeps its type: calling it is still checked.
    total: str = add({"a": 1, "b": 2})
    assert total == "3"
    agent = oma.Agent(name="helper", model="claude-sonnet-4-6", provider="anthropic",
                      api_key=os.environ.get("ANTHROPIC_API_KEY"), system_prompt="Be brief.",
                      tools=[add, lookup], before_run=hook, call={"timeout_ms": 30_000, "egress": "open"})
    print(report(agent.run("What is 2 + 3?")))
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
                           evaluation={"store_payloads": "redacted", "sample_rate": 0.5})
    print(report(result), [p["type"] for p in progress])


async def main_async() -> None:
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


if __name__ == "__main__":
    main_sync()
    asyncio.run(main_async())
