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

What scorers see of the run and what the records keep are the core's rules (the codec's
``online-evaluation``; docs/evaluation.md#online-evaluation), the same as JavaScript's.
"""

from __future__ import annotations

import asyncio
import functools
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
from .scorer import check_score_result, scorer_fields

DEFAULT_MAX_CONCURRENT = 1
DEFAULT_MAX_QUEUE_LENGTH = 100
DEFAULT_FLUSH_TIMEOUT_MS = 30_000
DIAGNOSTIC_INTERVAL_MS = 60_000
_BUDGET_KEYS = ("max_evaluations_per_minute",)


def _positive(value: Any, default: int, name: str) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer.")
    return value


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
    ``budget={"max_evaluations_per_minute": n}`` (reserved per scorer when a run is queued),
    ``store`` (an evaluation store: ``append(records)``), ``store_payloads`` (``"none"``,
    ``"redacted"``, ``"full"``), ``on_result(record)``, ``on_diagnostic(diagnostic)`` (else a
    warning unless ``diagnostics="silent"``)."""

    def __init__(self, scorers: Sequence[Any], *, sample: Any, max_concurrent: Optional[int] = None,
                 max_queue_length: Optional[int] = None, budget: Optional[Mapping[str, Any]] = None,
                 store: Any = None, store_payloads: str = "none",
                 on_result: Optional[Callable[[Any], Any]] = None,
                 on_diagnostic: Optional[Callable[[Dict[str, Any]], Any]] = None,
                 diagnostics: str = "warn") -> None:
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
                    # The cost budget counts the judges' usage, which the Python judges do not
                    # report: refused rather than left without effect.
                    raise TypeError(f"OnlineEvaluationConfig.budget does not support the option {key!r}")
        self._sample = sample
        self._max_concurrent = _positive(max_concurrent, DEFAULT_MAX_CONCURRENT, "max_concurrent")
        self._max_queue_length = _positive(max_queue_length, DEFAULT_MAX_QUEUE_LENGTH, "max_queue_length")
        per_minute = (budget or {}).get("max_evaluations_per_minute")
        self._per_minute = None if per_minute is None else _positive(per_minute, 1,
                                                                       "budget.max_evaluations_per_minute")
        self._store, self._payloads = store, store_payloads
        self._on_result, self._on_diagnostic, self._diagnostics = on_result, on_diagnostic, diagnostics
        self._now: Callable[[], float] = lambda: time.time() * 1000
        self._random: Callable[[], float] = random.random
        self._lock = threading.Condition()
        self._queue: Deque[Tuple[int, Any, Any, Dict[str, Any]]] = deque()
        self._reservations: List[Tuple[int, float, int]] = []
        self._diagnostic_counts: Dict[str, int] = {}
        self._diagnostic_emitted: Dict[str, float] = {}
        self._stats = {"sampled": 0, "enqueued": 0, "completed": 0, "dropped": 0, "failed": 0, "storeFailed": 0}
        self._eval_run_id = f"online_eval_{uuid.uuid4()}"
        self._next_id = 0
        self._settled = Watermark()
        self._active = 0
        self._closing = False
        self._shutdown: Optional[Dict[str, Any]] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None

    # -- taking samples ------------------------------------------------------------------------

    def enqueue(self, input: Any, result: Mapping[str, Any], duration_ms: float) -> bool:
        """Decides, budgets and queues one settled run; ``True`` when queued. Never raises."""
        with self._lock:
            if self._closing:
                self._stats["dropped"] += 1
                self._report("enqueue_after_shutdown", "Online evaluation rejected after shutdown began.")
                return False
            identity = result.get("identity")
            if identity is None:
                self._stats["failed"] += 1
                self._report("scorer_failed", "Online evaluation skipped a run without runtime identity.", "error")
                return False
            context = {
                "identity": identity,
                "status": result.get("status") or {"code": "error",
                                                   "message": "Run settled without a normalized status."},
                "metadata": dict(result.get("metadata") or {}),
                "durationMs": max(0, duration_ms),
            }
        if not self._should_sample(context):
            return False
        with self._lock:
            self._stats["sampled"] += 1
            if len(self._queue) >= self._max_queue_length:
                self._stats["dropped"] += 1
                self._report("queue_full", "Online evaluation sample dropped because the bounded queue is full.")
                return False
            now = self._now()
            self._prune(now)
            if not self._reserve(self._next_id + 1, len(self._scorers), now):
                self._stats["dropped"] += 1
                self._report("budget_exhausted", "Online evaluation rate budget is exhausted.")
                return False
            self._stats["enqueued"] += 1
            self._next_id += 1
            self._queue.append((self._next_id, input, result, context))
            self._start_workers()
            return True

    def _should_sample(self, context: Dict[str, Any]) -> bool:
        if not callable(self._sample):
            return bool(self._random() < self._sample)
        try:
            return self._sample(context) is True
        except Exception:  # noqa: BLE001 - a sampling rule that raises samples nothing
            with self._lock:
                self._report("scorer_failed", "Online sampling rule failed; the run was not sampled.", "error")
            return False

    def _prune(self, now: float) -> None:
        self._reservations = [r for r in self._reservations if r[1] > now - 60_000]

    def _reserve(self, entry_id: int, count: int, now: float) -> bool:
        if self._per_minute is None:
            return True
        if sum(r[2] for r in self._reservations) + count > self._per_minute:
            return False
        self._reservations.append((entry_id, now, count))
        return True

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
                self._report("scorer_failed", "Online evaluation worker failed unexpectedly.", "error")
            self._active -= 1
            self._settled.settle(entry_id)
            self._start_workers()
            self._lock.notify_all()

    async def _score(self, scorer: Any, name: str, timeout_ms: Optional[float], context: Dict[str, Any]) -> Any:
        if timeout_ms is None:
            return check_score_result(await _call(scorer.score, context))
        return await _score_within(scorer, name, timeout_ms, context, CancelToken())

    async def _process(self, entry: Tuple[int, Any, Any, Dict[str, Any]]) -> None:
        _, input, result, context = entry
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
                outcome = {"score": scored}
            except Exception as error:  # noqa: BLE001 - a scorer's failure is a scorer_error record
                with self._lock:
                    self._stats["failed"] += 1
                    self._report("scorer_failed", "Online evaluation scorer failed; a scorer_error record was produced.",
                                 "error", name)
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
                    self._report("store_append_failed",
                                 "Online evaluation records were discarded because EvalStore append failed.", "error")
                return
        for record in records:
            if self._on_result is None:
                continue
            try:
                await _call(self._on_result, record)
            except Exception:  # noqa: BLE001
                with self._lock:
                    self._stats["failed"] += 1

    # -- diagnostics, flushing -----------------------------------------------------------------

    def _report(self, code: str, message: str, severity: str = "warning", scorer_name: Optional[str] = None) -> None:
        """One diagnostic per kind a minute, counting the ones held back (under the lock)."""
        count = self._diagnostic_counts.get(code, 0) + 1
        self._diagnostic_counts[code] = count
        now = self._now()
        last = self._diagnostic_emitted.get(code)
        if last is not None and now - last < DIAGNOSTIC_INTERVAL_MS:
            return
        self._diagnostic_counts[code] = 0
        self._diagnostic_emitted[code] = now
        diagnostic: Dict[str, Any] = {"code": code, "severity": severity, "count": count}
        if scorer_name is not None:
            diagnostic["scorerName"] = scorer_name
        diagnostic["message"] = message
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
                self._report("flush_timeout", "Online evaluation flush timed out before queued samples settled.")
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
