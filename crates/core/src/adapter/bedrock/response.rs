//! Reading Converse answers (`docs/wire-formats.md#bedrock-response`): the JSON body of
//! `/converse`, and the AWS event stream of `/converse-stream` turned into OMA's stream events.
//!
//! The stream's open tool and reasoning buffers are kept in maps by content block index, so an
//! event costs the same whatever came before it. A turn may use at most [`MAX_STREAM_BLOCKS`]
//! distinct content block indexes and start at most [`MAX_STREAM_TOOL_CALLS`] tool calls (more
//! is a malformed response). Each text delta still becomes a text block of its own, as in OMA,
//! so the number of text blocks grows with the deltas, not with the indexes.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::b64::node_round_trip;
use super::eventstream::{EventStreamDecoder, Message};
use super::NAME;
use crate::adapter::{
    malformed, too_many_blocks, too_many_tool_calls, StreamDecoder, StreamEvent, MAX_STREAM_BLOCKS,
    MAX_STREAM_TOOL_CALLS,
};
use crate::error::Error;
use crate::message::{
    ContentBlock, LlmResponse, ReasoningBlock, TextBlock, TokenUsage, ToolUseBlock,
};

/// A `/converse` body as OMA's response. The id is `''`: the SDK's `$metadata.requestId` is
/// the `x-amzn-requestid` response header, which a body parser never sees.
pub(super) fn parse(model: &str, body: &[u8]) -> Result<LlmResponse, Error> {
    let value: Value = crate::json::from_bytes(body)
        .map_err(|e| malformed(NAME, format!("body is not JSON: {e}")))?;
    let top = value
        .as_object()
        .ok_or_else(|| malformed(NAME, "body is not a JSON object"))?;
    let blocks = match top
        .get("output")
        .and_then(|o| o.get("message"))
        .and_then(|m| m.get("content"))
    {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(blocks)) => blocks.as_slice(),
        Some(_) => return Err(malformed(NAME, "output.message.content is not an array")),
    };
    let mut content = Vec::with_capacity(blocks.len());
    for block in blocks {
        if let Some(block) = response_block(block)? {
            content.push(block);
        }
    }
    Ok(LlmResponse {
        id: String::new(),
        content,
        model: model.to_string(),
        stop_reason: stop_reason(top),
        usage: usage(top.get("usage")),
        stop_sequence: None,
    })
}

fn response_block(block: &Value) -> Result<Option<ContentBlock>, Error> {
    let block = block
        .as_object()
        .ok_or_else(|| malformed(NAME, "a content block is not an object"))?;
    if let Some(text) = block.get("text") {
        let text = text
            .as_str()
            .ok_or_else(|| malformed(NAME, "a text block's text is not a string"))?;
        return Ok(Some(ContentBlock::Text(TextBlock { text: text.into() })));
    }
    if let Some(call) = block.get("toolUse") {
        let input = match call.get("input") {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(input) => input.clone(),
        };
        return Ok(Some(ContentBlock::ToolUse(ToolUseBlock {
            id: str_or_empty(call.get("toolUseId")),
            name: str_or_empty(call.get("name")),
            input,
            signature: None,
        })));
    }
    if let Some(reasoning) = block.get("reasoningContent") {
        if let Some(redacted) = reasoning.get("redactedContent").and_then(Value::as_str) {
            return Ok(Some(ContentBlock::Reasoning(redacted_block(redacted))));
        }
        let text = reasoning.get("reasoningText");
        return Ok(Some(ContentBlock::Reasoning(ReasoningBlock {
            text: str_or_empty(text.and_then(|t| t.get("text"))),
            signature: text
                .and_then(|t| t.get("signature"))
                .and_then(Value::as_str)
                .map(str::to_string),
            redacted_data: None,
            provenance: Some(NAME.into()),
        })));
    }
    Ok(None)
}

fn redacted_block(base64: &str) -> ReasoningBlock {
    ReasoningBlock {
        text: String::new(),
        signature: None,
        redacted_data: Some(node_round_trip(base64).into_owned()),
        provenance: Some(NAME.into()),
    }
}

fn str_or_empty(value: Option<&Value>) -> String {
    value
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn stop_reason(object: &Map<String, Value>) -> String {
    object
        .get("stopReason")
        .and_then(Value::as_str)
        .unwrap_or("end_turn")
        .to_string()
}

/// Converse's `usage`: OMA's two counts and the prompt cache's (`cacheWriteInputTokens`,
/// `cacheReadInputTokens`), an absent count 0.
fn usage(usage: Option<&Value>) -> TokenUsage {
    let count = |key| {
        usage
            .and_then(|u| u.get(key))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    TokenUsage {
        input_tokens: count("inputTokens"),
        output_tokens: count("outputTokens"),
        cache_creation_input_tokens: count("cacheWriteInputTokens"),
        cache_read_input_tokens: count("cacheReadInputTokens"),
        cached_input_tokens: 0,
    }
}

/// A reasoning block being streamed.
#[derive(Default)]
struct ReasoningBuffer {
    text: String,
    signature: Option<String>,
    redacted: Option<String>,
}

impl ReasoningBuffer {
    fn into_block(self) -> ReasoningBlock {
        ReasoningBlock {
            text: self.text,
            signature: self.signature,
            redacted_data: self.redacted.map(|r| node_round_trip(&r).into_owned()),
            provenance: Some(NAME.into()),
        }
    }
}

/// A tool call being streamed.
struct ToolBuffer {
    id: String,
    name: String,
    json: String,
}

/// Decodes a `/converse-stream` body into OMA's stream events.
pub(super) struct ConverseStream {
    model: String,
    frames: EventStreamDecoder,
    /// Open tool calls by content block index.
    tools: HashMap<i64, ToolBuffer>,
    /// Open reasoning blocks by content block index, with the order they were opened in.
    reasoning: HashMap<i64, (usize, ReasoningBuffer)>,
    /// How many reasoning buffers were opened so far (the next one's order).
    reasoning_opened: usize,
    /// Every content block index the stream used.
    indexes: HashSet<i64>,
    /// How many tool calls were started.
    tool_calls: usize,
    content: Vec<ContentBlock>,
    stop_reason: String,
    usage: TokenUsage,
    stopped: bool,
    failed: Option<Error>,
    finished: bool,
}

impl ConverseStream {
    pub(super) fn new(model: &str) -> Self {
        ConverseStream {
            model: model.to_string(),
            frames: EventStreamDecoder::new(),
            tools: HashMap::new(),
            reasoning: HashMap::new(),
            reasoning_opened: 0,
            indexes: HashSet::new(),
            tool_calls: 0,
            content: Vec::new(),
            stop_reason: "end_turn".into(),
            usage: TokenUsage::default(),
            stopped: false,
            failed: None,
            finished: false,
        }
    }

    fn message(&mut self, message: &Message, events: &mut Vec<StreamEvent>) -> Result<(), Error> {
        match message.header_str(":message-type") {
            Some("event") => {}
            Some("exception") => {
                let kind = message.header_str(":exception-type").unwrap_or("exception");
                let detail = crate::json::from_bytes(&message.payload)
                    .ok()
                    .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_string))
                    .unwrap_or_else(|| String::from_utf8_lossy(&message.payload).into_owned());
                let mut error = provider_error(format!("{kind}: {detail}"));
                if let Error::Provider { code, .. } = &mut error {
                    // The stream names the exception as a member (`throttlingException`); the
                    // AWS SDK throws it as the error type `ThrottlingException`.
                    *code = message
                        .header_str(":exception-type")
                        .map(super::exception_type_name);
                }
                return Err(error);
            }
            Some("error") => {
                let code = message.header_str(":error-code").unwrap_or("error");
                let detail = message.header_str(":error-message").unwrap_or("");
                let mut error = provider_error(format!("{code}: {detail}"));
                if let Error::Provider { code: slot, .. } = &mut error {
                    *slot = message
                        .header_str(":error-code")
                        .filter(|code| !code.is_empty())
                        .map(str::to_owned);
                }
                return Err(error);
            }
            other => {
                return Err(malformed(
                    NAME,
                    format!("event stream message type {other:?} is not event, exception or error"),
                ))
            }
        }
        let kind = match message.header_str(":event-type") {
            Some(
                kind @ ("messageStart" | "contentBlockStart" | "contentBlockDelta"
                | "contentBlockStop" | "messageStop" | "metadata"),
            ) => kind,
            // Event types this format does not know are skipped, as the SDK does.
            _ => return Ok(()),
        };
        let payload: Value = crate::json::from_bytes(&message.payload)
            .map_err(|e| malformed(NAME, format!("{kind} payload is not JSON: {e}")))?;
        let index = payload
            .get("contentBlockIndex")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if kind.starts_with("contentBlock")
            && self.indexes.len() >= MAX_STREAM_BLOCKS
            && !self.indexes.contains(&index)
        {
            return Err(too_many_blocks(NAME));
        }
        if kind.starts_with("contentBlock") {
            self.indexes.insert(index);
        }
        match kind {
            "contentBlockStart" => {
                if let Some(call) = payload.get("start").and_then(|s| s.get("toolUse")) {
                    let buffer = ToolBuffer {
                        id: str_or_empty(call.get("toolUseId")),
                        name: str_or_empty(call.get("name")),
                        json: String::new(),
                    };
                    if self.tool_calls >= MAX_STREAM_TOOL_CALLS {
                        return Err(too_many_tool_calls(NAME));
                    }
                    self.tool_calls += 1;
                    self.tools.insert(index, buffer);
                }
            }
            "contentBlockDelta" => {
                if let Some(delta) = payload.get("delta") {
                    self.delta(index, delta, events);
                }
            }
            "contentBlockStop" => self.block_stop(index, events),
            "messageStop" => {
                self.stopped = true;
                self.stop_reason = stop_reason(payload.as_object().unwrap_or(&Map::new()));
            }
            "metadata" => {
                if let Some(usage) = payload.get("usage").filter(|u| !u.is_null()) {
                    self.usage = self::usage(Some(usage));
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn reasoning_buffer(&mut self, index: i64) -> &mut ReasoningBuffer {
        let opened = &mut self.reasoning_opened;
        &mut self
            .reasoning
            .entry(index)
            .or_insert_with(|| {
                *opened += 1;
                (*opened, ReasoningBuffer::default())
            })
            .1
    }

    fn delta(&mut self, index: i64, delta: &Value, events: &mut Vec<StreamEvent>) {
        if let Some(text) = delta.get("text").and_then(Value::as_str) {
            events.push(StreamEvent::Text(text.into()));
            self.content
                .push(ContentBlock::Text(TextBlock { text: text.into() }));
        } else if let Some(input) = delta
            .get("toolUse")
            .and_then(|t| t.get("input"))
            .and_then(Value::as_str)
        {
            if let Some(buffer) = self.tools.get_mut(&index) {
                buffer.json.push_str(input);
            }
        } else if let Some(reasoning) = delta.get("reasoningContent") {
            if let Some(text) = reasoning.get("text").and_then(Value::as_str) {
                events.push(StreamEvent::Reasoning(text.into()));
                self.reasoning_buffer(index).text.push_str(text);
            } else if let Some(signature) = reasoning.get("signature").and_then(Value::as_str) {
                events.push(StreamEvent::ReasoningSignature(signature.into()));
                self.reasoning_buffer(index).signature = Some(signature.into());
            } else if let Some(redacted) = reasoning.get("redactedContent").and_then(Value::as_str)
            {
                let data = node_round_trip(redacted).into_owned();
                events.push(StreamEvent::RedactedReasoning(data));
                self.reasoning_buffer(index).redacted = Some(redacted.into());
            }
        }
    }

    fn block_stop(&mut self, index: i64, events: &mut Vec<StreamEvent>) {
        if let Some((_, buffer)) = self.reasoning.remove(&index) {
            self.content
                .push(ContentBlock::Reasoning(buffer.into_block()));
        }
        if let Some(buffer) = self.tools.remove(&index) {
            let json = if buffer.json.is_empty() {
                "{}"
            } else {
                &buffer.json
            };
            let input = match crate::json::from_str(json) {
                Ok(object @ Value::Object(_)) => object,
                _ => Value::Object(Map::new()),
            };
            let call = ToolUseBlock {
                id: buffer.id,
                name: buffer.name,
                input,
                signature: None,
            };
            self.content.push(ContentBlock::ToolUse(call.clone()));
            events.push(StreamEvent::ToolUse(call));
        }
    }
}

fn provider_error(message: String) -> Error {
    Error::Provider {
        provider: NAME.into(),
        status: None,
        message,
        code: None,
        error_type: None,
    }
}

impl StreamDecoder for ConverseStream {
    fn feed(&mut self, bytes: &[u8]) -> Result<Vec<StreamEvent>, Error> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        let mut events = Vec::new();
        let result = self.frames.feed(bytes).and_then(|messages| {
            messages
                .iter()
                .try_for_each(|message| self.message(message, &mut events))
        });
        match result {
            Ok(()) => Ok(events),
            Err(error) => {
                // Events decoded before the failure are still delivered; the error follows.
                self.failed = Some(error.clone());
                if events.is_empty() {
                    Err(error)
                } else {
                    Ok(events)
                }
            }
        }
    }

    fn finish(&mut self) -> Result<Vec<StreamEvent>, Error> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        if self.finished {
            return Ok(Vec::new());
        }
        self.frames.finish()?;
        if !self.stopped {
            return Err(malformed(NAME, "stream ended before messageStop"));
        }
        self.finished = true;
        // Unterminated reasoning is flushed in the order it was opened.
        let mut open: Vec<_> = std::mem::take(&mut self.reasoning).into_values().collect();
        crate::sort::sort_by(&mut open, &|(a, _), (b, _)| a.cmp(b));
        for (_, buffer) in open {
            self.content
                .push(ContentBlock::Reasoning(buffer.into_block()));
        }
        Ok(vec![StreamEvent::Done(LlmResponse {
            id: String::new(),
            content: std::mem::take(&mut self.content),
            model: self.model.clone(),
            stop_reason: self.stop_reason.clone(),
            usage: self.usage,
            stop_sequence: None,
        })])
    }
}
