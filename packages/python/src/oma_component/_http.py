"""The HTTP side of a run, over urllib3.

The component never touches the network: a ``send`` step hands over a complete request (method,
URL, headers with the key, JSON body, timeout, whether to stream) and the host answers with the
response's head and then its body chunks, or a transport failure. urllib3 does the sending: it
has no dependencies of its own, pools connections, applies the connect and between-bytes timeouts
the step asks for, and reports refused connections, resets and timeouts as distinct exceptions, which
map onto the ``transport-failure-kind`` the component classifies (see :func:`classify`).
"""

from __future__ import annotations

import errno
import http.client
import socket
import ssl
import sys
import time
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


def _chain(exc: BaseException) -> List[BaseException]:
    """``exc`` and what caused it: causes, contexts, the reason of urllib3's ``MaxRetryError``
    and exceptions carried as arguments (urllib3's ``ProtocolError("...", error)``)."""
    out: List[BaseException] = []
    todo = [exc]
    while todo and len(out) < 16:
        e = todo.pop(0)
        if any(e is seen for seen in out):
            continue
        out.append(e)
        todo.extend(x for x in (getattr(e, "reason", None), e.__cause__, e.__context__) if isinstance(x, BaseException))
        todo.extend(a for a in e.args if isinstance(a, BaseException))
    return out


_REFUSED = {errno.ECONNREFUSED}
_RESET = {errno.ECONNRESET, errno.EPIPE, errno.ECONNABORTED, errno.ENOTCONN}


def classify(exc: BaseException) -> TransportFailure:
    """What a failed request is, as the component's ``transport-failure-kind`` says it (the
    kinds the component and the JavaScript package report): ``refused`` (nothing listens),
    ``reset`` (the connection broke), ``timed-out``, or ``other`` with what it was (a DNS
    lookup, a TLS handshake, ...). What the operating system says decides before any timeout
    class: urllib3's ``NewConnectionError`` is a subclass of ``ConnectTimeoutError``, so a
    refused connection must not be read as a timeout."""
    chain = _chain(exc)
    for e in chain:
        if isinstance(e, socket.gaierror):
            return TransportFailure("other", f"DNS lookup failed: {e.strerror or e}")
        if isinstance(e, ssl.SSLError):
            reason = getattr(e, "reason", None) or getattr(e, "strerror", None) or str(e)
            return TransportFailure("other", f"TLS failure: {reason}")
        if isinstance(e, ssl.CertificateError):
            return TransportFailure("other", f"TLS failure: {e}")
        if isinstance(e, ConnectionRefusedError) or (isinstance(e, OSError) and e.errno in _REFUSED):
            return TransportFailure("refused", "connection refused")
        if isinstance(e, (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)) or (
            isinstance(e, OSError) and e.errno in _RESET
        ):
            return TransportFailure("reset", f"connection reset: {e.strerror or type(e).__name__}")
    for e in chain:
        if isinstance(e, (u3.ConnectTimeoutError, u3.ReadTimeoutError, socket.timeout, TimeoutError,
                          _httpx_timeouts())):
            return TransportFailure("timed-out", f"timed out: {type(e).__name__}")
    for e in chain:
        if isinstance(e, u3.NameResolutionError):
            return TransportFailure("other", "DNS lookup failed")
        if isinstance(e, u3.SSLError):
            return TransportFailure("other", "TLS failure")
        if isinstance(e, (u3.ProtocolError, u3.IncompleteRead, ConnectionError, http.client.HTTPException,
                          _httpx_broken())):
            return TransportFailure("reset", f"connection broken: {type(e).__name__}")
    return TransportFailure("other", f"{type(exc).__name__}")


def _httpx_timeouts() -> Tuple[type, ...]:
    httpx = sys.modules.get("httpx")
    return (httpx.TimeoutException,) if httpx is not None else ()


def _httpx_broken() -> Tuple[type, ...]:
    """httpx's errors for a connection that broke (the package's asyncio client)."""
    httpx = sys.modules.get("httpx")
    if httpx is None:
        return ()
    return (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError, httpx.CloseError)


_classify = classify


# The component's default response limit (``call-options.max-response-bytes``): where a whole
# response's read stops when the configuration sets none.
DEFAULT_MAX_RESPONSE_BYTES = 32 << 20


class HttpClient:
    """Sends the requests of ``send`` steps. One pool per client; share it between agents.

    Bodies are read in chunks of at most ``chunk_size`` bytes: a stream's go to the component one
    by one, which counts them against its response limit as they arrive; a whole response is
    read up to one byte past the limit and no further, and handed over in one piece (one string
    crosses into the component far faster than a byte list), so the component reports it as too
    large. Either way the connection is closed once the limit is passed. Bodies are asked for in
    ``identity`` encoding and never inflated (the component refuses an encoded body at its
    head). Redirects are never followed: a 3xx goes to the component as it came, which makes it
    a provider error, so the key goes to the configured origin only.
    """

    def __init__(self, pool: Optional[urllib3.PoolManager] = None, *, chunk_size: int = 65536) -> None:
        # Retries and redirects are off: the component owns the retry schedule, and a redirect
        # would send the key somewhere the egress policy never saw.
        self.pool = pool or urllib3.PoolManager(retries=False, num_pools=8, maxsize=4)
        self.chunk_size = chunk_size

    def send(self, req: Any, limit: int = DEFAULT_MAX_RESPONSE_BYTES) -> Tuple[int, Headers, str]:
        """A whole response: status, headers, and the body text, of which at most ``limit`` bytes
        and one chunk more are read, all within the request's timeout."""
        resp = self.open(req)
        try:
            parts: List[bytes] = []
            size = 0
            while size <= limit:
                chunk = resp.read()
                if not chunk:
                    break
                parts.append(chunk)
                size += len(chunk)
            return resp.status, resp.headers, b"".join(parts).decode("utf-8", errors="replace")
        finally:
            resp.close()

    def open(self, req: Any) -> "StreamingResponse":
        """Sends the request and returns its response once the head is in; the body follows."""
        seconds = max(getattr(req, "timeout-ms"), 1) / 1000.0
        started = time.monotonic()
        headers = {name: value for name, value in req.headers if name.lower() != "accept-encoding"}
        headers["accept-encoding"] = "identity"
        try:
            resp = self.pool.request(
                req.method,
                req.url,
                body=req.body.encode("utf-8"),
                headers=headers,
                timeout=urllib3.Timeout(connect=seconds, read=seconds),
                retries=False,
                redirect=False,
                preload_content=False,
                decode_content=False,
            )
        except Exception as e:  # noqa: BLE001 - every failure becomes a transport failure
            raise _classify(e) from None
        # The whole response, streamed or not, must be in within the timeout, however its bytes
        # trickle (a stream of keep-alives too); a stream's gaps are each bounded by it as well.
        until = started + seconds
        return StreamingResponse(resp, self.chunk_size, seconds, until)


class StreamingResponse:
    """A response whose head is in and whose body is read as the session asks."""

    def __init__(self, resp: Any, chunk_size: int, timeout: float, until: Optional[float]) -> None:
        self.resp = resp
        self.status = resp.status
        self.headers: Headers = [(k.lower(), v) for k, v in resp.headers.iteritems()]
        self._chunk_size = chunk_size
        self._timeout = timeout
        self._until = until
        self._reader = getattr(resp, "read1", None)

    def _bound_next_read(self) -> None:
        """Cuts the socket's timeout to what is left of a whole response's time."""
        if self._until is None:
            return
        left = self._until - time.monotonic()
        if left <= 0:
            raise TransportFailure("timed-out", "timed out: the whole response took longer than the timeout")
        sock = getattr(getattr(self.resp, "connection", None), "sock", None)
        if sock is not None:
            try:
                sock.settimeout(min(self._timeout, left))
            except OSError:
                pass

    def read(self) -> bytes:
        """The next bytes, as soon as some arrive; ``b""`` at the end."""
        self._bound_next_read()
        try:
            if self._reader is not None:
                return bytes(self._reader(self._chunk_size))
            return bytes(self.resp.read(self._chunk_size))
        except Exception as e:  # noqa: BLE001
            raise _classify(e) from None

    def close(self) -> None:
        """Closes the connection unless the body was read to its end (then it goes back to the
        pool): a body left unread is not drained, however large."""
        try:
            if not self.resp.isclosed():
                self.resp.close()
            self.resp.release_conn()
        except Exception:  # noqa: BLE001
            pass


_default_client: Optional[HttpClient] = None


def default_client() -> HttpClient:
    global _default_client
    if _default_client is None:
        _default_client = HttpClient()
    return _default_client
