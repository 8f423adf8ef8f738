"""A run's input as the component takes it (OMA's ``agent/input.ts``): JSON text, whatever the
caller gave (OMA's guard in the component judges it), with a value JSON cannot carry refused
here by its path, and long media data handed beside the text instead of inside it."""

from __future__ import annotations

import json
import math
from typing import Any, List, Optional, Tuple

from .._errors import InvalidMessageError
from .._runtime import dumps


def run_input(value: Any, blocks: bool = False) -> Tuple[str, List[Tuple[str, str]]]:
    """A run's input for the ``driver`` entry points: a string as its JSON text; a message list
    (or ``prompt``'s content blocks, with ``blocks``) as :func:`input_parts` gives it."""
    if isinstance(value, str):
        return dumps(value), []
    return input_parts(value, blocks=blocks)


def input_json(value: Any, path: str = "messages") -> str:
    """The JSON text of a value given to OMA's guard, whatever it is (a dict reaches the guard
    as an object, ``None`` as null). A value JSON cannot carry (``bytes``, a set, NaN, a cycle)
    raises :class:`InvalidMessageError` naming its path: ``bytes`` are refused, never encoded,
    as in JavaScript (base64 text is what OMA holds)."""
    if isinstance(value, tuple):
        value = list(value)
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        problem = _non_json(value, path, set())
        raise InvalidMessageError(problem or f"{path} must be JSON data") from None


#: Media `data` strings at least this long go to the component beside the JSON text (the
#: driver's `*-json-parts` entry points) instead of through `json.dumps` and the component's
#: JSON parser, which would each scan every character of them; below it, one text is cheaper.
BESIDE = 16 * 1024


def _source_without(source: Any, pointer: str, strings: List[Tuple[str, str]]) -> Any:
    """``source`` with its long ASCII ``data`` taken out (recorded at ``pointer``), else None."""
    if type(source) is not dict:
        return None
    data = source.get("data")
    if type(data) is not str or len(data) < BESIDE or not data.isascii():
        return None
    strings.append((pointer, data))
    return {**source, "data": ""}


def _blocks_without(content: Any, at: str, strings: List[Tuple[str, str]]) -> Any:
    """A content-block list with its long media data taken out (copies on the way; the caller's
    value is untouched), or the list itself when there is none."""
    if type(content) is not list:
        return content
    out = content
    for j, block in enumerate(content):
        if type(block) is not dict:
            continue
        copy = None
        if block.get("type") == "tool_result":
            parts = block.get("content")
            if type(parts) is not list:
                continue
            parts_out = parts
            for k, part in enumerate(parts):
                if type(part) is not dict:
                    continue
                source = _source_without(part.get("source"), f"{at}/{j}/content/{k}/source/data", strings)
                if source is None:
                    continue
                if parts_out is parts:
                    parts_out = list(parts)
                parts_out[k] = {**part, "source": source}
            if parts_out is not parts:
                copy = {**block, "content": parts_out}
        else:
            source = _source_without(block.get("source"), f"{at}/{j}/source/data", strings)
            if source is not None:
                copy = {**block, "source": source}
        if copy is None:
            continue
        if out is content:
            out = list(content)
        out[j] = copy
    return out


def input_parts(value: Any, blocks: bool = False) -> Tuple[str, List[Tuple[str, str]]]:
    """The JSON text of a run's input (a message list; a content-block list when ``blocks``) with
    its long media data beside it as ``(JSON Pointer, text)`` pairs, for the ``*-json-parts``
    entry points: the component puts each string back before any check, so the input is the
    value the whole text would have been. Errors as :func:`input_json`."""
    strings: List[Tuple[str, str]] = []
    if blocks:
        rest = _blocks_without(value, "", strings)
        return input_json(rest, "messages[0].content"), strings
    if type(value) is list:
        out = value
        for i, message in enumerate(value):
            if type(message) is not dict:
                continue
            content = _blocks_without(message.get("content"), f"/{i}/content", strings)
            if content is message.get("content"):
                continue
            if out is value:
                out = list(value)
            out[i] = {**message, "content": content}
        value = out
    return input_json(value, "messages"), strings


def _non_json(value: Any, path: str, seen: "set[int]") -> Optional[str]:
    """What the first value JSON cannot carry is, by its path (depth first, in order)."""
    if value is None or isinstance(value, (str, bool, int)):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{path} must be JSON data, got {value!r}"
    if isinstance(value, (list, tuple, dict)):
        if id(value) in seen:
            return f"{path} must be JSON data: it contains a circular reference"
        seen.add(id(value))
        try:
            if isinstance(value, dict):
                for key, item in value.items():
                    if not isinstance(key, (str, int, float, bool)) and key is not None:
                        return f"{path} must be JSON data: its keys must be strings, got {type(key).__name__}"
                    found = _non_json(item, f"{path}.{key}", seen)
                    if found:
                        return found
            else:
                for i, item in enumerate(value):
                    found = _non_json(item, f"{path}[{i}]", seen)
                    if found:
                        return found
        finally:
            seen.discard(id(value))
        return None
    return f"{path} must be JSON data, got {type(value).__name__}"
