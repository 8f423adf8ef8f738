//! Gemini `generateContent` on its REST JSON route (`docs/wire-formats.md#gemini`): the request for
//! `POST {base}/v1beta/models/{model}:generateContent` (streamed:
//! `:streamGenerateContent?alt=sse`, authenticated with `x-goog-api-key`), the reading of its
//! response, and the incremental decoder of its SSE stream.
//!
//! OMA reaches this route through `@google/genai`; the body written here is what the SDK sends:
//! `contents`, `systemInstruction`, `tools`/`toolConfig` (only with tools) and
//! `generationConfig`. Like OMA's adapter, it sends only `maxOutputTokens`, `temperature` and
//! `thinkingConfig`: `top_p`, `top_k`, the OpenAI-only options and `extra_body` are not sent.
//!
//! Ids: Gemini often omits `functionCall.id`, and has no response id at all, so OMA makes them
//! up as `gemini-<epochMs>-<7 base36 chars>` from the clock and `Math.random`. Adapters read no
//! clock and no random source, so [`Gemini`] carries the caller's time ([`Gemini::epoch_ms`]) and
//! a seed ([`Gemini::id_seed`]); the 7 characters come from a SplitMix64 sequence over the seed,
//! the number of messages in the request (so successive turns of one conversation differ even
//! with a fixed seed) and the id's position in the response (the response id first, then each
//! call without an id, in order). The same inputs always give the same ids.

mod request;
mod response;
#[cfg(test)]
pub(crate) mod tests;

use crate::adapter::{ResponseContext, Validated};
use serde_json::Value;

use crate::adapter::{Adapter, Endpoint, ErrorDetail, HttpRequest, StreamDecoder};
use crate::error::Error;
use crate::message::LlmResponse;
use crate::retry::{parse_duration_seconds, RetryPolicy};

/// The name of the adapter: the `provenance` of its reasoning and the provider of its errors.
pub const NAME: &str = "gemini";

/// The wire format's name in `UnsupportedContentBlockError` messages.
pub const PROVIDER_LABEL: &str = "Gemini generateContent";

/// The base URL used when the endpoint gives none.
pub const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com";

/// The Gemini adapter, with what it needs to make up ids deterministically.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Gemini {
    /// The current time in milliseconds since the Unix epoch, written into generated ids
    /// (`gemini-<epoch_ms>-…`); the caller reads the clock, the adapter never does.
    pub epoch_ms: u64,
    /// Seed of the 7 pseudo-random characters of generated ids; give each conversation (or
    /// each run) its own to keep ids apart across conversations.
    pub id_seed: u64,
}

impl Gemini {
    /// An adapter whose generated ids carry `epoch_ms` and derive from `id_seed`.
    pub fn with_ids(epoch_ms: u64, id_seed: u64) -> Self {
        Gemini { epoch_ms, id_seed }
    }

    /// The ids of one turn's answer: drawn from the seed and the turn's message count, so
    /// that each turn of a conversation makes up ids of its own.
    fn ids(&self, context: &ResponseContext) -> IdGen {
        IdGen {
            epoch_ms: self.epoch_ms,
            state: self.id_seed ^ (context.message_count as u64).wrapping_mul(GOLDEN),
        }
    }
}

impl Adapter for Gemini {
    fn error_detail(&self, _headers: &[(String, String)], body: &[u8]) -> ErrorDetail {
        error_detail(body)
    }

    /// `@google/genai` retries nothing unless its client is given `retryOptions`, and OMA gives
    /// none.
    fn default_retry(&self) -> RetryPolicy {
        RetryPolicy::none()
    }

    fn name(&self) -> &str {
        NAME
    }

    fn format_validated(
        &self,
        request: Validated<'_>,
        endpoint: &Endpoint,
    ) -> Result<HttpRequest, Error> {
        let request = request.request();
        if !request.cache.is_empty() {
            return Err(super::cache_unsupported(PROVIDER_LABEL));
        }
        request::format(request, endpoint, false)
    }

    fn format_count(
        &self,
        request: Validated<'_>,
        endpoint: &Endpoint,
    ) -> Option<Result<HttpRequest, Error>> {
        let request = request.request();
        if !request.cache.is_empty() {
            return Some(Err(super::cache_unsupported(PROVIDER_LABEL)));
        }
        Some(request::format(request, endpoint, true))
    }

    /// `{"totalTokens": N}`.
    fn parse_count(&self, body: &[u8]) -> Result<u64, Error> {
        let value: Value = crate::json::from_bytes(body).map_err(|e| super::malformed(NAME, e))?;
        value
            .get("totalTokens")
            .and_then(Value::as_u64)
            .ok_or_else(|| super::malformed(NAME, "the count has no totalTokens"))
    }

    fn parse(&self, context: &ResponseContext, body: &[u8]) -> Result<LlmResponse, Error> {
        response::parse(&context.model, body, self.ids(context))
    }

    fn stream_decoder(&self, context: &ResponseContext) -> Box<dyn StreamDecoder> {
        Box::new(response::GeminiStream::new(
            &context.model,
            self.ids(context),
        ))
    }
}

/// The message of a Gemini error body, `{"error": {"code", "message", "status"}}`.
pub fn error_message(body: &[u8]) -> Option<String> {
    error_detail(body).message
}

/// What a Gemini error body (`{"error": {"code", "message", "status", "details"}}`, Google's
/// `google.rpc.Status`) says: its message; its `status` (e.g. `RESOURCE_EXHAUSTED`) as the
/// code, else the numeric `code` as text; and the `retryDelay` of a `google.rpc.RetryInfo`
/// detail (`"34.4s"`) as the wait it asks for.
pub fn error_detail(body: &[u8]) -> ErrorDetail {
    let Ok(value) = crate::json::from_bytes(body) else {
        return ErrorDetail::default();
    };
    value
        .get("error")
        .map_or_else(ErrorDetail::default, status_detail)
}

/// The detail of one `google.rpc.Status` object (an error body's `error`, or a stream chunk's).
pub(crate) fn status_detail(error: &Value) -> ErrorDetail {
    let text = |key: &str| {
        error
            .get(key)
            .and_then(Value::as_str)
            .filter(|text| !text.is_empty())
            .map(str::to_owned)
    };
    let retry_delay_ms = error
        .get("details")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|detail| {
            detail
                .get("@type")
                .and_then(Value::as_str)
                .is_some_and(|kind| kind.ends_with("google.rpc.RetryInfo"))
        })
        .find_map(|detail| parse_duration_seconds(detail.get("retryDelay")?.as_str()?));
    ErrorDetail {
        message: text("message"),
        code: text("status").or_else(|| crate::adapter::code_text(error.get("code"))),
        error_type: None,
        retry_delay_ms,
    }
}

const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// Makes up ids the way OMA's `generateId` shapes them, deterministically.
#[derive(Clone, Debug)]
pub(crate) struct IdGen {
    epoch_ms: u64,
    state: u64,
}

impl IdGen {
    /// The next id: `gemini-<epoch_ms>-<7 base36 chars>`.
    pub(crate) fn next_id(&mut self) -> String {
        // SplitMix64.
        self.state = self.state.wrapping_add(GOLDEN);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let mut n = z % 36u64.pow(7);
        let mut chars = ['0'; 7];
        for c in chars.iter_mut().rev() {
            *c = char::from_digit((n % 36) as u32, 36).unwrap_or('0');
            n /= 36;
        }
        let suffix: String = chars.iter().collect();
        format!("gemini-{}-{suffix}", self.epoch_ms)
    }
}
