//! OMA's shape guard (`assertValidMessages`) on untyped JSON, check for check: the same order,
//! the first failure wins, and byte-identical messages (`docs/messages.md#checks-in-order`,
//! `docs/media.md#media-source-rules`). Anything OMA rejects is rejected here with OMA's
//! message; the typing that follows ([`super::typing`]) is this component's own, stricter one.

use serde_json::{Map, Value};

use crate::error::Error;
use crate::validate::media;

/// OMA's word for the type of a JSON value: JavaScript's `typeof`, with `null` and `array`
/// told apart, and `undefined` for a missing value.
pub fn type_word(value: Option<&Value>) -> &'static str {
    match value {
        None => "undefined",
        Some(Value::Null) => "null",
        Some(Value::Array(_)) => "array",
        Some(Value::Bool(_)) => "boolean",
        Some(Value::Number(_)) => "number",
        Some(Value::String(_)) => "string",
        Some(Value::Object(_)) => "object",
    }
}

/// OMA's shape guard, `assertValidMessages`, on untyped JSON (`docs/messages.md#checks-in-order`,
/// with the video rule): messages M1-M4, tool results T1-T4, and the media rules of
/// `docs/media.md#media-source-rules`.
pub fn assert_valid_messages(messages: &Value) -> Result<(), Error> {
    let Value::Array(messages) = messages else {
        return Err(Error::invalid(format!(
            "messages must be an array, got {}",
            type_word(Some(messages))
        )));
    };
    for (i, message) in messages.iter().enumerate() {
        let content = match message {
            Value::Object(fields) => fields.get("content"),
            // JavaScript counts an array as an object; its `content` is undefined.
            Value::Array(_) => None,
            other => {
                return Err(Error::invalid(format!(
                    "messages[{i}] must be an object, got {}",
                    type_word(Some(other))
                )))
            }
        };
        let Some(Value::Array(blocks)) = content else {
            return Err(Error::invalid(format!(
                "messages[{i}].content must be a ContentBlock[], got {}",
                type_word(content)
            )));
        };
        for (j, block) in blocks.iter().enumerate() {
            guard_block(i, j, block)?;
        }
    }
    Ok(())
}

/// OMA's guard on the block at `messages[i].content[j]`.
pub(super) fn guard_block(i: usize, j: usize, block: &Value) -> Result<(), Error> {
    let path = || format!("messages[{i}].content[{j}]");
    let fields = match block {
        Value::Object(fields) if fields.get("type").is_some_and(Value::is_string) => fields,
        _ => {
            return Err(Error::invalid(format!(
                "{} must be a content block with a string \"type\"",
                path()
            )))
        }
    };
    match fields.get("type").and_then(Value::as_str) {
        Some("tool_result") => guard_tool_result(fields, &path),
        Some("video") => media::check_source_value(fields.get("source").unwrap_or(&Value::Null))
            .map_err(|fault| Error::invalid(format!("{}.source{}", path(), fault.suffix()))),
        // An inline image is forwarded unchecked, as OMA does; an image by URL leaves the
        // process, so the same URL rules as a video's hold here too, as in `validate`. A source
        // of the wrong shape is left to the reader, which names the shape it wants.
        Some("image") if is_url_image_source(fields.get("source")) => {
            media::check_source_value(fields.get("source").unwrap_or(&Value::Null))
                .map_err(|fault| Error::invalid(format!("{}.source{}", path(), fault.suffix())))
        }
        _ => Ok(()),
    }
}

/// Whether `source` is a URL image source of the right shape: `type` "url" with a string
/// `media_type` and a string `url`.
fn is_url_image_source(source: Option<&Value>) -> bool {
    source.is_some_and(|s| {
        s.get("type").and_then(Value::as_str) == Some("url")
            && s.get("media_type").is_some_and(Value::is_string)
            && s.get("url").is_some_and(Value::is_string)
    })
}

fn guard_tool_result(fields: &Map<String, Value>, path: &dyn Fn() -> String) -> Result<(), Error> {
    if !fields.get("tool_use_id").is_some_and(Value::is_string) {
        return Err(Error::invalid(format!(
            "{}.tool_use_id must be a string",
            path()
        )));
    }
    let is_error = fields.get("is_error");
    if is_error.is_some_and(|v| !v.is_boolean()) {
        return Err(Error::invalid(format!(
            "{}.is_error must be a boolean when provided",
            path()
        )));
    }
    let content = fields.get("content");
    let p = || format!("{}.content", path());
    match content {
        Some(Value::String(_)) => return Ok(()),
        Some(Value::Array(parts)) if parts.is_empty() => {
            return Err(Error::invalid(format!(
                "{} must not be an empty content-part array",
                p()
            )))
        }
        Some(Value::Array(parts)) => {
            for (k, part) in parts.iter().enumerate() {
                guard_part(part)
                    .map_err(|suffix| Error::invalid(format!("{}[{k}]{suffix}", p())))?;
            }
        }
        other => {
            return Err(Error::invalid(format!(
                "{} must be a string or a non-empty content-part array, got {}",
                p(),
                type_word(other)
            )))
        }
    }
    if is_error == Some(&Value::Bool(true)) {
        return Err(Error::invalid(format!(
            "{} must be a string for an error tool result",
            p()
        )));
    }
    Ok(())
}

/// Checks one tool-result part; the error is the message's end, after `P[k]`.
fn guard_part(part: &Value) -> Result<(), String> {
    let Value::Object(fields) = part else {
        return Err(" must be a content-part object".into());
    };
    let source = || {
        media::check_source_value(fields.get("source").unwrap_or(&Value::Null))
            .map_err(|fault| format!(".source{}", fault.suffix()))
    };
    match fields.get("type").and_then(Value::as_str) {
        Some("text") if fields.get("text").is_some_and(Value::is_string) => Ok(()),
        Some("text") => Err(".text must be a string".into()),
        Some("image") => source(),
        Some("file") => match fields.get("filename").and_then(Value::as_str) {
            Some(name) if !media::is_blank(name) => source(),
            _ => Err(".filename must be a non-empty string".into()),
        },
        _ => Err(".type must be \"text\", \"image\", or \"file\"".into()),
    }
}
