#!/usr/bin/env python3
"""Paired benchmark: this package's ``Agent.run`` / ``AsyncAgent.run`` against LiteLLM's
``litellm.completion`` / ``litellm.acompletion``, on the project's generated workloads, against
one loopback provider speaking the Anthropic Messages format. README.md beside this file says how
to run it and what each side does per call.

    python packages/python/bench/litellm_paired.py --workloads target/workloads

The parent process starts the provider (its own process, 127.0.0.1 only) and, for each workload,
one worker process per side (the side's library and nothing of the other's). Each round asks each
worker for a batch of sync calls and a batch of async calls, the sides' order swapped every
round, so a change in the machine's load lands on both. Per call: the wall time of one call from
the caller's view (perf_counter around it). Per worker: its peak resident memory (VmHWM).

Everything talks to 127.0.0.1; every process has a deadline; ``--check-network`` runs each side
once more under ``strace -f -e trace=connect`` and fails when any connect() goes elsewhere.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(PKG))

#: The workloads measured: the ones both sides can send to Anthropic (the video workloads have no
#: Anthropic block; the package refuses them before any call).
WORKLOADS = ["chat-small", "chat-history-51", "tools-rich-20", "vision-1mib"]
MODEL = "claude-sonnet-4-6"
#: The text of every canned answer (crates/loopback/src/canned.rs: CANNED_TEXT, CANNED_USAGE).
CANNED_TEXT = "Hello from the simulator."
CANNED_USAGE = (12, 6)
API_KEY = "sk-bench-not-a-key"

#: What LiteLLM is told so that it never fetches anything at import or per call: its model cost
#: map, Anthropic beta headers, policy templates, router presets and blog posts from the package's
#: own copies; production mode (no .env file read); no proxy variables.
LITELLM_ENV = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS": "True",
    "LITELLM_LOCAL_POLICY_TEMPLATES": "True",
    "LITELLM_LOCAL_AUTOROUTER_PRESETS": "True",
    "LITELLM_LOCAL_BLOG_POSTS": "True",
    "LITELLM_MODE": "PRODUCTION",
    "LITELLM_LOG": "ERROR",
    "LITELLM_TELEMETRY": "False",
}


# --- The provider -----------------------------------------------------------------------------

def canned_body(model: str) -> bytes:
    """The canned Anthropic Messages answer of crates/loopback/src/canned.rs, ``model`` echoed."""
    inp, out = CANNED_USAGE
    return json.dumps({
        "id": "msg_sim_01", "type": "message", "role": "assistant", "model": model,
        "content": [{"type": "text", "text": CANNED_TEXT}],
        "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": inp, "output_tokens": out},
    }, separators=(",", ":")).encode()


_MODEL_RE = re.compile(rb'"model"\s*:\s*"([^"\\]{0,200})"')


def provider_main(args: argparse.Namespace) -> int:
    """A minimal HTTP/1.1 server on 127.0.0.1 (asyncio, keep-alive): ``POST .../v1/messages``
    is read whole and answered with the canned body (the request's ``model`` echoed);
    ``GET /__stats`` answers the counters; anything else 404. It reads each body whole, as a
    provider does, but does not parse the JSON: a parse would cost both sides the same and only
    blur the difference. It exits by itself after ``--max-seconds``."""
    stats = {"requests": 0, "body_bytes": 0, "connections": 0, "bad": 0}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        stats["connections"] += 1
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = (lines[0].split(" ", 2) + ["", ""])[:3]
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        k, v = line.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                length = int(headers.get("content-length") or 0)
                body = await reader.readexactly(length) if length else b""
                if method == "POST" and path.split("?", 1)[0].endswith("/v1/messages"):
                    stats["requests"] += 1
                    stats["body_bytes"] += len(body)
                    if headers.get("x-api-key") != API_KEY or headers.get("anthropic-version") is None:
                        stats["bad"] += 1
                    m = _MODEL_RE.search(body)
                    payload = canned_body(m.group(1).decode() if m else "")
                    status = "200 OK"
                elif method == "GET" and path == "/__stats":
                    payload = json.dumps(stats).encode()
                    status = "200 OK"
                else:
                    payload = b'{"type":"error","error":{"type":"not_found_error","message":"no such route"}}'
                    status = "404 Not Found"
                writer.write(f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n"
                             f"content-length: {len(payload)}\r\n\r\n".encode() + payload)
                await writer.drain()
                if headers.get("connection", "").lower() == "close":
                    return
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=256)
        port = server.sockets[0].getsockname()[1]
        print(f"listening on http://127.0.0.1:{port}", flush=True)
        async with server:
            await asyncio.sleep(args.max_seconds)

    asyncio.run(main())
    return 0


# --- The sides ----------------------------------------------------------------------------------

def to_openai(messages: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """An OMA message list as the OpenAI chat messages LiteLLM takes, block for block: text
    parts, images as ``image_url`` (a data URI for base64, the URL otherwise), PDFs as ``file``
    parts with a data URI, ``tool_use`` as the assistant's ``tool_calls``, each ``tool_result``
    as a ``tool`` message with the same parts. Done once per worker, before any timing: a
    LiteLLM user holds messages in this shape already."""

    def part(block: Dict[str, Any]) -> Dict[str, Any]:
        kind = block["type"]
        if kind == "text":
            return {"type": "text", "text": block["text"]}
        source = block["source"]
        url = source["url"] if source["type"] == "url" else f"data:{source['media_type']};base64,{source['data']}"
        if kind == "image":
            return {"type": "image_url", "image_url": {"url": url}}
        if kind == "file":
            return {"type": "file", "file": {"file_data": url, "filename": block.get("filename", "file")}}
        raise ValueError(f"no OpenAI part for a {kind} block")

    out: List[Dict[str, Any]] = []
    for message in messages:
        content = message["content"]
        if message["role"] == "assistant":
            texts = [b["text"] for b in content if b["type"] == "text"]
            calls = [{"id": b["id"], "type": "function",
                      "function": {"name": b["name"], "arguments": json.dumps(b["input"])}}
                     for b in content if b["type"] == "tool_use"]
            msg: Dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) or None}
            if calls:
                msg["tool_calls"] = calls
            out.append(msg)
            continue
        for b in content:
            if b["type"] == "tool_result":
                out.append({"role": "tool", "tool_call_id": b["tool_use_id"],
                            "content": [part(x) for x in b["content"]]})
        rest = [part(b) for b in content if b["type"] != "tool_result"]
        if rest:
            out.append({"role": "user", "content": rest})
    return out


#: The one tool the tools-rich-20 history calls, given to both sides so the provider sees the
#: same kind of request (Anthropic wants the tools of a history that uses them).
READ_FILE_SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}, "max_bytes": {"type": "integer"}},
                    "required": ["path"]}


def vm_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


class OmaSide:
    """This package: ``Agent(...).run(messages)`` and ``await AsyncAgent(...).run(messages)``,
    one agent per mode, each call a fresh conversation (OMA's ``run``)."""

    def __init__(self, base: str, messages: List[Dict[str, Any]], tools: bool) -> None:
        sys.path.insert(0, os.path.join(PKG, "src"))
        import oma_component as oma

        tool_list = []
        if tools:
            @oma.tool(name="read_file", description="Reads a file", input_schema=READ_FILE_SCHEMA)
            def read_file(args: Dict[str, Any]) -> str:
                return ""
            tool_list = [read_file]
        kw: Dict[str, Any] = dict(name="bench", model=MODEL, provider="anthropic", base_url=base,
                                  api_key=API_KEY, max_tokens=1024, tools=tool_list)
        self.messages = messages
        self.agent = oma.Agent(**kw)
        self.aagent = oma.AsyncAgent(**kw)

    def check(self, result: Any) -> None:
        if not (result["success"] and result["output"] == CANNED_TEXT):
            raise SystemExit(f"oma: the run did not succeed: {json.dumps(result)[:400]}")

    def call(self) -> Any:
        return self.agent.run(self.messages)

    async def acall(self) -> Any:
        return await self.aagent.run(self.messages)


class LiteLLMSide:
    """LiteLLM: ``litellm.completion(model="anthropic/...", messages=..., api_base=...)`` and
    ``await litellm.acompletion(...)``, as its documentation shows them."""

    def __init__(self, base: str, messages: List[Dict[str, Any]], tools: bool) -> None:
        import litellm

        litellm.telemetry = False
        litellm.suppress_debug_info = True
        self.litellm = litellm
        self.kw: Dict[str, Any] = dict(model=f"anthropic/{MODEL}", messages=to_openai(messages),
                                       api_base=base, api_key=API_KEY, max_tokens=1024)
        if tools:
            self.kw["tools"] = [{"type": "function", "function": {
                "name": "read_file", "description": "Reads a file", "parameters": READ_FILE_SCHEMA}}]

    def check(self, response: Any) -> None:
        if response.choices[0].message.content != CANNED_TEXT:
            raise SystemExit(f"litellm: unexpected answer: {str(response)[:400]}")

    def call(self) -> Any:
        return self.litellm.completion(**self.kw)

    async def acall(self) -> Any:
        return await self.litellm.acompletion(**self.kw)


def worker_main(args: argparse.Namespace) -> int:
    """One side, one workload: reads commands on stdin (``sync N``, ``async N``, ``mem``,
    ``quit``), answers one JSON line each: the seconds of each of N calls, or memory in kB."""
    rss_start = vm_kb("VmRSS")
    t0 = time.perf_counter()
    with open(args.workload) as f:
        messages = json.load(f)
    tools = any(b.get("type") == "tool_use" for m in messages for b in m["content"])
    side = (OmaSide if args.side == "oma" else LiteLLMSide)(args.provider, messages, tools)
    loop = asyncio.new_event_loop()
    # the first call of each mode: imports, compilation, connection pools; reported, not measured
    first = time.perf_counter()
    side.check(side.call())
    first_sync = time.perf_counter() - first
    first = time.perf_counter()
    side.check(loop.run_until_complete(side.acall()))
    first_async = time.perf_counter() - first
    print(json.dumps({"ready": True, "setup_s": time.perf_counter() - t0, "first_sync_s": first_sync,
                      "first_async_s": first_async, "rss_start_kb": rss_start,
                      "rss_ready_kb": vm_kb("VmRSS")}), flush=True)

    async def abatch(n: int) -> List[float]:
        out = []
        for _ in range(n):
            t = time.perf_counter()
            r = await side.acall()
            out.append(time.perf_counter() - t)
            side.check(r)
        return out

    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "sync":
            samples = []
            for _ in range(int(cmd[1])):
                t = time.perf_counter()
                r = side.call()
                samples.append(time.perf_counter() - t)
                side.check(r)
            print(json.dumps(samples), flush=True)
        elif cmd[0] == "async":
            print(json.dumps(loop.run_until_complete(abatch(int(cmd[1])))), flush=True)
        elif cmd[0] == "mem":
            print(json.dumps({"hwm_kb": vm_kb("VmHWM"), "rss_kb": vm_kb("VmRSS")}), flush=True)
        elif cmd[0] == "quit":
            break
    return 0


# --- The parent ---------------------------------------------------------------------------------

def side_env(side: str) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.lower().endswith("_proxy") and not k.startswith(("ANTHROPIC_", "OPENAI_", "LITELLM_"))}
    env["OMA_COMPONENT_QUIET"] = "1"
    env["NO_PROXY"] = "*"
    if side == "litellm":
        env.update(LITELLM_ENV)
    return env


class Worker:
    def __init__(self, side: str, workload: str, provider: str, deadline_s: int,
                 wrap: Optional[List[str]] = None) -> None:
        cmd = [sys.executable, os.path.abspath(__file__), "_worker", "--side", side,
               "--workload", workload, "--provider", provider]
        self.proc = subprocess.Popen(["timeout", "-k", "5", str(deadline_s)] + (wrap or []) + cmd,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=side_env(side), text=True)
        self.ready = self.read()

    def read(self) -> Any:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"a worker exited (status {self.proc.wait()})")
        return json.loads(line)

    def ask(self, cmd: str) -> Any:
        assert self.proc.stdin is not None
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        return self.read()

    def close(self) -> None:
        try:
            self.ask("quit")
        except (BrokenPipeError, SystemExit, ValueError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def start_provider(max_seconds: int) -> Tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "_provider", "--max-seconds", str(max_seconds)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    m = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
    if not m:
        proc.kill()
        raise SystemExit(f"the provider did not start: {line!r}")
    return proc, m.group(1)


def provider_stats(base: str) -> Dict[str, int]:
    import urllib.request
    with urllib.request.urlopen(base + "/__stats", timeout=10) as r:  # noqa: S310 (loopback)
        return json.loads(r.read())


def pct(samples: List[float], q: float) -> float:
    s = sorted(samples)
    k = (len(s) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def check_network(workloads_dir: str, base: str, out_dir: str) -> List[str]:
    """Each side once more, on each workload, under ``strace -f -e trace=connect``: the addresses
    every connect() named. Returns the problems (a connect to anything but 127.0.0.1 or a Unix
    socket)."""
    problems = []
    for side in ("oma", "litellm"):
        for w in WORKLOADS:
            log = os.path.join(out_dir, f"strace.{side}.{w}.log")
            wk = Worker(side, os.path.join(workloads_dir, w + ".json"), base, 300,
                        wrap=["strace", "-f", "-qq", "-e", "trace=connect", "-o", log])
            wk.ask("sync 3")
            wk.ask("async 3")
            wk.close()
            with open(log) as f:
                calls = [line for line in f if "connect(" in line]
            outside = [c.strip() for c in calls
                       if "AF_UNIX" not in c and 'inet_addr("127.0.0.1")' not in c
                       and "AF_UNSPEC" not in c]
            n_inet = sum(1 for c in calls if "AF_INET" in c)
            print(f"network check: {side} {w}: {len(calls)} connect() calls, {n_inet} to 127.0.0.1, "
                  f"{len(outside)} elsewhere", file=sys.stderr)
            problems += [f"{side} {w}: {c}" for c in outside]
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd")
    p = sub.add_parser("_provider")
    p.add_argument("--max-seconds", type=int, default=3600)
    w = sub.add_parser("_worker")
    w.add_argument("--side", choices=["oma", "litellm"], required=True)
    w.add_argument("--workload", required=True)
    w.add_argument("--provider", required=True)
    parser.add_argument("--workloads", default=os.path.join(REPO, "target", "workloads"))
    parser.add_argument("--only", nargs="*", default=WORKLOADS, help="workloads to measure")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--calls", type=int, default=20, help="calls per batch (each round: one sync, one async batch)")
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    parser.add_argument("--check-network", action="store_true", help="also run each side under strace (needs strace)")
    args = parser.parse_args()
    if args.cmd == "_provider":
        return provider_main(args)
    if args.cmd == "_worker":
        return worker_main(args)

    for wname in args.only:
        if not os.path.exists(os.path.join(args.workloads, wname + ".json")):
            raise SystemExit(f"no {wname}.json in {args.workloads}: cargo run -q -p oma-host-tests --bin gen-workloads -- {args.workloads}")
    # the versions from the installed metadata: importing litellm here, in a process without
    # LITELLM_ENV, would fetch its model cost map from the network
    from importlib.metadata import version
    versions = {"litellm": version("litellm"), "wasmtime": version("wasmtime"), "httpx": version("httpx"),
                "urllib3": version("urllib3"), "python": sys.version.split()[0]}
    provider, base = start_provider(3600)
    results: Dict[str, Any] = {"versions": versions, "load_before": open("/proc/loadavg").read().split()[:3],
                               "rounds": args.rounds, "calls": args.calls, "workloads": {}}
    print(f"versions: {versions}; load before: {' '.join(results['load_before'])}", file=sys.stderr)
    try:
        for wname in args.only:
            path = os.path.join(args.workloads, wname + ".json")
            workers = {s: Worker(s, path, base, 3000) for s in ("oma", "litellm")}
            samples: Dict[str, Dict[str, List[float]]] = {s: {"sync": [], "async": []} for s in workers}
            before = provider_stats(base)["requests"]
            for r in range(args.rounds):
                order = ["oma", "litellm"] if r % 2 == 0 else ["litellm", "oma"]
                for mode in ("sync", "async"):
                    for s in order:
                        samples[s][mode] += workers[s].ask(f"{mode} {args.calls}")
            sent = provider_stats(base)["requests"] - before
            entry: Dict[str, Any] = {"provider_requests": sent, "load_after": open("/proc/loadavg").read().split()[:3]}
            for s, wk in workers.items():
                mem = wk.ask("mem")
                entry[s] = {"ready": wk.ready, "mem": mem}
                for mode in ("sync", "async"):
                    xs = samples[s][mode]
                    entry[s][mode] = {"n": len(xs), "median_ms": statistics.median(xs) * 1e3,
                                      "p10_ms": pct(xs, 0.1) * 1e3, "p90_ms": pct(xs, 0.9) * 1e3}
                wk.close()
            expected = 2 * 2 * args.rounds * args.calls
            if sent != expected:
                raise SystemExit(f"{wname}: the provider saw {sent} requests, expected {expected}")
            results["workloads"][wname] = entry
            o, lt = entry["oma"], entry["litellm"]
            print(f"{wname:16s} sync  oma {o['sync']['median_ms']:7.3f} ms  litellm {lt['sync']['median_ms']:7.3f} ms  "
                  f"x{lt['sync']['median_ms'] / o['sync']['median_ms']:.1f} | async oma {o['async']['median_ms']:7.3f} "
                  f"litellm {lt['async']['median_ms']:7.3f} x{lt['async']['median_ms'] / o['async']['median_ms']:.1f} | "
                  f"peak MiB oma {o['mem']['hwm_kb'] / 1024:.0f} litellm {lt['mem']['hwm_kb'] / 1024:.0f} "
                  f"(load {' '.join(entry['load_after'])})", file=sys.stderr)
        if args.check_network:
            problems = check_network(args.workloads, base, os.path.dirname(os.path.abspath(args.out)) if args.out else "/tmp")
            results["network_check"] = {"outside_connects": problems}
            if problems:
                print("network check FAILED:\n  " + "\n  ".join(problems), file=sys.stderr)
        results["provider"] = provider_stats(base)
    finally:
        provider.send_signal(signal.SIGTERM)
        provider.wait(timeout=10)
    results["load_after"] = open("/proc/loadavg").read().split()[:3]
    print(markdown(results))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
    return 1 if results.get("network_check", {}).get("outside_connects") else 0


def markdown(results: Dict[str, Any]) -> str:
    rows = ["| workload | mode | package median (p10-p90) ms | LiteLLM median (p10-p90) ms | LiteLLM / package | peak MiB package / LiteLLM |",
            "| --- | --- | ---: | ---: | ---: | ---: |"]
    for w, e in results["workloads"].items():
        for mode in ("sync", "async"):
            o, lt = e["oma"][mode], e["litellm"][mode]
            mem = f"{e['oma']['mem']['hwm_kb'] / 1024:.0f} / {e['litellm']['mem']['hwm_kb'] / 1024:.0f}" if mode == "sync" else ""
            rows.append(f"| {w} | {mode} | {o['median_ms']:.3f} ({o['p10_ms']:.3f}-{o['p90_ms']:.3f}) | "
                        f"{lt['median_ms']:.3f} ({lt['p10_ms']:.3f}-{lt['p90_ms']:.3f}) | "
                        f"{lt['median_ms'] / o['median_ms']:.1f}x | {mem} |")
    rows.append("")
    rows.append(f"load average before {' '.join(results['load_before'])}, after {' '.join(results['load_after'])}; "
                f"{results['rounds']} rounds x {results['calls']} calls per mode and side; {results['versions']}")
    return "\n".join(rows)


if __name__ == "__main__":
    sys.exit(main())
