"""Provider HTTP for the asyncio API: :class:`AsyncHttpClient` over httpx, under the rules of
the sync API's :class:`HttpClient` (``_http.py``)."""

from __future__ import annotations

import asyncio
import ssl
import sys
import weakref
from typing import Any, Awaitable, List, Optional, Tuple, TypeVar

import httpx

from ._http import DEFAULT_MAX_RESPONSE_BYTES, Headers, TransportFailure, classify

T = TypeVar("T")

if sys.version_info >= (3, 11):

    async def _within(awaitable: Awaitable[T], seconds: float) -> T:
        """``awaitable`` within ``seconds``, on this task (no task of its own)."""
        async with asyncio.timeout(seconds):
            return await awaitable

else:  # pragma: no cover - Python 3.10

    async def _within(awaitable: Awaitable[T], seconds: float) -> T:
        return await asyncio.wait_for(awaitable, seconds)


class AsyncHttpClient:
    """Sends the requests of ``send`` steps with httpx's ``AsyncClient``, under the same rules as
    :class:`HttpClient`: redirects never followed (a 3xx goes to the component as it came, a
    provider error), ``identity`` encoding asked for and nothing inflated (raw bytes only), bodies
    read in chunks of at most ``chunk_size`` bytes that the component counts as they arrive (a
    whole response is read to one chunk past its limit and no further), and every wait bounded:
    the head within the request's timeout, each chunk of a stream within it, a whole response to
    its last byte within it. The environment is not read (no proxies, no ``.netrc``), and TLS is
    checked against the system's certificate store.

    One client pools connections for the event loop it is first used on; the default client
    (one per loop) is used when an agent is given none. ``await client.aclose()`` (or ``async
    with``) closes its connections.
    """

    def __init__(self, client: Optional[httpx.AsyncClient] = None, *, chunk_size: int = 65536) -> None:
        self.client = client or httpx.AsyncClient(
            follow_redirects=False,
            trust_env=False,
            verify=ssl.create_default_context(),
            timeout=None,  # every wait is bounded here, by the step's own timeout
            limits=httpx.Limits(max_connections=32, max_keepalive_connections=8),
        )
        self.chunk_size = chunk_size

    async def send(self, req: Any, limit: int = DEFAULT_MAX_RESPONSE_BYTES) -> Tuple[int, Headers, str]:
        """A whole response: status, headers, and the body text, of which at most ``limit``
        bytes and one chunk more are read, all within the request's timeout."""
        resp = await self.open(req)
        try:
            parts: List[bytes] = []
            size = 0
            while size <= limit:
                chunk = await resp.read()
                if not chunk:
                    break
                parts.append(chunk)
                size += len(chunk)
            return resp.status, resp.headers, b"".join(parts).decode("utf-8", errors="replace")
        finally:
            await resp.aclose()

    async def open(self, req: Any) -> "AsyncStreamingResponse":
        """Sends the request and returns its response once the head is in; the body follows."""
        seconds = max(getattr(req, "timeout-ms"), 1) / 1000.0
        loop = asyncio.get_running_loop()
        started = loop.time()
        headers = [(name, value) for name, value in req.headers if name.lower() != "accept-encoding"]
        headers.append(("accept-encoding", "identity"))
        try:
            request = self.client.build_request(req.method, req.url, content=req.body.encode("utf-8"),
                                                headers=headers, timeout=httpx.Timeout(seconds))
            resp = await _within(self.client.send(request, stream=True, follow_redirects=False), seconds)
        except (asyncio.TimeoutError, TimeoutError):
            raise TransportFailure("timed-out", "timed out waiting for the response's head") from None
        except Exception as e:  # noqa: BLE001 - every failure becomes a transport failure
            raise classify(e) from None
        # The whole response, streamed or not, must be in within the timeout, however its bytes
        # trickle (a stream of keep-alives too); a stream's gaps are each bounded by it as well.
        until = started + seconds
        return AsyncStreamingResponse(resp, self.chunk_size, seconds, until)

    async def aclose(self) -> None:
        await self.client.aclose()

    async def __aenter__(self) -> "AsyncHttpClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


class AsyncStreamingResponse:
    """A response whose head is in and whose body is read as the session asks."""

    def __init__(self, resp: httpx.Response, chunk_size: int, timeout: float, until: Optional[float]) -> None:
        self.resp = resp
        self.status = resp.status_code
        self.headers: Headers = [(k.lower(), v) for k, v in resp.headers.multi_items()]
        self._chunks = resp.aiter_raw()
        self._chunk_size = chunk_size
        self._timeout = timeout
        self._until = until
        self._rest = b""

    async def read(self) -> bytes:
        """The next bytes (at most ``chunk_size``), as soon as some arrive; ``b""`` at the end."""
        if not self._rest:
            limit = self._timeout
            if self._until is not None:
                left = self._until - asyncio.get_running_loop().time()
                if left <= 0:
                    raise TransportFailure("timed-out", "timed out: the whole response took longer than the timeout")
                limit = min(limit, left)
            try:
                self._rest = await _within(self._chunks.__anext__(), limit)
            except StopAsyncIteration:
                return b""
            except (asyncio.TimeoutError, TimeoutError):
                raise TransportFailure("timed-out", "timed out waiting for the body") from None
            except Exception as e:  # noqa: BLE001
                raise classify(e) from None
        data, self._rest = self._rest[: self._chunk_size], self._rest[self._chunk_size :]
        return data

    async def aclose(self) -> None:
        """Closes the connection unless the body was read to its end (then it goes back to the
        pool): a body left unread is not drained, however large."""
        try:
            await self.resp.aclose()
        except Exception:  # noqa: BLE001
            pass


_clients: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncHttpClient]" = weakref.WeakKeyDictionary()


def default_async_client() -> AsyncHttpClient:
    """The running event loop's shared client (connections belong to one loop)."""
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None:
        client = _clients[loop] = AsyncHttpClient()
    return client
