//! The decoder of streamed Anthropic responses (`stream: true`, read as SSE).
//!
//! Text and thinking deltas become events as soon as their SSE event is complete, as do a
//! thinking block's signature, a redacted thinking block (whole at its start) and the usage of
//! `message_start`; a tool call becomes one event at its `content_block_stop`, its input parsed
//! from the accumulated `input_json_delta`s (an object, else `{}`). The blocks are accumulated in the order they
//! started, as the SDK's `finalMessage()` does, and [`Decoder::finish`] turns them into the
//! closing `Done`. An `error` event, a body that is not the promised JSON, or a stream that ends
//! before `message_stop` is an error.
//!
//! Each event costs the same whatever came before it: a block is found through a map from its
//! `index` to its place, never by a search, and a turn may open at most
//! [`MAX_STREAM_BLOCKS`] blocks and [`MAX_STREAM_TOOL_CALLS`] tool calls (more is a malformed
//! response).

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::response::{reasoning, stop_sequence, unsupported_block, WireUsage};
use super::NAME;
use crate::adapter::sse::{SseEvent, SseParser};
use crate::adapter::{
    malformed, too_many_blocks, too_many_tool_calls, StreamDecoder, StreamEvent, MAX_STREAM_BLOCKS,
    MAX_STREAM_TOOL_CALLS,
};
use crate::error::Error;
use crate::json::object::{Object, ShapeError};
use crate::message::{ContentBlock, LlmResponse, TextBlock, TokenUsage, ToolUseBlock};

/// One SSE data payload; which fields are present depends on `type`.
struct WireEvent {
    kind: String,
    message: Option<WireStart>,
    index: Option<u64>,
    content_block: Option<Map<String, Value>>,
    delta: Option<WireDelta>,
    usage: Option<WireUsage>,
    /// The `error` object's message.
    error: Option<String>,
    /// The `error` object's `type` (e.g. `overloaded_error`): the error's code and type.
    error_type: Option<String>,
}

/// The message skeleton of `message_start`.
struct WireStart {
    id: String,
    model: String,
    stop_reason: Option<String>,
    usage: Option<WireUsage>,
}

/// A block delta (`text_delta`, `thinking_delta`, ...) or the `message_delta` delta (no type).
struct WireDelta {
    kind: Option<String>,
    text: Option<String>,
    thinking: Option<String>,
    signature: Option<String>,
    partial_json: Option<String>,
    /// Present (possibly `null`, `Some(None)`) on `message_delta`.
    stop_reason: Option<Option<String>>,
    /// The stop sequence that stopped the answer (`message_delta`), when one did.
    stop_sequence: Option<String>,
}

impl WireEvent {
    fn read(value: Value) -> Result<Self, ShapeError> {
        let mut o = Object::new(value)?;
        let mut error_type = None;
        let message = match o.object("message")? {
            Some(mut m) => Some(WireStart {
                id: m.required_string("id")?,
                model: m.required_string("model")?,
                stop_reason: m.string("stop_reason")?,
                usage: m.object("usage")?.map(WireUsage::read).transpose()?,
            }),
            None => None,
        };
        let delta = match o.object("delta")? {
            Some(mut d) => Some(WireDelta {
                kind: d.string("type")?,
                text: d.string("text")?,
                thinking: d.string("thinking")?,
                signature: d.string("signature")?,
                partial_json: d.string("partial_json")?,
                stop_reason: d.nullable_string("stop_reason")?,
                stop_sequence: stop_sequence(&mut d),
            }),
            None => None,
        };
        Ok(WireEvent {
            kind: o.required_string("type")?,
            message,
            index: o.u64("index")?,
            content_block: o.object("content_block")?.map(Object::into_map),
            delta,
            usage: o.object("usage")?.map(WireUsage::read).transpose()?,
            error: match o.object("error")? {
                Some(mut e) => {
                    error_type = e.string("type")?;
                    e.string("message")?
                }
                None => None,
            },
            error_type,
        })
    }
}

/// A content block being accumulated.
enum Block {
    Text(String),
    Thinking {
        text: String,
        signature: Option<String>,
    },
    Redacted(String),
    ToolUse {
        id: String,
        name: String,
        start_input: Value,
        json: String,
        emitted: bool,
    },
    Other(String),
}

/// The decoder's state between chunks.
#[derive(Default)]
pub(super) struct Decoder {
    sse: SseParser,
    start: Option<(String, String)>,
    /// The blocks in the order they started.
    blocks: Vec<Block>,
    /// Where in `blocks` the latest block started at each `index` is.
    positions: HashMap<u64, usize>,
    /// How many of `blocks` are tool calls.
    tool_calls: usize,
    stop_reason: Option<String>,
    stop_sequence: Option<String>,
    usage: TokenUsage,
    stopped: bool,
    failed: Option<Error>,
}

impl StreamDecoder for Decoder {
    fn feed(&mut self, bytes: &[u8]) -> Result<Vec<StreamEvent>, Error> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        let mut out = Vec::new();
        for event in self.sse.feed(bytes) {
            if self.stopped {
                continue;
            }
            let wire = parse_event(&event).map_err(|error| self.fail(error))?;
            self.handle_or_fail(&event, wire, &mut out)?;
        }
        Ok(out)
    }

    fn finish(&mut self) -> Result<Vec<StreamEvent>, Error> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        let mut out = Vec::new();
        // An event cut off by the end of the body is truncation, not a malformed body.
        if let Some(event) = self.sse.finish().filter(|_| !self.stopped) {
            if let Ok(wire) = parse_event(&event) {
                self.handle_or_fail(&event, wire, &mut out)?;
            }
        }
        if !self.stopped {
            return Err(self.fail(malformed(NAME, "the stream ended before message_stop")));
        }
        let Some((id, model)) = self.start.take() else {
            return Err(self.fail(malformed(NAME, "the stream has no message_start")));
        };
        let content = std::mem::take(&mut self.blocks)
            .into_iter()
            .map(final_block)
            .collect();
        self.positions.clear();
        out.push(StreamEvent::Done(LlmResponse {
            id,
            content,
            model,
            stop_reason: self.stop_reason.take().unwrap_or_else(|| "end_turn".into()),
            usage: self.usage,
            stop_sequence: self.stop_sequence.take(),
        }));
        Ok(out)
    }
}

impl Decoder {
    fn fail(&mut self, error: Error) -> Error {
        self.failed = Some(error.clone());
        error
    }

    fn handle_or_fail(
        &mut self,
        event: &SseEvent,
        wire: WireEvent,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), Error> {
        self.handle(event, wire, out)
            .map_err(|error| self.fail(error))
    }

    /// Applies one event; events after `message_stop` are never handled.
    fn handle(
        &mut self,
        event: &SseEvent,
        wire: WireEvent,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), Error> {
        if wire.kind == "error" || event.event.as_deref() == Some("error") {
            let message = wire
                .error
                .unwrap_or_else(|| "the stream reported an error".into());
            return Err(Error::Provider {
                provider: NAME.into(),
                status: None,
                message,
                code: wire.error_type.clone(),
                error_type: wire.error_type,
            });
        }
        match wire.kind.as_str() {
            "message_start" => {
                let start = wire
                    .message
                    .ok_or_else(|| malformed(NAME, "message_start has no message"))?;
                self.usage = start.usage.unwrap_or_default().usage();
                self.stop_reason = start.stop_reason;
                self.start = Some((start.id, start.model));
                out.push(StreamEvent::Usage(self.usage));
            }
            "content_block_start" => {
                let index = index_of(wire.index, &wire.kind)?;
                let block = wire
                    .content_block
                    .ok_or_else(|| malformed(NAME, "content_block_start has no content_block"))?;
                if self.blocks.len() >= MAX_STREAM_BLOCKS {
                    return Err(too_many_blocks(NAME));
                }
                let block = start_block(block);
                if let Block::Redacted(data) = &block {
                    out.push(StreamEvent::RedactedReasoning(data.clone()));
                }
                if matches!(block, Block::ToolUse { .. }) {
                    if self.tool_calls >= MAX_STREAM_TOOL_CALLS {
                        return Err(too_many_tool_calls(NAME));
                    }
                    self.tool_calls += 1;
                }
                self.positions.insert(index, self.blocks.len());
                self.blocks.push(block);
            }
            "content_block_delta" => {
                let index = index_of(wire.index, &wire.kind)?;
                let delta = wire
                    .delta
                    .ok_or_else(|| malformed(NAME, "content_block_delta has no delta"))?;
                self.delta(index, delta, out)?;
            }
            "content_block_stop" => {
                let index = index_of(wire.index, &wire.kind)?;
                if let Some(Block::ToolUse {
                    id,
                    name,
                    start_input,
                    json,
                    emitted: emitted @ false,
                }) = self.block_mut(index)
                {
                    *emitted = true;
                    out.push(StreamEvent::ToolUse(ToolUseBlock {
                        id: id.clone(),
                        name: name.clone(),
                        input: tool_input(start_input, json),
                        signature: None,
                    }));
                }
            }
            "message_delta" => {
                if let Some(delta) = wire.delta {
                    if let Some(stop_reason) = delta.stop_reason {
                        self.stop_reason = stop_reason;
                    }
                    if delta.stop_sequence.is_some() {
                        self.stop_sequence = delta.stop_sequence;
                    }
                }
                if let Some(usage) = wire.usage {
                    usage.update(&mut self.usage);
                }
            }
            "message_stop" => self.stopped = true,
            _ => {}
        }
        Ok(())
    }

    fn delta(
        &mut self,
        index: u64,
        delta: WireDelta,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), Error> {
        let kind = delta.kind.as_deref().unwrap_or_default();
        let missing = |field: &str| malformed(NAME, format_args!("a {kind} has no string {field}"));
        match kind {
            "text_delta" => {
                let text = delta.text.ok_or_else(|| missing("text"))?;
                if let Some(Block::Text(acc)) = self.block_mut(index) {
                    acc.push_str(&text);
                }
                out.push(StreamEvent::Text(text));
            }
            "thinking_delta" => {
                let thinking = delta.thinking.ok_or_else(|| missing("thinking"))?;
                if let Some(Block::Thinking { text, .. }) = self.block_mut(index) {
                    text.push_str(&thinking);
                }
                out.push(StreamEvent::Reasoning(thinking));
            }
            "signature_delta" => {
                let value = delta.signature.ok_or_else(|| missing("signature"))?;
                if let Some(Block::Thinking { signature, .. }) = self.block_mut(index) {
                    *signature = Some(value.clone());
                    out.push(StreamEvent::ReasoningSignature(value));
                }
            }
            "input_json_delta" => {
                let part = delta.partial_json.ok_or_else(|| missing("partial_json"))?;
                if let Some(Block::ToolUse {
                    json,
                    emitted: false,
                    ..
                }) = self.block_mut(index)
                {
                    json.push_str(&part);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The latest block started at `index`, found in constant time.
    fn block_mut(&mut self, index: u64) -> Option<&mut Block> {
        let at = *self.positions.get(&index)?;
        self.blocks.get_mut(at)
    }
}

/// The JSON of one SSE event; an `error` event whose data is not JSON is still the provider's
/// error, reported with its text. The text is kept whole: the caller redacts the key from it and
/// then bounds it ([`Error::redact`]); cutting it here first could cut a key in two and leave its
/// prefix, which redaction no longer finds.
fn parse_event(event: &SseEvent) -> Result<WireEvent, Error> {
    let read = crate::json::from_str(&event.data)
        .map_err(|e| e.to_string())
        .and_then(|value| WireEvent::read(value).map_err(|e| e.to_string()));
    read.map_err(|e| {
        if event.event.as_deref() == Some("error") {
            return Error::Provider {
                provider: NAME.into(),
                status: None,
                message: event.data.clone(),
                code: None,
                error_type: None,
            };
        }
        malformed(
            NAME,
            format_args!("a stream event is not the promised JSON: {e}"),
        )
    })
}

fn index_of(index: Option<u64>, kind: &str) -> Result<u64, Error> {
    index.ok_or_else(|| malformed(NAME, format_args!("{kind} has no index")))
}

fn string_field(block: &mut Map<String, Value>, key: &str) -> Option<String> {
    match block.remove(key) {
        Some(Value::String(s)) => Some(s),
        _ => None,
    }
}

/// The accumulator for a `content_block_start`.
fn start_block(mut block: Map<String, Value>) -> Block {
    let kind = string_field(&mut block, "type").unwrap_or_default();
    match kind.as_str() {
        "text" => Block::Text(string_field(&mut block, "text").unwrap_or_default()),
        "thinking" => Block::Thinking {
            text: string_field(&mut block, "thinking").unwrap_or_default(),
            signature: string_field(&mut block, "signature"),
        },
        "redacted_thinking" => {
            Block::Redacted(string_field(&mut block, "data").unwrap_or_default())
        }
        "tool_use" => Block::ToolUse {
            id: string_field(&mut block, "id").unwrap_or_default(),
            name: string_field(&mut block, "name").unwrap_or_default(),
            start_input: block.remove("input").unwrap_or(Value::Null),
            json: String::new(),
            emitted: false,
        },
        _ => Block::Other(kind),
    }
}

/// A tool call's input: the accumulated JSON if it parses to an object, the start's input when
/// no JSON came and that is an object, else `{}`.
fn tool_input(start_input: &Value, json: &str) -> Value {
    let value = if json.is_empty() {
        start_input.clone()
    } else {
        crate::json::from_str(json).unwrap_or(Value::Null)
    };
    match value {
        Value::Object(_) => value,
        _ => Value::Object(Map::new()),
    }
}

/// An accumulated block as OMA's final content block.
fn final_block(block: Block) -> ContentBlock {
    match block {
        Block::Text(text) => ContentBlock::Text(TextBlock { text }),
        Block::Thinking { text, signature } => reasoning(text, signature, None),
        Block::Redacted(data) => reasoning(String::new(), None, Some(data)),
        Block::ToolUse {
            id,
            name,
            start_input,
            json,
            ..
        } => ContentBlock::ToolUse(ToolUseBlock {
            input: tool_input(&start_input, &json),
            id,
            name,
            signature: None,
        }),
        Block::Other(kind) => unsupported_block(&kind),
    }
}
