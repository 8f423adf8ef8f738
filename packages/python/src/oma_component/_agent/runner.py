"""The sync API's host loop (OMA's ``agent/runner.ts``): steps a ``driver`` session to its
result, performing each step it asks for: HTTP over urllib3 in turn, waits, and the hook, tools,
backends and callbacks each on a daemon thread of its own, held to the run's deadline and to the
run's :class:`CancelToken`. The answers are built in ``host.py``, as the asyncio loop builds them."""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import queue
import threading
from typing import Any, Callable, Dict, Generator, Iterator, List, Mapping, Optional, Tuple, TypeVar, cast

from wasmtime.component import Variant

from .._errors import ComponentTrapError, OmaError
from .._http import TransportFailure
from .._runtime import ChunkAnswer, Runtime, record
from .._types import AgentRunResult, RunIdentity, StreamEvent
from .cancel import CancelToken, RunCancelled
from .host import (READING, Host, Observer, ToolTimings, call_arguments, close_cancelled, compress_request,
                   compress_variant, due_text, external_variant, failure_variant, give_answer, hook_context, hook_variant, loop_info,
                   loop_variant, notify, now_ms, observed_result, tool_context, tool_variant, validation_variant)
from .llm_adapter import ModelCall
from .result import cancelled_raw, internal_failure, last_event, run_result
from .tool import unknown_tool
from .values import event_json, text_of

R = TypeVar("R")

# -- user functions ----------------------------------------------------------------------------


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


def _hook_answer(host: Host, context_json: str) -> Variant:
    if host.before_run is None:
        return Variant("hook", Variant("failed", "no beforeRun hook is registered"))
    try:
        returned = _settle(host.before_run(hook_context(host, context_json)))
    except Exception as e:  # noqa: BLE001 - OMA: a throwing hook fails the run
        return hook_variant(error=e)
    return hook_variant(returned)


def _tool_answer(host: Host, call: Any) -> Variant:
    arguments = call_arguments(call)
    notify(host.on_tool_call, call.name, arguments)
    answer = _tool_run(host, call, arguments)
    if host.on_tool_result is not None:
        notify(host.on_tool_result, call.name, observed_result(answer))
    return answer


def _tool_run(host: Host, call: Any, arguments: Any) -> Variant:
    t = host.tools.get(call.name)
    if t is None:
        return tool_variant(call.id, error=LookupError(unknown_tool(call.name)))
    try:
        args = (arguments, tool_context(host, call)) if t.takes_context else (arguments,)
        value = _settle(t.fn(*args))
    except Exception as e:  # noqa: BLE001 - the model sees the failure
        return tool_variant(call.id, error=e)
    return tool_variant(call.id, value)


def _loop_answer(host: Host, p: Any) -> Variant:
    try:
        if host.on_loop_detected is None:
            raise RuntimeError("no onLoopDetected function is configured")
        return loop_variant(_settle(host.on_loop_detected(loop_info(p))))
    except Exception as e:  # noqa: BLE001 - OMA: a throwing callback fails the run
        return loop_variant(error=e)


def _compress_answer(host: Host, p: Any) -> Variant:
    messages, estimated = compress_request(p)
    try:
        if host.compress is None:
            raise RuntimeError("no custom context strategy is configured")
        return compress_variant(_settle(host.compress(messages, estimated)))
    except Exception as e:  # noqa: BLE001 - OMA: a throwing strategy fails the run
        return compress_variant(error=e)


def _external_answer(host: Host, p: Any) -> Variant:
    backend = host.backend
    try:
        if backend is None:
            raise RuntimeError("no external backend is configured")
        return external_variant(_settle(backend.send(p.text)))
    except Exception as e:  # noqa: BLE001 - a failing backend fails the run
        return external_variant(error=e)


# -- the host loop -----------------------------------------------------------------------------


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
        """Wakes :meth:`next` at once with :class:`RunCancelled` (from any thread)."""
        self._answers.put(RunCancelled())

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
        timeout = None if wake_at_ms is None else max(0.0, (wake_at_ms - now_ms()) / 1000.0)
        try:
            answer = self._answers.get(timeout=timeout)
        except queue.Empty:
            return None
        if isinstance(answer, RunCancelled):
            raise answer
        self.count -= 1
        if isinstance(answer, BaseException):
            raise answer
        return cast(Tuple[Optional[str], Variant], answer)


def _abandon(value: Any) -> None:
    """Closes what a provider call abandoned by a cancelled run returned, if anything."""
    close = getattr(value, "close", None)
    if callable(close):
        try:
            close()
        except Exception:  # noqa: BLE001
            pass


def _unless_cancelled(cancel: Optional[CancelToken], fn: Callable[[], R]) -> R:
    """``fn()``, or :class:`RunCancelled` as soon as ``cancel`` fires. Without a token ``fn``
    runs inline; with one it runs on a daemon thread so that the caller's thread can leave a
    request that blocks (connecting, waiting for the head, reading a whole body): when the run
    has left, the abandoned thread closes what it opened once its call returns."""
    if cancel is None:
        return fn()
    if cancel.cancelled:
        raise RunCancelled()
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
            raise RunCancelled()
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


def drive(rt: Runtime, generation: int, session: Any, host: Host) -> Generator[Dict[str, Any], None, Dict[str, Any]]:
    """Steps ``session`` to its end; yields stream events; returns the result dict.

    HTTP steps are performed in turn; the hook, tools and external backends run as pending calls
    (tools of one turn at once), held to the run's deadline.
    """
    response = None
    pending = _Pending()
    timings = ToolTimings()
    answer: Any
    # The adapter's model call in flight, and whether one of its answers is under way (its
    # stream is read event by event, as the session asks).
    model: Optional[ModelCall] = None
    model_pending = False
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
                raise RunCancelled()
            polled = rt.call("[method]session.next", session, now_ms(), generation=generation)
            if polled.tag == "finished":
                return host.finished(timings.records(cast(Dict[str, Any], json.loads(text_of(polled.payload)))))
            if polled.tag == "waiting":
                waiting = polled.payload
                if model is not None and not model_pending and model.streaming() \
                        and any(d.tag == "model" for d in waiting.due):
                    pending.start(model.next)
                    model_pending = True
                if pending.count == 0:
                    raise OmaError(f"the session waits for {due_text(waiting.due)}, which this host does not owe")
                ready = pending.next(getattr(waiting, "wake-at-ms"))
                if ready is not None:
                    if ready[1].tag.startswith("model-"):
                        model_pending = False
                    give_answer(rt, generation, session, ready[1], ready[0])
                continue
            step = polled.payload
            tag, p = step.tag, step.payload
            if response is not None and tag not in READING:
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
                    answer = failure_variant(f)
                give_answer(rt, generation, session, answer)
            elif tag == "receive":
                try:
                    data = response.read() if response is not None else b""
                    if cancel is not None and cancel.cancelled:
                        raise RunCancelled()
                    answer = ChunkAnswer(data) if data else Variant("end")
                    if not data and response is not None:
                        response.close()
                        response = None
                except TransportFailure as f:
                    if cancel is not None and cancel.cancelled:
                        raise RunCancelled() from None
                    answer = failure_variant(f)
                give_answer(rt, generation, session, answer)
            elif tag == "wait":
                if cancel is not None:
                    if cancel.wait(p / 1000.0):
                        raise RunCancelled()
                else:
                    host.sleep(p / 1000.0)
                give_answer(rt, generation, session, Variant("waited"))
            elif tag == "before-run":
                context = text_of(p)
                pending.start(lambda: _hook_answer(host, context))
            elif tag == "call-tool":
                pending.start(timings.around(functools.partial(_tool_answer, host, p)), p.id)
            elif tag == "call-model":
                # The agent's own LLM adapter instead of an HTTP request: ``chat``'s response, or
                # its stream's events one by one; the component checks each answer.
                if host.adapter is None:
                    raise OmaError("the session calls an LLM adapter this agent does not have")
                if model is not None:
                    model.close()
                model = ModelCall(host.adapter, json.loads(text_of(p)), host.text_deltas)
                pending.start(model.first)
                model_pending = True
            elif tag == "external-send":
                pending.start(functools.partial(_external_answer, host, p))
            elif tag == "compress":
                pending.start(functools.partial(_compress_answer, host, p))
            elif tag == "decide-loop":
                pending.start(functools.partial(_loop_answer, host, p))
            elif tag == "event":
                event = event_json(p)
                if event is not None:
                    yield event
            elif tag == "progress":
                _observe(host.on_progress, host.progress(p))
            elif tag == "evaluation":
                _observe(host.on_case, json.loads(text_of(p)))
            elif tag == "trace":
                _observe(host.on_trace, json.loads(text_of(p)))
            elif tag == "trace-records":
                host.deliver_records(p)
            elif tag == "validate-output":
                give_answer(rt, generation, session, validation_variant(host, p))
            else:  # pragma: no cover - a newer component
                raise OmaError(f"unknown step {tag!r}")
    except RunCancelled:
        close_cancelled(rt, generation, session, host, functools.partial(_observe, host.on_trace))
        raise
    finally:
        unsubscribe()
        if model is not None:
            model.close()
        if response is not None:
            response.close()
        rt.drop(generation, session)


def complete(gen: Generator[Dict[str, Any], None, Dict[str, Any]], identity: RunIdentity,
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
    except RunCancelled:
        raw = cancelled_raw()
    except Exception as e:  # noqa: BLE001 - as the JavaScript package: a result, never a throw
        raw = internal_failure(e)
    return run_result(raw, identity, metadata)


def stream_events(gen: Generator[Dict[str, Any], None, Dict[str, Any]], identity: RunIdentity,
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
    except RunCancelled:
        raw = cancelled_raw()
    except Exception as e:  # noqa: BLE001
        raw = internal_failure(e)
    finally:
        gen.close()
    yield last_event(run_result(raw, identity, metadata))
