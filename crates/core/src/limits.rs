//! How much one conversation, one provider response and one JSON text may hold, so that the
//! work and the memory of a run stay bounded by the size of its input (`docs/security.md#limits`).
//!
//! A body limit alone does not bound memory: 26 MB of empty text blocks is a million blocks, and
//! each parsed value costs several times its text. So every JSON text is counted before it is
//! parsed ([`check_json_text`]: values, objects and arrays), and every conversation and every
//! response is counted before anything is done with it ([`check_messages`],
//! [`check_response`]). Each limit is chosen far above realistic use; past one the input is
//! refused with a typed error, before the work.

use crate::error::Error;
use crate::message::{ContentBlock, LlmMessage, LlmResponse, ToolResultContent};

/// The most messages one conversation (a run's input, an agent's history, a request) may hold.
pub const MAX_MESSAGES: usize = 16_384;

/// The most content blocks one message, or one provider response, may hold.
pub const MAX_BLOCKS_PER_MESSAGE: usize = 16_384;

/// The most content blocks one conversation may hold in all its messages together.
pub const MAX_BLOCKS: usize = 65_536;

/// The most parts the rich content of one tool result may hold.
pub const MAX_TOOL_RESULT_PARTS: usize = 4_096;

/// The most tool calls one provider response may carry.
pub const MAX_TOOL_CALLS: usize = 4_096;

/// The most JSON values (objects, arrays, strings, numbers, literals) one JSON text may hold.
pub const MAX_JSON_VALUES: usize = 1 << 20;

/// The most JSON objects and arrays one JSON text may hold.
pub const MAX_JSON_CONTAINERS: usize = 1 << 18;

/// Refuses a JSON text with more than [`MAX_JSON_VALUES`] values or [`MAX_JSON_CONTAINERS`]
/// objects and arrays, counted in one pass over its bytes, without parsing (so that a text
/// which would take hundreds of megabytes once parsed never is). The count is an upper bound
/// for well-formed JSON: every value but the first follows a `,`, `[` or `:` outside strings.
/// The message says which limit was passed.
///
/// Every byte counted is one byte of the text, so a text of at most [`MAX_JSON_CONTAINERS`]
/// bytes (fewer than [`MAX_JSON_VALUES`] too) cannot pass either limit: it is not scanned.
pub fn check_json_text(text: &[u8]) -> Result<(), String> {
    if text.len() <= MAX_JSON_CONTAINERS {
        return Ok(());
    }
    let mut values = 1usize;
    let mut containers = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut i = 0;
    while i < text.len() {
        if in_string {
            if escaped {
                escaped = false;
                i += 1;
                continue;
            }
            // Long strings (base64 media) are skipped a block at a time to their next quote or
            // backslash: the one byte-by-byte pass over a megabyte was most of this check.
            i += plain_string_run(&text[i..]);
            match text.get(i) {
                Some(b'\\') => escaped = true,
                Some(b'"') => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        let byte = text[i];
        i += 1;
        match byte {
            b'"' => in_string = true,
            b'{' | b'[' => {
                containers += 1;
                values += usize::from(byte == b'[');
            }
            b',' | b':' => values += 1,
            _ => continue,
        }
        if containers > MAX_JSON_CONTAINERS {
            return Err(format!(
                "the JSON text holds more than {MAX_JSON_CONTAINERS} objects and arrays, the limit"
            ));
        }
        if values > MAX_JSON_VALUES {
            return Err(format!(
                "the JSON text holds more than {MAX_JSON_VALUES} values, the limit"
            ));
        }
    }
    Ok(())
}

/// How many bytes at the start of `bytes` are neither a quote nor a backslash: tested 64 at a time
/// (arithmetic only, so it vectorises), then byte by byte in the block that has one.
fn plain_string_run(bytes: &[u8]) -> usize {
    let mut at = 0;
    for block in bytes.as_chunks::<64>().0 {
        let hits = block
            .iter()
            .fold(0u8, |acc, &b| acc | u8::from((b == b'"') | (b == b'\\')));
        if hits != 0 {
            break;
        }
        at += 64;
    }
    at + bytes[at..]
        .iter()
        .position(|&b| b == b'"' || b == b'\\')
        .unwrap_or(bytes.len() - at)
}

/// Refuses a conversation past [`MAX_MESSAGES`], [`MAX_BLOCKS_PER_MESSAGE`], [`MAX_BLOCKS`] or
/// [`MAX_TOOL_RESULT_PARTS`], with an `Error::InvalidRequest` that names the limit; counts only,
/// so it costs one pass over the messages' block lists.
pub fn check_messages(messages: &[LlmMessage]) -> Result<(), Error> {
    let too_many = |what: String| Error::InvalidRequest {
        message: format!("the conversation is too large: {what}"),
    };
    if messages.len() > MAX_MESSAGES {
        return Err(too_many(format!(
            "{} messages, more than the {MAX_MESSAGES} a conversation may hold",
            messages.len()
        )));
    }
    let mut blocks = 0usize;
    for (i, message) in messages.iter().enumerate() {
        let count = message.content.len();
        if count > MAX_BLOCKS_PER_MESSAGE {
            return Err(too_many(format!(
                "messages[{i}] holds {count} content blocks, more than the \
                 {MAX_BLOCKS_PER_MESSAGE} a message may hold"
            )));
        }
        blocks += count;
        if blocks > MAX_BLOCKS {
            return Err(too_many(format!(
                "more than {MAX_BLOCKS} content blocks in all, the limit"
            )));
        }
        for (j, block) in message.content.iter().enumerate() {
            if let ContentBlock::ToolResult(result) = block {
                if let ToolResultContent::Parts(parts) = &result.content {
                    if parts.len() > MAX_TOOL_RESULT_PARTS {
                        return Err(too_many(format!(
                            "messages[{i}].content[{j}] holds {} parts, more than the \
                             {MAX_TOOL_RESULT_PARTS} a tool result may hold",
                            parts.len()
                        )));
                    }
                }
            }
        }
    }
    Ok(())
}

/// Refuses a rich tool answer past [`MAX_TOOL_RESULT_PARTS`] parts.
pub fn check_tool_result(content: &ToolResultContent) -> Result<(), Error> {
    match content {
        ToolResultContent::Parts(parts) if parts.len() > MAX_TOOL_RESULT_PARTS => {
            Err(Error::InvalidRequest {
                message: format!(
                    "the tool's answer holds {} parts, more than the {MAX_TOOL_RESULT_PARTS} a \
                     tool result may hold",
                    parts.len()
                ),
            })
        }
        _ => Ok(()),
    }
}

/// Refuses a provider response past [`MAX_BLOCKS_PER_MESSAGE`] content blocks or
/// [`MAX_TOOL_CALLS`] tool calls: a provider error that is not retried (asking again would pay
/// for the same answer), before any tool is called.
pub fn check_response(provider: &str, response: &LlmResponse) -> Result<(), Error> {
    let blocks = response.content.len();
    let calls = response
        .content
        .iter()
        .filter(|block| matches!(block, ContentBlock::ToolUse(_)))
        .count();
    let what = if calls > MAX_TOOL_CALLS {
        format!("{calls} tool calls, more than the {MAX_TOOL_CALLS} a response may carry")
    } else if blocks > MAX_BLOCKS_PER_MESSAGE {
        format!(
            "{blocks} content blocks, more than the {MAX_BLOCKS_PER_MESSAGE} a response may carry"
        )
    } else {
        return Ok(());
    };
    Err(Error::Provider {
        provider: provider.to_owned(),
        status: Some(200),
        message: format!("the response is too large: {what}"),
        code: None,
        error_type: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{LlmMessage, Role, TextBlock, TokenUsage, ToolUseBlock};

    #[test]
    fn long_strings_are_skipped_without_losing_a_quote_or_an_escape() {
        // A string of `n` plain bytes, then `tail`, around every 64-byte boundary: the quote
        // or backslash that ends the plain run is found wherever it falls.
        for n in [0, 1, 62, 63, 64, 65, 127, 128, 129, 1000] {
            let plain = "A".repeat(n);
            for (text, values) in [
                (format!(r#"["{plain}", 1]"#), 3),
                (format!(r#"["{plain}\"[,", 1]"#), 3),
                (format!(r#"["{plain}\\", 1, 2]"#), 4),
                (format!(r#"{{"a": "{plain}", "b": ["{plain}"]}}"#), 5),
            ] {
                assert!(check_json_text(text.as_bytes()).is_ok(), "{n}: {text}");
                // The count is exact: `values` here, one for the outer bracket, one per `,1`.
                let commas = ",1".repeat(MAX_JSON_VALUES - values - 1);
                let at_limit = format!("[{text}{commas}]");
                assert!(check_json_text(at_limit.as_bytes()).is_ok(), "{n}: {text}");
                let over = format!("[{text}{commas},1]");
                assert!(check_json_text(over.as_bytes()).is_err(), "{n}: {text}");
            }
            // An escaped quote does not end a long string: what follows it is still inside.
            let escaped = format!(r#"["{plain}\"{}"]"#, "[".repeat(MAX_JSON_CONTAINERS + 1));
            assert!(check_json_text(escaped.as_bytes()).is_ok(), "{n}");
            // An unterminated string ends the text without a fault.
            assert!(check_json_text(format!("[\"{plain}").as_bytes()).is_ok());
            assert!(check_json_text(format!("[\"{plain}\\").as_bytes()).is_ok());
        }
        // Brackets inside a long string are not counted: a million of them pass.
        let inside = format!("[\"{}\"]", "[,".repeat(MAX_JSON_VALUES));
        assert!(check_json_text(inside.as_bytes()).is_ok());
        // The same after the string's end are.
        let after = format!(
            "[\"{}\", {}]",
            "A".repeat(100),
            "[".repeat(MAX_JSON_CONTAINERS + 1)
        );
        assert!(check_json_text(after.as_bytes()).is_err());
    }

    #[test]
    fn json_texts_are_counted_before_they_are_parsed() {
        assert!(check_json_text(br#"{"a": [1, 2, {"b": "x,y:[{"}], "c": "\"[,"}"#).is_ok());
        assert!(check_json_text(b"").is_ok());
        // The shortest texts past a limit are as long as the limit and one byte more: a text no
        // longer than the container limit is not scanned, and the first byte past it is.
        let brackets = "[".repeat(MAX_JSON_CONTAINERS);
        assert!(check_json_text(brackets.as_bytes()).is_ok());
        assert!(check_json_text(format!("{brackets}[").as_bytes()).is_err());
        let many_values = format!("[{}0]", "0,".repeat(MAX_JSON_VALUES));
        let error = check_json_text(many_values.as_bytes()).unwrap_err();
        assert!(error.contains("1048576 values"), "{error}");
        let nearly = format!("[{}0]", "0,".repeat(MAX_JSON_VALUES - 2));
        assert!(check_json_text(nearly.as_bytes()).is_ok());
        let many_objects = format!("[{}{{}}]", "{},".repeat(MAX_JSON_CONTAINERS));
        let error = check_json_text(many_objects.as_bytes()).unwrap_err();
        assert!(error.contains("objects and arrays"), "{error}");
        // Inside strings nothing counts.
        let quoted = format!("\"{}\"", "{[,:".repeat(MAX_JSON_VALUES));
        assert!(check_json_text(quoted.as_bytes()).is_ok());
    }

    fn text_message(blocks: usize) -> LlmMessage {
        LlmMessage {
            role: Role::User,
            content: vec![
                ContentBlock::Text(TextBlock {
                    text: String::new()
                });
                blocks
            ],
        }
    }

    #[test]
    fn conversations_are_counted() {
        assert!(check_messages(&[text_message(MAX_BLOCKS_PER_MESSAGE)]).is_ok());
        let error = check_messages(&[text_message(MAX_BLOCKS_PER_MESSAGE + 1)]).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("messages[0] holds 16385 content blocks"),
            "{error}"
        );
        assert!(!error.retryable());
        let many = vec![text_message(1); MAX_MESSAGES + 1];
        assert!(check_messages(&many)
            .unwrap_err()
            .to_string()
            .contains("16385 messages"));
        let wide =
            vec![text_message(MAX_BLOCKS_PER_MESSAGE); MAX_BLOCKS / MAX_BLOCKS_PER_MESSAGE + 1];
        assert!(check_messages(&wide)
            .unwrap_err()
            .to_string()
            .contains("in all"));
    }

    #[test]
    fn responses_are_counted() {
        let call = ContentBlock::ToolUse(ToolUseBlock {
            id: "t".into(),
            name: "f".into(),
            input: serde_json::json!({}),
            signature: None,
        });
        let mut response = LlmResponse {
            id: "r".into(),
            content: vec![call; MAX_TOOL_CALLS],
            model: "m".into(),
            stop_reason: "tool_use".into(),
            usage: TokenUsage::default(),
            stop_sequence: None,
        };
        assert!(check_response("anthropic", &response).is_ok());
        response.content.push(response.content[0].clone());
        let error = check_response("anthropic", &response).unwrap_err();
        assert_eq!(
            error.to_string(),
            "200 the response is too large: 4097 tool calls, more than the 4096 a response may carry"
        );
        assert!(!error.retryable());
    }
}
