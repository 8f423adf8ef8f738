//! Text measured and cut as JavaScript measures and cuts it, in UTF-16 code units
//! (`string.length`, `slice`), never splitting a character: OMA's bounds on stored payloads,
//! reasons, error messages and run ids are counted so, and each rule here is the one every
//! such bound uses.

/// The length of `text` as JavaScript counts it (`string.length`): UTF-16 code units. ASCII
/// text (base64 media above all) is counted by its byte length, without a walk over its
/// characters.
pub fn len(text: &str) -> usize {
    if text.is_ascii() {
        text.len()
    } else {
        text.encode_utf16().count()
    }
}

/// The longest prefix of `text` of at most `units` UTF-16 code units (JavaScript's
/// `slice(0, units)`, without half of a surrogate pair: a character that would be cut in two
/// is left out whole).
pub fn prefix(text: &str, units: usize) -> &str {
    if text.is_ascii() {
        return &text[..units.min(text.len())];
    }
    let mut used = 0;
    for (at, c) in text.char_indices() {
        used += c.len_utf16();
        if used > units {
            return &text[..at];
        }
    }
    text
}

/// `text` cut to `max` units as OMA bounds a payload or a reason: a longer text keeps its
/// [`prefix`] followed by `\n[truncated at {max} characters]`, the marker counted in the bound
/// (so the result has `max` units, or one less when a two-unit character straddles the cut).
pub fn truncate(text: &str, max: usize) -> String {
    if len(text) <= max {
        return text.to_owned();
    }
    let marker = format!("\n[truncated at {max} characters]");
    let keep = max.saturating_sub(len(&marker));
    format!("{}{marker}", prefix(text, keep))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_are_utf16_units() {
        assert_eq!(len("abc"), 3);
        assert_eq!(len("é"), 1);
        assert_eq!(len("\u{1F600}"), 2);
    }

    #[test]
    fn a_prefix_never_splits_a_character() {
        assert_eq!(prefix("abcdef", 4), "abcd");
        assert_eq!(prefix("ab", 4), "ab");
        assert_eq!(prefix("a\u{1F600}b", 2), "a");
        assert_eq!(prefix("a\u{1F600}b", 3), "a\u{1F600}");
    }

    #[test]
    fn a_truncated_text_holds_the_marker_within_the_bound() {
        assert_eq!(truncate("short", 40), "short");
        let cut = truncate(&"x".repeat(100), 40);
        assert_eq!(len(&cut), 40);
        assert!(cut.ends_with("\n[truncated at 40 characters]"));
    }
}
