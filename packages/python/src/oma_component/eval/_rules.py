"""The component's evaluation rules (the codec's ``score-builtin``, ``judge`` and
``online-evaluation``, docs/evaluation.md): JSON in and out, OMA's ``TypeError`` raised as
``TypeError``, its ``RangeError`` and plain ``Error`` as ``ValueError``, with OMA's messages."""

from __future__ import annotations

import json
from typing import Any, Optional

from .._codec import _well_formed
from .._errors import OmaError
from .._runtime import Runtime, default_runtime


def _rule(name: str, *args: Any, runtime: Optional[Runtime] = None) -> Any:
    try:
        text = (runtime or default_runtime()).call(name, *args)
    except OmaError as e:
        if e.name == "TypeError":
            raise TypeError(str(e)) from None
        if e.name in ("RangeError", "Error"):
            raise ValueError(str(e)) from None
        raise
    return json.loads(text)


def to_json(value: Any) -> str:
    """JSON text of a value handed to the rules; what JSON cannot hold as its ``str``."""
    return _well_formed(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str))


def score_builtin(scorer: str, options: str, context: Optional[str] = None) -> Any:
    """A built-in scorer described (no ``context``) or a sample scored."""
    return _rule("score-builtin", scorer, _well_formed(options), None if context is None else _well_formed(context))


def judge_step(step: str, request: Any) -> Any:
    """One step of a judge scorer (``options``, ``prompt``, ``extract``, ``verdict``, ``aggregate``)."""
    return _rule("judge", step, to_json(request))


def online_step(step: str, request: Any) -> Any:
    """One step of the online evaluation rules (``case``, ``record``, ``flush``)."""
    return _rule("online-evaluation", step, to_json(request))
