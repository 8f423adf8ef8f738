"""OMA's LLM judge scorers (``createJudgeScorer``, ``eval/judge.ts``): a scorer that asks one
or more judge agents to grade a sample, scored by their verdicts. The prompt, the reading of
each answer and the aggregate (mean score, quorum of passes, reasons) are the component's rules
(docs/evaluation.md#judges); running the judges is this side's: each runs as
:func:`~oma_component.run_agent_async` runs an agent, on the prompt in turn, under the scorer's
deadline."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Union, cast

from ._rules import judge_step
from ._types import ScoreResult
from .scorer import attach_score_cost_inputs

JudgePrompt = Union[str, Callable[[Mapping[str, Any]], str]]


def _is_pydantic_model(schema: Any) -> bool:
    return isinstance(schema, type) and callable(getattr(schema, "model_validate", None))


def _shape(judge: Any) -> Any:
    """What the rules read of a judge: its name, model and backend's kind."""
    if not isinstance(judge, Mapping):
        return judge
    out: Dict[str, Any] = {"name": judge.get("name")}
    if judge.get("model") is not None:
        out["model"] = judge["model"]
    backend = judge.get("backend")
    if backend:
        out["backend"] = {"kind": getattr(backend, "kind", None) if not isinstance(backend, Mapping) else backend.get("kind")}
    return out


def _issues(error: Exception) -> str:
    """OMA's validation message from a pydantic error: ``  - <path>: <message>`` per issue."""
    errors: Any = getattr(error, "errors", None)
    if not callable(errors):
        return str(error)
    lines = []
    issues: List[Any] = list(cast(Callable[[], Iterable[Any]], errors)())
    for issue in issues:
        loc = issue.get("loc") or ()
        lines.append(f"  - {'.'.join(str(p) for p in loc) if loc else '(root)'}: {issue.get('msg', '')}")
    return "Output validation failed:\n" + "\n".join(lines)


@dataclass(frozen=True)
class JudgeScorer:
    """A judge scorer made by :func:`create_judge_scorer`; ``score`` is ``async``."""

    name: str
    version: Optional[str]
    timeout_ms: Optional[float]
    judges: Sequence[Mapping[str, Any]] = field(repr=False)
    checked: Mapping[str, Any] = field(repr=False)
    verdict_schema: Any = field(repr=False, default=None)
    judge_prompt: Optional[JudgePrompt] = field(repr=False, default=None)
    preset: Optional[str] = None

    def _request(self, context: Mapping[str, Any]) -> Dict[str, Any]:
        request: Dict[str, Any] = {}
        if self.preset is not None:
            request["preset"] = self.preset
        elif self.judge_prompt is not None:
            given = self.judge_prompt(context) if callable(self.judge_prompt) else self.judge_prompt
            request["instruction"] = "" if given is None else str(given)
        case = context.get("evalCase") or {}
        for key, value in (("input", case.get("input")), ("expected", case.get("expected")),
                           ("output", context.get("output")), ("metadata", context.get("metadata"))):
            if value is not None:
                request[key] = value
        if _is_pydantic_model(self.verdict_schema):
            request["schema"] = self.verdict_schema.model_json_schema()
        elif self.verdict_schema is not None:
            request["schema"] = self.verdict_schema
        return request

    async def _verdict(self, index: int, prompt: str, cancel: Any, costs: List[Dict[str, Any]]) -> Dict[str, Any]:
        """One judge's verdict on ``prompt``; what its run spent joins ``costs`` whatever the
        verdict (online evaluation's cost budget counts it)."""
        from .._agent.orchestrator import run_agent_async

        judge = self.judges[index]
        checked = self.checked["judges"][index]
        result = await run_agent_async(prompt, cancel=cancel, **judge)
        context: Dict[str, Any] = {"agentName": checked["name"], "model": checked.get("model"), "phase": "agent"}
        if judge.get("provider") is not None:
            context["provider"] = judge["provider"]
        costs.append({"usage": result.get("tokenUsage") or {}, "context": context})
        if not result.get("success"):
            error = result.get("error")
            if isinstance(error, BaseException):
                raise error
            info: Mapping[str, Any] = result.get("errorInfo") or {}
            raise RuntimeError(info.get("message") or f'Judge "{checked["name"]}" failed.')
        output = result.get("output", "")
        if _is_pydantic_model(self.verdict_schema):
            value = judge_step("extract", {"output": output})["value"]
            try:
                instance = self.verdict_schema.model_validate(value)
            except Exception as e:  # noqa: BLE001 - any failure to validate is the verdict's
                raise ValueError(_issues(e)) from None
            return judge_step("verdict", {"judge": checked, "value": instance.model_dump(mode="json")})  # type: ignore[no-any-return]
        request: Dict[str, Any] = {"judge": checked, "output": output}
        if self.verdict_schema is not None:
            request["schema"] = self.verdict_schema
        return judge_step("verdict", request)  # type: ignore[no-any-return]

    async def score(self, context: Mapping[str, Any]) -> ScoreResult:
        from .._agent.cancel import CancelToken

        prompt = judge_step("prompt", self._request(context))["prompt"]
        token = CancelToken()
        signal = context.get("signal")
        unsubscribe = signal._subscribe(token.cancel) if signal is not None and hasattr(signal, "_subscribe") else None
        verdicts: List[Dict[str, Any]] = []
        costs: List[Dict[str, Any]] = []
        spent = costs  # what the score or its failure carries: the judges that answered in time

        async def every() -> None:
            for index in range(len(self.judges)):
                verdicts.append(await self._verdict(index, prompt, token, costs))

        try:
            if self.checked.get("timeoutMs") is None:
                await every()
            else:
                # The judges run in a task of their own, stopped through their cancel token (a
                # run ends at once on it) rather than by cancelling the task under them.
                timeout = self.checked["timeoutMs"]
                task = asyncio.ensure_future(every())
                done, _ = await asyncio.wait({task}, timeout=timeout / 1000)
                if task not in done:
                    spent = list(costs)
                    token.cancel()
                    await asyncio.wait({task})
                    if not task.cancelled():
                        task.exception()
                    raise TimeoutError(f"Judge scorer exceeded timeout of {timeout:g}ms.")
                task.result()
        except Exception as error:
            attach_score_cost_inputs(error, spent)
            raise
        finally:
            if callable(unsubscribe):
                unsubscribe()
        aggregate = judge_step("aggregate", {"verdicts": verdicts, "quorum": self.checked["quorum"]})
        return attach_score_cost_inputs(aggregate, costs)  # type: ignore[no-any-return]


def judge_scorer(name: str, *, judges: Sequence[Mapping[str, Any]], version: Optional[str] = None,
                 quorum: Optional[int] = None, verdict_schema: Any = None, judge_prompt: Optional[JudgePrompt] = None,
                 timeout_ms: Optional[float] = None, preset: Optional[str] = None) -> JudgeScorer:
    if not isinstance(name, str) or not name.strip():
        raise TypeError("Scorer.name must be a non-empty string.")
    if version is not None and not isinstance(version, str):
        raise TypeError("Scorer.version must be a string when provided.")
    copies = [dict(judge) if isinstance(judge, Mapping) else judge for judge in judges] if isinstance(judges, (list, tuple)) else judges
    request: Dict[str, Any] = {"judges": [_shape(j) for j in copies] if isinstance(copies, list) else copies}
    if quorum is not None:
        request["quorum"] = quorum
    if timeout_ms is not None:
        request["timeoutMs"] = timeout_ms
    checked = judge_step("options", request)
    if verdict_schema is not None and not (_is_pydantic_model(verdict_schema) or isinstance(verdict_schema, (dict, bool))):
        raise TypeError("verdict_schema must be a pydantic model or a JSON Schema dict")
    if judge_prompt is not None and not (isinstance(judge_prompt, str) or callable(judge_prompt)):
        raise TypeError("judge_prompt must be a string or a function")
    return JudgeScorer(name, version, timeout_ms, copies, checked, verdict_schema, judge_prompt, preset)


def create_judge_scorer(name: str, *, judges: Sequence[Mapping[str, Any]], version: Optional[str] = None,
                        quorum: Optional[int] = None, verdict_schema: Any = None,
                        judge_prompt: Optional[JudgePrompt] = None, timeout_ms: Optional[float] = None) -> JudgeScorer:
    """OMA's ``createJudgeScorer``: each judge a mapping of
    :func:`~oma_component.run_agent_async`'s keyword arguments (``name``, ``model``, ``provider``,
    ``adapter``, ...), run on the judge prompt in turn. The score is the judges' mean; ``pass``
    (when any judge said pass or fail) needs ``quorum`` passes (half the judges rounded up by
    default). ``verdict_schema`` is a pydantic model (checked here) or a JSON Schema dict (checked
    by the component), OMA's ``{score, reason}`` without one; ``judge_prompt`` the instruction,
    or a function of the scorer's context giving it."""
    return judge_scorer(name, judges=judges, version=version, quorum=quorum, verdict_schema=verdict_schema,
                        judge_prompt=judge_prompt, timeout_ms=timeout_ms)
