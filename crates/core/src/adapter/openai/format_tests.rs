//! Request formatting: golden bodies for every row of the message mapping
//! (`docs/wire-formats.md#openai-messages`), the body keys, presets, endpoints and the
//! unsupported-content error.

use serde_json::{json, Value};

use super::*;
use crate::adapter::{Sampling, Thinking};
use crate::error::ErrorKind;
use crate::message::LlmMessage;

fn messages(value: Value) -> Vec<LlmMessage> {
    serde_json::from_value(value).expect("test messages")
}

fn request(msgs: Value) -> ChatRequest {
    ChatRequest {
        model: "gpt-test".into(),
        messages: messages(msgs),
        ..ChatRequest::default()
    }
}

fn key() -> Endpoint {
    Endpoint {
        credentials: Credentials::ApiKey("sk-test".into()),
        ..Endpoint::default()
    }
}

fn body_with(adapter: &OpenAi, request: &ChatRequest) -> Value {
    let http = adapter.format(request, &key()).expect("format");
    serde_json::from_str(&http.body).expect("JSON body")
}

fn body(request: &ChatRequest) -> Value {
    body_with(&OpenAi::default(), request)
}

/// The `messages` of the body for one conversation.
fn wire(msgs: Value) -> Value {
    body(&request(msgs))["messages"].clone()
}

fn keys(body: &Value) -> Vec<String> {
    body.as_object().expect("object").keys().cloned().collect()
}

#[test]
fn exact_bytes_url_and_headers() {
    let mut req = request(json!([{"role": "user", "content": [{"type": "text", "text": "hi"}]}]));
    req.system_prompt = Some("be brief".into());
    req.sampling.max_tokens = Some(100);
    req.sampling.temperature = Some(0.7);
    let http = OpenAi::default().format(&req, &key()).unwrap();
    assert_eq!(http.method, "POST");
    assert_eq!(http.url, "https://api.openai.com/v1/chat/completions");
    assert_eq!(
        http.headers,
        vec![
            ("content-type".to_string(), "application/json".to_string()),
            ("authorization".to_string(), "Bearer sk-test".to_string()),
        ]
    );
    assert_eq!(
        http.body,
        r#"{"max_tokens":100,"temperature":0.7,"model":"gpt-test","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],"stream":false}"#
    );
}

#[test]
fn presets_and_endpoints() {
    let cases = [
        ("openai", "https://api.openai.com/v1"),
        ("grok", "https://api.x.ai/v1"),
        ("minimax", "https://api.minimax.io/v1"),
        ("deepseek", "https://api.deepseek.com/v1"),
        ("mimo", "https://api.xiaomimimo.com/v1"),
        ("doubao", "https://ark.cn-beijing.volces.com/api/v3"),
        ("hunyuan", "https://tokenhub.tencentmaas.com/v1"),
        ("qiniu", "https://api.qnaigc.com/v1"),
    ];
    assert_eq!(cases.len(), PRESETS.len());
    let req = request(json!([]));
    for (name, base) in cases {
        let adapter = preset(name).expect(name);
        assert_eq!(adapter.name(), name);
        let http = adapter.format(&req, &key()).unwrap();
        assert_eq!(http.url, format!("{base}/chat/completions"), "{name}");
    }
    assert!(preset("anthropic").is_none());

    let local = OpenAi::compatible("vllm", "http://localhost:8000/v1/");
    let http = local.format(&req, &Endpoint::default()).unwrap();
    assert_eq!(http.url, "http://localhost:8000/v1/chat/completions");
    assert!(http.headers.iter().all(|(name, _)| name != "authorization"));

    let endpoint = Endpoint {
        base_url: Some("https://proxy.example/v1/".into()),
        ..key()
    };
    let http = OpenAi::default().format(&req, &endpoint).unwrap();
    assert_eq!(http.url, "https://proxy.example/v1/chat/completions");
    assert_eq!(http.redacted_headers()[1].1, "[redacted]");

    let aws = Endpoint {
        credentials: Credentials::Aws {
            access_key_id: "AKIA".into(),
            secret_access_key: "secret".into(),
            session_token: None,
        },
        ..Endpoint::default()
    };
    let err = OpenAi::default().format(&req, &aws).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Other);
    assert!(!err.to_string().contains("secret"));
}

#[test]
fn sampling_keys_in_order_only_when_set() {
    let mut req = request(json!([]));
    assert_eq!(keys(&body(&req)), ["model", "messages", "stream"]);
    assert_eq!(body(&req)["messages"], json!([]));
    req.sampling = Sampling {
        max_tokens: Some(64),
        temperature: Some(1.0),
        top_p: Some(0.9),
        top_k: Some(40),
        frequency_penalty: Some(0.5),
        presence_penalty: Some(-0.5),
        min_p: Some(0.05),
        parallel_tool_calls: Some(false),
        reasoning_effort: Some("high".into()),
    };
    let b = body(&req);
    assert_eq!(
        keys(&b),
        [
            "max_tokens",
            "temperature",
            "frequency_penalty",
            "presence_penalty",
            "top_p",
            "top_k",
            "min_p",
            "parallel_tool_calls",
            "reasoning_effort",
            "model",
            "messages",
            "stream"
        ]
    );
    assert_eq!(b["temperature"], json!(1));
    assert_eq!(b["presence_penalty"], json!(-0.5));
    assert_eq!(b["parallel_tool_calls"], json!(false));
    assert_eq!(b["reasoning_effort"], json!("high"));
    let text = OpenAi::default().format(&req, &key()).unwrap().body;
    assert!(text.contains(r#""temperature":1,"#));
}

#[test]
fn reasoning_effort_max_and_deepseek_thinking() {
    let mut req = request(json!([]));
    req.sampling.reasoning_effort = Some("max".into());
    req.thinking = Some(Thinking {
        enabled: true,
        budget_tokens: Some(2048),
    });
    for name in ["openai", "minimax", "grok", "mimo"] {
        let b = body_with(&preset(name).unwrap(), &req);
        assert!(b.get("reasoning_effort").is_none(), "{name}");
        assert!(b.get("thinking").is_none(), "{name}");
    }
    let deepseek = preset("deepseek").unwrap();
    let b = body_with(&deepseek, &req);
    assert_eq!(b["reasoning_effort"], json!("max"));
    assert_eq!(b["thinking"], json!({"type": "enabled"}));
    assert_eq!(
        keys(&b),
        [
            "reasoning_effort",
            "thinking",
            "model",
            "messages",
            "stream"
        ]
    );

    req.thinking = Some(Thinking::default());
    assert_eq!(
        body_with(&deepseek, &req)["thinking"],
        json!({"type": "disabled"})
    );
    req.thinking = None;
    assert!(body_with(&deepseek, &req).get("thinking").is_none());

    // extraBody is the last layer, over the DeepSeek switch too.
    req.thinking = Some(Thinking::default());
    req.extra_body = json!({"thinking": {"type": "enabled", "x": 1}})
        .as_object()
        .unwrap()
        .clone();
    assert_eq!(
        body_with(&deepseek, &req)["thinking"],
        json!({"type": "enabled", "x": 1})
    );
}

#[test]
fn extra_body_overrides_sampling_but_not_structure() {
    let mut req = request(json!([{"role": "user", "content": [{"type": "text", "text": "q"}]}]));
    req.sampling.temperature = Some(0.2);
    req.extra_body = json!({
        "top_p": 0.5,
        "temperature": 0.9,
        "model": "other",
        "messages": [],
        "stream": true,
        "tools": [{"type": "function"}],
        "enable_thinking": false,
    })
    .as_object()
    .unwrap()
    .clone();
    let b = body(&req);
    // JS spread semantics: an existing key keeps its place, a new key goes after; the
    // structural keys are written last and win (`tools: undefined` removes an extra `tools`).
    assert_eq!(
        keys(&b),
        [
            "temperature",
            "top_p",
            "model",
            "messages",
            "stream",
            "enable_thinking"
        ]
    );
    assert_eq!(b["temperature"], json!(0.9));
    assert_eq!(b["top_p"], json!(0.5));
    assert_eq!(b["model"], json!("gpt-test"));
    assert_eq!(b["messages"], json!([{"role": "user", "content": "q"}]));
    assert_eq!(b["stream"], json!(false));
    assert_eq!(b["enable_thinking"], json!(false));
}

#[test]
fn tools_and_streaming_keys() {
    let mut req = request(json!([]));
    req.tools = vec![ToolDefinition {
        name: "search".into(),
        description: "Search the web".into(),
        input_schema: json!({"type": "object", "properties": {"q": {"type": "string"}}}),
    }];
    req.stream = true;
    let b = body(&req);
    assert_eq!(
        keys(&b),
        ["model", "messages", "tools", "stream", "stream_options"]
    );
    assert_eq!(
        b["tools"],
        json!([{"type": "function", "function": {
            "name": "search",
            "description": "Search the web",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        }}])
    );
    assert_eq!(b["stream"], json!(true));
    assert_eq!(b["stream_options"], json!({"include_usage": true}));
}

#[test]
fn system_prompt_only_when_non_empty() {
    let mut req = request(json!([]));
    req.system_prompt = Some(String::new());
    assert_eq!(body(&req)["messages"], json!([]));
    req.system_prompt = Some("sys".into());
    assert_eq!(
        body(&req)["messages"],
        json!([{"role": "system", "content": "sys"}])
    );
}

#[test]
fn user_messages() {
    let image = json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "abc123"}});
    assert_eq!(
        wire(json!([
            {"role": "user", "content": [{"type": "text", "text": "one"}]},
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
            {"role": "user", "content": []},
            {"role": "user", "content": [
                {"type": "text", "text": "look"},
                image,
                {"type": "tool_use", "id": "t", "name": "n", "input": {}},
                {"type": "reasoning", "text": "hmm", "provenance": "openai"},
            ]},
            {"role": "user", "content": [image]},
        ])),
        json!([
            {"role": "user", "content": "one"},
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
            {"role": "user", "content": []},
            {"role": "user", "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,abc123"}},
            ]},
            {"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,abc123"}},
            ]},
        ])
    );
}

#[test]
fn unvalidated_image_data_is_escaped_not_trusted() {
    let msgs = json!([{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "a\"b\\c\n"}},
    ]}]);
    assert_eq!(
        wire(msgs)[0]["content"][0]["image_url"]["url"],
        json!("data:image/png;base64,a\"b\\c\n")
    );
}

#[test]
fn video_becomes_video_url_on_every_preset() {
    let msgs = json!([{"role": "user", "content": [
        {"type": "text", "text": "describe"},
        {"type": "video", "source": {"type": "url", "media_type": "video/mp4", "url": "https://cdn.example/v.mp4?a=1&b=2"}},
        {"type": "video", "source": {"type": "base64", "media_type": "video/mp4", "data": "AAAAGGZ0eXA="}},
    ]}]);
    let expected = json!([{"role": "user", "content": [
        {"type": "text", "text": "describe"},
        {"type": "video_url", "video_url": {"url": "https://cdn.example/v.mp4?a=1&b=2"}},
        {"type": "video_url", "video_url": {"url": "data:video/mp4;base64,AAAAGGZ0eXA="}},
    ]}]);
    for name in PRESETS {
        let b = body_with(&preset(name).unwrap(), &request(msgs.clone()));
        assert_eq!(b["messages"], expected, "{name}");
    }
    // A single video still gives an array.
    let one = json!([{"role": "user", "content": [
        {"type": "video", "source": {"type": "url", "media_type": "video/mp4", "url": "https://cdn.example/v.mp4"}},
    ]}]);
    assert_eq!(
        wire(one)[0]["content"],
        json!([{"type": "video_url", "video_url": {"url": "https://cdn.example/v.mp4"}}])
    );
}

#[test]
fn validation_runs_first() {
    for source in [
        json!({"type": "url", "media_type": "video/mp4", "url": "mm_file://abc"}),
        json!({"type": "url", "media_type": "video/mp4", "url": "data:video/mp4;base64,AAAA"}),
        json!({"type": "base64", "media_type": "video/mp4; codecs=x", "data": "AAAA"}),
        json!({"type": "base64", "media_type": "video/mp4", "data": "data:video/mp4;base64,AAAA"}),
    ] {
        let req =
            request(json!([{"role": "user", "content": [{"type": "video", "source": source}]}]));
        let err = OpenAi::default().format(&req, &key()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidMessage, "{source}");
    }
}

#[test]
fn tool_results() {
    let msgs = json!([{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "call_1", "content": "plain", "is_error": true},
        {"type": "tool_result", "tool_use_id": "call_2", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
    ]}]);
    assert_eq!(
        wire(msgs),
        json!([
            {"role": "tool", "tool_call_id": "call_1", "content": "plain"},
            {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        ])
    );

    // Non-tool blocks without attachments: the plain user rule (one text collapses).
    let msgs = json!([{"role": "user", "content": [
        {"type": "text", "text": "warning: loop"},
        {"type": "tool_result", "tool_use_id": "call_1", "content": "r"},
    ]}]);
    assert_eq!(
        wire(msgs),
        json!([
            {"role": "tool", "tool_call_id": "call_1", "content": "r"},
            {"role": "user", "content": "warning: loop"},
        ])
    );
}

#[test]
fn tool_result_attachments() {
    let msgs = json!([{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "call_1", "content": [
            {"type": "text", "text": "chart and report"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw=="}},
            {"type": "image", "source": {"type": "url", "media_type": "image/jpeg", "url": "https://x.example/a.jpg"}},
            {"type": "file", "filename": "r.pdf", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}},
        ]},
        {"type": "text", "text": "note"},
        {"type": "tool_result", "tool_use_id": "call_2", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/gif", "data": "R0lG"}},
        ]},
        {"type": "video", "source": {"type": "url", "media_type": "video/mp4", "url": "https://x.example/v.mp4"}},
    ]}]);
    assert_eq!(
        wire(msgs),
        json!([
            {"role": "tool", "tool_call_id": "call_1", "content": [
                {"type": "text", "text": "chart and report"},
                {"type": "text", "text": "[3 tool-result attachment(s) follow in the next user message.]"},
            ]},
            {"role": "tool", "tool_call_id": "call_2", "content": [
                {"type": "text", "text": "[1 tool-result attachment(s) follow in the next user message.]"},
            ]},
            {"role": "user", "content": [
                {"type": "text", "text": "Attachments for tool call call_1:"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw=="}},
                {"type": "image_url", "image_url": {"url": "https://x.example/a.jpg"}},
                {"type": "file", "file": {"filename": "r.pdf", "file_data": "data:application/pdf;base64,JVBERi0="}},
                {"type": "text", "text": "Attachments for tool call call_2:"},
                {"type": "image_url", "image_url": {"url": "data:image/gif;base64,R0lG"}},
                {"type": "text", "text": "note"},
                {"type": "video_url", "video_url": {"url": "https://x.example/v.mp4"}},
            ]},
        ])
    );
}

#[test]
fn tool_result_file_url_is_unsupported() {
    let req = request(json!([{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "call_1", "content": [
            {"type": "file", "filename": "r.pdf", "source": {"type": "url", "media_type": "application/pdf", "url": "https://x.example/r.pdf"}},
        ]},
    ]}]));
    for name in PRESETS {
        let err = preset(name).unwrap().format(&req, &key()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::UnsupportedToolResultContent);
        assert_eq!(
            err.to_string(),
            "OpenAI-compatible Chat Completions cannot represent tool-result content type \
             \"file-url\": file content parts accept inline base64 data, not remote URLs"
        );
        assert!(!err.retryable());
    }
}

#[test]
fn assistant_messages() {
    assert_eq!(
        wire(json!([
            {"role": "assistant", "content": [{"type": "text", "text": "Hel"}, {"type": "text", "text": "lo"}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "call_1", "name": "search", "input": {"q": "rust", "n": 2}},
                {"type": "tool_use", "id": "call_2", "name": "noop", "input": {}},
            ]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "call_3", "name": "search", "input": {"q": "x"}},
            ]},
            {"role": "assistant", "content": [{"type": "reasoning", "text": "private", "provenance": "openai"}]},
            {"role": "assistant", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
                {"type": "tool_result", "tool_use_id": "call_1", "content": "r"},
            ]},
            {"role": "assistant", "content": []},
        ])),
        json!([
            {"role": "assistant", "content": "Hello"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": "{\"q\":\"rust\",\"n\":2}"}},
                {"id": "call_2", "type": "function", "function": {"name": "noop", "arguments": "{}"}},
            ]},
            {"role": "assistant", "content": "Let me look.", "tool_calls": [
                {"id": "call_3", "type": "function", "function": {"name": "search", "arguments": "{\"q\":\"x\"}"}},
            ]},
        ])
    );
}

/// A video in an assistant turn is refused, as the formats without video refuse it, before any
/// request exists; it used to be dropped without a word. Images and tool results in an
/// assistant turn are still dropped.
#[test]
fn video_in_an_assistant_turn_is_an_unsupported_content_block() {
    for source in [
        json!({"type": "url", "media_type": "video/mp4", "url": "https://x.example/v.mp4"}),
        json!({"type": "base64", "media_type": "video/mp4", "data": "AAAA"}),
    ] {
        let req = request(json!([
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "here"},
                {"type": "video", "source": source},
            ]},
        ]));
        for name in PRESETS {
            let err = preset(name).unwrap().format(&req, &key()).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::UnsupportedContentBlock, "{name}");
            assert_eq!(
                err.to_string(),
                "OpenAI-compatible Chat Completions cannot represent the \"video\" content block: OMA does not map video for this adapter yet"
            );
            assert_eq!(err.code(), Some("UNSUPPORTED_CONTENT_BLOCK"));
            assert!(!err.retryable());
        }
    }
}

#[test]
fn reasoning_as_thinking_text_when_opted_in() {
    let msgs = json!([
        {"role": "assistant", "content": [
            {"type": "reasoning", "text": "step one", "provenance": "anthropic", "signature": "sig"},
            {"type": "text", "text": "Answer."},
            {"type": "reasoning", "text": "", "redactedData": "opaque", "provenance": "anthropic"},
        ]},
        {"role": "assistant", "content": [
            {"type": "reasoning", "text": "only thought", "provenance": "openai"},
            {"type": "reasoning", "text": "", "provenance": "openai"},
        ]},
        {"role": "assistant", "content": [
            {"type": "reasoning", "text": "before call", "provenance": "gemini"},
            {"type": "tool_use", "id": "c", "name": "t", "input": {}},
        ]},
    ]);
    let mut req = request(msgs);
    assert_eq!(
        body(&req)["messages"],
        json!([
            {"role": "assistant", "content": "Answer."},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "t", "arguments": "{}"}},
            ]},
        ])
    );
    req.preserve_reasoning_as_text = true;
    assert_eq!(
        body(&req)["messages"],
        json!([
            {"role": "assistant", "content": "<thinking>step one</thinking>Answer.<thinking>[redacted]</thinking>"},
            {"role": "assistant", "content": "<thinking>only thought</thinking>"},
            {"role": "assistant", "content": "<thinking>before call</thinking>", "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "t", "arguments": "{}"}},
            ]},
        ])
    );
    let long = "x".repeat(2000);
    let req = ChatRequest {
        preserve_reasoning_as_text: true,
        ..request(json!([{"role": "assistant", "content": [{"type": "reasoning", "text": long}]}]))
    };
    let content = body(&req)["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(content.contains("...[truncated]..."));
    assert_eq!(content.len(), "<thinking></thinking>".len() + 1200);
}

#[test]
fn deepseek_echoes_its_reasoning_in_tool_conversations() {
    let tool_turn = json!([
        {"role": "user", "content": [{"type": "text", "text": "q"}]},
        {"role": "assistant", "content": [
            {"type": "reasoning", "text": "think ", "provenance": "deepseek"},
            {"type": "reasoning", "text": "more", "provenance": "deepseek"},
            {"type": "reasoning", "text": "", "redactedData": "x", "provenance": "deepseek"},
            {"type": "tool_use", "id": "c1", "name": "t", "input": {"a": 1}},
        ]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "ok"}]},
        {"role": "assistant", "content": [
            {"type": "reasoning", "text": "final", "provenance": "deepseek"},
            {"type": "reasoning", "text": "foreign", "provenance": "anthropic"},
            {"type": "text", "text": "done"},
        ]},
    ]);
    let deepseek = preset("deepseek").unwrap();
    let mut req = request(tool_turn.clone());
    let m = body_with(&deepseek, &req)["messages"].clone();
    assert_eq!(
        m[1],
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{\"a\":1}"}},
        ], "reasoning_content": "think more"})
    );
    assert_eq!(
        m[3],
        json!({"role": "assistant", "content": "done", "reasoning_content": "final"})
    );
    // Foreign reasoning takes the text path; own reasoning is still echoed natively.
    req.preserve_reasoning_as_text = true;
    assert_eq!(
        body_with(&deepseek, &req)["messages"][3],
        json!({"role": "assistant", "content": "<thinking>foreign</thinking>done", "reasoning_content": "final"})
    );
    // Plain OpenAI never echoes: DeepSeek reasoning is foreign there.
    assert_eq!(
        body_with(&OpenAi::default(), &req)["messages"][3],
        json!({"role": "assistant", "content": "<thinking>final</thinking><thinking>foreign</thinking>done"})
    );
    // Without any tool call in the conversation, own reasoning is dropped, even when opted in.
    let plain = ChatRequest {
        preserve_reasoning_as_text: true,
        ..request(json!([
            {"role": "assistant", "content": [
                {"type": "reasoning", "text": "mine", "provenance": "deepseek"},
                {"type": "text", "text": "hi"},
            ]},
        ]))
    };
    assert_eq!(
        body_with(&deepseek, &plain)["messages"],
        json!([{"role": "assistant", "content": "hi"}])
    );
    // MiMo and Hunyuan echo their own provenance the same way.
    for name in ["mimo", "hunyuan"] {
        let req = request(json!([
            {"role": "assistant", "content": [
                {"type": "reasoning", "text": "r", "provenance": name},
                {"type": "tool_use", "id": "c", "name": "t", "input": {}},
            ]},
        ]));
        assert_eq!(
            body_with(&preset(name).unwrap(), &req)["messages"][0]["reasoning_content"],
            json!("r"),
            "{name}"
        );
    }
}

#[test]
fn large_video_is_written_verbatim() {
    let data = "QUJD".repeat(3 * 1024 * 1024); // 12 MiB of base64
    let req = ChatRequest {
        model: "MiniMax-M3".into(),
        messages: vec![LlmMessage {
            role: crate::message::Role::User,
            content: vec![
                crate::message::ContentBlock::Text(crate::message::TextBlock {
                    text: "describe".into(),
                }),
                crate::message::ContentBlock::Video(crate::message::VideoBlock {
                    source: crate::message::MediaSource::Base64 {
                        media_type: "video/mp4".into(),
                        data: data.clone(),
                    },
                }),
            ],
        }],
        ..ChatRequest::default()
    };
    let http = preset("minimax").unwrap().format(&req, &key()).unwrap();
    let prefix = r#"{"model":"MiniMax-M3","messages":[{"role":"user","content":[{"type":"text","text":"describe"},{"type":"video_url","video_url":{"url":"data:video/mp4;base64,"#;
    let suffix = r#""}}]}],"stream":false}"#;
    assert_eq!(http.body.len(), prefix.len() + data.len() + suffix.len());
    assert!(http.body.starts_with(prefix));
    assert!(http.body.ends_with(suffix));
    assert!(http.body[prefix.len()..].starts_with(data.as_str()));
}
