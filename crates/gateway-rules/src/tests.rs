//! The gateway's rules by value: routes, statuses, bodies, and runs driven with canned answers
//! (the wasi:http side is tested through real hosts, in the harness).

use serde_json::{json, Value};

use super::*;
use oma_core::agent::machine::{Answer, Poll, Step};
use oma_core::http::call::CallAnswer;
use oma_core::http::HttpResponse;

const KEY: &str = "sk-gateway-unit-SECRET-4242";
const NOW: u64 = 1_796_036_400_000;

fn settings(pairs: &[(&str, &str)]) -> Settings {
    Settings::from_vars(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())))
        .expect("valid settings")
}

fn configured() -> Settings {
    settings(&[
        ("ANTHROPIC_API_KEY", KEY),
        ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9"),
        ("OMA_GATEWAY_DEADLINE_MS", "5000"),
    ])
}

fn body_json(reply: &Reply) -> Value {
    serde_json::from_str(&reply.body).expect("a JSON body")
}

fn error_of(reply: &Reply) -> (String, Option<String>, String) {
    let value = body_json(reply);
    let error = &value["error"];
    (
        error["name"].as_str().unwrap_or_default().to_owned(),
        error["code"].as_str().map(str::to_owned),
        error["message"].as_str().unwrap_or_default().to_owned(),
    )
}

/// The span a test run's records continue.
fn parent() -> oma_core::agent::observability::options::TraceParent {
    oma_core::agent::observability::options::TraceParent {
        trace_id: "4bf92f3577b34da6a3ce929d0e0e4736".into(),
        span_id: "00f067aa0ba902b7".into(),
    }
}

fn head<'a>(method: &'a str, path: &'a str) -> Head<'a> {
    Head {
        method,
        path,
        ..Head::default()
    }
}

#[test]
fn routes_methods_token_and_length() {
    let open = settings(&[]);
    assert_eq!(route(&open, &head("GET", "/healthz")), Ok(Route::Health));
    assert_eq!(route(&open, &head("POST", "/v1/run?x=1")), Ok(Route::Run));
    assert_eq!(route(&open, &head("post", "/v1/format")), Ok(Route::Format));

    let missing = route(&open, &head("GET", "/v2/run")).expect_err("404");
    assert_eq!(missing.status, 404);
    assert_eq!(error_of(&missing).1.as_deref(), Some("NOT_FOUND"));

    let wrong = route(&open, &head("GET", "/v1/validate")).expect_err("405");
    assert_eq!(wrong.status, 405);
    assert_eq!(wrong.headers, vec![("allow", "POST".to_string())]);
    let wrong = route(&open, &head("POST", "/healthz")).expect_err("405");
    assert_eq!(wrong.headers, vec![("allow", "GET".to_string())]);

    let guarded = settings(&[("OMA_GATEWAY_TOKEN", "s3cret-token")]);
    let refused = route(&guarded, &head("POST", "/v1/validate")).expect_err("401");
    assert_eq!(refused.status, 401);
    assert_eq!(
        refused.headers,
        vec![("www-authenticate", "Bearer".to_string())]
    );
    assert!(!refused.body.contains("s3cret-token"));
    assert_eq!(route(&guarded, &head("GET", "/healthz")), Ok(Route::Health));
    let with_token = Head {
        authorization: Some("Bearer s3cret-token"),
        ..head("POST", "/v1/validate")
    };
    assert_eq!(route(&guarded, &with_token), Ok(Route::Validate));

    let small = settings(&[("OMA_GATEWAY_MAX_BODY_BYTES", "10")]);
    let big = Head {
        content_length: Some(11),
        ..head("POST", "/v1/run")
    };
    assert_eq!(route(&small, &big).expect_err("413").status, 413);
    let fits = Head {
        content_length: Some(10),
        ..big
    };
    assert_eq!(route(&small, &fits), Ok(Route::Run));
}

#[test]
fn every_error_has_the_error_shape() {
    let reply = Reply::deadline(100);
    assert_eq!(reply.status, 504);
    let value = body_json(&reply);
    assert_eq!(value["error"]["retryable"], json!(true));
    assert_eq!(value["error"]["name"], "LLMCallTimeoutError");
    let reply = validate(&configured(), b"{not json");
    assert_eq!(reply.status, 400);
    assert_eq!(error_of(&reply).1.as_deref(), Some("MALFORMED_JSON"));
    assert_eq!(body_json(&reply)["error"]["retryable"], json!(false));
}

#[test]
fn validation_answers_the_list_or_omas_message() {
    let good = br#"[{"role": "user", "content": [{"type": "text", "text": "hi"}]}]"#;
    let reply = validate(&configured(), good);
    assert_eq!(reply.status, 200);
    assert_eq!(
        body_json(&reply),
        json!([{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
    );
    let reply = validate(&configured(), br#"[{"role": "user", "content": "hi"}]"#);
    assert_eq!(reply.status, 422);
    assert_eq!(
        error_of(&reply),
        (
            "InvalidMessageError".into(),
            Some("INVALID_MESSAGE".into()),
            "messages[0].content must be a ContentBlock[], got string".into()
        )
    );
    let bad_media = br#"[{"role": "user", "content": [{"type": "video",
        "source": {"type": "url", "media_type": "video/mp4; q=1", "url": "https://v.example/a"}}]}]"#;
    let reply = validate(&configured(), bad_media);
    assert_eq!(reply.status, 422);
    assert_eq!(
        error_of(&reply).2,
        "messages[0].content[0].source.media_type must be a MIME type without parameters"
    );
}

/// A base URL with credentials in its userinfo and its query is shown without them, and a
/// failure that would quote them quotes none.
#[test]
fn format_hides_the_credentials_of_the_base_url() {
    for base in [
        "http://user:hunter2-pass@127.0.0.1:9",
        "http://127.0.0.1:9/p?api-key=qsecret-1234&v=1",
        "http://tok-abcdef-99@127.0.0.1:9",
    ] {
        let settings = settings(&[("ANTHROPIC_API_KEY", KEY), ("ANTHROPIC_BASE_URL", base)]);
        let body = json!({
            "provider": "anthropic", "model": "claude-x",
            "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        })
        .to_string();
        let reply = format(&settings, body.as_bytes(), NOW, 7);
        assert_eq!(reply.status, 200, "{}", reply.body);
        for secret in ["hunter2-pass", "qsecret-1234", "tok-abcdef-99", KEY] {
            assert!(!reply.body.contains(secret), "{base}: {}", reply.body);
        }
        let url = body_json(&reply)["url"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            url.contains("[redacted]") && url.contains("127.0.0.1:9"),
            "{url}"
        );
        // The conversation quoting the password is refused, showing nothing.
        let quoting = json!({
            "provider": "anthropic", "model": "claude-x",
            "messages": [{"role": "user", "content": [{"type": "text",
                "text": "my password is hunter2-pass, qsecret-1234, tok-abcdef-99"}]}],
        })
        .to_string();
        let reply = format(&settings, quoting.as_bytes(), NOW, 7);
        assert_eq!(reply.status, 422, "{base}: {}", reply.body);
        for secret in ["hunter2-pass", "qsecret-1234", "tok-abcdef-99"] {
            assert!(!reply.body.contains(secret), "{base}: {}", reply.body);
        }
    }
}

#[test]
fn format_shows_the_request_with_keys_redacted() {
    let body = json!({
        "provider": "anthropic", "model": "claude-x", "system": "be brief", "maxTokens": 64,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    })
    .to_string();
    let reply = format(&configured(), body.as_bytes(), NOW, 7);
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(!reply.body.contains(KEY), "{}", reply.body);
    let value = body_json(&reply);
    assert_eq!(value["method"], "POST");
    assert_eq!(value["url"], "http://127.0.0.1:9/v1/messages");
    assert_eq!(value["headers"]["x-api-key"], "[redacted]");
    assert_eq!(value["body"]["model"], "claude-x");
    assert_eq!(value["body"]["system"], "be brief");
    assert_eq!(value["body"]["max_tokens"], 64);

    let video = json!({
        "provider": "anthropic", "model": "claude-x",
        "messages": [{"role": "user", "content": [{"type": "video",
            "source": {"type": "url", "media_type": "video/mp4", "url": "https://v.example/a.mp4"}}]}],
    })
    .to_string();
    let reply = format(&configured(), video.as_bytes(), NOW, 7);
    assert_eq!(reply.status, 422);
    assert_eq!(error_of(&reply).0, "UnsupportedContentBlockError");

    for (body, status) in [
        (r#"{"provider": "anthropic"}"#, 422),
        (
            r#"{"provider": "anthropic", "model": "m", "messages": [], "colour": 1}"#,
            422,
        ),
        (
            r#"{"provider": "nowhere", "model": "m", "messages": []}"#,
            422,
        ),
        ("[1, 2", 400),
    ] {
        assert_eq!(
            format(&configured(), body.as_bytes(), NOW, 7).status,
            status,
            "{body}"
        );
    }
    // A missing list is a wrong request; a `null` one is OMA's guard's to refuse.
    let missing = format(
        &configured(),
        br#"{"provider": "anthropic", "model": "m"}"#,
        NOW,
        7,
    );
    let (name, _, message) = error_of(&missing);
    assert_eq!(
        (name.as_str(), message.as_str()),
        (
            "Error",
            "the request is not valid: missing field `messages`"
        )
    );
    let null = format(
        &configured(),
        br#"{"provider": "anthropic", "model": "m", "messages": null}"#,
        NOW,
        7,
    );
    let (name, _, message) = error_of(&null);
    assert_eq!(
        (name.as_str(), message.as_str()),
        ("InvalidMessageError", "messages must be an array, got null")
    );
    let typo = format(
        &configured(),
        br#"{"provider": "anthropic", "model": "m", "messages": [], "maxTokens": "9"}"#,
        NOW,
        7,
    );
    assert_eq!(
        error_of(&typo).2,
        "the request is not valid: `maxTokens` must be a non-negative integer below 4294967296, \
         got string"
    );
}

/// Drives `machine` with `replies` (status, body) as the provider's answers; returns the
/// outcome, the events and the bodies sent.
fn drive(
    mut machine: RunMachine,
    replies: &[(u16, &str)],
) -> (RunOutcome, Vec<AgentEvent>, Vec<String>) {
    let mut replies = replies.iter();
    let mut events = Vec::new();
    let mut sent = Vec::new();
    for _ in 0..100 {
        let step = match machine.poll(NOW) {
            Poll::Step(step) => step,
            Poll::Finished(outcome) => return (*outcome, events, sent),
            other => panic!("a step while nothing is due, got {other:?}"),
        };
        let answer = match step {
            Step::Send(outgoing) => {
                sent.push((*outgoing.body).clone());
                let (status, body) = replies.next().expect("a scripted reply");
                Answer::Http(CallAnswer::Response(HttpResponse {
                    status: *status,
                    headers: vec![("content-type".into(), "application/json".into())],
                    body: body.as_bytes().to_vec(),
                }))
            }
            Step::Event(event) => {
                events.push(event);
                continue;
            }
            other => panic!("the gateway's run asked for {other:?}"),
        };
        machine.handle(answer).expect("the answer asked for");
    }
    panic!("the run did not end");
}

const ANSWER: &str = r#"{"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
    "content": [{"type": "text", "text": "Hello."}], "stop_reason": "end_turn",
    "usage": {"input_tokens": 3, "output_tokens": 2}}"#;

#[test]
fn a_run_answers_omas_result() {
    let settings = configured();
    for body in [
        json!({"provider": "anthropic", "model": "claude-x", "prompt": "hi", "maxTurns": 2}),
        json!({"provider": "anthropic", "model": "claude-x",
               "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}),
    ] {
        let machine = start_run(&settings, body.to_string().as_bytes(), false, 1, &parent())
            .expect("starts")
            .machine;
        let (outcome, _, sent) = drive(machine, &[(200, ANSWER)]);
        assert_eq!(sent.len(), 1);
        assert!(sent[0].contains("\"hi\""), "{}", sent[0]);
        let reply = run_reply(&outcome, true, 10, settings.deadline_ms);
        assert_eq!(reply.status, 200);
        let value = body_json(&reply);
        assert_eq!(value["success"], json!(true));
        assert_eq!(value["output"], "Hello.");
        assert_eq!(value["tokenUsage"]["output_tokens"], 2);
    }
}

#[test]
fn a_provider_failure_is_a_result_and_never_shows_the_key() {
    let settings = configured();
    let body = json!({"provider": "anthropic", "model": "claude-x", "prompt": "hi"}).to_string();
    let machine = start_run(&settings, body.as_bytes(), false, 1, &parent())
        .expect("starts")
        .machine;
    let error_body = format!(r#"{{"type": "error", "error": {{"message": "bad key {KEY}"}}}}"#);
    let (outcome, _, _) = drive(machine, &[(401, &error_body)]);
    let reply = run_reply(&outcome, true, 10, settings.deadline_ms);
    assert_eq!(reply.status, 200, "a completed, failed run");
    assert_eq!(body_json(&reply)["success"], json!(false));
    assert!(!reply.body.contains(KEY), "{}", reply.body);
}

#[test]
fn invalid_run_input_is_refused_before_anything_is_sent() {
    let settings = configured();
    for (body, status) in [
        (json!({"provider": "anthropic", "model": "m"}), 422),
        (
            json!({"provider": "anthropic", "model": "m", "prompt": "a", "messages": []}),
            422,
        ),
        (
            json!({"provider": "anthropic", "model": "m", "messages": [{"role": "user", "content": "x"}]}),
            422,
        ),
        (
            json!({"provider": "anthropic", "model": "m", "prompt": "a", "tools": []}),
            422,
        ),
        (
            json!({"provider": "openai", "model": "m", "prompt": "a"}),
            403,
        ),
    ] {
        let refused = start_run(&settings, body.to_string().as_bytes(), false, 1, &parent())
            .err()
            .unwrap_or_else(|| panic!("{body} was accepted"));
        assert_eq!(refused.status, status, "{body}: {}", refused.body);
    }
    // Unsupported content is found when the first request is formatted: nothing is sent.
    let video = json!({"provider": "anthropic", "model": "m", "messages": [{"role": "user",
        "content": [{"type": "video", "source": {"type": "url", "media_type": "video/mp4",
                    "url": "https://v.example/a.mp4"}}]}]});
    let machine = start_run(&settings, video.to_string().as_bytes(), true, 1, &parent())
        .expect("starts")
        .machine;
    let (outcome, _, sent) = drive(machine, &[]);
    assert!(sent.is_empty());
    let reply = refusal(&outcome, false).expect("refused");
    assert_eq!(reply.status, 422);
    assert_eq!(error_of(&reply).0, "UnsupportedContentBlockError");
}

#[test]
fn an_allowlist_refuses_other_origins_with_403() {
    let settings = settings(&[
        ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9"),
        ("OMA_GATEWAY_EGRESS", "https://api.anthropic.com"),
    ]);
    let body = json!({"provider": "anthropic", "model": "m", "prompt": "a"}).to_string();
    let machine = start_run(&settings, body.as_bytes(), false, 1, &parent())
        .expect("starts")
        .machine;
    let (outcome, _, sent) = drive(machine, &[]);
    assert!(sent.is_empty());
    let reply = run_reply(&outcome, false, 1, settings.deadline_ms);
    assert_eq!(reply.status, 403);
    assert_eq!(error_of(&reply).0, "EgressPolicyError");
}

#[test]
fn the_deadline_is_a_504_only_once_it_passed() {
    let outcome = RunOutcome::failed(
        &Error::Timeout {
            provider: "anthropic".into(),
            timeout_ms: 100,
        },
        1,
        oma_core::agent::outcome::classify(
            &Error::Timeout {
                provider: "anthropic".into(),
                timeout_ms: 100,
            },
            false,
            Some("anthropic"),
        ),
    );
    assert_eq!(run_reply(&outcome, true, 5000, 5000).status, 504);
    assert_eq!(
        run_reply(&outcome, true, 100, 5000).status,
        200,
        "a provider call's own timeout is a completed, failed run"
    );
}

#[test]
fn stream_events_are_server_sent_events() {
    assert_eq!(
        sse_event(&AgentEvent::TextDelta("a\nb".into())),
        "event: text_delta\ndata: \"a\\nb\"\n\n"
    );
    let settings = configured();
    let body = json!({"provider": "anthropic", "model": "claude-x", "prompt": "hi"}).to_string();
    let machine = start_run(&settings, body.as_bytes(), false, 1, &parent())
        .expect("starts")
        .machine;
    let (outcome, events, _) = drive(machine, &[(200, ANSWER)]);
    let text: Vec<String> = events.iter().map(sse_event).collect();
    assert_eq!(text, vec!["event: text\ndata: \"Hello.\"\n\n".to_string()]);
    let done = sse_event(&AgentEvent::Done(outcome));
    let data = done
        .strip_prefix("event: done\ndata: ")
        .and_then(|rest| rest.strip_suffix("\n\n"))
        .expect("one data line");
    let value: Value = serde_json::from_str(data).expect("JSON");
    assert_eq!(value["output"], "Hello.");
}

/// A body under the byte limit with more values than a JSON text may hold (a million empty
/// text blocks) is a `413` naming the limit, before it is parsed.
#[test]
fn a_body_of_a_million_blocks_is_too_large() {
    let blocks = vec![r#"{"type":"text","text":""}"#; 1_000_000].join(",");
    let body = format!(r#"[{{"role":"user","content":[{blocks}]}}]"#);
    for reply in [
        validate(&configured(), body.as_bytes()),
        format(&configured(), body.as_bytes(), NOW, 7),
    ] {
        assert_eq!(reply.status, 413, "{}", reply.body);
        let (name, code, message) = error_of(&reply);
        assert_eq!(
            (name.as_str(), code.as_deref()),
            ("Error", Some("PAYLOAD_TOO_LARGE"))
        );
        assert!(message.contains("the limit"), "{message}");
    }
    // Under the limits, a conversation past the block limit is a typed 422.
    let blocks = vec![r#"{"type":"text","text":""}"#; 20_000].join(",");
    let body = format!(r#"[{{"role":"user","content":[{blocks}]}}]"#);
    let reply = validate(&configured(), body.as_bytes());
    assert_eq!(reply.status, 422, "{}", reply.body);
    assert!(error_of(&reply)
        .2
        .contains("more than the 16384 a message may hold"));
}

/// A shape error names the fields it was given: a client that sends a configured key as a field
/// name gets `[redacted]` back, never the key (found by the `gateway_requests` fuzz target).
#[test]
fn a_key_given_as_a_field_name_is_not_echoed() {
    let settings = configured();
    let field = format!("prompt{KEY}x");
    let body = json!({"provider": "anthropic", "model": "m", field: "hi"}).to_string();
    let Err(reply) = start_run(&settings, body.as_bytes(), false, 1, &parent()) else {
        panic!("an unknown field is refused");
    };
    assert_eq!(reply.status, 422);
    assert!(!reply.body.contains(KEY), "{}", reply.body);
    assert!(reply.body.contains("[redacted]"), "{}", reply.body);
    let reply = format(&settings, body.as_bytes(), 0, 1);
    assert_eq!(reply.status, 422);
    assert!(!reply.body.contains(KEY), "{}", reply.body);
}

/// Every refusal of a body is redacted, whatever field quotes the key: a provider name (the
/// run's 422 for an unknown provider, the format's), a block type in `/v1/validate`.
#[test]
fn a_key_quoted_anywhere_in_a_refusal_is_redacted() {
    let settings = configured();
    let provider = format!("g{KEY}emini");
    let body = json!({"provider": provider, "model": "m", "prompt": "hi"}).to_string();
    let Err(reply) = start_run(&settings, body.as_bytes(), false, 1, &parent()) else {
        panic!("an unknown provider is refused");
    };
    assert_eq!(reply.status, 422, "{}", reply.body);
    assert!(!reply.body.contains(KEY), "{}", reply.body);
    assert!(reply.body.contains("[redacted]"), "{}", reply.body);
    let messages = json!([{"role": "user", "content": "hi"}]);
    let body = json!({"provider": provider, "model": "m", "messages": messages}).to_string();
    let reply = format(&settings, body.as_bytes(), 0, 1);
    assert_eq!(reply.status, 422, "{}", reply.body);
    assert!(!reply.body.contains(KEY), "{}", reply.body);
    // A formatted request shows no configured key either, whichever provider it is for.
    let settings = self::settings(&[
        ("ANTHROPIC_API_KEY", KEY),
        ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1"),
    ]);
    let messages = json!([{"role": "user", "content": [{"type": "text", "text": "hi"}]}]);
    let body = json!({"provider": "openai", "model": "m", "messages": messages}).to_string();
    assert_eq!(format(&settings, body.as_bytes(), 0, 1).status, 200);
    let body = json!({"provider": "openai", "model": KEY, "messages": messages}).to_string();
    let reply = format(&settings, body.as_bytes(), 0, 1);
    assert_eq!(reply.status, 422, "{}", reply.body);
    assert!(!reply.body.contains(KEY), "{}", reply.body);
    let body = json!([{"role": "user", "content": [{"type": KEY}]}]).to_string();
    let reply = validate(&settings, body.as_bytes());
    assert_eq!(reply.status, 422, "{}", reply.body);
    assert!(reply.body.contains("[redacted]"), "{}", reply.body);
    assert!(!reply.body.contains(KEY), "{}", reply.body);
}

/// `/v1/run` takes OMA's `loopDetection` and context options; a bad one is a `422` naming the
/// field, before anything is sent.
#[test]
fn a_run_takes_loop_detection_and_context_options() {
    let settings = configured();
    let history = json!([
        {"role": "user", "content": [{"type": "text", "text": "first"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Hello."}]},
        {"role": "user", "content": [{"type": "text", "text": "second"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Hello."}]},
        {"role": "user", "content": [{"type": "text", "text": "third"}]},
    ]);
    let body = json!({"provider": "anthropic", "model": "claude-x", "messages": history,
        "loopDetection": {"maxRepetitions": 3, "onLoopDetected": "terminate"},
        "contextStrategy": {"type": "sliding-window", "maxTurns": 1}});
    let machine = start_run(&settings, body.to_string().as_bytes(), false, 1, &parent())
        .expect("starts")
        .machine;
    let (outcome, events, sent) = drive(machine, &[(200, ANSWER)]);
    let sent: Value = serde_json::from_str(&sent[0]).expect("JSON");
    let messages = sent["messages"].as_array().expect("messages");
    assert_eq!(
        messages.len(),
        3,
        "the first user turn and the last pair: {messages:?}"
    );
    assert_eq!(
        messages[2]["content"][0]["text"],
        "[Earlier conversation history truncated — 2 turn(s) removed]\n\n"
    );
    let loop_event = events
        .iter()
        .map(sse_event)
        .find(|e| e.starts_with("event: loop_detected"))
        .expect("a loop_detected event");
    assert!(
        loop_event.contains("\"kind\":\"text_repetition\""),
        "{loop_event}"
    );
    let reply = run_reply(&outcome, true, 10, settings.deadline_ms);
    let value = body_json(&reply);
    assert_eq!(value["success"], json!(true));
    assert_eq!(value["loopDetected"], json!(true));
    for (extra, field) in [
        (
            json!({"loopDetection": {"maxRepetitions": 0}}),
            "loopDetection.maxRepetitions",
        ),
        (
            json!({"contextStrategy": {"type": "compact"}}),
            "contextStrategy.maxTokens",
        ),
        (
            json!({"contextStrategy": {"type": "custom"}}),
            "contextStrategy.type",
        ),
        (
            json!({"loopDetection": {"onLoopDetected": "callback"}}),
            "loopDetection.onLoopDetected",
        ),
        (json!({"compressToolResults": 5}), "compressToolResults"),
    ] {
        let mut body = json!({"provider": "anthropic", "model": "m", "prompt": "a"});
        body.as_object_mut()
            .expect("object")
            .extend(extra.as_object().expect("object").clone());
        let refused = start_run(&settings, body.to_string().as_bytes(), false, 1, &parent())
            .err()
            .unwrap_or_else(|| panic!("{body} was accepted"));
        assert_eq!(refused.status, 422, "{body}");
        assert!(refused.body.contains(field), "{body}: {}", refused.body);
    }
}

/// `/v1/run` takes OMA's `summarize` strategy: the summary request goes first, then the turn with
/// the summary before the recent turns; a `summarize` without `maxTokens` is a `422` naming it.
#[test]
fn a_run_takes_the_summarize_strategy() {
    let settings = configured();
    let history = json!([
        {"role": "user", "content": [{"type": "text", "text": "first"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "an old answer, long enough"}]},
        {"role": "user", "content": [{"type": "text", "text": "second"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Hello."}]},
        {"role": "user", "content": [{"type": "text", "text": "third"}]},
    ]);
    let body = json!({"provider": "anthropic", "model": "claude-x", "messages": history,
        "contextStrategy": {"type": "summarize", "maxTokens": 5}});
    let machine = start_run(&settings, body.to_string().as_bytes(), false, 1, &parent())
        .expect("starts")
        .machine;
    let (outcome, _, sent) = drive(machine, &[(200, ANSWER), (200, ANSWER)]);
    assert_eq!(sent.len(), 2);
    let summary: Value = serde_json::from_str(&sent[0]).expect("JSON");
    assert_eq!(summary["model"], "claude-x");
    assert!(summary["messages"][0]["content"][0]["text"]
        .as_str()
        .is_some_and(|t| t.starts_with("Summarize the following conversation history")));
    let turn: Value = serde_json::from_str(&sent[1]).expect("JSON");
    let messages = turn["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 3, "{messages:?}");
    assert!(messages[2]["content"][0]["text"]
        .as_str()
        .is_some_and(|t| t.starts_with("[Conversation summary]\n")));
    let reply = run_reply(&outcome, false, 10, settings.deadline_ms);
    assert_eq!(body_json(&reply)["success"], json!(true));
    let body = json!({"provider": "anthropic", "model": "m", "prompt": "a",
        "contextStrategy": {"type": "summarize"}});
    let refused = start_run(&settings, body.to_string().as_bytes(), false, 1, &parent())
        .err()
        .unwrap_or_else(|| panic!("a summarize without maxTokens was accepted"));
    assert_eq!(refused.status, 422);
    assert!(
        refused.body.contains("contextStrategy.maxTokens"),
        "{}",
        refused.body
    );
}

/// `"trace": true` returns OMA's trace events with the result (`llm_call`, then `agent`); with
/// a stream asked for, it is refused before anything is sent.
#[test]
fn a_traced_run_returns_its_trace_events() {
    let settings = configured();
    let body = json!({"provider": "anthropic", "model": "claude-x", "prompt": "hi", "trace": true});
    let refused =
        start_run(&settings, body.to_string().as_bytes(), true, 1, &parent()).expect_err("422");
    assert_eq!(refused.status, 422);
    assert!(refused.body.contains("`trace`"), "{}", refused.body);
    let records = json!({"provider": "anthropic", "model": "claude-x", "prompt": "hi",
                         "records": true});
    let refused = start_run(
        &settings,
        records.to_string().as_bytes(),
        true,
        1,
        &parent(),
    )
    .expect_err("422");
    assert_eq!(refused.status, 422);
    assert!(refused.body.contains("`records`"), "{}", refused.body);
    let not_a_flag = json!({"provider": "anthropic", "model": "claude-x", "prompt": "hi",
                            "records": "yes"});
    let refused = start_run(
        &settings,
        not_a_flag.to_string().as_bytes(),
        false,
        1,
        &parent(),
    )
    .expect_err("422");
    assert!(refused.body.contains("records"), "{}", refused.body);
    let mut machine = start_run(&settings, body.to_string().as_bytes(), false, 1, &parent())
        .expect("starts")
        .machine;
    let mut traces = Vec::new();
    let mut now = 1_000;
    let outcome = loop {
        now += 5;
        let step = match machine.poll(now) {
            Poll::Step(step) => step,
            Poll::Finished(outcome) => break *outcome,
            other => panic!("{other:?}"),
        };
        match step {
            Step::Trace(event) => traces.push(*event),
            Step::Send(_) => machine
                .handle(Answer::Http(CallAnswer::Response(HttpResponse {
                    status: 200,
                    headers: vec![("content-type".into(), "application/json".into())],
                    body: ANSWER.as_bytes().to_vec(),
                })))
                .expect("asked for"),
            Step::Event(_) => {}
            other => panic!("{other:?}"),
        }
    };
    let reply = with_trace(run_reply(&outcome, true, 10, settings.deadline_ms), &traces);
    let value = body_json(&reply);
    assert_eq!(value["success"], json!(true));
    let kinds: Vec<&Value> = value["trace"]
        .as_array()
        .expect("trace")
        .iter()
        .map(|e| &e["type"])
        .collect();
    assert_eq!(kinds, [&json!("llm_call"), &json!("agent")]);
    assert_eq!(value["trace"][0]["parentId"], value["trace"][1]["spanId"]);
    assert_eq!(value["trace"][0]["tokens"]["output_tokens"], 2);
    // Untraced, no `trace`.
    let plain = json!({"provider": "anthropic", "model": "claude-x", "prompt": "hi"}).to_string();
    let machine = start_run(&settings, plain.as_bytes(), false, 1, &parent())
        .expect("starts")
        .machine;
    let (outcome, _, _) = drive(machine, &[(200, ANSWER)]);
    assert!(
        body_json(&run_reply(&outcome, true, 10, settings.deadline_ms))
            .get("trace")
            .is_none()
    );
}

/// `/v1/run` takes OMA's `outputSchema` as a JSON Schema: the instruction in the system prompt,
/// one retry with OMA's feedback, `structured` in the result; a schema that is no schema is a
/// `422` naming it, before anything is sent.
#[test]
fn a_run_takes_an_output_schema() {
    let settings = configured();
    let body = json!({"provider": "anthropic", "model": "claude-x", "prompt": "Rate it.",
        "outputSchema": {"type": "object", "properties": {"mood": {"type": "string"}},
                         "required": ["mood"]}});
    let machine = start_run(&settings, body.to_string().as_bytes(), false, 1, &parent())
        .expect("starts")
        .machine;
    let json_answer = ANSWER.replace("\"Hello.\"", r#""{\"mood\": \"good\"}""#);
    let (outcome, _events, sent) = drive(machine, &[(200, ANSWER), (200, &json_answer)]);
    assert_eq!(sent.len(), 2);
    let first: Value = serde_json::from_str(&sent[0]).expect("JSON");
    assert!(
        first["system"]
            .as_str()
            .is_some_and(|s| s.starts_with("\n## Output Format (REQUIRED)\n")),
        "{first}"
    );
    let retry: Value = serde_json::from_str(&sent[1]).expect("JSON");
    assert!(retry["messages"][2]["content"][0]["text"]
        .as_str()
        .is_some_and(|t| t.contains("Raw output begins with: \"Hello.\"")));
    let value = body_json(&run_reply(&outcome, true, 10, settings.deadline_ms));
    assert_eq!(value["success"], json!(true));
    assert_eq!(value["structured"], json!({"mood": "good"}));
    for schema in [json!("object"), json!({"type": "text"})] {
        let body =
            json!({"provider": "anthropic", "model": "m", "prompt": "a", "outputSchema": schema});
        let refused = start_run(&settings, body.to_string().as_bytes(), false, 1, &parent())
            .err()
            .unwrap_or_else(|| panic!("{body} was accepted"));
        assert_eq!(refused.status, 422, "{body}");
        assert!(refused.body.contains("outputSchema"), "{}", refused.body);
    }
}
