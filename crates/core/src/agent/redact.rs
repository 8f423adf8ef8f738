//! Secret redaction as OMA's `redactSensitiveText` does it (`docs/agent.md#redaction-rules`):
//! PEM private keys, `Authorization:` headers, bearer tokens, assignments whose name looks
//! sensitive (`api_key`, `password`, `token`, ...: quoted values first, then bare ones), and
//! token literals (`sk-...`, `ghp_...`, `github_pat_...`, `AKIA...`, `xox?-...`), in that order.
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
/// 4. `name: "value"` or `'name'='value'` where the name is sensitive ([`is_sensitive_name`]):
///    the value up to its closing quote, spaces and all, quotes kept;
/// 5. `name=value` where the name is sensitive: the bare value up to a `,` `;` `}` `]` or line
///    end (an earlier rule's `[redacted]` left alone);
/// 6. literals `sk-` + 16, `gh[pousr]_` + 20, `github_pat_` + 20, `AKIA` + 16 and
///    `xox[baprs]-` + 10 token characters.
pub fn redact_secrets(text: &str) -> String {
    if text.is_empty() {
        return String::new();
    }
    if !may_hold_secret(text) {
        return text.to_owned();
    }
    let redacted = |_: &str, _: &Match| REDACTED.to_owned();
    let text = replace_all(text, &private_key_at, &redacted);
    let text = replace_all(&text, &authorization_at, &|text, m| {
        format!("{}{REDACTED}", &text[m.start..m.group_end])
    });
    let text = replace_all(&text, &bearer_at, &|_, _| format!("Bearer {REDACTED}"));
    let text = replace_all(&text, &quoted_assignment_at, &redact_quoted);
    let mut text = replace_all(&text, &bare_assignment_at, &redact_bare);
    for literal in &TOKEN_LITERALS {
        text = replace_all(&text, &|text, at| literal.at(text, at), &redacted);
    }
    text
}

/// Whether any rule could match somewhere in `text`; false only when none can, so that the
/// names, models and ids that make up most traced text are kept without a scan per rule. Each
/// rule needs one of these: `Authorization` and both assignment rules a `:` or `=`; a PEM
/// header (`-----BEGIN `) and `Bearer` a white space (JavaScript's `\s` beyond ASCII is a
/// non-ASCII character); each token literal its fixed start (`sk-`, `gh`, `github_pat_`,
/// `AKIA`, `xox`, in that case). A text without any of them comes out of every rule as it went
/// in.
pub(crate) fn may_hold_secret(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.iter().enumerate().any(|(at, &byte)| {
        let rest = &bytes[at + 1..];
        match byte {
            b':' | b'=' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ' | 0x80.. => true,
            b's' => rest.starts_with(b"k-"),
            b'g' => rest.starts_with(b"h") || rest.starts_with(b"ithub_pat_"),
            b'A' => rest.starts_with(b"KIA"),
            b'x' => rest.starts_with(b"ox"),
            _ => false,
        }
    })
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
pub(crate) fn is_space(c: char) -> bool {
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

/// The name and separator both assignment rules start with:
/// `(["']?)([A-Za-z_][A-Za-z0-9_.-]*)(\1?\s*[:=]\s*)`, as `(name, name_end, value)`, or where to
/// try next.
///
/// No part can give back to the next (the name runs up to a character it cannot take, and each
/// `\s*` up to one that is not white space), so the first way through is the only one; the
/// closing name quote (`\1?`) is taken when it is there, since without it the separator would
/// have to start at that quote. A start that fails after a name fails for every start inside
/// that name too, the quote before it included: the scan moves past it.
fn assignment_head(text: &str, at: usize) -> Result<(usize, usize, usize), usize> {
    let bytes = text.as_bytes();
    let name_quote = bytes.get(at).copied().filter(|&b| b == b'"' || b == b'\'');
    let name = at + usize::from(name_quote.is_some());
    if !bytes
        .get(name)
        .is_some_and(|&b| b.is_ascii_alphabetic() || b == b'_')
    {
        return Err(at + 1);
    }
    let name_end = run(text, name + 1, |c| {
        c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')
    });
    let mut sep = name_end;
    if name_quote.is_some() && bytes.get(sep).copied() == name_quote {
        sep += 1;
    }
    sep = run(text, sep, is_space);
    if !matches!(bytes.get(sep), Some(b':' | b'=')) {
        return Err(name_end);
    }
    Ok((name, name_end, run(text, sep + 1, is_space)))
}

/// `(["']?)([A-Za-z_][A-Za-z0-9_.-]*)(\1?\s*[:=]\s*)(["'])([^]*?)\4`: a value in quotes, up to
/// the first quote of the same kind. The parts: the name, where it ends, where the value starts
/// and where its closing quote is.
fn quoted_assignment_at(text: &str, at: usize) -> Scan {
    let (name, name_end, open) = match assignment_head(text, at) {
        Ok(head) => head,
        Err(next) => return Scan::Skip(next),
    };
    let Some(quote) = text
        .as_bytes()
        .get(open)
        .copied()
        .filter(|&b| b == b'"' || b == b'\'')
    else {
        return Scan::Skip(name_end);
    };
    let Some(offset) = text[open + 1..].find(char::from(quote)) else {
        return Scan::Skip(name_end);
    };
    let close = open + 1 + offset;
    Scan::Found(Match {
        start: at,
        end: close + 1,
        group_end: close + 1,
        parts: [name, name_end, open + 1, close, 0],
    })
}

/// A quoted value of a sensitive name becomes `[redacted]`, its quotes kept; any other match is
/// left as it is (and, as in a regex's replace, is not searched again).
fn redact_quoted(text: &str, m: &Match) -> String {
    let [name, name_end, value, close, _] = m.parts;
    if !is_sensitive_name(&text[name..name_end]) {
        return text[m.start..m.end].to_owned();
    }
    format!("{}{REDACTED}{}", &text[m.start..value], &text[close..m.end])
}

/// `(["']?)([A-Za-z_][A-Za-z0-9_.-]*)(\1?\s*[:=]\s*)([^"'\s,;}\]\n\r][^,;}\]\n\r]*)`: a bare
/// value, which may hold spaces and quotes after its first character, up to a `,` `;` `}` `]` or
/// line end. The parts: the name, where it ends, and the value's start and end.
fn bare_assignment_at(text: &str, at: usize) -> Scan {
    let (name, name_end, value) = match assignment_head(text, at) {
        Ok(head) => head,
        Err(next) => return Scan::Skip(next),
    };
    let stops = |c: char| matches!(c, ',' | ';' | '}' | ']' | '\n' | '\r');
    let starts = text[value..]
        .chars()
        .next()
        .is_some_and(|c| !(stops(c) || c == '"' || c == '\'' || is_space(c)));
    if !starts {
        return Scan::Skip(name_end);
    }
    let value_end = run(text, value, |c| !stops(c));
    Scan::Found(Match {
        start: at,
        end: value_end,
        group_end: value_end,
        parts: [name, name_end, value, value_end, 0],
    })
}

/// A bare value of a sensitive name becomes `[redacted]`. An earlier rule's `[redacted]` reads as
/// the value `[redacted` (the value stops at `]`): left alone, or the rewrite would leave a
/// stray `]`.
fn redact_bare(text: &str, m: &Match) -> String {
    let [name, name_end, value, value_end, _] = m.parts;
    if !is_sensitive_name(&text[name..name_end]) || text[value..value_end].starts_with("[redacted")
    {
        return text[m.start..m.end].to_owned();
    }
    format!("{}{REDACTED}", &text[m.start..value])
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

    /// The shared table (`fixtures/redaction.json`, recorded from OMA's own functions): one row
    /// per rule, the cases that must stay untouched, and names on either side of the line. The
    /// JavaScript package runs the same table through the component's codec.
    #[test]
    fn the_shared_table() {
        let table: serde_json::Value =
            serde_json::from_str(include_str!("../../../../fixtures/redaction.json")).unwrap();
        let texts = table["texts"].as_array().unwrap();
        assert!(texts.len() >= 40);
        for case in texts {
            let text = case["text"].as_str().unwrap();
            let redacted = case["redacted"].as_str().unwrap();
            assert_eq!(redact_secrets(text), redacted, "{text:?}");
            assert_eq!(oracle::redact_secrets(text), redacted, "{text:?}");
        }
        let names = table["names"].as_array().unwrap();
        assert!(names.iter().any(|n| n["sensitive"] == true));
        assert!(names.iter().any(|n| n["sensitive"] == false));
        for case in names {
            let name = case["name"].as_str().unwrap();
            let sensitive = case["sensitive"].as_bool().unwrap();
            assert_eq!(is_sensitive_name(name), sensitive, "{name}");
            assert_eq!(oracle::is_sensitive_name(name), sensitive, "{name}");
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
            // OMA's two assignment rules use back-references (`\1?`, `\4`), which the engine does
            // not have: each is spelt out for the three ways a name can be quoted and the two ways
            // a value can, the alternatives told apart by their first character.
            let name = "[A-Za-z_][A-Za-z0-9_.-]*";
            let head = format!(r#"(?:"({name})"?|'({name})'?|({name}))[{s}]*[:=][{s}]*"#);
            let name_of = |caps: &Captures<'_>| {
                (1..=3)
                    .find_map(|i| caps.get(i))
                    .map_or("", |m| m.as_str())
                    .to_owned()
            };
            let quoted = re(&format!(r#"{head}(?:"((?s:.)*?)"|'((?s:.)*?)')"#));
            let text = quoted.replace_all(&text, |caps: &Captures<'_>| {
                let whole = caps.get(0).unwrap();
                let value = caps.get(4).or(caps.get(5)).unwrap();
                if !is_sensitive_name(&name_of(caps)) {
                    return whole.as_str().to_owned();
                }
                let before = &whole.as_str()[..value.start() - whole.start()];
                let after = &whole.as_str()[value.end() - whole.start()..];
                format!("{before}[redacted]{after}")
            });
            let bare = re(&format!(r#"{head}([^"'{s},;}}\]\n\r][^,;}}\]\n\r]*)"#));
            let text = bare.replace_all(&text, |caps: &Captures<'_>| {
                let whole = caps.get(0).unwrap();
                let value = caps.get(4).unwrap();
                if !is_sensitive_name(&name_of(caps)) || value.as_str().starts_with("[redacted") {
                    return whole.as_str().to_owned();
                }
                format!(
                    "{}[redacted]",
                    &whole.as_str()[..value.start() - whole.start()]
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

        /// Texts of the characters names, models and ids are made of, where most hold nothing
        /// a rule could match (`may_hold_secret` keeps them as they are): still the engine's
        /// output, and kept only where the engine keeps them.
        #[test]
        fn agrees_on_identifier_like_text(
            text in "[A-Za-z0-9_./@#-]{0,24}(sk-|ghp_|github_pat_|AKIA|xoxb-)?[A-Za-z0-9_./@#-]{0,24}"
        ) {
            let engine = oracle::redact_secrets(&text);
            proptest::prop_assert_eq!(redact_secrets(&text), engine.clone(), "{:?}", text);
            if !may_hold_secret(&text) {
                proptest::prop_assert_eq!(engine, text);
            }
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
