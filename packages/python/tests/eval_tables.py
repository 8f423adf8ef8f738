"""The runner of fixtures/eval/runner.json's cases for the Python package (see the table's
contract): a scripted target and scripted scorers through ``run_eval_set``."""

import re
import threading
import time

from oma_component import CancelToken
from oma_component.eval import InMemoryEvalStore, run_eval_set

HANG_S = 5.0


def snake(name):
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


class ScriptedScorer:
    def __init__(self, spec):
        self.spec = spec
        self.name = spec["name"]
        self.version = spec.get("version")
        self.timeout_ms = spec.get("timeoutMs")

    def score(self, ctx):
        rule = self.spec.get("rule")
        if rule == "exact":
            case = ctx["evalCase"]
            same = "expected" in case and ctx["output"] == case["expected"]
            return {"score": 1 if same else 0, "pass": same}
        if rule == "length":
            return {"score": 1 if isinstance(ctx["output"], str) else 0}
        answer = self.spec["answers"][ctx["evalCase"]["id"]]
        if "throws" in answer:
            raise RuntimeError(answer["throws"])
        if answer.get("hangs"):
            ctx["signal"].wait(HANG_S)
            return {"score": 1}
        return dict(answer)


class FailingStore(InMemoryEvalStore):
    def __init__(self, fail_for):
        super().__init__()
        self.fail_for = set(fail_for)

    def append(self, records):
        if any(r.get("caseId") in self.fail_for for r in records):
            raise OSError("disk full")
        return super().append(records)


def run_case(case, capture=False):
    """Runs one case; gives what the table's "expect" holds."""
    script = case["target"]

    def target(value, context):
        answer = script[context["caseId"]]
        if "throws" in answer:
            raise RuntimeError(answer["throws"])
        if "returns" in answer:
            return answer["returns"]
        return dict(answer)

    options = {snake(k): v for k, v in case.get("options", {}).items() if k != "cancelAfter"}
    progress = []
    token = CancelToken()
    done = [0]
    cancel_after = case.get("options", {}).get("cancelAfter")

    def observe(event):
        progress.append(dict(event))
        if event["type"] == "case_done":
            done[0] += 1
            if cancel_after is not None and done[0] >= cancel_after:
                token.cancel()

    store = FailingStore(case["store"].get("failFor", [])) if "store" in case else None
    report = run_eval_set(case["set"], target, scorers=[ScriptedScorer(s) for s in case["scorers"]],
                          on_progress=observe, cancel=token, store=store, **options)
    run_ids = {r["evalRunId"] for r in report["records"]}
    assert run_ids == {report["evalRunId"]} or not report["records"]
    records = []
    for record in report["records"]:
        assert isinstance(record["usage"]["durationMs"], (int, float))
        shown = {k: v for k, v in record.items() if k not in ("recordId", "evalRunId", "timestampUnixMs")}
        if "error" in shown:  # the class name of what a target or scorer raised is the language's
            shown["error"] = {k: v for k, v in shown["error"].items() if k != "name"}
        shown["usage"] = {k: v for k, v in record["usage"].items() if k != "durationMs"}
        if not shown["usage"]:
            del shown["usage"]
        records.append(shown)
    kept = {k: report[k] for k in ("caseCount", "repeats", "aborted", "warnings", "aggregates", "totals") if k in report}
    out = {"records": records, "progress": progress, "report": kept}
    if store is not None:
        out["stored"] = [r["caseId"] for r in store.records()]
    return out


__all__ = ["run_case", "snake", "threading", "time"]
