"""Tools: :class:`Tool`, the :func:`tool` decorator, tools given in OMA's shape, and what a tool
returns read as the content and error flag of its result (OMA's ``tool/framework.ts``)."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Dict, Generic, List, Mapping, Optional, ParamSpec, Sequence, Tuple, TypeVar, overload

from .._runtime import dumps as _dumps
from .._types import ToolDefinition, ToolResultContent

P = ParamSpec("P")
R = TypeVar("R")


@dataclass
class ToolResult:
    """What a tool may return to say more than its content: ``is_error`` marks a failure.
    It is sent as the tool says it, as OMA sends ``ToolResult.isError``: ``True`` as
    ``is_error: true``, ``False`` as ``is_error: false`` (where the wire format has the field),
    ``None`` (the default) leaves the field out."""

    content: ToolResultContent
    is_error: Optional[bool] = None


class Tool(Generic[P, R]):
    """A tool the model may call. ``fn(input)`` gets the call's arguments as a dict and returns
    (or, for an ``async def``, awaits) a string, a list of OMA tool-result parts
    (``{"type": "text" | "image" | "file", ...}``), a :class:`ToolResult` (or OMA's
    ``{"data", "isError"}``), ``None`` (empty content), or any other JSON value (sent as its
    JSON text). What it raises is sent to the model as a failed result with the exception's
    message. A ``Tool`` is still callable as ``fn`` is, with ``fn``'s types."""

    #: Whether ``fn`` takes the tool context as a second argument (a tool given in OMA's shape).
    takes_context = False

    def __init__(self, name: str, description: str, input_schema: Mapping[str, Any], fn: Callable[P, R]) -> None:
        self.name = name
        self.description = description
        self.input_schema: Dict[str, Any] = dict(input_schema)
        self.fn: Callable[P, R] = fn

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def definition(self) -> ToolDefinition:
        """The tool as the model is told of it."""
        return {"name": self.name, "description": self.description, "inputSchema": self.input_schema}

    def __repr__(self) -> str:
        return f"Tool(name={self.name!r})"


@overload
def tool(fn: Callable[P, R], /) -> Tool[P, R]: ...


@overload
def tool(
    name: Optional[str] = None, description: str = "", input_schema: Optional[Mapping[str, Any]] = None
) -> Callable[[Callable[P, R]], Tool[P, R]]: ...


def tool(name: Any = None, description: str = "", input_schema: Optional[Mapping[str, Any]] = None) -> Any:
    """Decorator: ``@tool`` or ``@tool(name=..., description=..., input_schema=...)`` on
    ``def fn(input): ...`` or ``async def fn(input): ...``. The name defaults to the function's,
    the description to its docstring, the schema to an object with no properties."""

    def wrap(fn: Callable[P, R], given: Optional[str] = name if isinstance(name, str) else None) -> Tool[P, R]:
        return Tool(
            given or str(getattr(fn, "__name__", "tool")),
            description or (fn.__doc__ or "").strip(),
            input_schema or {"type": "object", "properties": {}},
            fn,
        )

    if callable(name):
        return wrap(name, None)
    return wrap


def tools_from(tools: Sequence[Any]) -> List["Tool[..., Any]"]:
    """The ``tools`` argument as :class:`Tool` objects: Tools, and dicts in OMA's shape."""
    if isinstance(tools, (str, bytes, Mapping)):
        raise TypeError("tools must be a list of tools")
    out: List[Tool[..., Any]] = []
    for i, t in enumerate(tools):
        if isinstance(t, Tool):
            out.append(t)
        elif isinstance(t, Mapping):
            out.append(_dict_tool(t, f"tools[{i}]"))
        else:
            raise TypeError(f'tools[{i}] must be an oma_component.Tool (the @tool decorator) or a dict '
                            f'{{"name", "description", "inputSchema", "execute"}}, not {type(t).__name__}')
    return out


def _dict_tool(value: Mapping[str, Any], where: str) -> "Tool[..., Any]":
    """A tool given in OMA's shape, ``{"name", "description", "inputSchema", "execute"}``."""
    name, execute = value.get("name"), value.get("execute")
    if not isinstance(name, str) or not callable(execute):
        raise TypeError(f'{where} must be an oma_component.Tool or a dict {{"name": str, "description": str, '
                        f'"inputSchema": dict, "execute": callable}}; got keys {sorted(map(str, value))}')
    schema = value.get("inputSchema", value.get("input_schema", value.get("parameters")))
    if schema is not None and not isinstance(schema, Mapping):
        raise TypeError(f"{where}: inputSchema must be a JSON Schema dict (zod schemas are JavaScript's)")
    made: Tool[..., Any] = Tool(name, str(value.get("description") or ""),
                                schema if schema is not None else {"type": "object", "properties": {}}, execute)
    made.takes_context = _positional_count(execute) >= 2
    return made


def _positional_count(fn: Callable[..., Any]) -> int:
    """How many positional arguments ``fn`` takes (2 for a ``*args`` function)."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 1
    count = 0
    for parameter in parameters:
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            return 2
        if parameter.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            count += 1
    return count


def tool_outcome(value: Any) -> Tuple[Any, Optional[bool]]:
    """What a tool returned as ``(content, is_error)``, read as the JavaScript package reads it;
    ``is_error`` is ``None`` when the tool did not say."""
    if isinstance(value, ToolResult):
        return value.content, None if value.is_error is None else bool(value.is_error)
    if isinstance(value, (str, list)):
        return value, None
    if isinstance(value, Mapping) and ("data" in value or "content" in value or "modelOutput" in value):
        # OMA's ToolResult: the model gets ``modelOutput`` when there is one, else ``data``.
        if value.get("modelOutput") is not None:
            inner = value["modelOutput"]
        else:
            inner = value["data"] if "data" in value else value.get("content")
        content = inner if isinstance(inner, (str, list)) else _dumps(inner)
        said = value.get("isError", value.get("is_error"))
        return content, None if said is None else bool(said)
    if value is None:
        return "", None
    return _dumps(value), None


def unknown_tool(name: str) -> str:
    """OMA's default-deny text, as the JavaScript package gives it: a tool the agent was not
    granted is not run."""
    return (
        f'Tool "{name}" is not granted to this agent. '
        'Built-in tools are opt-in: grant it via the agent\'s "tools" allowlist or '
        '"toolPreset" (or set the orchestrator\'s "defaultToolPreset").'
    )
