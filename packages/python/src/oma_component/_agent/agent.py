"""The agents (OMA's ``agent/agent.ts``): :class:`Agent` (sync) and :class:`AsyncAgent`
(asyncio), over one core: the configuration, and the agent inside the component with its
persistent history, re-created after a trap from the configuration and the last committed
history. ``run`` and ``stream`` start a fresh conversation, ``prompt`` a turn on the history;
the loops in ``runner.py`` and ``runner_async.py`` drive each run."""

from __future__ import annotations

import asyncio
import json
import threading
import weakref
from typing import Any, AsyncIterator, Callable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union, cast

from .._http import HttpClient, default_client
from .._http_async import AsyncHttpClient, default_async_client
from .._runtime import Runtime, default_runtime
from .._types import (
    AgentRunResult,
    CallOptions,
    LLMAdapter,
    LLMMessage,
    OmaTool,
    PromptInput,
    RunInput,
    StreamEvent,
    ThinkingConfig,
    TraceEvent,
)
from .cancel import CancelToken
from .config import Spec, new_seed
from .host import BeforeRun, Host, ToolCallObserver
from .input import run_input
from .process_backend import Backend
from .result import new_identity
from .runner import complete, drive, stream_events
from .runner_async import acomplete, adrive, astream_events
from .tool import Tool


class AgentCore:
    """What both agent classes share: the configuration, and the agent inside the component,
    re-created from its configuration and last committed history after a trap."""

    def __init__(self, spec: Spec, runtime: Optional[Runtime], seed: Optional[int]) -> None:
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
            seed = self._seed if self._seed is not None else new_seed()
        return self._spec.session_options(seed)

    def _start(self, method: str, input: Any, seed: Optional[int]) -> Tuple[int, Any]:
        rt = self._rt
        # prompt's blocks are checked as OMA checks them, as the one message of a user turn;
        # long media data goes beside the text (the `*-json-parts` entry points)
        payload, strings = run_input(input, blocks=method == "[method]agent.prompt-json")
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


class Agent(AgentCore):
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
        provider: Optional[str] = None,
        adapter: Optional[LLMAdapter] = None,
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
        spec = Spec(name=name, model=model, provider=provider, tools=tools, before_run=before_run,
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
                    runtime=runtime, adapter=adapter)
        self._host = spec.host(http_client or default_client(), text_deltas=bool(text_deltas))
        self._lock = threading.Lock()
        self._text_deltas = bool(text_deltas)
        super().__init__(spec, runtime, seed)

    def run(self, input: RunInput, *, seed: Optional[int] = None, cancel: Optional[CancelToken] = None,
            run_id: Optional[str] = None, metadata: Optional[Mapping[str, Any]] = None,
            on_tool_call: Optional[ToolCallObserver] = None,
            on_tool_result: Optional[ToolCallObserver] = None) -> AgentRunResult:
        """OMA's ``agent.run``: a fresh conversation; returns the ``AgentRunResult`` dict."""
        identity = new_identity(run_id)
        host = self._host.for_run(identity, cancel, on_tool_call, on_tool_result, metadata)
        generation, session = self._start("[method]agent.run-json", input, seed)
        return complete(drive(self._rt, generation, session, host), identity, metadata)

    def stream(self, input: RunInput, *, seed: Optional[int] = None, cancel: Optional[CancelToken] = None,
               run_id: Optional[str] = None, metadata: Optional[Mapping[str, Any]] = None,
               on_tool_call: Optional[ToolCallObserver] = None,
               on_tool_result: Optional[ToolCallObserver] = None) -> Iterator[StreamEvent]:
        """OMA's ``agent.stream``: yields ``reasoning``, ``text``, ``tool_use``, ``tool_result``,
        ``budget_exceeded`` events (and ``text_delta`` with ``text_deltas=True``) and finally
        ``done`` (the result) or ``error`` (the error, the result as its ``.result``). Invalid
        input raises here, before the iterator exists."""
        identity = new_identity(run_id)
        host = self._host.for_run(identity, cancel, on_tool_call, on_tool_result, metadata)
        generation, session = self._start("[method]agent.stream-json", input, seed)
        return stream_events(drive(self._rt, generation, session, host), identity, metadata, self._text_deltas)

    def prompt(self, input: PromptInput, *, seed: Optional[int] = None, cancel: Optional[CancelToken] = None,
               run_id: Optional[str] = None, metadata: Optional[Mapping[str, Any]] = None,
               on_tool_call: Optional[ToolCallObserver] = None,
               on_tool_result: Optional[ToolCallObserver] = None) -> AgentRunResult:
        """OMA's ``agent.prompt``: one user turn (a string or content blocks) on the history."""
        identity = new_identity(run_id)
        host = self._host.for_run(identity, cancel, on_tool_call, on_tool_result, metadata)
        with self._lock:
            generation, session = self._start("[method]agent.prompt-json", input, seed)
            result = complete(drive(self._rt, generation, session, host), identity, metadata)
            self._snapshot()
            return result

    def __enter__(self) -> "Agent":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class AsyncAgent(AgentCore):
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
        provider: Optional[str] = None,
        adapter: Optional[LLMAdapter] = None,
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
        spec = Spec(name=name, model=model, provider=provider, tools=tools, before_run=before_run,
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
                    runtime=runtime, adapter=adapter)
        self._host = spec.host(None, text_deltas=bool(text_deltas))
        self._client = http_client
        self._prompt_lock: Optional[asyncio.Lock] = None
        self._text_deltas = bool(text_deltas)
        super().__init__(spec, runtime, seed)

    def _steps(self, generation: int, session: Any, host: Host) -> AsyncIterator[Any]:
        return adrive(self._rt, generation, session, host, self._client or default_async_client())

    async def run(self, input: RunInput, *, seed: Optional[int] = None, cancel: Optional[CancelToken] = None,
                  run_id: Optional[str] = None, metadata: Optional[Mapping[str, Any]] = None,
                  on_tool_call: Optional[ToolCallObserver] = None,
                  on_tool_result: Optional[ToolCallObserver] = None) -> AgentRunResult:
        """OMA's ``agent.run``: a fresh conversation; returns the ``AgentRunResult`` dict.
        Invalid input raises :class:`InvalidMessageError` before anything happens. The run
        options are :meth:`Agent.run`'s."""
        identity = new_identity(run_id)
        host = self._host.for_run(identity, cancel, on_tool_call, on_tool_result, metadata)
        generation, session = self._start("[method]agent.run-json", input, seed)
        return await acomplete(self._steps(generation, session, host), identity, metadata, cancel)

    def stream(self, input: RunInput, *, seed: Optional[int] = None, cancel: Optional[CancelToken] = None,
               run_id: Optional[str] = None, metadata: Optional[Mapping[str, Any]] = None,
               on_tool_call: Optional[ToolCallObserver] = None,
               on_tool_result: Optional[ToolCallObserver] = None) -> AsyncIterator[StreamEvent]:
        """OMA's ``agent.stream`` as an async iterator (the events of :meth:`Agent.stream`).
        Invalid input raises here, at the call, before the iterator exists. Leaving the loop
        early: ``await events.aclose()`` (or ``contextlib.aclosing``) ends the run at once."""
        identity = new_identity(run_id)
        host = self._host.for_run(identity, cancel, on_tool_call, on_tool_result, metadata)
        generation, session = self._start("[method]agent.stream-json", input, seed)
        return astream_events(self._steps(generation, session, host), identity, metadata, cancel, self._text_deltas)

    async def prompt(self, input: PromptInput, *, seed: Optional[int] = None, cancel: Optional[CancelToken] = None,
                     run_id: Optional[str] = None, metadata: Optional[Mapping[str, Any]] = None,
                     on_tool_call: Optional[ToolCallObserver] = None,
                     on_tool_result: Optional[ToolCallObserver] = None) -> AgentRunResult:
        """OMA's ``agent.prompt``: one user turn (a string or content blocks) on the history;
        prompts of one agent take turns."""
        identity = new_identity(run_id)
        host = self._host.for_run(identity, cancel, on_tool_call, on_tool_result, metadata)
        if self._prompt_lock is None:
            self._prompt_lock = asyncio.Lock()
        async with self._prompt_lock:
            generation, session = self._start("[method]agent.prompt-json", input, seed)
            result = await acomplete(self._steps(generation, session, host), identity, metadata, cancel)
            self._snapshot()
            return result

    async def __aenter__(self) -> "AsyncAgent":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()
