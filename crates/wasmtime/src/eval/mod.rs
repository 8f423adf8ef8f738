//! OMA's evaluation framework for Rust embedders (its `eval` subpath, docs/evaluation.md): eval
//! sets ([`EvalSet::define`]), the checks on what a scorer answers ([`ScoreResult`]), the
//! runner ([`run_eval_set`]) over a target and [`Scorer`]s, the per-scorer aggregates of a
//! run's records ([`aggregate_records`]) and the gate that decides from a report whether a
//! change may ship ([`GatePolicy`], [`evaluate_gate`]), and OMA's stores of a run's records:
//! in memory ([`InMemoryEvalStore`]) and in a durable file ([`FileEvalStore`]); OMA's
//! built-in scorers ([`builtin_scorer`] and its named factories) and LLM judges
//! ([`judge_scorer`], [`answer_relevancy_scorer`]) as [`Scorer`]s, and a target that runs an
//! agent ([`target_from_agent`]), each calling the component through a [`SharedGuest`].
//!
//! These are the rules both language packages hold to the shared tables
//! `fixtures/eval/sets.json`, `reports.json` and `runner.json`; this module runs the same
//! tables. Values a caller hands over as OMA's JSON (a set, a policy, a report, records) are
//! `serde_json` values, checked field by field with OMA's field names and messages; what the
//! module answers is typed, and turns back into OMA's JSON with `to_json`.
//!
//! An agent evaluated against a live provider, scored by an LLM judge (each on a guest of its
//! own, so the candidate's runs and the judge's run side by side):
//!
//! ```no_run
//! # async fn demo(component: &'static [u8]) -> anyhow::Result<()> {
//! use oma_wasmtime::eval::{
//!     answer_relevancy_scorer, run_eval_set, target_from_agent, AgentTargetOptions,
//!     AnswerRelevancyOptions, EvalSet, RunOptions, SharedGuest,
//! };
//! use oma_wasmtime::{agent_config, endpoint, AllowOutbound, GuestOptions, Harness, HarnessOptions};
//!
//! let harness = Harness::new(HarnessOptions::new(component))?;
//! let online = || GuestOptions { hooks: Some(Box::new(AllowOutbound)), ..Default::default() };
//! let candidates = SharedGuest::new(harness.instantiate_with(online()).await?);
//! let judges = SharedGuest::new(harness.instantiate_with(online()).await?);
//! let key = std::env::var("ANTHROPIC_API_KEY")?;
//! let anthropic = endpoint("anthropic", None, Some(key.as_str()));
//!
//! let set = EvalSet::define(&serde_json::json!({"name": "smoke", "version": "1", "cases": [
//!     {"id": "capital", "input": "Capital of France?", "expected": "Paris"},
//! ]}))?;
//! let judge = agent_config("judge", "claude-haiku-4-5", anthropic.clone());
//! let relevancy = answer_relevancy_scorer(
//!     &judges,
//!     AnswerRelevancyOptions { judges: vec![judge], ..Default::default() },
//! )
//! .await??;
//! let candidate = agent_config("candidate", "claude-sonnet-4-6", anthropic);
//! let target = target_from_agent(&candidates, candidate, AgentTargetOptions::default());
//! let options = RunOptions { scorers: vec![relevancy], ..Default::default() };
//! let report = run_eval_set(&set, &target, options, &mut judges.clone()).await??;
//! println!("{}", report.to_json());
//! # Ok(()) }
//! ```

mod component;
mod file;
mod gate;
mod judge;
mod report;
mod runner;
mod score;
mod scorers;
mod set;
mod store;
mod target;

pub use crate::durable_log::{FileDiagnostic, FileStoreError, FileStoreErrorCode};
pub use crate::durable_store::FileStoreOpError;
pub use component::{CodecResult, EvalGuest, RuleError, SharedGuest};
pub use file::{
    FileEvalStore, FileEvalStoreError, FILE_EVAL_STORE_FORMAT, FILE_EVAL_STORE_FORMAT_VERSION,
};
pub use gate::{
    evaluate_gate, BaselineRule, GateFailure, GateFailureKind, GatePolicy, GateResult, Metric,
    Threshold,
};
pub use judge::{
    answer_relevancy_scorer, judge_scorer, AnswerRelevancyOptions, JudgePrompt, JudgeScorerOptions,
};
pub use report::{aggregate_records, Aggregate, ScorerRef};
pub use runner::{
    run_eval_set, BoxFuture, EvalProgress, EvalRecordStore, EvalReport, ProgressFn, Redact,
    RunOptions, RunOptionsError, RunTraces, ScoreContext, Scorer, StorePayloads, TargetContext,
    TargetOutput,
};
pub use score::{ScoreError, ScoreErrorClass, ScoreResult};
pub use scorers::{
    builtin_scorer, cost_budget_scorer, dependency_utilization_scorer, duplicate_work_scorer,
    no_progress_scorer, structured_output_compliance_scorer, tool_call_success_scorer, MadeScorer,
};
pub use set::{EvalCase, EvalDefaults, EvalDefinitionError, EvalSet};
pub use store::{
    EvalAppendResult, EvalDeleteResult, EvalPage, EvalStoreClock, EvalStoreError,
    EvalStoreErrorCode, InMemoryEvalStore, EVAL_STORE_SCHEMA_MAJOR,
};
pub use target::{target_from_agent, AgentTargetOptions};

use serde_json::Value;

/// Whether `value` is one of OMA's trace attribute values: a string, a finite number, a boolean,
/// or an array whose items are all of one of those kinds (an empty array is one).
pub fn is_trace_attribute(value: &Value) -> bool {
    match value {
        Value::String(_) | Value::Bool(_) | Value::Number(_) => true,
        Value::Array(items) => match items.first() {
            None => true,
            Some(Value::String(_)) => items.iter().all(Value::is_string),
            Some(Value::Bool(_)) => items.iter().all(Value::is_boolean),
            Some(Value::Number(_)) => items.iter().all(Value::is_number),
            Some(_) => false,
        },
        _ => false,
    }
}

/// `text` without the white space JavaScript's `String.prototype.trim` removes (Unicode white
/// space and line terminators, the byte order mark included, U+0085 not).
pub(crate) fn js_trim(text: &str) -> &str {
    text.trim_matches(|c: char| (c.is_whitespace() && c != '\u{85}') || c == '\u{feff}')
}
