//! How a host turns trace records on for a run (`docs/observability.md#turning-records-on`):
//! OMA's observability options as JSON, `{"capture"?, "runId"?, "metadata"?}`, read and checked
//! before the run exists, with OMA's messages for a run id or metadata OMA refuses.

use serde_json::{Map, Value};

use super::capture::CapturePolicy;
use crate::error::Error;
use crate::json::object::Object;

/// The options a run's records are made with.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecordOptions {
    /// What content the records may hold (OMA's `observability.capture`).
    pub capture: CapturePolicy,
    /// The run's id (OMA's `runId` run option); made up when absent.
    pub run_id: Option<String>,
    /// The run's metadata (OMA's `metadata` run option), checked as OMA checks it: the root
    /// span carries each entry as `oma.meta.<key>`.
    pub metadata: Map<String, Value>,
    /// The span the run's records continue, when a host has one (the gateway's request span):
    /// the records take its trace, and the run's span is its child. Not OMA's: a run of OMA
    /// starts a trace of its own, as a run does here without it. Never read from JSON.
    pub parent: Option<TraceParent>,
}

/// A span in a trace a host continues.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceParent {
    /// The trace: 32 lowercase hex digits.
    pub trace_id: String,
    /// The span: 16 lowercase hex digits.
    pub span_id: String,
}

/// The most metadata entries a run may carry.
const MAX_METADATA_ENTRIES: usize = 32;
/// The most characters a metadata string keeps.
const MAX_METADATA_CHARS: usize = 1024;

impl RecordOptions {
    /// The options of OMA's JSON; a key or value OMA would not take is refused, naming it (a
    /// run id or metadata with OMA's own message).
    pub fn from_json(text: &str) -> Result<Self, Error> {
        let bad = |message: &dyn std::fmt::Display| Error::InvalidRequest {
            message: format!("the observability options are not valid: {message}"),
        };
        let value: Value = crate::json::parse_value(text).map_err(|e| bad(&e))?;
        let mut object = Object::strict(value).map_err(|e| bad(&e))?;
        let capture = match object.object("capture").map_err(|e| bad(&e))? {
            Some(capture) => CapturePolicy::from_object(capture).map_err(|e| bad(&e))?,
            None => CapturePolicy::default(),
        };
        let run_id = object.string("runId").map_err(|e| bad(&e))?;
        let metadata = object.take("metadata");
        object.finish().map_err(|e| bad(&e))?;
        if let Some(run_id) = &run_id {
            check_run_id(run_id)?;
        }
        let metadata = match metadata {
            Some(metadata) => check_metadata(metadata)?,
            None => Map::new(),
        };
        Ok(RecordOptions {
            capture,
            run_id,
            metadata,
            parent: None,
        })
    }
}

/// OMA's rule for a caller's run id: 1 to 128 characters.
pub fn check_run_id(run_id: &str) -> Result<(), Error> {
    let length = crate::js_text::len(run_id);
    if (1..=128).contains(&length) {
        Ok(())
    } else {
        Err(Error::InvalidRequest {
            message: "runId must contain between 1 and 128 characters.".into(),
        })
    }
}

/// OMA's `validateRunMetadata`: an object of at most 32 entries, keys of `[a-z0-9_.]{1,64}`
/// that neither start with `oma.` nor are `_overridden`, values that are strings (cut to 1024
/// characters), numbers, booleans, or arrays of one of those; the entries as kept.
pub fn check_metadata(metadata: Value) -> Result<Map<String, Value>, Error> {
    let fail = |message: String| Error::InvalidRequest { message };
    let Value::Object(entries) = metadata else {
        return Err(fail(
            "metadata must be a record of trace attribute values.".into(),
        ));
    };
    if entries.len() > MAX_METADATA_ENTRIES {
        return Err(fail(format!(
            "metadata must contain at most {MAX_METADATA_ENTRIES} entries."
        )));
    }
    let mut kept = Map::new();
    for (key, value) in entries {
        if key.starts_with("oma.") {
            return Err(fail(format!(
                "metadata key \"{key}\" uses the reserved \"oma.\" prefix."
            )));
        }
        if key == "_overridden" {
            return Err(fail(format!(
                "metadata key \"{key}\" is reserved for framework restore state."
            )));
        }
        let well_formed = (1..=64).contains(&key.len())
            && key
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'.');
        if !well_formed {
            return Err(fail(format!(
                "metadata key \"{key}\" must match [a-z0-9_.]{{1,64}}."
            )));
        }
        let unsupported = || {
            fail(format!(
                "metadata value for \"{key}\" is not a supported trace attribute."
            ))
        };
        let value = match value {
            Value::String(text) => Value::String(cut(&text)),
            Value::Bool(_) | Value::Number(_) => value,
            Value::Array(items) => {
                let mut first: Option<fn(&Value) -> bool> = None;
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    let same: fn(&Value) -> bool = match &item {
                        Value::String(_) => Value::is_string,
                        Value::Number(_) => Value::is_number,
                        Value::Bool(_) => Value::is_boolean,
                        _ => return Err(unsupported()),
                    };
                    if let Some(first) = first {
                        if !first(&item) {
                            return Err(fail(format!(
                                "metadata value for \"{key}\" must be a homogeneous scalar array."
                            )));
                        }
                    }
                    first = Some(same);
                    out.push(match item {
                        Value::String(text) => Value::String(cut(&text)),
                        other => other,
                    });
                }
                Value::Array(out)
            }
            Value::Null | Value::Object(_) => return Err(unsupported()),
        };
        kept.insert(key, value);
    }
    Ok(kept)
}

fn cut(text: &str) -> String {
    crate::agent::outcome::truncate_units(text, MAX_METADATA_CHARS)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn message(text: &str) -> String {
        RecordOptions::from_json(text)
            .expect_err("refused")
            .to_string()
    }

    #[test]
    fn options_are_read() {
        let options = RecordOptions::from_json(
            r#"{"capture": {"toolInput": "redacted"}, "runId": "r-1", "metadata": {"experiment": "b", "n": 2, "tags": ["x", "y"]}}"#,
        )
        .expect("options");
        assert_eq!(options.run_id.as_deref(), Some("r-1"));
        assert_eq!(
            options.capture.tool_input,
            super::super::capture::Content::Redacted
        );
        assert_eq!(
            Value::Object(options.metadata),
            json!({"experiment": "b", "n": 2, "tags": ["x", "y"]})
        );
        assert_eq!(
            RecordOptions::from_json("{}").expect("none"),
            RecordOptions::default()
        );
    }

    /// OMA's messages, byte for byte, for what OMA refuses; ours for the rest.
    #[test]
    fn what_oma_refuses_is_refused_with_its_message() {
        assert_eq!(
            message(r#"{"runId": ""}"#),
            "runId must contain between 1 and 128 characters."
        );
        let long = format!(r#"{{"runId": "{}"}}"#, "r".repeat(129));
        assert_eq!(
            message(&long),
            "runId must contain between 1 and 128 characters."
        );
        for (metadata, expected) in [
            ("[]", "metadata must be a record of trace attribute values."),
            (
                r#"{"oma.x": 1}"#,
                "metadata key \"oma.x\" uses the reserved \"oma.\" prefix.",
            ),
            (
                r#"{"_overridden": true}"#,
                "metadata key \"_overridden\" is reserved for framework restore state.",
            ),
            (
                r#"{"Big": 1}"#,
                "metadata key \"Big\" must match [a-z0-9_.]{1,64}.",
            ),
            (
                r#"{"k": null}"#,
                "metadata value for \"k\" is not a supported trace attribute.",
            ),
            (
                r#"{"k": [1, "a"]}"#,
                "metadata value for \"k\" must be a homogeneous scalar array.",
            ),
            (
                r#"{"k": [{}]}"#,
                "metadata value for \"k\" is not a supported trace attribute.",
            ),
        ] {
            assert_eq!(message(&format!(r#"{{"metadata": {metadata}}}"#)), expected);
        }
        let many: Map<String, Value> = (0..33).map(|i| (format!("k{i}"), json!(i))).collect();
        assert_eq!(
            message(&json!({"metadata": many}).to_string()),
            "metadata must contain at most 32 entries."
        );
        assert!(message(r#"{"sinks": []}"#).contains("unknown field `sinks`"));
        assert!(message(r#"{"capture": {"prompt": "all"}}"#).contains("`capture.prompt`"));
        assert!(message("[").starts_with("the observability options are not valid"));
    }

    #[test]
    fn metadata_strings_are_cut_to_1024_characters() {
        let options =
            RecordOptions::from_json(&json!({"metadata": {"note": "é".repeat(2000)}}).to_string())
                .expect("options");
        assert_eq!(
            options.metadata["note"].as_str().map(|s| s.chars().count()),
            Some(1024)
        );
    }
}
