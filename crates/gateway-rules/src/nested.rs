//! The nested fields of the chat routes' requests: every member of a message, a content part, a
//! tool call, a tool or a system block that the route does not read into OMA's request. Each is
//! found here with its place (`messages[2].name`) and its row of the field table
//! (`messages[].name`, [`crate::fields`]), which decides it per target dialect as it decides a
//! top-level field: passed, mapped, or refused with a `400` naming the place and the target
//! (dropped only under `OMA_GATEWAY_DROP_PARAMS`).
//!
//! What each route reads (and so never finds here): on `/v1/chat/completions`, a message's
//! `role` and `content`, an assistant's `tool_calls` (`id`, `type`, `function.name`,
//! `function.arguments`), a tool message's `tool_call_id`; a part's `type` with its `text`,
//! `image_url.url`, `video_url.url` or (in a tool message) `file.file_data` and
//! `file.filename`; a tool's `type` and `function` (`name`, `description`, `parameters`). On
//! `/v1/messages`, a message's `role` and `content`; a block's `type` and the members OMA's
//! block of that type has (`text`; `source` with `type`, `media_type`, `data`, `url`; `id`,
//! `name`, `input`; `tool_use_id`, `content`, `is_error`; `thinking`, `signature`; `data`) and
//! its `cache_control` (a row of its own); a system block's `type`, `text` and
//! `cache_control`; a tool's `name`, `description`, `input_schema` and `cache_control`. A block
//! type OMA has no block for is refused by OMA's guard, by name, whatever its members.
//!
//! A member whose value is `null` counts as not sent, as at the top level.

use serde_json::{Map, Value};

use crate::fields::NestedField;

/// Where a member is, and what the route reads there.
struct Place<'a> {
    /// The concrete path of the object (`messages[2].content[0]`).
    path: String,
    /// Its row (`messages[].content[]`).
    row: &'a str,
}

/// Collects the members of `object` at `place` that are not in `read` (and not `null`).
fn members(object: &Map<String, Value>, place: &Place, read: &[&str], out: &mut Vec<NestedField>) {
    for (key, value) in object {
        if value.is_null() || read.contains(&key.as_str()) {
            continue;
        }
        out.push(NestedField {
            row: format!("{}.{}", place.row, key),
            path: format!("{}.{}", place.path, key),
            value: small(value),
        });
    }
}

/// A member's value kept for its row's mapping: the value when it is a scalar (a mapping only
/// reads `detail`, `strict`, `type` and the like), `null` otherwise (a large value is never
/// copied for a decision that does not read it).
fn small(value: &Value) -> Value {
    match value {
        Value::Array(_) | Value::Object(_) => Value::Null,
        Value::String(text) if text.len() > 256 => Value::Null,
        other => other.clone(),
    }
}

/// The members of the object under `key` of `object`, when it is one.
fn inner(
    object: &Map<String, Value>,
    key: &str,
    place: &Place,
    read: &[&str],
    out: &mut Vec<NestedField>,
) {
    if let Some(Value::Object(inner)) = object.get(key) {
        let place = Place {
            path: format!("{}.{key}", place.path),
            row: &format!("{}.{key}", place.row),
        };
        members(inner, &place, read, out);
    }
}

/// The nested fields of a `/v1/chat/completions` request, `messages` and `tools` as sent.
pub fn chat(messages: &[Value], tools: Option<&Value>) -> Vec<NestedField> {
    let mut out = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        let Value::Object(message) = message else {
            continue;
        };
        let role = message.get("role").and_then(Value::as_str).unwrap_or("");
        let read: &[&str] = match role {
            "assistant" => &["role", "content", "tool_calls"],
            "tool" => &["role", "content", "tool_call_id"],
            _ => &["role", "content"],
        };
        let place = Place {
            path: format!("messages[{i}]"),
            row: "messages[]",
        };
        members(message, &place, read, &mut out);
        if let Some(Value::Array(parts)) = message.get("content") {
            for (j, part) in parts.iter().enumerate() {
                let Value::Object(part) = part else {
                    continue;
                };
                let place = Place {
                    path: format!("messages[{i}].content[{j}]"),
                    row: "messages[].content[]",
                };
                chat_part(part, role, &place, &mut out);
            }
        }
        if role == "assistant" {
            if let Some(Value::Array(calls)) = message.get("tool_calls") {
                for (j, call) in calls.iter().enumerate() {
                    let Value::Object(call) = call else {
                        continue;
                    };
                    let place = Place {
                        path: format!("messages[{i}].tool_calls[{j}]"),
                        row: "messages[].tool_calls[]",
                    };
                    members(call, &place, &["id", "type", "function"], &mut out);
                    inner(call, "function", &place, &["name", "arguments"], &mut out);
                }
            }
        }
    }
    if let Some(Value::Array(tools)) = tools {
        for (i, tool) in tools.iter().enumerate() {
            let Value::Object(tool) = tool else {
                continue;
            };
            let place = Place {
                path: format!("tools[{i}]"),
                row: "tools[]",
            };
            members(tool, &place, &["type", "function"], &mut out);
            let read = ["name", "description", "parameters"];
            inner(tool, "function", &place, &read, &mut out);
        }
    }
    out
}

/// The members of one content part of a chat message whose role is `role`.
fn chat_part(part: &Map<String, Value>, role: &str, place: &Place, out: &mut Vec<NestedField>) {
    let kind = part.get("type").and_then(Value::as_str).unwrap_or("");
    // Only the part's own member is read; the media parts' URLs are objects (or, as LiteLLM
    // also takes them, strings).
    let (own, read): (&str, &[&str]) = match (kind, role) {
        ("image_url", "user" | "assistant" | "tool") => ("image_url", &["url"]),
        ("video_url", "user" | "assistant") => ("video_url", &["url"]),
        ("file", "tool") => ("file", &["file_data", "filename"]),
        _ => ("text", &[]),
    };
    members(part, place, &["type", own], out);
    inner(part, own, place, read, out);
}

/// The nested fields of a `/v1/messages` request: `system`, `messages` and `tools` as sent.
pub fn messages(
    system: Option<&Value>,
    messages: &[Value],
    tools: Option<&Value>,
) -> Vec<NestedField> {
    let mut out = Vec::new();
    if let Some(Value::Array(blocks)) = system {
        for (i, block) in blocks.iter().enumerate() {
            if let Value::Object(block) = block {
                let place = Place {
                    path: format!("system[{i}]"),
                    row: "system[]",
                };
                members(block, &place, &["type", "text", "cache_control"], &mut out);
            }
        }
    }
    for (i, message) in messages.iter().enumerate() {
        let Value::Object(message) = message else {
            continue;
        };
        let place = Place {
            path: format!("messages[{i}]"),
            row: "messages[]",
        };
        members(message, &place, &["role", "content"], &mut out);
        let Some(Value::Array(blocks)) = message.get("content") else {
            continue;
        };
        for (j, block) in blocks.iter().enumerate() {
            let Value::Object(block) = block else {
                continue;
            };
            let place = Place {
                path: format!("messages[{i}].content[{j}]"),
                row: "messages[].content[]",
            };
            anthropic_block(block, &place, &mut out);
            if block.get("type").and_then(Value::as_str) == Some("tool_result") {
                if let Some(Value::Array(parts)) = block.get("content") {
                    for (k, part) in parts.iter().enumerate() {
                        if let Value::Object(part) = part {
                            let place = Place {
                                path: format!("messages[{i}].content[{j}].content[{k}]"),
                                row: "messages[].content[].content[]",
                            };
                            anthropic_block(part, &place, &mut out);
                        }
                    }
                }
            }
        }
    }
    if let Some(Value::Array(tools)) = tools {
        for (i, tool) in tools.iter().enumerate() {
            if let Value::Object(tool) = tool {
                let place = Place {
                    path: format!("tools[{i}]"),
                    row: "tools[]",
                };
                let read = ["name", "description", "input_schema", "cache_control"];
                members(tool, &place, &read, &mut out);
            }
        }
    }
    out
}

/// The members of one of Anthropic's content blocks (or a part of a tool result) that OMA's
/// block of its type does not have. A type OMA has no block for is left to OMA's guard.
fn anthropic_block(block: &Map<String, Value>, place: &Place, out: &mut Vec<NestedField>) {
    let read: &[&str] = match block.get("type").and_then(Value::as_str) {
        Some("text") => &["type", "text", "cache_control"],
        Some("image") => &["type", "source", "cache_control"],
        Some("tool_use") => &["type", "id", "name", "input", "cache_control"],
        Some("tool_result") => &[
            "type",
            "tool_use_id",
            "content",
            "is_error",
            "cache_control",
        ],
        Some("thinking") => &["type", "thinking", "signature", "cache_control"],
        Some("redacted_thinking") => &["type", "data", "cache_control"],
        _ => return,
    };
    members(block, place, read, out);
    if block.get("type").and_then(Value::as_str) == Some("image") {
        let read = ["type", "media_type", "data", "url"];
        inner(block, "source", place, &read, out);
    }
}
