//! The typed model back to OMA JSON: one borrowed mapping ([`Oma`]) that the request bodies'
//! writer writes straight from the messages, or copies into a `Value` where a value is needed
//! (progress, hook contexts, results).

use serde_json::Value;

use crate::message::{ContentBlock, LlmMessage, MediaSource, ToolResultContent, ToolResultPart};

use super::writer::Writer;

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
        ContentBlock::Image(image) => typed(kind, vec![("source", source_oma(&image.source))]),
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
