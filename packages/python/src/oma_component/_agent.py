"""Agents, tools, backends and the host loop that drives a ``driver`` session."""

from __future__ import annotations

import json
import queue
import secrets
import subprocess
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Union

from wasmtime.component import Variant

from ._errors import OmaError
from ._http import DEFAULT_MAX_RESPONSE_BYTES, HttpClient, TransportFailure, default_client
from ._runtime import dumps as _dumps
from ._runtime import ChunkAnswer, Runtime, default_runtime, record

Json = Any
RunInputT = Union[str, Sequence[Dict[str, Any]]]
PromptInputT = Union[str, Sequence[Dict[str, Any]]]


# -- tools and backends -----------------------------------------------------------------------


@dataclass
class ToolResult:
    """What a tool may return to say more than its content: ``is_error`` marks a failure."""

    content: Union[str, List[Dict[str, Any]]]
    is_error: bool = False


@dataclass
class Tool:
    """A tool the model may call. ``fn(input)`` gets the call's arguments as a dict and returns a
    string, a list of OMA tool-result parts (``{"type": "text" | "image" | "file", ...}``), a
    :class:`ToolResult`, or any other JSON value (sent as its JSON text). An exception is sent to
    the model as a failed result with the exception's message."""

    name: str
    description: str
    input_schema: Dict[str, Any]
    fn: Callable[[Dict[str, Any]], Any]

    def definition(self) -> Dict[str, Any]:
        return {"name": self.name, "description": self.description, "inputSchema": self.input_schema}


def tool(name: Optional[str] = None, description: str = "", input_schema: Optional[Dict[str, Any]] = None):
    """Decorator form: ``@tool(description=..., input_schema=...)`` on ``def fn(input): ...``."""

    def wrap(fn: Callable[[Dict[str, Any]], Any]) -> Tool:
        return Tool(
            name or fn.__name__,
            description or (fn.__doc__ or "").strip(),
            input_schema or {"type": "object", "properties": {}},
            fn,
        )

    return wrap


class Backend:
    """An external text-only backend (OMA's process and ACP backends)."""

    kind = "process"

    def send(self, text: str) -> str:  # pragma: no cover - interface
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
            raise RuntimeError(f"process backend exited with status {done.returncode}" + (f": {detail}" if detail else ""))
        return done.stdout


class CallableBackend(Backend):
    """Any function ``send(text) -> str`` as a backend of ``kind`` ``process`` or ``acp``."""

    def __init__(self, fn: Callable[[str], str], kind: str = "acp") -> None:
        self.fn = fn
        self.kind = kind

    def send(self, text: str) -> str:
        return self.fn(text)


# -- values ------------------------------------------------------------------------------------


def _source_json(source: Any) -> Dict[str, Any]:
    p = source.payload
    if source.tag == "base64":
        return {"type": "base64", "media_type": getattr(p, "media-type"), "data": p.data}
    return {"type": "url", "media_type": getattr(p, "media-type"), "url": p.url}


def _content_json(content: Any) -> Any:
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
            parts.append({"type": "image", "source": _source_json(part)})
        else:
            parts.append({"type": "file", "filename": part.filename, "source": _source_json(part.source)})
    return parts


def _tool_use_json(block: Any) -> Dict[str, Any]:
    try:
        arguments = json.loads(block.input)
    except ValueError:
        arguments = block.input
    out = {"type": "tool_use", "id": block.id, "name": block.name, "input": arguments}
    if block.signature is not None:
        out["signature"] = block.signature
    return out


def _event_json(event: Any) -> Optional[Dict[str, Any]]:
    tag, p = event.tag, event.payload
    if tag == "text-delta":
        return {"type": "text_delta", "text": p}
    if tag == "reasoning-delta":
        return {"type": "reasoning_delta", "text": p}
    if tag == "text":
        return {"type": "text", "data": p}
    if tag == "tool-use":
        return {"type": "tool_use", "data": _tool_use_json(p)}
    if tag == "tool-result":
        data = {"type": "tool_result", "tool_use_id": getattr(p, "tool-use-id"), "content": _content_json(p.content)}
        if getattr(p, "is-error") is not None:
            data["is_error"] = getattr(p, "is-error")
        return {"type": "tool_result", "data": data}
    if tag == "budget-exceeded":
        return {"type": "budget_exceeded", "data": p}
    return None  # done / error: delivered from the `done` step with the JSON result


def _text_of(value: Any) -> str:
    """The JSON text of a ``json(string)`` case (wasmtime-py hands untagged variants over bare)."""
    return value if isinstance(value, str) else value.payload


def _now_ms() -> int:
    return int(time.time() * 1000)


# -- the host loop -----------------------------------------------------------------------------


@dataclass
class _Host:
    """What answers a session's steps."""

    client: HttpClient
    tools: Dict[str, Tool] = field(default_factory=dict)
    before_run: Optional[Callable[[Dict[str, Any]], Any]] = None
    backend: Optional[Backend] = None
    on_progress: Optional[Callable[[Dict[str, Any]], None]] = None
    on_case: Optional[Callable[[Dict[str, Any]], None]] = None
    sleep: Callable[[float], None] = time.sleep
    # Where a whole response's read stops (the component decides what a body past it means).
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES


def _hook_answer(host: _Host, context_json: str) -> Variant:
    if host.before_run is None:
        return Variant("hook", Variant("failed", "no beforeRun hook is registered"))
    try:
        returned = host.before_run(json.loads(context_json))
        text = _dumps(returned)
    except Exception as e:  # noqa: BLE001 - OMA: a throwing hook fails the run
        return Variant("hook", Variant("failed", str(e) or type(e).__name__))
    return Variant("hook", Variant("json", text))


def _tool_answer(host: _Host, call: Any) -> Variant:
    t = host.tools.get(call.name)
    is_error = False
    if t is None:
        content: Any = f'Tool "{call.name}" is not registered'
        is_error = True
    else:
        try:
            arguments = json.loads(call.input) if call.input else {}
            value = t.fn(arguments)
            if isinstance(value, ToolResult):
                content, is_error = value.content, value.is_error
            elif isinstance(value, (str, list)):
                content = value
            else:
                content = _dumps(value)
        except Exception as e:  # noqa: BLE001 - the model sees the failure
            content, is_error = f"{type(e).__name__}: {e}", True
    return Variant("tool-json", record(id=call.id, content=_dumps(content), is_error=is_error))


# The steps that may come while a response body is still being read.
_READING = frozenset(("receive", "event", "progress", "evaluation"))


def _external_answer(host: _Host, p: Any) -> Any:
    backend = host.backend
    try:
        if backend is None:
            raise RuntimeError("no external backend is configured")
        outcome = Variant("ok", backend.send(p.text))
    except Exception as e:  # noqa: BLE001 - a failing backend fails the run
        outcome = Variant("err", str(e) or type(e).__name__)
    return Variant("external", outcome)


class _Pending:
    """The hook, tool and backend calls of a run under way, each on a daemon thread of its own.

    Their answers come back through one queue and are given to the session on the caller's
    thread (the component is not shared between threads). While the session waits for them it
    is asked again at the instant it names (the run's deadline), so a call that outlives the
    deadline ends the run with OMA's timeout instead of holding it; the abandoned call's thread
    finishes on its own and its answer is dropped.
    """

    def __init__(self) -> None:
        self._answers: "queue.Queue[Any]" = queue.Queue()
        self.count = 0

    def start(self, compute: Callable[[], Any]) -> None:
        def work() -> None:
            try:
                self._answers.put(compute())
            except BaseException as e:  # noqa: BLE001 - compute() catches what the user raises
                self._answers.put(e)

        self.count += 1
        threading.Thread(target=work, name="oma-host-call", daemon=True).start()

    def next(self, wake_at_ms: Optional[int]) -> Any:
        """The next answer, or ``None`` when ``wake_at_ms`` passed first."""
        timeout = None if wake_at_ms is None else max(0.0, (wake_at_ms - _now_ms()) / 1000.0)
        try:
            answer = self._answers.get(timeout=timeout)
        except queue.Empty:
            return None
        self.count -= 1
        if isinstance(answer, BaseException):
            raise answer
        return answer


def drive(rt: Runtime, generation: int, session: Any, host: _Host) -> Iterator[Dict[str, Any]]:
    """Steps ``session`` to its end; yields stream events; returns the result dict.

    HTTP steps are performed in turn; the hook, tools and external backends run as pending calls
    (tools of one turn at once), held to the run's deadline.
    """
    response = None
    pending = _Pending()

    def reply(answer: Any) -> None:
        rt.call("[method]session.answer", session, answer, generation=generation)

    try:
        while True:
            polled = rt.call("[method]session.next", session, _now_ms(), generation=generation)
            if polled.tag == "finished":
                return json.loads(_text_of(polled.payload))
            if polled.tag == "waiting":
                waiting = polled.payload
                if pending.count == 0:
                    due = ", ".join(d.tag for d in waiting.due)
                    raise OmaError(f"the session waits for {due}, which this host does not owe")
                answer = pending.next(getattr(waiting, "wake-at-ms"))
                if answer is not None:
                    reply(answer)
                continue
            step = polled.payload
            tag, p = step.tag, step.payload
            if response is not None and tag not in _READING:
                # The call is over with this response (its end, a limit, a retry's wait): the
                # rest of its body is not read.
                response.close()
                response = None
            if tag == "send":
                try:
                    if p.stream:
                        # The head first, the body as the session asks for it: the component
                        # counts each chunk against its limit as it arrives.
                        response = host.client.open(p)
                        answer = Variant("head", record(status=response.status, headers=response.headers))
                    else:
                        status, headers, body = host.client.send(p, host.max_response_bytes)
                        answer = Variant("response", record(status=status, headers=headers, body=body))
                except TransportFailure as f:
                    answer = Variant("failure", record(kind=f.kind, message=f.message))
                reply(answer)
            elif tag == "receive":
                try:
                    data = response.read() if response is not None else b""
                    answer = ChunkAnswer(data) if data else Variant("end")
                    if not data and response is not None:
                        response.close()
                        response = None
                except TransportFailure as f:
                    answer = Variant("failure", record(kind=f.kind, message=f.message))
                reply(answer)
            elif tag == "wait":
                host.sleep(p / 1000.0)
                reply(Variant("waited"))
            elif tag == "before-run":
                context = _text_of(p)
                pending.start(lambda: _hook_answer(host, context))
            elif tag == "call-tool":
                pending.start(lambda call=p: _tool_answer(host, call))
            elif tag == "external-send":
                pending.start(lambda request=p: _external_answer(host, request))
            elif tag == "event":
                event = _event_json(p)
                if event is not None:
                    yield event
            elif tag == "progress":
                if host.on_progress is not None:
                    host.on_progress({"type": p.type, "agent": p.agent, "data": json.loads(p.data)})
            elif tag == "evaluation":
                if host.on_case is not None:
                    host.on_case(json.loads(_text_of(p)))
            else:  # pragma: no cover - a newer component
                raise OmaError(f"unknown step {tag!r}")
    finally:
        if response is not None:
            response.close()
        rt.drop(generation, session)


def _collect(gen: Iterator[Dict[str, Any]]) -> Dict[str, Any]:
    while True:
        try:
            next(gen)
        except StopIteration as stop:
            return stop.value


# -- agents ------------------------------------------------------------------------------------


def _config(
    *, name: str, model: str, provider: str, base_url: Optional[str], api_key: Optional[str],
    region: Optional[str], system_prompt: Optional[str], max_turns: Optional[int],
    max_token_budget: Optional[int], max_tokens: Optional[int], temperature: Optional[float],
    top_p: Optional[float], top_k: Optional[int], thinking_budget: Optional[int],
    deadline_ms: Optional[int], tools: Sequence[Tool], before_run: bool, backend: Optional[Backend],
    history: Optional[Sequence[Any]], call: Optional[Dict[str, Any]],
) -> Dict[str, Any]:
    cfg: Dict[str, Any] = {"name": name, "model": model, "provider": provider}
    optional = {
        "baseURL": base_url, "apiKey": api_key, "region": region, "systemPrompt": system_prompt,
        "maxTurns": max_turns, "maxTokenBudget": max_token_budget, "maxTokens": max_tokens,
        "temperature": temperature, "topP": top_p, "topK": top_k, "thinkingBudget": thinking_budget,
        "deadlineMs": deadline_ms,
    }
    cfg.update({k: v for k, v in optional.items() if v is not None})
    if tools:
        cfg["tools"] = [t.definition() for t in tools]
    if before_run:
        cfg["beforeRun"] = True
    if backend is not None:
        cfg["backend"] = {"kind": backend.kind}
    if history:
        cfg["history"] = list(history)
    if call:
        cfg["call"] = {_CALL_KEYS.get(k, k): v for k, v in call.items()}
    return cfg


def _limit(cfg: Dict[str, Any]) -> int:
    """The response limit a configuration sets (the component refuses one that is not a count)."""
    value = cfg.get("call", {}).get("maxResponseBytes")
    return value if isinstance(value, int) and value >= 0 else DEFAULT_MAX_RESPONSE_BYTES


_CALL_KEYS = {
    "max_retries": "maxRetries", "retry_delay_ms": "retryDelayMs", "retry_backoff": "retryBackoff",
    "timeout_ms": "timeoutMs", "max_response_bytes": "maxResponseBytes", "deadline_ms": "deadlineMs",
}


class Agent:
    """An OMA agent running inside the component.

    ``run(input)`` starts a fresh conversation (a string, or a list of OMA messages as dicts);
    ``stream(input)`` yields its events as dicts; ``prompt(input)`` adds one user turn to the
    persistent history; ``get_history()`` and ``reset()`` read and clear that history. Results are
    OMA's ``AgentRunResult`` as a dict. Invalid input raises :class:`InvalidMessageError` before
    anything happens; anything that fails later is a result with ``success: False``.

    ``deadline_ms`` is the most one run may take (past it the run fails with status
    ``timeout``). ``call`` sets the provider call options: ``max_retries``, ``retry_delay_ms``,
    ``retry_backoff``, ``timeout_ms`` (connecting and the head; then each gap between a stream's
    bytes, or a whole response up to its last byte), ``max_response_bytes`` (32 MiB by default,
    counted as the bytes arrive), ``deadline_ms`` (one call with its retries, 10 minutes by
    default), ``egress`` (``"open"``, ``"offline"`` or a list of origins).
    """

    def __init__(
        self,
        *,
        name: str = "agent",
        model: str,
        provider: str,
        base_url: Optional[str] = None,
        api_key: Optional[str] = None,
        region: Optional[str] = None,
        system_prompt: Optional[str] = None,
        max_turns: Optional[int] = None,
        max_token_budget: Optional[int] = None,
        max_tokens: Optional[int] = None,
        temperature: Optional[float] = None,
        top_p: Optional[float] = None,
        top_k: Optional[int] = None,
        thinking_budget: Optional[int] = None,
        deadline_ms: Optional[int] = None,
        history: Optional[Sequence[Dict[str, Any]]] = None,
        before_run: Optional[Callable[[Dict[str, Any]], Any]] = None,
        tools: Sequence[Tool] = (),
        backend: Optional[Backend] = None,
        call: Optional[Dict[str, Any]] = None,
        http_client: Optional[HttpClient] = None,
        runtime: Optional[Runtime] = None,
        seed: Optional[int] = None,
    ) -> None:
        self.name = name
        self._rt = runtime or default_runtime()
        self._config = _config(
            name=name, model=model, provider=provider, base_url=base_url, api_key=api_key, region=region,
            system_prompt=system_prompt, max_turns=max_turns, max_token_budget=max_token_budget,
            max_tokens=max_tokens, temperature=temperature, top_p=top_p, top_k=top_k,
            thinking_budget=thinking_budget, deadline_ms=deadline_ms, tools=tools,
            before_run=before_run is not None,
            backend=backend, history=None, call=call,
        )
        self._host = _Host(client=http_client or default_client(), tools={t.name: t for t in tools},
                           before_run=before_run, backend=backend, max_response_bytes=_limit(self._config))
        self._seed = seed
        self._lock = threading.Lock()
        # The committed history as OMA JSON text, kept so a replaced instance can re-create us.
        self._history_json = _dumps(list(history or []))
        self._handle: Any = None
        self._generation = -1
        self._finalizer: Optional[weakref.finalize] = None
        self._ensure()

    # -- the handle, re-created after a trap --------------------------------------------------

    def _ensure(self) -> Any:
        rt = self._rt
        with rt.lock():
            if self._handle is None or self._generation != rt.generation:
                cfg = dict(self._config)
                history = json.loads(self._history_json)
                if history:
                    cfg["history"] = history
                handle = rt.call("[static]agent.create-json", _dumps(cfg))
                if self._finalizer is not None:
                    self._finalizer.detach()
                self._handle, self._generation = handle, rt.generation
                self._finalizer = weakref.finalize(self, rt.drop_later, rt.generation, handle)
            return self._handle

    def _session_options(self, seed: Optional[int]) -> Any:
        if seed is None:
            seed = self._seed if self._seed is not None else secrets.randbits(64)
        return record(payloads="json", seed=seed)

    def _start(self, method: str, input: Any, seed: Optional[int]):
        rt = self._rt
        with rt.lock():
            handle = self._ensure()
            session = rt.call(method, handle, _dumps(input), self._session_options(seed))
            return rt.generation, session

    # -- OMA's API ----------------------------------------------------------------------------

    def run(self, input: RunInputT, *, seed: Optional[int] = None) -> Dict[str, Any]:
        """OMA's ``agent.run``: a fresh conversation; returns the ``AgentRunResult`` dict."""
        generation, session = self._start("[method]agent.run-json", _input(input), seed)
        return _collect(drive(self._rt, generation, session, self._host))

    def stream(self, input: RunInputT, *, seed: Optional[int] = None) -> Iterator[Dict[str, Any]]:
        """OMA's ``agent.stream``: yields ``text_delta``, ``reasoning_delta``, ``text``,
        ``tool_use``, ``tool_result``, ``budget_exceeded`` events and finally ``done`` or
        ``error`` with the result. Invalid input raises here, before the iterator exists."""
        generation, session = self._start("[method]agent.stream-json", _input(input), seed)
        return self._stream_events(generation, session)

    def _stream_events(self, generation: int, session: Any) -> Iterator[Dict[str, Any]]:
        result = yield from drive(self._rt, generation, session, self._host)
        yield {"type": "done" if result.get("success") else "error", "data": result}

    def prompt(self, input: PromptInputT, *, seed: Optional[int] = None) -> Dict[str, Any]:
        """OMA's ``agent.prompt``: one user turn (a string or content blocks) on the history."""
        with self._lock:
            generation, session = self._start("[method]agent.prompt-json", _input(input), seed)
            result = _collect(drive(self._rt, generation, session, self._host))
            self._snapshot()
            return result

    def _snapshot(self) -> None:
        rt = self._rt
        with rt.lock():
            if self._generation == rt.generation:
                self._history_json = rt.call("[method]agent.get-history-json", self._handle)

    def get_history(self) -> List[Dict[str, Any]]:
        """A copy of the persistent history as OMA messages."""
        rt = self._rt
        with rt.lock():
            return json.loads(rt.call("[method]agent.get-history-json", self._ensure()))

    def reset(self) -> None:
        """Clears the persistent history."""
        rt = self._rt
        with rt.lock():
            rt.call("[method]agent.reset", self._ensure())
            self._history_json = "[]"

    def close(self) -> None:
        """Frees the agent inside the component (also done when the agent is collected)."""
        if self._finalizer is not None:
            self._finalizer()
            self._finalizer = None
        self._handle = None

    def __enter__(self) -> "Agent":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _input(value: Any) -> Any:
    if isinstance(value, str):
        return value
    if isinstance(value, tuple):
        return list(value)
    return value  # anything else goes to OMA's shape guard, which names what is wrong


def run_agent(
    input: RunInputT,
    *,
    on_progress: Optional[Callable[[Dict[str, Any]], None]] = None,
    evaluation: Optional[Dict[str, Any]] = None,
    on_case: Optional[Callable[[Dict[str, Any]], None]] = None,
    before_run: Optional[Callable[[Dict[str, Any]], Any]] = None,
    tools: Sequence[Tool] = (),
    backend: Optional[Backend] = None,
    http_client: Optional[HttpClient] = None,
    runtime: Optional[Runtime] = None,
    seed: Optional[int] = None,
    name: str = "agent",
    model: str,
    provider: str,
    **config: Any,
) -> Dict[str, Any]:
    """OMA's ``runAgent``: a one-off agent with progress events and online evaluation.

    ``on_progress(event)`` gets ``{"type", "agent", "data"}`` (``agent_start``,
    ``budget_exceeded``, ``agent_complete``); ``evaluation={"store_payloads": "none" | "redacted"
    | "full", "sample_rate": 1.0}`` hands each evaluated case to ``on_case(case)``. ``config``
    takes the keyword arguments of :class:`Agent` (``base_url``, ``api_key``, ...)."""
    rt = runtime or default_runtime()
    cfg = _config(
        name=name, model=model, provider=provider, base_url=config.pop("base_url", None),
        api_key=config.pop("api_key", None), region=config.pop("region", None),
        system_prompt=config.pop("system_prompt", None), max_turns=config.pop("max_turns", None),
        max_token_budget=config.pop("max_token_budget", None), max_tokens=config.pop("max_tokens", None),
        temperature=config.pop("temperature", None), top_p=config.pop("top_p", None),
        top_k=config.pop("top_k", None), thinking_budget=config.pop("thinking_budget", None),
        deadline_ms=config.pop("deadline_ms", None), tools=tools, before_run=before_run is not None,
        backend=backend, history=config.pop("history", None), call=config.pop("call", None),
    )
    if config:
        raise TypeError(f"unknown configuration: {', '.join(sorted(config))}")
    evaluation_record = None
    if evaluation is not None:
        evaluation_record = record(
            store_payloads=evaluation.get("store_payloads", evaluation.get("storePayloads", "none")),
            sample_rate=float(evaluation.get("sample_rate", evaluation.get("sampleRate", 1.0))),
        )
    options = record(progress=on_progress is not None, evaluation=evaluation_record)
    session_options = record(payloads="json", seed=seed if seed is not None else secrets.randbits(64))
    host = _Host(client=http_client or default_client(), tools={t.name: t for t in tools}, before_run=before_run,
                 backend=backend, on_progress=on_progress, on_case=on_case, max_response_bytes=_limit(cfg))
    with rt.lock():
        session = rt.call("run-agent-json", _dumps(cfg), _dumps(_input(input)), options, session_options)
        generation = rt.generation
    return _collect(drive(rt, generation, session, host))
