//! Your own LLM adapter, from Rust: OMA's `LLMAdapter` as a trait ([`LlmAdapter`]). An agent
//! configured with `adapter: Some(HostAdapter { name, .. })` sends no provider request: each
//! model call comes to the host instead (the `component` world's `host.call-model`, the
//! `portable` world's `call-model` step), and [`ScriptedHost::with_adapter`](crate::ScriptedHost::with_adapter)
//! hands it to the adapter registered under that name. The component checks every answer with
//! OMA's rules; the rest of the run (validation, hooks, tools, budgets, structured output,
//! tracing) stays the component's (`docs/agent.md#your-own-llm-adapter`).
//!
//! ```
//! use oma_wasmtime::{LlmAdapter, LlmResponse, ModelCall, ThrownError, TokenUsage, ContentBlock};
//!
//! /// Answers every call with the same text, as OMA's deterministic test adapters do.
//! struct Fixed(&'static str);
//!
//! impl LlmAdapter for Fixed {
//!     fn chat(&mut self, call: &ModelCall) -> Result<LlmResponse, ThrownError> {
//!         let options: serde_json::Value = serde_json::from_str(&call.options).unwrap_or_default();
//!         Ok(LlmResponse {
//!             id: "fixed-1".into(),
//!             content: vec![ContentBlock::Text(self.0.into())],
//!             model: options["model"].as_str().unwrap_or("fixed").into(),
//!             stop_reason: "end_turn".into(),
//!             usage: TokenUsage { input_tokens: 3, output_tokens: 1 },
//!         })
//!     }
//! }
//! # let _ = Fixed("4");
//! ```

use crate::bindings::oma::agent::exchange::{ModelCall, ModelEvent, ModelReply, ThrownError};
use crate::bindings::oma::agent::wire::LlmResponse;

/// OMA's `LLMAdapter`: the model behind an agent, written by the embedder. `chat` answers one
/// call whole; `stream` answers a streamed run's call as the events of a stream (by default,
/// `chat`'s response as its one `done` event). An error is returned as OMA's adapters throw
/// it: [`ThrownError`] keeps its class name, message, code and HTTP status, which classify the
/// run's failure as OMA classifies it.
pub trait LlmAdapter: Send {
    /// OMA's `chat(messages, options)`: `call.messages` is the conversation, `call.options`
    /// OMA's `LLMChatOptions` as JSON text (`model`, `tools`, `maxTokens`, `systemPrompt`, ...).
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
