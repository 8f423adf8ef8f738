//! `POST /v1/chat/completions`: OpenAI's Chat Completions API in front of every provider OMA
//! formats for. The request's `model` is `<provider>/<model>` (`anthropic/claude-sonnet-4-6`,
//! `openai/gpt-4o`, `minimax/MiniMax-M1`); its conversation becomes OMA's `LLMMessage[]` and
//! passes OMA's shape guard and validation before anything is sent, so that what OMA refuses is
//! a `400` in OpenAI's error shape (`{"error": {"message", "type", "param", "code"}}`) with OMA's
//! message, and content a provider's format cannot carry (a video to Anthropic, Gemini or
//! Bedrock) is a `400` with `UnsupportedContentBlockError` before any request.
//!
//! What the conversation maps to: `system` and `developer` messages to the system prompt; string
//! content or `text` parts to text blocks; an `image_url` data URL (`data:<type>;base64,<data>`)
//! to an inline image block; an `image_url` with any other URL to an image block by URL, under
//! the media rules of a video URL (an absolute http or https URL: a `file:` URL is a `400`),
//! which the provider fetches where its format takes an image URL (OpenAI-compatible ones,
//! Anthropic, Gemini) and which is a `400` with `UnsupportedContentBlockError` before any request
//! where it does not (Bedrock); a `video_url` (an http(s) URL or a data URL) to a video block,
//! under OMA's media rules; assistant `tool_calls` to tool-use blocks; `tool` messages to tool
//! results in a user turn. The gateway never fetches a client's URL itself.
//!
//! Answers are `chat.completion` objects with `usage`, or with `stream: true` OpenAI's chunk
//! stream (`chat.completion.chunk` events, the usage in a last chunk when
//! `stream_options.include_usage` is set, then `data: [DONE]`).

use serde_json::{json, Map, Value};

use oma_core::adapter::{ChatRequest, Sampling, StreamEvent, ToolDefinition};
use oma_core::error::Error;
use oma_core::json::writer::Writer as JsonWriter;
use oma_core::message::{ContentBlock, LlmResponse};

use crate::chat::{chat_request, ChatMachine, ChatMode, Target};
use crate::env::Settings;
use crate::fields::{ClientFields, Dialect};
use crate::Reply;
use crate::Route;

/// The OpenAI-shaped error reply: `status` and `{"error": {"message", "type", "param", "code"}}`.
pub fn error_reply(status: u16, kind: &str, code: Option<&str>, message: &str) -> Reply {
    Reply::json(
        status,
        &json!({ "error": {
            "message": message,
            "type": kind,
            "param": Value::Null,
            "code": code,
        }}),
    )
}

/// `400 invalid_request_error` with `message`.
fn invalid(message: impl Into<String>) -> Reply {
    error_reply(400, "invalid_request_error", None, &message.into())
}

/// An OMA error as the OpenAI-shaped reply (redacted of every configured secret): the input
/// classes are `400`, an unconfigured provider `403`, a provider's failure its own status
/// (`502` when it has none), a time-out `504`. The `code` is OMA's error name.
pub fn of_error(settings: &Settings, error: Error) -> Reply {
    let secrets = settings.all_secrets();
    let refs: Vec<&str> = secrets.iter().map(String::as_str).collect();
    let error = error.redact(&refs);
    let (status, kind) = match &error {
        Error::InvalidMessage { .. }
        | Error::UnsupportedContentBlock { .. }
        | Error::UnsupportedToolResultContent { .. }
        | Error::UnsupportedToolCall { .. }
        | Error::InvalidRequest { .. } => (400, "invalid_request_error"),
        Error::EgressDenied { .. } => (403, "permission_error"),
        Error::Timeout { .. } => (504, "timeout"),
        Error::Provider { status, .. } => match status {
            Some(429) => (429, "rate_limit_error"),
            Some(status @ 400..=499) => (*status, "invalid_request_error"),
            Some(status @ 500..=599) => (*status, "api_error"),
            _ => (502, "api_error"),
        },
        // `Error` is non-exhaustive: anything else is the gateway's own failure.
        _ => (500, "api_error"),
    };
    error_reply(status, kind, Some(error.name()), &error.to_string())
}

/// A parsed `/v1/chat/completions` or `/v1/messages` request: the machine to drive and how to
/// answer.
#[derive(Debug)]
pub struct Completion {
    /// The provider calls, with fallbacks.
    pub machine: ChatMachine,
    /// How the answer is written.
    pub writer: Writer,
}

/// How a chat request's answer is written: in OpenAI's shapes or in Anthropic's.
#[derive(Clone, Debug)]
pub enum Writer {
    /// `/v1/chat/completions`.
    OpenAi(ChunkWriter),
    /// `/v1/messages`.
    Anthropic(crate::anthropic::MessageWriter),
}

impl Writer {
    /// Whether the answer is a stream of server-sent events.
    pub fn stream(&self) -> bool {
        match self {
            Writer::OpenAi(w) => w.stream,
            Writer::Anthropic(w) => w.stream,
        }
    }

    /// The server-sent text of a piece of a streamed answer (may be empty).
    pub fn event(&mut self, event: &StreamEvent) -> String {
        match self {
            Writer::OpenAi(w) => w.event(event),
            Writer::Anthropic(w) => w.event(event),
        }
    }

    /// Whether the stream's first event (Anthropic's `message_start`, OpenAI's chunk with the
    /// role) was written.
    pub fn started(&self) -> bool {
        match self {
            Writer::OpenAi(w) => w.started,
            Writer::Anthropic(w) => w.started(),
        }
    }

    /// The stream's first event, written as soon as the provider's streamed answer began,
    /// before any piece of it; empty once it was written.
    pub fn begin(&mut self) -> String {
        match self {
            Writer::OpenAi(w) => w.begin(),
            Writer::Anthropic(w) => w.begin(),
        }
    }

    /// The whole answer of `response`, answered by `target`.
    pub fn whole(&self, response: &LlmResponse, target: &Target) -> Reply {
        match self {
            Writer::OpenAi(w) => w.completion(response, target),
            Writer::Anthropic(w) => w.whole(response, target),
        }
    }

    /// The end of a stream that `target` answered.
    pub fn end(&mut self, response: &LlmResponse, target: &Target) -> String {
        match self {
            Writer::OpenAi(w) => w.end(response, target),
            Writer::Anthropic(w) => w.end(response, target),
        }
    }

    /// The end of a stream that failed after it began, with `reply` (from [`Writer::error`]).
    pub fn failed(&self, reply: &Reply) -> String {
        match self {
            Writer::OpenAi(w) => w.failed(reply),
            Writer::Anthropic(w) => w.failed(reply),
        }
    }

    /// `error` as the route's error reply.
    pub fn error(&self, settings: &Settings, error: Error) -> Reply {
        match self {
            Writer::OpenAi(_) => of_error(settings, error),
            Writer::Anthropic(_) => crate::anthropic::of_error(settings, error),
        }
    }
}

/// Writes the answer: the whole `chat.completion`, or the chunks of a stream.
#[derive(Clone, Debug)]
pub struct ChunkWriter {
    id: String,
    created: u64,
    /// The model as requested, until one answers.
    requested: String,
    /// Whether the request asked for a stream.
    pub stream: bool,
    include_usage: bool,
    /// How many tool calls were streamed.
    tool_calls: usize,
    started: bool,
}

/// The request's fields the route reads into OMA's request, and the others, which the field
/// table ([`crate::fields`]) decides per target.
fn read_request(
    settings: &Settings,
    body: &[u8],
) -> Result<(Target, ChatRequest, ClientFields, Read), Reply> {
    let value: Value = oma_core::json::from_bytes(body)
        .map_err(|e| invalid(format!("the request body is not JSON: {e}")))?;
    let Value::Object(mut o) = value else {
        return Err(invalid("the request body must be a JSON object"));
    };
    let model = match o.remove("model") {
        Some(Value::String(model)) => model,
        _ => {
            return Err(invalid(
                "`model` is required: a string `<provider>/<model>`",
            ))
        }
    };
    let target = Target::parse(&model).ok_or_else(|| {
        invalid(format!(
            "`model` must be `<provider>/<model>` (e.g. `anthropic/claude-sonnet-4-6`), not {}",
            redacted_quote(settings, &model)
        ))
    })?;
    let number = |o: &Map<String, Value>, name: &str| -> Result<Option<f64>, Reply> {
        match o.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => Ok(n.as_f64()),
            Some(_) => Err(invalid(format!("`{name}` must be a number"))),
        }
    };
    let tokens = match (
        number(&o, "max_completion_tokens")?,
        number(&o, "max_tokens")?,
    ) {
        (Some(n), _) | (None, Some(n)) => Some(
            u32::try_from(n as u64)
                .ok()
                .filter(|_| n >= 1.0 && n.fract() == 0.0)
                .ok_or_else(|| invalid("`max_tokens` must be a positive whole number"))?,
        ),
        (None, None) => None,
    };
    let sampling = Sampling {
        max_tokens: tokens,
        temperature: number(&o, "temperature")?,
        top_p: number(&o, "top_p")?,
        ..Sampling::default()
    };
    let stream = matches!(o.get("stream"), Some(Value::Bool(true)));
    let include_usage = o
        .get("stream_options")
        .and_then(|s| s.get("include_usage"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    // The members of messages, parts and tools the route does not read, for the field table.
    let nested = crate::nested::chat(
        o.get("messages")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice),
        o.get("tools"),
    );
    let tools = tools_of(o.remove("tools"))?;
    let messages = match o.remove("messages") {
        Some(Value::Array(messages)) if !messages.is_empty() => messages,
        _ => return Err(invalid("`messages` is required: a non-empty array")),
    };
    let as_written = sent_as_written(&messages);
    let (system, conversation) = conversation(messages)?;
    // OMA's shape guard and validation, with OMA's messages.
    let request = chat_request(&target, system, conversation, tools, sampling, stream)
        .map_err(|e| of_error(settings, e))?;
    // The rest is the field table's, per target.
    let fields = ClientFields {
        route: Route::ChatCompletions,
        values: o,
        nested,
    };
    let read = Read {
        stream,
        include_usage,
        as_written,
    };
    Ok((target, request, fields, read))
}

/// What [`read_request`] found beside the request and its fields.
struct Read {
    /// Whether the answer is streamed.
    stream: bool,
    /// Whether the client asked for the usage in a last chunk.
    include_usage: bool,
    /// Whether an OpenAI-compatible target can be sent the request as written
    /// ([`sent_as_written`]).
    as_written: bool,
}

/// Whether an OpenAI-compatible target can be sent the client's `messages` as written: every
/// part the route reads is in the form OpenAI's own API takes. Two forms the route takes
/// besides (as LiteLLM does) are not: image and file parts in a `tool` message (OpenAI's tool
/// messages hold text; OMA's format carries such a result's media in a user message after
/// it) and a media part whose URL is a string instead of `{"url"}`. A request holding either is
/// rebuilt from OMA's request for every target.
pub fn sent_as_written(messages: &[Value]) -> bool {
    messages.iter().all(|message| {
        let Some(Value::Array(parts)) = message.get("content") else {
            return true;
        };
        let tool = message.get("role").and_then(Value::as_str) == Some("tool");
        parts.iter().all(|part| {
            let kind = part.get("type").and_then(Value::as_str).unwrap_or("");
            match kind {
                "text" => true,
                _ if tool => false,
                "image_url" | "video_url" => part.get(kind).is_some_and(Value::is_object),
                _ => true,
            }
        })
    })
}

/// The client's own `/v1/chat/completions` request, which an OpenAI-compatible target (the
/// requested one or a fallback) is sent as written, as an Anthropic target of `/v1/messages`
/// is sent the client's Anthropic request: the same dialect, so every field the client wrote,
/// nested ones included, reaches the provider with its meaning. The gateway writes what is its
/// own ([`OwnRequest::body`]): the model, `stream`, and the usage a stream must report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnRequest {
    /// The body as the client sent it (JSON text).
    text: String,
    /// Each top-level member: its name and where its value is in `text`.
    members: Vec<(String, std::ops::Range<usize>)>,
}

impl OwnRequest {
    /// The top-level members of `body` (a JSON object, already read by the route). A name
    /// given twice is refused: which value a provider would read is not for the gateway to
    /// guess, and the gateway has checked the last one only.
    fn parse(body: &[u8]) -> Result<OwnRequest, Reply> {
        use serde::de::{Deserializer, MapAccess, Visitor};
        use serde_json::value::RawValue;
        struct Members;
        impl<'de> Visitor<'de> for Members {
            type Value = Vec<(String, &'de RawValue)>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::new();
                while let Some(name) = map.next_key::<String>()? {
                    members.push((name, map.next_value::<&'de RawValue>()?));
                }
                Ok(members)
            }
        }
        let text = std::str::from_utf8(body)
            .map_err(|e| invalid(format!("the request body is not JSON: {e}")))?;
        let mut reader = serde_json::Deserializer::from_str(text);
        let raw = reader
            .deserialize_map(Members)
            .and_then(|members| reader.end().map(|()| members))
            .map_err(|e| invalid(format!("the request body is not JSON: {e}")))?;
        let start = text.as_ptr() as usize;
        let mut members: Vec<(String, std::ops::Range<usize>)> = Vec::with_capacity(raw.len());
        for (name, value) in raw {
            if members.iter().any(|(seen, _)| *seen == name) {
                return Err(invalid(format!(
                    "`{}` is given twice in the request",
                    name.chars().take(100).collect::<String>()
                )));
            }
            let value = value.get();
            let at =
                (value.as_ptr() as usize - start)..(value.as_ptr() as usize - start + value.len());
            members.push((name, at));
        }
        Ok(OwnRequest {
            text: text.to_owned(),
            members,
        })
    }

    /// The body an OpenAI-compatible target is sent: the client's members in its order, each
    /// value byte for byte, but `model` (the target's `model`), `stream` (`stream`, as the
    /// route read it) and, in a stream, `stream_options` with `include_usage: true` (the
    /// per-token limits and the traces count a stream's usage, and the answer leaves it out
    /// when the client did not ask for it); the fields in `dropped` (as
    /// `OMA_GATEWAY_DROP_PARAMS` allowed) are left out.
    pub fn body(&self, model: &str, stream: bool, dropped: &[String]) -> String {
        let mut out = String::with_capacity(self.text.len() + model.len() + 64);
        out.push('{');
        let mut usage = false;
        for (name, at) in &self.members {
            if dropped.contains(name) {
                continue;
            }
            if out.len() > 1 {
                out.push(',');
            }
            out.push_str(&Value::from(name.as_str()).to_string());
            out.push(':');
            match name.as_str() {
                "model" => out.push_str(&Value::from(model).to_string()),
                "stream" => out.push_str(if stream { "true" } else { "false" }),
                "stream_options" if stream => {
                    let mut options = match serde_json::from_str(&self.text[at.clone()]) {
                        Ok(Value::Object(options)) => options,
                        _ => Map::new(),
                    };
                    options.insert("include_usage".into(), Value::Bool(true));
                    out.push_str(&Value::Object(options).to_string());
                    usage = true;
                }
                _ => out.push_str(&self.text[at.clone()]),
            }
        }
        if stream && !usage {
            if out.len() > 1 {
                out.push(',');
            }
            out.push_str(r#""stream_options":{"include_usage":true}"#);
        }
        out.push('}');
        out
    }
}

/// `model` quoted for a message, with any configured secret in it redacted.
fn redacted_quote(settings: &Settings, text: &str) -> String {
    let mut quoted = format!("{:?}", text.chars().take(200).collect::<String>());
    for secret in settings.all_secrets() {
        if !secret.is_empty() {
            quoted = quoted.replace(&secret, "[redacted]");
        }
    }
    quoted
}

/// OpenAI's `tools` (`[{"type": "function", "function": {name, description, parameters}}]`).
fn tools_of(tools: Option<Value>) -> Result<Vec<ToolDefinition>, Reply> {
    let tools = match tools {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(tools)) => tools,
        Some(_) => return Err(invalid("`tools` must be an array")),
    };
    tools
        .into_iter()
        .enumerate()
        .map(|(i, mut tool)| {
            let function_tool = tool.get("type").and_then(Value::as_str) == Some("function");
            // Taken out of the tool, not copied: its parameters' schema may be large.
            let mut function = tool
                .get_mut("function")
                .map(Value::take)
                .filter(|_| function_tool)
                .ok_or_else(|| invalid(format!("tools[{i}] must be a `function` tool")))?;
            let name = function
                .get("name")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .ok_or_else(|| invalid(format!("tools[{i}].function.name is required")))?;
            Ok(ToolDefinition {
                name: name.to_owned(),
                description: function
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
                input_schema: function
                    .get_mut("parameters")
                    .map(Value::take)
                    .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
            })
        })
        .collect()
}

/// The system prompt and the OMA message list (JSON, for OMA's shape guard) of OpenAI messages.
fn conversation(messages: Vec<Value>) -> Result<(Option<String>, Value), Reply> {
    let mut system: Vec<String> = Vec::new();
    let mut out: Vec<Value> = Vec::new();
    // Consecutive tool results travel in one user turn.
    let mut results: Vec<Value> = Vec::new();
    let flush = |results: &mut Vec<Value>, out: &mut Vec<Value>| {
        if !results.is_empty() {
            let results = Value::Array(std::mem::take(results));
            out.push(object([("role", "user".into()), ("content", results)]));
        }
    };
    for (i, mut message) in messages.into_iter().enumerate() {
        // Taken out of the message, not copied: it may hold megabytes of media.
        let content = message
            .get_mut("content")
            .map(Value::take)
            .unwrap_or(Value::Null);
        let role = message.get("role").and_then(Value::as_str).unwrap_or("");
        match role {
            "system" | "developer" => system.push(text_of(&content, i)?),
            "tool" => {
                let id = message
                    .get("tool_call_id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| invalid(format!("messages[{i}].tool_call_id is required")))?;
                results.push(object([
                    ("type", "tool_result".into()),
                    ("tool_use_id", id.into()),
                    ("content", tool_content(content, i)?),
                ]));
            }
            "user" => {
                flush(&mut results, &mut out);
                let blocks = Value::Array(blocks_of(content, i)?);
                out.push(object([("role", "user".into()), ("content", blocks)]));
            }
            "assistant" => {
                flush(&mut results, &mut out);
                let mut blocks = match content {
                    Value::Null => Vec::new(),
                    content => blocks_of(content, i)?,
                };
                if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
                    for (j, call) in calls.iter().enumerate() {
                        let function = call.get("function").unwrap_or(&Value::Null);
                        let name = function.get("name").and_then(Value::as_str);
                        let id = call.get("id").and_then(Value::as_str);
                        let (Some(name), Some(id)) = (name, id) else {
                            return Err(invalid(format!(
                                "messages[{i}].tool_calls[{j}] needs an id and a function name"
                            )));
                        };
                        let arguments = function
                            .get("arguments")
                            .and_then(Value::as_str)
                            .unwrap_or("{}");
                        let input: Value =
                            oma_core::json::parse_value(arguments).map_err(|_| {
                                invalid(format!(
                                    "messages[{i}].tool_calls[{j}].function.arguments is not JSON"
                                ))
                            })?;
                        blocks.push(object([
                            ("type", "tool_use".into()),
                            ("id", id.into()),
                            ("name", name.into()),
                            ("input", input),
                        ]));
                    }
                }
                let blocks = Value::Array(blocks);
                out.push(object([("role", "assistant".into()), ("content", blocks)]));
            }
            other => {
                return Err(invalid(format!(
                    "messages[{i}].role must be system, developer, user, assistant or tool, not \
                     {:?}",
                    other.chars().take(40).collect::<String>()
                )))
            }
        }
    }
    flush(&mut results, &mut out);
    let system = (!system.is_empty()).then(|| system.join("\n\n"));
    Ok((system, Value::Array(out)))
}

/// The content of a `tool` message as OMA's tool-result content: its text when it is a string
/// or `text` parts only; otherwise OMA's rich parts, for the parts LiteLLM and others carry in a
/// tool message besides OpenAI's text: `image_url` (a data URL inline, another URL by
/// reference) and `file` (`file_data`, a data URL, with its `filename`), under OMA's media rules.
fn tool_content(content: Value, i: usize) -> Result<Value, Reply> {
    let parts = match content {
        Value::Array(parts) if parts.iter().any(|p| p.get("type") != Some(&json!("text"))) => parts,
        content => return Ok(Value::String(text_of(&content, i)?)),
    };
    let source = |url: String, media_type: &dyn Fn(&str) -> String| match data_url(url) {
        Ok((media_type, data)) => base64(media_type, data),
        Err(url) => by_url(&media_type(&url), url),
    };
    parts
        .into_iter()
        .enumerate()
        .map(|(j, part)| {
            // Where the part is, for an error only (not written out for every part).
            let at = || format!("messages[{i}].content[{j}]");
            match part.get("type").and_then(Value::as_str).unwrap_or("") {
                "text" => Ok(object([
                    ("type", "text".into()),
                    ("text", part.get("text").cloned().unwrap_or(Value::Null)),
                ])),
                "image_url" => {
                    let url = part
                        .get("image_url")
                        .and_then(|u| u.get("url").or(Some(u)))
                        .and_then(Value::as_str)
                        .ok_or_else(|| invalid(format!("{}.image_url.url is required", at())))?;
                    let media_type = |url: &str| image_type(url).to_owned();
                    let source = source(url.to_owned(), &media_type);
                    Ok(object([("type", "image".into()), ("source", source)]))
                }
                "file" => {
                    let file = part.get("file").unwrap_or(&Value::Null);
                    let data = file
                        .get("file_data")
                        .and_then(Value::as_str)
                        .ok_or_else(|| invalid(format!("{}.file.file_data is required", at())))?;
                    let filename = file
                        .get("filename")
                        .and_then(Value::as_str)
                        .unwrap_or("file");
                    let media_type = |_: &str| "application/octet-stream".to_owned();
                    Ok(object([
                        ("type", "file".into()),
                        ("filename", filename.into()),
                        ("source", source(data.to_owned(), &media_type)),
                    ]))
                }
                other => Err(invalid(format!(
                    "{}.type {:?} is not supported in a tool message: the gateway takes \
                     text, image_url and file parts there",
                    at(),
                    other.chars().take(40).collect::<String>()
                ))),
            }
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Value::Array)
}

/// A JSON object of `members`, in their order, each value moved in: `json!` serialises every
/// value it is given again, a deep copy of a tool result's content or of a data URL's megabytes.
fn object<const N: usize>(members: [(&str, Value); N]) -> Value {
    Value::Object(
        members
            .into_iter()
            .map(|(name, value)| (name.to_owned(), value))
            .collect(),
    )
}

/// An OMA `image` or `video` block (`kind`) of `source`.
fn media(kind: &str, source: Value) -> Value {
    object([("type", kind.into()), ("source", source)])
}

/// A `base64` media source, its text moved in.
fn base64(media_type: String, data: String) -> Value {
    object([
        ("type", "base64".into()),
        ("media_type", media_type.into()),
        ("data", data.into()),
    ])
}

/// A `url` media source.
fn by_url(media_type: &str, url: String) -> Value {
    object([
        ("type", "url".into()),
        ("media_type", media_type.into()),
        ("url", url.into()),
    ])
}

/// The text of a `system`, `developer` or `tool` message: a string or `text` parts.
fn text_of(content: &Value, i: usize) -> Result<String, Reply> {
    match content {
        Value::String(text) => Ok(text.clone()),
        Value::Array(parts) => parts
            .iter()
            .map(|part| {
                part.get("text")
                    .and_then(Value::as_str)
                    .filter(|_| part.get("type").and_then(Value::as_str) == Some("text"))
                    .ok_or_else(|| invalid(format!("messages[{i}] may hold text parts only")))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(|texts| texts.concat()),
        _ => Err(invalid(format!(
            "messages[{i}].content must be a string or an array of parts"
        ))),
    }
}

/// OMA blocks (JSON) of a user or assistant message's content.
fn blocks_of(content: Value, i: usize) -> Result<Vec<Value>, Reply> {
    let parts = match content {
        Value::String(text) => {
            return Ok(vec![object([
                ("type", "text".into()),
                ("text", text.into()),
            ])])
        }
        Value::Array(parts) => parts,
        _ => {
            return Err(invalid(format!(
                "messages[{i}].content must be a string or an array of parts"
            )))
        }
    };
    parts
        .into_iter()
        .enumerate()
        .map(|(j, mut part)| {
            let kind = part
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            // The URL is taken out of the part, not copied: a data URL may be megabytes.
            let mut url = |key: &str| {
                let holder = part.get_mut(key);
                let slot = match holder {
                    Some(holder) if holder.is_object() => holder.get_mut("url"),
                    other => other,
                };
                match slot.map(Value::take) {
                    Some(Value::String(url)) => Ok(url),
                    _ => Err(invalid(format!(
                        "messages[{i}].content[{j}].{key}.url is required"
                    ))),
                }
            };
            match kind.as_str() {
                "text" => Ok(object([
                    ("type", "text".into()),
                    (
                        "text",
                        part.get_mut("text").map(Value::take).unwrap_or(Value::Null),
                    ),
                ])),
                "image_url" => {
                    let url = url("image_url")?;
                    Ok(match data_url(url) {
                        Ok((media_type, data)) => media("image", base64(media_type, data)),
                        // The media rules check the URL (absolute http or https), as a video's.
                        Err(url) => media("image", by_url(image_type(&url), url)),
                    })
                }
                "video_url" => {
                    let url = url("video_url")?;
                    Ok(match data_url(url) {
                        Ok((media_type, data)) => media("video", base64(media_type, data)),
                        // OMA's media rules check the URL (absolute http or https).
                        Err(url) => media("video", by_url(video_type(&url), url)),
                    })
                }
                other => Err(invalid(format!(
                    "messages[{i}].content[{j}].type {:?} is not supported: the gateway takes \
                     text, image_url and video_url parts",
                    other.chars().take(40).collect::<String>()
                ))),
            }
        })
        .collect()
}

/// The media type and base64 text of a `data:<type>;base64,<data>` URL, as given (OMA's media
/// rules judge them), or the URL back when it is no such data URL. The text stays in the URL's
/// own buffer, moved to its front: no copy of megabytes of media.
fn data_url(mut url: String) -> Result<(String, String), String> {
    let parts = url.strip_prefix("data:").and_then(|rest| {
        let (head, _) = rest.split_once(',')?;
        let media_type = head.strip_suffix(";base64")?;
        Some((media_type.to_owned(), "data:".len() + head.len() + 1))
    });
    let Some((media_type, start)) = parts else {
        return Err(url);
    };
    url.drain(..start);
    Ok((media_type, url))
}

/// The lower-cased extension of a URL's path (after its last dot), without query or fragment.
fn extension(url: &str) -> String {
    let path = url.split(['?', '#']).next().unwrap_or("");
    path.rsplit('.').next().unwrap_or("").to_ascii_lowercase()
}

/// An image URL's media type, from its extension (`image/jpeg` when it names none the gateway
/// knows). OpenAI's and Anthropic's formats send only the URL; Gemini's `fileData` sends the
/// type with it.
pub(crate) fn image_type(url: &str) -> &'static str {
    match extension(url).as_str() {
        "png" => "image/png",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "heic" => "image/heic",
        "heif" => "image/heif",
        _ => "image/jpeg",
    }
}

/// A video URL's media type, from its extension (`video/mp4` when it names none the gateway
/// knows).
fn video_type(url: &str) -> &'static str {
    match extension(url).as_str() {
        "webm" => "video/webm",
        "mov" => "video/quicktime",
        "mpeg" | "mpg" => "video/mpeg",
        "avi" => "video/x-msvideo",
        "3gp" => "video/3gpp",
        _ => "video/mp4",
    }
}

/// `POST /v1/chat/completions`: the provider calls to make and how to answer, or the refusal
/// (`400` for what OMA or the gateway refuses, `403` for a provider the configuration does not
/// name), before anything is sent.
pub fn start(
    settings: &Settings,
    body: &[u8],
    now_ms: u64,
    seed: u64,
) -> Result<Completion, Reply> {
    let (target, request, fields, read) = read_request(settings, body)?;
    let Read {
        stream,
        include_usage,
        as_written,
    } = read;
    let requested = target.label();
    let mut targets = vec![target];
    targets.extend(settings.fallbacks_for(&requested));
    // An OpenAI-compatible target is sent the client's own request, when it can take it as
    // written; the others OMA's request read from it.
    let own = as_written
        && targets
            .iter()
            .any(|t| Dialect::of(&t.provider) == Some(Dialect::OpenAi));
    let mode = ChatMode {
        fields: Some(fields),
        openai: own.then(|| OwnRequest::parse(body)).transpose()?,
        ..ChatMode::default()
    };
    let machine = ChatMachine::with_mode(settings, request, targets, mode, now_ms, seed)
        .map_err(|e| of_error(settings, e))?;
    Ok(Completion {
        machine,
        writer: Writer::OpenAi(ChunkWriter {
            id: format!("chatcmpl-{seed:016x}"),
            created: now_ms / 1000,
            requested,
            stream,
            include_usage,
            tool_calls: 0,
            started: false,
        }),
    })
}

/// `GET /v1/models`: OpenAI's list of the models the configuration names ([`model_ids`]).
pub fn models(settings: &Settings) -> Reply {
    let data: Vec<Value> = model_ids(settings)
        .iter()
        .map(|id| {
            let owner = id.split('/').next().unwrap_or_default();
            json!({"id": id, "object": "model", "created": 0, "owned_by": owner})
        })
        .collect();
    Reply::json(200, &json!({"object": "list", "data": data}))
}

/// The models `/v1/models` lists: those the configuration names (`OMA_GATEWAY_MODELS`, and the
/// models of `OMA_GATEWAY_FALLBACKS`), each `<provider>/<model>` of a provider the
/// configuration can reach, in the order first named.
pub fn model_ids(settings: &Settings) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    let named = settings
        .models
        .iter()
        .cloned()
        .chain(settings.fallbacks.iter().flat_map(|(requested, targets)| {
            Target::parse(requested)
                .into_iter()
                .chain(targets.iter().cloned())
        }));
    for target in named {
        let reachable =
            settings.egress.is_some() || settings.provider(&target.provider).configured();
        let id = target.label();
        if reachable && !ids.contains(&id) {
            ids.push(id);
        }
    }
    ids
}

/// OpenAI's `finish_reason` for OMA's `stop_reason`.
fn finish_reason(stop_reason: &str) -> &'static str {
    match stop_reason {
        "tool_use" => "tool_calls",
        "max_tokens" => "length",
        "content_filter" => "content_filter",
        _ => "stop",
    }
}

/// OpenAI's `usage`: its prompt tokens count the prompt cache's too (Anthropic's and Bedrock's
/// input count leaves them out), and the tokens read from the cache (whoever counted them) are
/// `prompt_tokens_details.cached_tokens` when a cache was used.
fn usage_json(response: &LlmResponse) -> Value {
    let usage = &response.usage;
    let cached = usage.cache_read();
    let input = usage.all_input();
    let output = usage.output_tokens;
    let mut json = json!({
        "prompt_tokens": input,
        "completion_tokens": output,
        "total_tokens": input.saturating_add(output),
    });
    if cached > 0 || usage.cache_creation_input_tokens > 0 {
        json["prompt_tokens_details"] = json!({"cached_tokens": cached});
    }
    json
}

fn tool_call_json(index: Option<usize>, id: &str, name: &str, input: &Value) -> Value {
    let mut call = json!({
        "id": id,
        "type": "function",
        "function": {"name": name, "arguments": input.to_string()},
    });
    if let Some(index) = index {
        call["index"] = json!(index);
    }
    call
}

impl ChunkWriter {
    /// The whole `chat.completion` of `response`, answered by `target`: written straight to
    /// its text (no `Value` tree, whose objects hash every key and are then written and
    /// dropped), byte for byte as `serde_json` writes the same object.
    pub fn completion(&self, response: &LlmResponse, target: &Target) -> Reply {
        let mut text = String::new();
        let mut has_calls = false;
        for block in &response.content {
            match block {
                ContentBlock::Text(t) => text.push_str(&t.text),
                ContentBlock::ToolUse(_) => has_calls = true,
                _ => {}
            }
        }
        let mut w = JsonWriter::with_capacity(256 + text.len());
        w.begin_object();
        w.field_str("id", &self.id);
        w.field_str("object", "chat.completion");
        w.key("created");
        w.u64(self.created);
        w.field_str("model", &answered_model(response, target));
        w.key("choices");
        w.begin_array();
        w.begin_object();
        w.key("index");
        w.u64(0);
        w.key("message");
        w.begin_object();
        w.field_str("role", "assistant");
        w.key("content");
        if text.is_empty() && has_calls {
            w.null();
        } else {
            w.string(&text);
        }
        if has_calls {
            w.key("tool_calls");
            w.begin_array();
            for block in &response.content {
                if let ContentBlock::ToolUse(call) = block {
                    w.json(&tool_call_json(None, &call.id, &call.name, &call.input));
                }
            }
            w.end_array();
        }
        w.end_object();
        w.field_str("finish_reason", finish_reason(&response.stop_reason));
        w.end_object();
        w.end_array();
        w.key("usage");
        w.json(&usage_json(response));
        w.end_object();
        Reply {
            status: 200,
            headers: Vec::new(),
            body: w.finish(),
        }
    }

    /// One server-sent `chat.completion.chunk`, written straight to its text as
    /// [`ChunkWriter::completion`] is.
    fn chunk(&self, model: &str, delta: Value, finish: Option<&str>) -> String {
        let mut w = JsonWriter::with_capacity(160);
        w.begin_object();
        w.field_str("id", &self.id);
        w.field_str("object", "chat.completion.chunk");
        w.key("created");
        w.u64(self.created);
        w.field_str("model", model);
        w.key("choices");
        w.begin_array();
        w.begin_object();
        w.key("index");
        w.u64(0);
        w.key("delta");
        w.json(&delta);
        w.key("finish_reason");
        match finish {
            Some(finish) => w.string(finish),
            None => w.null(),
        }
        w.end_object();
        w.end_array();
        w.end_object();
        let json = w.finish();
        let mut event = String::with_capacity(json.len() + 8);
        event.push_str("data: ");
        event.push_str(&json);
        event.push_str("\n\n");
        event
    }

    /// The stream's first chunk: the role, with an empty content, as OpenAI's stream begins;
    /// empty once it was written.
    pub fn begin(&mut self) -> String {
        if self.started {
            return String::new();
        }
        self.started = true;
        let role = json!({"role": "assistant", "content": ""});
        self.chunk(&self.requested, role, None)
    }

    /// The server-sent text of a piece of a streamed answer (empty for what OpenAI's stream has
    /// no place for: reasoning).
    pub fn event(&mut self, event: &StreamEvent) -> String {
        let mut out = String::new();
        if matches!(
            event,
            StreamEvent::Usage(_)
                | StreamEvent::ReasoningSignature(_)
                | StreamEvent::RedactedReasoning(_)
        ) {
            // Nothing to write, and nothing has begun: the stream's start waits for a piece.
            return out;
        }
        out.push_str(&self.begin());
        match event {
            StreamEvent::Text(text) => {
                out.push_str(&self.chunk(&self.requested, json!({"content": text}), None))
            }
            StreamEvent::ToolUse(call) => {
                let index = self.tool_calls;
                self.tool_calls += 1;
                let delta = json!({"tool_calls": [
                    tool_call_json(Some(index), &call.id, &call.name, &call.input)
                ]});
                out.push_str(&self.chunk(&self.requested, delta, None));
            }
            StreamEvent::Reasoning(_)
            | StreamEvent::ReasoningSignature(_)
            | StreamEvent::RedactedReasoning(_)
            | StreamEvent::Usage(_)
            | StreamEvent::Done(_) => {}
        }
        out
    }

    /// The end of a stream that `target` answered: the last chunk with the finish reason, the
    /// usage chunk when asked for, and `data: [DONE]`.
    pub fn end(&mut self, response: &LlmResponse, target: &Target) -> String {
        let model = answered_model(response, target);
        let mut out = String::new();
        if !self.started {
            self.started = true;
            let role = json!({"role": "assistant", "content": ""});
            out.push_str(&self.chunk(&model, role, None));
        }
        let finish = finish_reason(&response.stop_reason);
        out.push_str(&self.chunk(&model, json!({}), Some(finish)));
        if self.include_usage {
            let chunk = json!({
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": model,
                "choices": [],
                "usage": usage_json(response),
            });
            out.push_str(&format!("data: {chunk}\n\n"));
        }
        out.push_str("data: [DONE]\n\n");
        out
    }

    /// The end of a stream that failed after it began: the error as an event (what OpenAI's
    /// clients raise), then `data: [DONE]`.
    pub fn failed(&self, reply: &Reply) -> String {
        format!("data: {}\n\ndata: [DONE]\n\n", reply.body)
    }
}

/// The `model` of an answer: `<provider>/<model>` of the target that answered, with the model
/// as the provider named it.
fn answered_model(response: &LlmResponse, target: &Target) -> String {
    let model = if response.model.is_empty() {
        &target.model
    } else {
        &response.model
    };
    format!("{}/{model}", target.provider)
}

#[cfg(test)]
mod completion_tests {
    use super::*;

    /// The answer as a `Value` tree, written by `serde_json`: what the writer must equal.
    fn as_value_tree(writer: &ChunkWriter, response: &LlmResponse, target: &Target) -> String {
        let mut text = String::new();
        let mut calls = Vec::new();
        for block in &response.content {
            match block {
                ContentBlock::Text(t) => text.push_str(&t.text),
                ContentBlock::ToolUse(call) => {
                    calls.push(tool_call_json(None, &call.id, &call.name, &call.input))
                }
                _ => {}
            }
        }
        let mut message = json!({
            "role": "assistant",
            "content": if text.is_empty() && !calls.is_empty() { Value::Null } else { json!(text) },
        });
        if !calls.is_empty() {
            message["tool_calls"] = Value::Array(calls);
        }
        json!({
            "id": writer.id,
            "object": "chat.completion",
            "created": writer.created,
            "model": answered_model(response, target),
            "choices": [{
                "index": 0,
                "message": message,
                "finish_reason": finish_reason(&response.stop_reason),
            }],
            "usage": usage_json(response),
        })
        .to_string()
    }

    #[test]
    fn a_completion_is_written_as_serde_json_writes_its_tree() {
        let writer = ChunkWriter {
            id: "chatcmpl-00000000000000ff".into(),
            created: 1_796_036_400,
            requested: "anthropic/claude-x".into(),
            stream: false,
            include_usage: false,
            tool_calls: 0,
            started: false,
        };
        let target = Target {
            provider: "anthropic".into(),
            model: "claude-x".into(),
        };
        let text = json!({"type": "text", "text": "tab\t, quote \", \u{1} é \u{2028} </script>"});
        let call = json!({"type": "tool_use", "id": "toolu_1", "name": "get", "input": {"q": "a\"b", "n": 1.5}});
        let thinking = json!({"type": "reasoning", "text": "hm"});
        let cases = [
            (vec![text.clone()], "end_turn", ""),
            (vec![call.clone()], "tool_use", "claude-x-2"),
            (vec![text.clone(), call.clone(), call], "tool_use", ""),
            (vec![thinking], "max_tokens", ""),
            (vec![], "content_filter", ""),
        ];
        for (index, (content, stop, model)) in cases.into_iter().enumerate() {
            let mut response: LlmResponse = serde_json::from_value(json!({
                "id": "msg_1",
                "content": content,
                "model": model,
                "stop_reason": stop,
                "usage": {"input_tokens": 3, "output_tokens": 2},
            }))
            .expect("an LLMResponse");
            if index == 1 {
                response.usage.cache_read_input_tokens = 7;
            }
            if index == 2 {
                response.usage.cache_creation_input_tokens = 5;
            }
            let reply = writer.completion(&response, &target);
            assert_eq!(reply.status, 200);
            assert!(reply.headers.is_empty());
            assert_eq!(
                reply.body,
                as_value_tree(&writer, &response, &target),
                "case {index}"
            );
        }
    }

    #[test]
    fn a_chunk_is_written_as_serde_json_writes_its_tree() {
        let writer = ChunkWriter {
            id: "chatcmpl-0000000000000abc".into(),
            created: 7,
            requested: "openai/gpt-x".into(),
            stream: true,
            include_usage: true,
            tool_calls: 0,
            started: false,
        };
        let deltas = [
            json!({"role": "assistant", "content": ""}),
            json!({"content": "a \"quoted\" \u{7f} line\n"}),
            json!({}),
        ];
        for delta in deltas {
            for finish in [None, Some("stop"), Some("tool_calls")] {
                let tree = json!({
                    "id": writer.id,
                    "object": "chat.completion.chunk",
                    "created": writer.created,
                    "model": "anthropic/claude-x",
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                });
                assert_eq!(
                    writer.chunk("anthropic/claude-x", delta.clone(), finish),
                    format!("data: {tree}\n\n")
                );
            }
        }
    }
}
