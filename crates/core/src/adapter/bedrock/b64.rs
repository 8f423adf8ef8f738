//! Bedrock's `bytes` fields: base64 on the JSON wire, produced the way OMA's Node code does
//! (`Buffer.from(data, 'base64')` and back), without decoding when that changes nothing.
//!
//! Node's decoder is lenient: it accepts the standard and URL-safe alphabets, skips any other
//! character, stops at the first `=`, and drops unused trailing bits. Re-encoding gives padded
//! standard base64. For input that is already canonical and padded the round trip is the
//! identity, so that input (every validated tool-result payload with padding, and almost every
//! image) is forwarded as it is, at copy speed.

use std::borrow::Cow;

use base64::Engine;

use crate::validate::media::is_canonical_base64;

/// The base64 text Node would send for `data`: `data` itself when it is canonical and padded,
/// otherwise the lenient decode re-encoded.
pub fn node_round_trip(data: &str) -> Cow<'_, str> {
    if is_canonical_padded(data.as_bytes()) {
        Cow::Borrowed(data)
    } else {
        Cow::Owned(base64::engine::general_purpose::STANDARD.encode(lenient_decode(data)))
    }
}

/// Canonical base64 (`docs/media.md#base64`) whose padding is exactly what the encoder writes.
fn is_canonical_padded(data: &[u8]) -> bool {
    if !data.len().is_multiple_of(4) || !is_canonical_base64(data) {
        return false;
    }
    let padding = data.iter().rev().take_while(|&&b| b == b'=').count();
    let body = data.len() - padding;
    padding == (4 - body % 4) % 4
}

/// Node's `Buffer.from(text, 'base64')`.
pub fn lenient_decode(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3 + 2);
    let mut bits: u32 = 0;
    let mut count = 0u32;
    for &byte in text.as_bytes() {
        let value = match byte {
            b'A'..=b'Z' => byte - b'A',
            b'a'..=b'z' => byte - b'a' + 26,
            b'0'..=b'9' => byte - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            b'=' => break,
            _ => continue,
        };
        bits = (bits << 6) | u32::from(value);
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
            bits &= (1 << count) - 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lenient_decoding_follows_node() {
        // Expected values from Node: Buffer.from(s, 'base64').
        let cases: &[(&str, &[u8])] = &[
            ("", b""),
            ("YQ==", b"a"),
            ("YQ", b"a"),
            ("YR==", b"a"),
            ("Y", b""),
            ("YWJj", b"abc"),
            ("YW Jj\n", b"abc"),
            ("YW*Jj", b"abc"),
            ("YQ==YWJj", b"a"),
            ("=YWJj", b""),
            ("_-8", &[0xff, 0xef]),
            ("/+8", &[0xff, 0xef]),
            ("aW1hZ2U", b"image"),
            ("é", b""),
            ("base64data", &[0x6d, 0xab, 0x1e, 0xeb, 0x87, 0x5a, 0xb5]),
        ];
        for (text, bytes) in cases {
            assert_eq!(lenient_decode(text), *bytes, "{text:?}");
        }
    }

    #[test]
    fn round_trip_borrows_only_when_nothing_changes() {
        for (text, wire, borrowed) in [
            ("YWJj", "YWJj", true),
            ("YQ==", "YQ==", true),
            ("AAA=", "AAA=", true),
            ("YQ", "YQ==", false),
            ("YWJj==", "YWJj", false),
            ("YR==", "YQ==", false),
            ("abc", "abc=", false),
            ("base64data", "base64datQ==", false),
            ("abc123", "abc12w==", false),
            ("", "", false),
        ] {
            let got = node_round_trip(text);
            assert_eq!(got, wire, "{text:?}");
            assert_eq!(matches!(got, Cow::Borrowed(_)), borrowed, "{text:?}");
        }
    }
}
