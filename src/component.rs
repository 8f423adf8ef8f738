//! The wit-bindgen glue: WIT values to and from the model, and the exports. Nothing else.

use crate::error::{Error, ErrorKind};
use crate::message as m;
use crate::{json, validate};

wit_bindgen::generate!({
    world: "component",
    path: "wit",
});

use exports::oma::agent::codec::Guest as Codec;
use oma::agent::types as wit;

struct Component;

export!(Component);

impl Codec for Component {
    fn messages_from_json(json: String) -> Result<Vec<wit::LlmMessage>, wit::Error> {
        let messages = json::messages_from_json(&json)?;
        Ok(messages.into_iter().map(to_wit_message).collect())
    }

    fn messages_to_json(messages: Vec<wit::LlmMessage>) -> Result<String, wit::Error> {
        let messages = from_wit_messages(messages)?;
        validate::validate_messages(&messages)?;
        Ok(json::messages_to_json(&messages))
    }

    fn validate_messages(messages: Vec<wit::LlmMessage>) -> Result<(), wit::Error> {
        let messages = from_wit_messages(messages)?;
        Ok(validate::validate_messages(&messages)?)
    }
}

impl From<Error> for wit::Error {
    fn from(error: Error) -> Self {
        wit::Error {
            kind: match error.kind() {
                ErrorKind::InvalidMessage => wit::ErrorKind::InvalidMessage,
                ErrorKind::UnsupportedContentBlock => wit::ErrorKind::UnsupportedContentBlock,
                ErrorKind::UnsupportedToolResultContent => {
                    wit::ErrorKind::UnsupportedToolResultContent
                }
                ErrorKind::UnsupportedToolCall => wit::ErrorKind::UnsupportedToolCall,
                ErrorKind::Provider => wit::ErrorKind::Provider,
                ErrorKind::Timeout => wit::ErrorKind::Timeout,
                ErrorKind::EgressDenied => wit::ErrorKind::EgressDenied,
                ErrorKind::Other => wit::ErrorKind::Other,
            },
            name: error.name().to_string(),
            code: error.code().map(str::to_string),
            message: error.to_string(),
            retryable: error.retryable(),
            http_status: error.http_status(),
            provider: error.provider().map(str::to_string),
        }
    }
}

/// WIT messages to the model; fails only on tool-use input that is not JSON text.
fn from_wit_messages(messages: Vec<wit::LlmMessage>) -> Result<Vec<m::LlmMessage>, Error> {
    messages
        .into_iter()
        .enumerate()
        .map(|(i, message)| {
            let content = message
                .content
                .into_iter()
                .enumerate()
                .map(|(j, block)| from_wit_block(block, i, j))
                .collect::<Result<_, _>>()?;
            Ok(m::LlmMessage {
                role: match message.role {
                    wit::Role::User => m::Role::User,
                    wit::Role::Assistant => m::Role::Assistant,
                },
                content,
            })
        })
        .collect()
}

fn from_wit_block(block: wit::ContentBlock, i: usize, j: usize) -> Result<m::ContentBlock, Error> {
    Ok(match block {
        wit::ContentBlock::Text(text) => m::ContentBlock::Text(m::TextBlock { text }),
        wit::ContentBlock::Image(image) => m::ContentBlock::Image(m::ImageBlock {
            source: m::ImageSource {
                media_type: image.source.media_type,
                data: image.source.data,
            },
        }),
        wit::ContentBlock::Video(video) => m::ContentBlock::Video(m::VideoBlock {
            source: from_wit_source(video.source),
        }),
        wit::ContentBlock::ToolUse(call) => m::ContentBlock::ToolUse(m::ToolUseBlock {
            input: serde_json::from_str(&call.input).map_err(|e| {
                Error::invalid(format!(
                    "messages[{i}].content[{j}].input must be JSON text: {e}"
                ))
            })?,
            id: call.id,
            name: call.name,
            signature: call.signature,
        }),
        wit::ContentBlock::ToolResult(result) => m::ContentBlock::ToolResult(m::ToolResultBlock {
            tool_use_id: result.tool_use_id,
            content: match result.content {
                wit::ToolResultContent::Text(text) => m::ToolResultContent::Text(text),
                wit::ToolResultContent::Parts(parts) => {
                    m::ToolResultContent::Parts(parts.into_iter().map(from_wit_part).collect())
                }
            },
            is_error: result.is_error,
        }),
        wit::ContentBlock::Reasoning(r) => m::ContentBlock::Reasoning(m::ReasoningBlock {
            text: r.text,
            signature: r.signature,
            redacted_data: r.redacted_data,
            provenance: r.provenance,
        }),
    })
}

fn from_wit_part(part: wit::ToolResultPart) -> m::ToolResultPart {
    match part {
        wit::ToolResultPart::Text(text) => m::ToolResultPart::Text { text },
        wit::ToolResultPart::Image(source) => m::ToolResultPart::Image {
            source: from_wit_source(source),
        },
        wit::ToolResultPart::File(file) => m::ToolResultPart::File {
            filename: file.filename,
            source: from_wit_source(file.source),
        },
    }
}

fn from_wit_source(source: wit::MediaSource) -> m::MediaSource {
    match source {
        wit::MediaSource::Base64(s) => m::MediaSource::Base64 {
            media_type: s.media_type,
            data: s.data,
        },
        wit::MediaSource::Url(s) => m::MediaSource::Url {
            media_type: s.media_type,
            url: s.url,
        },
    }
}

fn to_wit_message(message: m::LlmMessage) -> wit::LlmMessage {
    wit::LlmMessage {
        role: match message.role {
            m::Role::User => wit::Role::User,
            m::Role::Assistant => wit::Role::Assistant,
        },
        content: message.content.into_iter().map(to_wit_block).collect(),
    }
}

fn to_wit_block(block: m::ContentBlock) -> wit::ContentBlock {
    match block {
        m::ContentBlock::Text(t) => wit::ContentBlock::Text(t.text),
        m::ContentBlock::Image(image) => wit::ContentBlock::Image(wit::ImageBlock {
            source: wit::Base64Source {
                media_type: image.source.media_type,
                data: image.source.data,
            },
        }),
        m::ContentBlock::Video(video) => wit::ContentBlock::Video(wit::VideoBlock {
            source: to_wit_source(video.source),
        }),
        m::ContentBlock::ToolUse(call) => wit::ContentBlock::ToolUse(wit::ToolUseBlock {
            input: call.input.to_string(),
            id: call.id,
            name: call.name,
            signature: call.signature,
        }),
        m::ContentBlock::ToolResult(result) => {
            wit::ContentBlock::ToolResult(wit::ToolResultBlock {
                tool_use_id: result.tool_use_id,
                content: match result.content {
                    m::ToolResultContent::Text(text) => wit::ToolResultContent::Text(text),
                    m::ToolResultContent::Parts(parts) => {
                        wit::ToolResultContent::Parts(parts.into_iter().map(to_wit_part).collect())
                    }
                },
                is_error: result.is_error,
            })
        }
        m::ContentBlock::Reasoning(r) => wit::ContentBlock::Reasoning(wit::ReasoningBlock {
            text: r.text,
            signature: r.signature,
            redacted_data: r.redacted_data,
            provenance: r.provenance,
        }),
    }
}

fn to_wit_part(part: m::ToolResultPart) -> wit::ToolResultPart {
    match part {
        m::ToolResultPart::Text { text } => wit::ToolResultPart::Text(text),
        m::ToolResultPart::Image { source } => wit::ToolResultPart::Image(to_wit_source(source)),
        m::ToolResultPart::File { filename, source } => wit::ToolResultPart::File(wit::FilePart {
            filename,
            source: to_wit_source(source),
        }),
    }
}

fn to_wit_source(source: m::MediaSource) -> wit::MediaSource {
    match source {
        m::MediaSource::Base64 { media_type, data } => {
            wit::MediaSource::Base64(wit::Base64Source { media_type, data })
        }
        m::MediaSource::Url { media_type, url } => {
            wit::MediaSource::Url(wit::UrlSource { media_type, url })
        }
    }
}
