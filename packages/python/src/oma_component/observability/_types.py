"""OMA's observability values as ``TypedDict``s, key for key: the trace records (schema v2) a
sink receives, and what sinks, exporters and stores give back.

Records and results keep OMA's JSON keys (``recordId``, ``queuedRecords``, ...), as every value
of this package does; only options are snake_case keywords.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Dict, List, Literal, Sequence, TypedDict, Union

from .._types import RunStatus, StructuredTraceError

if TYPE_CHECKING:
    from .sink import TraceSink

#: A trace attribute's value: a string, number or boolean, or a list of one of them.
TraceAttributeValue = Union[str, int, float, bool, Sequence[str], Sequence[int], Sequence[float], Sequence[bool]]

#: The operation a span stands for.
SpanKind = Literal["run", "routing", "agent", "task", "llm", "tool", "plan", "consensus", "checkpoint", "callback"]

#: The events a span may carry.
SpanEventName = Literal[
    "retry_scheduled", "budget_exhausted", "first_chunk", "approval_decision", "checkpoint_failed",
    "telemetry_diagnostic", "loop_detected", "stream_chunk", "consensus_verdict", "recovery_decision",
    "plan_revision_applied",
]


class TraceLink(TypedDict):
    """A span's link to another trace's span (``relation``: ``continued_from``, ``depends_on``,
    ``consumed`` or ``delegated_from``)."""

    traceId: str
    spanId: str
    relation: str


class _RecordOptional(TypedDict, total=False):
    parentSpanId: str


class _RecordBase(_RecordOptional):
    schemaVersion: Literal[2]
    recordId: str
    #: Strictly increasing within one ``traceId``.
    sequence: int
    timestampUnixMs: int
    runId: str
    attempt: int
    traceId: str
    spanId: str


class _SpanStartOptional(_RecordBase, total=False):
    links: List[TraceLink]


class SpanStartRecord(_SpanStartOptional):
    """A span began."""

    recordType: Literal["span_start"]
    kind: SpanKind
    name: str
    startUnixMs: int
    attributes: Dict[str, TraceAttributeValue]


class SpanEventRecord(_RecordBase):
    """Something happened within a span."""

    recordType: Literal["span_event"]
    name: SpanEventName
    attributes: Dict[str, TraceAttributeValue]


class _SpanEndOptional(_RecordBase, total=False):
    error: StructuredTraceError
    links: List[TraceLink]


class SpanEndRecord(_SpanEndOptional):
    """A span ended; its ``attributes`` are the span's whole final set, so the record stands
    alone when its start was dropped."""

    recordType: Literal["span_end"]
    kind: SpanKind
    name: str
    startUnixMs: int
    endUnixMs: int
    durationMs: int
    status: RunStatus
    attributes: Dict[str, TraceAttributeValue]


TraceRecord = Union[SpanStartRecord, SpanEventRecord, SpanEndRecord]


class FlushResult(TypedDict):
    """What ``force_flush`` and ``shutdown`` report: ``status`` ``ok``, ``partial`` (some
    records were delivered, some not), ``timeout`` or ``error``, and the sink's counts."""

    status: Literal["ok", "partial", "timeout", "error"]
    accepted: int
    exported: int
    dropped: int
    failed: int


class _ExportResultOptional(TypedDict, total=False):
    retryAfterMs: float
    code: str


class ExportResult(_ExportResultOptional):
    """An exporter's answer for one batch: ``exported`` is how many records at its head were
    delivered; ``retryable`` retries the rest, ``failure`` gives them up, and ``success`` with
    fewer than the batch gives the rest up too."""

    status: Literal["success", "retryable", "failure"]
    exported: int


class _StatsOptional(TypedDict, total=False):
    lastError: str
    #: The same as ``lastError`` (OMA keeps both names).
    lastFailureCode: str


class TraceSinkStats(_StatsOptional):
    """A sink's counters."""

    accepted: int
    exported: int
    retried: int
    failed: int
    dropped: int
    queuedRecords: int
    queuedBytes: int
    #: The same as ``queuedRecords`` (OMA keeps both names).
    queued: int


TelemetryDiagnosticCode = Literal[
    "sink_emit_failed", "queue_full", "record_too_large", "export_failed", "export_timeout",
    "flush_timeout", "shutdown_failed", "emit_after_shutdown",
]


class _DiagnosticOptional(TypedDict, total=False):
    sinkName: str


class TelemetryDiagnostic(_DiagnosticOptional):
    """A problem of the telemetry itself, without any record or error text in it: ``count`` is
    how many times its ``code`` happened so far (reports of one code are rate limited)."""

    code: TelemetryDiagnosticCode
    severity: Literal["warning", "error"]
    count: int
    message: str


class TraceCapturePolicy(TypedDict, total=False):
    """What content a sink may see (``capture=``): prompts, completions, tool input and output
    are left out unless ``"redacted"``; error messages are redacted (or left out with
    ``"code-only"``); ``max_content_chars`` (4096) cuts each string."""

    prompt: Literal["none", "redacted"]
    completion: Literal["none", "redacted"]
    tool_input: Literal["none", "redacted"]
    tool_output: Literal["none", "redacted"]
    error_message: Literal["code-only", "redacted"]
    stack: bool
    stream_events: Literal["none", "first", "all"]
    max_content_chars: int


class ObservabilityResource(TypedDict, total=False):
    """The service the records come from."""

    service_name: str
    service_version: str
    deployment_environment: str
    release: str


class _ObservabilityOptional(TypedDict, total=False):
    capture: TraceCapturePolicy
    resource: ObservabilityResource
    on_diagnostic: Callable[[TelemetryDiagnostic], None]


class ObservabilityConfig(_ObservabilityOptional):
    """OMA's ``ObservabilityConfig`` (``observability=`` of :func:`run_agent`): every run makes
    OMA's trace records, processed by ``capture``, and hands them to each of ``sinks``;
    ``on_diagnostic`` gets the delivery's own problems (a sink that raises, a full queue);
    ``resource`` is kept, as in OMA, for exporters that describe the service."""

    sinks: Sequence["TraceSink"]
