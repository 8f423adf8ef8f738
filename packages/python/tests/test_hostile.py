"""Hostile providers on loopback: redirects, bodies past the response limit, gzip bombs,
trickling and stalling answers. Every provider here gives up on its own after a few seconds, so a
regression fails a test instead of hanging it."""

from __future__ import annotations

import gzip
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any, Callable, Dict, List

import pytest

import oma_component as oma
from loopback import anthropic_sse, anthropic_text

KEY = "sk-ant-hostile-SECRETKEY0123456789"
MiB = 1 << 20


class Provider:
    """A loopback listener: ``answer(handler)`` writes the response; requests are recorded."""

    def __init__(self, answer: Callable[[BaseHTTPRequestHandler], None]) -> None:
        self.requests: List[Dict[str, Any]] = []
        self.outcomes: List[Dict[str, Any]] = []
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("content-length") or 0))
                provider.requests.append({k.lower(): v for k, v in self.headers.items()})
                try:
                    answer(self)
                except OSError:
                    pass  # the client went away

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def providers():
    made: List[Provider] = []

    def make(answer: Callable[[BaseHTTPRequestHandler], None]) -> Provider:
        made.append(Provider(answer))
        return made[-1]

    yield make
    for p in made:
        p.close()


def agent(base: str, **extra: Any) -> oma.Agent:
    call = {"egress": "offline", **extra.pop("call", {})}
    return oma.Agent(name="hostile", model="claude-test", provider="anthropic", base_url=base, api_key=KEY,
                     call=call, **extra)


def streamed(a: oma.Agent) -> Dict[str, Any]:
    """The result of a streamed run, from its last event."""
    events = list(a.stream("hi"))
    last = events[-1]
    assert last["type"] in ("done", "error"), last
    return last["data"] if last["type"] == "done" else last["data"].result


def no_key(result: Any) -> None:
    # A failed result holds its error, an exception: written as its text.
    assert "SECRETKEY" not in json.dumps(result, default=str)


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_is_a_provider_error_and_the_other_origin_sees_nothing(providers, status):
    def stolen(h: BaseHTTPRequestHandler) -> None:
        data = json.dumps(anthropic_text("stolen")).encode()
        h.send_response(200)
        h.send_header("content-length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    elsewhere = providers(stolen)

    def moved(h: BaseHTTPRequestHandler) -> None:
        h.send_response(status)
        h.send_header("location", elsewhere.base + "/v1/messages")
        h.send_header("content-type", "text/plain")
        h.send_header("content-length", "5")
        h.end_headers()
        h.wfile.write(b"moved")

    provider = providers(moved)
    for run in (lambda a: a.run("hi"), streamed):
        result = run(agent(provider.base, call={"max_retries": 2, "retry_delay_ms": 1}))
        assert result["success"] is False
        assert result["status"]["code"] == "error"
        info = result["errorInfo"]
        assert (info["kind"], info["name"], info["httpStatus"]) == ("provider", "ProviderError", status)
        assert info["retryable"] is False
        assert info["message"] == f"{status} moved"
        no_key(result)
    assert len(provider.requests) == 2  # one attempt per run: a redirect is not asked again
    assert elsewhere.requests == []


def pour(total: int, piece: bytes, content_type: str, outcomes: List[Dict[str, Any]]):
    """Writes ``total`` bytes in ``piece``s, recording how many got out before the client left."""

    def answer(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("content-type", content_type)
        h.send_header("content-length", str(total))
        h.end_headers()
        written = 0
        try:
            while written < total:
                h.wfile.write(piece)
                written += len(piece)
        finally:
            outcomes.append({"written": written, "complete": written >= total})

    return answer


@pytest.mark.parametrize("stream", [False, True])
def test_a_body_past_the_limit_stops_the_read(providers, stream):
    outcomes: List[Dict[str, Any]] = []
    piece = b": " + b"x" * (64 * 1024 - 3) + b"\n"
    provider = providers(pour(64 * MiB, piece, "text/event-stream" if stream else "application/json", outcomes))
    a = agent(provider.base, call={"max_response_bytes": MiB})
    t0 = time.monotonic()
    result = streamed(a) if stream else a.run("hi")
    assert result["success"] is False
    assert result["errorInfo"]["name"] == "ProviderError"
    assert result["errorInfo"]["message"] == f"200 response body exceeds the limit of {MiB} bytes"
    assert time.monotonic() - t0 < 5
    deadline = time.monotonic() + 5
    while not outcomes and time.monotonic() < deadline:
        time.sleep(0.02)
    # A whole-body read took all 64 MiB before the limit was applied; now the read stops past
    # 1 MiB, and the provider got out that plus the sockets' buffers.
    assert outcomes and outcomes[0]["complete"] is False, outcomes
    assert outcomes[0]["written"] < 16 * MiB, outcomes
    assert provider.requests[0]["accept-encoding"] == "identity"


def test_a_gzip_bomb_is_refused_at_its_head_never_inflated(providers):
    # 64 MiB of zeros in about 64 KiB: inflated, it would pass the 1 MiB limit 64 times over.
    bomb = gzip.compress(bytes(64 * MiB), compresslevel=9)
    assert len(bomb) < MiB

    def answer(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("content-type", "application/json")
        h.send_header("content-encoding", "gzip")
        h.send_header("content-length", str(len(bomb)))
        h.end_headers()
        h.wfile.write(bomb)

    provider = providers(answer)
    t0 = time.monotonic()
    for run in (lambda a: a.run("hi"), streamed):
        result = run(agent(provider.base, call={"max_response_bytes": MiB, "max_retries": 2, "retry_delay_ms": 1}))
        assert result["success"] is False
        info = result["errorInfo"]
        assert info["name"] == "ProviderError"
        assert info["message"] == "200 the response body is content-encoded (gzip); only identity is accepted"
        assert info["retryable"] is False
    assert time.monotonic() - t0 < 3
    assert [r["accept-encoding"] for r in provider.requests] == ["identity", "identity"]


def test_the_client_reads_an_encoded_body_as_it_came(providers):
    """The package never inflates: what a host hands on is the bytes on the wire."""
    bomb = gzip.compress(bytes(8 * MiB), compresslevel=9)

    def answer(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("content-encoding", "gzip")
        h.send_header("content-length", str(len(bomb)))
        h.end_headers()
        h.wfile.write(bomb)

    provider = providers(answer)
    req = SimpleNamespace(method="POST", url=provider.base + "/v1/messages", body="{}", stream=False,
                          headers=[("accept-encoding", "gzip"), ("content-type", "application/json")])
    setattr(req, "timeout-ms", 5000)
    response = oma.HttpClient().open(req)
    try:
        data = b""
        while True:
            chunk = response.read()
            assert len(chunk) <= 65536
            if not chunk:
                break
            data += chunk
    finally:
        response.close()
    assert data == bomb
    assert provider.requests[0]["accept-encoding"] == "identity"


def trickle(content_type: str, every: float = 0.1):
    """A head, then one byte every ``every`` seconds until the client leaves (or 20 s)."""

    def answer(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("content-type", content_type)
        h.end_headers()  # HTTP/1.0: the body runs until the connection closes
        byte = b"\n" if content_type == "text/event-stream" else b" "
        h.wfile.write(b":\n" if content_type == "text/event-stream" else b" ")
        h.wfile.flush()
        until = time.monotonic() + 20
        while time.monotonic() < until:
            time.sleep(every)
            h.wfile.write(byte)
            h.wfile.flush()

    return answer


def assert_timed_out(result: Dict[str, Any], t0: float, within: float, name: str = "LLMCallTimeoutError") -> None:
    """The run timed out: by a call's limit (``LLMCallTimeoutError``) unless ``name`` says the
    run's (OMA's whole-run ``TimeoutError``)."""
    elapsed = time.monotonic() - t0
    assert result["success"] is False, result
    assert result["status"]["code"] == "timeout", result["status"]
    assert result["errorInfo"]["name"] == name
    assert elapsed < within, f"the run took {elapsed:.2f} s"


def test_a_whole_response_that_trickles_is_cut_at_the_call_timeout(providers):
    provider = providers(trickle("application/json"))
    t0 = time.monotonic()
    result = agent(provider.base, call={"timeout_ms": 400, "max_retries": 0}).run("hi")
    assert_timed_out(result, t0, 1.5)
    assert time.monotonic() - t0 >= 0.35
    assert result["errorInfo"]["message"] == "LLM call exceeded per-call timeout of 400ms"


def test_a_stream_that_stalls_is_cut_at_the_call_timeout(providers):
    def stall(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("content-type", "text/event-stream")
        h.end_headers()
        h.wfile.write(anthropic_sse(["partial"])[0])
        h.wfile.flush()
        time.sleep(5)

    provider = providers(stall)
    t0 = time.monotonic()
    assert_timed_out(streamed(agent(provider.base, call={"timeout_ms": 400, "max_retries": 0})), t0, 1.5)


def test_a_stream_that_trickles_ends_at_the_run_and_call_deadlines(providers):
    provider = providers(trickle("text/event-stream"))
    # The run's deadline is OMA's whole-run timeout; the call's, a call timeout.
    for extra, name in (({"deadline_ms": 600}, "TimeoutError"), ({"call": {"deadline_ms": 600}}, "LLMCallTimeoutError")):
        t0 = time.monotonic()
        assert_timed_out(streamed(agent(provider.base, **extra)), t0, 2.0, name)
    # A whole response under the run deadline alone, the call timeout left at 120 s.
    t0 = time.monotonic()
    assert_timed_out(agent(provider.base, deadline_ms=600).run("hi"), t0, 2.0, "TimeoutError")
