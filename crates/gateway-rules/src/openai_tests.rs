//! `/v1/chat/completions` through the request machine and its blocking loop
//! ([`serve`](crate::serve::serve)), natively: a scripted exchange (the client's request, the
//! response written) and a scripted transport (each provider's answers, every request that
//! reached it recorded).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use serde_json::{json, Value};

use oma_core::http::call::{CallAnswer, Outgoing};
use oma_step::Transport;

use crate::request::{BodyFailure, BodyLimits, RequestHead, RequestMachine};
use crate::serve::Exchange;
use crate::{Reply, Settings};

pub(crate) const KEY: &str = "sk-chat-unit-SECRET-7171";
pub(crate) const OPENAI_KEY: &str = "sk-openai-unit-SECRET-9191";
pub(crate) const TOKEN: &str = "gw-token-SECRET-5";
const NOW: u64 = 1_796_036_400_000;
pub(crate) const ANTHROPIC: &str = "http://127.0.0.1:9";
pub(crate) const OPENAI: &str = "http://127.0.0.1:8";

/// One provider answer: status, content type, body.
pub(crate) type Canned = (u16, &'static str, String);

#[derive(Default)]
pub(crate) struct Script {
    pub(crate) answers: VecDeque<Canned>,
    pub(crate) sent: Vec<Outgoing>,
    body: VecDeque<Vec<u8>>,
    /// The lines the gateway wrote to the host's log.
    pub(crate) log: Vec<String>,
}

#[derive(Clone, Default)]
pub(crate) struct Scripted(pub(crate) Rc<RefCell<Script>>);

impl Transport for Scripted {
    fn send(&mut self, outgoing: &Outgoing) -> CallAnswer {
        let mut script = self.0.borrow_mut();
        script.sent.push(outgoing.clone());
        let (status, kind, body) = script.answers.pop_front().expect("a scripted answer");
        // The body in two pieces, as a network would split it.
        let bytes = body.into_bytes();
        let half = bytes.len() / 2;
        script.body = VecDeque::from([bytes[..half].to_vec(), bytes[half..].to_vec()]);
        CallAnswer::Head {
            status,
            headers: vec![("content-type".into(), kind.into())],
        }
    }

    fn receive(&mut self) -> CallAnswer {
        match self.0.borrow_mut().body.pop_front() {
            Some(chunk) => CallAnswer::Chunk(chunk),
            None => CallAnswer::End,
        }
    }

    fn wait(&mut self, _: u64) -> CallAnswer {
        CallAnswer::Waited
    }

    fn now_ms(&self) -> u64 {
        NOW
    }
}

/// A client's request and what the gateway wrote back.
pub(crate) struct Client {
    pub(crate) headers: Vec<(&'static str, String)>,
    pub(crate) body: Vec<u8>,
    pub(crate) transport: Scripted,
    pub(crate) reply: Option<Reply>,
    pub(crate) events: Option<String>,
}

impl Exchange for Client {
    type Transport = Scripted;

    fn read_body(&mut self, _: &BodyLimits) -> Result<Vec<u8>, BodyFailure> {
        Ok(std::mem::take(&mut self.body))
    }
    fn respond(&mut self, reply: &Reply) {
        assert!(
            self.reply.is_none() && self.events.is_none(),
            "answered twice"
        );
        self.reply = Some(reply.clone());
    }
    fn open_events(&mut self) -> bool {
        assert!(self.reply.is_none(), "a stream after a reply");
        self.events = Some(String::new());
        true
    }
    fn write_events(&mut self, bytes: &[u8]) -> bool {
        let events = self.events.as_mut().expect("the stream is open");
        events.push_str(std::str::from_utf8(bytes).expect("UTF-8"));
        true
    }
    fn close_events(&mut self) {}
    fn transport(&mut self) -> Scripted {
        self.transport.clone()
    }
    fn log(&mut self, line: &str) {
        self.transport.0.borrow_mut().log.push(line.to_owned());
    }
}

/// Serves `client`'s request (`method`, `path`, its headers and body) with `settings`, at
/// [`NOW`]; the status answered.
pub(crate) fn serve(
    settings: Result<Settings, crate::env::BadVariable>,
    method: &str,
    path: &str,
    client: &mut Client,
) -> u16 {
    let head = RequestHead {
        method: method.into(),
        path: path.into(),
        headers: client
            .headers
            .iter()
            .map(|(name, value)| ((*name).to_owned(), value.clone()))
            .collect(),
    };
    crate::serve::serve(RequestMachine::new(settings, head, NOW, 42), client)
}

/// The lines of `log` other than each request's own line.
fn dropped_exports(log: &[String]) -> Vec<&str> {
    log.iter()
        .map(String::as_str)
        .filter(|line| line.contains("trace export dropped"))
        .collect()
}

fn environment(extra: &[(&str, &str)]) -> Result<Settings, crate::env::BadVariable> {
    let mut vars = vec![
        ("ANTHROPIC_API_KEY", KEY),
        ("ANTHROPIC_BASE_URL", ANTHROPIC),
        ("OPENAI_API_KEY", OPENAI_KEY),
        ("OPENAI_BASE_URL", OPENAI),
        ("MINIMAX_API_KEY", KEY),
        ("MINIMAX_BASE_URL", OPENAI),
        ("OMA_GATEWAY_TOKEN", TOKEN),
        ("OMA_GATEWAY_MAX_RETRIES", "0"),
    ];
    vars.extend_from_slice(extra);
    Settings::from_vars(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())))
}

pub(crate) struct Answered {
    /// The lines the gateway wrote to the host's log.
    pub(crate) log: Vec<String>,
    pub(crate) status: u16,
    pub(crate) reply: Option<Reply>,
    pub(crate) events: Option<String>,
    pub(crate) sent: Vec<Outgoing>,
}

impl Answered {
    pub(crate) fn json(&self) -> Value {
        let reply = self.reply.as_ref().expect("a whole reply");
        assert!(!reply.body.contains("SECRET"), "a secret in {}", reply.body);
        serde_json::from_str(&reply.body).expect("JSON")
    }

    pub(crate) fn sent_json(&self, i: usize) -> Value {
        serde_json::from_str(&self.sent[i].body).expect("a JSON request")
    }

    /// The data of each server-sent event, `[DONE]` as a string.
    fn chunks(&self) -> Vec<Value> {
        let text = self.events.as_ref().expect("a stream");
        assert!(!text.contains("SECRET"), "a secret in {text}");
        text.split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| {
                let data = e.strip_prefix("data: ").expect("data lines only");
                serde_json::from_str(data).unwrap_or_else(|_| json!(data))
            })
            .collect()
    }
}

fn call_with(
    settings: Result<Settings, crate::env::BadVariable>,
    headers: Vec<(&'static str, String)>,
    body: &Value,
    answers: Vec<Canned>,
) -> Answered {
    let transport = Scripted::default();
    transport.0.borrow_mut().answers = answers.into();
    let mut client = Client {
        headers,
        body: body.to_string().into_bytes(),
        transport: transport.clone(),
        reply: None,
        events: None,
    };
    let status = serve(settings, "POST", "/v1/chat/completions", &mut client);
    let sent = std::mem::take(&mut transport.0.borrow_mut().sent);
    let log = std::mem::take(&mut transport.0.borrow_mut().log);
    Answered {
        status,
        reply: client.reply,
        events: client.events,
        sent,
        log,
    }
}

fn call(body: &Value, answers: Vec<Canned>) -> Answered {
    let auth = vec![("authorization", format!("Bearer {TOKEN}"))];
    call_with(environment(&[]), auth, body, answers)
}

fn anthropic_answer(content: Value, stop: &str) -> Canned {
    let body = json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
        "content": content, "stop_reason": stop,
        "usage": {"input_tokens": 11, "output_tokens": 7},
    });
    (200, "application/json", body.to_string())
}

fn openai_answer(text: &str) -> Canned {
    let body = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
    });
    (200, "application/json", body.to_string())
}

fn hello(model: &str) -> Value {
    json!({
        "model": model,
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hello?"},
        ],
        "max_tokens": 64,
        "temperature": 0.5,
    })
}

/// The OpenAI-shaped error of a refusal, checked for its shape.
fn openai_error(answered: &Answered, status: u16) -> Value {
    assert_eq!(answered.status, status, "{:?}", answered.reply);
    let body = answered.json();
    let error = &body["error"];
    for field in ["message", "type", "param", "code"] {
        assert!(error.get(field).is_some(), "no {field} in {body}");
    }
    body
}

#[test]
fn a_plain_completion_answers_a_chat_completion_with_usage() {
    let answered = call(
        &hello("anthropic/claude-x"),
        vec![anthropic_answer(
            json!([{"type": "text", "text": "Hi."}]),
            "end_turn",
        )],
    );
    assert_eq!(answered.status, 200);
    let body = answered.json();
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["model"], "anthropic/claude-x");
    assert_eq!(body["choices"][0]["message"]["role"], "assistant");
    assert_eq!(body["choices"][0]["message"]["content"], "Hi.");
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    assert_eq!(
        body["usage"],
        json!({"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18})
    );
    // Anthropic's own request: the system prompt apart, the sampling carried.
    assert_eq!(answered.sent.len(), 1);
    assert!(answered.sent[0].url.starts_with(ANTHROPIC));
    let sent = answered.sent_json(0);
    assert_eq!(sent["system"], "Be brief.");
    assert_eq!(sent["model"], "claude-x");
    assert_eq!(sent["max_tokens"], 64);
    assert_eq!(sent["messages"][0]["content"][0]["text"], "Hello?");
}

#[test]
fn what_oma_refuses_is_a_400_with_omas_message_and_nothing_is_sent() {
    for (url, fragment) in [
        ("file:///etc/passwd", "http"),
        ("data:video/mp4;base64,AAB", "base64"),
        ("data:video/mp4;codecs=avc1;base64,AAAA", "parameters"),
    ] {
        let body = json!({
            "model": "minimax/MiniMax-M1",
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": "What is in it?"},
                {"type": "video_url", "video_url": {"url": url}},
            ]}],
        });
        let answered = call(&body, vec![openai_answer("sent")]);
        assert_eq!(answered.status, 400, "{url}");
        let error = openai_error(&answered, 400);
        assert_eq!(error["error"]["type"], "invalid_request_error");
        assert_eq!(error["error"]["code"], "InvalidMessageError", "{error}");
        let message = error["error"]["message"].as_str().unwrap();
        assert!(
            message.to_lowercase().contains(fragment),
            "{url}: {message}"
        );
        assert!(answered.sent.is_empty(), "{url} reached the provider");
    }
}

#[test]
fn a_video_to_anthropic_is_refused_before_any_request_and_reaches_minimax_as_video_url() {
    let video = |model: &str| {
        json!({
            "model": model,
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": "Describe it."},
                {"type": "video_url", "video_url": {"url": "https://example.com/clip.mp4"}},
            ]}],
        })
    };
    let refused = call(&video("anthropic/claude-x"), vec![]);
    let error = openai_error(&refused, 400);
    assert_eq!(error["error"]["code"], "UnsupportedContentBlockError");
    assert!(refused.sent.is_empty());

    let answered = call(&video("minimax/MiniMax-M1"), vec![openai_answer("A cat.")]);
    assert_eq!(answered.status, 200, "{:?}", answered.reply);
    assert_eq!(answered.json()["model"], "minimax/gpt-4o");
    let sent = answered.sent_json(0);
    let parts = sent["messages"][0]["content"].as_array().unwrap();
    assert!(
        parts
            .iter()
            .any(|p| p["type"] == "video_url"
                && p["video_url"]["url"] == "https://example.com/clip.mp4"),
        "{sent}"
    );
}

#[test]
fn an_image_by_data_url_is_carried_inline_and_one_by_https_url_as_its_url() {
    let image = |model: &str, url: &str| {
        json!({
            "model": model,
            "messages": [{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": url}},
            ]}],
        })
    };
    let answered = call(
        &image("anthropic/claude-x", "data:image/png;base64,iVBORw0KGgo="),
        vec![anthropic_answer(
            json!([{"type": "text", "text": "A dot."}]),
            "end_turn",
        )],
    );
    assert_eq!(answered.status, 200);
    let block = &answered.sent_json(0)["messages"][0]["content"][0];
    assert_eq!(block["type"], "image");
    assert_eq!(block["source"]["media_type"], "image/png");
    assert_eq!(block["source"]["data"], "iVBORw0KGgo=");

    // By URL: the provider fetches it, in its own format's image-URL shape.
    let url = "https://example.com/a.png?size=2";
    let answered = call(
        &image("anthropic/claude-x", url),
        vec![anthropic_answer(
            json!([{"type": "text", "text": "A dot."}]),
            "end_turn",
        )],
    );
    assert_eq!(answered.status, 200, "{:?}", answered.reply);
    let block = &answered.sent_json(0)["messages"][0]["content"][0];
    assert_eq!(
        block,
        &json!({"type": "image", "source": {"type": "url", "url": url}})
    );

    let answered = call(&image("openai/gpt-4o", url), vec![openai_answer("A dot.")]);
    assert_eq!(answered.status, 200, "{:?}", answered.reply);
    let part = &answered.sent_json(0)["messages"][0]["content"][0];
    assert_eq!(
        part,
        &json!({"type": "image_url", "image_url": {"url": url}})
    );
}

#[test]
fn an_image_url_breaking_the_media_rules_or_to_bedrock_is_refused_before_any_request() {
    let image = |model: &str, url: &str| {
        json!({
            "model": model,
            "messages": [{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": url}},
            ]}],
        })
    };
    for url in [
        "file:///etc/passwd",
        "/relative/a.png",
        "ftp://example.com/a.png",
    ] {
        let refused = call(&image("openai/gpt-4o", url), vec![openai_answer("sent")]);
        let error = openai_error(&refused, 400);
        assert_eq!(
            error["error"]["code"], "InvalidMessageError",
            "{url}: {error}"
        );
        assert!(
            error["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("messages[0].content[0].source"),
            "{error}"
        );
        assert!(refused.sent.is_empty(), "{url} reached the provider");
    }
    // Bedrock Converse takes an image's bytes only.
    let bedrock = environment(&[
        ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", "http://127.0.0.1:7"),
        ("AWS_BEARER_TOKEN_BEDROCK", "bear-SECRET"),
        ("AWS_REGION", "us-east-1"),
    ]);
    let auth = vec![("authorization", format!("Bearer {TOKEN}"))];
    let refused = call_with(
        bedrock,
        auth,
        &image("bedrock/anthropic.claude-x", "https://example.com/a.png"),
        vec![],
    );
    let error = openai_error(&refused, 400);
    assert_eq!(
        error["error"]["code"], "UnsupportedContentBlockError",
        "{error}"
    );
    assert!(refused.sent.is_empty());
}

#[test]
fn a_tool_call_round_trip() {
    let tools = json!([{"type": "function", "function": {
        "name": "weather", "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }}]);
    let ask = json!({
        "model": "anthropic/claude-x",
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": tools,
    });
    let answered = call(
        &ask,
        vec![anthropic_answer(
            json!([{"type": "tool_use", "id": "toolu_1", "name": "weather",
                    "input": {"city": "Paris"}}]),
            "tool_use",
        )],
    );
    let body = answered.json();
    assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
    let call0 = &body["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call0["id"], "toolu_1");
    assert_eq!(call0["type"], "function");
    assert_eq!(call0["function"]["name"], "weather");
    assert_eq!(
        serde_json::from_str::<Value>(call0["function"]["arguments"].as_str().unwrap()).unwrap(),
        json!({"city": "Paris"})
    );
    assert_eq!(answered.sent_json(0)["tools"][0]["name"], "weather");

    let follow = json!({
        "model": "anthropic/claude-x",
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": null, "tool_calls": [call0]},
            {"role": "tool", "tool_call_id": "toolu_1", "content": "Sunny, 21 C"},
        ],
        "tools": tools,
    });
    let answered = call(
        &follow,
        vec![anthropic_answer(
            json!([{"type": "text", "text": "Sunny."}]),
            "end_turn",
        )],
    );
    assert_eq!(
        answered.json()["choices"][0]["message"]["content"],
        "Sunny."
    );
    let sent = answered.sent_json(0);
    assert_eq!(sent["messages"][1]["content"][0]["type"], "tool_use");
    assert_eq!(sent["messages"][2]["role"], "user");
    assert_eq!(sent["messages"][2]["content"][0]["type"], "tool_result");
    assert_eq!(sent["messages"][2]["content"][0]["tool_use_id"], "toolu_1");
}

#[test]
fn a_stream_is_openais_chunks_with_usage_last_and_done() {
    let sse = [
        r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"usage":{"input_tokens":11,"output_tokens":0}}}"#,
        r#"event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        r#"event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}"#,
        r#"event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo."}}"#,
        r#"event: content_block_stop
data: {"type":"content_block_stop","index":0}"#,
        r#"event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":7}}"#,
        r#"event: message_stop
data: {"type":"message_stop"}"#,
    ]
    .join("\n\n")
        + "\n\n";
    let mut body = hello("anthropic/claude-x");
    body["stream"] = json!(true);
    body["stream_options"] = json!({"include_usage": true});
    let answered = call(&body, vec![(200, "text/event-stream", sse)]);
    assert_eq!(answered.status, 200);
    assert!(
        answered.reply.is_none(),
        "a whole reply instead of a stream"
    );
    assert_eq!(answered.sent_json(0)["stream"], true);
    let chunks = answered.chunks();
    assert_eq!(chunks.last().unwrap(), &json!("[DONE]"));
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "Hello.");
    assert!(chunks[..chunks.len() - 1]
        .iter()
        .all(|c| c["object"] == "chat.completion.chunk"));
    let finish = &chunks[chunks.len() - 3];
    assert_eq!(finish["choices"][0]["finish_reason"], "stop");
    let usage = &chunks[chunks.len() - 2];
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["prompt_tokens"], 11);
    assert_eq!(usage["usage"]["completion_tokens"], 7);
}

#[test]
fn a_retryable_failure_falls_back_and_a_400_never_does() {
    let fallbacks = r#"{"anthropic/claude-x": ["openai/gpt-4o"]}"#;
    let auth = || vec![("authorization", format!("Bearer {TOKEN}"))];
    let failing = |status: u16| -> Canned {
        let body = json!({"type": "error", "error": {"type": "api_error", "message": "down"}});
        (status, "application/json", body.to_string())
    };
    for status in [500, 429, 503] {
        let answered = call_with(
            environment(&[("OMA_GATEWAY_FALLBACKS", fallbacks)]),
            auth(),
            &hello("anthropic/claude-x"),
            vec![failing(status), openai_answer("From OpenAI.")],
        );
        assert_eq!(answered.status, 200, "{status}: {:?}", answered.reply);
        let body = answered.json();
        assert_eq!(body["model"], "openai/gpt-4o");
        assert_eq!(body["choices"][0]["message"]["content"], "From OpenAI.");
        assert_eq!(answered.sent.len(), 2);
        assert!(answered.sent[0].url.starts_with(ANTHROPIC));
        assert!(answered.sent[1].url.starts_with(OPENAI));
        // Each provider gets its own key, and the conversation in its own format.
        let openai = answered.sent_json(1);
        assert_eq!(openai["model"], "gpt-4o");
        assert_eq!(openai["messages"][0]["role"], "system");
    }

    let answered = call_with(
        environment(&[("OMA_GATEWAY_FALLBACKS", fallbacks)]),
        auth(),
        &hello("anthropic/claude-x"),
        vec![failing(400), openai_answer("never")],
    );
    let error = openai_error(&answered, 400);
    assert_eq!(error["error"]["code"], "ProviderError", "{error}");
    assert_eq!(answered.sent.len(), 1, "a 400 was tried elsewhere");

    // Without fallbacks a 500 is the provider's, as a 500.
    let answered = call(&hello("anthropic/claude-x"), vec![failing(500)]);
    openai_error(&answered, 500);
}

#[test]
fn fallbacks_must_name_provider_and_model() {
    for bad in [
        "[]",
        r#"{"claude": ["openai/gpt-4o"]}"#,
        r#"{"a/b": "openai/gpt-4o"}"#,
        "{",
    ] {
        let bad = environment(&[("OMA_GATEWAY_FALLBACKS", bad)]).expect_err(bad);
        assert_eq!(bad.name, "OMA_GATEWAY_FALLBACKS");
    }
}

#[test]
fn the_token_is_taken_as_bearer_or_x_api_key_and_a_401_is_openais() {
    let answer = || {
        vec![anthropic_answer(
            json!([{"type": "text", "text": "Hi."}]),
            "end_turn",
        )]
    };
    let by_key = call_with(
        environment(&[]),
        vec![("x-api-key", TOKEN.to_owned())],
        &hello("anthropic/claude-x"),
        answer(),
    );
    assert_eq!(by_key.status, 200);
    for headers in [
        vec![],
        vec![("authorization", "Bearer wrong".to_owned())],
        vec![("x-api-key", "wrong".to_owned())],
    ] {
        let refused = call_with(
            environment(&[]),
            headers,
            &hello("anthropic/claude-x"),
            vec![],
        );
        let error = openai_error(&refused, 401);
        assert_eq!(error["error"]["type"], "authentication_error");
        assert!(refused.sent.is_empty());
    }
}

#[test]
fn a_model_without_a_provider_or_an_unconfigured_provider_is_refused() {
    let refused = call(&hello("gpt-4o"), vec![]);
    let error = openai_error(&refused, 400);
    assert!(error["error"]["message"]
        .as_str()
        .unwrap()
        .contains("<provider>/<model>"));
    let refused = call(&hello("gemini/gemini-2.5-pro"), vec![]);
    openai_error(&refused, 403);
    assert!(refused.sent.is_empty());
    // A key typed into the model name is never echoed.
    let refused = call(&hello(KEY), vec![]);
    openai_error(&refused, 400);
}

#[test]
fn models_lists_the_configured_models_of_reachable_providers() {
    let settings = environment(&[
        (
            "OMA_GATEWAY_MODELS",
            "anthropic/claude-x, gemini/gemini-2.5-pro,openai/gpt-4o",
        ),
        (
            "OMA_GATEWAY_FALLBACKS",
            r#"{"anthropic/claude-x": ["minimax/MiniMax-M1"]}"#,
        ),
    ])
    .expect("valid");
    let guarded = crate::route(
        &settings,
        &crate::Head {
            method: "GET",
            path: "/v1/models",
            ..crate::Head::default()
        },
    )
    .expect_err("the token is required");
    assert_eq!(guarded.status, 401);
    let with_key = crate::Head {
        method: "GET",
        path: "/v1/models",
        api_key: Some(TOKEN),
        ..crate::Head::default()
    };
    let crate::HeadVerdict::Reply(reply) = crate::on_head(Ok(&settings), &with_key) else {
        panic!("/v1/models reads no body")
    };
    let body: Value = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(body["object"], "list");
    let ids: Vec<&str> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    // Gemini has no key here: not listed.
    assert_eq!(
        ids,
        ["anthropic/claude-x", "openai/gpt-4o", "minimax/MiniMax-M1"]
    );
    assert_eq!(body["data"][0]["object"], "model");
    assert_eq!(body["data"][0]["owned_by"], "anthropic");
    let bad = environment(&[("OMA_GATEWAY_MODELS", "gpt-4o")]).expect_err("no provider");
    assert_eq!(bad.name, "OMA_GATEWAY_MODELS");
}

fn messages_call(
    headers: Vec<(&'static str, String)>,
    body: &Value,
    answers: Vec<Canned>,
) -> Answered {
    let transport = Scripted::default();
    transport.0.borrow_mut().answers = answers.into();
    let mut client = Client {
        headers,
        body: body.to_string().into_bytes(),
        transport: transport.clone(),
        reply: None,
        events: None,
    };
    let status = serve(environment(&[]), "POST", "/v1/messages", &mut client);
    let sent = std::mem::take(&mut transport.0.borrow_mut().sent);
    let log = std::mem::take(&mut transport.0.borrow_mut().log);
    Answered {
        status,
        reply: client.reply,
        events: client.events,
        sent,
        log,
    }
}

#[test]
fn messages_answers_anthropics_shape_in_front_of_any_provider() {
    let key = || vec![("x-api-key", TOKEN.to_owned())];
    let body = json!({
        "model": "openai/gpt-4o",
        "max_tokens": 64,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "Hello?"}],
    });
    let answered = messages_call(key(), &body, vec![openai_answer("Hi.")]);
    assert_eq!(answered.status, 200, "{:?}", answered.reply);
    let message = answered.json();
    assert_eq!(message["type"], "message");
    assert_eq!(message["role"], "assistant");
    assert_eq!(message["content"], json!([{"type": "text", "text": "Hi."}]));
    assert_eq!(message["stop_reason"], "end_turn");
    assert_eq!(
        message["usage"],
        json!({"input_tokens": 5, "cache_creation_input_tokens": 0,
               "cache_read_input_tokens": 0, "output_tokens": 3})
    );
    assert!(answered.sent[0].url.starts_with(OPENAI));
    assert_eq!(answered.sent_json(0)["messages"][0]["content"], "Be brief.");

    // A bare model name is Anthropic's; a stream is Anthropic's events.
    let sse = [
        r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"usage":{"input_tokens":11,"output_tokens":0}}}"#,
        r#"event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        r#"event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#,
        r#"event: content_block_stop
data: {"type":"content_block_stop","index":0}"#,
        r#"event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":7}}"#,
        r#"event: message_stop
data: {"type":"message_stop"}"#,
    ]
    .join("\n\n")
        + "\n\n";
    let body = json!({
        "model": "claude-x", "max_tokens": 64, "stream": true,
        "messages": [{"role": "user", "content": "Hello?"}],
    });
    let answered = messages_call(key(), &body, vec![(200, "text/event-stream", sse)]);
    assert!(answered.sent[0].url.starts_with(ANTHROPIC));
    let text = answered.events.expect("a stream");
    let names: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("event: "))
        .collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    assert!(text.contains(r#""text":"Hi""#), "{text}");
    assert!(text.contains(r#""output_tokens":7"#), "{text}");

    // Refusals in Anthropic's error shape, nothing sent.
    let video = json!({
        "model": "anthropic/claude-x", "max_tokens": 64,
        "messages": [{"role": "user", "content": [{"type": "video",
            "source": {"type": "url", "media_type": "video/mp4", "url": "https://example.com/a.mp4"}}]}],
    });
    let refused = messages_call(key(), &video, vec![]);
    assert_eq!(refused.status, 400);
    let error = refused.json();
    assert_eq!(error["type"], "error");
    assert_eq!(error["error"]["type"], "invalid_request_error");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("video"),
        "{error}"
    );
    assert!(refused.sent.is_empty());
    let refused = messages_call(vec![], &body, vec![]);
    assert_eq!(refused.status, 401);
    assert_eq!(refused.json()["error"]["type"], "authentication_error");
}

/// The spans of an OTLP/HTTP JSON export.
fn spans_of(body: &str) -> Vec<Value> {
    let body: Value = serde_json::from_str(body).expect("the export is JSON");
    body["resourceSpans"][0]["scopeSpans"][0]["spans"]
        .as_array()
        .expect("spans")
        .clone()
}

/// The value of the attribute `key` of `span`; `null` when it has none.
fn attribute(span: &Value, key: &str) -> Value {
    span["attributes"]
        .as_array()
        .expect("attributes")
        .iter()
        .find(|a| a["key"] == key)
        .map_or(Value::Null, |a| a["value"].clone())
}

#[test]
fn traces_are_exported_after_the_answer_with_a_span_per_provider_call() {
    const COLLECTOR: &str = "http://127.0.0.1:4318";
    let settings = environment(&[
        (
            "OMA_GATEWAY_FALLBACKS",
            r#"{"anthropic/claude-x": ["openai/gpt-4o"]}"#,
        ),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", COLLECTOR),
    ]);
    let failing = {
        let body = json!({"type": "error", "error": {"type": "api_error", "message": "down"}});
        (503, "application/json", body.to_string())
    };
    let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let answered = call_with(
        settings,
        vec![
            ("authorization", format!("Bearer {TOKEN}")),
            ("traceparent", parent.to_owned()),
        ],
        &hello("anthropic/claude-x"),
        vec![
            failing,
            openai_answer("Hi."),
            (200, "application/json", "{}".into()),
        ],
    );
    assert_eq!(answered.status, 200);
    assert_eq!(
        answered.sent.len(),
        3,
        "the provider calls, then the export"
    );
    let export = &answered.sent[2];
    assert_eq!(export.url, format!("{COLLECTOR}/v1/traces"));
    assert!(!export.body.contains("SECRET"), "a key in a span");
    assert!(!export.body.contains("Hello?"), "message content in a span");
    let spans = spans_of(&export.body);
    assert_eq!(spans.len(), 3);
    let request = &spans[0];
    assert_eq!(request["traceId"], "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(request["parentSpanId"], "00f067aa0ba902b7");
    assert_eq!(request["kind"], 2);
    let (failed, answered_span) = (&spans[1], &spans[2]);
    for span in [failed, answered_span] {
        assert_eq!(span["name"], "chat");
        assert_eq!(span["kind"], 3);
        assert_eq!(span["parentSpanId"], request["spanId"]);
        assert_eq!(span["traceId"], request["traceId"]);
        assert_eq!(span["spanId"].as_str().map(str::len), Some(16));
        assert_eq!(
            attribute(span, "gen_ai.operation.name"),
            json!({"stringValue": "chat"})
        );
        assert_eq!(
            attribute(span, "oma.span.kind"),
            json!({"stringValue": "llm"})
        );
    }
    assert_ne!(failed["spanId"], answered_span["spanId"]);
    assert_eq!(
        attribute(failed, "gen_ai.provider.name"),
        json!({"stringValue": "anthropic"})
    );
    assert_eq!(
        attribute(failed, "gen_ai.request.model"),
        json!({"stringValue": "claude-x"})
    );
    // OMA's classification of the failure: a provider error with its code (the provider's
    // error type) and HTTP status; its message stays out of the span.
    assert_eq!(
        attribute(failed, "error.type"),
        json!({"stringValue": "api_error"})
    );
    assert_eq!(
        attribute(failed, "oma.error.kind"),
        json!({"stringValue": "provider"})
    );
    assert_eq!(
        attribute(failed, "oma.error.http_status"),
        json!({"intValue": "503"})
    );
    assert_eq!(
        attribute(failed, "oma.status"),
        json!({"stringValue": "error"})
    );
    assert_eq!(failed["status"], json!({"code": 2, "message": "oma.error"}));
    assert!(!export.body.contains("down"), "a message in a span");
    let exception = &failed["events"][0];
    assert_eq!(exception["name"], "exception");
    assert_eq!(
        attribute(exception, "oma.error.kind"),
        json!({"stringValue": "provider"})
    );
    assert_eq!(
        attribute(answered_span, "gen_ai.request.model"),
        json!({"stringValue": "gpt-4o"})
    );
    assert_eq!(
        attribute(answered_span, "gen_ai.response.model"),
        json!({"stringValue": "gpt-4o"})
    );
    assert_eq!(
        attribute(answered_span, "gen_ai.usage.input_tokens"),
        json!({"intValue": "5"})
    );
    assert_eq!(
        attribute(answered_span, "oma.usage.output_tokens"),
        json!({"intValue": "3"})
    );
    assert_eq!(
        attribute(answered_span, "gen_ai.usage.output_tokens"),
        json!({"intValue": "3"})
    );
    assert_eq!(attribute(answered_span, "error.type"), Value::Null);
    assert_eq!(answered_span["status"], json!({"code": 0}));
    assert_eq!(
        attribute(answered_span, "oma.run.id"),
        attribute(failed, "oma.run.id"),
        "one request, one run id"
    );

    assert!(
        dropped_exports(&answered.log).is_empty(),
        "{:?}",
        answered.log
    );

    // A collector that refuses the export costs the client nothing; the drop is logged.
    let settings = environment(&[("OTEL_EXPORTER_OTLP_ENDPOINT", COLLECTOR)]);
    let refused = (503, "application/json", "{}".to_owned());
    let auth = vec![("authorization", format!("Bearer {TOKEN}"))];
    let dropped = call_with(
        settings,
        auth,
        &hello("openai/gpt-4o"),
        vec![openai_answer("Hi."), refused],
    );
    assert_eq!(dropped.status, 200);
    assert_eq!(dropped.sent.len(), 2, "the call, then the export");
    // The request's own line, then the drop.
    assert_eq!(
        dropped.log,
        [
            "oma-gateway: POST /v1/chat/completions 200 0ms\n",
            "oma-gateway: trace export dropped: the collector answered 503\n"
        ]
    );

    let bad = environment(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "not a url")]).expect_err("bad");
    assert_eq!(bad.name, "OTEL_EXPORTER_OTLP_ENDPOINT");
}

/// The value of the attribute `key` of a record span (`materializeRun`'s) as an OTLP value.
fn otlp_value(value: &Value) -> Value {
    match value {
        Value::String(text) => json!({"stringValue": text}),
        Value::Bool(flag) => json!({"boolValue": flag}),
        Value::Number(n) if n.is_i64() || n.is_u64() => json!({"intValue": n.to_string()}),
        Value::Number(n) => json!({"doubleValue": n.as_f64()}),
        Value::Array(items) => {
            json!({"arrayValue": {"values": items.iter().map(otlp_value).collect::<Vec<_>>()}})
        }
        other => panic!("no attribute value: {other}"),
    }
}

/// The spans of an export (the request's span aside) and the run a sink's records materialize
/// to agree span for span: the same ids, parents, names, kinds, times and statuses, every
/// exported attribute of a span with its record's value, and its events in order.
pub(crate) fn assert_spans_agree_with_records(spans: &[Value], records: &[Value]) {
    let run = oma_core::agent::observability::materialize::materialize_run(records.to_vec(), false)
        .expect("the records materialize")
        .expect("a run");
    let stored = run["spans"].as_array().expect("spans");
    let request = &spans[0];
    assert_eq!(request["kind"], 2, "the request's span first");
    assert_eq!(spans.len() - 1, stored.len(), "one span per record span");
    for span in stored {
        let id = &span["spanId"];
        let exported = spans
            .iter()
            .find(|s| s["spanId"] == *id)
            .unwrap_or_else(|| panic!("no exported span {id}"));
        assert_eq!(exported["traceId"], span["traceId"]);
        assert_eq!(exported["traceId"], request["traceId"], "one trace");
        match span.get("parentSpanId") {
            Some(parent) => assert_eq!(exported["parentSpanId"], *parent),
            None => panic!("a record span without a parent: the run continues the request"),
        }
        assert_eq!(exported["name"], span["name"]);
        let kind = if span["kind"] == "llm" { 3 } else { 1 };
        assert_eq!(exported["kind"], kind, "{}", span["name"]);
        let nanos = |ms: &Value| format!("{}000000", ms.as_u64().expect("ms"));
        assert_eq!(exported["startTimeUnixNano"], nanos(&span["startUnixMs"]));
        assert_eq!(exported["endTimeUnixNano"], nanos(&span["endUnixMs"]));
        let failed = matches!(
            span["status"].as_str(),
            Some("error" | "timeout" | "budget_exhausted")
        );
        assert_eq!(exported["status"]["code"], if failed { 2 } else { 0 });
        for (key, value) in span["attributes"].as_object().expect("attributes") {
            if crate::trace::is_exported_attribute(key) {
                assert_eq!(attribute(exported, key), otlp_value(value), "{key}");
            }
        }
        assert_eq!(
            attribute(exported, "oma.span.kind"),
            otlp_value(&span["kind"])
        );
        assert_eq!(attribute(exported, "oma.run.id"), otlp_value(&run["runId"]));
        let names: Vec<String> = span["events"]
            .as_array()
            .expect("events")
            .iter()
            .map(|e| format!("oma.{}", e["name"].as_str().expect("a name")))
            .collect();
        let exported_names: Vec<String> = exported["events"]
            .as_array()
            .expect("events")
            .iter()
            .map(|e| e["name"].as_str().expect("a name").to_owned())
            .filter(|name| name != "exception")
            .collect();
        assert_eq!(exported_names, names);
    }
    let root = stored
        .iter()
        .find(|s| s["kind"] == "run")
        .expect("a run span");
    assert_eq!(root["parentSpanId"], request["spanId"]);
}

/// A `/v1/run` is exported from the run's own trace records, the ones `"records": true`
/// returns (what a sink of OMA's would receive): its `oma.run` span under the request, the
/// agent's `invoke_agent` span under it, and under that each model call (`chat`, a failed one
/// with its error) and each tool call (`execute_tool`, the gateway's refusal an error), in the
/// client's trace. The reply holds no records unless asked for; `"trace": true` still gives
/// OMA's legacy events.
#[test]
fn a_run_is_exported_as_its_trace_records() {
    const COLLECTOR: &str = "http://127.0.0.1:4318";
    let settings = || environment(&[("OTEL_EXPORTER_OTLP_ENDPOINT", COLLECTOR)]);
    let tool_use = anthropic_answer(
        json!([{"type": "tool_use", "id": "tu_1", "name": "lookup", "input": {"q": "x"}}]),
        "tool_use",
    );
    let text = anthropic_answer(json!([{"type": "text", "text": "Done."}]), "end_turn");
    let run = |body: Value, answers: Vec<Canned>| {
        let transport = Scripted::default();
        transport.0.borrow_mut().answers = answers.into();
        let mut client = Client {
            headers: vec![
                ("authorization", format!("Bearer {TOKEN}")),
                (
                    "traceparent",
                    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_owned(),
                ),
            ],
            body: body.to_string().into_bytes(),
            transport: transport.clone(),
            reply: None,
            events: None,
        };
        let status = serve(settings(), "POST", "/v1/run", &mut client);
        let sent = std::mem::take(&mut transport.0.borrow_mut().sent);
        let reply: Value = serde_json::from_str(&client.reply.expect("a reply").body).unwrap();
        (status, reply, sent)
    };
    let body = |extra: Value| {
        let mut body = json!({"provider": "anthropic", "model": "claude-x", "prompt": "Go."});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    let ok = (200, "application/json", "{}".to_owned());
    let (status, reply, sent) = run(
        body(json!({})),
        vec![tool_use.clone(), text.clone(), ok.clone()],
    );
    assert_eq!(status, 200, "{reply}");
    assert!(
        reply.get("trace").is_none() && reply.get("records").is_none(),
        "not asked for: {reply}"
    );
    assert_eq!(sent.len(), 3, "two model calls, then the export");
    let export = &sent[2];
    assert_eq!(export.url, format!("{COLLECTOR}/v1/traces"));
    assert!(!export.body.contains("SECRET") && !export.body.contains("Go."));
    let spans = spans_of(&export.body);
    let names: Vec<&str> = spans.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "POST /v1/run",
            "oma.run",
            "invoke_agent",
            "chat",
            "execute_tool",
            "chat"
        ]
    );
    let (request, root, agent) = (&spans[0], &spans[1], &spans[2]);
    assert_eq!(request["traceId"], "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(request["parentSpanId"], "00f067aa0ba902b7");
    assert_eq!(root["parentSpanId"], request["spanId"]);
    assert_eq!(agent["parentSpanId"], root["spanId"]);
    assert_eq!(
        attribute(agent, "gen_ai.operation.name"),
        json!({"stringValue": "invoke_agent"})
    );
    assert_eq!(
        attribute(agent, "oma.agent.name"),
        json!({"stringValue": "gateway"})
    );
    assert_eq!(
        attribute(agent, "gen_ai.usage.input_tokens"),
        json!({"intValue": "22"})
    );
    for span in &spans[3..] {
        assert_eq!(span["parentSpanId"], agent["spanId"], "{span}");
        assert_eq!(span["traceId"], request["traceId"]);
        assert_eq!(span["spanId"].as_str().unwrap().len(), 16);
    }
    assert_eq!(
        attribute(&spans[3], "gen_ai.provider.name"),
        json!({"stringValue": "anthropic"})
    );
    assert_eq!(
        attribute(&spans[3], "gen_ai.response.model"),
        json!({"stringValue": "claude-x"})
    );
    let tool = &spans[4];
    assert_eq!(tool["kind"], 1);
    assert_eq!(
        attribute(tool, "gen_ai.tool.name"),
        json!({"stringValue": "lookup"})
    );
    assert_eq!(
        attribute(tool, "error.type"),
        json!({"stringValue": "tool"})
    );
    assert_eq!(tool["status"]["code"], 2);
    assert!(
        !export.body.contains(crate::NO_TOOLS),
        "a tool's output in a span"
    );

    // Asked for: the reply's records are what the export was made from, span for span.
    let (status, reply, sent) = run(
        body(json!({"records": true})),
        vec![tool_use.clone(), text.clone(), ok.clone()],
    );
    assert_eq!(status, 200, "{reply}");
    let records = reply["records"].as_array().expect("records");
    assert!(records.iter().all(|r| r["schemaVersion"] == 2));
    assert_spans_agree_with_records(&spans_of(&sent[2].body), records);

    // A provider that fails: the failed call is a span with OMA's classification of it, and
    // the run's spans end with the run's failure.
    let failing = (
        400,
        "application/json",
        json!({"type": "error", "error": {"type": "invalid_request_error", "message": "no"}})
            .to_string(),
    );
    let (_, reply, sent) = run(body(json!({"records": true})), vec![failing, ok.clone()]);
    assert_eq!(sent.len(), 2, "the failed call, then the export");
    let spans = spans_of(&sent.last().unwrap().body);
    assert_eq!(spans.len(), 4, "{spans:?}");
    assert_eq!(
        attribute(&spans[3], "oma.error.http_status"),
        json!({"intValue": "400"})
    );
    assert_eq!(spans[3]["status"]["code"], 2);
    assert_eq!(spans[1]["status"]["code"], 2, "the run failed");
    assert_spans_agree_with_records(&spans, reply["records"].as_array().expect("records"));

    // The legacy events, asked for on a run that answers, are OMA's four.
    let (_, reply, _) = run(
        body(json!({"trace": true})),
        vec![tool_use, text, ok_again()],
    );
    let kinds: Vec<&str> = reply["trace"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["llm_call", "tool_call", "llm_call", "agent"]);
}

fn ok_again() -> Canned {
    (200, "application/json", "{}".to_owned())
}

#[test]
fn a_tool_message_with_an_image_and_a_file_becomes_a_rich_tool_result() {
    let body = json!({
        "model": "anthropic/claude-x",
        "messages": [
            {"role": "user", "content": "Read it."},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "read_file", "arguments": "{\"path\": \"a\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": [
                {"type": "text", "text": "Here."},
                {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
                {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0xLjQ=",
                                          "filename": "r.pdf"}},
            ]},
        ],
    });
    let answered = call(
        &body,
        vec![anthropic_answer(
            json!([{"type": "text", "text": "Read."}]),
            "end_turn",
        )],
    );
    assert_eq!(answered.status, 200, "{:?}", answered.reply);
    let sent = answered.sent_json(0);
    let result = &sent["messages"][2]["content"][0];
    assert_eq!(result["type"], "tool_result", "{sent}");
    let content = result["content"].as_array().expect("rich content");
    assert_eq!(content[0], json!({"type": "text", "text": "Here."}));
    assert_eq!(
        content[1],
        json!({"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}})
    );
    // OMA's Anthropic format: the file as a document block right after the result.
    assert_eq!(
        content[2]["text"], "[File attachment follows: r.pdf]",
        "{sent}"
    );
    let document = &sent["messages"][2]["content"][1];
    assert_eq!(document["type"], "document", "{sent}");
    assert_eq!(document["source"]["data"], "JVBERi0xLjQ=");

    // A file part that breaks the media rules is OMA's 400, before any request.
    let mut bad = body.clone();
    bad["messages"][2]["content"][2]["file"]["file_data"] = json!("file:///etc/passwd");
    let refused = call(&bad, vec![]);
    let error = openai_error(&refused, 400);
    assert_eq!(error["error"]["code"], "InvalidMessageError", "{error}");
    assert!(refused.sent.is_empty());
}

/// An Anthropic answer holding every kind of block a coding agent gets back, with the prompt
/// cache's counts.
fn anthropic_thinking_answer() -> Canned {
    let body = json!({
        "id": "msg_t", "type": "message", "role": "assistant", "model": "claude-x",
        "content": [
            {"type": "thinking", "thinking": "Look first.", "signature": "EqQBCkgIARABGAIiQL"},
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
            {"type": "text", "text": "Reading it."},
            {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "/a"}}
        ],
        "stop_reason": "tool_use", "stop_sequence": null,
        "usage": {"input_tokens": 12, "cache_creation_input_tokens": 300,
                  "cache_read_input_tokens": 9000, "output_tokens": 40}
    });
    (200, "application/json", body.to_string())
}

#[test]
fn messages_answers_keep_thinking_blocks_and_the_cache_counts() {
    let key = || vec![("x-api-key", TOKEN.to_owned())];
    let body = json!({
        "model": "anthropic/claude-x", "max_tokens": 64,
        "messages": [{"role": "user", "content": "Why?"}],
    });
    let answered = messages_call(key(), &body, vec![anthropic_thinking_answer()]);
    assert_eq!(answered.status, 200, "{:?}", answered.reply);
    let message = answered.json();
    let (_, _, provider) = anthropic_thinking_answer();
    let provider: Value = serde_json::from_str(&provider).unwrap();
    assert_eq!(message["content"], provider["content"]);
    assert_eq!(message["usage"], provider["usage"]);
    assert_eq!(message["stop_reason"], "tool_use");

    // OpenAI's usage counts the cache's tokens among the prompt's, and names the read ones.
    let answered = call(
        &hello("anthropic/claude-x"),
        vec![anthropic_thinking_answer()],
    );
    assert_eq!(answered.status, 200, "{:?}", answered.reply);
    assert_eq!(
        answered.json()["usage"],
        json!({"prompt_tokens": 9312, "completion_tokens": 40, "total_tokens": 9352,
               "prompt_tokens_details": {"cached_tokens": 9000}})
    );

    // The span counts every input token, and the cache's apart; the record's own counts are
    // the provider's.
    const COLLECTOR: &str = "http://127.0.0.1:4318";
    let answered = call_with(
        environment(&[("OTEL_EXPORTER_OTLP_ENDPOINT", COLLECTOR)]),
        vec![("authorization", format!("Bearer {TOKEN}"))],
        &hello("anthropic/claude-x"),
        vec![
            anthropic_thinking_answer(),
            (200, "application/json", "{}".into()),
        ],
    );
    let spans = spans_of(&answered.sent[1].body);
    let chat = &spans[1];
    for (key, value) in [
        ("gen_ai.usage.input_tokens", "9312"),
        ("gen_ai.usage.output_tokens", "40"),
        ("gen_ai.usage.cache_creation.input_tokens", "300"),
        ("gen_ai.usage.cache_read.input_tokens", "9000"),
        ("oma.usage.input_tokens", "12"),
        ("oma.usage.cache_read_input_tokens", "9000"),
    ] {
        assert_eq!(attribute(chat, key), json!({"intValue": value}), "{key}");
    }
}

/// What Anthropic's own stream reader makes of a stream: the whole response.
fn read_anthropic_stream(text: &str) -> oma_core::message::LlmResponse {
    use oma_core::adapter::{anthropic::Anthropic, Adapter, ResponseContext, StreamEvent};
    let mut decoder = Anthropic.stream_decoder(&ResponseContext::default());
    let mut events = decoder.feed(text.as_bytes()).expect("a well-formed stream");
    events.extend(decoder.finish().expect("a complete stream"));
    match events.pop() {
        Some(StreamEvent::Done(response)) => response,
        other => panic!("no response: {other:?}"),
    }
}

#[test]
fn messages_streams_thinking_with_its_signature_and_the_early_usage() {
    let key = || vec![("x-api-key", TOKEN.to_owned())];
    let body = json!({
        "model": "anthropic/claude-x", "max_tokens": 2048, "stream": true,
        "messages": [{"role": "user", "content": "Why?"}],
    });
    let recorded = [
        include_str!("../../../fixtures/corpus/anthropic-thinking-stream.sse"),
        include_str!("../../../fixtures/corpus/anthropic-redacted-thinking-stream.sse"),
        include_str!("../../../fixtures/corpus/anthropic-cassette-tool-use-stream.sse"),
    ];
    for provider in recorded {
        let answered = messages_call(
            key(),
            &body,
            vec![(200, "text/event-stream", provider.to_owned())],
        );
        assert_eq!(answered.status, 200);
        let text = answered.events.expect("a stream");
        // Read back by Anthropic's reader, the gateway's stream is the provider's answer: the
        // thinking with its signature, the redacted blocks, the text, the calls, the usage.
        let (theirs, ours) = (
            read_anthropic_stream(provider),
            read_anthropic_stream(&text),
        );
        assert_eq!(ours.content, theirs.content, "{text}");
        assert_eq!(ours.usage, theirs.usage, "{text}");
        assert_eq!(ours.stop_reason, theirs.stop_reason);
    }

    // message_start carries the input and cache counts the provider's message_start reported.
    let provider = [
        r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"usage":{"input_tokens":1234,"cache_creation_input_tokens":10,"cache_read_input_tokens":5000,"output_tokens":1}}}"#,
        r#"event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}"#,
        r#"event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Hm."}}"#,
        r#"event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQB"}}"#,
        r#"event: content_block_stop
data: {"type":"content_block_stop","index":0}"#,
        r#"event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"thinking","thinking":"","signature":""}}"#,
        r#"event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"signature_delta","signature":"EqQC"}}"#,
        r#"event: content_block_stop
data: {"type":"content_block_stop","index":1}"#,
        r#"event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":7}}"#,
        r#"event: message_stop
data: {"type":"message_stop"}"#,
    ]
    .join("\n\n")
        + "\n\n";
    let answered = messages_call(key(), &body, vec![(200, "text/event-stream", provider)]);
    let text = answered.events.expect("a stream");
    let data: Vec<Value> = text
        .split("\n\n")
        .filter_map(|e| e.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(|d| serde_json::from_str(d).expect("JSON data"))
        .collect();
    assert_eq!(
        data[0]["message"]["usage"],
        json!({"input_tokens": 1234, "cache_creation_input_tokens": 10,
               "cache_read_input_tokens": 5000, "output_tokens": 1})
    );
    let kinds: Vec<String> = data
        .iter()
        .map(|d| {
            let kind = d["type"].as_str().unwrap_or_default();
            match d["delta"]["type"]
                .as_str()
                .or(d["content_block"]["type"].as_str())
            {
                Some(inner) => format!("{kind}:{inner}"),
                None => kind.to_owned(),
            }
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "message_start",
            "content_block_start:thinking",
            "content_block_delta:thinking_delta",
            "content_block_delta:signature_delta",
            "content_block_stop",
            // Two thinking blocks stay two: a signature ends its block.
            "content_block_start:thinking",
            "content_block_delta:signature_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
    );
    assert_eq!(data[5]["index"], 1);
}

/// The request shapes of Claude Code (`fixtures/claude-code/requests.json`).
fn claude_code_cases() -> Vec<Value> {
    let text = include_str!("../../../fixtures/claude-code/requests.json");
    let file: Value = serde_json::from_str(text).expect("the fixture is JSON");
    file["cases"].as_array().expect("cases").clone()
}

fn claude_code_case(name: &str) -> Value {
    claude_code_cases()
        .into_iter()
        .find(|case| case["name"] == name)
        .unwrap_or_else(|| panic!("no case {name}"))
}

#[test]
fn messages_keep_signed_thinking_and_cache_markers_across_tool_round_trips() {
    let key = || vec![("x-api-key", TOKEN.to_owned())];
    for name in [
        "first-turn-streamed",
        "tool-round-trip-with-signed-thinking",
        "interleaved-thinking-two-tool-calls",
    ] {
        let case = claude_code_case(name);
        let mut body = case["body"].clone();
        body["stream"] = json!(false);
        let answered = messages_call(key(), &body, vec![anthropic_thinking_answer()]);
        assert_eq!(answered.status, 200, "{name}: {:?}", answered.reply);
        let sent = answered.sent_json(0);
        for field in ["messages", "system", "tools", "thinking", "max_tokens"] {
            assert_eq!(sent[field], body[field], "{name}: {field}");
        }
    }

    // A target whose format takes no cache markers refuses them by name; nothing is sent.
    let mut body = claude_code_case("tool-round-trip-with-signed-thinking")["body"].clone();
    body["model"] = json!("openai/gpt-4o");
    let refused = messages_call(key(), &body, vec![]);
    assert_eq!(refused.status, 400);
    let message = refused.json()["error"]["message"].clone();
    assert!(
        message.as_str().unwrap().contains("cache_control"),
        "{message}"
    );
    assert!(refused.sent.is_empty());

    // A marker of a shape Anthropic does not define is refused by its path.
    for (control, expected) in [
        (
            json!({"type": "persistent"}),
            "system[0].cache_control.type",
        ),
        (
            json!({"type": "ephemeral", "scope": "x"}),
            "system[0].cache_control.scope",
        ),
        (
            json!("ephemeral"),
            "system[0].cache_control must be an object",
        ),
    ] {
        let body = json!({
            "model": "claude-x", "max_tokens": 64,
            "system": [{"type": "text", "text": "Be brief.", "cache_control": control}],
            "messages": [{"role": "user", "content": "Hi"}],
        });
        let refused = messages_call(key(), &body, vec![]);
        assert_eq!(refused.status, 400);
        let message = refused.json()["error"]["message"].clone();
        assert!(message.as_str().unwrap().contains(expected), "{message}");
        assert!(refused.sent.is_empty());
    }
}

/// Sends `body` (JSON text, as the client wrote it) to `path` with `headers`; what happened.
fn anthropic_at(
    settings: Result<Settings, crate::env::BadVariable>,
    method: &str,
    path: &str,
    headers: Vec<(&'static str, String)>,
    body: &str,
    answers: Vec<Canned>,
) -> Answered {
    let transport = Scripted::default();
    transport.0.borrow_mut().answers = answers.into();
    let mut client = Client {
        headers,
        body: body.as_bytes().to_vec(),
        transport: transport.clone(),
        reply: None,
        events: None,
    };
    let status = serve(settings, method, path, &mut client);
    let sent = std::mem::take(&mut transport.0.borrow_mut().sent);
    let log = std::mem::take(&mut transport.0.borrow_mut().log);
    Answered {
        status,
        reply: client.reply,
        events: client.events,
        sent,
        log,
    }
}

/// A streamed Anthropic answer with a signed thinking block, a text and its usage.
fn anthropic_thinking_stream() -> Canned {
    let events = [
        r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_s","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"usage":{"input_tokens":1234,"cache_creation_input_tokens":0,"cache_read_input_tokens":21000,"output_tokens":1}}}"#,
        r#"event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}"#,
        r#"event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Run it."}}"#,
        r#"event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCkgIARAB"}}"#,
        r#"event: content_block_stop
data: {"type":"content_block_stop","index":0}"#,
        r#"event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#,
        r#"event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Running."}}"#,
        r#"event: content_block_stop
data: {"type":"content_block_stop","index":1}"#,
        r#"event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":9}}"#,
        r#"event: message_stop
data: {"type":"message_stop"}"#,
    ];
    (200, "text/event-stream", events.join("\n\n") + "\n\n")
}

#[test]
fn claude_code_requests_reach_an_anthropic_target_byte_for_byte_but_the_model() {
    for case in claude_code_cases() {
        let name = case["name"].as_str().unwrap().to_owned();
        let path = case["path"].as_str().unwrap();
        let model = case["body"]["model"].as_str().unwrap().to_owned();
        // The body as the client writes it: compact, its keys in order.
        let written = serde_json::to_string(&case["body"]).unwrap();
        let counting = path.starts_with("/v1/messages/count_tokens");
        let streamed = case["body"]["stream"] == json!(true);
        // The model as Claude Code names it, and as a gateway client names it.
        for named in [model.clone(), format!("anthropic/{model}")] {
            let body = written.replacen(
                &format!("\"model\":\"{model}\""),
                &format!("\"model\":\"{named}\""),
                1,
            );
            let mut headers = vec![("x-api-key", TOKEN.to_owned())];
            for (header, value) in case["headers"].as_object().unwrap() {
                let header: &'static str = match header.as_str() {
                    "anthropic-version" => "anthropic-version",
                    "anthropic-beta" => "anthropic-beta",
                    other => panic!("{name}: a header the test does not send: {other}"),
                };
                headers.push((header, value.as_str().unwrap().to_owned()));
            }
            let answer = if counting {
                (200, "application/json", r#"{"input_tokens":2095}"#.into())
            } else if streamed {
                anthropic_thinking_stream()
            } else {
                anthropic_thinking_answer()
            };
            let answered =
                anthropic_at(environment(&[]), "POST", path, headers, &body, vec![answer]);
            assert_eq!(answered.status, 200, "{name}: {:?}", answered.reply);
            assert_eq!(answered.sent.len(), 1, "{name}");
            let sent = &answered.sent[0];
            // Byte for byte, the model apart (the provider's own name for it).
            assert_eq!(sent.body.as_str(), written, "{name} as {named}");
            assert_eq!(sent.url, format!("{ANTHROPIC}{path}"), "{name}");
            let header = |wanted: &str| {
                sent.headers
                    .iter()
                    .filter(|(n, _)| n.eq_ignore_ascii_case(wanted))
                    .map(|(_, v)| v.as_str())
                    .collect::<Vec<_>>()
            };
            for (wanted, value) in case["headers"].as_object().unwrap() {
                assert_eq!(
                    header(wanted),
                    [value.as_str().unwrap()],
                    "{name}: {wanted}"
                );
            }
            // The provider's key, never the client's token to the gateway.
            assert_eq!(header("x-api-key"), [KEY], "{name}");
            assert!(
                !sent.headers.iter().any(|(_, v)| v.contains(TOKEN)),
                "{name}: the gateway's token went on"
            );
            if counting {
                assert_eq!(answered.json(), json!({"input_tokens": 2095}), "{name}");
            } else if streamed {
                let text = answered.events.as_deref().expect("a stream");
                for piece in [
                    r#""usage":{"input_tokens":1234,"cache_creation_input_tokens":0,"cache_read_input_tokens":21000"#,
                    r#"{"type":"thinking_delta","thinking":"Run it."}"#,
                    r#"{"type":"signature_delta","signature":"EqQBCkgIARAB"}"#,
                    r#"{"type":"text_delta","text":"Running."}"#,
                ] {
                    assert!(text.contains(piece), "{name}: {piece} in {text}");
                }
            } else {
                let message = answered.json();
                let (_, _, provider) = anthropic_thinking_answer();
                let provider: Value = serde_json::from_str(&provider).unwrap();
                assert_eq!(message["content"], provider["content"], "{name}");
                assert_eq!(message["usage"], provider["usage"], "{name}");
            }
        }
    }
}

#[test]
fn count_tokens_asks_each_targets_counter_or_estimates() {
    let key = || vec![("x-api-key", TOKEN.to_owned())];
    let count = |model: &str, headers, answers| {
        let body = json!({
            "model": model,
            "system": [{"type": "text", "text": "Be brief."}],
            "messages": [{"role": "user", "content": "How many tokens is this?"}],
        });
        anthropic_at(
            environment(&[]),
            "POST",
            "/v1/messages/count_tokens",
            headers,
            &body.to_string(),
            answers,
        )
    };
    // An OpenAI-compatible target has no counter: the documented estimate, nothing sent (the
    // counting beta Anthropic's SDK sends is honoured: it is what is done).
    let mut counting_beta = key();
    counting_beta.push(("anthropic-beta", "token-counting-2024-11-01".to_owned()));
    let estimated = count("openai/gpt-4o", counting_beta, vec![]);
    assert_eq!(estimated.status, 200, "{:?}", estimated.reply);
    assert!(estimated.sent.is_empty());
    let tokens = estimated.json()["input_tokens"].as_u64().expect("a count");
    assert!((5..=20).contains(&tokens), "{tokens}");
    assert_eq!(estimated.json().as_object().unwrap().len(), 1);

    // Anthropic's counter, at its route; a count needs no max_tokens and is no model call.
    let counted = count(
        "claude-x",
        key(),
        vec![(200, "application/json", r#"{"input_tokens":17}"#.into())],
    );
    assert_eq!(counted.json(), json!({"input_tokens": 17}));
    assert_eq!(
        counted.sent[0].url,
        format!("{ANTHROPIC}/v1/messages/count_tokens")
    );

    // Refusals in Anthropic's shape: the token, the method.
    let refused = count("claude-x", vec![], vec![]);
    assert_eq!(refused.status, 401);
    assert_eq!(refused.json()["error"]["type"], "authentication_error");
    let wrong = anthropic_at(
        environment(&[]),
        "GET",
        "/v1/messages/count_tokens?beta=true",
        key(),
        "",
        vec![],
    );
    assert_eq!(wrong.status, 405);
    assert_eq!(wrong.json()["type"], "error");
}

#[test]
fn anthropic_betas_reach_anthropic_and_are_refused_by_name_elsewhere() {
    let settings = || {
        environment(&[(
            "OMA_GATEWAY_FALLBACKS",
            r#"{"anthropic/claude-x": ["openai/gpt-4o"]}"#,
        )])
    };
    let send = |model: &str, beta: &str, answers| {
        let body = json!({
            "model": model, "max_tokens": 64,
            "messages": [{"role": "user", "content": "Hello?"}],
        });
        anthropic_at(
            settings(),
            "POST",
            "/v1/messages?beta=true",
            vec![
                ("x-api-key", TOKEN.to_owned()),
                ("anthropic-version", "2023-06-01".to_owned()),
                ("anthropic-beta", beta.to_owned()),
            ],
            &body.to_string(),
            answers,
        )
    };
    // Betas that change nothing another target has to do pass it (the header is not sent).
    let passed = send(
        "openai/gpt-4o",
        "claude-code-20250219, interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14",
        vec![openai_answer("Hi.")],
    );
    assert_eq!(passed.status, 200, "{:?}", passed.reply);
    assert!(!passed.sent[0]
        .headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("anthropic-beta")));

    // One the request may depend on is refused by name, naming the target; nothing is sent.
    let refused = send(
        "openai/gpt-4o",
        "claude-code-20250219,context-1m-2025-08-07",
        vec![],
    );
    assert_eq!(refused.status, 400);
    let message = refused.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        message.contains("\"context-1m-2025-08-07\"") && message.contains("openai/gpt-4o"),
        "{message}"
    );
    assert!(refused.sent.is_empty());

    // An Anthropic target takes it as sent; a fallback that cannot honour it is not tried.
    let failing = {
        let body =
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "busy"}});
        (529, "application/json", body.to_string())
    };
    let answered = send("anthropic/claude-x", "context-1m-2025-08-07", vec![failing]);
    assert_eq!(answered.sent.len(), 1, "the fallback was tried");
    assert_eq!(answered.status, 529, "{:?}", answered.reply);
    assert!(answered.sent[0]
        .headers
        .contains(&("anthropic-beta".into(), "context-1m-2025-08-07".into())));
}

#[test]
fn models_answers_anthropic_clients_in_anthropics_shape() {
    let settings = || environment(&[("OMA_GATEWAY_MODELS", "anthropic/claude-x,openai/gpt-4o")]);
    let list = |headers| {
        anthropic_at(
            settings(),
            "GET",
            "/v1/models?beta=true",
            headers,
            "",
            vec![],
        )
    };
    let answered = list(vec![
        ("x-api-key", TOKEN.to_owned()),
        ("anthropic-version", "2023-06-01".to_owned()),
    ]);
    assert_eq!(answered.status, 200);
    assert_eq!(
        answered.json(),
        json!({
            "data": [
                {"type": "model", "id": "anthropic/claude-x", "display_name": "anthropic/claude-x",
                 "created_at": "1970-01-01T00:00:00Z"},
                {"type": "model", "id": "openai/gpt-4o", "display_name": "openai/gpt-4o",
                 "created_at": "1970-01-01T00:00:00Z"}
            ],
            "has_more": false, "first_id": "anthropic/claude-x", "last_id": "openai/gpt-4o"
        })
    );
    // Refused in Anthropic's shape too.
    let refused = list(vec![("anthropic-version", "2023-06-01".to_owned())]);
    assert_eq!(refused.status, 401);
    assert_eq!(refused.json()["error"]["type"], "authentication_error");
    // Without the header, OpenAI's list.
    let openai = list(vec![("x-api-key", TOKEN.to_owned())]);
    assert_eq!(openai.json()["object"], "list");
}

#[test]
fn a_forwarded_request_needs_one_model_and_a_plain_query() {
    let key = || vec![("x-api-key", TOKEN.to_owned())];
    let twice = r#"{"model":"claude-x","max_tokens":64,"messages":[{"role":"user","content":"Hi"}],"model":"claude-y"}"#;
    let refused = anthropic_at(
        environment(&[]),
        "POST",
        "/v1/messages",
        key(),
        twice,
        vec![],
    );
    assert_eq!(refused.status, 400);
    assert!(refused.sent.is_empty());
    let body =
        r#"{"model":"claude-x","max_tokens":64,"messages":[{"role":"user","content":"Hi"}]}"#;
    let refused = anthropic_at(
        environment(&[]),
        "POST",
        "/v1/messages?beta=true\u{7f}",
        key(),
        body,
        vec![],
    );
    assert_eq!(refused.status, 400);
    assert!(refused.sent.is_empty());
}

#[test]
fn geminis_signed_tool_calls_survive_a_round_trip_through_anthropics_shape() {
    const GEMINI: &str = "http://127.0.0.1:7";
    let settings = || environment(&[("GEMINI_API_KEY", KEY), ("GEMINI_BASE_URL", GEMINI)]);
    let key = || vec![("x-api-key", TOKEN.to_owned())];
    let tools = json!([{"name": "Read", "description": "Reads a file.",
                        "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}}]);
    let gemini_call = json!({
        "candidates": [{"content": {"role": "model", "parts": [
            {"functionCall": {"name": "Read", "args": {"file_path": "/a"}}, "thoughtSignature": "c2lnLTE="}
        ]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 20, "candidatesTokenCount": 5, "totalTokenCount": 25}
    });
    let first = json!({
        "model": "gemini/gemini-3-pro-preview", "max_tokens": 256, "tools": tools,
        "messages": [{"role": "user", "content": "Read /a"}],
    });
    let answered = anthropic_at(
        settings(),
        "POST",
        "/v1/messages",
        key(),
        &first.to_string(),
        vec![(200, "application/json", gemini_call.to_string())],
    );
    assert_eq!(answered.status, 200, "{:?}", answered.reply);
    let content = answered.json()["content"].clone();
    // The call's signature, which Anthropic's tool_use has no field for, as a signed thinking
    // block just before it.
    assert_eq!(
        content[0],
        json!({"type": "thinking", "thinking": "", "signature": "c2lnLTE="})
    );
    assert_eq!(content[1]["type"], "tool_use");
    assert_eq!(content.as_array().unwrap().len(), 2);

    // Sent back as the client keeps it, the signature is on the call again, and only there.
    let id = content[1]["id"].clone();
    let second = json!({
        "model": "gemini/gemini-3-pro-preview", "max_tokens": 256, "tools": tools,
        "messages": [
            {"role": "user", "content": "Read /a"},
            {"role": "assistant", "content": content},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": id, "content": "hello", "cache_control": {"type": "ephemeral"}}
            ]}
        ],
    });
    let text_answer = json!({
        "candidates": [{"content": {"role": "model", "parts": [{"text": "It says hello."}]},
                        "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 30, "candidatesTokenCount": 4, "totalTokenCount": 34}
    });
    // Gemini takes no cache markers: refused by name, nothing sent.
    let refused = anthropic_at(
        settings(),
        "POST",
        "/v1/messages",
        key(),
        &second.to_string(),
        vec![],
    );
    assert_eq!(refused.status, 400, "{:?}", refused.reply);
    assert!(refused.sent.is_empty());
    let mut second = second;
    second["messages"][2]["content"][0]
        .as_object_mut()
        .unwrap()
        .remove("cache_control");
    let answered = anthropic_at(
        settings(),
        "POST",
        "/v1/messages",
        key(),
        &second.to_string(),
        vec![(200, "application/json", text_answer.to_string())],
    );
    assert_eq!(answered.status, 200, "{:?}", answered.reply);
    let sent = answered.sent_json(0);
    let model_turn = &sent["contents"][1];
    assert_eq!(model_turn["role"], "model");
    let parts = model_turn["parts"].as_array().unwrap();
    assert_eq!(parts.len(), 1, "{model_turn}");
    assert_eq!(parts[0]["thoughtSignature"], "c2lnLTE=");
    assert_eq!(parts[0]["functionCall"]["name"], "Read");

    // Streamed: the signature as a thinking block's signature_delta before the call.
    let mut streamed = first.clone();
    streamed["stream"] = json!(true);
    let sse = format!("data: {gemini_call}\r\n\r\n");
    let answered = anthropic_at(
        settings(),
        "POST",
        "/v1/messages",
        key(),
        &streamed.to_string(),
        vec![(200, "text/event-stream", sse)],
    );
    let text = answered.events.expect("a stream");
    let signature = text
        .find(r#"{"type":"signature_delta","signature":"c2lnLTE="}"#)
        .expect("the signature");
    let call = text.find(r#""type":"tool_use""#).expect("the call");
    assert!(signature < call, "{text}");
}

#[test]
fn drop_params_sends_markers_and_betas_a_target_cannot_honour_without_them() {
    let body = json!({
        "model": "openai/gpt-4o", "max_tokens": 64,
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "Hello?"}],
    });
    let send = |drop: &str, answers| {
        let settings = match drop {
            "" => environment(&[]),
            drop => environment(&[("OMA_GATEWAY_DROP_PARAMS", drop)]),
        };
        anthropic_at(
            settings,
            "POST",
            "/v1/messages",
            vec![
                ("x-api-key", TOKEN.to_owned()),
                ("anthropic-beta", "context-1m-2025-08-07".to_owned()),
            ],
            &body.to_string(),
            answers,
        )
    };
    let message = |answered: &Answered| {
        answered.json()["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    // Unset: the markers' row refuses first, by name; nothing is sent.
    let refused = send("", vec![]);
    assert_eq!(refused.status, 400);
    assert!(
        message(&refused).starts_with("`cache_control` cannot be sent to openai/gpt-4o"),
        "{}",
        message(&refused)
    );
    assert!(refused.sent.is_empty());
    // The markers dropped, the beta still refused.
    let some = send("cache_control", vec![]);
    assert_eq!(some.status, 400);
    assert!(
        message(&some).starts_with("`anthropic-beta` cannot be sent to openai/gpt-4o")
            && message(&some).contains("context-1m-2025-08-07"),
        "{}",
        message(&some)
    );
    // Both dropped: the target gets the request without them, and the answer says so.
    let both = send("cache_control,anthropic-beta", vec![openai_answer("Hi.")]);
    assert_eq!(both.status, 200, "{:?}", both.reply);
    assert_eq!(both.sent_json(0)["messages"][0]["content"], "Be brief.");
    let reply = both.reply.as_ref().expect("a reply");
    let dropped = reply
        .headers
        .iter()
        .find(|(name, _)| *name == crate::DROPPED_HEADER)
        .map(|(_, value)| value.as_str());
    assert_eq!(dropped, Some("cache_control, anthropic-beta"));
    // An Anthropic target takes both as they are, whatever the setting.
    let mut to_anthropic = body.clone();
    to_anthropic["model"] = json!("anthropic/claude-x");
    let answered = anthropic_at(
        environment(&[]),
        "POST",
        "/v1/messages",
        vec![
            ("x-api-key", TOKEN.to_owned()),
            ("anthropic-beta", "context-1m-2025-08-07".to_owned()),
        ],
        &to_anthropic.to_string(),
        vec![anthropic_thinking_answer()],
    );
    assert_eq!(answered.status, 200, "{:?}", answered.reply);
    assert_eq!(
        answered.sent_json(0)["system"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
}

/// A Chat Completions request with what OMA's model has no place for: a participant name, an
/// image's detail, a strict function, an unknown member of a message and one of the body.
fn own_request(model: &str) -> Value {
    json!({
        "model": model,
        "messages": [
            {"role": "developer", "content": "Be brief.", "name": "ops"},
            {"role": "user", "name": "ann", "content": [
                {"type": "text", "text": "What is it?"},
                {"type": "image_url", "image_url": {"url": "https://example.com/a.png",
                                                    "detail": "high"}}]},
            {"role": "assistant", "content": null, "reasoning_content": "Look first.",
             "tool_calls": [{"id": "c1", "type": "function",
                             "function": {"name": "look", "arguments": "{\"at\": \"a\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "A dot."},
        ],
        "tools": [{"type": "function", "function": {"name": "look", "strict": true,
            "parameters": {"type": "object", "properties": {"at": {"type": "string"}},
                           "required": ["at"], "additionalProperties": false}}}],
        "max_completion_tokens": 64,
        "seed": 7,
        "x_vendor_option": {"k": [1, 2]},
    })
}

#[test]
fn an_openai_target_gets_the_clients_own_request_byte_for_byte_but_the_model() {
    let body = own_request("openai/gpt-4o");
    let written = body.to_string();
    let answered = call(&body, vec![openai_answer("A dot.")]);
    assert_eq!(answered.status, 200, "{:?}", answered.reply);
    assert_eq!(answered.sent.len(), 1);
    let sent = &answered.sent[0];
    assert_eq!(
        *sent.body,
        written.replacen("\"openai/gpt-4o\"", "\"gpt-4o\"", 1),
        "the provider got another request"
    );
    assert_eq!(sent.url, format!("{OPENAI}/chat/completions"));
    let auth = sent
        .headers
        .iter()
        .find(|(name, _)| name == "authorization");
    assert_eq!(
        auth.map(|(_, v)| v.as_str()),
        Some(&*format!("Bearer {OPENAI_KEY}"))
    );
    assert_eq!(
        answered.json()["choices"][0]["message"]["content"],
        "A dot."
    );

    // The gateway's own checks still come first: what OMA refuses is refused, nothing sent.
    let mut bad = body.clone();
    bad["messages"][1]["content"][1]["image_url"]["url"] = json!("file:///etc/passwd");
    let refused = call(&bad, vec![]);
    assert_eq!(
        openai_error(&refused, 400)["error"]["code"],
        "InvalidMessageError"
    );
    assert!(refused.sent.is_empty());
    // And the field table: a field no target's answer can carry is refused by name.
    let mut bad = body.clone();
    bad["top_logprobs"] = json!(3);
    let refused = call(&bad, vec![]);
    assert!(openai_error(&refused, 400)["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("`top_logprobs` cannot be sent to openai/gpt-4o"));
    assert!(refused.sent.is_empty());
    // Dropped by the operator's setting, it is left out of the client's request.
    let auth = vec![("authorization", format!("Bearer {TOKEN}"))];
    let dropped = call_with(
        environment(&[("OMA_GATEWAY_DROP_PARAMS", "top_logprobs")]),
        auth,
        &bad,
        vec![openai_answer("A dot.")],
    );
    assert_eq!(dropped.status, 200, "{:?}", dropped.reply);
    assert_eq!(
        *dropped.sent[0].body,
        written.replacen("\"openai/gpt-4o\"", "\"gpt-4o\"", 1)
    );
}

#[test]
fn a_streamed_own_request_asks_for_the_usage_and_keeps_the_clients_options() {
    let sse = concat!(
        "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o\",",
        "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hi.\"},",
        "\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o\",",
        "\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
        "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o\",",
        "\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2,",
        "\"total_tokens\":7}}\n\n",
        "data: [DONE]\n\n",
    );
    for options in [None, Some(json!({"include_usage": false}))] {
        let mut body = own_request("openai/gpt-4o");
        body["stream"] = json!(true);
        if let Some(options) = &options {
            body["stream_options"] = options.clone();
        }
        let answered = call(&body, vec![(200, "text/event-stream", sse.to_owned())]);
        assert_eq!(answered.status, 200, "{:?}", answered.reply);
        let sent = answered.sent_json(0);
        assert_eq!(
            sent["stream_options"],
            json!({"include_usage": true}),
            "{sent}"
        );
        assert_eq!(sent["stream"], true);
        assert_eq!(sent["messages"], body["messages"]);
        assert_eq!(sent["tools"], body["tools"]);
        // The client did not ask for the usage: its stream has none.
        let chunks = answered.chunks();
        assert!(
            chunks.iter().all(|c| c.get("usage").is_none()),
            "{chunks:?}"
        );
        assert_eq!(chunks.last(), Some(&json!("[DONE]")));
    }
}

#[test]
fn an_own_request_names_each_field_once_and_a_fallback_gets_it_too() {
    // A name given twice: which one a provider reads is not for the gateway to guess.
    let text = br#"{"model":"openai/gpt-4o","seed":1,"messages":[{"role":"user","content":"Hi"}],"seed":2}"#;
    let transport = Scripted::default();
    let mut client = Client {
        headers: vec![("authorization", format!("Bearer {TOKEN}"))],
        body: text.to_vec(),
        transport: transport.clone(),
        reply: None,
        events: None,
    };
    let status = serve(
        environment(&[]),
        "POST",
        "/v1/chat/completions",
        &mut client,
    );
    assert_eq!(status, 400);
    let reply = client.reply.expect("a reply");
    assert!(
        reply.body.contains("`seed` is given twice"),
        "{}",
        reply.body
    );
    assert!(transport.0.borrow().sent.is_empty());

    // A fallback of the client's dialect is sent the client's own request, with its model.
    let fallbacks = r#"{"anthropic/claude-x": ["openai/gpt-4o"]}"#;
    let mut body = own_request("anthropic/claude-x");
    for message in body["messages"].as_array_mut().unwrap() {
        let message = message.as_object_mut().unwrap();
        message.remove("name");
        message.remove("reasoning_content");
    }
    body["messages"][1]["content"][1]["image_url"]
        .as_object_mut()
        .unwrap()
        .remove("detail");
    body["tools"][0]["function"]
        .as_object_mut()
        .unwrap()
        .remove("strict");
    body.as_object_mut().unwrap().remove("x_vendor_option");
    body.as_object_mut().unwrap().remove("seed");
    let down = json!({"type": "error", "error": {"type": "api_error", "message": "down"}});
    let answered = call_with(
        environment(&[("OMA_GATEWAY_FALLBACKS", fallbacks)]),
        vec![("authorization", format!("Bearer {TOKEN}"))],
        &body,
        vec![
            (503, "application/json", down.to_string()),
            openai_answer("From OpenAI."),
        ],
    );
    assert_eq!(answered.status, 200, "{:?}", answered.reply);
    assert_eq!(answered.sent.len(), 2);
    assert_eq!(
        *answered.sent[1].body,
        body.to_string()
            .replacen("\"anthropic/claude-x\"", "\"gpt-4o\"", 1)
    );
}
