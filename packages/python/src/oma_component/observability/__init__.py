"""OMA's observability (``@open-multi-agent/core/observability``) in Python: the trace sinks a
run's records go to, the exporters and stores behind them.

- :class:`TraceSink` is the protocol: ``emit(record)`` (never blocks, never raises),
  ``force_flush(timeout_ms=)``, ``shutdown(timeout_ms=)``, and optionally ``get_stats()``.
- :class:`BatchingTraceSink` queues records (bounded, OMA's limits) and hands batches to a
  :class:`TraceExporter` from a worker thread, with retries, time bounds and diagnostics.
- :class:`CompositeSink` fans records out; :class:`FilteringSink` keeps what a predicate
  accepts; :class:`SensitiveDataProcessor` is the privacy boundary in front of a sink;
  :class:`LegacyCallbackTraceSink` hands OMA's legacy trace events to an ``on_trace`` style
  callback.
- :class:`TraceStoreExporter` exports into a :class:`TraceStore`: :class:`InMemoryTraceStore`
  here, ``FileTraceStore`` in :mod:`oma_component.observability.file`; :func:`materialize_run`
  reads a run's records as a stored run and :func:`build_execution_receipt` states what a run
  did (both the component's rules).

Records, results and counters are dicts with OMA's JSON keys; options are snake_case keywords.
"""

from ._types import (
    ExportResult,
    FlushResult,
    ObservabilityConfig,
    ObservabilityResource,
    SpanEndRecord,
    SpanEventName,
    SpanEventRecord,
    SpanKind,
    SpanStartRecord,
    TelemetryDiagnostic,
    TelemetryDiagnosticCode,
    TraceAttributeValue,
    TraceCapturePolicy,
    TraceLink,
    TraceRecord,
    TraceSinkStats,
)
from .batching import DEFAULT_BATCHING_OPTIONS, BatchingTraceSink
from .composite import CompositeSink
from .legacy import LegacyCallbackTraceSink
from .materialize import build_execution_receipt, materialize_run
from .memory_store import InMemoryTraceStore
from .processors import FilteringSink, SensitiveDataProcessor, TraceFilter
from .sink import DiagnosticMode, DiagnosticReporter, TraceExporter, TraceSink, empty_trace_sink_stats
from .store import (
    TRACE_STORE_SCHEMA_MAJOR,
    AppendResult,
    DeleteResult,
    MaterializedSpan,
    Page,
    RunAttemptSummary,
    RunCostSummary,
    RunSummary,
    RunTokenSummary,
    StoredRun,
    TraceStore,
    TraceStoreDiagnostic,
    TraceStoreError,
    TraceStoreErrorCode,
)
from .store_exporter import TraceStoreExporter

__all__ = [
    "TraceSink", "TraceExporter", "BatchingTraceSink", "DEFAULT_BATCHING_OPTIONS", "CompositeSink", "FilteringSink",
    "SensitiveDataProcessor", "LegacyCallbackTraceSink", "DiagnosticReporter", "DiagnosticMode",
    "empty_trace_sink_stats", "TraceFilter", "TraceStoreExporter", "TraceStore", "TraceStoreError",
    "TRACE_STORE_SCHEMA_MAJOR", "InMemoryTraceStore", "materialize_run",
    "build_execution_receipt",
    "ExportResult", "FlushResult", "ObservabilityConfig", "ObservabilityResource", "SpanEndRecord", "SpanEventName", "SpanEventRecord",
    "SpanKind", "SpanStartRecord", "TelemetryDiagnostic", "TelemetryDiagnosticCode", "TraceAttributeValue",
    "TraceCapturePolicy", "TraceLink", "TraceRecord", "TraceSinkStats",
    "AppendResult", "DeleteResult", "MaterializedSpan", "Page", "RunAttemptSummary", "RunCostSummary", "RunSummary",
    "RunTokenSummary", "StoredRun", "TraceStoreDiagnostic", "TraceStoreErrorCode",
]
