//! Tests of the Bedrock adapter through its public surface: `format`, `parse`,
//! `stream_decoder` and `error_message`.

use serde_json::{json, Value};

use super::eventstream::{encode, HeaderValue};
use super::*;
use crate::adapter::{ChatRequest, Sampling, StreamEvent, Thinking, ToolDefinition};
use crate::error::ErrorKind;
use crate::message::{ContentBlock, ReasoningBlock, TextBlock, TokenUsage, ToolUseBlock};

const MODEL: &str = "anthropic.claude-3-5-haiku-20241022-v1:0";
const MODEL_IN_PATH: &str = "anthropic.claude-3-5-haiku-20241022-v1%3A0";

fn request(messages: Value) -> ChatRequest {
    ChatRequest {
        model: MODEL.into(),
        // Straight through serde: validation is format's job, and some cases must fail it.
        messages: serde_json::from_value(messages).unwrap(),
        ..ChatRequest::default()
    }
}

fn user(blocks: Value) -> ChatRequest {
    request(json!([{"role": "user", "content": blocks}]))
}

fn format(request: &ChatRequest) -> Result<HttpRequest, Error> {
    Bedrock.format(request, &Endpoint::default())
}

fn body(request: &ChatRequest) -> Value {
    serde_json::from_str(&format(request).unwrap().body).unwrap()
}

/// The converted content of the first message.
fn content(blocks: Value) -> Value {
    body(&user(blocks))["messages"][0]["content"].clone()
}

fn header<'a>(http: &'a HttpRequest, name: &str) -> Option<&'a str> {
    http.headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

// ---------------------------------------------------------------- request body

#[test]
fn golden_body_bytes_url_and_headers() {
    let mut chat = request(json!([
        {"role": "user", "content": [{"type": "text", "text": "Hi \"there\""}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Hello"}]},
    ]));
    chat.system_prompt = Some("Be brief.".into());
    let http = format(&chat).unwrap();
    assert_eq!(http.method, "POST");
    assert_eq!(
        http.url,
        format!("https://bedrock-runtime.us-east-1.amazonaws.com/model/{MODEL_IN_PATH}/converse")
    );
    assert_eq!(
        http.headers,
        vec![("content-type".to_string(), "application/json".to_string())]
    );
    assert_eq!(
        http.body,
        r#"{"inferenceConfig":{"maxTokens":4096},"messages":[{"content":[{"text":"Hi \"there\""}],"role":"user"},{"content":[{"text":"Hello"}],"role":"assistant"}],"system":[{"text":"Be brief."}]}"#
    );
}

#[test]
fn every_block_kind_maps() {
    let chat = request(json!([
        {"role": "user", "content": [
            {"type": "text", "text": ""},
            {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/4AAQ"}},
        ]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "search", "input": {"q": "x", "n": [1, 2]}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "result data"},
            {"type": "tool_result", "tool_use_id": "t2", "content": "boom", "is_error": true},
            {"type": "tool_result", "tool_use_id": "t3", "content": "fine", "is_error": false},
        ]},
    ]));
    assert_eq!(
        body(&chat)["messages"],
        json!([
            {"role": "user", "content": [
                {"text": ""},
                {"image": {"format": "jpeg", "source": {"bytes": "/9j/4AAQ"}}},
            ]},
            {"role": "assistant", "content": [
                {"toolUse": {"toolUseId": "t1", "name": "search", "input": {"q": "x", "n": [1, 2]}}},
            ]},
            {"role": "user", "content": [
                {"toolResult": {"toolUseId": "t1", "content": [{"text": "result data"}], "status": "success"}},
                {"toolResult": {"toolUseId": "t2", "content": [{"text": "boom"}], "status": "error"}},
                {"toolResult": {"toolUseId": "t3", "content": [{"text": "fine"}], "status": "success"}},
            ]},
        ])
    );
}

#[test]
fn image_formats_fall_back_to_png() {
    for (media_type, format) in [
        ("image/jpeg", "jpeg"),
        ("image/png", "png"),
        ("image/gif", "gif"),
        ("image/webp", "webp"),
        ("image/bmp", "png"),
        ("IMAGE/JPEG", "png"),
        ("", "png"),
    ] {
        let got = content(json!([{"type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": "AAAA"}}]));
        assert_eq!(got[0]["image"]["format"], format, "{media_type}");
    }
}

#[test]
fn image_bytes_follow_nodes_base64_round_trip() {
    // Images are not validated: Node decodes leniently and re-encodes (padded, standard).
    for (data, wire) in [
        ("aW1hZ2U=", "aW1hZ2U="),
        ("aW1hZ2U", "aW1hZ2U="),
        ("base64data", "base64datQ=="),
        ("abc123", "abc12w=="),
        ("a-b_", "a+b/"),
        ("YW Jj\n", "YWJj"),
        ("YQ==YWJj", "YQ=="),
        ("not base64!", "notbase6"),
        ("", ""),
    ] {
        let got = content(json!([{"type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": data}}]));
        assert_eq!(got[0]["image"]["source"]["bytes"], wire, "{data:?}");
    }
}

#[test]
fn rich_tool_results_map_part_by_part() {
    let got = content(
        json!([{"type": "tool_result", "tool_use_id": "t", "content": [
            {"type": "text", "text": "see"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/webp", "data": "UklGRg=="}},
            {"type": "image", "source": {"type": "base64", "media_type": "image/gif", "data": "R0lGOA"}},
            {"type": "file", "filename": "report.pdf",
             "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjQ="}},
        ]}]),
    );
    assert_eq!(
        got,
        json!([{"toolResult": {"toolUseId": "t", "status": "success", "content": [
            {"text": "see"},
            {"image": {"format": "webp", "source": {"bytes": "UklGRg=="}}},
            {"image": {"format": "gif", "source": {"bytes": "R0lGOA=="}}},
            {"document": {"format": "pdf", "name": "report pdf", "source": {"bytes": "JVBERi0xLjQ="}}},
        ]}}])
    );
}

#[test]
fn document_formats_follow_the_table() {
    for (media_type, format) in [
        ("text/csv", "csv"),
        ("application/msword", "doc"),
        (
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            "docx",
        ),
        ("text/html", "html"),
        ("text/markdown", "md"),
        ("application/pdf", "pdf"),
        ("text/plain", "txt"),
        ("application/vnd.ms-excel", "xls"),
        (
            "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
            "xlsx",
        ),
    ] {
        let got = content(
            json!([{"type": "tool_result", "tool_use_id": "t", "content": [
                {"type": "file", "filename": "f", "source": {"type": "base64", "media_type": media_type, "data": "QUJD"}},
            ]}]),
        );
        assert_eq!(
            got[0]["toolResult"]["content"][0]["document"]["format"],
            format
        );
    }
}

#[test]
fn document_names_are_sanitised() {
    for (filename, name) in [
        ("report.pdf", "report pdf"),
        ("my (v2) [final]-x.docx", "my (v2) [final]-x docx"),
        ("a__b   c.csv", "a b c csv"),
        ("  padded\tname  ", "padded name"),
        ("résumé.txt", "r sum txt"),
        ("...", "tool result"),
        ("日本", "tool result"),
    ] {
        let got = content(
            json!([{"type": "tool_result", "tool_use_id": "t", "content": [
                {"type": "file", "filename": filename, "source": {"type": "base64", "media_type": "text/plain", "data": "QUJD"}},
            ]}]),
        );
        assert_eq!(
            got[0]["toolResult"]["content"][0]["document"]["name"], name,
            "{filename:?}"
        );
    }
}

#[test]
fn unsupported_tool_result_parts_fail_with_omas_messages() {
    let url = |kind: &str, mt: &str| {
        let mut part = json!({"type": kind, "source": {"type": "url", "media_type": mt, "url": "https://x.test/a"}});
        if kind == "file" {
            part["filename"] = json!("a.pdf");
        }
        part
    };
    let inline = |kind: &str, mt: &str| {
        let mut part =
            json!({"type": kind, "source": {"type": "base64", "media_type": mt, "data": "QUJD"}});
        if kind == "file" {
            part["filename"] = json!("a.bin");
        }
        part
    };
    let cases = [
        (
            url("image", "image/png"),
            "Amazon Bedrock Converse cannot represent tool-result content type \"image-url\": tool-result media references must be supplied as inline base64 data",
        ),
        (
            url("file", "application/pdf"),
            "Amazon Bedrock Converse cannot represent tool-result content type \"file-url\": tool-result media references must be supplied as inline base64 data",
        ),
        (
            inline("image", "image/bmp"),
            "Amazon Bedrock Converse cannot represent tool-result content type \"image:image/bmp\": supported image media types are JPEG, PNG, GIF, and WebP",
        ),
        (
            inline("file", "application/zip"),
            "Amazon Bedrock Converse cannot represent tool-result content type \"file:application/zip\": the media type has no Bedrock document format mapping",
        ),
    ];
    for (part, message) in cases {
        let chat = user(json!([
            {"type": "text", "text": "before"},
            {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": "x"}, part]},
        ]));
        let error = format(&chat).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::UnsupportedToolResultContent);
        assert_eq!(error.to_string(), message);
        assert!(!error.retryable());
    }
}

#[test]
fn video_is_an_unsupported_content_block() {
    for source in [
        json!({"type": "base64", "media_type": "video/mp4", "data": "AAAA"}),
        json!({"type": "url", "media_type": "video/mp4", "url": "https://x.test/v.mp4"}),
    ] {
        let chat =
            user(json!([{"type": "text", "text": "watch"}, {"type": "video", "source": source}]));
        let error = format(&chat).unwrap_err();
        assert_eq!(
            error,
            Error::unsupported_block("Amazon Bedrock Converse", "video")
        );
        assert_eq!(
            error.to_string(),
            "Amazon Bedrock Converse cannot represent the \"video\" content block: OMA does not map video for this adapter yet"
        );
        assert!(!error.retryable());
    }
    // Validation runs first: a video that breaks a media rule is an InvalidMessageError.
    let chat = user(json!([{"type": "video",
        "source": {"type": "url", "media_type": "video/mp4", "url": "ftp://x.test/v.mp4"}}]));
    let error = format(&chat).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidMessage);
    assert!(
        error.to_string().ends_with("must use HTTP or HTTPS"),
        "{error}"
    );
}

#[test]
fn reasoning_echoes_bedrock_blocks_and_falls_back_for_others() {
    let blocks = json!([
        {"type": "reasoning", "text": "", "redactedData": "cmVkYWN0ZWQ", "provenance": "bedrock"},
        {"type": "reasoning", "text": "step 1", "signature": "sig", "provenance": "bedrock"},
        {"type": "reasoning", "text": "unsigned", "provenance": "bedrock"},
        {"type": "reasoning", "text": "claude's", "signature": "s", "provenance": "anthropic"},
        {"type": "reasoning", "text": "", "redactedData": "x", "provenance": "anthropic"},
        {"type": "reasoning", "text": ""},
        {"type": "text", "text": "answer"},
    ]);
    let chat = request(json!([{"role": "assistant", "content": blocks}]));
    assert_eq!(
        body(&chat)["messages"][0]["content"],
        json!([
            {"reasoningContent": {"redactedContent": "cmVkYWN0ZWQ="}},
            {"reasoningContent": {"reasoningText": {"text": "step 1", "signature": "sig"}}},
            {"text": "answer"},
        ])
    );
    let mut chat = chat;
    chat.preserve_reasoning_as_text = true;
    assert_eq!(
        body(&chat)["messages"][0]["content"],
        json!([
            {"reasoningContent": {"redactedContent": "cmVkYWN0ZWQ="}},
            {"reasoningContent": {"reasoningText": {"text": "step 1", "signature": "sig"}}},
            {"text": "<thinking>unsigned</thinking>"},
            {"text": "<thinking>claude's</thinking>"},
            {"text": "<thinking>[redacted]</thinking>"},
            {"text": "answer"},
        ])
    );
}

#[test]
fn messages_left_empty_are_left_out() {
    let chat = request(json!([
        {"role": "user", "content": []},
        {"role": "assistant", "content": [{"type": "reasoning", "text": "hidden", "provenance": "openai"}]},
        {"role": "user", "content": [{"type": "text", "text": "q"}]},
    ]));
    assert_eq!(
        body(&chat)["messages"],
        json!([{"role": "user", "content": [{"text": "q"}]}])
    );
    assert_eq!(body(&request(json!([])))["messages"], json!([]));
}

#[test]
fn inference_config_follows_omas_rules() {
    let sampled = |sampling: Sampling| {
        let mut chat = user(json!([{"type": "text", "text": "q"}]));
        chat.sampling = sampling;
        body(&chat)
    };
    let cases = [
        (Sampling::default(), json!({"maxTokens": 4096})),
        (
            Sampling {
                max_tokens: Some(100),
                ..Sampling::default()
            },
            json!({"maxTokens": 100}),
        ),
        // The quirk: temperature or topP without maxTokens sends no maxTokens.
        (
            Sampling {
                temperature: Some(0.5),
                ..Sampling::default()
            },
            json!({"temperature": 0.5}),
        ),
        (
            Sampling {
                top_p: Some(0.9),
                ..Sampling::default()
            },
            json!({"topP": 0.9}),
        ),
        (
            Sampling {
                max_tokens: Some(10),
                temperature: Some(0.0),
                top_p: Some(1.0),
                ..Sampling::default()
            },
            json!({"maxTokens": 10, "temperature": 0.0, "topP": 1.0}),
        ),
        // Options Converse has no place for are not sent.
        (
            Sampling {
                frequency_penalty: Some(1.0),
                presence_penalty: Some(1.0),
                min_p: Some(0.1),
                parallel_tool_calls: Some(true),
                reasoning_effort: Some("high".into()),
                ..Sampling::default()
            },
            json!({"maxTokens": 4096}),
        ),
    ];
    for (sampling, expected) in cases {
        let got = sampled(sampling);
        assert_eq!(got["inferenceConfig"], expected);
        assert!(got.get("additionalModelRequestFields").is_none());
    }
}

#[test]
fn top_k_and_extra_body_go_to_additional_fields() {
    let with = |top_k: Option<u32>, extra: Value| {
        let mut chat = user(json!([{"type": "text", "text": "q"}]));
        chat.sampling.top_k = top_k;
        chat.extra_body = extra.as_object().cloned().unwrap_or_default();
        format(&chat).unwrap().body
    };
    let fields = |text: String| {
        let start = text
            .find("\"additionalModelRequestFields\":")
            .map(|i| i + 31);
        start.map(|s| text[s..s + text[s..].find('}').unwrap() + 1].to_string())
    };
    assert_eq!(fields(with(None, json!({}))), None);
    assert_eq!(
        fields(with(Some(40), json!({}))).as_deref(),
        Some(r#"{"top_k":40}"#)
    );
    assert_eq!(
        fields(with(None, json!({"a": 1, "b": "x"}))).as_deref(),
        Some(r#"{"a":1,"b":"x"}"#)
    );
    assert_eq!(
        fields(with(Some(40), json!({"a": 1, "top_k": 5}))).as_deref(),
        Some(r#"{"top_k":5,"a":1}"#)
    );
    assert_eq!(
        fields(with(None, json!({"top_k": 5}))).as_deref(),
        Some(r#"{"top_k":5}"#)
    );
}

#[test]
fn tools_system_and_thinking() {
    let mut chat = user(json!([{"type": "text", "text": "q"}]));
    chat.tools = vec![ToolDefinition {
        name: "search".into(),
        description: "Search the web".into(),
        input_schema: json!({"type": "object", "properties": {"q": {"type": "string"}}}),
    }];
    chat.system_prompt = Some("sys".into());
    let got = body(&chat);
    assert_eq!(
        got["toolConfig"],
        json!({"tools": [{"toolSpec": {"name": "search", "description": "Search the web",
            "inputSchema": {"json": {"type": "object", "properties": {"q": {"type": "string"}}}}}}]})
    );
    assert_eq!(got["system"], json!([{"text": "sys"}]));

    chat.tools.clear();
    chat.system_prompt = Some(String::new());
    chat.thinking = Some(Thinking {
        enabled: true,
        budget_tokens: Some(2048),
    });
    let got = body(&chat);
    assert_eq!(
        got,
        json!({"inferenceConfig": {"maxTokens": 4096},
            "messages": [{"role": "user", "content": [{"text": "q"}]}]})
    );
}

// ---------------------------------------------------------------- URL and auth

#[test]
fn urls_encode_the_model_and_follow_region_stream_and_base_url() {
    let mut chat = user(json!([{"type": "text", "text": "q"}]));
    let url = |chat: &ChatRequest, endpoint: Endpoint| Bedrock.format(chat, &endpoint).unwrap().url;
    let region = |r: &str| Endpoint {
        region: Some(r.into()),
        ..Endpoint::default()
    };
    assert_eq!(
        url(&chat, region("eu-west-3")),
        format!("https://bedrock-runtime.eu-west-3.amazonaws.com/model/{MODEL_IN_PATH}/converse")
    );
    assert_eq!(
        url(&chat, region("")),
        format!("https://bedrock-runtime.us-east-1.amazonaws.com/model/{MODEL_IN_PATH}/converse")
    );
    chat.stream = true;
    assert!(url(&chat, Endpoint::default()).ends_with("%3A0/converse-stream"));
    chat.model = "arn:aws:bedrock:us-east-1:123:inference-profile/us.x y*".into();
    assert_eq!(
        url(&chat, Endpoint {
            base_url: Some("http://localhost:8080/proxy/".into()),
            ..Endpoint::default()
        }),
        "http://localhost:8080/proxy/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123%3Ainference-profile%2Fus.x%20y%2A/converse-stream"
    );
    for bad in ["us-east-1/../x", "us east", "a.b"] {
        let error = Bedrock.format(&chat, &region(bad)).unwrap_err();
        assert!(matches!(error, Error::InvalidRequest { .. }), "{bad}");
    }
    let error = Bedrock
        .format(
            &chat,
            &Endpoint {
                base_url: Some("not a url".into()),
                ..Endpoint::default()
            },
        )
        .unwrap_err();
    assert!(matches!(error, Error::InvalidRequest { .. }));
}

#[test]
fn api_keys_are_bearer_tokens() {
    let chat = user(json!([{"type": "text", "text": "q"}]));
    let http = Bedrock
        .format(
            &chat,
            &Endpoint {
                credentials: Credentials::ApiKey("bedrock-api-key-123".into()),
                ..Endpoint::default()
            },
        )
        .unwrap();
    assert_eq!(
        header(&http, "authorization"),
        Some("Bearer bedrock-api-key-123")
    );
    assert!(!format!("{:?}", http.redacted_headers()).contains("bedrock-api-key-123"));
}

fn aws(session_token: Option<&str>, timestamp: Option<&str>) -> Endpoint {
    Endpoint {
        base_url: None,
        credentials: Credentials::Aws {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
            session_token: session_token.map(str::to_string),
        },
        region: Some("us-west-2".into()),
        timestamp: timestamp.map(str::to_string),
    }
}

/// The whole signed request. The expected `authorization` was computed independently with
/// botocore 1.43's `SigV4Auth` (service `bedrock`, region `us-west-2`) over the same URL,
/// headers and body bytes.
#[test]
fn access_keys_sign_with_sigv4() {
    let chat = user(json!([{"type": "text", "text": "hi"}]));
    let http = Bedrock
        .format(&chat, &aws(None, Some("20250102T030405Z")))
        .unwrap();
    assert_eq!(
        http.body.clone(),
        r#"{"inferenceConfig":{"maxTokens":4096},"messages":[{"content":[{"text":"hi"}],"role":"user"}]}"#
    );
    let names: Vec<&str> = http.headers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "content-type",
            "x-amz-date",
            "x-amz-content-sha256",
            "authorization"
        ]
    );
    assert_eq!(header(&http, "x-amz-date"), Some("20250102T030405Z"));
    assert_eq!(
        header(&http, "x-amz-content-sha256"),
        Some("a876748eab653514ed0fe0763341e523ce3b1a5d59844e8c3fe1e1fac102f743")
    );
    assert_eq!(header(&http, "authorization"), Some(SIGNED));

    let http = Bedrock
        .format(&chat, &aws(Some("SESSION"), Some("20250102T030405Z")))
        .unwrap();
    assert_eq!(header(&http, "x-amz-security-token"), Some("SESSION"));
    assert!(header(&http, "authorization").unwrap().contains(
        "SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date;x-amz-security-token,"
    ));
    let shown = format!("{:?}", http.redacted_headers());
    assert!(!shown.contains("SESSION") && !shown.contains("Signature="));
}

const SIGNED: &str = "AWS4-HMAC-SHA256 \
    Credential=AKIDEXAMPLE/20250102/us-west-2/bedrock/aws4_request, \
    SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date, \
    Signature=9065aa86a65fa31fa780bf9fea16cf20fbaf017273406d1cca42954ff537afdb";

#[test]
fn access_keys_without_a_timestamp_are_refused() {
    let chat = user(json!([{"type": "text", "text": "q"}]));
    for endpoint in [aws(None, None), aws(None, Some("2025-01-02T03:04:05Z"))] {
        let error = Bedrock.format(&chat, &endpoint).unwrap_err();
        assert!(matches!(error, Error::InvalidRequest { .. }), "{error:?}");
        assert!(!error.to_string().contains("wJalrXUtnFEMI"));
    }
    // Conversion errors still come first.
    let chat = user(json!([{"type": "video",
        "source": {"type": "base64", "media_type": "video/mp4", "data": "AAAA"}}]));
    let error = Bedrock.format(&chat, &aws(None, None)).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::UnsupportedContentBlock);
}

// ---------------------------------------------------------------- responses

fn parse(body: &str) -> Result<LlmResponse, Error> {
    Bedrock.parse(&ResponseContext::of(&user(json!([]))), body.as_bytes())
}

#[test]
fn responses_map_blocks_stop_reason_and_usage() {
    let got = parse(
        r#"{"metrics":{"latencyMs":321},
            "output":{"message":{"role":"assistant","content":[
              {"reasoningContent":{"reasoningText":{"text":"think","signature":"sig=="}}},
              {"reasoningContent":{"redactedContent":"cmVk"}},
              {"reasoningContent":{"reasoningText":{"text":"no sig"}}},
              {"text":"Hello"},
              {"image":{"format":"png","source":{"bytes":"AAAA"}}},
              {"toolUse":{"toolUseId":"tooluse_1","name":"search","input":{"q":"x"}}},
              {"toolUse":{"name":"bare"}}
            ]}},
            "stopReason":"tool_use",
            "usage":{"inputTokens":12,"outputTokens":34,"totalTokens":46}}"#,
    )
    .unwrap();
    let reasoning = |text: &str, signature: Option<&str>, redacted: Option<&str>| {
        ContentBlock::Reasoning(ReasoningBlock {
            text: text.into(),
            signature: signature.map(str::to_string),
            redacted_data: redacted.map(str::to_string),
            provenance: Some("bedrock".into()),
        })
    };
    assert_eq!(
        got,
        LlmResponse {
            id: String::new(),
            content: vec![
                reasoning("think", Some("sig=="), None),
                reasoning("", None, Some("cmVk")),
                reasoning("no sig", None, None),
                ContentBlock::Text(TextBlock {
                    text: "Hello".into()
                }),
                ContentBlock::ToolUse(ToolUseBlock {
                    id: "tooluse_1".into(),
                    name: "search".into(),
                    input: json!({"q": "x"}),
                    signature: None
                }),
                ContentBlock::ToolUse(ToolUseBlock {
                    id: String::new(),
                    name: "bare".into(),
                    input: json!({}),
                    signature: None
                }),
            ],
            model: MODEL.into(),
            stop_reason: "tool_use".into(),
            usage: TokenUsage::new(12, 34),
            stop_sequence: None,
        }
    );
}

#[test]
fn stop_reasons_pass_through_raw() {
    for reason in [
        "end_turn",
        "tool_use",
        "max_tokens",
        "stop_sequence",
        "guardrail_intervened",
        "content_filtered",
    ] {
        let got = parse(&format!(r#"{{"stopReason":"{reason}"}}"#)).unwrap();
        assert_eq!(got.stop_reason, reason);
    }
    let got = parse("{}").unwrap();
    assert_eq!(got.stop_reason, "end_turn");
    assert_eq!(got.usage, TokenUsage::default());
    assert!(got.content.is_empty());
    assert_eq!(
        parse(r#"{"stopReason":null}"#).unwrap().stop_reason,
        "end_turn"
    );
}

#[test]
fn malformed_bodies_are_provider_errors() {
    for body in [
        "",
        "not json",
        "[]",
        r#"{"output":{"message":{"content":{}}}}"#,
        r#"{"output":{"message":{"content":["text"]}}}"#,
        r#"{"output":{"message":{"content":[{"text":5}]}}}"#,
    ] {
        let error = parse(body).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Provider, "{body:?}");
        assert!(
            error.to_string().starts_with("malformed bedrock response"),
            "{error}"
        );
    }
}

#[test]
fn error_types_are_the_code() {
    let header = |value: &str| vec![("x-amzn-errortype".to_string(), value.to_string())];
    let body = br#"{"message":"Too many requests, please wait before trying again."}"#;
    let detail = error_detail(
        &header("ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/"),
        body,
    );
    assert_eq!(detail.code.as_deref(), Some("ThrottlingException"));
    assert_eq!(
        detail.message.as_deref(),
        Some("Too many requests, please wait before trying again.")
    );
    let detail = error_detail(
        &[],
        br#"{"__type":"com.amazon.coral.validate#ValidationException","message":"bad"}"#,
    );
    assert_eq!(detail.code.as_deref(), Some("ValidationException"));
    assert_eq!(
        error_detail(&[], br#"{"Code":"AccessDeniedException","Message":"no"}"#)
            .code
            .as_deref(),
        Some("AccessDeniedException")
    );
    assert_eq!(error_detail(&[], b"<html>").code, None);
    assert_eq!(
        exception_type_name("modelStreamErrorException"),
        "ModelStreamErrorException"
    );
    assert_eq!(exception_type_name(""), "");
}

#[test]
fn error_messages_are_extracted() {
    assert_eq!(
        error_message(br#"{"message":"The provided model identifier is invalid."}"#).as_deref(),
        Some("The provided model identifier is invalid.")
    );
    assert_eq!(
        error_message(br#"{"Message":"User is not authorized"}"#).as_deref(),
        Some("User is not authorized")
    );
    assert_eq!(error_message(br#"{"error":"x"}"#), None);
    assert_eq!(error_message(b"<html>"), None);
}

// ---------------------------------------------------------------- streaming

fn event(kind: &str, payload: Value) -> Vec<u8> {
    encode(
        &[
            (":event-type", HeaderValue::String(kind.into())),
            (
                ":content-type",
                HeaderValue::String("application/json".into()),
            ),
            (":message-type", HeaderValue::String("event".into())),
        ],
        payload.to_string().as_bytes(),
    )
}

fn exception(kind: &str, message: &str) -> Vec<u8> {
    encode(
        &[
            (":exception-type", HeaderValue::String(kind.into())),
            (
                ":content-type",
                HeaderValue::String("application/json".into()),
            ),
            (":message-type", HeaderValue::String("exception".into())),
        ],
        json!({"message": message}).to_string().as_bytes(),
    )
}

/// A recorded-shape stream: reasoning with a signature, two text deltas, a tool call whose
/// input arrives in pieces, then messageStop and metadata (each payload padded with `p`, as
/// Bedrock does).
pub(crate) fn recorded_stream() -> Vec<u8> {
    [
        event("messageStart", json!({"role": "assistant", "p": "abc"})),
        event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 0,
            "delta": {"reasoningContent": {"text": "Let me "}}, "p": "a"}),
        ),
        event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 0,
            "delta": {"reasoningContent": {"text": "think."}}}),
        ),
        event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 0,
            "delta": {"reasoningContent": {"signature": "EqQBCkYIAxgC"}}}),
        ),
        event("contentBlockStop", json!({"contentBlockIndex": 0})),
        event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 1, "delta": {"text": "Héllo"}}),
        ),
        event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 1, "delta": {"text": " wörld"}}),
        ),
        event("contentBlockStop", json!({"contentBlockIndex": 1})),
        event(
            "contentBlockStart",
            json!({"contentBlockIndex": 2,
            "start": {"toolUse": {"toolUseId": "tooluse_9", "name": "search"}}}),
        ),
        event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 2,
            "delta": {"toolUse": {"input": "{\"q\":"}}}),
        ),
        event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 2,
            "delta": {"toolUse": {"input": "\"rust\"}"}}}),
        ),
        event("contentBlockStop", json!({"contentBlockIndex": 2})),
        event("messageStop", json!({"stopReason": "tool_use"})),
        event(
            "metadata",
            json!({"usage": {"inputTokens": 20, "outputTokens": 7, "totalTokens": 27},
            "metrics": {"latencyMs": 100}}),
        ),
    ]
    .concat()
}

fn expected_events() -> Vec<StreamEvent> {
    let call = ToolUseBlock {
        id: "tooluse_9".into(),
        name: "search".into(),
        input: json!({"q": "rust"}),
        signature: None,
    };
    vec![
        StreamEvent::Reasoning("Let me ".into()),
        StreamEvent::Reasoning("think.".into()),
        StreamEvent::ReasoningSignature("EqQBCkYIAxgC".into()),
        StreamEvent::Text("Héllo".into()),
        StreamEvent::Text(" wörld".into()),
        StreamEvent::ToolUse(call.clone()),
        StreamEvent::Done(LlmResponse {
            id: String::new(),
            content: vec![
                ContentBlock::Reasoning(ReasoningBlock {
                    text: "Let me think.".into(),
                    signature: Some("EqQBCkYIAxgC".into()),
                    redacted_data: None,
                    provenance: Some("bedrock".into()),
                }),
                // Each text delta is its own block, as in OMA.
                ContentBlock::Text(TextBlock {
                    text: "Héllo".into(),
                }),
                ContentBlock::Text(TextBlock {
                    text: " wörld".into(),
                }),
                ContentBlock::ToolUse(call),
            ],
            model: MODEL.into(),
            stop_reason: "tool_use".into(),
            usage: TokenUsage::new(20, 7),
            stop_sequence: None,
        }),
    ]
}

/// Feeds `stream` in chunks of `size`, collecting events until the first error.
fn run(stream: &[u8], size: usize) -> (Vec<StreamEvent>, Option<Error>) {
    let mut decoder = Bedrock.stream_decoder(&ResponseContext::of(&user(json!([]))));
    let mut events = Vec::new();
    for chunk in stream.chunks(size.max(1)) {
        match decoder.feed(chunk) {
            Ok(more) => events.extend(more),
            Err(error) => return (events, Some(error)),
        }
    }
    match decoder.finish() {
        Ok(more) => {
            events.extend(more);
            (events, None)
        }
        Err(error) => (events, Some(error)),
    }
}

#[test]
fn a_stream_decodes_identically_under_every_chunking() {
    let stream = recorded_stream();
    let expected = expected_events();
    for size in 1..=stream.len() {
        let (events, error) = run(&stream, size);
        assert_eq!(error, None, "chunk size {size}");
        assert_eq!(events, expected, "chunk size {size}");
    }
}

#[test]
fn text_arrives_as_soon_as_its_frame_does() {
    let first = event(
        "contentBlockDelta",
        json!({"contentBlockIndex": 0, "delta": {"text": "a"}}),
    );
    let mut decoder = Bedrock.stream_decoder(&ResponseContext::of(&user(json!([]))));
    assert_eq!(decoder.feed(&first[..first.len() - 1]).unwrap(), vec![]);
    assert_eq!(
        decoder.feed(&first[first.len() - 1..]).unwrap(),
        vec![StreamEvent::Text("a".into())]
    );
}

#[test]
fn tool_input_that_is_not_an_object_becomes_empty() {
    for (pieces, input) in [
        (vec![], json!({})),
        (vec!["[1,2]"], json!({})),
        (vec!["{\"a\":"], json!({})),
        (vec!["null"], json!({})),
        (vec!["{\"a\"", ":1}"], json!({"a": 1})),
    ] {
        let mut stream = event(
            "contentBlockStart",
            json!({"contentBlockIndex": 0,
            "start": {"toolUse": {"toolUseId": "t", "name": "n"}}}),
        );
        for piece in &pieces {
            stream.extend(event(
                "contentBlockDelta",
                json!({"contentBlockIndex": 0,
                "delta": {"toolUse": {"input": piece}}}),
            ));
        }
        stream.extend(event("contentBlockStop", json!({"contentBlockIndex": 0})));
        stream.extend(event("messageStop", json!({"stopReason": "tool_use"})));
        let (events, error) = run(&stream, stream.len());
        assert_eq!(error, None);
        let StreamEvent::ToolUse(call) = &events[0] else {
            panic!("{events:?}")
        };
        assert_eq!(call.input, input, "{pieces:?}");
    }
}

#[test]
fn redacted_and_unterminated_reasoning_is_kept() {
    let stream = [
        event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 0,
            "delta": {"reasoningContent": {"redactedContent": "cmVkYWN0ZWQ"}}}),
        ),
        event("contentBlockStop", json!({"contentBlockIndex": 0})),
        event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 1,
            "delta": {"reasoningContent": {"text": "never stopped"}}}),
        ),
        event("futureEvent", json!({"x": 1})),
        event("messageStop", json!({})),
    ]
    .concat();
    let (events, error) = run(&stream, 7);
    assert_eq!(error, None);
    // The redacted block is an event as it comes, its data as the whole response has it.
    assert_eq!(
        events[0],
        StreamEvent::RedactedReasoning("cmVkYWN0ZWQ=".into())
    );
    let Some(StreamEvent::Done(done)) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(done.stop_reason, "end_turn");
    assert_eq!(done.usage, TokenUsage::default());
    assert_eq!(
        done.content,
        vec![
            ContentBlock::Reasoning(ReasoningBlock {
                text: String::new(),
                signature: None,
                redacted_data: Some("cmVkYWN0ZWQ=".into()),
                provenance: Some("bedrock".into()),
            }),
            ContentBlock::Reasoning(ReasoningBlock {
                text: "never stopped".into(),
                signature: None,
                redacted_data: None,
                provenance: Some("bedrock".into()),
            }),
        ]
    );
}

#[test]
fn exceptions_are_provider_errors_after_the_events_before_them() {
    let stream = [
        event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 0, "delta": {"text": "partial"}}),
        ),
        exception("throttlingException", "Too many requests, please wait"),
        event("messageStop", json!({"stopReason": "end_turn"})),
    ]
    .concat();
    for size in [1, 5, stream.len()] {
        let (events, error) = run(&stream, size);
        assert_eq!(events, vec![StreamEvent::Text("partial".into())]);
        let error = error.unwrap();
        assert_eq!(
            error,
            Error::Provider {
                provider: "bedrock".into(),
                status: None,
                message: "throttlingException: Too many requests, please wait".into(),
                code: Some("ThrottlingException".into()),
                error_type: None,
            }
        );
    }
    let error_frame = encode(
        &[
            (":message-type", HeaderValue::String("error".into())),
            (":error-code", HeaderValue::String("InternalFailure".into())),
            (":error-message", HeaderValue::String("oops".into())),
        ],
        b"",
    );
    let (_, error) = run(&error_frame, 3);
    assert_eq!(error.unwrap().to_string(), "InternalFailure: oops");
}

#[test]
fn truncated_and_malformed_streams_fail() {
    let stream = recorded_stream();
    let stop = stream.len()
        - event(
            "metadata",
            json!({"usage": {"inputTokens": 20, "outputTokens": 7, "totalTokens": 27},
        "metrics": {"latencyMs": 100}}),
        )
        .len();
    let before_stop = stop - event("messageStop", json!({"stopReason": "tool_use"})).len();
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (stream[..before_stop].to_vec(), "ended before messageStop"),
        (
            stream[..stream.len() - 3].to_vec(),
            "ended inside a message",
        ),
        (Vec::new(), "ended before messageStop"),
        (
            b"{\"message\":\"not a stream\"}".to_vec(),
            "malformed bedrock response",
        ),
        (
            encode(
                &[(":event-type", HeaderValue::String("messageStop".into()))],
                b"{}",
            ),
            "is not event, exception or error",
        ),
        (
            event("contentBlockDelta", json!(null)),
            "ended before messageStop",
        ),
        (
            encode(
                &[
                    (":event-type", HeaderValue::String("messageStop".into())),
                    (":message-type", HeaderValue::String("event".into())),
                ],
                b"{not json",
            ),
            "messageStop payload is not JSON",
        ),
    ];
    for (bytes, expected) in cases {
        for size in [1, 13, bytes.len().max(1)] {
            let (_, error) = run(&bytes, size);
            let error = error.unwrap_or_else(|| panic!("no error for {expected}"));
            assert_eq!(error.kind(), ErrorKind::Provider);
            assert!(
                error.to_string().contains(expected),
                "{error} vs {expected}"
            );
        }
    }
    // Truncation at the stop still yields every event seen so far.
    let (events, _) = run(&stream[..before_stop], 1);
    assert_eq!(events.len(), 6);
}

fn reasoning_delta(index: usize, text: &str) -> Vec<u8> {
    event(
        "contentBlockDelta",
        json!({"contentBlockIndex": index, "delta": {"reasoningContent": {"text": text}}}),
    )
}

fn stopped(mut stream: Vec<u8>) -> Vec<u8> {
    stream.extend(event("messageStop", json!({"stopReason": "end_turn"})));
    stream
}

/// 1,024 reasoning blocks opened from the highest index down and never closed, then 20,000
/// deltas to the last one opened: each delta finds its buffer at once (a search from the first
/// buffer would walk all 1,024 for each of them), and the blocks still end in opening order.
#[test]
fn many_deltas_to_a_late_block_decode_in_linear_time() {
    let mut stream = event("messageStart", json!({"role": "assistant"}));
    for index in (0..1024).rev() {
        stream.extend(reasoning_delta(index, &index.to_string()));
    }
    for _ in 0..20_000 {
        stream.extend(reasoning_delta(0, "a"));
    }
    let (events, error) = run(&stopped(stream), 1 << 16);
    assert_eq!(error, None);
    assert_eq!(events.len(), 1024 + 20_000 + 1);
    let Some(StreamEvent::Done(done)) = events.last() else {
        panic!("the stream ends with Done")
    };
    let texts: Vec<String> = done
        .content
        .iter()
        .map(|block| match block {
            ContentBlock::Reasoning(r) => r.text.clone(),
            other => panic!("only reasoning was streamed, got {other:?}"),
        })
        .collect();
    let expected: Vec<String> = (1..1024)
        .rev()
        .map(|index| index.to_string())
        .chain([format!("0{}", "a".repeat(20_000))])
        .collect();
    assert_eq!(texts, expected);
}

#[test]
fn more_than_1024_block_indexes_is_a_malformed_response() {
    let text = |index: usize| {
        event(
            "contentBlockDelta",
            json!({"contentBlockIndex": index, "delta": {"text": "t"}}),
        )
    };
    // Many text deltas at one index are many text blocks, as in OMA, and within the cap.
    let stream: Vec<u8> = (0..5000).flat_map(|_| text(0)).collect();
    let (events, error) = run(&stopped(stream), 1 << 16);
    assert_eq!(error, None);
    let Some(StreamEvent::Done(done)) = events.last() else {
        panic!("the stream ends with Done")
    };
    assert_eq!(done.content.len(), 5000);
    // 1,024 indexes are allowed, the 1,025th is not.
    let stream: Vec<u8> = (0..1024).flat_map(text).collect();
    assert_eq!(run(&stopped(stream), 1 << 16).1, None);
    let stream: Vec<u8> = (0..1025).flat_map(text).collect();
    let (events, error) = run(&stopped(stream), 1 << 16);
    let error = error.expect("the 1,025th index fails the stream");
    assert_eq!(error.kind(), ErrorKind::Provider);
    assert_eq!(
        error.to_string(),
        "malformed bedrock response: the stream has more than 1024 content blocks"
    );
    // The text before the failure was delivered first.
    assert_eq!(events.len(), 1024);
}

#[test]
fn more_than_256_tool_calls_is_a_malformed_response() {
    let tool = |index: usize| {
        [
            event(
                "contentBlockStart",
                json!({"contentBlockIndex": index,
                    "start": {"toolUse": {"toolUseId": format!("t{index}"), "name": "n"}}}),
            ),
            event("contentBlockStop", json!({"contentBlockIndex": index})),
        ]
        .concat()
    };
    let stream: Vec<u8> = (0..256).flat_map(tool).collect();
    let (events, error) = run(&stopped(stream), 1 << 16);
    assert_eq!(error, None);
    assert_eq!(events.len(), 257);
    let stream: Vec<u8> = (0..257).flat_map(tool).collect();
    let (_, error) = run(&stopped(stream), 1 << 16);
    let error = error.expect("the 257th tool call fails the stream");
    assert_eq!(
        error.to_string(),
        "malformed bedrock response: the stream has more than 256 tool calls"
    );
}

#[test]
fn an_image_by_url_is_an_unsupported_content_block() {
    let chat = user(json!([{"type": "image",
        "source": {"type": "url", "media_type": "image/png", "url": "https://x.test/a.png"}}]));
    let error = format(&chat).unwrap_err();
    assert_eq!(
        error.to_string(),
        "Amazon Bedrock Converse cannot represent the \"image\" content block: Bedrock Converse takes images as inline bytes, not by URL"
    );
    // Validation runs first: an image URL that breaks a media rule is an InvalidMessageError.
    let chat = user(json!([{"type": "image",
        "source": {"type": "url", "media_type": "image/png", "url": "file:///etc/passwd"}}]));
    assert!(matches!(
        format(&chat).unwrap_err(),
        Error::InvalidMessage { .. }
    ));
}

// ---------------------------------------------------------------- prompt cache

#[test]
fn cache_markers_become_cache_points() {
    use crate::adapter::{CacheMark, CachePlace};
    let mut chat = request(json!([
        {"role": "user", "content": [
            {"type": "text", "text": "context"},
            {"type": "text", "text": "question"}
        ]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "look", "input": {}}
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "seen"}]}
        ]}
    ]));
    chat.system_blocks = vec!["first".into(), "second".into()];
    chat.system_prompt = Some("first\n\nsecond".into());
    chat.tools = vec![ToolDefinition {
        name: "look".into(),
        description: "Looks".into(),
        input_schema: json!({"type": "object"}),
    }];
    let mark = |place, ttl: Option<&str>| CacheMark {
        place,
        ttl: ttl.map(str::to_owned),
    };
    chat.cache = vec![
        mark(CachePlace::System(1), Some("1h")),
        mark(CachePlace::Tool(0), None),
        mark(
            CachePlace::Block {
                message: 0,
                block: 0,
            },
            None,
        ),
        // Converse has no cache point inside a tool result: it follows the result.
        mark(
            CachePlace::Part {
                message: 2,
                block: 0,
                part: 0,
            },
            Some("5m"),
        ),
    ];
    let body = body(&chat);
    assert_eq!(
        body["system"],
        json!([
            {"text": "first"},
            {"text": "second"},
            {"cachePoint": {"ttl": "1h", "type": "default"}}
        ])
    );
    assert_eq!(
        body["toolConfig"]["tools"][1],
        json!({"cachePoint": {"type": "default"}})
    );
    assert_eq!(
        body["messages"][0]["content"],
        json!([
            {"text": "context"},
            {"cachePoint": {"type": "default"}},
            {"text": "question"}
        ])
    );
    let result = &body["messages"][2]["content"];
    assert_eq!(result[0]["toolResult"]["toolUseId"], json!("t1"));
    assert_eq!(
        result[1],
        json!({"cachePoint": {"ttl": "5m", "type": "default"}})
    );
}

#[test]
fn cache_counts_are_read_from_answers_and_streams() {
    let answer = json!({
        "output": {"message": {"role": "assistant", "content": [{"text": "ok"}]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 3, "outputTokens": 2, "totalTokens": 9105,
                  "cacheReadInputTokens": 9000, "cacheWriteInputTokens": 100}
    });
    let context = ResponseContext::of(&user(json!([])));
    let usage = Bedrock
        .parse(&context, answer.to_string().as_bytes())
        .unwrap()
        .usage;
    let expected = TokenUsage {
        input_tokens: 3,
        output_tokens: 2,
        cache_creation_input_tokens: 100,
        cache_read_input_tokens: 9000,
        cached_input_tokens: 0,
    };
    assert_eq!(usage, expected);
    let stream = [
        event("messageStop", json!({"stopReason": "end_turn"})),
        event("metadata", json!({"usage": answer["usage"]})),
    ]
    .concat();
    let (events, error) = run(&stream, 5);
    assert_eq!(error, None);
    let Some(StreamEvent::Done(done)) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(done.usage, expected);
}

#[test]
fn generation_extra_adds_to_the_inference_config_without_replacing_its_keys() {
    let mut chat = user(json!([{"type": "text", "text": "q"}]));
    chat.sampling.temperature = Some(0.5);
    chat.generation_extra = json!({"stopSequences": ["END"], "temperature": 2})
        .as_object()
        .cloned()
        .unwrap();
    let got = body(&chat);
    assert_eq!(
        got["inferenceConfig"],
        json!({"temperature": 0.5, "stopSequences": ["END"]})
    );
    assert!(got.get("additionalModelRequestFields").is_none(), "{got}");
}

#[test]
fn a_forced_tool_call_is_the_tool_choice() {
    let mut chat = user(json!([{"type": "text", "text": "q"}]));
    chat.tools = vec![ToolDefinition {
        name: "look".into(),
        description: "d".into(),
        input_schema: json!({"type": "object"}),
    }];
    assert!(body(&chat)["toolConfig"].get("toolChoice").is_none());
    chat.forced_tool = Some(crate::adapter::ForcedTool::Any);
    assert_eq!(body(&chat)["toolConfig"]["toolChoice"], json!({"any": {}}));
    chat.forced_tool = Some(crate::adapter::ForcedTool::Named("look".into()));
    assert_eq!(
        body(&chat)["toolConfig"]["toolChoice"],
        json!({"tool": {"name": "look"}})
    );
}
