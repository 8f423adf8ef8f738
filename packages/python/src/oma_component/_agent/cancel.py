"""Cancelling runs from any thread: :class:`CancelToken` (OMA's ``AbortSignal``)."""

from __future__ import annotations

import threading
from typing import Callable, List, Optional


class CancelToken:
    """Cancels runs from any thread: give it as ``cancel=`` to ``run``, ``stream``, ``prompt``
    or ``run_agent`` (either API) and call :meth:`cancel`.

    The run ends at once with OMA's cancelled status (``{"code": "cancelled", "message": "Run
    cancelled by caller."}``, ``errorInfo.kind`` ``"cancellation"``; a stream's last event is
    ``error``): the request in flight is abandoned and its connection closed, a retry wait or a
    pending hook or tool is left (a tool's thread finishes on its own, its answer dropped), and a
    ``prompt`` leaves the history as it was. A token that is already cancelled sends nothing. One
    token may cancel several runs; it stays cancelled."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: List[Callable[[], None]] = []

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` was called."""
        return self._event.is_set()

    def cancel(self) -> None:
        """Cancels every run given this token (now and later); safe from any thread."""
        with self._lock:
            if self._event.is_set():
                return
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            try:
                callback()
            except Exception:  # noqa: BLE001 - a run's own wake-up; nothing to report
                pass

    def wait(self, seconds: Optional[float]) -> bool:
        """Waits up to ``seconds`` (for ever with ``None``) for the cancellation; whether it came."""
        return self._event.wait(seconds)

    def _subscribe(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Calls ``callback`` on cancellation (at once if already cancelled); returns the
        function that unsubscribes it."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)

                def unsubscribe() -> None:
                    with self._lock:
                        if callback in self._callbacks:
                            self._callbacks.remove(callback)

                return unsubscribe
        callback()
        return lambda: None


class RunCancelled(Exception):
    """Raised inside the host loop when the run's :class:`CancelToken` fires."""
