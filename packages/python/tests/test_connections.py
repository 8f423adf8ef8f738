"""Connection failures classified as what they are, in both APIs, against loopback sockets that
really refuse (a closed port), reset (accept, then RST by SO_LINGER 0), stall (accept, never
answer) or speak plain text to a TLS client; a DNS failure is the resolver's own error."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
import time
from types import SimpleNamespace
from typing import Any, Callable, Dict, Optional

import pytest

import oma_component as oma
from oma_component._http import TransportFailure

KEY = "sk-ant-conn-SECRETKEY0123456789"


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released without listening)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Listener:
    """Accepts connections and hands each to ``behave(conn)`` on a thread."""

    def __init__(self, behave: Callable[[socket.socket], None]) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.behave = behave
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.one, args=(conn,), daemon=True).start()

    def one(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(5)
            self.behave(conn)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self.sock.close()


def rst(conn: socket.socket) -> None:
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


def reset_at_head(conn: socket.socket) -> None:
    conn.recv(65536)
    rst(conn)


def reset_mid_body(conn: socket.socket) -> None:
    conn.recv(65536)
    conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{\"id\":")
    time.sleep(0.1)
    rst(conn)


def stall(conn: socket.socket) -> None:
    conn.recv(65536)
    time.sleep(3)


def plain_text(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n" * 4)
    time.sleep(0.5)


@pytest.fixture
def listen():
    made = []

    def make(behave: Callable[[socket.socket], None]) -> Listener:
        made.append(Listener(behave))
        return made[-1]

    yield make
    for listener in made:
        listener.close()


def request(url: str, timeout_ms: int = 2000, stream: bool = False) -> Any:
    req = SimpleNamespace(method="POST", url=url, body="{}", stream=stream,
                          headers=[("content-type", "application/json")])
    setattr(req, "timeout-ms", timeout_ms)
    return req


def sync_failure(url: str, timeout_ms: int = 2000) -> TransportFailure:
    client = oma.HttpClient()
    with pytest.raises(TransportFailure) as info:
        client.send(request(url, timeout_ms))
    return info.value


def async_failure(url: str, timeout_ms: int = 2000) -> TransportFailure:
    async def main() -> None:
        async with oma.AsyncHttpClient() as client:
            await client.send(request(url, timeout_ms))

    with pytest.raises(TransportFailure) as info:
        asyncio.run(main())
    return info.value


FAILURES = {"sync": sync_failure, "async": async_failure}


def run_of(api: str, base: str, timeout_ms: int = 2000, **kw: Any) -> Dict[str, Any]:
    args: Dict[str, Any] = dict(model="claude-test", provider="anthropic", base_url=base, api_key=KEY,
                                call={"egress": kw.pop("egress", "offline"), "timeout_ms": timeout_ms,
                                      "max_retries": 0})
    if api == "sync":
        return dict(oma.Agent(**args).run("hi"))
    return dict(asyncio.run(oma.AsyncAgent(**args).run("hi")))


@pytest.mark.parametrize("api", ["sync", "async"])
def test_a_refused_connection_is_refused_not_a_timeout(api):
    url = f"http://127.0.0.1:{closed_port()}"
    t0 = time.monotonic()
    f = FAILURES[api](url + "/v1/messages")
    assert (f.kind, f.message) == ("refused", "connection refused")
    result = run_of(api, url)
    assert time.monotonic() - t0 < 2
    assert result["success"] is False
    assert result["status"]["code"] == "error"
    info = result["errorInfo"]
    assert (info["kind"], info["name"], info["message"]) == ("provider", "ProviderError", "connection refused")
    assert info["retryable"] is True


@pytest.mark.parametrize("api", ["sync", "async"])
@pytest.mark.parametrize("when", [reset_at_head, reset_mid_body])
def test_a_reset_connection_is_reset(api, when, listen):
    listener = listen(when)
    base = f"http://127.0.0.1:{listener.port}"
    f = FAILURES[api](base + "/v1/messages")
    assert f.kind == "reset", (f.kind, f.message)
    result = run_of(api, base)
    info = result["errorInfo"]
    assert result["status"]["code"] == "error"
    assert (info["name"], info["retryable"]) == ("ProviderError", True)
    assert info["message"].startswith("transport error: connection "), info["message"]


@pytest.mark.parametrize("api", ["sync", "async"])
def test_a_stalled_connection_is_a_timeout(api, listen):
    listener = listen(stall)
    base = f"http://127.0.0.1:{listener.port}"
    t0 = time.monotonic()
    assert FAILURES[api](base + "/v1/messages", 300).kind == "timed-out"
    result = run_of(api, base, 300)
    assert time.monotonic() - t0 < 2.5
    assert result["status"]["code"] == "timeout"
    assert result["errorInfo"]["name"] == "LLMCallTimeoutError"
    assert result["errorInfo"]["message"] == "LLM call exceeded per-call timeout of 300ms"


@pytest.mark.parametrize("api", ["sync", "async"])
def test_a_tls_failure_says_so(api, listen):
    listener = listen(plain_text)
    base = f"https://127.0.0.1:{listener.port}"
    f = FAILURES[api](base + "/v1/messages")
    assert f.kind == "other" and f.message.startswith("TLS failure"), (f.kind, f.message)
    info = run_of(api, base)["errorInfo"]
    assert info["name"] == "ProviderError"
    assert info["message"].startswith("transport error: TLS failure"), info["message"]


@pytest.mark.parametrize("api", ["sync", "async"])
def test_a_dns_failure_says_so(api, monkeypatch):
    real = socket.getaddrinfo

    def resolve(host: Any, *args: Any, **kw: Any) -> Any:
        if host == "provider.invalid":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    f = FAILURES[api]("http://provider.invalid/v1/messages")
    assert (f.kind, f.message) == ("other", "DNS lookup failed: Name or service not known")
    info = run_of(api, "http://provider.invalid", egress="open")["errorInfo"]
    assert info["message"] == "transport error: DNS lookup failed: Name or service not known"
    assert KEY not in str(info)


def test_classify_reads_the_cause_before_the_timeout_class():
    """urllib3's NewConnectionError is a ConnectTimeoutError: the OS error decides."""
    from urllib3.exceptions import NewConnectionError

    e: Optional[BaseException] = None
    try:
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except ConnectionRefusedError as cause:
            raise NewConnectionError(None, "Failed to establish a new connection") from cause
    except NewConnectionError as err:
        e = err
    assert e is not None
    assert oma._http.classify(e).kind == "refused"
