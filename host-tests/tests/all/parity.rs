//! The component formats and parses exactly as the native library does, for every provider and
//! every sample conversation: one table of cases, two runners. The native unit tests in
//! `src/adapter/` pin each wire format to `docs/wire-formats.md`; this pins the component to them.

use oma_core::adapter::{
    self, Adapter, ChatRequest, Credentials, Endpoint, IdSource, ResponseContext,
};
use oma_host_tests::Guest;
use oma_host_tests::{chat_request, endpoint};
use serde_json::Value;

use crate::common::{guest, CONVERSATION};

const PROVIDERS: &[&str] = &[
    "anthropic",
    "openai",
    "minimax",
    "deepseek",
    "grok",
    "gemini",
    "bedrock",
    "ai-sdk",
];

const CONVERSATIONS: &[(&str, &str)] = &[
    (
        "media",
        include_str!("../../../examples/conversations/media.json"),
    ),
    (
        "tools",
        include_str!("../../../examples/conversations/tools.json"),
    ),
    (
        "vision",
        include_str!("../../../examples/conversations/vision.json"),
    ),
    ("every block", CONVERSATION),
];

const RESPONSES: &[(&str, &str)] = &[
    (
        "anthropic",
        include_str!("../../../examples/responses/anthropic.json"),
    ),
    (
        "openai",
        include_str!("../../../examples/responses/openai.json"),
    ),
    (
        "gemini",
        include_str!("../../../examples/responses/gemini.json"),
    ),
    (
        "bedrock",
        include_str!("../../../examples/responses/bedrock.json"),
    ),
];

const KEY: &str = "sk-parity-key";

fn native(provider: &str) -> Box<dyn Adapter> {
    adapter::for_provider(provider, None, IdSource::default()).expect("a known provider")
}

fn native_request(messages: &str, model: &str) -> ChatRequest {
    ChatRequest {
        model: model.into(),
        messages: oma_core::json::messages_from_json(messages).expect("valid fixture"),
        ..ChatRequest::default()
    }
}

fn native_endpoint() -> Endpoint {
    Endpoint {
        credentials: Credentials::ApiKey(KEY.into()),
        ..Endpoint::default()
    }
}

/// The component's answer as comparable JSON: the request, or the error's name and message.
async fn component_format(guest: &mut Guest, provider: &str, messages: &str) -> Value {
    let messages = guest.messages_from_json(messages).await.unwrap().unwrap();
    let request = chat_request("m-1", messages);
    match guest
        .format_request(&request, &endpoint(provider, None, Some(KEY)))
        .await
        .expect("no trap")
    {
        Ok(http) => serde_json::json!({
            "method": http.method, "url": http.url, "headers": http.headers,
            "body": http.body,
        }),
        Err(error) => serde_json::json!({"error": error.name, "message": error.message}),
    }
}

fn native_format(provider: &str, messages: &str) -> Value {
    match native(provider).format(&native_request(messages, "m-1"), &native_endpoint()) {
        Ok(http) => serde_json::json!({
            "method": http.method, "url": http.url, "headers": http.headers,
            "body": http.body,
        }),
        Err(error) => serde_json::json!({"error": error.name(), "message": error.to_string()}),
    }
}

#[tokio::test]
async fn format_request_matches_the_native_adapters_for_every_provider() {
    let mut guest = guest().await;
    let mut refused = 0;
    for provider in PROVIDERS {
        for (name, conversation) in CONVERSATIONS {
            let component = component_format(&mut guest, provider, conversation).await;
            assert_eq!(
                component,
                native_format(provider, conversation),
                "{provider} / {name}"
            );
            refused += usize::from(component.get("error").is_some());
        }
    }
    // Video is refused by the four typed formats on the conversations that carry it.
    assert!(refused >= 4, "{refused}");
}

/// Texts with each ASCII byte alone at many offsets of a 16-byte block: the guest scans
/// text for escapes with SIMD, the native library without; both must write what `serde_json`
/// writes (the native side is pinned to `serde_json` by its unit and property tests).
#[tokio::test]
async fn escapes_in_text_are_written_byte_for_byte_as_natively() {
    let texts: Vec<String> = (0u8..0x80)
        .map(|byte| {
            let mut text = String::new();
            for offset in [0, 1, 14, 15, 16, 17, 31, 32, 47] {
                let mut block = "é".to_owned() + &"x".repeat(offset);
                block.push(char::from(byte));
                block.push_str(&"y".repeat(20));
                text.push_str(&block);
            }
            text
        })
        .collect();
    let user: Vec<Value> = texts
        .iter()
        .map(|text| serde_json::json!({"type": "text", "text": text}))
        .collect();
    let conversation = serde_json::json!([
        {"role": "user", "content": user},
        {"role": "assistant", "content": [
            {"type": "text", "text": texts[10]},
            {"type": "tool_use", "id": "t1", "name": "look", "input": {}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": texts[34]},
        ]},
    ])
    .to_string();
    let mut guest = guest().await;
    for provider in PROVIDERS {
        let component = component_format(&mut guest, provider, &conversation).await;
        assert!(component.get("error").is_none(), "{provider}: {component}");
        assert_eq!(
            component,
            native_format(provider, &conversation),
            "{provider}"
        );
    }
}

#[tokio::test]
async fn parse_response_matches_the_native_adapters() {
    let mut guest = guest().await;
    for (provider, body) in RESPONSES {
        let request = chat_request("m-1", Vec::new());
        let parsed = guest
            .parse_response(&request, &endpoint(provider, None, None), body)
            .await
            .expect("no trap")
            .expect("the sample parses");
        let native = native(provider)
            .parse(
                &ResponseContext::of(&native_request("[]", "m-1")),
                body.as_bytes(),
            )
            .expect("the sample parses");
        let turn = vec![oma_host_tests::LlmMessage {
            role: oma_host_tests::Role::Assistant,
            content: parsed.content,
        }];
        let content = guest.messages_to_json(&turn).await.unwrap().unwrap();
        let content: Value = serde_json::from_str(&content).unwrap();
        let expected = serde_json::to_value(&native.content).unwrap();
        // Gemini makes ids locally from the clock; everything else must match exactly.
        if *provider != "gemini" {
            assert_eq!(content[0]["content"], expected, "{provider}");
            assert_eq!(parsed.id, native.id, "{provider}");
        } else {
            assert_eq!(
                content[0]["content"].as_array().map(Vec::len),
                expected.as_array().map(Vec::len)
            );
        }
        assert_eq!(parsed.model, native.model, "{provider}");
        assert_eq!(parsed.stop_reason, native.stop_reason, "{provider}");
        assert_eq!(
            (parsed.usage.input_tokens, parsed.usage.output_tokens),
            (native.usage.input_tokens, native.usage.output_tokens),
            "{provider}"
        );
    }
}
