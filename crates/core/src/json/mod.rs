//! OMA JSON in and out: OMA's shape guard (`assertValidMessages`) on untyped JSON, then the
//! conversion into the typed model.
//!
//! Two passes, so each stays faithful to its contract:
//!
//! 1. [`assert_valid_messages`] is OMA's guard, check for check: the same order, the first
//!    failure wins, and byte-identical messages (`docs/messages.md#checks-in-order`,
//!    `docs/media.md#media-source-rules`). Anything OMA rejects is rejected here with OMA's
//!    message.
//! 2. The conversion then applies this component's stricter typing, which OMA does not have:
//!    roles must be `user` or `assistant`, block types must be one of the six, and the fields a
//!    typed value needs (text, ids, names, image sources) must be strings. These messages are our
//!    own; they name the path like OMA's do. Unknown extra fields are dropped.
//!
//! Strings are moved out of the parsed JSON, never copied, so large media costs one parse and
//! one validation pass.

pub mod object;

use serde_json::{Map, Value};

use crate::adapter::body::Writer;

use crate::error::Error;
use crate::message::{
    ContentBlock, ImageBlock, ImageSource, LlmMessage, MediaSource, ReasoningBlock, Role,
    TextBlock, ToolResultBlock, ToolResultContent, ToolResultPart, ToolUseBlock, VideoBlock,
};
use crate::validate::media;

/// Parses JSON bytes (an HTTP body, an event's payload) through [`from_str`], the parser every
/// text input takes: one set of deserialiser instantiations per type instead of two, which is
/// 35 KB of the guest. Bytes that are not UTF-8 fail as `serde_json` would fail on them, with
/// the position of the first bad byte.
pub fn from_bytes<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, BytesError> {
    crate::limits::check_json_text(bytes).map_err(BytesError::TooLarge)?;
    let text = std::str::from_utf8(bytes).map_err(BytesError::Utf8)?;
    serde_json::from_str(text).map_err(BytesError::Json)
}

/// Parses JSON text with `serde_json::from_str`, once [`crate::limits::check_json_text`] has
/// counted its values: a text past [`crate::limits::MAX_JSON_VALUES`] values or
/// [`crate::limits::MAX_JSON_CONTAINERS`] objects and arrays fails (with a message naming the
/// limit) before any of it is parsed, so no text under the body limit can take the memory a
/// million parsed values would. Every JSON text the core, the worlds and the gateway read is
/// parsed here.
pub fn from_str<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, serde_json::Error> {
    crate::limits::check_json_text(text.as_bytes())
        .map_err(<serde_json::Error as serde::de::Error>::custom)?;
    serde_json::from_str(text)
}

/// Why [`from_bytes`] failed.
#[derive(Debug)]
pub enum BytesError {
    /// The bytes are not UTF-8.
    Utf8(std::str::Utf8Error),
    /// The text is not JSON of the expected shape.
    Json(serde_json::Error),
    /// The text holds more values than [`crate::limits`] allows; it was not parsed.
    TooLarge(String),
}

impl std::fmt::Display for BytesError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BytesError::Utf8(e) => write!(f, "invalid UTF-8 at byte {}", e.valid_up_to()),
            BytesError::Json(e) => e.fmt(f),
            BytesError::TooLarge(why) => f.write_str(why),
        }
    }
}

/// Parses OMA JSON text into validated, typed messages.
pub fn messages_from_json(text: &str) -> Result<Vec<LlmMessage>, Error> {
    let value: Value =
        from_str(text).map_err(|e| Error::invalid(format!("messages must be valid JSON: {e}")))?;
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
    match from_str::<Value>(text).map_err(|e| bad(&e))? {
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

/// Serialises messages to OMA's JSON shape, written straight from the messages by the request
/// bodies' writer (no copy of their media into a `Value` first).
pub fn messages_to_json(messages: &[LlmMessage]) -> String {
    let mut writer = Writer::with_capacity(0);
    messages_oma(messages).write(&mut writer);
    writer.finish()
}

/// Messages as OMA JSON values, built by hand (a derived `Serialize` into `Value` would be
/// another instantiation of every message type's serialiser): the same objects
/// [`messages_to_json`] writes, keys in the same order, optional fields left out when unset.
pub fn messages_to_value(messages: &[LlmMessage]) -> Value {
    messages_oma(messages).to_value()
}

/// OMA's JSON for messages, borrowed from them: the one mapping from the model to JSON, which
/// [`messages_to_json`] writes and [`messages_to_value`] copies.
enum Oma<'a> {
    Str(&'a str),
    Bool(bool),
    Json(&'a Value),
    Array(Vec<Oma<'a>>),
    Object(Vec<(&'static str, Oma<'a>)>),
}

impl Oma<'_> {
    fn write(&self, w: &mut Writer) {
        match self {
            Oma::Str(text) => w.string(text),
            Oma::Bool(b) => w.bool(*b),
            Oma::Json(value) => w.json(value),
            Oma::Array(items) => {
                w.begin_array();
                for item in items {
                    item.write(w);
                }
                w.end_array();
            }
            Oma::Object(fields) => {
                w.begin_object();
                for (key, value) in fields {
                    w.key(key);
                    value.write(w);
                }
                w.end_object();
            }
        }
    }

    fn to_value(&self) -> Value {
        match self {
            Oma::Str(text) => Value::from(*text),
            Oma::Bool(b) => Value::Bool(*b),
            Oma::Json(value) => (*value).clone(),
            Oma::Array(items) => Value::Array(items.iter().map(Oma::to_value).collect()),
            Oma::Object(fields) => Value::Object(
                fields
                    .iter()
                    .map(|(key, value)| ((*key).to_owned(), value.to_value()))
                    .collect(),
            ),
        }
    }
}

fn messages_oma(messages: &[LlmMessage]) -> Oma<'_> {
    Oma::Array(
        messages
            .iter()
            .map(|message| {
                Oma::Object(vec![
                    ("role", Oma::Str(message.role.word())),
                    (
                        "content",
                        Oma::Array(message.content.iter().map(block_oma).collect()),
                    ),
                ])
            })
            .collect(),
    )
}

/// `{"type": kind, ...fields}`.
fn typed<'a>(kind: &'a str, fields: Vec<(&'static str, Oma<'a>)>) -> Oma<'a> {
    let mut all = Vec::with_capacity(fields.len() + 1);
    all.push(("type", Oma::Str(kind)));
    all.extend(fields);
    Oma::Object(all)
}

/// The optional string fields that are set.
fn some_strings<'a>(fields: &[(&'static str, &'a Option<String>)]) -> Vec<(&'static str, Oma<'a>)> {
    fields
        .iter()
        .filter_map(|(key, value)| value.as_deref().map(|v| (*key, Oma::Str(v))))
        .collect()
}

fn block_oma(block: &ContentBlock) -> Oma<'_> {
    let kind = block.type_name();
    match block {
        ContentBlock::Text(text) => typed(kind, vec![("text", Oma::Str(&text.text))]),
        ContentBlock::Image(image) => {
            let source = typed(
                "base64",
                vec![
                    ("media_type", Oma::Str(&image.source.media_type)),
                    ("data", Oma::Str(&image.source.data)),
                ],
            );
            typed(kind, vec![("source", source)])
        }
        ContentBlock::Video(video) => typed(kind, vec![("source", source_oma(&video.source))]),
        ContentBlock::ToolUse(call) => {
            let mut fields = vec![
                ("id", Oma::Str(&call.id)),
                ("name", Oma::Str(&call.name)),
                ("input", Oma::Json(&call.input)),
            ];
            fields.extend(some_strings(&[("signature", &call.signature)]));
            typed(kind, fields)
        }
        ContentBlock::ToolResult(result) => {
            let content = match &result.content {
                ToolResultContent::Text(text) => Oma::Str(text),
                ToolResultContent::Parts(parts) => Oma::Array(parts.iter().map(part_oma).collect()),
            };
            let mut fields = vec![
                ("tool_use_id", Oma::Str(&result.tool_use_id)),
                ("content", content),
            ];
            if let Some(is_error) = result.is_error {
                fields.push(("is_error", Oma::Bool(is_error)));
            }
            typed(kind, fields)
        }
        ContentBlock::Reasoning(reasoning) => {
            let mut fields = vec![("text", Oma::Str(&reasoning.text))];
            fields.extend(some_strings(&[
                ("signature", &reasoning.signature),
                ("redactedData", &reasoning.redacted_data),
                ("provenance", &reasoning.provenance),
            ]));
            typed(kind, fields)
        }
    }
}

fn source_oma(source: &MediaSource) -> Oma<'_> {
    match source {
        MediaSource::Base64 { media_type, data } => typed(
            "base64",
            vec![
                ("media_type", Oma::Str(media_type)),
                ("data", Oma::Str(data)),
            ],
        ),
        MediaSource::Url { media_type, url } => typed(
            "url",
            vec![("media_type", Oma::Str(media_type)), ("url", Oma::Str(url))],
        ),
    }
}

fn part_oma(part: &ToolResultPart) -> Oma<'_> {
    match part {
        ToolResultPart::Text { text } => typed("text", vec![("text", Oma::Str(text))]),
        ToolResultPart::Image { source } => typed("image", vec![("source", source_oma(source))]),
        ToolResultPart::File { filename, source } => typed(
            "file",
            vec![
                ("filename", Oma::Str(filename)),
                ("source", source_oma(source)),
            ],
        ),
    }
}

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

fn guard_block(i: usize, j: usize, block: &Value) -> Result<(), Error> {
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
        _ => Ok(()),
    }
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

fn convert_block(i: usize, j: usize, block: Value) -> Result<ContentBlock, Error> {
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

fn image_source(f: &mut Fields) -> Result<ImageSource, Error> {
    let bad = |f: &Fields| {
        f.error(".source must be a base64 image source with string \"media_type\" and \"data\"")
    };
    let Some(Value::Object(mut source)) = f.map.remove("source") else {
        return Err(bad(f));
    };
    match (
        source.remove("type"),
        source.remove("media_type"),
        source.remove("data"),
    ) {
        (Some(Value::String(kind)), Some(Value::String(media_type)), Some(Value::String(data)))
            if kind == "base64" =>
        {
            Ok(ImageSource { media_type, data })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_result_content_reads_strings_and_parts() {
        assert_eq!(
            tool_result_content_from_json(r#""done""#).unwrap(),
            ToolResultContent::Text("done".into())
        );
        let parts = r#"[{"type": "text", "text": "4"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
            {"type": "file", "filename": "a.pdf", "source": {"type": "url", "media_type": "application/pdf", "url": "https://x.example/a.pdf"}, "extra": 1}]"#;
        assert_eq!(
            tool_result_content_from_json(parts).unwrap(),
            ToolResultContent::Parts(vec![
                ToolResultPart::Text { text: "4".into() },
                ToolResultPart::Image {
                    source: MediaSource::Base64 {
                        media_type: "image/png".into(),
                        data: "AAAA".into()
                    }
                },
                ToolResultPart::File {
                    filename: "a.pdf".into(),
                    source: MediaSource::Url {
                        media_type: "application/pdf".into(),
                        url: "https://x.example/a.pdf".into()
                    }
                },
            ])
        );
        assert_eq!(
            tool_result_content_from_json("[]").unwrap(),
            ToolResultContent::Parts(vec![])
        );
        for (bad, why) in [
            ("{not json", "key must be a string at line 1 column 2"),
            ("1", "got number"),
            ("null", "got null"),
            (r#"{"type": "text"}"#, "got object"),
            (r#"[{"type": "text"}]"#, "part [0] is not one"),
            (r#"["x"]"#, "part [0] is not one"),
            (
                r#"[{"type": "text", "text": "a"}, {"type": "video"}]"#,
                "part [1] is not one",
            ),
        ] {
            let error = tool_result_content_from_json(bad).unwrap_err();
            assert_eq!(
                error.kind(),
                crate::error::ErrorKind::InvalidMessage,
                "{bad}"
            );
            assert_eq!(
                error.to_string(),
                format!("a tool's content must be OMA JSON: a string or a list of content parts ({why})"),
                "{bad}"
            );
        }
    }

    #[test]
    fn bytes_parse_as_text_does_and_non_utf8_fails_with_its_position() {
        let value: Value = from_bytes(br#"{"a": ["\u00e9", 1.5]}"#).unwrap();
        assert_eq!(value, serde_json::json!({"a": ["é", 1.5]}));
        let error = from_bytes::<Value>(b"{\"a\": \"\xff\"}").unwrap_err();
        assert!(matches!(error, BytesError::Utf8(_)), "{error:?}");
        assert_eq!(error.to_string(), "invalid UTF-8 at byte 7");
        let error = from_bytes::<Value>(b"{\"a\":").unwrap_err();
        assert!(matches!(error, BytesError::Json(_)), "{error:?}");
        assert_eq!(
            error.to_string(),
            serde_json::from_str::<Value>("{\"a\":")
                .unwrap_err()
                .to_string()
        );
    }

    /// The table shared with the through-the-component tests: every rule of
    /// `docs/messages.md#the-shape-guard` and this component's strictness, each with its exact
    /// message (or none when accepted).
    const CASES: &str = include_str!("../../../../fixtures/guard_cases.json");

    #[test]
    fn guard_table() {
        let cases: Vec<Value> = serde_json::from_str(CASES).unwrap();
        assert!(cases.len() > 100);
        for case in cases {
            let name = case["name"].as_str().unwrap();
            let got = messages_from_value(case["input"].clone()).map(|_| ());
            match case["error"].as_str() {
                None => assert_eq!(got, Ok(()), "{name}"),
                Some(message) => assert_eq!(got, Err(Error::invalid(message)), "{name}"),
            }
        }
    }

    #[test]
    fn json_round_trips_every_block_kind() {
        let text = r#"[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"abc123"}},{"type":"video","source":{"type":"url","media_type":"video/mp4","url":" https://e.com/v.mp4"}},{"type":"video","source":{"type":"base64","media_type":"video/mp4","data":"AAAA"}},{"type":"tool_result","tool_use_id":"c1","content":[{"type":"text","text":"t"},{"type":"image","source":{"type":"url","media_type":"image/png","url":"https://e.com/a.png"}},{"type":"file","filename":"r.pdf","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0xLjQ="}}]},{"type":"tool_result","tool_use_id":"c2","content":"boom","is_error":true}]},{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"f","input":{"z":1,"a":[true,null]},"signature":"s"},{"type":"reasoning","text":"","signature":"sig","redactedData":"cmVk","provenance":"anthropic"}]}]"#;
        let messages = messages_from_json(text).unwrap();
        assert_eq!(messages_to_json(&messages), text);
        assert_eq!(messages_to_value(&messages).to_string(), text);
    }

    #[test]
    fn unknown_fields_are_dropped() {
        let messages = messages_from_json(
            r#"[{"role":"user","extra":1,"content":[{"type":"text","text":"a","cache":true}]}]"#,
        )
        .unwrap();
        assert_eq!(
            messages_to_json(&messages),
            r#"[{"role":"user","content":[{"type":"text","text":"a"}]}]"#
        );
    }

    #[test]
    fn not_json_is_an_invalid_message() {
        let err = messages_from_json("[{").unwrap_err();
        assert!(err.to_string().starts_with("messages must be valid JSON: "));
    }

    /// Found by the property tests and by the `validate` fuzz target: serde_json's default
    /// number parser can be one unit in the last place off, so a tool input's float changed on
    /// a round trip through OMA JSON (`-2.0237268418735433e-158` came back as
    /// `-2.023726841873543e-158`, `1.4826765265342648e-304` as `1.4826765265342646e-304`).
    /// With `float_roundtrip` numbers parse exactly, as `JSON.parse` does.
    #[test]
    fn tool_input_floats_round_trip_exactly() {
        for number in [
            -2.0237268418735433e-158,
            -1.4431880247608167e258,
            0.1,
            5e-324,
        ] {
            let text = format!(
                r#"[{{"role": "user", "content": [{{"type": "tool_use", "id": "t", "name": "n",
                    "input": {{"x": {number:e}}}}}]}}]"#
            );
            let messages = messages_from_json(&text).unwrap();
            let ContentBlock::ToolUse(call) = &messages[0].content[0] else {
                panic!("a tool_use block")
            };
            assert_eq!(call.input["x"].as_f64(), Some(number));
            let written = messages_to_json(&messages);
            assert_eq!(messages_from_json(&written).unwrap(), messages);
        }
    }
}
