//! Structured output (OMA's `outputSchema`, `docs/agent.md#structured-output`): the instruction
//! appended to the system prompt, the JSON read out of the final answer, its validation against
//! a JSON Schema, the feedback turn of the one retry, and the failure when the retry fails too.
//!
//! The run machine ([`crate::agent::machine`]) drives the attempts; this module holds the rules.
//! Validation is done here, with a small JSON Schema validator of its own (the keywords below),
//! unless the host validates (a JavaScript zod schema, a pydantic model): then the machine hands
//! the extracted value out and takes the host's verdict.
//!
//! Why a validator of its own: the maintained crates (`jsonschema`, `boon`) bring a regex
//! engine, URL and IDNA tables and a random source that does not build for
//! `wasm32-unknown-unknown` without a host import, which the `portable` world must not have.
//! The keywords checked are those that the schemas OMA's users write (zod's and pydantic's
//! JSON Schema) use; a schema with an assertion keyword this validator does not check (`pattern`,
//! `if`, `contains`, ...) is refused when the agent is made, never half-checked.

use serde_json::{Map, Value};

use crate::agent::outcome::{ErrorInfo, Failure, FailureKind, Status, StatusCode};
use crate::message::{ContentBlock, LlmMessage, Role, TextBlock};

/// OMA's message of `StructuredOutputValidationError`.
pub const VALIDATION_FAILED_MESSAGE: &str = "Structured output validation failed after retry.";

/// The verdict a host with no validator of its own gives a `validate-output` step: not
/// validated (never taken as valid), in OMA's message shape.
pub const NO_HOST_VALIDATOR: &str =
    "Output validation failed:\n  - (root): this host has no validator of its own";

/// The most schemas one check walks into (nesting and `$ref` hops together): a schema whose
/// references loop without consuming the value stops here instead of overflowing the stack.
const MAX_DEPTH: usize = 128;

/// The most schema-and-value pairs one validation visits: unions of unions over a deep value
/// (or over references that loop) would otherwise take exponential time, and a gateway takes
/// its schemas from the request.
const MAX_STEPS: u32 = 100_000;

/// What a validation walks with: the whole schema (for references) and its step count.
struct Walk<'a> {
    schema: &'a Value,
    steps: std::cell::Cell<u32>,
}

impl Walk<'_> {
    /// Counts one visit; false once past [`MAX_STEPS`].
    fn step(&self) -> bool {
        let n = self.steps.get().saturating_add(1);
        self.steps.set(n);
        n <= MAX_STEPS
    }

    fn exhausted(&self) -> bool {
        self.steps.get() > MAX_STEPS
    }
}

/// Assertion keywords the validator does not check; a schema using one is refused.
const UNSUPPORTED: [&str; 17] = [
    "pattern",
    "patternProperties",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "contains",
    "minContains",
    "maxContains",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "$dynamicRef",
    "$recursiveRef",
    "additionalItems",
];

/// The JSON type names of `type`.
const TYPES: [&str; 7] = [
    "string", "number", "integer", "boolean", "object", "array", "null",
];

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
    /// that is no JSON Schema, or one that uses a keyword this validator does not check; a schema
    /// the host validates need only be an object or a boolean.
    pub fn new(schema: Value, host_validates: bool) -> Result<Self, String> {
        if host_validates {
            // Only shown to the model: the host's validator is the judge of its own schema.
            if !(schema.is_object() || schema.is_boolean()) {
                return Err(format!(
                    "a schema must be an object or a boolean, got {}",
                    json_type(&schema)
                ));
            }
        } else {
            check_schema(&schema, &schema, "", 0)?;
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
        let mut issues = Vec::new();
        let mut path = Vec::new();
        let walk = Walk {
            schema: &self.schema,
            steps: std::cell::Cell::new(0),
        };
        check(&walk, &self.schema, value, &mut path, &mut issues, 0);
        if walk.exhausted() {
            // Whatever was found so far, the value was not checked whole.
            let root: &[String] = &[];
            return Err(issues_message(std::iter::once((
                root,
                "The schema is too complex to check",
            ))));
        }
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
        utf16_prefix(trimmed, 100)
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
fn js_space(c: char) -> bool {
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

/// The first `units` UTF-16 code units of `text` (JavaScript's `slice(0, units)`), without a
/// half of a surrogate pair.
fn utf16_prefix(text: &str, units: usize) -> &str {
    let mut used = 0;
    for (at, c) in text.char_indices() {
        used += c.len_utf16();
        if used > units {
            return &text[..at];
        }
    }
    text
}

/// `JSON.stringify(value, null, 2)`, appended to `out` at `indent` levels.
fn pretty(value: &Value, indent: usize, out: &mut String) {
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

/// A number as JavaScript writes it: whole floats without `.0`.
fn js_number(n: &serde_json::Number) -> String {
    match n.as_f64() {
        Some(x) if n.is_f64() && x.fract() == 0.0 && x.abs() < 9_007_199_254_740_992.0 => {
            format!("{}", x as i64)
        }
        _ => n.to_string(),
    }
}

// ---------------------------------------------------------------------------------------------
// Checking a schema

fn check_schema(root: &Value, schema: &Value, at: &str, depth: usize) -> Result<(), String> {
    let here = |what: &str| {
        if at.is_empty() {
            what.to_owned()
        } else {
            format!("{at}: {what}")
        }
    };
    if depth > MAX_DEPTH {
        return Err(here("nested too deeply"));
    }
    let map = match schema {
        Value::Bool(_) => return Ok(()),
        Value::Object(map) => map,
        other => {
            return Err(here(&format!(
                "a schema must be an object or a boolean, got {}",
                json_type(other)
            )))
        }
    };
    let sub = |key: &str| format!("{at}/{key}");
    for (key, value) in map {
        let path = sub(key);
        match key.as_str() {
            "type" => {
                let names: Vec<&Value> = match value {
                    Value::Array(items) if !items.is_empty() => items.iter().collect(),
                    Value::String(_) => vec![value],
                    _ => return Err(format!("{path}: must be a type name or a list of them")),
                };
                for name in names {
                    if !name.as_str().is_some_and(|name| TYPES.contains(&name)) {
                        return Err(format!("{path}: {name} is not one of {}", TYPES.join(", ")));
                    }
                }
            }
            "properties" | "$defs" | "definitions" => {
                let Value::Object(entries) = value else {
                    return Err(format!("{path}: must be an object of schemas"));
                };
                for (name, entry) in entries {
                    check_schema(root, entry, &format!("{path}/{name}"), depth + 1)?;
                }
            }
            "required" => {
                let ok = value
                    .as_array()
                    .is_some_and(|items| items.iter().all(Value::is_string));
                if !ok {
                    return Err(format!("{path}: must be a list of property names"));
                }
            }
            "additionalProperties" | "not" => check_schema(root, value, &path, depth + 1)?,
            "items" => match value {
                Value::Array(items) => {
                    for (i, item) in items.iter().enumerate() {
                        check_schema(root, item, &format!("{path}/{i}"), depth + 1)?;
                    }
                }
                _ => check_schema(root, value, &path, depth + 1)?,
            },
            "prefixItems" | "anyOf" | "oneOf" | "allOf" => {
                let Some(items) = value.as_array().filter(|items| !items.is_empty()) else {
                    return Err(format!("{path}: must be a non-empty list of schemas"));
                };
                for (i, item) in items.iter().enumerate() {
                    check_schema(root, item, &format!("{path}/{i}"), depth + 1)?;
                }
            }
            "enum" if !value.is_array() => return Err(format!("{path}: must be a list")),
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum"
                if !value.is_number() =>
            {
                return Err(format!("{path}: must be a number"));
            }
            "multipleOf" if !value.as_f64().is_some_and(|x| x > 0.0) => {
                return Err(format!("{path}: must be a number above 0"));
            }
            "minLength" | "maxLength" | "minItems" | "maxItems" | "minProperties"
            | "maxProperties"
                if value.as_u64().is_none() =>
            {
                return Err(format!("{path}: must be a whole number, at least 0"));
            }
            "uniqueItems" if !value.is_boolean() => {
                return Err(format!("{path}: must be a boolean"));
            }
            "$ref" => {
                let target = value
                    .as_str()
                    .ok_or_else(|| format!("{path}: must be a string"))?;
                if resolve(root, target).is_none() {
                    return Err(format!(
                        "{path}: {target:?} names no schema of this document (only local references, `#` and `#/...`, are followed)"
                    ));
                }
            }
            word if UNSUPPORTED.contains(&word) => {
                return Err(format!(
                    "{path}: the keyword `{word}` is not checked by the component's validator"
                ));
            }
            // Annotations (`title`, `description`, `format`, `default`, `$schema`, ...).
            _ => {}
        }
    }
    Ok(())
}

/// The schema a local reference (`#`, `#/$defs/x`, any JSON Pointer after `#`) names.
fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    if pointer.is_empty() {
        return Some(root);
    }
    if !pointer.starts_with('/') {
        return None;
    }
    let decoded = pointer
        .split('/')
        .map(|part| part.replace("~1", "/").replace("~0", "~"))
        .collect::<Vec<_>>()
        .join("/");
    // `pointer` decodes part by part; a decoded part holding `/` is rare enough to walk by hand.
    if decoded == pointer {
        return root.pointer(pointer);
    }
    let mut at = root;
    for part in pointer.split('/').skip(1) {
        let key = part.replace("~1", "/").replace("~0", "~");
        at = match at {
            Value::Object(map) => map.get(&key)?,
            Value::Array(items) => items.get(key.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(at)
}

// ---------------------------------------------------------------------------------------------
// Checking a value

struct Issue {
    path: Vec<String>,
    message: String,
}

fn push(issues: &mut Vec<Issue>, path: &[String], message: String) {
    issues.push(Issue {
        path: path.to_vec(),
        message,
    });
}

/// zod's name of a value's type.
fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn is_integer(n: &serde_json::Number) -> bool {
    n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|x| x.fract() == 0.0)
}

fn has_type(value: &Value, name: &str) -> bool {
    match (name, value) {
        ("integer", Value::Number(n)) => is_integer(n),
        ("number", Value::Number(_)) => true,
        (name, value) => name == json_type(value),
    }
}

/// A value shown in a message as JavaScript shows it: strings in single quotes (zod's enum
/// message), anything else as JSON.
fn shown(value: &Value) -> String {
    match value {
        Value::String(text) => format!("'{text}'"),
        Value::Number(n) => js_number(n),
        other => other.to_string(),
    }
}

/// Whether two JSON values are equal as JSON Schema compares them (numbers by value).
fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| equal(v, w)))
        }
        _ => a == b,
    }
}

fn check(
    root: &Walk<'_>,
    schema: &Value,
    value: &Value,
    path: &mut Vec<String>,
    issues: &mut Vec<Issue>,
    depth: usize,
) {
    if depth > MAX_DEPTH {
        push(issues, path, "Schema nesting too deep".to_owned());
        return;
    }
    if !root.step() {
        // `validate` reports it.
        return;
    }
    let map = match schema {
        Value::Bool(true) => return,
        Value::Bool(false) => {
            push(issues, path, "Invalid input".to_owned());
            return;
        }
        Value::Object(map) => map,
        // Refused when the schema was made.
        _ => return,
    };
    if let Some(target) = map.get("$ref").and_then(Value::as_str) {
        if let Some(target) = resolve(root.schema, target) {
            check(root, target, value, path, issues, depth + 1);
        }
    }
    if let Some(types) = map.get("type") {
        let names: Vec<&str> = match types {
            Value::String(name) => vec![name.as_str()],
            Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !names.iter().any(|name| has_type(value, name)) {
            let received = match value {
                Value::Number(_) if names == ["integer"] => "float",
                other => json_type(other),
            };
            push(
                issues,
                path,
                format!("Expected {}, received {received}", names.join(" | ")),
            );
            // As zod: a value of the wrong type is not checked further.
            return;
        }
    }
    if let Some(Value::Array(options)) = map.get("enum") {
        if !options.iter().any(|option| equal(option, value)) {
            let expected: Vec<String> = options.iter().map(shown).collect();
            push(
                issues,
                path,
                format!(
                    "Invalid enum value. Expected {}, received {}",
                    expected.join(" | "),
                    shown(value)
                ),
            );
        }
    }
    if let Some(expected) = map.get("const") {
        if !equal(expected, value) {
            push(
                issues,
                path,
                format!("Invalid literal value, expected {expected}"),
            );
        }
    }
    match value {
        Value::Number(n) => check_number(map, n, path, issues),
        Value::String(text) => {
            let chars = text.chars().count() as u64;
            if let Some(min) = map.get("minLength").and_then(Value::as_u64) {
                if chars < min {
                    push(
                        issues,
                        path,
                        format!("String must contain at least {min} character(s)"),
                    );
                }
            }
            if let Some(max) = map.get("maxLength").and_then(Value::as_u64) {
                if chars > max {
                    push(
                        issues,
                        path,
                        format!("String must contain at most {max} character(s)"),
                    );
                }
            }
        }
        Value::Array(items) => check_array(root, map, items, path, issues, depth),
        Value::Object(object) => check_object(root, map, object, path, issues, depth),
        Value::Null | Value::Bool(_) => {}
    }
    if let Some(Value::Array(all)) = map.get("allOf") {
        for part in all {
            check(root, part, value, path, issues, depth + 1);
        }
    }
    for (key, exactly_one) in [("anyOf", false), ("oneOf", true)] {
        if let Some(Value::Array(options)) = map.get(key) {
            let matching = options
                .iter()
                .filter(|option| passes(root, option, value, depth))
                .count();
            if matching == 0 {
                push(issues, path, "Invalid input".to_owned());
            } else if exactly_one && matching > 1 {
                push(
                    issues,
                    path,
                    "Invalid input: matches more than one schema of oneOf".to_owned(),
                );
            }
        }
    }
    if let Some(not) = map.get("not") {
        if passes(root, not, value, depth) {
            push(issues, path, "Invalid input".to_owned());
        }
    }
}

/// Whether `value` matches `schema` with no issue.
fn passes(root: &Walk<'_>, schema: &Value, value: &Value, depth: usize) -> bool {
    let mut issues = Vec::new();
    check(root, schema, value, &mut Vec::new(), &mut issues, depth + 1);
    issues.is_empty()
}

fn check_number(
    map: &Map<String, Value>,
    n: &serde_json::Number,
    path: &[String],
    issues: &mut Vec<Issue>,
) {
    let Some(x) = n.as_f64() else { return };
    let bound = |key: &str| map.get(key).and_then(Value::as_f64);
    let show = |key: &str| map.get(key).map(shown).unwrap_or_default();
    if bound("minimum").is_some_and(|min| x < min) {
        push(
            issues,
            path,
            format!(
                "Number must be greater than or equal to {}",
                show("minimum")
            ),
        );
    }
    if bound("exclusiveMinimum").is_some_and(|min| x <= min) {
        push(
            issues,
            path,
            format!("Number must be greater than {}", show("exclusiveMinimum")),
        );
    }
    if bound("maximum").is_some_and(|max| x > max) {
        push(
            issues,
            path,
            format!("Number must be less than or equal to {}", show("maximum")),
        );
    }
    if bound("exclusiveMaximum").is_some_and(|max| x >= max) {
        push(
            issues,
            path,
            format!("Number must be less than {}", show("exclusiveMaximum")),
        );
    }
    if let Some(step) = bound("multipleOf") {
        let ratio = x / step;
        if step > 0.0 && (ratio - ratio.round()).abs() > 1e-9 {
            push(
                issues,
                path,
                format!("Number must be a multiple of {}", show("multipleOf")),
            );
        }
    }
}

fn check_array(
    root: &Walk<'_>,
    map: &Map<String, Value>,
    items: &[Value],
    path: &mut Vec<String>,
    issues: &mut Vec<Issue>,
    depth: usize,
) {
    let len = items.len() as u64;
    if let Some(min) = map.get("minItems").and_then(Value::as_u64) {
        if len < min {
            push(
                issues,
                path,
                format!("Array must contain at least {min} element(s)"),
            );
        }
    }
    if let Some(max) = map.get("maxItems").and_then(Value::as_u64) {
        if len > max {
            push(
                issues,
                path,
                format!("Array must contain at most {max} element(s)"),
            );
        }
    }
    if map.get("uniqueItems") == Some(&Value::Bool(true)) {
        // Each comparison is a step, so a long list cannot make this quadratic walk endless.
        let repeated = items
            .iter()
            .enumerate()
            .any(|(i, a)| items[..i].iter().any(|b| !root.step() || equal(a, b)));
        if repeated {
            push(issues, path, "Array items must be unique".to_owned());
        }
    }
    // `prefixItems` (2020-12) or a list under `items` (draft 7) for the first items; `items`
    // as a schema for the rest.
    let (prefix, rest): (&[Value], Option<&Value>) =
        match (map.get("prefixItems"), map.get("items")) {
            (Some(Value::Array(prefix)), rest) => (prefix, rest),
            (_, Some(Value::Array(prefix))) => (prefix, None),
            (_, rest) => (&[], rest),
        };
    for (i, item) in items.iter().enumerate() {
        let schema = prefix
            .get(i)
            .or(if i >= prefix.len() { rest } else { None });
        if let Some(schema) = schema {
            path.push(i.to_string());
            check(root, schema, item, path, issues, depth + 1);
            path.pop();
        }
    }
}

fn check_object(
    root: &Walk<'_>,
    map: &Map<String, Value>,
    object: &Map<String, Value>,
    path: &mut Vec<String>,
    issues: &mut Vec<Issue>,
    depth: usize,
) {
    let empty = Map::new();
    let properties = match map.get("properties") {
        Some(Value::Object(properties)) => properties,
        _ => &empty,
    };
    let required: Vec<&str> = map
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    // In the schema's order, as zod walks its shape; required names without a schema after.
    for (name, schema) in properties {
        path.push(name.clone());
        match object.get(name) {
            Some(value) => check(root, schema, value, path, issues, depth + 1),
            None if required.contains(&name.as_str()) => {
                push(issues, path, "Required".to_owned());
            }
            None => {}
        }
        path.pop();
    }
    for name in required {
        if !properties.contains_key(name) && !object.contains_key(name) {
            path.push(name.to_owned());
            push(issues, path, "Required".to_owned());
            path.pop();
        }
    }
    match map.get("additionalProperties") {
        Some(Value::Bool(false)) => {
            let extra: Vec<String> = object
                .keys()
                .filter(|key| !properties.contains_key(*key))
                .map(|key| format!("'{key}'"))
                .collect();
            if !extra.is_empty() {
                push(
                    issues,
                    path,
                    format!("Unrecognized key(s) in object: {}", extra.join(", ")),
                );
            }
        }
        Some(schema @ Value::Object(_)) => {
            for (key, value) in object {
                if !properties.contains_key(key) {
                    path.push(key.clone());
                    check(root, schema, value, path, issues, depth + 1);
                    path.pop();
                }
            }
        }
        _ => {}
    }
    let len = object.len() as u64;
    if let Some(min) = map.get("minProperties").and_then(Value::as_u64) {
        if len < min {
            push(
                issues,
                path,
                format!("Object must have at least {min} key(s)"),
            );
        }
    }
    if let Some(max) = map.get("maxProperties").and_then(Value::as_u64) {
        if len > max {
            push(
                issues,
                path,
                format!("Object must have at most {max} key(s)"),
            );
        }
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
