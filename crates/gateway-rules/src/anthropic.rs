//! `POST /v1/messages`: Anthropic's Messages API in front of every provider, beside the
//! OpenAI-compatible route ([`crate::openai`]) and on the same provider calls with fallbacks
//! ([`crate::chat`]). `model` is `<provider>/<model>`, or a bare model name, which is
//! Anthropic's. Anthropic's messages are close to OMA's own shape: string content becomes a text
//! block, and the blocks (`text`, `image`, `tool_use`, `tool_result`) pass OMA's shape guard and
//! validation as they are, so what OMA refuses is a `400` in Anthropic's error shape (`{"type":
//! "error", "error": {"type", "message"}}`) with OMA's message, before anything is sent. An image
//! by URL (`{"type": "url", "url"}`, its media type taken from the URL's extension when not
//! given) is checked under the media rules of a video URL and fetched by the provider; the
//! gateway never fetches it.
//!
//! Answers are Anthropic's `message` object, or with `stream: true` its event stream
//! (`message_start`, `content_block_start` / `_delta` / `_stop`, `message_delta` with the stop
//! reason and usage, `message_stop`).

use serde_json::{json, Map, Value};

use oma_core::adapter::ToolDefinition;
use oma_core::adapter::{self, CacheMark, CachePlace, IdSource, Sampling, StreamEvent, Thinking};
use oma_core::error::Error;
use oma_core::json::writer::Writer as JsonWriter;
use oma_core::message::{ContentBlock, LlmResponse, TokenUsage};

use crate::chat::{chat_request, ChatMachine, ChatMode, Forwarded, Target};
use crate::env::Settings;
use crate::fields::ClientFields;
use crate::openai::{Completion, Writer};
use crate::{Head, Reply, Route};

/// The provider name of Anthropic's targets, which are sent the client's own request.
pub const NAME: &str = oma_core::adapter::anthropic::NAME;

/// Anthropic's error reply: `status` and `{"type": "error", "error": {"type", "message"}}`.
pub fn error_reply(status: u16, kind: &str, message: &str) -> Reply {
    Reply::json(
        status,
        &json!({"type": "error", "error": {"type": kind, "message": message}}),
    )
}

fn invalid(message: impl Into<String>) -> Reply {
    error_reply(400, "invalid_request_error", &message.into())
}

/// An OMA error as Anthropic's error reply (redacted of every configured secret), with the
/// statuses of [`crate::openai::of_error`].
pub fn of_error(settings: &Settings, error: Error) -> Reply {
    let openai = crate::openai::of_error(settings, error);
    let body: Value = oma_core::json::parse_value(&openai.body).unwrap_or(Value::Null);
    let message = body["error"]["message"].as_str().unwrap_or("").to_owned();
    let kind = match openai.status {
        400 | 422 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    };
    error_reply(openai.status, kind, &message)
}

/// `POST /v1/messages` (or, with `count`, `POST /v1/messages/count_tokens`): the provider
/// calls to make and how to answer, or the refusal, before anything is sent. An Anthropic
/// target is sent the client's own request ([`ChatMode::forward`]); the others the OMA request
/// read from it.
pub fn start(
    settings: &Settings,
    body: &[u8],
    head: &Head,
    count: bool,
    now_ms: u64,
    seed: u64,
) -> Result<Completion, Reply> {
    let value: Value = oma_core::json::from_bytes(body)
        .map_err(|e| invalid(format!("the request body is not JSON: {e}")))?;
    let Value::Object(mut o) = value else {
        return Err(invalid("the request body must be a JSON object"));
    };
    let model = match o.remove("model") {
        Some(Value::String(model)) if !model.trim().is_empty() => model,
        _ => {
            return Err(invalid(
                "`model` is required: `<provider>/<model>` or a Claude model",
            ))
        }
    };
    let target = Target::parse(&model).unwrap_or_else(|| Target {
        provider: "anthropic".into(),
        model: model.trim().to_owned(),
    });
    // A count has no answer to bound: `max_tokens` is not one of its fields.
    let max_tokens = match o.get("max_tokens") {
        None if count => None,
        value => Some(
            value
                .and_then(Value::as_u64)
                .and_then(|n| u32::try_from(n).ok())
                .filter(|n| *n >= 1)
                .ok_or_else(|| invalid("`max_tokens` is required: a positive whole number"))?,
        ),
    };
    let number = |o: &Map<String, Value>, name: &str| -> Result<Option<f64>, Reply> {
        match o.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => Ok(n.as_f64()),
            Some(_) => Err(invalid(format!("`{name}` must be a number"))),
        }
    };
    let sampling = Sampling {
        max_tokens,
        temperature: number(&o, "temperature")?,
        top_p: number(&o, "top_p")?,
        ..Sampling::default()
    };
    let stream = !count && matches!(o.get("stream"), Some(Value::Bool(true)));
    // The members of system blocks, messages, blocks and tools the route does not read, for
    // the field table (a count decides no field).
    let nested = if count {
        Vec::new()
    } else {
        crate::nested::messages(
            o.get("system"),
            o.get("messages")
                .and_then(Value::as_array)
                .map_or(&[][..], Vec::as_slice),
            o.get("tools"),
        )
    };
    let mut cache = Vec::new();
    let (system, system_blocks) = read_system(o.remove("system"), &mut cache)?;
    let mut thinking = read_thinking(o.get("thinking"))?;
    if count {
        // A budget bounds an answer, which a count has none of (nor a `max_tokens` to check
        // the budget against).
        if let Some(thinking) = thinking.as_mut() {
            thinking.budget_tokens = None;
        }
    }
    let tools = match o.remove("tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(tools)) => tools
            .into_iter()
            .enumerate()
            .map(|(i, mut tool)| {
                if let Some(mark) = take_cache_control(&mut tool, &format!("tools[{i}]"))? {
                    cache.push(CacheMark {
                        place: CachePlace::Tool(i),
                        ttl: mark,
                    });
                }
                let name = tool
                    .get("name")
                    .and_then(Value::as_str)
                    .filter(|n| !n.is_empty())
                    .ok_or_else(|| invalid(format!("tools[{i}].name is required")))?;
                Ok(ToolDefinition {
                    name: name.to_owned(),
                    description: tool
                        .get("description")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned(),
                    // Taken out of the tool, not copied: a schema may be large.
                    input_schema: tool
                        .get_mut("input_schema")
                        .map(Value::take)
                        .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
                })
            })
            .collect::<Result<Vec<_>, Reply>>()?,
        Some(_) => return Err(invalid("`tools` must be an array")),
    };
    let messages = match o.remove("messages") {
        Some(Value::Array(messages)) if !messages.is_empty() => messages,
        _ => return Err(invalid("`messages` is required: a non-empty array")),
    };
    let provenance = reasoning_provenance(settings, &target);
    let conversation = oma_messages(messages, &provenance, &mut cache)?;
    let mut request = chat_request(&target, system, conversation, tools, sampling, stream)
        .map_err(|e| of_error(settings, e))?;
    request.system_blocks = system_blocks;
    request.cache = cache;
    request.thinking = thinking;
    let requested = target.label();
    let mut targets = vec![target];
    targets.extend(settings.fallbacks_for(&requested));
    // The rest is the field table's, per target (a count answers no completion: its fields
    // only shape what is counted, which each target's counter reads as it can).
    let fields = ClientFields {
        route: Route::Messages,
        values: o,
        nested,
    };
    let mode = ChatMode {
        forward: Some(forwarded(body, head, count)?),
        count,
        fields: (!count).then_some(fields),
        openai: None,
    };
    let machine = ChatMachine::with_mode(settings, request, targets, mode, now_ms, seed)
        .map_err(|e| of_error(settings, e))?;
    Ok(Completion {
        machine,
        writer: Writer::Anthropic(MessageWriter {
            id: format!("msg_{seed:016x}"),
            requested,
            stream,
            count,
            block: None,
            blocks: 0,
            started: false,
            start_usage: TokenUsage::default(),
        }),
    })
}

/// The client's request as an Anthropic target is sent it ([`ChatMode::forward`]): its body
/// as it came (JSON text, so UTF-8), where its top-level `model` is (a second `model` is
/// refused: which one a provider would read is not for the gateway to guess), the provider's
/// route with the client's query (the SDK's beta client sends `?beta=true`), and the client's
/// `anthropic-version` and `anthropic-beta`.
fn forwarded(body: &[u8], head: &Head, count: bool) -> Result<Forwarded, Reply> {
    #[derive(serde::Deserialize)]
    struct Top<'a> {
        #[serde(borrow)]
        model: &'a serde_json::value::RawValue,
    }
    let text = std::str::from_utf8(body)
        .map_err(|e| invalid(format!("the request body is not JSON: {e}")))?;
    let top: Top = serde_json::from_str(text)
        .map_err(|e| invalid(format!("the request body is not JSON: {e}")))?;
    let raw = top.model.get();
    let model_at = (raw.as_ptr() as usize)
        .checked_sub(text.as_ptr() as usize)
        .map(|start| start..start + raw.len())
        .filter(|at| text.get(at.clone()) == Some(raw))
        .ok_or_else(|| invalid("the request's `model` could not be found in its text"))?;
    let route = if count {
        "v1/messages/count_tokens"
    } else {
        "v1/messages"
    };
    let query = head
        .path
        .split('#')
        .next()
        .and_then(|path| path.split_once('?'))
        .map_or("", |(_, query)| query);
    if !query.chars().all(|c| c.is_ascii_graphic()) {
        return Err(invalid(
            "the request's query may hold visible ASCII characters only",
        ));
    }
    let path = match query {
        "" => route.to_owned(),
        query => format!("{route}?{query}"),
    };
    Ok(Forwarded {
        body: text.to_owned(),
        model_at,
        path,
        version: head.anthropic_version.map(str::to_owned),
        beta: head.anthropic_beta.map(str::to_owned),
    })
}

/// The betas a target other than Anthropic honours as they are, by family (a beta's name
/// without its trailing date), each with why: what it changes is nothing such a target has to
/// do, or is checked by the gateway on its own.
pub const BETAS_ANY_TARGET: [(&str, &str); 6] = [
    ("claude-code", "it names the client"),
    (
        "interleaved-thinking",
        "it lets the model think between tool calls, and reasoning blocks carry any provider's \
         thinking",
    ),
    (
        "fine-grained-tool-streaming",
        "it changes how a tool call's input is streamed, and the gateway streams a tool call \
         whole",
    ),
    (
        "token-efficient-tools",
        "it changes how Anthropic's models are given tools",
    ),
    (
        "prompt-caching",
        "it allows cache markers, which a target without a prompt cache refuses by themselves",
    ),
    (
        "token-counting",
        "it allows counting a request's tokens, which every target does here (by its own \
         counter or the estimate)",
    ),
];

/// A beta's family: its name without its trailing date (`-YYYY-MM-DD` or `-YYYYMMDD`, both in
/// use).
fn beta_family(beta: &str) -> &str {
    let date = |tail: &str| {
        let digits: String = tail.chars().filter(|c| *c != '-').collect();
        let dashes_right = match tail.len() {
            10 => tail.as_bytes()[4] == b'-' && tail.as_bytes()[7] == b'-',
            8 => true,
            _ => false,
        };
        dashes_right && digits.len() == 8 && digits.bytes().all(|b| b.is_ascii_digit())
    };
    for length in [10, 8] {
        if let Some(cut) = beta.len().checked_sub(length + 1) {
            if beta.as_bytes()[cut] == b'-' && beta.get(cut + 1..).is_some_and(date) {
                return &beta[..cut];
            }
        }
    }
    beta
}

/// The first beta of the client's `anthropic-beta` (comma-separated names) that a target
/// other than Anthropic does not honour as it is (not of [`BETAS_ANY_TARGET`]), which the
/// request may depend on; `None` when every one is honoured. The field table's
/// `anthropic-beta` row refuses it ([`crate::fields::apply_markers_and_betas`]).
pub fn unhonoured_beta(beta: &str) -> Option<&str> {
    beta.split(',').map(str::trim).find(|name| {
        !name.is_empty()
            && !BETAS_ANY_TARGET
                .iter()
                .any(|(family, _)| *family == beta_family(name))
    })
}

/// `GET /v1/models` asked by an Anthropic client (it sends `anthropic-version`): Anthropic's
/// list shape over the same models as OpenAI's ([`crate::openai::model_ids`]); the gateway
/// knows no creation date, so each says the epoch, as OpenAI's list says `created: 0`.
pub fn models(settings: &Settings) -> Reply {
    let ids = crate::openai::model_ids(settings);
    let data: Vec<Value> = ids
        .iter()
        .map(|id| {
            json!({"type": "model", "id": id, "display_name": id,
                   "created_at": "1970-01-01T00:00:00Z"})
        })
        .collect();
    Reply::json(
        200,
        &json!({"data": data, "has_more": false, "first_id": ids.first(),
                "last_id": ids.last()}),
    )
}

/// `system`: a string, or text blocks (kept as blocks, their texts joined by a blank line for
/// the formats that take one text), each block's `cache_control` a marker.
fn read_system(
    system: Option<Value>,
    cache: &mut Vec<CacheMark>,
) -> Result<(Option<String>, Vec<String>), Reply> {
    let blocks = match system {
        None | Some(Value::Null) => return Ok((None, Vec::new())),
        Some(Value::String(text)) => return Ok((Some(text), Vec::new())),
        Some(Value::Array(blocks)) => blocks,
        Some(_) => return Err(invalid("`system` must be a string or text blocks")),
    };
    let mut texts = Vec::with_capacity(blocks.len());
    for (i, mut block) in blocks.into_iter().enumerate() {
        let path = format!("system[{i}]");
        if let Some(ttl) = take_cache_control(&mut block, &path)? {
            cache.push(CacheMark {
                place: CachePlace::System(i),
                ttl,
            });
        }
        match (block.get("type").and_then(Value::as_str), block.get("text")) {
            (Some("text"), Some(Value::String(text))) => texts.push(text.clone()),
            _ => return Err(invalid(format!("{path} must be a text block"))),
        }
    }
    if texts.is_empty() {
        return Ok((None, texts));
    }
    Ok((Some(texts.join("\n\n")), texts))
}

/// A block's `cache_control`, removed from it: `Some(ttl)` for a marker (`{"type":
/// "ephemeral", "ttl"?: "5m" | "1h"}`), `None` when it has none. Any other shape is refused
/// by its path: a marker is never dropped or guessed.
fn take_cache_control(block: &mut Value, path: &str) -> Result<Option<Option<String>>, Reply> {
    let Some(fields) = block.as_object_mut() else {
        return Ok(None);
    };
    let control = match fields.remove("cache_control") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(control)) => control,
        Some(_) => return Err(invalid(format!("{path}.cache_control must be an object"))),
    };
    let mut ttl = None;
    for (key, value) in control {
        match (key.as_str(), value) {
            ("type", Value::String(kind)) if kind == "ephemeral" => {}
            ("type", _) => {
                return Err(invalid(format!(
                    "{path}.cache_control.type must be \"ephemeral\""
                )))
            }
            ("ttl", Value::String(value)) => ttl = Some(value),
            ("ttl", Value::Null) => {}
            ("ttl", _) => {
                return Err(invalid(format!(
                    "{path}.cache_control.ttl must be a string"
                )))
            }
            (other, _) => {
                return Err(invalid(format!(
                    "{path}.cache_control.{other} is not supported by this gateway"
                )))
            }
        }
    }
    Ok(Some(ttl))
}

/// `thinking`: `enabled` with its budget, `adaptive` (the model decides: on, with no budget),
/// or `disabled`. An Anthropic target is sent the client's own request; the others take this.
fn read_thinking(thinking: Option<&Value>) -> Result<Option<Thinking>, Reply> {
    let Some(thinking) = thinking.filter(|t| !t.is_null()) else {
        return Ok(None);
    };
    let budget = match thinking.get("budget_tokens") {
        None | Some(Value::Null) => None,
        Some(value) => Some(
            value
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| invalid("`thinking.budget_tokens` must be a whole number"))?,
        ),
    };
    match thinking.get("type").and_then(Value::as_str) {
        Some("enabled") => Ok(Some(Thinking {
            enabled: true,
            budget_tokens: budget,
        })),
        Some("adaptive") => Ok(Some(Thinking {
            enabled: true,
            budget_tokens: None,
        })),
        Some("disabled") => Ok(None),
        _ => Err(invalid(
            "`thinking.type` must be \"enabled\", \"adaptive\" or \"disabled\"",
        )),
    }
}

/// The provenance of the reasoning a client sends back: its thinking blocks came from the
/// model it talks to, so they are the requested target's (its adapter's name), and a format
/// echoes them natively to that provider only (`docs/wire-formats.md`).
fn reasoning_provenance(settings: &Settings, target: &Target) -> String {
    let base_url = settings.provider(&target.provider).endpoint.base_url;
    adapter::for_provider(&target.provider, base_url.as_deref(), IdSource::default())
        .map(|adapter| adapter.name().to_owned())
        .unwrap_or_else(|_| target.provider.clone())
}

/// Anthropic's messages as OMA's message JSON, block for block (so OMA's guard names the
/// client's own positions): string content as one text block; `thinking` and
/// `redacted_thinking` as reasoning blocks with their signature or data and `provenance`; an
/// image by URL with its media type from the URL's extension; every `cache_control` (on a block,
/// or on a part of a tool result) taken off as a marker. The rest is left to OMA's guard.
fn oma_messages(
    messages: Vec<Value>,
    provenance: &str,
    cache: &mut Vec<CacheMark>,
) -> Result<Value, Reply> {
    let mut out = Vec::with_capacity(messages.len());
    for (i, mut message) in messages.into_iter().enumerate() {
        if let Some(Value::String(text)) = message.get("content") {
            let text = text.clone();
            message["content"] = json!([{"type": "text", "text": text}]);
        }
        if let Some(blocks) = message.get_mut("content").and_then(Value::as_array_mut) {
            for (j, block) in blocks.iter_mut().enumerate() {
                let path = format!("messages[{i}].content[{j}]");
                if let Some(ttl) = take_cache_control(block, &path)? {
                    cache.push(CacheMark {
                        place: CachePlace::Block {
                            message: i,
                            block: j,
                        },
                        ttl,
                    });
                }
                oma_block(block, &path, provenance, i, j, cache)?;
            }
        }
        if provenance == oma_core::adapter::gemini::NAME {
            sign_calls(&mut message, i, cache);
        }
        out.push(message);
    }
    Ok(Value::Array(out))
}

/// Gemini's signatures of tool calls, back on their calls (see [`call_signature`]): in message
/// `index`, a reasoning block with no text, a signature and no cache marker, followed by a tool
/// call without one, is the call's signature, and is taken off into it; the markers on later
/// blocks of the message move with them.
fn sign_calls(message: &mut Value, index: usize, cache: &mut [CacheMark]) {
    let Some(blocks) = message.get_mut("content").and_then(Value::as_array_mut) else {
        return;
    };
    let mut at = 0;
    while at + 1 < blocks.len() {
        let marked = cache.iter().any(|mark| {
            matches!(mark.place, CachePlace::Block { message, block }
                                 if message == index && block == at)
        });
        let signature = match &blocks[at] {
            Value::Object(b)
                if b.get("type") == Some(&json!("reasoning"))
                    && b.get("text") == Some(&json!(""))
                    && b.get("redactedData").is_none()
                    && !marked =>
            {
                b.get("signature")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            }
            _ => None,
        };
        let next = &blocks[at + 1];
        let unsigned_call = next.get("type") == Some(&json!("tool_use"))
            && next.get("signature").is_none_or(Value::is_null);
        match signature {
            Some(signature) if unsigned_call => {
                blocks[at + 1]["signature"] = json!(signature);
                blocks.remove(at);
                for mark in cache.iter_mut() {
                    match &mut mark.place {
                        CachePlace::Block { message, block }
                        | CachePlace::Part { message, block, .. }
                            if *message == index && *block > at =>
                        {
                            *block -= 1
                        }
                        _ => {}
                    }
                }
            }
            _ => at += 1,
        }
    }
}

/// One of Anthropic's blocks made OMA's, in place (see [`oma_messages`]).
fn oma_block(
    block: &mut Value,
    path: &str,
    provenance: &str,
    message: usize,
    index: usize,
    cache: &mut Vec<CacheMark>,
) -> Result<(), Reply> {
    let text = |block: &Value, key: &str| match block.get(key) {
        Some(Value::String(text)) => Ok(text.clone()),
        _ => Err(invalid(format!("{path}.{key} must be a string"))),
    };
    match block.get("type").and_then(Value::as_str) {
        Some("thinking") => {
            let thinking = text(block, "thinking")?;
            let mut reasoning = json!({"type": "reasoning", "text": thinking});
            match block.get("signature") {
                None | Some(Value::Null) => {}
                Some(Value::String(signature)) if signature.is_empty() => {}
                Some(Value::String(signature)) => reasoning["signature"] = json!(signature),
                Some(_) => return Err(invalid(format!("{path}.signature must be a string"))),
            }
            reasoning["provenance"] = json!(provenance);
            *block = reasoning;
        }
        Some("redacted_thinking") => {
            let data = text(block, "data")?;
            *block = json!({"type": "reasoning", "text": "", "redactedData": data,
                            "provenance": provenance});
        }
        Some("image") => {
            // Anthropic's URL image source has no media type; OMA's has one.
            let Some(source) = block.get_mut("source") else {
                return Ok(());
            };
            let by_url = source["type"] == json!("url");
            if by_url && source.get("media_type").is_none() {
                if let Some(url) = source["url"].as_str() {
                    let media_type = crate::openai::image_type(url);
                    source["media_type"] = json!(media_type);
                }
            }
        }
        Some("tool_result") => {
            let Some(parts) = block.get_mut("content").and_then(Value::as_array_mut) else {
                return Ok(());
            };
            for (k, part) in parts.iter_mut().enumerate() {
                let part_path = format!("{path}.content[{k}]");
                if let Some(ttl) = take_cache_control(part, &part_path)? {
                    cache.push(CacheMark {
                        place: CachePlace::Part {
                            message,
                            block: index,
                            part: k,
                        },
                        ttl,
                    });
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// Writes Anthropic's answer: the whole `message`, or its event stream.
#[derive(Clone, Debug)]
pub struct MessageWriter {
    id: String,
    requested: String,
    /// Whether the request asked for a stream.
    pub stream: bool,
    /// Whether the request is a count of its input tokens (`/v1/messages/count_tokens`).
    count: bool,
    /// The kind of content block open in the stream, if any.
    block: Option<&'static str>,
    /// How many content blocks were opened.
    blocks: usize,
    started: bool,
    /// The usage the provider reported as its answer began, for `message_start`.
    start_usage: TokenUsage,
}

fn event(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// Anthropic's `stop_reason` for OMA's (the same words; a provider's own passed through).
fn stop_reason(stop: &str) -> &str {
    match stop {
        "" => "end_turn",
        other => other,
    }
}

/// Anthropic's `usage`: the input and output counts with the prompt cache's, which Anthropic's
/// answers always carry (0 where the provider reported none). Tokens read from the cache are
/// `cache_read_input_tokens` whoever counted them (OpenAI and Gemini count them in their input,
/// so they come out of `input_tokens` here, as Anthropic counts).
pub fn usage_json(usage: &TokenUsage) -> Value {
    json!({
        "input_tokens": usage.uncached_input(),
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "cache_read_input_tokens": usage.cache_read(),
        "output_tokens": usage.output_tokens,
    })
}

/// A content block of an answer in Anthropic's shape: reasoning as `thinking` with its
/// signature (empty where the provider signed nothing, as Anthropic's shape always has one) or
/// `redacted_thinking` with its data; `None` for what Anthropic's answers have no block for.
fn answer_block(block: &ContentBlock) -> Option<Value> {
    Some(match block {
        ContentBlock::Text(t) => json!({"type": "text", "text": t.text}),
        ContentBlock::ToolUse(call) => json!({
            "type": "tool_use", "id": call.id, "name": call.name, "input": call.input,
        }),
        ContentBlock::Reasoning(r) => match &r.redacted_data {
            Some(data) => json!({"type": "redacted_thinking", "data": data}),
            None => json!({
                "type": "thinking",
                "thinking": r.text,
                "signature": r.signature.as_deref().unwrap_or(""),
            }),
        },
        ContentBlock::Image(_) | ContentBlock::Video(_) | ContentBlock::ToolResult(_) => {
            return None
        }
    })
}

/// The signature a tool call carries (Gemini's `thoughtSignature` on a function call), which
/// Anthropic's `tool_use` has no field for: it is answered as a `thinking` block with no text
/// and that signature, just before the call, which Anthropic's clients keep and send back as
/// they keep any signed thinking; [`oma_messages`] puts it back on the call.
fn call_signature(block: &ContentBlock) -> Option<&str> {
    match block {
        ContentBlock::ToolUse(call) => call.signature.as_deref().filter(|s| !s.is_empty()),
        _ => None,
    }
}

impl MessageWriter {
    /// The whole `message` of `response`, answered by `target`.
    pub fn whole(&self, response: &LlmResponse, target: &Target) -> Reply {
        if self.count {
            return Reply::json(200, &json!({"input_tokens": response.usage.input_tokens}));
        }
        // Written straight to its text (no `Value` tree around the blocks), byte for byte as
        // `serde_json` writes the same object.
        let mut w = JsonWriter::with_capacity(256);
        w.begin_object();
        w.field_str("id", &self.id);
        w.field_str("type", "message");
        w.field_str("role", "assistant");
        w.field_str("model", &answered_model(response, target));
        w.key("content");
        w.begin_array();
        for block in &response.content {
            if let Some(signature) = call_signature(block) {
                w.json(&json!({"type": "thinking", "thinking": "", "signature": signature}));
            }
            if let Some(block) = answer_block(block) {
                w.json(&block);
            }
        }
        w.end_array();
        w.field_str("stop_reason", stop_reason(&response.stop_reason));
        w.key("stop_sequence");
        match &response.stop_sequence {
            Some(sequence) => w.string(sequence),
            None => w.null(),
        }
        w.key("usage");
        w.json(&usage_json(&response.usage));
        w.end_object();
        Reply {
            status: 200,
            headers: Vec::new(),
            body: w.finish(),
        }
    }

    /// Whether `message_start` was written.
    pub fn started(&self) -> bool {
        self.started
    }

    /// `message_start`, with the model as requested and the usage the provider reported as its
    /// answer began (0 where it reports none before its end); empty once it was written.
    pub fn begin(&mut self) -> String {
        let requested = self.requested.clone();
        self.start(&requested)
    }

    fn start(&mut self, model: &str) -> String {
        if self.started {
            return String::new();
        }
        self.started = true;
        event(
            "message_start",
            &json!({"type": "message_start", "message": {
                "id": self.id, "type": "message", "role": "assistant", "model": model,
                "content": [], "stop_reason": Value::Null, "stop_sequence": Value::Null,
                "usage": usage_json(&self.start_usage),
            }}),
        )
    }

    fn close_block(&mut self) -> String {
        match self.block.take() {
            Some(_) => event(
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": self.blocks - 1}),
            ),
            None => String::new(),
        }
    }

    /// Opens a block of `kind` (`content_block_start` with `block`) unless one is open, closing
    /// an open block of another kind first.
    fn open(&mut self, kind: &'static str, block: Value, out: &mut String) {
        if self.block == Some(kind) {
            return;
        }
        out.push_str(&self.close_block());
        self.block = Some(kind);
        self.blocks += 1;
        out.push_str(&event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": self.blocks - 1,
                    "content_block": block}),
        ));
    }

    fn delta(&self, delta: Value) -> String {
        event(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": self.blocks - 1, "delta": delta}),
        )
    }

    /// The server-sent text of a piece of a streamed answer: text and thinking as deltas of
    /// their open block, a signature as the last delta of its thinking block (which it closes),
    /// a redacted thinking block and a tool call whole. The provider's early usage writes
    /// nothing: it is kept for `message_start` ([`MessageWriter::begin`]), which goes out once
    /// the provider's stream began, or with the first piece if that comes sooner.
    pub fn event(&mut self, piece: &StreamEvent) -> String {
        if let StreamEvent::Usage(usage) = piece {
            if !self.started {
                self.start_usage = *usage;
            }
            return String::new();
        }
        if matches!(piece, StreamEvent::Done(_)) {
            return String::new();
        }
        let mut out = self.begin();
        match piece {
            StreamEvent::Text(text) => {
                self.open("text", json!({"type": "text", "text": ""}), &mut out);
                out.push_str(&self.delta(json!({"type": "text_delta", "text": text})));
            }
            StreamEvent::Reasoning(text) => {
                self.open("thinking", thinking_start(), &mut out);
                out.push_str(&self.delta(json!({"type": "thinking_delta", "thinking": text})));
            }
            StreamEvent::ReasoningSignature(signature) => {
                self.open("thinking", thinking_start(), &mut out);
                out.push_str(
                    &self.delta(json!({"type": "signature_delta", "signature": signature})),
                );
                out.push_str(&self.close_block());
            }
            StreamEvent::RedactedReasoning(data) => {
                out.push_str(&self.close_block());
                self.open(
                    "redacted_thinking",
                    json!({"type": "redacted_thinking", "data": data}),
                    &mut out,
                );
                out.push_str(&self.close_block());
            }
            StreamEvent::ToolUse(call) => {
                out.push_str(&self.close_block());
                if let Some(signature) = &call.signature {
                    self.open("thinking", thinking_start(), &mut out);
                    out.push_str(
                        &self.delta(json!({"type": "signature_delta", "signature": signature})),
                    );
                    out.push_str(&self.close_block());
                }
                self.open(
                    "tool_use",
                    json!({"type": "tool_use", "id": call.id, "name": call.name, "input": {}}),
                    &mut out,
                );
                out.push_str(&self.delta(json!({"type": "input_json_delta",
                                                "partial_json": call.input.to_string()})));
                out.push_str(&self.close_block());
            }
            StreamEvent::Usage(_) | StreamEvent::Done(_) => {}
        }
        out
    }

    /// The end of a stream: the open block closed, `message_delta` with the stop reason and
    /// the usage, `message_stop`.
    pub fn end(&mut self, response: &LlmResponse, target: &Target) -> String {
        let mut out = self.start(&answered_model(response, target));
        out.push_str(&self.close_block());
        out.push_str(&event(
            "message_delta",
            &json!({"type": "message_delta",
                    "delta": {"stop_reason": stop_reason(&response.stop_reason),
                              "stop_sequence": response.stop_sequence},
                    "usage": usage_json(&response.usage)}),
        ));
        out.push_str(&event("message_stop", &json!({"type": "message_stop"})));
        out
    }

    /// The end of a stream that failed after it began: Anthropic's `error` event.
    pub fn failed(&self, reply: &Reply) -> String {
        let body: Value = oma_core::json::parse_value(&reply.body).unwrap_or(Value::Null);
        event("error", &body)
    }
}

/// The `content_block_start` block of a streamed thinking block.
fn thinking_start() -> Value {
    json!({"type": "thinking", "thinking": "", "signature": ""})
}

fn answered_model(response: &LlmResponse, target: &Target) -> String {
    let model = if response.model.is_empty() {
        &target.model
    } else {
        &response.model
    };
    format!("{}/{model}", target.provider)
}

#[cfg(test)]
mod whole_tests {
    use super::*;

    /// The answer as a `Value` tree, written by `serde_json`: what the writer must equal.
    fn as_value_tree(writer: &MessageWriter, response: &LlmResponse, target: &Target) -> String {
        let content: Vec<Value> = response
            .content
            .iter()
            .flat_map(|block| {
                let signed = call_signature(block).map(
                    |signature| json!({"type": "thinking", "thinking": "", "signature": signature}),
                );
                signed.into_iter().chain(answer_block(block))
            })
            .collect();
        json!({
            "id": writer.id,
            "type": "message",
            "role": "assistant",
            "model": answered_model(response, target),
            "content": content,
            "stop_reason": stop_reason(&response.stop_reason),
            "stop_sequence": response.stop_sequence,
            "usage": usage_json(&response.usage),
        })
        .to_string()
    }

    #[test]
    fn a_whole_message_is_written_as_serde_json_writes_its_tree() {
        let writer = MessageWriter {
            id: "msg_00000000000000ff".into(),
            requested: "openai/gpt-x".into(),
            stream: false,
            count: false,
            block: None,
            blocks: 0,
            started: false,
            start_usage: TokenUsage::default(),
        };
        let target = Target {
            provider: "openai".into(),
            model: "gpt-x".into(),
        };
        let text = json!({"type": "text", "text": "tab\t, quote \", \u{1} é </script>"});
        let call = json!({"type": "tool_use", "id": "call_1", "name": "get", "input": {"q": 1}});
        let reasoning = json!({"type": "reasoning", "text": "hm", "signature": "sig"});
        let cases = [
            (vec![text.clone()], "end_turn", None),
            (vec![reasoning, call.clone()], "tool_use", None),
            (vec![text, call], "", Some("STOP")),
            (vec![], "max_tokens", None),
        ];
        for (index, (content, stop, sequence)) in cases.into_iter().enumerate() {
            let mut response: LlmResponse = serde_json::from_value(json!({
                "id": "chatcmpl-1",
                "content": content,
                "model": if index == 1 { "gpt-x-2" } else { "" },
                "stop_reason": stop,
                "usage": {"input_tokens": 30, "output_tokens": 2},
            }))
            .expect("an LLMResponse");
            response.stop_sequence = sequence.map(str::to_owned);
            if index == 1 {
                response.usage.cache_read_input_tokens = 7;
                if let ContentBlock::ToolUse(call) = &mut response.content[1] {
                    call.signature = Some("gemini-signature".into());
                }
            }
            let reply = writer.whole(&response, &target);
            assert_eq!(reply.status, 200);
            assert_eq!(
                reply.body,
                as_value_tree(&writer, &response, &target),
                "case {index}"
            );
        }
    }
}
