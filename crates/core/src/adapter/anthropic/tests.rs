//! Tests of the Anthropic adapter through its public surface: `Anthropic` as an `Adapter`, and
//! `error_message`.

use serde_json::{json, Map, Value};

use super::{error_message, Anthropic};
use crate::adapter::{
    Adapter, ChatRequest, Credentials, Endpoint, ResponseContext, Sampling, StreamEvent, Thinking,
    ToolDefinition,
};
use crate::error::{Error, ErrorKind};
use crate::json::messages_from_value;
use crate::message::{
    ContentBlock, LlmResponse, ReasoningBlock, TextBlock, TokenUsage, ToolUseBlock,
};

fn messages(value: Value) -> Vec<crate::message::LlmMessage> {
    messages_from_value(value).expect("test messages are valid OMA JSON")
}

fn request(messages_json: Value) -> ChatRequest {
    ChatRequest {
        model: "claude-sonnet-4-6".into(),
        messages: messages(messages_json),
        ..ChatRequest::default()
    }
}

fn user(content: Value) -> Value {
    json!([{"role": "user", "content": content}])
}

fn endpoint() -> Endpoint {
    Endpoint {
        credentials: Credentials::ApiKey("sk-ant-test".into()),
        ..Endpoint::default()
    }
}

fn body(request: &ChatRequest) -> Value {
    let http = Anthropic
        .format(request, &endpoint())
        .expect("format succeeds");
    serde_json::from_str(&http.body).expect("the body is JSON")
}

fn keys(body: &Value) -> Vec<&str> {
    body.as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

fn format_err(request: &ChatRequest) -> Error {
    Anthropic
        .format(request, &endpoint())
        .expect_err("format must fail")
}

// ----- request: exact bytes, URL and headers -----------------------------------------------

#[test]
fn golden_request_bytes_url_and_headers() {
    let mut req = request(user(json!([
        {"type": "text", "text": "What is in \"this\"?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "aW1hZ2U="}}
    ])));
    req.system_prompt = Some("Be brief.".into());
    req.sampling.temperature = Some(0.5);
    req.tools = vec![ToolDefinition {
        name: "look".into(),
        description: "Looks closer".into(),
        input_schema: json!({"properties": {"zoom": {"type": "number"}}}),
    }];
    let http = Anthropic.format(&req, &endpoint()).unwrap();
    assert_eq!(http.method, "POST");
    assert_eq!(http.url, "https://api.anthropic.com/v1/messages");
    assert_eq!(
        http.headers,
        vec![
            ("content-type".to_string(), "application/json".to_string()),
            ("x-api-key".to_string(), "sk-ant-test".to_string()),
            ("anthropic-version".to_string(), "2023-06-01".to_string()),
        ]
    );
    let expected = concat!(
        r#"{"max_tokens":4096,"temperature":0.5,"model":"claude-sonnet-4-6","#,
        r#""messages":[{"role":"user","content":[{"type":"text","text":"What is in \"this\"?"},"#,
        r#"{"type":"image","source":{"type":"base64","media_type":"image/png","data":"aW1hZ2U="}}]}],"#,
        r#""system":"Be brief.","#,
        r#""tools":[{"name":"look","description":"Looks closer","input_schema":"#,
        r#"{"type":"object","properties":{"zoom":{"type":"number"}}}}]}"#
    );
    assert_eq!(http.body, expected);
}

#[test]
fn base_url_and_credentials() {
    let req = request(user(json!([])));
    let custom = Endpoint {
        base_url: Some("http://localhost:8080/".into()),
        ..Endpoint::default()
    };
    let http = Anthropic.format(&req, &custom).unwrap();
    assert_eq!(http.url, "http://localhost:8080/v1/messages");
    assert!(http.headers.iter().all(|(name, _)| name != "x-api-key"));
    assert!(http
        .redacted_headers()
        .iter()
        .all(|(_, value)| value != "sk-ant-test"));

    let aws = Endpoint {
        credentials: Credentials::Aws {
            access_key_id: "AKIA".into(),
            secret_access_key: "secret".into(),
            session_token: None,
        },
        ..Endpoint::default()
    };
    let err = Anthropic.format(&req, &aws).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Other);
    assert!(!err.to_string().contains("secret"));
}

// ----- request: block mapping ---------------------------------------------------------------

#[test]
fn every_block_maps_in_order() {
    let req = request(json!([
        {"role": "user", "content": [
            {"type": "text", "text": ""},
            {"type": "image", "source": {"type": "base64", "media_type": "image/bmp", "data": "base64data"}}
        ]},
        {"role": "assistant", "content": [
            {"type": "reasoning", "text": "hmm", "signature": "sig", "provenance": "anthropic"},
            {"type": "text", "text": "calling"},
            {"type": "tool_use", "id": "t1", "name": "look", "input": {"b": 1, "a": [2]}}
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "ok"},
            {"type": "tool_result", "tool_use_id": "t2", "content": "bad", "is_error": true},
            {"type": "tool_result", "tool_use_id": "t3", "content": "fine", "is_error": false}
        ]},
        {"role": "assistant", "content": []}
    ]));
    assert_eq!(
        body(&req)["messages"],
        json!([
            {"role": "user", "content": [
                {"type": "text", "text": ""},
                {"type": "image", "source": {"type": "base64", "media_type": "image/bmp", "data": "base64data"}}
            ]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                {"type": "text", "text": "calling"},
                {"type": "tool_use", "id": "t1", "name": "look", "input": {"b": 1, "a": [2]}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "ok"},
                {"type": "tool_result", "tool_use_id": "t2", "content": "bad", "is_error": true},
                {"type": "tool_result", "tool_use_id": "t3", "content": "fine", "is_error": false}
            ]},
            {"role": "assistant", "content": []}
        ])
    );
}

#[test]
fn rich_tool_results_with_images_and_pdf_documents() {
    let req = request(user(json!([
        {"type": "tool_result", "tool_use_id": "t1", "content": [
            {"type": "text", "text": "here"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "YWJj"}},
            {"type": "image", "source": {"type": "url", "media_type": "image/webp", "url": "https://x.test/a.webp"}},
            {"type": "file", "filename": "report.pdf", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjQ="}},
            {"type": "file", "filename": "spec.pdf", "source": {"type": "url", "media_type": "application/pdf", "url": "https://x.test/spec.pdf"}}
        ], "is_error": false},
        {"type": "text", "text": "after"}
    ])));
    assert_eq!(
        body(&req)["messages"][0]["content"],
        json!([
            {"type": "tool_result", "tool_use_id": "t1", "content": [
                {"type": "text", "text": "here"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "YWJj"}},
                {"type": "image", "source": {"type": "url", "url": "https://x.test/a.webp"}},
                {"type": "text", "text": "[File attachment follows: report.pdf]"},
                {"type": "text", "text": "[File attachment follows: spec.pdf]"}
            ], "is_error": false},
            {"type": "document", "title": "report.pdf", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjQ="}},
            {"type": "document", "title": "spec.pdf", "source": {"type": "url", "url": "https://x.test/spec.pdf"}},
            {"type": "text", "text": "after"}
        ])
    );
    let gif = request(user(
        json!([{"type": "tool_result", "tool_use_id": "t", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/gif", "data": "R0lG"}},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}}
        ]}]),
    ));
    assert_eq!(
        body(&gif)["messages"][0]["content"][0]["content"][1]["source"]["media_type"],
        "image/png"
    );
}

#[test]
fn unsupported_tool_result_parts_have_omas_messages() {
    let cases = [
        (
            json!({"type": "image", "source": {"type": "base64", "media_type": "image/bmp", "data": "YWJj"}}),
            "Anthropic Messages cannot represent tool-result content type \"image:image/bmp\": supported image media types are JPEG, PNG, GIF, and WebP",
        ),
        (
            json!({"type": "image", "source": {"type": "url", "media_type": "IMAGE/PNG", "url": "https://x.test/a"}}),
            "Anthropic Messages cannot represent tool-result content type \"image:IMAGE/PNG\": supported image media types are JPEG, PNG, GIF, and WebP",
        ),
        (
            json!({"type": "file", "filename": "a.txt", "source": {"type": "base64", "media_type": "text/plain", "data": "YWJj"}}),
            "Anthropic Messages cannot represent tool-result content type \"file:text/plain\": tool-result file parts are supported here only for PDF documents",
        ),
        (
            json!({"type": "file", "filename": "a.png", "source": {"type": "url", "media_type": "image/png", "url": "https://x.test/a"}}),
            "Anthropic Messages cannot represent tool-result content type \"file:image/png\": tool-result file parts are supported here only for PDF documents",
        ),
    ];
    for (part, message) in cases {
        let req = request(user(json!([
            {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": "x"}, part]}
        ])));
        let err = format_err(&req);
        assert_eq!(err.kind(), ErrorKind::UnsupportedToolResultContent);
        assert_eq!(err.to_string(), message);
        assert!(!err.retryable());
    }
}

#[test]
fn video_is_refused_before_any_request() {
    for source in [
        json!({"type": "base64", "media_type": "video/mp4", "data": "AAAA"}),
        json!({"type": "url", "media_type": "video/mp4", "url": "https://x.test/clip.mp4"}),
    ] {
        let mut req = request(user(
            json!([{"type": "text", "text": "watch"}, {"type": "video", "source": source}]),
        ));
        // The video error comes before the thinking-budget check.
        req.thinking = Some(Thinking {
            enabled: true,
            budget_tokens: Some(1),
        });
        let err = format_err(&req);
        assert_eq!(err, Error::unsupported_block("Anthropic Messages", "video"));
        assert_eq!(
            err.to_string(),
            "Anthropic Messages cannot represent the \"video\" content block: OMA does not map video for this adapter yet"
        );
        assert!(!err.retryable());
    }
}

#[test]
fn validation_runs_first() {
    // Typed messages that skipped the JSON entry point's checks.
    let req = ChatRequest {
        messages: serde_json::from_value(user(json!([
            {"type": "video", "source": {"type": "url", "media_type": "video/mp4", "url": "file:///tmp/x.mp4"}}
        ])))
        .unwrap(),
        ..ChatRequest::default()
    };
    let err = format_err(&req);
    assert_eq!(err.kind(), ErrorKind::InvalidMessage);
    assert_eq!(
        err.to_string(),
        "messages[0].content[0].source.url must use HTTP or HTTPS"
    );
}

fn reasoning(
    text: &str,
    signature: Option<&str>,
    redacted: Option<&str>,
    provenance: Option<&str>,
) -> Value {
    let mut block = json!({"type": "reasoning", "text": text});
    if let Some(s) = signature {
        block["signature"] = json!(s);
    }
    if let Some(r) = redacted {
        block["redactedData"] = json!(r);
    }
    if let Some(p) = provenance {
        block["provenance"] = json!(p);
    }
    block
}

#[test]
fn reasoning_round_trips_only_own_blocks() {
    let blocks = json!([
        reasoning("", None, Some("opaque"), Some("anthropic")),
        reasoning("signed", Some("sig"), None, Some("anthropic")),
        reasoning("unsigned", None, None, Some("anthropic")),
        reasoning("gemini thought", Some("gsig"), None, Some("gemini")),
        reasoning("", None, Some("x"), Some("bedrock")),
        reasoning("", None, None, None),
        {"type": "text", "text": "end"}
    ]);
    let req = request(json!([{"role": "assistant", "content": blocks}]));
    assert_eq!(
        body(&req)["messages"][0]["content"],
        json!([
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "thinking", "thinking": "signed", "signature": "sig"},
            {"type": "text", "text": "end"}
        ])
    );
    let mut preserved = req.clone();
    preserved.preserve_reasoning_as_text = true;
    assert_eq!(
        body(&preserved)["messages"][0]["content"],
        json!([
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "thinking", "thinking": "signed", "signature": "sig"},
            {"type": "text", "text": "<thinking>unsigned</thinking>"},
            {"type": "text", "text": "<thinking>gemini thought</thinking>"},
            {"type": "text", "text": "<thinking>[redacted]</thinking>"},
            {"type": "text", "text": "end"}
        ])
    );
    let long = "a".repeat(2000);
    let req = ChatRequest {
        preserve_reasoning_as_text: true,
        ..request(
            json!([{"role": "assistant", "content": [reasoning(&long, None, None, Some("openai"))]}]),
        )
    };
    let text = body(&req)["messages"][0]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(text.contains("...[truncated]..."));
    assert_eq!(text.chars().count(), 1200 + "<thinking></thinking>".len());
}

// ----- request: options -------------------------------------------------------------------

#[test]
fn thinking_param_and_its_errors() {
    let mut req = request(user(json!([{"type": "text", "text": "hi"}])));
    assert!(body(&req).get("thinking").is_none());
    req.thinking = Some(Thinking {
        enabled: false,
        budget_tokens: Some(5),
    });
    assert!(body(&req).get("thinking").is_none());
    req.thinking = Some(Thinking {
        enabled: true,
        budget_tokens: None,
    });
    let b = body(&req);
    assert_eq!(
        b["thinking"],
        json!({"type": "enabled", "budget_tokens": 1024})
    );
    assert_eq!(keys(&b).last(), Some(&"thinking"));

    req.thinking = Some(Thinking {
        enabled: true,
        budget_tokens: Some(1023),
    });
    let err = format_err(&req);
    assert_eq!(err.kind(), ErrorKind::Other);
    assert_eq!(
        err.to_string(),
        "[anthropic] thinking.budgetTokens must be >= 1024 (got 1023); the Anthropic API enforces this minimum."
    );
    req.thinking = Some(Thinking {
        enabled: true,
        budget_tokens: Some(2048),
    });
    req.sampling.max_tokens = Some(2048);
    assert_eq!(
        format_err(&req).to_string(),
        "[anthropic] thinking.budgetTokens (2048) must be < maxTokens (2048); the Anthropic API rejects requests where budget_tokens >= max_tokens. Either lower thinking.budgetTokens or raise maxTokens."
    );
    req.thinking = Some(Thinking {
        enabled: true,
        budget_tokens: None,
    });
    req.sampling.max_tokens = Some(1024);
    assert!(format_err(&req)
        .to_string()
        .contains("(1024) must be < maxTokens (1024)"));
    req.sampling.max_tokens = Some(1025);
    assert_eq!(body(&req)["max_tokens"], 1025);
}

#[test]
fn sampling_keys_only_when_set() {
    let mut req = request(user(json!([])));
    assert_eq!(keys(&body(&req)), ["max_tokens", "model", "messages"]);
    req.sampling = Sampling {
        max_tokens: Some(100),
        temperature: Some(1.0),
        top_p: Some(0.9),
        top_k: Some(40),
        frequency_penalty: Some(0.1),
        ..Sampling::default()
    };
    req.system_prompt = Some(String::new());
    let http = Anthropic.format(&req, &endpoint()).unwrap();
    let text = http.body;
    assert!(
        text.starts_with(r#"{"max_tokens":100,"temperature":1,"top_p":0.9,"top_k":40,"model""#),
        "{text}"
    );
    let b: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        keys(&b),
        [
            "max_tokens",
            "temperature",
            "top_p",
            "top_k",
            "model",
            "messages",
            "system"
        ]
    );
    assert_eq!(b["system"], "");
}

#[test]
fn extra_body_spreads_between_sampling_and_structure() {
    let mut req = request(user(json!([{"type": "text", "text": "hi"}])));
    req.sampling.temperature = Some(0.2);
    let extra = json!({
        "metadata": {"user_id": "u1"},
        "top_k": 5,
        "temperature": 0.7,
        "max_tokens": 99,
        "model": "evil",
        "messages": [],
        "system": "evil",
        "tools": [],
        "thinking": {"type": "enabled", "budget_tokens": 1},
        "stop_sequences": ["END"]
    });
    req.extra_body = extra.as_object().cloned().unwrap_or_default();
    let b = body(&req);
    // Sampling keys keep their slots with the extra values; structural keys named in the extra
    // body keep the extra body's position, take the adapter's value, or vanish when it has none.
    assert_eq!(
        keys(&b),
        [
            "max_tokens",
            "temperature",
            "top_k",
            "metadata",
            "model",
            "messages",
            "stop_sequences"
        ]
    );
    assert_eq!(b["max_tokens"], 99);
    assert_eq!(b["temperature"], 0.7);
    assert_eq!(b["top_k"], 5);
    assert_eq!(b["model"], "claude-sonnet-4-6");
    assert_eq!(b["messages"][0]["content"][0]["text"], "hi");
    assert_eq!(b["metadata"], json!({"user_id": "u1"}));

    req.system_prompt = Some("sys".into());
    req.tools = vec![ToolDefinition {
        name: "t".into(),
        description: "d".into(),
        input_schema: json!({}),
    }];
    req.sampling.max_tokens = Some(8000);
    req.thinking = Some(Thinking {
        enabled: true,
        budget_tokens: Some(2000),
    });
    let b = body(&req);
    assert_eq!(
        keys(&b),
        [
            "max_tokens",
            "temperature",
            "top_k",
            "metadata",
            "model",
            "messages",
            "system",
            "tools",
            "thinking",
            "stop_sequences"
        ]
    );
    assert_eq!(b["system"], "sys");
    assert_eq!(
        b["thinking"],
        json!({"type": "enabled", "budget_tokens": 2000})
    );
    // The budget check uses max_tokens from the options, not from the extra body.
    assert_eq!(b["max_tokens"], 99);
}

#[test]
fn tools_schema_gets_object_type_first() {
    let mut req = request(user(json!([])));
    let tool = |schema: Value| ToolDefinition {
        name: "n".into(),
        description: "d".into(),
        input_schema: schema,
    };
    req.tools = vec![
        tool(json!({"properties": {"a": {"type": "string"}}, "required": ["a"]})),
        tool(json!({"required": [], "type": "custom"})),
        tool(json!(null)),
    ];
    let http = Anthropic.format(&req, &endpoint()).unwrap();
    let text = http.body;
    assert!(text.contains(
        r#""input_schema":{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}"#
    ));
    assert!(text.contains(r#""input_schema":{"type":"custom","required":[]}"#));
    assert!(text.contains(r#""input_schema":{"type":"object"}}"#));
    let b: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        b["tools"][0],
        json!({"name": "n", "description": "d", "input_schema": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}})
    );
    req.tools.clear();
    assert!(body(&req).get("tools").is_none());
}

#[test]
fn streaming_request_ends_with_stream_true() {
    let mut req = request(user(json!([{"type": "text", "text": "hi"}])));
    req.stream = true;
    let b = body(&req);
    assert_eq!(keys(&b), ["max_tokens", "model", "messages", "stream"]);
    assert_eq!(b["stream"], true);
    req.extra_body = json!({"stream": false, "x": 1})
        .as_object()
        .cloned()
        .unwrap_or_default();
    let b = body(&req);
    assert_eq!(keys(&b), ["max_tokens", "stream", "x", "model", "messages"]);
    assert_eq!(b["stream"], true);
    req.stream = false;
    assert_eq!(body(&req)["stream"], false);
}

// ----- response ---------------------------------------------------------------------------

fn parse(body: &str) -> Result<LlmResponse, Error> {
    Anthropic.parse(&ResponseContext::default(), body.as_bytes())
}

#[test]
fn parses_every_block_kind() {
    let response = parse(
        r#"{"id":"msg_1","type":"message","role":"assistant","model":"claude-x",
        "content":[
          {"type":"thinking","thinking":"let me see","signature":"sig=="},
          {"type":"redacted_thinking","data":"opaque"},
          {"type":"text","text":"Hello","citations":null},
          {"type":"tool_use","id":"toolu_1","name":"look","input":{"q":"x"}},
          {"type":"server_tool_use","id":"s","name":"web_search","input":{}}
        ],
        "stop_reason":"tool_use","stop_sequence":null,
        "usage":{"input_tokens":12,"output_tokens":34,"cache_read_input_tokens":null}}"#,
    )
    .unwrap();
    assert_eq!(
        response,
        LlmResponse {
            id: "msg_1".into(),
            model: "claude-x".into(),
            stop_reason: "tool_use".into(),
            usage: TokenUsage::new(12, 34),
            content: vec![
                ContentBlock::Reasoning(ReasoningBlock {
                    text: "let me see".into(),
                    signature: Some("sig==".into()),
                    redacted_data: None,
                    provenance: Some("anthropic".into()),
                }),
                ContentBlock::Reasoning(ReasoningBlock {
                    text: String::new(),
                    signature: None,
                    redacted_data: Some("opaque".into()),
                    provenance: Some("anthropic".into()),
                }),
                ContentBlock::Text(TextBlock {
                    text: "Hello".into()
                }),
                ContentBlock::ToolUse(ToolUseBlock {
                    id: "toolu_1".into(),
                    name: "look".into(),
                    input: json!({"q": "x"}),
                    signature: None,
                }),
                ContentBlock::Text(TextBlock {
                    text: "[unsupported block type: server_tool_use]".into()
                }),
            ],
            stop_sequence: None,
        }
    );
}

#[test]
fn stop_reasons_pass_through_and_null_is_end_turn() {
    for (wire, oma) in [
        ("null", "end_turn"),
        ("\"end_turn\"", "end_turn"),
        ("\"max_tokens\"", "max_tokens"),
        ("\"stop_sequence\"", "stop_sequence"),
        ("\"refusal\"", "refusal"),
    ] {
        let body = format!(
            r#"{{"id":"m","model":"c","content":[],"stop_reason":{wire},"usage":{{"input_tokens":1,"output_tokens":2}}}}"#
        );
        assert_eq!(parse(&body).unwrap().stop_reason, oma);
    }
}

#[test]
fn malformed_bodies_are_provider_errors() {
    for body in [
        "",
        "not json",
        "[]",
        r#"{"id":"m","model":"c"}"#,
        r#"{"id":"m","model":"c","content":{}}"#,
        r#"{"id":"m","model":"c","content":[{"type":"text"}]}"#,
        r#"{"id":"m","model":"c","content":[{"type":"text","text":5}]}"#,
        r#"{"id":"m","model":"c","content":[{"type":"tool_use","name":"x","input":{}}]}"#,
        r#"{"id":"m","model":"c","content":[{"text":"no type"}]}"#,
        r#"{"id":"m","model":"c","content":["text"]}"#,
        r#"{"id":"m","model":"c","content":[],"usage":{"input_tokens":-1}}"#,
    ] {
        let err = parse(body).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Provider, "{body}");
        assert!(
            err.to_string()
                .starts_with("malformed anthropic response: "),
            "{err}"
        );
    }
}

#[test]
fn error_bodies() {
    let body = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"r"}"#;
    assert_eq!(
        error_message(body.as_bytes()).as_deref(),
        Some("Overloaded")
    );
    assert_eq!(error_message(b"<html>bad gateway</html>"), None);
    assert_eq!(error_message(br#"{"type":"message"}"#), None);
    assert_eq!(error_message(br#"{"type":"error","error":{}}"#), None);
    let err = parse(body).unwrap_err();
    assert_eq!(
        err,
        Error::Provider {
            provider: "anthropic".into(),
            status: None,
            message: "Overloaded".into(),
            code: Some("overloaded_error".into()),
            error_type: Some("overloaded_error".into()),
        }
    );
}

// ----- streaming --------------------------------------------------------------------------

pub(crate) const STREAM: &str = concat!(
    "event: message_start\n",
    "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_s\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-x\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n",
    "event: ping\ndata: {\"type\": \"ping\"}\n\n",
    "event: content_block_start\r\n",
    "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\r\n\r\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"Let me \"}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"think.\"}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"EqQB\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "event: content_block_start\n",
    "data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"redacted_thinking\",\"data\":\"opaque\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
    "event: content_block_start\n",
    "data: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"text_delta\",\"text\":\"Grüße, \"}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"text_delta\",\"text\":\"世界 🌍\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n",
    "event: content_block_start\n",
    "data: {\"type\":\"content_block_start\",\"index\":3,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"get_weather\",\"input\":{}}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":3,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":3,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"location\\\": \\\"San Fra\"}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":3,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"ncisco\\\"}\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":3}\n\n",
    "event: content_block_start\n",
    "data: {\"type\":\"content_block_start\",\"index\":4,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_2\",\"name\":\"now\",\"input\":{}}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":4}\n\n",
    "event: content_block_start\n",
    "data: {\"type\":\"content_block_start\",\"index\":5,\"content_block\":{\"type\":\"server_tool_use\",\"id\":\"s\",\"name\":\"web_search\",\"input\":{}}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":5}\n\n",
    "event: message_delta\n",
    "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":89}}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
);

fn decode(stream: &[u8], chunk: usize) -> Result<Vec<StreamEvent>, Error> {
    let mut decoder = Anthropic.stream_decoder(&ResponseContext::default());
    let mut events = Vec::new();
    for piece in stream.chunks(chunk.max(1)) {
        events.extend(decoder.feed(piece)?);
    }
    events.extend(decoder.finish()?);
    Ok(events)
}

fn expected_stream() -> Vec<StreamEvent> {
    let weather = ToolUseBlock {
        id: "toolu_1".into(),
        name: "get_weather".into(),
        input: json!({"location": "San Francisco"}),
        signature: None,
    };
    let now = ToolUseBlock {
        id: "toolu_2".into(),
        name: "now".into(),
        input: json!({}),
        signature: None,
    };
    vec![
        StreamEvent::Usage(TokenUsage::new(25, 1)),
        StreamEvent::Reasoning("Let me ".into()),
        StreamEvent::Reasoning("think.".into()),
        StreamEvent::ReasoningSignature("EqQB".into()),
        StreamEvent::RedactedReasoning("opaque".into()),
        StreamEvent::Text("Grüße, ".into()),
        StreamEvent::Text("世界 🌍".into()),
        StreamEvent::ToolUse(weather.clone()),
        StreamEvent::ToolUse(now.clone()),
        StreamEvent::Done(LlmResponse {
            id: "msg_s".into(),
            model: "claude-x".into(),
            stop_reason: "tool_use".into(),
            usage: TokenUsage::new(25, 89),
            content: vec![
                ContentBlock::Reasoning(ReasoningBlock {
                    text: "Let me think.".into(),
                    signature: Some("EqQB".into()),
                    redacted_data: None,
                    provenance: Some("anthropic".into()),
                }),
                ContentBlock::Reasoning(ReasoningBlock {
                    text: String::new(),
                    signature: None,
                    redacted_data: Some("opaque".into()),
                    provenance: Some("anthropic".into()),
                }),
                ContentBlock::Text(TextBlock {
                    text: "Grüße, 世界 🌍".into(),
                }),
                ContentBlock::ToolUse(weather),
                ContentBlock::ToolUse(now),
                ContentBlock::Text(TextBlock {
                    text: "[unsupported block type: server_tool_use]".into(),
                }),
            ],
            stop_sequence: None,
        }),
    ]
}

#[test]
fn stream_decodes_identically_under_every_chunking() {
    let expected = expected_stream();
    for size in 1..=STREAM.len() {
        assert_eq!(
            decode(STREAM.as_bytes(), size).unwrap(),
            expected,
            "chunk size {size}"
        );
    }
}

#[test]
fn text_deltas_arrive_as_soon_as_their_event_is_complete() {
    let mut decoder = Anthropic.stream_decoder(&ResponseContext::default());
    let cut = STREAM.find("世界").unwrap();
    let first = decoder.feed(&STREAM.as_bytes()[..cut]).unwrap();
    assert_eq!(first.last(), Some(&StreamEvent::Text("Grüße, ".into())));
    assert!(!first.iter().any(|e| matches!(e, StreamEvent::Done(_))));
}

#[test]
fn truncated_streams_are_errors() {
    let cut = STREAM.find("event: message_stop").unwrap();
    for end in [0, 10, cut / 2, cut] {
        let err = decode(&STREAM.as_bytes()[..end], 7).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Provider);
        assert!(err.to_string().contains("before message_stop"), "{err}");
        assert!(err.retryable());
    }
    // A final event without its blank line still counts.
    let unterminated = STREAM.trim_end();
    assert_eq!(
        decode(unterminated.as_bytes(), 5).unwrap(),
        expected_stream()
    );
    // message_stop without message_start.
    let err = decode(b"data: {\"type\":\"message_stop\"}\n\n", 3).unwrap_err();
    assert!(err.to_string().contains("message_start"), "{err}");
}

#[test]
fn error_events_fail_the_stream() {
    let cut = STREAM.find("event: content_block_start").unwrap();
    let stream = format!(
        "{}event: error\ndata: {{\"type\":\"error\",\"error\":{{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}}}\n\n",
        &STREAM[..cut]
    );
    let mut decoder = Anthropic.stream_decoder(&ResponseContext::default());
    let err = decoder.feed(stream.as_bytes()).unwrap_err();
    assert_eq!(
        err,
        Error::Provider {
            provider: "anthropic".into(),
            status: None,
            message: "Overloaded".into(),
            code: Some("overloaded_error".into()),
            error_type: Some("overloaded_error".into()),
        }
    );
    assert_eq!(decoder.finish().unwrap_err(), err);
    assert_eq!(decoder.feed(b"data: {}\n\n").unwrap_err(), err);

    let err = decode(b"event: error\ndata: upstream exploded\n\n", 2).unwrap_err();
    assert_eq!(err.to_string(), "upstream exploded");
    assert!(err.retryable());
}

#[test]
fn malformed_stream_events_are_errors() {
    for bad in [
        "data: not json\n\n",
        "data: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n",
        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\"}}\n\n",
        "data: {\"type\":\"message_start\"}\n\n",
        "data: {\"index\":0}\n\n",
    ] {
        let err = decode(bad.as_bytes(), 4).unwrap_err();
        assert!(err.to_string().starts_with("malformed anthropic response: "), "{bad}: {err}");
    }
}

#[test]
fn tool_inputs_that_are_not_objects_become_empty() {
    let stream = concat!(
        "data: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"c\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n",
        "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"a\",\"name\":\"x\",\"input\":{}}}\n\n",
        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"broken\"}}\n\n",
        "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"b\",\"name\":\"y\",\"input\":{}}}\n\n",
        "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"[1,2]\"}}\n\n",
        "data: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
        "data: {\"type\":\"content_block_delta\",\"index\":9,\"delta\":{\"type\":\"citations_delta\",\"citation\":{}}}\n\n",
        "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":null},\"usage\":{\"input_tokens\":40,\"output_tokens\":7}}\n\n",
        "data: {\"type\":\"message_stop\"}\n\n",
        "data: {\"type\":\"after the end\"}\n\n",
    );
    let events = decode(stream.as_bytes(), 11).unwrap();
    let calls: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolUse(call) => Some((call.id.as_str(), call.input.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(calls, [("a", json!({})), ("b", json!({}))]);
    let Some(StreamEvent::Done(done)) = events.last() else {
        panic!("the stream ends with Done")
    };
    assert_eq!(done.stop_reason, "end_turn");
    assert_eq!(done.usage, TokenUsage::new(40, 7));
    assert_eq!(done.content.len(), 2);
}

#[test]
fn extra_body_map_is_kept_as_given() {
    // An empty extra body adds nothing.
    let mut req = request(user(json!([])));
    req.extra_body = Map::new();
    assert_eq!(keys(&body(&req)), ["max_tokens", "model", "messages"]);
}

#[test]
fn corrupted_input_never_panics() {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let response = br#"{"id":"m","model":"c","content":[{"type":"text","text":"hi"},{"type":"tool_use","id":"t","name":"n","input":{"a":[1]}}],"stop_reason":null,"usage":{"input_tokens":1,"output_tokens":2}}"#;
    let (mut stream_ok, mut stream_err, mut parse_ok, mut parse_err) = (0, 0, 0, 0);
    for _ in 0..2000 {
        let mut stream = STREAM.as_bytes().to_vec();
        let mut body = response.to_vec();
        for _ in 0..3 {
            let at = (next() as usize) % stream.len();
            stream[at] = (next() % 256) as u8;
            let at = (next() as usize) % body.len();
            body[at] = (next() % 256) as u8;
        }
        // A stream decodes to a list ending in its one `Done`, or to a provider error, and to
        // the same outcome whatever the chunking.
        let chunked = decode(&stream, 1 + (next() as usize) % 64);
        match &chunked {
            Ok(events) => {
                stream_ok += 1;
                assert!(matches!(events.last(), Some(StreamEvent::Done(_))));
                let dones = events
                    .iter()
                    .filter(|e| matches!(e, StreamEvent::Done(_)))
                    .count();
                assert_eq!(dones, 1);
            }
            Err(error) => {
                stream_err += 1;
                assert_eq!(error.kind(), ErrorKind::Provider, "{error}");
            }
        }
        assert_eq!(chunked, decode(&stream, stream.len()));
        // A body parses, or fails as a provider error.
        match Anthropic.parse(&ResponseContext::default(), &body) {
            Ok(response) => {
                parse_ok += 1;
                assert!(response.content.len() <= 2);
            }
            Err(error) => {
                parse_err += 1;
                assert_eq!(error.kind(), ErrorKind::Provider, "{error}");
            }
        }
        // An error message is only ever read from a JSON body.
        if error_message(&body).is_some() {
            assert!(serde_json::from_slice::<Value>(&body).is_ok());
        }
    }
    // The corruption reaches both outcomes of both readers, so the checks above ran on each.
    for (what, count) in [
        ("stream ok", stream_ok),
        ("stream error", stream_err),
        ("parse ok", parse_ok),
        ("parse error", parse_err),
    ] {
        assert!(count > 0, "{what}: {count} of 2000");
    }
}

// ----- stream limits: linear decoding and caps ------------------------------------------------

fn start_event(index: usize, block: Value) -> String {
    let event = json!({"type": "content_block_start", "index": index, "content_block": block});
    format!("data: {event}\n\n")
}

fn text_delta_event(index: usize, text: &str) -> String {
    let event = json!({"type": "content_block_delta", "index": index,
        "delta": {"type": "text_delta", "text": text}});
    format!("data: {event}\n\n")
}

const MESSAGE_START: &str = "data: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"c\",\"usage\":{\"input_tokens\":1}}}\n\n";
const MESSAGE_STOP: &str = "data: {\"type\":\"message_stop\"}\n\n";

/// 1,024 blocks, then 20,000 deltas to the first one: each delta finds its block at once
/// (a search from the newest block would walk all 1,024 for each of them).
#[test]
fn many_deltas_to_an_early_block_decode_in_linear_time() {
    let mut stream = String::from(MESSAGE_START);
    for index in 0..1024 {
        stream.push_str(&start_event(index, json!({"type": "text", "text": ""})));
    }
    for _ in 0..20_000 {
        stream.push_str(&text_delta_event(0, "a"));
    }
    stream.push_str(MESSAGE_STOP);
    let events = decode(stream.as_bytes(), 4096).expect("a stream within the caps decodes");
    // The early usage, 20,000 deltas, the whole response.
    assert_eq!(events.len(), 20_002);
    let Some(StreamEvent::Done(done)) = events.last() else {
        panic!("the stream ends with Done")
    };
    assert_eq!(done.content.len(), 1024);
    assert_eq!(
        done.content[0],
        ContentBlock::Text(TextBlock {
            text: "a".repeat(20_000)
        })
    );
    assert_eq!(
        done.content[1023],
        ContentBlock::Text(TextBlock {
            text: String::new()
        })
    );
}

/// A block index used twice means the newer block; deltas go to it.
#[test]
fn a_reused_index_addresses_the_newest_block() {
    let stream = [
        MESSAGE_START.to_string(),
        start_event(0, json!({"type": "text", "text": "x"})),
        start_event(0, json!({"type": "text", "text": "y"})),
        text_delta_event(0, "z"),
        MESSAGE_STOP.to_string(),
    ]
    .concat();
    let events = decode(stream.as_bytes(), 7).unwrap();
    let Some(StreamEvent::Done(done)) = events.last() else {
        panic!("the stream ends with Done")
    };
    assert_eq!(
        done.content,
        [
            ContentBlock::Text(TextBlock { text: "x".into() }),
            ContentBlock::Text(TextBlock { text: "yz".into() }),
        ]
    );
}

#[test]
fn more_than_1024_blocks_is_a_malformed_response() {
    let mut stream = String::from(MESSAGE_START);
    for index in 0..1025 {
        stream.push_str(&start_event(index, json!({"type": "text", "text": ""})));
    }
    stream.push_str(MESSAGE_STOP);
    let error = decode(stream.as_bytes(), 1 << 16).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Provider);
    assert_eq!(
        error.to_string(),
        "malformed anthropic response: the stream has more than 1024 content blocks"
    );
}

#[test]
fn more_than_256_tool_calls_is_a_malformed_response() {
    let tool = |index: usize| {
        start_event(
            index,
            json!({"type": "tool_use", "id": format!("t{index}"), "name": "n", "input": {}}),
        )
    };
    let within: String = std::iter::once(MESSAGE_START.to_string())
        .chain((0..256).map(tool))
        .chain([MESSAGE_STOP.to_string()])
        .collect();
    let events = decode(within.as_bytes(), 1 << 16).expect("256 tool calls are allowed");
    let Some(StreamEvent::Done(done)) = events.last() else {
        panic!("the stream ends with Done")
    };
    assert_eq!(done.content.len(), 256);

    let over: String = std::iter::once(MESSAGE_START.to_string())
        .chain((0..257).map(tool))
        .chain([MESSAGE_STOP.to_string()])
        .collect();
    let error = decode(over.as_bytes(), 1 << 16).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Provider);
    assert_eq!(
        error.to_string(),
        "malformed anthropic response: the stream has more than 256 tool calls"
    );
}

/// An `error` event whose data is not JSON used to be cut to 200 chars before the caller
/// redacted the key, so a key across char 200 left its prefix behind. The text is now kept
/// whole until `Error::redact`, which redacts first and bounds after.
#[test]
fn a_key_in_a_non_json_error_event_is_redacted_whole() {
    let key = "sk-ant-api03-0123456789abcdef";
    for at in [190, 195, 199] {
        let data = format!("{}{key}{}", "x".repeat(at), "y".repeat(5000));
        let stream = format!("event: error\ndata: {data}\n\n");
        let error = decode(stream.as_bytes(), 64).unwrap_err().redact(&[key]);
        let message = error.to_string();
        for n in 4..=key.len() {
            assert!(!message.contains(&key[..n]), "{at}: {message}");
        }
        assert!(message.contains("[redacted]"));
        assert!(message.chars().count() <= crate::error::MAX_MESSAGE_CHARS);
    }
}

// ----- prompt cache ------------------------------------------------------------------------

#[test]
fn cache_counts_are_read_from_answers_and_streams() {
    let answer = r#"{"id":"msg_c","type":"message","role":"assistant","model":"claude-x",
        "content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn",
        "usage":{"input_tokens":4,"cache_creation_input_tokens":1200,
                 "cache_read_input_tokens":9000,"output_tokens":2,
                 "cache_creation":{"ephemeral_5m_input_tokens":1200}}}"#;
    let usage = parse(answer).unwrap().usage;
    assert_eq!(
        usage,
        TokenUsage {
            input_tokens: 4,
            output_tokens: 2,
            cache_creation_input_tokens: 1200,
            cache_read_input_tokens: 9000,
            cached_input_tokens: 0,
        }
    );
    // Null counts are absent counts.
    let nulls = answer.replace("1200,", "null,").replace("9000", "null");
    assert_eq!(parse(&nulls).unwrap().usage, TokenUsage::new(4, 2));
    let stream = concat!(
        "event: message_start\n",
        r#"data: {"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"model":"claude-x","stop_reason":null,"usage":{"input_tokens":1234,"cache_creation_input_tokens":0,"cache_read_input_tokens":5000,"output_tokens":1}}}"#,
        "\n\n",
        "event: message_delta\n",
        r#"data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":7,"cache_read_input_tokens":5001}}"#,
        "\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );
    let events = decode(stream.as_bytes(), 9).unwrap();
    let early = TokenUsage {
        input_tokens: 1234,
        output_tokens: 1,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: 5000,
        cached_input_tokens: 0,
    };
    assert_eq!(events.first(), Some(&StreamEvent::Usage(early)));
    let Some(StreamEvent::Done(done)) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(
        done.usage,
        TokenUsage {
            output_tokens: 7,
            cache_read_input_tokens: 5001,
            cached_input_tokens: 0,
            ..early
        }
    );
}

fn cache(place: crate::adapter::CachePlace, ttl: Option<&str>) -> crate::adapter::CacheMark {
    crate::adapter::CacheMark {
        place,
        ttl: ttl.map(str::to_owned),
    }
}

#[test]
fn cache_markers_go_on_the_blocks_they_mark() {
    use crate::adapter::CachePlace;
    let mut req = request(json!([
        {"role": "user", "content": [
            {"type": "text", "text": "context"},
            {"type": "text", "text": "question"}
        ]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "look", "input": {}}
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": [
                {"type": "text", "text": "seen"},
                {"type": "file", "filename": "a.pdf",
                 "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"}}
            ]}
        ]}
    ]));
    req.system_blocks = vec!["first".into(), "second".into()];
    req.system_prompt = Some("first\n\nsecond".into());
    req.tools = vec![
        ToolDefinition {
            name: "look".into(),
            description: "Looks".into(),
            input_schema: json!({}),
        },
        ToolDefinition {
            name: "jump".into(),
            description: "Jumps".into(),
            input_schema: json!({}),
        },
    ];
    req.cache = vec![
        cache(CachePlace::System(1), None),
        cache(CachePlace::Tool(1), Some("1h")),
        cache(
            CachePlace::Block {
                message: 0,
                block: 1,
            },
            None,
        ),
        cache(
            CachePlace::Part {
                message: 2,
                block: 0,
                part: 0,
            },
            None,
        ),
        cache(
            CachePlace::Part {
                message: 2,
                block: 0,
                part: 1,
            },
            Some("5m"),
        ),
    ];
    let body = body(&req);
    let ephemeral = json!({"type": "ephemeral"});
    assert_eq!(
        body["system"],
        json!([
            {"type": "text", "text": "first"},
            {"type": "text", "text": "second", "cache_control": ephemeral}
        ])
    );
    assert_eq!(body["tools"][0].get("cache_control"), None);
    assert_eq!(
        body["tools"][1]["cache_control"],
        json!({"type": "ephemeral", "ttl": "1h"})
    );
    assert_eq!(body["messages"][0]["content"][0].get("cache_control"), None);
    assert_eq!(
        body["messages"][0]["content"][1]["cache_control"],
        ephemeral
    );
    let result = &body["messages"][2]["content"];
    assert_eq!(result[0]["content"][0]["cache_control"], ephemeral);
    // The PDF's marker goes on its document block, after the tool result.
    assert_eq!(result[0]["content"][1].get("cache_control"), None);
    assert_eq!(result[1]["type"], json!("document"));
    assert_eq!(
        result[1]["cache_control"],
        json!({"type": "ephemeral", "ttl": "5m"})
    );
    // A system prompt of one text with a marker becomes one block; unmarked, it stays a string.
    let mut one = request(user(json!([{"type": "text", "text": "hi"}])));
    one.system_prompt = Some("Be brief.".into());
    assert_eq!(body_of(&one)["system"], json!("Be brief."));
    one.cache = vec![cache(CachePlace::System(0), None)];
    assert_eq!(
        body_of(&one)["system"],
        json!([{"type": "text", "text": "Be brief.", "cache_control": ephemeral}])
    );
}

fn body_of(request: &ChatRequest) -> Value {
    body(request)
}

#[test]
fn a_forwarded_request_keeps_every_byte_but_the_model() {
    use super::{forward, Forward};
    let body = r#"{"model":"anthropic/claude-x","max_tokens":1e3,"messages":[{"role":"user","content":"caf\u00e9 \"x\""}],"metadata":{"user_id":"u"}}"#;
    let start = body.find("\"anthropic/claude-x\"").unwrap();
    let model_at = start..start + "\"anthropic/claude-x\"".len();
    let request = Forward {
        body,
        model_at: model_at.clone(),
        path: "v1/messages?beta=true",
        version: Some("2023-06-01"),
        beta: Some("interleaved-thinking-2025-05-14"),
    };
    let http = forward(&request, "claude-\"x\"", &endpoint()).unwrap();
    assert_eq!(
        http.body,
        body.replace("\"anthropic/claude-x\"", r#""claude-\"x\"""#)
    );
    assert_eq!(http.url, "https://api.anthropic.com/v1/messages?beta=true");
    assert_eq!(
        http.headers,
        vec![
            ("content-type".to_string(), "application/json".to_string()),
            ("x-api-key".to_string(), "sk-ant-test".to_string()),
            ("anthropic-version".to_string(), "2023-06-01".to_string()),
            (
                "anthropic-beta".to_string(),
                "interleaved-thinking-2025-05-14".to_string()
            ),
        ]
    );
    // A place outside the body is refused, never sliced.
    let wrong = Forward {
        model_at: body.len()..body.len() + 4,
        ..request
    };
    assert!(forward(&wrong, "m", &endpoint()).is_err());
}
