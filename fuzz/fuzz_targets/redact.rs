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
    assignment: Regex,
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
            assignment: re(&format!(
                r#"(["']?)([A-Za-z_][A-Za-z0-9_.-]*)(["']?[{s}]*[:=][{s}]*)(["']?)([^"',{s}\}}\]]+)(["']?)"#
            )),
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

fn by_the_rules(text: &str) -> String {
    let r = rules();
    let text = r.private_key.replace_all(text, "[redacted]");
    let text = r.authorization.replace_all(&text, "${1}[redacted]");
    let text = r.bearer.replace_all(&text, "Bearer [redacted]");
    let text = r.assignment.replace_all(&text, |caps: &Captures<'_>| {
        let part = |i| caps.get(i).map_or("", |m| m.as_str());
        if !r.sensitive_name.is_match(part(2)) || part(5) == "[redacted" {
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
