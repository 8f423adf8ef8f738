"""The asyncio twin of test_hostile.py: the same hostile providers against AsyncAgent and its
httpx client, with the same expectations (redirects not followed, limits as bytes arrive,
nothing inflated, every read bounded by the call timeout and the run's deadline)."""

from __future__ import annotations

import asyncio
import gzip
import json
import time
from http.server import BaseHTTPRequestHandler
from types import SimpleNamespace
from typing import Any, Dict, List

import pytest

import oma_component as oma
from loopback import anthropic_sse, anthropic_text
from test_hostile import KEY, MiB, assert_timed_out, pour, providers, trickle  # noqa: F401 - fixture

def agent(base: str, **extra: Any) -> oma.AsyncAgent:
    call = {"egress": "offline", **extra.pop("call", {})}
    return oma.AsyncAgent(name="hostile", model="claude-test", provider="anthropic", base_url=base, api_key=KEY,
                          call=call, **extra)


async def streamed(a: oma.AsyncAgent) -> Dict[str, Any]:
    events = [e async for e in a.stream("hi")]
    last = events[-1]
    assert last["type"] in ("done", "error"), last
    return last["data"] if last["type"] == "done" else last["data"].result


async def ran(a: oma.AsyncAgent) -> Dict[str, Any]:
    return await a.run("hi")


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

    async def main() -> None:
        for run in (ran, streamed):
            result = await run(agent(provider.base, call={"max_retries": 2, "retry_delay_ms": 1}))
            assert result["success"] is False
            assert result["status"]["code"] == "error"
            info = result["errorInfo"]
            assert (info["kind"], info["name"], info["httpStatus"]) == ("provider", "ProviderError", status)
            assert info["retryable"] is False
            assert info["message"] == f"{status} moved"
            no_key(result)

    asyncio.run(main())
    assert len(provider.requests) == 2
    assert elsewhere.requests == []


@pytest.mark.parametrize("stream", [False, True])
def test_a_body_past_the_limit_stops_the_read(providers, stream):
    outcomes: List[Dict[str, Any]] = []
    piece = b": " + b"x" * (64 * 1024 - 3) + b"\n"
    provider = providers(pour(64 * MiB, piece, "text/event-stream" if stream else "application/json", outcomes))
    a = agent(provider.base, call={"max_response_bytes": MiB})
    t0 = time.monotonic()
    result = asyncio.run(streamed(a) if stream else ran(a))
    assert result["success"] is False
    assert result["errorInfo"]["name"] == "ProviderError"
    assert result["errorInfo"]["message"] == f"200 response body exceeds the limit of {MiB} bytes"
    assert time.monotonic() - t0 < 5
    deadline = time.monotonic() + 5
    while not outcomes and time.monotonic() < deadline:
        time.sleep(0.02)
    assert outcomes and outcomes[0]["complete"] is False, outcomes
    assert outcomes[0]["written"] < 16 * MiB, outcomes
    assert provider.requests[0]["accept-encoding"] == "identity"


def test_a_gzip_bomb_is_refused_at_its_head_never_inflated(providers):
    bomb = gzip.compress(bytes(64 * MiB), compresslevel=9)

    def answer(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("content-type", "application/json")
        h.send_header("content-encoding", "gzip")
        h.send_header("content-length", str(len(bomb)))
        h.end_headers()
        h.wfile.write(bomb)

    provider = providers(answer)

    async def main() -> None:
        for run in (ran, streamed):
            result = await run(agent(provider.base, call={"max_response_bytes": MiB, "max_retries": 2,
                                                          "retry_delay_ms": 1}))
            info = result["errorInfo"]
            assert info["name"] == "ProviderError"
            assert info["message"] == "200 the response body is content-encoded (gzip); only identity is accepted"
            assert info["retryable"] is False

    t0 = time.monotonic()
    asyncio.run(main())
    assert time.monotonic() - t0 < 3
    assert [r["accept-encoding"] for r in provider.requests] == ["identity", "identity"]


def test_the_client_reads_an_encoded_body_as_it_came(providers):
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

    async def main() -> bytes:
        async with oma.AsyncHttpClient() as client:
            response = await client.open(req)
            data = b""
            try:
                while True:
                    chunk = await response.read()
                    assert len(chunk) <= 65536
                    if not chunk:
                        break
                    data += chunk
            finally:
                await response.aclose()
            return data

    assert asyncio.run(main()) == bomb
    assert provider.requests[0]["accept-encoding"] == "identity"


def test_a_whole_response_that_trickles_is_cut_at_the_call_timeout(providers):
    provider = providers(trickle("application/json"))
    t0 = time.monotonic()
    result = asyncio.run(ran(agent(provider.base, call={"timeout_ms": 400, "max_retries": 0})))
    assert_timed_out(result, t0, 1.5)
    assert time.monotonic() - t0 >= 0.35
    assert result["errorInfo"]["message"] == "LLM call exceeded per-call timeout of 400ms"


def test_a_head_that_trickles_is_cut_at_the_call_timeout(providers):
    """Unlike http.client, the async client bounds the head as a whole."""

    def slow_head(h: BaseHTTPRequestHandler) -> None:
        h.wfile.write(b"HTTP/1.1 200 OK\r\n")
        until = time.monotonic() + 10
        while time.monotonic() < until:
            h.wfile.write(b"x-slow: 1\r\n")
            h.wfile.flush()
            time.sleep(0.05)

    provider = providers(slow_head)
    t0 = time.monotonic()
    assert_timed_out(asyncio.run(ran(agent(provider.base, call={"timeout_ms": 400, "max_retries": 0}))), t0, 1.5)


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
    assert_timed_out(asyncio.run(streamed(agent(provider.base, call={"timeout_ms": 400, "max_retries": 0}))), t0, 1.5)


def test_a_stream_that_trickles_ends_at_the_run_and_call_deadlines(providers):
    provider = providers(trickle("text/event-stream"))
    for extra, name in (({"deadline_ms": 600}, "TimeoutError"), ({"call": {"deadline_ms": 600}}, "LLMCallTimeoutError")):
        t0 = time.monotonic()
        assert_timed_out(asyncio.run(streamed(agent(provider.base, **extra))), t0, 2.0, name)
    t0 = time.monotonic()
    assert_timed_out(asyncio.run(ran(agent(provider.base, deadline_ms=600))), t0, 2.0, "TimeoutError")
