"""JSON text exactly as JavaScript's ``JSON.stringify`` writes it (compact): numbers as
JavaScript writes them (``1`` for ``1.0``, ``1e-7``, ``100000000000000000000``), strings escaped
as it escapes them. What OMA hashes or files as JSON text must read back the same in every
language: a checksum over Python's ``1.0`` would not match JavaScript's ``1``."""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from typing import Any, Optional


def js_number(value: float) -> str:
    """``String(value)`` in JavaScript: ``1`` not ``1.0``, ``1e-7`` not ``1e-07``, fixed
    notation from 1e-6 up to 1e21."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    # Python's repr gives the shortest digits that read back as the value, as JavaScript's.
    mantissa, _, exp_text = repr(abs(value)).partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = whole + frac
    point = len(whole) + (int(exp_text) if exp_text else 0)  # where the decimal point falls in digits
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0") or "0"
    k, n = len(digits), point
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * (-n) + digits
    e = n - 1
    head = digits[0] + ("." + digits[1:] if k > 1 else "")
    return f"{sign}{head}e{'+' if e >= 0 else '-'}{abs(e)}"


def dumps(value: Any) -> str:
    """``JSON.stringify(value)``; ``ValueError`` for what JSON cannot hold (NaN, infinities,
    cycles, objects that are not dicts, lists, strings, numbers, booleans or ``None``)."""
    parts: list[str] = []
    _write(value, parts, set())
    return "".join(parts)


def _write(value: Any, out: list[str], active: set[int]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(json.dumps(value, ensure_ascii=False))
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("JSON cannot hold NaN or an infinity")
        out.append(js_number(value))
    elif isinstance(value, (dict, list, tuple)):
        if id(value) in active:
            raise ValueError("JSON cannot hold a cycle")
        active.add(id(value))
        if isinstance(value, dict):
            out.append("{")
            for i, (key, item) in enumerate(value.items()):
                if not isinstance(key, str):
                    raise ValueError("JSON object keys must be strings")
                if i:
                    out.append(",")
                out.append(json.dumps(key, ensure_ascii=False))
                out.append(":")
                _write(item, out, active)
            out.append("}")
        else:
            out.append("[")
            for i, item in enumerate(value):
                if i:
                    out.append(",")
                _write(item, out, active)
            out.append("]")
        active.discard(id(value))
    else:
        raise ValueError(f"JSON cannot hold a {type(value).__name__}")


def date_ms(value: Any) -> Optional[float]:
    """Milliseconds since the epoch of an ISO-8601 time (``Date.parse``), or ``None`` when
    ``value`` is not one. A time without an offset is read as UTC."""
    if not isinstance(value, str) or not value:
        return None
    text = value[:-1] + "+00:00" if value[-1] in "Zz" else value
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.timestamp() * 1000
