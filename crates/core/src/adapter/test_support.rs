//! Builders shared by the adapters' unit tests.

use crate::message::{ContentBlock, LlmMessage, Role, TextBlock};

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
pub fn text(t: &str) -> ContentBlock {
    ContentBlock::Text(TextBlock { text: t.into() })
}
