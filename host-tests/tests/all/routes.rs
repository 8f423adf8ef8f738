//! The routes world's `routes` export (`oma_routes.wasm`): the gateway's HTTP rules for hosts
//! that serve HTTP themselves (`docs/gateway.md`, `docs/worlds.md`). Each answer is checked against what the
//! gateway's own HTTP suite expects of `oma_gateway.wasm` (`crates/cli/tests/gateway.rs`): the
//! same statuses, error names and codes, headers, log line and server-sent events, and a run
//! stepped as a driver session whose only steps are HTTP and events.

use oma_host_tests::routes_driver_types::{Answer, Poll, Response, ResponseHead, Step};
use oma_host_tests::routes_types::{
    BodyFailure, BodyVerdict, CountOps, HeadVerdict, LimitsVerdict, Reply, RequestHead, RunEnd,
};
use oma_host_tests::{RoutesGuest, RoutesHarness, Shared, WitError};

use serde_json::{json, Value};
use wasmtime::component::ResourceAny;

const KEY: &str = "sk-routes-SECRET-8080";
const TOKEN: &str = "routes-token-SECRET-1";
const BASE: &str = "http://127.0.0.1:9";
const NOW: u64 = 1_700_000_000_000;

async fn routes_guest() -> RoutesGuest {
    RoutesHarness::shared()
        .expect("the routes guest loads")
        .instantiate()
        .await
        .expect("it instantiates")
}

fn environment() -> Vec<(String, String)> {
    [
        ("ANTHROPIC_API_KEY", KEY),
        ("ANTHROPIC_BASE_URL", BASE),
        ("OMA_GATEWAY_TOKEN", TOKEN),
        ("OMA_GATEWAY_MAX_BODY_BYTES", "4096"),
        ("OMA_GATEWAY_DEADLINE_MS", "2000"),
    ]
    .iter()
    .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
    .collect()
}

fn head(method: &str, path: &str, extra: &[(&str, &str)]) -> RequestHead {
    let mut headers = vec![("Authorization".to_owned(), format!("Bearer {TOKEN}"))];
    headers.extend(
        extra
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned())),
    );
    RequestHead {
        method: method.into(),
        path: path.into(),
        headers,
    }
}

async fn request(
    guest: &mut RoutesGuest,
    environment: Vec<(String, String)>,
    head: RequestHead,
) -> ResourceAny {
    let (store, bindings) = guest.parts();
    bindings
        .oma_agent_routes()
        .request()
        .call_constructor(store, &environment, &head, NOW)
        .await
        .expect("no trap")
}

async fn on_head(guest: &mut RoutesGuest, request: ResourceAny) -> HeadVerdict {
    let (store, bindings) = guest.parts();
    let routes = bindings.oma_agent_routes();
    routes
        .request()
        .call_head(store, request)
        .await
        .expect("no trap")
}

async fn on_body(
    guest: &mut RoutesGuest,
    request: ResourceAny,
    body: &str,
) -> Result<BodyVerdict, WitError> {
    let (store, bindings) = guest.parts();
    let routes = bindings.oma_agent_routes();
    routes
        .request()
        .call_body(store, request, body.as_bytes(), NOW, 7)
        .await
        .expect("no trap")
}

/// A request answered through the head and the body: its reply, or its run.
async fn answer(guest: &mut RoutesGuest, head: RequestHead, body: &str) -> BodyVerdict {
    let request = request(guest, environment(), head).await;
    match on_head(guest, request).await {
        HeadVerdict::ReadBody(limits) => {
            assert_eq!(limits.max_bytes, 4096);
            assert_eq!(limits.deadline_at_ms, NOW + 2000);
        }
        HeadVerdict::Reply(reply) => panic!("the head was answered: {reply:?}"),
    }
    on_body(guest, request, body).await.expect("a verdict")
}

fn json_of(reply: &Reply) -> Value {
    assert!(
        reply
            .headers
            .contains(&("content-type".into(), "application/json".into())),
        "no JSON content-type: {reply:?}"
    );
    serde_json::from_str(&reply.body).expect("the body is JSON")
}

fn expect_error(reply: &Reply, status: u16, name: &str, code: &str) -> Value {
    assert_eq!(reply.status, status, "{reply:?}");
    let body = json_of(reply);
    assert_eq!(body["error"]["name"], json!(name), "{body}");
    assert_eq!(body["error"]["code"], json!(code), "{body}");
    assert_eq!(body["error"]["retryable"], json!(status >= 500), "{body}");
    assert!(!reply.body.contains("SECRET"), "a secret in {reply:?}");
    body
}

fn reply_of(verdict: BodyVerdict) -> Reply {
    match verdict {
        BodyVerdict::Reply(reply) => reply,
        BodyVerdict::Run(_) => panic!("a run instead of a reply"),
    }
}

#[tokio::test]
async fn the_head_answers_health_auth_routes_methods_and_declared_lengths() {
    let mut guest = routes_guest().await;
    let health = request(&mut guest, environment(), head("GET", "/healthz", &[])).await;
    let HeadVerdict::Reply(reply) = on_head(&mut guest, health).await else {
        panic!("/healthz reads no body")
    };
    assert_eq!(
        (reply.status, json_of(&reply)),
        (200, json!({"status": "ok"}))
    );

    let mut anonymous = head("POST", "/v1/validate", &[]);
    anonymous.headers.clear();
    let cases = [
        (
            anonymous,
            401,
            "UNAUTHORIZED",
            Some(("www-authenticate", "Bearer")),
        ),
        (head("GET", "/v1/nothing?x=1", &[]), 404, "NOT_FOUND", None),
        (
            head("GET", "/v1/run", &[]),
            405,
            "METHOD_NOT_ALLOWED",
            Some(("allow", "POST")),
        ),
        (
            head("POST", "/v1/validate", &[("Content-Length", "4097")]),
            413,
            "PAYLOAD_TOO_LARGE",
            None,
        ),
    ];
    for (head, status, code, header) in cases {
        let request = request(&mut guest, environment(), head).await;
        let HeadVerdict::Reply(reply) = on_head(&mut guest, request).await else {
            panic!("{code}: the head said to read the body")
        };
        expect_error(&reply, status, "Error", code);
        if let Some((name, value)) = header {
            assert!(
                reply.headers.contains(&(name.into(), value.into())),
                "{code}: no {name}: {reply:?}"
            );
        }
        // No body may be given after a refusal.
        let refused = on_body(&mut guest, request, "[]").await;
        assert_eq!(refused.expect_err("refused").name, "SessionStateError");
    }
}

#[tokio::test]
async fn a_bad_variable_is_500_naming_it_and_never_its_value() {
    let mut guest = routes_guest().await;
    let mut environment = environment();
    environment.push(("OMA_GATEWAY_DEADLINE_MS".into(), "soon-7731".into()));
    let request = request(&mut guest, environment, head("GET", "/healthz", &[])).await;
    let HeadVerdict::Reply(reply) = on_head(&mut guest, request).await else {
        panic!("a bad configuration reads no body")
    };
    let body = expect_error(&reply, 500, "Error", "CONFIGURATION");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("OMA_GATEWAY_DEADLINE_MS"));
    assert!(!reply.body.contains("soon-7731"));
}

#[tokio::test]
async fn bodies_are_validated_formatted_and_refused_as_the_gateway_does() {
    let mut guest = routes_guest().await;
    let list = json!([{"role": "user", "content": [{"type": "text", "text": "Hello?"}]}]);
    let reply = reply_of(
        answer(
            &mut guest,
            head("POST", "/v1/validate", &[]),
            &list.to_string(),
        )
        .await,
    );
    assert_eq!((reply.status, json_of(&reply)), (200, list.clone()));

    let reply = reply_of(answer(&mut guest, head("POST", "/v1/validate", &[]), "[{").await);
    expect_error(&reply, 400, "Error", "MALFORMED_JSON");

    let bad = json!([{"role": "user", "content": "hi"}]).to_string();
    let reply = reply_of(answer(&mut guest, head("POST", "/v1/validate", &[]), &bad).await);
    let body = expect_error(&reply, 422, "InvalidMessageError", "INVALID_MESSAGE");
    assert_eq!(
        body["error"]["message"],
        json!("messages[0].content must be a ContentBlock[], got string")
    );

    let format = json!({"provider": "anthropic", "model": "claude-sonnet-4-6", "messages": list});
    let reply = reply_of(
        answer(
            &mut guest,
            head("POST", "/v1/format", &[]),
            &format.to_string(),
        )
        .await,
    );
    let shown = json_of(&reply);
    assert_eq!(reply.status, 200);
    assert_eq!(shown["url"], json!(format!("{BASE}/v1/messages")));
    assert!(
        !reply.body.contains(KEY),
        "the key is shown: {}",
        reply.body
    );

    // A provider the environment does not configure: 403, from the body, nothing to step.
    let run = json!({"provider": "openai", "model": "gpt-4o", "prompt": "Hello?"}).to_string();
    let reply = reply_of(answer(&mut guest, head("POST", "/v1/run", &[]), &run).await);
    expect_error(&reply, 403, "EgressPolicyError", "EGRESS_POLICY_DENIED");

    // Bodies the host could not read.
    let request = request(&mut guest, environment(), head("POST", "/v1/validate", &[])).await;
    assert!(matches!(
        on_head(&mut guest, request).await,
        HeadVerdict::ReadBody(_)
    ));
    for (failure, status, code) in [
        (BodyFailure::TooLarge, 413, "PAYLOAD_TOO_LARGE"),
        (BodyFailure::TimedOut, 408, "REQUEST_TIMEOUT"),
        (BodyFailure::Broken("reset".into()), 400, "BAD_REQUEST"),
    ] {
        let (store, bindings) = guest.parts();
        let reply = bindings
            .oma_agent_routes()
            .request()
            .call_body_failed(store, request, &failure)
            .await
            .expect("no trap");
        expect_error(&reply, status, "Error", code);
    }
}

fn anthropic_reply() -> String {
    json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
        "content": [{"type": "text", "text": "Hi from the provider."}], "stop_reason": "end_turn",
        "usage": {"input_tokens": 4, "output_tokens": 2}
    })
    .to_string()
}

/// The provider's whole answer with [`anthropic_reply`].
fn anthropic_answer() -> Answer {
    Answer::Response(Response {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        body: anthropic_reply(),
    })
}

async fn next(guest: &mut RoutesGuest, run: ResourceAny, now: u64) -> Poll {
    let (store, bindings) = guest.parts();
    let routes = bindings.oma_agent_routes();
    routes
        .run()
        .call_next(store, run, now)
        .await
        .expect("no trap")
        .expect("a poll")
}

async fn give(guest: &mut RoutesGuest, run: ResourceAny, answer: Answer) {
    let (store, bindings) = guest.parts();
    let routes = bindings.oma_agent_routes();
    routes
        .run()
        .call_answer(store, run, &answer)
        .await
        .expect("no trap")
        .expect("the answer is taken");
}

async fn end(guest: &mut RoutesGuest, run: ResourceAny, now: u64) -> Result<RunEnd, WitError> {
    let (store, bindings) = guest.parts();
    let routes = bindings.oma_agent_routes();
    routes
        .run()
        .call_end(store, run, now)
        .await
        .expect("no trap")
}

async fn event_text(guest: &mut RoutesGuest, run: ResourceAny) -> Option<String> {
    let (store, bindings) = guest.parts();
    let routes = bindings.oma_agent_routes();
    routes
        .run()
        .call_event_text(store, run)
        .await
        .expect("no trap")
}

#[tokio::test]
async fn a_run_is_stepped_like_a_session_and_ends_with_the_gateways_reply() {
    let mut guest = routes_guest().await;
    let body = json!({"provider": "anthropic", "model": "claude-sonnet-4-6", "prompt": "Hello?"});
    let BodyVerdict::Run(run) =
        answer(&mut guest, head("POST", "/v1/run", &[]), &body.to_string()).await
    else {
        panic!("no run")
    };
    let early = end(&mut guest, run, NOW).await;
    assert_eq!(early.expect_err("not over").name, "SessionStateError");
    let Poll::Step(Step::Send(sent)) = next(&mut guest, run, NOW).await else {
        panic!("the first step is not a send")
    };
    assert_eq!(sent.url, format!("{BASE}/v1/messages"));
    assert!(!sent.stream);
    give(&mut guest, run, anthropic_answer()).await;
    loop {
        match next(&mut guest, run, NOW + 5).await {
            Poll::Finished(_) => break,
            Poll::Step(Step::Event(_)) => {}
            other => panic!("an unexpected poll: {other:?}"),
        }
    }
    let Ok(RunEnd::Reply(reply)) = end(&mut guest, run, NOW + 5).await else {
        panic!("no whole reply")
    };
    let result = json_of(&reply);
    assert_eq!(reply.status, 200);
    assert_eq!(result["success"], json!(true), "{result}");
    assert_eq!(result["output"], json!("Hi from the provider."));
    assert!(!reply.body.contains(KEY));

    // Past the deadline, a provider that never answered: the run times out, and the reply is 504.
    let BodyVerdict::Run(late) =
        answer(&mut guest, head("POST", "/v1/run", &[]), &body.to_string()).await
    else {
        panic!("no run")
    };
    assert!(matches!(
        next(&mut guest, late, NOW).await,
        Poll::Step(Step::Send(_))
    ));
    let over = loop {
        match next(&mut guest, late, NOW + 2500).await {
            Poll::Finished(_) => break end(&mut guest, late, NOW + 2500).await,
            Poll::Waiting(_) | Poll::Step(_) => continue,
        }
    };
    let Ok(RunEnd::Reply(reply)) = over else {
        panic!("no whole reply")
    };
    expect_error(&reply, 504, "LLMCallTimeoutError", "LLM_CALL_TIMEOUT");
}

#[tokio::test]
async fn a_streamed_run_writes_each_event_as_sse_and_ends_with_done() {
    let mut guest = routes_guest().await;
    let accept = [("Accept", "text/event-stream")];
    let body = json!({"provider": "anthropic", "model": "claude-sonnet-4-6", "prompt": "Hello?"});
    let BodyVerdict::Run(run) = answer(
        &mut guest,
        head("POST", "/v1/run", &accept),
        &body.to_string(),
    )
    .await
    else {
        panic!("no run")
    };
    let (store, bindings) = guest.parts();
    let routes = bindings.oma_agent_routes();
    assert!(routes.run().call_streaming(&mut *store, run).await.unwrap());
    let headers = routes.run().call_stream_headers(store, run).await.unwrap();
    assert!(headers.contains(&("content-type".into(), "text/event-stream".into())));
    let Poll::Step(Step::Send(sent)) = next(&mut guest, run, NOW).await else {
        panic!("the first step is not a send")
    };
    assert!(sent.stream);
    assert_eq!(event_text(&mut guest, run).await, None);
    give(
        &mut guest,
        run,
        Answer::Head(ResponseHead {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
        }),
    )
    .await;
    let stream = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":3,\"output_tokens\":0}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );
    let mut chunks = vec![Answer::Chunk(stream.as_bytes().to_vec()), Answer::End];
    chunks.reverse();
    let mut events = Vec::new();
    loop {
        match next(&mut guest, run, NOW + 1).await {
            Poll::Step(Step::Receive) => {
                give(&mut guest, run, chunks.pop().expect("asked past the end")).await
            }
            Poll::Step(Step::Event(_)) => {
                events.push(event_text(&mut guest, run).await.expect("an event's text"))
            }
            Poll::Finished(_) => break,
            other => panic!("an unexpected poll: {other:?}"),
        }
    }
    assert!(
        events.contains(&"event: text_delta\ndata: \"Hi\"\n\n".to_owned()),
        "{events:?}"
    );
    assert!(
        events.contains(&"event: text\ndata: \"Hi\"\n\n".to_owned()),
        "{events:?}"
    );
    let Ok(RunEnd::LastEvent(done)) = end(&mut guest, run, NOW + 1).await else {
        panic!("no last event")
    };
    let data: Value = serde_json::from_str(
        done.strip_prefix("event: done\ndata: ")
            .and_then(|d| d.strip_suffix("\n\n"))
            .expect("a done event"),
    )
    .unwrap();
    assert_eq!(
        (data["success"].clone(), data["output"].clone()),
        (json!(true), json!("Hi"))
    );

    // Content the format cannot carry: refused before anything is sent, as a whole 422.
    let video = json!({"provider": "anthropic", "model": "m", "messages": [{"role": "user", "content": [
        {"type": "video", "source": {"type": "url", "media_type": "video/mp4", "url": "https://example.com/v.mp4"}}
    ]}]});
    let BodyVerdict::Run(refused) = answer(
        &mut guest,
        head("POST", "/v1/run", &accept),
        &video.to_string(),
    )
    .await
    else {
        panic!("no run")
    };
    assert!(matches!(
        next(&mut guest, refused, NOW).await,
        Poll::Finished(_)
    ));
    let Ok(RunEnd::Reply(reply)) = end(&mut guest, refused, NOW).await else {
        panic!("not a whole reply")
    };
    expect_error(
        &reply,
        422,
        "UnsupportedContentBlockError",
        "UNSUPPORTED_CONTENT_BLOCK",
    );
}

#[tokio::test]
async fn the_log_line_shows_no_query() {
    let mut guest = routes_guest().await;
    let (store, bindings) = guest.parts();
    let line = bindings
        .oma_agent_routes()
        .call_log_line(store, "POST", "/v1/run?key=SECRET", 504, 2001)
        .await
        .expect("no trap");
    assert_eq!(line, "oma-gateway: POST /v1/run 504 2001ms\n");
}

/// `/v1/chat/completions` through the routes world: a refusal is OpenAI's error shape with
/// nothing to step, and a request is a run whose only steps are HTTP, ending with a
/// `chat.completion`.
#[tokio::test]
async fn a_chat_completion_is_stepped_like_a_session_and_answers_openais_shape() {
    let mut guest = routes_guest().await;
    let video = json!({
        "model": "anthropic/claude-sonnet-4-6",
        "messages": [{"role": "user", "content": [
            {"type": "video_url", "video_url": {"url": "https://example.com/a.mp4"}}
        ]}],
    });
    let reply = reply_of(
        answer(
            &mut guest,
            head("POST", "/v1/chat/completions", &[]),
            &video.to_string(),
        )
        .await,
    );
    assert_eq!(reply.status, 400, "{reply:?}");
    let error = json_of(&reply);
    assert_eq!(
        error["error"]["code"],
        json!("UnsupportedContentBlockError")
    );
    assert_eq!(error["error"]["type"], json!("invalid_request_error"));

    let body = json!({
        "model": "anthropic/claude-sonnet-4-6",
        "messages": [{"role": "user", "content": "Hello?"}],
    });
    let BodyVerdict::Run(run) = answer(
        &mut guest,
        head("POST", "/v1/chat/completions", &[]),
        &body.to_string(),
    )
    .await
    else {
        panic!("no run")
    };
    let Poll::Step(Step::Send(sent)) = next(&mut guest, run, NOW).await else {
        panic!("the first step is not a send")
    };
    assert_eq!(sent.url, format!("{BASE}/v1/messages"));
    give(&mut guest, run, anthropic_answer()).await;
    assert!(matches!(
        next(&mut guest, run, NOW + 5).await,
        Poll::Finished(_)
    ));
    let Ok(RunEnd::Reply(reply)) = end(&mut guest, run, NOW + 5).await else {
        panic!("no whole reply")
    };
    let completion = json_of(&reply);
    assert_eq!(reply.status, 200);
    assert_eq!(completion["object"], json!("chat.completion"));
    assert_eq!(completion["model"], json!("anthropic/claude-sonnet-4-6"));
    assert_eq!(
        completion["choices"][0]["message"]["content"],
        json!("Hi from the provider.")
    );
    assert_eq!(completion["usage"]["total_tokens"], json!(6));
    assert!(!reply.body.contains(KEY));
}

// ----------------------------------------------------------------------- per-token limits

/// The environment with `keys` as `OMA_GATEWAY_KEYS`, and `bucket` as
/// `OMA_GATEWAY_LIMITS_BUCKET` when given.
fn limited_environment(keys: &str, bucket: Option<&str>) -> Vec<(String, String)> {
    let mut environment = environment();
    environment.push(("OMA_GATEWAY_KEYS".into(), keys.into()));
    if let Some(bucket) = bucket {
        environment.push(("OMA_GATEWAY_LIMITS_BUCKET".into(), bucket.into()));
    }
    environment
}

/// A new `request` (as [`request`], under a name no local shadows).
async fn open_request(
    guest: &mut RoutesGuest,
    environment: Vec<(String, String)>,
    head: RequestHead,
) -> ResourceAny {
    request(guest, environment, head).await
}

/// A head of `path` with `key` as the client's token.
fn keyed(method: &str, path: &str, key: &str) -> RequestHead {
    RequestHead {
        method: method.into(),
        path: path.into(),
        headers: vec![("authorization".into(), format!("Bearer {key}"))],
    }
}

async fn limits(
    guest: &mut RoutesGuest,
    request: ResourceAny,
    now: u64,
) -> Result<LimitsVerdict, WitError> {
    let (store, bindings) = guest.parts();
    bindings
        .oma_agent_routes()
        .request()
        .call_limits(store, request, now)
        .await
        .expect("no trap")
}

async fn counted(
    guest: &mut RoutesGuest,
    request: ResourceAny,
    counts: Result<Vec<u64>, String>,
) -> Result<Option<Reply>, WitError> {
    let (store, bindings) = guest.parts();
    bindings
        .oma_agent_routes()
        .request()
        .call_counted(store, request, counts.as_deref().map_err(String::as_str))
        .await
        .expect("no trap")
}

async fn count_usage(
    guest: &mut RoutesGuest,
    run: ResourceAny,
    now: u64,
) -> Result<Option<CountOps>, WitError> {
    let (store, bindings) = guest.parts();
    bindings
        .oma_agent_routes()
        .run()
        .call_count_usage(store, run, now)
        .await
        .expect("no trap")
}

/// `/healthz`'s body under `environment`.
async fn health(guest: &mut RoutesGuest, environment: Vec<(String, String)>) -> Value {
    let request = open_request(guest, environment, keyed("GET", "/healthz", "nobody")).await;
    let HeadVerdict::Reply(reply) = on_head(guest, request).await else {
        panic!("/healthz reads no body")
    };
    assert_eq!(reply.status, 200);
    json_of(&reply)
}

/// A store shared by replicas as the Worker's Durable Object keeps it: counts by name, each
/// batch applied whole (the test applies one batch at a time).
#[derive(Default)]
struct Store {
    counts: std::collections::HashMap<String, u64>,
    batches: Vec<CountOps>,
}

impl Store {
    fn apply(&mut self, ops: &CountOps) -> Vec<u64> {
        self.batches.push(ops.clone());
        let counts: Vec<u64> = ops
            .add
            .iter()
            .map(|(name, delta)| {
                let count = self.counts.entry(name.clone()).or_insert(0);
                *count += delta;
                *count
            })
            .collect();
        if counts.last() == Some(&1) {
            for name in &ops.forget {
                self.counts.remove(name);
            }
        }
        counts
    }
}

/// A `/v1/run` stepped to its end against a provider that answers with 6 tokens of usage.
async fn run_to_the_end(guest: &mut RoutesGuest, run: ResourceAny, now: u64) {
    let Poll::Step(Step::Send(_)) = next(guest, run, now).await else {
        panic!("the first step is not a send")
    };
    give(guest, run, anthropic_answer()).await;
    loop {
        match next(guest, run, now).await {
            Poll::Finished(_) => break,
            Poll::Step(Step::Event(_)) => {}
            other => panic!("an unexpected poll: {other:?}"),
        }
    }
    assert!(matches!(end(guest, run, now).await, Ok(RunEnd::Reply(_))));
}

fn run_body() -> String {
    json!({"provider": "anthropic", "model": "claude-sonnet-4-6", "prompt": "Hello?"}).to_string()
}

/// Without `OMA_GATEWAY_LIMITS_BUCKET`, the routes component counts in its own memory: the
/// instance's requests past `rpm` are `429` before their body is read, tokens are counted after
/// the answer, `/healthz` says `"per-instance"`, and the steps are taken in their order only.
#[tokio::test]
async fn limits_are_counted_in_the_instances_memory_without_a_store() {
    let mut guest = routes_guest().await;
    let keys = r#"{"key-rpm": {"rpm": 2}, "key-tpm": {"tpm": 6}, "key-free": {}}"#;
    let environment = limited_environment(keys, None);
    let healthz = health(&mut guest, environment.clone()).await;
    assert_eq!(healthz, json!({"status": "ok", "limits": "per-instance"}));

    let now = 40 * 60_000 + 15_000;
    for i in 0..3 {
        let request = open_request(
            &mut guest,
            environment.clone(),
            keyed("POST", "/v1/run", "key-rpm"),
        )
        .await;
        assert!(matches!(
            on_head(&mut guest, request).await,
            HeadVerdict::ReadBody(_)
        ));
        if i == 0 {
            // A limited request's body is not taken before its limits are counted.
            let early = on_body(&mut guest, request, &run_body()).await;
            assert_eq!(early.expect_err("not counted").name, "SessionStateError");
            let stray = counted(&mut guest, request, Ok(vec![1])).await;
            assert_eq!(stray.expect_err("no count").name, "SessionStateError");
        }
        let verdict = limits(&mut guest, request, now + i)
            .await
            .expect("a verdict");
        if i < 2 {
            assert!(matches!(verdict, LimitsVerdict::Pass), "{verdict:?}");
            let twice = limits(&mut guest, request, now + i).await;
            assert_eq!(twice.expect_err("counted").name, "SessionStateError");
            assert!(matches!(
                on_body(&mut guest, request, &run_body()).await,
                Ok(BodyVerdict::Run(_))
            ));
            continue;
        }
        let LimitsVerdict::Reply(reply) = verdict else {
            panic!("the third request in the minute is let through: {verdict:?}")
        };
        expect_error(&reply, 429, "RateLimitError", "RATE_LIMITED");
        assert!(reply.headers.contains(&("retry-after".into(), "45".into())));
        // A refused request has no body to give.
        let after = on_body(&mut guest, request, &run_body()).await;
        assert_eq!(after.expect_err("refused").name, "SessionStateError");
    }
    // OpenAI's shape on its route; the next minute starts afresh.
    let request = opened(&mut guest, &environment, "/v1/chat/completions", "key-rpm").await;
    let LimitsVerdict::Reply(reply) = limits(&mut guest, request, now).await.unwrap() else {
        panic!("let through")
    };
    assert_eq!(reply.status, 429);
    assert_eq!(
        json_of(&reply)["error"]["code"],
        json!("rate_limit_exceeded")
    );
    let request = opened(&mut guest, &environment, "/v1/run", "key-rpm").await;
    assert!(matches!(
        limits(&mut guest, request, now + 60_000).await,
        Ok(LimitsVerdict::Pass)
    ));

    // Tokens: the run's usage (6) is counted after its answer, and the next request is refused.
    let request = opened(&mut guest, &environment, "/v1/run", "key-tpm").await;
    assert!(matches!(
        limits(&mut guest, request, now).await,
        Ok(LimitsVerdict::Pass)
    ));
    let Ok(BodyVerdict::Run(run)) = on_body(&mut guest, request, &run_body()).await else {
        panic!("no run")
    };
    let early = count_usage(&mut guest, run, now).await;
    assert_eq!(early.expect_err("not over").name, "SessionStateError");
    run_to_the_end(&mut guest, run, now).await;
    assert!(matches!(
        count_usage(&mut guest, run, now + 1).await,
        Ok(None)
    ));
    let request = opened(&mut guest, &environment, "/v1/run", "key-tpm").await;
    let LimitsVerdict::Reply(reply) = limits(&mut guest, request, now + 2).await.unwrap() else {
        panic!("the tokens of the minute were not counted")
    };
    assert!(json_of(&reply)["error"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("6 tokens per minute")));

    // Nothing is limited for a key without limits, for a route that calls no provider, or for
    // OMA_GATEWAY_TOKEN: their body is taken without counting.
    for (path, key) in [
        ("/v1/run", "key-free"),
        ("/v1/validate", "key-rpm"),
        ("/v1/run", TOKEN),
    ] {
        let request = open_request(&mut guest, environment.clone(), keyed("POST", path, key)).await;
        on_head(&mut guest, request).await;
        let body = if path == "/v1/run" {
            run_body()
        } else {
            "[]".to_owned()
        };
        assert!(on_body(&mut guest, request, &body).await.is_ok(), "{path}");
    }
}

/// With `OMA_GATEWAY_LIMITS_BUCKET`, the host performs the counting on its store and hands the
/// counts back: two instances (two replicas) sharing one store are held to one count, a run's
/// tokens are an add after its answer, and a failing store is a `503`, never a pass.
/// A `POST` to `path` with `key` as its token, opened on `guest` with `environment` and its head
/// answered (the body is to be read).
async fn opened(
    guest: &mut RoutesGuest,
    environment: &[(String, String)],
    path: &str,
    key: &str,
) -> ResourceAny {
    let request = open_request(guest, environment.to_vec(), keyed("POST", path, key)).await;
    on_head(guest, request).await;
    request
}

/// A `/v1/run` of `key-3` opened on `guest` at `at`, its limits counted on the shared `store`:
/// the request, the operations it handed out, and the store's counts after them.
async fn run_counted(
    guest: &mut RoutesGuest,
    environment: &[(String, String)],
    store: &mut Store,
    at: u64,
) -> (ResourceAny, CountOps, Vec<u64>) {
    let request = opened(guest, environment, "/v1/run", "key-3").await;
    let Ok(LimitsVerdict::Count(ops)) = limits(guest, request, at).await else {
        panic!("not handed to the store")
    };
    let counts = store.apply(&ops);
    (request, ops, counts)
}

#[tokio::test]
async fn limits_are_counted_on_the_hosts_store_shared_by_replicas() {
    let mut replicas = [routes_guest().await, routes_guest().await];
    let keys = r#"{"key-3": {"rpm": 3, "tpm": 10}}"#;
    let environment = limited_environment(keys, Some("LIMITS"));
    let healthz = health(&mut replicas[0], environment.clone()).await;
    assert_eq!(healthz, json!({"status": "ok", "limits": "shared"}));

    let mut store = Store::default();
    let now = 50 * 60_000 + 30_000;
    let mut ids = Vec::new();
    for i in 0..4usize {
        let guest = &mut replicas[i % 2];
        let path = ["/v1/run", "/v1/chat/completions", "/v1/messages", "/v1/run"][i];
        let request = opened(guest, &environment, path, "key-3").await;
        let LimitsVerdict::Count(ops) = limits(guest, request, now).await.expect("a verdict")
        else {
            panic!("not handed to the store")
        };
        assert_eq!(ops.store, "LIMITS");
        assert!(!format!("{ops:?}").contains("key-3"), "{ops:?}");
        assert_eq!(ops.add.len(), 2, "{ops:?}");
        assert_eq!(ops.add[0].1, 0, "the tokens are read");
        assert_eq!(ops.add[1].1, 1, "the request is counted");
        assert_eq!(ops.forget.len(), 2, "{ops:?}");
        ids.push(ops.id.clone());
        let counts = store.apply(&ops);
        let early = on_body(guest, request, &run_body()).await;
        if i == 0 {
            assert_eq!(early.expect_err("not counted").name, "SessionStateError");
        }
        let verdict = counted(guest, request, Ok(counts))
            .await
            .expect("a verdict");
        if i < 3 {
            assert!(verdict.is_none(), "{verdict:?}");
            continue;
        }
        let reply = verdict.expect("the fourth request in the minute is refused");
        expect_error(&reply, 429, "RateLimitError", "RATE_LIMITED");
        assert!(reply.headers.contains(&("retry-after".into(), "30".into())));
        let again = counted(guest, request, Ok(vec![0, 1])).await;
        assert_eq!(again.expect_err("given").name, "SessionStateError");
    }
    assert!(
        ids.iter().all(|id| id == &ids[0]),
        "one id per key: {ids:?}"
    );

    // The next minute: the first request forgets the minute before; a run's tokens are added
    // after its answer, and once they reach `tpm` the next request is refused.
    let next_minute = now + 60_000;
    let at = next_minute;
    let guest = &mut replicas[0];
    let (request, ops, counts) = run_counted(guest, &environment, &mut store, at).await;
    assert_eq!(counts, vec![0, 1]);
    assert!(ops
        .forget
        .iter()
        .all(|name| !store.counts.contains_key(name)));
    assert!(matches!(
        counted(guest, request, Ok(counts)).await,
        Ok(None)
    ));
    let Ok(BodyVerdict::Run(run)) = on_body(guest, request, &run_body()).await else {
        panic!("no run")
    };
    run_to_the_end(guest, run, at).await;
    let usage = count_usage(guest, run, at + 5)
        .await
        .expect("over")
        .expect("the tokens to add");
    assert_eq!(usage.id, ops.id);
    assert_eq!(usage.add.len(), 1);
    assert_eq!(usage.add[0].1, 6, "4 in and 2 out");
    assert!(usage.forget.is_empty());
    store.apply(&usage);
    assert!(
        matches!(count_usage(guest, run, at + 6).await, Ok(None)),
        "once"
    );
    // 6 of 10: admitted; 12: refused, on the other replica.
    let guest = &mut replicas[1];
    let (request, _, counts) = run_counted(guest, &environment, &mut store, at + 10).await;
    assert_eq!(counts, vec![6, 2]);
    assert!(matches!(
        counted(guest, request, Ok(counts)).await,
        Ok(None)
    ));
    let Ok(BodyVerdict::Run(run)) = on_body(guest, request, &run_body()).await else {
        panic!("no run")
    };
    run_to_the_end(guest, run, at + 10).await;
    let usage = count_usage(guest, run, at + 15).await.unwrap().unwrap();
    store.apply(&usage);
    let guest = &mut replicas[0];
    let (request, _, counts) = run_counted(guest, &environment, &mut store, at + 20).await;
    let reply = counted(guest, request, Ok(counts)).await.unwrap().unwrap();
    assert_eq!(reply.status, 429);
    assert!(json_of(&reply)["error"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("10 tokens per minute")));

    // A store that fails, or answers short, is a 503 in the route's shape, its error unshown.
    for (path, counts) in [
        ("/v1/chat/completions", Err("no binding LIMITS".to_owned())),
        ("/v1/run", Ok(vec![1])),
    ] {
        let guest = &mut replicas[0];
        let request = opened(guest, &environment, path, "key-3").await;
        assert!(matches!(
            limits(guest, request, at).await,
            Ok(LimitsVerdict::Count(_))
        ));
        let reply = counted(guest, request, counts).await.unwrap().unwrap();
        assert_eq!(reply.status, 503, "{reply:?}");
        assert!(reply.headers.contains(&("retry-after".into(), "1".into())));
        assert!(!reply.body.contains("no binding"), "{}", reply.body);
        let after = on_body(guest, request, &run_body()).await;
        assert_eq!(after.expect_err("refused").name, "SessionStateError");
    }
}

async fn export_traces(
    guest: &mut RoutesGuest,
    run: ResourceAny,
    status: u16,
) -> Option<oma_host_tests::routes_driver_types::OutgoingRequest> {
    let (store, bindings) = guest.parts();
    bindings
        .oma_agent_routes()
        .run()
        .call_export_traces(store, run, status, NOW + 9)
        .await
        .expect("no trap")
}

/// A `/v1/run` with `"trace": true` whose answer comes back whole: the reply holds OMA's events,
/// and with an OTLP endpoint the run hands the host its export once (the Worker sends it): the
/// request's span over the run's agent span over its model call, in the client's trace, with no
/// key and no message; without an endpoint, nothing to export.
#[tokio::test]
async fn a_run_hands_the_host_its_trace_export_once() {
    let mut guest = routes_guest().await;
    let body = json!({"provider": "anthropic", "model": "claude-sonnet-4-6", "prompt": "Hello?",
                      "trace": true})
    .to_string();
    let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    for endpoint in [Some("http://127.0.0.1:4318"), None] {
        let mut environment = environment();
        if let Some(endpoint) = endpoint {
            environment.push(("OTEL_EXPORTER_OTLP_ENDPOINT".into(), endpoint.into()));
        }
        let request = request(
            &mut guest,
            environment,
            head("POST", "/v1/run", &[("traceparent", parent)]),
        )
        .await;
        assert!(matches!(
            on_head(&mut guest, request).await,
            HeadVerdict::ReadBody(_)
        ));
        let Ok(BodyVerdict::Run(run)) = on_body(&mut guest, request, &body).await else {
            panic!("no run")
        };
        assert!(matches!(
            next(&mut guest, run, NOW).await,
            Poll::Step(Step::Send(_))
        ));
        let answer = anthropic_answer();
        give(&mut guest, run, answer).await;
        while !matches!(next(&mut guest, run, NOW + 5).await, Poll::Finished(_)) {}
        let Ok(RunEnd::Reply(reply)) = end(&mut guest, run, NOW + 5).await else {
            panic!("no whole reply")
        };
        let result = json_of(&reply);
        let kinds: Vec<&str> = result["trace"]
            .as_array()
            .unwrap_or_else(|| panic!("no trace: {result}"))
            .iter()
            .map(|event| event["type"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["llm_call", "agent"], "OMA's events");
        let export = export_traces(&mut guest, run, reply.status).await;
        let Some(endpoint) = endpoint else {
            assert!(export.is_none(), "no endpoint, no export");
            continue;
        };
        let export = export.expect("an export");
        assert_eq!(export.url, format!("{endpoint}/v1/traces"));
        assert_eq!(export.method, "POST");
        assert!(!export.body.contains(KEY) && !export.body.contains("Hello?"));
        let otlp: Value = serde_json::from_str(&export.body).expect("JSON");
        let spans = otlp["resourceSpans"][0]["scopeSpans"][0]["spans"]
            .as_array()
            .expect("spans")
            .clone();
        let names: Vec<&str> = spans.iter().map(|s| s["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "POST /v1/run",
                "chat claude-sonnet-4-6",
                "invoke_agent gateway"
            ]
        );
        assert_eq!(spans[0]["traceId"], "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(spans[0]["parentSpanId"], "00f067aa0ba902b7");
        assert_eq!(spans[2]["parentSpanId"], spans[0]["spanId"]);
        assert_eq!(spans[1]["parentSpanId"], spans[2]["spanId"]);
        assert!(
            export_traces(&mut guest, run, reply.status).await.is_none(),
            "handed out once"
        );
    }
    let (store, bindings) = guest.parts();
    let line = bindings
        .oma_agent_routes()
        .call_export_dropped_line(store, "the collector answered 503")
        .await
        .expect("no trap");
    assert_eq!(
        line,
        "oma-gateway: trace export dropped: the collector answered 503\n"
    );
}
