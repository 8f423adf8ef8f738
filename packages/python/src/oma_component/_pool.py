"""OMA's ``AgentPool`` and ``Semaphore`` in Python's idiom (asyncio).

A registry of named agents and a scheduler that caps how many agent runs are in flight at once
across the pool, with OMA's rules: runs on one agent are serialised (a per-agent lock taken
before a pool slot, so a waiting run holds no slot); ``run_parallel`` never raises (a failed run
is a failed result in the dict); ``run_any`` picks agents round robin in insertion order;
``get_status`` counts the agents by state.

The pool takes :class:`~oma_component.AsyncAgent` (awaited) and :class:`~oma_component.Agent`
(run in a worker thread, so the event loop stays free), or anything with a ``name`` and a
``run(prompt)`` of either kind.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
from typing import Any, Awaitable, Callable, Deque, Dict, Iterable, List, Mapping, Optional, Tuple, TypeVar, Union

from ._types import AgentRunResult

T = TypeVar("T")

#: A stream callback: sees every event of a run made through ``stream``; what it raises is
#: ignored (OMA's rule).
StreamCallback = Callable[[Dict[str, Any]], Any]

#: One task of :meth:`AgentPool.run_parallel`: ``{"agent": name, "prompt": prompt}`` (OMA's
#: shape) or ``(name, prompt)``.
PoolTask = Union[Mapping[str, Any], Tuple[str, Any]]


class Semaphore:
    """A counting semaphore for asyncio: :meth:`acquire` waits for a free slot, :meth:`release`
    hands it to the next waiter in arrival order (OMA's ``Semaphore``)."""

    def __init__(self, max: int) -> None:  # noqa: A002 - OMA's parameter name
        if not isinstance(max, int) or isinstance(max, bool) or max < 1:
            raise ValueError(f"Semaphore max must be at least 1, got {max}")
        self._max = max
        self._current = 0
        self._queue: Deque["asyncio.Future[None]"] = collections.deque()

    @property
    def limit(self) -> int:
        """The number of holders allowed at once."""
        return self._max

    @property
    def active(self) -> int:
        """Slots held now."""
        return self._current

    @property
    def pending(self) -> int:
        """Callers waiting for a slot."""
        return len(self._queue)

    async def acquire(self) -> None:
        """Returns when the caller holds a slot (at once when one is free, else in arrival
        order). A waiter that is cancelled leaves the queue, or gives back a slot it was handed."""
        if self._current < self._max:
            self._current += 1
            return
        waiter: "asyncio.Future[None]" = asyncio.get_running_loop().create_future()
        self._queue.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()
            else:
                try:
                    self._queue.remove(waiter)
                except ValueError:
                    pass
            raise

    def release(self) -> None:
        """Gives a slot back; a waiting caller takes it over directly."""
        while self._queue:
            waiter = self._queue.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._current -= 1

    async def run(self, fn: Callable[[], Awaitable[T]]) -> T:
        """Runs ``fn()`` holding a slot, releasing it however ``fn`` ends."""
        await self.acquire()
        try:
            return await fn()
        finally:
            self.release()


def _empty_usage() -> Dict[str, int]:
    return {"input_tokens": 0, "output_tokens": 0}


def _empty_result() -> AgentRunResult:
    """OMA's result for a streamed run that ended with no ``done`` event."""
    return {"success": False, "output": "", "messages": [], "tokenUsage": _empty_usage(),  # type: ignore[typeddict-item]
            "toolCalls": []}


def _failure(error: BaseException) -> AgentRunResult:
    """OMA's failed result for a run that raised inside ``run_parallel``."""
    message = getattr(error, "message", None)
    if not isinstance(message, str):
        message = error.args[0] if error.args and isinstance(error.args[0], str) else str(error)
    return {"success": False, "output": message, "messages": [], "tokenUsage": _empty_usage(),  # type: ignore[typeddict-item]
            "toolCalls": []}


def _notify(callback: StreamCallback, event: Dict[str, Any]) -> None:
    try:
        callback(event)
    except Exception:  # noqa: BLE001 - a throwing callback never affects the run (OMA's rule)
        pass


async def _run_on(agent: Any, prompt: Any, stream_callback: Optional[StreamCallback]) -> AgentRunResult:
    """Runs ``agent`` on ``prompt``; through ``stream`` when a callback wants the events."""
    if stream_callback is None:
        if inspect.iscoroutinefunction(agent.run):
            return await agent.run(prompt)  # type: ignore[no-any-return]
        return await asyncio.to_thread(agent.run, prompt)
    stream = agent.stream(prompt)

    def take(event: Any, found: Optional[AgentRunResult]) -> Optional[AgentRunResult]:
        # Each event goes to the callback; ``done`` carries the result, ``error`` raises.
        _notify(stream_callback, event)
        if event.get("type") == "error":
            _raise(event.get("data"))
        return event["data"] if event.get("type") == "done" else found

    if hasattr(stream, "__aiter__"):
        result: Optional[AgentRunResult] = None
        async for event in stream:
            result = take(event, result)
        return result if result is not None else _empty_result()

    def consume() -> AgentRunResult:
        found: Optional[AgentRunResult] = None
        for event in stream:
            found = take(event, found)
        return found if found is not None else _empty_result()

    return await asyncio.to_thread(consume)


def _raise(data: Any) -> None:
    """An ``error`` event ends a pooled streamed run with its error (OMA rethrows it)."""
    if isinstance(data, BaseException):
        raise data
    output = data.get("output") if isinstance(data, Mapping) else None
    raise RuntimeError(output if isinstance(output, str) else str(data))


class AgentPool:
    """Registry and scheduler of named agents with a pool-wide concurrency cap (OMA's
    ``AgentPool``): ``max_concurrency`` agent runs at once across the pool (default 5)."""

    def __init__(self, max_concurrency: int = 5) -> None:
        self._agents: Dict[str, Any] = {}
        self._locks: Dict[str, Semaphore] = {}
        self._states: Dict[str, str] = {}
        self._semaphore = Semaphore(max_concurrency)
        self._max_concurrency = max_concurrency
        self._cursor = 0

    @property
    def available_run_slots(self) -> int:
        """Pool slots not held now (``max_concurrency - active``)."""
        return self._max_concurrency - self._semaphore.active

    @property
    def run_concurrency_limit(self) -> int:
        """The pool's concurrency cap."""
        return self._semaphore.limit

    def add(self, agent: Any) -> None:
        """Registers an agent under its name; a second agent of the same name raises."""
        name = agent.name
        if name in self._agents:
            raise ValueError(f"AgentPool: agent '{name}' is already registered. "
                             f"Call remove('{name}') before re-adding.")
        self._agents[name] = agent
        self._locks[name] = Semaphore(1)
        self._states[name] = "idle"

    def remove(self, name: str) -> None:
        """Unregisters an agent; an unknown name raises ``KeyError``."""
        if name not in self._agents:
            raise KeyError(f"AgentPool: agent '{name}' is not registered.")
        del self._agents[name]
        del self._locks[name]
        del self._states[name]

    def get(self, name: str) -> Optional[Any]:
        """The agent registered under ``name``, or ``None``."""
        return self._agents.get(name)

    def list(self) -> List[Any]:
        """The registered agents in insertion order."""
        return list(self._agents.values())

    async def run(self, agent_name: str, prompt: Any, *,
                  stream_callback: Optional[StreamCallback] = None) -> AgentRunResult:
        """Runs ``prompt`` on the named agent under the pool's cap and the agent's own lock; with
        a ``stream_callback``, through the agent's ``stream``, the callback seeing every event."""
        agent = self._require(agent_name)
        return await self._locked(agent, prompt, stream_callback)

    async def run_ephemeral(self, agent: Any, prompt: Any, *,
                            stream_callback: Optional[StreamCallback] = None) -> AgentRunResult:
        """Runs ``prompt`` on an agent that is not registered, under the pool's cap only."""
        return await self._semaphore.run(lambda: _run_on(agent, prompt, stream_callback))

    async def run_parallel(self, tasks: Iterable[PoolTask]) -> Dict[str, AgentRunResult]:
        """Runs every task at once under the cap; returns a dict by agent name in task order
        (the last result when a name repeats). A run that raises is a failed result whose
        ``output`` is the error's message; this never raises for a run."""
        pairs = [(t["agent"], t["prompt"]) if isinstance(t, Mapping) else (t[0], t[1]) for t in tasks]
        outcomes = await asyncio.gather(*(self.run(name, prompt) for name, prompt in pairs),
                                        return_exceptions=True)
        results: Dict[str, AgentRunResult] = {}
        for (name, _), outcome in zip(pairs, outcomes):
            if isinstance(outcome, BaseException):
                if not isinstance(outcome, Exception):
                    raise outcome
                results[name] = _failure(outcome)
            else:
                results[name] = outcome
        return results

    async def run_any(self, prompt: Any) -> AgentRunResult:
        """Runs ``prompt`` on the next agent in round-robin order; an empty pool raises."""
        agents = self.list()
        if not agents:
            raise RuntimeError("AgentPool: cannot call run_any on an empty pool.")
        self._cursor %= len(agents)
        agent = agents[self._cursor]
        self._cursor = (self._cursor + 1) % len(agents)
        return await self._locked(agent, prompt, None)

    def get_status(self) -> Dict[str, int]:
        """How many agents are in each state: ``{"total", "idle", "running", "completed",
        "error"}`` (an agent's state follows its runs through the pool)."""
        counts = {"idle": 0, "running": 0, "completed": 0, "error": 0}
        for name in self._agents:
            counts[self._states[name]] += 1
        return {"total": len(self._agents), **counts}

    async def shutdown(self) -> None:
        """Resets every agent (history cleared, state idle); the agents stay registered."""
        for name, agent in self._agents.items():
            agent.reset()
            self._states[name] = "idle"

    async def _locked(self, agent: Any, prompt: Any, stream_callback: Optional[StreamCallback]) -> AgentRunResult:
        lock = self._locks[agent.name]
        await lock.acquire()
        try:
            return await self._semaphore.run(lambda: self._tracked(agent, prompt, stream_callback))
        finally:
            lock.release()

    async def _tracked(self, agent: Any, prompt: Any, stream_callback: Optional[StreamCallback]) -> AgentRunResult:
        name = agent.name
        self._states[name] = "running"
        try:
            result = await _run_on(agent, prompt, stream_callback)
        except BaseException:
            if name in self._states:
                self._states[name] = "error"
            raise
        if name in self._states:
            self._states[name] = "completed" if result.get("success") else "error"
        return result

    def _require(self, name: str) -> Any:
        agent = self._agents.get(name)
        if agent is None:
            raise KeyError(f"AgentPool: agent '{name}' is not registered. "
                           f"Registered agents: [{', '.join(self._agents)}]")
        return agent
