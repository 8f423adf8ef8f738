"""What an MCP tool's result becomes for the model: OMA's reading of an MCP ``tools/call``
result (its JSON, as the server sent it) as a tool result's text (``data``), its media parts
(``modelOutput``, when the result carries images, blobs or links) and its error flag; and OMA's
tool naming. The same table (fixtures/mcp/) holds every package to these rules."""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple
from urllib.parse import urlsplit

DEFAULT_MEDIA_TYPE = "application/octet-stream"
_MEDIA_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def normalize_tool_name(raw: str, prefix: Optional[str] = None) -> str:
    """The tool's name as the model sees it: ``prefix_name`` when a prefix is given, every
    ``/`` made ``_`` (providers refuse ``/`` in tool names)."""
    trimmed = prefix.strip() if prefix is not None else ""
    return (f"{trimmed}_{raw}" if trimmed else raw).replace("/", "_")


def check_unique_names(names: Sequence[str], prefix: Optional[str]) -> None:
    """Raises ``ValueError`` (OMA's message) when two tools get one name."""
    seen: Dict[str, str] = {}
    for name in names:
        normalized = normalize_tool_name(name, prefix)
        if normalized in seen:
            raise ValueError(f'Duplicate MCP tool name after normalization: "{normalized}" '
                             f'from "{seen[normalized]}" and "{name}".')
        seen[normalized] = name


def _json(value: Any, indent: Optional[int] = 2) -> str:
    if indent is None:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return json.dumps(value, ensure_ascii=False, indent=indent)


def _js_string(value: Any) -> str:
    """``String(value)`` as JavaScript writes a JSON value."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (list, dict)):
        return ",".join(_js_string(v) for v in value) if isinstance(value, list) else "[object Object]"
    return str(value)


def _is_object(value: Any) -> bool:
    return isinstance(value, (dict, list))


def block_text(block: Any) -> Optional[str]:
    """One content block as text, or ``None`` for a block type this has no text for."""
    if not isinstance(block, dict):
        return None
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return str(block["text"])
    if kind in ("image", "audio") and isinstance(block.get("data"), str):
        mime = block["mimeType"] if isinstance(block.get("mimeType"), str) else f"{kind}/*"
        return f"[{kind} {mime}; base64 length={len(block['data'])}]"
    if kind == "resource" and _is_object(block.get("resource")):
        resource = block["resource"] if isinstance(block["resource"], dict) else {}
        uri = resource["uri"] if isinstance(resource.get("uri"), str) else ""
        if isinstance(resource.get("text"), str):
            return f"[resource {uri}]\n{resource['text']}"
        if isinstance(resource.get("blob"), str):
            mime = resource["mimeType"] if isinstance(resource.get("mimeType"), str) else ""
            return f"[resource {uri}; mimeType={mime}; blob base64 length={len(resource['blob'])}]"
        return f"[resource {uri}]"
    if kind == "resource_link":
        uri = block["uri"] if isinstance(block.get("uri"), str) else ""
        name = block["name"] if isinstance(block.get("name"), str) else ""
        description = block["description"] if isinstance(block.get("description"), str) else ""
        head = f"[resource_link name={_json(name, None)} uri={_json(uri, None)}]"
        return head if description == "" else f"{head}\n{description}"
    return None


def _serialize_block(block: Any) -> str:
    text = block_text(block)
    if text is not None:
        return text
    kind = block.get("type") if isinstance(block, dict) else None
    try:
        return f"[{_js_string('unknown' if kind is None else kind)}]\n{_json(block)}"
    except (TypeError, ValueError):
        return "[mcp content block]"


def result_data(result: Mapping[str, Any]) -> str:
    """The result as the tool result's text: the legacy ``toolResult`` as JSON, else each
    content block as a line, else ``structuredContent`` as JSON, else the result as JSON."""
    if "toolResult" in result:
        try:
            return _json(result["toolResult"])
        except (TypeError, ValueError):
            return str(result["toolResult"])
    content = result.get("content")
    lines = [_serialize_block(block) for block in (content if isinstance(content, list) else [])
             if _is_object(block)]
    if lines:
        return "\n".join(lines)
    if "structuredContent" in result:
        try:
            return _json(result["structuredContent"])
        except (TypeError, ValueError):
            return str(result["structuredContent"])
    try:
        return _json(dict(result), None)
    except (TypeError, ValueError):
        return "MCP tool completed with non-text output."


def _media_type(value: Any) -> Optional[str]:
    return value if isinstance(value, str) and _MEDIA_TYPE.fullmatch(value) else None


def _http_url(value: Any) -> Optional[str]:
    if not isinstance(value, str):
        return None
    try:
        parts = urlsplit(value)
    except ValueError:
        return None
    return value if parts.scheme.lower() in ("http", "https") and parts.netloc else None


def _decode_component(text: str) -> Optional[str]:
    """``decodeURIComponent``: ``None`` where it would throw (a bad escape, bytes not UTF-8)."""
    out = bytearray()
    i = 0
    while i < len(text):
        if text[i] == "%":
            pair = text[i + 1:i + 3]
            if len(pair) != 2 or not all(c in "0123456789abcdefABCDEF" for c in pair):
                return None
            out.append(int(pair, 16))
            i += 3
        else:
            out.extend(text[i].encode("utf-8"))
            i += 1
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _filename(value: Mapping[str, Any]) -> str:
    name = value.get("name")
    if isinstance(name, str) and name.strip():
        return name
    uri = value.get("uri")
    if isinstance(uri, str):
        raw_last = next((s for s in reversed(uri.split("/")) if s), None)
        if _SCHEME.match(uri):
            path = urlsplit(uri).path
            last = next((s for s in reversed(path.split("/")) if s), None)
            if last:
                decoded = _decode_component(last)
                if decoded is not None:
                    return decoded
                if raw_last:
                    return raw_last
        elif raw_last:
            return raw_last
    return "mcp-resource"


def _block_parts(block: Any) -> Tuple[List[Dict[str, Any]], bool]:
    """One content block as tool-result parts, and whether it carried media."""
    kind = block.get("type") if isinstance(block, dict) else None
    if isinstance(block, dict):
        if kind == "text" and isinstance(block.get("text"), str):
            return [{"type": "text", "text": block["text"]}], False
        if kind == "image" and isinstance(block.get("data"), str):
            media = _media_type(block.get("mimeType"))
            if media is not None:
                return [{"type": "image", "source": {"type": "base64", "media_type": media, "data": block["data"]}}], True
        if kind == "resource" and _is_object(block.get("resource")):
            resource = block["resource"] if isinstance(block["resource"], dict) else {}
            if isinstance(resource.get("text"), str):
                return [{"type": "text", "text": _serialize_block(block)}], False
            if isinstance(resource.get("blob"), str):
                filename = _filename(resource)
                uri = resource.get("uri")
                label = f"[resource {uri}]" if isinstance(uri, str) and uri else f"[resource {filename}]"
                return [{"type": "text", "text": label},
                        {"type": "file", "filename": filename,
                         "source": {"type": "base64", "media_type": _media_type(resource.get("mimeType")) or DEFAULT_MEDIA_TYPE,
                                    "data": resource["blob"]}}], True
        if kind == "resource_link":
            url = _http_url(block.get("uri"))
            if url is not None:
                parts: List[Dict[str, Any]] = []
                if isinstance(block.get("description"), str) and block["description"]:
                    parts.append({"type": "text", "text": block["description"]})
                parts.append({"type": "file", "filename": _filename(block),
                              "source": {"type": "url", "media_type": _media_type(block.get("mimeType")) or DEFAULT_MEDIA_TYPE,
                                         "url": url}})
                return parts, True
    return [{"type": "text", "text": _serialize_block(block)}], False


def result_model_output(result: Mapping[str, Any], data: str) -> Optional[List[Dict[str, Any]]]:
    """The parts the model gets instead of ``data`` when the result carries media (an image
    with a valid media type, a resource blob, an http(s) resource link); ``None`` otherwise
    and for a failed call (whose result stays text)."""
    if result.get("isError") is True:
        return None
    content = result.get("content")
    converted = [_block_parts(block) for block in (content if isinstance(content, list) else []) if _is_object(block)]
    if not any(media for _, media in converted):
        return None
    if "toolResult" in result:
        return [{"type": "text", "text": data}] + [p for parts, _ in converted for p in parts if p["type"] != "text"]
    return [p for parts, _ in converted for p in parts]


def tool_result(result: Mapping[str, Any]) -> Dict[str, Any]:
    """OMA's tool result of an MCP call: ``{"data", "modelOutput"?, "isError"}``."""
    data = result_data(result)
    out: Dict[str, Any] = {"data": data}
    model_output = result_model_output(result, data)
    if model_output is not None:
        out["modelOutput"] = model_output
    out["isError"] = result.get("isError") is True
    return out
