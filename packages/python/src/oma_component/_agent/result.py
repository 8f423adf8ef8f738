"""A run's result in OMA's ``AgentRunResult`` form (the JavaScript package's keys, in its order),
the result of a run the host loop could not finish or that was cancelled, a stream's last event,
and a run's identity."""

from __future__ import annotations

import secrets
import uuid
from typing import Any, Dict, Mapping, Optional, cast

from .._errors import OmaError, error_from_info
from .._types import AgentRunResult, RunIdentity, StreamEvent


def message_of(error: BaseException) -> str:
    """An exception's text as a tool, hook or backend failure shows it (the message only, as
    JavaScript shows ``error.message``)."""
    if isinstance(error, OmaError):
        return error.message
    return str(error)


def new_identity(run_id: Optional[str]) -> RunIdentity:
    """OMA's ``RunIdentity`` for a new run: ``run_id`` (1 to 128 characters) or a UUID, attempt
    1, a random W3C trace id and root span id."""
    if run_id is not None and (not isinstance(run_id, str) or not 1 <= len(run_id) <= 128):
        raise TypeError("run_id must be a string of 1 to 128 characters")
    return {"runId": run_id if run_id is not None else str(uuid.uuid4()), "attempt": 1,
            "traceId": secrets.token_hex(16), "rootSpanId": secrets.token_hex(8)}


def run_result(raw: Mapping[str, Any], identity: RunIdentity, metadata: Optional[Mapping[str, Any]]) -> AgentRunResult:
    """The component's result in OMA's ``AgentRunResult`` form, with OMA's keys in OMA's order
    (the JavaScript package's): ``status`` on success too, the run's ``identity``,
    ``structured`` (``None`` unless the answer matched the output schema), ``metadata`` when given, and ``error`` (the exception) for a
    failure other than a spent budget."""
    success = bool(raw.get("success"))
    output = raw.get("output", "")
    status = raw.get("status") or ({"code": "ok"} if success else {"code": "error", "message": str(output)[:256]})
    out: Dict[str, Any] = {"success": success, "identity": identity, "status": status}
    if raw.get("errorInfo"):
        out["errorInfo"] = raw["errorInfo"]
    out["output"] = output
    out["messages"] = raw.get("messages", [])
    out["tokenUsage"] = raw.get("tokenUsage", {"input_tokens": 0, "output_tokens": 0})
    out["toolCalls"] = raw.get("toolCalls", [])
    out["structured"] = raw.get("structured")
    if raw.get("loopDetected"):
        out["loopDetected"] = True
    if raw.get("budgetExceeded"):
        out["budgetExceeded"] = True
    if metadata is not None:
        out["metadata"] = dict(metadata)
    out["turns"] = raw.get("turns", 0)
    if not success and not raw.get("budgetExceeded"):
        out["error"] = error_from_info(raw.get("errorInfo") or {"name": "Error", "message": output})
    return cast(AgentRunResult, out)


def internal_failure(error: BaseException) -> AgentRunResult:
    """A run the host loop could not finish, as a failed result (as the JavaScript package
    reports it): nothing after the input's check raises, except a trap."""
    message = message_of(error)
    info: Dict[str, Any] = {"kind": "unknown"}
    code = getattr(error, "code", None)
    if isinstance(code, str):
        info["code"] = code
    info.update(name=getattr(error, "name", None) or type(error).__name__, message=message[:1024], retryable=False)
    return cast(AgentRunResult, {
        "success": False, "output": message, "messages": [], "tokenUsage": {"input_tokens": 0, "output_tokens": 0},
        "toolCalls": [], "turns": 0, "status": {"code": "error", "message": message[:256]}, "errorInfo": info,
    })


_CANCELLED_MESSAGE = "Run cancelled by caller."


def cancelled_raw() -> Dict[str, Any]:
    """A cancelled run, as the JavaScript package reports it: no messages, no usage."""
    info = {"kind": "cancellation", "name": "AbortError", "message": _CANCELLED_MESSAGE, "retryable": False}
    return {"success": False, "output": _CANCELLED_MESSAGE, "messages": [],
            "tokenUsage": {"input_tokens": 0, "output_tokens": 0}, "toolCalls": [], "turns": 0,
            "status": {"code": "cancelled", "message": _CANCELLED_MESSAGE}, "errorInfo": info}


def last_event(result: AgentRunResult) -> StreamEvent:
    """A stream's last event: ``done`` with the result (a run stopped by its token budget too,
    after its ``budget_exceeded`` event), or ``error`` with the error (whose ``.result`` is the
    result), as in OMA."""
    if result.get("success") or result.get("budgetExceeded"):
        return {"type": "done", "data": result}
    error = result.get("error")
    if not isinstance(error, OmaError):
        info: Mapping[str, Any] = result.get("errorInfo") or {"name": "Error", "message": result.get("output", "")}
        error = error_from_info(info)
    error.result = result
    return {"type": "error", "data": error}
