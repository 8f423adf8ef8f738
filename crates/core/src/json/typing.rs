//! OMA JSON into the typed model, after OMA's guard ([`super::guard`]) has passed it: this
//! component's stricter typing, which OMA does not have. Roles must be `user` or `assistant`,
//! block types one of the six, and the fields a typed value needs (text, ids, names, image
//! sources) must be strings; these messages are our own and name the path like OMA's do.
//! Unknown extra fields are dropped. Strings are moved out of the parsed JSON, never copied, so
//! large media costs one parse and one validation pass.

use serde_json::{Map, Value};

use crate::error::Error;
use crate::message::{
    ContentBlock, ImageBlock, LlmMessage, MediaSource, ReasoningBlock, Role, TextBlock,
    ToolResultBlock, ToolResultContent, ToolResultPart, ToolUseBlock, VideoBlock,
};

use super::guard::{assert_valid_messages, type_word};

/// Parses OMA JSON text into validated, typed messages: straight into the model where
/// [`super::direct_messages`] can, else through a [`Value`], OMA's guard and the typing (which
/// give the same messages where both can).
pub fn messages_from_json(text: &str) -> Result<Vec<LlmMessage>, Error> {
    if let Some(messages) = super::direct_messages(text) {
        return Ok(messages);
    }
    let value: Value = super::from_str(text)
        .map_err(|e| Error::invalid(format!("messages must be valid JSON: {e}")))?;
    messages_from_value(value)
}

/// Validates parsed OMA JSON with OMA's guard and converts it into typed messages.
pub fn messages_from_value(value: Value) -> Result<Vec<LlmMessage>, Error> {
    assert_valid_messages(&value)?;
    let Value::Array(messages) = value else {
        return Err(Error::invalid(format!(
            "messages must be an array, got {}",
            type_word(Some(&value))
        )));
    };
    messages
        .into_iter()
        .enumerate()
        .map(|(i, message)| convert_message(i, message))
        .collect()
}

/// A tool's result content as OMA JSON text: a string, or a list of content parts (`text`,
/// `image`, `file`), each taken as a `tool_result` block's parts are. Nothing else is checked
/// here; the content is validated with the turn it joins.
///
/// Read through [`Value`] and this module's conversions rather than a derived deserialiser:
/// the one for this type alone weighed 47 KB of the `portable` component.
pub fn tool_result_content_from_json(text: &str) -> Result<ToolResultContent, Error> {
    let bad = |why: &dyn std::fmt::Display| {
        Error::invalid(format!(
            "a tool's content must be OMA JSON: a string or a list of content parts ({why})"
        ))
    };
    match super::from_str::<Value>(text).map_err(|e| bad(&e))? {
        Value::String(text) => Ok(ToolResultContent::Text(text)),
        Value::Array(parts) => parts
            .into_iter()
            .enumerate()
            .map(|(k, part)| {
                tool_result_part(part).ok_or_else(|| bad(&format_args!("part [{k}] is not one")))
            })
            .collect::<Result<_, _>>()
            .map(ToolResultContent::Parts),
        other => Err(bad(&format_args!("got {}", type_word(Some(&other))))),
    }
}

/// The fields of one block, taken apart by move, with the block's place for our own messages
/// (the path is written only for an error: a message's blocks cost no formatting).
struct Fields {
    map: Map<String, Value>,
    message: usize,
    block: usize,
}

impl Fields {
    fn error(&self, rest: &str) -> Error {
        Error::invalid(format!(
            "messages[{}].content[{}]{rest}",
            self.message, self.block
        ))
    }

    fn string(&mut self, key: &str) -> Result<String, Error> {
        match self.map.remove(key) {
            Some(Value::String(s)) => Ok(s),
            _ => Err(self.error(&format!(".{key} must be a string"))),
        }
    }

    fn optional_string(&mut self, key: &str) -> Result<Option<String>, Error> {
        match self.map.remove(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(self.error(&format!(".{key} must be a string when provided"))),
        }
    }
}

fn convert_message(i: usize, message: Value) -> Result<LlmMessage, Error> {
    let Value::Object(mut fields) = message else {
        return Err(Error::invalid(format!("messages[{i}] must be an object")));
    };
    let role = match fields.get("role").and_then(Value::as_str) {
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        Some(other) => {
            return Err(Error::invalid(format!(
                "messages[{i}].role must be \"user\" or \"assistant\", got {}",
                Value::from(other)
            )))
        }
        None => {
            return Err(Error::invalid(format!(
                "messages[{i}].role must be \"user\" or \"assistant\", got {}",
                type_word(fields.get("role"))
            )))
        }
    };
    let Some(Value::Array(blocks)) = fields.remove("content") else {
        return Err(Error::invalid(format!(
            "messages[{i}].content must be a ContentBlock[]"
        )));
    };
    let content = blocks
        .into_iter()
        .enumerate()
        .map(|(j, block)| convert_block(i, j, block))
        .collect::<Result<_, _>>()?;
    Ok(LlmMessage { role, content })
}

/// The typed block of `messages[i].content[j]`, once the guard has passed it.
pub(super) fn convert_block(i: usize, j: usize, block: Value) -> Result<ContentBlock, Error> {
    let Value::Object(map) = block else {
        return Err(Error::invalid(format!(
            "messages[{i}].content[{j}] must be a content block with a string \"type\""
        )));
    };
    let mut f = Fields {
        map,
        message: i,
        block: j,
    };
    let kind = f.string("type")?;
    Ok(match kind.as_str() {
        "text" => ContentBlock::Text(TextBlock {
            text: f.string("text")?,
        }),
        "image" => ContentBlock::Image(ImageBlock {
            source: image_source(&mut f)?,
        }),
        "video" => ContentBlock::Video(VideoBlock {
            source: media_source(f.map.remove("source"))
                .ok_or_else(|| f.error(".source must be a media source object"))?,
        }),
        "tool_use" => ContentBlock::ToolUse(ToolUseBlock {
            id: f.string("id")?,
            name: f.string("name")?,
            input: f
                .map
                .remove("input")
                .ok_or_else(|| f.error(".input must be present"))?,
            signature: f.optional_string("signature")?,
        }),
        "tool_result" => ContentBlock::ToolResult(tool_result(&mut f)?),
        "reasoning" => ContentBlock::Reasoning(ReasoningBlock {
            text: f.string("text")?,
            signature: f.optional_string("signature")?,
            redacted_data: f.optional_string("redactedData")?,
            provenance: f.optional_string("provenance")?,
        }),
        other => {
            return Err(f.error(&format!(
                ".type must be one of \"text\", \"image\", \"video\", \"tool_use\", \
                 \"tool_result\", or \"reasoning\", got {}",
                Value::from(other)
            )))
        }
    })
}

/// An image block's source: OMA's base64 source (its data taken as given, unchecked, as OMA does)
/// or, this component's addition, a URL source of the media shape (`{"type": "url",
/// "media_type", "url"}`), whose rules the validation that follows checks.
fn image_source(f: &mut Fields) -> Result<MediaSource, Error> {
    let bad = |f: &Fields| {
        f.error(".source must be a base64 image source with string \"media_type\" and \"data\"")
    };
    let Some(Value::Object(mut source)) = f.map.remove("source") else {
        return Err(bad(f));
    };
    let string = |v: Option<Value>| match v {
        Some(Value::String(s)) => Some(s),
        _ => None,
    };
    let kind = string(source.remove("type"));
    let media_type = string(source.remove("media_type"));
    if kind.as_deref() == Some("url") {
        return match (media_type, string(source.remove("url"))) {
            (Some(media_type), Some(url)) => Ok(MediaSource::Url { media_type, url }),
            _ => Err(f.error(
                ".source must be a url image source with string \"media_type\" and \"url\"",
            )),
        };
    }
    match (kind.as_deref(), media_type, string(source.remove("data"))) {
        (Some("base64"), Some(media_type), Some(data)) => {
            Ok(MediaSource::Base64 { media_type, data })
        }
        _ => Err(bad(f)),
    }
}

/// A media source the guard has already checked; `None` only if it was not a valid one.
fn media_source(source: Option<Value>) -> Option<MediaSource> {
    let Some(Value::Object(mut source)) = source else {
        return None;
    };
    let string = |v: Option<Value>| match v {
        Some(Value::String(s)) => Some(s),
        _ => None,
    };
    let media_type = string(source.remove("media_type"))?;
    match source.get("type").and_then(Value::as_str)? {
        "base64" => Some(MediaSource::Base64 {
            media_type,
            data: string(source.remove("data"))?,
        }),
        "url" => Some(MediaSource::Url {
            media_type,
            url: string(source.remove("url"))?,
        }),
        _ => None,
    }
}

fn tool_result(f: &mut Fields) -> Result<ToolResultBlock, Error> {
    let tool_use_id = f.string("tool_use_id")?;
    let is_error = match f.map.remove("is_error") {
        None => None,
        Some(Value::Bool(b)) => Some(b),
        Some(_) => return Err(f.error(".is_error must be a boolean when provided")),
    };
    let content = match f.map.remove("content") {
        Some(Value::String(s)) => ToolResultContent::Text(s),
        Some(Value::Array(parts)) => ToolResultContent::Parts(
            parts
                .into_iter()
                .enumerate()
                .map(|(k, part)| {
                    tool_result_part(part).ok_or_else(|| {
                        f.error(&format!(".content[{k}] must be a content-part object"))
                    })
                })
                .collect::<Result<_, _>>()?,
        ),
        _ => return Err(f.error(".content must be a string or a non-empty content-part array")),
    };
    Ok(ToolResultBlock {
        tool_use_id,
        content,
        is_error,
    })
}

fn tool_result_part(part: Value) -> Option<ToolResultPart> {
    let Value::Object(mut part) = part else {
        return None;
    };
    let string = |v: Option<Value>| match v {
        Some(Value::String(s)) => Some(s),
        _ => None,
    };
    match part.get("type").and_then(Value::as_str)? {
        "text" => Some(ToolResultPart::Text {
            text: string(part.remove("text"))?,
        }),
        "image" => Some(ToolResultPart::Image {
            source: media_source(part.remove("source"))?,
        }),
        "file" => Some(ToolResultPart::File {
            filename: string(part.remove("filename"))?,
            source: media_source(part.remove("source"))?,
        }),
        _ => None,
    }
}
