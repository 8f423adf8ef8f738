"""OMA's ``evaluateGate``: a run report held to thresholds on its aggregates, to scorer and
target health, and to a baseline report (regressions), with OMA's messages."""

from __future__ import annotations

import sys
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ._types import EvalRunReport, GateFailure, GatePolicy, GateVerdict, ScorerAggregate
from ._values import js_number

_METRICS = ("avg", "p50", "p95", "min", "passRate")


class GatePolicyError(ValueError):
    """A gate policy that is not one: ``field`` says where (``thresholds[0].min``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def _unit(value: Any, field: str) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise GatePolicyError(field, f"{field} must be a number from 0 through 1")
    return value


def _keys(value: Mapping[str, Any], known: Sequence[str], where: str) -> None:
    for key in value:
        if key not in known:
            raise GatePolicyError(f"{where}{key}", f"{where}{key} is not a field of a gate policy")


def check_gate_policy(policy: Any) -> GatePolicy:
    """``policy`` with its scorer names and tags trimmed, when it is a gate policy;
    ``GatePolicyError`` naming the field otherwise."""
    if not isinstance(policy, Mapping):
        raise GatePolicyError("", "a gate policy must be a dict")
    _keys(policy, ("schemaVersion", "thresholds", "maxScorerErrorRate", "maxTargetErrorRate", "baseline"), "")
    if policy.get("schemaVersion") != 1 or isinstance(policy.get("schemaVersion"), bool):
        raise GatePolicyError("schemaVersion", "schemaVersion must be 1")
    thresholds = policy.get("thresholds")
    if isinstance(thresholds, (str, bytes, Mapping)) or not isinstance(thresholds, (list, tuple)):
        raise GatePolicyError("thresholds", "thresholds must be a list")
    for i, threshold in enumerate(thresholds):
        where = f"thresholds[{i}]"
        if not isinstance(threshold, Mapping):
            raise GatePolicyError(where, f"{where} must be an object")
        _keys(threshold, ("scorer", "metric", "min", "max", "tag"), f"{where}.")
        if not isinstance(threshold.get("scorer"), str) or not threshold["scorer"].strip():
            raise GatePolicyError(f"{where}.scorer", f"{where}.scorer must be a non-empty string")
        if threshold.get("metric") not in _METRICS:
            raise GatePolicyError(f"{where}.metric", f"{where}.metric must be one of {', '.join(_METRICS)}")
        low, high = _unit(threshold.get("min"), f"{where}.min"), _unit(threshold.get("max"), f"{where}.max")
        if low is None and high is None:
            raise GatePolicyError(where, f"{where}: at least one of min or max is required")
        if low is not None and high is not None and low > high:
            raise GatePolicyError(where, f"{where}: min must be less than or equal to max")
        tag = threshold.get("tag")
        if tag is not None and (not isinstance(tag, str) or not tag.strip()):
            raise GatePolicyError(f"{where}.tag", f"{where}.tag must be a non-empty string")
    normalized: Dict[str, Any] = dict(policy)
    normalized["thresholds"] = [
        {**t, "scorer": t["scorer"].strip(), **({"tag": t["tag"].strip()} if t.get("tag") is not None else {})}
        for t in thresholds]
    _unit(policy.get("maxScorerErrorRate"), "maxScorerErrorRate")
    _unit(policy.get("maxTargetErrorRate"), "maxTargetErrorRate")
    baseline = policy.get("baseline")
    if baseline is not None:
        if not isinstance(baseline, Mapping):
            raise GatePolicyError("baseline", "baseline must be an object")
        _keys(baseline, ("maxRegression", "perScorer", "allowSetMismatch"), "baseline.")
        _unit(baseline.get("maxRegression"), "baseline.maxRegression")
        per = baseline.get("perScorer")
        if per is not None:
            if not isinstance(per, Mapping):
                raise GatePolicyError("baseline.perScorer", "baseline.perScorer must be an object")
            for key, value in per.items():
                _unit(value, f"baseline.perScorer.{key}")
        allow = baseline.get("allowSetMismatch")
        if allow is not None and not isinstance(allow, bool):
            raise GatePolicyError("baseline.allowSetMismatch", "baseline.allowSetMismatch must be a boolean")
    return normalized  # type: ignore[return-value]


def _aggregate(report: EvalRunReport, threshold: Mapping[str, Any]) -> Optional[ScorerAggregate]:
    found = next((a for a in report["aggregates"] if a["scorer"]["name"] == threshold["scorer"]), None)
    if found is None or threshold.get("tag") is None:
        return found
    return found.get("byTag", {}).get(threshold["tag"])


def _metric(aggregate: Optional[ScorerAggregate], metric: str) -> Optional[float]:
    if aggregate is None:
        return None
    value = aggregate.get(metric)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _target(threshold: Mapping[str, Any]) -> str:
    if threshold.get("tag") is None:
        return f'scorer "{threshold["scorer"]}"'
    return f'scorer "{threshold["scorer"]}" for tag "{threshold["tag"]}"'


def _with_tag(failure: Dict[str, Any], threshold: Mapping[str, Any]) -> GateFailure:
    if threshold.get("tag") is not None:
        failure = {**failure, "tag": threshold["tag"]}
        order = ["kind", "scorer", "metric", "tag", "actual", "limit", "message"]
        failure = {k: failure[k] for k in order if k in failure}
    return failure  # type: ignore[return-value]


def _threshold_failures(report: EvalRunReport, threshold: Mapping[str, Any]) -> List[GateFailure]:
    metric = threshold["metric"]
    actual = _metric(_aggregate(report, threshold), metric)
    base = {"scorer": threshold["scorer"], "metric": metric}
    if actual is None:
        suffix = " or has no scored records with a pass value" if metric == "passRate" else ""
        return [_with_tag({"kind": "missing_scorer", **base, "actual": 0, "limit": 1,
                           "message": f'Gate threshold references {_target(threshold)}, but the metric "{metric}" '
                                      f"is unavailable{suffix}."}, threshold)]
    failures: List[GateFailure] = []
    low, high = threshold.get("min"), threshold.get("max")
    if low is not None and actual < low:
        failures.append(_with_tag({"kind": "threshold", **base, "actual": actual, "limit": low,
                                   "message": f'Gate metric "{metric}" for {_target(threshold)} is {js_number(actual)}, '
                                              f"below minimum {js_number(low)}."}, threshold))
    if high is not None and actual > high:
        failures.append(_with_tag({"kind": "threshold", **base, "actual": actual, "limit": high,
                                   "message": f'Gate metric "{metric}" for {_target(threshold)} is {js_number(actual)}, '
                                              f"above maximum {js_number(high)}."}, threshold))
    return failures


def _version(report: EvalRunReport, scorer: str) -> Optional[str]:
    found = next((a for a in report["aggregates"] if a["scorer"]["name"] == scorer), None)
    return None if found is None else found["scorer"].get("version")


def _shown(version: Optional[str]) -> str:
    return "(unversioned)" if version is None else f'"{version}"'


def _identity(report: EvalRunReport) -> str:
    return f'{report["evalSet"]["name"]}@{report["evalSet"]["version"]}'


def _exceeds(actual: float, limit: float) -> bool:
    tolerance = sys.float_info.epsilon * 4 * max(1.0, abs(actual), abs(limit))
    return actual - limit > tolerance


def evaluate_gate(report: EvalRunReport, policy: GatePolicy, baseline: Optional[EvalRunReport] = None) -> GateVerdict:
    """The verdict on ``report``: each threshold's metric within its bounds (a threshold on a
    scorer, tag or metric the report lacks fails as ``missing_scorer``); scorer errors at most
    ``maxScorerErrorRate`` (0.1) of the scored and failed records; target errors at most
    ``maxTargetErrorRate`` (0) of the samples; with ``baseline`` of the same eval set, no
    metric of a threshold dropping more than its ``perScorer`` or ``maxRegression`` allowance
    (skipped, with a warning, for a scorer whose version changed)."""
    policy = check_gate_policy(policy)
    failures: List[GateFailure] = [f for t in policy["thresholds"] for f in _threshold_failures(report, t)]
    warnings: List[str] = []

    def warn(text: str) -> None:
        if text not in warnings:
            warnings.append(text)

    scorer_records = [r for r in report["records"] if r["status"] in ("scored", "scorer_error")]
    errors = sum(1 for r in scorer_records if r["status"] == "scorer_error")
    scorer_rate = 0 if not scorer_records else errors / len(scorer_records)
    max_scorer = policy.get("maxScorerErrorRate")
    max_scorer = 0.1 if max_scorer is None else max_scorer
    if scorer_rate > max_scorer:
        failures.append({"kind": "scorer_health", "actual": scorer_rate, "limit": max_scorer,
                         "message": f"Scorer error rate {js_number(scorer_rate)} exceeds maximum {js_number(max_scorer)}."})
    samples = report["caseCount"] * report["repeats"]
    target_rate = 0 if samples == 0 else report["totals"]["targetErrors"] / samples
    max_target = policy.get("maxTargetErrorRate")
    max_target = 0 if max_target is None else max_target
    if target_rate > max_target:
        failures.append({"kind": "target_health", "actual": target_rate, "limit": max_target,
                         "message": f"Target error rate {js_number(target_rate)} exceeds maximum {js_number(max_target)}."})

    rules = policy.get("baseline")
    if baseline is None:
        if rules is not None:
            warn("Baseline policy is configured but no baseline report was provided; regression checks were skipped.")
    elif (report["evalSet"]["name"], report["evalSet"]["version"]) != (baseline["evalSet"]["name"],
                                                                       baseline["evalSet"]["version"]):
        message = (f"Baseline EvalSet mismatch: current is {_identity(report)}, baseline is {_identity(baseline)}; "
                   "regression checks were skipped.")
        if rules is not None and rules.get("allowSetMismatch") is True:
            warn(message)
        else:
            failures.append({"kind": "baseline_mismatch", "actual": 1, "limit": 0, "message": message})
    else:
        for threshold in policy["thresholds"]:
            per = (rules or {}).get("perScorer") or {}
            allowed = per.get(threshold["scorer"])
            if allowed is None:
                allowed = (rules or {}).get("maxRegression")
            if allowed is None:
                continue
            current_version, baseline_version = _version(report, threshold["scorer"]), _version(baseline, threshold["scorer"])
            if current_version != baseline_version:
                warn(f'Scorer version drift for "{threshold["scorer"]}": current {_shown(current_version)}, '
                     f"baseline {_shown(baseline_version)}; regression checks were skipped for this scorer.")
                continue
            metric = threshold["metric"]
            now = _metric(_aggregate(report, threshold), metric)
            before = _metric(_aggregate(baseline, threshold), metric)
            if now is None or before is None:
                warn(f'Baseline metric "{metric}" for {_target(threshold)} is unavailable; regression check was skipped.')
                continue
            regression = before - now
            if _exceeds(regression, allowed):
                failures.append(_with_tag({
                    "kind": "regression", "scorer": threshold["scorer"], "metric": metric, "actual": regression,
                    "limit": allowed,
                    "message": f'Gate metric "{metric}" for {_target(threshold)} regressed by {js_number(regression)} '
                               f"(baseline {js_number(before)}, current {js_number(now)}), exceeding {js_number(allowed)}."},
                    threshold))
    return {"pass": not failures, "failures": failures, "warnings": warnings}
