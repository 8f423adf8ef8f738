"""The sink protocol (OMA's ``TraceSink`` and ``TraceExporter``) and the diagnostics every
sink of this package reports through.

A sink's ``emit`` is called on the run's thread for every record and must return at once
without raising: the sinks here only queue or hand on, and what they call of yours (filters,
exporters, callbacks) is fenced off so that its failure, slowness or hang never reaches the
run. ``force_flush`` and ``shutdown`` block their caller until delivery settles or the time
bound passes; from asyncio code call them with ``await asyncio.to_thread(sink.force_flush)``.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Awaitable, Callable, Dict, Literal, Optional, Protocol, Sequence, Union, runtime_checkable

from ._types import ExportResult, FlushResult, TelemetryDiagnostic, TelemetryDiagnosticCode, TraceRecord, TraceSinkStats

#: Where ``diagnostics="warn"`` (the default) writes a diagnostic nobody else takes.
logger = logging.getLogger("oma_component.observability")

DiagnosticMode = Literal["warn", "silent"]
DiagnosticHandler = Callable[[TelemetryDiagnostic], None]


@runtime_checkable
class TraceSink(Protocol):
    """Takes the trace records of runs. ``emit`` accepts one record without blocking and
    without raising; ``force_flush`` delivers what was accepted before it was called;
    ``shutdown`` flushes, then refuses later records (idempotent). A sink may also have
    ``get_stats()`` giving :class:`TraceSinkStats`."""

    def emit(self, record: TraceRecord) -> None: ...

    def force_flush(self, *, timeout_ms: Optional[float] = None) -> FlushResult: ...

    def shutdown(self, *, timeout_ms: Optional[float] = None) -> FlushResult: ...


class TraceExporter(Protocol):
    """Delivers batches of records somewhere (a store, a collector, a file). ``export`` returns
    an :class:`ExportResult` (or, ``async def``, awaits one); ``signal`` is set when the
    sink stopped waiting (the export timed out), so a long export may give up. ``force_flush``
    and ``shutdown`` are optional and take the same signal."""

    def export(self, records: Sequence[TraceRecord], signal: threading.Event) -> Union[ExportResult, Awaitable[ExportResult]]: ...


def empty_trace_sink_stats() -> TraceSinkStats:
    """A sink's counters before anything happened."""
    return {"accepted": 0, "exported": 0, "retried": 0, "failed": 0, "dropped": 0,
            "queuedRecords": 0, "queuedBytes": 0, "queued": 0}


def stats_of(sink: Any) -> TraceSinkStats:
    """``sink.get_stats()``, or empty counters when it has none or it raises."""
    try:
        getter = getattr(sink, "get_stats", None)
        if callable(getter):
            stats = getter()
            if isinstance(stats, dict):
                return stats  # type: ignore[return-value]
    except Exception:  # noqa: BLE001 - a sink's counters are telemetry
        pass
    return empty_trace_sink_stats()


def flush_result(stats: TraceSinkStats, status: Literal["ok", "partial", "timeout", "error"]) -> FlushResult:
    """A flush result with ``stats``' counts."""
    return {"status": status, "accepted": stats["accepted"], "exported": stats["exported"],
            "dropped": stats["dropped"], "failed": stats["failed"]}


def check_diagnostics(diagnostics: str, interval_ms: Optional[float]) -> None:
    """Refuses a diagnostics mode or interval that is not one."""
    if diagnostics not in ("warn", "silent"):
        raise ValueError(f"diagnostics must be 'warn' or 'silent', got {diagnostics!r}")
    if interval_ms is not None and (isinstance(interval_ms, bool) or not isinstance(interval_ms, (int, float))
                                    or not interval_ms >= 0):
        raise ValueError(f"diagnostic_interval_ms must be a number >= 0, got {interval_ms!r}")


class DiagnosticReporter:
    """Counts telemetry problems by code and reports them, at most once per code in each
    ``interval_ms`` (60 s by default), to ``on_diagnostic``, else (unless ``diagnostics`` is
    ``"silent"``) as a warning on the ``oma_component.observability`` logger. A diagnostic
    holds a fixed message and no record or error text; a handler that raises is ignored."""

    def __init__(self, *, diagnostics: DiagnosticMode = "warn", on_diagnostic: Optional[DiagnosticHandler] = None,
                 diagnostic_interval_ms: Optional[float] = None, sink_name: Optional[str] = None) -> None:
        check_diagnostics(diagnostics, diagnostic_interval_ms)
        self._mode = diagnostics
        self._handler = on_diagnostic
        self._interval_s = (60_000 if diagnostic_interval_ms is None else diagnostic_interval_ms) / 1000
        self._sink_name = sink_name
        self._counts: Dict[str, int] = {}
        self._last: Dict[str, float] = {}
        self._lock = threading.Lock()

    def report(self, code: TelemetryDiagnosticCode, message: str,
               severity: Literal["warning", "error"] = "warning") -> None:
        with self._lock:
            count = self._counts.get(code, 0) + 1
            self._counts[code] = count
            now = time.monotonic()
            last = self._last.get(code)
            if last is not None and now - last < self._interval_s:
                return
            self._last[code] = now
        diagnostic: TelemetryDiagnostic = {"code": code, "severity": severity, "count": count, "message": message}
        if self._sink_name:
            diagnostic["sinkName"] = self._sink_name
        try:
            if self._handler is not None:
                self._handler(diagnostic)
            elif self._mode != "silent":
                logger.warning("[open-multi-agent observability] %s: %s", code, message)
        except Exception:  # noqa: BLE001 - a diagnostic handler is telemetry too: never raise or recurse
            pass
