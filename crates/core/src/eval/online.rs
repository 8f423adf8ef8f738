//! OMA's online evaluation rules (`OnlineEvaluationConfig`; `docs/evaluation.md#online-evaluation`)
//! that are rules: what a scorer sees of a sampled run and what its records keep of it
//! ([`case`]), the record a scorer's score or failure makes ([`record`]), and the flush result
//! the evaluator's counts make ([`flush`]), and the evaluator's windows ([`window`]: the
//! sampling comparison, the queue bound, the rate and cost budgets, the diagnostics throttle).
//!
//! The evaluator itself is the host's: drawing the random number, its queue and workers,
//! calling the scorers under their deadlines and the estimator, the clock, the ids, the store
//! and the callbacks. Each host brings what it has to these steps, so that every package
//! samples, budgets, keeps, bounds, redacts and reports alike.

use serde_json::{json, Map, Value};

use super::{given, object, parse, refuse_unknown, type_error};
use crate::agent::redact::redact_secrets;
use crate::error::Error;
use crate::js_text;

pub mod window;

/// How many characters of an input or output a record keeps (and a scorer is shown).
pub const PAYLOAD_MAX_CHARS: usize = 8 * 1024;
/// How many characters of a score's reason, or of a string in its details, a record keeps.
pub const REASON_MAX_CHARS: usize = 1_024;

/// A step of the online evaluation rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// What scorers see of a run's input and what its records keep: `{storePayloads, input?,
    /// output?}` in; `{input, payload?}` out.
    Case,
    /// One scorer's record: the run's reference, the scorer and its score or its error in; the
    /// record out.
    Record,
    /// The flush result of the evaluator's counts: `{stats, timedOut?}` in; `{status,
    /// accepted, exported, dropped, failed}` out.
    Flush,
    /// A settled run offered to the evaluator ([`window::admit`]).
    Admit,
    /// A queued run a worker takes up ([`window::start`]).
    Start,
    /// What a scorer's judges cost ([`window::cost`]).
    Cost,
    /// An event of the evaluator's through the diagnostics throttle ([`window::report`]).
    Report,
}

/// One step on its request (JSON text); its answer as JSON text.
pub fn online_json(step: Step, request: &str) -> Result<String, Error> {
    let request = parse(request, "online evaluation request")?;
    let out = match step {
        Step::Case => case(&request)?,
        Step::Record => record(&request)?,
        Step::Flush => flush(&request)?,
        Step::Admit => window::admit(&request)?,
        Step::Start => window::start(&request)?,
        Step::Cost => window::cost(&request)?,
        Step::Report => window::report(&request)?,
    };
    Ok(out.to_string())
}

use crate::js_text::truncate;

/// `text` with its secrets redacted, then cut to `max` characters.
pub fn sanitize(text: &str, max: usize) -> String {
    truncate(&redact_secrets(text), max)
}

/// A value as text: a string as it is, anything else as JSON.
fn stringify(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// What scorers see of an input they are not given: its kind and size.
fn describe_input(value: Option<&Value>) -> String {
    match value {
        None => "[undefined input]".to_owned(),
        Some(Value::Null) => "[null input]".to_owned(),
        Some(Value::String(text)) => {
            format!("[string input omitted; {} characters]", js_text::len(text))
        }
        Some(Value::Array(items)) => format!("[array input omitted; {} items]", items.len()),
        Some(Value::Bool(_)) => "[boolean input omitted]".to_owned(),
        Some(Value::Number(_)) => "[number input omitted]".to_owned(),
        Some(Value::Object(_)) => "[object input omitted]".to_owned(),
    }
}

/// `storePayloads`: `none` (the default), `redacted` or `full`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Payloads {
    None,
    Redacted,
    Full,
}

fn payloads(request: &Map<String, Value>) -> Result<Payloads, Error> {
    match given(request, "storePayloads") {
        None => Ok(Payloads::None),
        Some(Value::String(mode)) if mode == "none" => Ok(Payloads::None),
        Some(Value::String(mode)) if mode == "redacted" => Ok(Payloads::Redacted),
        Some(Value::String(mode)) if mode == "full" => Ok(Payloads::Full),
        Some(_) => Err(type_error(
            "OnlineEvaluationConfig.storePayloads must be none, redacted, or full.",
        )),
    }
}

/// A payload's text: bounded, and redacted (then bounded again) under `redacted`.
fn payload_text(mode: Payloads, value: &Value) -> String {
    let bounded = truncate(&stringify(value), PAYLOAD_MAX_CHARS);
    if mode == Payloads::Redacted {
        sanitize(&bounded, PAYLOAD_MAX_CHARS)
    } else {
        bounded
    }
}

/// What scorers see of the run's input (`input`: described unless payloads are stored) and what
/// its records keep (`payload`: the input and the output, absent under `none`). An absent
/// `input` or `output` is JavaScript's `undefined`.
pub fn case(request: &Value) -> Result<Value, Error> {
    let request = object(request, "the online evaluation case")?;
    refuse_unknown(
        request,
        &["storePayloads", "input", "output"],
        "the online evaluation case",
    )?;
    let mode = payloads(request)?;
    let input = request.get("input");
    let output = request.get("output");
    let mut out = Map::new();
    let seen = match (mode, input) {
        (Payloads::None, _) => describe_input(input),
        // JavaScript's text of `undefined`, as OMA shows it.
        (_, None) => "undefined".to_owned(),
        (_, Some(input)) => payload_text(mode, input),
    };
    out.insert("input".into(), Value::String(seen));
    if mode != Payloads::None {
        let mut payload = Map::new();
        if let Some(input) = input {
            payload.insert("input".into(), Value::String(payload_text(mode, input)));
        }
        if let Some(output) = output {
            payload.insert("output".into(), Value::String(payload_text(mode, output)));
        }
        out.insert("payload".into(), Value::Object(payload));
    }
    Ok(Value::Object(out))
}

/// A score's details with each string (and each string of a list of strings) redacted and cut.
fn details(value: &Value) -> Result<Value, Error> {
    let details = object(value, "a score's details")?;
    let out = details
        .iter()
        .map(|(key, value)| {
            let kept = match value {
                Value::String(text) => Value::String(sanitize(text, REASON_MAX_CHARS)),
                Value::Array(items) if items.iter().all(Value::is_string) => Value::Array(
                    items
                        .iter()
                        .map(|item| {
                            Value::String(sanitize(item.as_str().unwrap_or(""), REASON_MAX_CHARS))
                        })
                        .collect(),
                ),
                other => other.clone(),
            };
            (key.clone(), kept)
        })
        .collect();
    Ok(Value::Object(out))
}

/// A required field of `request`, or a `TypeError` naming it.
fn required<'a>(request: &'a Map<String, Value>, key: &str) -> Result<&'a Value, Error> {
    given(request, key)
        .ok_or_else(|| type_error(format!("the online evaluation record needs \"{key}\"")))
}

/// One scorer's record of a sampled run (OMA's `EvalRecord` of `source: "online"`).
///
/// In: `evalRunId`, `recordId`, `timestampUnixMs` (the host's ids and clock), `scorer` (`{name,
/// version?}`), `identity` (the run's: `runId`, `attempt`, `traceId`, `rootSpanId`), `metadata`,
/// `usage` (`{tokens, durationMs}`), `payload` (from [`case`], when kept), and either `score`
/// (the scorer's result: `score`, `pass?`, `reason?`, `details?`) or `error` (the failure's
/// `errorInfo`). Out: the record, `scored` or `scorer_error`, the reason and string details
/// redacted and cut to [`REASON_MAX_CHARS`].
pub fn record(request: &Value) -> Result<Value, Error> {
    let request = object(request, "the online evaluation record")?;
    refuse_unknown(
        request,
        &[
            "evalRunId",
            "recordId",
            "timestampUnixMs",
            "scorer",
            "identity",
            "metadata",
            "usage",
            "payload",
            "score",
            "error",
        ],
        "the online evaluation record",
    )?;
    let scorer = object(required(request, "scorer")?, "the record's scorer")?;
    let name = given(scorer, "name")
        .and_then(Value::as_str)
        .ok_or_else(|| type_error("the record's scorer needs a name"))?;
    let mut scorer_out = Map::new();
    scorer_out.insert("name".into(), Value::from(name));
    if let Some(version) = given(scorer, "version") {
        scorer_out.insert("version".into(), version.clone());
    }
    let identity = object(required(request, "identity")?, "the record's identity")?;
    let mut run_ref = Map::new();
    for key in ["runId", "attempt", "traceId", "rootSpanId"] {
        run_ref.insert(
            key.into(),
            identity.get(key).cloned().unwrap_or(Value::Null),
        );
    }
    let mut out = Map::new();
    out.insert("schemaVersion".into(), Value::from(1));
    out.insert("recordId".into(), required(request, "recordId")?.clone());
    out.insert("evalRunId".into(), required(request, "evalRunId")?.clone());
    out.insert("source".into(), Value::from("online"));
    out.insert(
        "timestampUnixMs".into(),
        required(request, "timestampUnixMs")?.clone(),
    );
    out.insert("scorer".into(), Value::Object(scorer_out));
    out.insert("runRef".into(), Value::Object(run_ref));
    out.insert(
        "metadata".into(),
        given(request, "metadata")
            .cloned()
            .unwrap_or_else(|| json!({})),
    );
    let usage = required(request, "usage")?.clone();
    match (given(request, "score"), given(request, "error")) {
        (Some(score), None) => {
            let score = object(score, "the record's score")?;
            out.insert("status".into(), Value::from("scored"));
            out.insert(
                "score".into(),
                given(score, "score")
                    .cloned()
                    .ok_or_else(|| type_error("the record's score needs a score"))?,
            );
            if let Some(pass) = given(score, "pass") {
                out.insert("pass".into(), pass.clone());
            }
            if let Some(reason) = given(score, "reason") {
                let reason = reason
                    .as_str()
                    .ok_or_else(|| type_error("a score's reason must be a string"))?;
                out.insert(
                    "reason".into(),
                    Value::String(sanitize(reason, REASON_MAX_CHARS)),
                );
            }
            if let Some(value) = given(score, "details") {
                out.insert("details".into(), details(value)?);
            }
            out.insert("usage".into(), usage);
        }
        (None, Some(error)) => {
            out.insert("status".into(), Value::from("scorer_error"));
            out.insert("usage".into(), usage);
            out.insert("error".into(), error.clone());
        }
        _ => {
            return Err(type_error(
                "the online evaluation record needs either \"score\" or \"error\"",
            ))
        }
    }
    if let Some(payload) = given(request, "payload") {
        out.insert("payload".into(), payload.clone());
    }
    Ok(Value::Object(out))
}

/// A count of the evaluator's stats (`0` when absent).
fn count(stats: &Map<String, Value>, key: &str) -> Result<u64, Error> {
    match stats.get(key) {
        None => Ok(0),
        Some(value) => value
            .as_u64()
            .ok_or_else(|| type_error(format!("stats.{key} must be a count"))),
    }
}

/// OMA's flush result of the evaluator's counts (`sampled`, `enqueued`, `completed`, `dropped`,
/// `failed`, `storeFailed`): `timeout` when the wait ran out (`timedOut`), else `ok` when
/// nothing was dropped or failed, `partial` when some scorer still completed, `error` when none
/// did.
pub fn flush(request: &Value) -> Result<Value, Error> {
    let request = object(request, "the online evaluation flush")?;
    refuse_unknown(
        request,
        &["stats", "timedOut"],
        "the online evaluation flush",
    )?;
    let stats = object(
        given(request, "stats").ok_or_else(|| type_error("the flush needs \"stats\""))?,
        "stats",
    )?;
    refuse_unknown(
        stats,
        &[
            "sampled",
            "enqueued",
            "completed",
            "dropped",
            "failed",
            "storeFailed",
        ],
        "stats",
    )?;
    let [enqueued, completed, dropped, failed, store_failed] = [
        count(stats, "enqueued")?,
        count(stats, "completed")?,
        count(stats, "dropped")?,
        count(stats, "failed")?,
        count(stats, "storeFailed")?,
    ];
    let timed_out = match given(request, "timedOut") {
        None => false,
        Some(Value::Bool(flag)) => *flag,
        Some(_) => return Err(type_error("timedOut must be a boolean")),
    };
    let status = if timed_out {
        "timeout"
    } else if failed == 0 && store_failed == 0 && dropped == 0 {
        "ok"
    } else if completed > 0 {
        "partial"
    } else {
        "error"
    };
    Ok(json!({
        "status": status,
        "accepted": enqueued,
        "exported": completed,
        "dropped": dropped,
        "failed": failed + store_failed,
    }))
}

#[cfg(test)]
mod tests;
