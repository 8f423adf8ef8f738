//! OMA's evaluation rules that are rules (`docs/evaluation.md#built-in-scorers`): what each of
//! OMA's built-in scorers computes from a run's result and its stored trace ([`scorers`]), and an
//! LLM judge's prompt, the reading of its verdict and the aggregation of several verdicts
//! ([`judge`]), and what online evaluation keeps of a sampled run and records of its scores
//! ([`online`]).
//!
//! Pure functions over OMA's JSON (the result of a run, OMA's `StoredRun`), so that every host
//! scores alike. What is I/O stays the host's: running a judge's agent, the clock of a scorer's
//! deadline, a zod schema or pydantic model a user gave to check a value with.
//!
//! Failures are OMA's: the class OMA throws (`TypeError`, `RangeError`, `Error`) as the error's
//! name and OMA's message, byte for byte, so that a package throws what OMA throws.

pub mod judge;
pub mod online;
pub mod scorers;

use serde_json::{Map, Value};

use crate::error::Error;

pub(crate) use crate::error::{range_error, thrown, type_error};

/// `text` read as JSON; `what` names it in the error.
pub(crate) fn parse(text: &str, what: &str) -> Result<Value, Error> {
    crate::json::from_str(text).map_err(|e| type_error(format!("the {what} is not JSON: {e}")))
}

/// `value` as an object, or a `TypeError` saying that `what` must be one.
pub(crate) fn object<'a>(value: &'a Value, what: &str) -> Result<&'a Map<String, Value>, Error> {
    value
        .as_object()
        .ok_or_else(|| type_error(format!("{what} must be an object")))
}

/// Refuses a key of `object` that is not in `known`, naming it: nothing a caller sent is dropped.
pub(crate) fn refuse_unknown(
    object: &Map<String, Value>,
    known: &[&str],
    what: &str,
) -> Result<(), Error> {
    match object.keys().find(|key| !known.contains(&key.as_str())) {
        Some(key) => Err(type_error(format!(
            "{what} does not support the option \"{key}\" (known: {})",
            known.join(", ")
        ))),
        None => Ok(()),
    }
}

/// A field that JavaScript reads as `undefined`: absent, or (for `??`) `null`.
pub(crate) fn given<'a>(object: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    object.get(key).filter(|value| !value.is_null())
}

/// `x` as JavaScript writes the number: whole values without a fraction.
pub(crate) fn number(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 9_007_199_254_740_992.0 {
        Value::from(x as i64)
    } else {
        serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
    }
}
