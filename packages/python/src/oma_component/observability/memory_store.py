"""OMA's ``InMemoryTraceStore``: the reference trace store, for tests and short-lived local
runs. Records are checked with OMA's messages, kept once per ``recordId`` (a second end of one
span is kept out and reported), read back by run as OMA materializes them, listed in pages
with opaque cursors, deleted by run, by query or by retention."""

from __future__ import annotations

import hashlib
import json
import math
import secrets
import threading
import time
import urllib.parse
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Literal, Mapping, Optional, Sequence, Tuple, Union

from .._jsjson import date_ms
from .._jsjson import dumps as js_dumps
from ._types import TraceRecord
from .materialize import materialize_run
from .store import (
    TRACE_STORE_SCHEMA_MAJOR,
    AppendResult,
    DeleteResult,
    Page,
    RunSummary,
    StoredRun,
    TraceStoreDiagnostic,
    TraceStoreError,
    TraceStoreErrorCode,
)

_STATUS_CODES = ("ok", "error", "cancelled", "timeout", "budget_exhausted", "rejected", "suspended", "skipped")
_SPAN_KINDS = ("run", "routing", "agent", "task", "llm", "tool", "plan", "consensus", "checkpoint", "callback")
_EVENT_NAMES = ("retry_scheduled", "budget_exhausted", "first_chunk", "approval_decision", "checkpoint_failed",
                "telemetry_diagnostic", "loop_detected", "stream_chunk", "consensus_verdict")
_LINK_RELATIONS = ("continued_from", "depends_on", "consumed", "delegated_from")


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def parse_iso_ms(text: str) -> int:
    """Milliseconds since the epoch of a time as a stored run writes it (JavaScript's
    ``toISOString``: ``2026-01-02T03:04:05.678Z``), exactly."""
    moment = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def _fail(field: str, message: str, code: TraceStoreErrorCode = "INVALID_ARGUMENT") -> TraceStoreError:
    return TraceStoreError(code, message, field)


def _non_empty(value: Any, field: str) -> None:
    if not isinstance(value, str) or not value:
        raise _fail(field, f"{field} must be a non-empty string.")


def _finite(value: Any, field: str, low: float = 0) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < low:
        raise _fail(field, f"{field} must be a finite number >= {low:g}.")


def _whole(value: Any, field: str) -> None:
    if value != int(value):
        raise _fail(field, f"{field} must be an integer.")


def _attribute(value: Any) -> bool:
    def scalar(item: Any) -> bool:
        return isinstance(item, (str, bool)) or (isinstance(item, (int, float)) and math.isfinite(item))

    if scalar(value):
        return True
    if not isinstance(value, list) or not all(scalar(item) for item in value):
        return False
    kinds = {"number" if isinstance(i, (int, float)) and not isinstance(i, bool) else type(i).__name__ for i in value}
    return len(kinds) <= 1


def check_record(record: Any, index: int) -> None:
    """Raises :class:`TraceStoreError` (OMA's message) when ``record`` is not a trace record of
    schema 2."""
    prefix = f"records[{index}]"
    if not isinstance(record, dict):
        raise _fail(prefix, f"{prefix} must be an object.")
    version = record.get("schemaVersion")
    if version != TRACE_STORE_SCHEMA_MAJOR or isinstance(version, bool):
        if isinstance(version, (int, float)) and not isinstance(version, bool):
            raise _fail(f"{prefix}.schemaVersion", f"Unsupported TraceRecord schema major {version:g}; supported major "
                        f"is {TRACE_STORE_SCHEMA_MAJOR}.", "UNSUPPORTED_SCHEMA_VERSION")
        raise _fail(f"{prefix}.schemaVersion", f"{prefix}.schemaVersion must be {TRACE_STORE_SCHEMA_MAJOR}.")
    _non_empty(record.get("recordId"), f"{prefix}.recordId")
    _finite(record.get("sequence"), f"{prefix}.sequence", 1)
    _whole(record["sequence"], f"{prefix}.sequence")
    _finite(record.get("timestampUnixMs"), f"{prefix}.timestampUnixMs")
    _non_empty(record.get("runId"), f"{prefix}.runId")
    _finite(record.get("attempt"), f"{prefix}.attempt", 1)
    _whole(record["attempt"], f"{prefix}.attempt")
    _non_empty(record.get("traceId"), f"{prefix}.traceId")
    _non_empty(record.get("spanId"), f"{prefix}.spanId")
    if record.get("parentSpanId") is not None:
        _non_empty(record["parentSpanId"], f"{prefix}.parentSpanId")
    kind = record.get("recordType")
    if kind not in ("span_start", "span_event", "span_end"):
        raise _fail(f"{prefix}.recordType", f"{prefix}.recordType is invalid.")
    attributes = record.get("attributes")
    if not isinstance(attributes, dict):
        raise _fail(f"{prefix}.attributes", f"{prefix}.attributes must be an object.")
    for key, value in attributes.items():
        if not _attribute(value):
            raise _fail(f"{prefix}.attributes.{key}", f"{prefix}.attributes.{key} is not a supported trace attribute.")
    if kind in ("span_start", "span_end"):
        _non_empty(record.get("kind"), f"{prefix}.kind")
        if record["kind"] not in _SPAN_KINDS:
            raise _fail(f"{prefix}.kind", f"{prefix}.kind is invalid.")
        _non_empty(record.get("name"), f"{prefix}.name")
        _finite(record.get("startUnixMs"), f"{prefix}.startUnixMs")
    if kind == "span_event":
        _non_empty(record.get("name"), f"{prefix}.name")
        if record["name"] not in _EVENT_NAMES:
            raise _fail(f"{prefix}.name", f"{prefix}.name is not a supported event name.")
    if record.get("links") is not None:
        links = record["links"]
        if not isinstance(links, list):
            raise _fail(f"{prefix}.links", f"{prefix}.links must be an array.")
        for i, link in enumerate(links):
            field = f"{prefix}.links[{i}]"
            if not isinstance(link, dict):
                raise _fail(field, f"{field} must be an object.")
            _non_empty(link.get("traceId"), f"{field}.traceId")
            _non_empty(link.get("spanId"), f"{field}.spanId")
            if link.get("relation") not in _LINK_RELATIONS:
                raise _fail(f"{field}.relation", f"{field}.relation is invalid.")
    if kind == "span_end":
        _finite(record.get("endUnixMs"), f"{prefix}.endUnixMs")
        _finite(record.get("durationMs"), f"{prefix}.durationMs")
        status = record.get("status")
        if not isinstance(status, dict) or status.get("code") not in _STATUS_CODES:
            raise _fail(f"{prefix}.status.code", f"{prefix}.status.code is invalid.")
        if status.get("message") is not None and not isinstance(status["message"], str):
            raise _fail(f"{prefix}.status.message", f"{prefix}.status.message must be a string.")


def _strings(value: Any, field: str) -> Optional[List[str]]:
    if value is None:
        return None
    values = [value] if isinstance(value, str) else value
    if (not isinstance(values, (list, tuple)) or not values
            or any(not isinstance(v, str) or not v for v in values)):
        raise _fail(field, f"{field} must contain non-empty strings.")
    return sorted(set(values))


def _statuses(value: Any, field: str) -> Optional[List[str]]:
    values = _strings(value, field)
    if values is not None and any(v not in _STATUS_CODES for v in values):
        raise _fail(field, f"{field} contains an unsupported status.")
    return values


def _time(value: Any, field: str) -> Optional[float]:
    if value is None:
        return None
    parsed = date_ms(value)
    if parsed is None:
        raise _fail(field, f"{field} must be a valid ISO-8601 timestamp.")
    return parsed


class _Query:
    def __init__(self, run_id: Any = None, started_after: Any = None, started_before: Any = None, status: Any = None,
                 agent: Any = None, task_id: Any = None, model: Any = None, provider: Any = None, limit: Any = None,
                 order: Any = None) -> None:
        self.limit = 50 if limit is None else limit
        if isinstance(self.limit, bool) or not isinstance(self.limit, int) or not 1 <= self.limit <= 500:
            raise _fail("limit", "limit must be an integer from 1 through 500.")
        if order is not None and order not in ("started_asc", "started_desc"):
            raise _fail("order", "order must be started_asc or started_desc.")
        self.order = order or "started_desc"
        self.after = _time(started_after, "startedAfter")
        self.before = _time(started_before, "startedBefore")
        if self.after is not None and self.before is not None and self.after >= self.before:
            raise _fail("startedAfter", "startedAfter must be before startedBefore.")
        self.run_ids = _strings(run_id, "runId")
        self.status = _statuses(status, "status")
        self.agent = _strings(agent, "agent")
        self.task_id = _strings(task_id, "taskId")
        self.model = _strings(model, "model")
        self.provider = _strings(provider, "provider")

    def identity(self) -> str:
        return json.dumps([self.run_ids, self.after, self.before, self.status, self.agent, self.task_id, self.model,
                           self.provider, self.order])

    def matches(self, summary: Mapping[str, Any]) -> bool:
        started = parse_iso_ms(summary["startedAt"])

        def any_of(actual: Sequence[str], wanted: Optional[List[str]]) -> bool:
            return wanted is None or any(w in actual for w in wanted)

        return ((self.run_ids is None or summary["runId"] in self.run_ids)
                and (self.after is None or started >= self.after)
                and (self.before is None or started < self.before)
                and (self.status is None or summary.get("status") in self.status)
                and any_of(summary["agents"], self.agent) and any_of(summary["taskIds"], self.task_id)
                and any_of(summary["models"], self.model) and any_of(summary["providers"], self.provider))


def _run_key(summary: Mapping[str, Any]) -> Tuple[int, str]:
    return (parse_iso_ms(summary["startedAt"]), summary["runId"])


def _copy(value: Any) -> Any:
    return json.loads(json.dumps(value))


class InMemoryTraceStore:
    """OMA's non-durable trace store, thread-safe. ``now`` (milliseconds since the epoch) is
    the clock retention reads; ``on_diagnostic`` hears of records kept out (a ``recordId``
    seen with another payload, a second end of one span)."""

    def __init__(self, *, now: Optional[Callable[[], float]] = None,
                 on_diagnostic: Optional[Callable[[TraceStoreDiagnostic], None]] = None) -> None:
        self._now = now or (lambda: time.time() * 1000)
        self._on_diagnostic = on_diagnostic
        self._lock = threading.RLock()
        self._entries: List[Tuple[Dict[str, Any], int, int]] = []  # record, revision, arrival
        self._seen: Dict[str, Tuple[str, str]] = {}                # recordId -> (runId, fingerprint)
        self._first_end: Dict[str, str] = {}                       # traceId:spanId -> recordId
        self._revision = 0
        self._arrival = 0
        self._delete_epoch = 0
        self._secret = secrets.token_hex(16)

    def append(self, records: Sequence[TraceRecord]) -> AppendResult:
        """Keeps ``records`` (all or none, each once)."""
        if isinstance(records, (str, bytes, Mapping)) or not isinstance(records, (list, tuple)):
            raise _fail("records", "records must be an array.")
        for i, record in enumerate(records):
            check_record(record, i)
        copies: List[Dict[str, Any]] = []
        for i, record in enumerate(records):
            try:
                copies.append(_copy(record))
            except (TypeError, ValueError):
                raise _fail(f"records[{i}]", f"records[{i}] must be JSON-serializable.") from None
        diagnostics: List[TraceStoreDiagnostic] = []
        with self._lock:
            seen, ends = dict(self._seen), dict(self._first_end)
            writes: List[Dict[str, Any]] = []
            deduplicated = 0
            for record in copies:
                fingerprint = js_dumps(record)
                where = {"runId": record["runId"], "traceId": record["traceId"], "spanId": record["spanId"]}
                existing = seen.get(record["recordId"])
                if existing is not None:
                    deduplicated += 1
                    if existing[1] != fingerprint:
                        diagnostics.append({"code": "record_id_collision", **where,  # type: ignore[typeddict-item]
                                            "message": "A recordId already existed with a different payload; the first "
                                                       "record was retained."})
                    continue
                if record["recordType"] == "span_end":
                    span = f'{record["traceId"]}:{record["spanId"]}'
                    if span in ends:
                        deduplicated += 1
                        diagnostics.append({"code": "duplicate_span_end", **where,  # type: ignore[typeddict-item]
                                            "message": "A duplicate span_end was ignored; the first accepted end "
                                                       "remains authoritative."})
                        seen[record["recordId"]] = (record["runId"], fingerprint)
                        continue
                    ends[span] = record["recordId"]
                writes.append(record)
                seen[record["recordId"]] = (record["runId"], fingerprint)
            if writes:
                self._revision += 1
                for record in writes:
                    self._arrival += 1
                    self._entries.append((record, self._revision, self._arrival))
            self._seen, self._first_end = seen, ends
        for diagnostic in diagnostics:
            if self._on_diagnostic is not None:
                try:
                    self._on_diagnostic(dict(diagnostic))  # type: ignore[arg-type]
                except Exception:  # noqa: BLE001 - diagnostics are fail-open
                    pass
        return _copy({"written": len(writes), "deduplicated": deduplicated, "diagnostics": diagnostics})  # type: ignore[no-any-return]

    def get_run(self, run_id: str, *, include_records: bool = False) -> Optional[StoredRun]:
        """The run materialized (with its records in order when asked), or ``None``."""
        _non_empty(run_id, "runId")
        with self._lock:
            records = [r for r, _, _ in self._entries if r["runId"] == run_id]
        run = materialize_run(records, bool(include_records))  # type: ignore[arg-type]
        return None if run is None else _copy(run)

    def query_runs(self, *, run_id: Union[str, Sequence[str], None] = None, started_after: Optional[str] = None,
                   started_before: Optional[str] = None, status: Optional[Sequence[str]] = None,
                   agent: Optional[Sequence[str]] = None, task_id: Optional[Sequence[str]] = None,
                   model: Optional[Sequence[str]] = None, provider: Optional[Sequence[str]] = None,
                   limit: Optional[int] = None, cursor: Optional[str] = None,
                   order: Optional[Literal["started_desc", "started_asc"]] = None) -> Page:
        """One page of run summaries (``nextCursor`` when more follow; a cursor reads the store
        as it was at the first page and fails once runs were deleted)."""
        query = _Query(run_id, started_after, started_before, status, agent, task_id, model, provider, limit, order)
        identity = query.identity()
        with self._lock:
            snapshot = self._revision
            after: Optional[Tuple[str, str]] = None
            if cursor is not None:
                state = self._decode(cursor)
                if state["query"] != identity or state["deleteEpoch"] != self._delete_epoch:
                    raise _fail("cursor", "Cursor does not match this query or is no longer valid.", "INVALID_CURSOR")
                snapshot = state["snapshotRevision"]
                after = (state["startedAt"], state["runId"])
            summaries = sorted((s for s in self._summaries(snapshot) if query.matches(s)), key=_run_key,
                               reverse=query.order == "started_desc")
            start = 0
            if after is not None:
                start = next((i + 1 for i, s in enumerate(summaries) if (s["startedAt"], s["runId"]) == after), 0)
                if start == 0:
                    raise _fail("cursor", "Cursor position is not present in the query snapshot.", "INVALID_CURSOR")
            items = summaries[start:start + query.limit]
            page: Dict[str, Any] = {"items": items}
            if start + len(items) < len(summaries) and items:
                page["nextCursor"] = self._encode({"snapshotRevision": snapshot, "deleteEpoch": self._delete_epoch,
                                                   "query": identity, "startedAt": items[-1]["startedAt"],
                                                   "runId": items[-1]["runId"]})
        return _copy(page)  # type: ignore[no-any-return]

    def delete_run(self, run_id: str) -> DeleteResult:
        _non_empty(run_id, "runId")
        return self._delete_runs([run_id])

    def delete(self, *, run_id: Union[str, Sequence[str], None] = None, started_after: Optional[str] = None,
               started_before: Optional[str] = None, status: Optional[Sequence[str]] = None,
               agent: Optional[Sequence[str]] = None, task_id: Optional[Sequence[str]] = None,
               model: Optional[Sequence[str]] = None, provider: Optional[Sequence[str]] = None) -> DeleteResult:
        """Deletes the runs that match (the query keywords but ``limit``, ``cursor`` and
        ``order``), oldest first."""
        query = _Query(run_id, started_after, started_before, status, agent, task_id, model, provider, 500, None)
        with self._lock:
            ids = [s["runId"] for s in sorted(self._summaries(self._revision), key=_run_key) if query.matches(s)]
            return self._delete_runs(ids)

    def apply_retention(self, *, max_age_ms: Optional[float] = None, max_runs: Optional[int] = None,
                        statuses: Optional[Sequence[str]] = None) -> DeleteResult:
        """Deletes runs that started more than ``max_age_ms`` ago and all but the newest
        ``max_runs``; with ``statuses``, only among runs that ended with one of them (alone:
        all of those)."""
        if max_age_ms is None and max_runs is None and statuses is None:
            raise _fail("policy", "Retention policy must set maxAgeMs, maxRuns, or statuses.")
        if max_age_ms is not None:
            _finite(max_age_ms, "maxAgeMs")
        if max_runs is not None and (isinstance(max_runs, bool) or not isinstance(max_runs, int) or max_runs < 0):
            raise _fail("maxRuns", "maxRuns must be a non-negative integer.")
        wanted = _statuses(statuses, "statuses")
        with self._lock:
            summaries = self._summaries(self._revision)
            scoped = [s for s in summaries if wanted is None or s.get("status") in wanted]
            doomed: set[str] = set()
            if max_age_ms is not None:
                cutoff = self._now() - max_age_ms
                doomed.update(s["runId"] for s in scoped if parse_iso_ms(s["startedAt"]) < cutoff)
            if max_runs is not None:
                doomed.update(s["runId"] for s in sorted(scoped, key=_run_key, reverse=True)[max_runs:])
            elif max_age_ms is None and wanted is not None:
                doomed.update(s["runId"] for s in scoped)
            ordered = [s["runId"] for s in sorted(summaries, key=_run_key) if s["runId"] in doomed]
            return self._delete_runs(ordered)

    def records(self) -> List[TraceRecord]:
        """Every record kept, by run in the order runs started, each run's in order (copies)."""
        with self._lock:
            out: List[Any] = []
            for summary in sorted(self._summaries(self._revision), key=_run_key):
                group: List[Any] = [r for r, _, _ in self._entries if r["runId"] == summary["runId"]]
                run = materialize_run(group, True)
                if run is not None:
                    out.extend(run.get("records", []))
            return _copy(out)  # type: ignore[no-any-return]

    def _summaries(self, snapshot: int) -> List[RunSummary]:
        by_run: Dict[str, List[Dict[str, Any]]] = {}
        for record, revision, _ in self._entries:
            if revision <= snapshot:
                by_run.setdefault(record["runId"], []).append(record)
        out: List[RunSummary] = []
        for group in by_run.values():
            run = materialize_run(group)  # type: ignore[arg-type]
            if run is not None:
                summary: Dict[str, Any] = {k: v for k, v in run.items() if k not in ("spans", "records")}
                out.append(summary)  # type: ignore[arg-type]
        return out

    def _delete_runs(self, run_ids: Sequence[str]) -> DeleteResult:
        wanted = set(run_ids)
        with self._lock:
            present = {r["runId"] for r, _, _ in self._entries if r["runId"] in wanted}
            deleted: List[str] = []
            for run in run_ids:
                if run in present and run not in deleted:
                    deleted.append(run)
            if not deleted:
                return {"runsDeleted": 0, "recordsDeleted": 0, "runIds": []}
            before = len(self._entries)
            self._entries = [e for e in self._entries if e[0]["runId"] not in wanted]
            self._seen = {k: v for k, v in self._seen.items() if v[0] not in wanted}
            self._first_end = {}
            for record, _, _ in sorted(self._entries, key=lambda e: e[2]):
                if record["recordType"] == "span_end":
                    self._first_end[f'{record["traceId"]}:{record["spanId"]}'] = record["recordId"]
            self._delete_epoch += 1
            return {"runsDeleted": len(deleted), "recordsDeleted": before - len(self._entries), "runIds": deleted}

    def _encode(self, state: Dict[str, Any]) -> str:
        body = urllib.parse.quote(json.dumps(state, separators=(",", ":")), safe="")
        mac = hashlib.sha256(f"{self._secret}:{body}".encode()).hexdigest()[:16]
        return f"oma-ts1.{body}.{mac}"

    def _decode(self, cursor: Any) -> Dict[str, Any]:
        if not isinstance(cursor, str) or not cursor:
            raise _fail("cursor", "cursor must be an opaque non-empty string.", "INVALID_CURSOR")
        head, _, rest = cursor.partition(".")
        body, _, mac = rest.rpartition(".")
        if head != "oma-ts1" or not body or hashlib.sha256(f"{self._secret}:{body}".encode()).hexdigest()[:16] != mac:
            raise _fail("cursor", "Cursor is invalid or has been tampered with.", "INVALID_CURSOR")
        try:
            state = json.loads(urllib.parse.unquote(body))
            if not isinstance(state, dict) or not all(k in state for k in (
                    "snapshotRevision", "deleteEpoch", "query", "startedAt", "runId")):
                raise ValueError("incomplete")
            return state
        except ValueError:
            raise _fail("cursor", "Cursor payload is invalid.", "INVALID_CURSOR") from None
