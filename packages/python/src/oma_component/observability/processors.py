"""OMA's record processors: :class:`FilteringSink` (keeps the records a predicate accepts) and
:class:`SensitiveDataProcessor` (the privacy boundary in front of a sink: an optional attribute
allowlist, credentials and reasoning removed, content kept only where the capture policy allows,
secrets redacted, strings cut), whose rule is the component's."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, cast

from .._codec import _well_formed
from .._errors import OmaError
from .._runtime import Runtime, default_runtime
from ._types import FlushResult, TraceCapturePolicy, TraceRecord, TraceSinkStats
from .sink import TraceSink, stats_of

TraceFilter = Callable[[TraceRecord], bool]


class _DelegatingSink:
    def __init__(self, sink: TraceSink) -> None:
        if not callable(getattr(sink, "emit", None)):
            raise TypeError("sink must be a trace sink (it has no emit method)")
        self._sink = sink

    def force_flush(self, *, timeout_ms: Optional[float] = None) -> FlushResult:
        return self._sink.force_flush(timeout_ms=timeout_ms)

    def shutdown(self, *, timeout_ms: Optional[float] = None) -> FlushResult:
        return self._sink.shutdown(timeout_ms=timeout_ms)

    def get_stats(self) -> TraceSinkStats:
        return stats_of(self._sink)


class FilteringSink(_DelegatingSink):
    """Hands on the records ``keep(record)`` accepts; a predicate that raises drops the record,
    never the run."""

    def __init__(self, sink: TraceSink, keep: TraceFilter) -> None:
        super().__init__(sink)
        if not callable(keep):
            raise TypeError("keep must be a function of a record")
        self._keep = keep

    def emit(self, record: TraceRecord) -> None:
        try:
            if self._keep(record):
                self._sink.emit(record)
        except Exception:  # noqa: BLE001 - a filter is telemetry code
            pass


#: The capture policy's keys as this package spells them, and as the core (and OMA) spell them.
CAPTURE_NAMES: Mapping[str, str] = {
    "prompt": "prompt", "completion": "completion", "tool_input": "toolInput", "tool_output": "toolOutput",
    "error_message": "errorMessage", "stack": "stack", "stream_events": "streamEvents",
    "max_content_chars": "maxContentChars",
}
#: OMA's option names in the core's messages, as this package spells them.
_PYTHON_NAMES = {f"`capture.{oma}`": f"`capture.{py}`" for py, oma in CAPTURE_NAMES.items() if py != oma}
_PYTHON_NAMES["`attributeAllowlist`"] = "`attribute_allowlist`"


def _capture_json(capture: Optional[Mapping[str, Any]]) -> Optional[Dict[str, Any]]:
    """The capture policy with OMA's key names; a key this package does not spell raises
    ``TypeError`` naming it (the values are the component's to check)."""
    if capture is None:
        return None
    if not isinstance(capture, Mapping):
        raise TypeError("capture must be a dict")
    out: Dict[str, Any] = {}
    for key, value in capture.items():
        if key not in CAPTURE_NAMES:
            raise TypeError(f"capture has an unknown key {key!r}; known keys: {', '.join(CAPTURE_NAMES)}")
        out[CAPTURE_NAMES[key]] = value
    return out


def _process(options: str, record: Optional[str], runtime: Optional[Runtime] = None) -> Optional[str]:
    """The component's ``process-trace-record``; a refusal raised as ``TypeError`` (OMA's
    ``TypeError``) or ``ValueError`` (its ``RangeError``), the option named as this package spells it."""
    try:
        return cast(Optional[str], (runtime or default_runtime()).call("process-trace-record", options, record))
    except OmaError as e:
        message = e.message
        for oma, python in _PYTHON_NAMES.items():
            message = message.replace(oma, python)
        if e.name == "RangeError":
            raise ValueError(message) from None
        if e.name == "TypeError":
            raise TypeError(message) from None
        raise


def processor_options(attribute_allowlist: Optional[Sequence[str]] = None,
                      capture: Optional[TraceCapturePolicy] = None) -> str:
    """OMA's ``SensitiveDataProcessorOptions`` (JSON) of this package's arguments, checked by the
    component: an option that is not OMA's raises ``TypeError`` (unknown, or of the wrong type)
    or ``ValueError`` (not one of its choices), naming it."""
    options: Dict[str, Any] = {}
    if attribute_allowlist is not None:
        if isinstance(attribute_allowlist, (str, bytes)) or not isinstance(attribute_allowlist, Iterable):
            raise TypeError("attribute_allowlist must be a list of attribute names")
        options["attributeAllowlist"] = list(attribute_allowlist)
    policy = _capture_json(capture)
    if policy is not None:
        options["capture"] = policy
    text = _well_formed(json.dumps(options, ensure_ascii=False, separators=(",", ":"), default=str))
    _process(text, None)
    return text


class SensitiveDataProcessor(_DelegatingSink):
    """Hands each record on as OMA's sensitive-data processing leaves it: the keys of
    ``attribute_allowlist`` only (when given); no key naming a credential (authorization,
    cookie, api key, password, secret, access/refresh token, private key) or reasoning content;
    prompt, completion, tool input and tool output keys only where ``capture`` says
    ``"redacted"``; every string value redacted and cut to ``max_content_chars``. Stream chunk
    events are dropped with ``stream_events="none"``. A span end's status message is redacted
    and cut to 256 characters, its error message to 1024 (left out with
    ``error_message="code-only"``). Reasoning content has no opt-in. The rule is the
    component's (``process-trace-record``, the processing every record of a run already passed),
    which checks the options too: one that is not OMA's raises ``TypeError`` or ``ValueError``
    naming it. A record the component cannot read is dropped."""

    def __init__(self, sink: TraceSink, *, attribute_allowlist: Optional[Sequence[str]] = None,
                 capture: Optional[TraceCapturePolicy] = None) -> None:
        super().__init__(sink)
        self._options = processor_options(attribute_allowlist, capture)

    def emit(self, record: TraceRecord) -> None:
        try:
            processed = self.process(record)
        except Exception:  # noqa: BLE001 - a malformed record is dropped, never raised into the run
            return
        if processed is not None:
            self._sink.emit(processed)

    def process(self, record: TraceRecord) -> Optional[TraceRecord]:
        """The record as the wrapped sink gets it, or ``None`` when it is dropped. The component
        answers a record its rule leaves as it is with the text it was given, and such a record
        is handed on as a copy made here instead of one read from that text."""
        text = _well_formed(json.dumps(record, ensure_ascii=False, separators=(",", ":")))
        processed = _process(self._options, text)
        if processed is None:
            return None
        if processed == text:
            return _copy_of(record)
        return cast(TraceRecord, json.loads(processed))


def _copy_of(record: TraceRecord) -> TraceRecord:
    """A new record with the fields of ``record``, its attributes, status and error copied (the
    ones processing may change), as OMA's processor hands on a new record even when nothing
    changed."""
    copy: Dict[str, Any] = dict(record)
    for key in ("attributes", "status", "error"):
        value = copy.get(key)
        if isinstance(value, dict):
            copy[key] = dict(value)
    return cast(TraceRecord, copy)
