"""The HTTP side of a run, over urllib3.

The component never touches the network: a ``send`` step hands over a complete request (method,
URL, headers with the key, JSON body, timeout, whether to stream) and the host answers with the
response, its head and body chunks, or a transport failure. urllib3 does the sending: it has no
dependencies of its own, pools connections, applies the connect and between-bytes timeouts the
step asks for, and reports refused connections, resets and timeouts as distinct exceptions, which
map one-to-one onto the ``transport-failure-kind`` the component classifies.
"""

from __future__ import annotations

import socket
from typing import Any, Iterator, List, Optional, Tuple

import urllib3
from urllib3 import exceptions as u3

Headers = List[Tuple[str, str]]


class TransportFailure(Exception):
    """A request failed before a whole answer arrived."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind  # refused | reset | timed-out | denied | other
        self.message = message[:300]


def _classify(exc: BaseException) -> TransportFailure:
    e: Optional[BaseException] = exc
    if isinstance(e, u3.MaxRetryError) and e.reason is not None:
        e = e.reason
    if isinstance(e, (u3.ConnectTimeoutError, u3.ReadTimeoutError, socket.timeout, TimeoutError)):
        return TransportFailure("timed-out", f"timed out: {type(e).__name__}")
    if isinstance(e, u3.NewConnectionError):
        cause = e.__cause__ or e.__context__
        if isinstance(cause, ConnectionRefusedError) or "refused" in str(e).lower():
            return TransportFailure("refused", "connection refused")
        return TransportFailure("other", f"cannot connect: {type(cause or e).__name__}")
    if isinstance(e, (u3.ProtocolError, ConnectionError, u3.IncompleteRead)):
        return TransportFailure("reset", f"connection broken: {type(e).__name__}")
    if isinstance(e, u3.SSLError):
        return TransportFailure("other", "TLS failure")
    return TransportFailure("other", f"{type(e).__name__}")


class HttpClient:
    """Sends the requests of ``send`` steps. One pool per client; share it between agents."""

    def __init__(self, pool: Optional[urllib3.PoolManager] = None, *, chunk_size: int = 65536) -> None:
        # Retries and redirects are off: the component owns the retry schedule, and a redirect
        # would send the key somewhere the egress policy never saw.
        self.pool = pool or urllib3.PoolManager(retries=False, num_pools=8, maxsize=4)
        self.chunk_size = chunk_size

    def _request(self, req: Any, stream: bool) -> Any:
        seconds = max(getattr(req, "timeout-ms"), 1) / 1000.0
        headers = {name: value for name, value in req.headers}
        try:
            return self.pool.request(
                req.method,
                req.url,
                body=req.body.encode("utf-8"),
                headers=headers,
                timeout=urllib3.Timeout(connect=seconds, read=seconds),
                retries=False,
                redirect=False,
                preload_content=not stream,
                decode_content=True,
            )
        except Exception as e:  # noqa: BLE001 - every failure becomes a transport failure
            raise _classify(e) from None

    @staticmethod
    def _headers(resp: Any) -> Headers:
        return [(k.lower(), v) for k, v in resp.headers.iteritems()]

    def send(self, req: Any) -> Tuple[int, Headers, str]:
        """A whole response: status, headers, body text."""
        resp = self._request(req, stream=False)
        try:
            body = resp.data
        except Exception as e:  # noqa: BLE001
            raise _classify(e) from None
        return resp.status, self._headers(resp), body.decode("utf-8", errors="replace")

    def open(self, req: Any) -> "StreamingResponse":
        """A response whose body is read chunk by chunk as the session asks."""
        return StreamingResponse(self._request(req, stream=True), self.chunk_size)


class StreamingResponse:
    def __init__(self, resp: Any, chunk_size: int) -> None:
        self.resp = resp
        self.status = resp.status
        self.headers = HttpClient._headers(resp)
        self._chunk_size = chunk_size
        self._reader = getattr(resp, "read1", None)

    def read(self) -> bytes:
        """The next bytes, as soon as some arrive; ``b""`` at the end."""
        try:
            if self._reader is not None:
                return self._reader(self._chunk_size)
            return self.resp.read(self._chunk_size)
        except Exception as e:  # noqa: BLE001
            raise _classify(e) from None

    def close(self) -> None:
        try:
            self.resp.release_conn()
        except Exception:  # noqa: BLE001
            pass


_default_client: Optional[HttpClient] = None


def default_client() -> HttpClient:
    global _default_client
    if _default_client is None:
        _default_client = HttpClient()
    return _default_client
