//! Golden call options, result readings and stream decoding of the AI SDK bridge, through its
//! public functions.

use serde_json::{json, Value};

use super::{error_detail, error_message, AiSdk};
use crate::adapter::test_support::{assistant, text, user};
use crate::adapter::{
    Adapter, ChatRequest, Credentials, Endpoint, ResponseContext, StreamEvent, Thinking,
    ToolDefinition,
};
use crate::error::Error;
use crate::message::*;

fn image(data: &str) -> ContentBlock {
    ContentBlock::Image(ImageBlock {
        source: MediaSource::Base64 {
            media_type: "image/png".into(),
            data: data.into(),
        },
    })
}

fn tool_use(id: &str, name: &str) -> ContentBlock {
    ContentBlock::ToolUse(ToolUseBlock {
        id: id.into(),
        name: name.into(),
        input: json!({"q": 1}),
        signature: None,
    })
}

fn tool_result(id: &str, content: ToolResultContent, is_error: Option<bool>) -> ContentBlock {
    ContentBlock::ToolResult(ToolResultBlock {
        tool_use_id: id.into(),
        content,
        is_error,
    })
}

fn reasoning(text: &str, redacted: Option<&str>) -> ContentBlock {
    ContentBlock::Reasoning(ReasoningBlock {
        text: text.into(),
        signature: Some("sig".into()),
        redacted_data: redacted.map(str::to_string),
        provenance: Some("anthropic".into()),
    })
}

fn b64(media_type: &str, data: &str) -> MediaSource {
    MediaSource::Base64 {
        media_type: media_type.into(),
        data: data.into(),
    }
}

fn url(media_type: &str, url: &str) -> MediaSource {
    MediaSource::Url {
        media_type: media_type.into(),
        url: url.into(),
    }
}

fn request(messages: Vec<LlmMessage>) -> ChatRequest {
    ChatRequest {
        model: "openai:gpt-4o".into(),
        messages,
        ..Default::default()
    }
}

fn body(request: &ChatRequest) -> Value {
    let http = AiSdk.format(request, &Endpoint::default()).unwrap();
    serde_json::from_str(&http.body).unwrap()
}

fn messages(msgs: Vec<LlmMessage>) -> Value {
    body(&request(msgs))["messages"].clone()
}

#[test]
fn exact_bytes_url_and_headers() {
    let endpoint = Endpoint {
        base_url: Some("https://ignored.test".into()),
        credentials: Credentials::ApiKey("secret".into()),
        ..Default::default()
    };
    let mut req = request(vec![LlmMessage::user_text("hi")]);
    let http = AiSdk.format(&req, &endpoint).unwrap();
    assert_eq!(http.method, "POST");
    assert_eq!(http.url, "ai-sdk:generateText");
    assert_eq!(
        http.headers,
        vec![("content-type".to_string(), "application/json".to_string())]
    );
    assert_eq!(
        http.body,
        r#"{"model":"openai:gpt-4o","messages":[{"role":"user","content":"hi"}],"maxRetries":0}"#
    );
    req.stream = true;
    assert_eq!(
        AiSdk.format(&req, &endpoint).unwrap().url,
        "ai-sdk:streamText"
    );
}

#[test]
fn golden_options_with_every_key() {
    let mut req = request(vec![LlmMessage::user_text("hi")]);
    req.system_prompt = Some("sys".into());
    req.sampling.max_tokens = Some(100);
    req.sampling.temperature = Some(0.5);
    req.sampling.top_p = Some(0.25);
    req.sampling.top_k = Some(4);
    req.sampling.frequency_penalty = Some(0.125);
    req.sampling.presence_penalty = Some(-0.5);
    req.sampling.min_p = Some(0.75);
    req.sampling.parallel_tool_calls = Some(false);
    req.sampling.reasoning_effort = Some("low".into());
    req.thinking = Some(Thinking {
        enabled: true,
        budget_tokens: Some(2000),
    });
    req.tools = vec![
        ToolDefinition {
            name: "a".into(),
            description: "first".into(),
            input_schema: json!({"type": "object"}),
        },
        ToolDefinition {
            name: "b".into(),
            description: "B".into(),
            input_schema: json!({"type": "object", "properties": {}}),
        },
        ToolDefinition {
            name: "a".into(),
            description: "second".into(),
            input_schema: json!({"type": "object", "required": []}),
        },
    ];
    let got = body(&req);
    assert_eq!(
        got,
        json!({
            "maxOutputTokens": 100, "temperature": 0.5, "topP": 0.25, "topK": 4,
            "frequencyPenalty": 0.125, "presencePenalty": -0.5,
            "model": "openai:gpt-4o",
            "messages": [{"role": "user", "content": "hi"}],
            "system": "sys",
            "tools": {
                "a": {"description": "second", "inputSchema": {"type": "object", "required": []}},
                "b": {"description": "B", "inputSchema": {"type": "object", "properties": {}}}
            },
            "maxRetries": 0,
            "providerOptions": {"openai": {"reasoningEffort": "low", "parallelToolCalls": false,
                "minP": 0.75}}
        })
    );
    let keys: Vec<&String> = got.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "maxOutputTokens",
            "temperature",
            "topP",
            "topK",
            "frequencyPenalty",
            "presencePenalty",
            "model",
            "messages",
            "system",
            "tools",
            "maxRetries",
            "providerOptions"
        ]
    );
    let tool_keys: Vec<&String> = got["tools"].as_object().unwrap().keys().collect();
    assert_eq!(tool_keys, ["a", "b"], "first position, last definition");
}

#[test]
fn extra_body_overrides_sampling_but_never_structure() {
    let mut req = request(vec![]);
    req.sampling.temperature = Some(0.5);
    for (k, v) in [
        ("temperature", json!(0.9)),
        ("topK", json!(7)),
        ("seed", json!(42)),
        ("model", json!("hijack")),
        ("system", json!("hijack")),
        ("tools", json!({"x": {}})),
        ("maxRetries", json!(5)),
        ("providerOptions", json!({"x": 1})),
    ] {
        req.extra_body.insert(k.into(), v);
    }
    let got = body(&req);
    assert_eq!(
        got,
        json!({"temperature": 0.9, "topK": 7, "seed": 42, "model": "openai:gpt-4o",
               "messages": [], "maxRetries": 0})
    );
    let keys: Vec<&String> = got.as_object().unwrap().keys().collect();
    // JS object-literal order: a key keeps the place where it was first written, so the
    // structural keys the extras named come before `messages`
    assert_eq!(
        keys,
        [
            "temperature",
            "topK",
            "seed",
            "model",
            "maxRetries",
            "messages"
        ]
    );
}

#[test]
fn assistant_messages_map_text_reasoning_and_calls() {
    let got = messages(vec![
        assistant(vec![
            reasoning("think", None),
            reasoning("", Some("opaque")),
            text("answer"),
            image("QUJD"),
            tool_result("x", ToolResultContent::Text("r".into()), None),
            tool_use("c1", "lookup"),
        ]),
        assistant(vec![image("QUJD")]),
        assistant(vec![]),
    ]);
    assert_eq!(
        got,
        json!([{"role": "assistant", "content": [
            {"type": "reasoning", "text": "think"},
            {"type": "reasoning", "text": "[redacted_thinking]"},
            {"type": "text", "text": "answer"},
            {"type": "tool-call", "toolCallId": "c1", "toolName": "lookup", "input": {"q": 1}}
        ]}])
    );
}

#[test]
fn preserved_reasoning_becomes_thinking_text() {
    let mut req = request(vec![assistant(vec![
        reasoning("think", None),
        reasoning("", Some("opaque")),
        reasoning("", None),
        text("answer"),
    ])]);
    req.preserve_reasoning_as_text = true;
    assert_eq!(
        body(&req)["messages"],
        json!([{"role": "assistant", "content": [
            {"type": "text", "text": "<thinking>think</thinking>"},
            {"type": "text", "text": "<thinking>[redacted]</thinking>"},
            {"type": "text", "text": "answer"}
        ]}])
    );
}

#[test]
fn tool_results_come_first_with_names_from_assistant_calls() {
    let got = messages(vec![
        user(vec![tool_use("u1", "from_user")]),
        assistant(vec![tool_use("a1", "lookup")]),
        user(vec![
            text("before"),
            tool_result("a1", ToolResultContent::Text("ok".into()), None),
            tool_result("u1", ToolResultContent::Text("bad".into()), Some(true)),
            tool_result("a1", ToolResultContent::Text("fine".into()), Some(false)),
        ]),
    ]);
    assert_eq!(
        got,
        json!([
            {"role": "assistant", "content": [
                {"type": "tool-call", "toolCallId": "a1", "toolName": "lookup", "input": {"q": 1}}
            ]},
            {"role": "tool", "content": [{"type": "tool-result", "toolCallId": "a1",
                "toolName": "lookup", "output": {"type": "text", "value": "ok"}}]},
            {"role": "tool", "content": [{"type": "tool-result", "toolCallId": "u1",
                "toolName": "unknown_tool", "output": {"type": "error-text", "value": "bad"}}]},
            {"role": "tool", "content": [{"type": "tool-result", "toolCallId": "a1",
                "toolName": "lookup", "output": {"type": "text", "value": "fine"}}]},
            {"role": "user", "content": "before"}
        ])
    );
}

#[test]
fn rich_tool_results_become_content_outputs() {
    let got = messages(vec![user(vec![tool_result(
        "c1",
        ToolResultContent::Parts(vec![
            ToolResultPart::Text { text: "t".into() },
            ToolResultPart::Image {
                source: b64("image/png", "QUJD"),
            },
            ToolResultPart::Image {
                source: url("image/jpeg", "https://x.test/i.jpg"),
            },
            ToolResultPart::File {
                filename: "d.pdf".into(),
                source: b64("application/pdf", "JVBE"),
            },
            ToolResultPart::File {
                filename: "r.csv".into(),
                source: url("text/csv", "https://x.test/r.csv"),
            },
        ]),
        None,
    )])]);
    assert_eq!(
        got[0]["content"][0]["output"],
        json!({"type": "content", "value": [
            {"type": "text", "text": "t"},
            {"type": "file-data", "data": "QUJD", "mediaType": "image/png"},
            {"type": "file-url", "url": "https://x.test/i.jpg"},
            {"type": "file-data", "data": "JVBE", "mediaType": "application/pdf", "filename": "d.pdf"},
            {"type": "text", "text": "[File: r.csv; text/csv]"},
            {"type": "file-url", "url": "https://x.test/r.csv"}
        ]})
    );
    assert_eq!(got.as_array().unwrap().len(), 1, "no user message after it");
}

#[test]
fn user_content_is_a_string_or_parts() {
    let got = messages(vec![
        user(vec![text("only")]),
        user(vec![
            text("a"),
            image("QUJD"),
            tool_use("z", "skip"),
            reasoning("r", None),
        ]),
        user(vec![tool_use("z", "skip")]),
        user(vec![]),
        user(vec![image("iVBO")]),
    ]);
    assert_eq!(
        got,
        json!([
            {"role": "user", "content": "only"},
            {"role": "user", "content": [
                {"type": "text", "text": "a"},
                {"type": "image", "image": "QUJD", "mediaType": "image/png"}
            ]},
            {"role": "user", "content": [
                {"type": "image", "image": "iVBO", "mediaType": "image/png"}
            ]}
        ])
    );
}

#[test]
fn video_is_unsupported_in_any_role() {
    for source in [
        b64("video/mp4", "AAAA"),
        url("video/mp4", "https://x.test/v.mp4"),
    ] {
        let video = || {
            ContentBlock::Video(VideoBlock {
                source: source.clone(),
            })
        };
        for msgs in [
            vec![user(vec![video()])],
            vec![user(vec![text("t"), video()])],
            vec![assistant(vec![text("t"), video()])],
            vec![user(vec![
                tool_result("c", ToolResultContent::Text("r".into()), None),
                video(),
            ])],
        ] {
            let err = AiSdk
                .format(&request(msgs), &Endpoint::default())
                .unwrap_err();
            assert_eq!(err, Error::unsupported_block("AI SDK", "video"));
            assert_eq!(
                err.to_string(),
                "AI SDK cannot represent the \"video\" content block: OMA does not map video for this adapter yet"
            );
        }
    }
    let bad = request(vec![user(vec![ContentBlock::Video(VideoBlock {
        source: url("video/mp4", "mm_file://abc"),
    })])]);
    let err = AiSdk.format(&bad, &Endpoint::default()).unwrap_err();
    assert!(matches!(err, Error::InvalidMessage { .. }), "{err:?}");
}

fn parse(body: Value) -> LlmResponse {
    AiSdk
        .parse(
            &ResponseContext::of(&request(vec![])),
            body.to_string().as_bytes(),
        )
        .unwrap()
}

#[test]
fn parse_reads_the_generate_text_result() {
    let got = parse(json!({
        "text": "hello",
        "reasoningText": "hmm",
        "toolCalls": [
            {"toolCallId": "t1", "toolName": "f", "input": {"a": 1}},
            {"toolCallId": "t2", "toolName": "g", "input": "not an object"},
            {"toolCallId": "t3", "toolName": "h", "input": [1]}
        ],
        "finishReason": "tool-calls",
        "usage": {"inputTokens": 3, "outputTokens": 4, "totalTokens": 7},
        "response": {"id": "resp-1", "modelId": "gpt-4o", "timestamp": "2025-01-01"},
        "steps": []
    }));
    assert_eq!(
        serde_json::to_value(&got).unwrap(),
        json!({
            "id": "resp-1",
            "content": [
                {"type": "reasoning", "text": "hmm", "provenance": "ai-sdk"},
                {"type": "text", "text": "hello"},
                {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}},
                {"type": "tool_use", "id": "t2", "name": "g", "input": {}},
                {"type": "tool_use", "id": "t3", "name": "h", "input": {}}
            ],
            "model": "gpt-4o",
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 3, "output_tokens": 4}
        })
    );
    let bare = parse(json!({"text": "", "toolCalls": [], "finishReason": "stop",
        "usage": {}, "response": {}}));
    assert_eq!(bare.id, "");
    assert_eq!(bare.model, "");
    assert!(bare.content.is_empty());
    assert_eq!(bare.usage, TokenUsage::default());
    assert_eq!(bare.stop_reason, "end_turn");
}

#[test]
fn stop_reasons_follow_oma() {
    let call = json!([{"toolCallId": "t", "toolName": "f", "input": {}}]);
    for (reason, calls, expected) in [
        ("stop", json!([]), "end_turn"),
        ("stop", call.clone(), "tool_use"),
        ("tool-calls", json!([]), "tool_use"),
        ("tool_calls", json!([]), "tool_use"),
        ("content-filter", json!([]), "content_filter"),
        ("content_filter", call.clone(), "content_filter"),
        ("length", call.clone(), "max_tokens"),
        ("error", json!([]), "error"),
        ("other", json!([]), "other"),
        ("unknown", call, "unknown"),
    ] {
        let got = parse(json!({"text": "x", "toolCalls": calls, "finishReason": reason}));
        assert_eq!(got.stop_reason, expected, "{reason}");
    }
    assert_eq!(
        parse(json!({})).stop_reason,
        "end_turn",
        "missing counts as stop"
    );
}

#[test]
fn malformed_results_are_provider_errors() {
    for body in [
        &b"nope"[..],
        b"",
        br#"{"text": 5}"#,
        br#"{"toolCalls": [{"toolName": "f"}]}"#,
        br#"{"usage": {"inputTokens": -1}}"#,
    ] {
        let err = AiSdk
            .parse(&ResponseContext::of(&request(vec![])), body)
            .unwrap_err();
        let Error::Provider {
            provider, message, ..
        } = &err
        else {
            panic!("{err:?}")
        };
        assert_eq!(provider, "ai-sdk");
        assert!(
            message.starts_with("malformed ai-sdk response: "),
            "{message}"
        );
    }
}

#[test]
fn error_message_reads_the_host_error() {
    assert_eq!(
        error_message(br#"{"error": {"message": "rate limited", "statusCode": 429}}"#),
        Some("rate limited".into())
    );
    assert_eq!(error_message(b"oops"), None);
    let detail = error_detail(
        br#"{"error": {"message": "m", "code": "context_length_exceeded", "type": "invalid_request_error"}}"#,
    );
    assert_eq!(detail.code.as_deref(), Some("context_length_exceeded"));
    assert_eq!(detail.error_type.as_deref(), Some("invalid_request_error"));
}

pub(crate) const STREAM: &str = concat!(
    "{\"type\":\"start\"}\n",
    "{\"type\":\"start-step\",\"request\":{},\"warnings\":[]}\n",
    "{\"type\":\"reasoning-start\",\"id\":\"r\"}\n",
    "{\"type\":\"reasoning-delta\",\"id\":\"r\",\"text\":\"Thinking \"}\n",
    "{\"type\":\"reasoning-delta\",\"id\":\"r\",\"text\":\"hard\"}\n",
    "{\"type\":\"text-delta\",\"id\":\"t\",\"text\":\"Héllo\"}\r\n",
    "\n",
    "{\"type\":\"text-delta\",\"id\":\"t\",\"text\":\" wörld ✓\"}\n",
    "{\"type\":\"tool-input-start\",\"id\":\"c1\",\"toolName\":\"f\"}\n",
    "{\"type\":\"tool-call\",\"toolCallId\":\"c1\",\"toolName\":\"f\",\"input\":{\"k\":\"v\"}}\n",
    "{\"type\":\"tool-call\",\"toolCallId\":\"c2\",\"toolName\":\"g\",\"input\":null}\n",
    "{\"type\":\"finish-step\",\"finishReason\":\"tool-calls\",\"usage\":{\"inputTokens\":1}}\n",
    "{\"type\":\"finish\",\"finishReason\":\"tool-calls\",\"totalUsage\":{\"inputTokens\":10,\"outputTokens\":20}}\n",
    "{\"type\":\"response\",\"id\":\"resp-9\",\"modelId\":\"gpt-4o\"}\n",
);

fn decode(stream: &str, size: usize) -> Result<Vec<StreamEvent>, Error> {
    let mut decoder = AiSdk.stream_decoder(&ResponseContext::of(&request(vec![])));
    let mut events = Vec::new();
    for chunk in stream.as_bytes().chunks(size) {
        events.extend(decoder.feed(chunk)?);
    }
    events.extend(decoder.finish()?);
    Ok(events)
}

fn call(id: &str, name: &str, input: Value) -> ToolUseBlock {
    ToolUseBlock {
        id: id.into(),
        name: name.into(),
        input,
        signature: None,
    }
}

#[test]
fn stream_gives_the_same_events_for_every_chunking() {
    let expected = vec![
        StreamEvent::Reasoning("Thinking ".into()),
        StreamEvent::Reasoning("hard".into()),
        StreamEvent::Text("Héllo".into()),
        StreamEvent::Text(" wörld ✓".into()),
        StreamEvent::ToolUse(call("c1", "f", json!({"k": "v"}))),
        StreamEvent::ToolUse(call("c2", "g", json!({}))),
        StreamEvent::Done(LlmResponse {
            id: "resp-9".into(),
            content: vec![
                ContentBlock::Reasoning(ReasoningBlock {
                    text: "Thinking hard".into(),
                    signature: None,
                    redacted_data: None,
                    provenance: Some("ai-sdk".into()),
                }),
                ContentBlock::Text(TextBlock {
                    text: "Héllo wörld ✓".into(),
                }),
                ContentBlock::ToolUse(call("c1", "f", json!({"k": "v"}))),
                ContentBlock::ToolUse(call("c2", "g", json!({}))),
            ],
            model: "gpt-4o".into(),
            stop_reason: "tool_use".into(),
            usage: TokenUsage::new(10, 20),
            stop_sequence: None,
        }),
    ];
    for size in 1..=STREAM.len() {
        assert_eq!(decode(STREAM, size).unwrap(), expected, "chunk size {size}");
    }
}

#[test]
fn deltas_come_out_as_soon_as_their_line_ends() {
    let mut decoder = AiSdk.stream_decoder(&ResponseContext::of(&request(vec![])));
    assert_eq!(
        decoder
            .feed(b"{\"type\":\"text-delta\",\"text\":\"a\"}")
            .unwrap(),
        vec![]
    );
    assert_eq!(
        decoder.feed(b"\n{\"type\":\"te").unwrap(),
        vec![StreamEvent::Text("a".into())]
    );
}

#[test]
fn the_response_line_is_optional_and_its_usage_wins() {
    let base = "{\"type\":\"text-delta\",\"text\":\"x\"}\n{\"type\":\"finish\",\"finishReason\":\"stop\",\"totalUsage\":{\"inputTokens\":1,\"outputTokens\":2}}";
    let events = decode(base, 4).unwrap();
    let Some(StreamEvent::Done(done)) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!((done.id.as_str(), done.model.as_str()), ("", ""));
    assert_eq!(done.stop_reason, "end_turn");
    assert_eq!(done.usage, TokenUsage::new(1, 2));
    let with_meta = format!(
        "{base}\n{{\"type\":\"response\",\"id\":\"i\",\"modelId\":\"m\",\"totalUsage\":{{\"inputTokens\":5,\"outputTokens\":6}}}}\n"
    );
    let events = decode(&with_meta, 3).unwrap();
    let Some(StreamEvent::Done(done)) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!((done.id.as_str(), done.model.as_str()), ("i", "m"));
    assert_eq!(done.usage, TokenUsage::new(5, 6));
}

#[test]
fn a_stream_without_finish_is_truncated() {
    let cut = &STREAM[..STREAM.find("{\"type\":\"finish\"").unwrap()];
    for size in [1, 9, cut.len()] {
        let err = decode(cut, size).unwrap_err();
        assert!(err.to_string().contains("finish part"), "{err}");
    }
    assert!(decode("", 1).is_err());
    // a final line cut mid-JSON is malformed
    let err = decode(&STREAM[..STREAM.len() - 5], 7).unwrap_err();
    assert!(
        err.to_string().starts_with("malformed ai-sdk response"),
        "{err}"
    );
}

#[test]
fn error_parts_fail_the_stream_after_the_events_before_them() {
    let cases = [
        (
            "{\"type\":\"error\",\"error\":{\"message\":\"Too many requests\",\"statusCode\":429,\"code\":\"rate_limit_exceeded\",\"type\":\"requests\"}}\n",
            Some(429),
            "Too many requests",
            Some("rate_limit_exceeded"),
            Some("requests"),
        ),
        ("{\"type\":\"error\",\"error\":\"boom\"}\n", None, "boom", None, None),
        ("{\"type\":\"error\",\"error\":{\"code\":1}}\n", None, "{\"code\":1}", Some("1"), None),
    ];
    for (error_line, status, message, code, error_type) in cases {
        let stream = format!(
            "{{\"type\":\"text-delta\",\"text\":\"part\"}}\n{error_line}{{\"type\":\"finish\",\"finishReason\":\"stop\"}}\n"
        );
        for size in 1..=stream.len() {
            let mut decoder = AiSdk.stream_decoder(&ResponseContext::of(&request(vec![])));
            let mut events = Vec::new();
            let mut error = None;
            for chunk in stream.as_bytes().chunks(size) {
                match decoder.feed(chunk) {
                    Ok(e) => events.extend(e),
                    Err(e) => {
                        error = Some(e);
                        break;
                    }
                }
            }
            let error = error.or_else(|| decoder.finish().err()).expect("an error");
            assert_eq!(
                events,
                vec![StreamEvent::Text("part".into())],
                "size {size}"
            );
            assert_eq!(
                error,
                Error::Provider {
                    provider: "ai-sdk".into(),
                    status,
                    message: message.into(),
                    code: code.map(str::to_owned),
                    error_type: error_type.map(str::to_owned),
                }
            );
            assert!(decoder.finish().is_err(), "the error sticks");
        }
    }
}
