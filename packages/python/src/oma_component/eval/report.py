"""The per-scorer aggregates of a run's records (OMA's report): scorer errors are counted apart
and never enter a score; percentiles by nearest rank."""

from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ._types import EvalRecord, ScorerAggregate


def _nearest_rank(ordered: Sequence[float], percentile: float) -> float:
    if not ordered:
        return 0
    rank = max(1, math.ceil(percentile * len(ordered)))
    return ordered[min(rank - 1, len(ordered) - 1)]


def aggregate_one(name: str, version: Optional[str], records: Sequence[EvalRecord]) -> ScorerAggregate:
    """One scorer's (by name and version) statistics over ``records``."""
    matching = [r for r in records if r["scorer"]["name"] == name and r["scorer"].get("version") == version]
    scored = [r for r in matching if r["status"] == "scored" and r.get("score") is not None]
    scores = sorted(float(r.get("score", 0)) for r in scored)
    judged = [r for r in scored if r.get("pass") is not None]
    identity: Dict[str, Any] = {"name": name}
    if version is not None:
        identity["version"] = version
    total = 0.0
    for value in scores:
        total += value
    out: Dict[str, Any] = {
        "scorer": identity,
        "scoredCount": len(scores),
        "errorCount": sum(1 for r in matching if r["status"] == "scorer_error"),
        "avg": 0 if not scores else total / len(scores),
        "p50": _nearest_rank(scores, 0.5),
        "p95": _nearest_rank(scores, 0.95),
        "min": scores[0] if scores else 0,
        "max": scores[-1] if scores else 0,
    }
    if judged:
        out["passRate"] = sum(1 for r in judged if r.get("pass") is True) / len(judged)
    return out  # type: ignore[return-value]


def aggregate_records(records: Sequence[EvalRecord], scorers: Sequence[Tuple[str, Optional[str]]],
                      tags_by_case: Mapping[str, Sequence[str]]) -> List[ScorerAggregate]:
    """One aggregate per scorer (in the scorers' order), with ``byTag`` (one per tag of the
    cases, in the order they first appear) when any case has a tag."""
    tags: List[str] = []
    for case_tags in tags_by_case.values():
        for tag in case_tags:
            if tag not in tags:
                tags.append(tag)
    out: List[ScorerAggregate] = []
    for name, version in scorers:
        aggregate = aggregate_one(name, version, records)
        if tags:
            aggregate["byTag"] = {
                tag: aggregate_one(name, version, [r for r in records
                                                   if tag in tags_by_case.get(r.get("caseId", ""), ())])
                for tag in tags}
        out.append(aggregate)
    return out
