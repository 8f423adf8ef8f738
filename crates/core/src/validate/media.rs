//! The media rules of OMA (`docs/media.md#media-source-rules`): a parameterless MIME type, raw
//! canonical base64, and an absolute http/https URL.
//!
//! Each check reads its string once and allocates nothing, so a 16 MiB video costs one pass. The
//! checks answer with a [`Fault`]; the caller joins it to the path it is checking.

use serde_json::Value;

use crate::message::MediaSource;

/// Which media rule a source broke; [`Fault::suffix`] is the end of OMA's message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The source is not a (non-array) object.
    NotAnObject,
    /// `media_type` is missing, not a string, or blank.
    MediaTypeEmpty,
    /// `media_type` is not `type/subtype` or carries parameters.
    MediaTypeParams,
    /// `data` is missing, not a string, or blank.
    DataEmpty,
    /// `data` is not raw canonical base64.
    DataNotBase64,
    /// `url` is missing, not a string, or blank.
    UrlEmpty,
    /// `url` does not parse as an absolute URL.
    UrlNotAbsolute,
    /// `url` parses, but its scheme is not http or https.
    UrlNotHttp,
    /// `type` is neither `base64` nor `url`.
    UnknownType,
}

impl Fault {
    /// The end of OMA's message, to follow the source's path.
    pub fn suffix(self) -> &'static str {
        match self {
            Fault::NotAnObject => " must be a media source object",
            Fault::MediaTypeEmpty => ".media_type must be a non-empty string",
            Fault::MediaTypeParams => ".media_type must be a MIME type without parameters",
            Fault::DataEmpty => ".data must be a non-empty string",
            Fault::DataNotBase64 => ".data must contain raw base64 data",
            Fault::UrlEmpty => ".url must be a non-empty string",
            Fault::UrlNotAbsolute => ".url must be an absolute HTTP(S) URL",
            Fault::UrlNotHttp => ".url must use HTTP or HTTPS",
            Fault::UnknownType => ".type must be \"base64\" or \"url\"",
        }
    }
}

/// Checks a typed media source.
pub fn check_source(source: &MediaSource) -> Result<(), Fault> {
    check_media_type(source.media_type())?;
    match source {
        MediaSource::Base64 { data, .. } => check_data(data),
        MediaSource::Url { url, .. } => check_url(url),
    }
}

/// Checks a media source given as OMA JSON, in OMA's order: object, `media_type`, then the
/// fields of its `type`.
pub fn check_source_value(source: &Value) -> Result<(), Fault> {
    let Value::Object(fields) = source else {
        return Err(Fault::NotAnObject);
    };
    let string = |key: &str| fields.get(key).and_then(Value::as_str);
    check_media_type(string("media_type").ok_or(Fault::MediaTypeEmpty)?)?;
    match fields.get("type").and_then(Value::as_str) {
        Some("base64") => check_data(string("data").ok_or(Fault::DataEmpty)?),
        Some("url") => check_url(string("url").ok_or(Fault::UrlEmpty)?),
        _ => Err(Fault::UnknownType),
    }
}

/// Whether a string is empty after JavaScript's `String.prototype.trim`.
pub fn is_blank(s: &str) -> bool {
    s.chars().all(is_js_whitespace)
}

/// The characters JavaScript's `trim` removes: WhiteSpace and LineTerminator of ECMA-262.
fn is_js_whitespace(c: char) -> bool {
    matches!(
        c,
        '\u{9}' | '\u{a}' | '\u{b}' | '\u{c}' | '\u{d}' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202f}'
                | '\u{205f}'
                | '\u{3000}'
                | '\u{feff}'
    )
}

fn check_media_type(media_type: &str) -> Result<(), Fault> {
    if is_blank(media_type) {
        return Err(Fault::MediaTypeEmpty);
    }
    if is_parameterless_mime(media_type) {
        Ok(())
    } else {
        Err(Fault::MediaTypeParams)
    }
}

fn check_data(data: &str) -> Result<(), Fault> {
    if is_blank(data) {
        return Err(Fault::DataEmpty);
    }
    if is_canonical_base64(data.as_bytes()) {
        Ok(())
    } else {
        Err(Fault::DataNotBase64)
    }
}

fn check_url(url: &str) -> Result<(), Fault> {
    if is_blank(url) {
        return Err(Fault::UrlEmpty);
    }
    let parsed = url::Url::parse(url).map_err(|_| Fault::UrlNotAbsolute)?;
    match parsed.scheme() {
        "http" | "https" => Ok(()),
        _ => Err(Fault::UrlNotHttp),
    }
}

/// `type "/" subtype`, each token a letter or digit followed by letters, digits and
/// `!#$&^_.+-` (`docs/media.md#mime-types`). The whole string is checked; nothing is trimmed.
pub fn is_parameterless_mime(s: &str) -> bool {
    fn token(t: &[u8]) -> bool {
        match t.split_first() {
            Some((first, rest)) => {
                first.is_ascii_alphanumeric()
                    && rest.iter().all(|&b| {
                        b.is_ascii_alphanumeric()
                            || matches!(
                                b,
                                b'!' | b'#' | b'$' | b'&' | b'^' | b'_' | b'.' | b'+' | b'-'
                            )
                    })
            }
            None => false,
        }
    }
    match s.as_bytes().iter().position(|&b| b == b'/') {
        Some(slash) => token(&s.as_bytes()[..slash]) && token(&s.as_bytes()[slash + 1..]),
        None => false,
    }
}

/// The six-bit value of each standard-alphabet symbol, and `INVALID` for every other byte.
const INVALID: u8 = 0x80;
const DECODE: [u8; 256] = {
    let mut table = [INVALID; 256];
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut i = 0;
    while i < alphabet.len() {
        table[alphabet[i] as usize] = i as u8;
        i += 1;
    }
    table
};

/// Raw canonical base64 (`docs/media.md#base64`): the standard alphabet, then at most two `=`; a
/// non-empty body; neither the whole nor the body of length 1 mod 4; and zero unused bits in the
/// last symbol. Padding is optional, as in OMA.
pub fn is_canonical_base64(data: &[u8]) -> bool {
    let padding = data.iter().rev().take_while(|&&b| b == b'=').count();
    if padding > 2 {
        return false;
    }
    let body = &data[..data.len() - padding];
    if body.is_empty() || data.len() % 4 == 1 || body.len() % 4 == 1 {
        return false;
    }
    if !all_in_alphabet(body) {
        return false;
    }
    let last = DECODE[body[body.len() - 1] as usize];
    match body.len() % 4 {
        2 => last.is_multiple_of(16),
        3 => last.is_multiple_of(4),
        _ => true,
    }
}

/// Whether every byte is in the standard base64 alphabet: one branch-free pass, OR-accumulated
/// per 64-byte chunk, in a form the compiler turns into SIMD (SSE2 natively; the guest has its
/// own version below).
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
fn all_in_alphabet(bytes: &[u8]) -> bool {
    let mut chunks = bytes.chunks_exact(64);
    for chunk in &mut chunks {
        let bad = chunk.iter().fold(0u8, |bad, &b| bad | not_base64(b));
        if bad != 0 {
            return false;
        }
    }
    chunks.remainder().iter().all(|&b| not_base64(b) == 0)
}

/// The guest's [`all_in_alphabet`] (`simd128`, which `.cargo/config.toml` enables): the same
/// test as [`not_base64`], 16 bytes per instruction, written with the intrinsics rather than
/// left to the auto-vectoriser, which only runs at `opt-level = 3`, so that a guest built for
/// size (the JavaScript package's `wasm-size` profile) checks 16 MiB of media as fast as one
/// built for speed.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
fn all_in_alphabet(bytes: &[u8]) -> bool {
    use core::arch::wasm32::{
        u8x16_eq, u8x16_lt, u8x16_splat, u8x16_sub, v128, v128_any_true, v128_load, v128_not,
        v128_or,
    };
    let case = u8x16_splat(0x20);
    let (a, letters) = (u8x16_splat(b'a'), u8x16_splat(26));
    let (zero, digits) = (u8x16_splat(b'0'), u8x16_splat(10));
    let (plus, slash) = (u8x16_splat(b'+'), u8x16_splat(b'/'));
    let mut blocks = bytes.chunks_exact(64);
    for block in &mut blocks {
        let mut bad = u8x16_splat(0);
        for lane in block.chunks_exact(16) {
            // SAFETY: `lane` is 16 readable bytes, and `v128_load` needs no alignment.
            let v = unsafe { v128_load(lane.as_ptr().cast::<v128>()) };
            let letter = u8x16_lt(u8x16_sub(v128_or(v, case), a), letters);
            let digit = u8x16_lt(u8x16_sub(v, zero), digits);
            let symbol = v128_or(u8x16_eq(v, plus), u8x16_eq(v, slash));
            bad = v128_or(bad, v128_not(v128_or(v128_or(letter, digit), symbol)));
        }
        if v128_any_true(bad) {
            return false;
        }
    }
    blocks.remainder().iter().all(|&b| not_base64(b) == 0)
}

/// 1 when `b` is outside `A-Z a-z 0-9 + /`, else 0; arithmetic only, so it vectorises.
#[inline(always)]
fn not_base64(b: u8) -> u8 {
    let letter = (b | 0x20).wrapping_sub(b'a') < 26;
    let digit = b.wrapping_sub(b'0') < 10;
    let symbol = (b == b'+') | (b == b'/');
    u8::from(!(letter | digit | symbol))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mime_table() {
        for ok in [
            "image/png",
            "IMAGE/PNG",
            "video/MP4",
            "image/svg+xml",
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            "application/x.y_z!#$&^",
        ] {
            assert!(is_parameterless_mime(ok), "{ok}");
        }
        for bad in [
            "image/png; charset=x",
            "image/png;charset=x",
            "text/plain;",
            "image/png ",
            " image/png",
            "image",
            "image/",
            "/png",
            "image/*",
            "*/*",
            ".image/png",
            "image/.png",
            "image/p ng",
            "image/png/x",
        ] {
            assert!(!is_parameterless_mime(bad), "{bad}");
        }
    }

    #[test]
    fn base64_table() {
        for ok in [
            "aW1hZ2U=",
            "aW1hZ2U",
            "YQ==",
            "YQ=",
            "YQ",
            "YWJj",
            "YWJj==",
            "YWI=",
            "abc",
            "abcd",
            "AA==",
            "AAA=",
            "+/+/",
            "JVBERi0xLjQ=",
            "YWJjZA=",
        ] {
            assert!(is_canonical_base64(ok.as_bytes()), "{ok}");
        }
        for bad in [
            "YR==",
            "AB==",
            "AAB=",
            "YWJ=",
            "aGl=",
            "ab",
            "ab=",
            "ab==",
            "Y",
            "a",
            "YWJj=",
            "aW1hZ2U==",
            "=",
            "==",
            "====",
            "YWJjZA===",
            "aW1h\nZ2U=",
            "aW1h Z2U=",
            " aW1hZ2U=",
            "-_-_",
            "data:image/png;base64,aW1hZ2U=",
            "not base64!",
            "YW=J",
        ] {
            assert!(!is_canonical_base64(bad.as_bytes()), "{bad}");
        }
    }

    #[test]
    fn the_arithmetic_alphabet_test_matches_the_table() {
        for b in 0..=255u8 {
            assert_eq!(not_base64(b) == 1, DECODE[b as usize] == INVALID, "{b}");
        }
    }

    #[test]
    fn base64_long_inputs_check_every_chunk() {
        let mut data = "QUJD".repeat(100);
        assert!(is_canonical_base64(data.as_bytes()));
        data.replace_range(130..131, "-");
        assert!(!is_canonical_base64(data.as_bytes()));
    }

    #[test]
    fn url_table() {
        for ok in [
            "https://example.com/clip.mp4",
            "http://example.com",
            "http://localhost:8080/a?b=c#d",
            "https://user:pw@example.com/x",
            "https://[::1]/x",
            "https:example.com/x",
            "http:/example.com",
            "https://example.com/a b",
            "  https://x.com/a.png ",
            "\thttps://x.com/a.png\n",
            "HTTPS://EXAMPLE.COM/x",
        ] {
            assert_eq!(check_url(ok), Ok(()), "{ok}");
        }
        for bad in [
            "file:///tmp/x.pdf",
            "data:video/mp4;base64,AAAA",
            "ftp://example.com/x",
            "gs://bucket/x",
            "s3://bucket/x",
            "blob:https://example.com/uuid",
            "javascript:alert(1)",
            "mmfile://abc",
        ] {
            assert_eq!(check_url(bad), Err(Fault::UrlNotHttp), "{bad}");
        }
        for bad in [
            "mm_file://abc123",
            "/relative/path.mp4",
            "example.com/x.mp4",
            "http://",
            "https://",
            "https://exa mple.com",
        ] {
            assert_eq!(check_url(bad), Err(Fault::UrlNotAbsolute), "{bad}");
        }
        assert_eq!(check_url("  "), Err(Fault::UrlEmpty));
    }

    #[test]
    fn blank_follows_javascript_trim() {
        assert!(is_blank(""));
        assert!(is_blank(" \t\n\u{feff}\u{3000}"));
        assert!(!is_blank("\u{85}"));
        assert!(!is_blank(" a "));
    }

    #[test]
    fn media_type_is_checked_before_the_source_type() {
        let source = serde_json::json!({"type": "ftp"});
        assert_eq!(check_source_value(&source), Err(Fault::MediaTypeEmpty));
        let source = serde_json::json!({"type": "ftp", "media_type": "image/png"});
        assert_eq!(check_source_value(&source), Err(Fault::UnknownType));
        assert_eq!(
            check_source_value(&serde_json::json!([])),
            Err(Fault::NotAnObject)
        );
    }
}
