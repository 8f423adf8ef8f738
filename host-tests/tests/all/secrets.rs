//! One distinctive key through every public path of both worlds: a provider that echoes it in
//! an error body, a hook that is shown the configuration, a tool, progress events, evaluation
//! cases, streams, single provider calls, the codec, and the driver's JSON results. The key may
//! appear in no error, event, record, progress datum, output or `Debug` text, neither as it is
//! nor base64-encoded (padded, base64url unpadded) nor percent-encoded: the provider echoes it
//! in all four forms.

use oma_host_tests::Shared;
use std::sync::{Arc, Mutex};

use oma_host_tests::driver_types::{
    Answer, Payloads, Poll, Response, RunReport, SessionOptions, Step,
};
use oma_host_tests::{
    agent_config, call_options, chat_request, endpoint, BeforeRunAnswer, BeforeRunResult,
    CannedResponse, CaptureOutbound, EvaluationOptions, GuestOptions, Harness, LlmMessage,
    RecordedRequest, Role, RunAgentOptions, RunInput, ScriptedHost, StorePayloads, ToolOutcome,
    ToolResultContent,
};
use serde_json::json;

use crate::common::text;
use crate::worlds::{AnyGuest, World};

const KEY: &str = "sk-sweep-7Qz9/DISTINCTIVE+a1b2c3~~~";

/// The forms of [`KEY`] a provider echoes: as it is, base64 (padded), base64url (unpadded) and
/// percent-encoded.
fn echoed_forms() -> [String; 4] {
    use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
    use base64::Engine;
    [
        KEY.to_owned(),
        STANDARD.encode(KEY),
        URL_SAFE_NO_PAD.encode(KEY),
        "sk-sweep-7Qz9%2FDISTINCTIVE%2Ba1b2c3~~~".to_owned(),
    ]
}

/// An error body that echoes the key in every form.
fn echo_message() -> String {
    let [plain, standard, url_safe, percent] = echoed_forms();
    format!(
        "invalid x-api-key {plain} (base64 {standard}, base64url {url_safe}, in the query \
         ?key={percent})"
    )
}

/// A provider that calls a tool once, then fails with a 401 whose body echoes the key.
fn echoing() -> CaptureOutbound {
    let count = Arc::new(Mutex::new(0));
    CaptureOutbound::new(move |_request: &RecordedRequest| {
        let mut n = count.lock().expect("not poisoned");
        *n += 1;
        let body = if *n == 1 {
            json!({
                "id": "m", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
                "content": [{"type": "tool_use", "id": "t1", "name": "lookup", "input": {}}],
                "stop_reason": "tool_use", "usage": {"input_tokens": 1, "output_tokens": 1}
            })
        } else {
            json!({"type": "error", "error": {"type": "authentication_error",
                   "message": echo_message()}})
        };
        CannedResponse {
            status: if *n == 1 { 200 } else { 401 },
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.to_string().into_bytes(),
        }
    })
}

fn assert_clean(what: &str, text: &str) {
    for form in echoed_forms() {
        assert!(
            !text.contains(&form),
            "the key leaked through {what} as {form}: {text}"
        );
    }
    assert!(
        !text.contains("DISTINCTIVE"),
        "part of the key leaked through {what}: {text}"
    );
}

async fn sweep(world: World) {
    let host = ScriptedHost::new()
        .with_hook(|context| {
            BeforeRunAnswer::Typed(BeforeRunResult {
                prompt: context.prompt.clone(),
                messages: None,
            })
        })
        .with_tool(|_| ToolOutcome {
            content: ToolResultContent::Text("found".into()),
            is_error: None,
            gate: None,
        });
    let log = host.log();
    let mut guest = AnyGuest::instantiate(
        world,
        GuestOptions {
            hooks: Some(Box::new(echoing())),
            host: Some(Box::new(host)),
            ..Default::default()
        },
    )
    .await;
    let mut config = agent_config(
        "sweeper",
        "claude-sonnet-4-6",
        endpoint("anthropic", Some("https://api.anthropic.com"), Some(KEY)),
    );
    config.before_run = true;
    let agent = guest.create_agent(&config).await.unwrap().unwrap();
    let result = guest
        .run(&agent, &RunInput::Text("go".into()))
        .await
        .unwrap()
        .unwrap();
    assert!(!result.success);
    assert_clean("a run result", &format!("{result:?}"));
    let stream = guest
        .stream(&agent, &RunInput::Text("go".into()))
        .await
        .unwrap()
        .unwrap();
    let events = guest.collect_agent_stream(stream).await.unwrap();
    assert_clean("stream events", &format!("{events:?}"));
    let options = RunAgentOptions {
        progress: true,
        evaluation: Some(EvaluationOptions {
            store_payloads: StorePayloads::Full,
            sample_rate: 1.0,
        }),
    };
    let result = guest
        .run_agent(&config, &RunInput::Text("go".into()), &options)
        .await
        .unwrap()
        .unwrap();
    assert_clean("a run-agent result", &format!("{result:?}"));
    let log = log.lock();
    assert!(!log.before_run.is_empty() && !log.progress.is_empty());
    assert!(!log.evaluations.is_empty() && !log.tool_calls.is_empty());
    assert_clean("the host's log", &format!("{:?}", *log));
}

#[tokio::test]
async fn no_path_of_the_component_world_shows_the_key() {
    sweep(World::Component).await;
    // Single provider calls, the codec's errors.
    let mut guest = Harness::shared()
        .unwrap()
        .instantiate_with(GuestOptions {
            hooks: Some(Box::new(echoing())),
            ..Default::default()
        })
        .await
        .unwrap();
    let hi = LlmMessage {
        role: Role::User,
        content: vec![text("hi")],
    };
    let ep = endpoint("anthropic", Some("https://api.anthropic.com"), Some(KEY));
    let request = chat_request("claude-sonnet-4-6", vec![hi]);
    let first = guest.chat(&request, &ep, &call_options()).await.unwrap();
    assert_clean("a chat response", &format!("{first:?}"));
    let error = guest
        .chat(&request, &ep, &call_options())
        .await
        .unwrap()
        .expect_err("a 401");
    assert_clean("a chat error", &format!("{error:?}"));
    let unknown = endpoint("nowhere", None, Some(KEY));
    let error = guest
        .format_request(&request, &unknown)
        .await
        .unwrap()
        .expect_err("an unknown provider");
    assert_clean("a codec error", &format!("{error:?}"));
}

#[tokio::test]
async fn no_path_of_the_portable_world_shows_the_key() {
    sweep(World::Driver).await;
    // A JSON session: the hook context, the request's error and the result as OMA JSON.
    let mut guest = crate::common::driver_guest().await;
    let config = json!({"name": "s", "model": "m", "provider": "anthropic", "apiKey": KEY,
                        "beforeRun": true})
    .to_string();
    let agent = guest.create_agent_json(&config).await.unwrap().unwrap();
    let options = SessionOptions {
        payloads: Payloads::Json,
        seed: 3,
        trace: None,
        records: None,
    };
    let (store, bindings) = guest.parts();
    let session = bindings
        .oma_agent_driver()
        .agent()
        .call_run_json(store, agent.resource(), r#""go""#, &options)
        .await
        .unwrap()
        .unwrap();
    for _ in 0..50 {
        let step = guest.next_step(session).await.unwrap().unwrap();
        let shown = format!("{step:?}");
        let answer = match step {
            Poll::Step(Step::BeforeRun(_)) => {
                assert_clean("the hook's context", &shown);
                Answer::Hook(BeforeRunAnswer::Json(r#"{"prompt": "go"}"#.into()))
            }
            // The request itself carries the key in its headers, as it must.
            Poll::Step(Step::Send(_)) => Answer::Response(Response {
                status: 401,
                headers: Vec::new(),
                body: json!({"type": "error", "error": {"type": "x", "message": echo_message()}})
                    .to_string(),
            }),
            Poll::Finished(RunReport::Json(result)) => {
                assert_clean("the JSON result", &result);
                return;
            }
            _ => {
                assert_clean("a step", &shown);
                continue;
            }
        };
        guest.answer(session, &answer).await.unwrap().unwrap();
    }
    panic!("the session did not end");
}
