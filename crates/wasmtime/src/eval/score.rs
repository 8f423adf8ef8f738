//! What a scorer answers (OMA's `ScoreResult`), checked as OMA's `defineScorer` checks it: a
//! result that is not one is a scorer error with OMA's message, never a score of zero.

use std::fmt;

use serde_json::{Map, Value};

use super::is_trace_attribute;
use crate::number::js_json_number;

/// The JavaScript class OMA throws a refused score result as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScoreErrorClass {
    /// OMA's `TypeError`: a value of the wrong kind.
    TypeError,
    /// OMA's `RangeError`: a score outside [0, 1].
    RangeError,
}

/// A score result refused, with OMA's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScoreError {
    /// The class OMA throws it as.
    pub class: ScoreErrorClass,
    /// OMA's message.
    pub message: String,
}

impl fmt::Display for ScoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ScoreError {}

fn type_error(message: &str) -> ScoreError {
    ScoreError {
        class: ScoreErrorClass::TypeError,
        message: message.into(),
    }
}

const SCORE_RANGE: &str = "ScoreResult.score must be a finite number in the range [0, 1].";
const DETAILS_RECORD: &str = "ScoreResult.details must be a trace-attribute record when provided.";
const DETAILS_VALUES: &str = "ScoreResult.details values must be valid TraceAttributeValue values.";

/// A scorer's answer for one sample: a score from 0 through 1, and optionally whether it
/// passes, why, and details (trace attributes).
#[derive(Debug, Clone, PartialEq)]
pub struct ScoreResult {
    /// From 0 through 1.
    pub score: f64,
    /// Whether the sample passes, when the scorer says.
    pub pass: Option<bool>,
    /// Why, when the scorer says.
    pub reason: Option<String>,
    /// Trace attributes about the score.
    pub details: Option<Map<String, Value>>,
}

impl ScoreResult {
    /// A score alone.
    pub fn new(score: f64) -> Self {
        ScoreResult {
            score,
            pass: None,
            reason: None,
            details: None,
        }
    }

    /// The result when it is one: `score` finite and from 0 through 1, every detail a trace
    /// attribute; otherwise OMA's error for it.
    pub fn check(self) -> Result<Self, ScoreError> {
        if !self.score.is_finite() || !(0.0..=1.0).contains(&self.score) {
            return Err(ScoreError {
                class: ScoreErrorClass::RangeError,
                message: SCORE_RANGE.into(),
            });
        }
        if let Some(details) = &self.details {
            if !details.values().all(is_trace_attribute) {
                return Err(type_error(DETAILS_VALUES));
            }
        }
        Ok(self)
    }

    /// A score result given as OMA's JSON (`{score, pass?, reason?, details?}`), checked as
    /// OMA checks a scorer's answer, with OMA's messages.
    pub fn from_json(value: &Value) -> Result<Self, ScoreError> {
        let Some(result) = value.as_object() else {
            return Err(type_error("Scorer must return a ScoreResult object."));
        };
        let Some(score) = result.get("score").and_then(Value::as_f64) else {
            return Err(ScoreError {
                class: ScoreErrorClass::RangeError,
                message: SCORE_RANGE.into(),
            });
        };
        let pass = match result.get("pass") {
            None => None,
            Some(Value::Bool(pass)) => Some(*pass),
            Some(_) => {
                return Err(type_error(
                    "ScoreResult.pass must be a boolean when provided.",
                ))
            }
        };
        let reason = match result.get("reason") {
            None => None,
            Some(Value::String(reason)) => Some(reason.clone()),
            Some(_) => {
                return Err(type_error(
                    "ScoreResult.reason must be a string when provided.",
                ))
            }
        };
        let details = match result.get("details") {
            None => None,
            Some(Value::Object(details)) => Some(details.clone()),
            Some(_) => return Err(type_error(DETAILS_RECORD)),
        };
        ScoreResult {
            score,
            pass,
            reason,
            details,
        }
        .check()
    }

    /// The result as OMA's JSON (the keys it has).
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        out.insert("score".into(), js_json_number(self.score));
        if let Some(pass) = self.pass {
            out.insert("pass".into(), pass.into());
        }
        if let Some(reason) = &self.reason {
            out.insert("reason".into(), reason.clone().into());
        }
        if let Some(details) = &self.details {
            out.insert("details".into(), Value::Object(details.clone()));
        }
        Value::Object(out)
    }
}
