"""OMA's ``FileTraceStore`` (``@open-multi-agent/core/observability/file``): the in-memory
trace store kept in a durable NDJSON file (format ``oma.file_trace_store`` 1, the same file
the JavaScript package writes), for one process at a time."""

from __future__ import annotations

import os
import json
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from .._durable import DurableFileError, DurableLog, Format, Operation, Replay, SchemaMajorError
from ._types import TraceRecord
from .memory_store import InMemoryTraceStore
from .store import AppendResult, DeleteResult, Page, StoredRun, TraceStoreDiagnostic, TraceStoreError

FILE_TRACE_STORE_FORMAT = "oma.file_trace_store"
FILE_TRACE_STORE_FORMAT_VERSION = 1


class FileTraceStoreError(DurableFileError):
    """The file store's lifecycle or file-system failure (OMA's codes, ``CORRUPT_FILE``,
    ``UNSUPPORTED_TRACE_SCHEMA``, ``RECOVERY_REQUIRED``, ...); never holds a record."""

    name = "FileTraceStoreError"


_FORMAT = Format(name=FILE_TRACE_STORE_FORMAT, schema_key="traceSchemaMajor", schema_major=2, label="FileTraceStore",
                 error=FileTraceStoreError, unsupported_schema_code="UNSUPPORTED_TRACE_SCHEMA",
                 schema_words="trace schema")


class _Replay(Replay):
    def __init__(self, now: Optional[Callable[[], float]]) -> None:
        self.memory = InMemoryTraceStore(now=now)
        super().__init__(self._apply)

    def _apply(self, operation: Operation, payloads: List[Any]) -> None:
        if operation == "append":
            try:
                self.memory.append(payloads)
            except TraceStoreError as error:
                if error.code == "UNSUPPORTED_SCHEMA_VERSION":
                    raise SchemaMajorError() from None
                raise
            return
        for payload in payloads:
            if not isinstance(payload, dict) or not isinstance(payload.get("runId"), str) or not payload["runId"]:
                raise ValueError("invalid delete payload")
            self.memory.delete_run(payload["runId"])


class FileTraceStore:
    """A trace store in a file (see the module); open it with :meth:`open`. Methods are those
    of :class:`~oma_component.observability.InMemoryTraceStore`, each written to the file
    before it returns (a write that fails is cut back and raises, the store as it was), plus
    :meth:`flush` (fsync), :meth:`compact` and :meth:`close`. A
    :class:`~oma_component.observability.TraceStoreExporter` over it is how a batching sink
    fills it."""

    def __init__(self, log: DurableLog, replay: _Replay, now: Optional[Callable[[], float]],
                 on_diagnostic: Optional[Callable[[Any], None]]) -> None:
        self._log, self._memory, self._now, self._on_diagnostic = log, replay.memory, now, on_diagnostic

    @classmethod
    def open(cls, path: Union[str, "os.PathLike[str]"], *, now: Optional[Callable[[], float]] = None,
             on_diagnostic: Optional[Callable[[Any], None]] = None) -> "FileTraceStore":
        """Opens (or creates, mode 0600, with its directory) the store at ``path``, replays
        it and cuts off an incomplete tail; ``on_diagnostic`` hears of that (file diagnostics)
        and of records kept out on append (store diagnostics)."""
        text = os.fspath(path) if isinstance(path, os.PathLike) else path
        if not isinstance(text, str) or not text or "\0" in text:
            raise FileTraceStoreError("INVALID_PATH", "FileTraceStore path must be a non-empty filesystem path.", "open")
        log = DurableLog(os.path.abspath(text), _FORMAT, on_diagnostic)
        replay = log.open(lambda: _Replay(now))
        assert isinstance(replay, _Replay)
        return cls(log, replay, now, on_diagnostic)

    @property
    def file_path(self) -> str:
        return self._log.path

    @property
    def compaction_temp_path(self) -> str:
        return self._log.temp_path

    @property
    def is_closed(self) -> bool:
        return self._log.state == "closed"

    def get_diagnostics(self) -> List[Dict[str, Any]]:
        """What opening the file reported, as copies."""
        return [dict(d) for d in self._log.diagnostics]

    def append(self, records: Sequence[TraceRecord]) -> AppendResult:
        try:
            snapshot: Any = json.loads(json.dumps(list(records), allow_nan=False)) \
                if isinstance(records, (list, tuple)) else records
        except (TypeError, ValueError):
            raise TraceStoreError("INVALID_ARGUMENT", "records must be JSON-serializable.", "records") from None

        def run() -> AppendResult:
            result = self._memory.append(snapshot)
            if snapshot:
                self._mutate("append", snapshot)
            for diagnostic in result["diagnostics"]:
                self._tell(diagnostic)
            return result

        return self._log.run(run)

    def get_run(self, run_id: str, *, include_records: bool = False) -> Optional[StoredRun]:
        return self._log.run(lambda: self._memory.get_run(run_id, include_records=include_records))

    def query_runs(self, **query: Any) -> Page:
        return self._log.run(lambda: self._memory.query_runs(**query))

    def delete_run(self, run_id: str) -> DeleteResult:
        return self._log.run(lambda: self._persist(self._memory.delete_run(run_id)))

    def delete(self, **query: Any) -> DeleteResult:
        return self._log.run(lambda: self._persist(self._memory.delete(**query)))

    def apply_retention(self, *, max_age_ms: Optional[float] = None, max_runs: Optional[int] = None,
                        statuses: Optional[Sequence[str]] = None) -> DeleteResult:
        return self._log.run(lambda: self._persist(
            self._memory.apply_retention(max_age_ms=max_age_ms, max_runs=max_runs, statuses=statuses)))

    def records(self) -> List[TraceRecord]:
        """Every record kept, by run in the order runs started (copies)."""
        return self._log.run(self._memory.records)

    def flush(self) -> None:
        """fsyncs every write that completed before the call."""
        self._log.run(lambda: self._log.sync("flush"))

    def compact(self) -> Dict[str, int]:
        """Rewrites the file with only the live records (``{"recordsWritten",
        "fileSizeBytes"}``), through a temp file beside it and an atomic rename."""
        return self._log.run(lambda: self._log.compact(self._memory.records()))

    def close(self) -> None:
        """fsyncs and refuses later operations (``CLOSED``); idempotent."""
        with self._log.lock:
            self._log.close()

    def _tell(self, diagnostic: TraceStoreDiagnostic) -> None:
        if self._on_diagnostic is not None:
            try:
                self._on_diagnostic(dict(diagnostic))
            except Exception:  # noqa: BLE001 - diagnostics never affect storage
                pass

    def _persist(self, result: DeleteResult) -> DeleteResult:
        if result["runIds"]:
            self._mutate("delete", [{"runId": run} for run in result["runIds"]])
        return result

    def _mutate(self, operation: Operation, payloads: Sequence[Any]) -> None:
        try:
            self._log.write(operation, payloads)
        except DurableFileError as error:
            if self._log.state != "failed":
                try:
                    replay = self._log.read(lambda: _Replay(self._now), repair=False)
                    assert isinstance(replay, _Replay)
                    self._memory = replay.memory
                except DurableFileError:
                    self._log.state = "failed"
                    raise FileTraceStoreError("RECOVERY_REQUIRED",
                                              "FileTraceStore could not rebuild state after a failed mutation.",
                                              "rollback", self._log.path) from None
            raise error


__all__ = ["FileTraceStore", "FileTraceStoreError", "FILE_TRACE_STORE_FORMAT", "FILE_TRACE_STORE_FORMAT_VERSION"]

