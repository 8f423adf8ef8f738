"""External text-only backends (OMA's process and ACP backends, ``agent/process-backend.ts``):
the component hands the text to send; the backend's answer is the run's output."""

from __future__ import annotations

import subprocess
from typing import Any, Callable, Dict, Optional, Sequence


class Backend:
    """An external text-only backend (OMA's process and ACP backends). ``send`` returns the
    answer's text, or awaits it (``async def send``)."""

    kind = "process"

    def send(self, text: str) -> Any:  # pragma: no cover - interface
        raise NotImplementedError


class ProcessBackend(Backend):
    """Runs ``command`` with the text on standard input; its standard output is the answer.

    The component hands over the text to send: the agent's system prompt and a blank line, then the
    latest user text (as OMA's process backend sends it)."""

    kind = "process"

    def __init__(self, command: Sequence[str], *, timeout: Optional[float] = 120.0, cwd: Optional[str] = None,
                 env: Optional[Dict[str, str]] = None) -> None:
        self.command = list(command)
        self.timeout = timeout
        self.cwd = cwd
        self.env = env

    def send(self, text: str) -> str:
        try:
            done = subprocess.run(self.command, input=text, capture_output=True, text=True,
                                  timeout=self.timeout, cwd=self.cwd, env=self.env, check=False)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"process backend timed out after {self.timeout}s") from None
        except OSError as e:
            raise RuntimeError(f"process backend could not start: {e.strerror or e}") from None
        if done.returncode != 0:
            detail = (done.stderr or "").strip()[:500]
            how = f"signal {-done.returncode}" if done.returncode < 0 else f"code {done.returncode}"
            raise RuntimeError(f"process backend exited with {how}" + (f": {detail}" if detail else ""))
        return done.stdout


class CallableBackend(Backend):
    """Any function ``send(text) -> str`` (or ``async def``) as a backend of ``kind``
    ``process`` or ``acp``."""

    def __init__(self, fn: Callable[[str], Any], kind: str = "acp") -> None:
        self.fn = fn
        self.kind = kind

    def send(self, text: str) -> Any:
        return self.fn(text)
