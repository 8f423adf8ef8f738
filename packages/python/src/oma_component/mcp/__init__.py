"""OMA's MCP tools (``@open-multi-agent/core/mcp``): an MCP server's tools as the package's
tools, over stdio, with the official MCP SDK (``pip install 'oma-component[mcp]'``).

    from oma_component.mcp import connect_mcp_tools

    with connect_mcp_tools(command="npx", args=["-y", "@modelcontextprotocol/server-github"],
                           env={"GITHUB_TOKEN": token}, name_prefix="github") as github:
        agent = oma.Agent(name="a", model="claude-sonnet-4-6", tools=github.tools)
        print(agent.run("List the open issues")["output"])

Each MCP tool becomes a :class:`~oma_component.Tool` named ``<name_prefix>_<name>`` (``/``
made ``_``), described by its description (``MCP tool: <name>`` without one), with the
server's input schema as it is. Its result reaches the model as OMA gives it: text blocks as
text, other blocks as a labelled line, and images, resource blobs and http(s) resource links as
image and file parts; a call that fails (the server's ``isError``, a timeout, a closed
connection) is a failed tool result saying so, never an exception in the run.
"""

from __future__ import annotations

import asyncio
from typing import Any, Dict, List, Mapping, Optional, Sequence

from .._agent.tool import Tool, ToolResult
from ._connection import Connection
from ._content import normalize_tool_name, tool_result

DEFAULT_REQUEST_TIMEOUT_MS = 60_000


def _content(answer: Dict[str, Any]) -> ToolResult:
    converted = tool_result(answer)
    return ToolResult(converted.get("modelOutput", converted["data"]), is_error=converted["isError"])


def _failed(name: str, error: BaseException) -> ToolResult:
    message = str(error) or type(error).__name__
    return ToolResult(f'MCP tool "{name}" failed: {message}', is_error=True)


def _sync_tool(connection: Connection, name: str) -> Any:
    def call(arguments: Dict[str, Any]) -> ToolResult:
        try:
            return _content(connection.call(name, dict(arguments)).result())
        except Exception as error:  # noqa: BLE001 - a failed call is a failed tool result
            return _failed(name, error)
    return call


def _async_tool(connection: Connection, name: str) -> Any:
    async def call(arguments: Dict[str, Any]) -> ToolResult:
        try:
            return _content(await asyncio.wrap_future(connection.call(name, dict(arguments))))
        except Exception as error:  # noqa: BLE001
            return _failed(name, error)
    return call


def _tools(connection: Connection, listed: List[Dict[str, Any]], prefix: Optional[str], asynchronous: bool) -> List[Tool[..., Any]]:
    out: List[Tool[..., Any]] = []
    for entry in listed:
        name = str(entry["name"])
        description = entry.get("description")
        schema = entry.get("inputSchema")
        fn = _async_tool(connection, name) if asynchronous else _sync_tool(connection, name)
        out.append(Tool(normalize_tool_name(name, prefix),
                        description if isinstance(description, str) else f"MCP tool: {name}",
                        schema if isinstance(schema, dict) else {"type": "object"}, fn))
    return out


def _check(command: Any, args: Any, env: Any, cwd: Any, name_prefix: Any, request_timeout_ms: Any) -> float:
    if not isinstance(command, str) or not command:
        raise TypeError("command must be a non-empty string")
    if isinstance(args, (str, bytes)) or not isinstance(args, Sequence) or not all(isinstance(a, str) for a in args):
        raise TypeError("args must be a list of strings")
    if env is not None and (not isinstance(env, Mapping)
                            or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
        raise TypeError("env must be a dict of strings")
    if cwd is not None and not isinstance(cwd, str):
        raise TypeError("cwd must be a string")
    if name_prefix is not None and not isinstance(name_prefix, str):
        raise TypeError("name_prefix must be a string")
    if (isinstance(request_timeout_ms, bool) or not isinstance(request_timeout_ms, (int, float))
            or not request_timeout_ms > 0):
        raise ValueError(f"request_timeout_ms must be a number > 0, got {request_timeout_ms!r}")
    return float(request_timeout_ms) / 1000


class ConnectedMCPTools:
    """An open MCP connection: ``tools`` for an agent, ``disconnect()`` to end the server
    (idempotent; also on leaving a ``with`` block)."""

    def __init__(self, tools: List[Tool[..., Any]], connection: Connection) -> None:
        self.tools = tools
        self._connection = connection

    def disconnect(self) -> None:
        self._connection.close()

    def __enter__(self) -> "ConnectedMCPTools":
        return self

    def __exit__(self, *exc: object) -> None:
        self.disconnect()


class AsyncConnectedMCPTools:
    """:class:`ConnectedMCPTools` for asyncio: ``tools`` are ``async def`` (a cancelled run
    cancels its call), ``await disconnect()``, ``async with``."""

    def __init__(self, tools: List[Tool[..., Any]], connection: Connection) -> None:
        self.tools = tools
        self._connection = connection

    async def disconnect(self) -> None:
        await asyncio.to_thread(self._connection.close)

    async def __aenter__(self) -> "AsyncConnectedMCPTools":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.disconnect()


def _connection(command: str, args: Sequence[str], env: Optional[Mapping[str, str]], cwd: Optional[str],
                name_prefix: Optional[str], timeout_s: float, client_name: str, client_version: str) -> Connection:
    return Connection(command=command, args=args, env=env, cwd=cwd, name_prefix=name_prefix, timeout_s=timeout_s,
                      client_name=client_name, client_version=client_version)


def connect_mcp_tools(
    *,
    command: str,
    args: Sequence[str] = (),
    env: Optional[Mapping[str, str]] = None,
    cwd: Optional[str] = None,
    name_prefix: Optional[str] = None,
    request_timeout_ms: float = DEFAULT_REQUEST_TIMEOUT_MS,
    client_name: str = "open-multi-agent",
    client_version: str = "0.0.0",
) -> ConnectedMCPTools:
    """Starts ``command`` with ``args`` (in ``cwd``; ``env`` added to the SDK's safe default
    environment) as an MCP server over stdio, connects and lists its tools (each request held
    to ``request_timeout_ms``, 60 s by default, tool calls too). Raises what the SDK raises
    when the server cannot be started or does not answer (the server is then stopped), and
    ``ValueError`` when two tools get one name."""
    timeout_s = _check(command, args, env, cwd, name_prefix, request_timeout_ms)
    connection = _connection(command, args, env, cwd, name_prefix, timeout_s, client_name, client_version)
    listed = connection.open().result()
    return ConnectedMCPTools(_tools(connection, listed, name_prefix, False), connection)


async def connect_mcp_tools_async(
    *,
    command: str,
    args: Sequence[str] = (),
    env: Optional[Mapping[str, str]] = None,
    cwd: Optional[str] = None,
    name_prefix: Optional[str] = None,
    request_timeout_ms: float = DEFAULT_REQUEST_TIMEOUT_MS,
    client_name: str = "open-multi-agent",
    client_version: str = "0.0.0",
) -> AsyncConnectedMCPTools:
    """:func:`connect_mcp_tools` for asyncio: awaits the connection without blocking the loop
    and gives ``async def`` tools."""
    timeout_s = _check(command, args, env, cwd, name_prefix, request_timeout_ms)
    connection = _connection(command, args, env, cwd, name_prefix, timeout_s, client_name, client_version)
    try:
        listed = await asyncio.wrap_future(connection.open())
    except asyncio.CancelledError:
        await asyncio.to_thread(connection.close)
        raise
    return AsyncConnectedMCPTools(_tools(connection, listed, name_prefix, True), connection)


__all__ = ["connect_mcp_tools", "connect_mcp_tools_async", "ConnectedMCPTools", "AsyncConnectedMCPTools",
           "DEFAULT_REQUEST_TIMEOUT_MS"]
