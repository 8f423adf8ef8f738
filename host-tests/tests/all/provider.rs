//! `provider.chat` and `provider.stream-chat` through the component: requests reach the loopback
//! simulator through wasi-http (behind the `LoopbackOnly` hook) and come back parsed, for every
//! wire format; refused input sends nothing; retries, timeouts, transport failures, malformed,
//! oversized and truncated answers, and egress policies (`docs/wire-formats.md`, `docs/errors.md`).
//!
//! Every error a helper sees is checked for the API key and for host debug dumps
//! (`assert_clean_error`).

use oma_host_tests::Shared;
use oma_host_tests::{
    chat_request, endpoint, error_json, AwsCredentials, CallOptions, CaptureOutbound, ContentBlock,
    EgressPolicy, ErrorKind, Guest, GuestOptions, Harness, LlmMessage, LlmResponse, LoopbackOnly,
    RecordedRequest, Reply, RequestLog, Simulator, StreamEvent, WasiHttpHooks, WitError,
    CANNED_TEXT, CANNED_USAGE,
};

use crate::common::{base64, text, tool_result, url, user, video};

/// The API key of every call; it must never show in an error.
const KEY: &str = "sk-sim-SECRET-7f3a9c0e";

/// One provider call, as a test describes it.
struct Call {
    provider: &'static str,
    model: &'static str,
    messages: Vec<LlmMessage>,
    /// `None`: the simulator's base URL.
    base_url: Option<String>,
    region: Option<&'static str>,
    max_attempts: u32,
    /// Use the provider's default retry policy instead of `max_attempts`.
    provider_default: bool,
    /// The call's deadline; `None` for the component's 10 minutes.
    deadline_ms: Option<u64>,
    timeout_ms: u64,
    max_response_bytes: u64,
    egress: EgressPolicy,
}

impl Default for Call {
    fn default() -> Self {
        Call {
            provider: "anthropic",
            model: "claude-sonnet-4-6",
            messages: vec![user(vec![text("Say hello.")])],
            base_url: None,
            region: None,
            max_attempts: 1,
            provider_default: false,
            deadline_ms: None,
            timeout_ms: 10_000,
            max_response_bytes: 32 << 20,
            egress: EgressPolicy::Open,
        }
    }
}

impl Call {
    fn endpoint(&self, base_url: &str) -> oma_host_tests::Endpoint {
        let base = self.base_url.as_deref().unwrap_or(base_url);
        let mut endpoint = endpoint(self.provider, Some(base), Some(KEY));
        endpoint.region = self.region.map(str::to_owned);
        endpoint
    }

    fn options(&self) -> CallOptions {
        CallOptions {
            retry: (!self.provider_default).then_some(oma_host_tests::RetryOptions {
                max_attempts: self.max_attempts,
                base_delay_ms: 2,
                backoff: 2.0,
            }),
            timeout_ms: self.timeout_ms,
            deadline_ms: self.deadline_ms,
            max_response_bytes: self.max_response_bytes,
            egress: self.egress.clone(),
        }
    }

    /// `chat` against `simulator`, with only loopback reachable.
    async fn chat(&self, simulator: &Simulator) -> Result<LlmResponse, WitError> {
        let mut guest = guest_with(LoopbackOnly::new()).await;
        self.chat_in(&mut guest, &simulator.base_url()).await
    }

    async fn chat_in(&self, guest: &mut Guest, base_url: &str) -> Result<LlmResponse, WitError> {
        let request = chat_request(self.model, self.messages.clone());
        let result = guest
            .chat(&request, &self.endpoint(base_url), &self.options())
            .await
            .expect("no trap");
        if let Err(error) = &result {
            assert_clean_error(error);
        }
        result
    }

    /// `chat` answered in-process by a capture hook; returns what it recorded.
    async fn captured(&self) -> (Result<LlmResponse, WitError>, RequestLog) {
        let capture = CaptureOutbound::default();
        let log = capture.log();
        let mut guest = guest_with(capture).await;
        let result = self.chat_in(&mut guest, "http://127.0.0.1:9").await;
        (result, log)
    }

    /// `stream-chat` against `simulator`, read to the end.
    async fn stream(
        &self,
        simulator: &Simulator,
    ) -> Result<Vec<StreamEvent>, (Vec<StreamEvent>, WitError)> {
        let mut guest = guest_with(LoopbackOnly::new()).await;
        let request = chat_request(self.model, self.messages.clone());
        let endpoint = self.endpoint(&simulator.base_url());
        let stream = guest
            .stream_chat(&request, &endpoint, &self.options())
            .await
            .expect("no trap")
            .map_err(|error| (Vec::new(), error));
        let result = match stream {
            Ok(stream) => guest.collect_stream(stream).await.expect("no trap"),
            Err(failure) => Err(failure),
        };
        if let Err((_, error)) = &result {
            assert_clean_error(error);
        }
        result
    }
}

async fn guest_with(hooks: impl WasiHttpHooks + 'static) -> Guest {
    let options = GuestOptions {
        hooks: Some(Box::new(hooks)),
        ..GuestOptions::default()
    };
    Harness::shared()
        .expect("the harness loads the guest")
        .instantiate_with(options)
        .await
        .expect("the guest instantiates")
}

fn simulator() -> Simulator {
    Simulator::start().expect("the simulator starts")
}

/// No key, and one short line: no host backtrace or debug dump reaches an error.
fn assert_clean_error(error: &WitError) {
    assert!(
        !error.message.contains('\n'),
        "a multi-line message: {error:?}"
    );
    assert!(
        error.message.chars().count() <= 1024,
        "a long message: {error:?}"
    );
    let json = error_json(error).to_string();
    assert!(!json.contains(KEY), "the key leaked: {json}");
    assert!(!json.contains("SECRET"), "part of the key leaked: {json}");
}

fn assert_canned(response: &LlmResponse, model: &str) {
    assert_eq!(response.content, vec![text(CANNED_TEXT)], "{response:?}");
    assert_eq!(response.model, model);
    assert_eq!(response.stop_reason, "end_turn");
    let (input, output) = CANNED_USAGE;
    assert_eq!(
        (response.usage.input_tokens, response.usage.output_tokens),
        (input, output)
    );
}

fn only_request(simulator: &Simulator) -> RecordedRequest {
    let requests = simulator.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    requests.into_iter().next().expect("one request")
}

fn assert_provider_error(error: &WitError, status: Option<u16>, retryable: bool) {
    assert_eq!(error.kind, ErrorKind::Provider, "{error:?}");
    assert_eq!(error.http_status, status, "{error:?}");
    assert_eq!(error.retryable, retryable, "{error:?}");
}

/// The non-empty text pieces of a (possibly unfinished) streamed turn.
fn streamed_text_so_far(events: &[StreamEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|event| match event {
            StreamEvent::Text(piece) if !piece.is_empty() => Some(piece.clone()),
            _ => None,
        })
        .collect()
}

/// The text of a streamed turn: the pieces, and the text of the `done` response.
fn streamed_text(events: &[StreamEvent]) -> (Vec<String>, String) {
    let pieces = streamed_text_so_far(events);
    let done = match events.last() {
        Some(StreamEvent::Done(response)) => response
            .content
            .iter()
            .filter_map(|block| match block {
                ContentBlock::Text(text) => Some(text.as_str()),
                _ => None,
            })
            .collect(),
        other => panic!("the last event is not done: {other:?}"),
    };
    (pieces, done)
}

fn assert_streamed(events: &[StreamEvent]) {
    let (pieces, done) = streamed_text(events);
    assert!(pieces.len() >= 2, "{events:?}");
    assert_eq!(pieces.concat(), CANNED_TEXT);
    assert_eq!(done, CANNED_TEXT);
    let done_at = events.len() - 1;
    assert!(
        events[..done_at]
            .iter()
            .all(|event| !matches!(event, StreamEvent::Done(_))),
        "done comes once, last: {events:?}"
    );
}

// ----- each wire format, through wasi-http ---------------------------------------------------

#[tokio::test]
async fn anthropic_round_trip() {
    let sim = simulator();
    let response = Call::default().chat(&sim).await.expect("success");
    assert_canned(&response, "claude-sonnet-4-6");
    let request = only_request(&sim);
    assert_eq!(
        (request.method.as_str(), request.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(request.header("x-api-key"), Some(KEY));
    assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
    let body = request.json().expect("a JSON body");
    assert_eq!(body["messages"][0]["content"][0]["text"], "Say hello.");
    assert_eq!(body["max_tokens"], 4096);
}

#[tokio::test]
async fn openai_round_trip() {
    let sim = simulator();
    let call = Call {
        provider: "openai",
        model: "gpt-4o",
        ..Call::default()
    };
    assert_canned(&call.chat(&sim).await.expect("success"), "gpt-4o");
    let request = only_request(&sim);
    assert_eq!(request.path, "/chat/completions");
    assert_eq!(
        request.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    let body = request.json().expect("a JSON body");
    assert_eq!(
        body["messages"][0],
        serde_json::json!({"role": "user", "content": "Say hello."})
    );
    assert_eq!(body["stream"], false);
}

#[tokio::test]
async fn minimax_sends_video_urls_and_data_urls() {
    let sim = simulator();
    let call = Call {
        provider: "minimax",
        model: "MiniMax-M1",
        messages: vec![user(vec![
            text("What happens in these clips?"),
            video(url("video/mp4", "https://media.example/clip.mp4")),
            video(base64("video/mp4", "AAAAIGZ0eXBpc29t")),
        ])],
        ..Call::default()
    };
    assert_canned(&call.chat(&sim).await.expect("success"), "MiniMax-M1");
    let body = only_request(&sim).json().expect("a JSON body");
    let parts = &body["messages"][0]["content"];
    assert_eq!(parts[1]["type"], "video_url");
    assert_eq!(
        parts[1]["video_url"]["url"],
        "https://media.example/clip.mp4"
    );
    assert_eq!(
        parts[2]["video_url"]["url"],
        "data:video/mp4;base64,AAAAIGZ0eXBpc29t"
    );
}

#[tokio::test]
async fn gemini_round_trip() {
    let sim = simulator();
    let call = Call {
        provider: "gemini",
        model: "gemini-2.5-flash",
        ..Call::default()
    };
    let response = call.chat(&sim).await.expect("success");
    assert_eq!(response.content, vec![text(CANNED_TEXT)]);
    assert_eq!(response.model, "gemini-2.5-flash");
    assert_eq!(response.stop_reason, "end_turn");
    let request = only_request(&sim);
    assert_eq!(
        request.path,
        "/v1beta/models/gemini-2.5-flash:generateContent"
    );
    assert_eq!(request.header("x-goog-api-key"), Some(KEY));
    let body = request.json().expect("a JSON body");
    assert_eq!(body["contents"][0]["parts"][0]["text"], "Say hello.");
}

#[tokio::test]
async fn bedrock_round_trip_with_a_bearer_key() {
    let sim = simulator();
    let call = Call {
        provider: "bedrock",
        model: "anthropic.claude-3-haiku",
        region: Some("us-east-1"),
        ..Call::default()
    };
    let response = call.chat(&sim).await.expect("success");
    assert_eq!(response.content, vec![text(CANNED_TEXT)]);
    assert_eq!(response.model, "anthropic.claude-3-haiku");
    let request = only_request(&sim);
    assert_eq!(request.path, "/model/anthropic.claude-3-haiku/converse");
    assert_eq!(
        request.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    let body = request.json().expect("a JSON body");
    assert_eq!(body["messages"][0]["content"][0]["text"], "Say hello.");
}

#[tokio::test]
async fn bedrock_signs_with_aws_keys_and_the_secret_stays_out_of_the_request() {
    let sim = simulator();
    let call = Call {
        provider: "bedrock",
        model: "anthropic.claude-3-haiku",
        region: Some("us-east-1"),
        ..Call::default()
    };
    let mut endpoint = call.endpoint(&sim.base_url());
    endpoint.api_key = None;
    endpoint.aws = Some(AwsCredentials {
        access_key_id: "AKIDSIMULATOR".into(),
        secret_access_key: KEY.into(),
        session_token: None,
    });
    let mut guest = guest_with(LoopbackOnly::new()).await;
    let request = chat_request(call.model, call.messages.clone());
    let response = guest
        .chat(&request, &endpoint, &call.options())
        .await
        .expect("no trap");
    assert_eq!(response.expect("success").content, vec![text(CANNED_TEXT)]);
    let recorded = only_request(&sim);
    let authorization = recorded.header("authorization").expect("signed");
    assert!(authorization.starts_with("AWS4-HMAC-SHA256 Credential=AKIDSIMULATOR/"));
    assert!(recorded.header("x-amz-date").is_some());
    assert!(!format!("{recorded:?}").contains(KEY));
}

#[tokio::test]
async fn the_capture_hook_answers_in_process() {
    let (result, log) = Call::default().captured().await;
    assert_canned(&result.expect("success"), "claude-sonnet-4-6");
    let requests = log.all();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].path, "/v1/messages");
    assert_eq!(requests[0].header("host"), Some("127.0.0.1:9"));
}

// ----- refused before anything is sent -------------------------------------------------------

#[tokio::test]
async fn video_is_refused_before_any_request() {
    for provider in ["anthropic", "gemini", "bedrock", "ai-sdk"] {
        let call = Call {
            provider,
            region: Some("us-east-1"),
            messages: vec![user(vec![
                text("Describe this."),
                video(url("video/mp4", "https://media.example/clip.mp4")),
            ])],
            ..Call::default()
        };
        let (result, log) = call.captured().await;
        let error = result.expect_err(provider);
        assert_eq!(
            error.kind,
            ErrorKind::UnsupportedContentBlock,
            "{provider}: {error:?}"
        );
        assert_eq!(error.name, "UnsupportedContentBlockError", "{provider}");
        assert!(
            error.message.contains("video"),
            "{provider}: {}",
            error.message
        );
        assert!(!error.retryable, "{provider}");
        // The adapter that refused the block and the block's type cross as fields.
        let label = match provider {
            "anthropic" => "Anthropic Messages",
            "gemini" => "Gemini generateContent",
            "bedrock" => "Amazon Bedrock Converse",
            _ => "AI SDK",
        };
        assert_eq!(error.provider.as_deref(), Some(label), "{provider}");
        assert_eq!(error.block_type.as_deref(), Some("video"), "{provider}");
        assert!(error.message.starts_with(label), "{}", error.message);
        assert!(log.is_empty(), "{provider}: {:?}", log.all());
    }
}

#[tokio::test]
async fn an_invalid_message_is_refused_before_any_request() {
    let sim = simulator();
    for provider in ["anthropic", "openai", "gemini", "bedrock"] {
        let call = Call {
            provider,
            region: Some("us-east-1"),
            max_attempts: 3,
            messages: vec![user(vec![tool_result(vec![], None)])],
            ..Call::default()
        };
        let error = call.chat(&sim).await.expect_err(provider);
        crate::common::assert_invalid_message(&error);
        let (result, log) = call.captured().await;
        assert_eq!(result.expect_err(provider).kind, ErrorKind::InvalidMessage);
        assert!(log.is_empty(), "{provider}");
    }
    assert_eq!(sim.request_count(), 0);
}

// ----- retries ---------------------------------------------------------------------------------

#[tokio::test]
async fn a_429_with_retry_after_is_retried() {
    let sim = simulator();
    sim.script([Reply::rate_limited("0.01")]);
    let call = Call {
        max_attempts: 2,
        ..Call::default()
    };
    assert_canned(
        &call.chat(&sim).await.expect("success"),
        "claude-sonnet-4-6",
    );
    assert_eq!(sim.request_count(), 2);
}

#[tokio::test]
async fn two_503s_then_success_within_three_attempts() {
    let sim = simulator();
    sim.script([Reply::status(503), Reply::status(503)]);
    let call = Call {
        provider: "openai",
        model: "gpt-4o",
        max_attempts: 3,
        ..Call::default()
    };
    assert_canned(&call.chat(&sim).await.expect("success"), "gpt-4o");
    assert_eq!(sim.request_count(), 3);
    let bodies: Vec<_> = sim.requests().into_iter().map(|r| r.body).collect();
    assert!(
        bodies.windows(2).all(|pair| pair[0] == pair[1]),
        "the same request each time"
    );
}

#[tokio::test]
async fn retries_stop_when_attempts_run_out() {
    let sim = simulator();
    sim.script([Reply::status(500), Reply::status(500), Reply::status(500)]);
    let call = Call {
        max_attempts: 2,
        ..Call::default()
    };
    let error = call.chat(&sim).await.expect_err("500 twice");
    assert_provider_error(&error, Some(500), true);
    assert_eq!(error.provider.as_deref(), Some("anthropic"));
    assert!(
        error.message.contains("overloaded (simulated)"),
        "{}",
        error.message
    );
    assert_eq!(sim.request_count(), 2);
}

/// The default policy is each provider's SDK's (`docs/errors.md#default-retry-policy`): the
/// Anthropic and OpenAI SDKs retry a 500 after about half a second, so the call succeeds.
#[tokio::test]
async fn a_500_then_a_success_succeeds_with_the_default_policy() {
    for (provider, model) in [("anthropic", "claude-sonnet-4-6"), ("openai", "gpt-4o")] {
        let sim = simulator();
        sim.script([Reply::status(500)]);
        let call = Call {
            provider,
            model,
            provider_default: true,
            ..Call::default()
        };
        let started = std::time::Instant::now();
        assert_canned(&call.chat(&sim).await.expect("retried"), model);
        let waited = started.elapsed();
        assert_eq!(sim.request_count(), 2, "{provider}");
        assert!(
            waited >= std::time::Duration::from_millis(370),
            "{provider}: 0.5 s less up to a quarter, waited {waited:?}"
        );
    }
    // Gemini's SDK does not retry: the 500 is the answer.
    let sim = simulator();
    sim.script([Reply::status(500)]);
    let call = Call {
        provider: "gemini",
        model: "gemini-2.5-flash",
        provider_default: true,
        ..Call::default()
    };
    let error = call.chat(&sim).await.expect_err("not retried");
    assert_provider_error(&error, Some(500), true);
    assert_eq!(sim.request_count(), 1);
}

/// A 429 with `retry-after` waits what it asks for, not the policy's own delay.
#[tokio::test]
async fn a_429_with_retry_after_waits_about_that_long() {
    let sim = simulator();
    sim.script([Reply::rate_limited("1.2")]);
    let call = Call {
        provider_default: true,
        ..Call::default()
    };
    let started = std::time::Instant::now();
    assert_canned(
        &call.chat(&sim).await.expect("retried"),
        "claude-sonnet-4-6",
    );
    let waited = started.elapsed();
    assert_eq!(sim.request_count(), 2);
    assert!(
        waited >= std::time::Duration::from_millis(1_150)
            && waited < std::time::Duration::from_secs(5),
        "waited {waited:?}"
    );
}

/// Gemini's `RetryInfo.retryDelay` is the wait; one longer than what is left of the deadline is
/// not waited for: the call fails at once with Gemini's 429, its code and message, not a timeout.
#[tokio::test]
async fn a_retry_delay_past_the_deadline_fails_at_once_with_the_providers_error() {
    let body = |delay: &str| {
        format!(
            r#"{{"error": {{"code": 429, "message": "Resource has been exhausted (e.g. check quota).",
                "status": "RESOURCE_EXHAUSTED", "details": [
                {{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "{delay}"}}]}}}}"#
        )
    };
    let sim = simulator();
    sim.script([Reply::json(429, &body("34.4s"))]);
    let call = Call {
        provider: "gemini",
        model: "gemini-2.5-flash",
        max_attempts: 3,
        deadline_ms: Some(10_000),
        ..Call::default()
    };
    let started = std::time::Instant::now();
    let error = call.chat(&sim).await.expect_err("no time to wait 34.4 s");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_provider_error(&error, Some(429), true);
    assert_eq!(error.name, "ProviderError");
    assert_eq!(error.code.as_deref(), Some("RESOURCE_EXHAUSTED"));
    assert!(
        error.message.contains("Resource has been exhausted"),
        "{}",
        error.message
    );
    assert_eq!(sim.request_count(), 1);

    // A short delay is waited for, then the call succeeds.
    let sim = simulator();
    sim.script([Reply::json(429, &body("0.4s"))]);
    let started = std::time::Instant::now();
    assert_canned(&call.chat(&sim).await.expect("retried"), "gemini-2.5-flash");
    assert!(started.elapsed() >= std::time::Duration::from_millis(390));
    assert_eq!(sim.request_count(), 2);
}

/// The provider's own code and type reach the component's error: OpenAI's string code,
/// OpenRouter's numeric one, Anthropic's `error.type`, Bedrock's error type header.
#[tokio::test]
async fn provider_error_codes_reach_the_error() {
    let cases = [
        (
            "openai",
            Reply::json(
                400,
                r#"{"error": {"message": "Unsupported value: 'temperature'.", "type": "invalid_request_error", "param": "temperature", "code": "unsupported_value"}}"#,
            ),
            Some("unsupported_value"),
            Some("invalid_request_error"),
        ),
        (
            "openai",
            Reply::json(
                402,
                r#"{"error": {"code": 402, "message": "Insufficient credits"}}"#,
            ),
            Some("402"),
            None,
        ),
        (
            "anthropic",
            Reply::json(
                529,
                r#"{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}"#,
            ),
            Some("overloaded_error"),
            Some("overloaded_error"),
        ),
        (
            "bedrock",
            Reply::json(
                400,
                r#"{"__type": "com.amazon.coral.validate#ValidationException", "message": "bad model"}"#,
            ),
            Some("ValidationException"),
            None,
        ),
    ];
    for (provider, reply, code, error_type) in cases {
        let sim = simulator();
        sim.script([reply]);
        let call = Call {
            provider,
            region: Some("us-east-1"),
            ..Call::default()
        };
        let error = call.chat(&sim).await.expect_err(provider);
        assert_eq!(error.code.as_deref(), code, "{provider}: {error:?}");
        assert_eq!(error.error_type.as_deref(), error_type, "{provider}");
        let json = error_json(&error);
        assert_eq!(json["error"]["code"].as_str(), code, "{json}");
    }
}

#[tokio::test]
async fn a_400_is_terminal() {
    let sim = simulator();
    sim.script([Reply::status(400)]);
    let call = Call {
        provider: "openai",
        model: "gpt-4o",
        max_attempts: 3,
        ..Call::default()
    };
    let error = call.chat(&sim).await.expect_err("400");
    assert_provider_error(&error, Some(400), false);
    assert_eq!(error.provider.as_deref(), Some("openai"));
    assert_eq!(sim.request_count(), 1);
}

// ----- transport failures --------------------------------------------------------------------

#[tokio::test]
async fn a_silent_provider_times_out() {
    let sim = simulator();
    sim.script([Reply::Delay(std::time::Duration::from_secs(30))]);
    let call = Call {
        timeout_ms: 200,
        ..Call::default()
    };
    let error = call.chat(&sim).await.expect_err("timeout");
    assert_eq!(error.kind, ErrorKind::Timeout, "{error:?}");
    assert!(error.retryable);
    assert_eq!(sim.request_count(), 1);
}

#[tokio::test]
async fn a_refused_connection_is_a_retryable_provider_error_without_status() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let base_url = format!("http://{}", closed.local_addr().expect("an address"));
    drop(closed);
    let sim = simulator();
    let call = Call {
        base_url: Some(base_url),
        ..Call::default()
    };
    let error = call.chat(&sim).await.expect_err("refused");
    assert_provider_error(&error, None, true);
    assert_eq!(sim.request_count(), 0);
}

#[tokio::test]
async fn malformed_json_is_a_provider_error() {
    for provider in ["anthropic", "openai", "gemini", "bedrock"] {
        let sim = simulator();
        sim.script([Reply::MalformedJson]);
        let call = Call {
            provider,
            region: Some("us-east-1"),
            ..Call::default()
        };
        let error = call.chat(&sim).await.expect_err(provider);
        assert_eq!(error.kind, ErrorKind::Provider, "{provider}: {error:?}");
        assert_eq!(error.http_status, None, "{provider}");
    }
}

#[tokio::test]
async fn an_oversized_body_is_refused() {
    let sim = simulator();
    sim.script([Reply::Oversized(256 * 1024)]);
    let call = Call {
        max_response_bytes: 4096,
        ..Call::default()
    };
    let error = call.chat(&sim).await.expect_err("too large");
    assert_eq!(error.kind, ErrorKind::Provider, "{error:?}");
    assert!(error.message.contains("4096"), "{}", error.message);
}

#[tokio::test]
async fn a_truncated_body_is_a_provider_error() {
    let sim = simulator();
    sim.script([Reply::Truncated]);
    let error = Call::default().chat(&sim).await.expect_err("truncated");
    assert_eq!(error.kind, ErrorKind::Provider, "{error:?}");
}

#[tokio::test]
async fn a_key_echoed_by_the_provider_is_redacted() {
    let sim = simulator();
    let echo = format!(r#"{{"error": {{"message": "Incorrect API key provided: {KEY}."}}}}"#);
    sim.script([Reply::json(401, &echo)]);
    let call = Call {
        provider: "openai",
        ..Call::default()
    };
    // `chat` checks the error JSON for the key.
    let error = call.chat(&sim).await.expect_err("401");
    assert_provider_error(&error, Some(401), false);
    assert!(
        error
            .message
            .contains("Incorrect API key provided: [redacted]"),
        "{}",
        error.message
    );

    let start = serde_json::json!({"type": "message_start", "message": {"id": "m", "model": "c",
        "usage": {"input_tokens": 1, "output_tokens": 1}}});
    let failure = serde_json::json!({"type": "error",
        "error": {"type": "authentication_error", "message": format!("bad key {KEY}")}});
    let stream =
        format!("event: message_start\ndata: {start}\n\nevent: error\ndata: {failure}\n\n");
    sim.script([Reply::sse(&stream)]);
    let (_, error) = Call::default()
        .stream(&sim)
        .await
        .expect_err("an error event");
    assert_eq!(error.kind, ErrorKind::Provider, "{error:?}");
}

// ----- egress -------------------------------------------------------------------------------

#[tokio::test]
async fn offline_allows_loopback_and_denies_the_internet_before_sending() {
    let sim = simulator();
    let offline = Call {
        egress: EgressPolicy::Offline,
        ..Call::default()
    };
    assert_canned(
        &offline.chat(&sim).await.expect("loopback"),
        "claude-sonnet-4-6",
    );

    let hook = LoopbackOnly::new();
    let mut guest = guest_with(hook.clone()).await;
    let error = offline
        .chat_in(&mut guest, "https://api.anthropic.com")
        .await
        .expect_err("denied");
    assert_eq!(error.kind, ErrorKind::EgressDenied, "{error:?}");
    assert!(!error.retryable);
    assert_eq!(hook.denied(), 0, "the guest refused before asking the host");
    assert_eq!(sim.request_count(), 1);
}

#[tokio::test]
async fn an_allowlist_admits_only_its_origins() {
    let sim = simulator();
    let allowed = Call {
        egress: EgressPolicy::Allowlist(vec![sim.base_url()]),
        ..Call::default()
    };
    assert_canned(
        &allowed.chat(&sim).await.expect("allowed"),
        "claude-sonnet-4-6",
    );
    let other = Call {
        egress: EgressPolicy::Allowlist(vec!["https://api.anthropic.com".into()]),
        ..Call::default()
    };
    let error = other.chat(&sim).await.expect_err("not on the list");
    assert_eq!(error.kind, ErrorKind::EgressDenied, "{error:?}");
    assert_eq!(sim.request_count(), 1);
}

#[tokio::test]
async fn the_host_hook_denies_anything_but_loopback() {
    let hook = LoopbackOnly::new();
    let mut guest = guest_with(hook.clone()).await;
    let error = Call::default()
        .chat_in(&mut guest, "https://api.anthropic.com")
        .await
        .expect_err("denied by the host");
    assert_eq!(error.kind, ErrorKind::EgressDenied, "{error:?}");
    assert_eq!(hook.denied(), 1);
}

// ----- streaming ----------------------------------------------------------------------------

/// A Gemini 3 stream that sends each call's arguments in pieces (`partialArgs` at JSON paths,
/// `willContinue`, an empty `functionCall` closing each call; the shape of Google's streams for
/// `streamFunctionCallArguments`), with two calls of one turn: two tool-use events with their
/// whole inputs, and the same two calls in the response (`docs/wire-formats.md#gemini-response`).
#[tokio::test]
async fn gemini_streamed_argument_pieces_become_whole_calls() {
    let chunk = |part: &str, last: bool| {
        format!(
            "data: {{\"candidates\":[{{\"content\":{{\"role\":\"model\",\"parts\":[{part}]}}{}}}]{}}}\r\n\r\n",
            if last { ",\"finishReason\":\"STOP\"" } else { "" },
            if last { ",\"usageMetadata\":{\"promptTokenCount\":26,\"candidatesTokenCount\":23}" } else { "" },
        )
    };
    let stream = [
        chunk(r#"{"functionCall":{"name":"getWeather","willContinue":true},"thoughtSignature":"c2ln"}"#, false),
        chunk(r#"{"functionCall":{"partialArgs":[{"jsonPath":"$.location","stringValue":"Boston","willContinue":true}],"willContinue":true}}"#, false),
        chunk(r#"{"functionCall":{"partialArgs":[{"jsonPath":"$.location","stringValue":", MA"}],"willContinue":true}}"#, false),
        chunk(r#"{"functionCall":{}}"#, false),
        chunk(r#"{"functionCall":{"name":"getWeather","willContinue":true}}"#, false),
        chunk(r#"{"functionCall":{"partialArgs":[{"jsonPath":"$.location","stringValue":"San Francisco","willContinue":true}],"willContinue":true}}"#, false),
        chunk(r#"{"functionCall":{"partialArgs":[{"jsonPath":"$.location","stringValue":""},{"jsonPath":"$.brightness","numberValue":50}],"willContinue":true}}"#, false),
        chunk(r#"{"functionCall":{}}"#, true),
    ]
    .concat();
    let sim = simulator();
    sim.script([Reply::sse(&stream)]);
    let call = Call {
        provider: "gemini",
        model: "gemini-3.1-pro-preview",
        ..Call::default()
    };
    let events = call.stream(&sim).await.expect("a whole stream");
    let calls: Vec<_> = events
        .iter()
        .filter_map(|event| match event {
            StreamEvent::ToolUse(call) => Some(call.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 2, "{events:?}");
    let input = |i: usize| serde_json::from_str::<serde_json::Value>(&calls[i].input).unwrap();
    assert_eq!(calls[0].name, "getWeather");
    assert_eq!(input(0), serde_json::json!({"location": "Boston, MA"}));
    assert_eq!(calls[0].signature.as_deref(), Some("c2ln"));
    assert_eq!(calls[1].name, "getWeather");
    assert_eq!(
        input(1),
        serde_json::json!({"location": "San Francisco", "brightness": 50})
    );
    let Some(StreamEvent::Done(response)) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(response.stop_reason, "tool_use");
    let in_response: Vec<_> = response
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::ToolUse(call) => Some(call.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(in_response, calls);
}

#[tokio::test]
async fn anthropic_streams_text_before_done() {
    let sim = simulator();
    let events = Call::default().stream(&sim).await.expect("a whole stream");
    assert_streamed(&events);
    assert_eq!(only_request(&sim).json().expect("JSON")["stream"], true);
}

#[tokio::test]
async fn openai_streams_text_before_done() {
    let sim = simulator();
    let call = Call {
        provider: "openai",
        model: "gpt-4o",
        ..Call::default()
    };
    let events = call.stream(&sim).await.expect("a whole stream");
    assert_streamed(&events);
    match events.last() {
        Some(StreamEvent::Done(response)) => assert_canned(response, "gpt-4o"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn gemini_and_bedrock_stream_text_before_done() {
    let sim = simulator();
    for (provider, model) in [
        ("gemini", "gemini-2.5-flash"),
        ("bedrock", "amazon.nova-lite"),
    ] {
        let call = Call {
            provider,
            model,
            region: Some("us-east-1"),
            ..Call::default()
        };
        let events = call.stream(&sim).await.expect(provider);
        assert_streamed(&events);
    }
    let paths: Vec<_> = sim.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(
        paths,
        [
            "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
            "/model/amazon.nova-lite/converse-stream"
        ]
    );
}

#[tokio::test]
async fn a_truncated_stream_fails_from_next() {
    for provider in ["anthropic", "openai"] {
        let sim = simulator();
        sim.script([Reply::Truncated]);
        let call = Call {
            provider,
            ..Call::default()
        };
        let (events, error) = call.stream(&sim).await.expect_err(provider);
        assert_eq!(error.kind, ErrorKind::Provider, "{provider}: {error:?}");
        assert!(
            events.iter().all(|e| !matches!(e, StreamEvent::Done(_))),
            "{provider}: {events:?}"
        );
    }
}

#[tokio::test]
async fn a_stream_that_falls_silent_times_out() {
    let sim = simulator();
    sim.script([Reply::Stall(std::time::Duration::from_secs(30))]);
    let call = Call {
        provider: "openai",
        timeout_ms: 300,
        ..Call::default()
    };
    let (events, error) = call.stream(&sim).await.expect_err("silence");
    assert_eq!(error.kind, ErrorKind::Timeout, "{error:?}");
    // What arrived before the silence was delivered as it came: the stream is incremental.
    let pieces = streamed_text_so_far(&events);
    assert!(pieces.len() >= 2, "{events:?}");
    assert!(events.iter().all(|e| !matches!(e, StreamEvent::Done(_))));
}

#[tokio::test]
async fn a_stream_is_retried_before_its_head_only() {
    let sim = simulator();
    sim.script([Reply::status(503)]);
    let call = Call {
        max_attempts: 2,
        ..Call::default()
    };
    assert_streamed(
        &call
            .stream(&sim)
            .await
            .expect("success on the second attempt"),
    );
    assert_eq!(sim.request_count(), 2);

    sim.script([Reply::status(400)]);
    let (events, error) = call.stream(&sim).await.expect_err("400 is terminal");
    assert!(events.is_empty());
    assert_provider_error(&error, Some(400), false);
    assert_eq!(sim.request_count(), 3);
}

#[tokio::test]
async fn a_stream_can_be_abandoned() {
    let sim = simulator();
    let mut guest = guest_with(LoopbackOnly::new()).await;
    let call = Call::default();
    let request = chat_request(call.model, call.messages.clone());
    let stream = guest
        .stream_chat(&request, &call.endpoint(&sim.base_url()), &call.options())
        .await
        .expect("no trap")
        .expect("started");
    let first = guest
        .next_event(&stream)
        .await
        .expect("no trap")
        .expect("an event");
    assert!(matches!(first, Some(StreamEvent::Text(_))), "{first:?}");
    guest.close_stream(stream).await.expect("dropped");
    // The instance stays usable after abandoning a stream.
    assert_canned(
        &call
            .chat_in(&mut guest, &sim.base_url())
            .await
            .expect("success"),
        "claude-sonnet-4-6",
    );
}

#[tokio::test]
async fn connections_are_kept_alive_and_a_broken_one_is_not_reused() {
    let sim = simulator();
    let mut guest = guest_with(LoopbackOnly::new()).await;
    let call = Call::default();
    for _ in 0..3 {
        call.chat_in(&mut guest, &sim.base_url())
            .await
            .expect("answered");
    }
    assert_eq!(sim.request_count(), 3);
    assert_eq!(
        sim.connection_count(),
        1,
        "one connection for three requests"
    );
    sim.script([Reply::Truncated]);
    call.chat_in(&mut guest, &sim.base_url())
        .await
        .expect_err("truncated");
    call.chat_in(&mut guest, &sim.base_url())
        .await
        .expect("answered on a new connection");
    assert_eq!(sim.connection_count(), 2);
}
