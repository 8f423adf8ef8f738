//! The response side of Anthropic Messages: a 2xx body into OMA's `LlmResponse`, the block
//! mapping shared with the stream decoder, and the reader of Anthropic's error bodies.

use serde_json::{Map, Value};

use super::NAME;
use crate::adapter::{malformed, ErrorDetail};
use crate::error::Error;
use crate::json::object::{Object, ShapeError};
use crate::message::{
    ContentBlock, LlmResponse, ReasoningBlock, TextBlock, TokenUsage, ToolUseBlock,
};

/// Token counts: OMA's two, and the prompt cache's (null counts as absent).
#[derive(Default)]
pub(super) struct WireUsage {
    pub(super) input_tokens: Option<u64>,
    pub(super) output_tokens: Option<u64>,
    pub(super) cache_creation_input_tokens: Option<u64>,
    pub(super) cache_read_input_tokens: Option<u64>,
}

impl WireUsage {
    /// `{input_tokens, output_tokens, cache_creation_input_tokens, cache_read_input_tokens}`,
    /// other counts (server tool use, the service tier) ignored.
    pub(super) fn read(mut usage: Object) -> Result<Self, ShapeError> {
        Ok(WireUsage {
            input_tokens: usage.u64("input_tokens")?,
            output_tokens: usage.u64("output_tokens")?,
            cache_creation_input_tokens: usage.u64("cache_creation_input_tokens")?,
            cache_read_input_tokens: usage.u64("cache_read_input_tokens")?,
        })
    }

    /// The counts as OMA's usage, an absent count 0.
    pub(super) fn usage(&self) -> TokenUsage {
        TokenUsage {
            input_tokens: self.input_tokens.unwrap_or(0),
            output_tokens: self.output_tokens.unwrap_or(0),
            cache_creation_input_tokens: self.cache_creation_input_tokens.unwrap_or(0),
            cache_read_input_tokens: self.cache_read_input_tokens.unwrap_or(0),
            cached_input_tokens: 0,
        }
    }

    /// Applies the counts a later event reports (`message_delta`'s cumulative usage) over
    /// `usage`: a count the event leaves out keeps its value.
    pub(super) fn update(&self, usage: &mut TokenUsage) {
        let counts = [
            (self.input_tokens, &mut usage.input_tokens),
            (self.output_tokens, &mut usage.output_tokens),
            (
                self.cache_creation_input_tokens,
                &mut usage.cache_creation_input_tokens,
            ),
            (
                self.cache_read_input_tokens,
                &mut usage.cache_read_input_tokens,
            ),
        ];
        for (reported, count) in counts {
            if let Some(reported) = reported {
                *count = reported;
            }
        }
    }
}

/// The message of an Anthropic error body (`{"type":"error","error":{"type","message"}}`), for
/// the transport to report; `None` when the body has another shape.
pub fn error_message(body: &[u8]) -> Option<String> {
    error_detail(body).message
}

/// What an Anthropic error body says: its message, and its `error.type` (e.g.
/// `overloaded_error`) as both code and type, the only identifier Anthropic sends. Nothing when
/// the body has another shape.
pub fn error_detail(body: &[u8]) -> ErrorDetail {
    crate::json::from_bytes(body)
        .ok()
        .map(|value| error_detail_of(&value))
        .unwrap_or_default()
}

/// The detail of an error body or an `error` stream event, if `value` is one.
pub(super) fn error_detail_of(value: &Value) -> ErrorDetail {
    if value.get("type").and_then(Value::as_str) != Some("error") {
        return ErrorDetail::default();
    }
    let Some(error) = value.get("error") else {
        return ErrorDetail::default();
    };
    let text = |key: &str| {
        error
            .get(key)
            .and_then(Value::as_str)
            .filter(|text| !text.is_empty())
            .map(str::to_owned)
    };
    ErrorDetail {
        message: text("message"),
        code: text("type"),
        error_type: text("type"),
        retry_delay_ms: None,
    }
}

/// Reads a 2xx body: a message response (`{"type": "message", id, model, content,
/// stop_reason, usage}`) whose blocks stay JSON until mapped, so that a block type OMA does not
/// model never fails the whole body. An error body that arrived with a 2xx status is the
/// provider's error.
pub(super) fn parse(body: &[u8]) -> Result<LlmResponse, Error> {
    let value: Value = crate::json::from_bytes(body).map_err(|e| malformed(NAME, e))?;
    let detail = error_detail_of(&value);
    if detail.message.is_some() {
        return Err(detail.into_error(NAME, None, String::new()));
    }
    let wire = Object::new(value)
        .and_then(WireResponse::read)
        .map_err(|e| malformed(NAME, e))?;
    let content = wire
        .content
        .into_iter()
        .map(block_from_wire)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(LlmResponse {
        id: wire.id,
        content,
        model: wire.model,
        stop_reason: wire.stop_reason.unwrap_or_else(|| "end_turn".into()),
        usage: wire.usage.usage(),
        stop_sequence: wire.stop_sequence,
    })
}

/// Reads the answer of `count_tokens`: `{"input_tokens": N}` (other members ignored); an error
/// body that came with a 2xx status is the provider's error.
pub(super) fn parse_count(body: &[u8]) -> Result<u64, Error> {
    let value: Value = crate::json::from_bytes(body).map_err(|e| malformed(NAME, e))?;
    let detail = error_detail_of(&value);
    if detail.message.is_some() {
        return Err(detail.into_error(NAME, None, String::new()));
    }
    let count = Object::new(value).and_then(|mut o| o.u64("input_tokens"));
    match count {
        Ok(Some(count)) => Ok(count),
        Ok(None) => Err(malformed(NAME, "the count has no input_tokens")),
        Err(error) => Err(malformed(NAME, error)),
    }
}

/// The `stop_sequence` of a message or a `message_delta`: the sequence that stopped the answer,
/// when it is a string (anything else says none did: a stop sequence is no reason to refuse an
/// answer).
pub(super) fn stop_sequence(o: &mut Object) -> Option<String> {
    match o.take("stop_sequence") {
        Some(Value::String(sequence)) => Some(sequence),
        _ => None,
    }
}

/// The fields of a message response OMA reads; the blocks stay JSON until mapped, so a block
/// type OMA does not model never fails the whole body.
struct WireResponse {
    id: String,
    model: String,
    content: Vec<Value>,
    stop_reason: Option<String>,
    stop_sequence: Option<String>,
    usage: WireUsage,
}

impl WireResponse {
    fn read(mut wire: Object) -> Result<Self, ShapeError> {
        Ok(WireResponse {
            id: wire.required_string("id")?,
            model: wire.required_string("model")?,
            content: match wire.required("content")? {
                Value::Array(blocks) => blocks,
                _ => return Err(wire.invalid("content", "must be an array")),
            },
            stop_reason: wire.string("stop_reason")?,
            stop_sequence: stop_sequence(&mut wire),
            usage: match wire.object("usage")? {
                Some(usage) => WireUsage::read(usage)?,
                None => WireUsage::default(),
            },
        })
    }
}

/// OMA's `fromAnthropicContentBlock`: thinking and redacted thinking become reasoning with
/// provenance `anthropic`, text and tool_use map across, and any other type becomes the text
/// `[unsupported block type: <type>]`.
fn block_from_wire(block: Value) -> Result<ContentBlock, Error> {
    let Value::Object(mut fields) = block else {
        return Err(malformed(NAME, "a content block is not an object"));
    };
    let kind = match fields.remove("type") {
        Some(Value::String(kind)) => kind,
        _ => return Err(malformed(NAME, "a content block has no string type")),
    };
    Ok(match kind.as_str() {
        "thinking" => reasoning(
            take_string(&mut fields, "thinking", &kind)?,
            optional_string(&mut fields, "signature", &kind)?,
            None,
        ),
        "redacted_thinking" => reasoning(
            String::new(),
            None,
            Some(take_string(&mut fields, "data", &kind)?),
        ),
        "text" => ContentBlock::Text(TextBlock {
            text: take_string(&mut fields, "text", &kind)?,
        }),
        "tool_use" => ContentBlock::ToolUse(ToolUseBlock {
            id: take_string(&mut fields, "id", &kind)?,
            name: take_string(&mut fields, "name", &kind)?,
            input: fields
                .remove("input")
                .unwrap_or_else(|| Value::Object(Map::new())),
            signature: None,
        }),
        _ => unsupported_block(&kind),
    })
}

/// A reasoning block produced by this adapter.
pub(super) fn reasoning(
    text: String,
    signature: Option<String>,
    redacted_data: Option<String>,
) -> ContentBlock {
    ContentBlock::Reasoning(ReasoningBlock {
        text,
        signature,
        redacted_data,
        provenance: Some(NAME.into()),
    })
}

/// The placeholder for a block type OMA does not model.
pub(super) fn unsupported_block(kind: &str) -> ContentBlock {
    ContentBlock::Text(TextBlock {
        text: format!("[unsupported block type: {kind}]"),
    })
}

fn take_string(fields: &mut Map<String, Value>, key: &str, kind: &str) -> Result<String, Error> {
    optional_string(fields, key, kind)?
        .ok_or_else(|| malformed(NAME, format_args!("a {kind} block has no string {key}")))
}

fn optional_string(
    fields: &mut Map<String, Value>,
    key: &str,
    kind: &str,
) -> Result<Option<String>, Error> {
    match fields.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(malformed(
            NAME,
            format_args!("a {kind} block has a {key} that is not a string"),
        )),
    }
}
