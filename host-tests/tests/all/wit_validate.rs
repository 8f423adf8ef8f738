//! `validate-messages` and `messages-to-json` on WIT values: the rules a typed value can still
//! break (media sources, empty part lists, blank file names, error results with parts, tool-use
//! input that is not JSON text), in OMA's order, and what must pass unchecked (images).

use oma_host_tests::{
    ContentBlock, FilePart, ImageBlock, LlmMessage, ToolResultPart, ToolUseBlock,
};

use crate::common::{
    assert_invalid_message, assistant, base64, guest, text, tool_result, url, user, video,
};

fn file(filename: &str) -> ToolResultPart {
    ToolResultPart::File(FilePart {
        filename: filename.into(),
        source: base64("application/pdf", "JVBERi0xLjQ="),
    })
}

fn tool_use(input: &str) -> ContentBlock {
    ContentBlock::ToolUse(ToolUseBlock {
        id: "call_1".into(),
        name: "read".into(),
        input: input.into(),
        signature: None,
    })
}

/// Invalid WIT values and the message each fails with.
fn rejected() -> Vec<(&'static str, Vec<LlmMessage>, &'static str)> {
    vec![
        (
            "video with a file: url",
            vec![user(vec![
                text("x"),
                video(url("video/mp4", "file:///tmp/x.mp4")),
            ])],
            "messages[0].content[1].source.url must use HTTP or HTTPS",
        ),
        (
            "video with a provider handle",
            vec![
                user(vec![]),
                assistant(vec![video(url("video/mp4", "mm_file://abc123"))]),
            ],
            "messages[1].content[0].source.url must be an absolute HTTP(S) URL",
        ),
        (
            "video with a data: prefix",
            vec![user(vec![video(base64(
                "video/mp4",
                "data:video/mp4;base64,AAAA",
            ))])],
            "messages[0].content[0].source.data must contain raw base64 data",
        ),
        (
            "video with MIME parameters",
            vec![user(vec![video(base64("video/mp4;codecs=avc1", "AAAA"))])],
            "messages[0].content[0].source.media_type must be a MIME type without parameters",
        ),
        (
            "empty part list",
            vec![user(vec![text("x"), tool_result(vec![], None)])],
            "messages[0].content[1].content must not be an empty content-part array",
        ),
        (
            "blank filename",
            vec![user(vec![tool_result(
                vec![ToolResultPart::Text("x".into()), file(" \t")],
                None,
            )])],
            "messages[0].content[0].content[1].filename must be a non-empty string",
        ),
        (
            "empty filename",
            vec![user(vec![tool_result(vec![file("")], Some(false))])],
            "messages[0].content[0].content[0].filename must be a non-empty string",
        ),
        (
            "error result with parts",
            vec![user(vec![tool_result(
                vec![ToolResultPart::Text("x".into())],
                Some(true),
            )])],
            "messages[0].content[0].content must be a string for an error tool result",
        ),
        (
            "error result with an empty part list: T3 before T4",
            vec![user(vec![tool_result(vec![], Some(true))])],
            "messages[0].content[0].content must not be an empty content-part array",
        ),
        (
            "the first bad block wins",
            vec![
                user(vec![text("ok")]),
                user(vec![
                    tool_result(vec![file("")], None),
                    video(url("video/mp4", "ftp://example.com/x.mp4")),
                ]),
            ],
            "messages[1].content[0].content[0].filename must be a non-empty string",
        ),
    ]
}

#[tokio::test]
async fn invalid_wit_values_fail_with_omas_message() {
    let mut guest = guest().await;
    for (name, messages, expected) in rejected() {
        let validated = guest.validate_messages(&messages).await.expect("no trap");
        let written = guest.messages_to_json(&messages).await.expect("no trap");
        for error in [validated.expect_err(name), written.expect_err(name)] {
            assert_invalid_message(&error);
            assert_eq!(error.message, expected, "{name}");
        }
    }
}

#[tokio::test]
async fn tool_use_input_must_be_json_text() {
    let mut guest = guest().await;
    for input in ["", "{not json", "{\"a\": 1", "undefined"] {
        let messages = vec![
            user(vec![text("x")]),
            assistant(vec![text("y"), tool_use(input)]),
        ];
        let validated = guest.validate_messages(&messages).await.expect("no trap");
        let written = guest.messages_to_json(&messages).await.expect("no trap");
        for error in [validated.expect_err(input), written.expect_err(input)] {
            assert_invalid_message(&error);
            assert!(
                error.message.starts_with("messages[1].content[1].input"),
                "{input:?}: {}",
                error.message
            );
        }
    }
    for input in ["{}", "[1,2]", "null", "\"text\"", "42"] {
        let messages = vec![assistant(vec![tool_use(input)])];
        let result = guest.validate_messages(&messages).await.expect("no trap");
        assert_eq!(
            result,
            Ok(()),
            "{input:?} is JSON text; OMA does not check its shape"
        );
    }
}

#[tokio::test]
async fn images_are_not_validated() {
    let mut guest = guest().await;
    for (media_type, data) in [
        ("image/png", "base64data"),
        ("image/png", "abc123"),
        ("not a mime", "not base64!"),
        ("", ""),
    ] {
        let messages = vec![user(vec![ContentBlock::Image(ImageBlock {
            source: oma_host_tests::MediaSource::Base64(oma_host_tests::Base64Source {
                media_type: media_type.into(),
                data: data.into(),
            }),
        })])];
        let result = guest.validate_messages(&messages).await.expect("no trap");
        assert_eq!(result, Ok(()), "{media_type:?} {data:?}");
        let written = guest.messages_to_json(&messages).await.expect("no trap");
        assert!(written.is_ok(), "{media_type:?} {data:?}: {written:?}");
    }
}

#[tokio::test]
async fn empty_lists_are_valid() {
    let mut guest = guest().await;
    assert_eq!(guest.validate_messages(&[]).await.expect("no trap"), Ok(()));
    let written = guest.messages_to_json(&[]).await.expect("no trap");
    assert_eq!(written.as_deref(), Ok("[]"));
    let empty_turns = vec![user(vec![]), assistant(vec![])];
    assert_eq!(
        guest
            .validate_messages(&empty_turns)
            .await
            .expect("no trap"),
        Ok(())
    );
}

/// The first broken rule wins in message order, whether it is a media rule or tool-use input
/// that is not JSON text (both are found while converting WIT values).
#[tokio::test]
async fn the_first_broken_rule_wins_across_conversion_and_validation() {
    let mut guest = guest().await;
    let bad_input = tool_use("{not json");
    let bad_video = video(url("video/mp4", "ftp://example.com/v.mp4"));
    let messages = vec![
        user(vec![bad_video.clone()]),
        assistant(vec![bad_input.clone()]),
    ];
    let error = guest
        .validate_messages(&messages)
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(
        error.message,
        "messages[0].content[0].source.url must use HTTP or HTTPS"
    );
    let messages = vec![assistant(vec![bad_input]), user(vec![bad_video])];
    let error = guest
        .validate_messages(&messages)
        .await
        .unwrap()
        .unwrap_err();
    assert!(
        error
            .message
            .starts_with("messages[0].content[0].input must be JSON text"),
        "{}",
        error.message
    );
}
