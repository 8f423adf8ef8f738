"""Telemetry code run off the caller's thread, within a time bound.

An exporter's ``export``, a child sink's ``force_flush`` or a user callback may raise, hang or
return a coroutine; none of that may hold a run or the sink that calls it. :func:`run_bounded`
calls the code on a daemon thread of its own and waits at most the bound; a coroutine it
returns is awaited on the telemetry event loop (one daemon thread per process, started at the
first use), so an ``async def`` exporter keeps its clients on one loop across calls. Code left
running past its bound is abandoned, never joined: its answer is dropped.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import threading
from typing import Any, Awaitable, Callable, List, Optional, Tuple

_loop: Optional[asyncio.AbstractEventLoop] = None
_loop_lock = threading.Lock()


def telemetry_loop() -> asyncio.AbstractEventLoop:
    """The event loop where coroutines of telemetry code are awaited (started once)."""
    global _loop
    with _loop_lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="oma-telemetry-loop", daemon=True).start()
            _loop = loop
        return _loop


async def _awaited(value: Awaitable[Any]) -> Any:
    return await value


def schedule(value: Awaitable[Any]) -> "concurrent.futures.Future[Any]":
    """Awaits ``value`` on the telemetry loop; the future settles with its outcome."""
    return asyncio.run_coroutine_threadsafe(_awaited(value), telemetry_loop())


#: What bounded code came to: ``("value", v)``, ``("error", exc)`` or ``("timeout", None)``.
Outcome = Tuple[str, Any]


class Abandoned:
    """Counts calls left running past their bound that have not returned yet, so that a caller
    can stop starting new ones (each holds a thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0

    def add(self, delta: int) -> None:
        with self._lock:
            self.count += delta


def run_bounded(thunk: Callable[[], Any], timeout_s: Optional[float], name: str = "oma-telemetry-call",
                abandoned: Optional[Abandoned] = None) -> Outcome:
    """Calls ``thunk()`` on a thread of its own and, if it returns an awaitable, awaits that on
    the telemetry loop; gives ``("value", v)``, ``("error", exc)`` or ``("timeout", None)``
    after ``timeout_s`` seconds (``None``: no bound). A coroutine still running at the bound is
    cancelled; a thread is left to finish on its own, counted in ``abandoned`` until it does."""
    done: "concurrent.futures.Future[Any]" = concurrent.futures.Future()
    pending: List["concurrent.futures.Future[Any]"] = []
    state = {"abandoned": False, "finished": False}
    lock = threading.Lock()

    def runner() -> None:
        try:
            value = thunk()
            if inspect.isawaitable(value):
                future = schedule(value)
                with lock:
                    if state["abandoned"]:
                        future.cancel()
                    pending.append(future)
                value = future.result()
            if not done.done():
                done.set_result(value)
        except BaseException as exc:  # noqa: BLE001 - telemetry code may raise anything
            if not done.done():
                done.set_exception(exc)
        finally:
            with lock:
                state["finished"] = True
                left = state["abandoned"]
            if left and abandoned is not None:
                abandoned.add(-1)

    threading.Thread(target=runner, name=name, daemon=True).start()
    try:
        return ("value", done.result(timeout=timeout_s))
    except concurrent.futures.TimeoutError:
        with lock:
            state["abandoned"] = True
            for future in pending:
                future.cancel()
            if not state["finished"] and abandoned is not None:
                abandoned.add(1)
        return ("timeout", None)
    except BaseException as exc:  # noqa: BLE001
        return ("error", exc)
