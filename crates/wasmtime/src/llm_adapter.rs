//! Your own LLM adapter, from Rust: OMA's `LLMAdapter` as a trait ([`LlmAdapter`]). An agent
//! configured with `adapter: Some(HostAdapter { name, .. })` sends no provider request: each
//! model call comes to the host instead (the `component` world's `host.call-model`, the
//! `portable` world's `call-model` step, both OMA JSON), is read here into a [`ModelCall`], and
//! [`ScriptedHost::with_adapter`](crate::ScriptedHost::with_adapter) hands it to the adapter
//! registered under that name; its answer goes back as OMA JSON. The component checks every
//! answer with OMA's rules; the rest of the run (validation, hooks, tools, budgets, structured
//! output, tracing) stays the component's (`docs/agent.md#your-own-llm-adapter`).
//!
//! ```
//! use oma_wasmtime::{ContentBlock, LlmAdapter, LlmResponse, ModelCall, ThrownError, TokenUsage};
//!
//! /// Answers every call with the same text, as OMA's deterministic test adapters do.
//! struct Fixed(&'static str);
//!
//! impl LlmAdapter for Fixed {
//!     fn chat(&mut self, call: &ModelCall) -> Result<LlmResponse, ThrownError> {
//!         Ok(LlmResponse {
//!             id: "fixed-1".into(),
//!             content: vec![ContentBlock::Text(self.0.into())],
//!             model: call.options["model"].as_str().unwrap_or("fixed").into(),
//!             stop_reason: "end_turn".into(),
//!             usage: TokenUsage { input_tokens: 3, output_tokens: 1 },
//!         })
//!     }
//! }
//! # let _ = Fixed("4");
//! ```

use serde_json::{json, Value};

use crate::bindings::oma::agent::exchange::{ModelReply as WitReply, ThrownError};
use crate::bindings::oma::agent::types::{LlmMessage, ToolUseBlock};
use crate::bindings::oma::agent::wire::LlmResponse;
use crate::oma_json;

/// One model call of an agent, as its adapter is given it.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelCall {
    /// The adapter's name, as the agent's configuration gives it.
    pub adapter: String,
    /// The conversation (OMA's `messages`), reasoning blocks as they are.
    pub messages: Vec<LlmMessage>,
    /// OMA's `LLMChatOptions` as JSON: `model`, then what the agent sets (`tools`, `maxTokens`,
    /// `temperature`, `topP`, `topK`, `minP`, `parallelToolCalls`, `frequencyPenalty`,
    /// `presencePenalty`, `extraBody`, `thinking`, `preserveReasoningAsText`,
    /// `compressReasoningText`, `systemPrompt`).
    pub options: Value,
    /// Whether the run streams (the adapter's `stream` is then called).
    pub stream: bool,
    /// The most the call may take, in milliseconds.
    pub timeout_ms: u64,
}

impl ModelCall {
    /// The call as the component hands it over: `{"adapter", "messages", "options", "stream",
    /// "timeoutMs"}`.
    pub fn from_json(text: &str) -> Result<ModelCall, String> {
        let call: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        Ok(ModelCall {
            adapter: call["adapter"].as_str().unwrap_or_default().to_owned(),
            messages: oma_json::messages_from_json(&call["messages"])?,
            options: call["options"].clone(),
            stream: call["stream"].as_bool().unwrap_or(false),
            timeout_ms: call["timeoutMs"].as_u64().unwrap_or(0),
        })
    }
}

/// One event of an adapter's stream (OMA's `StreamEvent` as an adapter yields it).
#[derive(Clone, Debug, PartialEq)]
pub enum ModelEvent {
    /// A piece of text.
    Text(String),
    /// A piece of reasoning.
    Reasoning(String),
    /// A tool call (the turn's calls are taken from `done`'s response).
    ToolUse(ToolUseBlock),
    /// The whole response: the stream's last event.
    Done(LlmResponse),
    /// The stream failed: its last event.
    Error(ThrownError),
}

impl ModelEvent {
    /// The event as OMA's `{type, data}`.
    pub fn to_json(&self) -> Value {
        match self {
            ModelEvent::Text(text) => json!({"type": "text", "data": text}),
            ModelEvent::Reasoning(text) => json!({"type": "reasoning", "data": text}),
            ModelEvent::ToolUse(call) => {
                json!({"type": "tool_use", "data": oma_json::tool_use_json(call)})
            }
            ModelEvent::Done(response) => {
                json!({"type": "done", "data": oma_json::response_json(response)})
            }
            ModelEvent::Error(error) => {
                let mut data = json!({"name": error.name, "message": error.message});
                if let Some(code) = &error.code {
                    data["code"] = json!(code);
                }
                if let Some(status) = error.status {
                    data["status"] = json!(status);
                }
                json!({"type": "error", "data": data})
            }
        }
    }
}

/// What an adapter answered to a [`ModelCall`].
#[derive(Clone, Debug, PartialEq)]
pub enum ModelReply {
    /// `chat`'s response.
    Response(LlmResponse),
    /// Its stream's events, in order, ending with `done` or `error`.
    Events(Vec<ModelEvent>),
    /// It threw.
    Failed(ThrownError),
}

impl ModelReply {
    /// The reply as the component takes it: OMA JSON.
    pub fn into_wit(self) -> WitReply {
        match self {
            ModelReply::Response(response) => {
                WitReply::Response(oma_json::response_json(&response).to_string())
            }
            ModelReply::Events(events) => {
                WitReply::Events(events.iter().map(|e| e.to_json().to_string()).collect())
            }
            ModelReply::Failed(error) => WitReply::Failed(error),
        }
    }
}

/// OMA's `LLMAdapter`: the model behind an agent, written by the embedder. `chat` answers one
/// call whole; `stream` answers a streamed run's call as the events of a stream (by default,
/// `chat`'s response as its one `done` event). An error is returned as OMA's adapters throw
/// it: [`ThrownError`] keeps its class name, message, code and HTTP status, which classify the
/// run's failure as OMA classifies it.
pub trait LlmAdapter: Send {
    /// OMA's `chat(messages, options)`.
    fn chat(&mut self, call: &ModelCall) -> Result<LlmResponse, ThrownError>;

    /// OMA's `stream(messages, options)`: the events in order, ending with `done` (the whole
    /// response) or `error`; text and reasoning pieces reach the run's stream as deltas.
    fn stream(&mut self, call: &ModelCall) -> Vec<ModelEvent> {
        match self.chat(call) {
            Ok(response) => vec![ModelEvent::Done(response)],
            Err(error) => vec![ModelEvent::Error(error)],
        }
    }
}

/// The answer of `adapter` to `call`: its stream's events when the run streams, else `chat`'s.
pub(crate) fn answer(adapter: &mut dyn LlmAdapter, call: &ModelCall) -> ModelReply {
    if call.stream {
        return ModelReply::Events(adapter.stream(call));
    }
    match adapter.chat(call) {
        Ok(response) => ModelReply::Response(response),
        Err(error) => ModelReply::Failed(error),
    }
}

/// An error as an adapter throws it: a plain `Error` with `message`.
pub fn thrown(message: impl Into<String>) -> ThrownError {
    ThrownError {
        name: "Error".into(),
        message: message.into(),
        code: None,
        status: None,
    }
}

/// The host's answer to a model call the component handed over as `call` (OMA JSON), through
/// `host`; a call that cannot be read is answered as a failure naming why.
pub(crate) fn reply(host: &mut dyn crate::AgentHost, agent: &str, call: &str) -> WitReply {
    match ModelCall::from_json(call) {
        Ok(call) => host.call_model(agent, call).into_wit(),
        Err(why) => WitReply::Failed(thrown(format!("the model call could not be read: {why}"))),
    }
}
