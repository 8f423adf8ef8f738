//! WIT values to and from the model. Conversions only: no decisions and no I/O.
//!
//! Shared by every world: each world's glue includes this file, with `super::wit` naming the
//! modules wit-bindgen generated for that world's data interfaces (imported in one world,
//! exported in another, but the same WIT and so the same Rust shapes).

use oma_core::adapter::{self as a, Adapter};
use oma_core::error::{Error, ErrorKind};
use oma_core::http::call::CallOptions;
use oma_core::http::{EgressPolicy, Limits};
use oma_core::message as m;
use oma_core::retry::RetryPolicy;
use oma_core::validate;

use super::wit::types as wit;
use super::wit::wire;

/// The endpoint's adapter; `ids` feeds the ids a format makes up (Gemini).
pub(super) fn adapter_for(
    endpoint: &wire::Endpoint,
    ids: a::IdSource,
) -> Result<Box<dyn Adapter>, Error> {
    a::for_provider(&endpoint.provider, endpoint.base_url.as_deref(), ids)
}

/// OMA's `extraBody` from its WIT form, the text of a JSON object; fails naming the field for
/// anything else.
pub(super) fn from_wit_extra_body(
    text: Option<&str>,
) -> Result<serde_json::Map<String, serde_json::Value>, Error> {
    match text {
        None => Ok(Default::default()),
        Some(text) => match oma_core::json::from_str(text) {
            Ok(serde_json::Value::Object(map)) => Ok(map),
            _ => Err(Error::InvalidRequest {
                message: "extra-body must be the text of a JSON object".into(),
            }),
        },
    }
}

pub(super) fn from_wit_request(request: wire::ChatRequest) -> Result<a::ChatRequest, Error> {
    let extra_body = from_wit_extra_body(request.extra_body.as_deref())?;
    Ok(a::ChatRequest {
        model: request.model,
        system_prompt: request.system_prompt,
        messages: from_wit_messages(request.messages)?,
        tools: from_wit_tools(request.tools)?,
        sampling: from_wit_sampling(request.sampling),
        thinking: from_wit_thinking(request.thinking_budget),
        extra_body,
        preserve_reasoning_as_text: request.preserve_reasoning_as_text,
        reasoning_text_max_chars: None,
        stream: request.stream,
        ..a::ChatRequest::default()
    })
}

/// Tool definitions; fails when an input schema is not JSON text.
pub(super) fn from_wit_tools(
    tools: Vec<wire::ToolDefinition>,
) -> Result<Vec<a::ToolDefinition>, Error> {
    tools
        .into_iter()
        .map(|tool| {
            let input_schema = oma_core::json::from_str(&tool.input_schema).map_err(|e| {
                Error::InvalidRequest {
                    message: format!("tool {:?}: input-schema must be JSON text: {e}", tool.name),
                }
            })?;
            Ok(a::ToolDefinition {
                name: tool.name,
                description: tool.description,
                input_schema,
            })
        })
        .collect()
}

pub(super) fn from_wit_sampling(s: wire::Sampling) -> a::Sampling {
    a::Sampling {
        max_tokens: s.max_tokens,
        temperature: s.temperature,
        top_p: s.top_p,
        top_k: s.top_k,
        frequency_penalty: s.frequency_penalty,
        presence_penalty: s.presence_penalty,
        min_p: s.min_p,
        parallel_tool_calls: s.parallel_tool_calls,
        reasoning_effort: s.reasoning_effort,
    }
}

pub(super) fn from_wit_thinking(budget: Option<u32>) -> Option<a::Thinking> {
    budget.map(|budget| a::Thinking {
        enabled: true,
        budget_tokens: Some(budget),
    })
}

/// The endpoint as the adapters take it, signing at `now_ms` (SigV4).
pub(super) fn from_wit_endpoint(endpoint: wire::Endpoint, now_ms: u64) -> a::Endpoint {
    let credentials = match (endpoint.aws, endpoint.api_key) {
        (Some(aws), _) => a::Credentials::Aws {
            access_key_id: aws.access_key_id,
            secret_access_key: aws.secret_access_key,
            session_token: aws.session_token,
        },
        (None, Some(key)) => a::Credentials::ApiKey(key),
        (None, None) => a::Credentials::None,
    };
    a::Endpoint {
        base_url: endpoint.base_url,
        credentials,
        region: endpoint.region,
        timestamp: Some(a::amz_timestamp(now_ms / 1000)),
    }
}

pub(super) fn from_wit_options(options: wire::CallOptions) -> CallOptions {
    CallOptions {
        retry: options.retry.map(|retry| RetryPolicy {
            max_attempts: retry.max_attempts.max(1),
            base_delay_ms: retry.base_delay_ms,
            backoff: retry.backoff.max(1.0),
            ..RetryPolicy::default()
        }),
        limits: Limits {
            timeout_ms: options.timeout_ms,
            max_response_bytes: usize::try_from(options.max_response_bytes).unwrap_or(usize::MAX),
            deadline_ms: options.deadline_ms.unwrap_or(Limits::default().deadline_ms),
        },
        egress: match options.egress {
            wire::EgressPolicy::Open => EgressPolicy::Open,
            wire::EgressPolicy::Offline => EgressPolicy::Offline,
            wire::EgressPolicy::Allowlist(origins) => EgressPolicy::Allowlist(origins),
        },
    }
}

pub(super) fn to_wit_response(response: m::LlmResponse) -> wire::LlmResponse {
    wire::LlmResponse {
        id: response.id,
        content: response.content.into_iter().map(to_wit_block).collect(),
        model: response.model,
        stop_reason: response.stop_reason,
        usage: wire::TokenUsage {
            input_tokens: response.usage.input_tokens,
            output_tokens: response.usage.output_tokens,
        },
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
                ErrorKind::SessionState => wit::ErrorKind::SessionState,
                ErrorKind::Other => wit::ErrorKind::Other,
            },
            name: error.name().to_string(),
            code: error.code().map(str::to_string),
            error_type: error.error_type().map(str::to_string),
            message: error.to_string(),
            retryable: error.retryable(),
            http_status: error.http_status(),
            provider: error
                .block_type()
                .and(error.refusing_adapter())
                .or(error.provider())
                .map(str::to_string),
            block_type: error.block_type().map(str::to_string),
        }
    }
}

/// WIT messages to the model; fails only on tool-use input that is not JSON text.
pub(super) fn from_wit_messages(
    messages: Vec<wit::LlmMessage>,
) -> Result<Vec<m::LlmMessage>, Error> {
    convert_messages(messages, false)
}

/// WIT messages to the model, each block validated as it is converted, so the first broken
/// rule (a media rule or tool-use input that is not JSON) is reported in message order.
pub(super) fn from_wit_messages_validated(
    messages: Vec<wit::LlmMessage>,
) -> Result<Vec<m::LlmMessage>, Error> {
    convert_messages(messages, true)
}

pub(super) fn convert_messages(
    messages: Vec<wit::LlmMessage>,
    validate_each: bool,
) -> Result<Vec<m::LlmMessage>, Error> {
    messages
        .into_iter()
        .enumerate()
        .map(|(i, message)| {
            let content = message
                .content
                .into_iter()
                .enumerate()
                .map(|(j, block)| {
                    let block = from_wit_block(block, i, j)?;
                    if validate_each {
                        validate::validate_block_at(&block, i, j)?;
                    }
                    Ok(block)
                })
                .collect::<Result<_, Error>>()?;
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

pub(super) fn from_wit_block(
    block: wit::ContentBlock,
    i: usize,
    j: usize,
) -> Result<m::ContentBlock, Error> {
    Ok(match block {
        wit::ContentBlock::Text(text) => m::ContentBlock::Text(m::TextBlock { text }),
        wit::ContentBlock::Image(image) => m::ContentBlock::Image(m::ImageBlock {
            source: from_wit_source(image.source),
        }),
        wit::ContentBlock::Video(video) => m::ContentBlock::Video(m::VideoBlock {
            source: from_wit_source(video.source),
        }),
        wit::ContentBlock::ToolUse(call) => m::ContentBlock::ToolUse(m::ToolUseBlock {
            input: oma_core::json::from_str(&call.input).map_err(|e| {
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
            content: from_wit_content(result.content),
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

pub(super) fn from_wit_content(content: wit::ToolResultContent) -> m::ToolResultContent {
    match content {
        wit::ToolResultContent::Text(text) => m::ToolResultContent::Text(text),
        wit::ToolResultContent::Parts(parts) => {
            m::ToolResultContent::Parts(parts.into_iter().map(from_wit_part).collect())
        }
    }
}

pub(super) fn to_wit_content(content: m::ToolResultContent) -> wit::ToolResultContent {
    match content {
        m::ToolResultContent::Text(text) => wit::ToolResultContent::Text(text),
        m::ToolResultContent::Parts(parts) => {
            wit::ToolResultContent::Parts(parts.into_iter().map(to_wit_part).collect())
        }
    }
}

pub(super) fn from_wit_part(part: wit::ToolResultPart) -> m::ToolResultPart {
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

pub(super) fn from_wit_source(source: wit::MediaSource) -> m::MediaSource {
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

pub(super) fn to_wit_message(message: m::LlmMessage) -> wit::LlmMessage {
    wit::LlmMessage {
        role: match message.role {
            m::Role::User => wit::Role::User,
            m::Role::Assistant => wit::Role::Assistant,
        },
        content: message.content.into_iter().map(to_wit_block).collect(),
    }
}

pub(super) fn to_wit_block(block: m::ContentBlock) -> wit::ContentBlock {
    match block {
        m::ContentBlock::Text(t) => wit::ContentBlock::Text(t.text),
        m::ContentBlock::Image(image) => wit::ContentBlock::Image(wit::ImageBlock {
            source: to_wit_source(image.source),
        }),
        m::ContentBlock::Video(video) => wit::ContentBlock::Video(wit::VideoBlock {
            source: to_wit_source(video.source),
        }),
        m::ContentBlock::ToolUse(call) => wit::ContentBlock::ToolUse(to_wit_tool_use(call)),
        m::ContentBlock::ToolResult(result) => {
            wit::ContentBlock::ToolResult(wit::ToolResultBlock {
                tool_use_id: result.tool_use_id,
                content: to_wit_content(result.content),
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

pub(super) fn to_wit_tool_use(call: m::ToolUseBlock) -> wit::ToolUseBlock {
    wit::ToolUseBlock {
        input: call.input.to_string(),
        id: call.id,
        name: call.name,
        signature: call.signature,
    }
}

pub(super) fn to_wit_part(part: m::ToolResultPart) -> wit::ToolResultPart {
    match part {
        m::ToolResultPart::Text { text } => wit::ToolResultPart::Text(text),
        m::ToolResultPart::Image { source } => wit::ToolResultPart::Image(to_wit_source(source)),
        m::ToolResultPart::File { filename, source } => wit::ToolResultPart::File(wit::FilePart {
            filename,
            source: to_wit_source(source),
        }),
    }
}

pub(super) fn to_wit_source(source: m::MediaSource) -> wit::MediaSource {
    match source {
        m::MediaSource::Base64 { media_type, data } => {
            wit::MediaSource::Base64(wit::Base64Source { media_type, data })
        }
        m::MediaSource::Url { media_type, url } => {
            wit::MediaSource::Url(wit::UrlSource { media_type, url })
        }
    }
}
