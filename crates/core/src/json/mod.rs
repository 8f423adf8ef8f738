//! OMA JSON in and out, one job a module: [`guard`] is OMA's shape guard
//! (`assertValidMessages`) on untyped JSON; [`typing`] converts what passed into the typed
//! model; [`direct`] reads a message list straight into the model where it can, with the same
//! result; `write` maps the model back to OMA JSON; [`writer`] is the JSON writer the request
//! bodies and `write` share; [`object`] reads configurations and responses field by field;
//! [`schema`] checks values against a JSON Schema.
//!
//! Two passes, so each stays faithful to its contract:
//!
//! 1. [`assert_valid_messages`] is OMA's guard, check for check: the same order, the first
//!    failure wins, and byte-identical messages (`docs/messages.md#checks-in-order`,
//!    `docs/media.md#media-source-rules`). Anything OMA rejects is rejected here with OMA's
//!    message.
//! 2. The conversion then applies this component's stricter typing, which OMA does not have:
//!    roles must be `user` or `assistant`, block types must be one of the six, and the fields a
//!    typed value needs (text, ids, names, image sources) must be strings. These messages are our
//!    own; they name the path like OMA's do. Unknown extra fields are dropped.
//!
//! Strings are moved out of the parsed JSON, never copied, so large media costs one parse and
//! one validation pass.

pub mod direct;
pub mod guard;
pub mod object;
pub mod schema;
pub mod typing;
mod write;
pub mod writer;

pub use direct::direct_messages;
pub use guard::{assert_valid_messages, type_word};
pub use typing::{messages_from_json, messages_from_value, tool_result_content_from_json};
pub use write::{messages_to_json, messages_to_value};

/// Parses JSON bytes (an HTTP body, an event's payload) through [`from_str`], the parser every
/// text input takes: one set of deserialiser instantiations per type instead of two, which is
/// 35 KB of the guest. Bytes that are not UTF-8 fail as `serde_json` would fail on them, with
/// the position of the first bad byte.
pub fn from_bytes<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, BytesError> {
    crate::limits::check_json_text(bytes).map_err(BytesError::TooLarge)?;
    let text = std::str::from_utf8(bytes).map_err(BytesError::Utf8)?;
    serde_json::from_str(text).map_err(BytesError::Json)
}

/// Parses JSON text with `serde_json::from_str`, once [`crate::limits::check_json_text`] has
/// counted its values: a text past [`crate::limits::MAX_JSON_VALUES`] values or
/// [`crate::limits::MAX_JSON_CONTAINERS`] objects and arrays fails (with a message naming the
/// limit) before any of it is parsed, so no text under the body limit can take the memory a
/// million parsed values would. Every JSON text the core, the worlds and the gateway read is
/// parsed here.
pub fn from_str<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, serde_json::Error> {
    crate::limits::check_json_text(text.as_bytes())
        .map_err(<serde_json::Error as serde::de::Error>::custom)?;
    serde_json::from_str(text)
}

/// Puts long strings that travelled beside a JSON text back into its parsed value: each
/// `(pointer, text)` replaces the value at that JSON Pointer (RFC 6901), in order, so the value
/// is the one the whole text would have parsed to. A host passes a run's input this way to keep
/// large media out of its own JSON writer and out of the parser (the `*-json-parts` functions of
/// the `portable` world's driver). A pointer that names no value fails with
/// [`Error::InvalidRequest`](crate::error::Error::InvalidRequest), naming the pointer; `value` may then hold some of the strings.
pub fn place_strings(
    value: &mut serde_json::Value,
    strings: Vec<(String, String)>,
) -> Result<(), crate::error::Error> {
    for (pointer, text) in strings {
        match value.pointer_mut(&pointer) {
            Some(slot) => *slot = serde_json::Value::String(text),
            None => {
                return Err(crate::error::Error::InvalidRequest {
                    message: format!(
                        "a string passed beside the JSON text names no value of it: {pointer:?}"
                    ),
                })
            }
        }
    }
    Ok(())
}

/// Why [`from_bytes`] failed.
#[derive(Debug)]
pub enum BytesError {
    /// The bytes are not UTF-8.
    Utf8(std::str::Utf8Error),
    /// The text is not JSON of the expected shape.
    Json(serde_json::Error),
    /// The text holds more values than [`crate::limits`] allows; it was not parsed.
    TooLarge(String),
}

impl std::fmt::Display for BytesError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BytesError::Utf8(e) => write!(f, "invalid UTF-8 at byte {}", e.valid_up_to()),
            BytesError::Json(e) => e.fmt(f),
            BytesError::TooLarge(why) => f.write_str(why),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::error::Error;
    use crate::message::*;

    #[test]
    fn tool_result_content_reads_strings_and_parts() {
        assert_eq!(
            tool_result_content_from_json(r#""done""#).unwrap(),
            ToolResultContent::Text("done".into())
        );
        let parts = r#"[{"type": "text", "text": "4"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
            {"type": "file", "filename": "a.pdf", "source": {"type": "url", "media_type": "application/pdf", "url": "https://x.example/a.pdf"}, "extra": 1}]"#;
        assert_eq!(
            tool_result_content_from_json(parts).unwrap(),
            ToolResultContent::Parts(vec![
                ToolResultPart::Text { text: "4".into() },
                ToolResultPart::Image {
                    source: MediaSource::Base64 {
                        media_type: "image/png".into(),
                        data: "AAAA".into()
                    }
                },
                ToolResultPart::File {
                    filename: "a.pdf".into(),
                    source: MediaSource::Url {
                        media_type: "application/pdf".into(),
                        url: "https://x.example/a.pdf".into()
                    }
                },
            ])
        );
        assert_eq!(
            tool_result_content_from_json("[]").unwrap(),
            ToolResultContent::Parts(vec![])
        );
        for (bad, why) in [
            ("{not json", "key must be a string at line 1 column 2"),
            ("1", "got number"),
            ("null", "got null"),
            (r#"{"type": "text"}"#, "got object"),
            (r#"[{"type": "text"}]"#, "part [0] is not one"),
            (r#"["x"]"#, "part [0] is not one"),
            (
                r#"[{"type": "text", "text": "a"}, {"type": "video"}]"#,
                "part [1] is not one",
            ),
        ] {
            let error = tool_result_content_from_json(bad).unwrap_err();
            assert_eq!(
                error.kind(),
                crate::error::ErrorKind::InvalidMessage,
                "{bad}"
            );
            assert_eq!(
                error.to_string(),
                format!("a tool's content must be OMA JSON: a string or a list of content parts ({why})"),
                "{bad}"
            );
        }
    }

    #[test]
    fn bytes_parse_as_text_does_and_non_utf8_fails_with_its_position() {
        let value: Value = from_bytes(br#"{"a": ["\u00e9", 1.5]}"#).unwrap();
        assert_eq!(value, serde_json::json!({"a": ["é", 1.5]}));
        let error = from_bytes::<Value>(b"{\"a\": \"\xff\"}").unwrap_err();
        assert!(matches!(error, BytesError::Utf8(_)), "{error:?}");
        assert_eq!(error.to_string(), "invalid UTF-8 at byte 7");
        let error = from_bytes::<Value>(b"{\"a\":").unwrap_err();
        assert!(matches!(error, BytesError::Json(_)), "{error:?}");
        assert_eq!(
            error.to_string(),
            serde_json::from_str::<Value>("{\"a\":")
                .unwrap_err()
                .to_string()
        );
    }

    /// The table shared with the through-the-component tests: every rule of
    /// `docs/messages.md#the-shape-guard` and this component's strictness, each with its exact
    /// message (or none when accepted).
    const CASES: &str = include_str!("../../../../fixtures/guard_cases.json");

    #[test]
    fn guard_table() {
        let cases: Vec<Value> = serde_json::from_str(CASES).unwrap();
        assert!(cases.len() > 100);
        for case in cases {
            let name = case["name"].as_str().unwrap();
            let got = messages_from_value(case["input"].clone()).map(|_| ());
            match case["error"].as_str() {
                None => assert_eq!(got, Ok(()), "{name}"),
                Some(message) => assert_eq!(got, Err(Error::invalid(message)), "{name}"),
            }
        }
    }

    #[test]
    fn json_round_trips_every_block_kind() {
        let text = r#"[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"abc123"}},{"type":"video","source":{"type":"url","media_type":"video/mp4","url":" https://e.com/v.mp4"}},{"type":"video","source":{"type":"base64","media_type":"video/mp4","data":"AAAA"}},{"type":"tool_result","tool_use_id":"c1","content":[{"type":"text","text":"t"},{"type":"image","source":{"type":"url","media_type":"image/png","url":"https://e.com/a.png"}},{"type":"file","filename":"r.pdf","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0xLjQ="}}]},{"type":"tool_result","tool_use_id":"c2","content":"boom","is_error":true}]},{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"f","input":{"z":1,"a":[true,null]},"signature":"s"},{"type":"reasoning","text":"","signature":"sig","redactedData":"cmVk","provenance":"anthropic"}]}]"#;
        let messages = messages_from_json(text).unwrap();
        assert_eq!(messages_to_json(&messages), text);
        assert_eq!(messages_to_value(&messages).to_string(), text);
    }

    #[test]
    fn strings_beside_the_text_are_put_back_in_place() {
        let whole = r#"[{"role":"user","content":[{"type":"text","text":"a/b"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]}]"#;
        let mut value: Value = from_str(
            r#"[{"role":"user","content":[{"type":"text","text":""},{"type":"image","source":{"type":"base64","media_type":"image/png","data":""}}]}]"#,
        )
        .unwrap();
        place_strings(
            &mut value,
            vec![
                ("/0/content/1/source/data".into(), "AAAA".into()),
                ("/0/content/0/text".into(), "a/b".into()),
            ],
        )
        .unwrap();
        assert_eq!(value, from_str::<Value>(whole).unwrap());
        assert_eq!(
            messages_from_value(value).unwrap(),
            messages_from_json(whole).unwrap()
        );
        // The root itself, and a later string over an earlier one.
        let mut value = Value::Null;
        place_strings(
            &mut value,
            vec![("".into(), "x".into()), ("".into(), "y".into())],
        )
        .unwrap();
        assert_eq!(value, Value::String("y".into()));
        for pointer in ["/1", "/0/content/9/text", "0", "/0/nope"] {
            let mut value: Value = from_str(whole).unwrap();
            let error = place_strings(&mut value, vec![(pointer.into(), "x".into())]).unwrap_err();
            assert_eq!(error.kind(), crate::error::ErrorKind::Other, "{pointer}");
            assert_eq!(
                error.to_string(),
                format!("a string passed beside the JSON text names no value of it: {pointer:?}")
            );
        }
    }

    #[test]
    fn unknown_fields_are_dropped() {
        let messages = messages_from_json(
            r#"[{"role":"user","extra":1,"content":[{"type":"text","text":"a","cache":true}]}]"#,
        )
        .unwrap();
        assert_eq!(
            messages_to_json(&messages),
            r#"[{"role":"user","content":[{"type":"text","text":"a"}]}]"#
        );
    }

    #[test]
    fn not_json_is_an_invalid_message() {
        let err = messages_from_json("[{").unwrap_err();
        assert!(err.to_string().starts_with("messages must be valid JSON: "));
    }

    /// Found by the property tests and by the `validate` fuzz target: serde_json's default
    /// number parser can be one unit in the last place off, so a tool input's float changed on
    /// a round trip through OMA JSON (`-2.0237268418735433e-158` came back as
    /// `-2.023726841873543e-158`, `1.4826765265342648e-304` as `1.4826765265342646e-304`).
    /// With `float_roundtrip` numbers parse exactly, as `JSON.parse` does.
    #[test]
    fn tool_input_floats_round_trip_exactly() {
        for number in [
            -2.0237268418735433e-158,
            -1.4431880247608167e258,
            0.1,
            5e-324,
        ] {
            let text = format!(
                r#"[{{"role": "user", "content": [{{"type": "tool_use", "id": "t", "name": "n",
                    "input": {{"x": {number:e}}}}}]}}]"#
            );
            let messages = messages_from_json(&text).unwrap();
            let ContentBlock::ToolUse(call) = &messages[0].content[0] else {
                panic!("a tool_use block")
            };
            assert_eq!(call.input["x"].as_f64(), Some(number));
            let written = messages_to_json(&messages);
            assert_eq!(messages_from_json(&written).unwrap(), messages);
        }
    }
}
