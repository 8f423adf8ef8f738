//! OMA's LLM judge scorers (`createJudgeScorer`, `createAnswerRelevancyScorer`;
//! `docs/evaluation.md#judges`): the checks of a judge scorer's options, the prompt each judge
//! is asked, the reading of a judge's answer into a verdict, and the one score several verdicts
//! make (their mean, a pass when a quorum of judges says pass).
//!
//! Running a judge's agent on the prompt is the host's: it runs it as it runs any agent (its
//! provider, or the user's own adapter), under the scorer's deadline, and brings the answer back
//! here. A verdict schema the user wrote in the host's own language (a zod schema, a pydantic
//! model) is the host's to check: [`extract`] gives the value to check, and [`verdict`] takes the
//! checked value.

use serde_json::{json, Map, Value};

use super::{given, number, object, parse, range_error, refuse_unknown, thrown, type_error};
use crate::agent::structured::{extract_json, pretty, OutputSchema};
use crate::error::Error;

/// OMA's instruction to a judge when the scorer gives none.
pub const DEFAULT_INSTRUCTION: &str = "You are an impartial quality evaluator. Score how well the candidate output satisfies the case input and expected result.";

/// The instruction of OMA's answer-relevancy judge.
pub const ANSWER_RELEVANCY_INSTRUCTION: &str = "Evaluate only answer relevancy. A fully relevant answer directly addresses the case input, stays on topic, and uses the expected output when one is supplied. Do not reward style, verbosity, or factual claims that are unrelated to the requested answer. Return a score from 0 to 1 and a concise reason.";

/// The default verdict schema as the judge is shown it: OMA shows its zod schema through its own
/// converter, which writes no bounds.
fn default_schema_shown() -> Value {
    json!({
        "type": "object",
        "properties": {"score": {"type": "number"}, "reason": {"type": "string"}},
        "required": ["score", "reason"],
    })
}

/// The default verdict schema as it checks a verdict: a score from 0 through 1 and a reason.
fn default_schema_checked() -> Value {
    json!({
        "type": "object",
        "properties": {
            "score": {"type": "number", "minimum": 0, "maximum": 1},
            "reason": {"type": "string"},
        },
        "required": ["score", "reason"],
    })
}

/// The model a judge's verdict names: its `model`, else `<backend kind>-backend`, else
/// `unknown`.
fn judge_model(judge: &Map<String, Value>) -> String {
    if let Some(model) = given(judge, "model").and_then(Value::as_str) {
        return model.to_owned();
    }
    // OMA tests the backend for truth and writes its kind into the text as it is.
    let backend = given(judge, "backend").filter(|backend| {
        !matches!(backend, Value::Bool(false))
            && *backend != &Value::from(0)
            && *backend != &Value::from("")
    });
    match backend.map(|backend| backend.get("kind")) {
        None => "unknown".to_owned(),
        Some(Some(Value::String(kind))) => format!("{kind}-backend"),
        Some(Some(kind)) => format!("{kind}-backend"),
        Some(None) => "undefined-backend".to_owned(),
    }
}

/// A judge as the rules see it: `{name, model?, backend?: {kind}}`, as `{name, model}`.
fn read_judge(value: &Value, at: &str) -> Result<(String, String), Error> {
    let judge = object(value, at)?;
    let name = judge
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| type_error(format!("{at}.name must be a string")))?;
    Ok((name.to_owned(), judge_model(judge)))
}

/// A judge scorer's options checked as OMA checks them when the scorer is made: `judges` (each
/// `{name, model?, backend?}`, at least one), `quorum` (an integer from 1 through the number of
/// judges; half of them rounded up when absent) and `timeoutMs` (positive). Gives `{judges:
/// [{name, model}], quorum, timeoutMs?}`.
pub fn options(options: &Value) -> Result<Value, Error> {
    let options = object(options, "JudgeScorerOptions")?;
    refuse_unknown(
        options,
        &["judges", "quorum", "timeoutMs"],
        "the judge scorer's rules",
    )?;
    let judges = match options.get("judges").and_then(Value::as_array) {
        Some(judges) if !judges.is_empty() => judges,
        _ => {
            return Err(type_error(
                "JudgeScorerOptions.judges must contain at least one judge.",
            ))
        }
    };
    let mut read = Vec::with_capacity(judges.len());
    for (at, judge) in judges.iter().enumerate() {
        let (name, model) = read_judge(judge, &format!("JudgeScorerOptions.judges[{at}]"))?;
        read.push(json!({"name": name, "model": model}));
    }
    let count = judges.len() as f64;
    let quorum = match given(options, "quorum") {
        None => (count / 2.0).ceil(),
        Some(value) => match value.as_f64() {
            Some(q) if q.fract() == 0.0 && q >= 1.0 && q <= count => q,
            _ => {
                return Err(range_error(
                    "JudgeScorerOptions.quorum must be an integer between 1 and judges.length.",
                ))
            }
        },
    };
    let mut out = Map::new();
    out.insert("judges".into(), Value::Array(read));
    out.insert("quorum".into(), number(quorum));
    if let Some(timeout) = options.get("timeoutMs") {
        match timeout.as_f64() {
            Some(ms) if ms.is_finite() && ms > 0.0 => {
                out.insert("timeoutMs".into(), number(ms));
            }
            _ => {
                return Err(range_error(
                    "JudgeScorerOptions.timeoutMs must be a positive finite number.",
                ))
            }
        }
    }
    Ok(Value::Object(out))
}

/// A value of the judge's prompt as OMA writes it: absent as `(not provided)`, a string as it
/// is, anything else as JSON indented by two spaces.
fn format_value(value: Option<&Value>) -> String {
    match value {
        None => "(not provided)".to_owned(),
        Some(Value::String(text)) => text.clone(),
        Some(value) => {
            let mut out = String::new();
            pretty(value, 0, &mut out);
            out
        }
    }
}

/// The prompt every judge of a scorer is asked, as OMA builds it: the instruction, the case's
/// input, the expected output, the candidate output and the evaluation metadata under their
/// headings, then the structured-output instruction for the verdict schema.
///
/// `request`: `{instruction?, preset?, input?, expected?, output?, metadata?, schema?}`. The
/// instruction is the scorer's (OMA's default without one; `preset: "answer_relevancy"` for
/// OMA's relevancy judge, which takes no instruction); a value that is absent was not provided
/// (JavaScript's `undefined`); `schema` is the verdict schema as JSON Schema (OMA's default
/// without one). Gives `{prompt}`.
pub fn prompt(request: &Value) -> Result<Value, Error> {
    let request = object(request, "the judge prompt request")?;
    refuse_unknown(
        request,
        &[
            "instruction",
            "preset",
            "input",
            "expected",
            "output",
            "metadata",
            "schema",
        ],
        "the judge prompt request",
    )?;
    let instruction = match (given(request, "preset"), given(request, "instruction")) {
        (Some(_), Some(_)) => {
            return Err(type_error(
                "a judge prompt takes an instruction or a preset, not both",
            ))
        }
        (Some(Value::String(preset)), None) if preset == "answer_relevancy" => {
            ANSWER_RELEVANCY_INSTRUCTION.to_owned()
        }
        (Some(preset), None) => {
            return Err(type_error(format!(
                "{preset} is not a judge preset (known: \"answer_relevancy\")"
            )))
        }
        (None, Some(Value::String(instruction))) => instruction.clone(),
        (None, Some(_)) => return Err(type_error("the judge's instruction must be a string")),
        (None, None) => DEFAULT_INSTRUCTION.to_owned(),
    };
    let schema = match given(request, "schema") {
        None => default_schema_shown(),
        Some(schema) => schema.clone(),
    };
    let shown = OutputSchema::new(schema, true)
        .map_err(|why| type_error(format!("the verdict schema is not a JSON Schema: {why}")))?;
    let prompt = [
        instruction,
        String::new(),
        "## Case input".to_owned(),
        format_value(request.get("input")),
        String::new(),
        "## Expected output".to_owned(),
        format_value(request.get("expected")),
        String::new(),
        "## Candidate output".to_owned(),
        format_value(request.get("output")),
        String::new(),
        "## Evaluation metadata".to_owned(),
        format_value(request.get("metadata")),
        shown.instruction(),
    ]
    .join("\n");
    Ok(json!({ "prompt": prompt }))
}

/// The JSON value of a judge's answer, read as OMA reads a structured answer: `{output}` gives
/// `{value}`, or fails with OMA's `Error` naming the answer's first 100 characters.
pub fn extract(request: &Value) -> Result<Value, Error> {
    let request = object(request, "the judge extract request")?;
    refuse_unknown(request, &["output"], "the judge extract request")?;
    let output = request
        .get("output")
        .and_then(Value::as_str)
        .ok_or_else(|| type_error("output must be the judge's answer text"))?;
    let value = extract_json(output).map_err(|message| thrown("Error", message))?;
    Ok(json!({ "value": value }))
}

/// One judge's verdict: `{judge, output}` (the answer's text: its JSON is read and checked
/// against `schema`, OMA's default without one) or `{judge, value}` (a value the host read and
/// checked against the user's own schema), then held to OMA's verdict rules: an object whose
/// `score` is a number from 0 through 1, with `pass` a boolean and `reason` a string when they
/// are there. Gives `{judge, model, score, pass?, reason?}`; fails with OMA's error (`Error` for
/// an answer without JSON or against its schema, `TypeError` or `RangeError` naming the judge).
pub fn verdict(request: &Value) -> Result<Value, Error> {
    let request = object(request, "the judge verdict request")?;
    refuse_unknown(
        request,
        &["judge", "output", "value", "schema"],
        "the judge verdict request",
    )?;
    let (name, model) = read_judge(
        request.get("judge").unwrap_or(&Value::Null),
        "the verdict's judge",
    )?;
    let verdict = match (request.get("output"), request.get("value")) {
        (Some(Value::String(output)), None) => {
            let value = extract_json(output).map_err(|message| thrown("Error", message))?;
            match given(request, "schema") {
                Some(schema) => {
                    let schema = OutputSchema::new(schema.clone(), false).map_err(|why| {
                        type_error(format!("the verdict schema is not a JSON Schema: {why}"))
                    })?;
                    schema.validate(&value).map_err(|m| thrown("Error", m))?;
                    value
                }
                None => {
                    let schema = OutputSchema::new(default_schema_checked(), false)
                        .map_err(type_error)?;
                    schema.validate(&value).map_err(|m| thrown("Error", m))?;
                    // OMA's default zod object keeps only its own keys: a judge's `pass` is
                    // not part of its verdict.
                    let mut kept = Map::new();
                    for key in ["score", "reason"] {
                        if let Some(field) = value.get(key) {
                            kept.insert(key.to_owned(), field.clone());
                        }
                    }
                    Value::Object(kept)
                }
            }
        }
        (None, Some(value)) if given(request, "schema").is_none() => value.clone(),
        _ => {
            return Err(type_error(
                "a verdict takes the judge's answer as `output` (text) or the value the host checked as `value`, one of them",
            ))
        }
    };
    let Some(fields) = verdict.as_object() else {
        return Err(type_error(format!(
            "Judge \"{name}\" verdict must be an object."
        )));
    };
    let score = match fields.get("score").and_then(Value::as_f64) {
        Some(score) if (0.0..=1.0).contains(&score) => score,
        _ => {
            return Err(range_error(format!(
                "Judge \"{name}\" verdict.score must be in the range [0, 1]."
            )))
        }
    };
    let pass = match fields.get("pass") {
        None => None,
        Some(Value::Bool(pass)) => Some(*pass),
        Some(_) => {
            return Err(type_error(format!(
                "Judge \"{name}\" verdict.pass must be a boolean when provided."
            )))
        }
    };
    let reason = match fields.get("reason") {
        None => None,
        Some(Value::String(reason)) => Some(reason.clone()),
        Some(_) => {
            return Err(type_error(format!(
                "Judge \"{name}\" verdict.reason must be a string when provided."
            )))
        }
    };
    let mut out = Map::new();
    out.insert("judge".into(), Value::String(name));
    out.insert("model".into(), Value::String(model));
    out.insert("score".into(), number(score));
    if let Some(pass) = pass {
        out.insert("pass".into(), Value::Bool(pass));
    }
    if let Some(reason) = reason {
        out.insert("reason".into(), Value::String(reason));
    }
    Ok(Value::Object(out))
}

/// The score of a judge scorer from its judges' verdicts (`{verdicts, quorum}`, the verdicts as
/// [`verdict`] gives them, in the judges' order): the mean score; `pass` when any judge said
/// pass or fail, true when at least `quorum` said pass; the judges' non-empty reasons as
/// `<judge>: <reason>` lines; and the judges, models and scores as parallel arrays in `details`.
pub fn aggregate(request: &Value) -> Result<Value, Error> {
    let request = object(request, "the judge aggregate request")?;
    refuse_unknown(
        request,
        &["verdicts", "quorum"],
        "the judge aggregate request",
    )?;
    let verdicts = match request.get("verdicts").and_then(Value::as_array) {
        Some(verdicts) if !verdicts.is_empty() => verdicts,
        _ => {
            return Err(type_error(
                "verdicts must be a list of at least one verdict",
            ))
        }
    };
    let quorum = request
        .get("quorum")
        .and_then(Value::as_f64)
        .ok_or_else(|| type_error("quorum must be a number"))?;
    let mut judges = Vec::new();
    let mut models = Vec::new();
    let mut scores = Vec::new();
    let mut sum = 0.0;
    let mut pass_votes = 0.0;
    let mut has_pass = false;
    let mut reasons = Vec::new();
    for (at, verdict) in verdicts.iter().enumerate() {
        let at = format!("verdicts[{at}]");
        let fields = object(verdict, &at)?;
        let text = |key: &str| {
            fields
                .get(key)
                .and_then(Value::as_str)
                .ok_or_else(|| type_error(format!("{at}.{key} must be a string")))
        };
        let judge = text("judge")?;
        let model = text("model")?;
        let score = fields
            .get("score")
            .and_then(Value::as_f64)
            .ok_or_else(|| type_error(format!("{at}.score must be a number")))?;
        match fields.get("pass") {
            None => {}
            Some(Value::Bool(pass)) => {
                has_pass = true;
                if *pass {
                    pass_votes += 1.0;
                }
            }
            Some(_) => return Err(type_error(format!("{at}.pass must be a boolean"))),
        }
        if let Some(reason) = fields.get("reason").and_then(Value::as_str) {
            if !reason.is_empty() {
                reasons.push(format!("{judge}: {reason}"));
            }
        }
        sum += score;
        judges.push(Value::from(judge));
        models.push(Value::from(model));
        scores.push(number(score));
    }
    let mut out = Map::new();
    out.insert("score".into(), number(sum / verdicts.len() as f64));
    if has_pass {
        out.insert("pass".into(), Value::Bool(pass_votes >= quorum));
    }
    if !reasons.is_empty() {
        out.insert("reason".into(), Value::String(reasons.join("\n")));
    }
    out.insert(
        "details".into(),
        json!({"judges": judges, "models": models, "scores": scores}),
    );
    Ok(Value::Object(out))
}

/// The steps of a judge scorer, as the codec names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// [`options`].
    Options,
    /// [`prompt`].
    Prompt,
    /// [`extract`].
    Extract,
    /// [`verdict`].
    Verdict,
    /// [`aggregate`].
    Aggregate,
}

/// The codec's entry: one step on its request (JSON text), its answer as JSON text.
pub fn judge_json(step: Step, request: &str) -> Result<String, Error> {
    let request = parse(request, "judge request")?;
    let out = match step {
        Step::Options => options(&request)?,
        Step::Prompt => prompt(&request)?,
        Step::Extract => extract(&request)?,
        Step::Verdict => verdict(&request)?,
        Step::Aggregate => aggregate(&request)?,
    };
    Ok(out.to_string())
}

#[cfg(test)]
mod tests;
