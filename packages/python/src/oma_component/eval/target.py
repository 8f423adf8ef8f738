"""Targets (OMA's ``targetFromAgent``): an agent run as the thing an eval set evaluates."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

from .._agent.orchestrator import run_agent_async
from ._types import EvalTargetContext, TargetOutput


def _prompt(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def target_from_agent(*, metadata: Optional[Mapping[str, Any]] = None, **agent: Any) -> Any:
    """A target that runs each case's input (as text) through OMA's ``runAgent`` with the
    agent's keyword arguments (:func:`~oma_component.run_agent_async`'s: ``model``,
    ``provider``, ``name``, ``system_prompt``, ``tools``, ...). Each run carries the
    evaluation's cancellation and run metadata: ``eval_case``, ``eval_repeat``, then
    ``metadata``, then the agent's ``model`` and ``provider``; the output scored is the run's
    ``output``, and the run's result goes with it (its usage and identity reach the records)."""
    if "model" not in agent:
        raise TypeError("target_from_agent needs the agent's model")
    for reserved in ("cancel", "input"):
        if reserved in agent:
            raise TypeError(f"target_from_agent sets {reserved} itself")
    fingerprint: Dict[str, Any] = {"model": agent["model"]}
    if agent.get("provider") is not None:
        fingerprint["provider"] = agent["provider"]

    async def target(value: Any, context: EvalTargetContext) -> TargetOutput:
        run_metadata = {"eval_case": context["caseId"], "eval_repeat": str(context["repeat"]), **(metadata or {}),
                        **fingerprint}
        options = {k: v for k, v in agent.items() if k != "metadata"}
        result = await run_agent_async(_prompt(value), cancel=context["signal"], metadata=run_metadata, **options)
        return {"output": result["output"], "result": dict(result)}

    return target
