//! Secret redaction as OMA's `redactSensitiveText` does it (`docs/agent.md#redaction-rules`):
//! PEM private keys, `Authorization:` headers, bearer tokens, `name=value` assignments whose
//! name looks sensitive (`api_key`, `password`, `token`, ...), and token literals (`sk-...`,
//! `ghp_...`, `github_pat_...`, `AKIA...`, `xox?-...`), in that order.
//!
//! OMA states each rule as a JavaScript regular expression. Each is matched here by a small
//! scanner that takes the same choices a backtracking engine takes, in the same order
//! (leftmost match first; greedy repeats longest first; an optional part tried before its
//! absence), so the text that comes out is the same. The scanners replace a regex engine that
//! weighed 80 KB of the component for ten fixed patterns; the tests hold them to that engine's
//! output on generated text (`tests::agrees_with_the_regular_expressions`).
//!
//! As in JavaScript without the `u` flag, `\b` and word characters are ASCII (`[A-Za-z0-9_]`),
//! case-insensitive rules fold ASCII letters only, and `\s` is JavaScript's white space (which
//! includes no-break and other Unicode spaces). Every scanner is linear in the text: a start that
//! fails is never retried from inside the run that made it fail.

pub use crate::secret::{is_sensitive_name, REDACTED};

/// `text` with secrets replaced by `[redacted]`, rule by rule, each rule applied to the whole
/// result of the one before:
///
/// 1. PEM private keys (`-----BEGIN ... PRIVATE KEY-----` to the first matching `END` line),
///    whole;
/// 2. `Authorization: <value>` up to the end of the line or a `,` `;` `}`: the value;
/// 3. `Bearer <8+ token chars>`: the token (the match becomes `Bearer [redacted]`);
/// 4. `name = value` or `"name": "value"` where the name is sensitive ([`is_sensitive_name`]):
///    the value, quotes kept;
/// 5. literals `sk-` + 16, `gh[pousr]_` + 20, `github_pat_` + 20, `AKIA` + 16 and
///    `xox[baprs]-` + 10 token characters.
pub fn redact_secrets(text: &str) -> String {
    if text.is_empty() {
        return String::new();
    }
    let redacted = |_: &str, _: &Match| REDACTED.to_owned();
    let text = replace_all(text, &private_key_at, &redacted);
    let text = replace_all(&text, &authorization_at, &|text, m| {
        format!("{}{REDACTED}", &text[m.start..m.group_end])
    });
    let text = replace_all(&text, &bearer_at, &|_, _| format!("Bearer {REDACTED}"));
    let mut text = replace_all(&text, &assignment_at, &redact_assignment);
    for literal in &TOKEN_LITERALS {
        text = replace_all(&text, &|text, at| literal.at(text, at), &redacted);
    }
    text
}

/// One match: `start..end` in the text, `group_end` where the part kept by the rule ends, and
/// for an assignment the ends of its parts.
#[derive(Clone, Copy, Debug)]
struct Match {
    start: usize,
    end: usize,
    group_end: usize,
    parts: [usize; 5],
}

/// Where a rule's scanner goes next: a match, or the first position worth trying after a
/// failure at `at` (always past `at`).
enum Scan {
    Found(Match),
    Skip(usize),
}

/// Every leftmost match of `find`, left to right, each replaced by `with`; the text between
/// matches is kept. `find(text, at)` tries a match starting exactly at `at`.
fn replace_all(
    text: &str,
    find: &dyn Fn(&str, usize) -> Scan,
    with: &dyn Fn(&str, &Match) -> String,
) -> String {
    let mut out = String::with_capacity(text.len());
    let mut kept = 0;
    let mut at = 0;
    while at < text.len() {
        match find(text, at) {
            Scan::Found(m) => {
                out.push_str(&text[kept..m.start]);
                out.push_str(&with(text, &m));
                kept = m.end;
                at = m.end;
            }
            Scan::Skip(next) => at = next_boundary(text, next.max(at + 1)),
        }
    }
    out.push_str(&text[kept..]);
    out
}

/// The first character boundary at or after `at` (or the end).
fn next_boundary(text: &str, at: usize) -> usize {
    (at..text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(text.len())
}

/// JavaScript's `\s`.
fn is_space(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{B}' | '\u{C}' | '\r' | ' ' | '\u{A0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200A}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202F}'
                | '\u{205F}'
                | '\u{3000}'
                | '\u{FEFF}'
    )
}

/// A word character for `\b`: `[A-Za-z0-9_]`.
fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// `\b` at `at`: a word character on one side only.
fn boundary(text: &str, at: usize) -> bool {
    let before = text[..at].chars().next_back().is_some_and(is_word);
    let after = text[at..].chars().next().is_some_and(is_word);
    before != after
}

/// The end of the run of characters from `at` that `class` accepts.
fn run(text: &str, at: usize, class: impl Fn(char) -> bool) -> usize {
    text[at..]
        .char_indices()
        .find(|&(_, c)| !class(c))
        .map_or(text.len(), |(i, _)| at + i)
}

/// Whether `text` has the ASCII word `word` at `at`, ignoring ASCII case.
fn has_ci(text: &str, at: usize, word: &str) -> bool {
    text.as_bytes()
        .get(at..at + word.len())
        .is_some_and(|bytes| bytes.eq_ignore_ascii_case(word.as_bytes()))
}

/// The character boundaries of `text[from..to]` from `to` down to `from`, both included:
/// the lengths a greedy repeat tries, longest first.
fn back_from(text: &str, from: usize, to: usize) -> impl Iterator<Item = usize> + '_ {
    (from..=to).rev().filter(move |&i| text.is_char_boundary(i))
}

/// `-----BEGIN [A-Z ]*PRIVATE KEY-----(?s:.)*?-----END [A-Z ]*PRIVATE KEY-----`
fn private_key_at(text: &str, at: usize) -> Scan {
    const BEGIN: &str = "-----BEGIN ";
    let Some(offset) = text[at..].find(BEGIN) else {
        return Scan::Skip(text.len());
    };
    let start = at + offset;
    let Some(body) = pem_label_end(text, start + BEGIN.len()) else {
        return Scan::Skip(start + 1);
    };
    // The lazy body: the first END line after the header closes the key.
    let mut from = body;
    while let Some(offset) = text[from..].find("-----END ") {
        let end_line = from + offset;
        if let Some(end) = pem_label_end(text, end_line + "-----END ".len()) {
            return found(start, end, end);
        }
        from = end_line + 1;
    }
    // No END line anywhere after this header, so none after a later one either.
    Scan::Skip(text.len())
}

/// After `BEGIN ` or `END `: `[A-Z ]*PRIVATE KEY-----`, where it ends. The letters and spaces
/// run up to the dashes, so the run must end in `PRIVATE KEY` with the dashes right after.
fn pem_label_end(text: &str, at: usize) -> Option<usize> {
    let label_end = run(text, at, |c| c.is_ascii_uppercase() || c == ' ');
    let label = &text[at..label_end];
    (label.ends_with("PRIVATE KEY") && text[label_end..].starts_with("-----"))
        .then_some(label_end + "-----".len())
}

/// `(?i)\b(Authorization\s*:\s*)(?:Bearer\s+)?[^\n\r,;}]+`: the group is kept.
fn authorization_at(text: &str, at: usize) -> Scan {
    const NAME: &str = "authorization";
    if !has_ci(text, at, NAME) || !boundary(text, at) {
        return Scan::Skip(at + 1);
    }
    let colon = run(text, at + NAME.len(), is_space);
    if !text[colon..].starts_with(':') {
        return Scan::Skip(at + 1);
    }
    let value = |from: usize| run(text, from, |c| !matches!(c, '\n' | '\r' | ',' | ';' | '}'));
    let spaces_end = run(text, colon + 1, is_space);
    // `\s*` longest first; for each, `Bearer\s+` (its spaces longest first) before none.
    for group_end in back_from(text, colon + 1, spaces_end) {
        if has_ci(text, group_end, "bearer") {
            let after = group_end + "bearer".len();
            let gap_end = run(text, after, is_space);
            if gap_end > after {
                let first = next_boundary(text, after + 1);
                for from in back_from(text, first, gap_end) {
                    let end = value(from);
                    if end > from {
                        return found(at, end, group_end);
                    }
                }
            }
        }
        let end = value(group_end);
        if end > group_end {
            return found(at, end, group_end);
        }
    }
    Scan::Skip(at + 1)
}

fn found(start: usize, end: usize, group_end: usize) -> Scan {
    Scan::Found(Match {
        start,
        end,
        group_end,
        parts: [0; 5],
    })
}

/// `(?i)\bBearer\s+[A-Za-z0-9._~+/=-]{8,}`. The spaces and the token characters exclude each
/// other, so each repeat takes all it can or the match fails.
fn bearer_at(text: &str, at: usize) -> Scan {
    if !has_ci(text, at, "bearer") || !boundary(text, at) {
        return Scan::Skip(at + 1);
    }
    let after = at + "bearer".len();
    let token = run(text, after, is_space);
    if token == after {
        return Scan::Skip(at + 1);
    }
    let end = run(text, token, |c| {
        c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '~' | '+' | '/' | '=' | '-')
    });
    if end - token < 8 {
        return Scan::Skip(at + 1);
    }
    found(at, end, end)
}

/// `(["']?)([A-Za-z_][A-Za-z0-9_.-]*)(["']?\s*[:=]\s*)(["']?)([^"',\s}\]]+)(["']?)`.
///
/// No part can give back to the next (each stops at a character the next part needs or cannot
/// take), so the first way through is the only one. A start that fails after a name fails for
/// every start inside that name too: the scan moves past it.
fn assignment_at(text: &str, at: usize) -> Scan {
    let quote = |i: usize| matches!(text.as_bytes().get(i), Some(b'"' | b'\''));
    let key = if quote(at) { at + 1 } else { at };
    let starts_name = |i: usize| {
        text.as_bytes()
            .get(i)
            .is_some_and(|&b| b.is_ascii_alphabetic() || b == b'_')
    };
    if !starts_name(key) {
        return Scan::Skip(at + 1);
    }
    let key_end = run(text, key + 1, |c| {
        c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')
    });
    let fail = Scan::Skip(key_end);
    let mut sep = key_end;
    if quote(sep) {
        sep += 1;
    }
    sep = run(text, sep, is_space);
    if !matches!(text.as_bytes().get(sep), Some(b':' | b'=')) {
        return fail;
    }
    let sep_end = run(text, sep + 1, is_space);
    let value = if quote(sep_end) { sep_end + 1 } else { sep_end };
    let value_end = run(text, value, |c| {
        !(matches!(c, '"' | '\'' | ',' | '}' | ']') || is_space(c))
    });
    if value_end == value {
        return fail;
    }
    let end = if quote(value_end) {
        value_end + 1
    } else {
        value_end
    };
    Scan::Found(Match {
        start: at,
        end,
        group_end: end,
        parts: [key, key_end, sep_end, value, value_end],
    })
}

/// An assignment with a sensitive name gets `[redacted]` for its value, its quotes kept (a
/// value opened with a quote and not closed is closed with the same quote). An earlier rule's
/// `[redacted]` reads as the value `[redacted` (the value stops at `]`): left alone, or the
/// rewrite would leave a stray `]`.
fn redact_assignment(text: &str, m: &Match) -> String {
    let [key, key_end, sep_end, value, value_end] = m.parts;
    let whole = &text[m.start..m.end];
    if !is_sensitive_name(&text[key..key_end]) || &text[value..value_end] == "[redacted" {
        return whole.to_owned();
    }
    let value_quote = &text[sep_end..value];
    let close_quote = &text[value_end..m.end];
    let close = if close_quote.is_empty() {
        value_quote
    } else {
        close_quote
    };
    format!("{}{REDACTED}{close}", &text[m.start..value])
}

/// A token literal: `\b`, a fixed start (with at most one character chosen from a set), then
/// `min` or more (exactly `min` when `exact`) characters of `class`, then `\b`.
struct TokenLiteral {
    /// The start before the choice, e.g. `gh`.
    head: &'static str,
    /// The characters the choice allows (empty: no choice).
    choice: &'static str,
    /// The start after the choice, e.g. `_`.
    tail: &'static str,
    class: fn(char) -> bool,
    min: usize,
    exact: bool,
}

/// `\bsk-[A-Za-z0-9_-]{16,}\b`, `\bgh[pousr]_[A-Za-z0-9_]{20,}\b`,
/// `\bgithub_pat_[A-Za-z0-9_]{20,}\b`, `\bAKIA[0-9A-Z]{16}\b`, `\bxox[baprs]-[A-Za-z0-9-]{10,}\b`.
const TOKEN_LITERALS: [TokenLiteral; 5] = [
    TokenLiteral {
        head: "sk-",
        choice: "",
        tail: "",
        class: |c| is_word(c) || c == '-',
        min: 16,
        exact: false,
    },
    TokenLiteral {
        head: "gh",
        choice: "pousr",
        tail: "_",
        class: is_word,
        min: 20,
        exact: false,
    },
    TokenLiteral {
        head: "github_pat_",
        choice: "",
        tail: "",
        class: is_word,
        min: 20,
        exact: false,
    },
    TokenLiteral {
        head: "AKIA",
        choice: "",
        tail: "",
        class: |c| c.is_ascii_digit() || c.is_ascii_uppercase(),
        min: 16,
        exact: true,
    },
    TokenLiteral {
        head: "xox",
        choice: "baprs",
        tail: "-",
        class: |c| c.is_ascii_alphanumeric() || c == '-',
        min: 10,
        exact: false,
    },
];

impl TokenLiteral {
    fn at(&self, text: &str, at: usize) -> Scan {
        let miss = Scan::Skip(at + 1);
        if !text[at..].starts_with(self.head) || !boundary(text, at) {
            return miss;
        }
        let mut from = at + self.head.len();
        if !self.choice.is_empty() {
            match text.as_bytes().get(from) {
                Some(&b) if self.choice.as_bytes().contains(&b) => from += 1,
                _ => return miss,
            }
        }
        if !text[from..].starts_with(self.tail) {
            return miss;
        }
        from += self.tail.len();
        let longest = run(text, from, self.class);
        // The class is ASCII, so lengths are byte counts.
        let lengths = if self.exact {
            self.min..=self.min.min(longest - from)
        } else {
            self.min..=longest - from
        };
        match lengths.rev().find(|&n| boundary(text, from + n)) {
            Some(n) if n >= self.min => found(at, from + n, from + n),
            _ => miss,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            (r#"{"secret": "open"#, r#"{"secret": "[redacted]""#),
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
            ("Authorization:   ", "Authorization:  [redacted]"),
            ("Authorization: Bearer  ;", "Authorization: [redacted];"),
            ("Authorization: Bearer\nabc", "Authorization: [redacted]"),
            ("Authorization: Bearer\n ;", "Authorization: [redacted];"),
            ("Authorization:\n,", "Authorization:\n,"),
            ("use Bearer abcdefgh12345 now", "use Bearer [redacted] now"),
            ("bearer abcdefgh", "Bearer [redacted]"),
            ("Bearer short", "Bearer short"),
            ("key sk-abcdefghijklmnop1234 end", "key [redacted] end"),
            ("sk-abcdefghijklmnop-- end", "[redacted]-- end"),
            ("sk-short", "sk-short"),
            ("ghp_abcdefghijklmnopqrstuvwxyz", "[redacted]"),
            ("github_pat_abcdefghijklmnopqrstuvwxyz", "[redacted]"),
            ("AKIAABCDEFGHIJKLMNOP", "[redacted]"),
            ("AKIAABCDEFGHIJKLMNOPQ", "AKIAABCDEFGHIJKLMNOPQ"),
            ("AKIAabcdefghijklmnop", "AKIAabcdefghijklmnop"),
            ("xoxb-1234567890-abc", "[redacted]"),
            ("xoxb-1234567890-", "[redacted]-"),
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
        for name in [
            "user",
            "tokens",
            "mytoken",
            "keyboard",
            "model",
            "\u{212A}ey",
        ] {
            assert!(!is_sensitive_name(name), "{name}");
        }
    }

    /// A start that fails inside a long run is not retried character by character: texts built
    /// to make a scanner that did so take quadratic time come out as the regex engine (which
    /// is linear) has them.
    #[test]
    fn long_runs_are_scanned_once() {
        for piece in [
            "a",
            "a:",
            "\"a",
            "a= ",
            "Authorization:\n",
            "Authorization: Bearer\n",
            "Bearer ",
            "sk-",
            "xoxb-",
            "-----BEGIN PRIVATE KEY-----",
        ] {
            let text = piece.repeat(50_000 / piece.len());
            assert_eq!(
                redact_secrets(&text),
                oracle::redact_secrets(&text),
                "{piece:?}"
            );
        }
    }

    /// The rules as the regular expressions OMA states them, run by a regex engine: the oracle
    /// the scanners are held to.
    mod oracle {
        use regex_lite::{Captures, Regex};

        const JS_SPACE: &str = "\\t\\n\\x0B\\x0C\\r \u{A0}\u{1680}\u{2000}-\u{200A}\u{2028}\u{2029}\u{202F}\u{205F}\u{3000}\u{FEFF}";

        pub fn is_sensitive_name(name: &str) -> bool {
            Regex::new(r"(?i)(?:api[_-]?key|apiKey|secret|password|passwd|pwd|private[_-]?key|privateKey|access[_-]?key|accessKey|accessToken|refreshToken|idToken|githubToken|authorization|auth[_-]?token|authToken|cookie|session|credential|bearer|^token$|[_-]token$|^token[_-])")
                .unwrap()
                .is_match(name)
        }

        pub fn redact_secrets(text: &str) -> String {
            let s = JS_SPACE;
            let re = |p: &str| Regex::new(p).unwrap();
            let text =
                re(r"-----BEGIN [A-Z ]*PRIVATE KEY-----(?s:.)*?-----END [A-Z ]*PRIVATE KEY-----")
                    .replace_all(text, "[redacted]");
            let text = re(&format!(
                r"(?i)\b(Authorization[{s}]*:[{s}]*)(?:Bearer[{s}]+)?[^\n\r,;}}]+"
            ))
            .replace_all(&text, "${1}[redacted]");
            let text = re(&format!(r"(?i)\bBearer[{s}]+[A-Za-z0-9._~+/=-]{{8,}}"))
                .replace_all(&text, "Bearer [redacted]");
            let assignment = re(&format!(
                r#"(["']?)([A-Za-z_][A-Za-z0-9_.-]*)(["']?[{s}]*[:=][{s}]*)(["']?)([^"',{s}\}}\]]+)(["']?)"#
            ));
            let text = assignment.replace_all(&text, |caps: &Captures<'_>| {
                let part = |i| caps.get(i).map_or("", |m| m.as_str());
                if !is_sensitive_name(part(2)) || part(5) == "[redacted" {
                    return part(0).to_owned();
                }
                let close = if part(6).is_empty() { part(4) } else { part(6) };
                format!(
                    "{}{}{}{}[redacted]{close}",
                    part(1),
                    part(2),
                    part(3),
                    part(4)
                )
            });
            let mut text = text.into_owned();
            for literal in [
                r"\bsk-[A-Za-z0-9_-]{16,}\b",
                r"\bgh[pousr]_[A-Za-z0-9_]{20,}\b",
                r"\bgithub_pat_[A-Za-z0-9_]{20,}\b",
                r"\bAKIA[0-9A-Z]{16}\b",
                r"\bxox[baprs]-[A-Za-z0-9-]{10,}\b",
            ] {
                text = re(literal).replace_all(&text, "[redacted]").into_owned();
            }
            text
        }
    }

    /// Pieces that make every rule match, nearly match and fail at each of its steps.
    const PIECES: &[&str] = &[
        "Authorization",
        "authorization",
        "AUTHORIZATION",
        "Bearer",
        "bearer",
        "BEARER",
        ":",
        "=",
        " ",
        "  ",
        "\t",
        "\n",
        "\r",
        "\u{A0}",
        "\u{2028}",
        "\u{FEFF}",
        "\"",
        "'",
        ",",
        ";",
        "}",
        "]",
        "[",
        "-",
        "_",
        ".",
        "~",
        "+",
        "/",
        "sk-",
        "ghp_",
        "gho_",
        "ghx_",
        "github_pat_",
        "AKIA",
        "xoxb-",
        "xoxz-",
        "-----BEGIN ",
        "-----END ",
        "-----",
        "RSA ",
        "PRIVATE KEY",
        "PUBLIC KEY",
        "api_key",
        "apiKey",
        "API-KEY",
        "token",
        "x-token",
        "token_",
        "tokens",
        "password",
        "pwd",
        "session",
        "user",
        "abc",
        "abcdefgh",
        "0123456789",
        "ABCDEFGHIJKLMNOP",
        "abcdefghijklmnopqrst",
        "é",
        "😀",
        "\u{212A}",
        "\u{17F}",
        "[redacted]",
        "x",
    ];

    /// Fewer pieces, so that short texts come close to each rule more often.
    const DENSE: &[&str] = &[
        "Authorization",
        "Bearer",
        ":",
        "=",
        " ",
        "\n",
        ",",
        "\"",
        "abcdefgh",
        "api_key",
        "sk-",
        "AKIA",
        "0123456789",
        "-----BEGIN ",
        "-----END ",
        "PRIVATE KEY",
        "-----",
        "-",
    ];

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2048))]

        /// The scanners give exactly what the regular expressions give.
        #[test]
        fn agrees_with_the_regular_expressions(
            picks in proptest::collection::vec(0..PIECES.len(), 0..24),
            dense in proptest::collection::vec(0..DENSE.len(), 0..10),
        ) {
            let text: String = picks.iter().map(|&i| PIECES[i]).collect();
            proptest::prop_assert_eq!(redact_secrets(&text), oracle::redact_secrets(&text), "{:?}", text);
            let text: String = dense.iter().map(|&i| DENSE[i]).collect();
            proptest::prop_assert_eq!(redact_secrets(&text), oracle::redact_secrets(&text), "{:?}", text);
        }

        /// Any text at all: nothing panics, and the output is still the engine's.
        #[test]
        fn agrees_on_any_text(text in proptest::prelude::any::<String>()) {
            proptest::prop_assert_eq!(redact_secrets(&text), oracle::redact_secrets(&text), "{:?}", text);
        }

        /// And so do the names.
        #[test]
        fn names_agree_with_the_regular_expression(
            picks in proptest::collection::vec(0..PIECES.len(), 0..4)
        ) {
            let name: String = picks.iter().map(|&i| PIECES[i]).collect();
            proptest::prop_assert_eq!(is_sensitive_name(&name), oracle::is_sensitive_name(&name), "{:?}", name);
        }
    }
}
