//! Golden requests, response readings and stream decoding of the Gemini adapter, through its
//! public functions.

use serde_json::{json, Value};

use super::{error_message, Gemini};
use crate::adapter::test_support::{assistant, text, user};
use crate::adapter::{
    Adapter, ChatRequest, Credentials, Endpoint, ResponseContext, StreamEvent, Thinking,
    ToolDefinition,
};
use crate::error::Error;
use crate::message::*;

fn tool_use(id: &str, name: &str, signature: Option<&str>) -> ContentBlock {
    ContentBlock::ToolUse(ToolUseBlock {
        id: id.into(),
        name: name.into(),
        input: json!({"q": 1}),
        signature: signature.map(str::to_string),
    })
}

fn tool_result(id: &str, content: ToolResultContent, is_error: Option<bool>) -> ContentBlock {
    ContentBlock::ToolResult(ToolResultBlock {
        tool_use_id: id.into(),
        content,
        is_error,
    })
}

fn reasoning(text: &str, sig: Option<&str>, prov: Option<&str>, red: Option<&str>) -> ContentBlock {
    ContentBlock::Reasoning(ReasoningBlock {
        text: text.into(),
        signature: sig.map(str::to_string),
        redacted_data: red.map(str::to_string),
        provenance: prov.map(str::to_string),
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
        model: "gemini-2.5-flash".into(),
        messages,
        ..Default::default()
    }
}

fn key() -> Endpoint {
    Endpoint {
        credentials: Credentials::ApiKey("k-123".into()),
        ..Default::default()
    }
}

fn body(request: &ChatRequest) -> Value {
    let http = Gemini::default().format(request, &key()).unwrap();
    serde_json::from_str(&http.body).unwrap()
}

fn contents(messages: Vec<LlmMessage>) -> Value {
    body(&request(messages))["contents"].clone()
}

#[test]
fn golden_body_with_every_option() {
    let mut req = request(vec![
        user(vec![
            text("look"),
            ContentBlock::Image(ImageBlock {
                source: MediaSource::Base64 {
                    media_type: "image/png".into(),
                    data: "iVBORw0KGgo=".into(),
                },
            }),
        ]),
        assistant(vec![tool_use("c1", "lookup", Some("sig-1"))]),
        user(vec![tool_result(
            "c1",
            ToolResultContent::Text("42".into()),
            None,
        )]),
    ]);
    req.system_prompt = Some("be brief".into());
    req.tools = vec![ToolDefinition {
        name: "lookup".into(),
        description: "Looks up".into(),
        input_schema: json!({"type": "object", "properties": {"q": {"type": "number"}}}),
    }];
    req.sampling.max_tokens = Some(800);
    req.sampling.temperature = Some(0.5);
    req.sampling.top_p = Some(0.9);
    req.sampling.top_k = Some(3);
    req.extra_body.insert("foo".into(), json!(1));
    req.thinking = Some(Thinking {
        enabled: true,
        budget_tokens: Some(2048),
    });
    assert_eq!(
        body(&req),
        json!({
            "contents": [
                {"role": "user", "parts": [
                    {"text": "look"},
                    {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}
                ]},
                {"role": "model", "parts": [
                    {"functionCall": {"id": "c1", "name": "lookup", "args": {"q": 1}},
                     "thoughtSignature": "sig-1"}
                ]},
                {"role": "user", "parts": [
                    {"functionResponse": {"id": "c1", "name": "lookup",
                        "response": {"content": "42", "isError": false}}}
                ]}
            ],
            "systemInstruction": {"role": "user", "parts": [{"text": "be brief"}]},
            "tools": [{"functionDeclarations": [{
                "name": "lookup", "description": "Looks up",
                "parametersJsonSchema": {"type": "object", "properties": {"q": {"type": "number"}}}
            }]}],
            "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
            "generationConfig": {"maxOutputTokens": 800, "temperature": 0.5,
                "thinkingConfig": {"includeThoughts": true, "thinkingBudget": 2048}}
        })
    );
}

#[test]
fn exact_bytes_url_and_headers() {
    let req = request(vec![LlmMessage::user_text("hi")]);
    let http = Gemini::default().format(&req, &key()).unwrap();
    assert_eq!(http.method, "POST");
    assert_eq!(
        http.url,
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"
    );
    assert_eq!(
        http.headers,
        vec![
            ("content-type".to_string(), "application/json".to_string()),
            ("x-goog-api-key".to_string(), "k-123".to_string()),
        ]
    );
    assert_eq!(
        http.body.clone(),
        r#"{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":4096}}"#
    );
    assert_eq!(
        http.redacted_headers()[1],
        ("x-goog-api-key".into(), "[redacted]".into())
    );
}

#[test]
fn urls_for_streaming_custom_bases_and_model_names() {
    let mut req = request(vec![]);
    req.stream = true;
    let endpoint = Endpoint {
        base_url: Some("http://localhost:8080/".into()),
        ..Default::default()
    };
    let http = Gemini::default().format(&req, &endpoint).unwrap();
    assert_eq!(
        http.url,
        "http://localhost:8080/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
    assert_eq!(http.headers.len(), 1, "no credentials, no key header");

    req.stream = false;
    req.model = "models/gemini-pro".into();
    let http = Gemini::default().format(&req, &endpoint).unwrap();
    assert_eq!(
        http.url,
        "http://localhost:8080/v1beta/models/gemini-pro:generateContent"
    );
    req.model = "my model?x".into();
    let http = Gemini::default().format(&req, &endpoint).unwrap();
    assert_eq!(
        http.url,
        "http://localhost:8080/v1beta/models/my%20model%3Fx:generateContent"
    );
}

#[test]
fn aws_credentials_are_refused() {
    let endpoint = Endpoint {
        credentials: Credentials::Aws {
            access_key_id: "a".into(),
            secret_access_key: "SECRET-VALUE".into(),
            session_token: None,
        },
        ..Default::default()
    };
    let err = Gemini::default()
        .format(&request(vec![]), &endpoint)
        .unwrap_err();
    assert!(matches!(err, Error::InvalidRequest { .. }));
    assert!(!err.to_string().contains("SECRET-VALUE"));
}

#[test]
fn defaults_leave_optional_keys_out() {
    let mut req = request(vec![user(vec![]), assistant(vec![])]);
    req.thinking = Some(Thinking {
        enabled: false,
        budget_tokens: Some(5000),
    });
    let b = body(&req);
    assert_eq!(
        b,
        json!({"contents": [{"role": "user", "parts": []}, {"role": "model", "parts": []}],
               "generationConfig": {"maxOutputTokens": 4096}})
    );
    req.thinking = Some(Thinking {
        enabled: true,
        budget_tokens: None,
    });
    req.system_prompt = Some(String::new());
    let b = body(&req);
    assert_eq!(
        b["generationConfig"]["thinkingConfig"],
        json!({"includeThoughts": true})
    );
    assert_eq!(
        b["systemInstruction"],
        json!({"role": "user", "parts": [{"text": ""}]})
    );
}

#[test]
fn tool_results_take_names_from_any_message() {
    let got = contents(vec![
        // a tool_use in a user turn still names its result
        user(vec![tool_use("u1", "from_user", None)]),
        assistant(vec![tool_use("a1", "from_assistant", None)]),
        user(vec![
            tool_result("a1", ToolResultContent::Text("ok".into()), Some(true)),
            tool_result("u1", ToolResultContent::Text("".into()), Some(false)),
            tool_result("zz", ToolResultContent::Text("x".into()), None),
            text("after"),
        ]),
    ]);
    assert_eq!(
        got[0]["parts"][0],
        json!({"functionCall": {"id": "u1", "name": "from_user", "args": {"q": 1}}})
    );
    assert_eq!(
        got[2]["parts"],
        json!([
            {"functionResponse": {"id": "a1", "name": "from_assistant",
                "response": {"content": "ok", "isError": true}}},
            {"functionResponse": {"id": "u1", "name": "from_user",
                "response": {"content": "", "isError": false}}},
            {"functionResponse": {"id": "zz", "name": "zz",
                "response": {"content": "x", "isError": false}}},
            {"text": "after"}
        ])
    );
}

#[test]
fn rich_tool_results_carry_text_and_media_parts() {
    let parts = |p: Vec<ToolResultPart>| {
        let got = contents(vec![user(vec![tool_result(
            "c9",
            ToolResultContent::Parts(p),
            None,
        )])]);
        got[0]["parts"][0]["functionResponse"].clone()
    };
    assert_eq!(
        parts(vec![
            ToolResultPart::Text { text: "one".into() },
            ToolResultPart::Image {
                source: b64("image/png", "QUJD"),
            },
            ToolResultPart::Text { text: "two".into() },
            ToolResultPart::File {
                filename: "r.pdf".into(),
                source: url("application/pdf", "https://x.test/r.pdf"),
            },
            ToolResultPart::File {
                filename: "d.txt".into(),
                source: b64("text/plain", "aGk="),
            },
            ToolResultPart::Image {
                source: url("image/jpeg", "https://x.test/i.jpg"),
            },
        ]),
        json!({"id": "c9", "name": "c9",
        "response": {"content": "one\ntwo", "isError": false},
        "parts": [
            {"inlineData": {"mimeType": "image/png", "data": "QUJD"}},
            {"fileData": {"mimeType": "application/pdf", "fileUri": "https://x.test/r.pdf",
                "displayName": "r.pdf"}},
            {"inlineData": {"mimeType": "text/plain", "data": "aGk=", "displayName": "d.txt"}},
            {"fileData": {"mimeType": "image/jpeg", "fileUri": "https://x.test/i.jpg"}}
        ]})
    );
    // media only: the count stands in for the text
    assert_eq!(
        parts(vec![
            ToolResultPart::Image {
                source: b64("image/png", "QUJD"),
            },
            ToolResultPart::Text { text: "".into() },
            ToolResultPart::Image {
                source: b64("image/gif", "R0lG"),
            },
        ])["response"]["content"],
        json!("[2 tool-result attachment(s)]")
    );
    // text only: no parts key, joined text
    let only_text = parts(vec![
        ToolResultPart::Text { text: "a".into() },
        ToolResultPart::Text { text: "b".into() },
    ]);
    assert_eq!(
        only_text,
        json!({"id": "c9", "name": "c9", "response": {"content": "a\nb", "isError": false}})
    );
    // one empty text part: the count of zero attachments, as OMA writes it
    assert_eq!(
        parts(vec![ToolResultPart::Text { text: "".into() }])["response"]["content"],
        json!("[0 tool-result attachment(s)]")
    );
}

#[test]
fn reasoning_round_trips_only_when_gemini_signed_it() {
    let blocks = vec![
        reasoning("mine", Some("s1"), Some("gemini"), None),
        reasoning("unsigned", None, Some("gemini"), None),
        reasoning("foreign", Some("s2"), Some("anthropic"), None),
        reasoning("", None, Some("anthropic"), Some("opaque")),
        reasoning("", None, None, None),
        text("answer"),
    ];
    let dropped = contents(vec![assistant(blocks.clone())]);
    assert_eq!(
        dropped[0]["parts"],
        json!([
            {"text": "mine", "thought": true, "thoughtSignature": "s1"},
            {"text": "answer"}
        ])
    );
    let mut req = request(vec![assistant(blocks)]);
    req.preserve_reasoning_as_text = true;
    assert_eq!(
        body(&req)["contents"][0]["parts"],
        json!([
            {"text": "mine", "thought": true, "thoughtSignature": "s1"},
            {"text": "<thinking>unsigned</thinking>"},
            {"text": "<thinking>foreign</thinking>"},
            {"text": "<thinking>[redacted]</thinking>"},
            {"text": "answer"}
        ])
    );
}

#[test]
fn video_is_unsupported_in_any_role() {
    for source in [
        b64("video/mp4", "AAAA"),
        url("video/mp4", "https://x.test/v.mp4"),
    ] {
        for message in [user, assistant] {
            let video = ContentBlock::Video(VideoBlock {
                source: source.clone(),
            });
            let req = request(vec![message(vec![text("see"), video])]);
            let err = Gemini::default().format(&req, &key()).unwrap_err();
            assert_eq!(
                err,
                Error::unsupported_block("Gemini generateContent", "video")
            );
            assert_eq!(
                err.to_string(),
                "Gemini generateContent cannot represent the \"video\" content block: OMA does not map video for this adapter yet"
            );
            assert!(!err.retryable());
        }
    }
    // validation runs first: a bad video source is an InvalidMessageError
    let req = request(vec![user(vec![ContentBlock::Video(VideoBlock {
        source: url("video/mp4", "file:///v.mp4"),
    })])]);
    let err = Gemini::default().format(&req, &key()).unwrap_err();
    assert!(matches!(err, Error::InvalidMessage { .. }), "{err:?}");
}

#[test]
fn large_inline_data_is_written_verbatim() {
    let data = "QUJD".repeat(1 << 18);
    let req = request(vec![user(vec![ContentBlock::Image(ImageBlock {
        source: MediaSource::Base64 {
            media_type: "image/png".into(),
            data: data.clone(),
        },
    })])]);
    let b = body(&req);
    assert_eq!(
        b["contents"][0]["parts"][0]["inlineData"]["data"],
        json!(data)
    );
    // image data is not validated: odd bytes are escaped, never dropped
    let odd = request(vec![user(vec![ContentBlock::Image(ImageBlock {
        source: MediaSource::Base64 {
            media_type: "image/png".into(),
            data: "a\"b\\c".into(),
        },
    })])]);
    assert_eq!(
        body(&odd)["contents"][0]["parts"][0]["inlineData"]["data"],
        json!("a\"b\\c")
    );
}

fn parse(body: Value) -> LlmResponse {
    let req = request(vec![LlmMessage::user_text("q")]);
    Gemini::with_ids(1700000000000, 7)
        .parse(&ResponseContext::of(&req), body.to_string().as_bytes())
        .unwrap()
}

fn is_generated_id(id: &str) -> bool {
    let rest = id.strip_prefix("gemini-1700000000000-");
    rest.is_some_and(|r| {
        r.len() == 7
            && r.bytes()
                .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
    })
}

#[test]
fn parse_reads_parts_in_order() {
    let got = parse(json!({
        "candidates": [{"content": {"role": "model", "parts": [
            {"text": "hmm", "thought": true, "thoughtSignature": "ts"},
            {"text": "plain thought", "thought": true},
            {"text": "Hello"},
            {"text": ""},
            {"inlineData": {"mimeType": "image/png", "data": "QUJD"}},
            {"functionCall": {"id": "fc1", "name": "f", "args": {"a": 1}}, "thoughtSignature": "fs"},
            {"functionCall": {"name": "g"}},
            {"functionCall": {}}
        ]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 11, "candidatesTokenCount": 22, "totalTokenCount": 40}
    }));
    assert!(is_generated_id(&got.id), "{}", got.id);
    assert_eq!(got.model, "gemini-2.5-flash");
    assert_eq!(got.stop_reason, "tool_use");
    assert_eq!(got.usage, TokenUsage::new(11, 22));
    let content = serde_json::to_value(&got.content).unwrap();
    assert_eq!(
        content.as_array().unwrap()[..5],
        json!([
            {"type": "reasoning", "text": "hmm", "signature": "ts", "provenance": "gemini"},
            {"type": "reasoning", "text": "plain thought", "provenance": "gemini"},
            {"type": "text", "text": "Hello"},
            {"type": "tool_use", "id": "fc1", "name": "f", "input": {"a": 1}, "signature": "fs"},
            {"type": "tool_use", "id": content[4]["id"], "name": "g", "input": {}}
        ])
        .as_array()
        .unwrap()[..]
    );
    assert_eq!(content[5]["name"], json!(""));
    assert_eq!(content[5]["input"], json!({}));
    let ids = [
        &got.id,
        content[4]["id"].as_str().unwrap(),
        content[5]["id"].as_str().unwrap(),
    ];
    assert!(ids[1..].iter().all(|id| is_generated_id(id)));
    assert!(ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2]);
}

#[test]
fn generated_ids_are_deterministic_and_differ_by_turn_and_seed() {
    let body = br#"{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f"}}]}}]}"#;
    let one = request(vec![LlmMessage::user_text("q")]);
    let two = request(vec![LlmMessage::user_text("q"), LlmMessage::user_text("r")]);
    let ids = |gemini: Gemini, req: &ChatRequest| {
        let r = gemini.parse(&ResponseContext::of(req), body).unwrap();
        let ContentBlock::ToolUse(call) = &r.content[0] else {
            panic!("not a call")
        };
        (r.id, call.id.clone())
    };
    let a = ids(Gemini::with_ids(5, 1), &one);
    assert_eq!(a, ids(Gemini::with_ids(5, 1), &one));
    assert_ne!(a, ids(Gemini::with_ids(5, 2), &one));
    assert_ne!(a, ids(Gemini::with_ids(5, 1), &two));
    assert!(a.0.starts_with("gemini-5-") && a.0.len() == "gemini-5-".len() + 7);
}

#[test]
fn stop_reasons_follow_oma() {
    let call = json!({"functionCall": {"id": "x", "name": "f", "args": {}}});
    let words = json!({"text": "w"});
    for (finish, part, expected) in [
        (json!("MAX_TOKENS"), &call, "max_tokens"),
        (json!("MAX_TOKENS"), &words, "max_tokens"),
        (json!("STOP"), &call, "tool_use"),
        (json!("STOP"), &words, "end_turn"),
        (json!("SAFETY"), &words, "end_turn"),
        (json!(null), &words, "end_turn"),
    ] {
        let got = parse(json!({"candidates": [
            {"content": {"parts": [part]}, "finishReason": finish}
        ]}));
        assert_eq!(got.stop_reason, expected, "{finish} {part}");
    }
}

#[test]
fn parse_tolerates_missing_pieces() {
    for body in [
        json!({}),
        json!({"candidates": []}),
        json!({"candidates": [{}]}),
        json!({"candidates": [{"content": {}}], "usageMetadata": {}}),
        json!({"promptFeedback": {"blockReason": "SAFETY"}}),
    ] {
        let got = parse(body.clone());
        assert!(got.content.is_empty(), "{body}");
        assert_eq!(got.stop_reason, "end_turn");
        assert_eq!(got.usage, TokenUsage::default());
    }
}

#[test]
fn malformed_bodies_are_provider_errors() {
    let req = request(vec![]);
    for body in [
        &b"not json"[..],
        b"",
        b"[1]",
        br#"{"candidates": "x"}"#,
        br#"{"candidates":[{"content":{"parts":[{"text":5}]}}]}"#,
    ] {
        let err = Gemini::default()
            .parse(&ResponseContext::of(&req), body)
            .unwrap_err();
        let Error::Provider {
            provider,
            status,
            message,
            ..
        } = &err
        else {
            panic!("{err:?}")
        };
        assert_eq!(provider, "gemini");
        assert_eq!(*status, None);
        assert!(
            message.starts_with("malformed gemini response: "),
            "{message}"
        );
    }
}

#[test]
fn error_message_reads_google_errors() {
    assert_eq!(
        error_message(
            br#"{"error":{"code":400,"message":"API key not valid.","status":"INVALID_ARGUMENT"}}"#
        ),
        Some("API key not valid.".into())
    );
    assert_eq!(error_message(b"<html>"), None);
    assert_eq!(error_message(br#"{"error":"x"}"#), None);
}

pub(crate) const STREAM: &str = concat!(
    "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"Let me \", \"thought\": true}],\"role\": \"model\"}}],",
    "\"usageMetadata\": {\"promptTokenCount\": 9}}\r\n\r\n",
    "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"Hél\"}, {\"text\": \"lo ✓\"}],\"role\": \"model\"}}]}\r\n\r\n",
    "data: {\"candidates\": [{\"content\": {\"parts\": [{\"functionCall\": {\"name\": \"f\", \"args\": {\"k\": \"v\"}}, \"thoughtSignature\": \"sg\"}],",
    "\"role\": \"model\"},\"finishReason\": \"STOP\"}],",
    "\"usageMetadata\": {\"promptTokenCount\": 10, \"candidatesTokenCount\": 5}}\r\n\r\n",
);

fn stream_request() -> ChatRequest {
    let mut req = request(vec![LlmMessage::user_text("q")]);
    req.stream = true;
    req
}

fn decode(gemini: Gemini, stream: &str, size: usize) -> Result<Vec<StreamEvent>, Error> {
    let mut decoder = gemini.stream_decoder(&ResponseContext::of(&stream_request()));
    let mut events = Vec::new();
    for chunk in stream.as_bytes().chunks(size) {
        events.extend(decoder.feed(chunk)?);
    }
    events.extend(decoder.finish()?);
    Ok(events)
}

#[test]
fn stream_gives_the_same_events_for_every_chunking() {
    let gemini = Gemini::with_ids(1700000000000, 3);
    let whole = decode(gemini, STREAM, STREAM.len()).unwrap();
    let [StreamEvent::Reasoning(r), StreamEvent::Text(t1), StreamEvent::Text(t2), StreamEvent::ToolUse(call), StreamEvent::Done(done)] =
        &whole[..]
    else {
        panic!("{whole:?}")
    };
    assert_eq!(
        (r.as_str(), t1.as_str(), t2.as_str()),
        ("Let me ", "Hél", "lo ✓")
    );
    assert!(is_generated_id(&call.id));
    assert_eq!(call.signature.as_deref(), Some("sg"));
    assert!(is_generated_id(&done.id));
    assert_eq!(done.model, "gemini-2.5-flash");
    assert_eq!(done.stop_reason, "tool_use");
    assert_eq!(done.usage, TokenUsage::new(10, 5));
    assert_eq!(
        serde_json::to_value(&done.content).unwrap(),
        json!([
            {"type": "reasoning", "text": "Let me ", "provenance": "gemini"},
            {"type": "text", "text": "Hél"},
            {"type": "text", "text": "lo ✓"},
            {"type": "tool_use", "id": call.id, "name": "f", "input": {"k": "v"}, "signature": "sg"}
        ])
    );
    for size in 1..STREAM.len() {
        assert_eq!(
            decode(gemini, STREAM, size).unwrap(),
            whole,
            "chunk size {size}"
        );
    }
}

#[test]
fn text_events_come_out_as_soon_as_their_chunk_ends() {
    let mut decoder = Gemini::default().stream_decoder(&ResponseContext::of(&stream_request()));
    let first = STREAM.find("\r\n\r\n").unwrap() + 4;
    let events = decoder.feed(&STREAM.as_bytes()[..first]).unwrap();
    assert_eq!(events, vec![StreamEvent::Reasoning("Let me ".into())]);
}

#[test]
fn a_stream_without_a_finish_reason_is_truncated() {
    let cut = &STREAM[..STREAM
        .find("data: {\"candidates\": [{\"content\": {\"parts\": [{\"functionCall\"")
        .unwrap()];
    for size in [1, 7, cut.len()] {
        let err = decode(Gemini::default(), cut, size).unwrap_err();
        assert!(err.to_string().contains("finishReason"), "{err}");
    }
    let err = decode(Gemini::default(), "", 1).unwrap_err();
    assert!(matches!(err, Error::Provider { .. }));
}

#[test]
fn a_blocked_prompt_is_a_complete_empty_answer() {
    let stream = "data: {\"promptFeedback\":{\"blockReason\":\"SAFETY\"},\"usageMetadata\":{\"promptTokenCount\":4}}\r\n\r\n";
    let events = decode(Gemini::default(), stream, 3).unwrap();
    let [StreamEvent::Done(done)] = &events[..] else {
        panic!("{events:?}")
    };
    assert!(done.content.is_empty());
    assert_eq!(done.stop_reason, "end_turn");
    assert_eq!(done.usage.input_tokens, 4);
}

#[test]
fn a_max_tokens_stream_and_a_final_chunk_without_blank_line() {
    let stream = "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"ab\"}]},\"finishReason\":\"MAX_TOKENS\"}]}";
    let events = decode(Gemini::default(), stream, 5).unwrap();
    let Some(StreamEvent::Done(done)) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(done.stop_reason, "max_tokens");
    assert_eq!(done.usage, TokenUsage::default());
}

#[test]
fn stream_errors_keep_the_events_before_them() {
    let stream = concat!(
        "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"partial\"}]}}]}\n\n",
        "data: {\"error\":{\"code\":503,\"message\":\"overloaded\",\"status\":\"UNAVAILABLE\"}}\n\n",
    );
    for size in 1..stream.len() {
        let mut decoder = Gemini::default().stream_decoder(&ResponseContext::of(&stream_request()));
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
            vec![StreamEvent::Text("partial".into())],
            "size {size}"
        );
        assert_eq!(
            error,
            Error::Provider {
                provider: "gemini".into(),
                status: Some(503),
                message: "overloaded".into(),
                code: Some("UNAVAILABLE".into()),
                error_type: None,
            }
        );
        assert!(error.retryable());
        assert!(decoder.finish().is_err(), "the error sticks");
    }
    let err = decode(Gemini::default(), "data: {oops}\n\n", 3).unwrap_err();
    assert!(
        err.to_string().starts_with("malformed gemini response"),
        "{err}"
    );
}

#[test]
fn error_detail_reads_the_status_and_the_retry_delay() {
    let detail = super::error_detail(
        br#"{"error": {"code": 429, "message": "Resource has been exhausted (e.g. check quota).",
            "status": "RESOURCE_EXHAUSTED", "details": [
              {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
              {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "34.4s"}]}}"#,
    );
    assert_eq!(detail.code.as_deref(), Some("RESOURCE_EXHAUSTED"));
    assert_eq!(detail.retry_delay_ms, Some(34_400));
    assert_eq!(
        detail.message.as_deref(),
        Some("Resource has been exhausted (e.g. check quota).")
    );
    // Without a status the numeric code is the code; a detail of another type is no wait.
    let detail = super::error_detail(
        br#"{"error": {"code": 500, "message": "x", "details": [{"@type": "x", "retryDelay": "1s"}]}}"#,
    );
    assert_eq!(detail.code.as_deref(), Some("500"));
    assert_eq!(detail.retry_delay_ms, None);
    assert_eq!(super::error_detail(b"<html>"), Default::default());
}

/// A function call streamed with its arguments in pieces, in the shape of the streams Google's
/// Vertex AI sends for `streamFunctionCallArguments` (the `functionCall` parts of a
/// `streamGenerateContent` answer recorded in `vercel/ai`,
/// `packages/google/src/__fixtures__/google-stream-tool-call-arguments.chunks.txt`): two calls
/// of one turn, each opened by a part with its name and `willContinue`, its string argument in
/// pieces, and closed by an empty `functionCall`.
const PARTIAL_ARGS_STREAM: &str = concat!(
    "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"functionCall\":{\"name\":\"getWeather\",\"willContinue\":true},\"thoughtSignature\":\"c2lnLTE=\"}]}}]}\n\n",
    "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"functionCall\":{\"partialArgs\":[{\"jsonPath\":\"$.location\",\"stringValue\":\"Bos\",\"willContinue\":true}],\"willContinue\":true}}]}}]}\n\n",
    "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"functionCall\":{\"partialArgs\":[{\"jsonPath\":\"$.location\",\"stringValue\":\"ton\",\"willContinue\":true}],\"willContinue\":true}}]}}]}\n\n",
    "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"functionCall\":{\"partialArgs\":[{\"jsonPath\":\"$.location\",\"stringValue\":\"\"}],\"willContinue\":true}}]}}]}\n\n",
    "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"functionCall\":{}}]}}]}\n\n",
    "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"functionCall\":{\"name\":\"getWeather\",\"willContinue\":true}}]}}]}\n\n",
    "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"functionCall\":{\"partialArgs\":[{\"jsonPath\":\"$.location\",\"stringValue\":\"San Francisco\",\"willContinue\":true}],\"willContinue\":true}}]}}]}\n\n",
    "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"functionCall\":{\"partialArgs\":[{\"jsonPath\":\"$.location\",\"stringValue\":\"\"},{\"jsonPath\":\"$.days\",\"numberValue\":3},{\"jsonPath\":\"$.metric\",\"boolValue\":true}],\"willContinue\":true}}]}}]}\n\n",
    "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"functionCall\":{}}]},\"finishReason\":\"STOP\"}],\"usageMetadata\":{\"promptTokenCount\":26,\"candidatesTokenCount\":23}}\n\n",
);

#[test]
fn streamed_argument_pieces_become_one_call_each() {
    let whole = decode(
        Gemini::with_ids(1700000000000, 2),
        PARTIAL_ARGS_STREAM,
        PARTIAL_ARGS_STREAM.len(),
    )
    .expect("a complete stream");
    for size in [1, 7, 64] {
        assert_eq!(
            decode(
                Gemini::with_ids(1700000000000, 2),
                PARTIAL_ARGS_STREAM,
                size
            )
            .expect("complete"),
            whole,
            "chunks of {size}"
        );
    }
    let [StreamEvent::ToolUse(first), StreamEvent::ToolUse(second), StreamEvent::Done(done)] =
        &whole[..]
    else {
        panic!("two calls, then the response: {whole:?}")
    };
    assert_eq!(first.name, "getWeather");
    assert_eq!(first.input, json!({"location": "Boston"}));
    assert_eq!(first.signature.as_deref(), Some("c2lnLTE="));
    assert_eq!(second.name, "getWeather");
    assert_eq!(
        second.input,
        json!({"location": "San Francisco", "days": 3, "metric": true})
    );
    assert_eq!(second.signature, None);
    assert!(is_generated_id(&first.id) && is_generated_id(&second.id));
    assert_ne!(first.id, second.id);
    // The response holds the same two calls and nothing else.
    assert_eq!(
        done.content,
        vec![
            ContentBlock::ToolUse(first.clone()),
            ContentBlock::ToolUse(second.clone())
        ]
    );
    assert_eq!(done.stop_reason, "tool_use");
    assert_eq!(
        (done.usage.input_tokens, done.usage.output_tokens),
        (26, 23)
    );
}

/// Nested paths, as in Google's `$.recipe.ingredients[0].amount` pieces; parts with only
/// `willContinue` between them; a call still open at the finish reason is closed with what came;
/// a part that names a new call closes the open one.
#[test]
fn nested_paths_and_calls_without_an_end_part() {
    let chunk = |part: &str, finish: bool| {
        format!(
            "data: {{\"candidates\":[{{\"content\":{{\"parts\":[{part}]}}{}}}]}}\n\n",
            if finish {
                ",\"finishReason\":\"STOP\""
            } else {
                ""
            }
        )
    };
    let stream = [
        chunk(r#"{"functionCall":{"name":"cookRecipe","id":"c1","willContinue":true}}"#, false),
        chunk(r#"{"functionCall":{"partialArgs":[{"jsonPath":"$.recipe.ingredients[0].amount","stringValue":"16 oz","willContinue":true}],"willContinue":true}}"#, false),
        chunk(r#"{"functionCall":{"partialArgs":[{"jsonPath":"$.recipe.ingredients[0].amount","stringValue":""}],"willContinue":true}}"#, false),
        chunk(r#"{"functionCall":{"partialArgs":[{"jsonPath":"$.recipe.ingredients[0].name","stringValue":"noodles"}],"willContinue":true}}"#, false),
        chunk(r#"{"functionCall":{"willContinue":true}}"#, false),
        chunk(r#"{"functionCall":{"partialArgs":[{"jsonPath":"$.recipe['ingredients'][1].name","stringValue":"beef"},{"jsonPath":"$.recipe.note","nullValue":"NULL_VALUE"}],"willContinue":true}}"#, false),
        chunk(r#"{"functionCall":{"name":"setTimer","willContinue":true}}"#, false),
        chunk(r#"{"functionCall":{"partialArgs":[{"jsonPath":"$.minutes","numberValue":45}],"willContinue":true}}"#, true),
    ]
    .concat();
    let events = decode(Gemini::default(), &stream, 5).expect("complete");
    let calls: Vec<&ToolUseBlock> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolUse(call) => Some(call),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 2, "{events:?}");
    assert_eq!(
        (calls[0].id.as_str(), calls[0].name.as_str()),
        ("c1", "cookRecipe")
    );
    assert_eq!(
        calls[0].input,
        json!({"recipe": {"ingredients": [{"amount": "16 oz", "name": "noodles"}, {"name": "beef"}],
            "note": null}})
    );
    assert_eq!(calls[1].name, "setTimer");
    assert_eq!(calls[1].input, json!({"minutes": 45}));
}

/// Whole calls are unchanged; paths of another form, and pieces that disagree about the shape
/// of the arguments, fail the stream as malformed; a huge index is refused, not allocated.
#[test]
fn whole_calls_stay_and_bad_paths_fail() {
    let one = concat!(
        "data: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"f\",\"args\":{\"a\":1}}},",
        "{\"functionCall\":{\"name\":\"g\",\"args\":{\"b\":2}}}]},\"finishReason\":\"STOP\"}]}\n\n",
    );
    let events = decode(Gemini::default(), one, one.len()).expect("complete");
    let names: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolUse(call) => Some((call.name.clone(), call.input.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        names,
        vec![
            ("f".to_string(), json!({"a": 1})),
            ("g".to_string(), json!({"b": 2}))
        ]
    );
    for path in [
        "$..a",
        "$.a[*]",
        "$[?@.a]",
        "a",
        "$.a[-1]",
        "$.a[99999999]",
        "$.",
        "$['a",
    ] {
        let stream = format!(
            "data: {{\"candidates\":[{{\"content\":{{\"parts\":[{{\"functionCall\":{{\"name\":\"f\",\"partialArgs\":[{{\"jsonPath\":\"{path}\",\"stringValue\":\"x\"}}]}}}}]}},\"finishReason\":\"STOP\"}}]}}\n\n"
        );
        let error = decode(Gemini::default(), &stream, 9).expect_err(path);
        assert!(error.to_string().contains("jsonPath"), "{path}: {error}");
    }
    let clash = concat!(
        "data: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"f\",\"willContinue\":true,",
        "\"partialArgs\":[{\"jsonPath\":\"$.a\",\"stringValue\":\"x\"},{\"jsonPath\":\"$.a.b\",\"stringValue\":\"y\"}]}}]},\"finishReason\":\"STOP\"}]}\n\n",
    );
    let error = decode(Gemini::default(), clash, 4).expect_err("a member of a string");
    assert!(error.to_string().contains("disagree"), "{error}");
}

#[test]
fn an_image_by_url_is_file_data_with_its_type() {
    let req = request(vec![user(vec![ContentBlock::Image(ImageBlock {
        source: url("image/webp", "https://example.com/a.webp"),
    })])]);
    assert_eq!(
        body(&req)["contents"][0]["parts"][0],
        json!({"fileData": {"mimeType": "image/webp", "fileUri": "https://example.com/a.webp"}})
    );
}

#[test]
fn generation_extra_adds_to_the_generation_config_without_replacing_its_keys() {
    let mut req = request(vec![LlmMessage::user_text("q")]);
    req.sampling.max_tokens = Some(100);
    req.generation_extra = json!({"stopSequences": ["END"], "seed": 7, "maxOutputTokens": 1})
        .as_object()
        .cloned()
        .unwrap();
    assert_eq!(
        body(&req)["generationConfig"],
        json!({"maxOutputTokens": 100, "stopSequences": ["END"], "seed": 7})
    );
    // A count sends no generation config.
    let http = Gemini::default()
        .format_count(crate::adapter::Validated::check(&req).unwrap(), &key())
        .unwrap()
        .unwrap();
    assert!(!http.body.contains("stopSequences"), "{}", http.body);
}

#[test]
fn a_forced_tool_call_is_mode_any_with_its_name() {
    let mut req = request(vec![LlmMessage::user_text("q")]);
    req.tools = vec![ToolDefinition {
        name: "look".into(),
        description: String::new(),
        input_schema: json!({"type": "object"}),
    }];
    assert_eq!(
        body(&req)["toolConfig"],
        json!({"functionCallingConfig": {"mode": "AUTO"}})
    );
    req.forced_tool = Some(crate::adapter::ForcedTool::Any);
    assert_eq!(
        body(&req)["toolConfig"],
        json!({"functionCallingConfig": {"mode": "ANY"}})
    );
    req.forced_tool = Some(crate::adapter::ForcedTool::Named("look".into()));
    assert_eq!(
        body(&req)["toolConfig"],
        json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["look"]}})
    );
}
