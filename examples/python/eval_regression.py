"""Offline evaluation from the oma_component Python package: two model configurations run over
one eval set, scored, stored in a file, and the candidate held to a gate against the baseline,
as OMA's offline-regression pattern does.

The "provider" is a few lines of ``http.server`` on 127.0.0.1 answering in Anthropic's format
(4 for arithmetic, Paris otherwise), so the example runs offline; point ``base_url`` at a real
endpoint (and set ``api_key``) to evaluate real models.

    pip install ./packages/python        # or: PYTHONPATH=packages/python/src after its build
    python examples/python/eval_regression.py
"""

import json
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from oma_component import eval as oma_eval
from oma_component.eval.file import FileEvalStore


class Provider(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["content-length"])))
        content = request["messages"][-1]["content"]
        prompt = content if isinstance(content, str) else "".join(b.get("text", "") for b in content)
        body = json.dumps({"id": "msg_1", "type": "message", "role": "assistant", "model": request["model"],
                           "content": [{"type": "text", "text": "4" if "2 + 2" in prompt else "Paris"}],
                           "stop_reason": "end_turn", "usage": {"input_tokens": 8, "output_tokens": 1}}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def exact_match(ctx: oma_eval.ScorerContext) -> oma_eval.ScoreResult:
    passed = ctx["output"] == ctx["evalCase"].get("expected")
    return {"score": 1.0 if passed else 0.0, "pass": passed}


def main() -> int:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Provider)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    directory = tempfile.TemporaryDirectory()
    try:
        cases = oma_eval.define_eval_set({"name": "offline-regression-fixture", "version": "1.0.0", "cases": [
            {"id": "arithmetic", "input": "What is 2 + 2?", "expected": "4", "tags": ["critical"]},
            {"id": "capital", "input": "What is the capital of France?", "expected": "Paris"}]})
        exact = oma_eval.define_scorer("exact_match", exact_match, version="1")
        store = FileEvalStore.open(Path(directory.name) / "eval.ndjson")
        endpoint = {"provider": "anthropic", "base_url": f"http://127.0.0.1:{server.server_address[1]}",
                    "api_key": "sk-example"}
        reports = {}
        for name, model, system in (("baseline-model", "fixture-baseline-v1", None),
                                    ("candidate-model", "fixture-candidate-v2", "Answer directly and concisely.")):
            target = oma_eval.target_from_agent(name=name, model=model, system_prompt=system, **endpoint)
            reports[name] = oma_eval.run_eval_set(cases, target, scorers=[exact], repeats=2, store=store,
                                                  metadata={"target_name": name})
        verdict = oma_eval.evaluate_gate(reports["candidate-model"], {
            "schemaVersion": 1,
            "thresholds": [{"scorer": "exact_match", "metric": "passRate", "min": 1},
                           {"scorer": "exact_match", "metric": "avg", "min": 1, "tag": "critical"}],
            "maxScorerErrorRate": 0, "maxTargetErrorRate": 0, "baseline": {"maxRegression": 0},
        }, reports["baseline-model"])
        stored = len(store.query(limit=1000)["items"])
        store.close()
        print(json.dumps({"targets": list(reports), "candidate": reports["candidate-model"]["aggregates"],
                          "verdict": verdict, "stored": stored}, indent=2))
        return 0 if verdict["pass"] and stored == 8 else 1
    finally:
        server.shutdown()
        directory.cleanup()


if __name__ == "__main__":
    sys.exit(main())
