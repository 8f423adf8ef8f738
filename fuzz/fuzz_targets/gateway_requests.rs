//! The gateway's request machine under any request: a selector byte picks the route, the method,
//! the token, the settings (a small body limit, an egress allowlist, a limited key counted on a
//! store) and the header values; the rest is the body. The machine is stepped to its end with
//! the body given, a canned provider answer to every send, the store's counts and every write
//! taken. Nothing panics; the request ends within a bounded number of steps with one answer (a
//! whole reply or a stream), every reply has a listed status and a JSON body, every error the
//! gateway's, OpenAI's or Anthropic's shape, and no step shows the configured key.
#![no_main]

use libfuzzer_sys::fuzz_target;
use oma_core::http::call::CallAnswer;
use oma_core::http::HttpResponse;
use oma_gateway_rules::request::{Input, Poll, RequestHead, RequestMachine, Step};
use oma_gateway_rules::{Reply, Settings};

const ANSWER: &[u8] = br#"{"id":"m","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}"#;
const SECRET: &str = "sk-fuzz-SECRET-1234";
const PATHS: [&str; 8] = [
    "/healthz",
    "/v1/validate",
    "/v1/format",
    "/v1/run",
    "/v1/run?x",
    "/nope",
    "/v1/chat/completions",
    "/v1/messages",
];
const STATUSES: [u16; 13] = [200, 400, 401, 403, 404, 405, 408, 413, 422, 429, 500, 502, 504];

fn check(reply: &Reply) {
    assert!(STATUSES.contains(&reply.status), "status {}", reply.status);
    let body: serde_json::Value = serde_json::from_str(&reply.body).expect("a JSON body");
    if reply.status != 200 {
        let error = &body["error"];
        assert!(error["message"].is_string(), "{body}");
        // The gateway's own shape, OpenAI's (`type`, `param`, `code`) or Anthropic's (`type`).
        assert!(
            (error["name"].is_string() && error["retryable"].is_boolean())
                || (error["type"].is_string() && error.get("param").is_some())
                || (body["type"] == "error" && error["type"].is_string()),
            "{body}"
        );
    }
    assert!(!reply.body.contains(SECRET), "{}", reply.body);
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let mut vars = vec![
        ("ANTHROPIC_API_KEY".to_string(), SECRET.to_string()),
        (
            "ANTHROPIC_BASE_URL".to_string(),
            "http://127.0.0.1:9".to_string(),
        ),
        (
            "OPENAI_BASE_URL".to_string(),
            "http://127.0.0.1:9/v1".to_string(),
        ),
    ];
    if selector & 8 != 0 {
        vars.push(("OMA_GATEWAY_TOKEN".into(), "t0ken".into()));
        vars.push((
            "OMA_GATEWAY_KEYS".into(),
            r#"{"k3y": {"rpm": 2, "tpm": 5}}"#.into(),
        ));
        vars.push(("OMA_GATEWAY_LIMITS_BUCKET".into(), "LIMITS".into()));
    }
    if selector & 16 != 0 {
        vars.push(("OMA_GATEWAY_MAX_BODY_BYTES".into(), "64".into()));
    }
    if selector & 32 != 0 {
        vars.push((
            "OMA_GATEWAY_EGRESS".into(),
            "https://api.anthropic.com".into(),
        ));
    }
    let settings = Settings::from_vars(vars).expect("valid settings");
    let mut headers = vec![("content-length".to_owned(), body.len().to_string())];
    if selector & 128 != 0 {
        let token = if selector & 1 != 0 { "k3y" } else { "t0ken" };
        headers.push(("authorization".to_owned(), format!("Bearer {token}")));
    }
    if selector & 1 != 0 {
        headers.push(("accept".to_owned(), "text/event-stream".to_owned()));
    }
    let head = RequestHead {
        method: if selector & 64 != 0 { "GET" } else { "POST" }.into(),
        path: PATHS[usize::from(selector & 7) % PATHS.len()].into(),
        headers,
    };
    let mut machine = RequestMachine::new(Ok(settings), head, 1_796_036_400_000, 7);
    let mut answered = false;
    let mut counts = std::collections::HashMap::<String, u64>::new();
    for tick in 0..256 {
        let step = match machine.poll(1_796_036_400_000 + tick) {
            Poll::Step(step) => step,
            Poll::Finished(_) => {
                assert!(answered, "finished without an answer");
                return;
            }
            Poll::Waiting(at) => panic!("waiting ({at:?}) with every answer given"),
        };
        let input = match step {
            Step::ReadBody(_) => Input::Body(body.to_vec()),
            Step::Count(ops) => Input::Counted(Ok(ops
                .add
                .iter()
                .map(|(name, n)| {
                    let count = counts.entry(name.clone()).or_default();
                    *count += n;
                    *count
                })
                .collect())),
            Step::Forget(_) | Step::Close => continue,
            Step::Respond(reply) => {
                assert!(!answered, "answered twice");
                answered = true;
                check(&reply);
                continue;
            }
            Step::Open => {
                assert!(!answered, "a stream after an answer");
                answered = true;
                Input::Written(true)
            }
            Step::Write(text) => {
                assert!(!text.contains(SECRET), "{text}");
                Input::Written(true)
            }
            Step::Send(outgoing) => {
                assert!(!outgoing.url.contains(SECRET), "{}", outgoing.url);
                Input::Http(CallAnswer::Response(HttpResponse {
                    status: 200,
                    headers: Vec::new(),
                    body: ANSWER.to_vec(),
                }))
            }
            Step::Receive => Input::Http(CallAnswer::End),
            Step::Wait(_) => Input::Http(CallAnswer::Waited),
            Step::Log(line) => {
                assert!(line.ends_with('\n') && !line.contains(SECRET), "{line}");
                continue;
            }
        };
        machine.handle(input).expect("the input it asked for");
    }
    panic!("the request did not end");
});
