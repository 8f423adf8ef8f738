"""Agents, tools, backends, and the host loop that drives a ``driver`` session (the sync API).

The asyncio API (``_aio.py``) drives the same sessions: the answers it gives are built here,
so both APIs answer every step alike (the same tool texts, the same events, the same failures).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import math
import os
import queue
import re
import secrets
import subprocess
import threading
import time
import uuid
import weakref
from dataclasses import dataclass, field, replace
from typing import (
    Any,
    Callable,
    Dict,
    Generator,
    Generic,
    Iterator,
    List,
    Mapping,
    Optional,
    ParamSpec,
    Sequence,
    Tuple,
    TypedDict,
    TypeVar,
    Union,
    cast,
    overload,
)

from wasmtime.component import Variant

from ._errors import ComponentTrapError, InvalidMessageError, OmaError, TokenBudgetExceededError, error_from_info
from ._http import DEFAULT_MAX_RESPONSE_BYTES, HttpClient, TransportFailure, default_client
from ._runtime import ChunkAnswer, Runtime, default_runtime, input_json, input_parts, record
from ._runtime import dumps as _dumps
from ._types import (
    AgentRunResult,
    BeforeRunContext,
    CallOptions,
    EvaluationCase,
    EvaluationOptions,
    LLMMessage,
    OmaTool,
    ProgressEvent,
    PromptInput,
    RunIdentity,
    RunInput,
    StreamEvent,
    ToolDefinition,
    ToolResultContent,
    ThinkingConfig,
    TraceEvent,
)

P = ParamSpec("P")
R = TypeVar("R")

#: A ``before_run`` hook: gets the context, returns ``{"prompt", "messages"?}`` (or awaits it).
BeforeRun = Callable[[BeforeRunContext], Any]
#: A progress or evaluation observer; what it raises is ignored.
Observer = Callable[[Any], Any]
#: A run's tool observers: ``on_tool_call(name, input)`` before a tool runs,
#: ``on_tool_result(name, {"data", "isError"})`` after; what they raise is ignored.
ToolCallObserver = Callable[[str, Dict[str, Any]], Any]


class CancelToken:
    """Cancels runs from any thread: give it as ``cancel=`` to ``run``, ``stream``, ``prompt``
    or ``run_agent`` (either API) and call :meth:`cancel`.

    The run ends at once with OMA's cancelled status (``{"code": "cancelled", "message": "Run
    cancelled by caller."}``, ``errorInfo.kind`` ``"cancellation"``; a stream's last event is
    ``error``): the request in flight is abandoned and its connection closed, a retry wait or a
    pending hook or tool is left (a tool's thread finishes on its own, its answer dropped), and a
    ``prompt`` leaves the history as it was. A token that is already cancelled sends nothing. One
    token may cancel several runs; it stays cancelled."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: List[Callable[[], None]] = []

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` was called."""
        return self._event.is_set()

    def cancel(self) -> None:
        """Cancels every run given this token (now and later); safe from any thread."""
        with self._lock:
            if self._event.is_set():
                return
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            try:
                callback()
            except Exception:  # noqa: BLE001 - a run's own wake-up; nothing to report
                pass

    def wait(self, seconds: Optional[float]) -> bool:
        """Waits up to ``seconds`` (for ever with ``None``) for the cancellation; whether it came."""
        return self._event.wait(seconds)

    def _subscribe(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Calls ``callback`` on cancellation (at once if already cancelled); returns the
        function that unsubscribes it."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)

                def unsubscribe() -> None:
                    with self._lock:
                        if callback in self._callbacks:
                            self._callbacks.remove(callback)

                return unsubscribe
        callback()
        return lambda: None


class _RunCancelled(Exception):
    """Raised inside the host loop when the run's :class:`CancelToken` fires."""


# -- tools and backends -----------------------------------------------------------------------


@dataclass
class ToolResult:
    """What a tool may return to say more than its content: ``is_error`` marks a failure.
    It is sent as the tool says it, as OMA sends ``ToolResult.isError``: ``True`` as
    ``is_error: true``, ``False`` as ``is_error: false`` (where the wire format has the field),
    ``None`` (the default) leaves the field out."""

    content: ToolResultContent
    is_error: Optional[bool] = None


class Tool(Generic[P, R]):
    """A tool the model may call. ``fn(input)`` gets the call's arguments as a dict and returns
    (or, for an ``async def``, awaits) a string, a list of OMA tool-result parts
    (``{"type": "text" | "image" | "file", ...}``), a :class:`ToolResult` (or OMA's
    ``{"data", "isError"}``), ``None`` (empty content), or any other JSON value (sent as its
    JSON text). What it raises is sent to the model as a failed result with the exception's
    message. A ``Tool`` is still callable as ``fn`` is, with ``fn``'s types."""

    #: Whether ``fn`` takes the tool context as a second argument (a tool given in OMA's shape).
    takes_context = False

    def __init__(self, name: str, description: str, input_schema: Mapping[str, Any], fn: Callable[P, R]) -> None:
        self.name = name
        self.description = description
        self.input_schema: Dict[str, Any] = dict(input_schema)
        self.fn: Callable[P, R] = fn

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def definition(self) -> ToolDefinition:
        """The tool as the model is told of it."""
        return {"name": self.name, "description": self.description, "inputSchema": self.input_schema}

    def __repr__(self) -> str:
        return f"Tool(name={self.name!r})"


@overload
def tool(fn: Callable[P, R], /) -> Tool[P, R]: ...


@overload
def tool(
    name: Optional[str] = None, description: str = "", input_schema: Optional[Mapping[str, Any]] = None
) -> Callable[[Callable[P, R]], Tool[P, R]]: ...


def tool(name: Any = None, description: str = "", input_schema: Optional[Mapping[str, Any]] = None) -> Any:
    """Decorator: ``@tool`` or ``@tool(name=..., description=..., input_schema=...)`` on
    ``def fn(input): ...`` or ``async def fn(input): ...``. The name defaults to the function's,
    the description to its docstring, the schema to an object with no properties."""

    def wrap(fn: Callable[P, R], given: Optional[str] = name if isinstance(name, str) else None) -> Tool[P, R]:
        return Tool(
            given or str(getattr(fn, "__name__", "tool")),
            description or (fn.__doc__ or "").strip(),
            input_schema or {"type": "object", "properties": {}},
            fn,
        )

    if callable(name):
        return wrap(name, None)
    return wrap


class Backend:
    """An external text-only backend (OMA's process and ACP backends). ``send`` returns the
    answer's text, or awaits it (``async def send``)."""

    kind = "process"

    def send(self, text: str) -> Any:  # pragma: no cover - interface
        raise NotImplementedError


class ProcessBackend(Backend):
    """Runs ``command`` with the text on standard input; its standard output is the answer.

    The component hands over the text to send: the agent's system prompt and a blank line, then the
    latest user text (as OMA's process backend sends it)."""

    kind = "process"

    def __init__(self, command: Sequence[str], *, timeout: Optional[float] = 120.0, cwd: Optional[str] = None,
                 env: Optional[Dict[str, str]] = None) -> None:
        self.command = list(command)
        self.timeout = timeout
        self.cwd = cwd
        self.env = env

    def send(self, text: str) -> str:
        try:
            done = subprocess.run(self.command, input=text, capture_output=True, text=True,
                                  timeout=self.timeout, cwd=self.cwd, env=self.env, check=False)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"process backend timed out after {self.timeout}s") from None
        except OSError as e:
            raise RuntimeError(f"process backend could not start: {e.strerror or e}") from None
        if done.returncode != 0:
            detail = (done.stderr or "").strip()[:500]
            how = f"signal {-done.returncode}" if done.returncode < 0 else f"code {done.returncode}"
            raise RuntimeError(f"process backend exited with {how}" + (f": {detail}" if detail else ""))
        return done.stdout


class CallableBackend(Backend):
    """Any function ``send(text) -> str`` (or ``async def``) as a backend of ``kind``
    ``process`` or ``acp``."""

    def __init__(self, fn: Callable[[str], Any], kind: str = "acp") -> None:
        self.fn = fn
        self.kind = kind

    def send(self, text: str) -> Any:
        return self.fn(text)


# -- values ------------------------------------------------------------------------------------


def _source_json(source: Any) -> Any:
    p = source.payload
    if source.tag == "base64":
        return {"type": "base64", "media_type": getattr(p, "media-type"), "data": p.data}
    return {"type": "url", "media_type": getattr(p, "media-type"), "url": p.url}


def _content_json(content: Any) -> Any:
    """Typed ``tool-result-content`` as OMA JSON. wasmtime-py lifts this variant untagged: the
    text case is a ``str``, the parts case a ``list`` whose items are a ``str`` (text), a
    ``media-source`` variant (image) or a ``file-part`` record (file)."""
    if isinstance(content, Variant):  # defensive: a tagged lift
        content = content.payload
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        if isinstance(part, Variant) and part.tag in ("text", "file"):  # defensive: a tagged lift
            part = part.payload
        elif isinstance(part, Variant) and part.tag == "image":
            part = part.payload
        if isinstance(part, str):
            parts.append({"type": "text", "text": part})
        elif isinstance(part, Variant):
            parts.append({"type": "image", "source": _source_json(part)})
        else:
            parts.append({"type": "file", "filename": part.filename, "source": _source_json(part.source)})
    return parts


def _tool_use_json(block: Any) -> Dict[str, Any]:
    try:
        arguments = json.loads(block.input)
    except ValueError:
        arguments = block.input
    out = {"type": "tool_use", "id": block.id, "name": block.name, "input": arguments}
    if block.signature is not None:
        out["signature"] = block.signature
    return out


def _event_json(event: Any) -> Optional[Dict[str, Any]]:
    """An ``event`` step as OMA's StreamEvent (the shapes of the JavaScript package and OMA)."""
    tag, p = event.tag, event.payload
    if tag == "text-delta":
        return {"type": "text_delta", "data": p}
    if tag == "reasoning-delta":
        return {"type": "reasoning", "data": p}
    if tag == "text":
        return {"type": "text", "data": p}
    if tag == "tool-use":
        return {"type": "tool_use", "data": _tool_use_json(p)}
    if tag == "tool-result":
        data = {"type": "tool_result", "tool_use_id": getattr(p, "tool-use-id"), "content": _content_json(p.content)}
        if getattr(p, "is-error") is not None:
            data["is_error"] = getattr(p, "is-error")
        return {"type": "tool_result", "data": data}
    if tag == "budget-exceeded":
        return {"type": "budget_exceeded", "data": TokenBudgetExceededError(p)}
    if tag == "loop-detected":
        return {"type": "loop_detected", "data": {"kind": p.kind, "repetitions": p.repetitions, "detail": p.detail}}
    return None  # done / error: delivered from the `finished` poll with the JSON result


def _last_event(result: AgentRunResult) -> StreamEvent:
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


def _text_of(value: Any) -> str:
    """The JSON text of a ``json(string)`` case (wasmtime-py hands untagged variants over bare)."""
    return value if isinstance(value, str) else value.payload


def _now_ms() -> int:
    return int(time.time() * 1000)


def _message(error: BaseException) -> str:
    """An exception's text as a tool, hook or backend failure shows it (the message only, as
    JavaScript shows ``error.message``)."""
    if isinstance(error, OmaError):
        return error.message
    return str(error)


# -- answers, shared by both APIs ---------------------------------------------------------------


def _hook_variant(value: Any = None, error: Optional[BaseException] = None) -> Variant:
    """``answer.hook``: the hook's return value as JSON text, or its failure."""
    if error is None:
        try:
            return Variant("hook", Variant("json", _dumps(value)))
        except (TypeError, ValueError) as e:
            error = e
    return Variant("hook", Variant("failed", _message(error)))


def _tool_outcome(value: Any) -> Tuple[Any, Optional[bool]]:
    """What a tool returned as ``(content, is_error)``, read as the JavaScript package reads it;
    ``is_error`` is ``None`` when the tool did not say."""
    if isinstance(value, ToolResult):
        return value.content, None if value.is_error is None else bool(value.is_error)
    if isinstance(value, (str, list)):
        return value, None
    if isinstance(value, Mapping) and ("data" in value or "content" in value):
        inner = value["data"] if "data" in value else value["content"]
        content = inner if isinstance(inner, (str, list)) else _dumps(inner)
        said = value.get("isError", value.get("is_error"))
        return content, None if said is None else bool(said)
    if value is None:
        return "", None
    return _dumps(value), None


def _tool_variant(call_id: str, value: Any = None, error: Optional[BaseException] = None) -> Variant:
    """``answer.tool-json`` for a tool's return value or its failure."""
    if error is None:
        try:
            content, is_error = _tool_outcome(value)
        except (TypeError, ValueError) as e:
            content, is_error = _message(e), True
    else:
        content, is_error = _message(error), True
    try:
        text = _dumps(content)
    except (TypeError, ValueError) as e:
        text, is_error = _dumps(f"tool result is not JSON data: {_message(e)}"), True
    return Variant("tool-json", record(id=call_id, content=text, is_error=is_error, gate=None))


def _unknown_tool(name: str) -> str:
    # OMA's default-deny text, as the JavaScript package gives it: a tool the agent was not
    # granted is not run.
    return (
        f'Tool "{name}" is not granted to this agent. '
        'Built-in tools are opt-in: grant it via the agent\'s "tools" allowlist or '
        '"toolPreset" (or set the orchestrator\'s "defaultToolPreset").'
    )


def _external_variant(value: Any = None, error: Optional[BaseException] = None) -> Variant:
    if error is None:
        return Variant("external", Variant("ok", value if isinstance(value, str) else str(value)))
    return Variant("external", Variant("err", _message(error)))


def _failure_variant(f: TransportFailure) -> Variant:
    return Variant("failure", record(kind=f.kind, message=f.message))


def _answer(rt: Runtime, generation: int, session: Any, answer: Any, tool_id: Optional[str] = None) -> None:
    """Gives the session an answer. A tool's content the component cannot read as OMA's
    tool-result content goes to the model as a failed result saying why, as in JavaScript."""
    try:
        rt.call("[method]session.answer", session, answer, generation=generation)
    except InvalidMessageError as e:
        if tool_id is None:
            raise
        rt.call("[method]session.answer", session,
                Variant("tool-json", record(id=tool_id, content=_dumps(e.message), is_error=True, gate=None)),
                generation=generation)


def _progress_json(p: Any) -> ProgressEvent:
    return {"type": p.type, "agent": p.agent, "data": json.loads(p.data)}


def _internal_failure(error: BaseException) -> AgentRunResult:
    """A run the host loop could not finish, as a failed result (as the JavaScript package
    reports it): nothing after the input's check raises, except a trap."""
    message = _message(error)
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


def _cancelled_raw() -> Dict[str, Any]:
    """A cancelled run, as the JavaScript package reports it: no messages, no usage."""
    info = {"kind": "cancellation", "name": "AbortError", "message": _CANCELLED_MESSAGE, "retryable": False}
    return {"success": False, "output": _CANCELLED_MESSAGE, "messages": [],
            "tokenUsage": {"input_tokens": 0, "output_tokens": 0}, "toolCalls": [], "turns": 0,
            "status": {"code": "cancelled", "message": _CANCELLED_MESSAGE}, "errorInfo": info}


def _identity(run_id: Optional[str]) -> RunIdentity:
    """OMA's ``RunIdentity`` for a new run: ``run_id`` (1 to 128 characters) or a UUID, attempt
    1, a random W3C trace id and root span id."""
    if run_id is not None and (not isinstance(run_id, str) or not 1 <= len(run_id) <= 128):
        raise TypeError("run_id must be a string of 1 to 128 characters")
    return {"runId": run_id if run_id is not None else str(uuid.uuid4()), "attempt": 1,
            "traceId": secrets.token_hex(16), "rootSpanId": secrets.token_hex(8)}


def _outcome(raw: Mapping[str, Any], identity: RunIdentity, metadata: Optional[Mapping[str, Any]]) -> AgentRunResult:
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


def _settle(value: Any) -> Any:
    """A value a user's function returned, awaited first when it is awaitable (an ``async def``
    tool, hook or backend in the sync API runs to its end on an event loop of its own)."""
    if inspect.isawaitable(value):
        async def wait() -> Any:
            return await value

        return asyncio.run(wait())
    return value


def _observe(fn: Optional[Observer], value: Any) -> None:
    """Calls an observer; what it raises (or awaits and raises) does not change the run."""
    if fn is None:
        return
    try:
        returned = fn(value)
        if inspect.isawaitable(returned):
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                _settle(returned)
            else:  # pragma: no cover - the sync API called from inside an event loop
                close = getattr(returned, "close", None)
                if close is not None:
                    close()
    except Exception:  # noqa: BLE001 - a throwing observer does not change the run
        pass


# -- the host loop -----------------------------------------------------------------------------


@dataclass
class _Host:
    """What answers a session's steps (both APIs; ``client`` is the sync API's)."""

    client: Any = None
    tools: Dict[str, "Tool[..., Any]"] = field(default_factory=dict)
    before_run: Optional[BeforeRun] = None
    backend: Optional[Backend] = None
    on_progress: Optional[Observer] = None
    on_case: Optional[Observer] = None
    on_trace: Optional[Observer] = None
    # The ``custom`` context strategy's ``compress(messages, estimated_tokens)``.
    compress: Optional[Callable[..., Any]] = None
    # OMA's ``onLoopDetected`` function: ``on_loop_detected(info)`` returns OMA's word.
    on_loop_detected: Optional[Callable[..., Any]] = None
    sleep: Callable[[float], None] = time.sleep
    # Where a whole response's read stops (the component decides what a body past it means).
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    # The hook's ``ctx["agent"]``: the configuration as given, without hooks and secrets.
    agent_info: Dict[str, Any] = field(default_factory=dict)
    # Per run (``_Host.for_run``): the tool observers, the cancel token, the run's id.
    on_tool_call: Optional[ToolCallObserver] = None
    on_tool_result: Optional[ToolCallObserver] = None
    cancel: Optional[CancelToken] = None
    identity: Optional[RunIdentity] = None
    metadata: Optional[Mapping[str, Any]] = None
    # A pydantic model class that validates each final answer (``output_schema``), and per run
    # the instance it made from the answer that passed.
    output_model: Any = None
    validated: Optional[List[Any]] = None

    def for_run(self, identity: RunIdentity, cancel: Optional[CancelToken] = None,
                on_tool_call: Optional[ToolCallObserver] = None,
                on_tool_result: Optional[ToolCallObserver] = None,
                metadata: Optional[Mapping[str, Any]] = None) -> "_Host":
        """This host for one run."""
        if cancel is not None and not isinstance(cancel, CancelToken):
            raise TypeError("cancel must be an oma_component.CancelToken")
        return replace(self, cancel=cancel, on_tool_call=on_tool_call, on_tool_result=on_tool_result,
                       identity=identity, metadata=metadata, validated=[])

    def finished(self, raw: Dict[str, Any]) -> Dict[str, Any]:
        """The session's result with ``structured`` as the pydantic model made it (an instance
        of the model) when one validated the answer."""
        if "structured" in raw and self.validated:
            raw["structured"] = self.validated[-1]
        return raw

    def progress(self, p: Any) -> ProgressEvent:
        """A progress step as OMA's event: ``agent_complete`` carries the run's result in OMA's
        form (``status``, ``identity``, ... as the run returns it)."""
        event = _progress_json(p)
        if event["type"] == "agent_complete" and self.identity is not None and isinstance(event["data"], dict):
            event["data"] = _outcome(event["data"], self.identity, self.metadata)
        return event


def _hook_context(host: _Host, context_json: str) -> Any:
    """The hook's context: OMA's ``{prompt, messages, agent}`` with ``agent`` the configuration
    (without hooks and secrets), and ``config``, the component's view of it."""
    context = json.loads(context_json)
    if isinstance(context, dict):
        context["agent"] = dict(host.agent_info)
    return context


def _tool_context(host: _Host, call: Any) -> Dict[str, Any]:
    """What a tool in OMA's shape gets as its second argument."""
    return {"agent": {"name": host.agent_info.get("name"), "model": host.agent_info.get("model")},
            "toolCallId": call.id, "runId": host.identity["runId"] if host.identity else ""}


def _notify(fn: Optional[ToolCallObserver], name: str, value: Any) -> None:
    """Calls a tool observer; what it raises does not change the run."""
    if fn is None:
        return
    try:
        fn(name, value)
    except Exception:  # noqa: BLE001
        pass


def _observed_result(answer: Variant) -> Dict[str, Any]:
    """A tool answer as the ``on_tool_result`` observer sees it: OMA's ``{"data", "isError"}``."""
    payload: Any = answer.payload
    try:
        data = json.loads(payload.content)
    except (AttributeError, TypeError, ValueError):
        data = None
    return {"data": data, "isError": bool(getattr(payload, "is_error", getattr(payload, "is-error", False)) or False)}


def _hook_answer(host: _Host, context_json: str) -> Variant:
    if host.before_run is None:
        return Variant("hook", Variant("failed", "no beforeRun hook is registered"))
    try:
        returned = _settle(host.before_run(_hook_context(host, context_json)))
    except Exception as e:  # noqa: BLE001 - OMA: a throwing hook fails the run
        return _hook_variant(error=e)
    return _hook_variant(returned)


def _arguments(call: Any) -> Any:
    try:
        return json.loads(call.input) if call.input else {}
    except ValueError:
        return {}


def _tool_answer(host: _Host, call: Any) -> Variant:
    arguments = _arguments(call)
    _notify(host.on_tool_call, call.name, arguments)
    answer = _tool_run(host, call, arguments)
    if host.on_tool_result is not None:
        _notify(host.on_tool_result, call.name, _observed_result(answer))
    return answer


def _tool_run(host: _Host, call: Any, arguments: Any) -> Variant:
    t = host.tools.get(call.name)
    if t is None:
        return _tool_variant(call.id, error=LookupError(_unknown_tool(call.name)))
    try:
        args = (arguments, _tool_context(host, call)) if t.takes_context else (arguments,)
        value = _settle(t.fn(*args))
    except Exception as e:  # noqa: BLE001 - the model sees the failure
        return _tool_variant(call.id, error=e)
    return _tool_variant(call.id, value)


def _is_model(value: Any) -> bool:
    """Whether ``value`` is a pydantic (v2) model class, without importing pydantic."""
    return isinstance(value, type) and callable(getattr(value, "model_validate", None)) \
        and callable(getattr(value, "model_json_schema", None))


def _output_schema(value: Any) -> Tuple[Any, Any]:
    """``output_schema`` as the component's configuration (the JSON Schema, and whether the
    host validates) and the model that validates here: a JSON Schema dict (or boolean) is the
    component's to check; a pydantic model class is shown to the model as its JSON Schema and
    validates each answer here, so ``structured`` is an instance of it."""
    if _is_model(value):
        return {"outputSchema": value.model_json_schema(), "outputValidation": "host"}, value
    if isinstance(value, bool) or isinstance(value, Mapping):
        return {"outputSchema": value if isinstance(value, bool) else dict(value)}, None
    raise TypeError("output_schema must be a JSON Schema dict or a pydantic model class")


def _validation_variant(host: _Host, text: str) -> Variant:
    """The answer to a ``validate-output`` step: the pydantic model validates the value read
    from the final answer; its errors become OMA's message (``  - <path>: <message>`` lines),
    which the retry's feedback quotes."""
    model = host.output_model
    try:
        instance = model.model_validate(json.loads(text))
    except Exception as e:  # noqa: BLE001 - any failure to validate is a verdict
        errors = getattr(e, "errors", None)
        if callable(errors):
            lines = []
            for issue in errors():
                loc = issue.get("loc") or ()
                path = ".".join(str(part) for part in loc) if loc else "(root)"
                lines.append(f"  - {path}: {issue.get('msg', '')}")
            return Variant("validated", Variant("err", "Output validation failed:\n" + "\n".join(lines)))
        return Variant("validated", Variant("err", _message(e)))
    if host.validated is not None:
        host.validated.append(instance)
    return Variant("validated", Variant("ok", _dumps(instance.model_dump(mode="json"))))


def _loop_info(p: Any) -> Dict[str, Any]:
    """The ``decide-loop`` step's loop as OMA's ``LoopDetectionInfo`` dict."""
    return {"kind": p.kind, "repetitions": p.repetitions, "detail": p.detail}


def _loop_variant(word: Any = None, error: Optional[BaseException] = None) -> Variant:
    """OMA's ``onLoopDetected`` answer: its word (``terminate``, ``warn``, ``inject``; anything
    else goes on), or its failure, which ends the run."""
    if error is not None:
        return Variant("loop-decision", Variant("err", _message(error)))
    return Variant("loop-decision", Variant("ok", str(word)))


def _loop_answer(host: _Host, p: Any) -> Variant:
    try:
        if host.on_loop_detected is None:
            raise RuntimeError("no onLoopDetected function is configured")
        return _loop_variant(_settle(host.on_loop_detected(_loop_info(p))))
    except Exception as e:  # noqa: BLE001 - OMA: a throwing callback fails the run
        return _loop_variant(error=e)


def _compress_request(p: Any) -> Tuple[Any, int]:
    """The ``compress`` step's conversation (OMA JSON, parsed) and token estimate."""
    return json.loads(_text_of(p.messages)), int(getattr(p, "estimated-tokens"))


def _compress_variant(returned: Any = None, error: Optional[BaseException] = None) -> Variant:
    """What the ``custom`` strategy's function returned, as JSON for the component's checks
    (anything but a non-empty message list ends the run with OMA's error), or its failure."""
    if error is not None:
        return Variant("compress-failed", _message(error))
    try:
        return Variant("compressed-json", _dumps(returned))
    except (TypeError, ValueError) as e:
        return Variant("compress-failed", _message(e))


def _compress_answer(host: _Host, p: Any) -> Variant:
    messages, estimated = _compress_request(p)
    try:
        if host.compress is None:
            raise RuntimeError("no custom context strategy is configured")
        return _compress_variant(_settle(host.compress(messages, estimated)))
    except Exception as e:  # noqa: BLE001 - OMA: a throwing strategy fails the run
        return _compress_variant(error=e)


def _external_answer(host: _Host, p: Any) -> Variant:
    backend = host.backend
    try:
        if backend is None:
            raise RuntimeError("no external backend is configured")
        return _external_variant(_settle(backend.send(p.text)))
    except Exception as e:  # noqa: BLE001 - a failing backend fails the run
        return _external_variant(error=e)


# The steps that may come while a response body is still being read.
_READING = frozenset(("receive", "event", "progress", "evaluation"))


class _Pending:
    """The hook, tool and backend calls of a run under way, each on a daemon thread of its own.

    Their answers come back through one queue and are given to the session on the caller's
    thread (the component is not shared between threads). While the session waits for them it
    is asked again at the instant it names (the run's deadline), so a call that outlives the
    deadline ends the run with OMA's timeout instead of holding it; the abandoned call's thread
    finishes on its own and its answer is dropped.
    """

    def __init__(self) -> None:
        self._answers: "queue.Queue[Any]" = queue.Queue()
        self.count = 0

    def interrupt(self) -> None:
        """Wakes :meth:`next` at once with :class:`_RunCancelled` (from any thread)."""
        self._answers.put(_RunCancelled())

    def start(self, compute: Callable[[], Variant], tool_id: Optional[str] = None) -> None:
        def work() -> None:
            try:
                self._answers.put((tool_id, compute()))
            except BaseException as e:  # noqa: BLE001 - compute() catches what the user raises
                self._answers.put(e)

        self.count += 1
        threading.Thread(target=work, name="oma-host-call", daemon=True).start()

    def next(self, wake_at_ms: Optional[int]) -> Optional[Tuple[Optional[str], Variant]]:
        """The next ``(tool id, answer)``, or ``None`` when ``wake_at_ms`` passed first."""
        timeout = None if wake_at_ms is None else max(0.0, (wake_at_ms - _now_ms()) / 1000.0)
        try:
            answer = self._answers.get(timeout=timeout)
        except queue.Empty:
            return None
        if isinstance(answer, _RunCancelled):
            raise answer
        self.count -= 1
        if isinstance(answer, BaseException):
            raise answer
        return cast(Tuple[Optional[str], Variant], answer)


class _ToolTimings:
    """When each tool call of a run started and ended (ms since the epoch), in the order the
    session asked for them: the order of the result's ``toolCalls``. OMA records each call's
    ``duration``; the component does not see the host's clock."""

    def __init__(self) -> None:
        self._spans: List[List[Optional[int]]] = []

    def start(self) -> List[Optional[int]]:
        span: List[Optional[int]] = [_now_ms(), None]
        self._spans.append(span)
        return span

    def around(self, fn: Callable[[], Any]) -> Callable[[], Any]:
        """``fn``, timed as the next tool call."""
        span = self.start()

        def timed() -> Any:
            try:
                return fn()
            finally:
                span[1] = _now_ms()

        return timed

    def records(self, result: Dict[str, Any]) -> Dict[str, Any]:
        """``result`` with OMA's tool-call records: ``toolName``, ``input``, ``output``,
        ``duration`` (ms; 0 for a call that never ended), as the JavaScript package gives them."""
        calls = result.get("toolCalls")
        if isinstance(calls, list):
            records = []
            for i, call in enumerate(calls):
                span = self._spans[i] if i < len(self._spans) else None
                ended = span is not None and span[1] is not None
                duration = max(0, cast(int, span[1]) - cast(int, span[0])) if ended and span else 0
                records.append({"toolName": call.get("toolName"), "input": call.get("input"),
                                "output": call.get("output"), "duration": duration})
            result["toolCalls"] = records
        return result


def _abandon(value: Any) -> None:
    """Closes what a provider call abandoned by a cancelled run returned, if anything."""
    close = getattr(value, "close", None)
    if callable(close):
        try:
            close()
        except Exception:  # noqa: BLE001
            pass


def _unless_cancelled(cancel: Optional[CancelToken], fn: Callable[[], R]) -> R:
    """``fn()``, or :class:`_RunCancelled` as soon as ``cancel`` fires. Without a token ``fn``
    runs inline; with one it runs on a daemon thread so that the caller's thread can leave a
    request that blocks (connecting, waiting for the head, reading a whole body): when the run
    has left, the abandoned thread closes what it opened once its call returns."""
    if cancel is None:
        return fn()
    if cancel.cancelled:
        raise _RunCancelled()
    done = threading.Event()
    lock = threading.Lock()
    outcome: List[Any] = []
    abandoned = [False]

    def work() -> None:
        try:
            value: Tuple[bool, Any] = (True, fn())
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            value = (False, e)
        with lock:
            if abandoned[0]:
                if value[0]:
                    _abandon(value[1])
                return
            outcome.append(value)
        done.set()

    threading.Thread(target=work, name="oma-http-call", daemon=True).start()
    unsubscribe = cancel._subscribe(done.set)
    try:
        done.wait()
    finally:
        unsubscribe()
    with lock:
        if not outcome:
            abandoned[0] = True
            raise _RunCancelled()
    ok, value = outcome[0]
    if not ok:
        raise value
    return cast(R, value)


def _shut(response: Any) -> None:
    """Shuts the socket of a response being read, so that a read blocked on it returns at once
    (called from the thread that cancels the run)."""
    sock = getattr(getattr(getattr(response, "resp", None), "connection", None), "sock", None)
    if sock is None:
        return
    try:
        import socket

        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _due_text(due: Any) -> str:
    return ", ".join(f"tool {d.payload}" if d.tag == "tool" else d.tag for d in due)


def drive(rt: Runtime, generation: int, session: Any, host: _Host) -> Generator[Dict[str, Any], None, Dict[str, Any]]:
    """Steps ``session`` to its end; yields stream events; returns the result dict.

    HTTP steps are performed in turn; the hook, tools and external backends run as pending calls
    (tools of one turn at once), held to the run's deadline.
    """
    response = None
    pending = _Pending()
    timings = _ToolTimings()
    answer: Any
    cancel = host.cancel
    unsubscribe: Callable[[], None] = lambda: None
    if cancel is not None:
        def on_cancel() -> None:
            pending.interrupt()
            if response is not None:
                _shut(response)

        unsubscribe = cancel._subscribe(on_cancel)

    try:
        while True:
            if cancel is not None and cancel.cancelled:
                raise _RunCancelled()
            polled = rt.call("[method]session.next", session, _now_ms(), generation=generation)
            if polled.tag == "finished":
                return host.finished(timings.records(cast(Dict[str, Any], json.loads(_text_of(polled.payload)))))
            if polled.tag == "waiting":
                waiting = polled.payload
                if pending.count == 0:
                    raise OmaError(f"the session waits for {_due_text(waiting.due)}, which this host does not owe")
                ready = pending.next(getattr(waiting, "wake-at-ms"))
                if ready is not None:
                    _answer(rt, generation, session, ready[1], ready[0])
                continue
            step = polled.payload
            tag, p = step.tag, step.payload
            if response is not None and tag not in _READING:
                # The call is over with this response (its end, a limit, a retry's wait): the
                # rest of its body is not read.
                response.close()
                response = None
            if tag == "send":
                try:
                    if p.stream:
                        # The head first, the body as the session asks for it: the component
                        # counts each chunk against its limit as it arrives.
                        response = _unless_cancelled(cancel, functools.partial(host.client.open, p))
                        answer = Variant("head", record(status=response.status, headers=response.headers))
                    else:
                        status, headers, body = _unless_cancelled(
                            cancel, functools.partial(host.client.send, p, host.max_response_bytes))
                        answer = Variant("response", record(status=status, headers=headers, body=body))
                except TransportFailure as f:
                    answer = _failure_variant(f)
                _answer(rt, generation, session, answer)
            elif tag == "receive":
                try:
                    data = response.read() if response is not None else b""
                    if cancel is not None and cancel.cancelled:
                        raise _RunCancelled()
                    answer = ChunkAnswer(data) if data else Variant("end")
                    if not data and response is not None:
                        response.close()
                        response = None
                except TransportFailure as f:
                    if cancel is not None and cancel.cancelled:
                        raise _RunCancelled() from None
                    answer = _failure_variant(f)
                _answer(rt, generation, session, answer)
            elif tag == "wait":
                if cancel is not None:
                    if cancel.wait(p / 1000.0):
                        raise _RunCancelled()
                else:
                    host.sleep(p / 1000.0)
                _answer(rt, generation, session, Variant("waited"))
            elif tag == "before-run":
                context = _text_of(p)
                pending.start(lambda: _hook_answer(host, context))
            elif tag == "call-tool":
                pending.start(timings.around(functools.partial(_tool_answer, host, p)), p.id)
            elif tag == "external-send":
                pending.start(functools.partial(_external_answer, host, p))
            elif tag == "compress":
                pending.start(functools.partial(_compress_answer, host, p))
            elif tag == "decide-loop":
                pending.start(functools.partial(_loop_answer, host, p))
            elif tag == "event":
                event = _event_json(p)
                if event is not None:
                    yield event
            elif tag == "progress":
                _observe(host.on_progress, host.progress(p))
            elif tag == "evaluation":
                _observe(host.on_case, json.loads(_text_of(p)))
            elif tag == "trace":
                _observe(host.on_trace, json.loads(_text_of(p)))
            elif tag == "validate-output":
                _answer(rt, generation, session, _validation_variant(host, p))
            else:  # pragma: no cover - a newer component
                raise OmaError(f"unknown step {tag!r}")
    finally:
        unsubscribe()
        if response is not None:
            response.close()
        rt.drop(generation, session)


def _complete(gen: Generator[Dict[str, Any], None, Dict[str, Any]], identity: RunIdentity,
              metadata: Optional[Mapping[str, Any]] = None) -> AgentRunResult:
    """Drives a session to its result (OMA's form); a failure of the loop itself is a failed
    result, a cancelled run OMA's cancelled one."""
    raw: Mapping[str, Any]
    try:
        while True:
            next(gen)
    except StopIteration as stop:
        raw = stop.value
    except ComponentTrapError:
        raise
    except _RunCancelled:
        raw = _cancelled_raw()
    except Exception as e:  # noqa: BLE001 - as the JavaScript package: a result, never a throw
        raw = _internal_failure(e)
    return _outcome(raw, identity, metadata)


def _events(gen: Generator[Dict[str, Any], None, Dict[str, Any]], identity: RunIdentity,
            metadata: Optional[Mapping[str, Any]] = None, text_deltas: bool = False) -> Iterator[StreamEvent]:
    """A session's events (``text_delta`` only when asked for), then its last event (``done``
    or ``error``)."""
    raw: Mapping[str, Any]
    try:
        while True:
            event = next(gen)
            if text_deltas or event.get("type") != "text_delta":
                yield cast(StreamEvent, event)
    except StopIteration as stop:
        raw = stop.value
    except ComponentTrapError:
        raise
    except _RunCancelled:
        raw = _cancelled_raw()
    except Exception as e:  # noqa: BLE001
        raw = _internal_failure(e)
    finally:
        gen.close()
    yield _last_event(_outcome(raw, identity, metadata))


# -- agents ------------------------------------------------------------------------------------


class EnvironmentNames(TypedDict):
    """The environment variables OMA (or the provider SDK it drives) reads for what an agent's
    configuration leaves out; each list in the order it is read, the first variable that is set
    and not empty wins."""

    api_key: List[str]
    base_url: Optional[str]
    region: List[str]
    default_region: Optional[str]


def environment_names(provider: str, *, runtime: Optional[Runtime] = None) -> EnvironmentNames:
    """The variables an agent of ``provider`` takes its missing ``api_key``, ``base_url`` and
    ``region`` from, as OMA reads them: ``ANTHROPIC_API_KEY`` and ``ANTHROPIC_BASE_URL``,
    ``GEMINI_API_KEY`` then ``GOOGLE_API_KEY``, ``ARK_API_KEY`` for ``doubao``,
    ``AWS_BEARER_TOKEN_BEDROCK`` and ``AWS_REGION`` (else ``us-east-1``) for ``bedrock``, ...;
    nothing for a provider OMA reads nothing for. The table is the component's, the one the
    JavaScript package reads too."""
    rt = runtime or default_runtime()
    names = rt.call("environment-names", provider)
    return EnvironmentNames(api_key=list(getattr(names, "api-key")), base_url=getattr(names, "base-url"),
                            region=list(names.region), default_region=getattr(names, "default-region"))


def _from_environment(names: Sequence[str]) -> Optional[str]:
    for name in names:
        value = os.environ.get(name)
        if value:  # an empty value counts as unset
            return value
    return None


def _fill_from_environment(values: Dict[str, Any], provider: Any, runtime: Optional[Runtime]) -> None:
    """Sets the ``api_key``, ``base_url`` and ``region`` that ``values`` leaves out from the
    provider's environment variables (:func:`environment_names`)."""
    if not isinstance(provider, str):
        return
    names = environment_names(provider, runtime=runtime)
    if values.get("api_key") is None:
        values["api_key"] = _from_environment(names["api_key"])
    if values.get("base_url") is None and names["base_url"] is not None:
        values["base_url"] = _from_environment([names["base_url"]])
    if values.get("region") is None:
        values["region"] = _from_environment(names["region"]) or names["default_region"]


_CALL_KEYS = {
    "max_retries": "maxRetries", "retry_delay_ms": "retryDelayMs", "retry_backoff": "retryBackoff",
    "timeout_ms": "timeoutMs", "max_response_bytes": "maxResponseBytes", "deadline_ms": "deadlineMs",
    "egress": "egress",
}
# The component's (camelCase) names are taken too, as they always were.
_CALL_NAMES = set(_CALL_KEYS) | set(_CALL_KEYS.values())


def _call_json(call: Mapping[str, Any]) -> Dict[str, Any]:
    """The ``call`` options as the component names them; a key that is not one is refused with
    the Python names."""
    if not isinstance(call, Mapping):
        raise TypeError("call must be a dict of call options")
    unknown = [k for k in call if k not in _CALL_NAMES]
    if unknown:
        names = ", ".join(repr(k) for k in unknown)
        raise TypeError(f"call has {'an unknown key' if len(unknown) == 1 else 'unknown keys'} {names}; "
                        f"known keys: {', '.join(_CALL_KEYS)}")
    return {_CALL_KEYS.get(k, k): v for k, v in call.items()}


def _dict_tool(value: Mapping[str, Any], where: str) -> "Tool[..., Any]":
    """A tool given in OMA's shape, ``{"name", "description", "inputSchema", "execute"}``."""
    name, execute = value.get("name"), value.get("execute")
    if not isinstance(name, str) or not callable(execute):
        raise TypeError(f'{where} must be an oma_component.Tool or a dict {{"name": str, "description": str, '
                        f'"inputSchema": dict, "execute": callable}}; got keys {sorted(map(str, value))}')
    schema = value.get("inputSchema", value.get("input_schema", value.get("parameters")))
    if schema is not None and not isinstance(schema, Mapping):
        raise TypeError(f"{where}: inputSchema must be a JSON Schema dict (zod schemas are JavaScript's)")
    made: Tool[..., Any] = Tool(name, str(value.get("description") or ""),
                                schema if schema is not None else {"type": "object", "properties": {}}, execute)
    made.takes_context = _positional_count(execute) >= 2
    return made


def _positional_count(fn: Callable[..., Any]) -> int:
    """How many positional arguments ``fn`` takes (2 for a ``*args`` function)."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 1
    count = 0
    for parameter in parameters:
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            return 2
        if parameter.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            count += 1
    return count


def _tools(tools: Sequence[Any]) -> List["Tool[..., Any]"]:
    """The ``tools`` argument as :class:`Tool` objects: Tools, and dicts in OMA's shape."""
    if isinstance(tools, (str, bytes, Mapping)):
        raise TypeError("tools must be a list of tools")
    out: List[Tool[..., Any]] = []
    for i, t in enumerate(tools):
        if isinstance(t, Tool):
            out.append(t)
        elif isinstance(t, Mapping):
            out.append(_dict_tool(t, f"tools[{i}]"))
        else:
            raise TypeError(f'tools[{i}] must be an oma_component.Tool (the @tool decorator) or a dict '
                            f'{{"name", "description", "inputSchema", "execute"}}, not {type(t).__name__}')
    return out

_PLAIN_KEYS = {
    "base_url": "baseURL", "api_key": "apiKey", "region": "region", "system_prompt": "systemPrompt",
    "max_turns": "maxTurns", "max_token_budget": "maxTokenBudget", "max_tokens": "maxTokens",
    "temperature": "temperature", "top_p": "topP", "top_k": "topK", "thinking_budget": "thinkingBudget",
    "deadline_ms": "deadlineMs",
    # OMA's provider options; each wire format carries them as OMA's adapter does.
    "frequency_penalty": "frequencyPenalty", "presence_penalty": "presencePenalty", "min_p": "minP",
    "parallel_tool_calls": "parallelToolCalls", "extra_body": "extraBody", "thinking": "thinking",
}

#: OMA's context and loop options: snake_case here, OMA's camelCase (nested keys too) for the
#: component, which checks them and names a bad field.
_CONTEXT_KEYS = {
    "loop_detection": "loopDetection", "context_strategy": "contextStrategy",
    "compress_tool_results": "compressToolResults", "preserve_reasoning_as_text": "preserveReasoningAsText",
    "compress_reasoning_text": "compressReasoningText",
}


def _camel(value: Any) -> Any:
    """A context option with the keys of its mappings in camelCase (``max_turns`` ->
    ``maxTurns``); values are kept (``"sliding-window"`` stays). A callable, which only code
    could carry (OMA's ``onLoopDetected`` callback, a ``custom`` strategy), is refused."""
    if callable(value):
        raise TypeError("a callable context or loop option is not supported by oma-component; "
                        "use on_loop_detected='warn' or 'terminate'")
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            head, *rest = str(key).split("_")
            out[head + "".join(w[:1].upper() + w[1:] for w in rest)] = _camel(item)
        return out
    return value


#: ``thinking``'s keys (OMA's ``ThinkingConfig``) in Python's spelling.
_THINKING_KEYS = {"enabled": "enabled", "budget_tokens": "budgetTokens", "effort": "effort"}


def _provider_options(cfg: Dict[str, Any]) -> None:
    """Checks what JSON cannot carry faithfully (NaN, infinities) and writes ``thinking`` in OMA's
    spelling; the component checks the rest (types, ``effort``'s values) naming the field."""
    for key in ("frequencyPenalty", "presencePenalty", "minP"):
        value = cfg.get(key)
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{key} must be a finite number, got {value}")
    thinking = cfg.get("thinking")
    if isinstance(thinking, Mapping):
        cfg["thinking"] = {_THINKING_KEYS.get(k, k): v for k, v in thinking.items() if v is not None}


class _Spec:
    """An agent's configuration: the component's JSON and the host's parts."""

    def __init__(self, *, name: str, model: str, provider: str, tools: Sequence[Any],
                 before_run: Optional[BeforeRun], backend: Optional[Backend], history: Any,
                 call: Optional[Mapping[str, Any]], options: Mapping[str, Any],
                 runtime: Optional[Runtime]) -> None:
        #: OMA's ``custom`` strategy's function, kept on this side; the component asks for it
        #: before every request.
        self.compress: Optional[Callable[..., Any]] = None
        strategy = options.get("context_strategy")
        if isinstance(strategy, Mapping) and strategy.get("type") == "custom":
            self.compress = strategy.get("compress")
            if not callable(self.compress):
                raise TypeError("context_strategy['compress'] must be callable for the 'custom' strategy")
            options = {**options, "context_strategy": {"type": "custom"}}
        #: OMA's ``onLoopDetected`` function, kept on this side; the component asks it on each
        #: loop found (``"callback"`` in the component's configuration).
        self.on_loop_detected: Optional[Callable[..., Any]] = None
        detection = options.get("loop_detection")
        if isinstance(detection, Mapping):
            decide = detection.get("on_loop_detected", detection.get("onLoopDetected"))
            if decide == "callback":
                raise TypeError("loop_detection['on_loop_detected'] must be 'warn', 'terminate' or a function")
            if callable(decide):
                self.on_loop_detected = decide
                rest = {k: v for k, v in detection.items() if k not in ("on_loop_detected", "onLoopDetected")}
                options = {**options, "loop_detection": {**rest, "on_loop_detected": "callback"}}
        context = {_CONTEXT_KEYS[k]: _camel(v) for k, v in options.items() if k in _CONTEXT_KEYS and v is not None}
        options = {k: v for k, v in options.items() if k not in _CONTEXT_KEYS}
        options = dict(options)
        #: OMA's ``onTrace``: receives each trace event of every run (``None``: no tracing).
        self.on_trace: Optional[Observer] = options.pop("on_trace", None)
        schema = options.pop("output_schema", None)
        structured: Dict[str, Any] = {}
        #: A pydantic model class that validates each final answer here (``output_schema``).
        self.output_model: Any = None
        if schema is not None:
            structured, self.output_model = _output_schema(schema)
        if self.on_trace is not None and not callable(self.on_trace):
            raise TypeError("on_trace must be callable")
        unknown = set(options) - set(_PLAIN_KEYS)
        if unknown:
            raise TypeError(f"unknown configuration: {', '.join(sorted(unknown))}")
        tools = _tools(tools)
        cfg: Dict[str, Any] = {"name": name, "model": model, "provider": provider}
        # OMA's hook context: the configuration as given, without hooks and secrets.
        info: Dict[str, Any] = {"name": name, "model": model, "provider": provider}
        info.update({k: v for k, v in options.items() if v is not None and k != "api_key"})
        if tools:
            info["tools"] = [t.name for t in tools]
        if history is not None:
            info["history"] = history
        if call:
            info["call"] = dict(call)
        self.agent_info = info
        values = dict(options)
        if backend is None:
            _fill_from_environment(values, provider, runtime)
        cfg.update({_PLAIN_KEYS[k]: v for k, v in values.items() if v is not None})
        cfg.update(context)
        cfg.update(structured)
        _provider_options(cfg)
        if tools:
            cfg["tools"] = [t.definition() for t in tools]
        if before_run is not None:
            cfg["beforeRun"] = True
        if backend is not None:
            cfg["backend"] = {"kind": backend.kind}
        if call:
            cfg["call"] = _call_json(call)
        self.cfg = cfg
        # The history as OMA JSON text, checked by OMA's guard when the agent is made.
        self.history_json: Optional[str] = None if history is None else input_json(history)
        self.tools = {t.name: t for t in tools}
        self.before_run = before_run
        self.backend = backend
        limit = cfg.get("call", {}).get("maxResponseBytes")
        # The response limit the configuration sets (the component refuses one that is not a count).
        self.max_response_bytes = limit if isinstance(limit, int) and limit >= 0 else DEFAULT_MAX_RESPONSE_BYTES

    def json(self, history_json: Optional[str]) -> str:
        text = _dumps(self.cfg)
        if history_json is None:
            return text
        return text[:-1] + ',"history":' + history_json + "}"

    def host(self, client: Any, on_progress: Optional[Observer] = None, on_case: Optional[Observer] = None) -> _Host:
        return _Host(client=client, tools=self.tools, before_run=self.before_run, backend=self.backend,
                     on_progress=on_progress, on_case=on_case, on_trace=self.on_trace, compress=self.compress,
                     on_loop_detected=self.on_loop_detected,
                     max_response_bytes=self.max_response_bytes, agent_info=self.agent_info,
                     output_model=self.output_model)

    def session_options(self, seed: int) -> Any:
        """A session's options: JSON payloads, the seed, and tracing when ``on_trace`` is set
        (ids made up by the component: a fresh run id per run)."""
        trace = None
        if self.on_trace is not None:
            trace = record(run_id=None, span_id=None, parent_id=None, agent=None, task_id=None)
        return record(payloads="json", seed=seed, trace=trace)


def _seed() -> int:
    return secrets.randbits(64)


class _AgentCore:
    """What both agent classes share: the configuration, and the agent inside the component,
    re-created from its configuration and last committed history after a trap."""

    def __init__(self, spec: _Spec, runtime: Optional[Runtime], seed: Optional[int]) -> None:
        self.name: str = spec.cfg["name"]
        self._rt = runtime or default_runtime()
        self._spec = spec
        self._seed = seed
        # The committed history as OMA JSON text, kept so a replaced instance can re-create us.
        self._history_json = spec.history_json
        self._handle: Any = None
        self._generation = -1
        self._finalizer: "Optional[weakref.finalize[Any, Any]]" = None
        self._ensure()

    def _ensure(self) -> Any:
        rt = self._rt
        with rt.lock():
            if self._handle is None or self._generation != rt.generation:
                handle = rt.call("[static]agent.create-json", self._spec.json(self._history_json))
                if self._finalizer is not None:
                    self._finalizer.detach()
                self._handle, self._generation = handle, rt.generation
                self._finalizer = weakref.finalize(self, rt.drop_later, rt.generation, handle)
            return self._handle

    def _session_options(self, seed: Optional[int]) -> Any:
        if seed is None:
            seed = self._seed if self._seed is not None else _seed()
        return self._spec.session_options(seed)

    def _start(self, method: str, input: Any, seed: Optional[int]) -> Tuple[int, Any]:
        rt = self._rt
        # prompt's blocks are checked as OMA checks them, as the one message of a user turn
        strings: List[Tuple[str, str]] = []
        if isinstance(input, str):
            payload = _dumps(input)
        else:
            # Long media data goes beside the text (the `*-json-parts` entry points).
            payload, strings = input_parts(input, blocks=method == "[method]agent.prompt-json")
        with rt.lock():
            handle = self._ensure()
            if strings:
                session = rt.call(method + "-parts", handle, payload, strings, self._session_options(seed))
            else:
                session = rt.call(method, handle, payload, self._session_options(seed))
            return rt.generation, session

    def _snapshot(self) -> None:
        rt = self._rt
        with rt.lock():
            if self._generation == rt.generation:
                self._history_json = rt.call("[method]agent.get-history-json", self._handle)

    def get_history(self) -> List[LLMMessage]:
        """A copy of the persistent history as OMA messages."""
        rt = self._rt
        with rt.lock():
            return cast(List[LLMMessage], json.loads(rt.call("[method]agent.get-history-json", self._ensure())))

    def reset(self) -> None:
        """Clears the persistent history."""
        rt = self._rt
        with rt.lock():
            rt.call("[method]agent.reset", self._ensure())
            self._history_json = "[]"

    def close(self) -> None:
        """Frees the agent inside the component (also done when the agent is collected)."""
        if self._finalizer is not None:
            self._finalizer()
            self._finalizer = None
        self._handle = None


_AGENT_DOC = """

    ``deadline_ms`` is the most one run may take (past it the run fails with status
    ``timeout``; hooks and tools are held to it too). ``api_key`` defaults to the provider's
    usual environment variable, and ``base_url`` and ``region`` where OMA reads one
    (:func:`environment_names`). ``call`` sets the provider call options:
    ``max_retries``, ``retry_delay_ms``, ``retry_backoff``, ``timeout_ms`` (connecting and the
    head; then each gap between a stream's bytes, or a whole response up to its last byte),
    ``max_response_bytes`` (32 MiB by default, counted as the bytes arrive), ``deadline_ms`` (one
    call with its retries, 10 minutes by default), ``egress`` (``"open"``, ``"offline"`` or a
    list of origins); what is not given is the component's default. ``provider`` defaults to
    ``"anthropic"`` (as OMA's). ``tools`` takes :class:`Tool` objects and dicts in OMA's shape
    (``{"name", "description", "inputSchema", "execute"}``). ``text_deltas=True`` makes
    ``stream`` yield ``text_delta`` events too (the provider's text pieces as they arrive; OMA
    yields none).

    Each run takes ``cancel`` (a :class:`CancelToken`), ``run_id`` (the result's
    ``identity.runId``), ``metadata`` (copied to the result) and the tool observers
    ``on_tool_call(name, input)`` and ``on_tool_result(name, {"data", "isError"})``.
"""


class Agent(_AgentCore):
    """An OMA agent running inside the component (the sync API; :class:`AsyncAgent` is the
    asyncio one).

    ``run(input)`` starts a fresh conversation (a string, or a list of OMA messages as dicts);
    ``stream(input)`` yields its events as dicts; ``prompt(input)`` adds one user turn to the
    persistent history; ``get_history()`` and ``reset()`` read and clear that history. Results are
    OMA's ``AgentRunResult`` as a dict. Invalid input raises :class:`InvalidMessageError` before
    anything happens; anything that fails later is a result with ``success: False``.
    """

    __doc__ = (__doc__ or "") + _AGENT_DOC

    def __init__(
        self,
        *,
        name: str = "agent",
        model: str,
        provider: str = "anthropic",
        base_url: Optional[str] = None,
        api_key: Optional[str] = None,
        region: Optional[str] = None,
        system_prompt: Optional[str] = None,
        max_turns: Optional[int] = None,
        max_token_budget: Optional[int] = None,
        max_tokens: Optional[int] = None,
        temperature: Optional[float] = None,
        top_p: Optional[float] = None,
        top_k: Optional[int] = None,
        thinking_budget: Optional[int] = None,
        deadline_ms: Optional[int] = None,
        loop_detection: Optional[Mapping[str, Any]] = None,
        context_strategy: Optional[Mapping[str, Any]] = None,
        compress_tool_results: Union[bool, Mapping[str, Any], None] = None,
        preserve_reasoning_as_text: Optional[bool] = None,
        compress_reasoning_text: Union[bool, Mapping[str, Any], None] = None,
        frequency_penalty: Optional[float] = None,
        presence_penalty: Optional[float] = None,
        min_p: Optional[float] = None,
        parallel_tool_calls: Optional[bool] = None,
        extra_body: Optional[Mapping[str, Any]] = None,
        thinking: Optional[ThinkingConfig] = None,
        on_trace: Optional[Callable[[TraceEvent], Any]] = None,
        output_schema: Any = None,
        history: Optional[Sequence[LLMMessage]] = None,
        before_run: Optional[BeforeRun] = None,
        tools: Sequence[Union["Tool[..., Any]", OmaTool]] = (),
        backend: Optional[Backend] = None,
        call: Optional[CallOptions] = None,
        http_client: Optional[HttpClient] = None,
        runtime: Optional[Runtime] = None,
        seed: Optional[int] = None,
        text_deltas: bool = False,
    ) -> None:
        spec = _Spec(name=name, model=model, provider=provider, tools=tools, before_run=before_run,
                     backend=backend, history=history, call=cast(Optional[Mapping[str, Any]], call),
                     options=dict(base_url=base_url, api_key=api_key, region=region, system_prompt=system_prompt,
                                  max_turns=max_turns, max_token_budget=max_token_budget, max_tokens=max_tokens,
                                  temperature=temperature, top_p=top_p, top_k=top_k,
                                  thinking_budget=thinking_budget, deadline_ms=deadline_ms,
                                  loop_detection=loop_detection, context_strategy=context_strategy,
                                  compress_tool_results=compress_tool_results,
                                  preserve_reasoning_as_text=preserve_reasoning_as_text,
                                  compress_reasoning_text=compress_reasoning_text,
                                  frequency_penalty=frequency_penalty, presence_penalty=presence_penalty,
                                  min_p=min_p, parallel_tool_calls=parallel_tool_calls, extra_body=extra_body,
                                  thinking=thinking, on_trace=on_trace, output_schema=output_schema),
                     runtime=runtime)
        self._host = spec.host(http_client or default_client())
        self._lock = threading.Lock()
        self._text_deltas = bool(text_deltas)
        super().__init__(spec, runtime, seed)

    def run(self, input: RunInput, *, seed: Optional[int] = None, cancel: Optional[CancelToken] = None,
            run_id: Optional[str] = None, metadata: Optional[Mapping[str, Any]] = None,
            on_tool_call: Optional[ToolCallObserver] = None,
            on_tool_result: Optional[ToolCallObserver] = None) -> AgentRunResult:
        """OMA's ``agent.run``: a fresh conversation; returns the ``AgentRunResult`` dict."""
        identity = _identity(run_id)
        host = self._host.for_run(identity, cancel, on_tool_call, on_tool_result, metadata)
        generation, session = self._start("[method]agent.run-json", input, seed)
        return _complete(drive(self._rt, generation, session, host), identity, metadata)

    def stream(self, input: RunInput, *, seed: Optional[int] = None, cancel: Optional[CancelToken] = None,
               run_id: Optional[str] = None, metadata: Optional[Mapping[str, Any]] = None,
               on_tool_call: Optional[ToolCallObserver] = None,
               on_tool_result: Optional[ToolCallObserver] = None) -> Iterator[StreamEvent]:
        """OMA's ``agent.stream``: yields ``reasoning``, ``text``, ``tool_use``, ``tool_result``,
        ``budget_exceeded`` events (and ``text_delta`` with ``text_deltas=True``) and finally
        ``done`` (the result) or ``error`` (the error, the result as its ``.result``). Invalid
        input raises here, before the iterator exists."""
        identity = _identity(run_id)
        host = self._host.for_run(identity, cancel, on_tool_call, on_tool_result, metadata)
        generation, session = self._start("[method]agent.stream-json", input, seed)
        return _events(drive(self._rt, generation, session, host), identity, metadata, self._text_deltas)

    def prompt(self, input: PromptInput, *, seed: Optional[int] = None, cancel: Optional[CancelToken] = None,
               run_id: Optional[str] = None, metadata: Optional[Mapping[str, Any]] = None,
               on_tool_call: Optional[ToolCallObserver] = None,
               on_tool_result: Optional[ToolCallObserver] = None) -> AgentRunResult:
        """OMA's ``agent.prompt``: one user turn (a string or content blocks) on the history."""
        identity = _identity(run_id)
        host = self._host.for_run(identity, cancel, on_tool_call, on_tool_result, metadata)
        with self._lock:
            generation, session = self._start("[method]agent.prompt-json", input, seed)
            result = _complete(drive(self._rt, generation, session, host), identity, metadata)
            self._snapshot()
            return result

    def __enter__(self) -> "Agent":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _run_agent_session(rt: Runtime, spec: _Spec, input: Any, progress: bool,
                       evaluation: Optional[EvaluationOptions], seed: Optional[int]) -> Tuple[int, Any]:
    """Starts a ``run-agent`` session; invalid input raises here."""
    evaluation_record = None
    if evaluation is not None:
        e = cast(Mapping[str, Any], evaluation)
        unknown = [k for k in e if k not in ("store_payloads", "sample_rate", "storePayloads", "sampleRate")]
        if unknown:
            raise TypeError(f"evaluation has an unknown key {unknown[0]!r}; known keys: store_payloads, sample_rate")
        evaluation_record = record(
            store_payloads=e.get("store_payloads", e.get("storePayloads", "none")),
            sample_rate=float(e.get("sample_rate", e.get("sampleRate", 1.0))),
        )
    options = record(progress=progress, evaluation=evaluation_record)
    session_options = spec.session_options(seed if seed is not None else _seed())
    payload = _dumps(input) if isinstance(input, str) else input_json(input)
    with rt.lock():
        session = rt.call("run-agent-json", spec.json(spec.history_json), payload, options, session_options)
        return rt.generation, session


def run_agent(
    input: RunInput,
    *,
    model: str,
    provider: str = "anthropic",
    name: str = "agent",
    on_progress: Optional[Callable[[ProgressEvent], Any]] = None,
    evaluation: Optional[EvaluationOptions] = None,
    on_case: Optional[Callable[[EvaluationCase], Any]] = None,
    before_run: Optional[BeforeRun] = None,
    tools: Sequence[Union["Tool[..., Any]", OmaTool]] = (),
    backend: Optional[Backend] = None,
    history: Optional[Sequence[LLMMessage]] = None,
    call: Optional[CallOptions] = None,
    http_client: Optional[HttpClient] = None,
    runtime: Optional[Runtime] = None,
    seed: Optional[int] = None,
    cancel: Optional[CancelToken] = None,
    run_id: Optional[str] = None,
    metadata: Optional[Mapping[str, Any]] = None,
    on_tool_call: Optional[ToolCallObserver] = None,
    on_tool_result: Optional[ToolCallObserver] = None,
    **config: Any,
) -> AgentRunResult:
    """OMA's ``runAgent``: a one-off agent with progress events and online evaluation.

    ``on_progress(event)`` gets ``{"type", "agent", "data"}`` (``agent_start``,
    ``budget_exceeded``, ``agent_complete``); ``evaluation={"store_payloads": "none" | "redacted"
    | "full", "sample_rate": 1.0}`` hands each evaluated case to ``on_case(case)``. What an
    observer raises is ignored. ``config`` takes the other keyword arguments of :class:`Agent`
    (``base_url``, ``api_key``, ``system_prompt``, ...); ``cancel``, ``run_id``, ``metadata``,
    ``on_tool_call`` and ``on_tool_result`` are the run options of :meth:`Agent.run`."""
    rt = runtime or default_runtime()
    spec = _Spec(name=name, model=model, provider=provider, tools=tools, before_run=before_run, backend=backend,
                 history=history, call=cast(Optional[Mapping[str, Any]], call), options=config,
                 runtime=rt)
    identity = _identity(run_id)
    host = spec.host(http_client or default_client(), on_progress, on_case).for_run(
        identity, cancel, on_tool_call, on_tool_result, metadata)
    generation, session = _run_agent_session(rt, spec, input, on_progress is not None, evaluation, seed)
    return _complete(drive(rt, generation, session, host), identity, metadata)
