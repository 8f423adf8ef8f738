use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use oma_host_tests::{
    agent_config, endpoint, AgentConfig, AgentEvent, AgentHandle, BeforeRunAnswer, BeforeRunResult,
    CannedResponse, CaptureOutbound, ContentBlock, ErrorKind, EvaluationOptions, ExternalKind,
    FailureKind, GuestOptions, ImageBlock, LlmMessage, LogHandle, PromptInput,
    RecordedRequest, RequestLog, Role, RunAgentOptions, RunInput, RunResult, ScriptedHost,
    StatusCode, StorePayloads, ToolDefinition, ToolGate, ToolOutcome, ToolResultContent, ToolResultPart,
    ToolUseBlock, TraceData, TraceOptions, CANNED_PIECES, CANNED_TEXT, CANNED_USAGE,
};
use serde_json::{json, Value};

use crate::common::{assert_invalid_message, base64, text, url, user, video};
use crate::worlds::AnyGuest as Guest;

/// The API key of every agent; it must never show in a result.
const KEY: &str = "sk-agent-SECRET-91c2d7";

/// An Anthropic text answer.
fn text_reply(text: &str, input_tokens: u64, output_tokens: u64) -> Value {
    json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}
    })
}

/// An Anthropic error body.
fn anthropic_error(kind: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

/// An Anthropic answer that calls `name` with `input`.
fn tool_reply(id: &str, name: &str, input: Value) -> Value {
    json!({
        "id": "msg_t", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
        "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": id, "name": name, "input": input}
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 10, "output_tokens": 5}
    })
}

/// A provider that answers the n-th request with `replies[n]` (the last one once they run
/// out), and the requests it received.
fn scripted(replies: Vec<(u16, Value)>) -> (CaptureOutbound, RequestLog) {
    let count = Arc::new(AtomicUsize::new(0));
    let hook = CaptureOutbound::new(move |_request: &RecordedRequest| {
        let n = count.fetch_add(1, Ordering::SeqCst);
        let (status, body) = replies[n.min(replies.len() - 1)].clone();
        CannedResponse {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.to_string().into_bytes(),
        }
    });
    let log = hook.log();
    (hook, log)
}

/// A guest of this module's world with `outbound` as its provider and `host` as its host.
async fn guest_with(outbound: CaptureOutbound, host: ScriptedHost) -> Guest {
    let options = GuestOptions {
        hooks: Some(Box::new(outbound)),
        host: Some(Box::new(host)),
        ..Default::default()
    };
    Guest::instantiate(super::WORLD, options).await
}

/// A test bench: a guest whose provider answers from a script and whose host records.
struct Bench {
    guest: Guest,
    requests: RequestLog,
    host: LogHandle,
}

impl Bench {
    async fn new(replies: Vec<(u16, Value)>, host: ScriptedHost) -> Bench {
        let (outbound, requests) = scripted(replies);
        let log = host.log();
        Bench {
            guest: guest_with(outbound, host).await,
            requests,
            host: log,
        }
    }

    /// Answers every request with one text reply.
    async fn text(reply: &str, host: ScriptedHost) -> Bench {
        Bench::new(vec![(200, text_reply(reply, 7, 3))], host).await
    }

    /// `create-agent`, which must succeed.
    async fn agent(&mut self, config: &AgentConfig) -> AgentHandle {
        self.guest.create_agent(config).await.unwrap().unwrap()
    }

    /// `run`, which must return a result (successful or not).
    async fn run_ok(&mut self, agent: &AgentHandle, input: &RunInput) -> RunResult {
        self.guest.run(agent, input).await.unwrap().unwrap()
    }

    /// `prompt`, which must return a result (successful or not).
    async fn prompt_ok(&mut self, agent: &AgentHandle, input: &PromptInput) -> RunResult {
        self.guest.prompt(agent, input).await.unwrap().unwrap()
    }

    /// The `messages` of each request body, in order.
    fn sent_messages(&self) -> Vec<Value> {
        self.requests
            .all()
            .iter()
            .map(|r| r.json().expect("request bodies are JSON")["messages"].clone())
            .collect()
    }
}

fn config(provider: &str) -> AgentConfig {
    let base = if provider == "anthropic" {
        "https://api.anthropic.com"
    } else {
        "https://api.openai.com/v1"
    };
    agent_config(
        "researcher",
        if provider == "anthropic" {
            "claude-sonnet-4-6"
        } else {
            "gpt-4o"
        },
        endpoint(provider, Some(base), Some(KEY)),
    )
}

fn image(data: &str) -> ContentBlock {
    ContentBlock::Image(ImageBlock {
        source: oma_host_tests::MediaSource::Base64(oma_host_tests::Base64Source {
            media_type: "image/png".into(),
            data: data.into(),
        }),
    })
}

fn assistant_text(t: &str) -> LlmMessage {
    LlmMessage {
        role: Role::Assistant,
        content: vec![text(t)],
    }
}

/// Checks a result never carries the key, in any field.
fn assert_no_secret(result: &RunResult) {
    let dump = format!("{result:?}");
    assert!(!dump.contains(KEY), "the key leaked: {dump}");
}

fn failure_of(result: &RunResult) -> &oma_host_tests::RunFailure {
    assert!(!result.success, "{result:?}");
    result.failure.as_ref().expect("a failed run has a failure")
}

fn typed(prompt: &str, messages: Option<Vec<LlmMessage>>) -> BeforeRunAnswer {
    BeforeRunAnswer::Typed(BeforeRunResult {
        prompt: prompt.into(),
        messages,
    })
}

// ---------------------------------------------------------------- run: input and history

#[tokio::test]
async fn run_with_a_string_sends_one_user_text_message_and_leaves_history_alone() {
    let mut bench = Bench::text("Paris.", ScriptedHost::new()).await;
    let mut cfg = config("anthropic");
    cfg.history = vec![user(vec![text("seeded")]), assistant_text("seeded reply")];
    let agent = bench.agent(&cfg).await;
    let result = bench
        .run_ok(&agent, &RunInput::Text("Capital of France?".into()))
        .await;
    assert!(result.success, "{result:?}");
    assert_eq!(result.output, "Paris.");
    assert_eq!(result.messages, vec![assistant_text("Paris.")]);
    assert_eq!(result.token_usage.input_tokens, 7);
    assert_eq!(result.token_usage.output_tokens, 3);
    assert_eq!(result.turns, 1);
    assert!(result.failure.is_none());
    assert_eq!(
        bench.sent_messages(),
        vec![
            json!([{"role": "user", "content": [{"type": "text", "text": "Capital of France?"}]}])
        ]
    );
    // run() neither reads nor writes the persistent history.
    assert_eq!(bench.guest.get_history(&agent).await.unwrap(), cfg.history);
}

#[tokio::test]
async fn run_with_messages_sends_the_whole_conversation_with_media() {
    let mut bench = Bench::text("A cat.", ScriptedHost::new()).await;
    let agent = bench.agent(&config("anthropic")).await;
    let conversation = vec![
        user(vec![text("Look:")]),
        assistant_text("Go on."),
        user(vec![image("aGVsbG8="), text("What is it?")]),
    ];
    let result = bench
        .run_ok(&agent, &RunInput::Messages(conversation))
        .await;
    assert!(result.success, "{result:?}");
    let sent = &bench.sent_messages()[0];
    assert_eq!(sent.as_array().unwrap().len(), 3);
    assert_eq!(
        sent[2]["content"][0],
        json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "aGVsbG8="}})
    );
    assert!(bench.guest.get_history(&agent).await.unwrap().is_empty());
}

#[tokio::test]
async fn invalid_input_fails_the_call_before_anything_happens() {
    let host = ScriptedHost::new().with_hook(|ctx| typed(&ctx.prompt, None));
    let mut bench = Bench::text("never", host).await;
    let mut cfg = config("anthropic");
    cfg.before_run = true;
    let agent = bench.agent(&cfg).await;
    let bad = vec![user(vec![video(url(
        "video/mp4",
        "ftp://example.com/a.mp4",
    ))])];
    let err = bench
        .guest
        .run(&agent, &RunInput::Messages(bad.clone()))
        .await
        .unwrap()
        .unwrap_err();
    assert_invalid_message(&err);
    assert_eq!(
        err.message,
        "messages[0].content[0].source.url must use HTTP or HTTPS"
    );
    // stream() fails at call time: no stream exists.
    let err = bench
        .guest
        .stream(&agent, &RunInput::Messages(bad))
        .await
        .unwrap()
        .unwrap_err();
    assert_invalid_message(&err);
    assert!(bench.requests.is_empty());
    assert!(bench.host.lock().before_run.is_empty());
}

#[tokio::test]
async fn an_invalid_history_fails_creation() {
    let mut bench = Bench::text("never", ScriptedHost::new()).await;
    let mut cfg = config("anthropic");
    cfg.history = vec![user(vec![video(base64("video/mp4", "not base64!"))])];
    let err = bench.guest.create_agent(&cfg).await.unwrap().unwrap_err();
    assert_invalid_message(&err);
    assert!(
        err.message
            .starts_with("messages[0].content[0].source.data"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn video_for_a_format_without_a_mapping_fails_once_with_nothing_sent() {
    let mut bench = Bench::text("never", ScriptedHost::new()).await;
    let mut cfg = config("anthropic");
    cfg.call.retry = oma_host_tests::retries(5);
    let agent = bench.agent(&cfg).await;
    let input = RunInput::Messages(vec![user(vec![
        text("Describe."),
        video(url("video/mp4", "https://example.com/clip.mp4")),
    ])]);
    let result = bench.run_ok(&agent, &input).await;
    let failure = failure_of(&result);
    assert_eq!(failure.error_info.name, "UnsupportedContentBlockError");
    assert_eq!(
        failure.error_info.code.as_deref(),
        Some("UNSUPPORTED_CONTENT_BLOCK")
    );
    assert!(!failure.error_info.retryable);
    assert_eq!(failure.error_info.kind, FailureKind::Provider);
    assert_eq!(
        result.output,
        "Anthropic Messages cannot represent the \"video\" content block: OMA does not map video for this adapter yet"
    );
    assert!(result.messages.is_empty());
    assert!(bench.requests.is_empty());
}

/// Every format without a video mapping refuses it before a request exists, in `run` and in
/// `stream`, and never retries.
#[tokio::test]
async fn video_is_refused_by_bedrock_gemini_and_the_ai_sdk_in_run_and_stream() {
    for provider in ["bedrock", "gemini", "ai-sdk"] {
        let mut bench = Bench::text("never", ScriptedHost::new()).await;
        let mut cfg = agent_config(
            "viewer",
            "some-model",
            endpoint(provider, Some("https://provider.example"), Some(KEY)),
        );
        cfg.call.retry = oma_host_tests::retries(3);
        if provider == "bedrock" {
            cfg.endpoint.region = Some("us-east-1".into());
        }
        let agent = bench.agent(&cfg).await;
        let input = RunInput::Messages(vec![user(vec![
            text("Describe."),
            video(url("video/mp4", "https://example.com/clip.mp4")),
        ])]);
        let result = bench.run_ok(&agent, &input).await;
        let failure = failure_of(&result);
        assert_eq!(failure.error_info.name, "UnsupportedContentBlockError", "{provider}");
        assert!(!failure.error_info.retryable);
        assert!(result.output.contains("\"video\""), "{provider}: {}", result.output);
        let stream = bench.guest.stream(&agent, &input).await.unwrap().unwrap();
        let events = bench.guest.collect_agent_stream(stream).await.unwrap();
        assert!(
            matches!(events.last(), Some(AgentEvent::Error(r))
                if r.failure.as_ref().is_some_and(|f| f.error_info.name == "UnsupportedContentBlockError")),
            "{provider}: {events:?}"
        );
        assert!(bench.requests.is_empty(), "{provider}: nothing is sent");
    }
}

/// An OpenAI-compatible provider that has no video support answers `video_url` with a 400: the
/// run fails as a provider failure with that status, not retried.
#[tokio::test]
async fn a_provider_that_refuses_video_ends_the_run_as_a_terminal_failure() {
    let mut bench = Bench::new(
        vec![(400, json!({"error": {"message": "video_url is not supported", "type": "invalid_request_error"}}))],
        ScriptedHost::new(),
    )
    .await;
    let mut cfg = config("openai");
    cfg.call.retry = oma_host_tests::retries(4);
    let agent = bench.agent(&cfg).await;
    let input = RunInput::Messages(vec![user(vec![
        text("Describe."),
        video(url("video/mp4", "https://example.com/clip.mp4")),
    ])]);
    let result = bench.run_ok(&agent, &input).await;
    let failure = failure_of(&result);
    assert_eq!(failure.error_info.kind, FailureKind::Provider);
    assert_eq!(failure.error_info.http_status, Some(400));
    assert!(!failure.error_info.retryable);
    assert_eq!(bench.requests.len(), 1, "a 400 is not sent again");
}

/// The context of an image-only turn has an empty prompt.
#[tokio::test]
async fn an_image_only_turn_gives_the_hook_an_empty_prompt() {
    let host = ScriptedHost::new().with_hook(|context| {
        BeforeRunAnswer::Typed(BeforeRunResult {
            prompt: context.prompt.clone(),
            messages: None,
        })
    });
    let mut bench = Bench::text("A picture.", host).await;
    let mut cfg = config("anthropic");
    cfg.before_run = true;
    let agent = bench.agent(&cfg).await;
    let input = RunInput::Messages(vec![user(vec![image("aGk=")])]);
    let result = bench.run_ok(&agent, &input).await;
    assert!(result.success, "{result:?}");
    let log = bench.host.lock();
    assert_eq!(log.before_run[0].prompt, "");
    assert_eq!(log.before_run[0].messages, vec![user(vec![image("aGk=")])]);
}

#[tokio::test]
async fn video_goes_to_minimax_as_video_url() {
    let (outbound, requests) = scripted(vec![(
        200,
        json!({
            "id": "c1", "object": "chat.completion", "model": "MiniMax-M1",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "A clip."}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2}
        }),
    )]);
    let mut guest = guest_with(outbound, ScriptedHost::new()).await;
    let cfg = agent_config(
        "viewer",
        "MiniMax-M1",
        endpoint("minimax", Some("https://api.minimax.io/v1"), Some(KEY)),
    );
    let agent = guest.create_agent(&cfg).await.unwrap().unwrap();
    let input = RunInput::Messages(vec![user(vec![
        text("Describe."),
        video(url("video/mp4", "https://example.com/clip.mp4")),
    ])]);
    let result = guest.run(&agent, &input).await.unwrap().unwrap();
    assert!(result.success, "{result:?}");
    assert_eq!(result.output, "A clip.");
    let body = requests.all()[0].json().unwrap();
    assert_eq!(
        body["messages"][0]["content"][1],
        json!({"type": "video_url", "video_url": {"url": "https://example.com/clip.mp4"}})
    );
}

// ---------------------------------------------------------------- prompt and history

#[tokio::test]
async fn prompt_appends_the_turn_and_the_reply_and_runs_on_the_whole_history() {
    let mut bench = Bench::text("ok", ScriptedHost::new()).await;
    let mut cfg = config("anthropic");
    cfg.history = vec![user(vec![text("earlier")]), assistant_text("noted")];
    let agent = bench.agent(&cfg).await;
    let first = bench
        .prompt_ok(&agent, &PromptInput::Text("one".into()))
        .await;
    assert!(first.success);
    let second = bench
        .prompt_ok(
            &agent,
            &PromptInput::Blocks(vec![image("aGk="), text("two")]),
        )
        .await;
    assert_eq!(second.messages, vec![assistant_text("ok")]);
    let history = bench.guest.get_history(&agent).await.unwrap();
    assert_eq!(
        history,
        vec![
            user(vec![text("earlier")]),
            assistant_text("noted"),
            user(vec![text("one")]),
            assistant_text("ok"),
            user(vec![image("aGk="), text("two")]),
            assistant_text("ok"),
        ]
    );
    let sent = bench.sent_messages();
    assert_eq!(sent[0].as_array().unwrap().len(), 3);
    assert_eq!(sent[1].as_array().unwrap().len(), 5);
    // An empty block list is accepted and appended.
    bench.prompt_ok(&agent, &PromptInput::Blocks(vec![])).await;
    assert_eq!(
        bench.guest.get_history(&agent).await.unwrap()[6],
        user(vec![])
    );
    bench.guest.reset(&agent).await.unwrap();
    assert!(bench.guest.get_history(&agent).await.unwrap().is_empty());
}

#[tokio::test]
async fn invalid_prompt_input_is_not_appended() {
    let mut bench = Bench::text("ok", ScriptedHost::new()).await;
    let agent = bench.agent(&config("anthropic")).await;
    let err = bench
        .guest
        .prompt(
            &agent,
            &PromptInput::Blocks(vec![
                text("x"),
                video(base64("video/mp4; codecs=avc1", "AAAA")),
            ]),
        )
        .await
        .unwrap()
        .unwrap_err();
    assert_invalid_message(&err);
    assert!(
        err.message
            .starts_with("messages[0].content[1].source.media_type"),
        "{}",
        err.message
    );
    assert!(bench.guest.get_history(&agent).await.unwrap().is_empty());
    assert!(bench.requests.is_empty());
}

#[tokio::test]
async fn a_failed_prompt_keeps_the_user_turn_without_a_reply() {
    let mut bench = Bench::new(
        vec![(400, anthropic_error("invalid_request_error", "bad"))],
        ScriptedHost::new(),
    )
    .await;
    let agent = bench.agent(&config("anthropic")).await;
    let result = bench
        .prompt_ok(&agent, &PromptInput::Text("hi".into()))
        .await;
    let failure = failure_of(&result);
    assert_eq!(failure.status.code, StatusCode::Error);
    assert_eq!(failure.error_info.kind, FailureKind::Provider);
    assert_eq!(failure.error_info.http_status, Some(400));
    assert!(!failure.error_info.retryable);
    assert!(result.messages.is_empty());
    assert_no_secret(&result);
    assert_eq!(
        bench.guest.get_history(&agent).await.unwrap(),
        vec![user(vec![text("hi")])]
    );
}

#[tokio::test]
async fn history_keeps_the_original_turn_when_the_hook_rewrites_the_prompt() {
    let host = ScriptedHost::new().with_hook(|_| typed("hook-rewritten turn", None));
    let mut bench = Bench::text("ok", host).await;
    let mut cfg = config("anthropic");
    cfg.before_run = true;
    let agent = bench.agent(&cfg).await;
    let turn = vec![image("aW1n"), text("Continue…")];
    bench
        .prompt_ok(&agent, &PromptInput::Blocks(turn.clone()))
        .await;
    assert_eq!(
        bench.sent_messages()[0][0]["content"],
        json!([
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "aW1n"}},
            {"type": "text", "text": "hook-rewritten turn"}
        ])
    );
    assert_eq!(
        bench.guest.get_history(&agent).await.unwrap(),
        vec![user(turn), assistant_text("ok")]
    );
}

// ---------------------------------------------------------------- beforeRun

#[tokio::test]
async fn the_hook_sees_the_joined_prompt_and_a_copy_of_the_messages() {
    let host = ScriptedHost::new().with_hook(|ctx| typed(&ctx.prompt, None));
    let mut bench = Bench::text("ok", host).await;
    let mut cfg = config("anthropic");
    cfg.before_run = true;
    let agent = bench.agent(&cfg).await;
    let input = vec![user(vec![text("first"), image("aQ=="), text("second")])];
    bench
        .run_ok(&agent, &RunInput::Messages(input.clone()))
        .await;
    let log = bench.host.lock();
    let ctx = &log.before_run[0];
    assert_eq!(ctx.prompt, "firstsecond");
    assert_eq!(ctx.messages, input);
    assert_eq!(ctx.agent, "researcher");
    let config: Value = serde_json::from_str(&ctx.config).unwrap();
    assert_eq!(config["name"], "researcher");
    assert_eq!(config["model"], "claude-sonnet-4-6");
    assert!(
        !ctx.config.contains(KEY),
        "the key leaked into the hook context"
    );
    // An unchanged prompt and no messages: the request is the input.
    assert_eq!(
        bench.sent_messages()[0][0]["content"][2],
        json!({"type": "text", "text": "second"})
    );
}

#[tokio::test]
async fn hook_messages_replace_the_input_then_the_prompt_rewrites_the_latest_user_turn() {
    let replacement = vec![
        assistant_text("caller history"),
        user(vec![
            image("YmVmb3Jl"),
            text("one"),
            image("YWZ0ZXI="),
            text("two"),
        ]),
    ];
    let given = replacement.clone();
    let host =
        ScriptedHost::new().with_hook(move |_| typed("prompt replacement", Some(given.clone())));
    let mut bench = Bench::text("ok", host).await;
    let mut cfg = config("anthropic");
    cfg.before_run = true;
    let agent = bench.agent(&cfg).await;
    bench
        .run_ok(&agent, &RunInput::Text("original".into()))
        .await;
    let sent = &bench.sent_messages()[0];
    assert_eq!(
        sent[0]["content"],
        json!([{"type": "text", "text": "caller history"}])
    );
    let blocks: Vec<&str> = sent[1]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["text"].as_str().or(b["source"]["data"].as_str()).unwrap())
        .collect();
    assert_eq!(blocks, ["YmVmb3Jl", "prompt replacement", "YWZ0ZXI="]);
}

#[tokio::test]
async fn a_json_answer_is_checked_as_oma_checks_a_hook_result() {
    let cases = [
        (r#"{"prompt": 5}"#, "beforeRun.prompt must be a string"),
        (
            r#"{"prompt": "x", "messages": null}"#,
            "messages must be an array, got null",
        ),
        (
            r#"{"prompt": "x", "messages": [{"role": "user", "content": "hi"}]}"#,
            "messages[0].content must be a ContentBlock[], got string",
        ),
    ];
    for (answer, message) in cases {
        let answer = answer.to_owned();
        let host = ScriptedHost::new().with_hook(move |_| BeforeRunAnswer::Json(answer.clone()));
        let mut bench = Bench::text("never", host).await;
        let mut cfg = config("anthropic");
        cfg.before_run = true;
        let agent = bench.agent(&cfg).await;
        let result = bench.run_ok(&agent, &RunInput::Text("hi".into())).await;
        let failure = failure_of(&result);
        assert_eq!(result.output, message);
        assert_eq!(failure.status.code, StatusCode::Error);
        assert_eq!(failure.error_info.kind, FailureKind::Callback);
        assert_eq!(failure.error_info.name, "InvalidMessageError");
        assert_eq!(failure.error_info.code.as_deref(), Some("INVALID_MESSAGE"));
        assert!(!failure.error_info.retryable);
        assert!(
            bench.requests.is_empty(),
            "no provider call after a hook failure"
        );
    }
}

#[tokio::test]
async fn a_hook_that_fails_ends_the_run_as_a_callback_failure() {
    let host = ScriptedHost::new().with_hook(|_| BeforeRunAnswer::Failed("hook exploded".into()));
    let mut bench = Bench::text("never", host).await;
    let mut cfg = config("anthropic");
    cfg.before_run = true;
    let agent = bench.agent(&cfg).await;
    let result = bench
        .prompt_ok(&agent, &PromptInput::Text("hi".into()))
        .await;
    let failure = failure_of(&result);
    assert_eq!(result.output, "hook exploded");
    assert_eq!(failure.error_info.kind, FailureKind::Callback);
    assert_eq!(failure.error_info.name, "Error");
    assert_eq!(failure.error_info.code, None);
    assert!(failure.error_info.retryable);
    assert!(bench.requests.is_empty());
    // The instance is fine: the next call works.
    assert_eq!(bench.guest.get_history(&agent).await.unwrap().len(), 1);
    // A stream reports the same failure as its `error` event.
    let stream = bench
        .guest
        .stream(&agent, &RunInput::Text("again".into()))
        .await
        .unwrap()
        .unwrap();
    let events = bench.guest.collect_agent_stream(stream).await.unwrap();
    assert!(
        matches!(events.as_slice(), [AgentEvent::Error(r)] if r.output == "hook exploded"),
        "{events:?}"
    );
}

// ---------------------------------------------------------------- external backends

fn external_config(kind: ExternalKind) -> AgentConfig {
    let mut cfg = config("anthropic");
    cfg.external = Some(kind);
    cfg.system_prompt = Some("Be brief.".into());
    cfg
}

#[tokio::test]
async fn external_backends_refuse_structured_input_before_the_hook() {
    let host = ScriptedHost::new()
        .with_hook(|ctx| typed(&ctx.prompt, None))
        .with_backend(|_| Ok("never".into()));
    let mut bench = Bench::text("never", host).await;
    for (kind, word) in [
        (ExternalKind::Process, "process"),
        (ExternalKind::Acp, "acp"),
    ] {
        let mut cfg = external_config(kind);
        cfg.before_run = true;
        let agent = bench.agent(&cfg).await;
        let expected = format!("The {word} external backend accepts string prompts only; structured messages or content blocks cannot be forwarded without loss.");
        let input = RunInput::Messages(vec![user(vec![text("hi")])]);
        let err = bench.guest.run(&agent, &input).await.unwrap().unwrap_err();
        assert_invalid_message(&err);
        assert_eq!(err.message, expected);
        let err = bench
            .guest
            .stream(&agent, &input)
            .await
            .unwrap()
            .unwrap_err();
        assert_eq!(err.message, expected);
        let err = bench
            .guest
            .prompt(&agent, &PromptInput::Blocks(vec![text("hi")]))
            .await
            .unwrap()
            .unwrap_err();
        assert_eq!(err.message, expected);
        assert!(bench.guest.get_history(&agent).await.unwrap().is_empty());
        let options = RunAgentOptions {
            progress: true,
            evaluation: Some(EvaluationOptions {
                store_payloads: StorePayloads::Full,
                sample_rate: 1.0,
            }),
        };
        let err = bench
            .guest
            .run_agent(&cfg, &input, &options)
            .await
            .unwrap()
            .unwrap_err();
        assert_eq!(err.message, expected);
    }
    let log = bench.host.lock();
    assert!(log.before_run.is_empty() && log.external.is_empty());
    assert!(log.progress.is_empty() && log.evaluations.is_empty());
    assert!(bench.requests.is_empty());
}

#[tokio::test]
async fn external_backends_send_the_rewritten_prompt_text() {
    let host = ScriptedHost::new()
        .with_hook(|_| typed("console.log(\"rewritten\")", None))
        .with_backend(|text| Ok(format!("ran: {}", text.lines().last().unwrap_or(""))));
    let mut bench = Bench::text("never", host).await;
    let mut cfg = external_config(ExternalKind::Process);
    cfg.before_run = true;
    cfg.history = vec![user(vec![text("history never seeds a transport")])];
    let agent = bench.agent(&cfg).await;
    let result = bench
        .prompt_ok(&agent, &PromptInput::Text(" original ".into()))
        .await;
    assert!(result.success, "{result:?}");
    assert_eq!(result.output, "ran: console.log(\"rewritten\")");
    assert_eq!(
        result.messages,
        vec![assistant_text("ran: console.log(\"rewritten\")")]
    );
    // The process backend gets the system prompt, a blank line, and the prompt.
    assert_eq!(
        bench.host.lock().external,
        vec![(
            ExternalKind::Process,
            "Be brief.\n\nconsole.log(\"rewritten\")".to_owned()
        )]
    );
    // ACP gets the trimmed text alone.
    let acp = bench.agent(&external_config(ExternalKind::Acp)).await;
    bench
        .run_ok(&acp, &RunInput::Text(" hello \n".into()))
        .await;
    assert_eq!(
        bench.host.lock().external[1],
        (ExternalKind::Acp, "hello".to_owned())
    );
    assert!(bench.requests.is_empty());
}

#[tokio::test]
async fn an_external_hook_may_not_change_messages() {
    let host = ScriptedHost::new()
        .with_hook(|_| typed("x", Some(vec![user(vec![image("aQ==")])])))
        .with_backend(|_| Ok("never".into()));
    let mut bench = Bench::text("never", host).await;
    let mut cfg = external_config(ExternalKind::Process);
    cfg.before_run = true;
    let agent = bench.agent(&cfg).await;
    let result = bench.run_ok(&agent, &RunInput::Text("hi".into())).await;
    assert!(!result.success);
    assert!(
        result
            .output
            .contains("beforeRun.messages cannot be forwarded without loss"),
        "{}",
        result.output
    );
    assert!(bench.host.lock().external.is_empty());
}

// ---------------------------------------------------------------- tools, turns, budgets

fn lookup_tool() -> ToolDefinition {
    ToolDefinition {
        name: "screenshot".into(),
        description: "Takes a screenshot".into(),
        input_schema: r#"{"type":"object","properties":{"url":{"type":"string"}}}"#.into(),
    }
}

#[tokio::test]
async fn tool_calls_go_to_the_host_and_rich_results_go_back_to_the_model() {
    let host = ScriptedHost::new().with_tool(|call: &ToolUseBlock| ToolOutcome {
        content: ToolResultContent::Parts(vec![
            ToolResultPart::Text(format!("shot of {}", call.input)),
            ToolResultPart::Image(base64("image/png", "iVBORw0KGgo=")),
        ]),
        is_error: Some(false),
        gate: None,
    });
    let mut bench = Bench::new(
        vec![
            (
                200,
                tool_reply(
                    "call_1",
                    "screenshot",
                    json!({"url": "https://example.com"}),
                ),
            ),
            (200, text_reply("It is a page.", 20, 4)),
        ],
        host,
    )
    .await;
    let mut cfg = config("anthropic");
    cfg.tools = vec![lookup_tool()];
    let agent = bench.agent(&cfg).await;
    let result = bench.run_ok(&agent, &RunInput::Text("Look".into())).await;
    assert!(result.success, "{result:?}");
    assert_eq!(result.output, "It is a page.");
    assert_eq!(result.turns, 2);
    assert_eq!(result.token_usage.input_tokens, 30);
    assert_eq!(result.messages.len(), 3);
    assert_eq!(result.tool_calls.len(), 1);
    assert_eq!(result.tool_calls[0].tool_name, "screenshot");
    let log = bench.host.lock();
    assert_eq!(log.tool_calls[0].0, "researcher");
    assert_eq!(log.tool_calls[0].1.id, "call_1");
    drop(log);
    let sent = bench.sent_messages();
    assert_eq!(sent.len(), 2);
    let result_block = &sent[1][2]["content"][0];
    assert_eq!(result_block["type"], "tool_result");
    assert_eq!(result_block["tool_use_id"], "call_1");
    assert_eq!(result_block["content"][1]["type"], "image");
    // The host said the tool did not fail: sent as `is_error: false`, as OMA sends it.
    assert_eq!(result_block["is_error"], false);
    // The tools were offered to the model.
    assert_eq!(
        bench.requests.all()[0].json().unwrap()["tools"][0]["name"],
        "screenshot"
    );
}

#[tokio::test]
async fn a_tool_answer_that_breaks_the_media_rules_fails_the_run() {
    let host = ScriptedHost::new().with_tool(|_| ToolOutcome {
        content: ToolResultContent::Parts(vec![ToolResultPart::Image(base64(
            "image/png",
            "not base64",
        ))]),
        is_error: None,
        gate: None,
    });
    let mut bench = Bench::new(vec![(200, tool_reply("c", "screenshot", json!({})))], host).await;
    let agent = bench.agent(&config("anthropic")).await;
    let result = bench.run_ok(&agent, &RunInput::Text("Look".into())).await;
    let failure = failure_of(&result);
    assert_eq!(failure.error_info.name, "InvalidMessageError");
    assert!(
        result
            .output
            .starts_with("messages[2].content[0].content[0].source.data"),
        "{}",
        result.output
    );
    assert_eq!(bench.requests.len(), 1);
}

#[tokio::test]
async fn unknown_tools_answer_with_an_error_and_max_turns_stops_the_loop() {
    let mut bench = Bench::new(
        vec![(200, tool_reply("c", "nope", json!({})))],
        ScriptedHost::new(),
    )
    .await;
    let mut cfg = config("anthropic");
    cfg.max_turns = Some(3);
    let agent = bench.agent(&cfg).await;
    let result = bench.run_ok(&agent, &RunInput::Text("go".into())).await;
    assert!(result.success, "{result:?}");
    assert_eq!(result.turns, 3);
    assert_eq!(bench.requests.len(), 3);
    assert_eq!(result.output, "Let me look.");
    assert!(result.tool_calls.iter().all(|call| call.is_error));
    let sent = bench.sent_messages();
    assert_eq!(sent[1][2]["content"][0]["is_error"], true);
}

#[tokio::test]
async fn the_token_budget_ends_the_run() {
    let mut bench = Bench::new(
        vec![(200, tool_reply("c", "screenshot", json!({})))],
        ScriptedHost::new(),
    )
    .await;
    let mut cfg = config("anthropic");
    cfg.token_budget = Some(12);
    let agent = bench.agent(&cfg).await;
    let result = bench.run_ok(&agent, &RunInput::Text("go".into())).await;
    assert!(result.budget_exceeded);
    let failure = failure_of(&result);
    assert_eq!(failure.status.code, StatusCode::BudgetExhausted);
    assert_eq!(failure.error_info.kind, FailureKind::Budget);
    assert_eq!(
        bench.requests.len(),
        1,
        "no tool ran and no second turn was sent"
    );
}

#[tokio::test]
async fn a_stream_announces_an_exceeded_budget_then_ends_with_an_error() {
    let mut guest = guest_with(CaptureOutbound::default(), ScriptedHost::new()).await;
    let mut cfg = config("anthropic");
    cfg.token_budget = Some(12);
    let agent = guest.create_agent(&cfg).await.unwrap().unwrap();
    let stream = guest
        .stream(&agent, &RunInput::Text("go".into()))
        .await
        .unwrap()
        .unwrap();
    let events = guest.collect_agent_stream(stream).await.unwrap();
    assert!(
        events
            .iter()
            .any(|e| matches!(e, AgentEvent::BudgetExceeded(m)
            if m == "Agent \"researcher\" exceeded token budget: 18 tokens used (budget: 12)")),
        "{events:?}"
    );
    assert!(matches!(events.last(), Some(AgentEvent::Error(r)) if r.budget_exceeded));
}

// ---------------------------------------------------------------- streaming

#[tokio::test]
async fn stream_delivers_provider_pieces_then_the_turn_text_then_done() {
    let outbound = CaptureOutbound::default();
    let requests = outbound.log();
    let mut guest = guest_with(outbound, ScriptedHost::new()).await;
    let agent = guest
        .create_agent(&config("anthropic"))
        .await
        .unwrap()
        .unwrap();
    let stream = guest
        .stream(&agent, &RunInput::Text("hi".into()))
        .await
        .unwrap()
        .unwrap();
    // Nothing is sent until the stream is read.
    assert!(requests.is_empty());
    let events = guest.collect_agent_stream(stream).await.unwrap();
    let deltas: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, CANNED_PIECES);
    let n = events.len();
    assert_eq!(events[n - 2], AgentEvent::Text(CANNED_TEXT.into()));
    let AgentEvent::Done(result) = &events[n - 1] else {
        panic!("the last event is done: {events:?}")
    };
    assert_eq!(result.output, CANNED_TEXT);
    assert_eq!(requests.all()[0].json().unwrap()["stream"], true);
}

#[tokio::test]
async fn a_provider_failure_while_streaming_is_an_error_event() {
    let mut bench = Bench::new(
        vec![(503, anthropic_error("overloaded_error", "busy"))],
        ScriptedHost::new(),
    )
    .await;
    let agent = bench.agent(&config("anthropic")).await;
    let stream = bench
        .guest
        .stream(&agent, &RunInput::Text("hi".into()))
        .await
        .unwrap()
        .unwrap();
    let events = bench.guest.collect_agent_stream(stream).await.unwrap();
    let [AgentEvent::Error(result)] = events.as_slice() else {
        panic!("one error event: {events:?}")
    };
    let failure = failure_of(result);
    assert_eq!(failure.error_info.http_status, Some(503));
    assert!(failure.error_info.retryable);
    assert_no_secret(result);
}

// ---------------------------------------------------------------- run-agent

fn evaluate(store_payloads: StorePayloads) -> RunAgentOptions {
    RunAgentOptions {
        progress: true,
        evaluation: Some(EvaluationOptions {
            store_payloads,
            sample_rate: 1.0,
        }),
    }
}

#[tokio::test]
async fn run_agent_emits_progress_and_evaluates_a_string_run() {
    let mut bench = Bench::text("done", ScriptedHost::new()).await;
    let result = bench
        .guest
        .run_agent(
            &config("anthropic"),
            &RunInput::Text("api_key=abc123 please".into()),
            &evaluate(StorePayloads::Redacted),
        )
        .await
        .unwrap()
        .unwrap();
    assert!(result.success);
    let log = bench.host.lock();
    let kinds: Vec<&str> = log.progress.iter().map(|e| e.type_.as_str()).collect();
    assert_eq!(kinds, ["agent_start", "agent_complete"]);
    assert_eq!(log.progress[0].agent, "researcher");
    assert_eq!(
        serde_json::from_str::<Value>(&log.progress[0].data).unwrap(),
        json!({"prompt": "api_key=abc123 please"})
    );
    let complete: Value = serde_json::from_str(&log.progress[1].data).unwrap();
    assert_eq!(complete["success"], true);
    assert_eq!(complete["output"], "done");
    let record = &log.evaluations[0];
    assert_eq!(record.input, "api_key=[redacted]");
    assert_eq!(
        serde_json::from_str::<Value>(record.payload.as_deref().unwrap()).unwrap(),
        json!({"input": "api_key=[redacted]", "output": "done"})
    );
    assert_eq!(record.result, result);
}

#[tokio::test]
async fn run_agent_with_messages_carries_copies_and_applies_the_payload_policy() {
    let messages = vec![user(vec![text("q"), image("aGk=")])];
    for (policy, expect_input, stored) in [
        (StorePayloads::None, "[array input omitted; 1 items]".to_owned(), false),
        (StorePayloads::Full, serde_json::to_string(&json!([{"role": "user", "content": [{"type": "text", "text": "q"}, {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "aGk="}}]}])).unwrap(), true),
    ] {
        let mut bench = Bench::text("done", ScriptedHost::new()).await;
        bench
            .guest
            .run_agent(&config("anthropic"), &RunInput::Messages(messages.clone()), &evaluate(policy))
            .await
            .unwrap()
            .unwrap();
        let log = bench.host.lock();
        let start: Value = serde_json::from_str(&log.progress[0].data).unwrap();
        assert_eq!(start["messages"][0]["content"][0], json!({"type": "text", "text": "q"}));
        assert!(start.get("prompt").is_none());
        let record = &log.evaluations[0];
        assert_eq!(record.input, expect_input);
        assert_eq!(record.payload.is_some(), stored);
        if stored {
            // With `full`, the scorer input is JSON equal to the messages.
            let parsed: Value = serde_json::from_str(&record.input).unwrap();
            assert_eq!(parsed[0]["content"][1]["source"]["data"], "aGk=");
        }
    }
}

#[tokio::test]
async fn run_agent_with_invalid_input_emits_nothing() {
    let mut bench = Bench::text("never", ScriptedHost::new()).await;
    let bad = RunInput::Messages(vec![user(vec![video(base64("video/mp4", "not base64!"))])]);
    let err = bench
        .guest
        .run_agent(&config("anthropic"), &bad, &evaluate(StorePayloads::Full))
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidMessage);
    let log = bench.host.lock();
    assert!(log.progress.is_empty() && log.evaluations.is_empty());
    assert!(bench.requests.is_empty());
}

#[tokio::test]
async fn run_agent_reports_an_exceeded_budget() {
    let mut bench = Bench::text("long answer", ScriptedHost::new()).await;
    let mut cfg = config("anthropic");
    cfg.token_budget = Some(5);
    let result = bench
        .guest
        .run_agent(
            &cfg,
            &RunInput::Text("go".into()),
            &evaluate(StorePayloads::None),
        )
        .await
        .unwrap()
        .unwrap();
    assert!(result.budget_exceeded);
    let kinds: Vec<String> = bench
        .host
        .lock()
        .progress
        .iter()
        .map(|e| e.type_.clone())
        .collect();
    assert_eq!(kinds, ["agent_start", "budget_exceeded", "agent_complete"]);
    // OMA's `TokenBudgetExceededError`, as JSON.
    let data: Value = serde_json::from_str(&bench.host.lock().progress[1].data).unwrap();
    assert_eq!(
        data,
        json!({
            "name": "TokenBudgetExceededError", "code": "TOKEN_BUDGET_EXCEEDED",
            "message": "Agent \"researcher\" exceeded token budget: 10 tokens used (budget: 5)",
            "agent": "researcher", "tokensUsed": 10, "budget": 5
        })
    );
    let record = &bench.host.lock().evaluations[0];
    assert_eq!(record.input, "[string input omitted; 2 characters]");
    assert!(record.payload.is_none());
}

#[tokio::test]
async fn sample_rate_zero_evaluates_nothing() {
    let mut bench = Bench::text("done", ScriptedHost::new()).await;
    let options = RunAgentOptions {
        progress: false,
        evaluation: Some(EvaluationOptions {
            store_payloads: StorePayloads::Full,
            sample_rate: 0.0,
        }),
    };
    bench
        .guest
        .run_agent(&config("anthropic"), &RunInput::Text("go".into()), &options)
        .await
        .unwrap()
        .unwrap();
    let log = bench.host.lock();
    assert!(log.evaluations.is_empty() && log.progress.is_empty());
}

// ---------------------------------------------------------------- failures and egress

#[tokio::test]
async fn an_egress_denial_is_a_rejected_run_with_nothing_sent() {
    let mut bench = Bench::text("never", ScriptedHost::new()).await;
    let mut cfg = config("anthropic");
    cfg.call.egress = oma_host_tests::EgressPolicy::Allowlist(vec!["https://api.openai.com".into()]);
    let agent = bench.agent(&cfg).await;
    let result = bench.run_ok(&agent, &RunInput::Text("hi".into())).await;
    let failure = failure_of(&result);
    assert_eq!(failure.status.code, StatusCode::Rejected);
    assert_eq!(failure.error_info.kind, FailureKind::Validation);
    assert_eq!(
        failure.error_info.code.as_deref(),
        Some("EGRESS_POLICY_DENIED")
    );
    assert!(bench.requests.is_empty());
}

#[tokio::test]
async fn a_key_echoed_by_the_provider_never_reaches_the_result() {
    let echo = anthropic_error("authentication_error", &format!("invalid x-api-key: {KEY}"));
    let mut bench = Bench::new(vec![(401, echo)], ScriptedHost::new()).await;
    let agent = bench.agent(&config("anthropic")).await;
    let result = bench.run_ok(&agent, &RunInput::Text("hi".into())).await;
    let failure = failure_of(&result);
    assert_eq!(failure.error_info.http_status, Some(401));
    assert_no_secret(&result);
}

#[tokio::test]
async fn an_unknown_provider_without_a_base_url_fails_creation() {
    let mut bench = Bench::text("never", ScriptedHost::new()).await;
    let cfg = agent_config("x", "m", endpoint("no-such-provider", None, None));
    let err = bench.guest.create_agent(&cfg).await.unwrap().unwrap_err();
    assert!(!err.message.is_empty());
}

#[tokio::test]
async fn one_instance_runs_many_agents_and_drops_them() {
    let mut bench = Bench::text("ok", ScriptedHost::new()).await;
    for i in 0..20 {
        let mut cfg = config("anthropic");
        cfg.name = format!("agent-{i}");
        let agent = bench.agent(&cfg).await;
        bench
            .prompt_ok(&agent, &PromptInput::Text("hi".into()))
            .await;
        let stream = bench
            .guest
            .stream(&agent, &RunInput::Text("hi".into()))
            .await
            .unwrap()
            .unwrap();
        // Abandon the stream half-read.
        bench.guest.next_agent_event(&stream).await.unwrap();
        bench.guest.close_agent_stream(stream).await.unwrap();
        bench.guest.drop_agent(agent).await.unwrap();
    }
    assert_eq!(bench.requests.len(), 40);
}

#[tokio::test]
async fn the_hosts_oma_json_writer_agrees_with_the_components() {
    let mut guest = crate::common::guest().await;
    let messages = guest
        .messages_from_json(crate::common::CONVERSATION)
        .await
        .unwrap()
        .unwrap();
    let from_component: Value =
        serde_json::from_str(&guest.messages_to_json(&messages).await.unwrap().unwrap()).unwrap();
    assert_eq!(
        oma_host_tests::oma_json::messages_json(&messages),
        from_component
    );
}

#[tokio::test]
async fn the_input_is_copied_when_stream_is_called_and_history_is_handed_out_by_copy() {
    let outbound = CaptureOutbound::default();
    let requests = outbound.log();
    let mut guest = guest_with(outbound, ScriptedHost::new()).await;
    let agent = guest
        .create_agent(&config("anthropic"))
        .await
        .unwrap()
        .unwrap();
    let mut input = vec![user(vec![text("before"), image("aQ==")])];
    let stream = guest
        .stream(&agent, &RunInput::Messages(input.clone()))
        .await
        .unwrap()
        .unwrap();
    // The caller changes its messages after the call, before the stream is read.
    input[0].content[0] = text("after");
    input[0].content.push(image("Yg=="));
    guest.collect_agent_stream(stream).await.unwrap();
    let sent = requests.all()[0].json().unwrap();
    assert_eq!(sent["messages"][0]["content"][0]["text"], "before");
    assert_eq!(sent["messages"][0]["content"].as_array().unwrap().len(), 2);

    // A result's messages and a history copy are the caller's to change.
    let mut result = guest
        .prompt(&agent, &PromptInput::Text("q".into()))
        .await
        .unwrap()
        .unwrap();
    result.messages[0].content.clear();
    let mut history = guest.get_history(&agent).await.unwrap();
    history.clear();
    let history = guest.get_history(&agent).await.unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(history[1], assistant_text(CANNED_TEXT));
}

/// An Anthropic SSE stream whose turn calls `screenshot`.
fn tool_call_stream() -> Vec<u8> {
    let event = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
    [
        event("message_start", json!({"type": "message_start", "message": {
            "id": "msg_s1", "type": "message", "role": "assistant", "content": [],
            "model": "claude-sonnet-4-6", "stop_reason": null,
            "usage": {"input_tokens": 9, "output_tokens": 1}}})),
        event("content_block_start", json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "tool_use", "id": "call_s1", "name": "screenshot", "input": {}}})),
        event("content_block_delta", json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": "{\"url\": \"https://"}})),
        event("content_block_delta", json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": "example.com\"}"}})),
        event("content_block_stop", json!({"type": "content_block_stop", "index": 0})),
        event("message_delta", json!({"type": "message_delta",
            "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 7}})),
        event("message_stop", json!({"type": "message_stop"})),
    ]
    .concat()
    .into_bytes()
}

#[tokio::test]
async fn a_streamed_run_calls_tools_between_streamed_turns() {
    let count = Arc::new(AtomicUsize::new(0));
    let outbound = CaptureOutbound::new(move |request: &RecordedRequest| {
        if count.fetch_add(1, Ordering::SeqCst) == 0 {
            CannedResponse {
                status: 200,
                headers: vec![("content-type".into(), "text/event-stream".into())],
                body: tool_call_stream(),
            }
        } else {
            CannedResponse::success_for(request)
        }
    });
    let requests = outbound.log();
    let host = ScriptedHost::new().with_tool(|call| ToolOutcome {
        content: ToolResultContent::Text(format!("saw {}", call.input)),
        is_error: None,
        gate: None,
    });
    let log = host.log();
    let mut guest = guest_with(outbound, host).await;
    let mut cfg = config("anthropic");
    cfg.tools = vec![lookup_tool()];
    let agent = guest.create_agent(&cfg).await.unwrap().unwrap();
    let stream = guest
        .stream(&agent, &RunInput::Text("Look".into()))
        .await
        .unwrap()
        .unwrap();
    let events = guest.collect_agent_stream(stream).await.unwrap();
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| match e {
            AgentEvent::TextDelta(_) => "delta",
            AgentEvent::ReasoningDelta(_) => "reasoning",
            AgentEvent::Text(_) => "text",
            AgentEvent::ToolUse(_) => "tool_use",
            AgentEvent::ToolResult(_) => "tool_result",
            AgentEvent::BudgetExceeded(_) => "budget",
            AgentEvent::LoopDetected(_) => "loop",
            AgentEvent::Done(_) => "done",
            AgentEvent::Error(_) => "error",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "tool_use",
            "tool_result",
            "delta",
            "delta",
            "delta",
            "text",
            "done"
        ]
    );
    let AgentEvent::ToolUse(call) = &events[0] else {
        unreachable!()
    };
    assert_eq!(
        serde_json::from_str::<Value>(&call.input).unwrap(),
        json!({"url": "https://example.com"})
    );
    assert_eq!(log.lock().tool_calls.len(), 1);
    let sent = requests.all();
    assert_eq!(sent.len(), 2);
    let second = sent[1].json().unwrap();
    assert_eq!(second["stream"], true);
    assert_eq!(
        second["messages"][2]["content"][0]["content"],
        "saw {\"url\":\"https://example.com\"}"
    );
    let AgentEvent::Done(result) = events.last().unwrap() else {
        unreachable!()
    };
    assert_eq!(result.turns, 2);
    assert_eq!(result.token_usage.output_tokens, 7 + CANNED_USAGE.1);
}

#[tokio::test]
async fn the_worked_examples_of_the_merge_hold_through_the_component() {
    let img = || image("aQ==");
    let result_block = || crate::common::tool_result(vec![ToolResultPart::Text("r".into())], None);
    /// The input, the hook's prompt and messages, and what the provider receives.
    type Case = (
        Vec<LlmMessage>,
        &'static str,
        Option<Vec<LlmMessage>>,
        Vec<LlmMessage>,
    );
    let cases: Vec<Case> = vec![
        (
            vec![user(vec![
                img(),
                text("A"),
                img(),
                text("B"),
                result_block(),
            ])],
            "NEW",
            None,
            vec![user(vec![img(), text("NEW"), img(), result_block()])],
        ),
        (
            vec![user(vec![img(), img()])],
            "NEW",
            None,
            vec![user(vec![text("NEW"), img(), img()])],
        ),
        (
            vec![assistant_text("a")],
            "NEW",
            None,
            vec![assistant_text("a")],
        ),
        (
            vec![user(vec![text("A"), img()])],
            "",
            None,
            vec![user(vec![text(""), img()])],
        ),
        (
            vec![user(vec![text("A")]), assistant_text("b")],
            "NEW",
            None,
            vec![user(vec![text("NEW")]), assistant_text("b")],
        ),
        // An unchanged prompt rewrites nothing, even after a replacement.
        (
            vec![user(vec![text("A")])],
            "A",
            Some(vec![user(vec![text("x"), text("y")])]),
            vec![user(vec![text("x"), text("y")])],
        ),
    ];
    for (input, prompt, messages, expected) in cases {
        let answer = typed(prompt, messages);
        let host = ScriptedHost::new().with_hook(move |_| answer.clone());
        let (outbound, requests) = scripted(vec![(200, text_reply("ok", 1, 1))]);
        let mut guest = guest_with(outbound, host).await;
        let mut cfg = config("anthropic");
        cfg.before_run = true;
        let agent = guest.create_agent(&cfg).await.unwrap().unwrap();
        let result = guest
            .run(&agent, &RunInput::Messages(input.clone()))
            .await
            .unwrap()
            .unwrap();
        assert!(result.success, "{input:?}: {result:?}");
        // Compare through the codec: what the provider got is what the merged list formats to.
        let mut codec = crate::common::guest().await;
        let request = oma_host_tests::chat_request("claude-sonnet-4-6", expected.clone());
        let http = codec
            .format_request(&request, &cfg.endpoint)
            .await
            .unwrap()
            .unwrap();
        let want: Value = serde_json::from_str(&http.body).unwrap();
        let got = requests.all()[0].json().unwrap();
        assert_eq!(
            got["messages"], want["messages"],
            "{input:?} with prompt {prompt:?}"
        );
    }
}

#[tokio::test]
async fn evaluation_payloads_are_bounded_to_8192_characters() {
    let mut bench = Bench::text("done", ScriptedHost::new()).await;
    let long = "x".repeat(10_000);
    bench
        .guest
        .run_agent(
            &config("anthropic"),
            &RunInput::Text(long.clone()),
            &evaluate(StorePayloads::Full),
        )
        .await
        .unwrap()
        .unwrap();
    let log = bench.host.lock();
    let input = &log.evaluations[0].input;
    assert_eq!(input.chars().count(), 8192);
    assert!(input.ends_with("\n[truncated at 8192 characters]"));
    assert!(input.starts_with("xxxx"));
    let payload: Value =
        serde_json::from_str(log.evaluations[0].payload.as_deref().unwrap()).unwrap();
    assert_eq!(payload["input"].as_str().unwrap(), input);
    assert_eq!(payload["output"], "done");
    // The progress event still carries the whole prompt.
    let start: Value = serde_json::from_str(&log.progress[0].data).unwrap();
    assert_eq!(start["prompt"].as_str().unwrap().len(), 10_000);
}

#[tokio::test]
async fn redacted_evaluation_of_messages_hides_secrets() {
    let mut bench = Bench::text(
        "the key is sk-abcdefghijklmnopqrstuvwx",
        ScriptedHost::new(),
    )
    .await;
    let messages = vec![user(vec![text("my token: Bearer abcdefghijklmnop1234")])];
    bench
        .guest
        .run_agent(
            &config("anthropic"),
            &RunInput::Messages(messages),
            &evaluate(StorePayloads::Redacted),
        )
        .await
        .unwrap()
        .unwrap();
    let log = bench.host.lock();
    let record = &log.evaluations[0];
    assert!(
        !record.input.contains("abcdefghijklmnop1234"),
        "{}",
        record.input
    );
    assert!(record.input.contains("[redacted]"), "{}", record.input);
    let payload = record.payload.as_deref().unwrap();
    assert!(
        !payload.contains("sk-abcdefghijklmnopqrstuvwx"),
        "{payload}"
    );
    // Scorers get the full in-memory result all the same.
    assert_eq!(
        record.result.output,
        "the key is sk-abcdefghijklmnopqrstuvwx"
    );
}

#[tokio::test]
async fn odd_configurations_and_answers_never_trap() {
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let answers = [
        BeforeRunAnswer::Json(deep),
        BeforeRunAnswer::Json("42".into()),
        BeforeRunAnswer::Json("{\"prompt\": \"x\", \"messages\": [[]]}".into()),
        BeforeRunAnswer::Failed("x".repeat(1 << 20)),
    ];
    for answer in answers {
        let host = ScriptedHost::new().with_hook(move |_| answer.clone());
        let mut bench = Bench::text("ok", host).await;
        let mut cfg = config("anthropic");
        cfg.before_run = true;
        let agent = bench.agent(&cfg).await;
        let result = bench.run_ok(&agent, &RunInput::Text("hi".into())).await;
        let failure = failure_of(&result);
        assert_eq!(failure.error_info.kind, FailureKind::Callback);
        assert!(failure.error_info.message.chars().count() <= 1024);
        assert!(bench.requests.is_empty());
    }

    // No turns at all, and a budget of zero tokens.
    let mut bench = Bench::text("ok", ScriptedHost::new()).await;
    let mut cfg = config("anthropic");
    cfg.max_turns = Some(0);
    let agent = bench.agent(&cfg).await;
    let result = bench.run_ok(&agent, &RunInput::Text("hi".into())).await;
    assert!(result.success && result.turns == 0, "{result:?}");
    assert!(bench.requests.is_empty());
    cfg.max_turns = None;
    cfg.token_budget = Some(0);
    let agent = bench.agent(&cfg).await;
    let result = bench.run_ok(&agent, &RunInput::Text("hi".into())).await;
    assert!(result.budget_exceeded);

    // Sample rates outside [0, 1] and NaN.
    for rate in [f64::NAN, -1.0, 2.0, f64::INFINITY] {
        let options = RunAgentOptions {
            progress: false,
            evaluation: Some(EvaluationOptions {
                store_payloads: StorePayloads::None,
                sample_rate: rate,
            }),
        };
        bench
            .guest
            .run_agent(&config("anthropic"), &RunInput::Text("hi".into()), &options)
            .await
            .unwrap()
            .unwrap();
    }
    let sampled = bench.host.lock().evaluations.len();
    assert_eq!(
        sampled, 2,
        "2.0 and infinity sample every run; NaN and -1 none"
    );

    // A large tool answer and a large backend failure.
    let host = ScriptedHost::new()
        .with_tool(|_| ToolOutcome {
            content: ToolResultContent::Text("y".repeat(1 << 20)),
            is_error: None,
            gate: None,
        })
        .with_backend(|_| Err("z".repeat(1 << 20)));
    let mut bench = Bench::new(
        vec![
            (200, tool_reply("c", "screenshot", json!({}))),
            (200, text_reply("done", 1, 1)),
        ],
        host,
    )
    .await;
    let agent = bench.agent(&config("anthropic")).await;
    let result = bench.run_ok(&agent, &RunInput::Text("go".into())).await;
    assert!(result.success, "{result:?}");
    assert!(bench.requests.all()[1].body.len() > 1 << 20);
    let external = bench.agent(&external_config(ExternalKind::Acp)).await;
    let result = bench.run_ok(&external, &RunInput::Text("go".into())).await;
    let failure = failure_of(&result);
    assert!(failure.status.message.as_ref().unwrap().chars().count() <= 256);
}

#[tokio::test]
async fn the_hosts_run_result_json_matches_the_components() {
    let host = ScriptedHost::new().with_tool(|_| ToolOutcome {
        content: ToolResultContent::Parts(vec![
            ToolResultPart::Text("seen".into()),
            ToolResultPart::Image(url("image/png", "https://example.com/a.png")),
        ]),
        is_error: None,
        gate: None,
    });
    let mut bench = Bench::new(
        vec![
            (
                200,
                tool_reply("c1", "screenshot", json!({"url": "https://example.com"})),
            ),
            (200, text_reply("done", 3, 2)),
        ],
        host,
    )
    .await;
    let options = RunAgentOptions {
        progress: true,
        evaluation: None,
    };
    let mut budgeted = config("anthropic");
    budgeted.token_budget = Some(1);
    for cfg in [config("anthropic"), budgeted] {
        let result = bench
            .guest
            .run_agent(&cfg, &RunInput::Text("go".into()), &options)
            .await
            .unwrap()
            .unwrap();
        let log = bench.host.lock();
        let complete = log.progress.last().unwrap();
        assert_eq!(complete.type_, "agent_complete");
        let from_component: Value = serde_json::from_str(&complete.data).unwrap();
        assert_eq!(
            oma_host_tests::oma_json::run_result_json(&result),
            from_component
        );
    }
}

#[tokio::test]
async fn a_tool_that_outlives_the_run_deadline_ends_the_run_with_omas_timeout() {
    // The host's tool takes longer than the whole run may: the run ends with OMA's timeout when
    // the tool comes back, and nothing more is sent.
    let host = ScriptedHost::new().with_tool(|_call: &ToolUseBlock| {
        std::thread::sleep(std::time::Duration::from_millis(400));
        ToolOutcome {
            content: ToolResultContent::Text("too late".into()),
            is_error: None,
            gate: None,
        }
    });
    let mut bench = Bench::new(
        vec![
            (200, tool_reply("call_1", "screenshot", json!({}))),
            (200, text_reply("never asked", 1, 1)),
        ],
        host,
    )
    .await;
    let mut cfg = config("anthropic");
    cfg.tools = vec![lookup_tool()];
    cfg.deadline_ms = Some(200);
    let agent = bench.agent(&cfg).await;
    let result = bench.run_ok(&agent, &RunInput::Text("Look".into())).await;
    assert!(!result.success, "{result:?}");
    let failure = result.failure.as_ref().expect("a failed run says why");
    assert_eq!(failure.status.code, StatusCode::Timeout);
    assert_eq!(failure.error_info.name, "TimeoutError");
    assert_eq!(failure.error_info.kind, FailureKind::Timeout);
    assert_eq!(bench.requests.all().len(), 1, "nothing was sent past the deadline");
}

// ---------------------------------------------------------------- tracing

/// OMA's trace events of a traced agent: `llm_call`, `tool_call` (input redacted, output as
/// text), `llm_call`, then `agent`, with one run id, the agent span as every call's parent,
/// through this world's host (`host.trace` or `trace` steps). An untraced agent gives none.
#[tokio::test]
async fn a_traced_agent_delivers_omas_trace_events() {
    // A gate allowed the call, with a reason that holds a secret (OMA's gate fields).
    let host = ScriptedHost::new().with_tool(|_| ToolOutcome {
        content: ToolResultContent::Text("api_key=sk-abcdefghijklmnopqrst done".into()),
        is_error: None,
        gate: Some(ToolGate {
            action: "allow".into(),
            reason: Some("reviewed, token=abcdef123456".into()),
        }),
    });
    let mut bench = Bench::new(
        // The untraced run, then the traced one.
        [0, 1]
            .iter()
            .flat_map(|_| {
                [
                    (200, tool_reply("call_1", "lookup", json!({"q": "x", "password": "hunter2"}))),
                    (200, text_reply("Done.", 7, 3)),
                ]
            })
            .collect(),
        host,
    )
    .await;
    let mut cfg = config("anthropic");
    cfg.tools = vec![ToolDefinition {
        name: "lookup".into(),
        description: "Looks up".into(),
        input_schema: r#"{"type":"object"}"#.into(),
    }];
    let plain = bench.agent(&cfg).await;
    assert!(bench.run_ok(&plain, &RunInput::Text("hi".into())).await.success);
    assert!(bench.host.lock().traces.is_empty(), "no tracing unless asked");
    cfg.trace = Some(TraceOptions {
        run_id: Some("run-42".into()),
        span_id: None,
        parent_id: Some("parent-span".into()),
        agent: None,
        task_id: None,
    });
    let traced = bench.agent(&cfg).await;
    let result = bench.run_ok(&traced, &RunInput::Text("hi".into())).await;
    assert!(result.success, "{result:?}");
    let log = bench.host.lock();
    let kinds: Vec<&str> = log
        .traces
        .iter()
        .map(|e| match e.data {
            TraceData::LlmCall(_) => "llm_call",
            TraceData::ToolCall(_) => "tool_call",
            TraceData::Agent(_) => "agent",
        })
        .collect();
    assert_eq!(kinds, ["llm_call", "tool_call", "llm_call", "agent"]);
    let agent = log.traces.last().expect("the agent event");
    assert_eq!(agent.parent_id.as_deref(), Some("parent-span"));
    assert_eq!(agent.span_id.len(), 36, "a made-up UUID: {}", agent.span_id);
    for event in &log.traces {
        assert_eq!(event.run_id, "run-42");
        assert_eq!(event.agent, "researcher");
        assert_eq!(event.duration_ms, event.end_ms - event.start_ms);
        assert!(event.start_ms >= agent.start_ms && event.end_ms <= agent.end_ms);
    }
    for event in &log.traces[..3] {
        assert_eq!(event.parent_id.as_deref(), Some(agent.span_id.as_str()));
    }
    match &log.traces[1].data {
        TraceData::ToolCall(call) => {
            assert_eq!(call.tool, "lookup");
            assert!(!call.is_error);
            let input: Value = serde_json::from_str(&call.input).expect("JSON input");
            assert_eq!(input, json!({"q": "x", "password": "[redacted]"}));
            assert_eq!(call.output, "api_key=[redacted]");
            let gate = call.gate.as_ref().expect("the gate's decision");
            assert_eq!(gate.action, "allow");
            assert_eq!(gate.reason.as_deref(), Some("reviewed, token=[redacted]"));
        }
        other => panic!("{other:?}"),
    }
    match &log.traces[2].data {
        TraceData::LlmCall(call) => {
            assert_eq!((call.model.as_str(), call.turn), ("claude-sonnet-4-6", 2));
            assert_eq!(call.tokens.input_tokens, 7);
        }
        other => panic!("{other:?}"),
    }
    match &agent.data {
        TraceData::Agent(run) => {
            assert_eq!((run.turns, run.tool_calls), (2, 1));
            assert_eq!(run.tokens.input_tokens, 17);
        }
        other => panic!("{other:?}"),
    }
}
