//! The request machine by its steps, natively: a scripted host answers each step (the body,
//! the store's counts, the provider's answers, the writes), and every step handed out is kept,
//! so that a test says what went out, in which order, and what was refused.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

use serde_json::{json, Value};

use oma_core::http::call::{CallAnswer, Outgoing};
use oma_core::http::{HttpResponse, TransportFailure, TransportFailureKind};

use crate::env::BadVariable;
use crate::request::{
    BodyFailure, CountOps, ForgetOps, Input, Poll, RequestHead, RequestMachine, Step,
};
use crate::{Reply, Settings};

const KEY: &str = "sk-request-unit-SECRET-3131";
const TOKEN: &str = "request-token-SECRET-7";
const NOW: u64 = 1_796_036_400_000;
const BASE: &str = "http://127.0.0.1:9";

fn environment(extra: &[(&str, &str)]) -> Result<Settings, BadVariable> {
    let mut vars = vec![
        ("ANTHROPIC_API_KEY", KEY),
        ("ANTHROPIC_BASE_URL", BASE),
        ("GEMINI_API_KEY", KEY),
        ("GEMINI_BASE_URL", "http://127.0.0.1:8"),
        ("OPENAI_API_KEY", KEY),
        ("OPENAI_BASE_URL", "http://127.0.0.1:7"),
        ("OMA_GATEWAY_TOKEN", TOKEN),
        ("OMA_GATEWAY_MAX_RETRIES", "0"),
        ("OMA_GATEWAY_MAX_BODY_BYTES", "4096"),
        ("OMA_GATEWAY_DEADLINE_MS", "2000"),
    ];
    // An extra variable replaces the default of its name.
    vars.retain(|(name, _)| extra.iter().all(|(other, _)| other != name));
    vars.extend_from_slice(extra);
    Settings::from_vars(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())))
}

fn head(method: &str, path: &str, headers: &[(&str, &str)]) -> RequestHead {
    RequestHead {
        method: method.into(),
        path: path.into(),
        headers: headers
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect(),
    }
}

/// A head with the gateway's token.
fn authorized(method: &str, path: &str) -> RequestHead {
    head(
        method,
        path,
        &[("authorization", &format!("Bearer {TOKEN}"))],
    )
}

/// What a scripted host answers.
#[derive(Default)]
struct Host {
    /// The body, or why it cannot be read.
    body: Option<Result<Vec<u8>, BodyFailure>>,
    /// The answers to `send`, `receive` and `wait`, in order.
    http: VecDeque<CallAnswer>,
    /// The store: counts by name, shared by the requests of a test (replicas of one store).
    store: Rc<RefCell<HashMap<String, u64>>>,
    /// Why the store fails, when it does.
    store_fails: Option<String>,
    /// Whether writes to the stream go out (false: the caller went away after `writes_ok`).
    writes_ok: Option<usize>,
}

/// Everything the machine handed out, in order.
#[derive(Debug, Default)]
struct Served {
    steps: Vec<String>,
    reply: Option<Reply>,
    stream: Option<String>,
    /// Each write to the stream, in order.
    writes: Vec<String>,
    sent: Vec<Outgoing>,
    counts: Vec<CountOps>,
    forgets: Vec<ForgetOps>,
    logs: Vec<String>,
    status: u16,
}

impl Served {
    fn json(&self) -> Value {
        let reply = self.reply.as_ref().expect("a whole reply");
        assert!(!reply.body.contains("SECRET"), "a secret in {}", reply.body);
        serde_json::from_str(&reply.body).expect("JSON")
    }
}

fn response(status: u16, body: &str) -> CallAnswer {
    CallAnswer::Response(HttpResponse {
        status,
        headers: vec![("content-type".into(), "application/json".into())],
        body: body.as_bytes().to_vec(),
    })
}

/// Steps `machine` to its end with `host`, at `now` (each poll a millisecond later).
fn serve_at(mut machine: RequestMachine, mut host: Host, now: u64) -> Served {
    let mut served = Served::default();
    let mut writes = 0;
    for tick in 0..500 {
        let step = match machine.poll(now + tick) {
            Poll::Step(step) => step,
            Poll::Finished(status) => {
                served.status = status;
                // Finished stays finished.
                assert_eq!(machine.poll(now + tick + 1), Poll::Finished(status));
                return served;
            }
            Poll::Waiting(at) => panic!("waiting ({at:?}) with every answer given"),
        };
        served.steps.push(name(&step).to_owned());
        let input = match step {
            Step::ReadBody(_) => match host.body.take().expect("one body") {
                Ok(bytes) => Input::Body(bytes),
                Err(failure) => Input::BodyFailed(failure),
            },
            Step::Count(ops) => {
                let counts = match &host.store_fails {
                    Some(why) => Err(why.clone()),
                    None => Ok(add(&host.store, &ops)),
                };
                served.counts.push(ops);
                Input::Counted(counts)
            }
            Step::Forget(ops) => {
                for name in &ops.names {
                    host.store.borrow_mut().remove(name);
                }
                served.forgets.push(ops);
                continue;
            }
            Step::Respond(reply) => {
                assert!(served.reply.is_none() && served.stream.is_none());
                served.reply = Some(reply);
                continue;
            }
            Step::Open => {
                assert!(served.reply.is_none() && served.stream.is_none());
                served.stream = Some(String::new());
                Input::Written(true)
            }
            Step::Write(text) => {
                let ok = host.writes_ok.is_none_or(|n| writes < n);
                writes += 1;
                if ok {
                    served.stream.as_mut().expect("open").push_str(&text);
                    served.writes.push(text);
                }
                Input::Written(ok)
            }
            Step::Close => continue,
            Step::Send(outgoing) => {
                served.sent.push(outgoing);
                Input::Http(host.http.pop_front().expect("a scripted answer"))
            }
            Step::Receive | Step::Wait(_) => {
                Input::Http(host.http.pop_front().expect("a scripted answer"))
            }
            Step::Log(line) => {
                served.logs.push(line);
                continue;
            }
        };
        machine.handle(input).expect("the input asked for");
    }
    panic!("the request did not end: {:?}", served.steps);
}

/// Performs the additions of `ops` on `store`: the new counts.
fn add(store: &RefCell<HashMap<String, u64>>, ops: &CountOps) -> Vec<u64> {
    let mut store = store.borrow_mut();
    ops.add
        .iter()
        .map(|(name, n)| {
            let count = store.entry(name.clone()).or_default();
            *count += n;
            *count
        })
        .collect()
}

fn serve(machine: RequestMachine, host: Host) -> Served {
    serve_at(machine, host, NOW)
}

fn name(step: &Step) -> &'static str {
    match step {
        Step::ReadBody(_) => "read-body",
        Step::Count(_) => "count",
        Step::Forget(_) => "forget",
        Step::Respond(_) => "respond",
        Step::Open => "open",
        Step::Write(_) => "write",
        Step::Close => "close",
        Step::Send(_) => "send",
        Step::Receive => "receive",
        Step::Wait(_) => "wait",
        Step::Log(_) => "log",
    }
}

fn with_body(body: &Value) -> Host {
    Host {
        body: Some(Ok(body.to_string().into_bytes())),
        ..Host::default()
    }
}

fn anthropic(text: &str) -> String {
    json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
           "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
           "usage": {"input_tokens": 4, "output_tokens": 2}})
    .to_string()
}

/// Anthropic's event stream of an answer `text` (4 tokens in, 2 out), as a head and one chunk.
fn anthropic_stream(host: &mut Host, text: &str) {
    let events = [
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
               "role": "assistant", "model": "claude-x", "content": [],
               "usage": {"input_tokens": 4, "output_tokens": 0}}}),
        json!({"type": "content_block_start", "index": 0,
               "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0,
               "delta": {"type": "text_delta", "text": text}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
               "usage": {"output_tokens": 2}}),
        json!({"type": "message_stop"}),
    ];
    let body: String = events
        .iter()
        .map(|event| {
            format!(
                "event: {}\ndata: {event}\n\n",
                event["type"].as_str().unwrap()
            )
        })
        .collect();
    host.http.push_back(CallAnswer::Head {
        status: 200,
        headers: vec![("content-type".into(), "text/event-stream".into())],
    });
    host.http.push_back(CallAnswer::Chunk(body.into_bytes()));
    host.http.push_back(CallAnswer::End);
}

fn run_body() -> Value {
    json!({"provider": "anthropic", "model": "claude-x", "prompt": "Hello?"})
}

#[test]
fn the_head_answers_at_once_with_the_token_before_the_method() {
    let cases = [
        (head("GET", "/v1/run", &[]), 401, "UNAUTHORIZED"),
        (head("POST", "/v1/validate", &[]), 401, "UNAUTHORIZED"),
        (authorized("GET", "/v1/run"), 405, "METHOD_NOT_ALLOWED"),
        (head("GET", "/v1/nothing", &[]), 404, "NOT_FOUND"),
        (
            head(
                "POST",
                "/v1/run",
                &[
                    ("Authorization", &format!("Bearer {TOKEN}")),
                    ("Content-Length", "4097"),
                ],
            ),
            413,
            "PAYLOAD_TOO_LARGE",
        ),
    ];
    for (head, status, code) in cases {
        let what = format!("{} {}", head.method, head.path);
        let served = serve(
            RequestMachine::new(environment(&[]), head, NOW, 1),
            Host::default(),
        );
        assert_eq!(served.status, status, "{what}");
        assert_eq!(served.steps, ["respond", "log"], "{what}: no body is read");
        assert_eq!(served.json()["error"]["code"], code, "{what}");
    }
    // The unauthenticated GET names no method.
    let served = serve(
        RequestMachine::new(environment(&[]), head("GET", "/v1/run", &[]), NOW, 1),
        Host::default(),
    );
    let reply = served.reply.expect("a reply");
    assert!(reply.headers.iter().all(|(name, _)| *name != "allow"));
    assert_eq!(
        served.logs,
        ["oma-gateway: GET /v1/run 401 1ms\n"],
        "the request's line"
    );

    // /healthz is open and says where limits are counted; a bad variable is a 500 naming it.
    let served = serve(
        RequestMachine::new(
            environment(&[("OMA_GATEWAY_KEYS", r#"{"k": {"rpm": 1}}"#)]),
            head("GET", "/healthz", &[]),
            NOW,
            1,
        ),
        Host::default(),
    );
    assert_eq!(
        served.json(),
        json!({"status": "ok", "limits": "per-instance"})
    );
    let served = serve(
        RequestMachine::new(
            environment(&[("OMA_GATEWAY_DEADLINE_MS", "soon-7731")]),
            head("GET", "/healthz", &[]),
            NOW,
            1,
        ),
        Host::default(),
    );
    assert_eq!(served.status, 500);
    let body = served.reply.expect("a reply").body;
    assert!(body.contains("OMA_GATEWAY_DEADLINE_MS") && !body.contains("soon-7731"));
}

#[test]
fn a_body_that_cannot_be_read_is_answered_by_why() {
    for (failure, status, code) in [
        (BodyFailure::TooLarge, 413, "PAYLOAD_TOO_LARGE"),
        (BodyFailure::TimedOut, 408, "REQUEST_TIMEOUT"),
        (BodyFailure::Broken("reset".into()), 400, "BAD_REQUEST"),
    ] {
        let mut machine =
            RequestMachine::new(environment(&[]), authorized("POST", "/v1/validate"), NOW, 1);
        let Poll::Step(Step::ReadBody(limits)) = machine.poll(NOW) else {
            panic!("no body asked for")
        };
        assert_eq!(limits.max_bytes, 4096);
        assert_eq!(limits.deadline_at_ms, NOW + 2000);
        // While the body is due: waiting until its deadline, and nothing else is taken.
        assert_eq!(machine.poll(NOW + 1), Poll::Waiting(Some(NOW + 2000)));
        assert_eq!(machine.wake_at(), Some(NOW + 2000));
        let stray = machine
            .handle(Input::Written(true))
            .expect_err("not the body");
        assert_eq!(stray.reason.name(), "SessionStateError");
        assert_eq!(stray.answer, Input::Written(true), "handed back");
        machine
            .handle(Input::BodyFailed(failure))
            .expect("the body's answer");
        let again = machine.handle(Input::Body(Vec::new()));
        assert_eq!(again.expect_err("given").reason.name(), "SessionStateError");
        let served = serve(machine, Host::default());
        assert_eq!(served.status, status);
        assert_eq!(served.json()["error"]["code"], code);
    }
}

#[test]
fn a_run_is_sent_answered_logged_and_its_usage_counted() {
    let mut host = with_body(&run_body());
    host.http.push_back(response(200, &anthropic("Hi.")));
    let served = serve(
        RequestMachine::new(environment(&[]), authorized("POST", "/v1/run"), NOW, 1),
        host,
    );
    assert_eq!(served.status, 200);
    assert_eq!(served.steps, ["read-body", "send", "respond", "log"]);
    assert_eq!(served.sent[0].url, format!("{BASE}/v1/messages"));
    let result = served.json();
    assert_eq!(
        (result["success"].clone(), result["output"].clone()),
        (json!(true), json!("Hi."))
    );
}

#[test]
fn a_streamed_run_opens_just_before_its_first_request_and_ends_with_done() {
    let mut host = with_body(&run_body());
    anthropic_stream(&mut host, "Hi.");
    let stream = [
        ("authorization", &*format!("Bearer {TOKEN}")),
        ("accept", "text/event-stream"),
    ];
    let served = serve(
        RequestMachine::new(environment(&[]), head("POST", "/v1/run", &stream), NOW, 1),
        host,
    );
    assert_eq!(served.status, 200);
    assert_eq!(
        served.steps,
        [
            "read-body",
            "open",
            "send",
            "receive",
            "write",
            "receive",
            "write",
            "write",
            "close",
            "log"
        ]
    );
    let text = served.stream.expect("a stream");
    assert!(
        text.starts_with("event: text_delta\ndata: \"Hi.\"\n\nevent: text\ndata: \"Hi.\"\n\n"),
        "{text}"
    );
    assert!(
        text.contains("event: done\ndata: {\"success\":true"),
        "{text}"
    );

    // Content the format cannot carry: refused as a whole 422 before anything is sent.
    let video = json!({"provider": "anthropic", "model": "m", "messages": [{"role": "user",
        "content": [{"type": "video", "source": {"type": "url", "media_type": "video/mp4",
                    "url": "https://v.example/a.mp4"}}]}]});
    let served = serve(
        RequestMachine::new(environment(&[]), head("POST", "/v1/run", &stream), NOW, 1),
        with_body(&video),
    );
    assert_eq!(served.status, 422);
    assert_eq!(served.steps, ["read-body", "respond", "log"]);

    // A caller that goes away ends the stream: nothing more is written, read or sent.
    let mut host = with_body(&run_body());
    anthropic_stream(&mut host, "Hi.");
    host.writes_ok = Some(0);
    let served = serve(
        RequestMachine::new(environment(&[]), head("POST", "/v1/run", &stream), NOW, 1),
        host,
    );
    assert_eq!(served.status, 200);
    assert_eq!(
        served.steps,
        [
            "read-body",
            "open",
            "send",
            "receive",
            "write",
            "close",
            "log"
        ]
    );
}

/// A model that would leave the provider's URL path, or one too long for any URL, is the
/// client's mistake on every route, found before anything is sent: `400` on the compatible
/// routes, `422` (the route's status for its invalid input) on `/v1/run`, never a provider's
/// failure that a fallback would move on from.
#[test]
fn a_model_a_url_cannot_carry_is_refused_before_anything_is_sent() {
    let long = "m".repeat(100 * 1024);
    let large = ("OMA_GATEWAY_MAX_BODY_BYTES", "1048576");
    for model in ["a/../../admin", long.as_str()] {
        let body = json!({"provider": "gemini", "model": model, "prompt": "Hello?"});
        let served = serve(
            RequestMachine::new(environment(&[large]), authorized("POST", "/v1/run"), NOW, 1),
            with_body(&body),
        );
        assert_eq!(
            served.status,
            422,
            "{}",
            served.reply.as_ref().unwrap().body
        );
        assert!(served.sent.is_empty());
        assert_eq!(served.json()["error"]["name"], "Error");
        assert_eq!(served.json()["error"]["retryable"], false);

        let fallbacks = format!(r#"{{"gemini/{model}": ["openai/gpt-4o"]}}"#);
        let settings = environment(&[("OMA_GATEWAY_FALLBACKS", &fallbacks), large]);
        let chat = json!({"model": format!("gemini/{model}"),
                          "messages": [{"role": "user", "content": "Hello?"}]});
        let served = serve(
            RequestMachine::new(settings, authorized("POST", "/v1/chat/completions"), NOW, 1),
            with_body(&chat),
        );
        assert_eq!(
            served.status,
            400,
            "{}",
            served.reply.as_ref().unwrap().body
        );
        assert_eq!(served.json()["error"]["type"], "invalid_request_error");
        assert!(served.sent.is_empty(), "nothing sent, no fallback tried");
    }
}

/// A provider's success whose body cannot be used was paid for: the chain does not move on to
/// a fallback (which would pay for a second completion); a retryable failure does.
#[test]
fn a_success_that_cannot_be_read_does_not_move_the_fallbacks_on() {
    let fallbacks = r#"{"anthropic/claude-x": ["openai/gpt-4o"]}"#;
    let chat = json!({"model": "anthropic/claude-x",
                      "messages": [{"role": "user", "content": "Hello?"}]});
    let openai = json!({"id": "c", "object": "chat.completion", "model": "gpt-4o",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "From OpenAI."},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
    .to_string();
    let answered = |first: CallAnswer| {
        let mut host = with_body(&chat);
        host.http.push_back(first);
        host.http.push_back(response(200, &openai));
        serve(
            RequestMachine::new(
                environment(&[("OMA_GATEWAY_FALLBACKS", fallbacks)]),
                authorized("POST", "/v1/chat/completions"),
                NOW,
                1,
            ),
            host,
        )
    };
    let garbled = answered(response(200, "{\"not\": \"a message\""));
    assert_eq!(garbled.sent.len(), 1, "one paid completion");
    assert_eq!(garbled.status, 502);
    assert_eq!(garbled.json()["error"]["type"], "api_error");

    let overloaded = answered(response(529, r#"{"type": "error"}"#));
    assert_eq!(overloaded.sent.len(), 2, "moved on");
    assert_eq!(overloaded.status, 200);
    assert_eq!(overloaded.json()["model"], "openai/gpt-4o");

    let refused = answered(CallAnswer::Failure(TransportFailure::new(
        TransportFailureKind::Refused,
        "refused",
    )));
    assert_eq!(refused.sent.len(), 2, "moved on");
}

#[test]
fn limits_are_counted_on_the_shared_store_before_the_body_and_the_tokens_after_the_answer() {
    let keys = r#"{"key-3": {"rpm": 3, "tpm": 10}}"#;
    let settings = || {
        environment(&[
            ("OMA_GATEWAY_KEYS", keys),
            ("OMA_GATEWAY_LIMITS_BUCKET", "LIMITS"),
        ])
    };
    let keyed = || head("POST", "/v1/run", &[("authorization", "Bearer key-3")]);
    let minute = NOW - NOW % 60_000 + 30_000;
    let store = Rc::new(RefCell::new(HashMap::new()));
    let mut statuses = Vec::new();
    for i in 0..4 {
        let mut machine = RequestMachine::new(settings(), keyed(), minute + i, 1);
        // The counts come first: the body is not asked for before them.
        let Poll::Step(Step::Count(ops)) = machine.poll(minute + i) else {
            panic!("not counted first")
        };
        assert_eq!(ops.store, "LIMITS");
        assert!(!format!("{ops:?}").contains("key-3"), "{ops:?}");
        assert_eq!(ops.add.iter().map(|(_, n)| *n).collect::<Vec<_>>(), [0, 1]);
        let early = machine.handle(Input::Body(Vec::new()));
        assert_eq!(
            early.expect_err("counts due").reason.name(),
            "SessionStateError"
        );
        machine
            .handle(Input::Counted(Ok(add(&store, &ops))))
            .expect("asked");
        let mut host = with_body(&run_body());
        host.store = Rc::clone(&store);
        host.http.push_back(response(200, &anthropic("Hi.")));
        let served = serve_at(machine, host, minute + i);
        statuses.push(served.status);
        match i {
            // The minute's first request forgets the minute before; the run's 6 tokens are
            // added after its answer, before the reply goes out.
            0 => {
                assert_eq!(
                    served.steps,
                    ["forget", "read-body", "send", "count", "respond", "log"]
                );
                assert_eq!(served.counts[0].add.len(), 1);
                assert_eq!(served.counts[0].add[0].1, 6);
            }
            1 => assert_eq!(
                served.steps,
                ["read-body", "send", "count", "respond", "log"]
            ),
            // Refused before the body.
            _ => {
                assert_eq!(served.steps, ["respond", "log"]);
                let reply = served.reply.as_ref().expect("a reply");
                assert!(reply.headers.contains(&("retry-after", "30".to_owned())));
            }
        }
    }
    assert_eq!(
        statuses,
        [200, 200, 429, 429],
        "10 tokens reached after two runs"
    );

    // A store that fails is a 503 in the route's shape, its error unshown.
    let host = Host {
        store_fails: Some("no binding LIMITS".into()),
        ..Host::default()
    };
    let served = serve(RequestMachine::new(settings(), keyed(), minute, 1), host);
    assert_eq!(served.status, 503);
    assert!(!served.reply.expect("a reply").body.contains("no binding"));
}

/// A streamed `/v1/run` counts its tokens too, like a whole one.
#[test]
fn a_streamed_run_counts_its_tokens() {
    let keys = r#"{"key-t": {"tpm": 100}}"#;
    let settings = environment(&[
        ("OMA_GATEWAY_KEYS", keys),
        ("OMA_GATEWAY_LIMITS_BUCKET", "LIMITS"),
    ]);
    let stream = [
        ("authorization", "Bearer key-t"),
        ("accept", "text/event-stream"),
    ];
    let mut host = with_body(&run_body());
    anthropic_stream(&mut host, "Hi.");
    let served = serve(
        RequestMachine::new(settings, head("POST", "/v1/run", &stream), NOW, 1),
        host,
    );
    assert_eq!(served.status, 200);
    let usage = served.counts.last().expect("counted");
    assert_eq!(usage.add.len(), 1);
    assert_eq!(usage.add[0].1, 6);
}

/// A provider's streamed answer as the host reads it: a `200` head, then one chunk per event
/// (`events`: the SSE text of each), then the end.
fn paced_stream(host: &mut Host, events: &[String]) {
    host.http.push_back(CallAnswer::Head {
        status: 200,
        headers: vec![("content-type".into(), "text/event-stream".into())],
    });
    for event in events {
        host.http
            .push_back(CallAnswer::Chunk(event.clone().into_bytes()));
    }
    host.http.push_back(CallAnswer::End);
}

/// Anthropic's events of the answer "Hi." (7 tokens in, of which 3 read from the cache; 2 out),
/// one SSE event each, with the `ping` Anthropic sends after the first block's start.
fn anthropic_events() -> Vec<String> {
    [
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
               "role": "assistant", "model": "claude-x", "content": [],
               "usage": {"input_tokens": 4, "cache_read_input_tokens": 3,
                         "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0,
               "content_block": {"type": "text", "text": ""}}),
        json!({"type": "ping"}),
        json!({"type": "content_block_delta", "index": 0,
               "delta": {"type": "text_delta", "text": "Hi."}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
               "usage": {"output_tokens": 2}}),
        json!({"type": "message_stop"}),
    ]
    .iter()
    .map(|event| {
        format!(
            "event: {}\ndata: {event}\n\n",
            event["type"].as_str().unwrap()
        )
    })
    .collect()
}

/// An OpenAI-compatible provider's chunks of the answer "Hi.": the role with an empty content
/// first, as OpenAI's stream begins, then the text, the finish reason, the usage and `[DONE]`.
fn openai_events() -> Vec<String> {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    [
        chunk(json!({"role": "assistant", "content": ""}), Value::Null),
        chunk(json!({"content": "Hi."}), Value::Null),
        chunk(json!({}), json!("stop")),
        json!({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o",
               "choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 2,
                                        "total_tokens": 9}}),
    ]
    .iter()
    .map(|chunk| format!("data: {chunk}\n\n"))
    .chain(["data: [DONE]\n\n".to_owned()])
    .collect()
}

/// A streamed chat request to `model` on `path` (`/v1/chat/completions` or `/v1/messages`).
fn streamed_chat(path: &str, model: &str) -> Host {
    let mut body = json!({"model": model, "max_tokens": 64, "stream": true,
                          "messages": [{"role": "user", "content": "Hello?"}]});
    if path == "/v1/chat/completions" {
        body.as_object_mut().unwrap().remove("max_tokens");
        body["stream_options"] = json!({"include_usage": true});
    }
    with_body(&body)
}

fn chat_machine(path: &str, extra: &[(&str, &str)]) -> RequestMachine {
    RequestMachine::new(environment(extra), authorized("POST", path), NOW, 1)
}

/// The SSE events of a stream's text, in order: each event's name (when it has one) and data.
fn sse_data(text: &str) -> Vec<Value> {
    text.split("\n\n")
        .filter_map(|event| event.lines().find_map(|line| line.strip_prefix("data: ")))
        .filter(|data| *data != "[DONE]")
        .map(|data| serde_json::from_str(data).expect("JSON"))
        .collect()
}

/// A streamed chat answer's head and first event go out as soon as the provider's stream began
/// (its `200` and the bytes of its first event), before the next bytes are asked for, on both
/// routes and from every target dialect; each piece then goes out as it is decoded, and the
/// end when the provider's end is read.
#[test]
fn a_streamed_chat_opens_with_its_first_event_as_soon_as_the_providers_stream_began() {
    for path in ["/v1/chat/completions", "/v1/messages"] {
        for (model, events) in [
            ("anthropic/claude-x", anthropic_events()),
            ("openai/gpt-4o", openai_events()),
        ] {
            let case = format!("{path} {model}");
            let mut host = streamed_chat(path, model);
            paced_stream(&mut host, &events);
            let served = serve(chat_machine(path, &[]), host);
            assert_eq!(served.status, 200, "{case}");
            // The head and the first event between the first chunk and the second read.
            assert_eq!(
                served.steps[..6],
                ["read-body", "send", "receive", "open", "write", "receive"],
                "{case}"
            );
            assert_eq!(served.sent.len(), 1, "{case}");
            let anthropic = model.starts_with("anthropic");
            // The first write begins with the stream's first event: alone after Anthropic's
            // `message_start`; with the empty text of OpenAI's first chunk.
            let first = sse_data(&served.writes[0]);
            assert!(
                !anthropic || first.len() == 1,
                "{case}: {:?}",
                served.writes
            );
            let text_at = served
                .writes
                .iter()
                .position(|w| w.contains("Hi."))
                .expect("the text");
            // The provider's events between its first and its text write nothing; the text
            // goes out in the write right after the read of its chunk.
            let text_read = if anthropic { 4 } else { 2 };
            let reads: Vec<usize> = served
                .steps
                .iter()
                .enumerate()
                .filter(|(_, step)| *step == "receive")
                .map(|(i, _)| i)
                .collect();
            assert_eq!(
                served.steps[reads[text_read - 1] + 1],
                "write",
                "{case}: {:?}",
                served.steps
            );
            assert_eq!(text_at, 1, "{case}: {:?}", served.writes);
            assert_eq!(
                served.steps[served.steps.len() - 3..],
                ["write", "close", "log"],
                "{case}"
            );
            if path == "/v1/chat/completions" {
                assert_eq!(
                    first[0]["choices"][0]["delta"],
                    json!({"role": "assistant", "content": ""}),
                    "{case}"
                );
                assert_eq!(first[0]["model"], model, "{case}");
                let all = sse_data(served.stream.as_deref().unwrap());
                let usage = &all.last().unwrap()["usage"];
                assert_eq!(usage["prompt_tokens"], 7, "{case}: {usage}");
                assert_eq!(usage["completion_tokens"], 2, "{case}: {usage}");
            } else {
                assert_eq!(first[0]["type"], "message_start", "{case}");
                // The usage Anthropic reported as its answer began; an OpenAI-compatible
                // provider reports none before its end: zeros, and the counts at the end.
                let usage = &first[0]["message"]["usage"];
                let (input, cached) = if anthropic { (4, 3) } else { (0, 0) };
                assert_eq!(usage["input_tokens"], input, "{case}: {usage}");
                assert_eq!(usage["cache_read_input_tokens"], cached, "{case}: {usage}");
                let all = sse_data(served.stream.as_deref().unwrap());
                let delta = all.iter().find(|e| e["type"] == "message_delta").unwrap();
                assert_eq!(delta["usage"]["output_tokens"], 2, "{case}: {delta}");
                let input = if anthropic { 4 } else { 7 };
                assert_eq!(delta["usage"]["input_tokens"], input, "{case}: {delta}");
            }
        }
    }
}

/// Anthropic's `message_start` split across two reads: the stream begins once its early usage
/// is read, so the gateway's `message_start` carries the counts, never zeros.
#[test]
fn a_streamed_chat_waits_for_anthropics_whole_message_start() {
    let events = anthropic_events();
    let (a, b) = events[0].split_at(40);
    let mut split = vec![a.to_owned(), b.to_owned()];
    split.extend_from_slice(&events[1..]);
    let mut host = streamed_chat("/v1/messages", "anthropic/claude-x");
    paced_stream(&mut host, &split);
    let served = serve(chat_machine("/v1/messages", &[]), host);
    assert_eq!(served.status, 200);
    assert_eq!(
        served.steps[..7],
        [
            "read-body",
            "send",
            "receive",
            "receive",
            "open",
            "write",
            "receive"
        ]
    );
    let first = sse_data(&served.writes[0]);
    assert_eq!(first.len(), 1, "{:?}", served.writes);
    assert_eq!(first[0]["type"], "message_start");
    let usage = &first[0]["message"]["usage"];
    assert_eq!(usage["input_tokens"], 4, "{usage}");
    assert_eq!(usage["cache_read_input_tokens"], 3, "{usage}");
}

/// Before a streamed chat's provider stream began, a failure is a whole reply with its own
/// status (a provider's `429`, a head that came and no bytes after it), and a retryable one
/// moves on to a fallback unseen; once it began, a failure is the dialect's error event in
/// the stream.
#[test]
fn a_streamed_chat_fails_whole_until_its_providers_stream_began() {
    let fallbacks = (
        "OMA_GATEWAY_FALLBACKS",
        r#"{"anthropic/claude-x": ["openai/gpt-4o"]}"#,
    );
    for path in ["/v1/chat/completions", "/v1/messages"] {
        // A provider's error status: the route's error reply with it, nothing streamed.
        let mut host = streamed_chat(path, "anthropic/claude-x");
        host.http.push_back(response(
            429,
            r#"{"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}}"#,
        ));
        let served = serve(chat_machine(path, &[]), host);
        assert_eq!(served.status, 429, "{path}");
        assert_eq!(
            served.steps,
            ["read-body", "send", "respond", "log"],
            "{path}"
        );
        assert_eq!(served.reply.as_ref().unwrap().status, 429, "{path}");
        assert!(served.stream.is_none(), "{path}");

        // Moved on to the fallback: the client sees only the stream of the one that answered.
        let mut host = streamed_chat(path, "anthropic/claude-x");
        host.http.push_back(response(529, r#"{"type": "error"}"#));
        paced_stream(&mut host, &openai_events());
        let served = serve(chat_machine(path, &[fallbacks]), host);
        assert_eq!(served.status, 200, "{path}");
        assert_eq!(served.sent.len(), 2, "{path}");
        assert_eq!(
            served.steps[..7],
            [
                "read-body",
                "send",
                "send",
                "receive",
                "open",
                "write",
                "receive"
            ],
            "{path}"
        );
        assert!(!served.stream.unwrap().contains("error"), "{path}");

        // A 2xx head whose connection breaks before any byte: nothing began, a whole 502, and
        // no fallback (the stream was accepted).
        let mut host = streamed_chat(path, "anthropic/claude-x");
        host.http.push_back(CallAnswer::Head {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
        });
        host.http
            .push_back(CallAnswer::Failure(TransportFailure::new(
                TransportFailureKind::Reset,
                "reset",
            )));
        let served = serve(chat_machine(path, &[fallbacks]), host);
        assert_eq!(
            served.steps,
            ["read-body", "send", "receive", "respond", "log"],
            "{path}"
        );
        assert_eq!(served.status, 502, "{path}");

        // Broken after the first event: the stream's error event, then its end.
        let mut host = streamed_chat(path, "anthropic/claude-x");
        host.http.push_back(CallAnswer::Head {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
        });
        host.http.push_back(CallAnswer::Chunk(
            anthropic_events()[0].clone().into_bytes(),
        ));
        host.http
            .push_back(CallAnswer::Failure(TransportFailure::new(
                TransportFailureKind::Reset,
                "reset",
            )));
        let served = serve(chat_machine(path, &[fallbacks]), host);
        assert_eq!(served.status, 200, "{path}");
        assert_eq!(served.sent.len(), 1, "{path}");
        assert_eq!(
            served.steps,
            [
                "read-body",
                "send",
                "receive",
                "open",
                "write",
                "receive",
                "write",
                "close",
                "log"
            ],
            "{path}"
        );
        let last = sse_data(served.writes.last().unwrap());
        assert!(last[0]["error"].is_object(), "{path}: {:?}", served.writes);
    }
}
