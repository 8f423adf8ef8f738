"""A run's trace records handed to the sinks of ``observability=`` (OMA's ``observability:
{sinks}``): the host side of the core's records.

The core makes the records of a run (already processed by the run's capture policy, as OMA's
``SensitiveDataProcessor`` would hand them to a sink) and hands them out as steps; this module
gives each record to every sink. OMA calls ``emit`` on the run's own path and trusts it to
return at once; here each sink has a lane of its own, a bounded queue drained by a thread, so
that a sink whose ``emit`` raises, blocks or is slow never fails or holds the run, and never
holds the other sinks:

- a lane holds at most OMA's queue limits (2048 records, 16 MiB of record JSON); a record
  that does not fit is dropped and reported (``queue_full``);
- what ``emit`` raises is reported (``sink_emit_failed``) and the next record goes on;
- when a run ends, its result waits until its records were handed to every sink, so that a
  ``force_flush`` of the sink right after the run sees all of them; at most
  :data:`SETTLE_MS`, and not at all for a sink stuck in one ``emit`` for longer than
  :data:`STALL_MS`.

A lane belongs to its sink object, whichever configuration names it: runs of several
``observability`` configurations that share a sink share its lane (and a sink stuck for good
holds one thread, not one per run). Diagnostics go to ``on_diagnostic``, else to the
``oma_component.observability`` logger, as OMA's ``CompositeSink`` named ``OpenMultiAgent``
reports them.
"""

from __future__ import annotations

import json
import threading
import time
import weakref
from collections import deque
from typing import Any, Callable, Deque, Dict, List, Mapping, Optional, Sequence, Tuple, cast

from .._types import RunIdentity
from ._types import TelemetryDiagnostic, TraceRecord
from .legacy import LegacyCallbackTraceSink, attach_legacy_trace_event
from .processors import CAPTURE_NAMES, processor_options
from .sink import DiagnosticReporter

#: OMA's queue limits (``BatchingTraceSink``'s defaults), per sink.
MAX_QUEUE_RECORDS = 2_048
MAX_QUEUE_BYTES = 16 * 1024 * 1024
#: The longest a run's result waits for its records to reach the sinks.
SETTLE_MS = 1_000
#: A sink inside one ``emit`` for longer than this is not waited for at all.
STALL_MS = 100
#: How long a lane's thread waits for more records before it ends (the steps of a run, and
#: runs one after another, reuse it instead of starting one per step).
LINGER_MS = 2_000

_CONFIG_KEYS = ("sinks", "capture", "resource", "on_diagnostic")
_RESOURCE_KEYS = ("service_name", "service_version", "deployment_environment", "release")


class _Lane:
    """One sink's queue and the thread that drains it (started when records come, gone when
    the queue stayed empty for :data:`LINGER_MS`)."""

    def __init__(self, sink: Any) -> None:
        self.sink = sink
        self._cond = threading.Condition()
        self._queue: Deque[Tuple[Dict[str, Any], int, DiagnosticReporter]] = deque()
        self._bytes = 0
        self._worker = False
        self._busy_since: Optional[float] = None
        self.put_count = 0
        self.done_count = 0

    def put(self, record: Dict[str, Any], size: int, reporter: DiagnosticReporter) -> None:
        with self._cond:
            if len(self._queue) >= MAX_QUEUE_RECORDS or self._bytes + size > MAX_QUEUE_BYTES:
                full = True
            else:
                full = False
                self._queue.append((record, size, reporter))
                self._bytes += size
                self.put_count += 1
                if self._worker:
                    self._cond.notify_all()
                else:
                    self._worker = True
                    threading.Thread(target=self._drain, name="oma-trace-delivery", daemon=True).start()
        if full:
            reporter.report("queue_full", "Trace record dropped because the bounded queue is full.")

    def _drain(self) -> None:
        while True:
            with self._cond:
                if not self._queue:
                    self._cond.wait(LINGER_MS / 1000)
                if not self._queue:
                    self._worker = False
                    return
                record, size, reporter = self._queue.popleft()
                self._busy_since = time.monotonic()
            try:
                self.sink.emit(record)
            except Exception:  # noqa: BLE001 - a sink never changes the run
                reporter.report("sink_emit_failed", "A child trace sink threw while accepting a record.", "error")
            finally:
                with self._cond:
                    self._bytes -= size
                    self._busy_since = None
                    self.done_count += 1
                    self._cond.notify_all()

    def settled(self, target: int) -> bool:
        with self._cond:
            return self.done_count >= target

    def wait(self, target: int, deadline: float) -> None:
        """Waits until the first ``target`` records were handed over, ``deadline`` passes or
        the sink is stuck in one ``emit``."""
        stall_s = STALL_MS / 1000
        with self._cond:
            while self.done_count < target:
                now = time.monotonic()
                if self._busy_since is not None and now - self._busy_since > stall_s:
                    return
                left = deadline - now
                if left <= 0:
                    return
                self._cond.wait(min(left, stall_s))


_lanes: "weakref.WeakValueDictionary[int, _Lane]" = weakref.WeakValueDictionary()
_lanes_lock = threading.Lock()


def _lane_for(sink: Any) -> _Lane:
    with _lanes_lock:
        lane = _lanes.get(id(sink))
        if lane is None or lane.sink is not sink:
            lane = _Lane(sink)
            _lanes[id(sink)] = lane
        return lane


class Observability:
    """OMA's ``ObservabilityConfig`` made ready for runs: ``sinks`` (each a :class:`TraceSink`),
    ``capture`` (OMA's ``TraceCapturePolicy``, snake_case keys), ``resource`` (kept, as OMA keeps
    it: nothing in a run reads it) and ``on_diagnostic``. What is not one of these raises
    ``TypeError``/``ValueError`` naming it."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        if not isinstance(config, Mapping):
            raise TypeError("observability must be a dict with 'sinks'")
        unknown = [k for k in config if k not in _CONFIG_KEYS]
        if unknown:
            raise TypeError(f"observability has an unknown key {unknown[0]!r}; known keys: {', '.join(_CONFIG_KEYS)}")
        if "sinks" not in config:
            raise TypeError("observability needs 'sinks', a list of trace sinks")
        sinks = config["sinks"]
        if isinstance(sinks, (str, bytes, Mapping)) or not isinstance(sinks, Sequence):
            raise TypeError("observability['sinks'] must be a list of trace sinks")
        for i, sink in enumerate(sinks):
            if not callable(getattr(sink, "emit", None)):
                raise TypeError(f"observability['sinks'][{i}] is not a trace sink (it has no emit method)")
        capture = config.get("capture")
        processor_options(capture=capture)  # a key or value that is not one raises here, named
        self.capture: Dict[str, Any] = {CAPTURE_NAMES[k]: v for k, v in (capture or {}).items()}
        resource = config.get("resource")
        if resource is not None:
            if not isinstance(resource, Mapping):
                raise TypeError("observability['resource'] must be a dict")
            for key, value in resource.items():
                if key not in _RESOURCE_KEYS:
                    raise TypeError(f"observability['resource'] has an unknown key {key!r}; "
                                    f"known keys: {', '.join(_RESOURCE_KEYS)}")
                if not isinstance(value, str):
                    raise TypeError(f"observability['resource']['{key}'] must be a string")
        self.resource: Optional[Mapping[str, str]] = resource
        on_diagnostic: Optional[Callable[[TelemetryDiagnostic], None]] = config.get("on_diagnostic")
        if on_diagnostic is not None and not callable(on_diagnostic):
            raise TypeError("observability['on_diagnostic'] must be callable")
        self._reporter = DiagnosticReporter(on_diagnostic=on_diagnostic, sink_name="OpenMultiAgent")
        self._lanes: List[_Lane] = [_lane_for(sink) for sink in sinks]
        #: OMA attaches the legacy trace events to the records when a sink is a legacy bridge.
        self.legacy = any(isinstance(sink, LegacyCallbackTraceSink) for sink in sinks)

    @property
    def active(self) -> bool:
        """Whether runs make records (OMA: only when there is a sink)."""
        return bool(self._lanes)

    def options_json(self, identity: RunIdentity, metadata: Optional[Mapping[str, Any]]) -> str:
        """The run's ``records`` options for the core: the capture policy, the run's id and its
        metadata (which the core checks with OMA's rules and messages)."""
        options: Dict[str, Any] = {"runId": identity["runId"]}
        if self.capture:
            options["capture"] = self.capture
        if metadata is not None:
            options["metadata"] = dict(metadata)
        return json.dumps(options, ensure_ascii=False, separators=(",", ":"))

    def deliver(self, identity: Optional[RunIdentity], batch: Sequence[Any]) -> None:
        """Hands a ``trace-records`` step's records to every sink (never blocks, never raises).
        The root span's first record names the run's trace: ``identity`` takes its trace id and
        root span id, so the result and the records agree."""
        for item in batch:
            try:
                text = item.json
                record: Dict[str, Any] = json.loads(text)
                legacy = item.legacy
                if legacy is not None:
                    record = cast(Dict[str, Any], attach_legacy_trace_event(cast(TraceRecord, record),
                                                                            json.loads(legacy)))
            except Exception:  # noqa: BLE001 - a record that cannot be read is not delivered
                continue
            if (identity is not None and record.get("recordType") == "span_start" and record.get("kind") == "run"
                    and not record.get("parentSpanId")):
                identity["traceId"] = record["traceId"]
                identity["rootSpanId"] = record["spanId"]
            size = len(text.encode("utf-8"))
            for lane in self._lanes:
                lane.put(record, size, self._reporter)

    def settled(self) -> List[Tuple[_Lane, int]]:
        """The lanes that still hold records queued before now, with how many to wait for."""
        return [(lane, lane.put_count) for lane in self._lanes if not lane.settled(lane.put_count)]

    def settle(self, pending: Optional[List[Tuple[_Lane, int]]] = None) -> None:
        """Waits (bounded, see the module) until the records queued so far reached the sinks."""
        pending = self.settled() if pending is None else pending
        deadline = time.monotonic() + SETTLE_MS / 1000
        for lane, target in pending:
            lane.wait(target, deadline)
