"""The asyncio API: :class:`AsyncAgent` and :func:`run_agent_async`, over httpx.

The same sessions, steps and answers as the sync API (``_agent.py``): only who waits differs.
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
import ssl
import sys
import threading
import weakref
from typing import (Any, AsyncIterator, Awaitable, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, TypeVar,
                    Union, cast)

import httpx
from wasmtime.component import Variant

from ._agent import (
    _READING,
    Backend,
    BeforeRun,
    CancelToken,
    Observer,
    Tool,
    ToolCallObserver,
    _AgentCore,
    _answer,
    _arguments,
    _cancelled_raw,
    _hook_context,
    _identity,
    _notify,
    _observed_result,
    _outcome,
    _RunCancelled,
    _tool_context,
    _validation_variant,
    _due_text,
    _event_json,
    _external_variant,
    _compress_request,
    _compress_variant,
    _loop_info,
    _loop_variant,
    _failure_variant,
    _Host,
    _hook_variant,
    _internal_failure,
    _last_event,
    _now_ms,
    _run_agent_session,
    _Spec,
    _text_of,
    _tool_variant,
    _ToolTimings,
    _unknown_tool,
)
from ._errors import ComponentTrapError, OmaError
from ._http import DEFAULT_MAX_RESPONSE_BYTES, Headers, TransportFailure, classify
from ._runtime import ChunkAnswer, Runtime, default_runtime, record
from ._types import (
    AgentRunResult,
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
    ThinkingConfig,
    TraceEvent,
)

T = TypeVar("T")

if sys.version_info >= (3, 11):

    async def _within(awaitable: Awaitable[T], seconds: float) -> T:
        """``awaitable`` within ``seconds``, on this task (no task of its own)."""
        async with asyncio.timeout(seconds):
            return await awaitable

else:  # pragma: no cover - Python 3.10

    async def _within(awaitable: Awaitable[T], seconds: float) -> T:
        return await asyncio.wait_for(awaitable, seconds)


# -- HTTP --------------------------------------------------------------------------------------


class AsyncHttpClient:
    """Sends the requests of ``send`` steps with httpx's ``AsyncClient``, under the same rules as
    :class:`HttpClient`: redirects never followed (a 3xx goes to the component as it came, a
    provider error), ``identity`` encoding asked for and nothing inflated (raw bytes only), bodies
    read in chunks of at most ``chunk_size`` bytes that the component counts as they arrive (a
    whole response is read to one chunk past its limit and no further), and every wait bounded:
    the head within the request's timeout, each chunk of a stream within it, a whole response to
    its last byte within it. The environment is not read (no proxies, no ``.netrc``), and TLS is
    checked against the system's certificate store.

    One client pools connections for the event loop it is first used on; the default client
    (one per loop) is used when an agent is given none. ``await client.aclose()`` (or ``async
    with``) closes its connections.
    """

    def __init__(self, client: Optional[httpx.AsyncClient] = None, *, chunk_size: int = 65536) -> None:
        self.client = client or httpx.AsyncClient(
            follow_redirects=False,
            trust_env=False,
            verify=ssl.create_default_context(),
            timeout=None,  # every wait is bounded here, by the step's own timeout
            limits=httpx.Limits(max_connections=32, max_keepalive_connections=8),
        )
        self.chunk_size = chunk_size

    async def send(self, req: Any, limit: int = DEFAULT_MAX_RESPONSE_BYTES) -> Tuple[int, Headers, str]:
        """A whole response: status, headers, and the body text, of which at most ``limit``
        bytes and one chunk more are read, all within the request's timeout."""
        resp = await self.open(req)
        try:
            parts: List[bytes] = []
            size = 0
            while size <= limit:
                chunk = await resp.read()
                if not chunk:
                    break
                parts.append(chunk)
                size += len(chunk)
            return resp.status, resp.headers, b"".join(parts).decode("utf-8", errors="replace")
        finally:
            await resp.aclose()

    async def open(self, req: Any) -> "AsyncStreamingResponse":
        """Sends the request and returns its response once the head is in; the body follows."""
        seconds = max(getattr(req, "timeout-ms"), 1) / 1000.0
        loop = asyncio.get_running_loop()
        started = loop.time()
        headers = [(name, value) for name, value in req.headers if name.lower() != "accept-encoding"]
        headers.append(("accept-encoding", "identity"))
        try:
            request = self.client.build_request(req.method, req.url, content=req.body.encode("utf-8"),
                                                headers=headers, timeout=httpx.Timeout(seconds))
            resp = await _within(self.client.send(request, stream=True, follow_redirects=False), seconds)
        except (asyncio.TimeoutError, TimeoutError):
            raise TransportFailure("timed-out", "timed out waiting for the response's head") from None
        except Exception as e:  # noqa: BLE001 - every failure becomes a transport failure
            raise classify(e) from None
        # The whole response, streamed or not, must be in within the timeout, however its bytes
        # trickle (a stream of keep-alives too); a stream's gaps are each bounded by it as well.
        until = started + seconds
        return AsyncStreamingResponse(resp, self.chunk_size, seconds, until)

    async def aclose(self) -> None:
        await self.client.aclose()

    async def __aenter__(self) -> "AsyncHttpClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


class AsyncStreamingResponse:
    """A response whose head is in and whose body is read as the session asks."""

    def __init__(self, resp: httpx.Response, chunk_size: int, timeout: float, until: Optional[float]) -> None:
        self.resp = resp
        self.status = resp.status_code
        self.headers: Headers = [(k.lower(), v) for k, v in resp.headers.multi_items()]
        self._chunks = resp.aiter_raw()
        self._chunk_size = chunk_size
        self._timeout = timeout
        self._until = until
        self._rest = b""

    async def read(self) -> bytes:
        """The next bytes (at most ``chunk_size``), as soon as some arrive; ``b""`` at the end."""
        if not self._rest:
            limit = self._timeout
            if self._until is not None:
                left = self._until - asyncio.get_running_loop().time()
                if left <= 0:
                    raise TransportFailure("timed-out", "timed out: the whole response took longer than the timeout")
                limit = min(limit, left)
            try:
                self._rest = await _within(self._chunks.__anext__(), limit)
            except StopAsyncIteration:
                return b""
            except (asyncio.TimeoutError, TimeoutError):
                raise TransportFailure("timed-out", "timed out waiting for the body") from None
            except Exception as e:  # noqa: BLE001
                raise classify(e) from None
        data, self._rest = self._rest[: self._chunk_size], self._rest[self._chunk_size :]
        return data

    async def aclose(self) -> None:
        """Closes the connection unless the body was read to its end (then it goes back to the
        pool): a body left unread is not drained, however large."""
        try:
            await self.resp.aclose()
        except Exception:  # noqa: BLE001
            pass


_clients: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncHttpClient]" = weakref.WeakKeyDictionary()


def default_async_client() -> AsyncHttpClient:
    """The running event loop's shared client (connections belong to one loop)."""
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None:
        client = _clients[loop] = AsyncHttpClient()
    return client


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


async def _hook_answer(host: _Host, context_json: str) -> Variant:
    if host.before_run is None:
        return Variant("hook", Variant("failed", "no beforeRun hook is registered"))
    try:
        returned = await _call(host.before_run, _hook_context(host, context_json))
    except Exception as e:  # noqa: BLE001 - OMA: a throwing hook fails the run
        return _hook_variant(error=e)
    return _hook_variant(returned)


async def _tool_answer(host: _Host, call: Any) -> Variant:
    arguments = _arguments(call)
    _notify(host.on_tool_call, call.name, arguments)
    answer = await _tool_run(host, call, arguments)
    if host.on_tool_result is not None:
        _notify(host.on_tool_result, call.name, _observed_result(answer))
    return answer


async def _tool_run(host: _Host, call: Any, arguments: Any) -> Variant:
    t = host.tools.get(call.name)
    if t is None:
        return _tool_variant(call.id, error=LookupError(_unknown_tool(call.name)))
    try:
        args = (arguments, _tool_context(host, call)) if t.takes_context else (arguments,)
        value = await _call(t.fn, *args)
    except Exception as e:  # noqa: BLE001 - the model sees the failure
        return _tool_variant(call.id, error=e)
    return _tool_variant(call.id, value)


async def _loop_answer(host: _Host, p: Any) -> Variant:
    try:
        if host.on_loop_detected is None:
            raise RuntimeError("no onLoopDetected function is configured")
        return _loop_variant(await _call(host.on_loop_detected, _loop_info(p)))
    except Exception as e:  # noqa: BLE001 - OMA: a throwing callback fails the run
        return _loop_variant(error=e)


async def _compress_answer(host: _Host, p: Any) -> Variant:
    messages, estimated = _compress_request(p)
    try:
        if host.compress is None:
            raise RuntimeError("no custom context strategy is configured")
        return _compress_variant(await _call(host.compress, messages, estimated))
    except Exception as e:  # noqa: BLE001 - OMA: a throwing strategy fails the run
        return _compress_variant(error=e)


async def _external_answer(host: _Host, p: Any) -> Variant:
    backend = host.backend
    try:
        if backend is None:
            raise RuntimeError("no external backend is configured")
        return _external_variant(await _call(backend.send, p.text))
    except Exception as e:  # noqa: BLE001 - a failing backend fails the run
        return _external_variant(error=e)


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
        span[1] = _now_ms()


async def adrive(rt: Runtime, generation: int, session: Any, host: _Host,
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
    timings = _ToolTimings()

    def on_done(future: "asyncio.Future[Variant]") -> None:
        ready.append(future)
        settled.set()

    def start(answer: Awaitable[Variant], tool_id: Optional[str] = None) -> None:
        future = asyncio.ensure_future(answer)
        pending[future] = tool_id
        future.add_done_callback(on_done)

    try:
        while True:
            polled = rt.call("[method]session.next", session, _now_ms(), generation=generation)
            if polled.tag == "finished":
                yield _Finished(cast(AgentRunResult, host.finished(timings.records(json.loads(_text_of(polled.payload))))))
                return
            if polled.tag == "waiting":
                waiting = polled.payload
                if not pending:
                    raise OmaError(f"the session waits for {_due_text(waiting.due)}, which this host does not owe")
                wake = getattr(waiting, "wake-at-ms")
                timeout = None if wake is None else max(0.0, (wake - _now_ms()) / 1000.0)
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
                    _answer(rt, generation, session, future.result(), tool_id)
                continue
            step = polled.payload
            tag, p = step.tag, step.payload
            if response is not None and tag not in _READING:
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
                    answer = _failure_variant(f)
                _answer(rt, generation, session, answer)
            elif tag == "receive":
                try:
                    data = await response.read() if response is not None else b""
                    answer = ChunkAnswer(data) if data else Variant("end")
                    if not data and response is not None:
                        await response.aclose()
                        response = None
                except TransportFailure as f:
                    answer = _failure_variant(f)
                _answer(rt, generation, session, answer)
            elif tag == "wait":
                await asyncio.sleep(p / 1000.0)
                _answer(rt, generation, session, Variant("waited"))
            elif tag == "before-run":
                start(_hook_answer(host, _text_of(p)))
            elif tag == "call-tool":
                start(_timed(_tool_answer(host, p), timings.start()), p.id)
            elif tag == "external-send":
                start(_external_answer(host, p))
            elif tag == "compress":
                start(_compress_answer(host, p))
            elif tag == "decide-loop":
                start(_loop_answer(host, p))
            elif tag == "event":
                event = _event_json(p)
                if event is not None:
                    yield event
            elif tag == "progress":
                await _observe(host.on_progress, host.progress(p))
            elif tag == "evaluation":
                await _observe(host.on_case, json.loads(_text_of(p)))
            elif tag == "trace":
                await _observe(host.on_trace, json.loads(_text_of(p)))
            elif tag == "validate-output":
                _answer(rt, generation, session, _validation_variant(host, p))
            else:  # pragma: no cover - a newer component
                raise OmaError(f"unknown step {tag!r}")
    finally:
        for future in pending:
            future.cancel()
        if response is not None:
            await response.aclose()
        rt.drop(generation, session)


async def _next(steps: AsyncIterator[Any], cancel: Optional[CancelToken]) -> Any:
    """The next item of ``steps``; with a token, :class:`_RunCancelled` as soon as it fires (the
    step under way is cancelled: its request closed, its session dropped)."""
    if cancel is None:
        return await steps.__anext__()
    if cancel.cancelled:
        raise _RunCancelled()
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
    raise _RunCancelled()


async def _acomplete(steps: AsyncIterator[Any], identity: RunIdentity,
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
        raw = _internal_failure(OmaError("the session ended without a result"))
    except ComponentTrapError:
        raise
    except _RunCancelled:
        raw = _cancelled_raw()
    except Exception as e:  # noqa: BLE001 - as the JavaScript package: a result, never a throw
        raw = _internal_failure(e)
    finally:
        await cast(Any, steps).aclose()
    return _outcome(raw, identity, metadata)


async def _aevents(steps: AsyncIterator[Any], identity: RunIdentity, metadata: Optional[Mapping[str, Any]] = None,
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
    except _RunCancelled:
        raw = _cancelled_raw()
    except Exception as e:  # noqa: BLE001
        raw = _internal_failure(e)
    finally:
        await cast(Any, steps).aclose()
    if raw is None:  # pragma: no cover
        raw = _internal_failure(OmaError("the session ended without a result"))
    yield _last_event(_outcome(raw, identity, metadata))


# -- the API -----------------------------------------------------------------------------------


class AsyncAgent(_AgentCore):
    """An OMA agent for asyncio: ``await agent.run(input)``, ``async for event in
    agent.stream(input)``, ``await agent.prompt(input)``; ``get_history()`` and ``reset()`` do
    no I/O and are plain calls. It takes the arguments of :class:`Agent`, with an
    :class:`AsyncHttpClient` as ``http_client``.

    Tools, the hook and backends may be ``async def`` (awaited on the loop; the tools of one
    turn run concurrently) or plain functions (run on threads of their own). The run's deadline
    (``deadline_ms``) holds them: past it the run ends with OMA's ``timeout`` status and what is
    still running is cancelled (a thread is left to finish, its answer dropped). Cancelling the
    awaiting task closes the provider request and raises ``CancelledError``.
    """

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
        http_client: Optional[AsyncHttpClient] = None,
        runtime: Optional[Runtime] = None,
        seed: Optional[int] = None,
        text_deltas: bool = False,
    ) -> None:
        spec = _Spec(name=name, model=model, provider=provider, tools=tools, before_run=before_run,
                     backend=backend, history=history, call=cast(Any, call),
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
        self._host = spec.host(None)
        self._client = http_client
        self._prompt_lock: Optional[asyncio.Lock] = None
        self._text_deltas = bool(text_deltas)
        super().__init__(spec, runtime, seed)

    def _steps(self, generation: int, session: Any, host: _Host) -> AsyncIterator[Any]:
        return adrive(self._rt, generation, session, host, self._client or default_async_client())

    async def run(self, input: RunInput, *, seed: Optional[int] = None, cancel: Optional[CancelToken] = None,
                  run_id: Optional[str] = None, metadata: Optional[Mapping[str, Any]] = None,
                  on_tool_call: Optional[ToolCallObserver] = None,
                  on_tool_result: Optional[ToolCallObserver] = None) -> AgentRunResult:
        """OMA's ``agent.run``: a fresh conversation; returns the ``AgentRunResult`` dict.
        Invalid input raises :class:`InvalidMessageError` before anything happens. The run
        options are :meth:`Agent.run`'s."""
        identity = _identity(run_id)
        host = self._host.for_run(identity, cancel, on_tool_call, on_tool_result, metadata)
        generation, session = self._start("[method]agent.run-json", input, seed)
        return await _acomplete(self._steps(generation, session, host), identity, metadata, cancel)

    def stream(self, input: RunInput, *, seed: Optional[int] = None, cancel: Optional[CancelToken] = None,
               run_id: Optional[str] = None, metadata: Optional[Mapping[str, Any]] = None,
               on_tool_call: Optional[ToolCallObserver] = None,
               on_tool_result: Optional[ToolCallObserver] = None) -> AsyncIterator[StreamEvent]:
        """OMA's ``agent.stream`` as an async iterator (the events of :meth:`Agent.stream`).
        Invalid input raises here, at the call, before the iterator exists. Leaving the loop
        early: ``await events.aclose()`` (or ``contextlib.aclosing``) ends the run at once."""
        identity = _identity(run_id)
        host = self._host.for_run(identity, cancel, on_tool_call, on_tool_result, metadata)
        generation, session = self._start("[method]agent.stream-json", input, seed)
        return _aevents(self._steps(generation, session, host), identity, metadata, cancel, self._text_deltas)

    async def prompt(self, input: PromptInput, *, seed: Optional[int] = None, cancel: Optional[CancelToken] = None,
                     run_id: Optional[str] = None, metadata: Optional[Mapping[str, Any]] = None,
                     on_tool_call: Optional[ToolCallObserver] = None,
                     on_tool_result: Optional[ToolCallObserver] = None) -> AgentRunResult:
        """OMA's ``agent.prompt``: one user turn (a string or content blocks) on the history;
        prompts of one agent take turns."""
        identity = _identity(run_id)
        host = self._host.for_run(identity, cancel, on_tool_call, on_tool_result, metadata)
        if self._prompt_lock is None:
            self._prompt_lock = asyncio.Lock()
        async with self._prompt_lock:
            generation, session = self._start("[method]agent.prompt-json", input, seed)
            result = await _acomplete(self._steps(generation, session, host), identity, metadata, cancel)
            self._snapshot()
            return result

    async def __aenter__(self) -> "AsyncAgent":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()


async def run_agent_async(
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
    http_client: Optional[AsyncHttpClient] = None,
    runtime: Optional[Runtime] = None,
    seed: Optional[int] = None,
    cancel: Optional[CancelToken] = None,
    run_id: Optional[str] = None,
    metadata: Optional[Mapping[str, Any]] = None,
    on_tool_call: Optional[ToolCallObserver] = None,
    on_tool_result: Optional[ToolCallObserver] = None,
    **config: Any,
) -> AgentRunResult:
    """OMA's ``runAgent`` for asyncio: :func:`run_agent`'s arguments, awaited. Observers may be
    ``async def`` (awaited); what they raise is ignored."""
    rt = runtime or default_runtime()
    spec = _Spec(name=name, model=model, provider=provider, tools=tools, before_run=before_run, backend=backend,
                 history=history, call=cast(Any, call), options=config, runtime=rt)
    identity = _identity(run_id)
    host = spec.host(None, on_progress, on_case).for_run(identity, cancel, on_tool_call, on_tool_result, metadata)
    generation, session = _run_agent_session(rt, spec, input, on_progress is not None, evaluation, seed)
    return await _acomplete(adrive(rt, generation, session, host, http_client or default_async_client()),
                            identity, metadata, cancel)

