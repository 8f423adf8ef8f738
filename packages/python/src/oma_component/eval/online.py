"""OMA's online evaluation (``OnlineEvaluationConfig``; JavaScript's ``evaluation`` on
``OpenMultiAgent``) for :func:`~oma_component.run_agent` and
:func:`~oma_component.run_agent_async`: give ``online_evaluation=OnlineEvaluator(...)`` and a
sample of the settled runs is scored after they return, in the background.

It never fails or holds a run. A sampled run waits in a bounded queue and is scored by up to
``max_concurrent`` workers (on a thread of the evaluator's own, with an event loop there), every
scorer in turn; what a scorer raises (or its ``timeout_ms`` passing) is a ``scorer_error``
record; a full queue, a spent rate budget or a run after :meth:`OnlineEvaluator.shutdown` drops
the sample; a store whose ``append`` fails loses that sample's records. Each is counted
(:meth:`OnlineEvaluator.get_stats`) and reported as a diagnostic, at most one per kind a minute.

What scorers see of the run, what the records keep, the sampling comparison, the queue bound,
the budgets' windows and the diagnostics' throttle are the core's rules (the codec's
``online-evaluation``; docs/evaluation.md#online-evaluation), the same as JavaScript's: this
side holds the window state they answer with and hands it back, with its clock.
"""

from __future__ import annotations

import asyncio
import functools
import math
import random
import threading
import time
import uuid
import warnings
from collections import deque
from typing import Any, Callable, Deque, Dict, List, Mapping, Optional, Sequence, Tuple

from .._agent.cancel import CancelToken
from .._watermark import Watermark
from ._rules import online_step
from ._values import ScorerTimeoutError, error_info
from .runner import _call, _score_within
from .scorer import check_score_result, score_cost_inputs, scorer_fields

DEFAULT_MAX_CONCURRENT = 1
DEFAULT_MAX_QUEUE_LENGTH = 100
DEFAULT_FLUSH_TIMEOUT_MS = 30_000
_BUDGET_KEYS = ("max_evaluations_per_minute", "max_cost_per_hour")


def _positive(value: Any, default: int, name: str) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer.")
    return value


def _amount(value: Any) -> Any:
    """What JSON carries of an estimator's amount: a number as it is (``None`` for NaN and the
    infinities, which JSON has not), anything else as ``None``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if math.isfinite(value) else None


def _json_value(value: Any) -> Any:
    """A value as the rules take it: the package's JSON-able values as they are, anything else
    as its text."""
    if isinstance(value, (str, int, float, bool, list, dict)) or value is None:
        return value
    return str(value)


class OnlineEvaluator:
    """A bounded, best-effort online evaluator (OMA's ``OnlineEvaluationConfig`` in snake_case).

    ``scorers`` (at least one), ``sample`` (a share in [0, 1], drawn at random, or a function of
    ``{"identity", "status", "metadata", "durationMs"}`` that returns ``True`` to sample; one
    that raises samples nothing), ``max_concurrent`` (1), ``max_queue_length`` (100),
    ``budget={"max_evaluations_per_minute": n, "max_cost_per_hour": x}`` (evaluations reserved
    per scorer when a run is queued; the hour's cost of the judges' model usage, priced by
    ``estimate_cost(usage, context)``, OMA's ``estimateCost``: without it the cost budget is
    inactive, with one diagnostic saying so), ``store`` (an evaluation store:
    ``append(records)``), ``store_payloads`` (``"none"``, ``"redacted"``, ``"full"``),
    ``on_result(record)``, ``on_diagnostic(diagnostic)`` (else a warning unless
    ``diagnostics="silent"``)."""

    def __init__(self, scorers: Sequence[Any], *, sample: Any, max_concurrent: Optional[int] = None,
                 max_queue_length: Optional[int] = None, budget: Optional[Mapping[str, Any]] = None,
                 store: Any = None, store_payloads: str = "none",
                 on_result: Optional[Callable[[Any], Any]] = None,
                 on_diagnostic: Optional[Callable[[Dict[str, Any]], Any]] = None,
                 diagnostics: str = "warn",
                 estimate_cost: Optional[Callable[[Mapping[str, Any], Mapping[str, Any]], float]] = None) -> None:
        if isinstance(scorers, (str, bytes)) or not isinstance(scorers, Sequence) or len(scorers) == 0:
            raise TypeError("OnlineEvaluationConfig.scorers must contain at least one scorer.")
        self._scorers = [(s, *scorer_fields(s, i)) for i, s in enumerate(scorers)]
        if not callable(sample) and (isinstance(sample, bool) or not isinstance(sample, (int, float))
                                     or not 0 <= sample <= 1):
            raise ValueError("OnlineEvaluationConfig.sample must be a number in [0, 1] or a function.")
        if store_payloads not in ("none", "redacted", "full"):
            raise TypeError("OnlineEvaluationConfig.store_payloads must be none, redacted, or full.")
        if diagnostics not in ("warn", "silent"):
            raise ValueError("OnlineEvaluationConfig.diagnostics must be 'warn' or 'silent'.")
        if budget is not None:
            if not isinstance(budget, Mapping):
                raise TypeError("OnlineEvaluationConfig.budget must be a dict")
            for key in budget:
                if key not in _BUDGET_KEYS:
                    raise TypeError(f"OnlineEvaluationConfig.budget does not support the option {key!r}")
        if estimate_cost is not None and not callable(estimate_cost):
            raise TypeError("estimate_cost must be a function of (usage, context)")
        self._sample = sample
        self._max_concurrent = _positive(max_concurrent, DEFAULT_MAX_CONCURRENT, "max_concurrent")
        self._max_queue_length = _positive(max_queue_length, DEFAULT_MAX_QUEUE_LENGTH, "max_queue_length")
        per_minute = (budget or {}).get("max_evaluations_per_minute")
        self._budget: Dict[str, Any] = {} if per_minute is None else {
            "maxEvaluationsPerMinute": _positive(per_minute, 1, "budget.max_evaluations_per_minute")}
        per_hour = (budget or {}).get("max_cost_per_hour")
        if per_hour is not None and (isinstance(per_hour, bool) or not isinstance(per_hour, (int, float))
                                     or not math.isfinite(per_hour) or per_hour <= 0):
            raise ValueError("budget.max_cost_per_hour must be a positive finite number.")
        # The cost budget is in force only with an estimator to price the judges' usage with.
        self._estimate_cost = estimate_cost
        self._cost_budget = per_hour is not None and estimate_cost is not None
        if self._cost_budget:
            self._budget["maxCostPerHour"] = per_hour
        self._store, self._payloads = store, store_payloads
        self._on_result, self._on_diagnostic, self._diagnostics = on_result, on_diagnostic, diagnostics
        self._now: Callable[[], float] = lambda: time.time() * 1000
        self._random: Callable[[], float] = random.random
        self._lock = threading.Condition()
        self._queue: Deque[Tuple[int, Any, Any, Dict[str, Any]]] = deque()
        self._window: Any = {}
        self._stats = {"sampled": 0, "enqueued": 0, "completed": 0, "dropped": 0, "failed": 0, "storeFailed": 0}
        self._eval_run_id = f"online_eval_{uuid.uuid4()}"
        self._next_id = 0
        self._settled = Watermark()
        self._active = 0
        self._closing = False
        self._shutdown: Optional[Dict[str, Any]] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        if per_hour is not None and not self._cost_budget:
            with self._lock:
                self._report("cost_inactive")

    # -- taking samples ------------------------------------------------------------------------

    def enqueue(self, input: Any, result: Mapping[str, Any], duration_ms: float) -> bool:
        """Decides, budgets and queues one settled run; ``True`` when queued. Never raises."""
        with self._lock:
            if self._closing:
                self._stats["dropped"] += 1
                self._report("after_shutdown")
                return False
            identity = result.get("identity")
            if identity is None:
                self._stats["failed"] += 1
                self._report("no_identity")
                return False
            context = {
                "identity": identity,
                "status": result.get("status") or {"code": "error",
                                                   "message": "Run settled without a normalized status."},
                "metadata": dict(result.get("metadata") or {}),
                "durationMs": max(0, duration_ms),
            }
        drawn = self._draw(context)
        if drawn is None:
            return False
        with self._lock:
            try:
                admitted = self._step("admit", {
                    "budget": self._budget, "entryId": self._next_id + 1, "evaluations": len(self._scorers),
                    "queueLength": len(self._queue), "maxQueueLength": self._max_queue_length, **drawn})
            except Exception:  # noqa: BLE001 - not reached with the evaluator's own values
                self._stats["failed"] += 1
                return False
            if admitted["outcome"] == "skipped":
                return False
            self._stats["sampled"] += 1
            if admitted["outcome"] != "queued":
                self._stats["dropped"] += 1
                self._emit(admitted.get("diagnostic"))
                return False
            self._stats["enqueued"] += 1
            self._next_id += 1
            self._queue.append((self._next_id, input, result, context))
            self._start_workers()
            return True

    def _draw(self, context: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        """What the core samples by: the share and a random draw, or the sampling function's
        answer; ``None`` when that function raised (it samples nothing)."""
        if not callable(self._sample):
            return {"sample": self._sample, "random": self._random()}
        try:
            return {"sample": self._sample(context) is True}
        except Exception:  # noqa: BLE001 - a sampling rule that raises samples nothing
            with self._lock:
                self._report("sampling_failed")
            return None

    def _step(self, step: str, request: Dict[str, Any]) -> Dict[str, Any]:
        """One step of the core's window rules on the evaluator's clock and window (under the
        lock); the next window kept."""
        answer: Dict[str, Any] = online_step(step, {"now": self._now(), "window": self._window, **request})
        self._window = answer["window"]
        return answer

    # -- the workers ---------------------------------------------------------------------------

    def _worker_loop(self) -> asyncio.AbstractEventLoop:
        """The evaluator's event loop, on a daemon thread of its own (made on first use)."""
        if self._loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="oma-online-eval", daemon=True).start()
            self._loop = loop
        return self._loop

    def _start_workers(self) -> None:
        """Hands queued samples to workers, up to ``max_concurrent`` at once (under the lock)."""
        while self._active < self._max_concurrent and self._queue:
            entry = self._queue.popleft()
            self._active += 1
            future = asyncio.run_coroutine_threadsafe(self._process(entry), self._worker_loop())
            future.add_done_callback(functools.partial(self._done, entry[0]))

    def _done(self, entry_id: int, future: Any) -> None:
        with self._lock:
            if future.exception() is not None:
                self._stats["failed"] += 1
                self._report("worker_failed")
            self._active -= 1
            self._settled.settle(entry_id)
            self._start_workers()
            self._lock.notify_all()

    async def _score(self, scorer: Any, name: str, timeout_ms: Optional[float], context: Dict[str, Any]) -> Any:
        if timeout_ms is None:
            return check_score_result(await _call(scorer.score, context))
        return await _score_within(scorer, name, timeout_ms, context, CancelToken())

    async def _process(self, entry: Tuple[int, Any, Any, Dict[str, Any]]) -> None:
        entry_id, input, result, context = entry
        with self._lock:
            # A cost budget spent while the run waited drops it (the core gives its reservation back).
            started = self._step("start", {"budget": self._budget, "entryId": entry_id})
            if started["outcome"] != "score":
                self._stats["dropped"] += 1
                self._emit(started.get("diagnostic"))
                return
        output = result.get("output")
        request: Dict[str, Any] = {"storePayloads": self._payloads}
        if input is not None:
            request["input"] = _json_value(input)
        if "output" in result:
            request["output"] = _json_value(output)
        seen = online_step("case", request)
        identity = context["identity"]
        eval_case = {"id": identity["runId"], "input": seen["input"], "metadata": context["metadata"]}
        payload = seen.get("payload")
        usage = {"tokens": result.get("tokenUsage"), "durationMs": context["durationMs"]}
        records: List[Any] = []
        for scorer, name, version, timeout_ms in self._scorers:
            outcome: Dict[str, Any]
            try:
                scored = await self._score(scorer, name, timeout_ms, {
                    "evalCase": eval_case, "output": output, "result": result, "metadata": context["metadata"],
                    "signal": CancelToken()})
                with self._lock:
                    self._stats["completed"] += 1
                self._record_cost(scored)
                outcome = {"score": scored}
            except Exception as error:  # noqa: BLE001 - a scorer's failure is a scorer_error record
                with self._lock:
                    self._stats["failed"] += 1
                self._record_cost(error)
                with self._lock:
                    self._report("scorer_failed", name)
                outcome = {"error": error_info(error, "timeout" if isinstance(error, ScorerTimeoutError) else None)}
            records.append(online_step("record", {
                "evalRunId": self._eval_run_id, "recordId": f"eval_record_{uuid.uuid4()}",
                "timestampUnixMs": int(self._now()), "scorer": {"name": name, **({"version": version} if version is not None else {})},
                "identity": identity, "metadata": context["metadata"], "usage": dict(usage),
                **({"payload": payload} if payload is not None else {}), **outcome}))
        if self._store is not None:
            try:
                await _call(self._store.append, records)
            except Exception:  # noqa: BLE001 - a failing store loses the records, never the run
                with self._lock:
                    self._stats["storeFailed"] += len(records)
                    self._report("store_failed")
                return
        for record in records:
            if self._on_result is None:
                continue
            try:
                await _call(self._on_result, record)
            except Exception:  # noqa: BLE001
                with self._lock:
                    self._stats["failed"] += 1

    def _record_cost(self, scored: Any) -> None:
        """Counts what a scorer's judges spent (priced by ``estimate_cost``, the amounts checked by
        the core) against the hour's cost budget; an estimator that raises ends the count there."""
        if not self._cost_budget or self._estimate_cost is None:
            return
        amounts: List[Any] = []
        for item in score_cost_inputs(scored):
            try:
                estimated = self._estimate_cost(item["usage"], item["context"])
            except Exception:  # noqa: BLE001 - an estimator that raises leaves the budget best effort
                amounts.append(None)
                break
            amounts.append(_amount(estimated))
        with self._lock:
            counted = self._step("cost", {"amounts": amounts})
            if counted["outcome"] != "recorded":
                self._stats["failed"] += 1
                self._emit(counted.get("diagnostic"))

    # -- diagnostics, flushing -----------------------------------------------------------------

    def _report(self, event: str, scorer_name: Optional[str] = None) -> None:
        """An event of the evaluator's through the core's throttle: one diagnostic per kind a
        minute, counting the ones held back (under the lock)."""
        request: Dict[str, Any] = {"event": event}
        if scorer_name is not None:
            request["scorerName"] = scorer_name
        self._emit(self._step("report", request).get("diagnostic"))

    def _emit(self, diagnostic: Optional[Dict[str, Any]]) -> None:
        """A diagnostic the throttle let through, to ``on_diagnostic`` (else a warning); never
        raised (under the lock)."""
        if diagnostic is None:
            return
        code, message = diagnostic["code"], diagnostic["message"]
        try:
            if self._on_diagnostic is not None:
                self._on_diagnostic(diagnostic)
            elif self._diagnostics != "silent":
                warnings.warn(f"[open-multi-agent evaluation] {code}: {message}", RuntimeWarning, stacklevel=2)
        except Exception:  # noqa: BLE001 - a diagnostic handler never changes a run
            self._stats["failed"] += 1

    def force_flush(self, *, timeout_ms: Optional[float] = None) -> Dict[str, Any]:
        """Waits (up to ``timeout_ms``, 30 s unless set) for every sample queued so far; OMA's
        flush result (``status`` ``ok``, ``partial``, ``error`` or ``timeout``, with the counts)."""
        wait = (DEFAULT_FLUSH_TIMEOUT_MS if timeout_ms is None else max(0.0, timeout_ms)) / 1000
        with self._lock:
            target = self._next_id
            done = self._lock.wait_for(lambda: self._settled.through >= target, wait)
            if not done:
                self._report("flush_timeout")
            flushed: Dict[str, Any] = online_step("flush", {"stats": dict(self._stats),
                                                            **({} if done else {"timedOut": True})})
            return flushed

    async def force_flush_async(self, *, timeout_ms: Optional[float] = None) -> Dict[str, Any]:
        """:meth:`force_flush` for asyncio, waiting off the event loop."""
        return await asyncio.get_running_loop().run_in_executor(None, lambda: self.force_flush(timeout_ms=timeout_ms))

    def shutdown(self, *, timeout_ms: Optional[float] = None) -> Dict[str, Any]:
        """Takes no more samples and flushes; the same result on every call."""
        with self._lock:
            if self._shutdown is not None:
                return self._shutdown
            self._closing = True
        flushed = self.force_flush(timeout_ms=timeout_ms)
        with self._lock:
            if self._shutdown is None:
                self._shutdown = flushed
                if flushed["status"] != "timeout" and self._loop is not None:
                    # Every sample has settled and none can come: the workers' thread ends.
                    self._loop.call_soon_threadsafe(self._loop.stop)
            return self._shutdown

    def get_stats(self) -> Dict[str, int]:
        """The counts: ``sampled``, ``enqueued``, ``completed``, ``dropped``, ``failed``, ``storeFailed``."""
        with self._lock:
            return dict(self._stats)
