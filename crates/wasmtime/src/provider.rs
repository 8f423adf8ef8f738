//! The `provider` interface through a [`Guest`]: one chat turn whole ([`Guest::chat`]) or
//! streamed ([`Guest::stream_chat`], then [`Guest::next_event`] until `None`), and defaults for
//! the WIT records a call needs ([`chat_request`], [`call_options`]).
//!
//! A streamed turn is a `chat-stream` resource owned by the guest's store. [`Guest::close_stream`]
//! drops it (abandoning the response); [`Guest::collect_stream`] reads it to the end and drops it.
//! A handle that is never closed is freed with the instance.

use wasmtime::component::ResourceAny;

use crate::bindings::exports::oma::agent::provider::StreamEvent;
use crate::bindings::oma::agent::types::{Error as WitError, LlmMessage};
use crate::bindings::oma::agent::wire::{
    CallOptions, ChatRequest, EgressPolicy, Endpoint, LlmResponse, RetryOptions, Sampling,
};
use crate::guest::Guest;

/// The most events [`Guest::collect_stream`] reads before it gives up on a stream that never
/// ends.
pub const MAX_STREAM_EVENTS: usize = 100_000;

/// A streamed chat turn in flight: the guest's `chat-stream` resource.
///
/// It belongs to the [`Guest`] that made it; pass it back to that guest only.
#[derive(Debug)]
pub struct ChatStreamHandle {
    resource: ResourceAny,
}

/// A chat request for `model` with `messages` and nothing else set: no system prompt, no
/// tools, default sampling, thinking off, not streamed.
pub fn chat_request(model: &str, messages: Vec<LlmMessage>) -> ChatRequest {
    ChatRequest {
        model: model.to_owned(),
        system_prompt: None,
        messages,
        tools: Vec::new(),
        sampling: Sampling {
            max_tokens: None,
            temperature: None,
            top_p: None,
            top_k: None,
            frequency_penalty: None,
            presence_penalty: None,
            min_p: None,
            parallel_tool_calls: None,
            reasoning_effort: None,
        },
        thinking_budget: None,
        extra_body: None,
        preserve_reasoning_as_text: false,
        stream: false,
    }
}

/// An endpoint for `provider` at `base_url` with `api_key`, no region and no AWS keys.
pub fn endpoint(provider: &str, base_url: Option<&str>, api_key: Option<&str>) -> Endpoint {
    Endpoint {
        provider: provider.to_owned(),
        base_url: base_url.map(str::to_owned),
        api_key: api_key.map(str::to_owned),
        region: None,
        aws: None,
        now_ms: None,
    }
}

/// Call options of one attempt (no retry, so that nothing waits on a provider's default backoff
/// unless the caller asks for it with `retry: None`), a 30 s timeout, a 32 MiB response limit,
/// and the open egress policy (the host's hooks still decide).
pub fn call_options() -> CallOptions {
    CallOptions {
        retry: Some(RetryOptions {
            max_attempts: 1,
            base_delay_ms: 0,
            backoff: 1.0,
        }),
        timeout_ms: 30_000,
        deadline_ms: None,
        max_response_bytes: 32 << 20,
        egress: EgressPolicy::Open,
    }
}

impl Guest {
    /// `provider.chat`: sends one chat turn through wasi-http and returns the parsed response.
    ///
    /// The outer error is a trap or host failure; the inner one the component's typed error.
    pub async fn chat(
        &mut self,
        request: &ChatRequest,
        endpoint: &Endpoint,
        options: &CallOptions,
    ) -> anyhow::Result<Result<LlmResponse, WitError>> {
        let (store, bindings) = self.parts();
        Ok(bindings
            .oma_agent_provider()
            .call_chat(store, request, endpoint, options)
            .await?)
    }

    /// `provider.stream-chat`: starts a streamed chat turn; read it with [`Guest::next_event`].
    ///
    /// The outer error is a trap or host failure; the inner one the component's typed error.
    pub async fn stream_chat(
        &mut self,
        request: &ChatRequest,
        endpoint: &Endpoint,
        options: &CallOptions,
    ) -> anyhow::Result<Result<ChatStreamHandle, WitError>> {
        let (store, bindings) = self.parts();
        Ok(bindings
            .oma_agent_provider()
            .call_stream_chat(store, request, endpoint, options)
            .await?
            .map(|resource| ChatStreamHandle { resource }))
    }

    /// `chat-stream.next`: the next event of a streamed turn, `None` after `done`.
    ///
    /// The outer error is a trap or host failure (or a handle of another guest); the inner one
    /// the component's typed error.
    pub async fn next_event(
        &mut self,
        stream: &ChatStreamHandle,
    ) -> anyhow::Result<Result<Option<StreamEvent>, WitError>> {
        let (store, bindings) = self.parts();
        Ok(bindings
            .oma_agent_provider()
            .chat_stream()
            .call_next(store, stream.resource)
            .await?)
    }

    /// Drops a streamed turn, abandoning whatever of the response has not been read.
    pub async fn close_stream(&mut self, stream: ChatStreamHandle) -> anyhow::Result<()> {
        let (store, _) = self.parts();
        stream.resource.resource_drop_async(store).await?;
        Ok(())
    }

    /// Reads a streamed turn to its end (at most [`MAX_STREAM_EVENTS`] events) and drops it.
    ///
    /// `Ok` holds every event, `done` last; `Err` holds the events before the failure and the
    /// failure. The outer error is a trap, a host failure, or a stream that does not end.
    pub async fn collect_stream(
        &mut self,
        stream: ChatStreamHandle,
    ) -> anyhow::Result<Result<Vec<StreamEvent>, (Vec<StreamEvent>, WitError)>> {
        let mut events = Vec::new();
        let mut outcome = None;
        for _ in 0..MAX_STREAM_EVENTS {
            match self.next_event(&stream).await {
                Ok(Ok(Some(event))) => events.push(event),
                Ok(Ok(None)) => {
                    outcome = Some(Ok(()));
                    break;
                }
                Ok(Err(error)) => {
                    outcome = Some(Err(error));
                    break;
                }
                Err(trap) => {
                    // The instance is unusable; the drop may fail too, and the trap says why.
                    let _ = self.close_stream(stream).await;
                    return Err(trap);
                }
            }
        }
        self.close_stream(stream).await?;
        match outcome {
            Some(Ok(())) => Ok(Ok(events)),
            Some(Err(error)) => Ok(Err((events, error))),
            None => Err(anyhow::anyhow!(
                "the stream did not end within {MAX_STREAM_EVENTS} events"
            )),
        }
    }
}
