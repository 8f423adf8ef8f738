//! The recorded-response corpus (`fixtures/corpus/`): every recording is served byte for byte by
//! the loopback simulator (streams one event per chunk) and read by four clients: the
//! `component` world's `provider.chat` / `stream-chat` (the whole response: id, model, content,
//! stop reason, usage), its agent `run` / `stream`, the `portable` world's agent stepped by the
//! Rust driver, and the gateway's `/v1/run` served in process. Each answer is compared with the
//! expectation the manifest holds, written from the providers' documentation.
//!
//! A case marked `needs` waits for work not yet merged (`manifest.json` `merged` lists what is):
//! while it waits, a mismatch in the field that work changes is reported as an expected failure;
//! every other mismatch fails the test.

use oma_host_tests::Shared;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use oma_host_tests::artifact::GATEWAY;
use oma_host_tests::oma_json::{block_json, run_result_json};
use oma_host_tests::serve::{ServeOptions, Server};
use oma_host_tests::{
    agent_config, aws_event_message, call_options, chat_request, endpoint, error_json, retries,
    AgentEvent, CallOptions, DriverHarness, Endpoint, GuestOptions, Harness, LlmResponse,
    LoopbackOnly, Reply, RunInput, RunResult, Simulator, StreamEvent, WitError,
};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use wasmtime_wasi_http::io::TokioIo;

use crate::common::{text, user};

/// The manifest: `merged`, and one entry per recording.
const MANIFEST: &str = include_str!("../../../fixtures/corpus/manifest.json");

/// The key every client is given; it must not show in any answer.
const KEY: &str = "sk-corpus-SECRET-5d81";

/// The pause between two chunks of a recorded stream.
const CHUNK_DELAY: Duration = Duration::from_millis(1);

/// The most one client may take for one recording.
const CALL_LIMIT: Duration = Duration::from_secs(60);

/// The placeholder for an id the component makes up for Gemini.
const GEMINI_ID: &str = "<gemini-id>";

fn manifest() -> Value {
    serde_json::from_str(MANIFEST).expect("the manifest is JSON")
}

fn cases() -> Vec<Value> {
    manifest()["cases"]
        .as_array()
        .expect("the manifest has cases")
        .clone()
}

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/corpus")
}

fn field<'a>(case: &'a Value, name: &str) -> &'a str {
    case[name]
        .as_str()
        .unwrap_or_else(|| panic!("{}: no string field {name}", case["name"]))
}

/// The body of a recording in the pieces it is flushed in.
fn chunks(case: &Value) -> Vec<Vec<u8>> {
    let bytes = std::fs::read(corpus_dir().join(field(case, "file"))).expect("the body exists");
    match field(case, "framing") {
        "whole" => vec![bytes],
        "sse" => sse_events(&bytes),
        "aws-eventstream" => {
            let exceptions: BTreeSet<&str> = case["exceptions"]
                .as_array()
                .map(|list| list.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let text = String::from_utf8(bytes).expect("the event lines are UTF-8");
            text.lines()
                .filter(|line| !line.trim().is_empty())
                .map(|line| {
                    let event: serde_json::Map<String, Value> =
                        serde_json::from_str(line).expect("an event line is a JSON object");
                    assert_eq!(event.len(), 1, "one event per line: {line}");
                    let (kind, payload) = event.into_iter().next().expect("one key");
                    let payload = payload.to_string().into_bytes();
                    if exceptions.contains(kind.as_str()) {
                        aws_event_message(
                            &[
                                (":exception-type", &kind),
                                (":content-type", "application/json"),
                                (":message-type", "exception"),
                            ],
                            &payload,
                        )
                    } else {
                        aws_event_message(
                            &[
                                (":event-type", &kind),
                                (":content-type", "application/json"),
                                (":message-type", "event"),
                            ],
                            &payload,
                        )
                    }
                })
                .collect()
        }
        other => panic!("{}: unknown framing {other}", case["name"]),
    }
}

/// Splits a server-sent event stream after each blank line (LF or CRLF), keeping every byte.
fn sse_events(bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut events = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        let end = if bytes[i..].starts_with(b"\r\n\r\n") {
            Some(i + 4)
        } else if bytes[i..].starts_with(b"\n\n") {
            Some(i + 2)
        } else {
            None
        };
        match end {
            Some(end) => {
                events.push(bytes[start..end].to_vec());
                start = end;
                i = end;
            }
            None => i += 1,
        }
    }
    if start < bytes.len() {
        events.push(bytes[start..].to_vec());
    }
    events
}

fn reply(case: &Value) -> Reply {
    let headers = case["headers"]
        .as_object()
        .map(|map| {
            map.iter()
                .map(|(name, value)| (name.clone(), value.as_str().unwrap_or("").to_owned()))
                .collect()
        })
        .unwrap_or_default();
    Reply::Recorded {
        status: case["status"]
            .as_u64()
            .and_then(|s| u16::try_from(s).ok())
            .expect("a status"),
        headers,
        chunks: chunks(case),
    }
}

fn case_endpoint(case: &Value, base_url: &str) -> Endpoint {
    let mut endpoint = endpoint(field(case, "provider"), Some(base_url), Some(KEY));
    if field(case, "provider") == "bedrock" {
        endpoint.region = Some("us-east-1".into());
    }
    endpoint
}

fn options() -> CallOptions {
    CallOptions {
        retry: retries(1),
        timeout_ms: 30_000,
        ..call_options()
    }
}

/// What one client made of one recording: OMA's response or run result, or the error, as JSON.
enum Outcome {
    /// `{id, model, content, stop_reason, usage}`.
    Response(Value),
    /// `error_json`'s inner object.
    Error(Value),
    /// An `AgentRunResult`.
    Run(Value),
}

fn response_json(response: &LlmResponse) -> Value {
    json!({
        "id": response.id,
        "model": response.model,
        "content": response.content.iter().map(block_json).collect::<Vec<_>>(),
        "stop_reason": response.stop_reason,
        "usage": {
            "input_tokens": response.usage.input_tokens,
            "output_tokens": response.usage.output_tokens,
        },
    })
}

fn error_outcome(error: &WitError) -> Outcome {
    Outcome::Error(error_json(error)["error"].clone())
}

fn run_input() -> RunInput {
    RunInput::Messages(vec![user(vec![text("Hi")])])
}

fn loopback() -> GuestOptions {
    GuestOptions {
        hooks: Some(Box::new(LoopbackOnly::new())),
        ..GuestOptions::default()
    }
}

fn agent(case: &Value, base_url: &str) -> oma_host_tests::AgentConfig {
    let mut config = agent_config(
        "corpus",
        field(case, "model"),
        case_endpoint(case, base_url),
    );
    config.max_turns = Some(1);
    config.call = options();
    config
}

/// `provider.chat` or `provider.stream-chat` in the `component` world.
async fn chat(case: &Value, base_url: &str) -> Outcome {
    let mut guest = Harness::shared()
        .expect("the harness")
        .instantiate_with(loopback())
        .await
        .expect("the guest instantiates");
    let request = chat_request(field(case, "model"), vec![user(vec![text("Hi")])]);
    let endpoint = case_endpoint(case, base_url);
    if case["stream"] == true {
        let stream = guest
            .stream_chat(&request, &endpoint, &options())
            .await
            .expect("no trap");
        let stream = match stream {
            Ok(stream) => stream,
            Err(error) => return error_outcome(&error),
        };
        match guest.collect_stream(stream).await.expect("no trap") {
            Ok(events) => match events.last() {
                Some(StreamEvent::Done(response)) => Outcome::Response(response_json(response)),
                other => panic!("{}: a stream that ends with {other:?}", case["name"]),
            },
            Err((_, error)) => error_outcome(&error),
        }
    } else {
        match guest
            .chat(&request, &endpoint, &options())
            .await
            .expect("no trap")
        {
            Ok(response) => Outcome::Response(response_json(&response)),
            Err(error) => error_outcome(&error),
        }
    }
}

fn last_result(case: &Value, events: &[AgentEvent]) -> RunResult {
    match events.last() {
        Some(AgentEvent::Done(result) | AgentEvent::Error(result)) => result.clone(),
        other => panic!("{}: an agent stream that ends with {other:?}", case["name"]),
    }
}

/// The `component` world's agent: `run`, or `stream` for a streamed recording.
async fn component_run(case: &Value, base_url: &str) -> Outcome {
    let mut guest = Harness::shared()
        .expect("the harness")
        .instantiate_with(loopback())
        .await
        .expect("the guest instantiates");
    let agent = guest
        .create_agent(&agent(case, base_url))
        .await
        .expect("no trap")
        .expect("the agent is created");
    let result = if case["stream"] == true {
        let stream = guest
            .stream(&agent, &run_input())
            .await
            .expect("no trap")
            .expect("the input is valid");
        last_result(
            case,
            &guest.collect_agent_stream(stream).await.expect("no trap"),
        )
    } else {
        guest
            .run(&agent, &run_input())
            .await
            .expect("no trap")
            .expect("the input is valid")
    };
    Outcome::Run(run_result_json(&result))
}

/// The `portable` world's agent, each step performed by the Rust driver.
async fn driver_run(case: &Value, base_url: &str) -> Outcome {
    let mut guest = DriverHarness::shared()
        .expect("the portable harness")
        .instantiate_with(loopback())
        .await
        .expect("the portable guest instantiates");
    let agent = guest
        .create_agent(&agent(case, base_url))
        .await
        .expect("no trap")
        .expect("the agent is created");
    let result = if case["stream"] == true {
        let stream = guest
            .stream(&agent, &run_input())
            .await
            .expect("no trap")
            .expect("the input is valid");
        last_result(
            case,
            &guest.collect_agent_stream(stream).await.expect("no trap"),
        )
    } else {
        guest
            .run(&agent, &run_input())
            .await
            .expect("no trap")
            .expect("the input is valid")
    };
    Outcome::Run(run_result_json(&result))
}

/// The gateway's environment: every provider's key and base URL pointing at `base_url`.
fn gateway_env(base_url: &str) -> Vec<(String, String)> {
    let mut env = Vec::new();
    for prefix in ["ANTHROPIC", "OPENAI", "DEEPSEEK", "XAI", "GEMINI"] {
        env.push((format!("{prefix}_API_KEY"), KEY.to_owned()));
        env.push((format!("{prefix}_BASE_URL"), base_url.to_owned()));
    }
    env.push(("AWS_BEARER_TOKEN_BEDROCK".into(), KEY.into()));
    env.push(("AWS_ENDPOINT_URL_BEDROCK_RUNTIME".into(), base_url.into()));
    env.push(("AWS_REGION".into(), "us-east-1".into()));
    // One attempt, as in the other worlds: each recording is one answer.
    env.push(("OMA_GATEWAY_MAX_RETRIES".into(), "0".into()));
    env
}

/// `POST /v1/run` (with `Accept: text/event-stream` for a streamed recording); the result of
/// the run, or of its `done` event.
async fn gateway_run(case: &Value, gateway: SocketAddr) -> Outcome {
    let body = json!({
        "provider": field(case, "provider"),
        "model": field(case, "model"),
        "prompt": "Hi",
        "maxTurns": 1,
    })
    .to_string();
    let stream = TcpStream::connect(gateway).await.expect("connects");
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(connection);
    let mut request = http::Request::builder()
        .method("POST")
        .uri("/v1/run")
        .header("host", gateway.to_string())
        .header("content-type", "application/json");
    if case["stream"] == true {
        request = request.header("accept", "text/event-stream");
    }
    let request = request
        .body(Full::new(Bytes::from(body)))
        .expect("a request");
    let response = sender.send_request(request).await.expect("an answer");
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("the whole body")
        .to_bytes();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    assert_eq!(status, 200, "{}: the gateway answered {text}", case["name"]);
    if case["stream"] == true {
        let done = text
            .split("\n\n")
            .find_map(|event| {
                let mut lines = event.lines();
                let kind = lines.next()?.strip_prefix("event: ")?;
                (kind == "done").then(|| {
                    lines
                        .filter_map(|line| line.strip_prefix("data: "))
                        .collect::<Vec<_>>()
                        .join("\n")
                })
            })
            .unwrap_or_else(|| panic!("{}: no done event in {text}", case["name"]));
        Outcome::Run(serde_json::from_str(&done).expect("the done event is JSON"))
    } else {
        Outcome::Run(serde_json::from_str(&text).expect("the result is JSON"))
    }
}

/// Whether `actual` is `expected`, `<gemini-id>` standing for any id the component makes up.
fn matches(expected: &Value, actual: &Value) -> bool {
    match (expected, actual) {
        (Value::String(e), Value::String(a)) if e == GEMINI_ID => is_gemini_id(a),
        (Value::Object(e), Value::Object(a)) => {
            e.len() == a.len()
                && e.iter()
                    .all(|(k, v)| a.get(k).is_some_and(|actual| matches(v, actual)))
        }
        (Value::Array(e), Value::Array(a)) => {
            e.len() == a.len() && e.iter().zip(a).all(|(e, a)| matches(e, a))
        }
        _ => expected == actual,
    }
}

/// `gemini-<epoch ms>-<7 base36 characters>`.
fn is_gemini_id(id: &str) -> bool {
    let mut parts = id.splitn(3, '-');
    parts.next() == Some("gemini")
        && parts
            .next()
            .is_some_and(|ms| !ms.is_empty() && ms.bytes().all(|b| b.is_ascii_digit()))
        && parts.next().is_some_and(|tail| {
            tail.len() == 7
                && tail
                    .bytes()
                    .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
        })
}

/// One field that differs from the expectation.
struct Mismatch {
    /// `content`, `usage`, `code`, ...
    field: &'static str,
    detail: String,
}

fn differ(out: &mut Vec<Mismatch>, field: &'static str, expected: &Value, actual: &Value) {
    if !matches(expected, actual) {
        out.push(Mismatch {
            field,
            detail: format!("expected {expected}, got {actual}"),
        });
    }
}

/// The provider's error as expected, against an error object (`error_json`'s or `errorInfo`).
fn compare_error(out: &mut Vec<Mismatch>, expected: &Value, actual: &Value) {
    differ(out, "name", &expected["name"], &actual["name"]);
    differ(
        out,
        "httpStatus",
        &expected["httpStatus"],
        &actual["httpStatus"],
    );
    differ(
        out,
        "retryable",
        &expected["retryable"],
        &actual["retryable"],
    );
    differ(out, "provider", &expected["provider"], &actual["provider"]);
    differ(out, "code", &expected["code"], &actual["code"]);
    if let Some(piece) = expected["message_contains"].as_str() {
        let message = actual["message"].as_str().unwrap_or_default();
        if !message.contains(piece) {
            out.push(Mismatch {
                field: "message",
                detail: format!("{message:?} does not contain {piece:?}"),
            });
        }
    }
}

fn compare(case: &Value, outcome: &Outcome) -> Vec<Mismatch> {
    let expect = &case["expect"];
    let mut out = Vec::new();
    match (outcome, &expect["response"], &expect["error"]) {
        (Outcome::Response(actual), expected @ Value::Object(_), _) => {
            for (field, key) in [
                ("id", "id"),
                ("model", "model"),
                ("content", "content"),
                ("stop_reason", "stop_reason"),
                ("usage", "usage"),
            ] {
                differ(&mut out, field, &expected[key], &actual[key]);
            }
        }
        (Outcome::Error(actual), _, expected @ Value::Object(_)) => {
            compare_error(&mut out, expected, actual);
        }
        (Outcome::Run(result), expected @ Value::Object(_), _) => {
            differ(&mut out, "success", &json!(true), &result["success"]);
            let first = json!({"role": "assistant", "content": expected["content"]});
            differ(&mut out, "content", &first, &result["messages"][0]);
            differ(&mut out, "usage", &expected["usage"], &result["tokenUsage"]);
        }
        (Outcome::Run(result), _, expected @ Value::Object(_)) => {
            differ(&mut out, "success", &json!(false), &result["success"]);
            differ(
                &mut out,
                "kind",
                &json!("provider"),
                &result["errorInfo"]["kind"],
            );
            compare_error(&mut out, expected, &result["errorInfo"]);
        }
        (Outcome::Response(actual), _, _) => out.push(Mismatch {
            field: "outcome",
            detail: format!("expected an error, got the response {actual}"),
        }),
        (Outcome::Error(actual), _, _) => out.push(Mismatch {
            field: "outcome",
            detail: format!("expected a response, got the error {actual}"),
        }),
        (Outcome::Run(_), _, _) => panic!("{}: the case expects nothing", case["name"]),
    }
    out
}

/// The fields the work a case waits for changes.
fn affected(needs: &str) -> &'static [&'static str] {
    match needs {
        "error-code" => &["code"],
        "gemini-partial-args" => &["content"],
        other => panic!("unknown needs {other}"),
    }
}

/// What the run of the whole corpus found.
#[derive(Default)]
struct Report {
    failures: Vec<String>,
    expected_failures: Vec<String>,
    passing_early: BTreeSet<String>,
}

async fn within<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(CALL_LIMIT, future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {CALL_LIMIT:?}"))
}

/// Every recording through every world, compared with its expectation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_recording_gives_the_documented_result_in_every_world() {
    let manifest = manifest();
    let merged: BTreeSet<&str> = manifest["merged"]
        .as_array()
        .expect("merged is a list")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let simulator = Simulator::start_with(CHUNK_DELAY).expect("the simulator starts");
    let base_url = simulator.base_url();
    let server = Server::bind(ServeOptions {
        addr: "127.0.0.1:0".parse().expect("an address"),
        env: gateway_env(&base_url),
        max_instances: 2,
        ..ServeOptions::new(GATEWAY)
    })
    .expect("the gateway binds");
    let gateway = server.local_addr();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server.serve_until(async {
        let _ = stopped.await;
    }));

    let mut report = Report::default();
    for case in manifest["cases"].as_array().expect("cases") {
        let name = field(case, "name");
        let needs = case["needs"].as_str().filter(|n| !merged.contains(n));
        for world in ["chat", "component", "driver", "gateway"] {
            simulator.script([reply(case)]);
            let before = simulator.request_count();
            let label = format!("{name} [{world}]");
            let outcome = match world {
                "chat" => within(&label, chat(case, &base_url)).await,
                "component" => within(&label, component_run(case, &base_url)).await,
                "driver" => within(&label, driver_run(case, &base_url)).await,
                _ => within(&label, gateway_run(case, gateway)).await,
            };
            let sent = simulator.request_count() - before;
            if sent != 1 || simulator.clear_script() != 0 {
                report.failures.push(format!(
                    "{label}: {sent} requests reached the provider, not 1"
                ));
            }
            let shown = match &outcome {
                Outcome::Response(v) | Outcome::Error(v) | Outcome::Run(v) => v.to_string(),
            };
            if shown.contains(KEY) || shown.contains("SECRET") {
                report
                    .failures
                    .push(format!("{label}: the key shows in {shown}"));
            }
            let mismatches = compare(case, &outcome);
            for mismatch in &mismatches {
                let line = format!("{label}: {}: {}", mismatch.field, mismatch.detail);
                match needs {
                    Some(n) if affected(n).contains(&mismatch.field) => {
                        report.expected_failures.push(format!("{line} (needs {n})"))
                    }
                    _ => report.failures.push(line),
                }
            }
            if let Some(n) = needs {
                if mismatches.is_empty() {
                    report.passing_early.insert(format!("{name} (needs {n})"));
                }
            }
        }
    }
    let _ = stop.send(());
    within("the gateway's stop", serving)
        .await
        .expect("no panic")
        .expect("the gateway stopped cleanly");

    if !report.expected_failures.is_empty() {
        eprintln!(
            "corpus: {} expected failures, waiting for work not yet merged \
             (add it to `merged` in fixtures/corpus/manifest.json once it is):",
            report.expected_failures.len()
        );
        for line in &report.expected_failures {
            eprintln!("  xfail {line}");
        }
    }
    for name in &report.passing_early {
        eprintln!("corpus: {name} already passes in every world");
    }
    assert!(
        report.failures.is_empty(),
        "{} mismatches:\n{}",
        report.failures.len(),
        report.failures.join("\n")
    );
}

/// The corpus is what the README promises: at least 40 recordings, every family, every file
/// present, a source and an edit note for each, each kind of coverage asked for, and every
/// stop reason each provider documents.
#[test]
fn the_corpus_is_complete_and_sourced() {
    let cases = cases();
    assert!(cases.len() >= 40, "{} recordings", cases.len());
    let mut names = BTreeSet::new();
    let mut families = BTreeSet::new();
    let mut covers = String::new();
    for case in &cases {
        let name = field(case, "name");
        assert!(names.insert(name.to_owned()), "{name} twice");
        families.insert(field(case, "family").to_owned());
        assert!(
            corpus_dir().join(field(case, "file")).is_file(),
            "{name}: no body"
        );
        let source = &case["source"];
        let from_repo = ["repository", "path", "commit"]
            .iter()
            .all(|key| source[key].as_str().is_some_and(|v| !v.is_empty()));
        let commit_ok = source["commit"]
            .as_str()
            .is_none_or(|c| c.len() == 40 && c.bytes().all(|b| b.is_ascii_hexdigit()));
        assert!(
            (from_repo && commit_ok)
                || source["url"]
                    .as_str()
                    .is_some_and(|u| u.starts_with("https://")),
            "{name}: no source"
        );
        assert!(case["edits"].is_string(), "{name}: no edit note");
        assert!(
            case["expect"]["response"].is_object() != case["expect"]["error"].is_object(),
            "{name}: exactly one of response and error"
        );
        assert!(!chunks(case).is_empty(), "{name}: an empty body");
        for cover in case["covers"].as_array().expect("covers") {
            covers.push_str(cover.as_str().unwrap_or_default());
            covers.push('\n');
        }
    }
    assert_eq!(
        families,
        ["anthropic", "bedrock", "gemini", "openai"]
            .map(str::to_owned)
            .into(),
    );
    for wanted in [
        "plain text",
        "single tool call",
        "parallel tool calls",
        "reasoning with signature",
        "cache token",
        "streamed text",
        "argument deltas",
        "mid-stream error",
        "error body 400",
        "error body 401",
        "error body 429",
        "error body 500",
        "error body 529",
        "stop length",
        "stop refusal",
        "redacted reasoning",
        "streamed redacted reasoning",
        "argument deltas interleaved by index",
    ] {
        assert!(covers.contains(wanted), "nothing covers {wanted}");
    }
    // Every stop reason each provider documents, in a recording of its family.
    for (family, reasons) in [
        (
            "anthropic",
            &[
                "end_turn",
                "max_tokens",
                "stop_sequence",
                "tool_use",
                "pause_turn",
                "refusal",
            ][..],
        ),
        (
            "openai",
            &[
                "stop",
                "length",
                "tool_calls",
                "content_filter",
                "function_call",
            ][..],
        ),
        (
            "gemini",
            &[
                "STOP",
                "MAX_TOKENS",
                "SAFETY",
                "RECITATION",
                "LANGUAGE",
                "OTHER",
                "BLOCKLIST",
                "PROHIBITED_CONTENT",
                "SPII",
                "MALFORMED_FUNCTION_CALL",
            ][..],
        ),
        (
            "bedrock",
            &[
                "end_turn",
                "tool_use",
                "max_tokens",
                "stop_sequence",
                "guardrail_intervened",
                "content_filtered",
            ][..],
        ),
    ] {
        for reason in reasons {
            let wanted = format!("stop {reason}");
            assert!(
                cases.iter().any(|case| case["family"] == family
                    && case["covers"]
                        .as_array()
                        .is_some_and(|covers| covers.iter().filter_map(Value::as_str).any(
                            |cover| cover == wanted || cover.starts_with(&format!("{wanted} "))
                        ))),
                "no {family} recording covers {wanted}"
            );
        }
    }
    // Parallel tool calls, plain and streamed, in the OpenAI-compatible family.
    let parallel: Vec<&Value> = cases
        .iter()
        .filter(|case| case["family"] == "openai")
        .filter(|case| {
            case["covers"]
                .as_array()
                .is_some_and(|covers| covers.iter().any(|c| c == "parallel tool calls"))
        })
        .collect();
    assert!(
        parallel.iter().any(|case| case["stream"] == true)
            && parallel.iter().any(|case| case["stream"] == false),
        "OpenAI parallel tool calls: wanted a plain and a streamed recording"
    );
}

/// The splitter keeps every byte and cuts after each blank line.
#[test]
fn sse_events_are_cut_after_blank_lines() {
    let body = b"event: a\ndata: 1\n\ndata: 2\r\n\r\ndata: 3";
    let events = sse_events(body);
    assert_eq!(
        events,
        vec![
            b"event: a\ndata: 1\n\n".to_vec(),
            b"data: 2\r\n\r\n".to_vec(),
            b"data: 3".to_vec()
        ]
    );
    assert_eq!(events.concat(), body.to_vec());
}
