"""Small shared pieces of the evaluation modules: trace attribute values, JSON copies, and an
exception described as OMA describes a failure (``errorInfo``); ``js_number`` writes OMA's
numbers in messages as JavaScript writes them."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any, Dict, Optional, Tuple

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


def _status(error: BaseException) -> Optional[float]:
    """The HTTP status an error carries, as OMA reads it: this package's own errors carry it as
    ``http_status``; any other error as ``status`` or, when that is absent or ``None``,
    ``status_code`` (the provider SDKs' spelling). Only a finite number counts."""
    if isinstance(error, OmaError):
        value = error.http_status
    else:
        value = getattr(error, "status", None)
        if value is None:
            value = getattr(error, "status_code", None)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return value


def _is_oma(error: BaseException, classes: Tuple[type, ...], *names: str) -> bool:
    """Whether ``error`` is of one of OMA's classes ``names``: an instance of one of ``classes``,
    or one of this package's errors carrying one of the names (the component reports classes the
    package has no class for, such as a cost budget or a routing timeout, as an
    :class:`OmaError` carrying OMA's name)."""
    return isinstance(error, classes) or (isinstance(error, OmaError) and error.name in names)


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


def classify_run_failure(
    error: BaseException,
    *,
    kind: Optional[str] = None,
    provider: Optional[str] = None,
    attempt: Optional[int] = None,
    status_code: Optional[str] = None,
) -> Dict[str, Any]:
    """OMA's ``classifyRunFailure``: the ``status`` (``{code, message?}``) and ``errorInfo`` of a
    failure. A spent token or cost budget is ``budget_exhausted`` (kind ``budget``), a model call
    or routing timeout ``timeout``, an egress refusal ``rejected`` (kind ``validation``), a
    cancellation ``cancelled``; anything else keeps ``status_code`` (default ``error``) and is of
    kind ``provider`` when it carries an HTTP status or ``provider`` is named, unless ``kind`` is
    given. Messages are redacted and cut to 256 (status) and 1024 (errorInfo) characters; the
    error's ``__cause__`` is not read."""
    code = status_code if status_code is not None else "error"
    resolved = kind if kind is not None else "unknown"
    status = _status(error)
    if _is_oma(error, (TokenBudgetExceededError,), "TokenBudgetExceededError", "CostBudgetExceededError"):
        code, resolved = "budget_exhausted", "budget"
    elif _is_oma(error, (LLMCallTimeoutError,), "LLMCallTimeoutError", "RoutingTimeoutError"):
        code, resolved = "timeout", "timeout"
    elif _is_oma(error, (EgressPolicyError,), "EgressPolicyError"):
        code, resolved = "rejected", "validation"
    elif isinstance(error, asyncio.CancelledError):
        code, resolved = "cancelled", "cancellation"
    elif kind is None and (status is not None or provider is not None):
        resolved = "provider"
    text = error.message if isinstance(error, OmaError) else str(error)
    redacted = redact_sensitive_text(text) if text else ""
    run_status: Dict[str, Any] = {"code": code}
    if redacted:
        run_status["message"] = redacted[:256]
    info: Dict[str, Any] = {"kind": resolved}
    error_code = _code(error)
    if error_code is not None:
        info["code"] = error_code
    info["name"] = error.name if isinstance(error, (OmaError, ScorerTimeoutError)) else type(error).__name__
    if redacted:
        info["message"] = redacted[:1024]
    info["retryable"] = _retryable(error)
    if status is not None:
        info["httpStatus"] = status
    if provider is not None:
        info["provider"] = provider
    if attempt is not None:
        info["attempt"] = attempt
    return {"status": run_status, "errorInfo": info}


def error_info(error: BaseException, kind: Optional[str] = None) -> StructuredTraceError:
    """The ``errorInfo`` half of :func:`classify_run_failure` (what an evaluation record keeps of
    a scorer's or target's failure)."""
    return classify_run_failure(error, kind=kind)["errorInfo"]  # type: ignore[no-any-return]
