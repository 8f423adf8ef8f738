//! Anthropic Messages (`POST {base}/v1/messages`), `docs/wire-formats.md#anthropic-messages`: the
//! request body in OMA's key order, the block mapping (rich tool results with PDF documents,
//! own-issued thinking, the `<thinking>` fallback, video refused), the response and SSE stream
//! readers, and the reader of Anthropic's error bodies.
//!
//! - `request`: `ChatRequest` -> `HttpRequest` (conversion, thinking checks, body writing);
//! - `response`: a 2xx body -> `LlmResponse`, and [`error_message`] for error bodies;
//! - `stream`: the incremental decoder of `stream: true` responses.

mod request;
mod response;
mod stream;

#[cfg(test)]
pub(crate) mod tests;

pub use request::{forward, Forward};
pub use response::{error_detail, error_message};

use crate::adapter::{Adapter, Endpoint, ErrorDetail, HttpRequest, StreamDecoder};
use crate::adapter::{ResponseContext, Validated};
use crate::error::Error;
use crate::message::LlmResponse;
use crate::retry::RetryPolicy;

/// The base URL used when the endpoint names none.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";

/// The `anthropic-version` header sent with every request.
pub const API_VERSION: &str = "2023-06-01";

/// The adapter's name: the `provenance` of the reasoning it produces, and the provider of its
/// errors.
pub const NAME: &str = "anthropic";

/// The wire format's label in `UnsupportedContentBlockError` and
/// `UnsupportedToolResultContentError`.
pub const PROVIDER_LABEL: &str = "Anthropic Messages";

/// The Anthropic Messages wire format (OMA's `AnthropicAdapter`, name `anthropic`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Anthropic;

impl Adapter for Anthropic {
    fn error_detail(&self, _headers: &[(String, String)], body: &[u8]) -> ErrorDetail {
        error_detail(body)
    }

    /// OMA's `AnthropicAdapter` makes its client with `@anthropic-ai/sdk`'s defaults.
    fn default_retry(&self) -> RetryPolicy {
        RetryPolicy::stainless()
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
        request::format(request, endpoint, false)
    }

    fn format_count(
        &self,
        request: Validated<'_>,
        endpoint: &Endpoint,
    ) -> Option<Result<HttpRequest, Error>> {
        Some(request::format(request.request(), endpoint, true))
    }

    fn parse_count(&self, body: &[u8]) -> Result<u64, Error> {
        response::parse_count(body)
    }

    fn parse(&self, _context: &ResponseContext, body: &[u8]) -> Result<LlmResponse, Error> {
        response::parse(body)
    }

    fn stream_decoder(&self, _context: &ResponseContext) -> Box<dyn StreamDecoder> {
        Box::new(stream::Decoder::default())
    }
}
