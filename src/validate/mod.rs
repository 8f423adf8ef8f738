//! OMA's validation of typed messages: the rules a typed value can still break.
//!
//! A typed [`LlmMessage`] already has OMA's shape (roles, block types, string fields), so what is
//! left of the shape guard of `behaviour.md` §2 is the tool-result content rules (§2.3), the
//! error-result rule (T4), and the media rules (§2.4) on video blocks and tool-result parts.
//! They run in OMA's order and the first failure wins, with OMA's exact message and path.
//! Images are not inspected (§2.6).

pub mod media;

use crate::error::Error;
use crate::message::{
    ContentBlock, LlmMessage, ToolResultBlock, ToolResultContent, ToolResultPart,
};

/// Checks messages against OMA's rules; the first broken rule is the error.
pub fn validate_messages(messages: &[LlmMessage]) -> Result<(), Error> {
    for (i, message) in messages.iter().enumerate() {
        for (j, block) in message.content.iter().enumerate() {
            validate_block(block).map_err(|fault| fault.into_error(i, j))?;
        }
    }
    Ok(())
}

/// Where inside a block a rule was broken, and which; turned into a message only on failure.
pub(crate) enum BlockFault {
    /// A video's source broke a media rule.
    VideoSource(media::Fault),
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
            BlockFault::VideoSource(fault) => format!("{block}.source{}", fault.suffix()),
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
        ContentBlock::ToolResult(result) => validate_tool_result(result),
        ContentBlock::Text(_)
        | ContentBlock::Image(_)
        | ContentBlock::ToolUse(_)
        | ContentBlock::Reasoning(_) => Ok(()),
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
