"""OMA's ``runEvalSet``: every case of an eval set (times ``repeats``) through a target, each
sample scored by every scorer in turn, samples run ``concurrency`` at a time, records kept in a
store when given, and a report with per-scorer aggregates.

One implementation in asyncio (:func:`run_eval_set_async`); :func:`run_eval_set` runs it on an
event loop of its own for sync code. Targets, scorers, stores and observers may be plain
functions (run on threads, so a blocking one holds neither the loop nor the other samples) or
``async def``.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
import time
import uuid
from typing import Any, Awaitable, Callable, Dict, List, Literal, Mapping, Optional, Sequence, Tuple, Union, cast

from .._agent.cancel import CancelToken
from .._codec import redact_sensitive_text
from .._types import TokenUsage
from ..observability.store import RunCostSummary
from ._types import EvalCase, EvalProgressEvent, EvalRecord, EvalRunReport, EvalSet, ScoreResult, TargetOutput
from ._values import ScorerTimeoutError, error_info
from .report import aggregate_records
from .scorer import check_score_result, scorer_fields

#: A target: ``target(input, context)`` returns (or awaits) ``{"output", "result"?}``.
EvalTarget = Callable[[Any, Any], Union[TargetOutput, Awaitable[TargetOutput]]]
ProgressHandler = Callable[[EvalProgressEvent], Any]
StorePayloads = Literal["none", "redacted", "full"]

TARGET_SCORER_NAME = "_target"
PAYLOAD_MAX_CHARS = 8 * 1024
DEFAULT_REPEATS = 1
DEFAULT_CONCURRENCY = 2


def _now_ms() -> int:
    return int(time.time() * 1000)


def _id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4()}"


async def _score_within(scorer: Any, name: str, timeout_ms: float, context: Dict[str, Any],
                        token: CancelToken) -> ScoreResult:
    """``scorer.score(context)`` given ``token`` as its ``signal``, its result checked; past
    ``timeout_ms`` the token is cancelled and ``ScorerTimeoutError`` raised (OMA's scorer
    deadline, the same for offline and online evaluation)."""
    task = asyncio.ensure_future(_call(scorer.score, {**context, "signal": token}))
    try:
        value = await asyncio.wait_for(task, max(0.0, timeout_ms) / 1000)
    except asyncio.TimeoutError:
        token.cancel()
        raise ScorerTimeoutError(name, max(0.0, timeout_ms)) from None
    return check_score_result(value)


async def _call(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``: awaited when it is ``async def``, else on a daemon thread of its own
    (awaiting what it returns when that is awaitable). Not the loop's shared executor: a
    blocking function given up at its timeout keeps its thread, and a few of those must not
    starve every later call."""
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None)):
        return await fn(*args)
    loop = asyncio.get_running_loop()
    done: "asyncio.Future[Any]" = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if not done.done():
            if ok:
                done.set_result(value)
            else:
                done.set_exception(value)

    def work() -> None:
        try:
            outcome: Tuple[bool, Any] = (True, fn(*args))
        except BaseException as error:  # noqa: BLE001 - handed to the awaiting task
            outcome = (False, error)
        try:
            loop.call_soon_threadsafe(settle, *outcome)
        except RuntimeError:  # the loop is gone: nobody waits for this answer
            pass

    threading.Thread(target=work, name="oma-eval-call", daemon=True).start()
    value = await done
    if inspect.isawaitable(value):
        value = await value
    return value


async def _observe(handler: Optional[ProgressHandler], event: EvalProgressEvent) -> None:
    if handler is None:
        return
    try:
        value = handler(event)
        if inspect.isawaitable(value):
            await value
    except Exception:  # noqa: BLE001 - observing never changes an evaluation
        pass


def _stringify(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        return str(value)


def _truncate(text: str) -> str:
    if len(text) <= PAYLOAD_MAX_CHARS:
        return text
    marker = f"\n[truncated at {PAYLOAD_MAX_CHARS} characters]"
    return text[: PAYLOAD_MAX_CHARS - len(marker)] + marker


def _payload(mode: StorePayloads, case: EvalCase, output: Tuple[bool, Any]) -> Optional[Dict[str, str]]:
    if mode == "none":
        return None

    def text(value: Any) -> str:
        bounded = _truncate(_stringify(value))
        return _truncate(redact_sensitive_text(bounded)) if mode == "redacted" else bounded

    out: Dict[str, str] = {"input": text(case["input"])}
    if output[0]:
        out["output"] = text(output[1])
    if "expected" in case:
        out["expected"] = text(case["expected"])
    return out


def _tokens(result: Optional[Mapping[str, Any]]) -> Optional[TokenUsage]:
    if result is None:
        return None
    usage = result.get("totalTokenUsage") if "totalTokenUsage" in result else result.get("tokenUsage")
    return cast(TokenUsage, usage) if isinstance(usage, dict) else None


def _costs(result: Optional[Mapping[str, Any]]) -> List[RunCostSummary]:
    if result is None:
        return []
    if isinstance(result.get("costs"), list):
        return list(result["costs"])
    return [] if result.get("cost") is None else [result["cost"]]


def _run_ref(result: Optional[Mapping[str, Any]]) -> Optional[Dict[str, Any]]:
    identity = result.get("identity") if result is not None else None
    if not isinstance(identity, Mapping):
        return None
    return {"runId": identity.get("runId"), "attempt": identity.get("attempt"), "traceId": identity.get("traceId"),
            "rootSpanId": identity.get("rootSpanId")}


class _Sample:
    def __init__(self, records: List[EvalRecord], tokens: Optional[TokenUsage], costs: List[RunCostSummary],
                 target_error: bool) -> None:
        self.records, self.tokens, self.costs, self.target_error = records, tokens, costs, target_error


class _Run:
    """One evaluation's settings and what its samples share."""

    def __init__(self, eval_set: EvalSet, target: EvalTarget, scorers: Sequence[Any],
                 metadata: Mapping[str, Any], trace_store: Any, store: Any, eval_run_id: str,
                 store_payloads: StorePayloads, signal: CancelToken, on_progress: Optional[ProgressHandler]) -> None:
        self.set, self.target, self.metadata = eval_set, target, dict(metadata)
        self.scorers = [(s, *scorer_fields(s, i)) for i, s in enumerate(scorers)]
        self.trace_store, self.store, self.eval_run_id = trace_store, store, eval_run_id
        self.payloads: StorePayloads = store_payloads
        self.signal, self.on_progress = signal, on_progress

    def base(self, case: EvalCase, repeat: int, metadata: Dict[str, Any]) -> Dict[str, Any]:
        return {"schemaVersion": 1, "recordId": _id("eval_record"), "evalRunId": self.eval_run_id, "source": "offline",
                "timestampUnixMs": _now_ms(), "evalSet": {"name": self.set["name"], "version": self.set["version"]},
                "caseId": case["id"], "repeat": repeat, "metadata": metadata}

    async def score(self, scorer: Any, name: str, timeout_ms: Optional[float], context: Dict[str, Any]) -> ScoreResult:
        if timeout_ms is None:
            return check_score_result(await _call(scorer.score, context))
        token = CancelToken()
        unsubscribe = self.signal._subscribe(token.cancel)
        try:
            return await _score_within(scorer, name, timeout_ms, context, token)
        finally:
            unsubscribe()

    async def sample(self, case: EvalCase, repeat: int) -> _Sample:
        await _observe(self.on_progress, {"type": "case_start", "caseId": case["id"], "repeat": repeat})
        context_metadata = {**case.get("metadata", {}), **self.metadata}
        started = time.monotonic()
        try:
            output = await _call(self.target, case["input"], {"caseId": case["id"], "repeat": repeat,
                                                              "signal": self.signal, "metadata": dict(context_metadata)})
            if not isinstance(output, Mapping) or "output" not in output:
                raise TypeError("EvalTarget must return a TargetOutput object with an output field.")
        except Exception as error:  # noqa: BLE001 - a target's failure is a target_error record
            record: Dict[str, Any] = {**self.base(case, repeat, dict(context_metadata)),
                                      "scorer": {"name": TARGET_SCORER_NAME}, "status": "target_error",
                                      "usage": {"durationMs": round((time.monotonic() - started) * 1000)},
                                      "error": error_info(error)}
            payload = _payload(self.payloads, case, (False, None))
            if payload is not None:
                record["payload"] = payload
            await _observe(self.on_progress, {"type": "target_error", "caseId": case["id"], "repeat": repeat})
            await _observe(self.on_progress, {"type": "case_done", "caseId": case["id"], "repeat": repeat})
            return _Sample([record], None, [], True)  # type: ignore[list-item]

        duration = round((time.monotonic() - started) * 1000)
        result = output.get("result") if isinstance(output.get("result"), Mapping) else None
        tokens, costs = _tokens(result), _costs(result)
        result_metadata = result.get("metadata") if result is not None and isinstance(result.get("metadata"), Mapping) else {}
        metadata = {**context_metadata, **result_metadata}
        run_ref = _run_ref(result)
        payload = _payload(self.payloads, case, (True, output["output"]))
        trace = None
        if self.trace_store is not None and run_ref is not None:
            trace = await _call(self.trace_store.get_run, run_ref["runId"])
        usage: Dict[str, Any] = {}
        if tokens is not None:
            usage["tokens"] = tokens
        if len(costs) == 1:
            usage["cost"] = costs[0]
        usage["durationMs"] = duration
        records: List[EvalRecord] = []
        for scorer, name, version, timeout_ms in self.scorers:
            identity: Dict[str, Any] = {"name": name, **({"version": version} if version is not None else {})}
            context: Dict[str, Any] = {"evalCase": case, "output": output["output"]}
            if result is not None:
                context["result"] = result
            if trace is not None:
                context["trace"] = trace
            context["metadata"] = metadata
            context["signal"] = self.signal
            try:
                scored = await self.score(scorer, name, timeout_ms, context)
                record = {**self.base(case, repeat, metadata), "scorer": identity, "status": "scored",
                          "score": scored["score"]}
                for key in ("pass", "reason", "details"):
                    if scored.get(key) is not None:
                        record[key] = scored.get(key)
                failed = None
            except Exception as error:  # noqa: BLE001 - a scorer's failure is a scorer_error record
                record = {**self.base(case, repeat, metadata), "scorer": identity, "status": "scorer_error"}
                failed = error_info(error, "timeout" if isinstance(error, ScorerTimeoutError) else None)
                await _observe(self.on_progress, {"type": "scorer_error", "caseId": case["id"], "repeat": repeat,
                                                  "scorer": name})
            if run_ref is not None:
                record["runRef"] = run_ref
            record["usage"] = dict(usage)
            if failed is not None:
                record["error"] = failed
            if payload is not None:
                record["payload"] = payload
            records.append(record)  # type: ignore[arg-type]
        await _observe(self.on_progress, {"type": "case_done", "caseId": case["id"], "repeat": repeat})
        return _Sample(records, tokens, costs, False)


def _positive(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer.")
    return value


async def run_eval_set_async(
    eval_set: EvalSet,
    target: EvalTarget,
    *,
    scorers: Sequence[Any],
    repeats: Optional[int] = None,
    concurrency: Optional[int] = None,
    filter_tags: Optional[Sequence[str]] = None,
    metadata: Optional[Mapping[str, Any]] = None,
    trace_store: Any = None,
    store: Any = None,
    eval_run_id: Optional[str] = None,
    store_payloads: StorePayloads = "none",
    cancel: Optional[CancelToken] = None,
    on_progress: Optional[ProgressHandler] = None,
) -> EvalRunReport:
    """Runs ``eval_set`` through ``target`` and scores each sample with ``scorers`` (OMA's
    ``runEvalSet``). ``repeats`` and ``concurrency`` default to the set's defaults, then 1
    and 2; ``filter_tags`` keeps the cases with any of those tags; ``metadata`` goes on every
    record; ``trace_store`` (a trace store) gives scorers the run's trace; ``store`` (an eval
    store) keeps each sample's records (a failure to keep them is a warning in the report,
    never a failed evaluation); ``store_payloads`` keeps the input, output and expected value
    on each record (``"redacted"``: secrets redacted; each cut to 8192 characters);
    ``cancel`` (a :class:`~oma_component.CancelToken`) stops taking samples and is the
    ``signal`` targets and scorers get; ``on_progress(event)`` sees ``case_start``,
    ``target_error``, ``scorer_error`` and ``case_done``. A target's failure is a
    ``target_error`` record, a scorer's (or its ``timeout_ms`` passing) a ``scorer_error``
    record, never a score of zero."""
    started_ms = _now_ms()
    started = time.monotonic()
    defaults = eval_set.get("defaults") or {}
    repeats_n = _positive(repeats if repeats is not None else defaults.get("repeats", DEFAULT_REPEATS), "repeats")
    width = _positive(concurrency if concurrency is not None else defaults.get("concurrency", DEFAULT_CONCURRENCY),
                      "concurrency")
    if eval_run_id is not None and (not isinstance(eval_run_id, str) or not eval_run_id.strip()):
        raise TypeError("evalRunId must be a non-empty string when provided.")
    if store_payloads not in ("none", "redacted", "full"):
        raise ValueError(f"store_payloads must be 'none', 'redacted' or 'full', got {store_payloads!r}")
    if isinstance(scorers, (str, bytes)) or not isinstance(scorers, Sequence):
        raise TypeError("scorers must be a list of scorers")
    if not callable(target):
        raise TypeError("target must be a function of (input, context)")
    signal = cancel if cancel is not None else CancelToken()
    run = _Run(eval_set, target, scorers, metadata or {}, trace_store, store, eval_run_id or _id("eval_run"),
               store_payloads, signal, on_progress)
    wanted = set(filter_tags) if filter_tags else None
    cases = [c for c in eval_set["cases"] if wanted is None or any(t in wanted for t in c.get("tags", ()))]
    jobs = [(case, r + 1) for case in cases for r in range(repeats_n)]
    samples: List[Optional[_Sample]] = [None] * len(jobs)
    warnings: List[Optional[str]] = [None] * len(jobs)
    cursor = 0

    async def worker() -> None:
        nonlocal cursor
        while not signal.cancelled:
            index = cursor
            cursor += 1
            if index >= len(jobs):
                return
            case, repeat = jobs[index]
            sample = await run.sample(case, repeat)
            samples[index] = sample
            if store is not None:
                try:
                    await _call(store.append, sample.records)
                except Exception:  # noqa: BLE001 - persistence failures are warnings
                    warnings[index] = f'Evaluation records for case "{case["id"]}" repeat {repeat} were not persisted.'

    await asyncio.gather(*(worker() for _ in range(min(width, len(jobs)))))
    done = [s for s in samples if s is not None]
    records = [r for s in done for r in s.records]
    usages = [s.tokens for s in done if s.tokens is not None]
    totals: Dict[str, Any] = {}
    if usages:
        totals["tokens"] = {"input_tokens": sum(u.get("input_tokens", 0) for u in usages),
                            "output_tokens": sum(u.get("output_tokens", 0) for u in usages)}
    amounts: Dict[str, float] = {}
    for s in done:
        for cost in s.costs:
            amounts[cost["currency"]] = amounts.get(cost["currency"], 0) + cost["amount"]
    if amounts:
        totals["costs"] = [{"currency": c, "amount": amounts[c]} for c in sorted(amounts)]
    totals["targetErrors"] = sum(1 for s in done if s.target_error)
    report: Dict[str, Any] = {
        "schemaVersion": 1, "evalRunId": run.eval_run_id, "startedAtUnixMs": started_ms,
        "durationMs": round((time.monotonic() - started) * 1000),
        "evalSet": {"name": eval_set["name"], "version": eval_set["version"]}, "metadata": dict(metadata or {}),
        "caseCount": len(cases), "repeats": repeats_n,
    }
    if signal.cancelled:
        report["aborted"] = True
    kept = [w for w in warnings if w is not None]
    if kept:
        report["warnings"] = kept
    report["records"] = records
    report["aggregates"] = aggregate_records(records, [(name, version) for _, name, version, _ in run.scorers],
                                             {c["id"]: c.get("tags", []) for c in cases})
    report["totals"] = totals
    return report  # type: ignore[return-value]


def run_eval_set(eval_set: EvalSet, target: EvalTarget, **options: Any) -> EvalRunReport:
    """:func:`run_eval_set_async` for sync code (the same keywords), on an event loop of its
    own (on a thread of its own when this thread already runs a loop)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(run_eval_set_async(eval_set, target, **options))
    box: Dict[str, Any] = {}

    def run() -> None:
        try:
            box["report"] = asyncio.run(run_eval_set_async(eval_set, target, **options))
        except BaseException as error:  # noqa: BLE001 - raised on the caller's thread
            box["error"] = error

    thread = threading.Thread(target=run, name="oma-eval", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    report: EvalRunReport = box["report"]
    return report
