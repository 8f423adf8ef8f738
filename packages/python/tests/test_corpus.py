"""The recorded-response corpus (``fixtures/corpus/``) through the package as its users call it.

Every recording is served byte for byte by a loopback server of this file's own (a stream one
event per chunk, 1 ms apart, as the Rust harness's simulator serves it; an AWS event stream as
binary event-stream messages framed here) and read by ``Agent`` (sync) and by ``AsyncAgent``:
``run`` for a recording answered to a plain request, ``stream`` for a streamed one. Each result
is compared with the hand-written expectation in ``manifest.json`` by the rules of
``host-tests/tests/all/corpus.rs`` for a run: ``success``, the first message, the token usage;
for an error, ``errorInfo``'s kind, name, httpStatus, retryable, provider, code and a piece of
its message.

Field names: the package's result is OMA's ``AgentRunResult`` as a dict, with the names the Rust
test reads from ``run_result_json`` (``success``, ``messages``, ``tokenUsage``, ``errorInfo``);
nothing is renamed. An ``httpStatus`` or ``code`` the expectation gives as null is compared with
an absent key, as in Rust (an absent JSON member reads as null there).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import struct
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Tuple

import pytest

import oma_component as oma

CORPUS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "corpus")
with open(os.path.join(CORPUS, "manifest.json"), encoding="utf-8") as f:
    MANIFEST: Dict[str, Any] = json.load(f)

#: The key every agent is given; it must not show in any result.
KEY = "sk-corpus-SECRET-5d81"
#: The pause between two chunks of a recorded stream.
CHUNK_DELAY = 0.001
#: The placeholder for an id the component makes up for Gemini.
GEMINI_ID = "<gemini-id>"

#: Cases this package cannot run, with why. Empty: every recording runs. A case listed here that
#: passes fails the test, so the list cannot outlive its reason.
CANNOT_RUN: Dict[str, str] = {}


# -- the body of a recording in the pieces it is flushed in (corpus.rs `chunks`) ---------------

def sse_events(data: bytes) -> List[bytes]:
    """Splits a server-sent event stream after each blank line (LF or CRLF), keeping every byte."""
    events: List[bytes] = []
    start = i = 0
    while i < len(data):
        if data.startswith(b"\r\n\r\n", i):
            end: Optional[int] = i + 4
        elif data.startswith(b"\n\n", i):
            end = i + 2
        else:
            end = None
        if end is None:
            i += 1
        else:
            events.append(data[start:end])
            start = i = end
    if start < len(data):
        events.append(data[start:])
    return events


def aws_event_message(headers: List[Tuple[str, str]], payload: bytes) -> bytes:
    """One AWS event-stream message: total length, headers length, prelude CRC, headers (a name,
    the string type 7, a 2-byte length, the value), the payload, the message CRC; big-endian."""
    block = b""
    for name, value in headers:
        n, v = name.encode(), value.encode()
        block += bytes([len(n)]) + n + b"\x07" + struct.pack(">H", len(v)) + v
    total = 12 + len(block) + len(payload) + 4
    prelude = struct.pack(">II", total, len(block))
    body = prelude + struct.pack(">I", zlib.crc32(prelude)) + block + payload
    return body + struct.pack(">I", zlib.crc32(body))


def chunks(case: Dict[str, Any]) -> List[bytes]:
    with open(os.path.join(CORPUS, case["file"]), "rb") as f:
        data = f.read()
    framing = case["framing"]
    if framing == "whole":
        return [data]
    if framing == "sse":
        return sse_events(data)
    if framing == "aws-eventstream":
        exceptions = set(case.get("exceptions") or [])
        out = []
        for line in data.decode("utf-8").split("\n"):
            if not line.strip():
                continue
            event = json.loads(line)
            assert len(event) == 1, f"one event per line: {line}"
            ((kind, payload),) = event.items()
            # serde_json's `to_string` of the payload: compact, members in the order read.
            raw = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
            if kind in exceptions:
                heads = [(":exception-type", kind), (":content-type", "application/json"), (":message-type", "exception")]
            else:
                heads = [(":event-type", kind), (":content-type", "application/json"), (":message-type", "event")]
            out.append(aws_event_message(heads, raw))
        return out
    raise AssertionError(f"{case['name']}: unknown framing {framing}")


# -- the loopback provider: each request is answered with the scripted recording ---------------

class Recorded:
    """The scripted answer and the number of requests that came."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reply: Optional[Tuple[int, Dict[str, str], List[bytes]]] = None
        self.requests = 0


class _Server(ThreadingHTTPServer):
    request_queue_size = 64
    daemon_threads = True


def start_server(state: Recorded) -> _Server:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def setup(self) -> None:
            super().setup()
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers.get("content-length") or 0))
            with state.lock:
                state.requests += 1
                reply, state.reply = state.reply, None
            if reply is None:
                self.send_response(599)
                self.send_header("content-length", "0")
                self.end_headers()
                return
            status, headers, pieces = reply
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            if len(pieces) == 1:
                # one piece: sent whole, with a length
                self.send_header("content-length", str(len(pieces[0])))
                self.end_headers()
                self.wfile.write(pieces[0])
                self.wfile.flush()
                return
            # several: chunked, one chunk each, CHUNK_DELAY apart
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            try:
                for i, piece in enumerate(pieces):
                    if i:
                        time.sleep(CHUNK_DELAY)
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:
                self.close_connection = True

    server = _Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server


@pytest.fixture(scope="module")
def provider() -> Any:
    state = Recorded()
    server = start_server(state)
    yield state, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


# -- the comparison (corpus.rs `matches`, `compare_error`, `compare`) --------------------------

_GEMINI_ID = re.compile(r"gemini-[0-9]+-[0-9a-z]{7}")


def matches(expected: Any, actual: Any) -> bool:
    """Whether ``actual`` is ``expected`` (JSON equality; bool is not a number),
    ``<gemini-id>`` standing for any id the component makes up."""
    if expected == GEMINI_ID and isinstance(actual, str):
        return _GEMINI_ID.fullmatch(actual) is not None
    if isinstance(expected, dict):
        return (isinstance(actual, dict) and len(expected) == len(actual)
                and all(k in actual and matches(v, actual[k]) for k, v in expected.items()))
    if isinstance(expected, list):
        return (isinstance(actual, list) and len(expected) == len(actual)
                and all(matches(e, a) for e, a in zip(expected, actual)))
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    return bool(expected == actual)


def differ(out: List[Tuple[str, str]], field: str, expected: Any, actual: Any) -> None:
    if not matches(expected, actual):
        out.append((field, f"expected {json.dumps(expected)}, got {json.dumps(actual, default=str)}"))


def compare_error(out: List[Tuple[str, str]], expected: Dict[str, Any], actual: Dict[str, Any]) -> None:
    for field in ("name", "httpStatus", "retryable", "provider", "code"):
        differ(out, field, expected.get(field), actual.get(field))
    piece = expected.get("message_contains")
    if isinstance(piece, str):
        message = actual.get("message") if isinstance(actual.get("message"), str) else ""
        if piece not in message:
            out.append(("message", f"{message!r} does not contain {piece!r}"))


def compare(case: Dict[str, Any], result: Dict[str, Any]) -> List[Tuple[str, str]]:
    out: List[Tuple[str, str]] = []
    expect = case["expect"]
    if "response" in expect:
        response = expect["response"]
        differ(out, "success", True, result.get("success"))
        first = (result.get("messages") or [None])[0]
        differ(out, "content", {"role": "assistant", "content": response["content"]}, first)
        differ(out, "usage", response["usage"], result.get("tokenUsage"))
    else:
        differ(out, "success", False, result.get("success"))
        info = result.get("errorInfo") or {}
        differ(out, "kind", "provider", info.get("kind"))
        compare_error(out, expect["error"], info)
    return out


def affected(needs: str) -> Tuple[str, ...]:
    """The fields the work a case waits for changes."""
    return {"error-code": ("code",), "gemini-partial-args": ("content",)}[needs]


# -- one case through the package -------------------------------------------------------------

INPUT = [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]


def agent_options(case: Dict[str, Any], base: str) -> Dict[str, Any]:
    return dict(name="corpus", model=case["model"], provider=case["provider"], base_url=base, api_key=KEY,
                region="us-east-1" if case["provider"] == "bedrock" else None, max_turns=1,
                # one attempt, as in the Rust worlds: each recording is one answer
                call={"max_retries": 0, "timeout_ms": 30000})


def last_result(case: Dict[str, Any], events: List[Dict[str, Any]]) -> Dict[str, Any]:
    """A stream's result: ``done``'s data, or the ``error`` event's error's ``result``."""
    last = events[-1] if events else None
    if last and last["type"] == "done":
        return dict(last["data"])
    if last and last["type"] == "error":
        error = last["data"]
        assert isinstance(error, oma.OmaError), f"{case['name']}: the error event carries an OmaError"
        return dict(error.result)
    raise AssertionError(f"{case['name']}: a stream that ends with {last!r}")


def run_sync(case: Dict[str, Any], base: str) -> Tuple[Dict[str, Any], List[Dict[str, Any]]]:
    agent = oma.Agent(**agent_options(case, base))
    try:
        if not case["stream"]:
            return dict(agent.run(INPUT)), []
        events = list(agent.stream(INPUT))
        return last_result(case, events), events
    finally:
        agent.close()


def run_async(case: Dict[str, Any], base: str, loop: asyncio.AbstractEventLoop) -> Tuple[Dict[str, Any], List[Dict[str, Any]]]:
    """On one event loop for the whole corpus (the package keeps one HTTP client per loop)."""
    async def main() -> Tuple[Dict[str, Any], List[Dict[str, Any]]]:
        agent = oma.AsyncAgent(**agent_options(case, base))
        try:
            if not case["stream"]:
                return dict(await agent.run(INPUT)), []
            events = [e async for e in agent.stream(INPUT)]
            return last_result(case, events), events
        finally:
            agent.close()

    return loop.run_until_complete(main())


@pytest.mark.parametrize("api", ["sync", "async"])
def test_every_recording_gives_the_documented_result(provider: Any, api: str) -> None:
    state, base = provider
    merged = set(MANIFEST["merged"])
    failures: List[str] = []
    expected_failures: List[str] = []
    passing_early: List[str] = []
    started = time.monotonic()
    loop = asyncio.new_event_loop()
    try:
        run_corpus(state, base, api, loop, merged, failures, expected_failures, passing_early)
    finally:
        loop.close()
    report(api, started, failures, expected_failures, passing_early)


def run_corpus(state: Recorded, base: str, api: str, loop: asyncio.AbstractEventLoop, merged: set,
               failures: List[str], expected_failures: List[str], passing_early: List[str]) -> None:
    for case in MANIFEST["cases"]:
        needs = case["needs"] if case.get("needs") and case["needs"] not in merged else None
        label = f"{case['name']} [{api} {'stream' if case['stream'] else 'run'}]"
        with state.lock:
            state.reply = (case["status"], dict(case.get("headers") or {}), chunks(case))
            before = state.requests
        try:
            result, events = run_sync(case, base) if api == "sync" else run_async(case, base, loop)
        except Exception as error:  # noqa: BLE001 - reported with the case's name
            failures.append(f"{label}: raised {error!r}")
            continue
        with state.lock:
            sent, left = state.requests - before, state.reply
            state.reply = None
        if sent != 1 or left is not None:
            failures.append(f"{label}: {sent} requests reached the provider, not 1")
        shown = json.dumps([result, events], default=repr)
        if KEY in shown or "SECRET" in shown:
            failures.append(f"{label}: the key shows in {shown}")
        mismatches = compare(case, result)
        if case["name"] in CANNOT_RUN:
            if not mismatches:
                failures.append(f"{label}: passes, but is listed as one the package cannot run "
                                f"({CANNOT_RUN[case['name']]}); take it off the list")
            continue
        for field, detail in mismatches:
            line = f"{label}: {field}: {detail}"
            if needs and field in affected(needs):
                expected_failures.append(f"{line} (needs {needs})")
            else:
                failures.append(line)
        if needs and not mismatches:
            passing_early.append(f"{case['name']} (needs {needs})")


def report(api: str, started: float, failures: List[str], expected_failures: List[str],
           passing_early: List[str]) -> None:
    for line in expected_failures:
        print(f"corpus: xfail {line}")
    for name in passing_early:
        print(f"corpus: {name} already passes")
    print(f"corpus: {len(MANIFEST['cases'])} recordings ({api}) in {time.monotonic() - started:.1f} s")
    names = {c["name"] for c in MANIFEST["cases"]}
    assert set(CANNOT_RUN) <= names, f"CANNOT_RUN names cases not in the manifest: {set(CANNOT_RUN) - names}"
    assert not failures, f"{len(failures)} mismatches:\n" + "\n".join(failures)


def test_sse_events_are_cut_after_blank_lines() -> None:
    body = b"event: a\ndata: 1\n\ndata: 2\r\n\r\ndata: 3"
    events = sse_events(body)
    assert events == [b"event: a\ndata: 1\n\n", b"data: 2\r\n\r\n", b"data: 3"]
    assert b"".join(events) == body


def test_aws_event_messages_carry_the_formats_crcs() -> None:
    message = aws_event_message([(":event-type", "messageStop")], b"{}")
    total, headers_len, prelude_crc = struct.unpack(">III", message[:12])
    assert total == len(message) and headers_len == 1 + 11 + 1 + 2 + 11
    assert prelude_crc == zlib.crc32(message[:8])
    assert struct.unpack(">I", message[-4:])[0] == zlib.crc32(message[:-4])
