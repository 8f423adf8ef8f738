//! Every kind of block crosses the boundary both ways without loss: WIT value ->
//! `messages-to-json` -> `messages-from-json` -> the same WIT value, and OMA JSON ->
//! `messages-from-json` -> `messages-to-json` -> the same JSON.

use oma_host_tests::{
    ContentBlock, FilePart, ImageBlock, LlmMessage, ReasoningBlock, ToolResultBlock,
    ToolResultContent, ToolResultPart, ToolUseBlock,
};
use serde_json::{json, Value};

use crate::common::{
    assistant, base64, fixture, guest, text, tool_result, url, user, video, CONVERSATION,
};

fn image(media_type: &str, data: &str) -> ContentBlock {
    ContentBlock::Image(ImageBlock {
        source: oma_host_tests::MediaSource::Base64(oma_host_tests::Base64Source {
            media_type: media_type.into(),
            data: data.into(),
        }),
    })
}

fn tool_use(id: &str, name: &str, input: &str, signature: Option<&str>) -> ContentBlock {
    ContentBlock::ToolUse(ToolUseBlock {
        id: id.into(),
        name: name.into(),
        input: input.into(),
        signature: signature.map(Into::into),
    })
}

fn string_result(id: &str, content: &str, is_error: Option<bool>) -> ContentBlock {
    ContentBlock::ToolResult(ToolResultBlock {
        tool_use_id: id.into(),
        content: ToolResultContent::Text(content.into()),
        is_error,
    })
}

fn reasoning(
    text: &str,
    signature: Option<&str>,
    redacted: Option<&str>,
    provenance: Option<&str>,
) -> ContentBlock {
    ContentBlock::Reasoning(ReasoningBlock {
        text: text.into(),
        signature: signature.map(Into::into),
        redacted_data: redacted.map(Into::into),
        provenance: provenance.map(Into::into),
    })
}

/// Each kind of block as a WIT value and as OMA JSON.
fn blocks() -> Vec<(&'static str, ContentBlock, Value)> {
    vec![
        (
            "text",
            text("hello"),
            json!({"type": "text", "text": "hello"}),
        ),
        ("empty text", text(""), json!({"type": "text", "text": ""})),
        (
            "image",
            image("image/png", "iVBORw0KGgo="),
            json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}),
        ),
        (
            "image with unchecked data",
            image("image/png", "base64data"),
            json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "base64data"}}),
        ),
        (
            "video base64",
            video(base64("video/mp4", "AAAAIGZ0eXBpc29t")),
            json!({"type": "video", "source": {"type": "base64", "media_type": "video/mp4", "data": "AAAAIGZ0eXBpc29t"}}),
        ),
        (
            "video url",
            video(url("video/mp4", "https://example.com/clip.mp4")),
            json!({"type": "video", "source": {"type": "url", "media_type": "video/mp4", "url": "https://example.com/clip.mp4"}}),
        ),
        (
            "tool use",
            tool_use(
                "call_1",
                "read_file",
                r#"{"path":"a.txt","max_bytes":4096}"#,
                None,
            ),
            json!({"type": "tool_use", "id": "call_1", "name": "read_file", "input": {"path": "a.txt", "max_bytes": 4096}}),
        ),
        (
            "tool use with signature",
            tool_use(
                "call_2",
                "search",
                r#"{"q":"x","opts":{"n":[1,2]}}"#,
                Some("thought-sig"),
            ),
            json!({"type": "tool_use", "id": "call_2", "name": "search", "input": {"q": "x", "opts": {"n": [1, 2]}}, "signature": "thought-sig"}),
        ),
        (
            "tool result string",
            string_result("call_1", "result data", None),
            json!({"type": "tool_result", "tool_use_id": "call_1", "content": "result data"}),
        ),
        (
            "tool result error",
            string_result("call_1", "boom", Some(true)),
            json!({"type": "tool_result", "tool_use_id": "call_1", "content": "boom", "is_error": true}),
        ),
        (
            "tool result parts",
            tool_result(
                vec![
                    ToolResultPart::Text("page".into()),
                    ToolResultPart::Image(base64("image/png", "iVBORw0KGgo=")),
                    ToolResultPart::Image(url("image/jpeg", "https://example.com/a.jpg")),
                    ToolResultPart::File(FilePart {
                        filename: "a.pdf".into(),
                        source: base64("application/pdf", "JVBERi0xLjQ="),
                    }),
                    ToolResultPart::File(FilePart {
                        filename: "a.html".into(),
                        source: url("text/html", "https://example.com/a.html"),
                    }),
                ],
                Some(false),
            ),
            json!({"type": "tool_result", "tool_use_id": "call_1", "content": [
                {"type": "text", "text": "page"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
                {"type": "image", "source": {"type": "url", "media_type": "image/jpeg", "url": "https://example.com/a.jpg"}},
                {"type": "file", "filename": "a.pdf", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjQ="}},
                {"type": "file", "filename": "a.html", "source": {"type": "url", "media_type": "text/html", "url": "https://example.com/a.html"}}
            ], "is_error": false}),
        ),
        (
            "reasoning",
            reasoning("thinking", None, None, None),
            json!({"type": "reasoning", "text": "thinking"}),
        ),
        (
            "reasoning with signature and provenance",
            reasoning("thinking", Some("sig"), None, Some("anthropic")),
            json!({"type": "reasoning", "text": "thinking", "signature": "sig", "provenance": "anthropic"}),
        ),
        (
            "redacted reasoning",
            reasoning("", None, Some("EqQBCkgIARAB"), Some("bedrock")),
            json!({"type": "reasoning", "text": "", "redactedData": "EqQBCkgIARAB", "provenance": "bedrock"}),
        ),
    ]
}

#[tokio::test]
async fn every_kind_of_block_round_trips_both_ways() {
    let mut guest = guest().await;
    for (name, block, block_json) in blocks() {
        for (message, message_json) in [
            (
                user(vec![block.clone()]),
                json!([{"role": "user", "content": [&block_json]}]),
            ),
            (
                assistant(vec![block.clone()]),
                json!([{"role": "assistant", "content": [&block_json]}]),
            ),
        ] {
            let messages = vec![message];
            // WIT -> JSON -> WIT
            let written = guest
                .messages_to_json(&messages)
                .await
                .expect("no trap")
                .unwrap_or_else(|e| panic!("{name}: to-json: {}", e.message));
            let written_value: Value = serde_json::from_str(&written).expect("JSON");
            assert_eq!(written_value, message_json, "{name}: the JSON written");
            let read = guest
                .messages_from_json(&written)
                .await
                .expect("no trap")
                .unwrap_or_else(|e| panic!("{name}: from-json: {}", e.message));
            assert_eq!(read, messages, "{name}: WIT -> JSON -> WIT");
            // JSON -> WIT -> JSON
            let read = guest
                .messages_from_json(&message_json.to_string())
                .await
                .expect("no trap")
                .unwrap_or_else(|e| panic!("{name}: from-json: {}", e.message));
            assert_eq!(read, messages, "{name}: the WIT value read");
            guest
                .validate_messages(&read)
                .await
                .expect("no trap")
                .unwrap_or_else(|e| panic!("{name}: validate: {}", e.message));
        }
    }
}

/// `fixtures/conversation.json` as WIT values, field by field.
fn conversation() -> Vec<LlmMessage> {
    vec![
        user(vec![
            text("Compare the screenshot with the clip and the recording."),
            image("image/png", "iVBORw0KGgo="),
            video(url("video/mp4", "https://example.com/clip.mp4")),
            video(base64(
                "video/webm",
                "GkXfo59ChoEBQveBAULygQRC84EIQoKEd2VibUKHgQRChYEC",
            )),
        ]),
        assistant(vec![
            reasoning(
                "The user wants a comparison; I should read the log first.",
                Some("sig-anthropic-1"),
                None,
                Some("anthropic"),
            ),
            reasoning("", None, Some("EqQBCkgIARABGAIiQL"), Some("anthropic")),
            text("Let me read the log."),
            tool_use(
                "call_1",
                "read_file",
                r#"{"path":"logs/run.txt","max_bytes":4096}"#,
                Some("thought-sig-gemini"),
            ),
            tool_use("call_2", "render", r#"{"page":1}"#, None),
        ]),
        user(vec![
            string_result("call_1", "line 1\nline 2", None),
            ContentBlock::ToolResult(ToolResultBlock {
                tool_use_id: "call_2".into(),
                content: ToolResultContent::Parts(vec![
                    ToolResultPart::Text("Rendered page 1.".into()),
                    ToolResultPart::Image(base64("image/png", "iVBORw0KGgo=")),
                    ToolResultPart::Image(url("image/jpeg", "https://example.com/page-1.jpg")),
                    ToolResultPart::File(FilePart {
                        filename: "page-1.pdf".into(),
                        source: base64("application/pdf", "JVBERi0xLjQ="),
                    }),
                    ToolResultPart::File(FilePart {
                        filename: "page-1.html".into(),
                        source: url("text/html", "https://example.com/page-1.html"),
                    }),
                ]),
                is_error: Some(false),
            }),
            string_result("call_3", "permission denied", Some(true)),
        ]),
        assistant(vec![
            reasoning("Gemini thought", Some("c2lnbmF0dXJl"), None, Some("gemini")),
            text("The clip matches the screenshot."),
        ]),
    ]
}

#[tokio::test]
async fn the_sample_conversation_maps_to_wit_values_and_back() {
    let mut guest = guest().await;
    let read = guest
        .messages_from_json(CONVERSATION)
        .await
        .expect("no trap")
        .expect("the conversation is valid");
    assert_eq!(read, conversation());
    let written = guest
        .messages_to_json(&read)
        .await
        .expect("no trap")
        .expect("valid");
    let written: Value = serde_json::from_str(&written).expect("JSON");
    assert_eq!(written, fixture(CONVERSATION));
}

#[tokio::test]
async fn to_json_writes_the_same_text_as_the_native_library() {
    let mut guest = guest().await;
    let written = guest
        .messages_to_json(&conversation())
        .await
        .expect("no trap")
        .expect("valid");
    let native = oma_core::json::messages_from_json(CONVERSATION).expect("valid natively");
    assert_eq!(written, oma_core::json::messages_to_json(&native));
}
