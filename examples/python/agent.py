"""OMA's Agent from the oma_component Python package: a conversation with an image, a tool the
model calls, and the run's result, as a Python service writes it.

The "provider" is a few lines of ``http.server`` on 127.0.0.1 that answers in OpenAI's format
(first a tool call, then text), so the example runs offline; point ``base_url`` at a real
OpenAI-compatible endpoint (and set ``api_key``) to use one.

    pip install ./packages/python        # or: PYTHONPATH=packages/python/src after its build
    python examples/python/agent.py
"""

import json
import pathlib
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import oma_component as oma

REPLIES = [
    {"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": None,
        "tool_calls": [{"id": "call_1", "type": "function",
                        "function": {"name": "lookup_port", "arguments": '{"city":"Lisbon"}'}}]}}],
     "usage": {"prompt_tokens": 40, "completion_tokens": 9}},
    {"choices": [{"index": 0, "finish_reason": "stop", "message": {
        "role": "assistant", "content": "Yes, a harbour: ferries leave it from Cais do Sodre."}}],
     "usage": {"prompt_tokens": 61, "completion_tokens": 12}},
]
requests: list = []


class Provider(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        requests.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
        reply = REPLIES[min(len(requests) - 1, len(REPLIES) - 1)]
        body = json.dumps({"id": f"chatcmpl-{len(requests)}", "object": "chat.completion",
                           "created": 0, "model": "gpt-4o", **reply}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@oma.tool(input_schema={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
def lookup_port(input: dict) -> str:
    """Where ferries leave from in a city."""
    return f"{input['city']}: Cais do Sodre"


def main() -> int:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Provider)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        conversation = json.loads(
            (pathlib.Path(__file__).parent.parent / "conversations" / "vision.json").read_text())
        agent = oma.Agent(name="guide", model="gpt-4o", provider="openai",
                          base_url=f"http://127.0.0.1:{server.server_address[1]}/v1",
                          api_key="sk-example", tools=[lookup_port])
        result = agent.run(conversation)
        print(f"success: {result['success']}")
        print(f"output: {result['output']}")
        print(f"tool calls: {', '.join(call['toolName'] for call in result['toolCalls'])}")
        print(f"provider requests: {len(requests)}; tokens: {json.dumps(result['tokenUsage'])}")
        return 0 if result["success"] and len(requests) == 2 else 1
    finally:
        server.shutdown()


if __name__ == "__main__":
    sys.exit(main())
