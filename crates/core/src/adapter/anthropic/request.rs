//! The request side of Anthropic Messages: OMA messages -> borrowed wire blocks -> body bytes.
//!
//! Conversion runs to the end before a byte of body exists, so a video block or a tool-result
//! part Anthropic cannot carry fails with nothing to send. The body borrows the messages: base64
//! payloads are written by [`Writer`] at copy speed, never cloned into a `serde_json::Value`.
//!
//! Key order follows OMA's object literal, JavaScript spread rules included:
//! `max_tokens, temperature, top_p, top_k, ...extra_body, model, messages, system, tools,
//! thinking` (then `stream` when streaming). An `extra_body` key replaces the value of a sampling
//! key in its place; a structural key named in `extra_body` keeps the extra key's position but
//! takes the adapter's value (and disappears when the adapter has none, as a JS `undefined` does).

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::{API_VERSION, DEFAULT_BASE_URL, PROVIDER_LABEL};
use crate::adapter::reasoning::inline_text;
use crate::adapter::{
    join_url, CacheMark, CachePlace, ChatRequest, Credentials, Endpoint, HttpRequest, Thinking,
};
use crate::error::Error;
use crate::json::writer::Writer;
use crate::message::{
    ContentBlock, LlmMessage, MediaSource, ReasoningBlock, Role, ToolResultBlock,
    ToolResultContent, ToolResultPart,
};

/// `max_tokens` when the request sets none.
const DEFAULT_MAX_TOKENS: u32 = 4096;
/// The smallest thinking budget Anthropic accepts, and the default one.
const MIN_THINKING_BUDGET: u32 = 1024;
/// The image types Anthropic takes inside tool results.
const TOOL_RESULT_IMAGE_TYPES: [&str; 4] = ["image/jpeg", "image/png", "image/gif", "image/webp"];

/// Builds the HTTP request: validation, conversion, thinking checks, then the body. With
/// `count`, the request of `count_tokens` (`POST {base}/v1/messages/count_tokens`): the body's
/// model, messages, system, tools and thinking, none of the sampling keys, the extra body or
/// `stream`, which the counter does not take.
pub(super) fn format(
    request: &ChatRequest,
    endpoint: &Endpoint,
    count: bool,
) -> Result<HttpRequest, Error> {
    let messages = request
        .messages
        .iter()
        .enumerate()
        .map(|(at, message)| convert_message(request, at, message))
        .collect::<Result<Vec<_>, _>>()?;
    let max_tokens = request.sampling.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
    let thinking = thinking_param(request.thinking, max_tokens)?;
    let api_key = match &endpoint.credentials {
        Credentials::None => None,
        Credentials::ApiKey(key) => Some(key),
        Credentials::Aws { .. } => {
            return Err(Error::InvalidRequest {
                message: "anthropic takes an API key, not AWS credentials (use bedrock for \
                          Claude on AWS)"
                    .into(),
            })
        }
    };
    let tools: Vec<WireTool<'_>> = request
        .tools
        .iter()
        .enumerate()
        .map(|(at, tool)| WireTool {
            name: &tool.name,
            description: &tool.description,
            input_schema: &tool.input_schema,
            cache: request.cache_at(CachePlace::Tool(at)),
        })
        .collect();
    let body = Body {
        request,
        max_tokens,
        messages: &messages,
        tools: &tools,
        thinking,
        count,
    };
    let path = if count {
        "v1/messages/count_tokens"
    } else {
        "v1/messages"
    };
    let base = endpoint.base_url.as_deref().unwrap_or(DEFAULT_BASE_URL);
    let mut http = HttpRequest::post_json(join_url(base, path), body.write(request.size_hint()));
    if let Some(key) = api_key {
        http.headers.push(("x-api-key".into(), key.clone()));
    }
    http.headers
        .push(("anthropic-version".into(), API_VERSION.into()));
    Ok(http)
}

/// What a client wrote in Anthropic's own format, sent on as it is (the gateway's same-dialect
/// route): its body, whose model is replaced and nothing else.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Forward<'a> {
    /// The client's body, JSON text whose top-level `model` is a string.
    pub body: &'a str,
    /// Where the text of that `model` string (quotes included) is in `body`.
    pub model_at: std::ops::Range<usize>,
    /// The route: `v1/messages` or `v1/messages/count_tokens`, with the client's query (the
    /// SDK's beta client adds `?beta=true`).
    pub path: &'a str,
    /// The client's `anthropic-version`, else [`API_VERSION`].
    pub version: Option<&'a str>,
    /// The client's `anthropic-beta`, sent as it is.
    pub beta: Option<&'a str>,
}

/// The request that sends `forward` to `endpoint` with `model`: the client's body byte for byte
/// apart from the model's string, at the same route, with the endpoint's key and the client's
/// version and beta headers.
pub fn forward(
    forward: &Forward<'_>,
    model: &str,
    endpoint: &Endpoint,
) -> Result<HttpRequest, Error> {
    let api_key = match &endpoint.credentials {
        Credentials::None => None,
        Credentials::ApiKey(key) => Some(key),
        Credentials::Aws { .. } => {
            return Err(Error::InvalidRequest {
                message: "anthropic takes an API key, not AWS credentials (use bedrock for \
                          Claude on AWS)"
                    .into(),
            })
        }
    };
    let Forward { body, model_at, .. } = forward;
    let (Some(before), Some(after)) = (body.get(..model_at.start), body.get(model_at.end..)) else {
        return Err(Error::InvalidRequest {
            message: "the request's model is not where it was found".into(),
        });
    };
    let mut w = Writer::with_capacity(body.len() + model.len());
    w.string(model);
    let model = w.finish();
    let mut text = String::with_capacity(body.len() + model.len());
    text.push_str(before);
    text.push_str(&model);
    text.push_str(after);
    let base = endpoint.base_url.as_deref().unwrap_or(DEFAULT_BASE_URL);
    let mut http = HttpRequest::post_json(join_url(base, forward.path), text);
    if let Some(key) = api_key {
        http.headers.push(("x-api-key".into(), key.clone()));
    }
    http.headers.push((
        "anthropic-version".into(),
        forward.version.unwrap_or(API_VERSION).into(),
    ));
    if let Some(beta) = forward.beta {
        http.headers.push(("anthropic-beta".into(), beta.into()));
    }
    Ok(http)
}

/// OMA's `toAnthropicThinkingParam`: `None` unless enabled; the budget defaults to 1024, must be
/// at least 1024 and below `max_tokens`, with OMA's exact messages.
fn thinking_param(thinking: Option<Thinking>, max_tokens: u32) -> Result<Option<u32>, Error> {
    let Some(thinking) = thinking.filter(|t| t.enabled) else {
        return Ok(None);
    };
    let budget = thinking.budget_tokens.unwrap_or(MIN_THINKING_BUDGET);
    if budget < MIN_THINKING_BUDGET {
        return Err(Error::InvalidRequest {
            message: format!(
                "[anthropic] thinking.budgetTokens must be >= 1024 (got {budget}); the \
                 Anthropic API enforces this minimum."
            ),
        });
    }
    if budget >= max_tokens {
        return Err(Error::InvalidRequest {
            message: format!(
                "[anthropic] thinking.budgetTokens ({budget}) must be < maxTokens \
                 ({max_tokens}); the Anthropic API rejects requests where budget_tokens >= \
                 max_tokens. Either lower thinking.budgetTokens or raise maxTokens."
            ),
        });
    }
    Ok(Some(budget))
}

/// One message on the wire: `{role, content}`, content possibly empty.
struct WireMessage<'a> {
    role: Role,
    content: Vec<Marked<'a>>,
}

/// A block on the wire with the cache marker it carries, if any.
struct Marked<'a> {
    block: WireBlock<'a>,
    cache: Option<&'a CacheMark>,
}

impl<'a> From<WireBlock<'a>> for Marked<'a> {
    fn from(block: WireBlock<'a>) -> Self {
        Marked { block, cache: None }
    }
}

/// `"cache_control": {"type": "ephemeral", "ttl"?}`, the member of a marked block, system
/// block or tool.
fn write_cache_control(cache: Option<&CacheMark>, w: &mut Writer) {
    let Some(mark) = cache else {
        return;
    };
    w.key("cache_control");
    w.begin_object();
    w.field_str("type", "ephemeral");
    if let Some(ttl) = &mark.ttl {
        w.field_str("ttl", ttl);
    }
    w.end_object();
}

impl WireMessage<'_> {
    fn write(&self, w: &mut Writer) {
        w.begin_object();
        w.field_str("role", self.role.word());
        w.key("content");
        write_blocks(&self.content, w);
        w.end_object();
    }
}

/// One content block on the wire, borrowing from the message.
enum WireBlock<'a> {
    Text {
        text: Cow<'a, str>,
    },
    Image {
        source: WireSource<'a>,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: &'a Value,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: WireToolContent<'a>,
        is_error: Option<bool>,
    },
    Document {
        title: &'a str,
        source: WireSource<'a>,
    },
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    RedactedThinking {
        data: &'a str,
    },
}

impl Marked<'_> {
    /// `{"type": "<snake_case variant>", ...fields in declaration order, cache_control?}`.
    fn write(&self, w: &mut Writer) {
        w.begin_object();
        match &self.block {
            WireBlock::Text { text } => {
                w.field_str("type", "text");
                w.field_str("text", text);
            }
            WireBlock::Image { source } => {
                w.field_str("type", "image");
                w.key("source");
                source.write(w);
            }
            WireBlock::ToolUse { id, name, input } => {
                w.field_str("type", "tool_use");
                w.field_str("id", id);
                w.field_str("name", name);
                w.key("input");
                w.json(input);
            }
            WireBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => {
                w.field_str("type", "tool_result");
                w.field_str("tool_use_id", tool_use_id);
                w.key("content");
                match content {
                    WireToolContent::Text(text) => w.string(text),
                    WireToolContent::Blocks(blocks) => write_blocks(blocks, w),
                }
                if let Some(is_error) = is_error {
                    w.key("is_error");
                    w.bool(*is_error);
                }
            }
            WireBlock::Document { title, source } => {
                w.field_str("type", "document");
                w.field_str("title", title);
                w.key("source");
                source.write(w);
            }
            WireBlock::Thinking {
                thinking,
                signature,
            } => {
                w.field_str("type", "thinking");
                w.field_str("thinking", thinking);
                w.field_str("signature", signature);
            }
            WireBlock::RedactedThinking { data } => {
                w.field_str("type", "redacted_thinking");
                w.field_str("data", data);
            }
        }
        write_cache_control(self.cache, w);
        w.end_object();
    }
}

fn write_blocks(blocks: &[Marked<'_>], w: &mut Writer) {
    w.begin_array();
    for block in blocks {
        block.write(w);
    }
    w.end_array();
}

/// An image or document source: inline base64 or a URL the provider fetches.
enum WireSource<'a> {
    Base64 { media_type: &'a str, data: &'a str },
    Url { url: &'a str },
}

impl WireSource<'_> {
    /// `{"type": "base64", media_type, data}` or `{"type": "url", url}`.
    fn write(&self, w: &mut Writer) {
        w.begin_object();
        match self {
            WireSource::Base64 { media_type, data } => {
                w.field_str("type", "base64");
                w.field_str("media_type", media_type);
                w.field_str("data", data);
            }
            WireSource::Url { url } => {
                w.field_str("type", "url");
                w.field_str("url", url);
            }
        }
        w.end_object();
    }
}

impl<'a> WireSource<'a> {
    fn from_media(source: &'a MediaSource) -> Self {
        match source {
            MediaSource::Base64 { media_type, data } => WireSource::Base64 { media_type, data },
            MediaSource::Url { url, .. } => WireSource::Url { url },
        }
    }
}

/// The content of a tool result: the legacy string, or text and image blocks.
enum WireToolContent<'a> {
    Text(&'a str),
    Blocks(Vec<Marked<'a>>),
}

/// Converts message `at` of `request`, in block order; a tool result may add `document` blocks
/// after itself. A block's cache marker goes on the block it became.
fn convert_message<'a>(
    request: &'a ChatRequest,
    at: usize,
    message: &'a LlmMessage,
) -> Result<WireMessage<'a>, Error> {
    let mut content: Vec<Marked<'a>> = Vec::with_capacity(message.content.len());
    for (index, block) in message.content.iter().enumerate() {
        let cache = request.cache_at(CachePlace::Block {
            message: at,
            block: index,
        });
        let converted = match block {
            ContentBlock::Text(text) => Some(WireBlock::Text {
                text: Cow::Borrowed(&text.text),
            }),
            ContentBlock::Image(image) => Some(WireBlock::Image {
                source: WireSource::from_media(&image.source),
            }),
            ContentBlock::Video(_) => {
                return Err(Error::unsupported_block(PROVIDER_LABEL, "video"))
            }
            ContentBlock::ToolUse(call) => Some(WireBlock::ToolUse {
                id: &call.id,
                name: &call.name,
                input: &call.input,
            }),
            ContentBlock::ToolResult(result) => {
                let marks = |part: usize| {
                    request.cache_at(CachePlace::Part {
                        message: at,
                        block: index,
                        part,
                    })
                };
                let (result, documents) = convert_tool_result(result, marks)?;
                content.push(Marked {
                    block: result,
                    cache,
                });
                content.extend(documents);
                continue;
            }
            ContentBlock::Reasoning(reasoning) => {
                convert_reasoning(reasoning, request.reasoning_fallback())
            }
        };
        if let Some(block) = converted {
            content.push(Marked { block, cache });
        }
    }
    Ok(WireMessage {
        role: message.role,
        content,
    })
}

/// Own-issued reasoning goes back as `redacted_thinking` or signed `thinking`; anything else
/// becomes `<thinking>` text when the caller opted in, and is dropped otherwise.
fn convert_reasoning(block: &ReasoningBlock, preserve: Option<usize>) -> Option<WireBlock<'_>> {
    if block.provenance.as_deref() == Some(super::NAME) {
        if let Some(data) = &block.redacted_data {
            return Some(WireBlock::RedactedThinking { data });
        }
        if let Some(signature) = &block.signature {
            return Some(WireBlock::Thinking {
                thinking: &block.text,
                signature,
            });
        }
    }
    let max_chars = preserve?;
    let text = inline_text(block, max_chars);
    (!text.is_empty()).then_some(WireBlock::Text {
        text: Cow::Owned(text),
    })
}

/// A tool result: string content as it is; parts as text and image blocks, each PDF file as a
/// text marker inside and a `document` block right after the tool result (which carries the
/// file's cache marker, `marks` giving each part's).
fn convert_tool_result<'a>(
    result: &'a ToolResultBlock,
    marks: impl Fn(usize) -> Option<&'a CacheMark>,
) -> Result<(WireBlock<'a>, Vec<Marked<'a>>), Error> {
    let parts = match &result.content {
        ToolResultContent::Text(text) => {
            let block = WireBlock::ToolResult {
                tool_use_id: &result.tool_use_id,
                content: WireToolContent::Text(text),
                is_error: result.is_error,
            };
            return Ok((block, Vec::new()));
        }
        ToolResultContent::Parts(parts) => parts,
    };
    let mut blocks: Vec<Marked<'a>> = Vec::with_capacity(parts.len());
    let mut documents = Vec::new();
    for (index, part) in parts.iter().enumerate() {
        let cache = marks(index);
        match part {
            ToolResultPart::Text { text } => blocks.push(Marked {
                block: WireBlock::Text {
                    text: Cow::Borrowed(text),
                },
                cache,
            }),
            ToolResultPart::Image { source } => {
                let media_type = source.media_type();
                if !TOOL_RESULT_IMAGE_TYPES.contains(&media_type) {
                    return Err(unsupported(
                        format!("image:{media_type}"),
                        "supported image media types are JPEG, PNG, GIF, and WebP",
                    ));
                }
                blocks.push(Marked {
                    block: WireBlock::Image {
                        source: WireSource::from_media(source),
                    },
                    cache,
                });
            }
            ToolResultPart::File { filename, source } => {
                let media_type = source.media_type();
                if media_type != "application/pdf" {
                    return Err(unsupported(
                        format!("file:{media_type}"),
                        "tool-result file parts are supported here only for PDF documents",
                    ));
                }
                blocks.push(
                    WireBlock::Text {
                        text: Cow::Owned(format!("[File attachment follows: {filename}]")),
                    }
                    .into(),
                );
                documents.push(Marked {
                    block: WireBlock::Document {
                        title: filename,
                        source: WireSource::from_media(source),
                    },
                    cache,
                });
            }
        }
    }
    let block = WireBlock::ToolResult {
        tool_use_id: &result.tool_use_id,
        content: WireToolContent::Blocks(blocks),
        is_error: result.is_error,
    };
    Ok((block, documents))
}

fn unsupported(content_type: String, detail: &str) -> Error {
    Error::UnsupportedToolResultContent {
        provider: PROVIDER_LABEL.into(),
        content_type,
        detail: Some(detail.into()),
    }
}

/// A tool on the wire.
struct WireTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
    cache: Option<&'a CacheMark>,
}

impl WireTool<'_> {
    /// `{name, description, input_schema, cache_control?}`, the schema as `{type: 'object',
    /// ...schema}`: `type`
    /// first, the schema's own `type` winning in that place; a schema that is not an object
    /// adds nothing.
    fn write(&self, w: &mut Writer) {
        w.begin_object();
        w.field_str("name", self.name);
        w.field_str("description", self.description);
        w.key("input_schema");
        let fields = self.input_schema.as_object();
        w.begin_object();
        w.key("type");
        match fields.and_then(|f| f.get("type")) {
            Some(own) => w.json(own),
            None => w.string("object"),
        }
        for (key, value) in fields.into_iter().flatten() {
            if key != "type" {
                w.key(key);
                w.json(value);
            }
        }
        w.end_object();
        write_cache_control(self.cache, w);
        w.end_object();
    }
}

/// The keys of the body, in the order OMA's object literal gives them.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Key<'a> {
    MaxTokens,
    Temperature,
    TopP,
    TopK,
    Extra(&'a str, &'a Value),
    Model,
    Messages,
    System,
    Tools,
    Thinking,
    Stream,
}

/// The whole request body.
struct Body<'a> {
    request: &'a ChatRequest,
    max_tokens: u32,
    messages: &'a [WireMessage<'a>],
    tools: &'a [WireTool<'a>],
    thinking: Option<u32>,
    /// The body of `count_tokens`: the structural keys only.
    count: bool,
}

impl<'a> Body<'a> {
    /// The key order of `{max_tokens, temperature, top_p, top_k, ...extraBody, model, messages,
    /// system, tools, thinking}` (plus the SDK's trailing `stream: true`): a key keeps the place
    /// where it first appeared.
    fn key_order(&self) -> Vec<Key<'a>> {
        if self.count {
            return vec![
                Key::Model,
                Key::Messages,
                Key::System,
                Key::Tools,
                Key::Thinking,
            ];
        }
        let extra: &'a Map<String, Value> = &self.request.extra_body;
        let mut keys = vec![Key::MaxTokens, Key::Temperature, Key::TopP, Key::TopK];
        for (name, value) in extra {
            let key = match name.as_str() {
                "max_tokens" | "temperature" | "top_p" | "top_k" => continue,
                "model" => Key::Model,
                "messages" => Key::Messages,
                "system" => Key::System,
                "tools" => Key::Tools,
                "thinking" => Key::Thinking,
                "stream" if self.request.stream => Key::Stream,
                other => Key::Extra(other, value),
            };
            keys.push(key);
        }
        let mut tail = vec![
            Key::Model,
            Key::Messages,
            Key::System,
            Key::Tools,
            Key::Thinking,
        ];
        if self.request.stream {
            tail.push(Key::Stream);
        }
        for key in tail {
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        keys
    }
}

/// `system`: OMA's one text; or, when the caller gave blocks or marked the system prompt for
/// the cache, `[{"type": "text", "text", "cache_control"?}]`, one per block.
fn write_system(request: &ChatRequest, w: &mut Writer) {
    let marked = request
        .cache
        .iter()
        .any(|mark| matches!(mark.place, CachePlace::System(_)));
    if request.system_blocks.is_empty() && !marked {
        if let Some(system) = &request.system_prompt {
            w.field_str("system", system);
        }
        return;
    }
    let parts = request.system_parts();
    if parts.is_empty() {
        return;
    }
    w.key("system");
    w.begin_array();
    for (at, text) in parts.into_iter().enumerate() {
        w.begin_object();
        w.field_str("type", "text");
        w.field_str("text", text);
        write_cache_control(request.cache_at(CachePlace::System(at)), w);
        w.end_object();
    }
    w.end_array();
}

impl Body<'_> {
    /// The body's JSON text, into a buffer of `capacity` bytes.
    fn write(&self, capacity: usize) -> String {
        let request = self.request;
        let extra = &request.extra_body;
        let sampling = &request.sampling;
        let mut w = Writer::with_capacity(capacity);
        w.begin_object();
        for key in self.key_order() {
            match key {
                Key::MaxTokens => {
                    w.key("max_tokens");
                    match extra.get("max_tokens") {
                        Some(value) => w.json(value),
                        None => w.u64(u64::from(self.max_tokens)),
                    }
                }
                Key::Temperature => match (extra.get("temperature"), sampling.temperature) {
                    (Some(value), _) => {
                        w.key("temperature");
                        w.json(value);
                    }
                    (None, Some(t)) => {
                        w.key("temperature");
                        w.js_number(t);
                    }
                    (None, None) => {}
                },
                Key::TopP => match (extra.get("top_p"), sampling.top_p) {
                    (Some(value), _) => {
                        w.key("top_p");
                        w.json(value);
                    }
                    (None, Some(p)) => {
                        w.key("top_p");
                        w.js_number(p);
                    }
                    (None, None) => {}
                },
                Key::TopK => match (extra.get("top_k"), sampling.top_k) {
                    (Some(value), _) => {
                        w.key("top_k");
                        w.json(value);
                    }
                    (None, Some(k)) => {
                        w.key("top_k");
                        w.u64(u64::from(k));
                    }
                    (None, None) => {}
                },
                Key::Extra(name, value) => {
                    w.key(name);
                    w.json(value);
                }
                Key::Model => w.field_str("model", &request.model),
                Key::Messages => {
                    w.key("messages");
                    w.begin_array();
                    for message in self.messages {
                        message.write(&mut w);
                    }
                    w.end_array();
                }
                Key::System => write_system(request, &mut w),
                Key::Tools => {
                    if !self.tools.is_empty() {
                        w.key("tools");
                        w.begin_array();
                        for tool in self.tools {
                            tool.write(&mut w);
                        }
                        w.end_array();
                    }
                }
                Key::Thinking => {
                    if let Some(budget_tokens) = self.thinking {
                        // `{type: 'enabled', budget_tokens}`.
                        w.key("thinking");
                        w.begin_object();
                        w.field_str("type", "enabled");
                        w.key("budget_tokens");
                        w.u64(u64::from(budget_tokens));
                        w.end_object();
                    }
                }
                Key::Stream => {
                    w.key("stream");
                    w.bool(true);
                }
            }
        }
        w.end_object();
        w.finish()
    }
}
