"""What answers a session's steps, for both APIs: the :class:`Host` (an agent's hook, tools,
backend and observers, and per run its identity, cancel token and tool observers), and the
answers built from what those return. The sync loop (``runner.py``) and the asyncio loop
(``runner_async.py``) call the user's functions each in its own way and give the session the
same answers, built here: the same tool texts, the same events, the same failures."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, cast

from wasmtime.component import Variant

from .._errors import InvalidMessageError
from .._http import DEFAULT_MAX_RESPONSE_BYTES, TransportFailure
from .._runtime import Runtime, record
from .._runtime import dumps as _dumps
from .._types import BeforeRunContext, ProgressEvent, RunIdentity
from .cancel import CancelToken
from .process_backend import Backend
from .result import message_of, run_result
from .tool import Tool, tool_outcome
from .values import text_of

#: A ``before_run`` hook: gets the context, returns ``{"prompt", "messages"?}`` (or awaits it).
BeforeRun = Callable[[BeforeRunContext], Any]
#: A progress or evaluation observer; what it raises is ignored.
Observer = Callable[[Any], Any]
#: A run's tool observers: ``on_tool_call(name, input)`` before a tool runs,
#: ``on_tool_result(name, {"data", "isError"})`` after; what they raise is ignored.
ToolCallObserver = Callable[[str, Dict[str, Any]], Any]


def now_ms() -> int:
    """The host's clock, in milliseconds since the epoch (the component reads no clock)."""
    return int(time.time() * 1000)


@dataclass
class Host:
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
    # OMA's ``LLMAdapter`` (``chat``, ``stream``), which answers ``call-model`` steps, and
    # whether a streamed run asked for text pieces (then the adapter's ``stream`` answers).
    adapter: Any = None
    text_deltas: bool = False
    # Where the run's trace records go (``observability=``): an ``Observability``.
    records: Any = None
    sleep: Callable[[float], None] = time.sleep
    # Where a whole response's read stops (the component decides what a body past it means).
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    # The hook's ``ctx["agent"]``: the configuration as given, without hooks and secrets.
    agent_info: Dict[str, Any] = field(default_factory=dict)
    # Per run (``Host.for_run``): the tool observers, the cancel token, the run's id.
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
                metadata: Optional[Mapping[str, Any]] = None) -> "Host":
        """This host for one run."""
        if cancel is not None and not isinstance(cancel, CancelToken):
            raise TypeError("cancel must be an oma_component.CancelToken")
        return replace(self, cancel=cancel, on_tool_call=on_tool_call, on_tool_result=on_tool_result,
                       identity=identity, metadata=metadata, validated=[])

    def deliver_records(self, batch: Any) -> None:
        """A ``trace-records`` step: its records go to the sinks (never blocks, never raises)."""
        if self.records is not None:
            self.records.deliver(self.identity, batch)

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
            event["data"] = run_result(event["data"], self.identity, self.metadata)
        return event


def _progress_json(p: Any) -> ProgressEvent:
    """A ``progress`` step as OMA's ``{"type", "agent", "data"}``."""
    return {"type": p.type, "agent": p.agent, "data": json.loads(p.data)}


def hook_context(host: Host, context_json: str) -> Any:
    """The hook's context: OMA's ``{prompt, messages, agent}`` with ``agent`` the configuration
    (without hooks and secrets), and ``config``, the component's view of it."""
    context = json.loads(context_json)
    if isinstance(context, dict):
        context["agent"] = dict(host.agent_info)
    return context


def tool_context(host: Host, call: Any) -> Dict[str, Any]:
    """What a tool in OMA's shape gets as its second argument."""
    return {"agent": {"name": host.agent_info.get("name"), "model": host.agent_info.get("model")},
            "toolCallId": call.id, "runId": host.identity["runId"] if host.identity else ""}


def notify(fn: Optional[ToolCallObserver], name: str, value: Any) -> None:
    """Calls a tool observer; what it raises does not change the run."""
    if fn is None:
        return
    try:
        fn(name, value)
    except Exception:  # noqa: BLE001
        pass


def observed_result(answer: Variant) -> Dict[str, Any]:
    """A tool answer as the ``on_tool_result`` observer sees it: OMA's ``{"data", "isError"}``."""
    payload: Any = answer.payload
    try:
        data = json.loads(payload.content)
    except (AttributeError, TypeError, ValueError):
        data = None
    return {"data": data, "isError": bool(getattr(payload, "is_error", getattr(payload, "is-error", False)) or False)}


def call_arguments(call: Any) -> Any:
    """A tool call's arguments: its JSON input parsed (``{}`` when empty or not JSON)."""
    try:
        return json.loads(call.input) if call.input else {}
    except ValueError:
        return {}


def hook_variant(value: Any = None, error: Optional[BaseException] = None) -> Variant:
    """``answer.hook``: the hook's return value as JSON text, or its failure."""
    if error is None:
        try:
            return Variant("hook", Variant("json", _dumps(value)))
        except (TypeError, ValueError) as e:
            error = e
    return Variant("hook", Variant("failed", message_of(error)))


def tool_variant(call_id: str, value: Any = None, error: Optional[BaseException] = None) -> Variant:
    """``answer.tool-json`` for a tool's return value or its failure."""
    if error is None:
        try:
            content, is_error = tool_outcome(value)
        except (TypeError, ValueError) as e:
            content, is_error = message_of(e), True
    else:
        content, is_error = message_of(error), True
    try:
        text = _dumps(content)
    except (TypeError, ValueError) as e:
        text, is_error = _dumps(f"tool result is not JSON data: {message_of(e)}"), True
    return Variant("tool-json", record(id=call_id, content=text, is_error=is_error, gate=None))


def external_variant(value: Any = None, error: Optional[BaseException] = None) -> Variant:
    """``answer.external``: an external backend's answer text, or its failure."""
    if error is None:
        return Variant("external", Variant("ok", value if isinstance(value, str) else str(value)))
    return Variant("external", Variant("err", message_of(error)))


def failure_variant(f: TransportFailure) -> Variant:
    """``answer.failure``: a provider request that failed in transport, by kind."""
    return Variant("failure", record(kind=f.kind, message=f.message))


def give_answer(rt: Runtime, generation: int, session: Any, answer: Any, tool_id: Optional[str] = None) -> None:
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


def close_cancelled(rt: Runtime, generation: int, session: Any, host: Host,
                    on_trace: Callable[[Any], None]) -> None:
    """Closes the trace of a run its caller cancelled: the session, told so
    (``session.cancel``), hands out the records that end the run's open spans with status
    ``cancelled`` and the legacy events (OMA ends its spans the same way when the signal
    aborts); the records go to the sinks and the events to ``on_trace`` as any others. The
    session's result, OMA's cancelled one, is the caller's already. Never raises: the run is
    over either way."""
    try:
        rt.call("[method]session.cancel", session, now_ms(), generation=generation)
        # Bounded: the session owes only the trace's end before its result.
        for _ in range(64):
            polled = rt.call("[method]session.next", session, now_ms(), generation=generation)
            if polled.tag != "step":
                return
            tag, p = polled.payload.tag, polled.payload.payload
            if tag == "trace-records":
                host.deliver_records(p)
            elif tag == "trace":
                on_trace(json.loads(text_of(p)))
    except Exception:  # noqa: BLE001 - nothing to report: the caller has left
        pass


def validation_variant(host: Host, text: str) -> Variant:
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
        return Variant("validated", Variant("err", message_of(e)))
    if host.validated is not None:
        host.validated.append(instance)
    return Variant("validated", Variant("ok", _dumps(instance.model_dump(mode="json"))))


def loop_info(p: Any) -> Dict[str, Any]:
    """The ``decide-loop`` step's loop as OMA's ``LoopDetectionInfo`` dict."""
    return {"kind": p.kind, "repetitions": p.repetitions, "detail": p.detail}


def loop_variant(word: Any = None, error: Optional[BaseException] = None) -> Variant:
    """OMA's ``onLoopDetected`` answer: its word (``terminate``, ``warn``, ``inject``; anything
    else goes on), or its failure, which ends the run."""
    if error is not None:
        return Variant("loop-decision", Variant("err", message_of(error)))
    return Variant("loop-decision", Variant("ok", str(word)))


def compress_request(p: Any) -> Tuple[Any, int]:
    """The ``compress`` step's conversation (OMA JSON, parsed) and token estimate."""
    return json.loads(text_of(p.messages)), int(getattr(p, "estimated-tokens"))


def compress_variant(returned: Any = None, error: Optional[BaseException] = None) -> Variant:
    """What the ``custom`` strategy's function returned, as JSON for the component's checks
    (anything but a non-empty message list ends the run with OMA's error), or its failure."""
    if error is not None:
        return Variant("compress-failed", message_of(error))
    try:
        return Variant("compressed-json", _dumps(returned))
    except (TypeError, ValueError) as e:
        return Variant("compress-failed", message_of(e))


# The steps that may come while a response body is still being read.
READING = frozenset(("receive", "event", "progress", "evaluation", "trace-records"))


class ToolTimings:
    """When each tool call of a run started and ended (ms since the epoch), in the order the
    session asked for them: the order of the result's ``toolCalls``. OMA records each call's
    ``duration``; the component does not see the host's clock."""

    def __init__(self) -> None:
        self._spans: List[List[Optional[int]]] = []

    def start(self) -> List[Optional[int]]:
        span: List[Optional[int]] = [now_ms(), None]
        self._spans.append(span)
        return span

    def around(self, fn: Callable[[], Any]) -> Callable[[], Any]:
        """``fn``, timed as the next tool call."""
        span = self.start()

        def timed() -> Any:
            try:
                return fn()
            finally:
                span[1] = now_ms()

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


def due_text(due: Any) -> str:
    return ", ".join(f"tool {d.payload}" if d.tag == "tool" else d.tag for d in due)
