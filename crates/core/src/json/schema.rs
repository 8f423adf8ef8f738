//! A JSON Schema checker of the component's own: whether a schema is one it checks whole
//! ([`check_schema`]), and the problems of a value against it ([`issues`]), with zod's
//! messages. Structured output ([`crate::agent::structured`]) checks final answers with it.
//!
//! Why a checker of its own: the maintained crates (`jsonschema`, `boon`) bring a regex
//! engine, URL and IDNA tables and a random source that does not build for
//! `wasm32-unknown-unknown` without a host import, which the `portable` world must not have.
//! The keywords checked are those that the schemas OMA's users write (zod's and pydantic's
//! JSON Schema) use: `type`, `enum`, `const`, the bounds of numbers, strings, arrays and
//! objects, `multipleOf`, `uniqueItems`, `properties`, `required`, `additionalProperties`,
//! `items`, `prefixItems`, `allOf`, `anyOf`, `oneOf`, `not` and local `$ref`s. A schema with an
//! assertion keyword this checker does not check (`pattern`, `if`, `contains`, ...) is refused
//! by [`check_schema`], never half-checked; annotations (`title`, `format`, ...) are let be.

use serde_json::{Map, Value};

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

/// Whether `schema` is a JSON Schema this checker checks whole: an object or a boolean, each
/// keyword it knows of the right shape, every `$ref` naming a schema of the document, no
/// assertion keyword it does not check. Fails saying why and where (a JSON Pointer into the
/// schema).
pub fn check_schema(schema: &Value) -> Result<(), String> {
    check_at(schema, schema, "", 0)
}

/// The problems of `value` against `schema` (one [`check_schema`] passed), in the order the
/// schema's keywords find them; empty when it matches. A check that would visit more than
/// `MAX_STEPS` schema-and-value pairs stops with one problem at the root, that the schema is
/// too complex to check, whatever it found before.
pub fn issues(schema: &Value, value: &Value) -> Vec<Issue> {
    let mut issues = Vec::new();
    let walk = Walk {
        schema,
        steps: std::cell::Cell::new(0),
    };
    check(&walk, schema, value, &mut Vec::new(), &mut issues, 0);
    if walk.exhausted() {
        // Whatever was found so far, the value was not checked whole.
        return vec![Issue {
            path: Vec::new(),
            message: "The schema is too complex to check".to_owned(),
        }];
    }
    issues
}

fn check_at(root: &Value, schema: &Value, at: &str, depth: usize) -> Result<(), String> {
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
                    check_at(root, entry, &format!("{path}/{name}"), depth + 1)?;
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
            "additionalProperties" | "not" => check_at(root, value, &path, depth + 1)?,
            "items" => match value {
                Value::Array(items) => {
                    for (i, item) in items.iter().enumerate() {
                        check_at(root, item, &format!("{path}/{i}"), depth + 1)?;
                    }
                }
                _ => check_at(root, value, &path, depth + 1)?,
            },
            "prefixItems" | "anyOf" | "oneOf" | "allOf" => {
                let Some(items) = value.as_array().filter(|items| !items.is_empty()) else {
                    return Err(format!("{path}: must be a non-empty list of schemas"));
                };
                for (i, item) in items.iter().enumerate() {
                    check_at(root, item, &format!("{path}/{i}"), depth + 1)?;
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

/// A problem found in a value: where it is and what is wrong, in zod's words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Issue {
    /// The keys and indexes from the value's root to the value at fault; empty for the root.
    pub path: Vec<String>,
    /// What is wrong (`Expected string, received number`, `Required`, ...).
    pub message: String,
}

fn push(issues: &mut Vec<Issue>, path: &[String], message: String) {
    issues.push(Issue {
        path: path.to_vec(),
        message,
    });
}

/// zod's name of a value's type (OMA's word for it: `array` and `null` told apart).
fn json_type(value: &Value) -> &'static str {
    super::type_word(Some(value))
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
        Value::Number(n) => super::writer::js_number(n),
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

    fn issue(path: &[&str], message: &str) -> Issue {
        Issue {
            path: path.iter().map(|key| (*key).to_owned()).collect(),
            message: message.to_owned(),
        }
    }

    #[test]
    fn issues_name_the_path_and_stop_at_a_wrong_type() {
        let schema = json!({
            "type": "object",
            "properties": {"list": {"type": "array", "items": {"type": "integer", "minimum": 2}}},
            "required": ["list", "name"]
        });
        assert_eq!(check_schema(&schema), Ok(()));
        assert_eq!(
            issues(&schema, &json!({"list": [2, 1, "x", 2.5]})),
            vec![
                issue(&["list", "1"], "Number must be greater than or equal to 2"),
                issue(&["list", "2"], "Expected integer, received string"),
                issue(&["list", "3"], "Expected integer, received float"),
                issue(&["name"], "Required"),
            ]
        );
        assert_eq!(
            issues(&schema, &json!("x")),
            vec![issue(&[], "Expected object, received string")]
        );
        assert!(issues(&schema, &json!({"list": [], "name": 0})).is_empty());
    }

    #[test]
    fn a_walk_past_its_steps_is_one_issue_at_the_root() {
        let schema = json!({
            "$defs": {"a": {"anyOf": [{"not": {"$ref": "#/$defs/a"}}, {"$ref": "#/$defs/a"}]}},
            "$ref": "#/$defs/a"
        });
        assert_eq!(check_schema(&schema), Ok(()));
        assert_eq!(
            issues(&schema, &json!(1)),
            vec![issue(&[], "The schema is too complex to check")]
        );
    }
}
