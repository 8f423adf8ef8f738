//! The Converse request body (`docs/wire-formats.md#bedrock-request`), as borrowed structs written
//! by [`Writer`]: message data is never copied into a `serde_json::Value`, and base64 payloads go
//! in at copy speed.
//!
//! Keys follow the AWS SDK's serialiser, which writes members in alphabetical order.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::b64::node_round_trip;
use super::PROVIDER_LABEL;
use crate::adapter::{reasoning, CacheMark, CachePlace, ChatRequest, ToolDefinition};
use crate::error::Error;
use crate::json::writer::Writer;
use crate::message::{
    ContentBlock, LlmMessage, MediaSource, ReasoningBlock, Role, ToolResultBlock,
    ToolResultContent, ToolResultPart,
};

/// The whole body: `additionalModelRequestFields?`, `inferenceConfig`, `messages`,
/// `system?` (`[{text}]`, one per block the caller gave), `toolConfig?` (`{tools: [{toolSpec:
/// {description, inputSchema: {json}, name}}]}`); a cache marker is a `{cachePoint}` right
/// after what it marks, in the system, a message or the tools.
pub(super) struct Body<'a> {
    additional: Option<Additional<'a>>,
    inference: Inference<'a>,
    messages: Vec<Message<'a>>,
    system: Vec<(&'a str, Option<&'a CacheMark>)>,
    tools: Vec<(&'a ToolDefinition, Option<&'a CacheMark>)>,
    /// `toolConfig.toolChoice` ([`ChatRequest::forced_tool`]).
    forced: Option<&'a crate::adapter::ForcedTool>,
}

/// `{"cachePoint": {"ttl"?, "type": "default"}}`.
fn write_cache_point(mark: &CacheMark, w: &mut Writer) {
    w.begin_object();
    w.key("cachePoint");
    w.begin_object();
    if let Some(ttl) = &mark.ttl {
        w.field_str("ttl", ttl);
    }
    w.field_str("type", "default");
    w.end_object();
    w.end_object();
}

impl<'a> Body<'a> {
    /// Converts the request; fails on the first block the format cannot carry.
    pub(super) fn new(request: &'a ChatRequest) -> Result<Self, Error> {
        let mut messages = Vec::with_capacity(request.messages.len());
        for (at, message) in request.messages.iter().enumerate() {
            if let Some(message) = convert_message(request, at, message)? {
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
                extra: &request.generation_extra,
            }
        } else {
            // OMA's quirk: temperature or top_p alone sends no maxTokens.
            Inference {
                max_tokens: sampling.max_tokens,
                temperature: sampling.temperature,
                top_p: sampling.top_p,
                extra: &request.generation_extra,
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
                .system_parts()
                .into_iter()
                .enumerate()
                .filter(|(_, text)| !text.is_empty())
                .map(|(at, text)| (text, request.cache_at(CachePlace::System(at))))
                .collect(),
            tools: request
                .tools
                .iter()
                .enumerate()
                .map(|(at, tool)| (tool, request.cache_at(CachePlace::Tool(at))))
                .collect(),
            forced: request.forced_tool.as_ref(),
        })
    }

    /// The body's JSON text, into a buffer of `capacity` bytes.
    pub(super) fn write(&self, capacity: usize) -> String {
        let mut w = Writer::with_capacity(capacity);
        w.begin_object();
        if let Some(additional) = &self.additional {
            w.key("additionalModelRequestFields");
            additional.write(&mut w);
        }
        w.key("inferenceConfig");
        self.inference.write(&mut w);
        self.write_messages_and_system(&mut w);
        if !self.tools.is_empty() {
            w.key("toolConfig");
            w.begin_object();
            w.key("tools");
            w.begin_array();
            for (tool, mark) in &self.tools {
                w.begin_object();
                w.key("toolSpec");
                w.begin_object();
                w.field_str("description", &tool.description);
                w.key("inputSchema");
                w.begin_object();
                w.key("json");
                w.json(&tool.input_schema);
                w.end_object();
                w.field_str("name", &tool.name);
                w.end_object();
                w.end_object();
                if let Some(mark) = mark {
                    write_cache_point(mark, &mut w);
                }
            }
            w.end_array();
            if let Some(forced) = self.forced {
                // `{any: {}}` or `{tool: {name}}`.
                w.key("toolChoice");
                w.begin_object();
                match forced {
                    crate::adapter::ForcedTool::Any => {
                        w.key("any");
                        w.begin_object();
                    }
                    crate::adapter::ForcedTool::Named(name) => {
                        w.key("tool");
                        w.begin_object();
                        w.field_str("name", name);
                    }
                }
                w.end_object();
                w.end_object();
            }
            w.end_object();
        }
        w.end_object();
        w.finish()
    }
}

impl Body<'_> {
    /// The body of `CountTokens`: `{input: {converse: {messages, system?}}}`.
    pub(super) fn write_count(&self, capacity: usize) -> String {
        let mut w = Writer::with_capacity(capacity);
        w.begin_object();
        w.key("input");
        w.begin_object();
        w.key("converse");
        w.begin_object();
        self.write_messages_and_system(&mut w);
        w.end_object();
        w.end_object();
        w.end_object();
        w.finish()
    }

    /// `messages` and, when there is one, `system`.
    fn write_messages_and_system(&self, w: &mut Writer) {
        w.key("messages");
        w.begin_array();
        for message in &self.messages {
            w.begin_object();
            w.key("content");
            w.begin_array();
            for block in &message.content {
                block.write(w);
            }
            w.end_array();
            w.field_str("role", message.role.word());
            w.end_object();
        }
        w.end_array();
        if !self.system.is_empty() {
            w.key("system");
            w.begin_array();
            for (text, mark) in &self.system {
                w.begin_object();
                w.field_str("text", text);
                w.end_object();
                if let Some(mark) = mark {
                    write_cache_point(mark, w);
                }
            }
            w.end_array();
        }
    }
}

/// `{top_k?, ...extraBody}`: extra keys win, and a `top_k` among them keeps the first place.
struct Additional<'a> {
    top_k: Option<u32>,
    extra: &'a Map<String, Value>,
}

impl Additional<'_> {
    fn write(&self, w: &mut Writer) {
        w.begin_object();
        if let Some(top_k) = self.top_k {
            w.key("top_k");
            match self.extra.get("top_k") {
                Some(value) => w.json(value),
                None => w.u64(u64::from(top_k)),
            }
        }
        for (key, value) in self.extra {
            if self.top_k.is_none() || key != "top_k" {
                w.key(key);
                w.json(value);
            }
        }
        w.end_object();
    }
}

/// `{maxTokens?, temperature?, topP?}`; the floats as `serde_json` writes them (`1.0`).
struct Inference<'a> {
    max_tokens: Option<u32>,
    temperature: Option<f64>,
    top_p: Option<f64>,
    /// More keys ([`ChatRequest::generation_extra`]).
    extra: &'a Map<String, Value>,
}

impl Inference<'_> {
    fn write(&self, w: &mut Writer) {
        w.begin_object();
        if let Some(max_tokens) = self.max_tokens {
            w.key("maxTokens");
            w.u64(u64::from(max_tokens));
        }
        if let Some(temperature) = self.temperature {
            w.key("temperature");
            w.f64(temperature);
        }
        if let Some(top_p) = self.top_p {
            w.key("topP");
            w.f64(top_p);
        }
        for (key, value) in self.extra {
            if !matches!(key.as_str(), "maxTokens" | "temperature" | "topP") {
                w.key(key);
                w.json(value);
            }
        }
        w.end_object();
    }
}

struct Message<'a> {
    content: Vec<Block<'a>>,
    role: Role,
}

/// A Converse content block: a one-key object named after its kind (`text`, `image`,
/// `toolUse`, `toolResult`, `reasoningContent`).
enum Block<'a> {
    Text(Cow<'a, str>),
    Image(Image<'a>),
    ToolUse {
        input: &'a Value,
        name: &'a str,
        tool_use_id: &'a str,
    },
    ToolResult(ToolResult<'a>),
    /// `{redactedContent: <bytes>}`.
    RedactedReasoning(Bytes<'a>),
    /// `{reasoningText: {signature, text}}`.
    ReasoningText {
        signature: &'a str,
        text: &'a str,
    },
    /// `{cachePoint: {ttl?, type: "default"}}`.
    CachePoint(&'a CacheMark),
}

impl Block<'_> {
    fn write(&self, w: &mut Writer) {
        if let Block::CachePoint(mark) = self {
            return write_cache_point(mark, w);
        }
        w.begin_object();
        match self {
            Block::Text(text) => w.field_str("text", text),
            Block::Image(image) => {
                w.key("image");
                image.write(w);
            }
            Block::ToolUse {
                input,
                name,
                tool_use_id,
            } => {
                w.key("toolUse");
                w.begin_object();
                w.key("input");
                w.json(input);
                w.field_str("name", name);
                w.field_str("toolUseId", tool_use_id);
                w.end_object();
            }
            Block::ToolResult(result) => {
                w.key("toolResult");
                result.write(w);
            }
            Block::RedactedReasoning(bytes) => {
                w.key("reasoningContent");
                w.begin_object();
                w.field_str("redactedContent", &bytes.0);
                w.end_object();
            }
            Block::ReasoningText { signature, text } => {
                w.key("reasoningContent");
                w.begin_object();
                w.key("reasoningText");
                w.begin_object();
                w.field_str("signature", signature);
                w.field_str("text", text);
                w.end_object();
                w.end_object();
            }
            Block::CachePoint(_) => {}
        }
        w.end_object();
    }
}

/// `{format, source: {bytes}}`.
struct Image<'a> {
    format: &'static str,
    bytes: Bytes<'a>,
}

impl Image<'_> {
    fn write(&self, w: &mut Writer) {
        w.begin_object();
        w.field_str("format", self.format);
        write_source(&self.bytes, w);
        w.end_object();
    }
}

/// `"source": {"bytes": <base64>}`.
fn write_source(bytes: &Bytes<'_>, w: &mut Writer) {
    w.key("source");
    w.begin_object();
    w.field_str("bytes", &bytes.0);
    w.end_object();
}

/// A `bytes` member: base64 text on the JSON wire, as Node would produce it.
struct Bytes<'a>(Cow<'a, str>);

impl<'a> Bytes<'a> {
    fn new(data: &'a str) -> Self {
        Bytes(node_round_trip(data))
    }
}

/// `{content, status, toolUseId}`.
struct ToolResult<'a> {
    content: Vec<ResultPart<'a>>,
    status: &'static str,
    tool_use_id: &'a str,
}

impl ToolResult<'_> {
    fn write(&self, w: &mut Writer) {
        w.begin_object();
        w.key("content");
        w.begin_array();
        for part in &self.content {
            w.begin_object();
            match part {
                ResultPart::Text(text) => w.field_str("text", text),
                ResultPart::Image(image) => {
                    w.key("image");
                    image.write(w);
                }
                ResultPart::Document(document) => {
                    w.key("document");
                    w.begin_object();
                    w.field_str("format", document.format);
                    w.field_str("name", &document.name);
                    write_source(&document.bytes, w);
                    w.end_object();
                }
            }
            w.end_object();
        }
        w.end_array();
        w.field_str("status", self.status);
        w.field_str("toolUseId", self.tool_use_id);
        w.end_object();
    }
}

/// A tool-result part: a one-key object, `text`, `image` or `document`.
enum ResultPart<'a> {
    Text(&'a str),
    Image(Image<'a>),
    Document(Document<'a>),
}

/// `{format, name, source: {bytes}}`.
struct Document<'a> {
    format: &'static str,
    name: String,
    bytes: Bytes<'a>,
}

/// Converts message `at` of `request`; a block marked for the cache (or a tool result one of
/// whose parts is: Converse has no cache point inside a tool result) is followed by a cache
/// point.
fn convert_message<'a>(
    request: &'a ChatRequest,
    at: usize,
    message: &'a LlmMessage,
) -> Result<Option<Message<'a>>, Error> {
    let mut content = Vec::with_capacity(message.content.len());
    for (index, block) in message.content.iter().enumerate() {
        if let Some(block) = convert_block(block, request.reasoning_fallback())? {
            content.push(block);
        }
        let mark = request.cache.iter().find(|mark| match mark.place {
            CachePlace::Block { message, block } => (message, block) == (at, index),
            CachePlace::Part { message, block, .. } => (message, block) == (at, index),
            _ => false,
        });
        if let (Some(mark), false) = (mark, content.is_empty()) {
            content.push(Block::CachePoint(mark));
        }
    }
    Ok((!content.is_empty()).then_some(Message {
        content,
        role: message.role,
    }))
}

fn convert_block(
    block: &ContentBlock,
    preserve: Option<usize>,
) -> Result<Option<Block<'_>>, Error> {
    Ok(Some(match block {
        ContentBlock::Text(text) => Block::Text(Cow::Borrowed(&text.text)),
        ContentBlock::Image(image) => match &image.source {
            MediaSource::Base64 { media_type, data } => Block::Image(Image {
                format: image_format(media_type).unwrap_or("png"),
                bytes: Bytes::new(data),
            }),
            // Converse takes an image's bytes (or an S3 location), never a web URL.
            MediaSource::Url { .. } => {
                return Err(Error::UnsupportedContentBlock {
                    provider: PROVIDER_LABEL.into(),
                    block_type: "image".into(),
                    detail: Some(
                        "Bedrock Converse takes images as inline bytes, not by URL".into(),
                    ),
                })
            }
        },
        ContentBlock::Video(_) => return Err(Error::unsupported_block(PROVIDER_LABEL, "video")),
        ContentBlock::ToolUse(call) => Block::ToolUse {
            input: &call.input,
            name: &call.name,
            tool_use_id: &call.id,
        },
        ContentBlock::ToolResult(result) => Block::ToolResult(tool_result(result)?),
        ContentBlock::Reasoning(block) => return Ok(convert_reasoning(block, preserve)),
    }))
}

fn convert_reasoning(block: &ReasoningBlock, preserve: Option<usize>) -> Option<Block<'_>> {
    if block.provenance.as_deref() == Some(super::NAME) {
        if let Some(data) = &block.redacted_data {
            return Some(Block::RedactedReasoning(Bytes::new(data)));
        }
        if let Some(signature) = &block.signature {
            return Some(Block::ReasoningText {
                signature,
                text: &block.text,
            });
        }
    }
    let max_chars = preserve?;
    let text = reasoning::inline_text(block, max_chars);
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
    let bytes = Bytes::new(data);
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
                bytes,
            }))
        }
        _ => {
            let format = image_format(media_type).ok_or_else(|| {
                unsupported(
                    format!("image:{media_type}"),
                    "supported image media types are JPEG, PNG, GIF, and WebP",
                )
            })?;
            Ok(ResultPart::Image(Image { format, bytes }))
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
