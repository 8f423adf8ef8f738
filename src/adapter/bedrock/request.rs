//! The Converse request body (`docs/wire-formats.md#bedrock-request`), as borrowed serde structs:
//! message data is never copied into a `serde_json::Value`, and base64 payloads are written raw.
//!
//! Keys follow the AWS SDK's serialiser, which writes members in alphabetical order.

use std::borrow::Cow;

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde::Serialize as DeriveSerialize;
use serde_json::{Map, Value};

use super::b64::node_round_trip;
use super::PROVIDER_LABEL;
use crate::adapter::body::{self, Text};
use crate::adapter::{reasoning, ChatRequest, ToolDefinition};
use crate::error::Error;
use crate::message::{
    ContentBlock, LlmMessage, MediaSource, ReasoningBlock, Role, ToolResultBlock,
    ToolResultContent, ToolResultPart,
};

/// The whole body.
#[derive(DeriveSerialize)]
pub(super) struct Body<'a> {
    #[serde(
        rename = "additionalModelRequestFields",
        skip_serializing_if = "Option::is_none"
    )]
    additional: Option<Additional<'a>>,
    #[serde(rename = "inferenceConfig")]
    inference: Inference,
    messages: Vec<Message<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<[SystemText<'a>; 1]>,
    #[serde(rename = "toolConfig", skip_serializing_if = "Option::is_none")]
    tool_config: Option<ToolConfig<'a>>,
}

impl<'a> Body<'a> {
    /// Converts the request; fails on the first block the format cannot carry.
    pub(super) fn new(request: &'a ChatRequest) -> Result<Self, Error> {
        let mut messages = Vec::with_capacity(request.messages.len());
        for message in &request.messages {
            if let Some(message) = convert_message(message, request.preserve_reasoning_as_text)? {
                messages.push(message);
            }
        }
        let sampling = &request.sampling;
        let inference = if sampling.max_tokens.is_none()
            && sampling.temperature.is_none()
            && sampling.top_p.is_none()
        {
            Inference {
                max_tokens: Some(4096),
                temperature: None,
                top_p: None,
            }
        } else {
            // OMA's quirk: temperature or top_p alone sends no maxTokens.
            Inference {
                max_tokens: sampling.max_tokens,
                temperature: sampling.temperature,
                top_p: sampling.top_p,
            }
        };
        let additional =
            (sampling.top_k.is_some() || !request.extra_body.is_empty()).then_some(Additional {
                top_k: sampling.top_k,
                extra: &request.extra_body,
            });
        Ok(Body {
            additional,
            inference,
            messages,
            system: request
                .system_prompt
                .as_deref()
                .filter(|s| !s.is_empty())
                .map(|text| [SystemText { text }]),
            tool_config: (!request.tools.is_empty()).then(|| ToolConfig {
                tools: request
                    .tools
                    .iter()
                    .map(|spec| Tool {
                        tool_spec: spec.into(),
                    })
                    .collect(),
            }),
        })
    }
}

/// `{top_k?, ...extraBody}`: extra keys win, and a `top_k` among them keeps the first place.
struct Additional<'a> {
    top_k: Option<u32>,
    extra: &'a Map<String, Value>,
}

impl Serialize for Additional<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        if let Some(top_k) = self.top_k {
            match self.extra.get("top_k") {
                Some(value) => map.serialize_entry("top_k", value)?,
                None => map.serialize_entry("top_k", &top_k)?,
            }
        }
        for (key, value) in self.extra {
            if self.top_k.is_none() || key != "top_k" {
                map.serialize_entry(key, value)?;
            }
        }
        map.end()
    }
}

#[derive(DeriveSerialize)]
struct Inference {
    #[serde(rename = "maxTokens", skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(rename = "topP", skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
}

#[derive(DeriveSerialize)]
struct SystemText<'a> {
    #[serde(serialize_with = "body::text")]
    text: &'a str,
}

#[derive(DeriveSerialize)]
struct ToolConfig<'a> {
    tools: Vec<Tool<'a>>,
}

#[derive(DeriveSerialize)]
struct Tool<'a> {
    #[serde(rename = "toolSpec")]
    tool_spec: ToolSpec<'a>,
}

#[derive(DeriveSerialize)]
struct ToolSpec<'a> {
    description: &'a str,
    #[serde(rename = "inputSchema")]
    input_schema: JsonSchema<'a>,
    name: &'a str,
}

impl<'a> From<&'a ToolDefinition> for ToolSpec<'a> {
    fn from(tool: &'a ToolDefinition) -> Self {
        ToolSpec {
            description: &tool.description,
            input_schema: JsonSchema {
                json: &tool.input_schema,
            },
            name: &tool.name,
        }
    }
}

#[derive(DeriveSerialize)]
struct JsonSchema<'a> {
    #[serde(serialize_with = "body::json")]
    json: &'a Value,
}

#[derive(DeriveSerialize)]
struct Message<'a> {
    content: Vec<Block<'a>>,
    role: Role,
}

/// A Converse content block: a one-key object named after its kind.
#[derive(DeriveSerialize)]
#[serde(rename_all = "camelCase")]
enum Block<'a> {
    Text(Cow<'a, str>),
    Image(Image<'a>),
    ToolUse(ToolUse<'a>),
    ToolResult(ToolResult<'a>),
    ReasoningContent(Reasoning<'a>),
}

#[derive(DeriveSerialize)]
struct Image<'a> {
    format: &'static str,
    source: Source<'a>,
}

#[derive(DeriveSerialize)]
struct Source<'a> {
    bytes: Bytes<'a>,
}

/// A `bytes` member: base64 text on the JSON wire, as Node would produce it.
struct Bytes<'a>(Cow<'a, str>);

impl<'a> Bytes<'a> {
    fn new(data: &'a str) -> Self {
        Bytes(node_round_trip(data))
    }
}

impl Serialize for Bytes<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Text(&self.0).serialize(serializer)
    }
}

#[derive(DeriveSerialize)]
struct ToolUse<'a> {
    #[serde(serialize_with = "body::json")]
    input: &'a Value,
    name: &'a str,
    #[serde(rename = "toolUseId")]
    tool_use_id: &'a str,
}

#[derive(DeriveSerialize)]
struct ToolResult<'a> {
    content: Vec<ResultPart<'a>>,
    status: &'static str,
    #[serde(rename = "toolUseId")]
    tool_use_id: &'a str,
}

#[derive(DeriveSerialize)]
#[serde(rename_all = "camelCase")]
enum ResultPart<'a> {
    Text(#[serde(serialize_with = "body::text")] &'a str),
    Image(Image<'a>),
    Document(Document<'a>),
}

#[derive(DeriveSerialize)]
struct Document<'a> {
    format: &'static str,
    name: String,
    source: Source<'a>,
}

#[derive(DeriveSerialize)]
#[serde(rename_all = "camelCase")]
enum Reasoning<'a> {
    RedactedContent(Bytes<'a>),
    ReasoningText {
        signature: &'a str,
        #[serde(serialize_with = "body::text")]
        text: &'a str,
    },
}

fn convert_message(message: &LlmMessage, preserve: bool) -> Result<Option<Message<'_>>, Error> {
    let mut content = Vec::with_capacity(message.content.len());
    for block in &message.content {
        if let Some(block) = convert_block(block, preserve)? {
            content.push(block);
        }
    }
    Ok((!content.is_empty()).then_some(Message {
        content,
        role: message.role,
    }))
}

fn convert_block(block: &ContentBlock, preserve: bool) -> Result<Option<Block<'_>>, Error> {
    Ok(Some(match block {
        ContentBlock::Text(text) => Block::Text(Cow::Borrowed(&text.text)),
        ContentBlock::Image(image) => Block::Image(Image {
            format: image_format(&image.source.media_type).unwrap_or("png"),
            source: Source {
                bytes: Bytes::new(&image.source.data),
            },
        }),
        ContentBlock::Video(_) => {
            return Err(Error::UnsupportedContentBlock {
                provider: PROVIDER_LABEL.into(),
                block_type: "video".into(),
            })
        }
        ContentBlock::ToolUse(call) => Block::ToolUse(ToolUse {
            input: &call.input,
            name: &call.name,
            tool_use_id: &call.id,
        }),
        ContentBlock::ToolResult(result) => Block::ToolResult(tool_result(result)?),
        ContentBlock::Reasoning(block) => return Ok(convert_reasoning(block, preserve)),
    }))
}

fn convert_reasoning(block: &ReasoningBlock, preserve: bool) -> Option<Block<'_>> {
    if block.provenance.as_deref() == Some(super::NAME) {
        if let Some(data) = &block.redacted_data {
            return Some(Block::ReasoningContent(Reasoning::RedactedContent(
                Bytes::new(data),
            )));
        }
        if let Some(signature) = &block.signature {
            return Some(Block::ReasoningContent(Reasoning::ReasoningText {
                signature,
                text: &block.text,
            }));
        }
    }
    if !preserve {
        return None;
    }
    let text = reasoning::inline_text(block, reasoning::DEFAULT_MAX_CHARS);
    (!text.is_empty()).then_some(Block::Text(Cow::Owned(text)))
}

fn tool_result(result: &ToolResultBlock) -> Result<ToolResult<'_>, Error> {
    let content = match &result.content {
        ToolResultContent::Text(text) => vec![ResultPart::Text(text)],
        ToolResultContent::Parts(parts) => parts
            .iter()
            .map(result_part)
            .collect::<Result<Vec<_>, _>>()?,
    };
    Ok(ToolResult {
        content,
        status: if result.is_error == Some(true) {
            "error"
        } else {
            "success"
        },
        tool_use_id: &result.tool_use_id,
    })
}

fn unsupported(content_type: String, detail: &str) -> Error {
    Error::UnsupportedToolResultContent {
        provider: PROVIDER_LABEL.into(),
        content_type,
        detail: Some(detail.into()),
    }
}

fn result_part(part: &ToolResultPart) -> Result<ResultPart<'_>, Error> {
    let (kind, source) = match part {
        ToolResultPart::Text { text } => return Ok(ResultPart::Text(text)),
        ToolResultPart::Image { source } => ("image", source),
        ToolResultPart::File { source, .. } => ("file", source),
    };
    let (media_type, data) = match source {
        MediaSource::Url { .. } => {
            return Err(unsupported(
                format!("{kind}-url"),
                "tool-result media references must be supplied as inline base64 data",
            ))
        }
        MediaSource::Base64 { media_type, data } => (media_type.as_str(), data.as_str()),
    };
    let source = Source {
        bytes: Bytes::new(data),
    };
    match part {
        ToolResultPart::File { filename, .. } => {
            let format = document_format(media_type).ok_or_else(|| {
                unsupported(
                    format!("file:{media_type}"),
                    "the media type has no Bedrock document format mapping",
                )
            })?;
            Ok(ResultPart::Document(Document {
                format,
                name: document_name(filename),
                source,
            }))
        }
        _ => {
            let format = image_format(media_type).ok_or_else(|| {
                unsupported(
                    format!("image:{media_type}"),
                    "supported image media types are JPEG, PNG, GIF, and WebP",
                )
            })?;
            Ok(ResultPart::Image(Image { format, source }))
        }
    }
}

/// Converse's image `format` for a MIME type (exact, case-sensitive match, as in OMA).
fn image_format(media_type: &str) -> Option<&'static str> {
    Some(match media_type {
        "image/jpeg" => "jpeg",
        "image/png" => "png",
        "image/gif" => "gif",
        "image/webp" => "webp",
        _ => return None,
    })
}

/// Converse's document `format` for a MIME type.
fn document_format(media_type: &str) -> Option<&'static str> {
    Some(match media_type {
        "text/csv" => "csv",
        "application/msword" => "doc",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document" => "docx",
        "text/html" => "html",
        "text/markdown" => "md",
        "application/pdf" => "pdf",
        "text/plain" => "txt",
        "application/vnd.ms-excel" => "xls",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet" => "xlsx",
        _ => return None,
    })
}

/// Bedrock's document name rule: every run of characters outside `[A-Za-z0-9 ()[\]-]` becomes
/// a space, whitespace runs collapse, the ends are trimmed; empty becomes `tool result`.
fn document_name(filename: &str) -> String {
    let allowed =
        |c: char| c.is_ascii_alphanumeric() || matches!(c, ' ' | '(' | ')' | '[' | ']' | '-');
    let mapped: String = filename
        .chars()
        .map(|c| if allowed(c) { c } else { ' ' })
        .collect();
    let name = mapped.split_whitespace().collect::<Vec<_>>().join(" ");
    if name.is_empty() {
        "tool result".into()
    } else {
        name
    }
}
