"""Scorers (OMA's ``defineScorer``): a named, optionally versioned function that scores a
sample in [0, 1]; and the check every score result gets."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import (Any, Awaitable, Callable, Mapping, Optional, Protocol, Sequence, Set, Tuple, Union,
                    runtime_checkable)

from ._types import ScoreResult, ScorerContext
from ._values import is_trace_attribute

ScoreFunction = Callable[[ScorerContext], Union[ScoreResult, Awaitable[ScoreResult]]]

_warned: Set[str] = set()


@runtime_checkable
class Scorer(Protocol):
    """Anything with a ``name``, a ``score(context)`` (sync or ``async def``) and optionally a
    ``version`` and ``timeout_ms``."""

    name: str

    def score(self, context: ScorerContext) -> Union[ScoreResult, Awaitable[ScoreResult]]: ...


@dataclass(frozen=True)
class DefinedScorer:
    """A scorer made by :func:`define_scorer`."""

    name: str
    fn: ScoreFunction
    version: Optional[str] = None
    timeout_ms: Optional[float] = None

    def score(self, context: ScorerContext) -> Union[ScoreResult, Awaitable[ScoreResult]]:
        return self.fn(context)


def define_scorer(name: str, score: ScoreFunction, *, version: Optional[str] = None,
                  timeout_ms: Optional[float] = None) -> DefinedScorer:
    """A scorer: ``score(context)`` returns (or awaits) ``{"score", "pass"?, "reason"?,
    "details"?}``. What it raises, or a result that is not one, is recorded as a scorer error,
    never as a score of zero. A scorer without a version is warned of once (a baseline cannot
    tell when its scoring changed)."""
    if not isinstance(name, str) or not name.strip():
        raise TypeError("Scorer.name must be a non-empty string.")
    if not callable(score):
        raise TypeError("Scorer.score must be a function.")
    if version is not None and not isinstance(version, str):
        raise TypeError("Scorer.version must be a string when provided.")
    if timeout_ms is not None and (isinstance(timeout_ms, bool) or not isinstance(timeout_ms, (int, float))):
        raise TypeError("Scorer.timeout_ms must be a number when provided.")
    if version is None and name not in _warned:
        _warned.add(name)
        warnings.warn(f'Scorer "{name}" has no version; baseline comparisons cannot detect scoring drift.',
                      UserWarning, stacklevel=2)
    return DefinedScorer(name, score, version, timeout_ms)


#: Where a score result or a scorer's error carries the model usage its judges spent.
_COST_INPUTS = "_oma_cost_inputs"


class _CostedScore(dict):  # type: ignore[type-arg]
    """A score result that carries the model usage its judges spent (as an attribute: unseen by
    JSON, equality and the result's checks)."""


def attach_score_cost_inputs(target: Any, inputs: Sequence[Mapping[str, Any]]) -> Any:
    """``target`` (a score result or an exception) carrying ``inputs``, each ``{"usage",
    "context"}`` of one judge's run, for online evaluation's cost budget (OMA's
    ``attachScoreCostInputs``); a dict result comes back as a copy that carries them."""
    if not inputs:
        return target
    kept = tuple({"usage": dict(i.get("usage") or {}), "context": dict(i["context"])} for i in inputs)
    if isinstance(target, dict):
        target = _CostedScore(target)
    try:
        setattr(target, _COST_INPUTS, kept)
    except (AttributeError, TypeError):
        pass  # a value that takes no attribute carries no usage
    return target


def score_cost_inputs(value: Any) -> Tuple[Mapping[str, Any], ...]:
    """The model usage a score result or error carries, or none."""
    inputs = getattr(value, _COST_INPUTS, ())
    return inputs if isinstance(inputs, tuple) else ()


def scorer_fields(scorer: Any, index: int) -> "tuple[str, Optional[str], Optional[float]]":
    """A scorer's name, version and timeout, or ``TypeError`` when it is not a scorer."""
    name = getattr(scorer, "name", None)
    if not isinstance(name, str) or not name.strip() or not callable(getattr(scorer, "score", None)):
        raise TypeError(f"scorers[{index}] must have a non-empty name and a score(context) method")
    version = getattr(scorer, "version", None)
    timeout = getattr(scorer, "timeout_ms", None)
    if version is not None and not isinstance(version, str):
        raise TypeError(f"scorers[{index}].version must be a string")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))):
        raise TypeError(f"scorers[{index}].timeout_ms must be a number")
    return name, version, timeout


def check_score_result(value: Any) -> ScoreResult:
    """``value`` when it is a score result; otherwise ``TypeError``/``ValueError`` with OMA's
    message."""
    if not isinstance(value, dict):
        raise TypeError("Scorer must return a ScoreResult object.")
    score = value.get("score")
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not 0 <= score <= 1:
        raise ValueError("ScoreResult.score must be a finite number in the range [0, 1].")
    if value.get("pass") is not None and not isinstance(value["pass"], bool):
        raise TypeError("ScoreResult.pass must be a boolean when provided.")
    if value.get("reason") is not None and not isinstance(value["reason"], str):
        raise TypeError("ScoreResult.reason must be a string when provided.")
    details = value.get("details")
    if details is not None:
        if not isinstance(details, dict):
            raise TypeError("ScoreResult.details must be a trace-attribute record when provided.")
        if not all(is_trace_attribute(v) for v in details.values()):
            raise TypeError("ScoreResult.details values must be valid TraceAttributeValue values.")
    return value  # type: ignore[return-value]
