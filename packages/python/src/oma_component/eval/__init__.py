"""OMA's evaluation (``@open-multi-agent/core/eval``) in Python: eval sets, scorers (OMA's
built-in ones and LLM judges among them), a runner with progress and reports, gates, and
evaluation stores.

    from oma_component import eval as oma_eval

    cases = oma_eval.define_eval_set({"name": "smoke", "version": "1", "cases": [
        {"id": "sum", "input": "What is 2 + 2?", "expected": "4"}]})
    exact = oma_eval.define_scorer("exact", lambda ctx: {"score": float(ctx["output"] == ctx["evalCase"]["expected"])},
                                   version="1")
    report = oma_eval.run_eval_set(cases, oma_eval.target_from_agent(name="a", model="claude-sonnet-4-6"),
                                   scorers=[exact])
    verdict = oma_eval.evaluate_gate(report, {"schemaVersion": 1,
                                              "thresholds": [{"scorer": "exact", "metric": "avg", "min": 1}]})

Values (sets, cases, records, reports, policies, verdicts) are dicts with OMA's JSON keys;
options are snake_case keywords.
"""

from ._types import (
    EvalCase,
    EvalProgressEvent,
    EvalRecord,
    EvalRunReport,
    EvalSet,
    EvalTargetContext,
    GateFailure,
    GateMetric,
    GatePolicy,
    GateThreshold,
    GateVerdict,
    ScoreResult,
    ScorerAggregate,
    ScorerContext,
    TargetOutput,
)
from .evalset import EvalSetError, define_eval_set
from .gate import GatePolicyError, evaluate_gate
from ._values import ScorerTimeoutError
from .runner import EvalTarget, run_eval_set, run_eval_set_async
from .scorer import DefinedScorer, Scorer, define_scorer
from .target import target_from_agent
from .judge import JudgeScorer, create_judge_scorer
from .scorers import (
    BuiltinScorer,
    cost_budget_scorer,
    create_answer_relevancy_scorer,
    dependency_utilization_scorer,
    duplicate_work_scorer,
    no_progress_scorer,
    structured_output_compliance_scorer,
    tool_call_success_scorer,
)
from .online import OnlineEvaluator
from .store import EVAL_STORE_SCHEMA_MAJOR, EvalPage, EvalStore, EvalStoreError, InMemoryEvalStore

__all__ = [
    "OnlineEvaluator", "define_eval_set", "define_scorer", "run_eval_set", "run_eval_set_async", "evaluate_gate", "target_from_agent",
    "InMemoryEvalStore", "EvalStore", "EvalStoreError", "EVAL_STORE_SCHEMA_MAJOR", "EvalPage",
    "EvalSetError", "GatePolicyError", "ScorerTimeoutError", "Scorer", "DefinedScorer", "EvalTarget",
    "EvalCase", "EvalSet", "EvalRecord", "EvalRunReport", "EvalProgressEvent", "EvalTargetContext", "GateFailure",
    "GateMetric", "GatePolicy", "GateThreshold", "GateVerdict", "ScoreResult", "ScorerAggregate", "ScorerContext",
    "TargetOutput",
    "cost_budget_scorer", "dependency_utilization_scorer", "duplicate_work_scorer", "no_progress_scorer",
    "structured_output_compliance_scorer", "tool_call_success_scorer", "create_answer_relevancy_scorer",
    "create_judge_scorer", "BuiltinScorer", "JudgeScorer",
]
