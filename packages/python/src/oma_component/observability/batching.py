"""OMA's ``BatchingTraceSink``: a bounded queue of records exported in batches by a worker
thread, with OMA's limits, priorities, retries and diagnostics.

``emit`` only measures the record and queues it. When the queue would exceed its record or
byte limit, the oldest record of the lowest priority (stream chunks, then other events, then
span starts; span ends last) that is not above the new record's gives way; when none may, the
new record is dropped. A batch goes out when ``max_batch_records`` are queued, or
``scheduled_delay_ms`` after the first record of a quiet spell, or at a flush. Each export is
bounded by ``export_timeout_ms``; a retryable answer (or a timeout, or an exception) retries
what was not delivered, ``max_retries`` times with backoff and jitter; then the records are
counted as failed. Nothing here ever raises into the run or blocks it.
"""

from __future__ import annotations

import json
import math
import random
import threading
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Literal, Mapping, Optional, Tuple

from .._watermark import Watermark
from ._bounded import Abandoned, run_bounded
from ._types import ExportResult, FlushResult, TraceRecord, TraceSinkStats
from .sink import DiagnosticHandler, DiagnosticMode, DiagnosticReporter, TraceExporter, flush_result

#: Export calls left running past ``export_timeout_ms`` that a sink lets stay alive at once;
#: while that many have not returned, a batch's export counts as timed out without a new call
#: (each holds a thread: an exporter that never returns must not take one per attempt).
MAX_ABANDONED_EXPORTS = 4

#: OMA's defaults, by option (milliseconds and bytes).
DEFAULT_BATCHING_OPTIONS: Mapping[str, float] = {
    "max_queue_records": 2_048,
    "max_queue_bytes": 16 * 1024 * 1024,
    "max_record_bytes": 256 * 1024,
    "max_batch_records": 512,
    "scheduled_delay_ms": 5_000,
    "export_timeout_ms": 30_000,
    "max_retries": 3,
    "retry_delay_ms": 1_000,
    "retry_backoff": 2,
    "max_retry_delay_ms": 30_000,
}


def _number(name: str, value: Any, minimum: float, integer: bool) -> float:
    if value is None:
        return DEFAULT_BATCHING_OPTIONS[name]
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value) and value >= minimum
    if ok and integer and value != int(value):
        ok = False
    if not ok:
        kind = "an integer" if integer else "a number"
        raise ValueError(f"{name} must be {kind} >= {minimum:g}, got {value!r}")
    return int(value) if integer else float(value)


def record_priority(record: Mapping[str, Any]) -> int:
    """What survives a full queue longest: span ends, then starts, then events, stream chunks
    least."""
    kind = record.get("recordType")
    if kind == "span_end":
        return 3
    if kind == "span_start":
        return 2
    return 0 if record.get("name") == "stream_chunk" else 1


def record_bytes(record: Any) -> Optional[int]:
    """The record's size as compact UTF-8 JSON, or ``None`` when it is not JSON."""
    try:
        return len(json.dumps(record, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8"))
    except (TypeError, ValueError, RecursionError):
        return None


def normalize_export_result(value: Any) -> ExportResult:
    """An exporter's answer as OMA reads it: anything but ``{"status", "exported"}`` with a
    known status and a finite count is a failure coded ``INVALID_EXPORT_RESULT``."""
    invalid: ExportResult = {"status": "failure", "exported": 0, "code": "INVALID_EXPORT_RESULT"}
    if not isinstance(value, Mapping):
        return invalid
    status, exported = value.get("status"), value.get("exported")
    if status not in ("success", "retryable", "failure"):
        return invalid
    if isinstance(exported, bool) or not isinstance(exported, (int, float)) or not math.isfinite(exported):
        return invalid
    result: ExportResult = {"status": status, "exported": exported}  # type: ignore[typeddict-item]
    retry_after = value.get("retryAfterMs")
    if not isinstance(retry_after, bool) and isinstance(retry_after, (int, float)) and math.isfinite(retry_after):
        result["retryAfterMs"] = max(0, retry_after)
    code = value.get("code")
    if isinstance(code, str):
        result["code"] = code[:128]
    return result


@dataclass
class _Entry:
    id: int
    record: TraceRecord
    bytes: int
    priority: int


class BatchingTraceSink:
    """A :class:`TraceSink` that exports records in batches through ``exporter`` (a
    :class:`TraceExporter`), from a worker thread of its own.

    Options (OMA's, snake_case; ``None`` keeps OMA's default, a value out of range raises
    ``ValueError`` naming it): ``max_queue_records`` (2048), ``max_queue_bytes`` (16 MiB),
    ``max_record_bytes`` (256 KiB; a larger record is dropped), ``max_batch_records`` (512),
    ``scheduled_delay_ms`` (5000), ``export_timeout_ms`` (30000), ``max_retries`` (3, after the
    first attempt), ``retry_delay_ms`` (1000), ``retry_backoff`` (2), ``max_retry_delay_ms``
    (30000), ``retry_jitter`` (``True``: each delay drawn between half and all of it);
    ``diagnostics``, ``on_diagnostic``, ``diagnostic_interval_ms`` and ``sink_name`` as for
    :class:`DiagnosticReporter`.
    """

    def __init__(
        self,
        exporter: TraceExporter,
        *,
        max_queue_records: Optional[int] = None,
        max_queue_bytes: Optional[int] = None,
        max_record_bytes: Optional[int] = None,
        max_batch_records: Optional[int] = None,
        scheduled_delay_ms: Optional[float] = None,
        export_timeout_ms: Optional[float] = None,
        max_retries: Optional[int] = None,
        retry_delay_ms: Optional[float] = None,
        retry_backoff: Optional[float] = None,
        max_retry_delay_ms: Optional[float] = None,
        retry_jitter: bool = True,
        diagnostics: DiagnosticMode = "warn",
        on_diagnostic: Optional[DiagnosticHandler] = None,
        diagnostic_interval_ms: Optional[float] = None,
        sink_name: Optional[str] = None,
    ) -> None:
        if not callable(getattr(exporter, "export", None)):
            raise TypeError("exporter must have an export(records, signal) method")
        self._exporter = exporter
        self._max_queue_records = int(_number("max_queue_records", max_queue_records, 1, True))
        self._max_queue_bytes = int(_number("max_queue_bytes", max_queue_bytes, 1, True))
        self._max_record_bytes = int(_number("max_record_bytes", max_record_bytes, 1, True))
        self._max_batch_records = int(_number("max_batch_records", max_batch_records, 1, True))
        self._scheduled_delay_s = _number("scheduled_delay_ms", scheduled_delay_ms, 1, False) / 1000
        self._export_timeout_ms = _number("export_timeout_ms", export_timeout_ms, 1, False)
        self._max_retries = int(_number("max_retries", max_retries, 0, True))
        self._retry_delay_ms = _number("retry_delay_ms", retry_delay_ms, 0, False)
        self._retry_backoff = _number("retry_backoff", retry_backoff, 1, False)
        self._max_retry_delay_ms = _number("max_retry_delay_ms", max_retry_delay_ms, 1, False)
        self._retry_jitter = bool(retry_jitter)
        self._diagnostics = DiagnosticReporter(diagnostics=diagnostics, on_diagnostic=on_diagnostic,
                                               diagnostic_interval_ms=diagnostic_interval_ms,
                                               sink_name=sink_name or "BatchingTraceSink")
        self._cond = threading.Condition()
        self._queue: List[_Entry] = []
        self._stats: Dict[str, Any] = {"accepted": 0, "exported": 0, "retried": 0, "failed": 0, "dropped": 0,
                                       "queuedRecords": 0, "queuedBytes": 0}
        self._next_id = 0
        self._settled = Watermark()
        self._due: Optional[float] = None     # when the scheduled export is due (monotonic seconds)
        self._wake = False                    # an export is wanted now
        self._busy = False                    # the worker is exporting
        self._flushing = 0                    # callers waiting in force_flush: drain on until they are served
        self._worker: Optional[threading.Thread] = None
        self._closing = False
        self._shutdown_done = threading.Event()
        self._shutdown_result: Optional[FlushResult] = None
        self._shutdown_started = False
        self._exporter_flush: Optional[threading.Event] = None
        self._exporter_flush_status: Literal["ok", "timeout", "error"] = "ok"
        self._abandoned = Abandoned()

    # -- the sink ---------------------------------------------------------------------------

    def emit(self, record: TraceRecord) -> None:
        """Queues ``record`` (never blocks, never raises)."""
        try:
            self._emit(record)
        except Exception:  # noqa: BLE001 - the run must never see a sink fail
            pass

    def _emit(self, record: TraceRecord) -> None:
        if self._closing:
            with self._cond:
                self._stats["dropped"] += 1
            self._diagnostics.report("emit_after_shutdown", "Trace record rejected after sink shutdown began.")
            return
        size = record_bytes(record)
        if size is None or size > self._max_record_bytes:
            with self._cond:
                self._stats["dropped"] += 1
            self._diagnostics.report("record_too_large",
                                     "Trace record exceeded the configured size limit or was not serializable.")
            return
        incoming = _Entry(0, record, size, record_priority(record))
        displaced = 0
        with self._cond:
            room, displaced = self._make_room(incoming)
            if room:
                self._next_id += 1
                incoming.id = self._next_id
                self._stats["accepted"] += 1
                self._queue.append(incoming)
                self._stats["queuedRecords"] += 1
                self._stats["queuedBytes"] += size
                if len(self._queue) >= self._max_batch_records:
                    self._wake = True
                elif self._due is None and not self._busy:
                    self._due = time.monotonic() + self._scheduled_delay_s
                self._ensure_worker()
                self._cond.notify_all()
            else:
                self._stats["dropped"] += 1
        for _ in range(displaced):
            self._diagnostics.report("queue_full",
                                     "A lower-priority queued trace record was dropped to preserve bounded memory.")
        if not room:
            self._diagnostics.report("queue_full", "Trace record dropped because the bounded queue is full.")

    def _make_room(self, incoming: _Entry) -> "tuple[bool, int]":
        displaced = 0
        while (self._stats["queuedRecords"] + 1 > self._max_queue_records
               or self._stats["queuedBytes"] + incoming.bytes > self._max_queue_bytes):
            index, lowest = -1, math.inf
            for i, entry in enumerate(self._queue):
                if entry.priority < lowest:
                    index, lowest = i, entry.priority
            if index < 0 or lowest > incoming.priority:
                return False, displaced
            dropped = self._queue.pop(index)
            self._stats["queuedRecords"] -= 1
            self._stats["queuedBytes"] -= dropped.bytes
            self._stats["dropped"] += 1
            self._settle(dropped.id)
            displaced += 1
        return True, displaced

    def force_flush(self, *, timeout_ms: Optional[float] = None) -> FlushResult:
        """Exports what was accepted before the call and then the exporter's own
        ``force_flush``, waiting at most ``timeout_ms`` (``export_timeout_ms`` by default)."""
        started = time.monotonic()
        timeout_s = (self._export_timeout_ms if timeout_ms is None else max(0.0, float(timeout_ms))) / 1000
        with self._cond:
            target = self._next_id
            completed = target <= self._settled.through
            if not completed:
                self._due = None
                self._wake = True
                self._flushing += 1
                self._ensure_worker()
                self._cond.notify_all()
                deadline = started + timeout_s
                try:
                    while target > self._settled.through:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            break
                        self._cond.wait(left)
                finally:
                    self._flushing -= 1
                completed = target <= self._settled.through
        stats = self.get_stats()
        if not completed:
            self._diagnostics.report("flush_timeout", "Trace flush timed out before its acceptance watermark settled.")
            return flush_result(stats, "timeout")
        exporter_status = self._flush_exporter(max(0.0, timeout_s - (time.monotonic() - started)))
        if exporter_status == "timeout":
            self._diagnostics.report("flush_timeout", "Trace exporter forceFlush timed out.")
            return flush_result(self.get_stats(), "timeout")
        if exporter_status == "error":
            with self._cond:
                self._stats["lastError"] = "EXPORTER_FLUSH_FAILED"
            self._diagnostics.report("export_failed", "Trace exporter forceFlush failed.", "error")
            return flush_result(self.get_stats(), "partial" if stats["exported"] > 0 else "error")
        return flush_result(stats, self._result_status(stats))

    def shutdown(self, *, timeout_ms: Optional[float] = None) -> FlushResult:
        """Refuses records from now on, flushes what was accepted, then calls the exporter's
        ``shutdown``, all within ``timeout_ms``. A second call gives the first one's result."""
        with self._cond:
            first = not self._shutdown_started
            self._shutdown_started = True
            self._closing = True
            self._due = None
            self._cond.notify_all()
        if not first:
            self._shutdown_done.wait()
            assert self._shutdown_result is not None
            return self._shutdown_result
        try:
            result = self._perform_shutdown(timeout_ms)
        except Exception:  # noqa: BLE001
            result = flush_result(self.get_stats(), "error")
        self._shutdown_result = result
        self._shutdown_done.set()
        return result

    def get_stats(self) -> TraceSinkStats:
        """The sink's counters now."""
        with self._cond:
            stats: Dict[str, Any] = dict(self._stats)
        stats["queued"] = stats["queuedRecords"]
        if stats.get("lastError"):
            stats["lastFailureCode"] = stats["lastError"]
        return stats  # type: ignore[return-value]

    # -- the worker -------------------------------------------------------------------------

    def _ensure_worker(self) -> None:
        if self._worker is None:
            self._worker = threading.Thread(target=self._run, name="oma-batching-trace-sink", daemon=True)
            self._worker.start()

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._queue and (self._wake or self._closing or self._flushing):
                        break
                    if self._queue and self._due is not None:
                        left = self._due - time.monotonic()
                        if left <= 0:
                            break
                        self._cond.wait(left)
                    else:
                        if self._queue and self._due is None:
                            self._due = time.monotonic() + self._scheduled_delay_s
                            continue
                        self._cond.wait()
                self._due = None
                self._busy = True
            try:
                self._drain()
            finally:
                with self._cond:
                    self._busy = False
                    if self._queue and not (self._wake or self._closing or self._flushing) and self._due is None:
                        self._due = time.monotonic() + self._scheduled_delay_s

    def _drain(self) -> None:
        while True:
            with self._cond:
                if not self._queue:
                    return
                self._wake = False
                batch = self._queue[: self._max_batch_records]
                del self._queue[: self._max_batch_records]
            self._export_batch(batch)
            with self._cond:
                if (not self._wake and not self._closing and not self._flushing
                        and len(self._queue) < self._max_batch_records):
                    return

    def _export_batch(self, batch: List[_Entry]) -> None:
        remaining = batch
        retry = 0
        while remaining:
            records = [entry.record for entry in remaining]
            signal = threading.Event()
            if self._abandoned.count >= MAX_ABANDONED_EXPORTS:
                outcome: Tuple[str, Any] = ("timeout", None)
            else:
                outcome = run_bounded(lambda: self._exporter.export(records, signal), self._export_timeout_ms / 1000,
                                      "oma-trace-export", self._abandoned)
            result: ExportResult
            if outcome[0] == "timeout":
                signal.set()
                result = {"status": "retryable", "exported": 0, "code": "EXPORT_TIMEOUT"}
                self._diagnostics.report("export_timeout", "Trace exporter exceeded its configured timeout.", "error")
            elif outcome[0] == "error":
                result = {"status": "retryable", "exported": 0, "code": "EXPORT_REJECTED"}
            else:
                result = normalize_export_result(outcome[1])
            delivered = min(len(remaining), max(0, math.floor(result["exported"])))
            with self._cond:
                for entry in remaining[:delivered]:
                    self._stats["exported"] += 1
                    self._release(entry)
                remaining = remaining[delivered:]
                if not remaining:
                    return
                if result["status"] != "success":
                    self._stats["lastError"] = result.get("code") or (
                        "EXPORT_RETRYABLE" if result["status"] == "retryable" else "EXPORT_FAILED")
                again = result["status"] == "retryable" and retry < self._max_retries
                if again:
                    retry += 1
                    self._stats["retried"] += len(remaining)
                else:
                    code = result.get("code") or ("PARTIAL_EXPORT" if result["status"] == "success" else "EXPORT_FAILED")
                    self._stats["lastError"] = code
                    for entry in remaining:
                        self._stats["failed"] += 1
                        self._release(entry)
            if not again:
                self._diagnostics.report("export_failed",
                                         "Trace exporter permanently failed to deliver one or more records.", "error")
                return
            nominal = result.get("retryAfterMs")
            if nominal is None:
                nominal = min(self._retry_delay_ms * self._retry_backoff ** (retry - 1), self._max_retry_delay_ms)
            delay = math.floor(nominal / 2 + random.random() * nominal / 2) if self._retry_jitter else nominal
            self._diagnostics.report("export_failed", "Trace exporter reported a retryable delivery failure.")
            if delay > 0:
                time.sleep(delay / 1000)

    def _release(self, entry: _Entry) -> None:
        self._stats["queuedRecords"] -= 1
        self._stats["queuedBytes"] -= entry.bytes
        self._settle(entry.id)

    def _settle(self, entry_id: int) -> None:
        self._settled.settle(entry_id)
        self._cond.notify_all()

    # -- flush and shutdown -----------------------------------------------------------------

    def _result_status(self, stats: TraceSinkStats) -> Literal["ok", "partial", "error"]:
        if stats["failed"] > 0 or stats["dropped"] > 0:
            return "partial" if stats["exported"] > 0 else "error"
        return "ok"

    def _flush_exporter(self, timeout_s: float) -> Literal["ok", "timeout", "error"]:
        flush = getattr(self._exporter, "force_flush", None)
        if not callable(flush):
            return "ok"
        with self._cond:
            running = self._exporter_flush
            if running is None:
                running = self._exporter_flush = threading.Event()
                mine = True
            else:
                mine = False
        if not mine:
            return self._exporter_flush_status if running.wait(timeout_s) else "timeout"
        signal = threading.Event()
        try:
            outcome = run_bounded(lambda: flush(signal), timeout_s, "oma-trace-exporter-flush")
            if outcome[0] == "timeout":
                signal.set()
                status: Literal["ok", "timeout", "error"] = "timeout"
            elif outcome[0] == "error":
                status = "error"
            else:
                answer = outcome[1]
                status = "ok" if isinstance(answer, Mapping) and answer.get("status") == "success" else "error"
        finally:
            with self._cond:
                self._exporter_flush = None
        self._exporter_flush_status = status
        running.set()
        return status

    def _perform_shutdown(self, timeout_ms: Optional[float]) -> FlushResult:
        started = time.monotonic()
        total_ms = self._export_timeout_ms if timeout_ms is None else max(0.0, float(timeout_ms))
        flushed = self.force_flush(timeout_ms=total_ms)
        if flushed["status"] == "timeout":
            return flushed
        shutdown = getattr(self._exporter, "shutdown", None)
        if not callable(shutdown):
            return flushed
        signal = threading.Event()
        left_s = max(0.0, total_ms / 1000 - (time.monotonic() - started))
        outcome = run_bounded(lambda: shutdown(signal), left_s, "oma-trace-exporter-shutdown")
        if outcome[0] == "timeout":
            signal.set()
            with self._cond:
                self._stats["lastError"] = "SHUTDOWN_TIMEOUT"
            self._diagnostics.report("shutdown_failed", "Trace exporter shutdown timed out.", "error")
            return flush_result(self.get_stats(), "timeout")
        failed_status: Literal["error", "partial"] = "error" if flushed["status"] == "ok" else "partial"
        if outcome[0] == "error":
            with self._cond:
                self._stats["lastError"] = "SHUTDOWN_REJECTED"
            self._diagnostics.report("shutdown_failed", "Trace exporter shutdown rejected.", "error")
            return flush_result(self.get_stats(), failed_status)
        answer = outcome[1]
        if not isinstance(answer, Mapping) or answer.get("status") != "success":
            code = answer.get("code") if isinstance(answer, Mapping) else None
            with self._cond:
                self._stats["lastError"] = code if isinstance(code, str) and code else "SHUTDOWN_FAILED"
            self._diagnostics.report("shutdown_failed", "Trace exporter shutdown failed.", "error")
            return flush_result(self.get_stats(), failed_status)
        return flushed
