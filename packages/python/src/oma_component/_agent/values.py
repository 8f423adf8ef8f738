"""The component's typed values as OMA JSON: stream events, tool-use blocks, tool-result content
and media sources, in the shapes of OMA and the JavaScript package."""

from __future__ import annotations

import json
from typing import Any, Dict, Optional

from wasmtime.component import Variant

from .._errors import TokenBudgetExceededError


def source_json(source: Any) -> Any:
    p = source.payload
    if source.tag == "base64":
        return {"type": "base64", "media_type": getattr(p, "media-type"), "data": p.data}
    return {"type": "url", "media_type": getattr(p, "media-type"), "url": p.url}


def content_json(content: Any) -> Any:
    """Typed ``tool-result-content`` as OMA JSON. wasmtime-py lifts this variant untagged: the
    text case is a ``str``, the parts case a ``list`` whose items are a ``str`` (text), a
    ``media-source`` variant (image) or a ``file-part`` record (file)."""
    if isinstance(content, Variant):  # defensive: a tagged lift
        content = content.payload
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        if isinstance(part, Variant) and part.tag in ("text", "file"):  # defensive: a tagged lift
            part = part.payload
        elif isinstance(part, Variant) and part.tag == "image":
            part = part.payload
        if isinstance(part, str):
            parts.append({"type": "text", "text": part})
        elif isinstance(part, Variant):
            parts.append({"type": "image", "source": source_json(part)})
        else:
            parts.append({"type": "file", "filename": part.filename, "source": source_json(part.source)})
    return parts


def tool_use_json(block: Any) -> Dict[str, Any]:
    try:
        arguments = json.loads(block.input)
    except ValueError:
        arguments = block.input
    out = {"type": "tool_use", "id": block.id, "name": block.name, "input": arguments}
    if block.signature is not None:
        out["signature"] = block.signature
    return out


def event_json(event: Any) -> Optional[Dict[str, Any]]:
    """An ``event`` step as OMA's StreamEvent (the shapes of the JavaScript package and OMA)."""
    tag, p = event.tag, event.payload
    if tag == "text-delta":
        return {"type": "text_delta", "data": p}
    if tag == "reasoning-delta":
        return {"type": "reasoning", "data": p}
    if tag == "text":
        return {"type": "text", "data": p}
    if tag == "tool-use":
        return {"type": "tool_use", "data": tool_use_json(p)}
    if tag == "tool-result":
        data = {"type": "tool_result", "tool_use_id": getattr(p, "tool-use-id"), "content": content_json(p.content)}
        if getattr(p, "is-error") is not None:
            data["is_error"] = getattr(p, "is-error")
        return {"type": "tool_result", "data": data}
    if tag == "budget-exceeded":
        return {"type": "budget_exceeded", "data": TokenBudgetExceededError(p)}
    if tag == "loop-detected":
        return {"type": "loop_detected", "data": {"kind": p.kind, "repetitions": p.repetitions, "detail": p.detail}}
    return None  # done / error: delivered from the `finished` poll with the JSON result


def text_of(value: Any) -> str:
    """The JSON text of a ``json(string)`` case (wasmtime-py hands untagged variants over bare)."""
    return value if isinstance(value, str) else value.payload
