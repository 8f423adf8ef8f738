"""OMA's built-in scorers (``eval/scorers``): cost budget, dependency utilization, duplicate
work, no progress, structured-output compliance and tool-call success, and the answer-relevancy
judge. What each computes is the component's rule (docs/evaluation.md#built-in-scorers); here
each is made a scorer, its options checked when it is made, as OMA checks them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Mapping, Optional, Sequence

from ._rules import score_builtin, to_json
from ._types import ScoreResult
from .judge import JudgeScorer, judge_scorer


def _context(context: Mapping[str, Any]) -> Dict[str, Any]:
    """What the rules read of a scorer's context. A result's ``structured`` of ``None`` is no
    structured output (the package's results always carry the key)."""
    out = {key: context[key] for key in ("result", "trace") if context.get(key) is not None}
    result = out.get("result")
    if isinstance(result, Mapping) and result.get("structured", ...) is None:
        out["result"] = {key: value for key, value in result.items() if key != "structured"}
    return out


@dataclass(frozen=True)
class BuiltinScorer:
    """One of OMA's built-in scorers: ``name`` and ``version`` are OMA's; ``score(context)``
    reads the context's ``result`` and ``trace``."""

    name: str
    version: str
    rule: str
    options: str
    read: Callable[[Mapping[str, Any]], Dict[str, Any]] = field(default=_context, repr=False)
    timeout_ms: Optional[float] = None

    def score(self, context: Mapping[str, Any]) -> ScoreResult:
        return score_builtin(self.rule, self.options, to_json(self.read(context)))  # type: ignore[no-any-return]


def _builtin(rule: str, options: Mapping[str, Any], read: Callable[[Mapping[str, Any]], Dict[str, Any]] = _context
             ) -> BuiltinScorer:
    described = score_builtin(rule, to_json(dict(options)))
    return BuiltinScorer(described["name"], described["version"], rule, to_json(described["options"]), read)


def _given(**options: Any) -> Dict[str, Any]:
    return {key: value for key, value in options.items() if value is not None}


def cost_budget_scorer(*, max_tokens: Optional[float] = None, max_cost_amount: Optional[float] = None) -> BuiltinScorer:
    """OMA's ``costBudgetScorer``: hard token and observed-cost ceilings (``cost_budget``); at
    least one of them."""
    return _builtin("cost_budget", _given(maxTokens=max_tokens, maxCostAmount=max_cost_amount))


def dependency_utilization_scorer() -> BuiltinScorer:
    """OMA's ``dependencyUtilizationScorer``: dependency chains of the trace's tasks completed."""
    return _builtin("dependency_utilization", {})


def duplicate_work_scorer(*, threshold: Optional[float] = None) -> BuiltinScorer:
    """OMA's ``duplicateWorkScorer``: pairwise uniqueness of a team's task outputs (0.8 by
    default: similarity at or above it is duplicate work)."""
    return _builtin("duplicate_work", _given(threshold=threshold))


def no_progress_scorer(*, max_stall_turns: Optional[int] = None) -> BuiltinScorer:
    """OMA's ``noProgressScorer``: consecutive failed task attempts that called no tool (2
    allowed by default)."""
    return _builtin("no_progress", _given(maxStallTurns=max_stall_turns))


def tool_call_success_scorer() -> BuiltinScorer:
    """OMA's ``toolCallSuccessScorer``: the share of recorded tool calls that succeeded."""
    return _builtin("tool_call_success", {})


def _is_pydantic_model(schema: Any) -> bool:
    return isinstance(schema, type) and callable(getattr(schema, "model_validate", None))


def structured_output_compliance_scorer(schema: Any = None) -> BuiltinScorer:
    """OMA's ``structuredOutputComplianceScorer``: the result's ``structured`` output is there,
    and matches ``schema`` when one is given: a pydantic model (checked here, with pydantic) or a
    JSON Schema dict (checked by the component)."""
    if schema is None:
        return _builtin("structured_output_compliance", {})
    if _is_pydantic_model(schema):
        def read(context: Mapping[str, Any]) -> Dict[str, Any]:
            out = _context(context)
            result = context.get("result")
            if isinstance(result, Mapping) and result.get("structured") is not None:
                try:
                    schema.model_validate(result["structured"])
                    out["schemaValid"] = True
                except Exception:
                    out["schemaValid"] = False
            return out
        return _builtin("structured_output_compliance", {"hostValidates": True}, read)
    if isinstance(schema, (dict, bool)):
        return _builtin("structured_output_compliance", {"schema": schema})
    raise TypeError("structured_output_compliance_scorer takes a pydantic model or a JSON Schema dict")


def create_answer_relevancy_scorer(*, judges: Sequence[Mapping[str, Any]], name: Optional[str] = None,
                                   version: Optional[str] = None, quorum: Optional[int] = None,
                                   timeout_ms: Optional[float] = None) -> JudgeScorer:
    """OMA's ``createAnswerRelevancyScorer``: a judge scorer named ``answer_relevancy`` unless
    named, asking each judge OMA's relevancy question with OMA's ``{score, reason}`` verdict."""
    return judge_scorer(name if name is not None else "answer_relevancy", judges=judges, version=version,
                        quorum=quorum, timeout_ms=timeout_ms, preset="answer_relevancy")
