"""OMA's ``runAgent`` (``orchestrator/orchestrator.ts``): a one-off agent with progress events
and online evaluation, :func:`run_agent` (sync) and :func:`run_agent_async` (asyncio)."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence, Tuple, Union, cast

from .._http import HttpClient, default_client
from .._http_async import AsyncHttpClient, default_async_client
from .._runtime import Runtime, default_runtime, record
from .._runtime import dumps as _dumps
from .._types import (AgentRunResult, CallOptions, EvaluationCase, EvaluationOptions, LLMAdapter, LLMMessage, OmaTool,
                      ProgressEvent, RunIdentity, RunInput)
from ..observability._types import ObservabilityConfig
from ..observability.delivery import Observability
from .cancel import CancelToken
from .config import Spec, new_seed
from .host import BeforeRun, ToolCallObserver
from .input import input_json
from .process_backend import Backend
from .result import new_identity
from .runner import complete, drive
from .runner_async import acomplete, adrive
from .tool import Tool

if TYPE_CHECKING:
    from ..eval.online import OnlineEvaluator


def _evaluator(online_evaluation: Any) -> Any:
    """``online_evaluation=`` checked before the run."""
    if online_evaluation is not None and not callable(getattr(online_evaluation, "enqueue", None)):
        raise TypeError("online_evaluation must be an oma_component.eval.OnlineEvaluator")
    return online_evaluation


def _observability(config: Optional[ObservabilityConfig]) -> Optional[Observability]:
    """``observability=`` made ready, or ``None`` when runs make no records (no config, no
    sinks); a config that is not one raises here."""
    if config is None:
        return None
    observability = Observability(cast(Mapping[str, Any], config))
    return observability if observability.active else None


def _run_agent_session(rt: Runtime, spec: Spec, input: Any, progress: bool,
                       evaluation: Optional[EvaluationOptions], seed: Optional[int],
                       observability: Optional[Observability] = None, identity: Optional[RunIdentity] = None,
                       metadata: Optional[Mapping[str, Any]] = None) -> Tuple[int, Any]:
    """Starts a ``run-agent`` session; invalid input (and metadata the records refuse) raises
    here."""
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
    records = None
    if observability is not None and identity is not None:
        records = observability.options_json(identity, metadata)
    session_options = spec.session_options(seed if seed is not None else new_seed(), records,
                                           observability is not None and observability.legacy)
    payload = _dumps(input) if isinstance(input, str) else input_json(input)
    with rt.lock():
        session = rt.call("run-agent-json", spec.json(spec.history_json), payload, options, session_options)
        return rt.generation, session


def run_agent(
    input: RunInput,
    *,
    model: str,
    provider: Optional[str] = None,
    adapter: Optional[LLMAdapter] = None,
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
    observability: Optional[ObservabilityConfig] = None,
    online_evaluation: Optional["OnlineEvaluator"] = None,
    **config: Any,
) -> AgentRunResult:
    """OMA's ``runAgent``: a one-off agent with progress events and online evaluation.

    ``on_progress(event)`` gets ``{"type", "agent", "data"}`` (``agent_start``,
    ``budget_exceeded``, ``agent_complete``); ``evaluation={"store_payloads": "none" | "redacted"
    | "full", "sample_rate": 1.0}`` hands each evaluated case to ``on_case(case)``. What an
    observer raises is ignored. ``config`` takes the other keyword arguments of :class:`Agent`
    (``base_url``, ``api_key``, ``system_prompt``, ...); ``cancel``, ``run_id``, ``metadata``,
    ``on_tool_call`` and ``on_tool_result`` are the run options of :meth:`Agent.run`.

    ``observability={"sinks": [...], "capture"?, "on_diagnostic"?, "resource"?}`` (OMA's
    ``ObservabilityConfig``) makes the run's trace records and hands them to each sink (see
    :mod:`oma_component.observability.delivery`): a sink never fails or holds the run, and the
    result's ``identity`` names the records' run, trace and root span.

    ``online_evaluation=OnlineEvaluator(...)`` (:mod:`oma_component.eval.online`, OMA's
    ``OnlineEvaluationConfig``) hands the settled run to the evaluator, which may sample it and
    score it in the background; it never fails or holds the run."""
    records = _observability(observability)
    evaluator = _evaluator(online_evaluation)
    started = time.monotonic()
    rt = runtime or default_runtime()
    spec = Spec(name=name, model=model, provider=provider, tools=tools, before_run=before_run, backend=backend,
                history=history, call=cast(Optional[Mapping[str, Any]], call), options=config,
                runtime=rt, adapter=adapter)
    identity = new_identity(run_id)
    host = spec.host(http_client or default_client(), on_progress, on_case).for_run(
        identity, cancel, on_tool_call, on_tool_result, metadata)
    host.records = records
    generation, session = _run_agent_session(rt, spec, input, on_progress is not None, evaluation, seed,
                                             records, identity, metadata)
    result = complete(drive(rt, generation, session, host), identity, metadata)
    if records is not None:
        records.settle()
    if evaluator is not None:
        # Scored after the run returns, off its path (OMA's online evaluation).
        evaluator.enqueue(input, result, round((time.monotonic() - started) * 1000))
    return result


async def run_agent_async(
    input: RunInput,
    *,
    model: str,
    provider: Optional[str] = None,
    adapter: Optional[LLMAdapter] = None,
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
    observability: Optional[ObservabilityConfig] = None,
    online_evaluation: Optional["OnlineEvaluator"] = None,
    **config: Any,
) -> AgentRunResult:
    """OMA's ``runAgent`` for asyncio: :func:`run_agent`'s arguments, awaited. Observers may be
    ``async def`` (awaited); what they raise is ignored. A sink's ``emit`` runs on a thread of
    its own, never on the event loop."""
    records = _observability(observability)
    evaluator = _evaluator(online_evaluation)
    started = time.monotonic()
    rt = runtime or default_runtime()
    spec = Spec(name=name, model=model, provider=provider, tools=tools, before_run=before_run, backend=backend,
                history=history, call=cast(Any, call), options=config, runtime=rt, adapter=adapter)
    identity = new_identity(run_id)
    host = spec.host(None, on_progress, on_case).for_run(identity, cancel, on_tool_call, on_tool_result, metadata)
    host.records = records
    generation, session = _run_agent_session(rt, spec, input, on_progress is not None, evaluation, seed,
                                             records, identity, metadata)
    result = await acomplete(adrive(rt, generation, session, host, http_client or default_async_client()),
                             identity, metadata, cancel)
    if records is not None:
        pending = records.settled()
        if pending:
            await asyncio.get_running_loop().run_in_executor(None, records.settle, pending)
    if evaluator is not None:
        evaluator.enqueue(input, result, round((time.monotonic() - started) * 1000))
    return result
