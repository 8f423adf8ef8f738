//! The one error type: every failure a host can see, with OMA's class name, code and message.
//!
//! The message of each OMA class is built here and nowhere else, so it stays byte-identical to
//! OMA's (`spec/behaviour.md` §2 and §6). Retryability follows OMA's `isRetryableError`.

use std::fmt;

use serde_json::{json, Value};

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
    UnsupportedContentBlock {
        /// The wire format, e.g. `Anthropic Messages`.
        provider: String,
        /// The block's `type`, e.g. `video`.
        block_type: String,
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
}

impl Error {
    /// An `InvalidMessageError` with the given message.
    pub fn invalid(message: impl Into<String>) -> Self {
        Error::InvalidMessage {
            message: message.into(),
        }
    }

    /// The family of the error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidMessage { .. } => ErrorKind::InvalidMessage,
            Error::UnsupportedContentBlock { .. } => ErrorKind::UnsupportedContentBlock,
            Error::UnsupportedToolResultContent { .. } => ErrorKind::UnsupportedToolResultContent,
            Error::UnsupportedToolCall { .. } => ErrorKind::UnsupportedToolCall,
        }
    }

    /// OMA's class name, e.g. `InvalidMessageError`.
    pub fn name(&self) -> &'static str {
        match self {
            Error::InvalidMessage { .. } => "InvalidMessageError",
            Error::UnsupportedContentBlock { .. } => "UnsupportedContentBlockError",
            Error::UnsupportedToolResultContent { .. } => "UnsupportedToolResultContentError",
            Error::UnsupportedToolCall { .. } => "UnsupportedToolCallError",
        }
    }

    /// OMA's error code, e.g. `INVALID_MESSAGE`.
    pub fn code(&self) -> Option<&'static str> {
        Some(match self {
            Error::InvalidMessage { .. } => "INVALID_MESSAGE",
            Error::UnsupportedContentBlock { .. } => "UNSUPPORTED_CONTENT_BLOCK",
            Error::UnsupportedToolResultContent { .. } => "UNSUPPORTED_TOOL_RESULT_CONTENT",
            Error::UnsupportedToolCall { .. } => "UNSUPPORTED_TOOL_CALL",
        })
    }

    /// Whether trying again could succeed (OMA's `isRetryableError`). Every class here is
    /// terminal: retrying cannot fix the input or add a wire-format capability.
    pub fn retryable(&self) -> bool {
        match self {
            Error::InvalidMessage { .. }
            | Error::UnsupportedContentBlock { .. }
            | Error::UnsupportedToolResultContent { .. }
            | Error::UnsupportedToolCall { .. } => false,
        }
    }

    /// The HTTP status of a provider failure.
    pub fn http_status(&self) -> Option<u16> {
        None
    }

    /// The provider of a provider failure.
    pub fn provider(&self) -> Option<&str> {
        None
    }

    /// The error in the JSON shape of the error contract: `{"error": {name, code, message, ...}}`.
    pub fn to_json(&self) -> Value {
        let mut inner = json!({
            "name": self.name(),
            "code": self.code(),
            "message": self.to_string(),
            "retryable": self.retryable(),
        });
        if let Some(status) = self.http_status() {
            inner["httpStatus"] = json!(status);
        }
        if let Some(provider) = self.provider() {
            inner["provider"] = json!(provider);
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
            } => write!(
                f,
                "{provider} cannot represent content block type \"{block_type}\""
            ),
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
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_match_oma() {
        let cases = [
            (
                Error::UnsupportedContentBlock {
                    provider: "Anthropic Messages".into(),
                    block_type: "video".into(),
                },
                "Anthropic Messages cannot represent content block type \"video\"",
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
    fn json_shape_follows_the_contract() {
        let error = Error::invalid("messages must be an array, got string");
        assert_eq!(
            error.to_json(),
            json!({"error": {"name": "InvalidMessageError", "code": "INVALID_MESSAGE",
                "message": "messages must be an array, got string", "retryable": false}})
        );
    }
}
