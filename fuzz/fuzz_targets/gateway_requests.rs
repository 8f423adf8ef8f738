//! The gateway's pure half under any request: a selector byte picks the route, the settings
//! (token, body limit, egress) and the header values; the rest is the body. Nothing panics;
//! every refusal is a JSON error with the gateway's shape and a status the contract lists;
//! a run that starts is driven with a canned answer to its end, and the reply is well formed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use oma_core::agent::machine::{Answer, Poll, Step};
use oma_core::http::call::CallAnswer;
use oma_core::http::HttpResponse;
use oma_gateway_rules::{self as gateway, Head, Reply, Route, Settings};

const ANSWER: &[u8] = br#"{"id":"m","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}"#;
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
const STATUSES: [u16; 11] = [200, 400, 401, 403, 404, 405, 408, 413, 422, 500, 504];

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
    assert!(
        !reply.body.contains("sk-fuzz-SECRET-1234"),
        "{}",
        reply.body
    );
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let mut vars = vec![
        (
            "ANTHROPIC_API_KEY".to_string(),
            "sk-fuzz-SECRET-1234".to_string(),
        ),
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
    let head = Head {
        method: if selector & 64 != 0 { "GET" } else { "POST" },
        path: PATHS[usize::from(selector & 7) % PATHS.len()],
        authorization: (selector & 128 != 0).then_some("Bearer t0ken"),
        api_key: None,
        content_length: Some(body.len() as u64),
    };
    let route = match gateway::route(&settings, &head) {
        Ok(route) => route,
        Err(reply) => return check(&reply),
    };
    match route {
        Route::Health => check(&gateway::health()),
        Route::Models => check(&gateway::openai::models(&settings)),
        // The chat routes: what they refuse before anything is sent, in their error shapes.
        Route::ChatCompletions | Route::Messages => {
            let verdict = gateway::on_body(&settings, route, body, false, 1_796_036_400_000, 7);
            if let gateway::BodyVerdict::Reply(reply) = verdict {
                check(&reply)
            }
        }
        Route::Validate => check(&gateway::validate(&settings, body)),
        Route::Format => check(&gateway::format(&settings, body, 1_796_036_400_000, 7)),
        Route::Run => {
            let mut machine = match gateway::start_run(&settings, body, selector & 1 != 0, 7) {
                Ok(started) => started.machine,
                Err(reply) => return check(&reply),
            };
            let mut sent = false;
            for _ in 0..64 {
                let step = match machine.poll(1_796_036_400_000) {
                    Poll::Step(step) => step,
                    Poll::Finished(outcome) => {
                        return check(&gateway::run_reply(&outcome, sent, 0, settings.deadline_ms))
                    }
                    other => panic!("the run waits for an answer it did not ask for: {other:?}"),
                };
                let answer = match step {
                    Step::Event(event) => {
                        assert!(gateway::sse_event(&event).ends_with("\n\n"));
                        continue;
                    }
                    Step::Send(_) => {
                        sent = true;
                        Answer::Http(CallAnswer::Response(HttpResponse {
                            status: 200,
                            headers: Vec::new(),
                            body: ANSWER.to_vec(),
                        }))
                    }
                    Step::Receive => Answer::Http(CallAnswer::End),
                    Step::Wait(_) => Answer::Http(CallAnswer::Waited),
                    other => panic!("the gateway's run asked for {other:?}"),
                };
                machine.handle(answer).expect("the answer it asked for");
            }
            panic!("the run did not end");
        }
    }
});
