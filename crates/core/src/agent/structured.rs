//! Structured output (OMA's `outputSchema`, `docs/agent.md#structured-output`): the instruction
//! appended to the system prompt, the JSON read out of the final answer, its validation against
//! a JSON Schema, the feedback turn of the one retry, and the failure when the retry fails too.
//!
//! The run machine ([`crate::agent::machine`]) drives the attempts; this module holds the rules.
//! Validation is done by the component's own JSON Schema checker ([`crate::json::schema`], which
//! says why it has one and what it checks), unless the host validates (a JavaScript zod
//! schema, a pydantic model): then the machine hands the extracted value out and takes the
//! host's verdict. Either way the verdict is OMA's message, built here.

use serde_json::Value;

use crate::agent::outcome::{ErrorInfo, Failure, FailureKind, Status, StatusCode};
use crate::json::schema;
use crate::json::type_word;
use crate::json::writer::js_number;
use crate::message::{ContentBlock, LlmMessage, Role, TextBlock};

/// OMA's message of `StructuredOutputValidationError`.
pub const VALIDATION_FAILED_MESSAGE: &str = "Structured output validation failed after retry.";

/// The verdict a host with no validator of its own gives a `validate-output` step: not
/// validated (never taken as valid), in OMA's message shape.
pub const NO_HOST_VALIDATOR: &str =
    "Output validation failed:\n  - (root): this host has no validator of its own";

/// An agent's `outputSchema`: the JSON Schema the final answer must match, and who checks it.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputSchema {
    schema: Value,
    host_validates: bool,
}

impl OutputSchema {
    /// A checked schema. `host_validates`: the host checks each answer (it holds the schema the
    /// user wrote, a zod schema or a pydantic model, of which `schema` is the JSON Schema shown
    /// to the model); otherwise [`OutputSchema::validate`] does. Fails, saying why, for a value
    /// that is no JSON Schema, or one that uses a keyword the component's checker does not check
    /// ([`schema::check_schema`]); a schema the host validates need only be an object or a
    /// boolean.
    pub fn new(schema: Value, host_validates: bool) -> Result<Self, String> {
        if host_validates {
            // Only shown to the model: the host's validator is the judge of its own schema.
            if !(schema.is_object() || schema.is_boolean()) {
                return Err(format!(
                    "a schema must be an object or a boolean, got {}",
                    type_word(Some(&schema))
                ));
            }
        } else {
            schema::check_schema(&schema)?;
        }
        Ok(OutputSchema {
            schema,
            host_validates,
        })
    }

    /// A schema from JSON text (the WIT's `output-schema`), validated here. Fails with
    /// [`crate::error::Error::InvalidRequest`] naming `outputSchema`, as the JSON
    /// configuration does, for text that is not JSON or not a JSON Schema.
    pub fn from_text(text: &str) -> Result<Self, crate::error::Error> {
        let invalid = |why: String| crate::error::Error::InvalidRequest {
            message: format!("the agent configuration is not valid: `outputSchema` {why}"),
        };
        let value: Value =
            crate::json::from_str(text).map_err(|e| invalid(format!("is not JSON: {e}")))?;
        OutputSchema::new(value, false)
            .map_err(|why| invalid(format!("is not a JSON Schema: {why}")))
    }

    /// The JSON Schema.
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// Whether the host validates each answer.
    pub fn host_validates(&self) -> bool {
        self.host_validates
    }

    /// OMA's instruction block, to follow the system prompt: a heading, three sentences, and
    /// the schema as JSON indented by two spaces in a bare code fence. It starts with a line
    /// break, so with a system prompt the two are a blank line apart.
    pub fn instruction(&self) -> String {
        let mut schema = String::new();
        pretty(&self.schema, 0, &mut schema);
        [
            "",
            "## Output Format (REQUIRED)",
            "You MUST respond with ONLY valid JSON that conforms to the following JSON Schema.",
            "Do NOT include any text, markdown fences, or explanation outside the JSON object.",
            "Do NOT wrap the JSON in ```json code fences.",
            "",
            "```",
            &schema,
            "```",
        ]
        .join("\n")
    }

    /// The system prompt with the instruction after it (a line break between), or the
    /// instruction alone when there is none (or it is empty).
    pub fn system_prompt(&self, system: Option<&str>) -> String {
        match system {
            Some(system) if !system.is_empty() => format!("{system}\n{}", self.instruction()),
            _ => self.instruction(),
        }
    }

    /// Checks `value` against the schema: `Err` with OMA's message, `Output validation
    /// failed:` then one line per problem, `  - <path>: <message>` (the path's keys and
    /// indexes joined with `.`, `(root)` for the value itself; messages in zod's words).
    pub fn validate(&self, value: &Value) -> Result<(), String> {
        let issues = schema::issues(&self.schema, value);
        if issues.is_empty() {
            return Ok(());
        }
        Err(issues_message(issues.iter().map(|issue| {
            (issue.path.as_slice(), issue.message.as_str())
        })))
    }
}

/// OMA's validation message from `(path, message)` pairs: `Output validation failed:` and one
/// line `  - <path>: <message>` each. Hosts that validate with their own library build the same
/// text.
pub fn issues_message<'a>(issues: impl Iterator<Item = (&'a [String], &'a str)>) -> String {
    let mut out = String::from("Output validation failed:");
    for (path, message) in issues {
        out.push_str("\n  - ");
        if path.is_empty() {
            out.push_str("(root)");
        } else {
            out.push_str(&path.join("."));
        }
        out.push_str(": ");
        out.push_str(message);
    }
    out
}

/// The JSON value in a model's final text, as OMA reads it, in this order: the whole text
/// (trimmed); the first ` ```json ` fenced block; the first bare ` ``` ` fenced block; from the
/// first `{` to the last `}`; from the first `[` to the last `]`. Fails with OMA's message
/// naming the first 100 characters (UTF-16 units) of the trimmed text.
pub fn extract_json(raw: &str) -> Result<Value, String> {
    let trimmed = js_trim(raw);
    if let Some(value) = parse(trimmed) {
        return Ok(value);
    }
    for opener in ["```json", "```"] {
        if let Some(inner) = fenced(trimmed, opener) {
            if !inner.is_empty() {
                if let Some(value) = parse(js_trim(inner)) {
                    return Ok(value);
                }
            }
        }
    }
    for (open, close) in [('{', '}'), ('[', ']')] {
        if let (Some(start), Some(end)) = (trimmed.find(open), trimmed.rfind(close)) {
            if end > start {
                if let Some(value) = parse(&trimmed[start..=end]) {
                    return Ok(value);
                }
            }
        }
    }
    Err(format!(
        "Failed to extract JSON from output. Raw output begins with: \"{}\"",
        crate::js_text::prefix(trimmed, 100)
    ))
}

/// The user turn of the retry: OMA's feedback naming `error` (an extraction or validation
/// message).
pub fn feedback(error: &str) -> LlmMessage {
    let text = [
        "Your previous response did not produce valid JSON matching the required schema.",
        "",
        &format!("Error: {error}"),
        "",
        "Please try again. Respond with ONLY valid JSON, no other text.",
    ]
    .join("\n");
    LlmMessage {
        role: Role::User,
        content: vec![ContentBlock::Text(TextBlock { text })],
    }
}

/// OMA's `StructuredOutputValidationError` as a run's failure: status `error`, kind
/// `validation`, code `STRUCTURED_OUTPUT_VALIDATION_FAILED`, not retryable.
pub fn validation_failure() -> Failure {
    Failure {
        status: Status {
            code: StatusCode::Error,
            message: Some(VALIDATION_FAILED_MESSAGE.to_owned()),
        },
        error_info: ErrorInfo {
            kind: FailureKind::Validation,
            code: Some("STRUCTURED_OUTPUT_VALIDATION_FAILED".to_owned()),
            name: "StructuredOutputValidationError".to_owned(),
            message: VALIDATION_FAILED_MESSAGE.to_owned(),
            retryable: false,
            http_status: None,
            provider: None,
        },
    }
}

/// `JSON.parse` of a whole text.
fn parse(text: &str) -> Option<Value> {
    crate::json::from_str(text).ok()
}

/// Whether `c` is white space to JavaScript's `trim` and `\s`.
pub(crate) fn js_space(c: char) -> bool {
    (c.is_whitespace() && c != '\u{85}') || c == '\u{feff}'
}

fn js_trim(text: &str) -> &str {
    text.trim_matches(js_space)
}

/// What `/<opener>\s*([\s\S]*?)```/` captures first in `text`: after the first opener and the
/// white space that follows it, up to the next three backticks. When the first opener has no
/// closing fence after it, no later one has (a later opener starts inside the range searched),
/// so the first is the only one tried.
fn fenced<'a>(text: &'a str, opener: &str) -> Option<&'a str> {
    let start = text.find(opener)? + opener.len();
    let rest = &text[start..];
    let body = rest.trim_start_matches(js_space);
    let end = body.find("```")?;
    Some(&body[..end])
}

/// `JSON.stringify(value, null, 2)`, appended to `out` at `indent` levels.
pub(crate) fn pretty(value: &Value, indent: usize, out: &mut String) {
    match value {
        Value::Array(items) if !items.is_empty() => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                out.push_str(if i == 0 { "\n" } else { ",\n" });
                push_indent(out, indent + 1);
                pretty(item, indent + 1, out);
            }
            out.push('\n');
            push_indent(out, indent);
            out.push(']');
        }
        Value::Object(map) if !map.is_empty() => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                out.push_str(if i == 0 { "\n" } else { ",\n" });
                push_indent(out, indent + 1);
                out.push_str(&Value::String(key.clone()).to_string());
                out.push_str(": ");
                pretty(item, indent + 1, out);
            }
            out.push('\n');
            push_indent(out, indent);
            out.push('}');
        }
        Value::Number(n) => out.push_str(&js_number(n)),
        other => out.push_str(&other.to_string()),
    }
}

fn push_indent(out: &mut String, levels: usize) {
    for _ in 0..levels {
        out.push_str("  ");
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema(value: Value) -> OutputSchema {
        OutputSchema::new(value, false).expect("a schema")
    }

    #[test]
    fn extraction_follows_omas_order() {
        assert_eq!(extract_json("  {\"a\": 1}\n"), Ok(json!({"a": 1})));
        assert_eq!(extract_json("42"), Ok(json!(42)));
        assert_eq!(
            extract_json("Here:\n```json\n{\"a\": 2}\n```\nand ```{\"a\": 3}```"),
            Ok(json!({"a": 2}))
        );
        assert_eq!(extract_json("Here:\n```\n[1, 2]\n```"), Ok(json!([1, 2])));
        // A broken json fence falls back to the bare fence, which starts at the same place.
        assert!(extract_json("```json\n{broken\n```").is_err());
        assert_eq!(
            extract_json("The answer is {\"a\": {\"b\": 1}} as asked."),
            Ok(json!({"a": {"b": 1}}))
        );
        assert_eq!(extract_json("list: [1, 2] done"), Ok(json!([1, 2])));
        assert_eq!(
            extract_json("  not JSON at all "),
            Err(
                "Failed to extract JSON from output. Raw output begins with: \"not JSON at all\""
                    .into()
            )
        );
        let long = "x".repeat(150);
        let err = extract_json(&long).unwrap_err();
        assert!(err.ends_with(&format!("\"{}\"", "x".repeat(100))), "{err}");
        // 100 UTF-16 units never split a surrogate pair.
        let emoji = format!("{}{}", "a".repeat(99), "\u{1F600}");
        let err = extract_json(&emoji).unwrap_err();
        assert!(err.ends_with(&format!("\"{}\"", "a".repeat(99))), "{err}");
        // JavaScript's trim takes U+FEFF and leaves U+0085.
        assert_eq!(extract_json("\u{feff}{}"), Ok(json!({})));
    }

    #[test]
    fn instruction_is_omas_block() {
        let s = schema(
            json!({"type": "object", "properties": {"a": {"type": "number", "enum": [1.0, 2.5]}}, "required": ["a"], "x": []}),
        );
        let text = s.instruction();
        assert!(text.starts_with("\n## Output Format (REQUIRED)\nYou MUST"));
        assert!(text.ends_with(
            "```\n{\n  \"type\": \"object\",\n  \"properties\": {\n    \"a\": {\n      \"type\": \"number\",\n      \"enum\": [\n        1,\n        2.5\n      ]\n    }\n  },\n  \"required\": [\n    \"a\"\n  ],\n  \"x\": []\n}\n```"
        ), "{text}");
        assert!(s
            .system_prompt(Some("Be brief."))
            .starts_with("Be brief.\n\n## Output"));
        assert!(s.system_prompt(None).starts_with("\n## Output"));
        assert!(s.system_prompt(Some("")).starts_with("\n## Output"));
    }

    #[test]
    fn validation_messages_are_zods() {
        let s = schema(json!({
            "type": "object",
            "properties": {
                "title": {"type": "string", "minLength": 2},
                "mood": {"type": "string", "enum": ["good", "bad"]},
                "score": {"type": "number", "minimum": 0, "maximum": 1},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
                "n": {"type": "integer"}
            },
            "required": ["title", "mood", "score", "tags"],
            "additionalProperties": false
        }));
        assert_eq!(
            s.validate(&json!({"title": "ok", "mood": "good", "score": 0.5, "tags": []})),
            Ok(())
        );
        let err = s
            .validate(&json!({"title": "x", "mood": "meh", "score": 3, "tags": ["a", 1, "c"], "n": 1.5, "z": 0}))
            .unwrap_err();
        assert_eq!(
            err,
            "Output validation failed:\n\
             \x20 - title: String must contain at least 2 character(s)\n\
             \x20 - mood: Invalid enum value. Expected 'good' | 'bad', received 'meh'\n\
             \x20 - score: Number must be less than or equal to 1\n\
             \x20 - tags: Array must contain at most 2 element(s)\n\
             \x20 - tags.1: Expected string, received number\n\
             \x20 - n: Expected integer, received float\n\
             \x20 - (root): Unrecognized key(s) in object: 'z'"
        );
        assert_eq!(
            s.validate(&json!({"mood": "good", "score": 1, "tags": []}))
                .unwrap_err(),
            "Output validation failed:\n  - title: Required"
        );
        assert_eq!(
            s.validate(&json!([1])).unwrap_err(),
            "Output validation failed:\n  - (root): Expected object, received array"
        );
    }

    #[test]
    fn references_unions_and_nullables() {
        let s = schema(json!({
            "$defs": {"node": {"type": "object", "properties": {"next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}, "required": ["next"]}},
            "$ref": "#/$defs/node"
        }));
        assert_eq!(s.validate(&json!({"next": {"next": null}})), Ok(()));
        assert_eq!(
            s.validate(&json!({"next": {"next": 1}})).unwrap_err(),
            "Output validation failed:\n  - next: Invalid input"
        );
        let t = schema(
            json!({"type": ["string", "null"], "oneOf": [{"const": "a"}, {"type": "null"}]}),
        );
        assert_eq!(t.validate(&json!(null)), Ok(()));
        assert!(t.validate(&json!("b")).is_err());
        // A reference that loops on itself stops instead of overflowing.
        let looped = schema(json!({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}));
        assert!(looped.validate(&json!(1)).is_err());
        // Unions of looping unions stop after a bounded number of steps, failing.
        let branching = schema(json!({
            "$defs": {"a": {"anyOf": [{"not": {"$ref": "#/$defs/a"}}, {"$ref": "#/$defs/a"}]}},
            "$ref": "#/$defs/a"
        }));
        assert_eq!(
            branching.validate(&json!(1)).unwrap_err(),
            "Output validation failed:\n  - (root): The schema is too complex to check"
        );
    }

    #[test]
    fn no_schema_is_refused_naming_why() {
        for (bad, why) in [
            (
                json!("object"),
                "a schema must be an object or a boolean, got string",
            ),
            (json!({"type": "text"}), "/type: \"text\" is not one of"),
            (
                json!({"properties": []}),
                "/properties: must be an object of schemas",
            ),
            (json!({"required": "a"}), "/required: must be a list"),
            (
                json!({"$ref": "#/nowhere"}),
                "/$ref: \"#/nowhere\" names no schema",
            ),
            (
                json!({"properties": {"a": {"pattern": "^x"}}}),
                "/properties/a/pattern: the keyword `pattern`",
            ),
            (json!({"anyOf": []}), "/anyOf: must be a non-empty list"),
            (
                json!({"minLength": -1}),
                "/minLength: must be a whole number",
            ),
        ] {
            let err = OutputSchema::new(bad.clone(), false).unwrap_err();
            assert!(err.starts_with(why), "{bad}: {err}");
        }
        // A host that validates may show the model any keyword.
        assert!(OutputSchema::new(json!({"type": "string", "pattern": "^x"}), true).is_ok());
        assert!(OutputSchema::new(json!(true), false).is_ok());
    }

    #[test]
    fn feedback_is_omas_turn() {
        let turn = feedback("Output validation failed:\n  - a: Required");
        assert_eq!(turn.role, Role::User);
        let ContentBlock::Text(TextBlock { text }) = &turn.content[0] else {
            panic!("a text block")
        };
        assert_eq!(
            text,
            "Your previous response did not produce valid JSON matching the required schema.\n\nError: Output validation failed:\n  - a: Required\n\nPlease try again. Respond with ONLY valid JSON, no other text."
        );
    }
}
