"""The stateless codec: validation and provider wire formats, nothing sent; and OMA's text rules
(secret redaction, the bash risk classifier), the component's, so that this package keeps no
copy of them."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Sequence, cast

from ._agent.input import input_json
from ._agent.tool import Tool
from ._agent.values import content_json, source_json, tool_use_json
from ._errors import InvalidMessageError
from ._runtime import dumps as _dumps
from ._runtime import Runtime, default_runtime, record
from ._types import FormattedRequest, LLMMessage, LLMResponse, Messages


def _typed(rt: Runtime, messages: Any) -> Any:
    """The component's typed messages for whatever was given, through OMA's guard: a list (or
    anything else) as its JSON; a string as JSON text, and a string that is not JSON text as
    the string it is (``messages must be an array, got string``)."""
    if not isinstance(messages, str):
        return rt.call("messages-from-json", input_json(messages))
    try:
        return rt.call("messages-from-json", messages)
    except InvalidMessageError as e:
        if not e.message.startswith("messages must be valid JSON"):
            raise
        return rt.call("messages-from-json", _dumps(messages))


def validate(messages: Messages, *, runtime: Optional[Runtime] = None) -> List[LLMMessage]:
    """Checks an OMA message list (dicts, or its JSON text) with OMA's shape guard and media rules.

    Returns the validated list in OMA's JSON shape; raises :class:`InvalidMessageError` with OMA's
    message (e.g. ``messages[0].content[1].source.url must use HTTP or HTTPS``; for a dict,
    ``messages must be an array, got object``; for ``None``, ``got null``)."""
    rt = runtime or default_runtime()
    with rt.lock():
        typed = _typed(rt, messages)
        return cast(List[LLMMessage], json.loads(rt.call("messages-to-json", typed)))


def _endpoint(provider: str, base_url: Optional[str], api_key: Optional[str], region: Optional[str],
              aws: Optional[Dict[str, str]], now_ms: Optional[int]) -> Any:
    aws_record = None
    if aws is not None:
        aws_record = record(access_key_id=aws["access_key_id"], secret_access_key=aws["secret_access_key"],
                            session_token=aws.get("session_token"))
    return record(provider=provider, base_url=base_url, api_key=api_key, region=region, aws=aws_record, now_ms=now_ms)


def _chat_request(typed_messages: Any, model: str, system_prompt: Optional[str], tools: Sequence[Any],
                  sampling: Dict[str, Any], thinking_budget: Optional[int], extra_body: Optional[Dict[str, Any]],
                  preserve_reasoning_as_text: bool, stream: bool) -> Any:
    definitions = []
    for t in tools:
        d = t.definition() if isinstance(t, Tool) else t
        definitions.append(record(name=d["name"], description=d.get("description", ""),
                                  input_schema=_dumps(d.get("inputSchema", d.get("input_schema", {})))))
    names = ("max_tokens", "temperature", "top_p", "top_k", "frequency_penalty", "presence_penalty", "min_p",
             "parallel_tool_calls", "reasoning_effort")
    unknown = set(sampling) - set(names)
    if unknown:
        raise TypeError(f"unknown sampling options: {', '.join(sorted(unknown))}")
    floats = {"temperature", "top_p", "frequency_penalty", "presence_penalty", "min_p"}
    values = {k: (float(sampling[k]) if k in floats and sampling.get(k) is not None else sampling.get(k)) for k in names}
    return record(model=model, system_prompt=system_prompt, messages=typed_messages, tools=definitions,
                  sampling=record(**values), thinking_budget=thinking_budget,
                  extra_body=_dumps(extra_body) if extra_body is not None else None,
                  preserve_reasoning_as_text=preserve_reasoning_as_text, stream=stream)


def format_request(
    messages: Messages,
    *,
    provider: str,
    model: str,
    base_url: Optional[str] = None,
    api_key: Optional[str] = None,
    region: Optional[str] = None,
    aws: Optional[Dict[str, str]] = None,
    system_prompt: Optional[str] = None,
    tools: Sequence[Any] = (),
    thinking_budget: Optional[int] = None,
    extra_body: Optional[Dict[str, Any]] = None,
    preserve_reasoning_as_text: bool = False,
    stream: bool = False,
    now_ms: Optional[int] = None,
    runtime: Optional[Runtime] = None,
    **sampling: Any,
) -> FormattedRequest:
    """The HTTP request a provider call would send: ``{"method", "url", "headers", "body"}``.

    Nothing is sent. ``headers`` carry the API key: show them to nobody. Sampling options
    (``max_tokens``, ``temperature``, ``top_p``, ``top_k``, ...) are keyword arguments. Raises
    :class:`InvalidMessageError`, :class:`UnsupportedContentBlockError` (video on Anthropic, ...),
    :class:`UnsupportedToolResultContentError`, or :class:`OmaError` for options a format refuses.
    """
    rt = runtime or default_runtime()
    with rt.lock():
        typed = _typed(rt, messages)
        request = _chat_request(typed, model, system_prompt, tools, sampling, thinking_budget, extra_body,
                                preserve_reasoning_as_text, stream)
        out = rt.call("format-request", request, _endpoint(provider, base_url, api_key, region, aws, now_ms))
    return {"method": out.method, "url": out.url, "headers": dict(out.headers), "body": out.body}


def _block_json(block: Any) -> Any:
    tag, p = block.tag, block.payload
    if tag == "text":
        return {"type": "text", "text": p}
    if tag == "image":
        return {"type": "image", "source": {"type": "base64", "media_type": getattr(p.source, "media-type"),
                                            "data": p.source.data}}
    if tag == "video":
        return {"type": "video", "source": source_json(p.source)}
    if tag == "tool-use":
        return tool_use_json(p)
    if tag == "tool-result":
        out = {"type": "tool_result", "tool_use_id": getattr(p, "tool-use-id"), "content": content_json(p.content)}
        if getattr(p, "is-error") is not None:
            out["is_error"] = getattr(p, "is-error")
        return out
    out = {"type": "reasoning", "text": p.text}
    for key, attr in (("signature", "signature"), ("redactedData", "redacted-data"), ("provenance", "provenance")):
        if getattr(p, attr) is not None:
            out[key] = getattr(p, attr)
    return out


def parse_response(
    body: str,
    *,
    provider: str,
    model: str,
    base_url: Optional[str] = None,
    messages: Messages = (),
    runtime: Optional[Runtime] = None,
) -> LLMResponse:
    """Reads a provider's successful response body into OMA's ``LLMResponse`` dict:
    ``{"id", "content", "model", "stop_reason", "usage": {"input_tokens", "output_tokens"}}``."""
    rt = runtime or default_runtime()
    with rt.lock():
        typed = _typed(rt, messages)
        request = _chat_request(typed, model, None, (), {}, None, None, False, False)
        out = rt.call("parse-response", request, _endpoint(provider, base_url, None, None, None, None), body)
    return {
        "id": out.id,
        "content": [_block_json(b) for b in out.content],
        "model": out.model,
        "stop_reason": getattr(out, "stop-reason"),
        "usage": {"input_tokens": getattr(out.usage, "input-tokens"), "output_tokens": getattr(out.usage, "output-tokens")},
    }


def _well_formed(text: str) -> str:
    """``text`` as JavaScript's ``toWellFormed`` leaves it: a surrogate pair joined into its
    character, a lone surrogate (which UTF-8 cannot carry to the component, and which no rule
    matches) as U+FFFD; any other text unchanged."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def redact_sensitive_text(text: str, *, runtime: Optional[Runtime] = None) -> str:
    """OMA's ``redactSensitiveText``: ``text`` with what looks like a secret (PEM private keys,
    ``Authorization:`` values, bearer tokens, values assigned to names that look sensitive, the
    shapes of well-known API keys) replaced by ``[redacted]``, by the component's rules. A lone
    surrogate comes back as U+FFFD."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a string, not {type(text).__name__}")
    if not text:
        return text
    return cast(str, (runtime or default_runtime()).call("redact-sensitive-text", _well_formed(text)))


def is_sensitive_name(name: str, *, runtime: Optional[Runtime] = None) -> bool:
    """OMA's ``isSensitiveName``: whether a field or variable name looks like it holds a secret
    (``api_key``, ``password``, ``token``, ``x-token``, ``session``, ...), by the component's rule."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a string, not {type(name).__name__}")
    return bool((runtime or default_runtime()).call("is-sensitive-name", _well_formed(name)))


def classify_bash_command(command: Any, *, runtime: Optional[Runtime] = None) -> Dict[str, str]:
    """OMA's ``classifyBashCommand``: ``{"level": "safe" | "review" | "high", "reason"}``, the worst
    level of the command's pieces (cut at ``&&``, ``||``, ``;``, ``|``, newlines; one level of
    ``$(...)`` and backticks), with OMA's reason; a value that is not a string is ``review``. A
    heuristic for an approval gate, not a sandbox."""
    text = _well_formed(command) if isinstance(command, str) else ""
    risk = (runtime or default_runtime()).call("classify-bash-command", text)
    return {"level": str(risk.level), "reason": risk.reason}
