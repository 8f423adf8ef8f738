"""OMA's ``CompositeSink``: one sink that hands every record to several."""

from __future__ import annotations

import threading
import time
from typing import Any, Dict, List, Literal, Optional, Sequence, cast

from ._bounded import run_bounded
from ._types import FlushResult, TraceRecord, TraceSinkStats
from .sink import DiagnosticHandler, DiagnosticMode, DiagnosticReporter, TraceSink, stats_of

#: How long a child's flush or shutdown may take when the caller gives no bound.
DEFAULT_CHILD_TIMEOUT_MS = 30_000


def combine_flush_results(results: Sequence[FlushResult]) -> FlushResult:
    """Several flush results as one: ``ok`` when all are (or there are none), ``timeout`` or
    ``error`` when all are that, else ``partial``; the counts summed."""
    status: Literal["ok", "partial", "timeout", "error"]
    if all(r["status"] == "ok" for r in results):
        status = "ok"
    elif all(r["status"] == "timeout" for r in results):
        status = "timeout"
    elif all(r["status"] == "error" for r in results):
        status = "error"
    else:
        status = "partial"
    return {"status": status, "accepted": sum(r["accepted"] for r in results),
            "exported": sum(r["exported"] for r in results), "dropped": sum(r["dropped"] for r in results),
            "failed": sum(r["failed"] for r in results)}


class CompositeSink:
    """Hands each record to every sink of ``sinks`` in order; one that raises is counted and
    diagnosed (``sink_emit_failed``) and the others still get the record. ``force_flush`` and
    ``shutdown`` run on all children at once, each held to ``timeout_ms`` (30 s by default):
    a child that raises counts as ``error``, one that does not answer in time as ``timeout``."""

    def __init__(self, sinks: Sequence[TraceSink], *, diagnostics: DiagnosticMode = "warn",
                 on_diagnostic: Optional[DiagnosticHandler] = None, diagnostic_interval_ms: Optional[float] = None,
                 sink_name: Optional[str] = None) -> None:
        if isinstance(sinks, (str, bytes)) or not isinstance(sinks, Sequence):
            raise TypeError("sinks must be a list of trace sinks")
        for i, sink in enumerate(sinks):
            if not callable(getattr(sink, "emit", None)):
                raise TypeError(f"sinks[{i}] is not a trace sink (it has no emit method)")
        self._sinks: List[TraceSink] = list(sinks)
        self._diagnostics = DiagnosticReporter(diagnostics=diagnostics, on_diagnostic=on_diagnostic,
                                               diagnostic_interval_ms=diagnostic_interval_ms,
                                               sink_name=sink_name or "CompositeSink")
        self._lock = threading.Lock()
        self._closing = False
        self._emit_failures = 0
        self._shutdown_done = threading.Event()
        self._shutdown_result: Optional[FlushResult] = None

    def emit(self, record: TraceRecord) -> None:
        if self._closing:
            self._diagnostics.report("emit_after_shutdown", "Trace record rejected after composite shutdown began.")
            return
        for sink in self._sinks:
            try:
                sink.emit(record)
            except Exception:  # noqa: BLE001 - one child never stops the others
                with self._lock:
                    self._emit_failures += 1
                self._diagnostics.report("sink_emit_failed", "A child trace sink threw while accepting a record.",
                                         "error")

    def force_flush(self, *, timeout_ms: Optional[float] = None) -> FlushResult:
        return combine_flush_results(self._call_children("flush", timeout_ms))

    def shutdown(self, *, timeout_ms: Optional[float] = None) -> FlushResult:
        with self._lock:
            first = not self._closing
            self._closing = True
        if not first:
            self._shutdown_done.wait()
            assert self._shutdown_result is not None
            return self._shutdown_result
        self._shutdown_result = combine_flush_results(self._call_children("shutdown", timeout_ms))
        self._shutdown_done.set()
        return self._shutdown_result

    def get_stats(self) -> TraceSinkStats:
        stats = [stats_of(sink) for sink in self._sinks]
        last = next((s.get("lastError") for s in reversed(stats) if s.get("lastError")), None)
        queued = sum(s["queuedRecords"] for s in stats)
        out: Dict[str, Any] = {
            "accepted": sum(s["accepted"] for s in stats), "exported": sum(s["exported"] for s in stats),
            "retried": sum(s["retried"] for s in stats), "failed": sum(s["failed"] for s in stats) + self._emit_failures,
            "dropped": sum(s["dropped"] for s in stats), "queuedRecords": queued,
            "queuedBytes": sum(s["queuedBytes"] for s in stats), "queued": queued,
        }
        if last:
            out["lastError"] = out["lastFailureCode"] = last
        return out  # type: ignore[return-value]

    def _call_children(self, operation: Literal["flush", "shutdown"], timeout_ms: Optional[float]) -> List[FlushResult]:
        bound_s = (DEFAULT_CHILD_TIMEOUT_MS if timeout_ms is None else max(0.0, float(timeout_ms))) / 1000
        results: List[Optional[FlushResult]] = [None] * len(self._sinks)

        def child(index: int, sink: TraceSink) -> None:
            call = sink.force_flush if operation == "flush" else sink.shutdown
            outcome = run_bounded(lambda: call(timeout_ms=timeout_ms), bound_s, f"oma-composite-{operation}")
            stats = stats_of(sink)
            answer: Any = outcome[1]
            if outcome[0] == "value" and isinstance(answer, dict) and "status" in answer:
                results[index] = cast(FlushResult, answer)
            elif outcome[0] == "timeout":
                self._diagnostics.report("flush_timeout" if operation == "flush" else "shutdown_failed",
                                         f"A child trace sink {operation} operation timed out.", "error")
                results[index] = {"status": "timeout", "accepted": stats["accepted"], "exported": stats["exported"],
                                  "dropped": stats["dropped"], "failed": stats["failed"]}
            else:
                self._diagnostics.report("export_failed" if operation == "flush" else "shutdown_failed",
                                         f"A child trace sink rejected {operation}.", "error")
                results[index] = {"status": "error", "accepted": stats["accepted"], "exported": stats["exported"],
                                  "dropped": stats["dropped"], "failed": stats["failed"] + 1}

        started = time.monotonic()
        threads = [threading.Thread(target=child, args=(i, s), daemon=True) for i, s in enumerate(self._sinks)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(max(0.0, bound_s + 1 - (time.monotonic() - started)))
        return [r if r is not None else {"status": "timeout", "accepted": 0, "exported": 0, "dropped": 0, "failed": 0}
                for r in results]
