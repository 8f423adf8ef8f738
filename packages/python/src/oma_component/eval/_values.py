"""Small shared pieces of the evaluation modules: trace attribute values, JSON copies, and an
exception described as OMA describes a failure (``errorInfo``); ``js_number`` writes OMA's
numbers in messages as JavaScript writes them."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any, Dict, Optional

from .._codec import redact_sensitive_text
from .._jsjson import js_number as js_number
from .._errors import EgressPolicyError, LLMCallTimeoutError, OmaError, TokenBudgetExceededError
from .._types import StructuredTraceError


class ScorerTimeoutError(TimeoutError):
    """A scorer that did not answer within its ``timeout_ms`` (named ``TimeoutError``, as OMA
    names it)."""

    name = "TimeoutError"

    def __init__(self, scorer: str, timeout_ms: float) -> None:
        super().__init__(f'Scorer "{scorer}" timed out after {js_number(timeout_ms)}ms.')


def is_trace_attribute(value: Any) -> bool:
    """A string, finite number or boolean, or a list of one kind of them."""
    if isinstance(value, (str, bool)):
        return True
    if isinstance(value, (int, float)):
        return math.isfinite(value)
    if not isinstance(value, list):
        return False
    if not value:
        return True
    kinds = {"number" if isinstance(v, (int, float)) and not isinstance(v, bool) else type(v).__name__ for v in value}
    return len(kinds) == 1 and all(
        isinstance(v, (str, bool)) or (isinstance(v, (int, float)) and math.isfinite(v)) for v in value)


def json_copy(value: Any) -> Any:
    """A deep copy through JSON (raises ``TypeError``/``ValueError`` for what JSON cannot hold)."""
    return json.loads(json.dumps(value, allow_nan=False))


def _code(error: BaseException) -> Optional[str]:
    code = getattr(error, "code", None)
    if isinstance(code, bool):
        return None
    if isinstance(code, (str, int)):
        return str(code)
    return None


def _status(error: BaseException) -> Optional[int]:
    for name in ("http_status", "status", "status_code"):
        value = getattr(error, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _retryable(error: BaseException) -> bool:
    """OMA's ``isRetryableError``: an OMA error says so itself; a cancellation is not; an error
    with an HTTP status of 400-499 other than 408, 409 and 429 is not; anything else is (another
    attempt might succeed)."""
    if isinstance(error, OmaError):
        return bool(getattr(error, "retryable", False))
    if isinstance(error, asyncio.CancelledError):
        return False
    status = _status(error)
    if status is None or status in (408, 409, 429):
        return True
    return not 400 <= status < 500


def error_info(error: BaseException, kind: Optional[str] = None) -> StructuredTraceError:
    """OMA's ``errorInfo`` of an exception: its kind (budget, timeout, validation for an egress
    refusal, cancellation, provider when it has an HTTP status, else ``kind`` or unknown), its
    name, code and HTTP status, its message redacted and cut to 1024 characters, and whether
    it is retryable (OMA's rule, :func:`_retryable`)."""
    resolved = kind or "unknown"
    if isinstance(error, TokenBudgetExceededError):
        resolved = "budget"
    elif isinstance(error, LLMCallTimeoutError):
        resolved = "timeout"
    elif isinstance(error, EgressPolicyError):
        resolved = "validation"
    elif isinstance(error, asyncio.CancelledError):
        resolved = "cancellation"
    elif kind is None and _status(error) is not None:
        resolved = "provider"
    info: Dict[str, Any] = {"kind": resolved}
    code = _code(error)
    if code is not None:
        info["code"] = code
    info["name"] = error.name if isinstance(error, (OmaError, ScorerTimeoutError)) else type(error).__name__
    text = error.message if isinstance(error, OmaError) else str(error)
    if text:
        info["message"] = redact_sensitive_text(text)[:1024]
    info["retryable"] = _retryable(error)
    status = _status(error)
    if status is not None:
        info["httpStatus"] = status
    return info  # type: ignore[return-value]
