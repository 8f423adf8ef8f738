"""A scripted provider on 127.0.0.1: Anthropic- and OpenAI-shaped JSON and SSE.

Each request pops the next scripted reply (or gets the default: a one-turn text answer in the
route's shape). Every request is recorded (method, path, headers, JSON body).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional


def anthropic_text(text: str = "Hello from the loopback.", input_tokens: int = 12, output_tokens: int = 7) -> Dict[str, Any]:
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}}


def anthropic_tool_use(calls: List[Dict[str, Any]], text: Optional[str] = None) -> Dict[str, Any]:
    content: List[Dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [{"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["input"]} for c in calls]
    return {"id": "msg_t", "type": "message", "role": "assistant", "model": "claude-test", "content": content,
            "stop_reason": "tool_use", "usage": {"input_tokens": 20, "output_tokens": 10}}


def openai_text(text: str = "Hello from OpenAI loopback.") -> Dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-test",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}}


def _sse(name: Optional[str], data: Any) -> bytes:
    head = f"event: {name}\n" if name else ""
    return (head + "data: " + (data if isinstance(data, str) else json.dumps(data)) + "\n\n").encode()


def anthropic_sse(pieces: List[str]) -> List[bytes]:
    events = [
        _sse("message_start", {"type": "message_start", "message": {
            "id": "msg_s", "type": "message", "role": "assistant", "content": [], "model": "claude-test",
            "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 11, "output_tokens": 1}}}),
        _sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        _sse("ping", {"type": "ping"}),
    ]
    events += [_sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                             "delta": {"type": "text_delta", "text": p}}) for p in pieces]
    events += [
        _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
        _sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                               "usage": {"output_tokens": 6}}),
        _sse("message_stop", {"type": "message_stop"}),
    ]
    return events


def openai_sse(pieces: List[str]) -> List[bytes]:
    def chunk(delta: Any, finish: Any) -> bytes:
        return _sse(None, {"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
                           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    events = [chunk({"role": "assistant", "content": ""}, None)]
    events += [chunk({"content": p}, None) for p in pieces]
    events.append(chunk({}, "stop"))
    events.append(_sse(None, {"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
                              "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}}))
    events.append(b"data: [DONE]\n\n")
    return events


class _Server(ThreadingHTTPServer):
    # socketserver's default backlog of 5 resets connections when many runs start at once.
    request_queue_size = 128


class Reply:
    """One scripted answer."""

    def __init__(self, status: int = 200, body: Any = None, *, headers: Optional[Dict[str, str]] = None,
                 sse: Optional[List[bytes]] = None, delay: float = 0.0, hang: float = 0.0, reset: bool = False,
                 keep_alive: float = 0.0) -> None:
        self.status, self.body, self.headers = status, body, headers or {}
        self.sse, self.delay, self.hang, self.reset = sse, delay, hang, reset
        # After its events, a stream sends an SSE comment every `keep_alive` seconds and never
        # ends (until the client goes, or 30 s pass).
        self.keep_alive = keep_alive


class Loopback:
    def __init__(self) -> None:
        self.replies: List[Reply] = []
        self.requests: List[Dict[str, Any]] = []
        self.lock = threading.Lock()
        loop = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                # headers and body go out in separate writes: without this, Nagle's algorithm and
                # the client's delayed ACK add 40 ms to every response
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                with loop.lock:
                    loop.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                                          "body": body})
                    reply = loop.replies.pop(0) if loop.replies else None
                if reply is None:
                    wants_stream = isinstance(body, dict) and body.get("stream")
                    if "chat/completions" in self.path:
                        reply = Reply(sse=openai_sse(["Hel", "lo"])) if wants_stream else Reply(body=openai_text())
                    else:
                        reply = Reply(sse=anthropic_sse(["Hel", "lo"])) if wants_stream else Reply(body=anthropic_text())
                self._answer(reply)

            def _answer(self, reply: Reply) -> None:
                if reply.hang:
                    time.sleep(reply.hang)
                    self.close_connection = True
                    return
                if reply.reset:
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                    self.close_connection = True
                    return
                if reply.sse is not None:
                    self.send_response(reply.status)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("transfer-encoding", "chunked")
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    for event in reply.sse:
                        if reply.delay:
                            time.sleep(reply.delay)
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                        self.wfile.flush()
                    if reply.keep_alive:
                        ping = b": keep-alive\n\n"
                        until = time.monotonic() + 30
                        try:
                            while time.monotonic() < until:
                                time.sleep(reply.keep_alive)
                                self.wfile.write(b"%x\r\n%s\r\n" % (len(ping), ping))
                                self.wfile.flush()
                        except OSError:
                            pass
                        self.close_connection = True
                        return
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                    return
                data = (reply.body if isinstance(reply.body, str) else json.dumps(reply.body)).encode()
                if reply.delay:
                    time.sleep(reply.delay)
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def script(self, *replies: Reply) -> None:
        with self.lock:
            self.replies = list(replies)
            self.requests = []

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
