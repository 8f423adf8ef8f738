"""OMA's record processors: :class:`FilteringSink` (keeps the records a predicate accepts) and
:class:`SensitiveDataProcessor` (the privacy boundary in front of a sink: an optional attribute
allowlist, credentials and reasoning removed, content kept only where the capture policy allows,
secrets redacted, strings cut)."""

from __future__ import annotations

import re
from typing import Any, Callable, Dict, FrozenSet, Mapping, Optional, Sequence

from .._codec import redact_sensitive_text
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


_STRUCTURED_SECRET = re.compile(
    r"(^|[._-])(authorization|cookie|set_cookie|api[_-]?key|password|passwd|secret|access[_-]?token"
    r"|refresh[_-]?token|private[_-]?key)($|[._-])", re.IGNORECASE)
_REASONING_CONTENT = re.compile(
    r"(^|[._-])(reasoning|thinking|chain[_-]?of[_-]?thought|signed[_-]?reasoning)[._-](content|text|data)($|[._-])",
    re.IGNORECASE)

#: The capture policy's keys (snake_case) and what each may be.
_CAPTURE_CHOICES: Mapping[str, Sequence[Any]] = {
    "prompt": ("none", "redacted"), "completion": ("none", "redacted"), "tool_input": ("none", "redacted"),
    "tool_output": ("none", "redacted"), "error_message": ("code-only", "redacted"), "stack": (True, False),
    "stream_events": ("none", "first", "all"),
}
_CAPTURE_DEFAULTS: Mapping[str, Any] = {
    "prompt": "none", "completion": "none", "tool_input": "none", "tool_output": "none",
    "error_message": "redacted", "stack": False, "stream_events": "first", "max_content_chars": 4_096,
}


def capture_policy(capture: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """The capture policy with OMA's defaults; an unknown key or a value that is not one of
    its choices raises ``TypeError``/``ValueError`` naming it."""
    policy = dict(_CAPTURE_DEFAULTS)
    if capture is None:
        return policy
    if not isinstance(capture, Mapping):
        raise TypeError("capture must be a dict")
    for key, value in capture.items():
        if key not in _CAPTURE_DEFAULTS:
            raise TypeError(f"capture has an unknown key {key!r}; known keys: {', '.join(_CAPTURE_DEFAULTS)}")
        if key == "max_content_chars":
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"capture.max_content_chars must be an integer >= 0, got {value!r}")
        elif value not in _CAPTURE_CHOICES[key] or (key != "stack" and isinstance(value, bool)):
            choices = " or ".join(repr(c) for c in _CAPTURE_CHOICES[key])
            raise ValueError(f"capture.{key} must be {choices}, got {value!r}")
        policy[key] = value
    return policy


def _content_kind(key: str) -> Optional[str]:
    normal = key.lower().replace("-", "_")
    if "prompt" in normal:
        return "prompt"
    if "completion" in normal:
        return "completion"
    if "tool.input" in normal or "tool_input" in normal or "tool.arguments" in normal:
        return "tool_input"
    if "tool.output" in normal or "tool_output" in normal or "tool.result" in normal:
        return "tool_output"
    return None


def _safe_value(value: Any, max_chars: int) -> Any:
    if isinstance(value, str):
        return redact_sensitive_text(value)[:max_chars]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return [redact_sensitive_text(item)[:max_chars] for item in value]
    return value


class SensitiveDataProcessor(_DelegatingSink):
    """Hands each record on with its attributes filtered, in this order: the keys of
    ``attribute_allowlist`` only (when given); no key naming a credential (authorization,
    cookie, api key, password, secret, access/refresh token, private key) or reasoning content;
    prompt, completion, tool input and tool output keys only where ``capture`` says
    ``"redacted"``; every string value redacted and cut to ``max_content_chars``. Stream chunk
    events are dropped with ``stream_events="none"``. A span end's status message is redacted
    and cut to 256 characters, its error message to 1024 (left out with
    ``error_message="code-only"``). Reasoning content has no opt-in."""

    def __init__(self, sink: TraceSink, *, attribute_allowlist: Optional[Sequence[str]] = None,
                 capture: Optional[TraceCapturePolicy] = None) -> None:
        super().__init__(sink)
        if attribute_allowlist is not None and (isinstance(attribute_allowlist, (str, bytes))
                                                or not all(isinstance(k, str) for k in attribute_allowlist)):
            raise TypeError("attribute_allowlist must be a list of attribute names")
        self._allow: Optional[FrozenSet[str]] = None if attribute_allowlist is None else frozenset(attribute_allowlist)
        self._capture = capture_policy(capture)

    def emit(self, record: TraceRecord) -> None:
        try:
            processed = self.process(record)
        except Exception:  # noqa: BLE001 - a malformed record is dropped, never raised into the run
            return
        if processed is not None:
            self._sink.emit(processed)

    def process(self, record: TraceRecord) -> Optional[TraceRecord]:
        """The record as the wrapped sink gets it, or ``None`` when it is dropped."""
        capture = self._capture
        attributes: Dict[str, Any] = {}
        for key, value in record["attributes"].items():
            if self._allow is not None and key not in self._allow:
                continue
            if _STRUCTURED_SECRET.search(key) or _REASONING_CONTENT.search(key):
                continue
            kind = _content_kind(key)
            if kind is not None and capture[kind] == "none":
                continue
            attributes[key] = _safe_value(value, capture["max_content_chars"])
        out: Dict[str, Any] = dict(record)
        out["attributes"] = attributes
        if record["recordType"] == "span_event":
            if record["name"] == "stream_chunk" and capture["stream_events"] == "none":
                return None
            return out  # type: ignore[return-value]
        if record["recordType"] == "span_start":
            return out  # type: ignore[return-value]
        status: Dict[str, Any] = dict(record["status"])
        if status.get("message"):
            status["message"] = redact_sensitive_text(str(status["message"]))[:256]
        out["status"] = status
        error = record.get("error")
        if error is not None:
            error_out: Dict[str, Any] = dict(error)
            message = None if capture["error_message"] == "code-only" else error.get("message")
            if message:
                error_out["message"] = redact_sensitive_text(message)[:1024]
            else:
                error_out.pop("message", None)
            out["error"] = error_out
        return out  # type: ignore[return-value]
