"""The trace store contract (OMA's ``TraceStore``): append records, read a run back
materialized, query, delete and apply retention; and :class:`TraceStoreError`, the typed
refusal every store gives for bad input."""

from __future__ import annotations

from typing import Dict, List, Literal, Optional, Protocol, Sequence, TypedDict, Union

from .._types import RunStatusCode
from ._types import SpanEventRecord, SpanKind, TraceAttributeValue, TraceLink, TraceRecord

#: The record schema major a store takes.
TRACE_STORE_SCHEMA_MAJOR = 2

TraceStoreErrorCode = Literal["INVALID_ARGUMENT", "INVALID_CURSOR", "UNSUPPORTED_SCHEMA_VERSION"]


class TraceStoreError(ValueError):
    """A store refused its input: ``code`` (``INVALID_ARGUMENT``, ``INVALID_CURSOR`` or
    ``UNSUPPORTED_SCHEMA_VERSION``), ``field`` (where, e.g. ``records[0].sequence``) and
    OMA's message."""

    def __init__(self, code: TraceStoreErrorCode, message: str, field: Optional[str] = None) -> None:
        super().__init__(message)
        self.name = "TraceStoreError"
        self.code: TraceStoreErrorCode = code
        self.message = message
        self.field = field


class TraceStoreDiagnostic(TypedDict):
    """A record a store kept only once: ``duplicate_span_end`` (a second end of one span) or
    ``record_id_collision`` (a ``recordId`` seen before with another payload)."""

    code: Literal["duplicate_span_end", "record_id_collision"]
    runId: str
    traceId: str
    spanId: str
    message: str


class AppendResult(TypedDict):
    written: int
    deduplicated: int
    diagnostics: List[TraceStoreDiagnostic]


class DeleteResult(TypedDict):
    runsDeleted: int
    recordsDeleted: int
    #: The runs deleted, oldest first.
    runIds: List[str]


class _PageOptional(TypedDict, total=False):
    nextCursor: str


class Page(_PageOptional):
    items: List["RunSummary"]


class _AttemptOptional(TypedDict, total=False):
    rootSpanId: str
    endedAt: str
    durationMs: float
    status: RunStatusCode


class RunAttemptSummary(_AttemptOptional):
    attempt: int
    traceId: str
    startedAt: str
    incomplete: bool


class RunCostSummary(TypedDict):
    amount: float
    currency: str


class _TokensOptional(TypedDict, total=False):
    cache_read_input_tokens: int
    cache_creation_input_tokens: int
    reasoning_output_tokens: int


class RunTokenSummary(_TokensOptional):
    input_tokens: int
    output_tokens: int


class _SummaryOptional(TypedDict, total=False):
    endedAt: str
    durationMs: float
    #: Absent while no run record has ended; never taken for ``ok``.
    status: RunStatusCode
    metadata: Dict[str, TraceAttributeValue]


class RunSummary(_SummaryOptional):
    """One run as a store lists it (times as ISO-8601 text)."""

    schemaVersion: Literal[2]
    runId: str
    attempts: List[RunAttemptSummary]
    startedAt: str
    agents: List[str]
    taskIds: List[str]
    models: List[str]
    providers: List[str]
    tokens: RunTokenSummary
    costs: List[RunCostSummary]
    incomplete: bool


class _SpanOptional(TypedDict, total=False):
    parentSpanId: str
    kind: SpanKind
    name: str
    startUnixMs: int
    endUnixMs: int
    durationMs: int
    status: RunStatusCode


class MaterializedSpan(_SpanOptional):
    traceId: str
    spanId: str
    attributes: Dict[str, TraceAttributeValue]
    links: List[TraceLink]
    events: List[SpanEventRecord]
    incomplete: bool


class _StoredRunOptional(RunSummary, total=False):
    records: List[TraceRecord]


class StoredRun(_StoredRunOptional):
    """One run with its spans (and, when asked, its records in order)."""

    spans: List[MaterializedSpan]


class TraceStore(Protocol):
    """Where records are kept and read back by run. ``append`` is atomic per batch and keeps
    one copy of each ``recordId``; the rest read or delete whole runs.

    The query keywords (OMA's ``TraceQuery``): ``run_id`` (one or several), ``started_after``
    (inclusive) and ``started_before`` (exclusive) as ISO-8601 text, ``status``, ``agent``,
    ``task_id``, ``model``, ``provider`` (lists: a run matches when it has any of them),
    ``limit`` (1 to 500, 50 by default), ``cursor`` (a page's ``nextCursor``) and ``order``
    (``"started_desc"``, the default, or ``"started_asc"``). ``delete`` takes the same but
    ``limit``, ``cursor`` and ``order``. Retention (OMA's ``RetentionPolicy``) deletes runs
    that started more than ``max_age_ms`` ago and all but the newest ``max_runs``; with
    ``statuses``, only among runs that ended with one of them."""

    def append(self, records: Sequence[TraceRecord]) -> AppendResult: ...

    def get_run(self, run_id: str, *, include_records: bool = False) -> Optional[StoredRun]: ...

    def query_runs(self, *, run_id: Union[str, Sequence[str], None] = None, started_after: Optional[str] = None,
                   started_before: Optional[str] = None, status: Optional[Sequence[RunStatusCode]] = None,
                   agent: Optional[Sequence[str]] = None, task_id: Optional[Sequence[str]] = None,
                   model: Optional[Sequence[str]] = None, provider: Optional[Sequence[str]] = None,
                   limit: Optional[int] = None, cursor: Optional[str] = None,
                   order: Optional[Literal["started_desc", "started_asc"]] = None) -> Page: ...

    def delete_run(self, run_id: str) -> DeleteResult: ...

    def delete(self, *, run_id: Union[str, Sequence[str], None] = None, started_after: Optional[str] = None,
               started_before: Optional[str] = None, status: Optional[Sequence[RunStatusCode]] = None,
               agent: Optional[Sequence[str]] = None, task_id: Optional[Sequence[str]] = None,
               model: Optional[Sequence[str]] = None, provider: Optional[Sequence[str]] = None) -> DeleteResult: ...

    def apply_retention(self, *, max_age_ms: Optional[float] = None, max_runs: Optional[int] = None,
                        statuses: Optional[Sequence[RunStatusCode]] = None) -> DeleteResult: ...
