//! Response parsing: content in order, tool-call arguments and their repair, the stop-reason
//! table, usage, malformed bodies, and provider error bodies.

use serde_json::{json, Value};

use super::*;
use crate::error::ErrorKind;
use crate::message::{ContentBlock, ReasoningBlock, TextBlock, TokenUsage, ToolUseBlock};

fn parse_with(adapter: &OpenAi, body: Value) -> Result<LlmResponse, Error> {
    adapter.parse(&ResponseContext::default(), body.to_string().as_bytes())
}

fn parse(body: Value) -> LlmResponse {
    parse_with(&OpenAi::default(), body).expect("parse")
}

fn completion(message: Value, finish_reason: Value) -> Value {
    json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-test",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 34, "total_tokens": 46},
    })
}

fn call(id: &str, name: &str, arguments: Value) -> Value {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
}

fn tool_use(id: &str, name: &str, input: Value) -> ContentBlock {
    ContentBlock::ToolUse(ToolUseBlock {
        id: id.into(),
        name: name.into(),
        input,
        signature: None,
    })
}

fn text(text: &str) -> ContentBlock {
    ContentBlock::Text(TextBlock { text: text.into() })
}

#[test]
fn text_response() {
    let r = parse(completion(
        json!({"role": "assistant", "content": "Hello"}),
        json!("stop"),
    ));
    assert_eq!(
        r,
        LlmResponse {
            id: "chatcmpl-1".into(),
            content: vec![text("Hello")],
            model: "gpt-test".into(),
            stop_reason: "end_turn".into(),
            usage: TokenUsage::new(12, 34),
            stop_sequence: None,
        }
    );
}

#[test]
fn content_order_reasoning_text_tools() {
    let adapter = preset("minimax").unwrap();
    let r = parse_with(
        &adapter,
        completion(
            json!({
                "role": "assistant",
                "content": "",
                "reasoning_content": "because",
                "tool_calls": [
                    call("call_1", "search", json!("{\"q\":\"rust\"}")),
                    call("call_2", "noop", json!("")),
                ],
            }),
            json!("tool_calls"),
        ),
    )
    .unwrap();
    assert_eq!(
        r.content,
        vec![
            ContentBlock::Reasoning(ReasoningBlock {
                text: "because".into(),
                signature: None,
                redacted_data: None,
                provenance: Some("minimax".into()),
            }),
            text(""),
            tool_use("call_1", "search", json!({"q": "rust"})),
            tool_use("call_2", "noop", json!({})),
        ]
    );
    assert_eq!(r.stop_reason, "tool_use");
}

#[test]
fn reasoning_content_forms() {
    let adapter = preset("deepseek").unwrap();
    for (reasoning, expected) in [
        (json!("plain"), Some("plain")),
        (
            json!(["a", {"text": "b"}, {"content": "c"}, {"reasoning_content": "d"}, {"other": 1}, 7, null]),
            Some("abcd"),
        ),
        (json!(""), None),
        (json!([]), None),
        (json!(null), None),
        (json!({"text": "x"}), None),
    ] {
        let r = parse_with(
            &adapter,
            completion(
                json!({"content": null, "reasoning_content": reasoning}),
                json!("stop"),
            ),
        )
        .unwrap();
        let got = r.content.iter().find_map(|b| match b {
            ContentBlock::Reasoning(r) => {
                assert_eq!(r.provenance.as_deref(), Some("deepseek"));
                Some(r.text.clone())
            }
            _ => None,
        });
        assert_eq!(got.as_deref(), expected, "{reasoning}");
        assert_eq!(r.content.len(), usize::from(expected.is_some()));
    }
}

#[test]
fn stop_reason_table() {
    for (finish, with_tools, expected) in [
        (json!("stop"), false, "end_turn"),
        (json!("stop"), true, "tool_use"),
        (json!("tool_calls"), false, "tool_use"),
        (json!("tool_calls"), true, "tool_use"),
        (json!("length"), false, "max_tokens"),
        (json!("length"), true, "max_tokens"),
        (json!("content_filter"), false, "content_filter"),
        (json!("function_call"), false, "function_call"),
        (
            json!("insufficient_system_resource"),
            false,
            "insufficient_system_resource",
        ),
        (json!(null), false, "end_turn"),
        (json!(null), true, "tool_use"),
    ] {
        let mut message = json!({"content": "x"});
        if with_tools {
            message["tool_calls"] = json!([call("c", "t", json!("{}"))]);
        }
        let r = parse(completion(message, finish.clone()));
        assert_eq!(r.stop_reason, expected, "{finish} tools={with_tools}");
    }
    // A missing finish_reason key counts as stop too.
    let r = parse(json!({"id": "i", "model": "m", "choices": [{"message": {"content": "x"}}]}));
    assert_eq!(r.stop_reason, "end_turn");
    assert_eq!(r.usage, TokenUsage::default());
}

#[test]
fn tool_call_arguments() {
    for (arguments, expected) in [
        (
            json!("{\"a\":1,\"b\":[true]}"),
            json!({"a": 1, "b": [true]}),
        ),
        (json!("[1,2]"), json!({})),
        (json!("\"text\""), json!({})),
        (json!("null"), json!({})),
        (json!(""), json!({})),
        (json!("not json at all"), json!({})),
        (json!({"already": "object"}), json!({"already": "object"})),
        (json!(null), json!({})),
        // OMA's single-parameter repair, for arguments that are not JSON:
        (
            json!(r#"{"code": "print("hi")"}"#),
            json!({"code": "print(\"hi\")"}),
        ),
        (
            json!(
                r#"{"code": """line "one"
two"""}"#
            ),
            json!({"code": "line \"one\"\ntwo"}),
        ),
        (json!(r#"{"q": '''it's'''}"#), json!({"q": "it's"})),
        (json!(r#"{"n": abc }"#), json!({"n": "abc"})),
        (
            json!(r#"  {"path": "C:\\dir\\"x""}  "#),
            json!({"path": "C:\\dir\\\"x\""}),
        ),
        (json!(r#"{"a": }"#), json!({"a": ""})),
        (json!(r#"{"a": """}"#), json!({"a": ""})),
        (json!(r#"noise {"a": "b"c"}"#), json!({"a": "b\"c"})),
        (
            json!(r#"{"x": {"a": "b"c}}"#),
            json!({"x": "{\"a\": \"b\"c}"}),
        ),
        (json!(r#"{"a": "b""#), json!({})),
        (json!(r#"{a: "b"}"#), json!({})),
        (json!(r#"{"": "b"c}"#), json!({})),
    ] {
        let r = parse(completion(
            json!({"content": null, "tool_calls": [call("c", "t", arguments.clone())]}),
            json!("tool_calls"),
        ));
        assert_eq!(r.content, vec![tool_use("c", "t", expected)], "{arguments}");
    }
}

#[test]
fn tool_call_type_must_be_function() {
    let body = completion(
        json!({"content": null, "tool_calls": [
            {"id": "c", "type": "custom", "custom": {"name": "t", "input": "x"}},
        ]}),
        json!("tool_calls"),
    );
    for name in ["openai", "grok"] {
        let err = parse_with(&preset(name).unwrap(), body.clone()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::UnsupportedToolCall);
        assert_eq!(
            err.to_string(),
            format!("{name} returned unsupported tool-call type \"custom\"")
        );
        assert!(!err.retryable());
    }
    // A call without `type` is read as a function call.
    let r = parse(completion(
        json!({"content": null, "tool_calls": [{"id": "c", "function": {"name": "t", "arguments": "{}"}}]}),
        json!("tool_calls"),
    ));
    assert_eq!(r.content, vec![tool_use("c", "t", json!({}))]);
}

#[test]
fn no_choices() {
    for body in [
        json!({"id": "x", "model": "m", "choices": []}),
        json!({"id": "x", "model": "m"}),
        json!({"base_resp": {"status_code": 1004, "status_msg": "login fail"}, "choices": null}),
    ] {
        let err = parse_with(&OpenAi::default(), body).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Provider);
        assert_eq!(
            err.to_string(),
            "OpenAI returned a completion with no choices"
        );
        assert_eq!(err.provider(), Some("openai"));
    }
}

#[test]
fn malformed_bodies() {
    let adapter = OpenAi::default();
    for body in [
        &b""[..],
        b"not json",
        b"[1,2]",
        b"\"text\"",
        br#"{"choices": [{"finish_reason": "stop"}]}"#,
        br#"{"choices": [{"message": "hi"}]}"#,
        br#"{"choices": [{"message": {"content": "x", "tool_calls": {"id": 1}}}]}"#,
        br#"{"choices": [{"message": {"content": "x""#,
    ] {
        let err = adapter
            .parse(&ResponseContext::default(), body)
            .unwrap_err();
        assert_eq!(
            err.kind(),
            ErrorKind::Provider,
            "{}",
            String::from_utf8_lossy(body)
        );
        assert!(
            err.to_string().starts_with("malformed openai response: "),
            "{err}"
        );
    }
}

#[test]
fn odd_but_readable_fields() {
    let r = parse(json!({
        "choices": [{"message": {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}}],
        "usage": {"prompt_tokens": null, "completion_tokens": 5.0},
    }));
    assert_eq!(r.id, "");
    assert_eq!(r.model, "");
    assert_eq!(r.content, vec![text("ab")]);
    assert_eq!(r.usage, TokenUsage::new(0, 5));
}

#[test]
fn provider_error_codes_and_types() {
    // OpenAI's 400, with a string code and a type.
    let detail = error_detail(
        br#"{"error": {"message": "Unsupported value: 'temperature' does not support 0.2.", "type": "invalid_request_error", "param": "temperature", "code": "unsupported_value"}}"#,
    );
    assert_eq!(detail.code.as_deref(), Some("unsupported_value"));
    assert_eq!(detail.error_type.as_deref(), Some("invalid_request_error"));
    // OpenRouter's numeric code.
    let detail = error_detail(
        br#"{"error": {"code": 429, "message": "Rate limit exceeded", "metadata": {}}}"#,
    );
    assert_eq!(detail.code.as_deref(), Some("429"));
    assert_eq!(detail.error_type, None);
    // A null code and an empty one are none.
    for body in [
        &br#"{"error": {"message": "m", "type": "server_error", "code": null}}"#[..],
        br#"{"error": {"message": "m", "code": ""}}"#,
        br#"{"error": "model not found"}"#,
        b"<html>502</html>",
    ] {
        assert_eq!(error_detail(body).code, None);
    }
}

/// Groq fails a stream with `event: error` whose data is the error object; the code travels.
#[test]
fn a_mid_stream_error_event_carries_the_code() {
    let stream = concat!(
        "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n",
        "event: error\n",
        "data: {\"error\":{\"message\":\"Failed to call a function. Please adjust your prompt.\",\"type\":\"invalid_request_error\",\"code\":\"tool_use_failed\",\"failed_generation\":\"<function=x>\"}}\n\n",
    );
    let mut decoder = OpenAi::compatible("groq", "http://127.0.0.1:9")
        .stream_decoder(&ResponseContext::default());
    let error = decoder
        .feed(stream.as_bytes())
        .and_then(|_| decoder.finish())
        .expect_err("the stream failed");
    assert_eq!(error.code(), Some("tool_use_failed"));
    assert_eq!(error.error_type(), Some("invalid_request_error"));
    assert_eq!(error.http_status(), None);
    assert_eq!(
        error.to_string(),
        "Failed to call a function. Please adjust your prompt."
    );
}

#[test]
fn provider_error_messages() {
    assert_eq!(
        error_message(br#"{"error": {"message": "Invalid video_url", "type": "invalid_request_error", "code": null}}"#),
        Some("Invalid video_url".into())
    );
    assert_eq!(
        error_message(br#"{"error": "model not found"}"#),
        Some("model not found".into())
    );
    assert_eq!(
        error_message(br#"{"base_resp": {"status_code": 2049, "status_msg": "invalid api key"}}"#),
        Some("invalid api key".into())
    );
    assert_eq!(error_message(br#"{"error": {"code": 1}}"#), None);
    assert_eq!(error_message(br#"{"error": {"message": ""}}"#), None);
    assert_eq!(error_message(b"<html>502</html>"), None);
}
