//! Writing request bodies fast and in little code: [`Writer`], a JSON writer with one
//! non-generic method per kind of token.
//!
//! Each adapter's wire types have a `write` method that is a row of short calls (`key`,
//! `string`, `json`, ...), instead of a derived `Serialize` that instantiates `serde_json`'s
//! formatting for every field of every type. Strings are scanned in 64-byte blocks (16 bytes a
//! vector) for the bytes JSON escapes, and the runs between escapes are copied whole, so base64
//! payloads (which need no escapes, though images are not validated and may hold anything) go in
//! at copy speed and message text nearly so; `serde_json` looks at one byte at a time. A data URL
//! is written the same way without being built. The output is byte for byte what `serde_json`
//! writes for the same data.

use serde_json::Value;

/// A JSON writer for request bodies, made for small code: one non-generic method per kind of
/// token, so a wire type's `write` is a row of short calls instead of a derived `Serialize`
/// instantiated with `serde_json`'s formatting inlined into every field. Strings (keys included)
/// are scanned for escapes in 64-byte blocks; numbers are written as `serde_json` writes them.
/// Commas are placed
/// by the writer: every value and key is preceded by one unless it opens its object or array.
/// The output is byte for byte what `serde_json` writes for the same data.
pub struct Writer {
    out: Vec<u8>,
    /// The next value or key follows another one at the same level.
    comma: bool,
}

impl Writer {
    /// A writer whose buffer holds `capacity` bytes before it regrows (see
    /// [`ChatRequest::size_hint`](crate::adapter::ChatRequest::size_hint)).
    pub fn with_capacity(capacity: usize) -> Self {
        Writer {
            out: Vec::with_capacity(capacity),
            comma: false,
        }
    }

    /// The JSON text.
    pub fn finish(self) -> String {
        // SAFETY: every write is a `str` or ASCII punctuation, and the raw runs of a string are
        // `str` slices cut before or after ASCII bytes (see `write_quoted`).
        unsafe { String::from_utf8_unchecked(self.out) }
    }

    fn separate(&mut self) {
        if self.comma {
            self.out.push(b',');
        }
    }

    /// `{`.
    pub fn begin_object(&mut self) {
        self.separate();
        self.out.push(b'{');
        self.comma = false;
    }

    /// `}`.
    pub fn end_object(&mut self) {
        self.out.push(b'}');
        self.comma = true;
    }

    /// `[`.
    pub fn begin_array(&mut self) {
        self.separate();
        self.out.push(b'[');
        self.comma = false;
    }

    /// `]`.
    pub fn end_array(&mut self) {
        self.out.push(b']');
        self.comma = true;
    }

    /// An object key; its value comes next.
    #[inline(never)]
    pub fn key(&mut self, key: &str) {
        self.separate();
        self.write_quoted(key);
        self.out.push(b':');
        self.comma = false;
    }

    /// An object key that needs no escapes (one read from a JSON text where it had none),
    /// copied as it is; its value comes next.
    pub fn plain_key(&mut self, key: &str) {
        self.separate();
        self.out.push(b'"');
        self.out.extend_from_slice(key.as_bytes());
        self.out.extend_from_slice(b"\":");
        self.comma = false;
    }

    /// A string.
    #[inline(never)]
    pub fn string(&mut self, text: &str) {
        self.separate();
        self.write_quoted(text);
        self.comma = true;
    }

    /// `"key":"text"`.
    #[inline(never)]
    pub fn field_str(&mut self, key: &str, text: &str) {
        self.key(key);
        self.string(text);
    }

    /// `data:<media_type>;base64,<data>` as a string, without building it.
    pub fn data_url(&mut self, media_type: &str, data: &str) {
        self.separate();
        self.out.extend_from_slice(b"\"data:");
        self.write_escaped(media_type);
        self.out.extend_from_slice(b";base64,");
        self.write_escaped(data);
        self.out.push(b'"');
        self.comma = true;
    }

    /// A JSON number as `serde_json` writes it.
    #[inline(never)]
    pub fn number(&mut self, n: &serde_json::Number) {
        use std::io::Write as _;
        self.separate();
        // Writing into a Vec cannot fail.
        let _ = write!(self.out, "{n}");
        self.comma = true;
    }

    /// An unsigned integer.
    pub fn u64(&mut self, n: u64) {
        self.number(&n.into());
    }

    /// A float; `null` when it is not finite, as `serde_json` writes one.
    pub fn f64(&mut self, x: f64) {
        match serde_json::Number::from_f64(x) {
            Some(n) => self.number(&n),
            None => self.null(),
        }
    }

    /// A number the way JavaScript's `JSON.stringify` writes it: whole values without `.0`.
    pub fn js_number(&mut self, x: f64) {
        // 2^53: every whole f64 below it is an exact i64.
        if x.is_finite() && x.fract() == 0.0 && x.abs() < 9_007_199_254_740_992.0 {
            self.number(&(x as i64).into());
        } else {
            self.f64(x);
        }
    }

    /// `true` or `false`.
    pub fn bool(&mut self, b: bool) {
        self.raw(if b { "true" } else { "false" });
    }

    /// `null`.
    pub fn null(&mut self) {
        self.raw("null");
    }

    /// A value already written as JSON (a part of a JSON text, copied as it came).
    pub fn json_text(&mut self, json: &str) {
        self.raw(json);
    }

    fn raw(&mut self, token: &str) {
        self.separate();
        self.out.extend_from_slice(token.as_bytes());
        self.comma = true;
    }

    /// A JSON value (a tool's input or schema, an `extra_body` entry), keys and strings through
    /// the block scanner.
    pub fn json(&mut self, value: &Value) {
        match value {
            Value::Null => self.null(),
            Value::Bool(b) => self.bool(*b),
            Value::Number(n) => self.number(n),
            Value::String(text) => self.string(text),
            Value::Array(items) => {
                self.begin_array();
                for item in items {
                    self.json(item);
                }
                self.end_array();
            }
            Value::Object(map) => {
                self.begin_object();
                for (key, item) in map {
                    self.key(key);
                    self.json(item);
                }
                self.end_object();
            }
        }
    }

    fn write_quoted(&mut self, text: &str) {
        self.out.push(b'"');
        self.write_escaped(text);
        self.out.push(b'"');
    }

    /// The inside of a JSON string: the runs between escapes copied as they are, each escape as
    /// `serde_json` writes it.
    fn write_escaped(&mut self, text: &str) {
        let mut rest = text.as_bytes();
        while let Some(at) = next_escape(rest) {
            // `at` is the index of an ASCII byte, so both sides are whole characters.
            self.out.extend_from_slice(&rest[..at]);
            self.out.extend_from_slice(escape(rest[at]).as_bytes());
            rest = &rest[at + 1..];
        }
        self.out.extend_from_slice(rest);
    }
}

/// `data:<media_type>;base64,<data>`, written without building the string.
#[derive(Clone, Copy, Debug)]
pub struct DataUrl<'a> {
    /// The MIME type.
    pub media_type: &'a str,
    /// The base64 text.
    pub data: &'a str,
}

/// A JSON number as JavaScript writes it (`JSON.stringify`, `String(n)`): whole floats without
/// `.0`, integers exactly.
pub fn js_number(n: &serde_json::Number) -> String {
    match n.as_f64() {
        // 2^53: every whole f64 below it is an exact i64.
        Some(x) if n.is_f64() && x.fract() == 0.0 && x.abs() < 9_007_199_254_740_992.0 => {
            format!("{}", x as i64)
        }
        _ => n.to_string(),
    }
}

/// The escape `serde_json` writes for `byte` (a control character, `"` or `\\`): the short
/// forms where JSON has them, else `\u00xx` in lowercase hex.
fn escape(byte: u8) -> &'static str {
    const CONTROL: [&str; 32] = [
        "\\u0000", "\\u0001", "\\u0002", "\\u0003", "\\u0004", "\\u0005", "\\u0006", "\\u0007",
        "\\b", "\\t", "\\n", "\\u000b", "\\f", "\\r", "\\u000e", "\\u000f", "\\u0010", "\\u0011",
        "\\u0012", "\\u0013", "\\u0014", "\\u0015", "\\u0016", "\\u0017", "\\u0018", "\\u0019",
        "\\u001a", "\\u001b", "\\u001c", "\\u001d", "\\u001e", "\\u001f",
    ];
    match byte {
        b'"' => "\\\"",
        b'\\' => "\\\\",
        _ => CONTROL.get(usize::from(byte)).copied().unwrap_or(""),
    }
}

/// 1 when JSON needs an escape for `b`, else 0; arithmetic only, so it vectorises.
#[inline(always)]
fn escaped(b: u8) -> u8 {
    u8::from((b < 0x20) | (b == b'"') | (b == b'\\'))
}

/// The index of the first byte that needs an escape: 64-byte blocks are tested whole
/// ([`block_needs_escape`]), and only the block with a hit is searched byte by byte.
fn next_escape(bytes: &[u8]) -> Option<usize> {
    let mut at = 0;
    for block in bytes.as_chunks::<64>().0 {
        if block_needs_escape(block) {
            break;
        }
        at += 64;
    }
    bytes[at..]
        .iter()
        .position(|&b| escaped(b) != 0)
        .map(|i| at + i)
}

/// Whether a 64-byte block holds a byte that needs an escape: four SIMD compares with
/// `simd128`, which `.cargo/config.toml` enables for the guest (the fold below does not
/// vectorise there).
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
#[inline(always)]
fn block_needs_escape(block: &[u8; 64]) -> bool {
    use core::arch::wasm32::{u8x16_eq, u8x16_lt, u8x16_splat, v128, v128_any_true, v128_or};
    let hit = |bytes: &[u8; 16]| -> v128 {
        // SAFETY: `bytes` is 16 readable bytes; `v128_load` needs no alignment.
        let v = unsafe { core::arch::wasm32::v128_load(bytes.as_ptr().cast()) };
        v128_or(
            u8x16_lt(v, u8x16_splat(0x20)),
            v128_or(
                u8x16_eq(v, u8x16_splat(b'"')),
                u8x16_eq(v, u8x16_splat(b'\\')),
            ),
        )
    };
    let all = block.as_chunks::<16>().0.iter().map(hit);
    v128_any_true(all.fold(u8x16_splat(0), |acc, h| v128_or(acc, h)))
}

/// Whether a 64-byte block holds a byte that needs an escape (the compiler vectorises the fold).
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
#[inline(always)]
fn block_needs_escape(block: &[u8; 64]) -> bool {
    block.iter().fold(0u8, |hit, &b| hit | escaped(b)) != 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn string(text: &str) -> String {
        let mut w = Writer::with_capacity(0);
        w.string(text);
        w.finish()
    }

    fn data_url(media_type: &str, data: &str) -> String {
        let mut w = Writer::with_capacity(0);
        w.data_url(media_type, data);
        w.finish()
    }

    #[test]
    fn strings_and_data_urls_match_serde_json() {
        for s in [
            "",
            "AAAA",
            "abc+/==",
            "a\"b",
            "tab\there",
            "back\\slash",
            "é\u{1}",
            "x".repeat(100).as_str(),
        ] {
            assert_eq!(string(s), serde_json::to_string(s).unwrap(), "{s:?}");
            assert_eq!(
                data_url("image/png", s),
                serde_json::to_string(&format!("data:image/png;base64,{s}")).unwrap()
            );
        }
    }

    #[test]
    fn every_escape_at_every_block_position_matches_serde_json() {
        let mut cases: Vec<String> = [
            "",
            "plain",
            "\"",
            "\\",
            "a\"b\\c\nd",
            "line\nline\r\n\ttab\u{8}\u{c}",
            "\u{0}\u{1}\u{b}\u{e}\u{1f}\u{7f} é 😀 \u{2028}",
            "\"\"\"\\\\",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for byte in 0u8..0x80 {
            for at in [0, 1, 15, 16, 17, 31, 40, 63, 64, 65, 127, 129] {
                let mut s = "x".repeat(130);
                s.replace_range(at..=at, &char::from(byte).to_string());
                cases.push(s);
            }
        }
        for s in &cases {
            assert_eq!(string(s), serde_json::to_string(s).unwrap(), "{s:?}");
        }
    }

    #[test]
    fn json_values_match_serde_json() {
        let values = [
            json!(null),
            json!(true),
            json!(-1.5e300),
            json!(12),
            json!("a\"b\\c\n\u{1}é"),
            json!([]),
            json!({}),
            json!({"k\"ey": ["x\ty", {"n": null, "deep": [1, "\u{7f}", {"\n": "\u{2028}"}]}], "z": false}),
        ];
        for value in &values {
            let mut w = Writer::with_capacity(0);
            w.json(value);
            assert_eq!(w.finish(), serde_json::to_string(value).unwrap(), "{value}");
        }
    }

    /// Everything [`Writer`] writes, in nested objects and arrays, against `serde_json`.
    #[test]
    fn the_writer_matches_serde_json() {
        let mut w = Writer::with_capacity(0);
        w.begin_array();
        w.u64(u64::MAX);
        w.f64(0.1);
        w.f64(1.0);
        w.f64(f64::NAN);
        w.js_number(3.0);
        w.js_number(-0.5);
        w.js_number(1e300);
        w.data_url("image/png", "QU\"JD");
        w.begin_object();
        w.field_str("a", "b");
        w.key("c");
        w.begin_array();
        w.end_array();
        w.key("d");
        w.begin_object();
        w.end_object();
        w.key("e\n");
        w.bool(false);
        w.key("f");
        w.null();
        w.end_object();
        w.begin_array();
        w.string("x");
        w.end_array();
        w.end_array();
        let expected = json!([
            u64::MAX, 0.1, 1.0, null, 3, -0.5, 1e300, "data:image/png;base64,QU\"JD",
            {"a": "b", "c": [], "d": {}, "e\n": false, "f": null}, ["x"]
        ]);
        assert_eq!(w.finish(), serde_json::to_string(&expected).unwrap());
    }

    #[test]
    fn next_escape_finds_every_position() {
        for bad in [b'"', b'\\', 0u8, 0x1f] {
            for at in 0..200 {
                let mut bytes = vec![b'A'; 200];
                bytes[at] = bad;
                assert_eq!(next_escape(&bytes), Some(at), "{bad} at {at}");
            }
        }
        assert_eq!(next_escape("AZaz09+/= é~\u{7f}".as_bytes()), None);
    }
}
