//! Amazon Bedrock Converse over its REST JSON API (`docs/wire-formats.md#bedrock-converse`): the
//! request of `POST /model/{modelId}/converse` (or `/converse-stream`), its JSON answer, and the
//! AWS event stream of the streamed answer.
//!
//! OMA reaches Bedrock through the AWS SDK's `ConverseCommand`; this adapter writes the same
//! request on the wire itself. The model id is a path label, URI-encoded as the SDK does (so
//! `...-v1:0` is sent as `...-v1%3A0`). Authentication is a Bedrock API key
//! (`authorization: Bearer`, OMA's `AWS_BEARER_TOKEN_BEDROCK`) or AWS access keys, signed with
//! Signature Version 4 at the time given in [`Endpoint::timestamp`] (see [`sigv4`]).
//!
//! Files: `request.rs` builds the body, `response.rs` reads answers and streams,
//! `eventstream.rs` decodes the binary framing, `sigv4.rs` signs, `b64.rs` reproduces Node's
//! base64 round trip for `bytes` fields.

mod b64;
pub mod eventstream;
mod request;
mod response;
pub mod sigv4;

#[cfg(test)]
pub(crate) mod tests;

use crate::adapter::{ResponseContext, Validated};
use serde_json::Value;

use crate::adapter::{
    join_url, Adapter, Credentials, Endpoint, ErrorDetail, HttpRequest, StreamDecoder,
};
use crate::adapter::{malformed, ChatRequest};
use crate::error::Error;
use crate::message::LlmResponse;
use crate::retry::RetryPolicy;

/// The adapter's name, used as `provenance` and in provider errors.
pub const NAME: &str = "bedrock";

/// The wire format's name in `UnsupportedContentBlockError` and
/// `UnsupportedToolResultContentError`.
pub const PROVIDER_LABEL: &str = "Amazon Bedrock Converse";

/// The region used when the endpoint names none (OMA's hard fallback).
pub const DEFAULT_REGION: &str = "us-east-1";

/// The SigV4 signing name of the Bedrock runtime.
pub const SIGNING_SERVICE: &str = "bedrock";

/// Bedrock Converse. Stateless: everything varying comes in with the request and endpoint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bedrock;

impl Adapter for Bedrock {
    fn error_detail(&self, headers: &[(String, String)], body: &[u8]) -> ErrorDetail {
        error_detail(headers, body)
    }

    /// OMA's `BedrockAdapter` makes a `BedrockRuntimeClient` with the AWS SDK's defaults: the
    /// standard retry mode.
    fn default_retry(&self) -> RetryPolicy {
        RetryPolicy::aws_standard()
    }

    fn name(&self) -> &str {
        NAME
    }

    /// The Converse request. Validates, converts every message (failing on `video` and on
    /// tool-result parts Converse cannot carry), then builds the URL and authenticates.
    ///
    /// Fails with [`Error::InvalidRequest`] for a malformed region or base URL, and for AWS
    /// credentials without [`Endpoint::timestamp`].
    fn format_validated(
        &self,
        request: Validated<'_>,
        endpoint: &Endpoint,
    ) -> Result<HttpRequest, Error> {
        format(request.request(), endpoint, false)
    }

    /// Bedrock's `CountTokens` for the Converse request's messages and system prompt (what
    /// it counts).
    fn format_count(
        &self,
        request: Validated<'_>,
        endpoint: &Endpoint,
    ) -> Option<Result<HttpRequest, Error>> {
        Some(format(request.request(), endpoint, true))
    }

    /// `{"inputTokens": N}`.
    fn parse_count(&self, body: &[u8]) -> Result<u64, Error> {
        let value: Value = crate::json::from_bytes(body).map_err(|e| malformed(NAME, e))?;
        value
            .get("inputTokens")
            .and_then(Value::as_u64)
            .ok_or_else(|| malformed(NAME, "the count has no inputTokens"))
    }

    /// A `/converse` answer. The `id` is always `''`: OMA takes it from the SDK's
    /// `$metadata.requestId`, which on the wire is the `x-amzn-requestid` header, not the body.
    fn parse(&self, context: &ResponseContext, body: &[u8]) -> Result<LlmResponse, Error> {
        response::parse(&context.model, body)
    }

    fn stream_decoder(&self, context: &ResponseContext) -> Box<dyn StreamDecoder> {
        Box::new(response::ConverseStream::new(&context.model))
    }
}

/// The Converse request (`converse-stream` when streamed), or with `count` its `count-tokens`
/// request (`{"input": {"converse": {messages, system?}}}`), at the endpoint's URL and
/// authenticated.
fn format(request: &ChatRequest, endpoint: &Endpoint, count: bool) -> Result<HttpRequest, Error> {
    let converse = request::Body::new(request)?;
    let body = if count {
        converse.write_count(request.size_hint())
    } else {
        converse.write(request.size_hint())
    };
    let region = region(endpoint)?;
    let base = match &endpoint.base_url {
        Some(base) => base.clone(),
        None => default_base_url(region),
    };
    let operation = if count {
        "count-tokens"
    } else if request.stream {
        "converse-stream"
    } else {
        "converse"
    };
    // The model is percent-encoded, slashes included; only `.` and `..` stay segments.
    crate::adapter::check_model_in_path(&request.model.replace('/', "%2F"))?;
    let path = format!(
        "model/{}/{operation}",
        sigv4::uri_encode(request.model.as_bytes(), false)
    );
    let url = url::Url::parse(&join_url(&base, &path))
        .map_err(|e| invalid(format!("the base URL {base:?} does not parse: {e}")))?;
    let mut http = HttpRequest::post_json(url.into(), body);
    match &endpoint.credentials {
        Credentials::None => {}
        Credentials::ApiKey(key) => http
            .headers
            .push(("authorization".into(), format!("Bearer {key}"))),
        Credentials::Aws {
            access_key_id,
            secret_access_key,
            session_token,
        } => {
            let timestamp = endpoint.timestamp.as_deref().ok_or_else(|| {
                invalid(
                    "signing with AWS credentials needs endpoint.timestamp \
                     (YYYYMMDDTHHMMSSZ)"
                        .into(),
                )
            })?;
            let signer = sigv4::Signer {
                access_key_id,
                secret_access_key,
                session_token: session_token.as_deref(),
                region,
                service: SIGNING_SERVICE,
                timestamp,
            };
            sigv4::sign(&mut http, &signer, true)?;
        }
    }
    Ok(http)
}

/// The Bedrock runtime endpoint of a region: `https://bedrock-runtime.{region}.amazonaws.com`.
pub fn default_base_url(region: &str) -> String {
    format!("https://bedrock-runtime.{region}.amazonaws.com")
}

/// The message of a Bedrock error body (`{"message": "..."}`, or `{"Message": "..."}` from
/// the AWS front door), if it has one.
pub fn error_message(body: &[u8]) -> Option<String> {
    error_detail(&[], body).message
}

/// What a Bedrock error answer says: the message of its body, and its error type (e.g.
/// `ThrottlingException`) as the code, from the `x-amzn-errortype` header, else the body's
/// `__type`, else its `code` or `Code`, as the AWS SDK reads it for the error's `name`. The
/// type is cut at the first `:` (a header may add a namespace URL) and after the last `#` (a
/// body may prefix a Smithy namespace).
pub fn error_detail(headers: &[(String, String)], body: &[u8]) -> ErrorDetail {
    let value: Value = crate::json::from_bytes(body).unwrap_or(Value::Null);
    let text = |key: &str| {
        value
            .get(key)
            .and_then(Value::as_str)
            .filter(|text| !text.is_empty())
    };
    let header = headers
        .iter()
        .find(|(name, _)| name == "x-amzn-errortype")
        .map(|(_, value)| value.as_str());
    let code = header
        .or_else(|| text("__type"))
        .or_else(|| text("code"))
        .or_else(|| text("Code"))
        .map(|raw| {
            let raw = raw.split(':').next().unwrap_or(raw);
            raw.rsplit('#').next().unwrap_or(raw).trim().to_owned()
        })
        .filter(|code| !code.is_empty());
    ErrorDetail {
        message: text("message")
            .or_else(|| text("Message"))
            .map(str::to_owned),
        code,
        error_type: None,
        retry_delay_ms: None,
    }
}

/// An event stream's exception member name (`throttlingException`) as the error type the AWS
/// SDK throws (`ThrottlingException`).
pub(crate) fn exception_type_name(member: &str) -> String {
    let mut chars = member.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

fn invalid(message: String) -> Error {
    Error::InvalidRequest {
        message: format!("{NAME}: {message}"),
    }
}

/// The endpoint's region (empty counts as unset), checked to be a plain region name so it
/// cannot bend the URL or the signing scope.
fn region(endpoint: &Endpoint) -> Result<&str, Error> {
    let region = endpoint
        .region
        .as_deref()
        .filter(|r| !r.is_empty())
        .unwrap_or(DEFAULT_REGION);
    if region
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-')
    {
        Ok(region)
    } else {
        Err(invalid(format!(
            "the region must be letters, digits and '-', like us-east-1, got {region:?}"
        )))
    }
}
