//! What online evaluation hands to scorers and stores (`docs/agent.md#evaluation-payloads`): the input described,
//! copied in full, or copied with secrets redacted, and every copy bounded to 8192 characters.
//!
//! Pure: no clock, no I/O. Lengths are counted as OMA counts them, in UTF-16 code units (JS
//! `string.length`), and a cut never splits a character.
//!
//! Secret redaction reproduces OMA's `redactSensitiveText` (`src/utils/redaction.ts`): PEM
//! private keys, `Authorization:` headers, bearer tokens, `name=value` assignments whose name
//! looks sensitive (`api_key`, `password`, `token`, ...), and token literals (`sk-...`,
//! `ghp_...`, `github_pat_...`, `AKIA...`, `xox?-...`), in that order.

use std::sync::OnceLock;

use regex_lite::{Captures, Regex};
use serde_json::{json, Value};

use crate::json::messages_to_json;
use crate::message::LlmMessage;

/// The most characters (UTF-16 code units) a scorer input or a stored payload may have.
pub const MAX_PAYLOAD_CHARS: usize = 8192;

/// What replaces the end of a text longer than [`MAX_PAYLOAD_CHARS`].
pub const TRUNCATION_MARKER: &str = "\n[truncated at 8192 characters]";

/// What replaces a secret.
pub const REDACTED: &str = "[redacted]";

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

/// The length of `text` as JavaScript counts it: UTF-16 code units.
pub fn js_len(text: &str) -> usize {
    text.chars().map(char::len_utf16).sum()
}

/// `text` cut to [`MAX_PAYLOAD_CHARS`] as OMA bounds payloads: a longer text keeps its first
/// `8192 - len(marker)` characters followed by [`TRUNCATION_MARKER`], 8192 in all.
///
/// Characters are UTF-16 code units and a character is never split: when a character outside
/// the Basic Multilingual Plane (two units) straddles the cut, it is dropped whole and the result
/// has 8191 units.
pub fn bound(text: &str) -> String {
    if js_len(text) <= MAX_PAYLOAD_CHARS {
        return text.to_owned();
    }
    let keep = MAX_PAYLOAD_CHARS - js_len(TRUNCATION_MARKER);
    let mut used = 0;
    let mut end = 0;
    for (at, c) in text.char_indices() {
        if used + c.len_utf16() > keep {
            break;
        }
        used += c.len_utf16();
        end = at + c.len_utf8();
    }
    let mut bounded = String::with_capacity(end + TRUNCATION_MARKER.len());
    bounded.push_str(&text[..end]);
    bounded.push_str(TRUNCATION_MARKER);
    bounded
}

/// JavaScript's `\s` (without the `u` flag), for the patterns below: regex-lite's `\s` is
/// ASCII only.
const JS_SPACE: &str = "\\t\\n\\x0B\\x0C\\r \u{A0}\u{1680}\u{2000}-\u{200A}\u{2028}\u{2029}\u{202F}\u{205F}\u{3000}\u{FEFF}";

/// OMA's patterns, compiled once.
struct Patterns {
    private_key: Regex,
    authorization: Regex,
    bearer: Regex,
    assignment: Regex,
    sensitive_name: Regex,
    token_literals: [Regex; 5],
}

fn compile(pattern: &str) -> Regex {
    // The patterns are constants, pinned by the tests; compiling them cannot depend on input.
    Regex::new(pattern).expect("redaction patterns are valid")
}

fn patterns() -> &'static Patterns {
    static PATTERNS: OnceLock<Patterns> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        let s = JS_SPACE;
        Patterns {
            private_key: compile(
                r"-----BEGIN [A-Z ]*PRIVATE KEY-----(?s:.)*?-----END [A-Z ]*PRIVATE KEY-----",
            ),
            authorization: compile(&format!(
                r"(?i)\b(Authorization[{s}]*:[{s}]*)(?:Bearer[{s}]+)?[^\n\r,;}}]+"
            )),
            bearer: compile(&format!(r"(?i)\bBearer[{s}]+[A-Za-z0-9._~+/=-]{{8,}}")),
            assignment: compile(&format!(
                r#"(["']?)([A-Za-z_][A-Za-z0-9_.-]*)(["']?[{s}]*[:=][{s}]*)(["']?)([^"',{s}\}}\]]+)(["']?)"#
            )),
            sensitive_name: compile(
                r"(?i)(?:api[_-]?key|apiKey|secret|password|passwd|pwd|private[_-]?key|privateKey|access[_-]?key|accessKey|accessToken|refreshToken|idToken|githubToken|authorization|auth[_-]?token|authToken|cookie|session|credential|bearer|^token$|[_-]token$|^token[_-])",
            ),
            token_literals: [
                compile(r"\bsk-[A-Za-z0-9_-]{16,}\b"),
                compile(r"\bgh[pousr]_[A-Za-z0-9_]{20,}\b"),
                compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}\b"),
                compile(r"\bAKIA[0-9A-Z]{16}\b"),
                compile(r"\bxox[baprs]-[A-Za-z0-9-]{10,}\b"),
            ],
        }
    })
}

/// Whether a field name looks like it holds a secret (OMA's `isSensitiveName`): `api_key`,
/// `apiKey`, `password`, `secret`, `authorization`, `cookie`, `session`, `token`, `x-token`, ...
pub fn is_sensitive_name(name: &str) -> bool {
    patterns().sensitive_name.is_match(name)
}

/// `text` with secrets replaced by `[redacted]`, as OMA's `redactSensitiveText` does it:
///
/// 1. PEM private keys (`-----BEGIN ... PRIVATE KEY-----` to the matching `END` line), whole;
/// 2. `Authorization: <value>` up to the end of the line or a `,` `;` `}`: the value;
/// 3. `Bearer <8+ token chars>`: the token;
/// 4. `name = value` or `"name": "value"` where the name is sensitive ([`is_sensitive_name`]):
///    the value, quotes kept;
/// 5. literals `sk-` + 16, `gh[pousr]_` + 20, `github_pat_` + 20, `AKIA` + 16 and
///    `xox[baprs]-` + 10 token characters.
pub fn redact_secrets(text: &str) -> String {
    if text.is_empty() {
        return String::new();
    }
    let p = patterns();
    let text = p.private_key.replace_all(text, REDACTED);
    let text = p.authorization.replace_all(&text, "${1}[redacted]");
    let text = p.bearer.replace_all(&text, "Bearer [redacted]");
    let text = p.assignment.replace_all(&text, |caps: &Captures<'_>| {
        let part = |i| caps.get(i).map_or("", |m| m.as_str());
        let (key_quote, key, separator, value_quote, value, close_quote) =
            (part(1), part(2), part(3), part(4), part(5), part(6));
        // An earlier rule's `[redacted]` reads as the value `[redacted` (the value stops at
        // `]`); rewriting it would leave a stray `]`.
        if !is_sensitive_name(key) || value == "[redacted" {
            return part(0).to_owned();
        }
        let close = if close_quote.is_empty() {
            value_quote
        } else {
            close_quote
        };
        format!("{key_quote}{key}{separator}{value_quote}{REDACTED}{close}")
    });
    let mut text = text.into_owned();
    for literal in &p.token_literals {
        text = literal.replace_all(&text, REDACTED).into_owned();
    }
    text
}

/// The input in full: the string itself, or the messages as OMA JSON (`JSON.stringify`).
/// `None` only if the messages cannot be written as JSON, which their types rule out.
fn full_text(input: &RunInput) -> Option<String> {
    match input {
        RunInput::Text(text) => Some(text.clone()),
        RunInput::Messages(messages) => messages_to_json(messages).ok(),
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
///
/// Should the messages ever fail to serialise, the description is used, so nothing leaks.
pub fn scorer_input(input: &RunInput, policy: StorePayloads) -> String {
    if policy == StorePayloads::None {
        return describe(input);
    }
    match full_text(input) {
        Some(text) => treat(&text, policy),
        None => describe(input),
    }
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
            "call with api_key=[redacted] please"
        );
        let list = RunInput::Messages(messages());
        let scored = scorer_input(&list, StorePayloads::Redacted);
        assert!(scored.contains("my api_key=[redacted] hello"), "{scored}");
        assert!(!scored.contains("abc123"));
        // OMA's quirk, kept: in JSON, `"text":"api_key=abc123"` matches as the assignment
        // `text` = `api_key=abc123` (the value may hold `=`); `text` is not sensitive, and the
        // scan resumes after the value, so a secret opening a string value is not redacted.
        let opening = RunInput::Messages(vec![LlmMessage::user_text("api_key=abc123")]);
        assert!(scorer_input(&opening, StorePayloads::Redacted).contains("abc123"));
        assert_eq!(
            stored_payload(&text, "Bearer abcdefgh12345", StorePayloads::Redacted),
            Some(json!({
                "input": "call with api_key=[redacted] please",
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
        let many = "pwd=a ".repeat(1_300);
        assert!(js_len(&many) <= MAX_PAYLOAD_CHARS);
        let scored = scorer_input(&RunInput::Text(many), StorePayloads::Redacted);
        assert_eq!(js_len(&scored), MAX_PAYLOAD_CHARS);
        assert!(scored.ends_with(TRUNCATION_MARKER));
        assert!(!scored.contains("pwd=a "));
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

    /// One row per OMA rule, plus the cases that must stay untouched.
    #[test]
    fn redaction_patterns() {
        let cases = [
            ("", ""),
            ("nothing secret here", "nothing secret here"),
            ("api_key=abc123", "api_key=[redacted]"),
            ("API-KEY: abc123", "API-KEY: [redacted]"),
            ("apiKey = abc123, next", "apiKey = [redacted], next"),
            (r#"{"password": "hunter2"}"#, r#"{"password": "[redacted]"}"#),
            (r#"{'secret':'s3'}"#, r#"{'secret':'[redacted]'}"#),
            ("client_secret=xyz&x=1", "client_secret=[redacted]"),
            ("token=abc", "token=[redacted]"),
            ("x-token: abc", "x-token: [redacted]"),
            ("token_id=abc", "token_id=[redacted]"),
            ("tokens=abc", "tokens=abc"),
            ("user=alice", "user=alice"),
            ("session: abc", "session: [redacted]"),
            ("Cookie: a=b", "Cookie: [redacted]"),
            ("Authorization: Bearer abc.def", "Authorization: [redacted]"),
            ("authorization: Basic dXNlcjpwYXNz, next", "authorization: [redacted], next"),
            ("use Bearer abcdefgh12345 now", "use Bearer [redacted] now"),
            ("bearer abcdefgh", "Bearer [redacted]"),
            ("Bearer short", "Bearer short"),
            ("key sk-abcdefghijklmnop1234 end", "key [redacted] end"),
            ("sk-short", "sk-short"),
            ("ghp_abcdefghijklmnopqrstuvwxyz", "[redacted]"),
            ("github_pat_abcdefghijklmnopqrstuvwxyz", "[redacted]"),
            ("AKIAABCDEFGHIJKLMNOP", "[redacted]"),
            ("AKIAabcdefghijklmnop", "AKIAabcdefghijklmnop"),
            ("xoxb-1234567890-abc", "[redacted]"),
            (
                "a -----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY----- b",
                "a [redacted] b",
            ),
            (
                "-----BEGIN PRIVATE KEY-----x-----END PRIVATE KEY----- -----BEGIN PRIVATE KEY-----y-----END PRIVATE KEY-----",
                "[redacted] [redacted]",
            ),
            (
                "-----BEGIN PUBLIC KEY-----x-----END PUBLIC KEY-----",
                "-----BEGIN PUBLIC KEY-----x-----END PUBLIC KEY-----",
            ),
            ("pwd=\u{A0}abc", "pwd=\u{A0}[redacted]"),
        ];
        for (input, expected) in cases {
            assert_eq!(redact_secrets(input), expected, "{input:?}");
        }
    }

    #[test]
    fn sensitive_names() {
        for name in [
            "api_key",
            "API-KEY",
            "apikey",
            "password",
            "privateKey",
            "access_key",
            "refreshToken",
            "auth-token",
            "Authorization",
            "token",
            "x_token",
            "token-id",
            "credentials",
            "SESSION_ID",
        ] {
            assert!(is_sensitive_name(name), "{name}");
        }
        for name in ["user", "tokens", "mytoken", "keyboard", "model"] {
            assert!(!is_sensitive_name(name), "{name}");
        }
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
