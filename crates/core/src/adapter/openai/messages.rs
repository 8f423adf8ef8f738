//! The message list of a Chat Completions request (`docs/wire-formats.md#openai-messages`): OMA
//! messages become borrowed wire structs, so text and media are written straight from the request,
//! and base64 payloads go through [`DataUrl`] without being copied into a data-URL string.

use std::borrow::Cow;

use crate::adapter::reasoning;
use crate::adapter::ChatRequest;
use crate::error::Error;
use crate::json::writer::{DataUrl, Writer};
use crate::message::{ContentBlock, MediaSource, Role, ToolResultContent, ToolResultPart};

/// The wire-format label in OMA's `UnsupportedToolResultContentError` and
/// `UnsupportedContentBlockError`.
const LABEL: &str = "OpenAI-compatible Chat Completions";

/// One entry of `messages`.
#[derive(Debug)]
pub(super) enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: Content<'a>,
    },
    Assistant {
        /// `null` when the turn has only tool calls.
        content: Option<Cow<'a, str>>,
        /// Left out when empty.
        tool_calls: Vec<ToolCall<'a>>,
        /// Left out when `None`.
        reasoning_content: Option<Cow<'a, str>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: Content<'a>,
    },
}

impl WireMessage<'_> {
    /// `{"role": "<lowercase variant>", ...fields in declaration order}`.
    pub(super) fn write(&self, w: &mut Writer) {
        w.begin_object();
        match self {
            WireMessage::System { content } => {
                w.field_str("role", "system");
                w.field_str("content", content);
            }
            WireMessage::User { content } => {
                w.field_str("role", "user");
                w.key("content");
                content.write(w);
            }
            WireMessage::Assistant {
                content,
                tool_calls,
                reasoning_content,
            } => {
                w.field_str("role", "assistant");
                w.key("content");
                match content {
                    Some(text) => w.string(text),
                    None => w.null(),
                }
                if !tool_calls.is_empty() {
                    w.key("tool_calls");
                    w.begin_array();
                    for call in tool_calls {
                        call.write(w);
                    }
                    w.end_array();
                }
                if let Some(reasoning) = reasoning_content {
                    w.field_str("reasoning_content", reasoning);
                }
            }
            WireMessage::Tool {
                tool_call_id,
                content,
            } => {
                w.field_str("role", "tool");
                w.field_str("tool_call_id", tool_call_id);
                w.key("content");
                content.write(w);
            }
        }
        w.end_object();
    }
}

/// A message's content: a string or an array of parts.
#[derive(Debug)]
pub(super) enum Content<'a> {
    Text(&'a str),
    Parts(Vec<Part<'a>>),
}

impl Content<'_> {
    fn write(&self, w: &mut Writer) {
        match self {
            Content::Text(text) => w.string(text),
            Content::Parts(parts) => {
                w.begin_array();
                for part in parts {
                    part.write(w);
                }
                w.end_array();
            }
        }
    }
}

/// One content part.
#[derive(Debug)]
pub(super) enum Part<'a> {
    Text { text: Cow<'a, str> },
    ImageUrl { image_url: Url<'a> },
    VideoUrl { video_url: Url<'a> },
    File { file: FileRef<'a> },
}

impl Part<'_> {
    /// `{"type": "text", text}`, `{"type": "image_url", "image_url": {url}}`,
    /// `{"type": "video_url", "video_url": {url}}` or `{"type": "file", "file": {filename,
    /// file_data}}`.
    fn write(&self, w: &mut Writer) {
        w.begin_object();
        match self {
            Part::Text { text } => {
                w.field_str("type", "text");
                w.field_str("text", text);
            }
            Part::ImageUrl { image_url } => {
                w.field_str("type", "image_url");
                w.key("image_url");
                image_url.write(w);
            }
            Part::VideoUrl { video_url } => {
                w.field_str("type", "video_url");
                w.key("video_url");
                video_url.write(w);
            }
            Part::File { file } => {
                w.field_str("type", "file");
                w.key("file");
                w.begin_object();
                w.field_str("filename", file.filename);
                w.key("file_data");
                w.data_url(file.file_data.media_type, file.file_data.data);
                w.end_object();
            }
        }
        w.end_object();
    }
}

/// A URL: a base64 source as a data URL (written without being built), a remote URL as given.
#[derive(Debug)]
pub(super) enum Url<'a> {
    Data(DataUrl<'a>),
    Remote(&'a str),
}

impl Url<'_> {
    /// `{url}`.
    fn write(&self, w: &mut Writer) {
        w.begin_object();
        w.key("url");
        match self {
            Url::Data(data) => w.data_url(data.media_type, data.data),
            Url::Remote(url) => w.string(url),
        }
        w.end_object();
    }
}

/// `{filename, file_data}` of a `file` part.
#[derive(Debug)]
pub(super) struct FileRef<'a> {
    filename: &'a str,
    file_data: DataUrl<'a>,
}

/// One entry of an assistant message's `tool_calls`: `{id, "type": "function", "function":
/// {name, arguments}}`.
#[derive(Debug)]
pub(super) struct ToolCall<'a> {
    id: &'a str,
    name: &'a str,
    arguments: String,
}

impl ToolCall<'_> {
    fn write(&self, w: &mut Writer) {
        w.begin_object();
        w.field_str("id", self.id);
        w.field_str("type", "function");
        w.key("function");
        w.begin_object();
        w.field_str("name", self.name);
        w.field_str("arguments", &self.arguments);
        w.end_object();
        w.end_object();
    }
}

/// The whole `messages` list: the system prompt, then every message converted. Fails with
/// `UnsupportedToolResultContentError` for a tool-result file given by URL. `echo` is the
/// provenance whose reasoning is echoed as `reasoning_content` (OMA's `'tool-use-only'`
/// adapters), if any.
pub(super) fn wire_messages<'a>(
    request: &'a ChatRequest,
    echo: Option<&str>,
) -> Result<Vec<WireMessage<'a>>, Error> {
    let mut out = Vec::with_capacity(request.messages.len() + 1);
    if let Some(system) = request.system_prompt.as_deref().filter(|s| !s.is_empty()) {
        out.push(WireMessage::System { content: system });
    }
    let has_tool_use = request.messages.iter().any(|m| {
        m.content
            .iter()
            .any(|b| matches!(b, ContentBlock::ToolUse(_)))
    });
    for message in &request.messages {
        match message.role {
            Role::Assistant => {
                let options = AssistantOptions {
                    echo,
                    has_tool_use,
                    preserve: request.reasoning_fallback(),
                };
                if let Some(wire) = assistant_message(&message.content, &options)? {
                    out.push(wire);
                }
            }
            Role::User => user_turn(&message.content, &mut out)?,
        }
    }
    Ok(out)
}

/// A user turn: plain, or tool messages first and then one user message.
fn user_turn<'a>(blocks: &'a [ContentBlock], out: &mut Vec<WireMessage<'a>>) -> Result<(), Error> {
    let rest: Vec<&'a ContentBlock> = blocks
        .iter()
        .filter(|b| !matches!(b, ContentBlock::ToolResult(_)))
        .collect();
    if rest.len() == blocks.len() {
        out.push(user_message(&rest));
        return Ok(());
    }
    let mut attachments = Vec::new();
    for block in blocks {
        let ContentBlock::ToolResult(result) = block else {
            continue;
        };
        let content = match &result.content {
            ToolResultContent::Text(text) => Content::Text(text),
            ToolResultContent::Parts(parts) => {
                let mut texts = Vec::new();
                let mut media = Vec::new();
                for part in parts {
                    match part {
                        ToolResultPart::Text { text } => texts.push(Part::Text {
                            text: Cow::Borrowed(text),
                        }),
                        other => media.push(other),
                    }
                }
                if !media.is_empty() {
                    texts.push(Part::Text {
                        text: Cow::Owned(format!(
                            "[{} tool-result attachment(s) follow in the next user message.]",
                            media.len()
                        )),
                    });
                    attachments.push(Part::Text {
                        text: Cow::Owned(format!(
                            "Attachments for tool call {}:",
                            result.tool_use_id
                        )),
                    });
                    for part in media {
                        attachments.push(attachment(part)?);
                    }
                }
                Content::Parts(texts)
            }
        };
        out.push(WireMessage::Tool {
            tool_call_id: &result.tool_use_id,
            content,
        });
    }
    if !attachments.is_empty() {
        user_parts(&rest, &mut attachments);
        out.push(WireMessage::User {
            content: Content::Parts(attachments),
        });
    } else if !rest.is_empty() {
        out.push(user_message(&rest));
    }
    Ok(())
}

/// A user message with no tool results: a single text block becomes a string.
fn user_message<'a>(blocks: &[&'a ContentBlock]) -> WireMessage<'a> {
    if let [ContentBlock::Text(text)] = blocks {
        return WireMessage::User {
            content: Content::Text(&text.text),
        };
    }
    let mut parts = Vec::with_capacity(blocks.len());
    user_parts(blocks, &mut parts);
    WireMessage::User {
        content: Content::Parts(parts),
    }
}

/// Text, image and video blocks as parts; other blocks are skipped.
fn user_parts<'a>(blocks: &[&'a ContentBlock], parts: &mut Vec<Part<'a>>) {
    for block in blocks {
        match block {
            ContentBlock::Text(text) => parts.push(Part::Text {
                text: Cow::Borrowed(&text.text),
            }),
            ContentBlock::Image(image) => parts.push(Part::ImageUrl {
                image_url: source_url(&image.source),
            }),
            ContentBlock::Video(video) => parts.push(Part::VideoUrl {
                video_url: source_url(&video.source),
            }),
            _ => {}
        }
    }
}

/// A base64 source as a data URL, a URL source as given.
fn source_url(source: &MediaSource) -> Url<'_> {
    match source {
        MediaSource::Base64 { media_type, data } => Url::Data(DataUrl { media_type, data }),
        MediaSource::Url { url, .. } => Url::Remote(url),
    }
}

/// A tool-result image or file, as a part of the attachments message.
fn attachment(part: &ToolResultPart) -> Result<Part<'_>, Error> {
    match part {
        ToolResultPart::Image { source } => Ok(Part::ImageUrl {
            image_url: source_url(source),
        }),
        ToolResultPart::File {
            filename,
            source: MediaSource::Base64 { media_type, data },
        } => Ok(Part::File {
            file: FileRef {
                filename,
                file_data: DataUrl { media_type, data },
            },
        }),
        ToolResultPart::File { .. } => Err(Error::UnsupportedToolResultContent {
            provider: LABEL.into(),
            content_type: "file-url".into(),
            detail: Some("file content parts accept inline base64 data, not remote URLs".into()),
        }),
        ToolResultPart::Text { text } => Ok(Part::Text {
            text: Cow::Borrowed(text),
        }),
    }
}

struct AssistantOptions<'o> {
    echo: Option<&'o str>,
    has_tool_use: bool,
    preserve: Option<usize>,
}

/// An assistant message, or `None` when it has neither text nor tool calls. Images and tool
/// results in an assistant turn are dropped, as in OMA; a video is refused with
/// `UnsupportedContentBlockError` rather than dropped without a word.
fn assistant_message<'a>(
    blocks: &'a [ContentBlock],
    options: &AssistantOptions<'_>,
) -> Result<Option<WireMessage<'a>>, Error> {
    let mut tool_calls = Vec::new();
    let mut texts: Vec<Cow<'a, str>> = Vec::new();
    let mut pending = String::new();
    let mut echoed: Vec<&'a str> = Vec::new();
    for block in blocks {
        match block {
            ContentBlock::ToolUse(call) => tool_calls.push(ToolCall {
                id: &call.id,
                name: &call.name,
                arguments: call.input.to_string(),
            }),
            ContentBlock::Reasoning(block) => {
                if options.echo.is_some() && block.provenance.as_deref() == options.echo {
                    let redacted = block
                        .redacted_data
                        .as_deref()
                        .is_some_and(|d| !d.is_empty());
                    if !redacted && !block.text.is_empty() {
                        echoed.push(&block.text);
                    }
                    continue;
                }
                if let Some(max_chars) = options.preserve {
                    pending.push_str(&reasoning::inline_text(block, max_chars));
                }
            }
            ContentBlock::Text(text) => {
                if pending.is_empty() {
                    texts.push(Cow::Borrowed(&text.text));
                } else {
                    pending.push_str(&text.text);
                    texts.push(Cow::Owned(std::mem::take(&mut pending)));
                }
            }
            ContentBlock::Video(_) => return Err(Error::unsupported_block(LABEL, "video")),
            ContentBlock::Image(_) | ContentBlock::ToolResult(_) => {}
        }
    }
    if !pending.is_empty() {
        texts.push(Cow::Owned(pending));
    }
    if tool_calls.is_empty() && texts.is_empty() {
        return Ok(None);
    }
    let content = match texts.len() {
        0 => None,
        1 => texts.pop(),
        _ => Some(Cow::Owned(texts.concat())),
    };
    let reasoning_content = if options.has_tool_use && !echoed.is_empty() {
        Some(match echoed.as_slice() {
            [one] => Cow::Borrowed(*one),
            many => Cow::Owned(many.concat()),
        })
    } else {
        None
    };
    Ok(Some(WireMessage::Assistant {
        content,
        tool_calls,
        reasoning_content,
    }))
}
