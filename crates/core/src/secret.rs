//! Known secrets (the keys, tokens and passwords an endpoint holds) found in text in every form
//! a provider or a transport may echo them in, and base URLs shown without their credentials.
//!
//! A provider that quotes the key it was sent may quote it as it is, base64-encoded (standard or
//! URL-safe alphabet, padded or not, alone or inside a longer encoded value such as a Basic
//! `user:key` pair), or percent-encoded (as it would sit in a query string). Every error, event,
//! log line and result that carries provider text is redacted with [`redact_known`], which
//! replaces each of these forms; nothing else in the workspace matches secrets on its own
//! (`docs/security.md#secrets`).

use std::borrow::Cow;

use base64::engine::general_purpose::{STANDARD, URL_SAFE};
use base64::Engine;

/// What replaces a secret.
pub const REDACTED: &str = "[redacted]";

/// Secrets shorter than this, in bytes, are never matched inside text: they would match
/// ordinary words.
pub const MIN_SECRET_LEN: usize = 4;

/// Encoded forms shorter than this, in characters, are not matched: a short run of base64
/// characters occurs by chance.
const MIN_FORM_LEN: usize = 8;

/// Every form `secret` may be echoed in, longest first, without repeats: the secret itself; its
/// percent-encoding (every byte outside `A-Z a-z 0-9 - . _ ~` as `%XX`, upper- and lower-case
/// hex); its base64 and base64url encodings, padded and unpadded; and the characters of those
/// encodings that the secret alone decides when it sits at byte offset 1 or 2 (or 0, followed
/// by more bytes) inside a longer encoded value. Empty for a secret shorter than
/// [`MIN_SECRET_LEN`].
pub fn secret_forms(secret: &str) -> Vec<String> {
    if secret.len() < MIN_SECRET_LEN {
        return Vec::new();
    }
    let mut forms = vec![secret.to_owned()];
    let upper = percent_encode(secret, b"0123456789ABCDEF");
    forms.push(percent_encode(secret, b"0123456789abcdef"));
    forms.push(upper);
    let bytes = secret.as_bytes();
    for engine in [&STANDARD, &URL_SAFE] {
        let padded = engine.encode(bytes);
        forms.push(padded.trim_end_matches('=').to_owned());
        forms.push(padded);
        for offset in 0..3usize {
            let mut shifted = vec![0u8; offset];
            shifted.extend_from_slice(bytes);
            let encoded = engine.encode(&shifted);
            // Characters wholly made of the secret's bits: past the prefix's bits, before the
            // unknown bytes that may follow.
            let first = (8 * offset).div_ceil(6);
            let last = 8 * (offset + bytes.len()) / 6;
            if let Some(core) = encoded.get(first..last) {
                forms.push(core.to_owned());
            }
        }
    }
    forms.retain(|form| form == secret || form.len() >= MIN_FORM_LEN);
    crate::sort::sort_by(&mut forms, &|a, b| b.len().cmp(&a.len()));
    let mut seen = Vec::with_capacity(forms.len());
    forms.retain(|form| {
        if seen.contains(form) {
            false
        } else {
            seen.push(form.clone());
            true
        }
    });
    forms
}

/// `text` as it would be percent-encoded in a URL, with `hex` as the digits.
fn percent_encode(text: &str, hex: &[u8; 16]) -> String {
    let mut out = String::with_capacity(text.len());
    for &byte in text.as_bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push('%');
            out.push(char::from(hex[usize::from(byte >> 4)]));
            out.push(char::from(hex[usize::from(byte & 15)]));
        }
    }
    out
}

/// `text` with every form of every secret ([`secret_forms`]) replaced by [`REDACTED`]; borrowed
/// when nothing was found. Secrets shorter than [`MIN_SECRET_LEN`] are left alone.
pub fn redact_known<'a>(text: &'a str, secrets: &[&str]) -> Cow<'a, str> {
    let mut text = Cow::Borrowed(text);
    for secret in secrets {
        for form in secret_forms(secret) {
            if text.contains(form.as_str()) {
                text = Cow::Owned(text.replace(form.as_str(), REDACTED));
            }
        }
    }
    text
}

/// Whether `text` holds any form of any secret ([`secret_forms`]).
pub fn holds_known(text: &str, secrets: &[&str]) -> bool {
    secrets.iter().any(|secret| {
        secret_forms(secret)
            .iter()
            .any(|form| text.contains(form.as_str()))
    })
}

/// Whether a field name looks like it holds a secret (OMA's `isSensitiveName`, one of its
/// redaction rules, `docs/agent.md#redaction-rules`): `api_key`,
/// `apiKey`, `password`, `secret`, `authorization`, `cookie`, `session`, `token`, `x-token`, ...
///
/// OMA's rule: the name contains (ignoring ASCII case) one of the words below, or is `token`,
/// or ends in `_token`/`-token`, or starts with `token_`/`token-`.
pub fn is_sensitive_name(name: &str) -> bool {
    const WORDS: [&str; 25] = [
        "apikey",
        "api_key",
        "api-key",
        "secret",
        "password",
        "passwd",
        "pwd",
        "privatekey",
        "private_key",
        "private-key",
        "accesskey",
        "access_key",
        "access-key",
        "accesstoken",
        "refreshtoken",
        "idtoken",
        "githubtoken",
        "authorization",
        "authtoken",
        "auth_token",
        "auth-token",
        "cookie",
        "session",
        "credential",
        "bearer",
    ];
    let name = name.to_ascii_lowercase();
    name == "token"
        || name.ends_with("_token")
        || name.ends_with("-token")
        || name.starts_with("token_")
        || name.starts_with("token-")
        || WORDS.iter().any(|word| name.contains(word))
}

/// Query parameter names whose values are credentials, besides the sensitive names of OMA's
/// redaction rules ([`is_sensitive_name`]): `key` (Gemini), signatures
/// and the SigV4 query parameters, `sig` (Azure SAS), `code`, `auth`.
const SECRET_QUERY_NAMES: &[&str] = &[
    "key",
    "sig",
    "signature",
    "x-amz-signature",
    "x-amz-credential",
    "x-amz-security-token",
    "code",
    "auth",
];

/// Whether a query parameter named `name` holds a credential.
fn is_secret_query_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    SECRET_QUERY_NAMES.contains(&lower.as_str()) || is_sensitive_name(name)
}

/// The byte ranges of a URL's credentials: the userinfo before the host, and the value of every
/// query (or fragment) parameter whose name looks like a credential. Read from the text as it
/// is (no parsing that could fail or re-encode), so any string can be shown.
fn credential_ranges(url: &str) -> Vec<(usize, usize)> {
    let mut ranges = Vec::new();
    let authority_start = url.find("://").map_or(0, |at| at + 3);
    let rest = &url[authority_start..];
    let authority_len = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    if let Some(at) = rest[..authority_len].rfind('@') {
        ranges.push((authority_start, authority_start + at));
    }
    let mut offset = authority_start + authority_len;
    while let Some(found) = url[offset..].find(['?', '#']) {
        let start = offset + found + 1;
        let end = url[start..].find(['#']).map_or(url.len(), |at| start + at);
        let mut pair_start = start;
        for pair in url[start..end].split(['&', ';']) {
            if let Some(eq) = pair.find('=') {
                let name = percent_decode(&pair[..eq]);
                if is_secret_query_name(&name) && eq + 1 < pair.len() {
                    ranges.push((pair_start + eq + 1, pair_start + pair.len()));
                }
            }
            pair_start += pair.len() + 1;
        }
        offset = end;
        if offset >= url.len() {
            break;
        }
    }
    ranges
}

/// `text` with `%XX` sequences decoded (invalid ones kept), lossily as UTF-8.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                let value = hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0);
                out.push(u8::try_from(value).unwrap_or(0));
                i += 3;
            }
            (byte, _, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `url` as people may see it: its userinfo (`user:password@`) and the value of every query or
/// fragment parameter whose name looks like a credential (`key`, `api-key`, `token`, `sig`,
/// `X-Amz-Signature`, ...) shown as [`REDACTED`]; everything else as it is. What `oma-host
/// format`, the gateway's `/v1/format` and every `Debug` of an endpoint show of a base URL.
pub fn display_url(url: &str) -> String {
    let mut shown = String::with_capacity(url.len());
    let mut at = 0;
    for (start, end) in credential_ranges(url) {
        shown.push_str(&url[at..start]);
        shown.push_str(REDACTED);
        at = end;
    }
    shown.push_str(&url[at..]);
    shown
}

/// The credentials a URL carries ([`display_url`] hides them): the userinfo's password (its
/// user name when it has no password) and each credential-looking parameter value, as written and percent-decoded, so
/// that they are redacted wherever else they show (an error that quotes the URL, say).
pub fn url_secrets(url: &str) -> Vec<String> {
    let mut secrets = Vec::new();
    let mut push = |raw: &str| {
        for value in [raw.to_owned(), percent_decode(raw)] {
            if !value.is_empty() && !secrets.contains(&value) {
                secrets.push(value);
            }
        }
    };
    for (start, end) in credential_ranges(url) {
        let value = &url[start..end];
        if !url[..start].contains(['?', '#']) {
            // The userinfo: the password, or a user name that stands alone (a token). A user
            // name beside a password is no secret, and a short one would match ordinary words.
            match value.split_once(':') {
                Some((_, password)) if !password.is_empty() => push(password),
                Some((user, _)) => push(user),
                None => push(value),
            }
        } else {
            push(value);
        }
    }
    secrets
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-ant-api03-Zq9/x+Y_secret~~~key?>>";

    #[test]
    fn every_encoding_of_a_key_is_redacted() {
        let standard = STANDARD.encode(KEY);
        let url_safe = URL_SAFE.encode(KEY);
        let encoded = [
            KEY.to_owned(),
            standard.clone(),
            standard.trim_end_matches('=').to_owned(),
            url_safe.clone(),
            url_safe.trim_end_matches('=').to_owned(),
            percent_encode(KEY, b"0123456789ABCDEF"),
            percent_encode(KEY, b"0123456789abcdef"),
        ];
        assert_ne!(standard, url_safe, "the key exercises both alphabets");
        for form in &encoded {
            let text = format!("invalid key <{form}>, try again");
            let clean = redact_known(&text, &[KEY]);
            assert_eq!(clean, "invalid key <[redacted]>, try again", "{form}");
            assert!(holds_known(&text, &[KEY]));
        }
    }

    /// The key inside a longer encoded value (a Basic `user:key` pair, a JSON document) at
    /// every byte offset: what remains of the encoding decodes to no more than two bytes of the
    /// key on either side.
    #[test]
    fn a_key_inside_a_longer_encoded_value_is_redacted() {
        for prefix in ["", "u", "us", "user:", "{\"k\":\"", "ab:"] {
            for suffix in ["", "x", "xy", "\"}", "-more-text"] {
                let whole = format!("{prefix}{KEY}{suffix}");
                for engine in [&STANDARD, &URL_SAFE] {
                    let encoded = engine.encode(&whole);
                    let text = format!("Basic {encoded}");
                    let clean = redact_known(&text, &[KEY]);
                    assert!(clean.contains(REDACTED), "{prefix:?} {suffix:?}: {clean}");
                    let left: String = clean
                        .trim_start_matches("Basic ")
                        .split(REDACTED)
                        .collect::<Vec<_>>()
                        .concat();
                    // At most the prefix's and the suffix's characters, and two key bytes'
                    // worth on each side, are left.
                    let allowed = (prefix.len() + suffix.len() + 4) * 4 / 3 + 6;
                    assert!(left.len() <= allowed, "{prefix:?} {suffix:?}: {clean}");
                }
            }
        }
    }

    #[test]
    fn short_secrets_and_ordinary_text_are_left_alone() {
        assert!(secret_forms("abc").is_empty());
        assert_eq!(redact_known("a key abc", &["abc", ""]), "a key abc");
        // The encoded forms of a short secret are too short to match, but its padded base64.
        assert_eq!(secret_forms("abcd"), vec!["YWJjZA==", "abcd"]);
        assert!(matches!(
            redact_known("nothing here", &[KEY]),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn urls_are_shown_without_their_credentials() {
        for (url, shown) in [
            ("https://api.example.com/v1", "https://api.example.com/v1"),
            (
                "http://user:hunter22@127.0.0.1:8080/v1",
                "http://[redacted]@127.0.0.1:8080/v1",
            ),
            ("https://key-only@host/v1?x=1", "https://[redacted]@host/v1?x=1"),
            (
                "https://host/v1?api-key=s3cr3t-value&model=m",
                "https://host/v1?api-key=[redacted]&model=m",
            ),
            (
                "https://host/v1?key=AIza123&alt=sse#access_token=tok",
                "https://host/v1?key=[redacted]&alt=sse#access_token=[redacted]",
            ),
            (
                "https://host/p?X-Amz-Signature=abc;Token=t1&sig=&api%5Fkey=v",
                "https://host/p?X-Amz-Signature=[redacted];Token=[redacted]&sig=&api%5Fkey=[redacted]",
            ),
            ("https://host/a@b?c=d", "https://host/a@b?c=d"),
            ("not a url at all", "not a url at all"),
            ("", ""),
            ("?", "?"),
            ("u:p@h?key=", "[redacted]@h?key="),
        ] {
            assert_eq!(display_url(url), shown, "{url}");
        }
    }

    #[test]
    fn a_urls_credentials_are_secrets() {
        assert_eq!(
            url_secrets("http://us%65r:p%40ss@h/v1?api_key=k%2By&alt=json"),
            vec!["p%40ss", "p@ss", "k%2By", "k+y"]
        );
        assert_eq!(
            url_secrets("https://tok-123456@host/v1"),
            vec!["tok-123456"]
        );
        assert!(url_secrets("https://host/v1?model=m").is_empty());
    }
}
