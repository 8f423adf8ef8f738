//! The media tables of `docs/media.md` (`fixtures/media-rules.json`): every MIME, base64 and
//! URL row, in a video block (any role) and in tool-result image and file parts, through
//! `messages-from-json` (OMA JSON) and through `validate-messages` and `messages-to-json` (WIT
//! values). All three must give the same verdict and the same message.

use oma_host_tests::{FilePart, Guest, LlmMessage, MediaSource, ToolResultPart};
use serde_json::{json, Value};

use crate::common::{
    assert_invalid_message, assistant, base64, fixture, guest, text, tool_result, url, user, video,
    MEDIA_RULES,
};

/// One row: a source, and the end of the message it fails with (`None` = accepted).
struct Row {
    label: String,
    source: Value,
    fault: Option<&'static str>,
}

/// Where a source sits: builds the JSON and WIT messages and names the source's path.
struct Place {
    name: &'static str,
    path: &'static str,
    json: fn(Value) -> Value,
    wit: fn(MediaSource) -> Vec<LlmMessage>,
}

const PLACES: &[Place] = &[
    Place {
        name: "video block in a user turn",
        path: "messages[0].content[1].source",
        json: |s| {
            json!([{"role": "user", "content": [
            {"type": "text", "text": "look"}, {"type": "video", "source": s}]}])
        },
        wit: |s| vec![user(vec![text("look"), video(s)])],
    },
    Place {
        name: "video block in an assistant turn",
        path: "messages[1].content[0].source",
        json: |s| {
            json!([{"role": "user", "content": []},
            {"role": "assistant", "content": [{"type": "video", "source": s}]}])
        },
        wit: |s| vec![user(vec![]), assistant(vec![video(s)])],
    },
    Place {
        name: "tool-result image part",
        path: "messages[0].content[0].content[1].source",
        json: |s| {
            json!([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1",
            "content": [{"type": "text", "text": "shot"}, {"type": "image", "source": s}]}]}])
        },
        wit: |s| {
            vec![user(vec![tool_result(
                vec![
                    ToolResultPart::Text("shot".into()),
                    ToolResultPart::Image(s),
                ],
                None,
            )])]
        },
    },
    Place {
        name: "tool-result file part",
        path: "messages[0].content[0].content[0].source",
        json: |s| {
            json!([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1",
            "content": [{"type": "file", "filename": "a.bin", "source": s}], "is_error": false}]}])
        },
        wit: |s| {
            vec![user(vec![tool_result(
                vec![ToolResultPart::File(FilePart {
                    filename: "a.bin".into(),
                    source: s,
                })],
                Some(false),
            )])]
        },
    },
];

fn strings(table: &Value, key: &str) -> Vec<String> {
    table[key]
        .as_array()
        .unwrap_or_else(|| panic!("media-rules.json has {key}"))
        .iter()
        .map(|v| v.as_str().expect("a string").to_owned())
        .collect()
}

fn rows() -> Vec<Row> {
    let rules = fixture(MEDIA_RULES);
    let mut rows = Vec::new();
    let mut add = |label: String, source: Value, fault| {
        rows.push(Row {
            label,
            source,
            fault,
        })
    };
    for (key, fault) in [
        ("accept", None),
        (
            "reject",
            Some(".media_type must be a MIME type without parameters"),
        ),
    ] {
        for mime in strings(&rules["mime"], key) {
            add(
                format!("mime {key} {mime:?} (base64)"),
                json!({"type": "base64", "media_type": mime, "data": "AAAA"}),
                fault,
            );
            add(
                format!("mime {key} {mime:?} (url)"),
                json!({"type": "url", "media_type": mime, "url": "https://example.com/x"}),
                fault,
            );
        }
    }
    for (key, fault) in [
        ("accept", None),
        ("reject", Some(".data must contain raw base64 data")),
        ("empty", Some(".data must be a non-empty string")),
    ] {
        for data in strings(&rules["base64"], key) {
            add(
                format!("base64 {key} {data:?}"),
                json!({"type": "base64", "media_type": "video/mp4", "data": data}),
                fault,
            );
        }
    }
    for (key, fault) in [
        ("accept", None),
        ("not_http", Some(".url must use HTTP or HTTPS")),
        ("not_absolute", Some(".url must be an absolute HTTP(S) URL")),
        ("empty", Some(".url must be a non-empty string")),
    ] {
        for u in strings(&rules["url"], key) {
            add(
                format!("url {key} {u:?}"),
                json!({"type": "url", "media_type": "video/mp4", "url": u}),
                fault,
            );
        }
    }
    rows
}

fn wit_source(source: &Value) -> MediaSource {
    let field = |key: &str| source[key].as_str().expect("string fields");
    match field("type") {
        "base64" => base64(field("media_type"), field("data")),
        _ => url(field("media_type"), field("url")),
    }
}

/// Runs one row in one place through all three functions; returns what went wrong.
async fn check(guest: &mut Guest, row: &Row, place: &Place) -> Vec<String> {
    let expected = row.fault.map(|fault| format!("{}{fault}", place.path));
    let json_input = (place.json)(row.source.clone()).to_string();
    let wit_input = (place.wit)(wit_source(&row.source));
    let verdicts = [
        (
            "messages-from-json",
            guest
                .messages_from_json(&json_input)
                .await
                .expect("no trap")
                .map(|_| ()),
        ),
        (
            "validate-messages",
            guest.validate_messages(&wit_input).await.expect("no trap"),
        ),
        (
            "messages-to-json",
            guest
                .messages_to_json(&wit_input)
                .await
                .expect("no trap")
                .map(|_| ()),
        ),
    ];
    let mut failures = Vec::new();
    for (function, verdict) in verdicts {
        let got = match verdict {
            Ok(()) => None,
            Err(error) => {
                assert_invalid_message(&error);
                Some(error.message)
            }
        };
        if got != expected {
            failures.push(format!(
                "{} in a {} via {function}:\n   got: {got:?}\n  want: {expected:?}",
                row.label, place.name
            ));
        }
    }
    failures
}

#[tokio::test]
async fn every_row_of_the_media_tables_in_every_place() {
    let mut guest = guest().await;
    let mut failures = Vec::new();
    let rows = rows();
    assert!(rows.len() > 100, "the tables are all there");
    for row in &rows {
        for place in PLACES {
            failures.extend(check(&mut guest, row, place).await);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test]
async fn urls_are_forwarded_exactly_as_given() {
    let mut guest = guest().await;
    let rules = fixture(MEDIA_RULES);
    for u in strings(&rules["url"], "accept") {
        let messages = vec![user(vec![video(url("video/mp4", &u))])];
        let json = guest
            .messages_to_json(&messages)
            .await
            .expect("no trap")
            .expect("accepted");
        let back = guest
            .messages_from_json(&json)
            .await
            .expect("no trap")
            .expect("accepted");
        assert_eq!(back, messages, "{u:?} is kept, never normalised");
    }
}

/// Long base64 data is checked in 64-byte blocks, 16 bytes per SIMD compare in the guest: a byte
/// outside the alphabet (the neighbours of each range, a space, a line break, a non-ASCII
/// letter, `=` inside the body) is found at every position of every block and of the tail.
#[tokio::test]
async fn a_bad_byte_is_found_at_every_position_of_long_data() {
    let mut guest = guest().await;
    let alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    // Three whole blocks and an 8-byte tail.
    let valid = format!("{}{}", alphabet.repeat(3), &alphabet[..8]);
    let ok = vec![user(vec![video(base64("video/mp4", &valid))])];
    let verdict = guest.validate_messages(&ok).await.expect("no trap");
    assert!(verdict.is_ok(), "{verdict:?}");
    let bad = [
        '@', '[', '`', '{', ':', '*', ',', '.', '-', '_', ' ', '\n', 'é', '=',
    ];
    for at in 0..valid.len() - 4 {
        let byte = bad[at % bad.len()];
        let mut data = valid.clone();
        data.replace_range(at..=at, &byte.to_string());
        let messages = vec![user(vec![video(base64("video/mp4", &data))])];
        let error = guest
            .validate_messages(&messages)
            .await
            .expect("no trap")
            .expect_err(&format!("{byte:?} at {at}"));
        assert_invalid_message(&error);
        assert!(
            error
                .message
                .ends_with(".data must contain raw base64 data"),
            "{byte:?} at {at}: {}",
            error.message
        );
    }
}
