"""A loopback OTLP/HTTP collector for run.sh: accepts `POST /v1/traces` and writes each body to
a file of the directory it is given; prints `collector: listening on http://ADDR` once it
accepts. It exits after `--max-seconds`."""

import argparse
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--max-seconds", type=float, default=900)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    count = [0]

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            length = int(self.headers.get("content-length", "0"))
            body = self.rfile.read(length)
            if self.path == "/v1/traces":
                count[0] += 1
                with open(os.path.join(args.out, f"{count[0]:04}.json"), "wb") as f:
                    f.write(body)
            self.send_response(200 if self.path == "/v1/traces" else 404)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *_):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    host, port = server.server_address[:2]
    print(f"collector: listening on http://{host}:{port}", file=sys.stderr, flush=True)
    threading.Timer(args.max_seconds, server.shutdown).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
