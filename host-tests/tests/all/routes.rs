//! The routes world's `routes` export (`oma_routes.wasm`): the gateway's request machine for
//! hosts that serve HTTP themselves (`docs/gateway.md`, `docs/worlds.md`). Each request is a
//! `request` resource stepped to its end by a scripted host (the body, the store, the provider,
//! the stream), and each answer is checked against what the gateway's own HTTP suite expects of
//! `oma_gateway.wasm` (`crates/cli/tests/gateway.rs`): the same statuses, error names and codes,
//! headers, log lines, server-sent events, limits and trace exports.

use std::collections::{HashMap, VecDeque};

use oma_host_tests::routes_types::{
    BodyFailure, CountOps, ForgetOps, Input, OutgoingRequest, Poll, Reply, RequestHead, Response,
    ResponseHead, Step, TransportFailure, TransportFailureKind,
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

/// `environment()` with `extra` variables.
fn environment_with(extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut environment = environment();
    environment.extend(
        extra
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned())),
    );
    environment
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

/// A head of `path` with `key` as the client's token.
fn keyed(method: &str, path: &str, key: &str) -> RequestHead {
    RequestHead {
        method: method.into(),
        path: path.into(),
        headers: vec![("authorization".into(), format!("Bearer {key}"))],
    }
}

/// A new `request` at `now`.
async fn request(
    guest: &mut RoutesGuest,
    environment: &[(String, String)],
    head: RequestHead,
    now: u64,
) -> ResourceAny {
    let (store, bindings) = guest.parts();
    bindings
        .oma_agent_routes()
        .request()
        .call_constructor(store, environment, &head, now, 7)
        .await
        .expect("no trap")
}

async fn next(guest: &mut RoutesGuest, request: ResourceAny, now: u64) -> Poll {
    let (store, bindings) = guest.parts();
    bindings
        .oma_agent_routes()
        .request()
        .call_next(store, request, now)
        .await
        .expect("no trap")
}

async fn give(guest: &mut RoutesGuest, request: ResourceAny, input: Input) -> Result<(), WitError> {
    let (store, bindings) = guest.parts();
    bindings
        .oma_agent_routes()
        .request()
        .call_answer(store, request, &input)
        .await
        .expect("no trap")
}

/// A store shared by replicas as the Worker's Durable Object keeps it: counts by name, each
/// batch applied whole (the test applies one batch at a time).
#[derive(Default)]
struct Store {
    counts: HashMap<String, u64>,
}

impl Store {
    fn apply(&mut self, ops: &CountOps) -> Vec<u64> {
        ops.add
            .iter()
            .map(|(name, delta)| {
                let count = self.counts.entry(name.clone()).or_insert(0);
                *count += delta;
                *count
            })
            .collect()
    }

    fn forget(&mut self, ops: &ForgetOps) {
        for name in &ops.names {
            self.counts.remove(name);
        }
    }
}

/// What a scripted host answers with.
#[derive(Default)]
struct Host {
    /// The body, or why it cannot be read.
    body: Option<Result<String, BodyFailure>>,
    /// The answers to the HTTP steps, in order.
    http: VecDeque<Input>,
    /// The shared store, when the store steps are answered (else they fail).
    store: Option<Store>,
    /// Why the store fails.
    store_fails: Option<String>,
    /// Poll at this instant once a request went out (a provider that answers late).
    late: Option<u64>,
}

/// What a request handed out, in order.
#[derive(Debug, Default)]
struct Served {
    steps: Vec<&'static str>,
    reply: Option<Reply>,
    stream: Option<String>,
    stream_headers: Vec<(String, String)>,
    sent: Vec<OutgoingRequest>,
    counts: Vec<CountOps>,
    forgets: Vec<ForgetOps>,
    logs: Vec<String>,
    status: u16,
}

impl Served {
    fn reply(&self) -> &Reply {
        self.reply
            .as_ref()
            .unwrap_or_else(|| panic!("no whole reply: {:?}", self.steps))
    }
}

fn name(step: &Step) -> &'static str {
    match step {
        Step::ReadBody(_) => "read-body",
        Step::Count(_) => "count",
        Step::Forget(_) => "forget",
        Step::Respond(_) => "respond",
        Step::OpenStream(_) => "open-stream",
        Step::Write(_) => "write",
        Step::CloseStream => "close-stream",
        Step::Send(_) => "send",
        Step::Receive => "receive",
        Step::Wait(_) => "wait",
        Step::Log(_) => "log",
    }
}

/// Steps `request` to its end at `now` with what `host` answers.
async fn serve(guest: &mut RoutesGuest, request: ResourceAny, now: u64, host: &mut Host) -> Served {
    let mut served = Served::default();
    for _ in 0..200 {
        let at = match host.late {
            Some(late) if !served.sent.is_empty() => late,
            _ => now,
        };
        let step = match next(guest, request, at).await {
            Poll::Step(step) => step,
            Poll::Finished(status) => {
                served.status = status;
                return served;
            }
            Poll::Waiting(at) => panic!("waiting ({at:?}) with every answer given"),
        };
        served.steps.push(name(&step));
        let input = match step {
            Step::ReadBody(limits) => {
                assert_eq!(limits.max_bytes, 4096);
                match host.body.take().expect("a body") {
                    Ok(body) => Input::Body(body.into_bytes()),
                    Err(failure) => Input::BodyFailed(failure),
                }
            }
            Step::Count(ops) => {
                let counts = match (&mut host.store, &host.store_fails) {
                    (_, Some(why)) => Err(why.clone()),
                    (Some(store), None) => Ok(store.apply(&ops)),
                    (None, None) => Err("no store".to_owned()),
                };
                served.counts.push(ops);
                Input::Counted(counts)
            }
            Step::Forget(ops) => {
                if let Some(store) = &mut host.store {
                    store.forget(&ops);
                }
                served.forgets.push(ops);
                continue;
            }
            Step::Respond(reply) => {
                assert!(served.reply.is_none() && served.stream.is_none());
                served.reply = Some(reply);
                continue;
            }
            Step::OpenStream(headers) => {
                assert!(served.reply.is_none() && served.stream.is_none());
                served.stream = Some(String::new());
                served.stream_headers = headers;
                Input::Written(true)
            }
            Step::Write(text) => {
                served.stream.as_mut().expect("open").push_str(&text);
                Input::Written(true)
            }
            Step::CloseStream => continue,
            Step::Send(outgoing) => {
                served.sent.push(outgoing);
                host.http.pop_front().expect("an answer to send")
            }
            Step::Receive | Step::Wait(_) => host.http.pop_front().expect("an HTTP answer"),
            Step::Log(line) => {
                served.logs.push(line);
                continue;
            }
        };
        give(guest, request, input)
            .await
            .expect("the input asked for");
    }
    panic!("the request did not end: {:?}", served.steps);
}

/// A request made and served with `environment`, `head` and `host`, at [`NOW`].
async fn served(
    guest: &mut RoutesGuest,
    environment: &[(String, String)],
    head: RequestHead,
    host: &mut Host,
) -> Served {
    let request = request(guest, environment, head, NOW).await;
    serve(guest, request, NOW, host).await
}

fn with_body(body: &str) -> Host {
    Host {
        body: Some(Ok(body.to_owned())),
        ..Host::default()
    }
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

fn anthropic_reply() -> String {
    json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
        "content": [{"type": "text", "text": "Hi from the provider."}], "stop_reason": "end_turn",
        "usage": {"input_tokens": 4, "output_tokens": 2}
    })
    .to_string()
}

/// The provider's whole answer with [`anthropic_reply`] (6 tokens of usage).
fn anthropic_answer() -> Input {
    Input::Response(Response {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        body: anthropic_reply(),
    })
}

fn run_body() -> String {
    json!({"provider": "anthropic", "model": "claude-sonnet-4-6", "prompt": "Hello?"}).to_string()
}

/// A `/v1/run` whose provider answers with [`anthropic_answer`].
fn answered_run() -> Host {
    let mut host = with_body(&run_body());
    host.http.push_back(anthropic_answer());
    host
}

#[tokio::test]
async fn the_head_answers_health_auth_routes_methods_and_declared_lengths() {
    let mut guest = routes_guest().await;
    let health = served(
        &mut guest,
        &environment(),
        head("GET", "/healthz", &[]),
        &mut Host::default(),
    )
    .await;
    assert_eq!(health.steps, ["respond", "log"]);
    assert_eq!(
        (health.status, json_of(health.reply())),
        (200, json!({"status": "ok"}))
    );

    let anonymous = |method: &str, path: &str| {
        let mut head = head(method, path, &[]);
        head.headers.clear();
        head
    };
    let cases = [
        (
            anonymous("POST", "/v1/validate"),
            401,
            "UNAUTHORIZED",
            Some(("www-authenticate", "Bearer")),
        ),
        // The token before the method: an anonymous caller is told nothing of the route.
        (
            anonymous("GET", "/v1/run"),
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
        let req = request(&mut guest, &environment(), head, NOW).await;
        let answered = serve(&mut guest, req, NOW, &mut Host::default()).await;
        assert_eq!(answered.steps, ["respond", "log"], "{code}: no body read");
        expect_error(answered.reply(), status, "Error", code);
        if let Some((name, value)) = header {
            assert!(
                answered
                    .reply()
                    .headers
                    .contains(&(name.into(), value.into())),
                "{code}: no {name}: {:?}",
                answered.reply()
            );
        }
        // Nothing is taken once it is over; it stays over.
        let refused = give(&mut guest, req, Input::Body(b"[]".to_vec())).await;
        assert_eq!(refused.expect_err("refused").name, "SessionStateError");
        assert_eq!(next(&mut guest, req, NOW + 1).await, Poll::Finished(status));
    }
}

#[tokio::test]
async fn a_bad_variable_is_500_naming_it_and_never_its_value() {
    let mut guest = routes_guest().await;
    let environment = environment_with(&[("OMA_GATEWAY_DEADLINE_MS", "soon-7731")]);
    let answered = served(
        &mut guest,
        &environment,
        head("GET", "/healthz", &[]),
        &mut Host::default(),
    )
    .await;
    let body = expect_error(answered.reply(), 500, "Error", "CONFIGURATION");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("OMA_GATEWAY_DEADLINE_MS"));
    assert!(!answered.reply().body.contains("soon-7731"));
}

#[tokio::test]
async fn bodies_are_validated_formatted_and_refused_as_the_gateway_does() {
    let mut guest = routes_guest().await;
    let env = environment();
    let list = json!([{"role": "user", "content": [{"type": "text", "text": "Hello?"}]}]);
    let mut host = with_body(&list.to_string());
    let answered = served(
        &mut guest,
        &env,
        head("POST", "/v1/validate", &[]),
        &mut host,
    )
    .await;
    assert_eq!(answered.steps, ["read-body", "respond", "log"]);
    assert_eq!(
        (answered.status, json_of(answered.reply())),
        (200, list.clone())
    );

    let mut host = with_body("[{");
    let answered = served(
        &mut guest,
        &env,
        head("POST", "/v1/validate", &[]),
        &mut host,
    )
    .await;
    expect_error(answered.reply(), 400, "Error", "MALFORMED_JSON");

    let bad = json!([{"role": "user", "content": "hi"}]).to_string();
    let answered = served(
        &mut guest,
        &env,
        head("POST", "/v1/validate", &[]),
        &mut with_body(&bad),
    )
    .await;
    let body = expect_error(
        answered.reply(),
        422,
        "InvalidMessageError",
        "INVALID_MESSAGE",
    );
    assert_eq!(
        body["error"]["message"],
        json!("messages[0].content must be a ContentBlock[], got string")
    );

    let format = json!({"provider": "anthropic", "model": "claude-sonnet-4-6", "messages": list});
    let answered = served(
        &mut guest,
        &env,
        head("POST", "/v1/format", &[]),
        &mut with_body(&format.to_string()),
    )
    .await;
    let shown = json_of(answered.reply());
    assert_eq!(answered.status, 200);
    assert_eq!(shown["url"], json!(format!("{BASE}/v1/messages")));
    assert!(!answered.reply().body.contains(KEY), "the key is shown");

    // A provider the environment does not configure: 403, nothing sent.
    let run = json!({"provider": "openai", "model": "gpt-4o", "prompt": "Hello?"}).to_string();
    let answered = served(
        &mut guest,
        &env,
        head("POST", "/v1/run", &[]),
        &mut with_body(&run),
    )
    .await;
    expect_error(
        answered.reply(),
        403,
        "EgressPolicyError",
        "EGRESS_POLICY_DENIED",
    );
    assert!(answered.sent.is_empty());

    // A model that would leave the provider's URL path, or that no URL can carry: the client's
    // mistake (422), found before anything is sent, never a provider's failure.
    let gemini = environment_with(&[("GEMINI_API_KEY", KEY), ("GEMINI_BASE_URL", BASE)]);
    for model in ["a/../../admin".to_owned(), "m".repeat(2000)] {
        let run = json!({"provider": "gemini", "model": model, "prompt": "Hello?"}).to_string();
        let mut host = with_body(&run);
        let answered = served(&mut guest, &gemini, head("POST", "/v1/run", &[]), &mut host).await;
        assert!(answered.sent.is_empty(), "sent");
        assert_eq!(answered.status, 422, "{:?}", answered.reply());
        let error = json_of(answered.reply());
        assert_eq!(error["error"]["name"], json!("Error"));
        assert_eq!(error["error"]["retryable"], json!(false));
    }
    // A host that hands over more than the limit it was given gets the limit's answer anyway.
    let mut host = with_body(&format!("[{}]", " ".repeat(5000)));
    let answered = served(
        &mut guest,
        &env,
        head("POST", "/v1/validate", &[]),
        &mut host,
    )
    .await;
    expect_error(answered.reply(), 413, "Error", "PAYLOAD_TOO_LARGE");

    // Bodies the host could not read.
    for (failure, status, code) in [
        (BodyFailure::TooLarge, 413, "PAYLOAD_TOO_LARGE"),
        (BodyFailure::TimedOut, 408, "REQUEST_TIMEOUT"),
        (BodyFailure::Broken("reset".into()), 400, "BAD_REQUEST"),
    ] {
        let mut host = Host {
            body: Some(Err(failure)),
            ..Host::default()
        };
        let answered = served(
            &mut guest,
            &env,
            head("POST", "/v1/validate", &[]),
            &mut host,
        )
        .await;
        expect_error(answered.reply(), status, "Error", code);
    }
}

/// An input the request did not ask for is refused with `SessionStateError`, and nothing
/// changes: the request still waits for what it asked.
#[tokio::test]
async fn an_input_not_asked_for_is_refused_and_changes_nothing() {
    let mut guest = routes_guest().await;
    let req = request(
        &mut guest,
        &environment(),
        head("POST", "/v1/run", &[]),
        NOW,
    )
    .await;
    let early = give(&mut guest, req, Input::End).await;
    assert_eq!(early.expect_err("nothing due").name, "SessionStateError");
    let Poll::Step(Step::ReadBody(limits)) = next(&mut guest, req, NOW).await else {
        panic!("the body is not asked for")
    };
    assert_eq!(limits.deadline_at_ms, NOW + 2000);
    assert_eq!(
        next(&mut guest, req, NOW + 1).await,
        Poll::Waiting(Some(NOW + 2000))
    );
    let stray = give(&mut guest, req, Input::Written(true)).await;
    assert_eq!(
        stray.expect_err("the body is due").name,
        "SessionStateError"
    );
    give(&mut guest, req, Input::Body(run_body().into_bytes()))
        .await
        .expect("the body");
    let mut host = Host::default();
    host.http.push_back(anthropic_answer());
    let answered = serve(&mut guest, req, NOW, &mut host).await;
    assert_eq!(answered.steps, ["send", "respond", "log"]);
    assert_eq!(answered.status, 200);
}

#[tokio::test]
async fn a_runs_http_steps_go_to_the_host_and_it_ends_with_the_gateways_reply() {
    let mut guest = routes_guest().await;
    let answered = served(
        &mut guest,
        &environment(),
        head("POST", "/v1/run", &[]),
        &mut answered_run(),
    )
    .await;
    assert_eq!(answered.steps, ["read-body", "send", "respond", "log"]);
    assert_eq!(answered.sent[0].url, format!("{BASE}/v1/messages"));
    assert!(!answered.sent[0].stream);
    let result = json_of(answered.reply());
    assert_eq!(answered.status, 200);
    assert_eq!(result["success"], json!(true), "{result}");
    assert_eq!(result["output"], json!("Hi from the provider."));
    assert!(!answered.reply().body.contains(KEY));
    assert_eq!(answered.logs, ["oma-gateway: POST /v1/run 200 0ms\n"]);

    // Past the deadline, a provider that never answered (the host's timer ends the request it
    // sent with a timeout): the reply is 504.
    let mut host = with_body(&run_body());
    host.late = Some(NOW + 2500);
    host.http.push_back(Input::Failure(TransportFailure {
        kind: TransportFailureKind::TimedOut,
        message: "no answer".into(),
    }));
    let answered = served(
        &mut guest,
        &environment(),
        head("POST", "/v1/run", &[]),
        &mut host,
    )
    .await;
    expect_error(
        answered.reply(),
        504,
        "LLMCallTimeoutError",
        "LLM_CALL_TIMEOUT",
    );
}

/// A streamed chat answer through the routes world (the Worker's gateway) opens with its first
/// event as soon as the provider's stream began, not before it is asked and not at its first
/// text: the head and `message_start` between the provider's first event and its next.
#[tokio::test]
async fn a_streamed_chat_opens_with_its_first_event_once_the_providers_stream_began() {
    let mut guest = routes_guest().await;
    let events = [
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":3,\"output_tokens\":0}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    ];
    let body = json!({"model": "anthropic/claude-sonnet-4-6", "max_tokens": 64, "stream": true,
                      "messages": [{"role": "user", "content": "Hello?"}]})
    .to_string();
    let mut host = with_body(&body);
    host.http.push_back(Input::Head(ResponseHead {
        status: 200,
        headers: vec![("content-type".into(), "text/event-stream".into())],
    }));
    host.http.extend(
        events
            .iter()
            .map(|event| Input::Chunk(event.as_bytes().to_vec())),
    );
    host.http.push_back(Input::End);
    let answered = served(
        &mut guest,
        &environment(),
        head("POST", "/v1/messages", &[]),
        &mut host,
    )
    .await;
    assert_eq!(
        answered.steps[..6],
        [
            "read-body",
            "send",
            "receive",
            "open-stream",
            "write",
            "receive"
        ],
        "the head and the first event between the provider's first event and its next"
    );
    assert_eq!(
        answered.steps[answered.steps.len() - 3..],
        ["write", "close-stream", "log"]
    );
    let text = answered.stream.as_deref().expect("a stream");
    assert!(
        text.starts_with("event: message_start\ndata: {\"type\":\"message_start\""),
        "{text}"
    );
    assert!(text.contains("\"input_tokens\":3"), "{text}");
    assert!(
        text.ends_with("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"),
        "{text}"
    );

    // A provider's error status before its stream began: the route's error reply, whole.
    let mut host = with_body(&body);
    host.http.push_back(Input::Response(Response {
        status: 400,
        headers: vec![("content-type".into(), "application/json".into())],
        body: r#"{"type":"error","error":{"type":"invalid_request_error","message":"no"}}"#.into(),
    }));
    let answered = served(
        &mut guest,
        &environment(),
        head("POST", "/v1/messages", &[]),
        &mut host,
    )
    .await;
    assert_eq!(answered.steps, ["read-body", "send", "respond", "log"]);
    assert_eq!(answered.reply().status, 400);
}

#[tokio::test]
async fn a_streamed_run_writes_each_event_as_sse_and_ends_with_done() {
    let mut guest = routes_guest().await;
    let accept = [("Accept", "text/event-stream")];
    let stream = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":3,\"output_tokens\":0}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );
    let mut host = with_body(&run_body());
    host.http.extend([
        Input::Head(ResponseHead {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
        }),
        Input::Chunk(stream.as_bytes().to_vec()),
        Input::End,
    ]);
    let answered = served(
        &mut guest,
        &environment(),
        head("POST", "/v1/run", &accept),
        &mut host,
    )
    .await;
    assert_eq!(
        &answered.steps[..3],
        ["read-body", "open-stream", "send"],
        "the head goes out just before the first request"
    );
    assert_eq!(
        answered.steps[answered.steps.len() - 2..],
        ["close-stream", "log"]
    );
    assert!(answered
        .stream_headers
        .contains(&("content-type".into(), "text/event-stream".into())));
    assert!(answered.sent[0].stream);
    let text = answered.stream.as_deref().expect("a stream");
    assert!(
        text.contains("event: text_delta\ndata: \"Hi\"\n\n"),
        "{text}"
    );
    assert!(text.contains("event: text\ndata: \"Hi\"\n\n"), "{text}");
    let done = text
        .split("\n\n")
        .find_map(|event| event.strip_prefix("event: done\ndata: "))
        .expect("a done event");
    let data: Value = serde_json::from_str(done).unwrap();
    assert_eq!(
        (data["success"].clone(), data["output"].clone()),
        (json!(true), json!("Hi"))
    );

    // Content the format cannot carry: refused before anything is sent, as a whole 422.
    let video = json!({"provider": "anthropic", "model": "m", "messages": [{"role": "user", "content": [
        {"type": "video", "source": {"type": "url", "media_type": "video/mp4", "url": "https://example.com/v.mp4"}}
    ]}]});
    let answered = served(
        &mut guest,
        &environment(),
        head("POST", "/v1/run", &accept),
        &mut with_body(&video.to_string()),
    )
    .await;
    assert_eq!(answered.steps, ["read-body", "respond", "log"]);
    expect_error(
        answered.reply(),
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
    let answered = served(
        &mut guest,
        &environment(),
        head("GET", "/healthz?key=SECRET", &[]),
        &mut Host::default(),
    )
    .await;
    assert_eq!(answered.logs, ["oma-gateway: GET /healthz 200 0ms\n"]);
}

/// `/v1/chat/completions` through the routes world: a refusal is OpenAI's error shape with
/// nothing sent, and a request's only steps besides its reply are HTTP, ending with a
/// `chat.completion`.
#[tokio::test]
async fn a_chat_completion_answers_openais_shape() {
    let mut guest = routes_guest().await;
    let video = json!({
        "model": "anthropic/claude-sonnet-4-6",
        "messages": [{"role": "user", "content": [
            {"type": "video_url", "video_url": {"url": "https://example.com/a.mp4"}}
        ]}],
    });
    let answered = served(
        &mut guest,
        &environment(),
        head("POST", "/v1/chat/completions", &[]),
        &mut with_body(&video.to_string()),
    )
    .await;
    assert_eq!(answered.status, 400, "{:?}", answered.reply());
    assert!(answered.sent.is_empty());
    let error = json_of(answered.reply());
    assert_eq!(
        error["error"]["code"],
        json!("UnsupportedContentBlockError")
    );
    assert_eq!(error["error"]["type"], json!("invalid_request_error"));

    let body = json!({
        "model": "anthropic/claude-sonnet-4-6",
        "messages": [{"role": "user", "content": "Hello?"}],
    });
    let mut host = with_body(&body.to_string());
    host.http.push_back(anthropic_answer());
    let answered = served(
        &mut guest,
        &environment(),
        head("POST", "/v1/chat/completions", &[]),
        &mut host,
    )
    .await;
    assert_eq!(answered.steps, ["read-body", "send", "respond", "log"]);
    assert_eq!(answered.sent[0].url, format!("{BASE}/v1/messages"));
    let completion = json_of(answered.reply());
    assert_eq!(answered.status, 200);
    assert_eq!(completion["object"], json!("chat.completion"));
    assert_eq!(completion["model"], json!("anthropic/claude-sonnet-4-6"));
    assert_eq!(
        completion["choices"][0]["message"]["content"],
        json!("Hi from the provider.")
    );
    assert_eq!(completion["usage"]["total_tokens"], json!(6));
    assert!(!answered.reply().body.contains(KEY));
}

// ----------------------------------------------------------------------- per-token limits

/// The environment with `keys` as `OMA_GATEWAY_KEYS`, and `bucket` as
/// `OMA_GATEWAY_LIMITS_BUCKET` when given.
fn limited_environment(keys: &str, bucket: Option<&str>) -> Vec<(String, String)> {
    let mut environment = environment_with(&[("OMA_GATEWAY_KEYS", keys)]);
    if let Some(bucket) = bucket {
        environment.push(("OMA_GATEWAY_LIMITS_BUCKET".into(), bucket.into()));
    }
    environment
}

/// `/healthz`'s body under `environment`.
async fn health(guest: &mut RoutesGuest, environment: &[(String, String)]) -> Value {
    let answered = served(
        guest,
        environment,
        keyed("GET", "/healthz", "nobody"),
        &mut Host::default(),
    )
    .await;
    assert_eq!(answered.status, 200);
    json_of(answered.reply())
}

/// Without `OMA_GATEWAY_LIMITS_BUCKET`, the routes component counts in its own memory: the
/// instance's requests past `rpm` are `429` before their body is read, tokens are counted after
/// the answer, and `/healthz` says `"per-instance"`.
#[tokio::test]
async fn limits_are_counted_in_the_instances_memory_without_a_store() {
    let mut guest = routes_guest().await;
    let keys = r#"{"key-rpm": {"rpm": 2}, "key-tpm": {"tpm": 6}, "key-free": {}}"#;
    let environment = limited_environment(keys, None);
    let healthz = health(&mut guest, &environment).await;
    assert_eq!(healthz, json!({"status": "ok", "limits": "per-instance"}));

    let now = 40 * 60_000 + 15_000;
    for i in 0..3 {
        let req = request(
            &mut guest,
            &environment,
            keyed("POST", "/v1/run", "key-rpm"),
            now + i,
        )
        .await;
        let answered = serve(&mut guest, req, now + i, &mut answered_run()).await;
        if i < 2 {
            assert_eq!(answered.steps, ["read-body", "send", "respond", "log"]);
            assert!(answered.counts.is_empty(), "counted in the component");
            continue;
        }
        // The third request in the minute: refused before its body is read.
        assert_eq!(answered.steps, ["respond", "log"]);
        expect_error(answered.reply(), 429, "RateLimitError", "RATE_LIMITED");
        assert!(answered
            .reply()
            .headers
            .contains(&("retry-after".into(), "45".into())));
    }
    // OpenAI's shape on its route; the next minute starts afresh.
    let req = request(
        &mut guest,
        &environment,
        keyed("POST", "/v1/chat/completions", "key-rpm"),
        now,
    )
    .await;
    let answered = serve(&mut guest, req, now, &mut Host::default()).await;
    assert_eq!(answered.status, 429);
    assert_eq!(
        json_of(answered.reply())["error"]["code"],
        json!("rate_limit_exceeded")
    );
    let req = request(
        &mut guest,
        &environment,
        keyed("POST", "/v1/run", "key-rpm"),
        now + 60_000,
    )
    .await;
    let answered = serve(&mut guest, req, now + 60_000, &mut answered_run()).await;
    assert_eq!(answered.status, 200);

    // Tokens: the run's usage (6) is counted after its answer, and the next request is refused.
    for (at, status) in [(now, 200), (now + 2, 429)] {
        let req = request(
            &mut guest,
            &environment,
            keyed("POST", "/v1/run", "key-tpm"),
            at,
        )
        .await;
        let answered = serve(&mut guest, req, at, &mut answered_run()).await;
        assert_eq!(answered.status, status);
        if status == 429 {
            assert!(json_of(answered.reply())["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("6 tokens per minute")));
        }
    }

    // Nothing is limited for a key without limits, for a route that calls no provider, or for
    // OMA_GATEWAY_TOKEN: their body is read without counting.
    for (path, key) in [
        ("/v1/run", "key-free"),
        ("/v1/validate", "key-rpm"),
        ("/v1/run", TOKEN),
    ] {
        let mut host = if path == "/v1/run" {
            answered_run()
        } else {
            with_body("[]")
        };
        let answered = served(
            &mut guest,
            &environment,
            keyed("POST", path, key),
            &mut host,
        )
        .await;
        assert_eq!(answered.steps[0], "read-body", "{path}");
        assert_eq!(answered.status, 200, "{path}");
    }
}

/// With `OMA_GATEWAY_LIMITS_BUCKET`, the host performs the counting on its store and hands the
/// counts back: two instances (two replicas) sharing one store are held to one count, a run's
/// tokens are an addition after its answer, the first request of a minute forgets the minute
/// before, and a failing store is a `503`, never a pass.
#[tokio::test]
async fn limits_are_counted_on_the_hosts_store_shared_by_replicas() {
    let mut replicas = [routes_guest().await, routes_guest().await];
    let keys = r#"{"key-3": {"rpm": 3, "tpm": 10}}"#;
    let environment = limited_environment(keys, Some("LIMITS"));
    let healthz = health(&mut replicas[0], &environment).await;
    assert_eq!(healthz, json!({"status": "ok", "limits": "shared"}));

    let mut store = Some(Store::default());
    let now = 50 * 60_000 + 30_000;
    let mut ids = Vec::new();
    for i in 0..4usize {
        let guest = &mut replicas[i % 2];
        let path = ["/v1/run", "/v1/chat/completions", "/v1/messages", "/v1/run"][i];
        let req = request(guest, &environment, keyed("POST", path, "key-3"), now).await;
        // Counted before the body is asked for; no body given before the counts.
        let Poll::Step(Step::Count(ops)) = next(guest, req, now).await else {
            panic!("not handed to the store")
        };
        assert_eq!(ops.store, "LIMITS");
        assert!(!format!("{ops:?}").contains("key-3"), "{ops:?}");
        assert_eq!(ops.add.len(), 2, "{ops:?}");
        assert_eq!(ops.add[0].1, 0, "the tokens are read");
        assert_eq!(ops.add[1].1, 1, "the request is counted");
        ids.push(ops.id.clone());
        let early = give(guest, req, Input::Body(run_body().into_bytes())).await;
        assert_eq!(early.expect_err("not counted").name, "SessionStateError");
        let counts = store.as_mut().unwrap().apply(&ops);
        give(guest, req, Input::Counted(Ok(counts)))
            .await
            .expect("the counts");
        let mut host = Host {
            store: store.take(),
            // Refused requests read no body: whatever the route, this one is never given.
            body: Some(Ok("{}".into())),
            ..Host::default()
        };
        let answered = serve(guest, req, now, &mut host).await;
        store = host.store.take();
        if i == 0 {
            assert_eq!(answered.forgets.len(), 1, "the minute before is forgotten");
            assert_eq!(answered.forgets[0].names.len(), 2);
        }
        if i < 3 {
            assert_eq!(
                answered.steps[0],
                if i == 0 { "forget" } else { "read-body" }
            );
            continue;
        }
        assert_eq!(answered.steps, ["respond", "log"]);
        expect_error(answered.reply(), 429, "RateLimitError", "RATE_LIMITED");
        assert!(answered
            .reply()
            .headers
            .contains(&("retry-after".into(), "30".into())));
    }
    assert!(
        ids.iter().all(|id| id == &ids[0]),
        "one id per key: {ids:?}"
    );

    // The next minute: a run's tokens are added after its answer, and once they reach `tpm`
    // the next request is refused, on the other replica.
    let at = now + 60_000;
    let mut statuses = Vec::new();
    for i in 0..3usize {
        let guest = &mut replicas[i % 2];
        let mut host = answered_run();
        host.store = store.take();
        let req = request(
            guest,
            &environment,
            keyed("POST", "/v1/run", "key-3"),
            at + i as u64,
        )
        .await;
        let answered = serve(guest, req, at + i as u64, &mut host).await;
        store = host.store.take();
        statuses.push(answered.status);
        if answered.status == 200 {
            let usage = answered.counts.last().expect("the tokens");
            assert_eq!(usage.add.len(), 1);
            assert_eq!(usage.add[0].1, 6, "4 in and 2 out");
            assert_eq!(usage.id, ids[0]);
            let at = answered.steps.iter().position(|s| *s == "count").unwrap();
            assert!(
                answered.steps[at + 1..].contains(&"respond"),
                "counted before the reply: {:?}",
                answered.steps
            );
        } else {
            assert!(json_of(answered.reply())["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("10 tokens per minute")));
        }
    }
    assert_eq!(statuses, [200, 200, 429]);

    // A store that fails, or answers short, is a 503 in the route's shape, its error unshown.
    for path in ["/v1/chat/completions", "/v1/run"] {
        let guest = &mut replicas[0];
        let mut host = Host {
            store_fails: Some("no binding LIMITS".into()),
            ..Host::default()
        };
        let answered = served(guest, &environment, keyed("POST", path, "key-3"), &mut host).await;
        assert_eq!(answered.status, 503, "{:?}", answered.reply());
        assert!(answered
            .reply()
            .headers
            .contains(&("retry-after".into(), "1".into())));
        assert!(!answered.reply().body.contains("no binding"));
    }
    let guest = &mut replicas[0];
    let req = request(guest, &environment, keyed("POST", "/v1/run", "key-3"), at).await;
    let Poll::Step(Step::Count(_)) = next(guest, req, at).await else {
        panic!("not counted")
    };
    give(guest, req, Input::Counted(Ok(vec![1])))
        .await
        .expect("counts");
    let answered = serve(guest, req, at, &mut Host::default()).await;
    assert_eq!(answered.status, 503, "a count short is a failed store");
}

/// A `/v1/run` with `"trace": true` and `"records": true` whose answer comes back whole: the
/// reply holds OMA's events and OMA's trace records, and with an OTLP endpoint the request's
/// last send is its export, once the reply and the log line are out, read from those records:
/// the request's span over the run's span over the agent's over its model call, in the client's
/// trace, each record span one exported span with its ids, parent, name and times, with no key
/// and no message; a collector that refuses it costs a log line.
#[tokio::test]
async fn a_run_is_exported_once_its_reply_is_out() {
    let mut guest = routes_guest().await;
    let body = json!({"provider": "anthropic", "model": "claude-sonnet-4-6", "prompt": "Hello?",
                      "trace": true, "records": true})
    .to_string();
    let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    for endpoint in [Some("http://127.0.0.1:4318"), None] {
        let environment = match endpoint {
            Some(endpoint) => environment_with(&[("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)]),
            None => environment(),
        };
        let mut host = with_body(&body);
        host.http.push_back(anthropic_answer());
        host.http.push_back(Input::Response(Response {
            status: 503,
            headers: Vec::new(),
            body: "{}".into(),
        }));
        let answered = served(
            &mut guest,
            &environment,
            head("POST", "/v1/run", &[("traceparent", parent)]),
            &mut host,
        )
        .await;
        let result = json_of(answered.reply());
        let kinds: Vec<&str> = result["trace"]
            .as_array()
            .unwrap_or_else(|| panic!("no trace: {result}"))
            .iter()
            .map(|event| event["type"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["llm_call", "agent"], "OMA's events");
        let records = result["records"]
            .as_array()
            .unwrap_or_else(|| panic!("no records: {result}"));
        let ends: Vec<&Value> = records
            .iter()
            .filter(|r| r["recordType"] == "span_end")
            .collect();
        let kinds: Vec<&str> = ends.iter().map(|r| r["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["llm", "agent", "run"], "OMA's records");
        assert!(records
            .iter()
            .all(|r| r["traceId"] == "4bf92f3577b34da6a3ce929d0e0e4736"));
        let Some(endpoint) = endpoint else {
            assert_eq!(answered.steps, ["read-body", "send", "respond", "log"]);
            continue;
        };
        assert_eq!(
            answered.steps,
            ["read-body", "send", "respond", "log", "send", "log"]
        );
        assert_eq!(
            answered.logs[1],
            "oma-gateway: trace export dropped: the collector answered 503\n"
        );
        let export = &answered.sent[1];
        assert_eq!(export.url, format!("{endpoint}/v1/traces"));
        assert_eq!(export.method, "POST");
        assert!(!export.body.contains(KEY) && !export.body.contains("Hello?"));
        let otlp: Value = serde_json::from_str(&export.body).expect("JSON");
        let spans = otlp["resourceSpans"][0]["scopeSpans"][0]["spans"]
            .as_array()
            .expect("spans")
            .clone();
        let names: Vec<&str> = spans.iter().map(|s| s["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["POST /v1/run", "oma.run", "invoke_agent", "chat"]);
        assert_eq!(spans[0]["traceId"], "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(spans[0]["parentSpanId"], "00f067aa0ba902b7");
        assert_eq!(spans[1]["parentSpanId"], spans[0]["spanId"]);
        assert_eq!(spans[2]["parentSpanId"], spans[1]["spanId"]);
        assert_eq!(spans[3]["parentSpanId"], spans[2]["spanId"]);
        assert_eq!(spans[3]["kind"], 3, "a model call is a client span");
        // Each record span is the exported span of its id, as its end record says.
        for end in &ends {
            let span = spans
                .iter()
                .find(|s| s["spanId"] == end["spanId"])
                .unwrap_or_else(|| panic!("no span for {end}"));
            assert_eq!(span["traceId"], end["traceId"]);
            assert_eq!(span["parentSpanId"], end["parentSpanId"]);
            assert_eq!(span["name"], end["name"]);
            let nanos = |ms: &Value| format!("{}000000", ms.as_u64().expect("ms"));
            assert_eq!(span["startTimeUnixNano"], nanos(&end["startUnixMs"]));
            assert_eq!(span["endTimeUnixNano"], nanos(&end["endUnixMs"]));
        }
    }
}
