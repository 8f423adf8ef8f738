//! Large inputs and long-lived instances: a video-16mib workload like the benchmarks' (generated
//! here, deterministically) passes through
//! `messages-from-json` and `validate-messages` without a trap, a bad byte in the middle of it is
//! found, and one instance keeps working across hundreds of calls, failed ones included.

use oma_host_tests::{ContentBlock, MediaSource};
use serde_json::json;

use crate::common::{assert_invalid_message, guest, text, tool_result, user, video};

/// Standard base64 with padding.
fn base64_encode(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// `n` pseudo-random bytes (xorshift64*, fixed seed).
fn random_bytes(n: usize) -> Vec<u8> {
    let mut state: u64 = 20261130;
    let mut out = Vec::with_capacity(n + 8);
    while out.len() < n {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        out.extend_from_slice(&state.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
    }
    out.truncate(n);
    out
}

/// The video-16mib workload: a text block and a 12 MiB video, base64-encoded (16 MiB of text).
fn video_16mib(data: &str) -> String {
    json!([{"role": "user", "content": [
        {"type": "text", "text": "Describe the clip."},
        {"type": "video", "source": {"type": "base64", "media_type": "video/mp4", "data": data}}
    ]}])
    .to_string()
}

#[test]
fn the_test_encoder_is_standard_base64() {
    for (bytes, encoded) in [
        (&b""[..], ""),
        (b"a", "YQ=="),
        (b"ab", "YWI="),
        (b"abc", "YWJj"),
        (b"abcd", "YWJjZA=="),
        (b"image", "aW1hZ2U="),
        (&[0xfb, 0xff][..], "+/8="),
    ] {
        assert_eq!(base64_encode(bytes), encoded);
    }
}

#[tokio::test]
async fn a_16_mib_video_passes_from_json_and_validate() {
    let data = base64_encode(&random_bytes(12 * 1024 * 1024));
    assert_eq!(data.len(), 16 * 1024 * 1024);
    let input = video_16mib(&data);
    let mut guest = guest().await;

    let messages = guest
        .messages_from_json(&input)
        .await
        .expect("no trap on 16 MiB")
        .expect("the workload is valid");
    assert_eq!(messages.len(), 1);
    match &messages[0].content[..] {
        [ContentBlock::Text(t), ContentBlock::Video(v)] => {
            assert_eq!(t, "Describe the clip.");
            assert!(matches!(&v.source, MediaSource::Base64(s) if s.data == data));
        }
        other => panic!("unexpected blocks: {} of them", other.len()),
    }
    guest
        .validate_messages(&messages)
        .await
        .expect("no trap on 16 MiB")
        .expect("valid");
    let written = guest
        .messages_to_json(&messages)
        .await
        .expect("no trap on 16 MiB")
        .expect("valid");
    assert_eq!(written.len(), input.len());

    // One bad symbol in the middle is found, through JSON and through a WIT value.
    let mut bad = data.into_bytes();
    bad[8 * 1024 * 1024 + 1] = b'-';
    let bad = String::from_utf8(bad).expect("ASCII");
    let error = guest
        .messages_from_json(&video_16mib(&bad))
        .await
        .expect("no trap")
        .expect_err("a URL-safe symbol is not standard base64");
    assert_invalid_message(&error);
    assert_eq!(
        error.message,
        "messages[0].content[1].source.data must contain raw base64 data"
    );
    let messages = vec![user(vec![
        text("Describe the clip."),
        video(crate::common::base64("video/mp4", &bad)),
    ])];
    let error = guest
        .validate_messages(&messages)
        .await
        .expect("no trap")
        .expect_err("invalid");
    assert_eq!(
        error.message,
        "messages[0].content[1].source.data must contain raw base64 data"
    );
}

#[tokio::test]
async fn one_instance_survives_many_calls_including_failed_ones() {
    let mut guest = guest().await;
    let good = r#"[{"role": "user", "content": [{"type": "text", "text": "hi"}]}]"#;
    let bad_inputs = [
        "not json",
        "{}",
        r#"[{"role": "system", "content": []}]"#,
        r#"[{"role": "user", "content": [{"type": "audio"}]}]"#,
        r#"[{"role": "user", "content": [{"type": "video", "source": {"type": "url", "media_type": "video/mp4", "url": "mm_file://x"}}]}]"#,
    ];
    let bad_value = vec![user(vec![tool_result(vec![], Some(true))])];
    for round in 0..200 {
        let messages = guest
            .messages_from_json(good)
            .await
            .expect("no trap")
            .expect("valid");
        let bad = bad_inputs[round % bad_inputs.len()];
        let error = guest
            .messages_from_json(bad)
            .await
            .expect("no trap")
            .expect_err(bad);
        assert_invalid_message(&error);
        assert!(guest
            .validate_messages(&bad_value)
            .await
            .expect("no trap")
            .is_err());
        let written = guest
            .messages_to_json(&messages)
            .await
            .expect("no trap")
            .expect("valid");
        assert_eq!(
            written,
            r#"[{"role":"user","content":[{"type":"text","text":"hi"}]}]"#
        );
    }
}

#[tokio::test]
async fn adversarial_json_never_traps() {
    let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    let deep_input = format!(
        r#"[{{"role": "assistant", "content": [{{"type": "tool_use", "id": "c", "name": "n", "input": {}}}]}}]"#,
        deep(100_000)
    );
    let many_messages = format!(
        "[{}]",
        vec![r#"{"role":"user","content":[]}"#; 100_000].join(",")
    );
    let many_blocks = format!(
        r#"[{{"role":"user","content":[{}]}}]"#,
        vec![r#"{"type":"text","text":"x"}"#; 100_000].join(",")
    );
    let cases: [(&str, String, Option<usize>); 6] = [
        ("100k-deep list", deep(100_000), None),
        ("100k-deep tool input", deep_input, None),
        (
            "a lone surrogate",
            r#"[{"role":"user","content":[{"type":"text","text":"\ud800"}]}]"#.into(),
            None,
        ),
        ("100k messages", many_messages, Some(100_000)),
        ("100k blocks", many_blocks, Some(1)),
        (
            "a 16 MiB string of escapes",
            format!(
                r#"[{{"role":"user","content":[{{"type":"text","text":"{}"}}]}}]"#,
                "\\n".repeat(8 << 20)
            ),
            Some(1),
        ),
    ];
    let mut guest = guest().await;
    for (name, input, accepted) in cases {
        let result = guest.messages_from_json(&input).await.expect(name);
        match (result, accepted) {
            (Ok(messages), Some(len)) => assert_eq!(messages.len(), len, "{name}"),
            (Err(error), None) => assert_invalid_message(&error),
            (result, _) => panic!("{name}: {:?}", result.map(|m| m.len())),
        }
    }

    // The same depth through a WIT value: tool-use input text that nests too deeply.
    let messages = vec![oma_host_tests::LlmMessage {
        role: oma_host_tests::Role::Assistant,
        content: vec![ContentBlock::ToolUse(oma_host_tests::ToolUseBlock {
            id: "c".into(),
            name: "n".into(),
            input: deep(100_000),
            signature: None,
        })],
    }];
    let error = guest
        .validate_messages(&messages)
        .await
        .expect("no trap")
        .expect_err("too deep");
    assert_invalid_message(&error);
    // And the instance still works.
    assert_eq!(guest.validate_messages(&[]).await.expect("no trap"), Ok(()));
}
