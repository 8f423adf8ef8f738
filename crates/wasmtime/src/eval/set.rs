//! OMA's `defineEvalSet`: an eval set checked field by field, its names, versions and case ids
//! trimmed, and every other value kept as given.

use std::collections::HashSet;
use std::fmt;

use serde_json::{Map, Value};

use super::{is_trace_attribute, js_trim};

const SET_KEYS: &[&str] = &["name", "version", "description", "cases", "defaults"];
const CASE_KEYS: &[&str] = &["id", "input", "expected", "tags", "metadata"];
const DEFAULT_KEYS: &[&str] = &["repeats", "concurrency"];

/// A definition (an eval set, a gate policy) that is not one: `field` says where, in OMA's
/// spelling (`cases[1].id`, `thresholds[0].min`; empty for the value itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvalDefinitionError {
    /// Where the definition is wrong.
    pub field: String,
    /// What is wrong, naming the field.
    pub message: String,
}

impl EvalDefinitionError {
    pub(crate) fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        EvalDefinitionError {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for EvalDefinitionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for EvalDefinitionError {}

/// Refuses a key of `value` that is not one of `known`, by name: nothing a caller sent is
/// dropped.
pub(crate) fn refuse_unknown(
    value: &Map<String, Value>,
    known: &[&str],
    at: &str,
    what: &str,
) -> Result<(), EvalDefinitionError> {
    match value.keys().find(|key| !known.contains(&key.as_str())) {
        Some(key) => Err(EvalDefinitionError::new(
            format!("{at}{key}"),
            format!(
                "{at}{key} is not a field of {what} (known: {})",
                known.join(", ")
            ),
        )),
        None => Ok(()),
    }
}

fn trimmed(value: Option<&Value>, field: &str) -> Result<String, EvalDefinitionError> {
    match value.and_then(Value::as_str).map(js_trim) {
        Some(text) if !text.is_empty() => Ok(text.to_owned()),
        _ => Err(EvalDefinitionError::new(
            field,
            format!("{field} must be a non-empty string"),
        )),
    }
}

fn positive(value: &Value, field: &str) -> Result<u64, EvalDefinitionError> {
    match value.as_f64() {
        Some(n) if n >= 1.0 && n.fract() == 0.0 => Ok(n as u64),
        _ => Err(EvalDefinitionError::new(
            field,
            format!("{field} must be a positive integer"),
        )),
    }
}

/// One case of an eval set.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalCase {
    /// Unique in its set, trimmed.
    pub id: String,
    /// What the target is given.
    pub input: Value,
    /// The expected output, when the case has one (`null` is a value).
    pub expected: Option<Value>,
    /// The case's tags, when it has them.
    pub tags: Option<Vec<String>>,
    /// Trace attributes carried by the case's records.
    pub metadata: Option<Map<String, Value>>,
}

/// An eval set's defaults for a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EvalDefaults {
    /// How many times each case runs.
    pub repeats: Option<u64>,
    /// How many samples run at a time.
    pub concurrency: Option<u64>,
}

/// A checked eval set (OMA's `EvalSet`): a name and a version (bump it when a case changes),
/// an optional description, one or more cases with unique ids, and optional run defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalSet {
    /// The set's name, trimmed.
    pub name: String,
    /// The set's version, trimmed.
    pub version: String,
    /// What the set is for.
    pub description: Option<String>,
    /// The cases, in order.
    pub cases: Vec<EvalCase>,
    /// Run defaults, when given (only the keys given are set).
    pub defaults: Option<EvalDefaults>,
}

fn eval_case(value: &Value, index: usize) -> Result<EvalCase, EvalDefinitionError> {
    let at = format!("cases[{index}]");
    let Some(case) = value.as_object() else {
        return Err(EvalDefinitionError::new(
            &at,
            format!("{at} must be an object"),
        ));
    };
    refuse_unknown(case, CASE_KEYS, &format!("{at}."), "an eval case")?;
    let id = trimmed(case.get("id"), &format!("{at}.id"))?;
    let Some(input) = case.get("input") else {
        return Err(EvalDefinitionError::new(
            format!("{at}.input"),
            format!("{at}.input is required"),
        ));
    };
    let tags = match case.get("tags") {
        None => None,
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => Some(
            items
                .iter()
                .filter_map(|t| t.as_str().map(str::to_owned))
                .collect(),
        ),
        Some(_) => {
            return Err(EvalDefinitionError::new(
                format!("{at}.tags"),
                format!("{at}.tags must be an array of strings"),
            ))
        }
    };
    let metadata = match case.get("metadata") {
        None => None,
        Some(Value::Object(entries)) => {
            if let Some((key, _)) = entries.iter().find(|(_, v)| !is_trace_attribute(v)) {
                let field = format!("{at}.metadata.{key}");
                return Err(EvalDefinitionError::new(
                    &field,
                    format!("{field} must be a string, number, boolean or an array of one of them"),
                ));
            }
            Some(entries.clone())
        }
        Some(_) => {
            return Err(EvalDefinitionError::new(
                format!("{at}.metadata"),
                format!("{at}.metadata must be an object"),
            ))
        }
    };
    Ok(EvalCase {
        id,
        input: input.clone(),
        expected: case.get("expected").cloned(),
        tags,
        metadata,
    })
}

impl EvalSet {
    /// OMA's `defineEvalSet` on the set as OMA's JSON: the set checked (an error naming the
    /// field for a missing or empty name, version or case id, no cases, a case without input,
    /// tags that are not strings, metadata that is not trace attributes, defaults that are not
    /// positive integers, or a key that is not a field), its names, version and ids trimmed; a
    /// case id used twice is OMA's `EvalSet case id "<id>" must be unique.`
    pub fn define(set: &Value) -> Result<EvalSet, EvalDefinitionError> {
        let Some(set) = set.as_object() else {
            return Err(EvalDefinitionError::new(
                "",
                "an eval set must be an object",
            ));
        };
        refuse_unknown(set, SET_KEYS, "", "an eval set")?;
        let name = trimmed(set.get("name"), "name")?;
        let version = trimmed(set.get("version"), "version")?;
        let description = match set.get("description") {
            None => None,
            Some(Value::String(text)) => Some(text.clone()),
            Some(_) => {
                return Err(EvalDefinitionError::new(
                    "description",
                    "description must be a string",
                ))
            }
        };
        let cases = match set.get("cases") {
            Some(Value::Array(cases)) if !cases.is_empty() => cases
                .iter()
                .enumerate()
                .map(|(i, case)| eval_case(case, i))
                .collect::<Result<Vec<_>, _>>()?,
            _ => {
                return Err(EvalDefinitionError::new(
                    "cases",
                    "cases must be a non-empty array",
                ))
            }
        };
        let mut ids = HashSet::new();
        if let Some(case) = cases.iter().find(|case| !ids.insert(case.id.as_str())) {
            return Err(EvalDefinitionError::new(
                "cases",
                format!("EvalSet case id \"{}\" must be unique.", case.id),
            ));
        }
        let defaults = match set.get("defaults") {
            None => None,
            Some(Value::Object(given)) => {
                refuse_unknown(given, DEFAULT_KEYS, "defaults.", "eval set defaults")?;
                let mut defaults = EvalDefaults::default();
                if let Some(value) = given.get("repeats") {
                    defaults.repeats = Some(positive(value, "defaults.repeats")?);
                }
                if let Some(value) = given.get("concurrency") {
                    defaults.concurrency = Some(positive(value, "defaults.concurrency")?);
                }
                Some(defaults)
            }
            Some(_) => {
                return Err(EvalDefinitionError::new(
                    "defaults",
                    "defaults must be an object",
                ))
            }
        };
        Ok(EvalSet {
            name,
            version,
            description,
            cases,
            defaults,
        })
    }

    /// The set as OMA's JSON (the keys it has, in OMA's order).
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        out.insert("name".into(), self.name.clone().into());
        out.insert("version".into(), self.version.clone().into());
        if let Some(description) = &self.description {
            out.insert("description".into(), description.clone().into());
        }
        let cases = self.cases.iter().map(EvalCase::to_json).collect();
        out.insert("cases".into(), Value::Array(cases));
        if let Some(defaults) = &self.defaults {
            let mut given = Map::new();
            if let Some(n) = defaults.repeats {
                given.insert("repeats".into(), n.into());
            }
            if let Some(n) = defaults.concurrency {
                given.insert("concurrency".into(), n.into());
            }
            out.insert("defaults".into(), Value::Object(given));
        }
        Value::Object(out)
    }
}

impl EvalCase {
    /// The case as OMA's JSON (the keys it has, in OMA's order).
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        out.insert("id".into(), self.id.clone().into());
        out.insert("input".into(), self.input.clone());
        if let Some(expected) = &self.expected {
            out.insert("expected".into(), expected.clone());
        }
        if let Some(tags) = &self.tags {
            out.insert("tags".into(), tags.clone().into());
        }
        if let Some(metadata) = &self.metadata {
            out.insert("metadata".into(), Value::Object(metadata.clone()));
        }
        Value::Object(out)
    }
}
