//! WIT values in OMA's JSON shape, written on the host side: what `oma-host` prints for run
//! results, events and hook contexts, while the component is busy running (a host import cannot
//! call back into the component for `messages-to-json`).
//!
//! The shapes are the component's own (`src/message.rs`); a test checks both writers agree.

use serde_json::{json, Map, Value};

use crate::bindings::oma::agent::outcome::{AgentEvent, FailureKind, RunResult, StatusCode};
use crate::bindings::oma::agent::types::{
    ContentBlock, LlmMessage, MediaSource, Role, ToolResultContent, ToolResultPart, ToolUseBlock,
};

/// A message list as OMA JSON.
pub fn messages_json(messages: &[LlmMessage]) -> Value {
    Value::Array(messages.iter().map(message_json).collect())
}

/// One message as OMA JSON: `{"role", "content"}`.
pub fn message_json(message: &LlmMessage) -> Value {
    json!({
        "role": match message.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        },
        "content": message.content.iter().map(block_json).collect::<Vec<_>>(),
    })
}

/// Tool-use input as JSON; text that is not JSON stays a string.
fn input_json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// A tool call as OMA's `tool_use` block.
pub fn tool_use_json(call: &ToolUseBlock) -> Value {
    let mut value = json!({
        "type": "tool_use", "id": call.id, "name": call.name, "input": input_json(&call.input),
    });
    if let Some(signature) = &call.signature {
        value["signature"] = json!(signature);
    }
    value
}

/// One content block as OMA JSON, with its `type` tag.
pub fn block_json(block: &ContentBlock) -> Value {
    match block {
        ContentBlock::Text(text) => json!({"type": "text", "text": text}),
        ContentBlock::Image(image) => {
            json!({"type": "image", "source": source_json(&image.source)})
        }
        ContentBlock::Video(video) => {
            json!({"type": "video", "source": source_json(&video.source)})
        }
        ContentBlock::ToolUse(call) => tool_use_json(call),
        ContentBlock::ToolResult(result) => {
            let mut value = json!({
                "type": "tool_result",
                "tool_use_id": result.tool_use_id,
                "content": content_json(&result.content),
            });
            if let Some(is_error) = result.is_error {
                value["is_error"] = json!(is_error);
            }
            value
        }
        ContentBlock::Reasoning(reasoning) => {
            let mut value = json!({"type": "reasoning", "text": reasoning.text});
            let fields = [
                ("signature", &reasoning.signature),
                ("redactedData", &reasoning.redacted_data),
                ("provenance", &reasoning.provenance),
            ];
            for (name, field) in fields {
                if let Some(text) = field {
                    value[name] = json!(text);
                }
            }
            value
        }
    }
}

/// A media source as OMA JSON.
pub fn source_json(source: &MediaSource) -> Value {
    match source {
        MediaSource::Base64(s) => {
            json!({"type": "base64", "media_type": s.media_type, "data": s.data})
        }
        MediaSource::Url(s) => json!({"type": "url", "media_type": s.media_type, "url": s.url}),
    }
}

/// Tool-result content as OMA JSON: a string, or a list of parts.
pub fn content_json(content: &ToolResultContent) -> Value {
    match content {
        ToolResultContent::Text(text) => json!(text),
        ToolResultContent::Parts(parts) => Value::Array(
            parts
                .iter()
                .map(|part| match part {
                    ToolResultPart::Text(text) => json!({"type": "text", "text": text}),
                    ToolResultPart::Image(source) => {
                        json!({"type": "image", "source": source_json(source)})
                    }
                    ToolResultPart::File(file) => json!({
                        "type": "file", "filename": file.filename, "source": source_json(&file.source),
                    }),
                })
                .collect(),
        ),
    }
}

/// A run result in OMA's `AgentRunResult` shape: `success`, `output`, `messages`,
/// `tokenUsage`, `toolCalls`, `turns`, and `budgetExceeded`, `status`, `errorInfo` when they
/// apply.
pub fn run_result_json(result: &RunResult) -> Value {
    let tool_calls: Vec<Value> = result
        .tool_calls
        .iter()
        .map(|call| {
            let mut record = json!({
                "toolName": call.tool_name,
                "input": input_json(&call.input),
                "output": content_json(&call.output),
            });
            if call.is_error {
                record["isError"] = json!(true);
            }
            record
        })
        .collect();
    let mut value = json!({
        "success": result.success,
        "output": result.output,
        "messages": messages_json(&result.messages),
        "tokenUsage": {
            "input_tokens": result.token_usage.input_tokens,
            "output_tokens": result.token_usage.output_tokens,
        },
        "toolCalls": tool_calls,
        "turns": result.turns,
    });
    if let Some(structured) = &result.structured {
        // The component wrote it as JSON; text that is not (impossible) is left out.
        if let Ok(structured) = serde_json::from_str::<Value>(structured) {
            value["structured"] = structured;
        }
    }
    if result.loop_detected {
        value["loopDetected"] = json!(true);
    }
    if result.budget_exceeded {
        value["budgetExceeded"] = json!(true);
    }
    if let Some(failure) = &result.failure {
        let mut status = Map::new();
        status.insert(
            "code".into(),
            json!(match failure.status.code {
                StatusCode::Error => "error",
                StatusCode::Timeout => "timeout",
                StatusCode::Rejected => "rejected",
                StatusCode::BudgetExhausted => "budget_exhausted",
                StatusCode::Cancelled => "cancelled",
            }),
        );
        if let Some(message) = &failure.status.message {
            status.insert("message".into(), json!(message));
        }
        value["status"] = Value::Object(status);
        let info = &failure.error_info;
        let mut error_info = Map::new();
        error_info.insert(
            "kind".into(),
            json!(match info.kind {
                FailureKind::Validation => "validation",
                FailureKind::Budget => "budget",
                FailureKind::Timeout => "timeout",
                FailureKind::Callback => "callback",
                FailureKind::Provider => "provider",
                FailureKind::Cancellation => "cancellation",
                FailureKind::Unknown => "unknown",
            }),
        );
        if let Some(code) = &info.code {
            error_info.insert("code".into(), json!(code));
        }
        error_info.insert("name".into(), json!(info.name));
        error_info.insert("message".into(), json!(info.message));
        error_info.insert("retryable".into(), json!(info.retryable));
        if let Some(status) = info.http_status {
            error_info.insert("httpStatus".into(), json!(status));
        }
        if let Some(provider) = &info.provider {
            error_info.insert("provider".into(), json!(provider));
        }
        value["errorInfo"] = Value::Object(error_info);
    }
    value
}

/// A stream event as a JSON line: `{"type": "text_delta" | "reasoning_delta" | "text" |
/// "tool_use" | "tool_result" | "budget_exceeded" | "loop_detected" | "done" | "error", ...}`.
pub fn event_json(event: &AgentEvent) -> Value {
    match event {
        AgentEvent::TextDelta(text) => json!({"type": "text_delta", "text": text}),
        AgentEvent::ReasoningDelta(text) => json!({"type": "reasoning_delta", "text": text}),
        AgentEvent::Text(text) => json!({"type": "text", "data": text}),
        AgentEvent::ToolUse(call) => json!({"type": "tool_use", "data": tool_use_json(call)}),
        AgentEvent::ToolResult(result) => json!({
            "type": "tool_result",
            "data": block_json(&ContentBlock::ToolResult(result.clone())),
        }),
        AgentEvent::BudgetExceeded(message) => json!({"type": "budget_exceeded", "data": message}),
        AgentEvent::LoopDetected(info) => json!({"type": "loop_detected", "data": {
            "kind": info.kind, "repetitions": info.repetitions, "detail": info.detail,
        }}),
        AgentEvent::Done(result) => json!({"type": "done", "data": run_result_json(result)}),
        AgentEvent::Error(result) => json!({"type": "error", "data": run_result_json(result)}),
    }
}

/// One of OMA's trace events as OMA's `TraceEvent` JSON (`type`, `runId`, `spanId`,
/// `parentId`?, `taskId`?, `agent`, the event's own fields, `startMs`, `endMs`, `durationMs`),
/// the same text the portable world gives with `payloads: json`.
pub fn trace_json(event: &crate::bindings::oma::agent::exchange::TraceEvent) -> Value {
    use crate::bindings::oma::agent::exchange::{LlmPhase, TraceData};
    let mut out = Map::new();
    let kind = match event.data {
        TraceData::LlmCall(_) => "llm_call",
        TraceData::ToolCall(_) => "tool_call",
        TraceData::Agent(_) => "agent",
    };
    out.insert("type".into(), json!(kind));
    out.insert("runId".into(), json!(event.run_id));
    out.insert("spanId".into(), json!(event.span_id));
    if let Some(parent) = &event.parent_id {
        out.insert("parentId".into(), json!(parent));
    }
    if let Some(task) = &event.task_id {
        out.insert("taskId".into(), json!(task));
    }
    out.insert("agent".into(), json!(event.agent));
    match &event.data {
        TraceData::LlmCall(call) => {
            out.insert("model".into(), json!(call.model));
            let phase = match call.phase {
                LlmPhase::Turn => "turn",
                LlmPhase::Summary => "summary",
            };
            out.insert("phase".into(), json!(phase));
            out.insert("turn".into(), json!(call.turn));
            out.insert(
                "tokens".into(),
                json!({"input_tokens": call.tokens.input_tokens,
                       "output_tokens": call.tokens.output_tokens}),
            );
        }
        TraceData::ToolCall(call) => {
            out.insert("tool".into(), json!(call.tool));
            out.insert("isError".into(), json!(call.is_error));
            if let Some(gate) = &call.gate {
                out.insert("gated".into(), json!(true));
                out.insert("gateAction".into(), json!(gate.action));
                if let Some(reason) = gate.reason.as_deref().filter(|r| !r.is_empty()) {
                    out.insert("gateReason".into(), json!(reason));
                }
            }
            let input = serde_json::from_str(&call.input).unwrap_or(Value::Null);
            out.insert("input".into(), input);
            out.insert("output".into(), json!(call.output));
        }
        TraceData::Agent(run) => {
            out.insert("turns".into(), json!(run.turns));
            out.insert(
                "tokens".into(),
                json!({"input_tokens": run.tokens.input_tokens,
                       "output_tokens": run.tokens.output_tokens}),
            );
            out.insert("toolCalls".into(), json!(run.tool_calls));
        }
    }
    out.insert("startMs".into(), json!(event.start_ms));
    out.insert("endMs".into(), json!(event.end_ms));
    out.insert("durationMs".into(), json!(event.duration_ms));
    Value::Object(out)
}

/// OMA JSON messages the component wrote, read back into WIT values (the conversation a model
/// call hands an [`LlmAdapter`](crate::LlmAdapter)); an error names what is not OMA's shape.
pub fn messages_from_json(value: &Value) -> Result<Vec<LlmMessage>, String> {
    let messages = value.as_array().ok_or("messages must be a list")?;
    messages
        .iter()
        .map(|message| {
            let role = match message["role"].as_str() {
                Some("user") => Role::User,
                Some("assistant") => Role::Assistant,
                _ => return Err(format!("not a message role in {message}")),
            };
            let content = message["content"]
                .as_array()
                .ok_or_else(|| format!("no content list in {message}"))?
                .iter()
                .map(block_from_json)
                .collect::<Result<_, _>>()?;
            Ok(LlmMessage { role, content })
        })
        .collect()
}

fn text_of(value: &Value, key: &str) -> Result<String, String> {
    value[key]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("no `{key}` string in {value}"))
}

fn optional_text(value: &Value, key: &str) -> Option<String> {
    value[key].as_str().map(str::to_owned)
}

/// One content block from OMA JSON.
pub fn block_from_json(block: &Value) -> Result<ContentBlock, String> {
    use crate::bindings::oma::agent::types::{
        ImageBlock, ReasoningBlock, ToolResultBlock, VideoBlock,
    };
    Ok(match block["type"].as_str() {
        Some("text") => ContentBlock::Text(text_of(block, "text")?),
        Some("image") => ContentBlock::Image(ImageBlock {
            source: source_from_json(&block["source"])?,
        }),
        Some("video") => ContentBlock::Video(VideoBlock {
            source: source_from_json(&block["source"])?,
        }),
        Some("tool_use") => ContentBlock::ToolUse(tool_use_from_json(block)?),
        Some("tool_result") => ContentBlock::ToolResult(ToolResultBlock {
            tool_use_id: text_of(block, "tool_use_id")?,
            content: content_from_json(&block["content"])?,
            is_error: block["is_error"].as_bool(),
        }),
        Some("reasoning") => ContentBlock::Reasoning(ReasoningBlock {
            text: text_of(block, "text")?,
            signature: optional_text(block, "signature"),
            redacted_data: optional_text(block, "redactedData"),
            provenance: optional_text(block, "provenance"),
        }),
        _ => return Err(format!("not a content block: {block}")),
    })
}

/// A `tool_use` block from OMA JSON (its input as JSON text).
pub fn tool_use_from_json(block: &Value) -> Result<ToolUseBlock, String> {
    Ok(ToolUseBlock {
        id: text_of(block, "id")?,
        name: text_of(block, "name")?,
        input: block["input"].to_string(),
        signature: optional_text(block, "signature"),
    })
}

fn source_from_json(source: &Value) -> Result<MediaSource, String> {
    use crate::bindings::oma::agent::types::{Base64Source, UrlSource};
    let media_type = text_of(source, "media_type")?;
    Ok(match source["type"].as_str() {
        Some("base64") => MediaSource::Base64(Base64Source {
            media_type,
            data: text_of(source, "data")?,
        }),
        Some("url") => MediaSource::Url(UrlSource {
            media_type,
            url: text_of(source, "url")?,
        }),
        _ => return Err(format!("not a media source: {source}")),
    })
}

fn content_from_json(content: &Value) -> Result<ToolResultContent, String> {
    use crate::bindings::oma::agent::types::FilePart;
    if let Some(text) = content.as_str() {
        return Ok(ToolResultContent::Text(text.to_owned()));
    }
    let parts = content
        .as_array()
        .ok_or_else(|| format!("not tool-result content: {content}"))?;
    parts
        .iter()
        .map(|part| {
            Ok(match part["type"].as_str() {
                Some("text") => ToolResultPart::Text(text_of(part, "text")?),
                Some("image") => ToolResultPart::Image(source_from_json(&part["source"])?),
                Some("file") => ToolResultPart::File(FilePart {
                    filename: text_of(part, "filename")?,
                    source: source_from_json(&part["source"])?,
                }),
                _ => return Err(format!("not a tool-result part: {part}")),
            })
        })
        .collect::<Result<_, String>>()
        .map(ToolResultContent::Parts)
}

/// An LLM response as OMA's `LLMResponse` JSON.
pub fn response_json(response: &crate::bindings::oma::agent::wire::LlmResponse) -> Value {
    json!({
        "id": response.id,
        "content": response.content.iter().map(block_json).collect::<Vec<_>>(),
        "model": response.model,
        "stop_reason": response.stop_reason,
        "usage": {
            "input_tokens": response.usage.input_tokens,
            "output_tokens": response.usage.output_tokens,
        },
    })
}
