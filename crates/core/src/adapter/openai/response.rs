//! Reading a Chat Completions response (`docs/wire-formats.md#openai-response`): `choices[0]` into
//! OMA's `LLMResponse`, plus the pieces the stream decoder shares: reasoning text, tool-call
//! arguments (with OMA's single-parameter repair) and the stop-reason rule.

use serde_json::{Map, Value};

use crate::adapter::malformed;
use crate::error::Error;
use crate::message::{
    ContentBlock, LlmResponse, ReasoningBlock, TextBlock, TokenUsage, ToolUseBlock,
};

/// Parses a non-streamed completion body.
pub(super) fn parse_completion(provider: &str, body: &[u8]) -> Result<LlmResponse, Error> {
    let value: Value = crate::json::from_bytes(body)
        .map_err(|e| malformed(provider, format_args!("the body is not JSON ({e})")))?;
    let Some(completion) = value.as_object() else {
        return Err(malformed(provider, "the body is not a JSON object"));
    };
    let Some(choice) = completion
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
    else {
        return Err(Error::Provider {
            provider: provider.to_string(),
            status: None,
            message: "OpenAI returned a completion with no choices".into(),
            code: None,
            error_type: None,
        });
    };
    let Some(message) = choice.get("message").and_then(Value::as_object) else {
        return Err(malformed(provider, "choices[0].message is not an object"));
    };

    let mut content = Vec::new();
    let reasoning = reasoning_text(message);
    if !reasoning.is_empty() {
        content.push(reasoning_block(reasoning, provider));
    }
    match message.get("content") {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) => {
            content.push(ContentBlock::Text(TextBlock { text: text.clone() }))
        }
        // Some compatible servers answer with an array of parts; keep their text.
        Some(other) => content.push(ContentBlock::Text(TextBlock {
            text: parts_text(other),
        })),
    }
    let calls = match message.get("tool_calls") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(calls)) => calls.as_slice(),
        Some(_) => return Err(malformed(provider, "message.tool_calls is not an array")),
    };
    for call in calls {
        content.push(ContentBlock::ToolUse(tool_call(provider, call)?));
    }

    let finish = choice.get("finish_reason").and_then(Value::as_str);
    let usage = completion.get("usage");
    Ok(LlmResponse {
        id: string_field(completion.get("id")),
        stop_reason: stop_reason(finish, has_tool_use(&content)),
        content,
        model: string_field(completion.get("model")),
        usage: usage_of(usage),
        stop_sequence: None,
    })
}

/// One entry of `message.tool_calls`.
fn tool_call(provider: &str, call: &Value) -> Result<ToolUseBlock, Error> {
    // A missing `type` is read as `function` (some compatible servers leave it out).
    match call.get("type") {
        None | Some(Value::Null) => {}
        Some(Value::String(kind)) if kind == "function" => {}
        Some(other) => {
            return Err(Error::UnsupportedToolCall {
                provider: provider.to_string(),
                tool_type: other
                    .as_str()
                    .map_or_else(|| other.to_string(), str::to_string),
            })
        }
    }
    let function = call.get("function");
    let input = match function.and_then(|f| f.get("arguments")) {
        Some(Value::String(text)) => tool_input(text),
        Some(Value::Object(map)) => Value::Object(map.clone()),
        _ => Value::Object(Map::new()),
    };
    Ok(ToolUseBlock {
        id: string_field(call.get("id")),
        name: string_field(function.and_then(|f| f.get("name"))),
        input,
        signature: None,
    })
}

/// A reasoning block with the adapter's provenance.
pub(super) fn reasoning_block(text: String, provider: &str) -> ContentBlock {
    ContentBlock::Reasoning(ReasoningBlock {
        text,
        signature: None,
        redacted_data: None,
        provenance: Some(provider.to_string()),
    })
}

/// The `reasoning_content` of a message or delta: a string, or an array of strings and objects
/// carrying `text`, `content` or `reasoning_content`, joined with `''`.
pub(super) fn reasoning_text(source: &Map<String, Value>) -> String {
    match source.get("reasoning_content") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|part| match part {
                Value::String(text) => Some(text.as_str()),
                Value::Object(map) => ["text", "content", "reasoning_content"]
                    .iter()
                    .find_map(|key| map.get(*key).and_then(Value::as_str)),
                _ => None,
            })
            .collect(),
        _ => String::new(),
    }
}

fn parts_text(value: &Value) -> String {
    match value {
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| match p {
                Value::String(text) => Some(text.as_str()),
                _ => p.get("text").and_then(Value::as_str),
            })
            .collect(),
        other => other.to_string(),
    }
}

/// Tool-call arguments: a JSON object is kept; other JSON gives `{}`; text that is not JSON
/// goes through OMA's single-parameter repair, else `{}`.
pub(super) fn tool_input(arguments: &str) -> Value {
    match crate::json::from_str(arguments) {
        Ok(Value::Object(map)) => Value::Object(map),
        Ok(_) => Value::Object(Map::new()),
        Err(_) => Value::Object(repair_tool_args(arguments).unwrap_or_default()),
    }
}

/// OMA's `repairToolArgs`: local models often break a single string argument with unescaped
/// quotes or Python triple quotes. Reads `{"name": value}` (the last `}` ending the text) and
/// returns `{name: value-as-text}`, unquoting `"""…"""`, `'''…'''` and `"…"` (the last with
/// `\"` and `\\` unescaped); `None` when the text has no such shape.
pub(super) fn repair_tool_args(raw: &str) -> Option<Map<String, Value>> {
    let args = raw.trim();
    let body = args.strip_suffix('}')?;
    // The regex `\{\s*"([^"]+)"\s*:\s*([\s\S]*?)\s*\}$` is unanchored at the start: the first
    // `{` whose head matches wins.
    let (name, value) = body.match_indices('{').find_map(|(at, _)| {
        let rest = body[at + 1..].trim_start().strip_prefix('"')?;
        let close = rest.find('"')?;
        let name = &rest[..close];
        if name.is_empty() {
            return None;
        }
        let value = rest[close + 1..].trim_start().strip_prefix(':')?;
        Some((name, value.trim()))
    })?;
    let value = unquote(value);
    let mut map = Map::new();
    map.insert(name.to_string(), Value::String(value));
    Some(map)
}

fn unquote(value: &str) -> String {
    for fence in ["\"\"\"", "'''"] {
        if value.starts_with(fence) && value.ends_with(fence) {
            return value
                .get(3..value.len().saturating_sub(3))
                .unwrap_or("")
                .to_string();
        }
    }
    if value.starts_with('"') && value.ends_with('"') {
        let inner = value.get(1..value.len().saturating_sub(1)).unwrap_or("");
        return inner.replace("\\\"", "\"").replace("\\\\", "\\");
    }
    value.to_string()
}

/// OMA's stop reason: `tool_use` when tool calls exist and the model said `stop`, otherwise
/// `stop`→`end_turn`, `tool_calls`→`tool_use`, `length`→`max_tokens`, `content_filter` kept,
/// anything else passed through; a missing value counts as `stop`.
pub(super) fn stop_reason(finish_reason: Option<&str>, has_tool_use: bool) -> String {
    let raw = finish_reason.unwrap_or("stop");
    match raw {
        "stop" if has_tool_use => "tool_use",
        "stop" => "end_turn",
        "tool_calls" => "tool_use",
        "length" => "max_tokens",
        other => other,
    }
    .to_string()
}

pub(super) fn has_tool_use(content: &[ContentBlock]) -> bool {
    content
        .iter()
        .any(|b| matches!(b, ContentBlock::ToolUse(_)))
}

/// A string field, `""` when absent or not a string.
pub(super) fn string_field(value: Option<&Value>) -> String {
    value
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// OMA's usage of an OpenAI `usage` object: `prompt_tokens` and `completion_tokens`, and the
/// prompt tokens read from the cache (`prompt_tokens_details.cached_tokens`, a part of
/// `prompt_tokens`) beside them.
pub(super) fn usage_of(usage: Option<&Value>) -> TokenUsage {
    TokenUsage {
        cached_input_tokens: token_count(
            usage.and_then(|u| u.get("prompt_tokens_details")),
            "cached_tokens",
        ),
        ..TokenUsage::new(
            token_count(usage, "prompt_tokens"),
            token_count(usage, "completion_tokens"),
        )
    }
}

/// A token count of a `usage` object, 0 when absent.
pub(super) fn token_count(usage: Option<&Value>, key: &str) -> u64 {
    usage
        .and_then(|u| u.get(key))
        .and_then(|n| n.as_u64().or_else(|| n.as_f64().map(|f| f.max(0.0) as u64)))
        .unwrap_or(0)
}
