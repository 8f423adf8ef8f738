//! OpenAI Chat Completions and the OpenAI-compatible providers
//! (`docs/wire-formats.md#openai-chat-completions`): `POST {base}/chat/completions` with
//! `authorization: Bearer <key>`.
//!
//! One adapter, [`OpenAi`], configured by a preset: the name (used as `provenance` and as the
//! provider in errors), the default base URL, and the provider's [`Quirks`]. [`preset`] knows
//! OMA's providers (`openai`, `grok`, `minimax`, `deepseek`, `mimo`, `doubao`, `hunyuan`,
//! `qiniu`); [`OpenAi::compatible`] serves any other base URL.
//!
//! A `video` block becomes a `video_url` part on every preset (a URL as given, base64 as a data
//! URL): MiniMax accepts it, other providers reject it with an HTTP error that takes the normal
//! failure path (`docs/wire-formats.md#video-on-openai-compatible-routes`).
//!
//! Not ported: OMA's text-embedded tool-call extractor (tool calls some local models write as
//! JSON text when they should use `tool_calls`); such text stays text.

mod messages;
mod response;
mod stream;

#[cfg(test)]
mod format_tests;
#[cfg(test)]
mod parse_tests;
#[cfg(test)]
pub(crate) mod stream_tests;

use crate::adapter::{ResponseContext, Validated};
use serde_json::{json, Value};

use self::messages::{wire_messages, WireMessage};
use super::{error_object_detail, ErrorDetail, StreamDecoder, ToolDefinition};
use super::{join_url, Adapter, ChatRequest, Credentials, Endpoint, HttpRequest};
use crate::error::Error;
use crate::json::writer::Writer;
use crate::message::LlmResponse;
use crate::retry::RetryPolicy;

/// The names [`preset`] knows.
pub const PRESETS: &[&str] = &[
    "openai", "grok", "minimax", "deepseek", "mimo", "doubao", "hunyuan", "qiniu",
];

/// What sets a provider apart from plain OpenAI.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Quirks {
    /// Echo the provider's own reasoning as `reasoning_content` on assistant messages when the
    /// conversation has a tool call (OMA's `echoesReasoning: 'tool-use-only'`: DeepSeek, MiMo,
    /// Hunyuan). Such reasoning is never sent as `<thinking>` text.
    pub echo_reasoning: bool,
    /// DeepSeek: `reasoning_effort: "max"` is sent (others drop it), and a thinking
    /// configuration adds `thinking: {type: "enabled" | "disabled"}`.
    pub deepseek_thinking: bool,
}

/// The Chat Completions adapter, for one provider.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenAi {
    /// The adapter's name: `provenance` of its reasoning, and the provider in its errors.
    pub name: String,
    /// The base URL used when the endpoint gives none, e.g. `https://api.openai.com/v1`.
    pub default_base_url: String,
    /// The provider's differences from plain OpenAI.
    pub quirks: Quirks,
}

impl OpenAi {
    /// An OpenAI-compatible provider without quirks at `base_url`, named `name`.
    pub fn compatible(name: impl Into<String>, base_url: impl Into<String>) -> Self {
        OpenAi {
            name: name.into(),
            default_base_url: base_url.into(),
            quirks: Quirks::default(),
        }
    }

    /// The same adapter with other quirks.
    pub fn with_quirks(mut self, quirks: Quirks) -> Self {
        self.quirks = quirks;
        self
    }
}

impl Default for OpenAi {
    /// Plain OpenAI (`https://api.openai.com/v1`).
    fn default() -> Self {
        OpenAi::compatible("openai", "https://api.openai.com/v1")
    }
}

/// OMA's OpenAI-compatible provider `name` with its default base URL and quirks; `None` for a
/// name not in [`PRESETS`].
pub fn preset(name: &str) -> Option<OpenAi> {
    let echo = Quirks {
        echo_reasoning: true,
        deepseek_thinking: false,
    };
    let (base, quirks) = match name {
        "openai" => ("https://api.openai.com/v1", Quirks::default()),
        "grok" => ("https://api.x.ai/v1", Quirks::default()),
        "minimax" => ("https://api.minimax.io/v1", Quirks::default()),
        "deepseek" => (
            "https://api.deepseek.com/v1",
            Quirks {
                echo_reasoning: true,
                deepseek_thinking: true,
            },
        ),
        "mimo" => ("https://api.xiaomimimo.com/v1", echo),
        "doubao" => (
            "https://ark.cn-beijing.volces.com/api/v3",
            Quirks::default(),
        ),
        "hunyuan" => ("https://tokenhub.tencentmaas.com/v1", echo),
        "qiniu" => ("https://api.qnaigc.com/v1", Quirks::default()),
        _ => return None,
    };
    Some(OpenAi::compatible(name, base).with_quirks(quirks))
}

/// What an OpenAI-style error body says: `{"error": {"message", "code", "type"}}` (the code a
/// string, or a number as OpenRouter sends it), or `{"error": "…"}`, or MiniMax's
/// `{"base_resp": {"status_msg": …}}` (message only).
pub fn error_detail(body: &[u8]) -> ErrorDetail {
    let Ok(value) = crate::json::from_bytes(body) else {
        return ErrorDetail::default();
    };
    let mut detail = match value.get("error") {
        Some(Value::String(message)) => ErrorDetail {
            message: Some(message.clone()),
            ..ErrorDetail::default()
        },
        Some(error) => error_object_detail(error),
        None => ErrorDetail::default(),
    };
    if detail.message.is_none() {
        detail.message = value
            .get("base_resp")
            .and_then(|b| b.get("status_msg"))
            .and_then(Value::as_str)
            .map(str::to_owned);
    }
    detail.message = detail.message.filter(|text| !text.is_empty());
    detail
}

/// The provider's message from an OpenAI-style error body (see [`error_detail`]).
pub fn error_message(body: &[u8]) -> Option<String> {
    error_detail(body).message
}

impl Adapter for OpenAi {
    fn error_detail(&self, _headers: &[(String, String)], body: &[u8]) -> ErrorDetail {
        error_detail(body)
    }

    /// OMA calls every OpenAI-compatible provider through the `openai` SDK.
    fn default_retry(&self) -> RetryPolicy {
        RetryPolicy::stainless()
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn format_validated(
        &self,
        request: Validated<'_>,
        endpoint: &Endpoint,
    ) -> Result<HttpRequest, Error> {
        let request = request.request();
        if !request.cache.is_empty() {
            let label = format!("OpenAI Chat Completions ({})", self.name);
            return Err(super::cache_unsupported(&label));
        }
        let echo = self.quirks.echo_reasoning.then_some(self.name.as_str());
        let messages = wire_messages(request, echo)?;
        let authorization = match &endpoint.credentials {
            Credentials::None => None,
            Credentials::ApiKey(key) => Some(format!("Bearer {key}")),
            Credentials::Aws { .. } => {
                return Err(Error::InvalidRequest {
                    message: format!(
                        "{}: AWS credentials cannot authenticate a Chat Completions request; \
                         give an API key",
                        self.name
                    ),
                })
            }
        };
        let body = self.body(request, messages).write(request.size_hint());
        let base = endpoint
            .base_url
            .as_deref()
            .unwrap_or(&self.default_base_url);
        let mut http = HttpRequest::post_json(join_url(base, "chat/completions"), body);
        if let Some(value) = authorization {
            http.headers.push(("authorization".into(), value));
        }
        Ok(http)
    }

    fn parse(&self, _context: &ResponseContext, body: &[u8]) -> Result<LlmResponse, Error> {
        response::parse_completion(&self.name, body)
    }

    fn stream_decoder(&self, _context: &ResponseContext) -> Box<dyn StreamDecoder> {
        Box::new(stream::Decoder::new(&self.name))
    }
}

impl OpenAi {
    /// The body, keyed like OMA's object literal: sampling keys, then the extra keys (which may
    /// override them), then `model`, `messages`, `tools`, `stream` (which nothing overrides).
    fn body<'a>(&self, request: &'a ChatRequest, messages: Vec<WireMessage<'a>>) -> Body<'a> {
        let s = &request.sampling;
        let effort = s
            .reasoning_effort
            .as_deref()
            .filter(|e| *e != "max" || self.quirks.deepseek_thinking);
        let mut body = Body::default();
        body.set("max_tokens", s.max_tokens.map(Value::from));
        body.set("temperature", s.temperature.map(js_number));
        body.set("frequency_penalty", s.frequency_penalty.map(js_number));
        body.set("presence_penalty", s.presence_penalty.map(js_number));
        body.set("top_p", s.top_p.map(js_number));
        body.set("top_k", s.top_k.map(Value::from));
        body.set("min_p", s.min_p.map(js_number));
        body.set(
            "parallel_tool_calls",
            s.parallel_tool_calls.map(Value::from),
        );
        body.set("reasoning_effort", effort.map(Value::from));
        if self.quirks.deepseek_thinking {
            if let Some(thinking) = &request.thinking {
                let kind = if thinking.enabled {
                    "enabled"
                } else {
                    "disabled"
                };
                body.set("thinking", Some(json!({ "type": kind })));
            }
        }
        for (key, value) in &request.extra_body {
            body.put(key, Field::Extra(value));
        }
        body.put("model", Field::Str(&request.model));
        body.put("messages", Field::Messages(messages));
        body.put(
            "tools",
            if request.tools.is_empty() {
                Field::Absent
            } else {
                Field::Tools(&request.tools)
            },
        );
        body.set("stream", Some(Value::Bool(request.stream)));
        if request.stream {
            body.set("stream_options", Some(json!({ "include_usage": true })));
        }
        body
    }
}

/// A number as JavaScript's `JSON.stringify` writes it: integral values without `.0`.
fn js_number(n: f64) -> Value {
    if n.is_finite() && n.fract() == 0.0 && n.abs() < 9.007_199_254_740_992e15 {
        Value::from(n as i64)
    } else {
        Value::from(n)
    }
}

/// The request body: an ordered object whose keys behave like a JavaScript object literal with
/// spreads (a later write replaces the value in place; `Absent` is JS `undefined`, left out).
#[derive(Default)]
struct Body<'a> {
    fields: Vec<(&'a str, Field<'a>)>,
}

enum Field<'a> {
    Absent,
    Owned(Value),
    Extra(&'a Value),
    Str(&'a str),
    Messages(Vec<WireMessage<'a>>),
    Tools(&'a [ToolDefinition]),
}

impl<'a> Body<'a> {
    fn set(&mut self, key: &'a str, value: Option<Value>) {
        self.put(key, value.map_or(Field::Absent, Field::Owned));
    }

    fn put(&mut self, key: &'a str, field: Field<'a>) {
        match self.fields.iter_mut().find(|(k, _)| *k == key) {
            Some((_, slot)) => *slot = field,
            None => self.fields.push((key, field)),
        }
    }
}

impl Body<'_> {
    /// The body's JSON text, into a buffer of `capacity` bytes.
    fn write(&self, capacity: usize) -> String {
        let mut w = Writer::with_capacity(capacity);
        w.begin_object();
        for (key, field) in &self.fields {
            match field {
                Field::Absent => continue,
                Field::Owned(value) => {
                    w.key(key);
                    w.json(value);
                }
                Field::Extra(value) => {
                    w.key(key);
                    w.json(value);
                }
                Field::Str(text) => w.field_str(key, text),
                Field::Messages(messages) => {
                    w.key(key);
                    w.begin_array();
                    for message in messages {
                        message.write(&mut w);
                    }
                    w.end_array();
                }
                Field::Tools(tools) => {
                    // `[{type: "function", function: {name, description, parameters}}]`.
                    w.key(key);
                    w.begin_array();
                    for tool in *tools {
                        w.begin_object();
                        w.field_str("type", "function");
                        w.key("function");
                        w.begin_object();
                        w.field_str("name", &tool.name);
                        w.field_str("description", &tool.description);
                        w.key("parameters");
                        w.json(&tool.input_schema);
                        w.end_object();
                        w.end_object();
                    }
                    w.end_array();
                }
            }
        }
        w.end_object();
        w.finish()
    }
}
