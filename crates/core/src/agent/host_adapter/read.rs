//! What a host's LLM adapter answered, read and checked: OMA's `LLMResponse` (`{id, content,
//! model, stop_reason, usage: {input_tokens, output_tokens}}`) and the events of its stream
//! (`{type, data}`: `text`, `reasoning`, `tool_use`, `done`, `error`).
//!
//! An answer is the adapter's code's output, so it is input like any other: every field OMA's
//! types require must be there with its type, and the content must pass OMA's message rules
//! (the shape guard, the component's typing, the media rules), since it joins the conversation
//! the next call sends. Anything else is an [`Error::InvalidMessage`] whose message says which
//! field is wrong, which ends the call (and the run, as a failed result), never a trap. Keys
//! OMA's types do not have are ignored, as OMA ignores them.

use serde_json::Value;

use super::ModelAnswer;
use crate::adapter::StreamEvent;
use crate::error::Error;
use crate::json::object::{Object, ShapeError};
use crate::json::type_word;
use crate::message::{ContentBlock, LlmMessage, LlmResponse, Role, TokenUsage, ToolUseBlock};

/// The start of every message about a malformed response.
const RESPONSE: &str = "the adapter's LLMResponse is not valid";

/// The start of every message about a malformed stream event.
const EVENT: &str = "the adapter's stream event is not valid";

/// An adapter's `LLMResponse` as JSON text, read and checked.
pub fn response_from_json(text: &str) -> Result<LlmResponse, Error> {
    let value = crate::json::from_str(text)
        .map_err(|e| Error::invalid(format!("{RESPONSE}: it is not JSON text: {e}")))?;
    response_from_value(value)
}

/// An adapter's `LLMResponse` as a parsed value, read and checked.
pub fn response_from_value(value: Value) -> Result<LlmResponse, Error> {
    read_response(value, "").map_err(|e| Error::invalid(format!("{RESPONSE}: {e}")))
}

/// One event of an adapter's stream as OMA JSON text (`{type, data}`): a text or reasoning
/// piece, a tool call, `done` with the whole `LLMResponse`, or `error`, whose data (the error
/// the stream yielded, as `{name, message, code, status}`) is the `Err` it becomes.
pub fn answer_from_event_json(text: &str) -> Result<ModelAnswer, Error> {
    let value = crate::json::from_str(text)
        .map_err(|e| Error::invalid(format!("{EVENT}: it is not JSON text: {e}")))?;
    let mut event = Object::new(value).map_err(|e| Error::invalid(format!("{EVENT}: {e}")))?;
    let bad = |e: ShapeError| Error::invalid(format!("{EVENT}: {e}"));
    let kind = event.required_string("type").map_err(bad)?;
    let data = event.take("data");
    let event = match kind.as_str() {
        "text" => StreamEvent::Text(string_data(data, "text")?),
        "reasoning" => StreamEvent::Reasoning(string_data(data, "reasoning")?),
        "tool_use" => StreamEvent::ToolUse(tool_use(data)?),
        "done" => StreamEvent::Done(
            read_response(data.unwrap_or(Value::Null), "data")
                .map_err(|e| Error::invalid(format!("{EVENT}: {e}")))?,
        ),
        "error" => return Err(thrown_from_value(data.unwrap_or(Value::Null))),
        other => {
            return Err(Error::invalid(format!(
                "{EVENT}: `type` must be \"text\", \"reasoning\", \"tool_use\", \"done\" or \
                 \"error\", got {}",
                Value::from(other)
            )))
        }
    };
    Ok(ModelAnswer::Event(event))
}

/// The error an adapter threw, as the host describes it: its class name (`Error` when it gave
/// none), message, `code` and HTTP status, which OMA's classification reads.
pub fn thrown(
    name: Option<String>,
    message: String,
    code: Option<String>,
    status: Option<u16>,
) -> Error {
    Error::Thrown {
        name: name
            .filter(|name| !name.is_empty())
            .unwrap_or_else(|| "Error".to_owned()),
        message,
        code,
        status,
    }
}

/// The data of a stream's `error` event: `{name, message, code, status}` (a number `code` is
/// written as text, `statusCode` is taken for a missing `status`), or a string, its message.
fn thrown_from_value(data: Value) -> Error {
    match data {
        Value::Object(mut fields) => {
            let mut text = |key: &str| match fields.remove(key) {
                Some(Value::String(text)) => Some(text),
                Some(Value::Number(n)) => Some(n.to_string()),
                _ => None,
            };
            let name = text("name");
            let message = text("message").unwrap_or_default();
            let code = text("code");
            let status = ["status", "statusCode"].iter().find_map(|key| {
                fields
                    .get(*key)
                    .and_then(Value::as_u64)
                    .and_then(|n| u16::try_from(n).ok())
            });
            thrown(name, message, code, status)
        }
        Value::String(message) => thrown(None, message, None, None),
        other => thrown(None, other.to_string(), None, None),
    }
}

fn string_data(data: Option<Value>, kind: &str) -> Result<String, Error> {
    match data {
        Some(Value::String(text)) => Ok(text),
        other => Err(Error::invalid(format!(
            "{EVENT}: the data of a {kind:?} event must be a string, got {}",
            type_word(other.as_ref())
        ))),
    }
}

/// A `tool_use` event's block: `{id, name, input}` (its `type`, when given, `tool_use`).
fn tool_use(data: Option<Value>) -> Result<ToolUseBlock, Error> {
    let bad = |e: ShapeError| Error::invalid(format!("{EVENT}: {e}"));
    let mut block = Object::at(data.unwrap_or(Value::Null), "data".into()).map_err(bad)?;
    if let Some(kind) = block.string("type").map_err(bad)? {
        if kind != "tool_use" {
            return Err(bad(block.invalid("type", "must be \"tool_use\"")));
        }
    }
    Ok(ToolUseBlock {
        id: block.required_string("id").map_err(bad)?,
        name: block.required_string("name").map_err(bad)?,
        input: block.required("input").map_err(bad)?,
        signature: block.string("signature").map_err(bad)?,
    })
}

/// Reads an `LLMResponse` at `path` (`""` at the top, `data` in a `done` event); the message
/// names the field by its path.
fn read_response(value: Value, path: &str) -> Result<LlmResponse, String> {
    let mut response = Object::at(value, path.to_owned()).map_err(|e| e.to_string())?;
    let shape = |e: ShapeError| e.to_string();
    let id = response.required_string("id").map_err(shape)?;
    let content = match response.take("content") {
        Some(Value::Array(blocks)) => blocks,
        other => {
            return Err(format!(
                "`{}` must be a ContentBlock[], got {}",
                response.path_of("content"),
                type_word(other.as_ref())
            ))
        }
    };
    let content = content_of(content, &response.path_of("content"))?;
    let model = response.required_string("model").map_err(shape)?;
    let stop_reason = response.required_string("stop_reason").map_err(shape)?;
    let mut usage = response
        .object("usage")
        .map_err(shape)?
        .ok_or_else(|| format!("missing field `{}`", response.path_of("usage")))?;
    let mut count = |key: &'static str| {
        usage
            .u64(key)
            .map_err(shape)?
            .ok_or_else(|| format!("missing field `{}`", usage.path_of(key)))
    };
    let usage = TokenUsage::new(count("input_tokens")?, count("output_tokens")?);
    let response = LlmResponse {
        id,
        content,
        model,
        stop_reason,
        usage,
        stop_sequence: None,
    };
    limits(&response)?;
    Ok(response)
}

/// The limits of a provider's response, which an adapter's keeps too.
fn limits(response: &LlmResponse) -> Result<(), String> {
    crate::limits::check_response("adapter", response).map_err(|e| match e {
        Error::Provider { message, .. } => message,
        other => other.to_string(),
    })
}

/// A message about `messages[0].content` as one about the response's content at `path`.
fn renamed(error: &Error, path: &str) -> String {
    let message = error.to_string();
    match message.strip_prefix("messages[0].content") {
        Some(rest) => format!("{path}{rest}"),
        None => message,
    }
}

/// The blocks of a response as one assistant turn, through OMA's guard, the typing and the
/// media rules: what every message joining a conversation passes. Their messages speak of
/// `messages[0].content`; here that is the response's `content`, at `path`.
fn content_of(blocks: Vec<Value>, path: &str) -> Result<Vec<ContentBlock>, String> {
    let turn = Value::Array(vec![serde_json::json!({
        "role": "assistant",
        "content": Value::Array(blocks),
    })]);
    let mut messages = crate::json::messages_from_value(turn).map_err(|e| renamed(&e, path))?;
    crate::validate::validate_messages(&messages).map_err(|e| renamed(&e, path))?;
    let LlmMessage { role, content } = messages.pop().unwrap_or(LlmMessage {
        role: Role::Assistant,
        content: Vec::new(),
    });
    debug_assert_eq!(role, Role::Assistant);
    Ok(content)
}
