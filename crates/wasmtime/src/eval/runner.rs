//! OMA's `runEvalSet`: every selected case of an eval set (times `repeats`) through a target,
//! each sample scored by every scorer in turn, `concurrency` samples at a time, each sample's
//! records appended to a store when one is given, and a report with per-scorer aggregates.
//!
//! The runner's redaction (error messages, `redacted` payloads) is the component's: the codec's
//! `redact-sensitive-text`, through a [`Redact`] (a [`Guest`] or a [`DriverGuest`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::task::Poll;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Map, Value};

use super::component::RuleError;
use super::report::{aggregate_records, Aggregate, ScorerRef};
use super::score::{ScoreError, ScoreErrorClass, ScoreResult};
use super::set::{EvalCase, EvalSet};
use crate::{CancelToken, DriverGuest, Guest};

const DEFAULT_REPEATS: u64 = 1;
const DEFAULT_CONCURRENCY: u64 = 2;
const TARGET_SCORER_NAME: &str = "_target";
const PAYLOAD_MAX_UNITS: usize = 8 * 1024;
const ERROR_MESSAGE_UNITS: usize = 1024;

/// A boxed future that may move between threads, what scorers and redactors answer with.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The component's secret redaction (the codec's `redact-sensitive-text`), which the runner
/// applies to error messages and to `redacted` payloads.
pub trait Redact: Send {
    /// `text` with what looks like a secret replaced by `[redacted]`; an error is a trap.
    fn redact<'a>(&'a mut self, text: &'a str) -> BoxFuture<'a, anyhow::Result<String>>;
}

impl Redact for Guest {
    fn redact<'a>(&'a mut self, text: &'a str) -> BoxFuture<'a, anyhow::Result<String>> {
        Box::pin(self.redact_sensitive_text(text))
    }
}

impl Redact for DriverGuest {
    fn redact<'a>(&'a mut self, text: &'a str) -> BoxFuture<'a, anyhow::Result<String>> {
        Box::pin(self.redact_sensitive_text(text))
    }
}

/// What a target answers for one sample (OMA's `TargetOutput`): the output scorers see and,
/// when the target ran an agent, its result as OMA's `AgentRunResult` JSON (the runner reads
/// `identity`, `tokenUsage` or `totalTokenUsage`, `cost` or `costs`, and `metadata`).
#[derive(Debug, Clone, PartialEq)]
pub struct TargetOutput {
    /// The output.
    pub output: Value,
    /// The agent's result, when there is one.
    pub result: Option<Value>,
}

impl TargetOutput {
    /// An output without a result.
    pub fn new(output: Value) -> Self {
        TargetOutput {
            output,
            result: None,
        }
    }

    /// A target's answer given as OMA's JSON (`{output, result?}`); anything else is OMA's
    /// error, which the runner records as the sample's target error.
    pub fn from_json(value: &Value) -> anyhow::Result<Self> {
        match value
            .as_object()
            .and_then(|o| o.get("output").map(|out| (o, out)))
        {
            Some((object, output)) => Ok(TargetOutput {
                output: output.clone(),
                result: object.get("result").cloned(),
            }),
            None => {
                anyhow::bail!("EvalTarget must return a TargetOutput object with an output field.")
            }
        }
    }
}

/// What a target is told with each input.
#[derive(Debug, Clone)]
pub struct TargetContext {
    /// The case's id.
    pub case_id: String,
    /// The repeat, from 1.
    pub repeat: u64,
    /// The case's metadata, then the run's.
    pub metadata: Map<String, Value>,
    /// The evaluation's cancellation (an agent run should be given it).
    pub cancel: CancelToken,
}

/// What a scorer is given for one sample.
#[derive(Debug, Clone)]
pub struct ScoreContext {
    /// The case.
    pub case: EvalCase,
    /// The target's output.
    pub output: Value,
    /// The agent's result, when the target gave one.
    pub result: Option<Value>,
    /// The agent run's stored trace (OMA's `StoredRun` JSON), when the run has a
    /// [`trace_store`](RunOptions::trace_store) and the result an identity the store knows.
    pub trace: Option<Value>,
    /// The case's metadata, the run's, then the result's.
    pub metadata: Map<String, Value>,
    /// Cancelled when the evaluation is, or when the scorer's timeout passes.
    pub cancel: CancelToken,
}

type ScoreFn =
    Box<dyn Fn(ScoreContext) -> BoxFuture<'static, anyhow::Result<ScoreResult>> + Send + Sync>;

/// A scorer (OMA's `Scorer`): a name, an optional version (a baseline comparison sees a
/// scoring change only through it), an optional timeout, and the scoring function. What the
/// function fails with, a result [`ScoreResult::check`] refuses, or the timeout passing is the
/// sample's `scorer_error` record, never a score.
pub struct Scorer {
    name: String,
    version: Option<String>,
    timeout: Option<Duration>,
    score: ScoreFn,
}

impl std::fmt::Debug for Scorer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scorer")
            .field("name", &self.name)
            .field("version", &self.version)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Scorer {
    /// A scorer named `name` scoring with `score`.
    pub fn new<F, Fut>(name: impl Into<String>, score: F) -> Self
    where
        F: Fn(ScoreContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = anyhow::Result<ScoreResult>> + Send + 'static,
    {
        Scorer {
            name: name.into(),
            version: None,
            timeout: None,
            score: Box::new(move |context| Box::pin(score(context))),
        }
    }

    /// The scorer with a version.
    pub fn with_version(mut self, version: impl Into<String>) -> Self {
        self.version = Some(version.into());
        self
    }

    /// The scorer with a timeout: once it passes, the sample's record is a `timeout`
    /// `scorer_error`, the scorer's [`ScoreContext::cancel`] is cancelled, and the scoring is
    /// left to end on its own in a task of the tokio runtime (never cut off halfway through a
    /// call into a guest).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The scorer's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The scorer's version, when it has one.
    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }

    /// The scorer's timeout, when it has one.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// Scores `context` with the scoring function alone (OMA's `scorer.score(context)`): no
    /// timeout, and the answer unchecked; the runner adds both.
    pub async fn score(&self, context: ScoreContext) -> anyhow::Result<ScoreResult> {
        (self.score)(context).await
    }

    /// The scorer's name and version, as records name it.
    pub fn id(&self) -> ScorerRef {
        ScorerRef {
            name: self.name.clone(),
            version: self.version.clone(),
        }
    }
}

/// What a run keeps of each sample's input, output and expected value in its records.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StorePayloads {
    /// Nothing (the default).
    #[default]
    None,
    /// The texts with secrets redacted, cut to 8,192 characters.
    Redacted,
    /// The texts, cut to 8,192 characters.
    Full,
}

/// Where a run appends each sample's records (OMA's `EvalStore.append`).
pub trait EvalRecordStore {
    /// Keeps `records` (OMA's evaluation records as JSON), all or none.
    fn append(&self, records: &[Value]) -> Result<(), String>;
}

/// Where a run's scorers find each agent run's stored trace (OMA's `TraceStore.getRun`):
/// [`InMemoryTraceStore`](crate::observability::InMemoryTraceStore) and
/// [`FileTraceStore`](crate::observability::FileTraceStore).
pub trait RunTraces {
    /// The run `run_id` as OMA's `StoredRun` JSON, `None` when the store has none of it; an
    /// error fails the evaluation, as OMA's rejection does.
    fn get_run<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, anyhow::Result<Option<Value>>>;
}

impl RunTraces for crate::observability::InMemoryTraceStore {
    fn get_run<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, anyhow::Result<Option<Value>>> {
        Box::pin(async move {
            let run =
                crate::observability::InMemoryTraceStore::get_run(self, run_id, false).await?;
            Ok(run.map(Value::Object))
        })
    }
}

impl RunTraces for crate::observability::FileTraceStore {
    fn get_run<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, anyhow::Result<Option<Value>>> {
        Box::pin(async move {
            let run = crate::observability::FileTraceStore::get_run(self, run_id, false).await?;
            Ok(run.map(Value::Object))
        })
    }
}

/// A progress event of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EvalProgress {
    /// A sample started.
    CaseStart {
        /// The case.
        case_id: String,
        /// The repeat.
        repeat: u64,
    },
    /// A sample's target failed.
    TargetError {
        /// The case.
        case_id: String,
        /// The repeat.
        repeat: u64,
    },
    /// A scorer failed on a sample.
    ScorerError {
        /// The case.
        case_id: String,
        /// The repeat.
        repeat: u64,
        /// The scorer's name.
        scorer: String,
    },
    /// A sample ended.
    CaseDone {
        /// The case.
        case_id: String,
        /// The repeat.
        repeat: u64,
    },
}

impl EvalProgress {
    /// The event as OMA's JSON.
    pub fn to_json(&self) -> Value {
        match self {
            EvalProgress::CaseStart { case_id, repeat } => {
                json!({"type": "case_start", "caseId": case_id, "repeat": repeat})
            }
            EvalProgress::TargetError { case_id, repeat } => {
                json!({"type": "target_error", "caseId": case_id, "repeat": repeat})
            }
            EvalProgress::ScorerError {
                case_id,
                repeat,
                scorer,
            } => {
                json!({"type": "scorer_error", "caseId": case_id, "repeat": repeat, "scorer": scorer})
            }
            EvalProgress::CaseDone { case_id, repeat } => {
                json!({"type": "case_done", "caseId": case_id, "repeat": repeat})
            }
        }
    }
}

/// A run's progress callback.
pub type ProgressFn<'a> = Box<dyn Fn(&EvalProgress) + Send + Sync + 'a>;

/// The options of a run (OMA's `RunEvalSetOptions`).
#[derive(Default)]
pub struct RunOptions<'a> {
    /// The scorers, in the order they score each sample.
    pub scorers: Vec<Scorer>,
    /// How many times each case runs (else the set's default, else 1).
    pub repeats: Option<u64>,
    /// How many samples run at a time (else the set's default, else 2).
    pub concurrency: Option<u64>,
    /// Only the cases with any of these tags (every case when empty).
    pub filter_tags: Vec<String>,
    /// Metadata for every record, after the case's.
    pub metadata: Map<String, Value>,
    /// Where scorers find the stored trace of each sample's agent run (by its result's
    /// `identity.runId`), given to them as [`ScoreContext::trace`].
    pub trace_store: Option<&'a (dyn RunTraces + Sync)>,
    /// Where each sample's records are appended.
    pub store: Option<&'a (dyn EvalRecordStore + Sync)>,
    /// The evaluation's run id (a new one when not set).
    pub eval_run_id: Option<String>,
    /// What records keep of the payloads.
    pub store_payloads: StorePayloads,
    /// Stops taking new samples once cancelled.
    pub cancel: Option<CancelToken>,
    /// Sees each progress event.
    pub on_progress: Option<ProgressFn<'a>>,
}

/// An option refused before any sample runs (OMA's message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOptionsError(pub String);

impl std::fmt::Display for RunOptionsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RunOptionsError {}

/// What a run gives (OMA's `EvalRunReport`).
#[derive(Debug, Clone, PartialEq)]
pub struct EvalReport {
    /// The evaluation's run id.
    pub eval_run_id: String,
    /// When it started, milliseconds since the Unix epoch.
    pub started_at_unix_ms: u64,
    /// How long it took, in milliseconds.
    pub duration_ms: u64,
    /// The set's name.
    pub set_name: String,
    /// The set's version.
    pub set_version: String,
    /// The run's metadata.
    pub metadata: Map<String, Value>,
    /// How many cases were selected.
    pub case_count: u64,
    /// The repeats.
    pub repeats: u64,
    /// Whether the run was cancelled.
    pub aborted: bool,
    /// The samples whose records a store did not keep.
    pub warnings: Vec<String>,
    /// Every record (OMA's evaluation records as JSON), sample by sample in case order.
    pub records: Vec<Value>,
    /// One aggregate per scorer.
    pub aggregates: Vec<Aggregate>,
    /// Tokens summed (input, output), when any result had them.
    pub tokens: Option<(u64, u64)>,
    /// Costs summed per currency, in currency order.
    pub costs: Vec<(String, f64)>,
    /// How many samples' targets failed.
    pub target_errors: u64,
}

impl EvalReport {
    /// The report as OMA's JSON (what [`evaluate_gate`](super::evaluate_gate) reads).
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        out.insert("schemaVersion".into(), 1.into());
        out.insert("evalRunId".into(), self.eval_run_id.clone().into());
        out.insert("startedAtUnixMs".into(), self.started_at_unix_ms.into());
        out.insert("durationMs".into(), self.duration_ms.into());
        out.insert(
            "evalSet".into(),
            json!({"name": self.set_name, "version": self.set_version}),
        );
        out.insert("metadata".into(), Value::Object(self.metadata.clone()));
        out.insert("caseCount".into(), self.case_count.into());
        out.insert("repeats".into(), self.repeats.into());
        if self.aborted {
            out.insert("aborted".into(), true.into());
        }
        if !self.warnings.is_empty() {
            out.insert("warnings".into(), self.warnings.clone().into());
        }
        out.insert("records".into(), Value::Array(self.records.clone()));
        let aggregates = self.aggregates.iter().map(Aggregate::to_json).collect();
        out.insert("aggregates".into(), Value::Array(aggregates));
        let mut totals = Map::new();
        if let Some((input, output)) = self.tokens {
            totals.insert(
                "tokens".into(),
                json!({"input_tokens": input, "output_tokens": output}),
            );
        }
        if !self.costs.is_empty() {
            let costs = self
                .costs
                .iter()
                .map(|(currency, amount)| {
                    json!({"currency": currency, "amount": crate::number::js_json_number(*amount)})
                })
                .collect();
            totals.insert("costs".into(), Value::Array(costs));
        }
        totals.insert("targetErrors".into(), self.target_errors.into());
        out.insert("totals".into(), Value::Object(totals));
        Value::Object(out)
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A fresh id with `prefix`, from the clock and a process-wide counter.
fn fresh_id(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}_{nanos:x}{:08x}{n:x}", std::process::id())
}

/// `text` cut to at most `units` UTF-16 code units, never splitting a character.
fn cut_utf16(text: &str, units: usize) -> &str {
    let mut used = 0;
    for (i, c) in text.char_indices() {
        used += c.len_utf16();
        if used > units {
            return &text[..i];
        }
    }
    text
}

fn truncate(text: String) -> String {
    if text.encode_utf16().count() <= PAYLOAD_MAX_UNITS {
        return text;
    }
    let marker = format!("\n[truncated at {PAYLOAD_MAX_UNITS} characters]");
    let keep = PAYLOAD_MAX_UNITS - marker.len();
    format!("{}{marker}", cut_utf16(&text, keep))
}

fn stringify(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// The state the samples running at once share.
struct Shared<'r, R> {
    redactor: tokio::sync::Mutex<&'r mut R>,
    trap: Mutex<Option<anyhow::Error>>,
}

impl<R: Redact> Shared<'_, R> {
    async fn redact(&self, text: &str) -> String {
        let mut redactor = self.redactor.lock().await;
        match redactor.redact(text).await {
            Ok(text) => text,
            Err(trap) => {
                lock(&self.trap).get_or_insert(trap);
                String::new()
            }
        }
    }

    async fn payload(
        &self,
        mode: StorePayloads,
        parts: [(&str, Option<&Value>); 3],
    ) -> Option<Value> {
        if mode == StorePayloads::None {
            return None;
        }
        let mut out = Map::new();
        for (key, value) in parts {
            let Some(value) = value else { continue };
            let mut text = truncate(stringify(value));
            if mode == StorePayloads::Redacted {
                text = truncate(self.redact(&text).await);
            }
            out.insert(key.into(), text.into());
        }
        Some(Value::Object(out))
    }

    /// OMA's `classifyRunFailure(error).errorInfo` for a failure of a target or a scorer.
    async fn error_info(&self, error: &anyhow::Error, timeout: bool) -> Value {
        let (kind, name) = if timeout {
            ("timeout", "TimeoutError")
        } else if let Some(rule) = error.downcast_ref::<RuleError>() {
            match rule.name.as_str() {
                "AbortError" => ("cancellation", "AbortError"),
                name => ("unknown", name),
            }
        } else {
            match error.downcast_ref::<ScoreError>() {
                Some(ScoreError {
                    class: ScoreErrorClass::RangeError,
                    ..
                }) => ("unknown", "RangeError"),
                Some(_) => ("unknown", "TypeError"),
                None => ("unknown", "Error"),
            }
        };
        let mut out = Map::new();
        out.insert("kind".into(), kind.into());
        out.insert("name".into(), name.into());
        let raw = error.to_string();
        if !raw.is_empty() {
            let redacted = self.redact(&raw).await;
            out.insert(
                "message".into(),
                cut_utf16(&redacted, ERROR_MESSAGE_UNITS).into(),
            );
        }
        // OMA's `isRetryableError`: a plain error is, a cancellation is not.
        out.insert("retryable".into(), (kind != "cancellation").into());
        Value::Object(out)
    }
}

struct Sample {
    records: Vec<Value>,
    tokens: Option<(u64, u64)>,
    costs: Vec<(String, f64)>,
    target_error: bool,
}

fn merged(base: &Map<String, Value>, more: Option<&Value>) -> Map<String, Value> {
    let mut out = base.clone();
    if let Some(Value::Object(more)) = more {
        for (k, v) in more {
            out.insert(k.clone(), v.clone());
        }
    }
    out
}

struct Run<'a, 'r, R, T> {
    set: &'a EvalSet,
    target: &'a T,
    options: &'a RunOptions<'a>,
    eval_run_id: &'a str,
    cancel: CancelToken,
    shared: Shared<'r, R>,
}

impl<R, T, Fut> Run<'_, '_, R, T>
where
    R: Redact,
    T: Fn(Value, TargetContext) -> Fut,
    Fut: Future<Output = anyhow::Result<TargetOutput>>,
{
    fn emit(&self, event: EvalProgress) {
        if let Some(on_progress) = &self.options.on_progress {
            on_progress(&event);
        }
    }

    fn base(
        &self,
        case: &EvalCase,
        repeat: u64,
        metadata: &Map<String, Value>,
    ) -> Map<String, Value> {
        let mut out = Map::new();
        out.insert("schemaVersion".into(), 1.into());
        out.insert("recordId".into(), fresh_id("eval_record").into());
        out.insert("evalRunId".into(), self.eval_run_id.into());
        out.insert("source".into(), "offline".into());
        out.insert("timestampUnixMs".into(), now_ms().into());
        out.insert(
            "evalSet".into(),
            json!({"name": self.set.name, "version": self.set.version}),
        );
        out.insert("caseId".into(), case.id.clone().into());
        out.insert("repeat".into(), repeat.into());
        out.insert("metadata".into(), Value::Object(metadata.clone()));
        out
    }

    async fn sample(&self, case: &EvalCase, repeat: u64) -> Sample {
        let progress =
            |make: fn(String, u64) -> EvalProgress| self.emit(make(case.id.clone(), repeat));
        progress(|case_id, repeat| EvalProgress::CaseStart { case_id, repeat });
        let context_metadata = merged(
            case.metadata.as_ref().unwrap_or(&Map::new()),
            Some(&Value::Object(self.options.metadata.clone())),
        );
        let mode = self.options.store_payloads;
        let started = Instant::now();
        let context = TargetContext {
            case_id: case.id.clone(),
            repeat,
            metadata: context_metadata.clone(),
            cancel: self.cancel.clone(),
        };
        let answered = (self.target)(case.input.clone(), context).await;
        let duration_ms = started.elapsed().as_millis() as u64;
        let output = match answered {
            Ok(output) => output,
            Err(error) => {
                let mut record = self.base(case, repeat, &context_metadata);
                record.insert("scorer".into(), json!({"name": TARGET_SCORER_NAME}));
                record.insert("status".into(), "target_error".into());
                record.insert("usage".into(), json!({"durationMs": duration_ms}));
                record.insert("error".into(), self.shared.error_info(&error, false).await);
                let parts = [
                    ("input", Some(&case.input)),
                    ("output", None),
                    ("expected", case.expected.as_ref()),
                ];
                if let Some(payload) = self.shared.payload(mode, parts).await {
                    record.insert("payload".into(), payload);
                }
                progress(|case_id, repeat| EvalProgress::TargetError { case_id, repeat });
                progress(|case_id, repeat| EvalProgress::CaseDone { case_id, repeat });
                return Sample {
                    records: vec![Value::Object(record)],
                    tokens: None,
                    costs: Vec::new(),
                    target_error: true,
                };
            }
        };
        let result = output.result.as_ref().filter(|r| r.is_object());
        let tokens = result
            .and_then(|r| r.get("totalTokenUsage").or_else(|| r.get("tokenUsage")))
            .filter(|t| t.is_object());
        let costs: Vec<Value> = match result {
            Some(r) => match (r.get("costs"), r.get("cost")) {
                (Some(Value::Array(costs)), _) => costs.clone(),
                (_, Some(cost)) => vec![cost.clone()],
                _ => Vec::new(),
            },
            None => Vec::new(),
        };
        let metadata = merged(&context_metadata, result.and_then(|r| r.get("metadata")));
        let run_ref = result.and_then(|r| r.get("identity")).map(|identity| {
            json!({
                "runId": identity["runId"],
                "attempt": identity["attempt"],
                "traceId": identity["traceId"],
                "rootSpanId": identity["rootSpanId"],
            })
        });
        let parts = [
            ("input", Some(&case.input)),
            ("output", Some(&output.output)),
            ("expected", case.expected.as_ref()),
        ];
        let payload = self.shared.payload(mode, parts).await;
        let mut usage = Map::new();
        if let Some(tokens) = tokens {
            usage.insert("tokens".into(), tokens.clone());
        }
        if costs.len() == 1 {
            usage.insert("cost".into(), costs[0].clone());
        }
        usage.insert("durationMs".into(), duration_ms.into());
        let run_id = result
            .and_then(|r| r.get("identity"))
            .and_then(|identity| identity.get("runId"))
            .and_then(Value::as_str);
        let trace = match (self.options.trace_store, run_id) {
            (Some(store), Some(run_id)) => match store.get_run(run_id).await {
                Ok(trace) => trace,
                Err(error) => {
                    lock(&self.shared.trap).get_or_insert(error);
                    None
                }
            },
            _ => None,
        };
        let mut records = Vec::new();
        for scorer in &self.options.scorers {
            let mut identity = Map::new();
            identity.insert("name".into(), scorer.name.clone().into());
            if let Some(version) = &scorer.version {
                identity.insert("version".into(), version.clone().into());
            }
            let cancel = self.cancel.child();
            let context = ScoreContext {
                case: case.clone(),
                output: output.output.clone(),
                result: result.cloned(),
                trace: trace.clone(),
                metadata: metadata.clone(),
                cancel: cancel.clone(),
            };
            let mut scoring = (scorer.score)(context);
            let outcome = match scorer.timeout {
                None => scoring.await.map_err(|e| (e, false)),
                Some(limit) => tokio::select! {
                    scored = &mut scoring => scored.map_err(|e| (e, false)),
                    () = tokio::time::sleep(limit) => {
                        // The scorer is told and left to end on its own, as OMA leaves it: a
                        // call into a guest is never cut off halfway.
                        cancel.cancel();
                        drop(tokio::spawn(scoring));
                        let message = format!(
                            "Scorer \"{}\" timed out after {}ms.",
                            scorer.name,
                            limit.as_millis()
                        );
                        Err((anyhow::anyhow!(message), true))
                    }
                },
            };
            let outcome = outcome.and_then(|result| result.check().map_err(|e| (e.into(), false)));
            let mut record = self.base(case, repeat, &metadata);
            record.insert("scorer".into(), Value::Object(identity));
            match outcome {
                Ok(scored) => {
                    record.insert("status".into(), "scored".into());
                    if let Value::Object(fields) = scored.to_json() {
                        record.extend(fields);
                    }
                    if let Some(run_ref) = &run_ref {
                        record.insert("runRef".into(), run_ref.clone());
                    }
                    record.insert("usage".into(), Value::Object(usage.clone()));
                }
                Err((error, timeout)) => {
                    record.insert("status".into(), "scorer_error".into());
                    if let Some(run_ref) = &run_ref {
                        record.insert("runRef".into(), run_ref.clone());
                    }
                    record.insert("usage".into(), Value::Object(usage.clone()));
                    record.insert(
                        "error".into(),
                        self.shared.error_info(&error, timeout).await,
                    );
                    self.emit(EvalProgress::ScorerError {
                        case_id: case.id.clone(),
                        repeat,
                        scorer: scorer.name.clone(),
                    });
                }
            }
            if let Some(payload) = &payload {
                record.insert("payload".into(), payload.clone());
            }
            records.push(Value::Object(record));
        }
        progress(|case_id, repeat| EvalProgress::CaseDone { case_id, repeat });
        let count = |key: &str| tokens.and_then(|t| t[key].as_u64()).unwrap_or(0);
        Sample {
            records,
            tokens: tokens.map(|_| (count("input_tokens"), count("output_tokens"))),
            costs: costs
                .iter()
                .filter_map(|c| Some((c["currency"].as_str()?.to_owned(), c["amount"].as_f64()?)))
                .collect(),
            target_error: false,
        }
    }
}

fn positive(value: u64, name: &str) -> Result<u64, RunOptionsError> {
    if value < 1 {
        return Err(RunOptionsError(format!(
            "{name} must be a positive integer."
        )));
    }
    Ok(value)
}

/// OMA's `runEvalSet(set, target, options)`: runs every selected case (`filter_tags`: any of
/// them) `repeats` times through `target`, `concurrency` samples at a time, in case order;
/// scores each sample with every scorer in turn and gives the report. A target's failure is a
/// `target_error` record, a scorer's (or its timeout passing) a `scorer_error` record, never a
/// score of zero; a store that fails is a warning in the report; the cancel token stops taking
/// samples (the report says `aborted`). Options are checked before any sample runs. Error
/// messages, and payloads under [`StorePayloads::Redacted`], are redacted by `redactor` (the
/// component); the outer error is its trap.
pub async fn run_eval_set<R, T, Fut>(
    set: &EvalSet,
    target: T,
    options: RunOptions<'_>,
    redactor: &mut R,
) -> anyhow::Result<Result<EvalReport, RunOptionsError>>
where
    R: Redact,
    T: Fn(Value, TargetContext) -> Fut + Sync,
    Fut: Future<Output = anyhow::Result<TargetOutput>> + Send,
{
    if let Some((i, _)) = options
        .scorers
        .iter()
        .enumerate()
        .find(|(_, s)| super::js_trim(&s.name).is_empty())
    {
        return Ok(Err(RunOptionsError(format!(
            "scorers[{i}] must have a non-empty name and a score(context) method"
        ))));
    }
    if options
        .eval_run_id
        .as_deref()
        .is_some_and(|id| super::js_trim(id).is_empty())
    {
        return Ok(Err(RunOptionsError(
            "evalRunId must be a non-empty string when provided.".into(),
        )));
    }
    let defaults = set.defaults.unwrap_or_default();
    let started_at_unix_ms = now_ms();
    let started = Instant::now();
    let repeats = match positive(
        options
            .repeats
            .or(defaults.repeats)
            .unwrap_or(DEFAULT_REPEATS),
        "repeats",
    ) {
        Ok(n) => n,
        Err(e) => return Ok(Err(e)),
    };
    let concurrency = match positive(
        options
            .concurrency
            .or(defaults.concurrency)
            .unwrap_or(DEFAULT_CONCURRENCY),
        "concurrency",
    ) {
        Ok(n) => n,
        Err(e) => return Ok(Err(e)),
    };
    let eval_run_id = options
        .eval_run_id
        .clone()
        .unwrap_or_else(|| fresh_id("eval_run"));
    let cases: Vec<&EvalCase> = set
        .cases
        .iter()
        .filter(|c| {
            options.filter_tags.is_empty()
                || c.tags
                    .as_ref()
                    .is_some_and(|tags| tags.iter().any(|t| options.filter_tags.contains(t)))
        })
        .collect();
    let jobs: Vec<(&EvalCase, u64)> = cases
        .iter()
        .flat_map(|case| (1..=repeats).map(move |repeat| (*case, repeat)))
        .collect();
    let cancel = options.cancel.clone().unwrap_or_default();
    let run = Run {
        set,
        target: &target,
        options: &options,
        eval_run_id: &eval_run_id,
        cancel: cancel.clone(),
        shared: Shared {
            redactor: tokio::sync::Mutex::new(redactor),
            trap: Mutex::new(None),
        },
    };
    let samples: Mutex<Vec<Option<Sample>>> = Mutex::new((0..jobs.len()).map(|_| None).collect());
    let warnings: Mutex<Vec<Option<String>>> = Mutex::new(vec![None; jobs.len()]);
    let cursor = AtomicUsize::new(0);
    let worker = || async {
        while !cancel.is_cancelled() {
            let index = cursor.fetch_add(1, Ordering::Relaxed);
            let Some((case, repeat)) = jobs.get(index).copied() else {
                return;
            };
            let sample = run.sample(case, repeat).await;
            if let Some(store) = options.store {
                if store.append(&sample.records).is_err() {
                    lock(&warnings)[index] = Some(format!(
                        "Evaluation records for case \"{}\" repeat {repeat} were not persisted.",
                        case.id
                    ));
                }
            }
            lock(&samples)[index] = Some(sample);
        }
    };
    let workers = (concurrency as usize).min(jobs.len());
    join_all((0..workers).map(|_| Box::pin(worker())).collect()).await;
    if let Some(trap) = lock(&run.shared.trap).take() {
        return Err(trap);
    }
    let completed: Vec<Sample> = samples
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .flatten()
        .collect();
    let records: Vec<Value> = completed.iter().flat_map(|s| s.records.clone()).collect();
    let tokens = completed
        .iter()
        .filter_map(|s| s.tokens)
        .reduce(|a, b| (a.0 + b.0, a.1 + b.1));
    let mut costs: Vec<(String, f64)> = Vec::new();
    for (currency, amount) in completed.iter().flat_map(|s| s.costs.iter()) {
        match costs.iter_mut().find(|(c, _)| c == currency) {
            Some((_, sum)) => *sum += amount,
            None => costs.push((currency.clone(), *amount)),
        }
    }
    costs.sort_by(|a, b| a.0.cmp(&b.0));
    let scorer_refs: Vec<ScorerRef> = options.scorers.iter().map(Scorer::id).collect();
    let tags_by_case: Vec<(String, Vec<String>)> = cases
        .iter()
        .map(|c| (c.id.clone(), c.tags.clone().unwrap_or_default()))
        .collect();
    Ok(Ok(EvalReport {
        eval_run_id: eval_run_id.clone(),
        started_at_unix_ms,
        duration_ms: started.elapsed().as_millis() as u64,
        set_name: set.name.clone(),
        set_version: set.version.clone(),
        metadata: options.metadata.clone(),
        case_count: cases.len() as u64,
        repeats,
        aborted: cancel.is_cancelled(),
        warnings: warnings
            .into_inner()
            .unwrap_or_else(|e| e.into_inner())
            .into_iter()
            .flatten()
            .collect(),
        aggregates: aggregate_records(&records, &scorer_refs, &tags_by_case),
        records,
        tokens,
        costs,
        target_errors: completed.iter().filter(|s| s.target_error).count() as u64,
    }))
}

/// The value behind `mutex`, also after a panic elsewhere (nothing here is left half-written).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `futures` to the end together, on the caller's task.
async fn join_all<F: Future<Output = ()> + Unpin>(mut futures: Vec<F>) {
    std::future::poll_fn(|cx| {
        futures.retain_mut(|f| Pin::new(f).poll(cx).is_pending());
        if futures.is_empty() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await
}
