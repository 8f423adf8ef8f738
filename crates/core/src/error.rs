//! The one error type: every failure a host can see, with OMA's class name, code and message.
//!
//! The message of each OMA class is built here and nowhere else, so it stays byte-identical to
//! OMA's (`docs/errors.md#error-classes`, `docs/messages.md#the-shape-guard`). Retryability follows
//! OMA's `isRetryableError` (`docs/errors.md#retryability`).

use std::fmt;

use serde_json::{json, Value};

/// The longest free-text part of an error after [`Error::redact`], in chars (the ellipsis of a
/// shortened message included).
pub const MAX_MESSAGE_CHARS: usize = 2048;

/// `text` with every form of each secret ([`crate::secret::secret_forms`]: as it is,
/// base64 or base64url, padded or not, percent-encoded) replaced by `[redacted]`, then
/// shortened to at most `max_chars` chars: cut on a char boundary and ended with `…` (which
/// counts as one of the `max_chars`). Secrets shorter than 4 bytes are left alone.
///
/// Redaction comes first, so a secret that straddles the cut is still found and replaced whole;
/// shortening first would cut the secret and leave its prefix, which no longer matches, in the
/// text. This is the one place where error text is both redacted and bounded.
pub fn redact_and_bound(text: &str, secrets: &[&str], max_chars: usize) -> String {
    let text = crate::secret::redact_known(text, secrets);
    // The byte offset of char number `max_chars`: the text is longer than the bound only if
    // such a char exists.
    if text.char_indices().nth(max_chars).is_none() {
        return text.into_owned();
    }
    let Some(keep) = max_chars.checked_sub(1) else {
        return String::new();
    };
    let cut = text
        .char_indices()
        .nth(keep)
        .map_or(text.len(), |(at, _)| at);
    let mut bounded = String::with_capacity(cut + '…'.len_utf8());
    bounded.push_str(&text[..cut]);
    bounded.push('…');
    bounded
}

/// The detail OMA's adapters give when they have no mapping for a block.
pub const UNSUPPORTED_BLOCK_DETAIL: &str = "OMA does not map video for this adapter yet";

/// A failure, in OMA's terms.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// OMA's `InvalidMessageError`: the input breaks the message shape or a media rule.
    /// Fix the input; retrying cannot help.
    InvalidMessage {
        /// The message, e.g. `messages[0].content must be a ContentBlock[], got string`.
        message: String,
    },
    /// `UnsupportedContentBlockError`: a wire format has no mapping for a block (video on
    /// Anthropic, Bedrock, Gemini or the AI SDK). Choose another provider; never retried.
    /// Build it with [`Error::unsupported_block`], which writes OMA's detail.
    UnsupportedContentBlock {
        /// The adapter (wire format) that refused the block, e.g. `Anthropic Messages`: OMA's
        /// `provider` field of the class.
        provider: String,
        /// The block's `type`, e.g. `video`: OMA's `blockType`.
        block_type: String,
        /// Why, when known (the message's tail after `: `).
        detail: Option<String>,
    },
    /// `UnsupportedToolResultContentError`: a wire format cannot carry a tool-result part.
    UnsupportedToolResultContent {
        /// The wire format, e.g. `Amazon Bedrock Converse`.
        provider: String,
        /// The part, e.g. `file-url` or `image:image/bmp`.
        content_type: String,
        /// Why, when known.
        detail: Option<String>,
    },
    /// `UnsupportedToolCallError`: the provider answered with a tool-call type OMA lacks.
    UnsupportedToolCall {
        /// The adapter's name, e.g. `openai`.
        provider: String,
        /// The unknown type.
        tool_type: String,
    },
    /// A provider answered with an error, an unreadable body, or could not be reached.
    /// Retryable per OMA's `isRetryableError`: no status, 408, 409, 429 and 5xx are.
    Provider {
        /// The adapter's name, e.g. `anthropic` or `openai`.
        provider: String,
        /// The HTTP status, when a response arrived.
        status: Option<u16>,
        /// What went wrong, shortened; never holds a secret.
        message: String,
        /// The provider's own error code, as text (a number is written in decimal), when its
        /// error names one: OpenAI-compatible `error.code`, Anthropic's `error.type`, Gemini's
        /// `error.status`, Bedrock's error type (`docs/errors.md#provider-error-codes`).
        code: Option<String>,
        /// The provider's error type, when its error body has one (OpenAI-compatible
        /// `error.type`, Anthropic's `error.type`).
        error_type: Option<String>,
    },
    /// OMA's `LLMCallTimeoutError`: the provider did not answer in time. Retryable.
    Timeout {
        /// The adapter's name.
        provider: String,
        /// The per-call timeout that passed, in milliseconds.
        timeout_ms: u64,
    },
    /// OMA's whole-run timeout (an `Error` named `TimeoutError`, no code): the run went past
    /// the agent's `timeoutMs` (the run's deadline), whatever it was doing. Raise the limit or
    /// shorten the run. Retryable, as a timeout is.
    RunTimeout {
        /// The agent's name.
        agent: String,
        /// The run's deadline that passed, in milliseconds.
        timeout_ms: u64,
    },
    /// OMA's `EgressPolicyError` (`EGRESS_POLICY_DENIED`): the egress policy forbids the
    /// request's destination, so nothing was sent. Change the policy or the endpoint.
    EgressDenied {
        /// Which destination was refused and why (the origin only, never a path or key).
        message: String,
    },
    /// The request cannot be built from the options given (e.g. a thinking budget larger than
    /// `max_tokens`); OMA throws a plain `Error` here. Fix the configuration.
    InvalidRequest {
        /// The message, OMA's where OMA has one.
        message: String,
    },
    /// A failure the host reported: a `beforeRun` hook that threw, or an external backend that
    /// failed. OMA sees a plain `Error` here: no code, and retryable (it has no HTTP status).
    Host {
        /// The host's message.
        message: String,
    },
    /// OMA's `EgressPolicyError` with code `EGRESS_POLICY_UNSUPPORTED`: the agent has an egress
    /// policy, but its model is the host's own LLM adapter, whose requests no policy can see.
    /// Drop the policy or use a provider.
    EgressUnsupported {
        /// The adapter's name (OMA's `provider` of the error).
        adapter: String,
    },
    /// An error a host's function threw, as it threw it: the agent's own LLM adapter failed
    /// (its `chat` threw, its stream threw or yielded an `error` event). OMA classifies such an
    /// error by its own name, code and status, so they are kept.
    Thrown {
        /// The error's class name, e.g. `Error` or `APIError`.
        name: String,
        /// Its message.
        message: String,
        /// Its `code`, as text, when it has one.
        code: Option<String>,
        /// Its HTTP status (`status` or `statusCode`), when it has one.
        status: Option<u16>,
    },
    /// A host-driven session was given an answer it did not ask for (a tool outcome while it
    /// waits for HTTP, anything after the result, a second answer to one step). Nothing
    /// changed: give the answer the current step asks for.
    Session {
        /// What was expected and what came.
        message: String,
    },
}

/// An answer a state machine did not ask for, handed back unchanged with the reason.
///
/// The three machines (the call, the turn loop and the run) share this convention for misuse:
/// an answer that does not fit the step handed out last is refused with an
/// [`Error::Session`] as the reason, nothing changes, and the caller gets its answer back, to
/// give it where it belongs or to drop it.
#[derive(Debug, PartialEq)]
pub struct Refused<A> {
    /// The answer as it was given.
    pub answer: A,
    /// Why it was refused: always an [`Error::Session`].
    pub reason: Error,
}

impl<A> std::fmt::Display for Refused<A> {
    /// The reason.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.reason.fmt(f)
    }
}

impl<A> Refused<A> {
    /// `answer` refused for the reason `message`.
    pub fn new(answer: A, message: String) -> Self {
        Refused {
            answer,
            reason: Error::Session { message },
        }
    }

    /// The same reason, handing back another answer (when a machine refuses on behalf of the
    /// one it drives).
    pub fn map<B>(self, f: impl FnOnce(A) -> B) -> Refused<B> {
        Refused {
            answer: f(self.answer),
            reason: self.reason,
        }
    }
}

/// The family of an error, mirroring the WIT `error-kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// See [`Error::InvalidMessage`].
    InvalidMessage,
    /// See [`Error::UnsupportedContentBlock`].
    UnsupportedContentBlock,
    /// See [`Error::UnsupportedToolResultContent`].
    UnsupportedToolResultContent,
    /// See [`Error::UnsupportedToolCall`].
    UnsupportedToolCall,
    /// See [`Error::Provider`].
    Provider,
    /// See [`Error::Timeout`].
    Timeout,
    /// See [`Error::EgressDenied`].
    EgressDenied,
    /// See [`Error::Session`].
    SessionState,
    /// See [`Error::InvalidRequest`] and [`Error::Host`].
    Other,
}

/// OMA's error of class `name` (`TypeError`, `RangeError`, `Error`) with OMA's `message`.
pub(crate) fn thrown(name: &str, message: impl Into<String>) -> Error {
    Error::Thrown {
        name: name.to_owned(),
        message: message.into(),
        code: None,
        status: None,
    }
}

/// A `TypeError` with `message`.
pub(crate) fn type_error(message: impl Into<String>) -> Error {
    thrown("TypeError", message)
}

/// A `RangeError` with `message`.
pub(crate) fn range_error(message: impl Into<String>) -> Error {
    thrown("RangeError", message)
}

impl Error {
    /// An `InvalidMessageError` with the given message.
    pub fn invalid(message: impl Into<String>) -> Self {
        Error::InvalidMessage {
            message: message.into(),
        }
    }

    /// OMA's `UnsupportedContentBlockError` for a block of `block_type` that the adapter
    /// `provider` (its label, e.g. `Anthropic Messages`) has no mapping for, with OMA's detail.
    pub fn unsupported_block(provider: &str, block_type: &str) -> Self {
        Error::UnsupportedContentBlock {
            provider: provider.to_owned(),
            block_type: block_type.to_owned(),
            detail: Some(UNSUPPORTED_BLOCK_DETAIL.to_owned()),
        }
    }

    /// The adapter that refused the input, for the classes that name one
    /// (`UnsupportedContentBlockError`, `UnsupportedToolResultContentError`): OMA's `provider`
    /// field of those classes, e.g. `Anthropic Messages`. Not [`Error::provider`], which is the
    /// provider of a provider failure.
    pub fn refusing_adapter(&self) -> Option<&str> {
        match self {
            Error::UnsupportedContentBlock { provider, .. }
            | Error::UnsupportedToolResultContent { provider, .. } => Some(provider),
            _ => None,
        }
    }

    /// The refused block's type, for `UnsupportedContentBlockError` (OMA's `blockType`).
    pub fn block_type(&self) -> Option<&str> {
        match self {
            Error::UnsupportedContentBlock { block_type, .. } => Some(block_type),
            _ => None,
        }
    }

    /// The family of the error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidMessage { .. } => ErrorKind::InvalidMessage,
            Error::UnsupportedContentBlock { .. } => ErrorKind::UnsupportedContentBlock,
            Error::UnsupportedToolResultContent { .. } => ErrorKind::UnsupportedToolResultContent,
            Error::UnsupportedToolCall { .. } => ErrorKind::UnsupportedToolCall,
            Error::Provider { .. } => ErrorKind::Provider,
            Error::Timeout { .. } | Error::RunTimeout { .. } => ErrorKind::Timeout,
            Error::EgressDenied { .. } | Error::EgressUnsupported { .. } => ErrorKind::EgressDenied,
            Error::Session { .. } => ErrorKind::SessionState,
            Error::InvalidRequest { .. } | Error::Host { .. } | Error::Thrown { .. } => {
                ErrorKind::Other
            }
        }
    }

    /// OMA's class name, e.g. `InvalidMessageError`; a thrown error's own.
    pub fn name(&self) -> &str {
        match self {
            Error::Thrown { name, .. } => name,
            Error::InvalidMessage { .. } => "InvalidMessageError",
            Error::UnsupportedContentBlock { .. } => "UnsupportedContentBlockError",
            Error::UnsupportedToolResultContent { .. } => "UnsupportedToolResultContentError",
            Error::UnsupportedToolCall { .. } => "UnsupportedToolCallError",
            Error::Provider { .. } => "ProviderError",
            Error::Timeout { .. } => "LLMCallTimeoutError",
            Error::RunTimeout { .. } => "TimeoutError",
            Error::EgressDenied { .. } | Error::EgressUnsupported { .. } => "EgressPolicyError",
            Error::InvalidRequest { .. } | Error::Host { .. } => "Error",
            Error::Session { .. } => "SessionStateError",
        }
    }

    /// OMA's error code, e.g. `INVALID_MESSAGE`; for a provider failure, the provider's own
    /// code when it sent one (OMA's `errorInfo.code` holds the SDK error's `code`).
    pub fn code(&self) -> Option<&str> {
        match self {
            Error::Provider { code, .. } | Error::Thrown { code, .. } => code.as_deref(),
            other => other.oma_code(),
        }
    }

    /// The provider's error type of a provider failure, when its body has one.
    pub fn error_type(&self) -> Option<&str> {
        match self {
            Error::Provider { error_type, .. } => error_type.as_deref(),
            _ => None,
        }
    }

    /// The code of OMA's class, `None` for classes without one.
    fn oma_code(&self) -> Option<&'static str> {
        match self {
            Error::InvalidMessage { .. } => Some("INVALID_MESSAGE"),
            Error::UnsupportedContentBlock { .. } => Some("UNSUPPORTED_CONTENT_BLOCK"),
            Error::UnsupportedToolResultContent { .. } => Some("UNSUPPORTED_TOOL_RESULT_CONTENT"),
            Error::UnsupportedToolCall { .. } => Some("UNSUPPORTED_TOOL_CALL"),
            Error::Timeout { .. } => Some("LLM_CALL_TIMEOUT"),
            Error::EgressDenied { .. } => Some("EGRESS_POLICY_DENIED"),
            Error::EgressUnsupported { .. } => Some("EGRESS_POLICY_UNSUPPORTED"),
            Error::Session { .. } => Some("SESSION_STATE"),
            Error::Provider { .. }
            | Error::Thrown { .. }
            | Error::RunTimeout { .. }
            | Error::InvalidRequest { .. }
            | Error::Host { .. } => None,
        }
    }

    /// Whether trying again could succeed (OMA's `isRetryableError`,
    /// `docs/errors.md#retryability`): the content and input classes are terminal, since retrying
    /// cannot fix the input or add a wire-format capability; a provider failure is retryable unless
    /// its status is a 4xx other than 408, 409 and 429.
    pub fn retryable(&self) -> bool {
        match self {
            Error::InvalidMessage { .. }
            | Error::UnsupportedContentBlock { .. }
            | Error::UnsupportedToolResultContent { .. }
            | Error::UnsupportedToolCall { .. }
            | Error::InvalidRequest { .. }
            | Error::Session { .. }
            | Error::EgressDenied { .. }
            | Error::EgressUnsupported { .. } => false,
            Error::Timeout { .. } | Error::RunTimeout { .. } | Error::Host { .. } => true,
            Error::Provider { status, .. } | Error::Thrown { status, .. } => match status {
                None => true,
                Some(408 | 409 | 429) => true,
                Some(400..=499) => false,
                // A 2xx that could not be read, an informational answer or a redirect (never
                // followed): asking again would pay for the same answer.
                Some(100..=399) => false,
                Some(_) => true,
            },
        }
    }

    /// The HTTP status of a provider failure, or of a thrown error that has one.
    pub fn http_status(&self) -> Option<u16> {
        match self {
            Error::Provider { status, .. } | Error::Thrown { status, .. } => *status,
            _ => None,
        }
    }

    /// The provider of a provider failure.
    pub fn provider(&self) -> Option<&str> {
        match self {
            Error::Provider { provider, .. } | Error::Timeout { provider, .. } => Some(provider),
            _ => None,
        }
    }

    /// The error with every occurrence of each secret in its free-text parts replaced by
    /// `[redacted]` (a provider may echo a key in its error body, and no error may carry one),
    /// then each of those parts bounded to [`MAX_MESSAGE_CHARS`] chars: see
    /// [`redact_and_bound`]. Secrets shorter than 4 bytes are left alone (they would match
    /// ordinary words).
    pub fn redact(self, secrets: &[&str]) -> Self {
        self.redact_and_bound(secrets, MAX_MESSAGE_CHARS)
    }

    /// [`Error::redact`] with another bound than [`MAX_MESSAGE_CHARS`], e.g. for a provider's
    /// error body quoted in a message.
    pub fn redact_and_bound(self, secrets: &[&str], max_chars: usize) -> Self {
        let scrub = |message: String| {
            let clean = redact_and_bound(&message, secrets, max_chars);
            // Nothing to redact or shorten: keep the original allocation.
            if clean == message {
                message
            } else {
                clean
            }
        };
        match self {
            Error::InvalidMessage { message } => Error::InvalidMessage {
                message: scrub(message),
            },
            Error::UnsupportedToolResultContent {
                provider,
                content_type,
                detail,
            } => Error::UnsupportedToolResultContent {
                provider,
                content_type: scrub(content_type),
                detail: detail.map(scrub),
            },
            Error::UnsupportedToolCall {
                provider,
                tool_type,
            } => Error::UnsupportedToolCall {
                provider,
                tool_type: scrub(tool_type),
            },
            Error::Provider {
                provider,
                status,
                message,
                code,
                error_type,
            } => Error::Provider {
                provider,
                status,
                message: scrub(message),
                code: code.map(scrub),
                error_type: error_type.map(scrub),
            },
            Error::EgressDenied { message } => Error::EgressDenied {
                message: scrub(message),
            },
            Error::InvalidRequest { message } => Error::InvalidRequest {
                message: scrub(message),
            },
            Error::Host { message } => Error::Host {
                message: scrub(message),
            },
            Error::Thrown {
                name,
                message,
                code,
                status,
            } => Error::Thrown {
                name: scrub(name),
                message: scrub(message),
                code: code.map(scrub),
                status,
            },
            other => other,
        }
    }

    /// The error in the JSON shape of the error contract: `{"error": {name, code, message, ...}}`.
    pub fn to_json(&self) -> Value {
        let mut inner = json!({ "name": self.name() });
        if let Some(code) = self.code() {
            inner["code"] = json!(code);
        }
        if let Some(error_type) = self.error_type() {
            inner["type"] = json!(error_type);
        }
        inner["message"] = json!(self.to_string());
        inner["retryable"] = json!(self.retryable());
        if let Some(status) = self.http_status() {
            inner["httpStatus"] = json!(status);
        }
        if let Some(provider) = self.provider() {
            inner["provider"] = json!(provider);
        }
        if let (Some(adapter), Some(block_type)) = (self.refusing_adapter(), self.block_type()) {
            inner["provider"] = json!(adapter);
            inner["blockType"] = json!(block_type);
        }
        json!({ "error": inner })
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidMessage { message } => f.write_str(message),
            Error::UnsupportedContentBlock {
                provider,
                block_type,
                detail,
            } => {
                write!(
                    f,
                    "{provider} cannot represent the \"{block_type}\" content block"
                )?;
                match detail {
                    Some(detail) => write!(f, ": {detail}"),
                    None => Ok(()),
                }
            }
            Error::UnsupportedToolResultContent {
                provider,
                content_type,
                detail,
            } => {
                write!(
                    f,
                    "{provider} cannot represent tool-result content type \"{content_type}\""
                )?;
                match detail {
                    Some(detail) => write!(f, ": {detail}"),
                    None => Ok(()),
                }
            }
            Error::UnsupportedToolCall {
                provider,
                tool_type,
            } => write!(
                f,
                "{provider} returned unsupported tool-call type \"{tool_type}\""
            ),
            Error::Provider {
                status: Some(status),
                message,
                ..
            } => write!(f, "{status} {message}"),
            Error::Timeout { timeout_ms, .. } => {
                write!(f, "LLM call exceeded per-call timeout of {timeout_ms}ms")
            }
            Error::RunTimeout { agent, timeout_ms } => {
                write!(
                    f,
                    "Agent \"{agent}\" exceeded whole-run timeout of {timeout_ms}ms"
                )
            }
            Error::EgressUnsupported { adapter } => write!(
                f,
                "Egress policy cannot enforce provider \"{adapter}\": custom and AI SDK adapters do not expose an enforceable request transport or target contract to OMA."
            ),
            Error::Provider { message, .. }
            | Error::InvalidRequest { message }
            | Error::Host { message }
            | Error::Thrown { message, .. }
            | Error::Session { message }
            | Error::EgressDenied { message } => f.write_str(message),
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secret::MIN_SECRET_LEN;

    #[test]
    fn messages_match_oma() {
        let cases = [
            (
                Error::unsupported_block("Anthropic Messages", "video"),
                "Anthropic Messages cannot represent the \"video\" content block: OMA does not map video for this adapter yet",
            ),
            (
                Error::UnsupportedToolResultContent {
                    provider: "OpenAI-compatible Chat Completions".into(),
                    content_type: "file-url".into(),
                    detail: Some(
                        "file content parts accept inline base64 data, not remote URLs".into(),
                    ),
                },
                "OpenAI-compatible Chat Completions cannot represent tool-result content type \"file-url\": file content parts accept inline base64 data, not remote URLs",
            ),
            (
                Error::UnsupportedToolCall {
                    provider: "openai".into(),
                    tool_type: "custom".into(),
                },
                "openai returned unsupported tool-call type \"custom\"",
            ),
        ];
        for (error, message) in cases {
            assert_eq!(error.to_string(), message);
            assert!(!error.retryable());
        }
    }

    #[test]
    fn provider_retryability_follows_the_status() {
        let provider = |status| Error::Provider {
            provider: "openai".into(),
            status,
            message: "x".into(),
            code: None,
            error_type: None,
        };
        for (status, retryable) in [
            (None, true),
            (Some(400), false),
            (Some(401), false),
            (Some(408), true),
            (Some(409), true),
            (Some(429), true),
            (Some(499), false),
            (Some(500), true),
            (Some(503), true),
        ] {
            assert_eq!(provider(status).retryable(), retryable, "{status:?}");
        }
        let error = provider(Some(429));
        assert_eq!(error.to_string(), "429 x");
        assert_eq!(
            error.to_json(),
            json!({"error": {"name": "ProviderError", "message": "429 x",
                "retryable": true, "httpStatus": 429, "provider": "openai"}})
        );
    }

    #[test]
    fn json_shape_follows_the_contract() {
        let error = Error::invalid("messages must be an array, got string");
        assert_eq!(
            error.to_json(),
            json!({"error": {"name": "InvalidMessageError", "code": "INVALID_MESSAGE",
                "message": "messages must be an array, got string", "retryable": false}})
        );
    }

    /// A provider that echoes the key in its error body must not get it into the error.
    #[test]
    fn secrets_are_redacted_from_messages() {
        let error = Error::Provider {
            provider: "openai".into(),
            status: Some(401),
            message: "Incorrect API key provided: sk-live-123.".into(),
            code: None,
            error_type: None,
        }
        .redact(&["sk-live-123", "", "a"]);
        assert_eq!(
            error.to_string(),
            "401 Incorrect API key provided: [redacted]."
        );
        let timeout = Error::Timeout {
            provider: "openai".into(),
            timeout_ms: 5,
        };
        assert_eq!(timeout.clone().redact(&["openai"]), timeout);
    }

    /// A provider that echoes the key base64-encoded (either alphabet, padded or not) or
    /// percent-encoded must not get it into the error either.
    #[test]
    fn encoded_secrets_are_redacted_from_messages() {
        use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
        use base64::Engine;
        let key = "sk-live-9a/b+c?d~e";
        for echoed in [
            STANDARD.encode(key),
            URL_SAFE_NO_PAD.encode(key),
            "sk-live-9a%2Fb%2Bc%3Fd~e".to_owned(),
            STANDARD.encode(format!("Basic user:{key}")),
        ] {
            let error = Error::Provider {
                provider: "openai".into(),
                status: Some(401),
                message: format!("bad key {echoed} given"),
                code: None,
                error_type: None,
            }
            .redact(&[key]);
            let message = error.to_string();
            assert!(message.contains("[redacted]"), "{message}");
            assert!(!message.contains(&echoed), "{message}");
        }
    }

    /// No prefix of `key` of 4 or more bytes is left in `text`.
    fn no_key_prefix(text: &str, key: &str) -> bool {
        (MIN_SECRET_LEN..=key.len()).all(|n| !text.contains(&key[..n]))
    }

    /// A key that straddles the cut is redacted whole before the text is shortened, wherever
    /// the cut falls in it. Shortening first (as a provider message shortened before its error
    /// is redacted) leaves the key's prefix behind, which this test shows too.
    #[test]
    fn a_key_straddling_the_cut_leaves_no_prefix() {
        let key = "sk-live-0123456789abcdef";
        let max = 512;
        for inside in 1..key.len() {
            let text = format!("{}{key}{}", "é".repeat(max - inside), "y".repeat(max));
            let bounded = redact_and_bound(&text, &[key], max);
            assert!(no_key_prefix(&bounded, key), "{inside}: {bounded}");
            assert_eq!(bounded.chars().count(), max);
            assert!(bounded.ends_with('…'));
            // The other order: shorten, then redact.
            let shortened: String = text.chars().take(max - 1).collect();
            let late = shortened.replace(key, "[redacted]");
            if inside > MIN_SECRET_LEN {
                assert!(!no_key_prefix(&late, key), "{inside}");
            }
        }
        // Through `Error::redact` with its own bound.
        let error = Error::Provider {
            provider: "openai".into(),
            status: Some(401),
            message: format!(
                "{}{key}{}",
                "x".repeat(MAX_MESSAGE_CHARS - 10),
                "y".repeat(100)
            ),
            code: None,
            error_type: None,
        }
        .redact(&[key]);
        let message = error.to_string();
        assert!(no_key_prefix(&message, key), "{message}");
        assert!(message.starts_with("401 xxx"));
    }

    #[test]
    fn bounding_counts_chars_and_cuts_on_a_boundary() {
        assert_eq!(redact_and_bound("", &[], 0), "");
        assert_eq!(redact_and_bound("abc", &[], 3), "abc");
        assert_eq!(redact_and_bound("abcd", &[], 3), "ab…");
        assert_eq!(redact_and_bound("abcd", &[], 1), "…");
        assert_eq!(redact_and_bound("abcd", &[], 0), "");
        assert_eq!(redact_and_bound("😀😀😀😀", &[], 3), "😀😀…");
        assert_eq!(redact_and_bound("  padded  ", &[], 64), "  padded  ");
        // Redaction can make a text short enough not to be cut at all.
        let key = "k".repeat(100);
        assert_eq!(
            redact_and_bound(&format!("key={key}"), &[&key], 20),
            "key=[redacted]"
        );
        // Short secrets are not redacted: they would match ordinary words.
        assert_eq!(redact_and_bound("a key", &["a", "key"], 64), "a key");
    }

    /// Every free-text part of every error is bounded once redacted.
    #[test]
    fn redaction_bounds_every_free_text_part() {
        let long = "z".repeat(10 * MAX_MESSAGE_CHARS);
        let errors = [
            Error::invalid(long.clone()),
            Error::Provider {
                provider: "anthropic".into(),
                status: None,
                message: long.clone(),
                code: None,
                error_type: None,
            },
            Error::Provider {
                provider: "anthropic".into(),
                status: Some(500),
                message: long.clone(),
                code: None,
                error_type: None,
            },
            Error::EgressDenied {
                message: long.clone(),
            },
            Error::InvalidRequest {
                message: long.clone(),
            },
            Error::Host {
                message: long.clone(),
            },
            Error::UnsupportedToolCall {
                provider: "openai".into(),
                tool_type: long.clone(),
            },
            Error::UnsupportedToolResultContent {
                provider: "p".into(),
                content_type: long.clone(),
                detail: Some(long.clone()),
            },
        ];
        for error in errors {
            let name = error.name().to_owned();
            let message = error.redact(&[]).to_string();
            // The longest fixed text around a part is under 100 chars; two parts at most.
            assert!(
                message.chars().count() <= 2 * MAX_MESSAGE_CHARS + 100,
                "{name}: {} chars",
                message.chars().count()
            );
        }
        // Short messages are unchanged.
        let error = Error::invalid("messages must be an array, got string");
        assert_eq!(error.clone().redact(&["secret-key"]), error);
    }

    #[test]
    fn unsupported_block_carries_adapter_and_block_type() {
        let error = Error::unsupported_block("Amazon Bedrock Converse", "video");
        assert_eq!(error.refusing_adapter(), Some("Amazon Bedrock Converse"));
        assert_eq!(error.block_type(), Some("video"));
        // Not a provider failure: the run's `errorInfo.provider` stays the configured one.
        assert_eq!(error.provider(), None);
        assert!(!error.retryable());
        assert_eq!(
            error.to_json(),
            json!({"error": {
                "name": "UnsupportedContentBlockError",
                "code": "UNSUPPORTED_CONTENT_BLOCK",
                "message": "Amazon Bedrock Converse cannot represent the \"video\" content block: OMA does not map video for this adapter yet",
                "retryable": false,
                "provider": "Amazon Bedrock Converse",
                "blockType": "video",
            }})
        );
    }
}
