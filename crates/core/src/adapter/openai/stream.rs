//! Decoding a streamed Chat Completions body (`docs/wire-formats.md#openai-streaming`): SSE `data:`
//! chunks until `[DONE]`. Text and reasoning deltas become events at once; tool calls are
//! accumulated by `index` and emitted when the stream ends, followed by the accumulated `done`
//! response.
//!
//! A tool-call delta finds its buffer through a map from its `index`, never by a search, so each
//! chunk costs the same whatever came before it; a turn may carry at most
//! [`MAX_STREAM_TOOL_CALLS`] tool calls (more is a malformed response).

use std::collections::HashMap;

use serde_json::Value;

use super::response::{
    has_tool_use, reasoning_block, reasoning_text, stop_reason, tool_input, usage_of,
};
use crate::adapter::sse::{SseEvent, SseParser};
use crate::adapter::{
    malformed, too_many_tool_calls, StreamDecoder, StreamEvent, MAX_STREAM_TOOL_CALLS,
};
use crate::error::Error;
use crate::message::{ContentBlock, LlmResponse, TextBlock, TokenUsage, ToolUseBlock};

/// A tool call being assembled from deltas.
#[derive(Debug, Default)]
struct CallBuffer {
    id: String,
    name: String,
    arguments: String,
}

/// A non-empty string value (OMA tests these fields for truthiness).
fn non_empty(value: Option<&Value>) -> Option<&str> {
    value.and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// The stream decoder of one request.
#[derive(Debug)]
pub(super) struct Decoder {
    provider: String,
    sse: SseParser,
    id: String,
    model: String,
    usage: TokenUsage,
    finish_reason: Option<String>,
    text: String,
    reasoning: String,
    calls: Vec<CallBuffer>,
    /// Where in `calls` the buffer of each delta `index` is; deltas without an `index` share
    /// the buffer of `None`.
    positions: HashMap<Option<i64>, usize>,
    done: bool,
    failed: Option<Error>,
}

impl Decoder {
    pub(super) fn new(provider: &str) -> Self {
        Decoder {
            provider: provider.to_string(),
            sse: SseParser::new(),
            id: String::new(),
            model: String::new(),
            usage: TokenUsage::default(),
            finish_reason: None,
            text: String::new(),
            reasoning: String::new(),
            calls: Vec::new(),
            positions: HashMap::new(),
            done: false,
            failed: None,
        }
    }

    fn event(&mut self, event: SseEvent, out: &mut Vec<StreamEvent>) -> Result<(), Error> {
        if self.done {
            return Ok(());
        }
        if event.data.starts_with("[DONE]") {
            self.done = true;
            return Ok(());
        }
        let chunk: Value = crate::json::from_str(&event.data).map_err(|e| {
            malformed(
                &self.provider,
                format_args!("a stream chunk is not JSON ({e})"),
            )
        })?;
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            // A mid-stream error (Groq's `event: error`, OpenRouter's error chunk) carries the
            // same `{"message", "code", "type"}` object as an error body.
            let fallback = error.to_string();
            return Err(crate::adapter::error_object_detail(error).into_error(
                &self.provider,
                None,
                fallback,
            ));
        }
        if let Some(id) = chunk.get("id").and_then(Value::as_str) {
            self.id = id.to_string();
        }
        if let Some(model) = chunk.get("model").and_then(Value::as_str) {
            self.model = model.to_string();
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = usage_of(Some(usage));
        }
        let Some(choice) = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return Ok(());
        };
        if let Some(delta) = choice.get("delta").and_then(Value::as_object) {
            if let Some(text) = delta.get("content").and_then(Value::as_str) {
                self.text.push_str(text);
                out.push(StreamEvent::Text(text.to_string()));
            }
            let reasoning = reasoning_text(delta);
            if !reasoning.is_empty() {
                self.reasoning.push_str(&reasoning);
                out.push(StreamEvent::Reasoning(reasoning));
            }
            if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
                for call in calls {
                    self.tool_call_delta(call)?;
                }
            }
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_string());
        }
        Ok(())
    }

    fn tool_call_delta(&mut self, call: &Value) -> Result<(), Error> {
        let index = call.get("index").and_then(Value::as_i64);
        let position = match self.positions.get(&index) {
            Some(&position) => position,
            None => {
                if self.calls.len() >= MAX_STREAM_TOOL_CALLS {
                    return Err(too_many_tool_calls(&self.provider));
                }
                self.calls.push(CallBuffer::default());
                self.positions.insert(index, self.calls.len() - 1);
                self.calls.len() - 1
            }
        };
        let Some(buffer) = self.calls.get_mut(position) else {
            return Ok(());
        };
        let function = call.get("function");
        if let Some(id) = non_empty(call.get("id")) {
            buffer.id = id.to_string();
        }
        if let Some(name) = non_empty(function.and_then(|f| f.get("name"))) {
            buffer.name = name.to_string();
        }
        if let Some(arguments) = non_empty(function.and_then(|f| f.get("arguments"))) {
            buffer.arguments.push_str(arguments);
        }
        Ok(())
    }

    fn feed_events(&mut self, events: Vec<SseEvent>) -> Result<Vec<StreamEvent>, Error> {
        let mut out = Vec::new();
        for event in events {
            if let Err(error) = self.event(event, &mut out) {
                self.failed = Some(error.clone());
                return Err(error);
            }
        }
        Ok(out)
    }
}

impl StreamDecoder for Decoder {
    fn feed(&mut self, bytes: &[u8]) -> Result<Vec<StreamEvent>, Error> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        let events = self.sse.feed(bytes);
        self.feed_events(events)
    }

    fn finish(&mut self) -> Result<Vec<StreamEvent>, Error> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        let last = self.sse.finish().into_iter().collect();
        let mut out = self.feed_events(last)?;
        if !self.done && self.finish_reason.is_none() {
            let error = malformed(
                &self.provider,
                "the stream ended before [DONE] and without a finish_reason",
            );
            self.failed = Some(error.clone());
            return Err(error);
        }

        let mut content = Vec::new();
        if !self.reasoning.is_empty() {
            content.push(reasoning_block(
                std::mem::take(&mut self.reasoning),
                &self.provider,
            ));
        }
        if !self.text.is_empty() {
            content.push(ContentBlock::Text(TextBlock {
                text: std::mem::take(&mut self.text),
            }));
        }
        self.positions.clear();
        for call in std::mem::take(&mut self.calls) {
            let block = ToolUseBlock {
                id: call.id,
                name: call.name,
                input: tool_input(&call.arguments),
                signature: None,
            };
            out.push(StreamEvent::ToolUse(block.clone()));
            content.push(ContentBlock::ToolUse(block));
        }
        let stop_reason = stop_reason(self.finish_reason.as_deref(), has_tool_use(&content));
        out.push(StreamEvent::Done(LlmResponse {
            id: std::mem::take(&mut self.id),
            content,
            model: std::mem::take(&mut self.model),
            stop_reason,
            usage: self.usage,
            stop_sequence: None,
        }));
        // A second `finish` has nothing more to give.
        self.failed = Some(malformed(&self.provider, "the stream was already finished"));
        Ok(out)
    }
}
