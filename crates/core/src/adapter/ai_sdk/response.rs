//! Reading the host's answers: the `generateText` result fields, and the newline-delimited
//! `fullStream` parts of `streamText` (the protocol is in the module docs of `ai_sdk`).

use serde_json::Value;

use super::NAME;
use crate::adapter::{malformed, StreamDecoder, StreamEvent};
use crate::error::Error;
use crate::json::object::{Object, ShapeError};
use crate::message::{
    ContentBlock, LlmResponse, ReasoningBlock, TextBlock, TokenUsage, ToolUseBlock,
};

/// Reads the JSON of a `generateText` result: `text`, `reasoningText`, `toolCalls`
/// (`[{toolCallId, toolName, input}]`), `finishReason`, `usage` and `response` (`{id, modelId}`).
pub(super) fn parse(body: &[u8]) -> Result<LlmResponse, Error> {
    let value = crate::json::from_bytes(body).map_err(|e| malformed(NAME, e))?;
    read_result(value).map_err(|e| malformed(NAME, e))
}

fn read_result(value: Value) -> Result<LlmResponse, ShapeError> {
    let mut result = Object::new(value)?;
    let tools = result
        .objects("toolCalls")?
        .into_iter()
        .map(|mut call| {
            Ok(tool_use(
                call.required_string("toolCallId")?,
                call.required_string("toolName")?,
                call.take("input"),
            ))
        })
        .collect::<Result<_, ShapeError>>()?;
    let (id, model) = match result.object("response")? {
        Some(mut meta) => (meta.string("id")?, meta.string("modelId")?),
        None => (None, None),
    };
    let usage = match result.object("usage")? {
        Some(usage) => read_usage(usage)?,
        None => TokenUsage::default(),
    };
    Ok(response(
        result.string("reasoningText")?.unwrap_or_default(),
        result.string("text")?.unwrap_or_default(),
        tools,
        result.string("finishReason")?.as_deref().unwrap_or("stop"),
        usage,
        id.unwrap_or_default(),
        model.unwrap_or_default(),
    ))
}

/// `{inputTokens, outputTokens}`, either missing for 0.
fn read_usage(mut usage: Object) -> Result<TokenUsage, ShapeError> {
    Ok(TokenUsage::new(
        usage.u64("inputTokens")?.unwrap_or(0),
        usage.u64("outputTokens")?.unwrap_or(0),
    ))
}

/// A tool call; an input that is not an object becomes `{}`.
fn tool_use(id: String, name: String, input: Option<Value>) -> ToolUseBlock {
    ToolUseBlock {
        id,
        name,
        input: match input {
            Some(Value::Object(map)) => Value::Object(map),
            _ => Value::Object(Default::default()),
        },
        signature: None,
    }
}

/// OMA's response: reasoning, then text (each only when non-empty), then the tool calls.
fn response(
    reasoning: String,
    text: String,
    tools: Vec<ToolUseBlock>,
    finish_reason: &str,
    usage: TokenUsage,
    id: String,
    model: String,
) -> LlmResponse {
    let mut content = Vec::with_capacity(tools.len() + 2);
    if !reasoning.is_empty() {
        content.push(ContentBlock::Reasoning(ReasoningBlock {
            text: reasoning,
            signature: None,
            redacted_data: None,
            provenance: Some(NAME.into()),
        }));
    }
    if !text.is_empty() {
        content.push(ContentBlock::Text(TextBlock { text }));
    }
    let has_tool_calls = !tools.is_empty();
    content.extend(tools.into_iter().map(ContentBlock::ToolUse));
    LlmResponse {
        id,
        content,
        model,
        stop_reason: stop_reason(finish_reason, has_tool_calls),
        usage,
        stop_sequence: None,
    }
}

/// `stop` with tool calls → `tool_use`; `tool-calls`/`tool_calls` → `tool_use`;
/// `content-filter`/`content_filter` → `content_filter`; `stop` → `end_turn`; `length` →
/// `max_tokens`; anything else unchanged.
fn stop_reason(reason: &str, has_tool_calls: bool) -> String {
    match reason {
        "stop" if has_tool_calls => "tool_use",
        "stop" => "end_turn",
        "tool-calls" | "tool_calls" => "tool_use",
        "content-filter" | "content_filter" => "content_filter",
        "length" => "max_tokens",
        other => other,
    }
    .into()
}

/// The decoder of the `streamText` answer: newline-delimited `fullStream` parts.
#[derive(Default)]
pub(super) struct AiSdkStream {
    line: Vec<u8>,
    text: String,
    reasoning: String,
    tools: Vec<ToolUseBlock>,
    finish_reason: Option<String>,
    usage: TokenUsage,
    id: String,
    model: String,
    failed: Option<Error>,
}

fn str_field(part: &Value, key: &str) -> String {
    part.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn usage_field(part: &mut Value) -> Result<Option<TokenUsage>, Error> {
    match part.get_mut("totalUsage").map(Value::take) {
        None | Some(Value::Null) => Ok(None),
        Some(usage) => Object::at(usage, "totalUsage".into())
            .and_then(read_usage)
            .map(Some)
            .map_err(|e| malformed(NAME, e)),
    }
}

/// The `error` part as a provider error: a string, or `{message, statusCode?, code?, type?}`.
fn stream_error(error: Option<&Value>) -> Error {
    let detail = error
        .filter(|e| e.is_object())
        .map(crate::adapter::error_object_detail)
        .unwrap_or_default();
    let (message, status) = match error {
        Some(Value::String(s)) => (s.clone(), None),
        Some(Value::Object(o)) => (
            o.get("message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| Value::Object(o.clone()).to_string()),
            o.get("statusCode")
                .and_then(Value::as_u64)
                .and_then(|s| u16::try_from(s).ok()),
        ),
        Some(other) => (other.to_string(), None),
        None => ("ai-sdk stream reported an error".into(), None),
    };
    Error::Provider {
        provider: NAME.into(),
        status,
        message,
        code: detail.code,
        error_type: detail.error_type,
    }
}

impl AiSdkStream {
    fn line(&mut self, line: &[u8], events: &mut Vec<StreamEvent>) -> Result<(), Error> {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        let mut part: Value = crate::json::from_bytes(line).map_err(|e| malformed(NAME, e))?;
        match part.get("type").and_then(Value::as_str) {
            Some("text-delta") => {
                let text = str_field(&part, "text");
                self.text.push_str(&text);
                events.push(StreamEvent::Text(text));
            }
            Some("reasoning-delta") => {
                let text = str_field(&part, "text");
                self.reasoning.push_str(&text);
                events.push(StreamEvent::Reasoning(text));
            }
            Some("tool-call") => {
                let call = tool_use(
                    str_field(&part, "toolCallId"),
                    str_field(&part, "toolName"),
                    part.get("input").cloned(),
                );
                self.tools.push(call.clone());
                events.push(StreamEvent::ToolUse(call));
            }
            Some("finish") => {
                let reason = part.get("finishReason").and_then(Value::as_str);
                self.finish_reason = Some(reason.unwrap_or("stop").to_string());
                self.usage = usage_field(&mut part)?.unwrap_or_default();
            }
            Some("response") => {
                self.id = str_field(&part, "id");
                self.model = str_field(&part, "modelId");
                if let Some(usage) = usage_field(&mut part)? {
                    self.usage = usage;
                }
            }
            Some("error") => return Err(stream_error(part.get("error"))),
            _ => {}
        }
        Ok(())
    }
}

impl StreamDecoder for AiSdkStream {
    /// Events decoded before an error in the same bytes are returned first; the error comes on
    /// the next call, and sticks.
    fn feed(&mut self, bytes: &[u8]) -> Result<Vec<StreamEvent>, Error> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        let mut events = Vec::new();
        let mut rest = bytes;
        while let Some(end) = rest.iter().position(|&b| b == b'\n') {
            let (head, tail) = rest.split_at(end);
            rest = tail.get(1..).unwrap_or_default();
            let result = if self.line.is_empty() {
                self.line(head, &mut events)
            } else {
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(head);
                self.line(&line, &mut events)
            };
            if let Err(error) = result {
                self.failed = Some(error.clone());
                return if events.is_empty() {
                    Err(error)
                } else {
                    Ok(events)
                };
            }
        }
        self.line.extend_from_slice(rest);
        Ok(events)
    }

    fn finish(&mut self) -> Result<Vec<StreamEvent>, Error> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        let mut events = Vec::new();
        let last = std::mem::take(&mut self.line);
        let result = self.line(&last, &mut events).and_then(|()| {
            self.finish_reason
                .take()
                .ok_or_else(|| malformed(NAME, "the stream ended before a finish part"))
        });
        let finish_reason = match result {
            Ok(reason) => reason,
            Err(error) => {
                self.failed = Some(error.clone());
                return Err(error);
            }
        };
        events.push(StreamEvent::Done(response(
            std::mem::take(&mut self.reasoning),
            std::mem::take(&mut self.text),
            std::mem::take(&mut self.tools),
            &finish_reason,
            self.usage,
            std::mem::take(&mut self.id),
            std::mem::take(&mut self.model),
        )));
        Ok(events)
    }
}
