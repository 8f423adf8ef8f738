"""An agent's configuration: the keyword arguments of :class:`Agent`, :class:`AsyncAgent` and
:func:`run_agent` as the component's configuration JSON (OMA's names; the component checks the
values and names a bad field) and the host's parts (hook, tools, backend, callbacks), and the
provider's environment variables for what the arguments leave out."""

from __future__ import annotations

import math
import os
import secrets
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, TypedDict

from .._http import DEFAULT_MAX_RESPONSE_BYTES
from .._runtime import Runtime, default_runtime, record
from .._runtime import dumps as _dumps
from .host import BeforeRun, Host, Observer
from .input import input_json
from .llm_adapter import adapter_declaration
from .process_backend import Backend
from .tool import tools_from


class EnvironmentNames(TypedDict):
    """The environment variables OMA (or the provider SDK it drives) reads for what an agent's
    configuration leaves out; each list in the order it is read, the first variable that is set
    and not empty wins."""

    api_key: List[str]
    base_url: Optional[str]
    region: List[str]
    default_region: Optional[str]


def environment_names(provider: str, *, runtime: Optional[Runtime] = None) -> EnvironmentNames:
    """The variables an agent of ``provider`` takes its missing ``api_key``, ``base_url`` and
    ``region`` from, as OMA reads them: ``ANTHROPIC_API_KEY`` and ``ANTHROPIC_BASE_URL``,
    ``GEMINI_API_KEY`` then ``GOOGLE_API_KEY``, ``ARK_API_KEY`` for ``doubao``,
    ``AWS_BEARER_TOKEN_BEDROCK`` and ``AWS_REGION`` (else ``us-east-1``) for ``bedrock``, ...;
    nothing for a provider OMA reads nothing for. The table is the component's, the one the
    JavaScript package reads too."""
    rt = runtime or default_runtime()
    names = rt.call("environment-names", provider)
    return EnvironmentNames(api_key=list(getattr(names, "api-key")), base_url=getattr(names, "base-url"),
                            region=list(names.region), default_region=getattr(names, "default-region"))


def _from_environment(names: Sequence[str]) -> Optional[str]:
    for name in names:
        value = os.environ.get(name)
        if value:  # an empty value counts as unset
            return value
    return None


def _fill_from_environment(values: Dict[str, Any], provider: Any, runtime: Optional[Runtime]) -> None:
    """Sets the ``api_key``, ``base_url`` and ``region`` that ``values`` leaves out from the
    provider's environment variables (:func:`environment_names`)."""
    if not isinstance(provider, str):
        return
    names = environment_names(provider, runtime=runtime)
    if values.get("api_key") is None:
        values["api_key"] = _from_environment(names["api_key"])
    if values.get("base_url") is None and names["base_url"] is not None:
        values["base_url"] = _from_environment([names["base_url"]])
    if values.get("region") is None:
        values["region"] = _from_environment(names["region"]) or names["default_region"]


_CALL_KEYS = {
    "max_retries": "maxRetries", "retry_delay_ms": "retryDelayMs", "retry_backoff": "retryBackoff",
    "timeout_ms": "timeoutMs", "max_response_bytes": "maxResponseBytes", "deadline_ms": "deadlineMs",
    "egress": "egress",
}
# The component's (camelCase) names are taken too, as they always were.
_CALL_NAMES = set(_CALL_KEYS) | set(_CALL_KEYS.values())


def _call_json(call: Mapping[str, Any]) -> Dict[str, Any]:
    """The ``call`` options as the component names them; a key that is not one is refused with
    the Python names."""
    if not isinstance(call, Mapping):
        raise TypeError("call must be a dict of call options")
    unknown = [k for k in call if k not in _CALL_NAMES]
    if unknown:
        names = ", ".join(repr(k) for k in unknown)
        raise TypeError(f"call has {'an unknown key' if len(unknown) == 1 else 'unknown keys'} {names}; "
                        f"known keys: {', '.join(_CALL_KEYS)}")
    return {_CALL_KEYS.get(k, k): v for k, v in call.items()}


_PLAIN_KEYS = {
    "base_url": "baseURL", "api_key": "apiKey", "region": "region", "system_prompt": "systemPrompt",
    "max_turns": "maxTurns", "max_token_budget": "maxTokenBudget", "max_tokens": "maxTokens",
    "temperature": "temperature", "top_p": "topP", "top_k": "topK", "thinking_budget": "thinkingBudget",
    "deadline_ms": "deadlineMs",
    # OMA's provider options; each wire format carries them as OMA's adapter does.
    "frequency_penalty": "frequencyPenalty", "presence_penalty": "presencePenalty", "min_p": "minP",
    "parallel_tool_calls": "parallelToolCalls", "extra_body": "extraBody", "thinking": "thinking",
}

#: OMA's context and loop options: snake_case here, OMA's camelCase (nested keys too) for the
#: component, which checks them and names a bad field.
_CONTEXT_KEYS = {
    "loop_detection": "loopDetection", "context_strategy": "contextStrategy",
    "compress_tool_results": "compressToolResults", "preserve_reasoning_as_text": "preserveReasoningAsText",
    "compress_reasoning_text": "compressReasoningText",
}


def _camel(value: Any) -> Any:
    """A context option with the keys of its mappings in camelCase (``max_turns`` ->
    ``maxTurns``); values are kept (``"sliding-window"`` stays). A callable, which only code
    could carry (OMA's ``onLoopDetected`` callback, a ``custom`` strategy), is refused."""
    if callable(value):
        raise TypeError("a callable context or loop option is not supported by oma-component; "
                        "use on_loop_detected='warn' or 'terminate'")
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            head, *rest = str(key).split("_")
            out[head + "".join(w[:1].upper() + w[1:] for w in rest)] = _camel(item)
        return out
    return value


#: ``thinking``'s keys (OMA's ``ThinkingConfig``) in Python's spelling.
_THINKING_KEYS = {"enabled": "enabled", "budget_tokens": "budgetTokens", "effort": "effort"}


def _provider_options(cfg: Dict[str, Any]) -> None:
    """Checks what JSON cannot carry faithfully (NaN, infinities) and writes ``thinking`` in OMA's
    spelling; the component checks the rest (types, ``effort``'s values) naming the field."""
    for key in ("frequencyPenalty", "presencePenalty", "minP"):
        value = cfg.get(key)
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{key} must be a finite number, got {value}")
    thinking = cfg.get("thinking")
    if isinstance(thinking, Mapping):
        cfg["thinking"] = {_THINKING_KEYS.get(k, k): v for k, v in thinking.items() if v is not None}


def _is_model(value: Any) -> bool:
    """Whether ``value`` is a pydantic (v2) model class, without importing pydantic."""
    return isinstance(value, type) and callable(getattr(value, "model_validate", None)) \
        and callable(getattr(value, "model_json_schema", None))


def _output_schema(value: Any) -> Tuple[Any, Any]:
    """``output_schema`` as the component's configuration (the JSON Schema, and whether the
    host validates) and the model that validates here: a JSON Schema dict (or boolean) is the
    component's to check; a pydantic model class is shown to the model as its JSON Schema and
    validates each answer here, so ``structured`` is an instance of it."""
    if _is_model(value):
        return {"outputSchema": value.model_json_schema(), "outputValidation": "host"}, value
    if isinstance(value, bool) or isinstance(value, Mapping):
        return {"outputSchema": value if isinstance(value, bool) else dict(value)}, None
    raise TypeError("output_schema must be a JSON Schema dict or a pydantic model class")


class Spec:
    """An agent's configuration: the component's JSON and the host's parts."""

    def __init__(self, *, name: str, model: str, provider: Optional[str], tools: Sequence[Any],
                 before_run: Optional[BeforeRun], backend: Optional[Backend], history: Any,
                 call: Optional[Mapping[str, Any]], options: Mapping[str, Any],
                 runtime: Optional[Runtime], adapter: Any = None) -> None:
        #: OMA's ``LLMAdapter``, kept on this side: it answers the session's model calls. No
        #: provider is assumed for it (one given only classifies failures, as in OMA), and the
        #: environment's keys are not read, since no provider request is made.
        self.adapter: Any = adapter
        declaration = None if adapter is None else adapter_declaration(adapter)
        if provider is None and adapter is None:
            provider = "anthropic"
        #: OMA's ``custom`` strategy's function, kept on this side; the component asks for it
        #: before every request.
        self.compress: Optional[Callable[..., Any]] = None
        strategy = options.get("context_strategy")
        if isinstance(strategy, Mapping) and strategy.get("type") == "custom":
            self.compress = strategy.get("compress")
            if not callable(self.compress):
                raise TypeError("context_strategy['compress'] must be callable for the 'custom' strategy")
            options = {**options, "context_strategy": {"type": "custom"}}
        #: OMA's ``onLoopDetected`` function, kept on this side; the component asks it on each
        #: loop found (``"callback"`` in the component's configuration).
        self.on_loop_detected: Optional[Callable[..., Any]] = None
        detection = options.get("loop_detection")
        if isinstance(detection, Mapping):
            decide = detection.get("on_loop_detected", detection.get("onLoopDetected"))
            if decide == "callback":
                raise TypeError("loop_detection['on_loop_detected'] must be 'warn', 'terminate' or a function")
            if callable(decide):
                self.on_loop_detected = decide
                rest = {k: v for k, v in detection.items() if k not in ("on_loop_detected", "onLoopDetected")}
                options = {**options, "loop_detection": {**rest, "on_loop_detected": "callback"}}
        context = {_CONTEXT_KEYS[k]: _camel(v) for k, v in options.items() if k in _CONTEXT_KEYS and v is not None}
        options = {k: v for k, v in options.items() if k not in _CONTEXT_KEYS}
        options = dict(options)
        #: OMA's ``onTrace``: receives each trace event of every run (``None``: no tracing).
        self.on_trace: Optional[Observer] = options.pop("on_trace", None)
        schema = options.pop("output_schema", None)
        structured: Dict[str, Any] = {}
        #: A pydantic model class that validates each final answer here (``output_schema``).
        self.output_model: Any = None
        if schema is not None:
            structured, self.output_model = _output_schema(schema)
        if self.on_trace is not None and not callable(self.on_trace):
            raise TypeError("on_trace must be callable")
        unknown = set(options) - set(_PLAIN_KEYS)
        if unknown:
            raise TypeError(f"unknown configuration: {', '.join(sorted(unknown))}")
        tools = tools_from(tools)
        cfg: Dict[str, Any] = {"name": name, "model": model}
        # OMA's hook context: the configuration as given, without hooks and secrets.
        info: Dict[str, Any] = {"name": name, "model": model}
        if provider is not None:
            cfg["provider"] = info["provider"] = provider
        if declaration is not None:
            cfg["adapter"] = info["adapter"] = declaration
        info.update({k: v for k, v in options.items() if v is not None and k != "api_key"})
        if tools:
            info["tools"] = [t.name for t in tools]
        if history is not None:
            info["history"] = history
        if call:
            info["call"] = dict(call)
        self.agent_info = info
        values = dict(options)
        if backend is None and adapter is None:
            _fill_from_environment(values, provider, runtime)
        cfg.update({_PLAIN_KEYS[k]: v for k, v in values.items() if v is not None})
        cfg.update(context)
        cfg.update(structured)
        _provider_options(cfg)
        if tools:
            cfg["tools"] = [t.definition() for t in tools]
        if before_run is not None:
            cfg["beforeRun"] = True
        if backend is not None:
            cfg["backend"] = {"kind": backend.kind}
        if call:
            cfg["call"] = _call_json(call)
        self.cfg = cfg
        # The history as OMA JSON text, checked by OMA's guard when the agent is made.
        self.history_json: Optional[str] = None if history is None else input_json(history)
        self.tools = {t.name: t for t in tools}
        self.before_run = before_run
        self.backend = backend
        limit = cfg.get("call", {}).get("maxResponseBytes")
        # The response limit the configuration sets (the component refuses one that is not a count).
        self.max_response_bytes = limit if isinstance(limit, int) and limit >= 0 else DEFAULT_MAX_RESPONSE_BYTES

    def json(self, history_json: Optional[str]) -> str:
        text = _dumps(self.cfg)
        if history_json is None:
            return text
        return text[:-1] + ',"history":' + history_json + "}"

    def host(self, client: Any, on_progress: Optional[Observer] = None, on_case: Optional[Observer] = None,
             text_deltas: bool = False) -> Host:
        return Host(client=client, tools=self.tools, before_run=self.before_run, backend=self.backend,
                    on_progress=on_progress, on_case=on_case, on_trace=self.on_trace, compress=self.compress,
                    on_loop_detected=self.on_loop_detected, adapter=self.adapter, text_deltas=text_deltas,
                    max_response_bytes=self.max_response_bytes, agent_info=self.agent_info,
                    output_model=self.output_model)

    def session_options(self, seed: int, records: Optional[str] = None, legacy: bool = False) -> Any:
        """A session's options: JSON payloads, the seed, tracing when ``on_trace`` is set or
        ``legacy`` asks for the legacy events (ids made up by the component: a fresh run id per
        run, the records' when they are on), and ``records``, the trace records' options."""
        trace = None
        if self.on_trace is not None or legacy:
            trace = record(run_id=None, span_id=None, parent_id=None, agent=None, task_id=None)
        return record(payloads="json", seed=seed, trace=trace, records=records)


def new_seed() -> int:
    return secrets.randbits(64)
