//! Arbitrary text: secret redaction never panics and gives exactly what OMA's rules give when a
//! regex engine runs them (the component matches them with scanners of its own).
#![no_main]

use libfuzzer_sys::fuzz_target;
use oma_core::agent::redact::{is_sensitive_name, redact_secrets};
use regex_lite::{Captures, Regex};

/// JavaScript's `\s`, as a class body.
const JS_SPACE: &str = "\\t\\n\\x0B\\x0C\\r \u{A0}\u{1680}\u{2000}-\u{200A}\u{2028}\u{2029}\u{202F}\u{205F}\u{3000}\u{FEFF}";

struct Rules {
    sensitive_name: Regex,
    private_key: Regex,
    authorization: Regex,
    bearer: Regex,
    quoted: Regex,
    bare: Regex,
    literals: Vec<Regex>,
}

fn rules() -> &'static Rules {
    static RULES: std::sync::OnceLock<Rules> = std::sync::OnceLock::new();
    RULES.get_or_init(|| {
        let s = JS_SPACE;
        let re = |p: &str| Regex::new(p).expect("the rules compile");
        Rules {
            sensitive_name: re(r"(?i)(?:api[_-]?key|apiKey|secret|password|passwd|pwd|private[_-]?key|privateKey|access[_-]?key|accessKey|accessToken|refreshToken|idToken|githubToken|authorization|auth[_-]?token|authToken|cookie|session|credential|bearer|^token$|[_-]token$|^token[_-])"),
            private_key: re(r"-----BEGIN [A-Z ]*PRIVATE KEY-----(?s:.)*?-----END [A-Z ]*PRIVATE KEY-----"),
            authorization: re(&format!(r"(?i)\b(Authorization[{s}]*:[{s}]*)(?:Bearer[{s}]+)?[^\n\r,;}}]+")),
            bearer: re(&format!(r"(?i)\bBearer[{s}]+[A-Za-z0-9._~+/=-]{{8,}}")),
            // OMA's two assignment rules (quoted values first, then bare ones) use
            // back-references (`\1?`, `\4`), which the engine does not have: each is spelt out
            // for the three ways a name can be quoted and the two ways a value can.
            quoted: re(&format!(r#"{head}(?:"((?s:.)*?)"|'((?s:.)*?)')"#, head = head(s))),
            bare: re(&format!(r#"{head}([^"'{s},;}}\]\n\r][^,;}}\]\n\r]*)"#, head = head(s))),
            literals: [
                r"\bsk-[A-Za-z0-9_-]{16,}\b",
                r"\bgh[pousr]_[A-Za-z0-9_]{20,}\b",
                r"\bgithub_pat_[A-Za-z0-9_]{20,}\b",
                r"\bAKIA[0-9A-Z]{16}\b",
                r"\bxox[baprs]-[A-Za-z0-9-]{10,}\b",
            ]
            .iter()
            .map(|p| re(p))
            .collect(),
        }
    })
}

/// An assignment's name, in double, single or no quotes, and its separator.
fn head(s: &str) -> String {
    let name = "[A-Za-z_][A-Za-z0-9_.-]*";
    format!(r#"(?:"({name})"?|'({name})'?|({name}))[{s}]*[:=][{s}]*"#)
}

/// The name an assignment's match holds, whichever way it was quoted.
fn name_of(caps: &Captures<'_>) -> String {
    (1..=3)
        .find_map(|i| caps.get(i))
        .map_or("", |m| m.as_str())
        .to_owned()
}

fn by_the_rules(text: &str) -> String {
    let r = rules();
    let text = r.private_key.replace_all(text, "[redacted]");
    let text = r.authorization.replace_all(&text, "${1}[redacted]");
    let text = r.bearer.replace_all(&text, "Bearer [redacted]");
    let text = r.quoted.replace_all(&text, |caps: &Captures<'_>| {
        let whole = caps.get(0).expect("a match");
        let value = caps.get(4).or(caps.get(5)).expect("a quoted value");
        if !r.sensitive_name.is_match(&name_of(caps)) {
            return whole.as_str().to_owned();
        }
        let before = &whole.as_str()[..value.start() - whole.start()];
        let after = &whole.as_str()[value.end() - whole.start()..];
        format!("{before}[redacted]{after}")
    });
    let text = r.bare.replace_all(&text, |caps: &Captures<'_>| {
        let whole = caps.get(0).expect("a match");
        let value = caps.get(4).expect("a bare value");
        if !r.sensitive_name.is_match(&name_of(caps)) || value.as_str().starts_with("[redacted") {
            return whole.as_str().to_owned();
        }
        format!(
            "{}[redacted]",
            &whole.as_str()[..value.start() - whole.start()]
        )
    });
    let mut text = text.into_owned();
    for literal in &r.literals {
        text = literal.replace_all(&text, "[redacted]").into_owned();
    }
    text
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    assert_eq!(redact_secrets(&text), by_the_rules(&text), "{text:?}");
    for name in text.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-')) {
        assert_eq!(
            is_sensitive_name(name),
            rules().sensitive_name.is_match(name),
            "{name:?}"
        );
    }
});
