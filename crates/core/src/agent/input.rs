//! Input preparation (`docs/agent.md#entry-points`, `#validation-and-copies`, `#prompt-and-history`): what a call's input becomes before
//! anything else happens. Validation, the external-backend check and the copy all happen here,
//! at call time, so a failure leaves no trace: no hook call, no request, no progress event, no
//! evaluation, no change to history.

use crate::agent::before_run::{reject_structured_for_external, ExternalKind};
use crate::agent::evaluation::RunInput;
use crate::error::Error;
use crate::message::{ContentBlock, LlmMessage, Role};
use crate::validate::validate_messages;

/// The input of `prompt()`: one user turn.
#[derive(Clone, Debug, PartialEq)]
pub enum PromptInput {
    /// One user text message.
    Text(String),
    /// One user turn of content blocks.
    Blocks(Vec<ContentBlock>),
}

/// The messages of a fresh conversation for `run`, `stream` and `run-agent`.
///
/// A text becomes one user text message (not validated: `""` is allowed). A message list is
/// validated with the shared guard, then refused for an external backend (OMA's order), and is
/// the caller's own copy from then on.
pub fn prepare_run(
    input: RunInput,
    external: Option<ExternalKind>,
) -> Result<Vec<LlmMessage>, Error> {
    match input {
        RunInput::Text(text) => Ok(vec![LlmMessage::user_text(text)]),
        RunInput::Messages(messages) => {
            validate_messages(&messages)?;
            match external {
                Some(kind) => Err(reject_structured_for_external(kind)),
                None => Ok(messages),
            }
        }
    }
}

/// The user turn `prompt()` appends to history.
///
/// Blocks are validated as `[{role: user, content: blocks}]` (so paths read `messages[0]...`,
/// as OMA's do), then refused for an external backend. An empty block list is accepted.
pub fn prepare_prompt(
    input: PromptInput,
    external: Option<ExternalKind>,
) -> Result<LlmMessage, Error> {
    match input {
        PromptInput::Text(text) => Ok(LlmMessage::user_text(text)),
        PromptInput::Blocks(content) => {
            let turn = [LlmMessage {
                role: Role::User,
                content,
            }];
            validate_messages(&turn)?;
            if let Some(kind) = external {
                return Err(reject_structured_for_external(kind));
            }
            let [turn] = turn;
            Ok(turn)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{MediaSource, TextBlock, VideoBlock};

    fn bad_video() -> ContentBlock {
        ContentBlock::Video(VideoBlock {
            source: MediaSource::Url {
                media_type: "video/mp4".into(),
                url: "ftp://example.com/clip.mp4".into(),
            },
        })
    }

    #[test]
    fn a_text_is_one_user_message_and_is_not_validated() {
        assert_eq!(
            prepare_run(RunInput::Text(String::new()), None).unwrap(),
            vec![LlmMessage::user_text("")]
        );
        // Text is fine for external backends.
        assert_eq!(
            prepare_run(RunInput::Text("hi".into()), Some(ExternalKind::Acp)).unwrap(),
            vec![LlmMessage::user_text("hi")]
        );
    }

    #[test]
    fn messages_are_validated_before_the_backend_check() {
        let invalid = vec![LlmMessage {
            role: Role::User,
            content: vec![bad_video()],
        }];
        let err =
            prepare_run(RunInput::Messages(invalid), Some(ExternalKind::Process)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "messages[0].content[0].source.url must use HTTP or HTTPS"
        );
        let err = prepare_run(
            RunInput::Messages(vec![LlmMessage::user_text("hi")]),
            Some(ExternalKind::Process),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "The process external backend accepts string prompts only; structured messages or content blocks cannot be forwarded without loss."
        );
    }

    #[test]
    fn prompt_blocks_become_one_user_turn() {
        assert_eq!(
            prepare_prompt(PromptInput::Blocks(vec![]), None).unwrap(),
            LlmMessage {
                role: Role::User,
                content: vec![]
            }
        );
        let blocks = vec![ContentBlock::Text(TextBlock { text: "a".into() })];
        assert_eq!(
            prepare_prompt(PromptInput::Blocks(blocks.clone()), None)
                .unwrap()
                .content,
            blocks
        );
        let err = prepare_prompt(PromptInput::Blocks(vec![bad_video()]), None).unwrap_err();
        assert!(err
            .to_string()
            .starts_with("messages[0].content[0].source.url"));
        let err = prepare_prompt(PromptInput::Blocks(blocks), Some(ExternalKind::Acp)).unwrap_err();
        assert!(err.to_string().starts_with("The acp external backend"));
        assert_eq!(
            prepare_prompt(PromptInput::Text("t".into()), Some(ExternalKind::Acp)).unwrap(),
            LlmMessage::user_text("t")
        );
    }
}
