"""The asyncio API's host loop (OMA's ``agent/runner.ts``): the same sessions, steps and answers
as the sync loop (``runner.py``; the answers are built in ``host.py``): only who waits differs.
Every call into the component is made on the event loop's thread, under the runtime's lock, so
one engine, one compiled component and one store serve both APIs in a process. Provider requests
go through :class:`AsyncHttpClient`; ``async def`` tools, hooks, backends and observers are
awaited on the loop (the tools of one turn concurrently), plain functions run on daemon threads
of their own (so a sync tool that blocks holds neither the loop nor the run's deadline).

Cancelling the task that awaits a run (or iterates a stream) ends it as asyncio expects: the
provider request in flight is closed, async tools and hooks under way are cancelled, the session
is dropped (a ``prompt`` leaves the history as it was), and ``CancelledError`` propagates; no
result is made. A :class:`CancelToken` given as ``cancel=`` ends the run the same way from any
thread, with OMA's cancelled result (as in the sync API) instead of ``CancelledError``.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import json
import threading
from typing import Any, AsyncIterator, Awaitable, Callable, Dict, List, Mapping, Optional, Tuple, cast

from wasmtime.component import Variant

from .._errors import ComponentTrapError, OmaError
from .._http import TransportFailure
from .._http_async import AsyncHttpClient, AsyncStreamingResponse
from .._runtime import ChunkAnswer, Runtime, record
from .._types import AgentRunResult, RunIdentity, StreamEvent
from .cancel import CancelToken, RunCancelled
from .host import (READING, Host, Observer, ToolTimings, call_arguments, close_cancelled, compress_request,
                   compress_variant, due_text, external_variant, failure_variant, give_answer, hook_context, hook_variant, loop_info,
                   loop_variant, notify, now_ms, observed_result, tool_context, tool_variant, validation_variant)
from .llm_adapter import AsyncModelCall
from .result import cancelled_raw, internal_failure, last_event, run_result
from .tool import unknown_tool
from .values import event_json, text_of

# -- user functions ----------------------------------------------------------------------------


def _is_async(fn: Any) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))


def _in_thread(fn: Callable[..., Any], *args: Any) -> "asyncio.Future[Any]":
    """``fn(*args)`` on a daemon thread of its own, as a future of this loop. A thread that
    outlives the run is left to finish; its answer is dropped (no executor waits for it)."""
    loop = asyncio.get_running_loop()
    future: "asyncio.Future[Any]" = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if future.done():
            return
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)

    def work() -> None:
        try:
            outcome: Tuple[bool, Any] = (True, fn(*args))
        except BaseException as e:  # noqa: BLE001 - handed to the awaiting task
            outcome = (False, e)
        try:
            loop.call_soon_threadsafe(settle, *outcome)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    threading.Thread(target=work, name="oma-host-call", daemon=True).start()
    return future


async def _call(fn: Callable[..., Any], *args: Any) -> Any:
    """A user's function: awaited when it is ``async``, else run on a thread (and what it
    returns awaited when it is awaitable)."""
    if _is_async(fn):
        return await fn(*args)
    value = await _in_thread(fn, *args)
    if inspect.isawaitable(value):
        value = await value
    return value


async def _hook_answer(host: Host, context_json: str) -> Variant:
    if host.before_run is None:
        return Variant("hook", Variant("failed", "no beforeRun hook is registered"))
    try:
        returned = await _call(host.before_run, hook_context(host, context_json))
    except Exception as e:  # noqa: BLE001 - OMA: a throwing hook fails the run
        return hook_variant(error=e)
    return hook_variant(returned)


async def _tool_answer(host: Host, call: Any) -> Variant:
    arguments = call_arguments(call)
    notify(host.on_tool_call, call.name, arguments)
    answer = await _tool_run(host, call, arguments)
    if host.on_tool_result is not None:
        notify(host.on_tool_result, call.name, observed_result(answer))
    return answer


async def _tool_run(host: Host, call: Any, arguments: Any) -> Variant:
    t = host.tools.get(call.name)
    if t is None:
        return tool_variant(call.id, error=LookupError(unknown_tool(call.name)))
    try:
        args = (arguments, tool_context(host, call)) if t.takes_context else (arguments,)
        value = await _call(t.fn, *args)
    except Exception as e:  # noqa: BLE001 - the model sees the failure
        return tool_variant(call.id, error=e)
    return tool_variant(call.id, value)


async def _loop_answer(host: Host, p: Any) -> Variant:
    try:
        if host.on_loop_detected is None:
            raise RuntimeError("no onLoopDetected function is configured")
        return loop_variant(await _call(host.on_loop_detected, loop_info(p)))
    except Exception as e:  # noqa: BLE001 - OMA: a throwing callback fails the run
        return loop_variant(error=e)


async def _compress_answer(host: Host, p: Any) -> Variant:
    messages, estimated = compress_request(p)
    try:
        if host.compress is None:
            raise RuntimeError("no custom context strategy is configured")
        return compress_variant(await _call(host.compress, messages, estimated))
    except Exception as e:  # noqa: BLE001 - OMA: a throwing strategy fails the run
        return compress_variant(error=e)


async def _external_answer(host: Host, p: Any) -> Variant:
    backend = host.backend
    try:
        if backend is None:
            raise RuntimeError("no external backend is configured")
        return external_variant(await _call(backend.send, p.text))
    except Exception as e:  # noqa: BLE001 - a failing backend fails the run
        return external_variant(error=e)


async def _observe(fn: Optional[Observer], value: Any) -> None:
    """Calls an observer (awaited when async, inline when not: it only looks); what it raises
    does not change the run."""
    if fn is None:
        return
    try:
        returned = fn(value)
        if inspect.isawaitable(returned):
            await returned
    except Exception:  # noqa: BLE001
        pass


# -- the host loop -----------------------------------------------------------------------------


class _Finished:
    __slots__ = ("result",)

    def __init__(self, result: AgentRunResult) -> None:
        self.result = result


async def _timed(answer: Awaitable[Variant], span: List[Optional[int]]) -> Variant:
    """``answer``, with the instant it ended written into ``span`` (a tool call's timing)."""
    try:
        return await answer
    finally:
        span[1] = now_ms()


async def adrive(rt: Runtime, generation: int, session: Any, host: Host,
                 client: AsyncHttpClient) -> AsyncIterator[Any]:
    """Steps ``session`` to its end on this event loop; yields stream events, then a
    ``_Finished`` with the result. The hook, tools and backends run as tasks (tools of one turn
    at once); while the session waits for them it is asked again at the instant it names."""
    response: Optional[AsyncStreamingResponse] = None
    # Answers under way, and the ones that have settled in the order they settled: each settled
    # answer is queued once by its done-callback, so a turn of n tools costs O(n) in all (waiting
    # on every pending future for each answer would cost O(n^2)).
    pending: Dict["asyncio.Future[Variant]", Optional[str]] = {}
    ready: "collections.deque[asyncio.Future[Variant]]" = collections.deque()
    settled = asyncio.Event()
    timings = ToolTimings()

    def on_done(future: "asyncio.Future[Variant]") -> None:
        ready.append(future)
        settled.set()

    def start(answer: Awaitable[Variant], tool_id: Optional[str] = None) -> None:
        future = asyncio.ensure_future(answer)
        pending[future] = tool_id
        future.add_done_callback(on_done)

    # The adapter's model call in flight, and whether one of its answers is under way (its
    # stream is read event by event, as the session asks).
    model: Optional[AsyncModelCall] = None
    model_pending = False
    try:
        while True:
            # A token that fired before the run started, or while the caller held a yielded
            # event: nothing more is done, and the session still closes the run's trace.
            if host.cancel is not None and host.cancel.cancelled:
                raise RunCancelled()
            polled = rt.call("[method]session.next", session, now_ms(), generation=generation)
            if polled.tag == "finished":
                yield _Finished(cast(AgentRunResult, host.finished(timings.records(json.loads(text_of(polled.payload))))))
                return
            if polled.tag == "waiting":
                waiting = polled.payload
                if model is not None and not model_pending and model.streaming() \
                        and any(d.tag == "model" for d in waiting.due):
                    start(model.next())
                    model_pending = True
                if not pending:
                    raise OmaError(f"the session waits for {due_text(waiting.due)}, which this host does not owe")
                wake = getattr(waiting, "wake-at-ms")
                timeout = None if wake is None else max(0.0, (wake - now_ms()) / 1000.0)
                if not ready:
                    settled.clear()
                    try:
                        await asyncio.wait_for(settled.wait(), timeout)
                    except asyncio.TimeoutError:
                        pass
                # Every answer that has settled, before the session is asked again.
                while ready:
                    future = ready.popleft()
                    tool_id = pending.pop(future)
                    settled_answer = future.result()
                    if settled_answer.tag.startswith("model-"):
                        model_pending = False
                    give_answer(rt, generation, session, settled_answer, tool_id)
                continue
            step = polled.payload
            tag, p = step.tag, step.payload
            if response is not None and tag not in READING:
                await response.aclose()
                response = None
            if tag == "send":
                try:
                    if p.stream:
                        response = await client.open(p)
                        answer: Any = Variant("head", record(status=response.status, headers=response.headers))
                    else:
                        status, headers, body = await client.send(p, host.max_response_bytes)
                        answer = Variant("response", record(status=status, headers=headers, body=body))
                except TransportFailure as f:
                    answer = failure_variant(f)
                give_answer(rt, generation, session, answer)
            elif tag == "receive":
                try:
                    data = await response.read() if response is not None else b""
                    answer = ChunkAnswer(data) if data else Variant("end")
                    if not data and response is not None:
                        await response.aclose()
                        response = None
                except TransportFailure as f:
                    answer = failure_variant(f)
                give_answer(rt, generation, session, answer)
            elif tag == "wait":
                await asyncio.sleep(p / 1000.0)
                give_answer(rt, generation, session, Variant("waited"))
            elif tag == "before-run":
                start(_hook_answer(host, text_of(p)))
            elif tag == "call-tool":
                start(_timed(_tool_answer(host, p), timings.start()), p.id)
            elif tag == "call-model":
                # The agent's own LLM adapter instead of an HTTP request: ``chat``'s response, or
                # its stream's events one by one; the component checks each answer.
                if host.adapter is None:
                    raise OmaError("the session calls an LLM adapter this agent does not have")
                if model is not None:
                    await model.aclose()
                model = AsyncModelCall(host.adapter, json.loads(text_of(p)), host.text_deltas)
                start(model.first(_call))
                model_pending = True
            elif tag == "external-send":
                start(_external_answer(host, p))
            elif tag == "compress":
                start(_compress_answer(host, p))
            elif tag == "decide-loop":
                start(_loop_answer(host, p))
            elif tag == "event":
                event = event_json(p)
                if event is not None:
                    yield event
            elif tag == "progress":
                await _observe(host.on_progress, host.progress(p))
            elif tag == "evaluation":
                await _observe(host.on_case, json.loads(text_of(p)))
            elif tag == "trace":
                await _observe(host.on_trace, json.loads(text_of(p)))
            elif tag == "trace-records":
                host.deliver_records(p)
            elif tag == "validate-output":
                give_answer(rt, generation, session, validation_variant(host, p))
            else:  # pragma: no cover - a newer component
                raise OmaError(f"unknown step {tag!r}")
    except (asyncio.CancelledError, RunCancelled):
        # The awaiting task was cancelled, or the run's token fired (during a step, or before).
        _close_cancelled(rt, generation, session, host)
        raise
    except GeneratorExit:
        # Left between steps: by the run's token, or by a stream's consumer (not a cancel).
        if host.cancel is not None and host.cancel.cancelled:
            _close_cancelled(rt, generation, session, host)
        raise
    finally:
        for future in pending:
            future.cancel()
        if model is not None:
            await model.aclose()
        if response is not None:
            await response.aclose()
        rt.drop(generation, session)


def _close_cancelled(rt: Runtime, generation: int, session: Any, host: Host) -> None:
    """``close_cancelled`` from the event loop's thread, where nothing can be awaited any more:
    an ``async def`` ``on_trace`` is scheduled on the loop, a plain one called."""

    def on_trace(event: Any) -> None:
        if host.on_trace is None:
            return
        try:
            returned = host.on_trace(event)
            if inspect.isawaitable(returned):
                asyncio.ensure_future(returned)
        except Exception:  # noqa: BLE001 - an observer never changes the run
            pass

    close_cancelled(rt, generation, session, host, on_trace)


async def _next(steps: AsyncIterator[Any], cancel: Optional[CancelToken]) -> Any:
    """The next item of ``steps``; with a token, :class:`RunCancelled` as soon as it fires (the
    step under way is cancelled: its request closed, its session dropped)."""
    if cancel is None or cancel.cancelled:
        # Already cancelled: the session, stepped once more, closes the run's trace and raises
        # RunCancelled before anything is sent (a run never started still has its spans).
        return await steps.__anext__()
    loop = asyncio.get_running_loop()
    step = asyncio.ensure_future(steps.__anext__())
    fired: "asyncio.Future[None]" = loop.create_future()

    def wake() -> None:
        if not fired.done():
            fired.set_result(None)

    def on_cancel() -> None:
        try:
            loop.call_soon_threadsafe(wake)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    unsubscribe = cancel._subscribe(on_cancel)
    try:
        await asyncio.wait((step, fired), return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        step.cancel()
        raise
    finally:
        unsubscribe()
        fired.cancel()
    if step.done():
        return step.result()
    step.cancel()
    try:
        await step
    except BaseException:  # noqa: BLE001 - the step was cancelled on purpose
        pass
    raise RunCancelled()


async def acomplete(steps: AsyncIterator[Any], identity: RunIdentity,
                    metadata: Optional[Mapping[str, Any]] = None,
                    cancel: Optional[CancelToken] = None) -> AgentRunResult:
    raw: Mapping[str, Any]
    try:
        while True:
            item = await _next(steps, cancel)
            if isinstance(item, _Finished):
                raw = item.result
                break
    except StopAsyncIteration:  # pragma: no cover
        raw = internal_failure(OmaError("the session ended without a result"))
    except ComponentTrapError:
        raise
    except RunCancelled:
        raw = cancelled_raw()
    except Exception as e:  # noqa: BLE001 - as the JavaScript package: a result, never a throw
        raw = internal_failure(e)
    finally:
        await cast(Any, steps).aclose()
    return run_result(raw, identity, metadata)


async def astream_events(steps: AsyncIterator[Any], identity: RunIdentity, metadata: Optional[Mapping[str, Any]] = None,
                         cancel: Optional[CancelToken] = None, text_deltas: bool = False) -> AsyncIterator[StreamEvent]:
    raw: Optional[Mapping[str, Any]] = None
    try:
        while True:
            item = await _next(steps, cancel)
            if isinstance(item, _Finished):
                raw = item.result
                break
            if text_deltas or item.get("type") != "text_delta":
                yield cast(StreamEvent, item)
    except StopAsyncIteration:  # pragma: no cover
        pass
    except ComponentTrapError:
        raise
    except RunCancelled:
        raw = cancelled_raw()
    except Exception as e:  # noqa: BLE001
        raw = internal_failure(e)
    finally:
        await cast(Any, steps).aclose()
    if raw is None:  # pragma: no cover
        raw = internal_failure(OmaError("the session ended without a result"))
    yield last_event(run_result(raw, identity, metadata))
