#!/usr/bin/env python3
"""Benchmarks: format_request of vision-1mib, one run() per workload against a loopback
provider (the same workloads as the Rust benches; text and image to the Anthropic format, video
to MiniMax), and the component's text rules as the package calls them (the redaction of bash
output, trace records and evaluation payloads on 1 MB of log lines and on a 100,000-character
word, the input a backtracking redaction is quadratic on; the bash classifier on a short
command). Prints medians in ms and the load average.

    cargo run -q -p oma-host-tests --bin gen-workloads -- /tmp/wl     # from the repository root
    PYTHONPATH=src python bench.py /tmp/wl
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "tests"))

import oma_component as oma  # noqa: E402
from oma_component._codec import redact_sensitive_text  # noqa: E402
from loopback import Loopback  # noqa: E402

WORKLOADS = ["chat-small", "chat-history-51", "tools-rich-20", "vision-1mib", "video-url", "video-16mib"]
BUDGET_MS = 5.0


def median_ms(fn, n: int) -> float:
    fn()  # warm
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples)


def main() -> int:
    directory = sys.argv[1] if len(sys.argv) > 1 else "/tmp/wl"
    t0 = time.perf_counter()
    oma.default_runtime()
    load_ms = (time.perf_counter() - t0) * 1000
    server = Loopback()
    rows = []
    vision = json.loads(open(os.path.join(directory, "vision-1mib.json")).read())
    fr = median_ms(lambda: oma.format_request(vision, provider="anthropic", model="claude-sonnet-4-6",
                                              api_key="sk-bench", max_tokens=1024), 50)
    rows.append(("format_request vision-1mib (messages as dicts)", fr))
    text = open(os.path.join(directory, "vision-1mib.json")).read()
    rows.append(("format_request vision-1mib (JSON text)",
                 median_ms(lambda: oma.format_request(text, provider="anthropic", model="claude-sonnet-4-6",
                                                      api_key="sk-bench", max_tokens=1024), 50)))
    for name in WORKLOADS:
        path = os.path.join(directory, name + ".json")
        if not os.path.exists(path):
            continue
        messages = json.loads(open(path).read())
        if name.startswith("video"):
            agent = oma.Agent(name="bench", model="MiniMax-M1", provider="minimax", base_url=server.base + "/v1",
                              api_key="sk-bench", call={"egress": "offline"})
        else:
            agent = oma.Agent(name="bench", model="claude-sonnet-4-6", provider="anthropic", base_url=server.base,
                              api_key="sk-bench", call={"egress": "offline"})
        n = 5 if name == "video-16mib" else 30

        def once(agent=agent, messages=messages):
            assert agent.run(messages)["success"]

        rows.append((f"run() {name}", median_ms(once, n)))
    server.close()
    line = "2026-12-06 INFO id=42 user=alice path=/v1/run status=200 password=hunter2 Bearer abcdefghijkl\n"
    log = (line * (1_000_000 // len(line) + 1))[:1_000_000]
    rows.append(("redaction of 1 MB of log lines", median_ms(lambda: redact_sensitive_text(log), 10)))
    word = "a" * 100_000
    rows.append(("redaction of a 100,000-character word", median_ms(lambda: redact_sensitive_text(word), 10)))
    rows.append(("classify_bash_command('ls -la && git status')",
                 median_ms(lambda: oma.classify_bash_command("ls -la && git status"), 1000)))
    loadavg = open("/proc/loadavg").read().split()[:3]
    print(f"component load (cache {oma.default_runtime().cache_status}): {load_ms:.1f} ms")
    for label, ms in rows:
        print(f"{label:55s} {ms:9.2f} ms (median)")
    print(f"load average: {' '.join(loadavg)}")
    if fr > BUDGET_MS:
        print(f"format_request vision-1mib median {fr:.2f} ms is over the {BUDGET_MS} ms budget")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
