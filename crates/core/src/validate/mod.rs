//! OMA's validation of typed messages: the rules a typed value can still break.
//!
//! A typed [`LlmMessage`] already has OMA's shape (roles, block types, string fields), so what is
//! left of the shape guard (`docs/messages.md#the-shape-guard`) is the tool-result content rules
//! (`docs/messages.md#tool-result-rules`), the error-result rule (T4), and the media rules
//! (`docs/media.md#media-source-rules`) on video blocks and tool-result parts. They run in OMA's
//! order and the first failure wins, with OMA's exact message and path. Inline images are not
//! inspected (`docs/messages.md#what-passes-unchecked`); an image by URL, this component's
//! addition, is checked under the media rules as a video URL is.

pub mod media;

use crate::error::Error;
use crate::message::{
    ContentBlock, LlmMessage, ToolResultBlock, ToolResultContent, ToolResultPart,
};

/// Checks messages against the size limits ([`crate::limits::check_messages`], an
/// `Error::InvalidRequest` past one), then against OMA's rules; the first broken rule is the
/// error.
pub fn validate_messages(messages: &[LlmMessage]) -> Result<(), Error> {
    // The sizes first: a conversation past a limit is refused before any block is looked at.
    crate::limits::check_messages(messages)?;
    for (i, message) in messages.iter().enumerate() {
        for (j, block) in message.content.iter().enumerate() {
            validate_block_at(block, i, j)?;
        }
    }
    Ok(())
}

/// Checks block `j` of message `i`, for callers that build messages block by block and must
/// report the first broken rule in OMA's order.
pub fn validate_block_at(block: &ContentBlock, i: usize, j: usize) -> Result<(), Error> {
    validate_block(block).map_err(|fault| fault.into_error(i, j))
}

/// Checks a tool result that will be block `j` of message `i`: a host tool's answer is checked
/// like any other input before it travels in a request.
pub fn validate_tool_result_at(result: &ToolResultBlock, i: usize, j: usize) -> Result<(), Error> {
    validate_tool_result(result).map_err(|fault| fault.into_error(i, j))
}

/// Where inside a block a rule was broken, and which; turned into a message only on failure.
pub(crate) enum BlockFault {
    /// A video's source broke a media rule.
    VideoSource(media::Fault),
    /// An image's URL source broke a media rule.
    ImageSource(media::Fault),
    /// The rich content of a tool result is an empty list.
    EmptyParts,
    /// A file part has a blank name.
    BlankFilename(usize),
    /// A part's source broke a media rule.
    PartSource(usize, media::Fault),
    /// An error result has rich content.
    ErrorNotText,
}

impl BlockFault {
    /// The `InvalidMessageError` for block `j` of message `i`.
    pub(crate) fn into_error(self, i: usize, j: usize) -> Error {
        let block = format!("messages[{i}].content[{j}]");
        Error::invalid(match self {
            BlockFault::VideoSource(fault) | BlockFault::ImageSource(fault) => {
                format!("{block}.source{}", fault.suffix())
            }
            BlockFault::EmptyParts => {
                format!("{block}.content must not be an empty content-part array")
            }
            BlockFault::BlankFilename(k) => {
                format!("{block}.content[{k}].filename must be a non-empty string")
            }
            BlockFault::PartSource(k, fault) => {
                format!("{block}.content[{k}].source{}", fault.suffix())
            }
            BlockFault::ErrorNotText => {
                format!("{block}.content must be a string for an error tool result")
            }
        })
    }
}

fn validate_block(block: &ContentBlock) -> Result<(), BlockFault> {
    match block {
        ContentBlock::Video(video) => {
            media::check_source(&video.source).map_err(BlockFault::VideoSource)
        }
        // OMA forwards an inline image unchecked; a URL leaves the process, so its rules hold.
        ContentBlock::Image(image) => match &image.source {
            crate::message::MediaSource::Url { .. } => {
                media::check_source(&image.source).map_err(BlockFault::ImageSource)
            }
            crate::message::MediaSource::Base64 { .. } => Ok(()),
        },
        ContentBlock::ToolResult(result) => validate_tool_result(result),
        ContentBlock::Text(_) | ContentBlock::ToolUse(_) | ContentBlock::Reasoning(_) => Ok(()),
    }
}

fn validate_tool_result(result: &ToolResultBlock) -> Result<(), BlockFault> {
    let ToolResultContent::Parts(parts) = &result.content else {
        return Ok(());
    };
    if parts.is_empty() {
        return Err(BlockFault::EmptyParts);
    }
    for (k, part) in parts.iter().enumerate() {
        match part {
            ToolResultPart::Text { .. } => {}
            ToolResultPart::Image { source } => {
                media::check_source(source).map_err(|f| BlockFault::PartSource(k, f))?
            }
            ToolResultPart::File { filename, source } => {
                if media::is_blank(filename) {
                    return Err(BlockFault::BlankFilename(k));
                }
                media::check_source(source).map_err(|f| BlockFault::PartSource(k, f))?
            }
        }
    }
    if result.is_error == Some(true) {
        return Err(BlockFault::ErrorNotText);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{MediaSource, Role, TextBlock, VideoBlock};

    fn user(content: Vec<ContentBlock>) -> Vec<LlmMessage> {
        vec![
            LlmMessage::user_text("first"),
            LlmMessage {
                role: Role::User,
                content,
            },
        ]
    }

    fn text() -> ContentBlock {
        ContentBlock::Text(TextBlock { text: "t".into() })
    }

    fn video(source: MediaSource) -> ContentBlock {
        ContentBlock::Video(VideoBlock { source })
    }

    fn result(content: ToolResultContent, is_error: Option<bool>) -> ContentBlock {
        ContentBlock::ToolResult(ToolResultBlock {
            tool_use_id: "c1".into(),
            content,
            is_error,
        })
    }

    fn base64(media_type: &str, data: &str) -> MediaSource {
        MediaSource::Base64 {
            media_type: media_type.into(),
            data: data.into(),
        }
    }

    fn url(url: &str) -> MediaSource {
        MediaSource::Url {
            media_type: "image/png".into(),
            url: url.into(),
        }
    }

    #[test]
    fn typed_rules_match_oma_messages() {
        let file = |name: &str, source| ToolResultPart::File {
            filename: name.into(),
            source,
        };
        let cases: Vec<(Vec<ContentBlock>, Option<&str>)> = vec![
            (vec![text(), video(url("https://e.com/v.mp4"))], None),
            (vec![video(base64("video/mp4", "AAAA"))], None),
            (
                vec![text(), video(url("mm_file://abc"))],
                Some("messages[1].content[1].source.url must be an absolute HTTP(S) URL"),
            ),
            (
                vec![video(base64("video/mp4; codecs=x", "AAAA"))],
                Some("messages[1].content[0].source.media_type must be a MIME type without parameters"),
            ),
            (
                vec![video(base64(" ", "AAAA"))],
                Some("messages[1].content[0].source.media_type must be a non-empty string"),
            ),
            (
                vec![video(base64("video/mp4", "AB=="))],
                Some("messages[1].content[0].source.data must contain raw base64 data"),
            ),
            (
                vec![video(base64("video/mp4", ""))],
                Some("messages[1].content[0].source.data must be a non-empty string"),
            ),
            (
                vec![video(url("\u{feff}"))],
                Some("messages[1].content[0].source.url must be a non-empty string"),
            ),
            (
                vec![result(ToolResultContent::Parts(vec![]), None)],
                Some("messages[1].content[0].content must not be an empty content-part array"),
            ),
            (
                vec![result(
                    ToolResultContent::Parts(vec![
                        ToolResultPart::Text { text: "".into() },
                        file(" ", base64("application/pdf", "AAAA")),
                    ]),
                    None,
                )],
                Some("messages[1].content[0].content[1].filename must be a non-empty string"),
            ),
            (
                vec![result(
                    ToolResultContent::Parts(vec![ToolResultPart::Image {
                        source: url("data:image/png;base64,AAAA"),
                    }]),
                    None,
                )],
                Some("messages[1].content[0].content[0].source.url must use HTTP or HTTPS"),
            ),
            (
                vec![result(
                    ToolResultContent::Parts(vec![ToolResultPart::Text { text: "x".into() }]),
                    Some(true),
                )],
                Some("messages[1].content[0].content must be a string for an error tool result"),
            ),
            (
                vec![result(ToolResultContent::Text("boom".into()), Some(true))],
                None,
            ),
        ];
        for (content, expected) in cases {
            let got = validate_messages(&user(content.clone()));
            match expected {
                None => assert_eq!(got, Ok(()), "{content:?}"),
                Some(message) => assert_eq!(got, Err(Error::invalid(message)), "{content:?}"),
            }
        }
    }

    #[test]
    fn images_are_not_inspected() {
        let image = ContentBlock::Image(crate::message::ImageBlock {
            source: crate::message::MediaSource::Base64 {
                media_type: "nonsense".into(),
                data: "base64data".into(),
            },
        });
        assert_eq!(validate_messages(&user(vec![image])), Ok(()));
    }
}
