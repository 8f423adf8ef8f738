"""Evaluation stores (OMA's ``EvalStore``): the contract, :class:`EvalStoreError` and
:class:`InMemoryEvalStore`, OMA's reference store (records checked with OMA's messages, kept
once per ``recordId``, queried in pages with opaque cursors, deleted by query or retention)."""

from __future__ import annotations

import hashlib
import json
import math
import secrets
import threading
import time
import urllib.parse
from typing import Any, Callable, Dict, List, Literal, Mapping, Optional, Protocol, Sequence, Tuple, TypedDict, Union

from .._jsjson import date_ms
from ..observability.store import AppendResult, DeleteResult
from ._types import EvalRecord
from ._values import is_trace_attribute, json_copy

EVAL_STORE_SCHEMA_MAJOR = 1

EvalStoreErrorCode = Literal["INVALID_ARGUMENT", "INVALID_CURSOR", "UNSUPPORTED_SCHEMA_VERSION"]
_STATUSES = ("scored", "scorer_error", "target_error", "skipped")
_SOURCES = ("offline", "online")
_ERROR_KINDS = ("provider", "tool", "framework", "callback", "validation", "timeout", "cancellation", "budget", "store",
                "exporter", "unknown")


class EvalStoreError(ValueError):
    """A store refused its input: ``code``, ``field`` and OMA's message."""

    def __init__(self, code: EvalStoreErrorCode, message: str, field: Optional[str] = None) -> None:
        super().__init__(message)
        self.name = "EvalStoreError"
        self.code: EvalStoreErrorCode = code
        self.message = message
        self.field = field


class _PageOptional(TypedDict, total=False):
    nextCursor: str


class EvalPage(_PageOptional):
    items: List[EvalRecord]


class EvalStore(Protocol):
    """Where evaluation records are kept: ``append`` is atomic per batch and keeps one copy of
    each ``recordId``; ``query`` pages through them (keywords: ``eval_run_id``, ``run_id``
    (the records' ``runRef.runId``), ``eval_set_name``, ``scorer``, ``source``, ``status``,
    ``after`` (inclusive) and ``before`` (exclusive) ISO-8601 times, ``limit`` (1 to 1000, 100
    by default), ``cursor``, ``order`` ``"time_desc"`` (default) or ``"time_asc"``);
    ``delete`` by ``eval_run_id``, ``eval_set_name`` and ``before``; ``apply_retention`` by
    ``max_age_ms``, ``max_records`` (the newest kept) and ``sources``."""

    def append(self, records: Sequence[EvalRecord]) -> AppendResult: ...

    def query(self, **query: Any) -> EvalPage: ...

    def delete(self, **query: Any) -> DeleteResult: ...

    def apply_retention(self, **policy: Any) -> DeleteResult: ...


def _fail(field: str, message: str, code: EvalStoreErrorCode = "INVALID_ARGUMENT") -> EvalStoreError:
    return EvalStoreError(code, message, field)


def _object(value: Any, field: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise _fail(field, f"{field} must be an object.")
    return value


def _non_empty(value: Any, field: str) -> None:
    if not isinstance(value, str) or not value:
        raise _fail(field, f"{field} must be a non-empty string.")


def _optional_string(value: Any, field: str) -> None:
    if value is not None and not isinstance(value, str):
        raise _fail(field, f"{field} must be a string.")


def _finite(value: Any, field: str, low: float = 0) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < low:
        raise _fail(field, f"{field} must be a finite number >= {low:g}.")


def _integer(value: Any, field: str, low: float = 0) -> None:
    _finite(value, field, low)
    if value != int(value):
        raise _fail(field, f"{field} must be an integer.")


def _attributes(value: Any, field: str) -> None:
    for key, item in _object(value, field).items():
        if not is_trace_attribute(item):
            raise _fail(f"{field}.{key}", f"{field}.{key} is not a supported trace attribute.")


def check_record(record: Any, index: int) -> None:
    """Raises :class:`EvalStoreError` (OMA's message) when ``record`` is not an evaluation
    record of schema 1."""
    prefix = f"records[{index}]"
    record = _object(record, prefix)
    version = record.get("schemaVersion")
    if version != EVAL_STORE_SCHEMA_MAJOR or isinstance(version, bool):
        if isinstance(version, (int, float)) and not isinstance(version, bool):
            raise _fail(f"{prefix}.schemaVersion",
                        f"Unsupported EvalRecord schema major {version:g}; supported major is {EVAL_STORE_SCHEMA_MAJOR}.",
                        "UNSUPPORTED_SCHEMA_VERSION")
        raise _fail(f"{prefix}.schemaVersion", f"{prefix}.schemaVersion must be {EVAL_STORE_SCHEMA_MAJOR}.")
    _non_empty(record.get("recordId"), f"{prefix}.recordId")
    _non_empty(record.get("evalRunId"), f"{prefix}.evalRunId")
    if record.get("source") not in _SOURCES:
        raise _fail(f"{prefix}.source", f"{prefix}.source is invalid.")
    _integer(record.get("timestampUnixMs"), f"{prefix}.timestampUnixMs")
    if record.get("evalSet") is not None:
        eval_set = _object(record["evalSet"], f"{prefix}.evalSet")
        _non_empty(eval_set.get("name"), f"{prefix}.evalSet.name")
        _non_empty(eval_set.get("version"), f"{prefix}.evalSet.version")
    _optional_string(record.get("caseId"), f"{prefix}.caseId")
    if record.get("repeat") is not None:
        _integer(record["repeat"], f"{prefix}.repeat", 1)
    scorer = _object(record.get("scorer"), f"{prefix}.scorer")
    _non_empty(scorer.get("name"), f"{prefix}.scorer.name")
    _optional_string(scorer.get("version"), f"{prefix}.scorer.version")
    if record.get("status") not in _STATUSES:
        raise _fail(f"{prefix}.status", f"{prefix}.status is invalid.")
    if record.get("score") is not None:
        _finite(record["score"], f"{prefix}.score")
        if record["score"] > 1:
            raise _fail(f"{prefix}.score", f"{prefix}.score must be <= 1.")
    if record.get("pass") is not None and not isinstance(record["pass"], bool):
        raise _fail(f"{prefix}.pass", f"{prefix}.pass must be a boolean.")
    _optional_string(record.get("reason"), f"{prefix}.reason")
    if record.get("details") is not None:
        _attributes(record["details"], f"{prefix}.details")
    if record.get("runRef") is not None:
        ref = _object(record["runRef"], f"{prefix}.runRef")
        _non_empty(ref.get("runId"), f"{prefix}.runRef.runId")
        _integer(ref.get("attempt"), f"{prefix}.runRef.attempt", 1)
        _non_empty(ref.get("traceId"), f"{prefix}.runRef.traceId")
        _non_empty(ref.get("rootSpanId"), f"{prefix}.runRef.rootSpanId")
    _attributes(record.get("metadata"), f"{prefix}.metadata")
    if record.get("usage") is not None:
        usage = _object(record["usage"], f"{prefix}.usage")
        if usage.get("tokens") is not None:
            tokens = _object(usage["tokens"], f"{prefix}.usage.tokens")
            _integer(tokens.get("input_tokens"), f"{prefix}.usage.tokens.input_tokens")
            _integer(tokens.get("output_tokens"), f"{prefix}.usage.tokens.output_tokens")
        if usage.get("cost") is not None:
            cost = _object(usage["cost"], f"{prefix}.usage.cost")
            _finite(cost.get("amount"), f"{prefix}.usage.cost.amount")
            _non_empty(cost.get("currency"), f"{prefix}.usage.cost.currency")
        if usage.get("durationMs") is not None:
            _finite(usage["durationMs"], f"{prefix}.usage.durationMs")
    if record.get("error") is not None:
        error = _object(record["error"], f"{prefix}.error")
        if error.get("kind") not in _ERROR_KINDS:
            raise _fail(f"{prefix}.error.kind", f"{prefix}.error.kind is invalid.")
        for key in ("code", "name", "message", "provider"):
            _optional_string(error.get(key), f"{prefix}.error.{key}")
        if error.get("retryable") is not None and not isinstance(error["retryable"], bool):
            raise _fail(f"{prefix}.error.retryable", f"{prefix}.error.retryable must be a boolean.")
        if error.get("httpStatus") is not None:
            _integer(error["httpStatus"], f"{prefix}.error.httpStatus")
        if error.get("attempt") is not None:
            _integer(error["attempt"], f"{prefix}.error.attempt", 1)
    if record.get("payload") is not None:
        payload = _object(record["payload"], f"{prefix}.payload")
        for key in ("input", "output", "expected"):
            _optional_string(payload.get(key), f"{prefix}.payload.{key}")


def _string_list(value: Any, field: str, single: bool = True) -> Optional[List[str]]:
    if value is None:
        return None
    values = [value] if single and isinstance(value, str) else value
    if (isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple)) or not values
            or any(not isinstance(v, str) or not v for v in values)):
        text = "must contain non-empty strings." if single else "must be an array of non-empty strings."
        raise _fail(field, f"{field} {text}")
    return sorted(set(values))


def parse_time(value: Any, field: str) -> Optional[float]:
    """An ISO-8601 time as milliseconds since the epoch (a time without an offset is UTC)."""
    if value is None:
        return None
    parsed = date_ms(value)
    if parsed is None:
        raise _fail(field, f"{field} must be a valid ISO-8601 timestamp.")
    return parsed


class _Query:
    def __init__(self, eval_run_id: Any = None, run_id: Any = None, eval_set_name: Any = None, scorer: Any = None,
                 source: Any = None, status: Any = None, after: Any = None, before: Any = None, limit: Any = None,
                 order: Any = None) -> None:
        self.limit = 100 if limit is None else limit
        if isinstance(self.limit, bool) or not isinstance(self.limit, int) or not 1 <= self.limit <= 1000:
            raise _fail("limit", "limit must be an integer from 1 through 1000.")
        if order is not None and order not in ("time_asc", "time_desc"):
            raise _fail("order", "order must be time_asc or time_desc.")
        self.order = order or "time_desc"
        self.after_ms, self.before_ms = parse_time(after, "after"), parse_time(before, "before")
        if self.after_ms is not None and self.before_ms is not None and self.after_ms >= self.before_ms:
            raise _fail("after", "after must be before before.")
        if eval_set_name is not None:
            _non_empty(eval_set_name, "evalSetName")
        self.eval_set_name = eval_set_name
        if source is not None and source not in _SOURCES:
            raise _fail("source", "source must be offline or online.")
        self.source = source
        self.eval_run_ids = _string_list(eval_run_id, "evalRunId")
        self.run_ids = _string_list(run_id, "runId")
        self.scorers = _string_list(scorer, "scorer", single=False)
        self.statuses = _string_list(status, "status", single=False)
        if self.statuses is not None and any(s not in _STATUSES for s in self.statuses):
            raise _fail("status", "status contains an unsupported status.")

    def identity(self) -> str:
        return json.dumps([self.eval_run_ids, self.run_ids, self.eval_set_name, self.scorers, self.source,
                           self.statuses, self.after_ms, self.before_ms, self.order])

    def matches(self, record: Mapping[str, Any]) -> bool:
        ref = record.get("runRef")
        return ((self.eval_run_ids is None or record["evalRunId"] in self.eval_run_ids)
                and (self.run_ids is None or (isinstance(ref, dict) and ref.get("runId") in self.run_ids))
                and (self.eval_set_name is None or (record.get("evalSet") or {}).get("name") == self.eval_set_name)
                and (self.scorers is None or record["scorer"]["name"] in self.scorers)
                and (self.source is None or record["source"] == self.source)
                and (self.statuses is None or record["status"] in self.statuses)
                and (self.after_ms is None or record["timestampUnixMs"] >= self.after_ms)
                and (self.before_ms is None or record["timestampUnixMs"] < self.before_ms))


def order_key(record: Mapping[str, Any]) -> Tuple[Any, str]:
    """Oldest first, then by ``recordId``."""
    return (record["timestampUnixMs"], record["recordId"])


class InMemoryEvalStore:
    """OMA's non-durable evaluation store, thread-safe. ``max_records`` is a hard capacity (a
    batch that would pass it is refused whole); ``now`` (milliseconds since the epoch) is the
    clock retention reads."""

    def __init__(self, *, max_records: Optional[int] = None, now: Optional[Callable[[], float]] = None) -> None:
        if max_records is not None:
            _integer(max_records, "maxRecords")
        if now is not None and not callable(now):
            raise _fail("now", "now must be a function.")
        self._max = max_records
        self._now = now or (lambda: time.time() * 1000)
        self._lock = threading.RLock()
        self._entries: List[Tuple[Dict[str, Any], int, int]] = []  # record, revision, arrival
        self._seen: Dict[str, str] = {}
        self._revision = 0
        self._arrival = 0
        self._delete_epoch = 0
        self._secret = secrets.token_hex(16)

    def append(self, records: Sequence[EvalRecord]) -> AppendResult:
        """Keeps ``records`` (all or none); a ``recordId`` kept before is counted as
        deduplicated."""
        if isinstance(records, (str, bytes, Mapping)) or not isinstance(records, (list, tuple)):
            raise _fail("records", "records must be an array.")
        for i, record in enumerate(records):
            check_record(record, i)
        snapshots: List[Dict[str, Any]] = []
        for i, record in enumerate(records):
            try:
                snapshots.append(json_copy(record))
            except (TypeError, ValueError):
                raise _fail(f"records[{i}]", f"records[{i}] must be JSON-serializable.") from None
        with self._lock:
            seen = dict(self._seen)
            writes: List[Dict[str, Any]] = []
            deduplicated = 0
            for record in snapshots:
                if record["recordId"] in seen:
                    deduplicated += 1
                    continue
                writes.append(record)
                seen[record["recordId"]] = json.dumps(record, sort_keys=True)
            if self._max is not None and len(self._entries) + len(writes) > self._max:
                raise _fail("records", f"append would exceed the InMemoryEvalStore maxRecords capacity of {self._max}.")
            if writes:
                self._revision += 1
                for record in writes:
                    self._arrival += 1
                    self._entries.append((record, self._revision, self._arrival))
            self._seen = seen
        return {"written": len(writes), "deduplicated": deduplicated, "diagnostics": []}

    def query(self, *, eval_run_id: Union[str, Sequence[str], None] = None, run_id: Union[str, Sequence[str], None] = None,
              eval_set_name: Optional[str] = None, scorer: Optional[Sequence[str]] = None,
              source: Optional[Literal["offline", "online"]] = None, status: Optional[Sequence[str]] = None,
              after: Optional[str] = None, before: Optional[str] = None, limit: Optional[int] = None,
              cursor: Optional[str] = None, order: Optional[Literal["time_desc", "time_asc"]] = None) -> EvalPage:
        """One page of the records that match, and ``nextCursor`` when more follow (a cursor
        reads the store as it was at the first page, and fails once records were deleted)."""
        query = _Query(eval_run_id, run_id, eval_set_name, scorer, source, status, after, before, limit, order)
        identity = query.identity()
        with self._lock:
            snapshot = self._revision
            after_key: Optional[Tuple[Any, str]] = None
            if cursor is not None:
                state = self._decode(cursor)
                if state["query"] != identity or state["deleteEpoch"] != self._delete_epoch:
                    raise _fail("cursor", "Cursor does not match this query or is no longer valid.", "INVALID_CURSOR")
                snapshot = state["snapshotRevision"]
                after_key = (state["timestampUnixMs"], state["recordId"])
            records = sorted((r for r, rev, _ in self._entries if rev <= snapshot and query.matches(r)),
                             key=order_key, reverse=query.order == "time_desc")
            start = 0
            if after_key is not None:
                start = next((i + 1 for i, r in enumerate(records) if order_key(r) == after_key), 0)
                if start == 0:
                    raise _fail("cursor", "Cursor position is not present in the query snapshot.", "INVALID_CURSOR")
            items = records[start:start + query.limit]
            page: Dict[str, Any] = {"items": json_copy(items)}
            if start + len(items) < len(records) and items:
                page["nextCursor"] = self._encode({"snapshotRevision": snapshot, "deleteEpoch": self._delete_epoch,
                                                   "query": identity, "timestampUnixMs": items[-1]["timestampUnixMs"],
                                                   "recordId": items[-1]["recordId"]})
        return page  # type: ignore[return-value]

    def delete(self, *, eval_run_id: Union[str, Sequence[str], None] = None, eval_set_name: Optional[str] = None,
               before: Optional[str] = None) -> DeleteResult:
        """Deletes the records of those eval runs, of that eval set, older than ``before``."""
        run_ids = _string_list(eval_run_id, "evalRunId")
        if eval_set_name is not None:
            _non_empty(eval_set_name, "evalSetName")
        before_ms = parse_time(before, "before")
        with self._lock:
            ids = [r["recordId"] for r in sorted((r for r, _, _ in self._entries), key=order_key)
                   if (run_ids is None or r["evalRunId"] in run_ids)
                   and (eval_set_name is None or (r.get("evalSet") or {}).get("name") == eval_set_name)
                   and (before_ms is None or r["timestampUnixMs"] < before_ms)]
            return self.delete_record_ids(ids)

    def apply_retention(self, *, max_age_ms: Optional[float] = None, max_records: Optional[int] = None,
                        sources: Optional[Sequence[str]] = None) -> DeleteResult:
        """Deletes records older than ``max_age_ms`` and all but the newest ``max_records``;
        with ``sources``, only among records of those sources (alone: all of them)."""
        if max_age_ms is None and max_records is None and sources is None:
            raise _fail("policy", "Retention policy must set maxAgeMs, maxRecords, or sources.")
        if max_age_ms is not None:
            _finite(max_age_ms, "maxAgeMs")
        if max_records is not None:
            _integer(max_records, "maxRecords")
        wanted = _string_list(sources, "sources", single=False)
        if wanted is not None and any(s not in _SOURCES for s in wanted):
            raise _fail("sources", "sources contains an unsupported source.")
        with self._lock:
            scoped = [r for r, _, _ in self._entries if wanted is None or r["source"] in wanted]
            doomed: set[str] = set()
            if max_age_ms is not None:
                cutoff = self._now() - max_age_ms
                doomed.update(r["recordId"] for r in scoped if r["timestampUnixMs"] < cutoff)
            if max_records is not None:
                newest_first = sorted(scoped, key=order_key, reverse=True)
                doomed.update(r["recordId"] for r in newest_first[max_records:])
            elif max_age_ms is None and wanted is not None:
                doomed.update(r["recordId"] for r in scoped)
            ordered = [r["recordId"] for r in sorted((r for r, _, _ in self._entries), key=order_key)
                       if r["recordId"] in doomed]
            return self.delete_record_ids(ordered)

    def records(self) -> List[EvalRecord]:
        """Every record, in the order they were appended (copies)."""
        with self._lock:
            return json_copy([r for r, _, _ in sorted(self._entries, key=lambda e: e[2])])  # type: ignore[no-any-return]

    def delete_record_ids(self, record_ids: Sequence[str]) -> DeleteResult:
        """Deletes the records with these ids; the eval runs they belonged to, oldest first."""
        wanted = set(record_ids)
        with self._lock:
            gone = sorted((r for r, _, _ in self._entries if r["recordId"] in wanted), key=order_key)
            if not gone:
                return {"runsDeleted": 0, "recordsDeleted": 0, "runIds": []}
            self._entries = [e for e in self._entries if e[0]["recordId"] not in wanted]
            for record in gone:
                self._seen.pop(record["recordId"], None)
            self._delete_epoch += 1
            runs: List[str] = []
            for record in gone:
                if record["evalRunId"] not in runs:
                    runs.append(record["evalRunId"])
            return {"runsDeleted": len(runs), "recordsDeleted": len(gone), "runIds": runs}

    def _encode(self, state: Dict[str, Any]) -> str:
        body = urllib.parse.quote(json.dumps(state, separators=(",", ":")), safe="")
        mac = hashlib.sha256(f"{self._secret}:{body}".encode()).hexdigest()[:16]
        return f"oma-es1.{body}.{mac}"

    def _decode(self, cursor: Any) -> Dict[str, Any]:
        if not isinstance(cursor, str) or not cursor:
            raise _fail("cursor", "cursor must be an opaque non-empty string.", "INVALID_CURSOR")
        head, _, rest = cursor.partition(".")
        body, _, mac = rest.rpartition(".")
        if head != "oma-es1" or not body or hashlib.sha256(f"{self._secret}:{body}".encode()).hexdigest()[:16] != mac:
            raise _fail("cursor", "Cursor is invalid or has been tampered with.", "INVALID_CURSOR")
        try:
            state = json.loads(urllib.parse.unquote(body))
            if not isinstance(state, dict) or not all(k in state for k in (
                    "snapshotRevision", "deleteEpoch", "query", "timestampUnixMs", "recordId")):
                raise ValueError("incomplete")
            return state
        except ValueError:
            raise _fail("cursor", "Cursor payload is invalid.", "INVALID_CURSOR") from None
