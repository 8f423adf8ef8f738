"""OMA's ``TraceStoreExporter``: a :class:`TraceExporter` that appends each batch to a trace
store. Exporting a batch twice is harmless: stores keep one copy of each ``recordId``."""

from __future__ import annotations

import threading
from typing import Sequence

from ._types import ExportResult, TraceRecord
from .store import TraceStore, TraceStoreError


class TraceStoreExporter:
    """Appends batches to ``store``. A record the store refuses (a :class:`TraceStoreError`)
    fails the batch for good (``STORE_UNSUPPORTED_SCHEMA_VERSION`` or
    ``STORE_VALIDATION_FAILED``); any other exception is retryable (``STORE_APPEND_FAILED``)."""

    def __init__(self, store: TraceStore) -> None:
        if not callable(getattr(store, "append", None)):
            raise TypeError("store must be a trace store (it has no append method)")
        self._store = store

    def export(self, records: Sequence[TraceRecord], signal: threading.Event) -> ExportResult:
        if signal.is_set():
            return {"status": "retryable", "exported": 0, "code": "STORE_EXPORT_ABORTED"}
        try:
            self._store.append(records)
        except TraceStoreError as error:
            code = ("STORE_UNSUPPORTED_SCHEMA_VERSION" if error.code == "UNSUPPORTED_SCHEMA_VERSION"
                    else "STORE_VALIDATION_FAILED")
            return {"status": "failure", "exported": 0, "code": code}
        except Exception:  # noqa: BLE001 - a store that failed may succeed on a retry
            return {"status": "retryable", "exported": 0, "code": "STORE_APPEND_FAILED"}
        return {"status": "success", "exported": len(records)}
