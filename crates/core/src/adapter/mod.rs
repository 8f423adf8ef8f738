//! Provider wire formats, as pure functions: a [`ChatRequest`] in, the exact [`HttpRequest`] out;
//! a provider's response body in, OMA's [`LlmResponse`] out; streamed bytes in, [`StreamEvent`]s
//! out.
//!
//! Adapters do no I/O and read no clock or environment: whatever varies (keys, base URLs, the
//! signing time, generated ids) comes in through [`Endpoint`] and [`ChatRequest`]. So every wire
//! format is tested by value, natively.
//!
//! Shared promises (`docs/wire-formats.md#common-rules`): the messages are validated first;
//! conversion runs before any request exists, so `UnsupportedContentBlockError` and
//! `UnsupportedToolResultContentError` leave nothing to send; block order is kept; large base64
//! payloads are written into the body without being decoded, re-encoded or escape-scanned, except
//! where a format needs bytes.

pub mod ai_sdk;
pub mod anthropic;
pub mod bedrock;
pub mod gemini;
pub mod openai;
pub mod reasoning;
pub mod sse;
#[cfg(test)]
pub(crate) mod test_support;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::error::Error;
use crate::message::{LlmMessage, LlmResponse, TokenUsage, ToolUseBlock};

/// Everything a provider needs for one chat turn (OMA's `LLMChatOptions` plus the messages).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChatRequest {
    /// The model id, e.g. `claude-sonnet-4-6`.
    pub model: String,
    /// The system prompt; it travels apart from the messages.
    pub system_prompt: Option<String>,
    /// The system prompt as the caller's text blocks, when it gave blocks (Anthropic's `system`
    /// array), so that a format that takes blocks (Anthropic, Bedrock) keeps them and the cache
    /// markers between them; `system_prompt` is then their texts joined by a blank line, for
    /// the formats that take one text. Empty when the system prompt is one text.
    pub system_blocks: Vec<String>,
    /// The conversation, already validated.
    pub messages: Vec<LlmMessage>,
    /// Tools the model may call.
    pub tools: Vec<ToolDefinition>,
    /// Sampling options; each is sent only when set.
    pub sampling: Sampling,
    /// Extended thinking, for providers that have it.
    pub thinking: Option<Thinking>,
    /// Provider-specific keys spread into the body (OMA's `extraBody`).
    pub extra_body: Map<String, Value>,
    /// Send reasoning of other providers as `<thinking>…</thinking>` text instead of dropping it
    /// (OMA's `preserveReasoningAsText`).
    pub preserve_reasoning_as_text: bool,
    /// The most characters of one reasoning block sent as text (OMA's `compressReasoningText`):
    /// `None` for OMA's default, 1200; `Some(usize::MAX)` when compression is off.
    pub reasoning_text_max_chars: Option<usize>,
    /// Ask for a streamed response.
    pub stream: bool,
    /// Where the provider's prompt cache may end (Anthropic's `cache_control` markers). A
    /// format that caches by marker (Anthropic, Bedrock's `cachePoint`) sends each; the others
    /// refuse a request that has any, so a marker is never dropped unsaid.
    pub cache: Vec<CacheMark>,
    /// Keys added to the format's own generation settings, after the ones it writes (which
    /// they never replace): Gemini's `generationConfig`, Bedrock's `inferenceConfig`; the
    /// other formats take no such keys (their `extra_body` is the body's). OMA's runs never set
    /// it: the gateway maps a client's fields here where the target's format has them (`stop`
    /// as `stopSequences`, `seed`).
    pub generation_extra: Map<String, Value>,
    /// A tool call the model must make (OMA's runs never force one: the gateway maps a
    /// client's `tool_choice` here for the formats whose tool settings are their own): Gemini's
    /// `functionCallingConfig` mode `ANY` (with `allowedFunctionNames` for one tool), Bedrock's
    /// `toolChoice`. Sent only with tools.
    pub forced_tool: Option<ForcedTool>,
}

/// Which tool call [`ChatRequest::forced_tool`] forces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ForcedTool {
    /// A call of any of the tools.
    Any,
    /// A call of the tool of this name.
    Named(String),
}

/// A prompt-cache marker: the provider may cache the prompt up to and including what it marks
/// (Anthropic's `{"type": "ephemeral", "ttl"?}` `cache_control`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheMark {
    /// What it marks.
    pub place: CachePlace,
    /// How long the cached prefix lives: `5m` or `1h` (Anthropic's and Bedrock's words); `None`
    /// for the provider's default (five minutes).
    pub ttl: Option<String>,
}

/// What a [`CacheMark`] marks, by position in the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CachePlace {
    /// The system prompt's block `i` ([`ChatRequest::system_blocks`]); with no blocks, 0 is
    /// the whole system prompt.
    System(usize),
    /// Tool `i` of [`ChatRequest::tools`].
    Tool(usize),
    /// Block `block` of message `message`.
    Block {
        /// The message's index.
        message: usize,
        /// The block's index in the message.
        block: usize,
    },
    /// Part `part` of the rich tool result that is block `block` of message `message`.
    Part {
        /// The message's index.
        message: usize,
        /// The tool result's index in the message.
        block: usize,
        /// The part's index in the tool result.
        part: usize,
    },
}

/// The error of a format that has no prompt-cache markers, for a request that carries some.
pub fn cache_unsupported(label: &str) -> Error {
    Error::InvalidRequest {
        message: format!(
            "cache_control is not supported by {label}: its prompt caching takes no markers"
        ),
    }
}

impl ChatRequest {
    /// The cap on reasoning sent as `<thinking>` text, or `None` when reasoning a wire format
    /// cannot echo is dropped (`preserveReasoningAsText` off).
    pub fn reasoning_fallback(&self) -> Option<usize> {
        self.preserve_reasoning_as_text.then(|| {
            self.reasoning_text_max_chars
                .unwrap_or(reasoning::DEFAULT_MAX_CHARS)
        })
    }

    /// The cache marker on `place`, if any.
    pub fn cache_at(&self, place: CachePlace) -> Option<&CacheMark> {
        self.cache.iter().find(|mark| mark.place == place)
    }

    /// The system prompt as the blocks a format that takes blocks sends: the caller's blocks,
    /// else the one text (none when there is no system prompt).
    pub fn system_parts(&self) -> Vec<&str> {
        if self.system_blocks.is_empty() {
            self.system_prompt.as_deref().into_iter().collect()
        } else {
            self.system_blocks.iter().map(String::as_str).collect()
        }
    }

    /// A generous estimate of the body's size, so the body buffer is allocated once: the
    /// bytes of every text and media payload, plus room for the JSON around them.
    pub fn size_hint(&self) -> usize {
        use crate::message::{ContentBlock as B, MediaSource, ToolResultContent, ToolResultPart};
        fn source(s: &MediaSource) -> usize {
            match s {
                MediaSource::Base64 { media_type, data } => media_type.len() + data.len(),
                MediaSource::Url { media_type, url } => media_type.len() + url.len(),
            }
        }
        let block = |b: &B| match b {
            B::Text(t) => t.text.len(),
            B::Image(i) => source(&i.source),
            B::Video(v) => source(&v.source),
            B::ToolUse(_) => 256,
            B::Reasoning(r) => r.text.len() + r.signature.as_ref().map_or(0, String::len),
            B::ToolResult(r) => match &r.content {
                ToolResultContent::Text(t) => t.len(),
                ToolResultContent::Parts(parts) => parts
                    .iter()
                    .map(|p| match p {
                        ToolResultPart::Text { text } => text.len(),
                        ToolResultPart::Image { source: s } => source(s),
                        ToolResultPart::File { filename, source: s } => filename.len() + source(s),
                    } + 128)
                    .sum(),
            },
        } + 64;
        let messages: usize = self
            .messages
            .iter()
            .map(|m| m.content.iter().map(block).sum::<usize>() + 64)
            .sum();
        messages
            + self.system_prompt.as_ref().map_or(0, String::len)
            + self
                .system_blocks
                .iter()
                .map(|b| b.len() + 64)
                .sum::<usize>()
            + 64 * self.cache.len()
            + 1024 * (1 + self.tools.len())
    }
}

/// An estimate of a chat turn's input tokens, for a provider that has no counter: one token
/// per four bytes (rounded up) of the system prompt, of each text, reasoning text and
/// signature, tool call (its name and input as JSON) and tool result (its text, a file's name),
/// and of each tool's name, description and input schema as JSON; 1,600 tokens for each image
/// or file (what Anthropic documents for an image of about 1.15 megapixels) and 4 for each
/// message. Rough by design: tokenizers differ by model, and the estimate is what a client
/// gets where the provider offers no count.
pub fn estimate_input_tokens(request: &ChatRequest) -> u64 {
    use crate::message::{ContentBlock as B, ToolResultContent, ToolResultPart};
    const MEDIA: u64 = 1600;
    let len = |text: &str| text.len() as u64;
    let json = |value: &Value| {
        let mut w = crate::json::writer::Writer::with_capacity(64);
        w.json(value);
        w.finish().len() as u64
    };
    let mut bytes = request.system_prompt.as_deref().map_or(0, len);
    let mut flat = 0u64;
    for message in &request.messages {
        flat += 4;
        for block in &message.content {
            match block {
                B::Text(t) => bytes += len(&t.text),
                B::Image(_) | B::Video(_) => flat += MEDIA,
                B::ToolUse(call) => bytes += len(&call.name) + json(&call.input),
                B::Reasoning(r) => {
                    bytes += len(&r.text) + r.signature.as_deref().map_or(0, len);
                }
                B::ToolResult(result) => match &result.content {
                    ToolResultContent::Text(text) => bytes += len(text),
                    ToolResultContent::Parts(parts) => {
                        for part in parts {
                            match part {
                                ToolResultPart::Text { text } => bytes += len(text),
                                ToolResultPart::Image { .. } => flat += MEDIA,
                                ToolResultPart::File { filename, .. } => {
                                    bytes += len(filename);
                                    flat += MEDIA;
                                }
                            }
                        }
                    }
                },
            }
        }
    }
    for tool in &request.tools {
        bytes += len(&tool.name) + len(&tool.description) + json(&tool.input_schema);
    }
    bytes.div_ceil(4).saturating_add(flat)
}

/// A tool the model may call.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolDefinition {
    /// The tool's name.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// The JSON Schema of the tool's input (an object schema).
    #[serde(rename = "inputSchema")]
    pub input_schema: Value,
}

/// Sampling options (OMA's names in snake_case); `None` means "not sent".
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sampling {
    /// The output token limit.
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Nucleus sampling.
    pub top_p: Option<f64>,
    /// Top-k sampling.
    pub top_k: Option<u32>,
    /// OpenAI-compatible frequency penalty.
    pub frequency_penalty: Option<f64>,
    /// OpenAI-compatible presence penalty.
    pub presence_penalty: Option<f64>,
    /// OpenAI-compatible min-p.
    pub min_p: Option<f64>,
    /// OpenAI-compatible parallel tool calls.
    pub parallel_tool_calls: Option<bool>,
    /// OpenAI-compatible reasoning effort: `low`, `medium`, `high` (or `max` for DeepSeek).
    pub reasoning_effort: Option<String>,
}

/// Extended-thinking configuration.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Thinking {
    /// Whether thinking is on.
    pub enabled: bool,
    /// The thinking token budget, where the provider takes one.
    pub budget_tokens: Option<u32>,
}

/// Where and as whom a request is sent. Holds secrets: never print it, never put it in an error.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Endpoint {
    /// The base URL; `None` for the provider's default.
    pub base_url: Option<String>,
    /// How the request is authenticated.
    pub credentials: Credentials,
    /// The AWS region (Bedrock).
    pub region: Option<String>,
    /// The signing time as `YYYYMMDDTHHMMSSZ` (Bedrock SigV4); adapters read no clock.
    pub timestamp: Option<String>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field(
                "base_url",
                &self.base_url.as_deref().map(crate::secret::display_url),
            )
            .field("credentials", &"[redacted]")
            .field("region", &self.region)
            .finish()
    }
}

impl Endpoint {
    /// The secrets this endpoint holds (an API key, an AWS secret key and session token, the
    /// credentials in its base URL: [`crate::secret::url_secrets`]), for [`Error::redact`].
    pub fn secrets(&self) -> Vec<String> {
        let mut secrets: Vec<String> = match &self.credentials {
            Credentials::None => Vec::new(),
            Credentials::ApiKey(key) => vec![key.clone()],
            Credentials::Aws {
                secret_access_key,
                session_token,
                ..
            } => std::iter::once(secret_access_key.clone())
                .chain(session_token.clone())
                .collect(),
        };
        if let Some(url) = &self.base_url {
            secrets.extend(crate::secret::url_secrets(url));
        }
        secrets
    }
}

/// How a request is authenticated.
#[derive(Clone, Default, PartialEq, Eq)]
pub enum Credentials {
    /// No authentication (e.g. a local server).
    #[default]
    None,
    /// An API key or bearer token, sent the provider's way.
    ApiKey(String),
    /// AWS access keys, for SigV4 signing (Bedrock).
    Aws {
        /// `AWS_ACCESS_KEY_ID`.
        access_key_id: String,
        /// `AWS_SECRET_ACCESS_KEY`.
        secret_access_key: String,
        /// `AWS_SESSION_TOKEN`, for temporary credentials.
        session_token: Option<String>,
    },
}

/// An HTTP request, ready for the transport.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpRequest {
    /// The method, e.g. `POST`.
    pub method: String,
    /// The absolute URL.
    pub url: String,
    /// Header names (lowercase) and values, in order.
    pub headers: Vec<(String, String)>,
    /// The body (JSON text).
    pub body: String,
}

impl HttpRequest {
    /// A JSON `POST` to `url`.
    pub fn post_json(url: String, body: String) -> Self {
        HttpRequest {
            method: "POST".into(),
            url,
            headers: vec![("content-type".into(), "application/json".into())],
            body,
        }
    }

    /// The headers with every credential replaced by `[redacted]`, for display.
    pub fn redacted_headers(&self) -> Vec<(String, String)> {
        self.headers
            .iter()
            .map(|(name, value)| {
                let secret = matches!(
                    name.as_str(),
                    "authorization"
                        | "x-api-key"
                        | "x-goog-api-key"
                        | "x-amz-security-token"
                        | "api-key"
                );
                let value = if secret {
                    "[redacted]".into()
                } else {
                    value.clone()
                };
                (name.clone(), value)
            })
            .collect()
    }
}

/// One event of a streamed response (OMA's adapter-level `StreamEvent`).
#[derive(Clone, Debug, PartialEq)]
pub enum StreamEvent {
    /// A piece of text, as it arrived.
    Text(String),
    /// A piece of reasoning, as it arrived.
    Reasoning(String),
    /// The signature of the reasoning block being streamed, which ends it (Anthropic's
    /// `signature_delta`, Bedrock's reasoning `signature`, Gemini's `thoughtSignature` on a
    /// thought): what a client must send back with the block. The whole response has it too.
    ReasoningSignature(String),
    /// A redacted reasoning block, whole: its opaque data (Anthropic's `redacted_thinking`,
    /// Bedrock's `redactedContent`), as the whole response's block carries it.
    RedactedReasoning(String),
    /// The usage the provider reported as the answer began (Anthropic's `message_start`: the
    /// input tokens, cache counts included); the whole response has the final counts.
    Usage(TokenUsage),
    /// A complete tool call.
    ToolUse(ToolUseBlock),
    /// The whole response, accumulated; always the last event of a successful stream.
    Done(LlmResponse),
}

/// An incremental decoder of a provider's streamed body.
///
/// Call [`feed`](StreamDecoder::feed) with bytes as they arrive (any chunking: a chunk boundary
/// is never an error), then [`finish`](StreamDecoder::finish) once the body ends; `finish`
/// returns the last events, ending with [`StreamEvent::Done`], or an error if the stream was
/// cut short or reported an error.
///
/// `Send`, so that a run in flight can move between threads (an async host's tasks).
pub trait StreamDecoder: Send {
    /// Decodes the bytes that arrived; returns the events they complete.
    fn feed(&mut self, bytes: &[u8]) -> Result<Vec<StreamEvent>, Error>;
    /// Ends the stream.
    fn finish(&mut self) -> Result<Vec<StreamEvent>, Error>;
}

/// A chat request whose messages passed [`validate_messages`](crate::validate::validate_messages):
/// a proof only validation gives. [`Validated::check`] validates a request no one has checked;
/// the turn loop hands out its own request this way, because every message joins its
/// conversation validated (the input when the run is made, the hook's messages when they are
/// merged, each tool result and each response as it arrives). An adapter given one formats it
/// without checking again, so a run's conversation is validated once, not once per turn.
#[derive(Clone, Copy, Debug)]
pub struct Validated<'a>(&'a ChatRequest);

impl<'a> Validated<'a> {
    /// `request`, once its messages pass validation; else OMA's error for the first that fails.
    pub fn check(request: &'a ChatRequest) -> Result<Self, Error> {
        crate::validate::validate_messages(&request.messages)?;
        Ok(Validated(request))
    }

    /// `request`, whose messages the caller validated: for the turn loop alone.
    pub(crate) fn trusted(request: &'a ChatRequest) -> Self {
        Validated(request)
    }

    /// The request.
    pub fn request(self) -> &'a ChatRequest {
        self.0
    }
}

impl std::ops::Deref for Validated<'_> {
    type Target = ChatRequest;

    fn deref(&self) -> &ChatRequest {
        self.0
    }
}

/// What reading a response needs to know of the request it answers, and nothing more: the
/// model (Bedrock and Gemini answers do not name it, so the response takes the request's) and
/// how many messages the request carried (Gemini's made-up tool-call ids are drawn per turn
/// from it). A call keeps this small value instead of the whole request, so it can parse and
/// decode its own response without being handed the request again.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResponseContext {
    /// The model the request asked for.
    pub model: String,
    /// How many messages the request carried.
    pub message_count: usize,
}

impl ResponseContext {
    /// The context of a response to `request`.
    pub fn of(request: &ChatRequest) -> Self {
        ResponseContext {
            model: request.model.clone(),
            message_count: request.messages.len(),
        }
    }
}

/// A provider wire format.
///
/// `Send`, so that a run in flight can move between threads (an async host's tasks).
pub trait Adapter: Send {
    /// The adapter's name, used as `provenance` and in errors: `anthropic`, `openai`, `gemini`…
    fn name(&self) -> &str;
    /// Builds the HTTP request for one chat turn whose messages are validated: the conversion
    /// fails (e.g. `UnsupportedContentBlockError`) before anything exists to send.
    fn format_validated(
        &self,
        request: Validated<'_>,
        endpoint: &Endpoint,
    ) -> Result<HttpRequest, Error>;
    /// Builds the HTTP request for one chat turn no one has validated: validates the messages
    /// first ([`Validated::check`]) and fails before anything exists to send.
    fn format(&self, request: &ChatRequest, endpoint: &Endpoint) -> Result<HttpRequest, Error> {
        self.format_validated(Validated::check(request)?, endpoint)
    }
    /// Reads a successful (2xx) response body to the request `context` describes.
    fn parse(&self, context: &ResponseContext, body: &[u8]) -> Result<LlmResponse, Error>;
    /// The request that asks the provider to count the input tokens of a chat turn whose
    /// messages are validated, where it has a counter (Anthropic's `count_tokens`, Gemini's
    /// `countTokens`, Bedrock's `CountTokens`); `None` where it has none
    /// ([`estimate_input_tokens`] is the estimate then).
    fn format_count(
        &self,
        request: Validated<'_>,
        endpoint: &Endpoint,
    ) -> Option<Result<HttpRequest, Error>> {
        let _ = (request, endpoint);
        None
    }
    /// The count in a successful (2xx) answer to [`Adapter::format_count`]'s request.
    fn parse_count(&self, body: &[u8]) -> Result<u64, Error> {
        let _ = body;
        Err(malformed(self.name(), "the provider has no token counter"))
    }
    /// A decoder for the body of a streamed response to the request `context` describes.
    fn stream_decoder(&self, context: &ResponseContext) -> Box<dyn StreamDecoder>;
    /// What an error (non-2xx) answer says beyond its status: the provider's own message,
    /// code and type, and a wait it asks for in its body (`docs/errors.md#provider-error-codes`).
    /// `headers` have lowercase names.
    fn error_detail(&self, headers: &[(String, String)], body: &[u8]) -> ErrorDetail {
        let _ = (headers, body);
        ErrorDetail::default()
    }
    /// The retry policy a call gets when its options name none: the one the provider's SDK
    /// applies by default (`docs/errors.md#default-retry-policy`).
    fn default_retry(&self) -> crate::retry::RetryPolicy;
}

/// What a provider's error answer says, read by [`Adapter::error_detail`]. Every field is
/// optional: a body that is not the provider's error shape (an HTML page from a proxy) gives
/// none, and the error's message is then the start of the body.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ErrorDetail {
    /// The provider's message.
    pub message: Option<String>,
    /// The provider's error code as text (see [`Error::code`]).
    pub code: Option<String>,
    /// The provider's error type.
    pub error_type: Option<String>,
    /// The wait before a retry that the body asks for (Gemini's `RetryInfo.retryDelay`), in
    /// milliseconds.
    pub retry_delay_ms: Option<u64>,
}

impl ErrorDetail {
    /// The error of a failure this detail describes: a provider error with `status` and the
    /// provider's message (else `fallback`), code and type.
    pub fn into_error(self, provider: &str, status: Option<u16>, fallback: String) -> Error {
        Error::Provider {
            provider: provider.to_owned(),
            status,
            message: self.message.unwrap_or(fallback),
            code: self.code,
            error_type: self.error_type,
        }
    }
}

/// A code as text: a non-empty string as it is, an integer in decimal (OpenRouter sends its
/// codes as numbers), anything else (null, an object) none. OMA does the same
/// (`String(code)` for a string or a number).
pub fn code_text(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(text) if !text.is_empty() => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        _ => None,
    }
}

/// The detail of the common error object `{"message", "code", "type"}` (OpenAI-compatible
/// providers, the AI SDK bridge): a string `message`, `code` as [`code_text`], a string `type`.
pub fn error_object_detail(error: &Value) -> ErrorDetail {
    let text = |key: &str| match error.get(key) {
        Some(Value::String(text)) if !text.is_empty() => Some(text.clone()),
        _ => None,
    };
    ErrorDetail {
        message: text("message"),
        code: code_text(error.get("code")),
        error_type: text("type"),
        retry_delay_ms: None,
    }
}

/// What a format needs to make ids the provider does not send (Gemini): the caller's clock and
/// a random seed, since adapters read neither.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IdSource {
    /// Milliseconds since the Unix epoch.
    pub epoch_ms: u64,
    /// A random seed.
    pub seed: u64,
}

/// The adapter for a provider name: `anthropic`, `gemini`, `bedrock`, `ai-sdk`, an
/// OpenAI-compatible preset (`openai`, `minimax`, `deepseek`, `grok`, …), or, with a base URL,
/// any other name as an OpenAI-compatible server.
pub fn for_provider(
    provider: &str,
    base_url: Option<&str>,
    ids: IdSource,
) -> Result<Box<dyn Adapter>, Error> {
    Ok(match provider {
        anthropic::NAME => Box::new(anthropic::Anthropic),
        bedrock::NAME => Box::new(bedrock::Bedrock),
        gemini::NAME => Box::new(gemini::Gemini::with_ids(ids.epoch_ms, ids.seed)),
        ai_sdk::NAME => Box::new(ai_sdk::AiSdk),
        other => match (openai::preset(other), base_url) {
            (Some(preset), _) => Box::new(preset),
            (None, Some(base)) => Box::new(openai::OpenAi::compatible(other, base)),
            (None, None) => {
                return Err(Error::InvalidRequest {
                    message: format!(
                        "unknown provider {other:?}: use one of anthropic, gemini, bedrock, \
                         ai-sdk, {}, or give a base URL for an OpenAI-compatible server",
                        openai::PRESETS.join(", ")
                    ),
                })
            }
        },
    })
}

/// The most content blocks one streamed turn may open. A stream decoder refuses a turn with more
/// as a malformed response, so a crafted stream cannot make the accumulated state grow without
/// bound in the number of blocks.
pub const MAX_STREAM_BLOCKS: usize = 1024;

/// The most tool calls one streamed turn may carry; more is a malformed response.
pub const MAX_STREAM_TOOL_CALLS: usize = 256;

/// The error for a streamed turn with more than [`MAX_STREAM_BLOCKS`] content blocks.
pub fn too_many_blocks(provider: &str) -> Error {
    malformed(
        provider,
        format_args!("the stream has more than {MAX_STREAM_BLOCKS} content blocks"),
    )
}

/// The error for a streamed turn with more than [`MAX_STREAM_TOOL_CALLS`] tool calls.
pub fn too_many_tool_calls(provider: &str) -> Error {
    malformed(
        provider,
        format_args!("the stream has more than {MAX_STREAM_TOOL_CALLS} tool calls"),
    )
}

/// A provider response body that is not what the wire format promises.
pub fn malformed(provider: &str, what: impl std::fmt::Display) -> Error {
    Error::Provider {
        provider: provider.to_string(),
        status: None,
        message: format!("malformed {provider} response: {what}"),
        code: None,
        error_type: None,
    }
}

/// The longest model name a request's URL carries (Gemini, Bedrock), in bytes as it goes in the
/// path. Real ones (Bedrock's inference-profile ARNs among them) are a few hundred at most; a
/// longer one would make a URL that HTTP stacks refuse before it is sent (about 64 KiB for
/// most), which is the caller's mistake, not a provider's failure.
pub const MAX_MODEL_IN_PATH: usize = 1024;

/// Refuses a model name that would change the path of a request whose URL carries it (Gemini,
/// Bedrock): a `.` or `..` segment, or an empty one, would be resolved away by URL parsing and
/// send the request somewhere else on the provider's host; and one longer than
/// [`MAX_MODEL_IN_PATH`], which would make a URL no host sends.
pub fn check_model_in_path(model: &str) -> Result<(), Error> {
    if model.len() > MAX_MODEL_IN_PATH {
        return Err(Error::InvalidRequest {
            message: format!(
                "model is {} bytes long: a model in a request's URL path may be at most \
                 {MAX_MODEL_IN_PATH}",
                model.len()
            ),
        });
    }
    let escapes = model
        .split('/')
        .any(|segment| segment.is_empty() || segment == "." || segment == "..");
    if escapes {
        return Err(Error::InvalidRequest {
            message: format!(
                "model {:?} would change the request's path: a model in a URL must not be empty \
                 or hold `.`, `..` or empty path segments",
                model.chars().take(64).collect::<String>()
            ),
        });
    }
    Ok(())
}

/// Joins a base URL and a path with exactly one `/`.
pub fn join_url(base: &str, path: &str) -> String {
    format!(
        "{}/{}",
        base.trim_end_matches('/'),
        path.trim_start_matches('/')
    )
}

/// `YYYYMMDDTHHMMSSZ` for a Unix time in seconds: the form SigV4 signs (UTC).
pub fn amz_timestamp(unix_seconds: u64) -> String {
    let days = (unix_seconds / 86_400) as i64;
    let secs = unix_seconds % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_that_would_change_a_url_path_are_refused() {
        for model in [
            "..",
            ".",
            "",
            "models/../x",
            "a//b",
            "tunedModels/./x",
            "x/..",
        ] {
            let error = check_model_in_path(model).expect_err(model);
            assert!(error.to_string().contains("path"), "{error}");
        }
        for model in ["gemini-2.5-pro", "models/gemini-pro", "a.b:0", "..x", "x.."] {
            assert_eq!(check_model_in_path(model), Ok(()), "{model}");
        }
        // A model too long for any URL is the caller's mistake, refused before a request
        // exists (the stacks that would refuse the URL say so as a transport failure, which a
        // fallback chain would take for the provider's).
        let longest = "m".repeat(MAX_MODEL_IN_PATH);
        assert_eq!(check_model_in_path(&longest), Ok(()));
        let long = "m".repeat(100 * 1024);
        let error = check_model_in_path(&long).expect_err("too long");
        assert!(
            matches!(&error, Error::InvalidRequest { message } if message.contains("102400 bytes")),
            "{error}"
        );
        let request = ChatRequest {
            model: "../../admin".into(),
            messages: vec![crate::message::LlmMessage::user_text("hi")],
            ..ChatRequest::default()
        };
        for provider in ["gemini", "bedrock"] {
            let adapter = for_provider(provider, None, IdSource::default()).expect("known");
            let endpoint = Endpoint {
                region: Some("us-east-1".into()),
                credentials: Credentials::ApiKey("k".into()),
                ..Endpoint::default()
            };
            let refused = adapter.format(&request, &endpoint);
            if provider == "bedrock" {
                // Bedrock percent-encodes the slashes: the model stays one segment.
                let http = refused.expect("encoded");
                assert!(
                    http.url.contains("/model/..%2F..%2Fadmin/converse"),
                    "{}",
                    http.url
                );
            } else {
                assert!(refused.is_err(), "{provider}");
            }
        }
        let dots = ChatRequest {
            model: "..".into(),
            ..request
        };
        let adapter = for_provider("bedrock", None, IdSource::default()).expect("known");
        let endpoint = Endpoint {
            region: Some("us-east-1".into()),
            credentials: Credentials::ApiKey("k".into()),
            ..Endpoint::default()
        };
        assert!(adapter.format(&dots, &endpoint).is_err());
    }

    #[test]
    fn formats_without_cache_markers_refuse_them() {
        let request = ChatRequest {
            model: "m".into(),
            messages: vec![crate::message::LlmMessage::user_text("hi")],
            cache: vec![CacheMark {
                place: CachePlace::Block {
                    message: 0,
                    block: 0,
                },
                ttl: None,
            }],
            ..ChatRequest::default()
        };
        let endpoint = Endpoint {
            region: Some("us-east-1".into()),
            credentials: Credentials::ApiKey("k".into()),
            ..Endpoint::default()
        };
        for (provider, label) in [
            ("gemini", "Gemini generateContent"),
            ("openai", "OpenAI Chat Completions (openai)"),
            ("deepseek", "OpenAI Chat Completions (deepseek)"),
            ("ai-sdk", "AI SDK"),
        ] {
            let adapter = for_provider(provider, None, IdSource::default()).expect("known");
            let error = adapter.format(&request, &endpoint).expect_err(provider);
            assert_eq!(
                error.to_string(),
                format!(
                    "cache_control is not supported by {label}: its prompt caching takes no \
                     markers"
                ),
                "{provider}"
            );
        }
        for provider in ["anthropic", "bedrock"] {
            let adapter = for_provider(provider, None, IdSource::default()).expect("known");
            assert!(adapter.format(&request, &endpoint).is_ok(), "{provider}");
        }
    }

    #[test]
    fn token_counters_are_asked_where_providers_have_one() {
        let request = ChatRequest {
            model: "m-1".into(),
            system_prompt: Some("Be brief.".into()),
            messages: vec![crate::message::LlmMessage::user_text("hi")],
            tools: vec![ToolDefinition {
                name: "look".into(),
                description: "Looks".into(),
                input_schema: serde_json::json!({"type": "object"}),
            }],
            sampling: Sampling {
                max_tokens: Some(100),
                temperature: Some(0.5),
                ..Sampling::default()
            },
            stream: true,
            ..ChatRequest::default()
        };
        let endpoint = Endpoint {
            region: Some("us-east-1".into()),
            credentials: Credentials::ApiKey("k".into()),
            ..Endpoint::default()
        };
        let validated = Validated::check(&request).expect("valid");
        let count = |provider: &str| {
            let adapter = for_provider(provider, None, IdSource::default()).expect("known");
            adapter
                .format_count(validated, &endpoint)
                .map(|http| http.expect("formats"))
        };
        let body = |http: &HttpRequest| -> Value { serde_json::from_str(&http.body).unwrap() };
        let anthropic = count("anthropic").expect("a counter");
        assert_eq!(
            anthropic.url,
            "https://api.anthropic.com/v1/messages/count_tokens"
        );
        assert_eq!(
            body(&anthropic),
            serde_json::json!({"model": "m-1",
                "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
                "system": "Be brief.",
                "tools": [{"name": "look", "description": "Looks",
                           "input_schema": {"type": "object"}}]})
        );
        let gemini = count("gemini").expect("a counter");
        assert_eq!(
            gemini.url,
            "https://generativelanguage.googleapis.com/v1beta/models/m-1:countTokens"
        );
        let counted = body(&gemini);
        let inner = &counted["generateContentRequest"];
        assert_eq!(inner["model"], "models/m-1");
        assert_eq!(inner["contents"][0]["parts"][0]["text"], "hi");
        assert_eq!(inner["systemInstruction"]["parts"][0]["text"], "Be brief.");
        assert_eq!(inner["tools"][0]["functionDeclarations"][0]["name"], "look");
        assert!(inner.get("generationConfig").is_none() && inner.get("toolConfig").is_none());
        let bedrock = count("bedrock").expect("a counter");
        assert_eq!(
            bedrock.url,
            "https://bedrock-runtime.us-east-1.amazonaws.com/model/m-1/count-tokens"
        );
        assert_eq!(
            body(&bedrock),
            serde_json::json!({"input": {"converse": {
                "messages": [{"content": [{"text": "hi"}], "role": "user"}],
                "system": [{"text": "Be brief."}]}}})
        );
        for provider in ["openai", "deepseek", "ai-sdk"] {
            assert_eq!(count(provider), None, "{provider}");
        }
        // The answers.
        let parse = |provider: &str, body: &str| {
            for_provider(provider, None, IdSource::default())
                .expect("known")
                .parse_count(body.as_bytes())
        };
        assert_eq!(parse("anthropic", r#"{"input_tokens": 2095}"#), Ok(2095));
        assert_eq!(
            parse(
                "gemini",
                r#"{"totalTokens": 31, "cachedContentTokenCount": 0}"#
            ),
            Ok(31)
        );
        assert_eq!(parse("bedrock", r#"{"inputTokens": 12}"#), Ok(12));
        assert!(parse("anthropic", r#"{"tokens": 1}"#).is_err());
        assert!(parse("openai", r#"{"input_tokens": 1}"#).is_err());
    }

    #[test]
    fn estimates_count_a_token_per_four_bytes_and_flat_media() {
        let mut request = ChatRequest {
            system_prompt: Some("abcd".into()),
            messages: vec![crate::message::LlmMessage::user_text("12345678")],
            ..ChatRequest::default()
        };
        // 4 + 8 bytes: 3 tokens, and 4 for the message.
        assert_eq!(estimate_input_tokens(&request), 7);
        request.messages[0]
            .content
            .push(crate::message::ContentBlock::Image(
                crate::message::ImageBlock {
                    source: crate::message::MediaSource::Base64 {
                        media_type: "image/png".into(),
                        data: "AAAA".into(),
                    },
                },
            ));
        assert_eq!(estimate_input_tokens(&request), 1607);
    }

    #[test]
    fn amz_timestamps() {
        assert_eq!(amz_timestamp(0), "19700101T000000Z");
        assert_eq!(amz_timestamp(1_440_938_160), "20150830T123600Z");
        assert_eq!(amz_timestamp(1_796_036_400), "20261130T110000Z");
        assert_eq!(amz_timestamp(951_782_400), "20000229T000000Z");
    }

    #[test]
    fn credentials_never_show_in_debug_output() {
        let endpoint = Endpoint {
            credentials: Credentials::ApiKey("sk-secret".into()),
            ..Endpoint::default()
        };
        assert!(!format!("{endpoint:?}").contains("sk-secret"));
        let request = HttpRequest {
            headers: vec![
                ("x-api-key".into(), "sk-secret".into()),
                ("accept".into(), "a".into()),
            ],
            ..HttpRequest::post_json("https://x".into(), String::new())
        };
        assert_eq!(
            request.redacted_headers(),
            vec![
                ("x-api-key".to_string(), "[redacted]".to_string()),
                ("accept".to_string(), "a".to_string())
            ]
        );
    }
}
