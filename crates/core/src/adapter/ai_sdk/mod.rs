//! The AI SDK bridge (`docs/wire-formats.md#ai-sdk-bridge`, OMA's `AISdkAdapter`, name `ai-sdk`):
//! OMA messages as the Vercel AI SDK's `ModelMessage[]`, handed to a JavaScript host that calls
//! `generateText` or `streamText`, and the host's answer read back as OMA's response.
//!
//! The component cannot call JavaScript itself, so the "HTTP request" this adapter formats is a
//! call for the host to make. This module is the contract between the two.
//!
//! # The bridge protocol, for JavaScript host authors
//!
//! **The call.** A `POST` with the URL `ai-sdk:generateText` (or `ai-sdk:streamText` when the
//! response is streamed), the header `content-type: application/json`, and as its body the JSON
//! of the call options, ready to spread into the AI SDK call:
//!
//! ```json
//! {"maxOutputTokens": 1024, "temperature": 0.2, "topP": 0.9, "topK": 40,
//!  "frequencyPenalty": 0, "presencePenalty": 0,
//!  "...": "the extraBody keys, which may override the sampling keys above",
//!  "model": "openai:gpt-4o",
//!  "messages": [{"role": "user", "content": "hi"}],
//!  "system": "be brief",
//!  "tools": {"lookup": {"description": "Looks up", "inputSchema": {"type": "object"}}},
//!  "maxRetries": 0,
//!  "providerOptions": {"openai": {"reasoningEffort": "low", "parallelToolCalls": false,
//!                                 "minP": 0.1}}}
//! ```
//!
//! Keys that are not set are absent. The host must: resolve `model` (a string id, e.g. through
//! a provider registry's `languageModel(model)`) into a `LanguageModel`; wrap each tool as
//! `tool({description, inputSchema: jsonSchema(inputSchema)})` with no `execute` (the agent
//! runs tools itself); add its own `abortSignal` if it has one; and pass everything else
//! unchanged. `messages` is a valid `ModelMessage[]`: user image parts carry the raw base64
//! text in `image` (the AI SDK accepts a base64 string there, so nothing is decoded), and tool
//! results carry `file-data` parts with base64 `data`.
//!
//! **The answer to `generateText`.** Status 200 and the JSON of these fields of the result
//! (others are ignored): `{"text", "reasoningText"?, "toolCalls": [{"toolCallId", "toolName",
//! "input"}], "finishReason", "usage": {"inputTokens"?, "outputTokens"?}, "response": {"id"?,
//! "modelId"?}}`. A missing `text` counts as `""`, missing `toolCalls` as `[]`, a missing
//! `finishReason` as `"stop"`.
//!
//! **The answer to `streamText`.** Status 200 and newline-delimited JSON: one line per part
//! of `result.fullStream`, as it arrives. The parts read are `{"type": "text-delta", "text"}`,
//! `{"type": "reasoning-delta", "text"}`, `{"type": "tool-call", "toolCallId", "toolName",
//! "input"}`, `{"type": "finish", "finishReason", "totalUsage": {"inputTokens",
//! "outputTokens"}}` and `{"type": "error", "error"}`; every other type is ignored, so the host
//! may forward all parts or only these. An `error` part's `error` must be a string or
//! `{"message", "statusCode"?}` (a JS `Error` stringifies to `{}`: convert it first); the stream
//! fails there. After the loop, the host writes one more line, `{"type": "response", "id"?,
//! "modelId"?, "totalUsage"?}`, from `await result.response` and `await result.totalUsage`;
//! its `totalUsage`, when present, replaces the `finish` part's. A stream that ends without a
//! `finish` part was cut short and fails.
//!
//! **Failures.** When `generateText` or `streamText` throws before any answer exists, the host
//! answers with the error's HTTP status (an `APICallError`'s `statusCode`, else 500) and the
//! body `{"error": {"message": "..."}}`, which [`error_detail`] reads; the host may add the
//! provider's `code` and `type` there (and in an `error` part), which become the error's.

mod request;
mod response;
#[cfg(test)]
pub(crate) mod tests;

use crate::adapter::{Adapter, Endpoint, ErrorDetail, HttpRequest, StreamDecoder};
use crate::adapter::{ResponseContext, Validated};
use crate::error::Error;
use crate::message::LlmResponse;
use crate::retry::RetryPolicy;

/// The name of the adapter: the `provenance` of its reasoning and the provider of its errors.
pub const NAME: &str = "ai-sdk";

/// The wire format's name in `UnsupportedContentBlockError` messages.
pub const PROVIDER_LABEL: &str = "AI SDK";

/// The URL of a `generateText` call.
pub const GENERATE_TEXT_URL: &str = "ai-sdk:generateText";

/// The URL of a `streamText` call.
pub const STREAM_TEXT_URL: &str = "ai-sdk:streamText";

/// The AI SDK bridge. The host holds the model and its keys, so the endpoint's base URL and
/// credentials are not used.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AiSdk;

impl Adapter for AiSdk {
    fn error_detail(&self, _headers: &[(String, String)], body: &[u8]) -> ErrorDetail {
        error_detail(body)
    }

    /// OMA's `AISDKAdapter` calls `generateText` and `streamText` with `maxRetries: 0`.
    fn default_retry(&self) -> RetryPolicy {
        RetryPolicy::none()
    }

    fn name(&self) -> &str {
        NAME
    }

    fn format_validated(
        &self,
        request: Validated<'_>,
        _endpoint: &Endpoint,
    ) -> Result<HttpRequest, Error> {
        let request = request.request();
        if !request.cache.is_empty() {
            return Err(super::cache_unsupported(PROVIDER_LABEL));
        }
        request::format(request)
    }

    fn parse(&self, _context: &ResponseContext, body: &[u8]) -> Result<LlmResponse, Error> {
        response::parse(body)
    }

    fn stream_decoder(&self, _context: &ResponseContext) -> Box<dyn StreamDecoder> {
        Box::new(response::AiSdkStream::default())
    }
}

/// The message of the host's error body, `{"error": {"message"}}`.
pub fn error_message(body: &[u8]) -> Option<String> {
    error_detail(body).message
}

/// What the host's error body `{"error": {"message", "code"?, "type"?}}` says.
pub fn error_detail(body: &[u8]) -> ErrorDetail {
    crate::json::from_bytes(body)
        .ok()
        .and_then(|value| value.get("error").map(super::error_object_detail))
        .unwrap_or_default()
}
