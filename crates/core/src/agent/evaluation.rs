//! What online evaluation hands to scorers and stores (`docs/agent.md#evaluation-payloads`): the input described,
//! copied in full, or copied with secrets redacted, and every copy bounded to 8192 characters.
//!
//! Pure: no clock, no I/O. Lengths are counted as OMA counts them, in UTF-16 code units (JS
//! `string.length`), and a cut never splits a character.
//!
//! Secrets are redacted by [`redact_secrets`].

use serde_json::{json, Value};

use super::redact::redact_secrets;
use crate::json::messages_to_json;
use crate::message::LlmMessage;

/// The most characters (UTF-16 code units) a scorer input or a stored payload may have.
pub const MAX_PAYLOAD_CHARS: usize = 8192;

/// What replaces the end of a text longer than [`MAX_PAYLOAD_CHARS`].
pub const TRUNCATION_MARKER: &str = "\n[truncated at 8192 characters]";

/// How much of a run's input and output online evaluation keeps (OMA's `storePayloads`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StorePayloads {
    /// Scorers see a description of the input (its kind and size), and nothing is stored.
    #[default]
    None,
    /// As [`StorePayloads::Full`], with secrets replaced by `[redacted]`.
    Redacted,
    /// Scorers see the input itself (the messages as OMA JSON), bounded to 8192 characters.
    Full,
}

/// The input of a run (OMA's `AgentRunInput`): a prompt string or a message list.
#[derive(Clone, Debug, PartialEq)]
pub enum RunInput {
    /// A prompt, which OMA turns into one user text turn.
    Text(String),
    /// Structured input: the conversation to continue.
    Messages(Vec<LlmMessage>),
}

pub use crate::js_text::len as js_len;

/// `text` cut to [`MAX_PAYLOAD_CHARS`] as OMA bounds payloads: a longer text keeps its first
/// `8192 - len(marker)` characters followed by [`TRUNCATION_MARKER`], 8192 in all.
///
/// Characters are UTF-16 code units and a character is never split: when a character outside
/// the Basic Multilingual Plane (two units) straddles the cut, it is dropped whole and the result
/// has 8191 units ([`crate::js_text::truncate`], the rule of every such bound).
pub fn bound(text: &str) -> String {
    crate::js_text::truncate(text, MAX_PAYLOAD_CHARS)
}

/// The input in full: the string itself, or the messages as OMA JSON (`JSON.stringify`).
fn full_text(input: &RunInput) -> String {
    match input {
        RunInput::Text(text) => text.clone(),
        RunInput::Messages(messages) => messages_to_json(messages),
    }
}

/// The description that stands for the input under [`StorePayloads::None`].
fn describe(input: &RunInput) -> String {
    match input {
        RunInput::Text(text) => format!("[string input omitted; {} characters]", js_len(text)),
        RunInput::Messages(messages) => {
            format!("[array input omitted; {} items]", messages.len())
        }
    }
}

/// A text treated under `policy` as a payload: bounded, and for [`StorePayloads::Redacted`]
/// redacted and bounded again.
fn treat(text: &str, policy: StorePayloads) -> String {
    match policy {
        StorePayloads::Redacted => bound(&redact_secrets(&bound(text))),
        StorePayloads::None | StorePayloads::Full => bound(text),
    }
}

/// What OMA passes to scorers as `evalCase.input`, per the table of `docs/agent.md#evaluation-payloads`:
///
/// * [`StorePayloads::None`]: `[string input omitted; <N> characters]` (N in UTF-16 units) or
///   `[array input omitted; <N> items]` (N messages);
/// * [`StorePayloads::Full`]: the string, or the messages as OMA JSON, bounded to 8192;
/// * [`StorePayloads::Redacted`]: as `Full`, then secrets redacted, then bounded again.
pub fn scorer_input(input: &RunInput, policy: StorePayloads) -> String {
    if policy == StorePayloads::None {
        return describe(input);
    }
    treat(&full_text(input), policy)
}

/// The stored `record.payload`: `{"input": ..., "output": ...}` with the input as scorers see
/// it ([`scorer_input`]) and the run's output treated the same way; `None` (absent) under
/// [`StorePayloads::None`].
pub fn stored_payload(input: &RunInput, output: &str, policy: StorePayloads) -> Option<Value> {
    if policy == StorePayloads::None {
        return None;
    }
    Some(json!({
        "input": scorer_input(input, policy),
        "output": treat(output, policy),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{ContentBlock, TextBlock};

    fn messages() -> Vec<LlmMessage> {
        vec![
            LlmMessage::user_text("my api_key=abc123 hello"),
            LlmMessage {
                role: crate::message::Role::Assistant,
                content: vec![ContentBlock::Text(TextBlock { text: "ok".into() })],
            },
        ]
    }

    #[test]
    fn marker_is_31_units() {
        assert_eq!(js_len(TRUNCATION_MARKER), 31);
    }

    #[test]
    fn none_describes_the_input() {
        let text = RunInput::Text("héllo 😀".into());
        assert_eq!(
            scorer_input(&text, StorePayloads::None),
            "[string input omitted; 8 characters]"
        );
        assert_eq!(
            scorer_input(&RunInput::Text(String::new()), StorePayloads::None),
            "[string input omitted; 0 characters]"
        );
        let list = RunInput::Messages(messages());
        assert_eq!(
            scorer_input(&list, StorePayloads::None),
            "[array input omitted; 2 items]"
        );
        assert_eq!(
            scorer_input(&RunInput::Messages(vec![]), StorePayloads::None),
            "[array input omitted; 0 items]"
        );
        assert_eq!(stored_payload(&text, "out", StorePayloads::None), None);
        assert_eq!(stored_payload(&list, "out", StorePayloads::None), None);
    }

    #[test]
    fn full_passes_strings_and_json() {
        let text = RunInput::Text("api_key=abc123".into());
        assert_eq!(scorer_input(&text, StorePayloads::Full), "api_key=abc123");
        let list = RunInput::Messages(messages());
        let scored = scorer_input(&list, StorePayloads::Full);
        // Valid JSON equal to the messages, as the upstream test checks with `JSON.parse`.
        let parsed: Vec<LlmMessage> = serde_json::from_str(&scored).unwrap();
        assert_eq!(parsed, messages());
        assert_eq!(
            scored,
            r#"[{"role":"user","content":[{"type":"text","text":"my api_key=abc123 hello"}]},{"role":"assistant","content":[{"type":"text","text":"ok"}]}]"#
        );
        assert_eq!(
            stored_payload(&text, "token=xyz", StorePayloads::Full),
            Some(json!({"input": "api_key=abc123", "output": "token=xyz"}))
        );
    }

    #[test]
    fn full_bounds_long_input() {
        let long = "a".repeat(10_000);
        let scored = scorer_input(&RunInput::Text(long.clone()), StorePayloads::Full);
        assert_eq!(js_len(&scored), MAX_PAYLOAD_CHARS);
        assert!(scored.ends_with(TRUNCATION_MARKER));
        let payload =
            stored_payload(&RunInput::Text(long.clone()), &long, StorePayloads::Full).unwrap();
        assert_eq!(payload["input"], json!(scored));
        assert_eq!(payload["output"], json!(scored));
        let list = RunInput::Messages(vec![LlmMessage::user_text(long)]);
        let scored = scorer_input(&list, StorePayloads::Full);
        assert_eq!(js_len(&scored), MAX_PAYLOAD_CHARS);
        assert!(scored.starts_with(r#"[{"role":"user""#));
    }

    #[test]
    fn redacted_redacts_input_and_output() {
        let text = RunInput::Text("call with api_key=abc123 please".into());
        assert_eq!(
            scorer_input(&text, StorePayloads::Redacted),
            "call with api_key=[redacted]"
        );
        let list = RunInput::Messages(messages());
        let scored = scorer_input(&list, StorePayloads::Redacted);
        // A bare value runs to a `,` `;` `}` `]` or line end, so in JSON it takes the rest of its
        // string with it: OMA's rule, as OMA applies it to the JSON text.
        assert!(scored.contains(r#""my api_key=[redacted]}]}"#), "{scored}");
        assert!(!scored.contains("abc123") && !scored.contains("hello"));
        // `"text":"api_key=abc123"` is first read whole as the quoted assignment `text` (not
        // sensitive, left as it is); the bare rule then finds the secret inside the string.
        let opening = RunInput::Messages(vec![LlmMessage::user_text("api_key=abc123")]);
        let scored = scorer_input(&opening, StorePayloads::Redacted);
        assert!(scored.contains(r#""api_key=[redacted]}]}"#), "{scored}");
        assert_eq!(
            stored_payload(&text, "Bearer abcdefgh12345", StorePayloads::Redacted),
            Some(json!({
                "input": "call with api_key=[redacted]",
                "output": "Bearer [redacted]",
            }))
        );
    }

    #[test]
    fn redacted_bounds_before_and_after() {
        // The secret sits past the first cut, so it is gone before redaction sees it.
        let mut long = "x ".repeat(5_000);
        long.push_str("password=hunter2");
        let scored = scorer_input(&RunInput::Text(long), StorePayloads::Redacted);
        assert_eq!(js_len(&scored), MAX_PAYLOAD_CHARS);
        assert!(!scored.contains("hunter2"));
        // Redaction can lengthen a short secret; the result is bounded again.
        let many = "pwd=a;".repeat(1_300);
        assert!(js_len(&many) <= MAX_PAYLOAD_CHARS);
        let scored = scorer_input(&RunInput::Text(many), StorePayloads::Redacted);
        assert_eq!(js_len(&scored), MAX_PAYLOAD_CHARS);
        assert!(scored.ends_with(TRUNCATION_MARKER));
        assert!(!scored.contains("pwd=a;"));
    }

    #[test]
    fn bound_cuts_at_exactly_8192() {
        for len in [0, 1, 8191, 8192] {
            let text = "a".repeat(len);
            assert_eq!(bound(&text), text, "{len}");
        }
        for len in [8193, 9000, 100_000] {
            let bounded = bound(&"a".repeat(len));
            assert_eq!(js_len(&bounded), 8192, "{len}");
            assert_eq!(bounded, format!("{}{TRUNCATION_MARKER}", "a".repeat(8161)));
        }
    }

    #[test]
    fn bound_counts_utf16_units_and_never_splits_a_char() {
        // 4096 astral chars are 8192 units: not cut.
        let astral = "😀".repeat(4096);
        assert_eq!(bound(&astral), astral);
        // 4097 are 8194 units: cut. 8161 is odd, so the 4081st char straddles and is dropped.
        let bounded = bound(&"😀".repeat(4097));
        assert_eq!(bounded, format!("{}{TRUNCATION_MARKER}", "😀".repeat(4080)));
        assert_eq!(js_len(&bounded), 8191);
        // With one ASCII char in front the cut falls between chars: exactly 8192.
        let bounded = bound(&format!("a{}", "😀".repeat(4096)));
        assert_eq!(
            bounded,
            format!("a{}{TRUNCATION_MARKER}", "😀".repeat(4080))
        );
        assert_eq!(js_len(&bounded), 8192);
        // Multi-byte BMP chars count one unit each, though UTF-8 spends more bytes.
        let bmp = "é".repeat(8192);
        assert_eq!(bound(&bmp), bmp);
        let bounded = bound(&"é".repeat(8193));
        assert_eq!(js_len(&bounded), 8192);
        assert_eq!(bounded, format!("{}{TRUNCATION_MARKER}", "é".repeat(8161)));
    }

    /// Odd input never panics, and gives exactly this: only a sensitive name with a value is
    /// redacted; a marker or a separator alone is left as it is.
    #[test]
    fn redaction_never_panics_on_odd_input() {
        for (input, expected) in [
            ("=", "="),
            (":", ":"),
            ("\"", "\""),
            ("'='", "'='"),
            ("a=", "a="),
            ("=b", "=b"),
            ("-----BEGIN PRIVATE KEY-----", "-----BEGIN PRIVATE KEY-----"),
            ("Bearer ", "Bearer "),
            ("Authorization:", "Authorization:"),
            ("😀=😀", "😀=😀"),
            ("api_key=😀", "api_key=[redacted]"),
            ("\u{0}\u{FEFF}", "\u{0}\u{FEFF}"),
        ] {
            let redacted = redact_secrets(input);
            assert_eq!(redacted, expected, "{input:?}");
            // Redacting again changes nothing, and short text is not bounded.
            assert_eq!(redact_secrets(&redacted), redacted, "{input:?}");
            assert_eq!(bound(input), input);
            // Repeated past the bound, it is cut to exactly the bound or one unit under it.
            let long = input.repeat(MAX_PAYLOAD_CHARS / js_len(input) + 2);
            let bounded = bound(&long);
            assert!(js_len(&bounded) <= MAX_PAYLOAD_CHARS, "{input:?}");
            assert!(js_len(&bounded) >= MAX_PAYLOAD_CHARS - 1, "{input:?}");
            assert!(bounded.ends_with(TRUNCATION_MARKER), "{input:?}");
        }
    }
}
