"""The durable file both of OMA's file stores write (``FileEvalStore``, ``FileTraceStore``): an
append-only NDJSON log, one process and one instance per file.

The first line is a header naming the format, its version and the schema major of what it
holds. Every mutation (an append of records, a deletion by id) is a batch of lines: a
``batch_start`` with the item count and the SHA-256 of the items (each item's JSON text and a
newline), one ``batch_item`` per item, a ``batch_commit`` repeating count and checksum. On
opening, committed batches are replayed; an incomplete final batch or a partial last line is
reported and cut off, so an interrupted write is replayed whole or not at all; anything else
that does not parse is corruption, refused with the line it is on. JSON is written as
JavaScript writes it, so files move between the packages unchanged. A failed write is cut back
to where it began; compaction rewrites the live items through a temporary file and an atomic
rename. The file is created with mode 0600.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Literal, Optional, Sequence, TypeVar

from ._jsjson import dumps

T = TypeVar("T")

Operation = Literal["append", "delete"]

#: ``errno`` names for which a directory cannot be synced on this platform or file system.
_DIRECTORY_SYNC_UNSUPPORTED = {"EINVAL", "ENOTSUP", "EOPNOTSUPP", "EISDIR", "EPERM"}


class DurableFileError(Exception):
    """A file store's lifecycle or file-system failure, without any record in it: ``code``
    (``OPEN_FAILED``, ``CORRUPT_FILE``, ``RECOVERY_REQUIRED``, ...), ``operation``, ``path``,
    ``line_number`` and ``cause_code`` (the ``errno`` name of the cause)."""

    def __init__(self, code: str, message: str, operation: Optional[str] = None, path: Optional[str] = None,
                 line_number: Optional[int] = None, cause_code: Optional[str] = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.operation = operation
        self.path = path
        self.line_number = line_number
        self.cause_code = cause_code


def _errno(error: BaseException) -> Optional[str]:
    number = getattr(error, "errno", None)
    if isinstance(number, int):
        import errno as errno_names

        return errno_names.errorcode.get(number)
    return None


def checksum(payloads: Sequence[Any]) -> str:
    """The SHA-256 (hex) of each payload's JSON text and a newline."""
    digest = hashlib.sha256()
    for payload in payloads:
        digest.update(dumps(payload).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


def batch_text(operation: Operation, payloads: Sequence[Any], batch_id: Optional[str] = None) -> str:
    """The lines of one batch, each ending in a newline."""
    ident = batch_id or str(uuid.uuid4())
    sha = checksum(payloads)
    lines = [dumps({"type": "batch_start", "formatVersion": 1, "batchId": ident, "operation": operation,
                    "itemCount": len(payloads), "payloadSha256": sha})]
    lines += [dumps({"type": "batch_item", "batchId": ident, "index": i, "payload": p}) for i, p in enumerate(payloads)]
    lines.append(dumps({"type": "batch_commit", "batchId": ident, "itemCount": len(payloads), "payloadSha256": sha}))
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Format:
    """One file store's format: its name, the header's schema field and major, the class name
    its messages start with, and the error class it raises."""

    name: str
    schema_key: str
    schema_major: int
    label: str
    error: type
    unsupported_schema_code: str
    schema_words: str

    def header(self) -> Dict[str, Any]:
        return {"type": "file_header", "format": self.name, "formatVersion": 1, self.schema_key: self.schema_major}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _non_empty(value: Any) -> bool:
    return isinstance(value, str) and len(value) > 0


class Replay:
    """What a store does with a committed batch while the file is read (append its records or
    delete by the ids); raising ``SchemaMajorError`` marks an unsupported schema."""

    def __init__(self, apply: Callable[[Operation, List[Any]], None]) -> None:
        self.apply = apply


class SchemaMajorError(Exception):
    """Raised by a replay for records of a schema major the store does not take."""


class DurableLog:
    """The file of one store (see the module). Every method holds the log's lock: one
    operation at a time, in call order."""

    def __init__(self, path: str, fmt: Format, on_diagnostic: Optional[Callable[[Dict[str, Any]], None]]) -> None:
        self.path = path
        self.temp_path = f"{path}.compact.tmp"
        self.fmt = fmt
        self.lock = threading.RLock()
        self.state: Literal["open", "closing", "closed", "failed"] = "open"
        self.diagnostics: List[Dict[str, Any]] = []
        self._on_diagnostic = on_diagnostic

    # -- errors and diagnostics -------------------------------------------------------------

    def error(self, code: str, message: str, operation: str, cause: Optional[BaseException] = None,
              line: Optional[int] = None) -> DurableFileError:
        made: DurableFileError = self.fmt.error(code, message, operation, self.path, line,
                                                _errno(cause) if cause is not None else None)
        return made

    def corruption(self, message: str, line: int) -> DurableFileError:
        return self.error("CORRUPT_FILE", message, "recover", line=line)

    def diagnose(self, code: str, message: str, line: Optional[int] = None) -> None:
        diagnostic: Dict[str, Any] = {"code": code, "severity": "warning", "message": message}
        if line is not None:
            diagnostic = {"code": code, "severity": "warning", "lineNumber": line, "message": message}
        self.diagnostics.append(diagnostic)
        if self._on_diagnostic is not None:
            try:
                self._on_diagnostic(dict(diagnostic))
            except Exception:  # noqa: BLE001 - diagnostics never affect storage
                pass

    # -- opening ----------------------------------------------------------------------------

    def open(self, replay: Callable[[], Replay]) -> Replay:
        """Creates the file when missing, then reads it back (cutting off an incomplete tail)."""
        temp_exists, target_exists = self._exists(self.temp_path), self._exists(self.path)
        if not target_exists and temp_exists:
            raise self.error("STALE_COMPACTION_FILE",
                             "A compaction temp file exists without the target file; refusing to create an empty store.",
                             "open")
        if not target_exists:
            self._create()
        if temp_exists:
            self.diagnose("stale_compaction_file",
                          "A stale compaction temp file was found; the committed target file remains authoritative.")
        made = self.read(replay, repair=True)
        if sys.platform == "win32":  # pragma: no cover - POSIX here
            self.diagnose("minimal_permissions_not_enforced",
                          "This platform does not enforce POSIX mode 0600; protect the file with platform access controls.")
        return made

    def _exists(self, path: str) -> bool:
        try:
            os.stat(path)
            return True
        except FileNotFoundError:
            return False
        except OSError as error:
            raise self.fmt.error("OPEN_FAILED", f"{self.fmt.label} could not inspect its filesystem path.", "open",
                                 path, None, _errno(error)) from None

    def _create(self) -> None:
        label = self.fmt.label
        try:
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return
        except OSError as error:
            raise self.error("OPEN_FAILED", f"{label} could not create its data file.", "open.create", error) from None
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, (dumps(self.fmt.header()) + "\n").encode("utf-8"))
            os.fsync(fd)
        except OSError as error:
            raise self.error("OPEN_FAILED", f"{label} could not create its data file.", "open.create", error) from None
        finally:
            os.close(fd)
        self.sync_directory("open.create")

    # -- reading ----------------------------------------------------------------------------

    def read(self, replay: Callable[[], Replay], repair: bool) -> Replay:
        """Replays the committed batches of the file into a fresh ``replay()``."""
        label = self.fmt.label
        try:
            with open(self.path, "rb") as f:
                raw = f.read()
        except OSError as error:
            raise self.error("READ_FAILED", f"{label} could not read its data file.", "recover.read", error) from None
        target = replay()
        offset, line_number, committed = 0, 0, 0
        header: Optional[Dict[str, Any]] = None
        pending: Optional[Dict[str, Any]] = None
        while offset < len(raw):
            newline = raw.find(b"\n", offset)
            if newline < 0:
                self.diagnose("trailing_partial_line", "A trailing partial NDJSON line was ignored and will be truncated.",
                              line_number + 1)
                break
            line_number += 1
            line = raw[offset:newline]
            following = newline + 1
            if not line:
                raise self.error("CORRUPT_FILE", f"{label} encountered an empty complete NDJSON line.", "recover",
                                 line=line_number)
            value = self._object(line, line_number)
            if header is None:
                header = self._header(value, line_number)
                committed = offset = following
                continue
            kind = value.get("type")
            if kind == "batch_start":
                if pending is not None:
                    raise self.corruption("A new batch began before the prior batch committed.", line_number)
                self._check_start(value, line_number)
                pending = {"start": value, "payloads": [], "line": line_number}
            elif kind == "batch_item":
                if pending is None:
                    raise self.corruption("A batch item appeared without a batch start.", line_number)
                if not _non_empty(value.get("batchId")) or not _is_int(value.get("index")) or value["index"] < 0 \
                        or "payload" not in value:
                    raise self.corruption("A batch_item envelope is malformed.", line_number)
                if value["batchId"] != pending["start"]["batchId"] or value["index"] != len(pending["payloads"]):
                    raise self.corruption("A batch item has a mismatched id or non-contiguous index.", line_number)
                if len(pending["payloads"]) >= pending["start"]["itemCount"]:
                    raise self.corruption("A batch contains more items than declared.", line_number)
                pending["payloads"].append(value["payload"])
            elif kind == "batch_commit":
                if pending is None:
                    raise self.corruption("A batch commit appeared without a batch start.", line_number)
                if not _non_empty(value.get("batchId")) or not _is_int(value.get("itemCount")) \
                        or value["itemCount"] < 0 or not _non_empty(value.get("payloadSha256")):
                    raise self.corruption("A batch_commit envelope is malformed.", line_number)
                start = pending["start"]
                if (value["batchId"] != start["batchId"] or value["itemCount"] != start["itemCount"]
                        or len(pending["payloads"]) != start["itemCount"]
                        or value["payloadSha256"] != start["payloadSha256"]
                        or checksum(pending["payloads"]) != start["payloadSha256"]):
                    raise self.corruption("A committed batch failed its id, count, or checksum validation.", line_number)
                self._apply(target, start["operation"], pending["payloads"], line_number)
                pending = None
                committed = following
            else:
                raise self.corruption(f"{label} encountered an unknown envelope line type.", line_number)
            offset = following
        if header is None:
            raise self.error("CORRUPT_FILE", f"{label} has no complete version header.", "recover")
        partial = offset < len(raw)
        if pending is not None:
            self.diagnose("incomplete_batch", "An uncommitted trailing batch was ignored and will be truncated.",
                          pending["line"])
        if (partial or pending is not None) and repair:
            try:
                self._truncate(committed)
            except OSError as error:
                raise self.error("RECOVERY_FAILED", f"{label} could not truncate an incomplete tail during recovery.",
                                 "recover.truncate", error) from None
        return target

    def _object(self, line: bytes, number: int) -> Dict[str, Any]:
        try:
            value = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            value = None
        if not isinstance(value, dict):
            raise self.error("CORRUPT_FILE", f"{self.fmt.label} encountered an invalid complete NDJSON line.", "recover",
                             line=number)
        return value

    def _header(self, value: Dict[str, Any], line: int) -> Dict[str, Any]:
        fmt = self.fmt
        if value.get("type") != "file_header" or value.get("format") != fmt.name:
            raise self.corruption(f"{fmt.label} header format is invalid.", line)
        if value.get("formatVersion") != 1 or not _is_int(value.get("formatVersion")):
            raise self.error("UNSUPPORTED_FILE_FORMAT", f"{fmt.label} file format version is unsupported.",
                             "recover.header", line=line)
        if value.get(fmt.schema_key) != fmt.schema_major or not _is_int(value.get(fmt.schema_key)):
            raise self.error(fmt.unsupported_schema_code, f"{fmt.label} {fmt.schema_words} major is unsupported.",
                             "recover.header", line=line)
        return fmt.header()

    def _check_start(self, value: Dict[str, Any], line: int) -> None:
        if (value.get("formatVersion") != 1 or not _non_empty(value.get("batchId"))
                or value.get("operation") not in ("append", "delete") or not _is_int(value.get("itemCount"))
                or value["itemCount"] < 0 or not _non_empty(value.get("payloadSha256"))):
            raise self.corruption("A batch_start envelope is malformed.", line)

    def _apply(self, target: Replay, operation: Operation, payloads: List[Any], line: int) -> None:
        try:
            target.apply(operation, payloads)
        except SchemaMajorError:
            raise self.error(self.fmt.unsupported_schema_code,
                             f"A committed batch contains an unsupported {self.fmt.schema_words} major.",
                             "recover.batch", line=line) from None
        except Exception:  # noqa: BLE001 - any other refusal is corruption
            raise self.error("CORRUPT_FILE", "A committed batch contains invalid data.", "recover.batch",
                             line=line) from None

    # -- writing ----------------------------------------------------------------------------

    def check_usable(self) -> None:
        label = self.fmt.label
        if self.state == "failed":
            raise self.error("RECOVERY_REQUIRED", f"{label} requires reopen/recovery before further operations.",
                             "operation")
        if self.state != "open":
            raise self.error("CLOSED", f"{label} is closing or closed.", "operation")

    def write(self, operation: Operation, payloads: Sequence[Any]) -> None:
        """Appends one batch; a failed write is cut back (or the log fails for good)."""
        label = self.fmt.label
        try:
            start = os.stat(self.path).st_size
        except OSError as error:
            raise self.error("WRITE_FAILED", f"{label} could not inspect its data file before writing.", "append.stat",
                             error) from None
        try:
            with open(self.path, "ab") as f:
                f.write(batch_text(operation, payloads).encode("utf-8"))
        except OSError as error:
            failure = self.error("WRITE_FAILED", f"{label} append did not complete; the mutation was not acknowledged.",
                                 "append.write", error)
            try:
                self._truncate(start)
            except OSError as rollback:
                self.state = "failed"
                raise self.error("RECOVERY_REQUIRED", f"{label} could not roll back a failed append; reopen is required.",
                                 "append.rollback", rollback) from None
            raise failure from None

    def _truncate(self, length: int) -> None:
        fd = os.open(self.path, os.O_RDWR)
        try:
            os.ftruncate(fd, length)
            os.fsync(fd)
        finally:
            os.close(fd)

    def sync(self, operation: str) -> None:
        """fsyncs the file."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as error:
            raise self.error("SYNC_FAILED", f"{self.fmt.label} could not fsync its data file.", operation, error) from None

    def sync_directory(self, operation: str) -> None:
        try:
            fd = os.open(os.path.dirname(self.path) or ".", os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as error:
            if _errno(error) in _DIRECTORY_SYNC_UNSUPPORTED:
                self.diagnose("directory_sync_unsupported",
                              "The platform/filesystem does not support directory fsync; rename durability is best-effort.")
                return
            raise self.error("SYNC_FAILED",
                             f"{self.fmt.label} could not fsync the parent directory after an atomic rename.",
                             operation, error) from None

    def compact(self, payloads: Sequence[Any]) -> Dict[str, int]:
        """Rewrites the file as one append batch of ``payloads`` (through the temp file)."""
        label = self.fmt.label
        body = dumps(self.fmt.header()) + "\n"
        if payloads:
            body += batch_text("append", payloads, f"compact-{checksum(payloads)[:24]}")
        renamed = False
        try:
            fd = os.open(self.temp_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.fchmod(fd, 0o600)
                os.write(fd, body.encode("utf-8"))
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.replace(self.temp_path, self.path)
                renamed = True
            except OSError as error:
                raise self.error("RENAME_FAILED", f"{label} compaction could not atomically replace the target; the "
                                 "original remains authoritative.", "compact.rename", error) from None
            self.sync_directory("compact")
            return {"recordsWritten": len(payloads), "fileSizeBytes": os.stat(self.path).st_size}
        except DurableFileError:
            raise
        except OSError as error:
            message = (f"{label} replaced the compacted file but could not confirm the final durability step." if renamed
                       else f"{label} compaction failed before replacing the committed target file.")
            raise self.error("COMPACTION_FAILED", message, "compact", error) from None

    def close(self) -> None:
        """fsyncs and refuses later operations (idempotent)."""
        label = self.fmt.label
        if self.state == "closed":
            return
        if self.state == "failed":
            self.state = "closed"
            raise self.error("RECOVERY_REQUIRED", f"{label} cannot close cleanly after an unrecoverable write failure.",
                             "close")
        self.state = "closing"
        try:
            self.sync("close")
        finally:
            self.state = "closed"

    def run(self, operation: Callable[[], T]) -> T:
        """``operation()`` under the lock, after checking the log is usable."""
        with self.lock:
            self.check_usable()
            return operation()
