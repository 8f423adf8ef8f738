"""OMA's ``LegacyCallbackTraceSink``: the bridge from the trace records to the older ``onTrace``
callback, which receives OMA's seven legacy trace events (``llm_call``, ``tool_call``,
``agent``, ...) with their exact shape.

A record that completes a legacy event carries it (records the package makes from a run do);
the sink calls ``callback(event)`` with it and ignores every other record. A callback may be
``async def``: its coroutine is awaited on the telemetry loop and ``force_flush`` waits for it.
"""

from __future__ import annotations

import concurrent.futures
import inspect
import threading
from typing import Any, Awaitable, Callable, Dict, Literal, Optional, Union

from .._types import TraceEvent
from ._bounded import schedule
from ._types import FlushResult, TraceRecord, TraceSinkStats
from .sink import DiagnosticHandler, DiagnosticMode, DiagnosticReporter, flush_result

LegacyCallback = Callable[[TraceEvent], Union[None, Awaitable[None]]]


class LegacyRecord(Dict[str, Any]):
    """A trace record (a plain dict to everything else) that carries the legacy trace event it
    completes, for :class:`LegacyCallbackTraceSink`."""

    __slots__ = ("legacy_event",)
    legacy_event: Optional[TraceEvent]


def attach_legacy_trace_event(record: TraceRecord, event: TraceEvent) -> TraceRecord:
    """``record`` carrying ``event`` (a copy of the record as a :class:`LegacyRecord`)."""
    out = LegacyRecord(record)
    out.legacy_event = event
    return out  # type: ignore[return-value]


class LegacyCallbackTraceSink:
    """Calls ``callback`` with the legacy trace event each record carries (see the module).
    A callback that raises, or whose coroutine raises, is counted as failed and diagnosed;
    the run never sees it."""

    def __init__(self, callback: LegacyCallback, *, diagnostics: DiagnosticMode = "warn",
                 on_diagnostic: Optional[DiagnosticHandler] = None, diagnostic_interval_ms: Optional[float] = None,
                 sink_name: Optional[str] = None) -> None:
        if not callable(callback):
            raise TypeError("callback must be a function of a trace event")
        self._callback = callback
        self._diagnostics = DiagnosticReporter(diagnostics=diagnostics, on_diagnostic=on_diagnostic,
                                               diagnostic_interval_ms=diagnostic_interval_ms,
                                               sink_name=sink_name or "LegacyCallbackTraceSink")
        self._lock = threading.Lock()
        self._pending: Dict[int, "concurrent.futures.Future[Any]"] = {}
        self._next_id = 0
        self._closing = False
        self._counts = {"accepted": 0, "exported": 0, "failed": 0, "dropped": 0}
        self._shutdown_done = threading.Event()
        self._shutdown_result: Optional[FlushResult] = None

    def emit(self, record: TraceRecord) -> None:
        event = getattr(record, "legacy_event", None)
        if event is None:
            return
        if self._closing:
            with self._lock:
                self._counts["dropped"] += 1
            self._diagnostics.report("emit_after_shutdown", "Legacy trace event rejected after sink shutdown began.")
            return
        with self._lock:
            self._next_id += 1
            ident = self._next_id
            self._counts["accepted"] += 1
        try:
            answer = self._callback(event)
        except Exception:  # noqa: BLE001
            with self._lock:
                self._counts["failed"] += 1
            self._diagnostics.report("sink_emit_failed", "Legacy trace callback threw synchronously.", "error")
            return
        if not inspect.isawaitable(answer):
            with self._lock:
                self._counts["exported"] += 1
            return
        future = schedule(answer)
        with self._lock:
            self._pending[ident] = future
        future.add_done_callback(lambda f: self._settled(ident, f))

    def _settled(self, ident: int, future: "concurrent.futures.Future[Any]") -> None:
        failed = future.cancelled() or future.exception() is not None
        with self._lock:
            self._pending.pop(ident, None)
            self._counts["failed" if failed else "exported"] += 1
        if failed:
            self._diagnostics.report("export_failed", "Legacy trace callback rejected.", "error")

    def force_flush(self, *, timeout_ms: Optional[float] = None) -> FlushResult:
        """Waits for the callbacks' coroutines started before the call (30 s by default)."""
        with self._lock:
            watermark = self._next_id
            work = [f for i, f in self._pending.items() if i <= watermark]
        if work:
            bound = (30_000 if timeout_ms is None else max(0.0, float(timeout_ms))) / 1000
            _, not_done = concurrent.futures.wait(work, timeout=bound)
            if not_done:
                self._diagnostics.report("flush_timeout", "Legacy trace callback flush timed out.")
                return flush_result(self.get_stats(), "timeout")
        return flush_result(self.get_stats(), self._status())

    def shutdown(self, *, timeout_ms: Optional[float] = None) -> FlushResult:
        with self._lock:
            first = not self._closing
            self._closing = True
        if not first:
            self._shutdown_done.wait()
            assert self._shutdown_result is not None
            return self._shutdown_result
        self._shutdown_result = self.force_flush(timeout_ms=timeout_ms)
        self._shutdown_done.set()
        return self._shutdown_result

    def get_stats(self) -> TraceSinkStats:
        with self._lock:
            counts = dict(self._counts)
            queued = len(self._pending)
        stats: Dict[str, Any] = {**counts, "retried": 0, "queuedRecords": queued, "queuedBytes": 0, "queued": queued}
        if counts["failed"] > 0:
            stats["lastError"] = stats["lastFailureCode"] = "LEGACY_CALLBACK_FAILED"
        return stats  # type: ignore[return-value]

    def _status(self) -> Literal["ok", "partial", "error"]:
        with self._lock:
            counts = dict(self._counts)
        if counts["failed"] == 0 and counts["dropped"] == 0:
            return "ok"
        return "partial" if counts["exported"] > 0 else "error"
