//! The message list of a Chat Completions request (`docs/wire-formats.md#openai-messages`): OMA
//! messages become borrowed wire structs, so text and media are written straight from the request,
//! and base64 payloads go through [`DataUrl`] without being copied into a data-URL string.

use std::borrow::Cow;

use serde::Serialize;

use crate::adapter::body::{self, DataUrl};
use crate::adapter::reasoning;
use crate::adapter::ChatRequest;
use crate::error::Error;
use crate::message::{ContentBlock, MediaSource, Role, ToolResultContent, ToolResultPart};

/// The wire-format label in OMA's `UnsupportedToolResultContentError` and
/// `UnsupportedContentBlockError`.
const LABEL: &str = "OpenAI-compatible Chat Completions";

/// One entry of `messages`.
#[derive(Debug, Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub(super) enum WireMessage<'a> {
    System {
        #[serde(serialize_with = "body::text")]
        content: &'a str,
    },
    User {
        content: Content<'a>,
    },
    Assistant {
        content: Option<Cow<'a, str>>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall<'a>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        reasoning_content: Option<Cow<'a, str>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: Content<'a>,
    },
}

/// A message's content: a string or an array of parts.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(super) enum Content<'a> {
    Text(#[serde(serialize_with = "body::text")] &'a str),
    Parts(Vec<Part<'a>>),
}

/// One content part.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum Part<'a> {
    Text {
        #[serde(serialize_with = "body::text")]
        text: Cow<'a, str>,
    },
    ImageUrl {
        image_url: UrlRef<'a>,
    },
    VideoUrl {
        video_url: UrlRef<'a>,
    },
    File {
        file: FileRef<'a>,
    },
}

/// `{url}`: a data URL written raw, or a remote URL as given.
#[derive(Debug, Serialize)]
pub(super) struct UrlRef<'a> {
    url: Url<'a>,
}

#[derive(Debug, Serialize)]
#[serde(untagged)]
enum Url<'a> {
    Data(DataUrl<'a>),
    Remote(&'a str),
}

/// `{filename, file_data}` of a `file` part.
#[derive(Debug, Serialize)]
pub(super) struct FileRef<'a> {
    filename: &'a str,
    file_data: DataUrl<'a>,
}

/// One entry of an assistant message's `tool_calls`.
#[derive(Debug, Serialize)]
pub(super) struct ToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: FunctionCall<'a>,
}

#[derive(Debug, Serialize)]
struct FunctionCall<'a> {
    name: &'a str,
    arguments: String,
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
                    preserve: request.preserve_reasoning_as_text,
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
                image_url: UrlRef {
                    url: Url::Data(DataUrl {
                        media_type: &image.source.media_type,
                        data: &image.source.data,
                    }),
                },
            }),
            ContentBlock::Video(video) => parts.push(Part::VideoUrl {
                video_url: UrlRef {
                    url: source_url(&video.source),
                },
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
            image_url: UrlRef {
                url: source_url(source),
            },
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
    preserve: bool,
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
                kind: "function",
                function: FunctionCall {
                    name: &call.name,
                    arguments: serde_json::to_string(&call.input).unwrap_or_else(|_| "{}".into()),
                },
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
                if options.preserve {
                    pending.push_str(&reasoning::inline_text(block, reasoning::DEFAULT_MAX_CHARS));
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
            ContentBlock::Video(_) => {
                return Err(Error::UnsupportedContentBlock {
                    provider: LABEL.into(),
                    block_type: "video".into(),
                })
            }
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
