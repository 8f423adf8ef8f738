//! Helpers shared by the tests: a guest, the fixtures, WIT value builders and error checks.

use oma_host_tests::Shared;
use oma_host_tests::{
    Base64Source, ContentBlock, DriverGuest, DriverHarness, ErrorKind, Guest, GuestOptions,
    Harness, LlmMessage, MediaSource, Role, ToolResultBlock, ToolResultContent, ToolResultPart,
    UrlSource, VideoBlock, WitError,
};
use serde_json::Value;

/// `fixtures/reject.json`: inputs OMA (or the component's typing) rejects, with exact messages.
pub const REJECT: &str = include_str!("../../../fixtures/reject.json");
/// `fixtures/accept.json`: inputs that must pass, with the JSON they come back as.
pub const ACCEPT: &str = include_str!("../../../fixtures/accept.json");
/// `fixtures/guard_cases.json`: the native unit tests' table of the guard (`{name, input, error}`,
/// `error: null` when accepted).
pub const GUARD_CASES: &str = include_str!("../../../fixtures/guard_cases.json");
/// `fixtures/media-rules.json`: the MIME, base64 and URL tables of `docs/media.md`.
pub const MEDIA_RULES: &str = include_str!("../../../fixtures/media-rules.json");
/// `fixtures/conversation.json`: one conversation with every kind of block.
pub const CONVERSATION: &str = include_str!("../../../fixtures/conversation.json");

/// A fresh instance from the shared harness.
pub async fn guest() -> Guest {
    Harness::shared()
        .expect("the harness loads the guest")
        .instantiate()
        .await
        .expect("the guest instantiates")
}

/// A fresh instance of the portable guest (the `driver` and `routes` exports) from the shared
/// harness, with the default options.
pub async fn driver_guest() -> DriverGuest {
    DriverHarness::shared()
        .expect("the portable guest loads")
        .instantiate_with(GuestOptions::default())
        .await
        .expect("it instantiates")
}

/// Parses a fixture.
pub fn fixture(text: &str) -> Value {
    serde_json::from_str(text).expect("fixtures are JSON")
}

/// Checks that `error` is OMA's `InvalidMessageError` (everything but the message).
pub fn assert_invalid_message(error: &WitError) {
    assert_eq!(error.kind, ErrorKind::InvalidMessage, "{error:?}");
    assert_eq!(error.name, "InvalidMessageError", "{error:?}");
    assert_eq!(error.code.as_deref(), Some("INVALID_MESSAGE"), "{error:?}");
    assert!(!error.retryable, "{error:?}");
    assert_eq!(error.http_status, None, "{error:?}");
    assert_eq!(error.provider, None, "{error:?}");
}

/// A user turn.
pub fn user(content: Vec<ContentBlock>) -> LlmMessage {
    LlmMessage {
        role: Role::User,
        content,
    }
}

/// An assistant turn.
pub fn assistant(content: Vec<ContentBlock>) -> LlmMessage {
    LlmMessage {
        role: Role::Assistant,
        content,
    }
}

/// A text block.
pub fn text(text: &str) -> ContentBlock {
    ContentBlock::Text(text.to_owned())
}

/// A base64 media source.
pub fn base64(media_type: &str, data: &str) -> MediaSource {
    MediaSource::Base64(Base64Source {
        media_type: media_type.to_owned(),
        data: data.to_owned(),
    })
}

/// A URL media source.
pub fn url(media_type: &str, url: &str) -> MediaSource {
    MediaSource::Url(UrlSource {
        media_type: media_type.to_owned(),
        url: url.to_owned(),
    })
}

/// A video block.
pub fn video(source: MediaSource) -> ContentBlock {
    ContentBlock::Video(VideoBlock { source })
}

/// A tool result with rich content.
pub fn tool_result(parts: Vec<ToolResultPart>, is_error: Option<bool>) -> ContentBlock {
    ContentBlock::ToolResult(ToolResultBlock {
        tool_use_id: "call_1".to_owned(),
        content: ToolResultContent::Parts(parts),
        is_error,
    })
}
