"""One MCP server over stdio, held open on an event loop of its own.

The official SDK's client (``mcp``: ``stdio_client``, ``ClientSession``) lives in anyio task
groups that must be entered and left by one task; a connection that outlives the call that
made it, and whose tools are called from any thread or loop, therefore gets a loop on a daemon
thread of its own: one task there holds the server process and the session from connect to
disconnect, and every tool call is a coroutine submitted to that loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ._content import check_unique_names


def _sdk() -> Any:
    """The official MCP SDK, or ``ImportError`` saying how to install it."""
    try:
        import mcp
        from mcp.client.stdio import stdio_client
    except ImportError as error:  # pragma: no cover - the tests install it
        raise ImportError(
            "connect_mcp_tools needs the official MCP SDK: pip install 'oma-component[mcp]' (or pip install mcp)"
        ) from error
    return mcp, stdio_client


def _single(error: BaseException) -> BaseException:
    """The one error inside nested exception groups (anyio's task groups wrap what they raise)."""
    while True:
        inner = getattr(error, "exceptions", None)
        if not isinstance(inner, tuple) or len(inner) != 1 or not isinstance(inner[0], BaseException):
            return error
        error = inner[0]


class Connection:
    """A started MCP server and its session; :meth:`open` blocks until the tools are listed."""

    def __init__(self, *, command: str, args: Sequence[str], env: Optional[Mapping[str, str]], cwd: Optional[str],
                 name_prefix: Optional[str], timeout_s: float, client_name: str, client_version: str) -> None:
        self._params = (command, list(args), dict(env) if env is not None else None, cwd)
        self._prefix = name_prefix
        self._timeout_s = timeout_s
        self._client = (client_name, client_version)
        self._loop = asyncio.new_event_loop()
        self._session: Any = None
        self._ready: "concurrent.futures.Future[List[Dict[str, Any]]]" = concurrent.futures.Future()
        self._closed: Optional[asyncio.Event] = None
        self._finished = threading.Event()
        self._thread = threading.Thread(target=self._run, name="oma-mcp-connection", daemon=True)

    def open(self) -> "concurrent.futures.Future[List[Dict[str, Any]]]":
        """Starts the server; the future gives the listed tools as MCP JSON dicts."""
        self._thread.start()
        return self._ready

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._hold())
        finally:
            self._loop.close()
            self._finished.set()

    async def _hold(self) -> None:
        mcp, stdio_client = _sdk()
        self._closed = asyncio.Event()
        command, args, env, cwd = self._params
        try:
            params = mcp.StdioServerParameters(command=command, args=args, env=env, cwd=cwd)
            async with stdio_client(params) as (read, write):
                async with mcp.ClientSession(
                        read, write, read_timeout_seconds=self._timeout_s,
                        client_info=mcp.Implementation(name=self._client[0], version=self._client[1])) as session:
                    await session.initialize()
                    tools = await self._list_tools(session)
                    check_unique_names([t["name"] for t in tools], self._prefix)
                    self._session = session
                    self._ready.set_result(tools)
                    await self._closed.wait()
        except BaseException as error:  # noqa: BLE001 - before the tools are listed: the caller of open() gets it
            if not self._ready.done():
                self._ready.set_exception(_single(error))
            # After that, the server went away: later calls fail as the connection is closed.
        finally:
            self._session = None

    async def _list_tools(self, session: Any) -> List[Dict[str, Any]]:
        mcp, _ = _sdk()
        out: List[Dict[str, Any]] = []
        cursor: Optional[str] = None
        while True:
            params = mcp.types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
            page = await session.list_tools(params=params)
            out.extend(t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in page.tools)
            cursor = page.next_cursor if isinstance(page.next_cursor, str) and page.next_cursor else None
            if cursor is None:
                return out

    async def _call(self, name: str, arguments: Dict[str, Any]) -> Dict[str, Any]:
        session = self._session
        if session is None:
            raise RuntimeError("the MCP connection is closed")
        result = await session.call_tool(name, arguments, read_timeout_seconds=self._timeout_s)
        answer: Dict[str, Any] = result.model_dump(by_alias=True, exclude_unset=True, mode="json")
        return answer

    def call(self, name: str, arguments: Dict[str, Any]) -> "concurrent.futures.Future[Dict[str, Any]]":
        """Calls tool ``name`` on the connection's loop (from any thread)."""
        if self._finished.is_set() or self._loop.is_closed():
            future: "concurrent.futures.Future[Dict[str, Any]]" = concurrent.futures.Future()
            future.set_exception(RuntimeError("the MCP connection is closed"))
            return future
        return asyncio.run_coroutine_threadsafe(self._call(name, arguments), self._loop)

    def close(self, timeout_s: float = 10.0) -> None:
        """Ends the session and the server process (idempotent); waits at most ``timeout_s``."""
        if self._finished.is_set():
            return
        closed = self._closed
        if closed is not None:
            try:
                self._loop.call_soon_threadsafe(closed.set)
            except RuntimeError:  # the loop already closed
                return
        self._finished.wait(timeout_s)
