"""OMA's evaluation values as ``TypedDict``s, key for key (OMA's JSON keys, as every value of
this package keeps them): eval sets and cases, score results, evaluation records, run reports,
gate policies and verdicts."""

from __future__ import annotations

from typing import Any, Dict, List, Literal, Sequence, TypedDict

from .._agent.cancel import CancelToken
from .._types import StructuredTraceError, TokenUsage
from ..observability._types import TraceAttributeValue
from ..observability.store import RunCostSummary


class _EvalCaseOptional(TypedDict, total=False):
    expected: Any
    tags: List[str]
    metadata: Dict[str, TraceAttributeValue]


class EvalCase(_EvalCaseOptional):
    """One input, what is expected of it, and the tags that group it."""

    id: str
    input: Any


class EvalSetDefaults(TypedDict, total=False):
    repeats: int
    concurrency: int


class _EvalSetOptional(TypedDict, total=False):
    description: str
    defaults: EvalSetDefaults


class EvalSet(_EvalSetOptional):
    """A versioned set of cases (bump ``version`` whenever the cases change)."""

    name: str
    version: str
    cases: List[EvalCase]


# ``pass`` is a Python keyword: the types that hold it are declared with TypedDict's call form.
_ScoreResultOptional = TypedDict("_ScoreResultOptional", {
    "pass": bool, "reason": str, "details": Dict[str, TraceAttributeValue]}, total=False)


class ScoreResult(_ScoreResultOptional):
    """What a scorer returns: ``score`` in [0, 1], and optionally ``"pass"``, ``reason`` and
    ``details`` (trace attribute values)."""

    score: float


class _ScorerContextOptional(TypedDict, total=False):
    result: Dict[str, Any]
    trace: Dict[str, Any]


class ScorerContext(_ScorerContextOptional):
    """What a scorer gets: the case, the target's output, the run's result and trace when
    there are, the sample's metadata, and ``signal``, a :class:`~oma_component.CancelToken`
    cancelled when the scorer's time is up or the evaluation was cancelled."""

    evalCase: EvalCase
    output: Any
    metadata: Dict[str, TraceAttributeValue]
    signal: CancelToken


class EvalTargetContext(TypedDict):
    """What a target gets beside the case's input."""

    caseId: str
    repeat: int
    #: The evaluation's cancellation: give it to a run as ``cancel=``.
    signal: CancelToken
    metadata: Dict[str, TraceAttributeValue]


class _TargetOutputOptional(TypedDict, total=False):
    result: Dict[str, Any]


class TargetOutput(_TargetOutputOptional):
    """What a target returns: the output to score, and the run's result when there is one."""

    output: Any


class _ScorerIdOptional(TypedDict, total=False):
    version: str


class ScorerId(_ScorerIdOptional):
    name: str


class EvalSetId(TypedDict):
    name: str
    version: str


class RunRef(TypedDict):
    runId: str
    attempt: int
    traceId: str
    rootSpanId: str


class EvalUsage(TypedDict, total=False):
    tokens: TokenUsage
    cost: RunCostSummary
    durationMs: float


class EvalPayload(TypedDict, total=False):
    input: str
    output: str
    expected: str


_EvalRecordOptional = TypedDict("_EvalRecordOptional", {
    "evalSet": EvalSetId, "caseId": str, "repeat": int, "score": float, "pass": bool, "reason": str,
    "details": Dict[str, TraceAttributeValue], "runRef": RunRef, "usage": EvalUsage, "error": StructuredTraceError,
    "payload": EvalPayload}, total=False)


class EvalRecord(_EvalRecordOptional):
    """One scorer's outcome for one sample (``status`` ``scored``, ``scorer_error``,
    ``target_error`` or ``skipped``; a scorer's failure is never a score of zero)."""

    schemaVersion: Literal[1]
    recordId: str
    evalRunId: str
    source: Literal["offline", "online"]
    timestampUnixMs: int
    scorer: ScorerId
    status: Literal["scored", "scorer_error", "target_error", "skipped"]
    metadata: Dict[str, TraceAttributeValue]


class _AggregateOptional(TypedDict, total=False):
    passRate: float
    byTag: Dict[str, "ScorerAggregate"]


class ScorerAggregate(_AggregateOptional):
    """One scorer's statistics over the scored records (scorer errors counted apart)."""

    scorer: ScorerId
    scoredCount: int
    errorCount: int
    avg: float
    p50: float
    p95: float
    min: float
    max: float


class _TotalsOptional(TypedDict, total=False):
    tokens: TokenUsage
    costs: List[RunCostSummary]


class EvalTotals(_TotalsOptional):
    targetErrors: int


class _ReportOptional(TypedDict, total=False):
    aborted: bool
    warnings: List[str]


class EvalRunReport(_ReportOptional):
    """One run of an eval set: its records, per-scorer aggregates and totals."""

    schemaVersion: Literal[1]
    evalRunId: str
    startedAtUnixMs: int
    durationMs: int
    evalSet: EvalSetId
    metadata: Dict[str, TraceAttributeValue]
    caseCount: int
    repeats: int
    records: List[EvalRecord]
    aggregates: List[ScorerAggregate]
    totals: EvalTotals


class _ProgressOptional(TypedDict, total=False):
    scorer: str


class EvalProgressEvent(_ProgressOptional):
    """``case_start``, ``case_done``, ``scorer_error`` or ``target_error`` for one sample."""

    type: Literal["case_start", "case_done", "scorer_error", "target_error"]
    caseId: str
    repeat: int


GateMetric = Literal["avg", "p50", "p95", "min", "passRate"]


class _ThresholdOptional(TypedDict, total=False):
    min: float
    max: float
    tag: str


class GateThreshold(_ThresholdOptional):
    scorer: str
    metric: GateMetric


class GateBaseline(TypedDict, total=False):
    maxRegression: float
    perScorer: Dict[str, float]
    allowSetMismatch: bool


class _GatePolicyOptional(TypedDict, total=False):
    maxScorerErrorRate: float
    maxTargetErrorRate: float
    baseline: GateBaseline


class GatePolicy(_GatePolicyOptional):
    """OMA's gate policy (its JSON file's shape): thresholds on aggregates, scorer and target
    health, and regression against a baseline report."""

    schemaVersion: Literal[1]
    thresholds: Sequence[GateThreshold]


class _GateFailureOptional(TypedDict, total=False):
    scorer: str
    metric: str
    tag: str


class GateFailure(_GateFailureOptional):
    kind: Literal["threshold", "regression", "scorer_health", "target_health", "baseline_mismatch", "missing_scorer"]
    actual: float
    limit: float
    message: str


#: Whether the report passes the gate (``"pass"``), why not, and what was skipped.
GateVerdict = TypedDict("GateVerdict", {"pass": bool, "failures": List[GateFailure], "warnings": List[str]})
