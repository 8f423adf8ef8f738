//! OMA's `<thinking>` text fallback: reasoning a wire format cannot echo natively, sent as text
//! when the caller opts in (`preserveReasoningAsText`), and never parsed back.

use crate::message::ReasoningBlock;

/// The default cap on the inner text, in characters.
pub const DEFAULT_MAX_CHARS: usize = 1200;

const MARKER: &str = "...[truncated]...";

/// The block as `<thinking>…</thinking>` text: `<thinking>[redacted]</thinking>` for redacted
/// reasoning, the empty string for empty text (callers then emit nothing), and otherwise the
/// text cut to `max_chars` as a 70% head, the `...[truncated]...` marker, and a tail.
/// Lengths count characters where OMA counts UTF-16 units; they agree on BMP text.
pub fn inline_text(block: &ReasoningBlock, max_chars: usize) -> String {
    if block
        .redacted_data
        .as_deref()
        .is_some_and(|d| !d.is_empty())
    {
        return "<thinking>[redacted]</thinking>".into();
    }
    if block.text.is_empty() {
        return String::new();
    }
    format!(
        "<thinking>{}</thinking>",
        truncate(&block.text, max_chars.max(1))
    )
}

fn truncate(text: &str, max_chars: usize) -> String {
    let len = text.chars().count();
    if len <= max_chars {
        return text.to_string();
    }
    if MARKER.len() >= max_chars {
        return text.chars().take(max_chars).collect();
    }
    let budget = max_chars - MARKER.len();
    let head = (budget * 7).div_ceil(10);
    let tail = budget - head;
    let mut out: String = text.chars().take(head).collect();
    out.push_str(MARKER);
    out.extend(text.chars().skip(len - tail));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(text: &str, redacted: Option<&str>) -> ReasoningBlock {
        ReasoningBlock {
            text: text.into(),
            signature: None,
            redacted_data: redacted.map(str::to_string),
            provenance: None,
        }
    }

    #[test]
    fn fallback_follows_oma() {
        assert_eq!(
            inline_text(&block("", Some("x")), 1200),
            "<thinking>[redacted]</thinking>"
        );
        assert_eq!(inline_text(&block("", None), 1200), "");
        assert_eq!(
            inline_text(&block("abc", None), 1200),
            "<thinking>abc</thinking>"
        );
        let long = "a".repeat(50) + &"z".repeat(50);
        let cut = inline_text(&block(&long, None), 37);
        // budget 20: head 14, tail 6
        assert_eq!(
            cut,
            format!(
                "<thinking>{}{MARKER}{}</thinking>",
                "a".repeat(14),
                "z".repeat(6)
            )
        );
        assert_eq!(
            inline_text(&block("abcdef", None), 3),
            "<thinking>abc</thinking>"
        );
    }
}
