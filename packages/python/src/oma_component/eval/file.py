"""OMA's ``FileEvalStore`` (``@open-multi-agent/core/eval/file``): the in-memory evaluation
store kept in a durable NDJSON file (format ``oma.file_eval_store`` 1, the same file the
JavaScript package writes), for one process at a time."""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Literal, Optional, Sequence, Union

from .._durable import DurableFileError, DurableLog, Format, Operation, Replay, SchemaMajorError
from ..observability.store import AppendResult, DeleteResult
from ._types import EvalRecord
from ._values import json_copy
from .store import EvalPage, EvalStoreError, InMemoryEvalStore

FILE_EVAL_STORE_FORMAT = "oma.file_eval_store"
FILE_EVAL_STORE_FORMAT_VERSION = 1


class FileEvalStoreError(DurableFileError):
    """The file store's lifecycle or file-system failure (OMA's codes: ``INVALID_PATH``,
    ``OPEN_FAILED``, ``READ_FAILED``, ``WRITE_FAILED``, ``SYNC_FAILED``, ``CLOSE_FAILED``,
    ``CORRUPT_FILE``, ``UNSUPPORTED_FILE_FORMAT``, ``UNSUPPORTED_EVAL_SCHEMA``,
    ``RECOVERY_FAILED``, ``STALE_COMPACTION_FILE``, ``RENAME_FAILED``, ``COMPACTION_FAILED``,
    ``CLOSED``, ``RECOVERY_REQUIRED``); never holds a record."""

    name = "FileEvalStoreError"


_FORMAT = Format(name=FILE_EVAL_STORE_FORMAT, schema_key="evalSchemaMajor", schema_major=1, label="FileEvalStore",
                 error=FileEvalStoreError, unsupported_schema_code="UNSUPPORTED_EVAL_SCHEMA",
                 schema_words="evaluation schema")


class _Replay(Replay):
    def __init__(self, now: Optional[Callable[[], float]]) -> None:
        self.memory = InMemoryEvalStore(now=now)
        super().__init__(self._apply)

    def _apply(self, operation: Operation, payloads: List[Any]) -> None:
        if operation == "append":
            try:
                self.memory.append(payloads)
            except EvalStoreError as error:
                if error.code == "UNSUPPORTED_SCHEMA_VERSION":
                    raise SchemaMajorError() from None
                raise
            return
        ids = []
        for payload in payloads:
            if not isinstance(payload, dict) or not isinstance(payload.get("recordId"), str) or not payload["recordId"]:
                raise ValueError("invalid delete payload")
            ids.append(payload["recordId"])
        self.memory.delete_record_ids(ids)


class FileEvalStore:
    """An evaluation store in a file (see the module); open it with :meth:`open`. Methods are
    those of :class:`~oma_component.eval.InMemoryEvalStore`, each written to the file before
    it returns (a write that fails is cut back and raises, the store as it was), plus
    :meth:`flush` (fsync), :meth:`compact` and :meth:`close`."""

    def __init__(self, log: DurableLog, replay: _Replay, now: Optional[Callable[[], float]]) -> None:
        self._log, self._memory, self._now = log, replay.memory, now

    @classmethod
    def open(cls, path: Union[str, "os.PathLike[str]"], *, now: Optional[Callable[[], float]] = None,
             on_diagnostic: Optional[Callable[[Dict[str, Any]], None]] = None) -> "FileEvalStore":
        """Opens (or creates, mode 0600, with its directory) the store at ``path``, replays
        it and cuts off an incomplete tail (reported through ``on_diagnostic`` and
        :meth:`get_diagnostics`)."""
        text = os.fspath(path) if isinstance(path, os.PathLike) else path
        if not isinstance(text, str) or not text or "\0" in text:
            raise FileEvalStoreError("INVALID_PATH", "FileEvalStore path must be a non-empty filesystem path.", "open")
        log = DurableLog(os.path.abspath(text), _FORMAT, on_diagnostic)
        replay = log.open(lambda: _Replay(now))
        assert isinstance(replay, _Replay)
        return cls(log, replay, now)

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
        """What opening the file reported (partial lines, incomplete batches, stale temp
        files), as copies."""
        return [dict(d) for d in self._log.diagnostics]

    def append(self, records: Sequence[EvalRecord]) -> AppendResult:
        try:
            snapshot = json_copy(list(records)) if isinstance(records, (list, tuple)) else records
        except (TypeError, ValueError):
            raise EvalStoreError("INVALID_ARGUMENT", "records must be JSON-serializable.", "records") from None

        def run() -> AppendResult:
            result = self._memory.append(snapshot)
            if snapshot:
                self._mutate("append", snapshot)
            return result

        return self._log.run(run)

    def query(self, **query: Any) -> EvalPage:
        return self._log.run(lambda: self._memory.query(**query))

    def delete(self, *, eval_run_id: Union[str, Sequence[str], None] = None, eval_set_name: Optional[str] = None,
               before: Optional[str] = None) -> DeleteResult:
        return self._log.run(lambda: self._deleting(
            lambda: self._memory.delete(eval_run_id=eval_run_id, eval_set_name=eval_set_name, before=before)))

    def apply_retention(self, *, max_age_ms: Optional[float] = None, max_records: Optional[int] = None,
                        sources: Optional[Sequence[Literal["offline", "online"]]] = None) -> DeleteResult:
        return self._log.run(lambda: self._deleting(
            lambda: self._memory.apply_retention(max_age_ms=max_age_ms, max_records=max_records, sources=sources)))

    def records(self) -> List[EvalRecord]:
        """Every record, in the order they were appended (copies)."""
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

    def _deleting(self, delete: Callable[[], DeleteResult]) -> DeleteResult:
        before = [r["recordId"] for r in self._memory.records()]
        result = delete()
        remaining = {r["recordId"] for r in self._memory.records()}
        gone = [i for i in before if i not in remaining]
        if gone:
            self._mutate("delete", [{"recordId": i} for i in gone])
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
                    raise FileEvalStoreError("RECOVERY_REQUIRED",
                                             "FileEvalStore could not rebuild state after a failed mutation.",
                                             "rollback", self._log.path) from None
            raise error


__all__ = ["FileEvalStore", "FileEvalStoreError", "FILE_EVAL_STORE_FORMAT", "FILE_EVAL_STORE_FORMAT_VERSION"]
