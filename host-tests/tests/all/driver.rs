//! The `portable` world's own contract (see `docs/driver.md`): it imports nothing, its sessions
//! take OMA JSON at every entry and give it back, and answers a session did not ask for are
//! refused without changing anything. (Every agent behaviour also runs through it in
//! `agent.rs`.)

use oma_host_tests::driver_types::{
    Answer, Due, HookContext, Payloads, Poll, Response, RunReport, SessionOptions, Step,
    ToolAnswerJson, TransportFailure, TransportFailureKind,
};
use oma_host_tests::Shared;
use oma_host_tests::{
    artifact, endpoint, instantiate_empty, BeforeRunAnswer, ChatRequest, DriverGuest, Harness,
    Role, WitError,
};
use serde_json::{json, Value};
use wasmtime::component::ResourceAny;

use crate::common::{driver_guest, text};

const KEY: &str = "sk-driver-SECRET-5150";

fn json_options() -> SessionOptions {
    SessionOptions {
        payloads: Payloads::Json,
        seed: 42,
        trace: None,
        records: None,
    }
}

fn config(extra: Value) -> String {
    let mut config = json!({
        "name": "researcher", "model": "claude-sonnet-4-6", "provider": "anthropic",
        "apiKey": KEY, "baseURL": "http://127.0.0.1:9"
    });
    if let (Some(config), Value::Object(extra)) = (config.as_object_mut(), extra) {
        config.extend(extra);
    }
    config.to_string()
}

fn anthropic(content: Value) -> String {
    json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
        "content": content, "stop_reason": "end_turn",
        "usage": {"input_tokens": 4, "output_tokens": 2}
    })
    .to_string()
}

fn ok(body: String) -> Answer {
    Answer::Response(Response {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        body,
    })
}

async fn run_json(
    guest: &mut DriverGuest,
    agent: ResourceAny,
    input: &str,
) -> Result<ResourceAny, WitError> {
    let (store, bindings) = guest.parts();
    bindings
        .oma_agent_driver()
        .agent()
        .call_run_json(store, agent, input, &json_options())
        .await
        .expect("no trap")
}

async fn prompt_json(
    guest: &mut DriverGuest,
    agent: ResourceAny,
    input: &str,
) -> Result<ResourceAny, WitError> {
    let (store, bindings) = guest.parts();
    bindings
        .oma_agent_driver()
        .agent()
        .call_prompt_json(store, agent, input, &json_options())
        .await
        .expect("no trap")
}

async fn history_json(guest: &mut DriverGuest, agent: ResourceAny) -> String {
    let (store, bindings) = guest.parts();
    bindings
        .oma_agent_driver()
        .agent()
        .call_get_history_json(store, agent)
        .await
        .expect("no trap")
}

async fn next(guest: &mut DriverGuest, session: ResourceAny) -> Result<Poll, WitError> {
    guest.next_step(session).await.expect("no trap")
}

async fn answer(
    guest: &mut DriverGuest,
    session: ResourceAny,
    answer: Answer,
) -> Result<(), WitError> {
    guest.answer(session, &answer).await.expect("no trap")
}

/// Steps until `Send`, delivering events on the way; returns the request's JSON body.
async fn until_send(guest: &mut DriverGuest, session: ResourceAny) -> Value {
    for _ in 0..100 {
        match next(guest, session).await.expect("a step") {
            Poll::Step(Step::Send(request)) => {
                assert!(
                    request.url.starts_with("http://127.0.0.1:9/"),
                    "{}",
                    request.url
                );
                return serde_json::from_str(&request.body).expect("a JSON body");
            }
            Poll::Step(Step::Event(_)) | Poll::Step(Step::Progress(_)) => {}
            other => panic!("expected a request, got {other:?}"),
        }
    }
    panic!("no request");
}

async fn until_done(guest: &mut DriverGuest, session: ResourceAny) -> Value {
    for _ in 0..100 {
        match next(guest, session).await.expect("a step") {
            Poll::Finished(RunReport::Json(result)) => {
                assert!(!result.contains(KEY), "the key leaked: {result}");
                return serde_json::from_str(&result).expect("OMA JSON");
            }
            Poll::Step(Step::Event(_))
            | Poll::Step(Step::Progress(_))
            | Poll::Step(Step::Evaluation(_)) => {}
            other => panic!("expected the result, got {other:?}"),
        }
    }
    panic!("no result");
}

#[tokio::test]
async fn the_portable_component_imports_nothing_and_instantiates_with_an_empty_linker() {
    let imports = instantiate_empty(artifact::PORTABLE)
        .await
        .expect("an empty linker is enough");
    assert!(imports.is_empty(), "imports: {imports:?}");
    // The component world, by contrast, needs its host.
    let imports = instantiate_empty(artifact::COMPONENT)
        .await
        .expect_err("the component world imports wasi and the host interface");
    assert!(format!("{imports:#}").contains("import"), "{imports:#}");
}

#[tokio::test]
async fn a_json_session_takes_and_gives_oma_json() {
    let mut guest = driver_guest().await;
    let agent = guest
        .create_agent_json(&config(json!({
            "beforeRun": true,
            "tools": [{"name": "lookup", "description": "d", "inputSchema": {"type": "object"}}]
        })))
        .await
        .unwrap()
        .expect("a valid configuration");
    let session = run_json(&mut guest, agent.resource(), r#""What is 2+2?""#)
        .await
        .expect("valid input");

    let Poll::Step(Step::BeforeRun(HookContext::Json(context))) =
        next(&mut guest, session).await.unwrap()
    else {
        panic!("expected the hook");
    };
    let context: Value = serde_json::from_str(&context).unwrap();
    assert_eq!(context["prompt"], "What is 2+2?");
    assert_eq!(context["agent"], "researcher");
    assert_eq!(context["config"]["tools"], json!(["lookup"]));
    assert!(!context.to_string().contains(KEY));
    answer(
        &mut guest,
        session,
        Answer::Hook(BeforeRunAnswer::Json(
            r#"{"prompt": "What is 2+2? Be brief."}"#.into(),
        )),
    )
    .await
    .expect("due");

    let body = until_send(&mut guest, session).await;
    assert_eq!(
        body["messages"][0]["content"][0]["text"],
        "What is 2+2? Be brief."
    );
    let call = json!([{"type": "tool_use", "id": "t1", "name": "lookup", "input": {"q": 2}}]);
    answer(&mut guest, session, ok(anthropic(call)))
        .await
        .expect("due");
    loop {
        match next(&mut guest, session).await.unwrap() {
            Poll::Step(Step::CallTool(call)) => {
                assert_eq!(call.input, r#"{"q":2}"#);
                break;
            }
            Poll::Step(Step::Event(_)) => {}
            other => panic!("expected the tool, got {other:?}"),
        }
    }
    let bad = Answer::ToolJson(ToolAnswerJson {
        id: "t1".into(),
        content: "{not json".into(),
        is_error: None,
        gate: None,
    });
    let error = answer(&mut guest, session, bad)
        .await
        .expect_err("not OMA JSON");
    assert_eq!(error.name, "InvalidMessageError");
    let parts = json!([{"type": "text", "text": "4"}]).to_string();
    let good = Answer::ToolJson(ToolAnswerJson {
        id: "t1".into(),
        content: parts,
        is_error: Some(false),
        gate: None,
    });
    answer(&mut guest, session, good)
        .await
        .expect("the same step, answered right");

    let body = until_send(&mut guest, session).await;
    assert_eq!(body["messages"][2]["content"][0]["content"][0]["text"], "4");
    // The tool said `isError: false`, and OMA sends it as it was said.
    assert_eq!(body["messages"][2]["content"][0]["is_error"], false);
    answer(
        &mut guest,
        session,
        ok(anthropic(json!([{"type": "text", "text": "4."}]))),
    )
    .await
    .expect("due");
    let result = until_done(&mut guest, session).await;
    assert_eq!(result["success"], true);
    assert_eq!(result["output"], "4.");
    assert_eq!(result["toolCalls"][0]["toolName"], "lookup");
    assert_eq!(
        result["tokenUsage"],
        json!({"input_tokens": 8, "output_tokens": 4})
    );
}

/// Without retry options the session follows Anthropic's default policy: a refused
/// connection is a wait of 0.375 to 0.5 s, then the same request again; the provider's code (its
/// `error.type`) reaches the JSON result's `errorInfo.code`, and a `retry-after` header is the
/// wait.
#[tokio::test]
async fn the_default_policy_and_the_providers_code_reach_the_session() {
    let mut guest = driver_guest().await;
    let agent = guest
        .create_agent_json(&config(json!({})))
        .await
        .unwrap()
        .unwrap();
    let session = run_json(&mut guest, agent.resource(), r#""hi""#)
        .await
        .unwrap();
    until_send(&mut guest, session).await;
    answer(
        &mut guest,
        session,
        Answer::Failure(TransportFailure {
            kind: TransportFailureKind::Refused,
            message: "connection refused".into(),
        }),
    )
    .await
    .expect("due");
    match next(&mut guest, session).await.expect("a step") {
        Poll::Step(Step::Wait(ms)) => assert!((375..=500).contains(&ms), "{ms}"),
        other => panic!("expected a wait, got {other:?}"),
    }
    answer(&mut guest, session, Answer::Waited)
        .await
        .expect("due");
    until_send(&mut guest, session).await;
    let overloaded = |retry_after: &str| {
        Answer::Response(Response {
            status: 529,
            headers: vec![
                ("content-type".into(), "application/json".into()),
                ("retry-after".into(), retry_after.into()),
            ],
            body: json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
                .to_string(),
        })
    };
    answer(&mut guest, session, overloaded("2"))
        .await
        .expect("due");
    match next(&mut guest, session).await.expect("a step") {
        Poll::Step(Step::Wait(ms)) => assert_eq!(ms, 2_000, "the provider's wait"),
        other => panic!("expected a wait, got {other:?}"),
    }
    answer(&mut guest, session, Answer::Waited)
        .await
        .expect("due");
    until_send(&mut guest, session).await;
    answer(&mut guest, session, overloaded("0"))
        .await
        .expect("due");
    let result = until_done(&mut guest, session).await;
    assert_eq!(result["success"], false, "three attempts: {result}");
    assert_eq!(result["errorInfo"]["code"], "overloaded_error", "{result}");
    assert_eq!(result["errorInfo"]["httpStatus"], 529);
    assert!(result["errorInfo"].get("type").is_none(), "OMA's keys only");
}

#[tokio::test]
async fn answers_that_were_not_asked_for_change_nothing() {
    let mut guest = driver_guest().await;
    // One attempt: the refused connection below ends the run (Anthropic's default policy
    // would retry it; `the_default_policy_and_the_providers_code_reach_the_session`).
    let agent = guest
        .create_agent_json(&config(json!({"call": {"maxRetries": 0}})))
        .await
        .unwrap()
        .unwrap();
    let session = run_json(&mut guest, agent.resource(), r#""hi""#)
        .await
        .unwrap();
    let early = answer(&mut guest, session, Answer::Waited).await;
    assert_eq!(
        early.expect_err("nothing asked").code.as_deref(),
        Some("SESSION_STATE")
    );
    until_send(&mut guest, session).await;
    // Asked again while the answer is due, the session says what it waits for: no error.
    let Poll::Waiting(waiting) = next(&mut guest, session)
        .await
        .expect("waiting is not an error")
    else {
        panic!("the send's answer is due");
    };
    assert_eq!(waiting.due, vec![Due::Http]);
    for wrong in [
        Answer::Waited,
        Answer::End,
        Answer::External(Ok("x".into())),
        Answer::Hook(BeforeRunAnswer::Failed("x".into())),
    ] {
        let error = answer(&mut guest, session, wrong)
            .await
            .expect_err("not due");
        assert_eq!(
            error.code.as_deref(),
            Some("SESSION_STATE"),
            "{}",
            error.message
        );
    }
    answer(
        &mut guest,
        session,
        Answer::Failure(TransportFailure {
            kind: TransportFailureKind::Refused,
            message: "connection refused".into(),
        }),
    )
    .await
    .expect("the step's own answer");
    let result = until_done(&mut guest, session).await;
    assert_eq!(result["success"], false);
    assert_eq!(result["output"], "connection refused");
    assert_eq!(result["errorInfo"]["kind"], "provider");
    let late = next(&mut guest, session)
        .await
        .expect_err("after the result");
    assert!(late.message.contains("over"), "{}", late.message);
    let late = answer(&mut guest, session, ok(anthropic(json!([]))))
        .await
        .expect_err("after the result");
    assert_eq!(late.name, "SessionStateError");
    // Its own kind, so a host tells a loop driven out of order from any other failure.
    assert_eq!(late.kind, oma_host_tests::ErrorKind::SessionState);
}

#[tokio::test]
async fn prompt_sessions_commit_only_when_done_and_outlive_their_agent() {
    let mut guest = driver_guest().await;
    let agent = guest
        .create_agent_json(&config(json!({})))
        .await
        .unwrap()
        .unwrap();
    // Dropped before `done`: history stays as it was.
    let blocks = json!([{"type": "text", "text": "first"}]).to_string();
    let session = prompt_json(&mut guest, agent.resource(), &blocks)
        .await
        .expect("valid blocks");
    until_send(&mut guest, session).await;
    let (store, _) = guest.parts();
    session.resource_drop_async(store).await.unwrap();
    assert_eq!(history_json(&mut guest, agent.resource()).await, "[]");

    // Completed: the turn and the reply are appended.
    let session = prompt_json(&mut guest, agent.resource(), r#""second""#)
        .await
        .unwrap();
    until_send(&mut guest, session).await;
    answer(
        &mut guest,
        session,
        ok(anthropic(json!([{"type": "text", "text": "noted"}]))),
    )
    .await
    .unwrap();
    assert_eq!(until_done(&mut guest, session).await["success"], true);
    let after: Value =
        serde_json::from_str(&history_json(&mut guest, agent.resource()).await).unwrap();
    assert_eq!(after.as_array().map(Vec::len), Some(2));
    assert_eq!(after[0]["content"][0]["text"], "second");

    // A session whose agent is dropped still runs to its result.
    let session = prompt_json(&mut guest, agent.resource(), r#""third""#)
        .await
        .unwrap();
    guest.drop_agent(agent).await.unwrap();
    until_send(&mut guest, session).await;
    answer(
        &mut guest,
        session,
        ok(anthropic(json!([{"type": "text", "text": "ok"}]))),
    )
    .await
    .unwrap();
    assert_eq!(until_done(&mut guest, session).await["output"], "ok");

    // Invalid input fails the call itself; a bad configuration fails creation.
    let error = guest
        .create_agent_json(r#"{"model": "m", "provider": "anthropic", "maxTurns": "ten"}"#)
        .await
        .unwrap()
        .expect_err("a string where a number belongs");
    assert_eq!(error.name, "Error");
    let fresh = guest
        .create_agent_json(&config(json!({})))
        .await
        .unwrap()
        .unwrap();
    let error = run_json(
        &mut guest,
        fresh.resource(),
        r#"[{"role": "user", "content": "x"}]"#,
    )
    .await
    .expect_err("OMA's guard");
    assert_eq!(
        error.message,
        "messages[0].content must be a ContentBlock[], got string"
    );
}

/// `run-json-parts`, or `prompt-json-parts` when `prompt`.
async fn json_parts(
    guest: &mut DriverGuest,
    agent: ResourceAny,
    input: String,
    strings: Vec<(String, String)>,
    prompt: bool,
) -> Result<ResourceAny, WitError> {
    let (store, bindings) = guest.parts();
    let api = bindings.oma_agent_driver().agent();
    if prompt {
        api.call_prompt_json_parts(store, agent, &input, &strings, &json_options())
            .await
    } else {
        api.call_run_json_parts(store, agent, &input, &strings, &json_options())
            .await
    }
    .expect("no trap")
}

/// `run-json-parts` / `prompt-json-parts`: strings passed beside the text land at their JSON
/// Pointers, and the input is what the whole text would have been, checked the same way.
#[tokio::test]
async fn strings_beside_the_json_text_take_their_places() {
    let mut guest = driver_guest().await;
    let agent = guest
        .create_agent_json(&config(json!({})))
        .await
        .unwrap()
        .expect("a valid configuration");
    let data = "QUJD".repeat(5000);
    let placeholder = json!([{"role": "user", "content": [
        {"type": "text", "text": ""},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": ""}}
    ]}])
    .to_string();
    let strings = vec![
        ("/0/content/0/text".to_string(), "what is this?".to_string()),
        ("/0/content/1/source/data".to_string(), data.clone()),
    ];
    let session = json_parts(
        &mut guest,
        agent.resource(),
        placeholder.clone(),
        strings.clone(),
        false,
    )
    .await
    .expect("valid input");
    let body = until_send(&mut guest, session).await;
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}
        ]}])
    );
    // A prompt's pointers are into its block list.
    let blocks = json!([{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": ""}}]).to_string();
    let session = json_parts(
        &mut guest,
        agent.resource(),
        blocks,
        vec![("/0/source/data".into(), data.clone())],
        true,
    )
    .await
    .expect("valid input");
    let body = until_send(&mut guest, session).await;
    assert_eq!(body["messages"][0]["content"][0]["source"]["data"], data);

    // Checked as the whole text is: a video's data that is not base64 fails with OMA's message.
    let video = json!([{"role": "user", "content": [
        {"type": "video", "source": {"type": "base64", "media_type": "video/mp4", "data": ""}}
    ]}])
    .to_string();
    let error = json_parts(
        &mut guest,
        agent.resource(),
        video,
        vec![("/0/content/0/source/data".into(), "@@@@".into())],
        false,
    )
    .await
    .expect_err("OMA's media rule");
    assert_eq!(
        error.message,
        "messages[0].content[0].source.data must contain raw base64 data"
    );
    // A pointer that names nothing fails, and no session exists.
    let error = json_parts(
        &mut guest,
        agent.resource(),
        placeholder,
        vec![("/0/content/7/text".into(), "x".into())],
        false,
    )
    .await
    .expect_err("no such place");
    assert_eq!(error.name, "Error");
    assert_eq!(
        error.message,
        r#"a string passed beside the JSON text names no value of it: "/0/content/7/text""#
    );
}

#[tokio::test]
async fn both_worlds_format_the_same_bytes_when_given_the_same_time() {
    let mut portable = driver_guest().await;
    let mut component = Harness::shared().unwrap().instantiate().await.unwrap();
    let request = ChatRequest {
        messages: vec![oma_host_tests::LlmMessage {
            role: Role::User,
            content: vec![text("hello")],
        }],
        ..oma_host_tests::chat_request("anthropic.claude-3", Vec::new())
    };
    let mut bedrock = endpoint("bedrock", None, None);
    bedrock.region = Some("us-east-1".into());
    bedrock.aws = Some(oma_host_tests::AwsCredentials {
        access_key_id: "AKIDEXAMPLE".into(),
        secret_access_key: KEY.into(),
        session_token: None,
    });
    bedrock.now_ms = Some(1_796_036_400_000);
    let ours = component
        .format_request(&request, &bedrock)
        .await
        .unwrap()
        .unwrap();
    let (store, bindings) = portable.parts();
    let theirs = bindings
        .oma_agent_codec()
        .call_format_request(store, &request, &bedrock)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ours, theirs, "the same SigV4 signature and body");
    assert!(ours
        .headers
        .iter()
        .any(|(n, v)| n == "x-amz-date" && v == "20261130T110000Z"));
}

/// A JSON session made with `records` (and `trace`) hands out `trace-records` steps: OMA's
/// record JSON, before the step each belongs ahead of (the run's spans before its request), the
/// legacy events riding on their span ends as the `trace` steps give them; a `records` value OMA
/// refuses fails the session's creation, naming the option.
#[tokio::test]
async fn a_session_with_records_hands_out_trace_records_steps() {
    use oma_host_tests::driver_types::TraceReport;
    use oma_host_tests::TraceOptions;
    let mut guest = driver_guest().await;
    let agent = guest
        .create_agent_json(&config(json!({})))
        .await
        .unwrap()
        .expect("a valid configuration");
    let options = SessionOptions {
        trace: Some(TraceOptions {
            run_id: Some("run-d".into()),
            span_id: None,
            parent_id: None,
            agent: None,
            task_id: None,
        }),
        records: Some(r#"{"capture": {"streamEvents": "none"}}"#.into()),
        ..json_options()
    };
    let (store, bindings) = guest.parts();
    let session = bindings
        .oma_agent_driver()
        .agent()
        .call_run_json(store, agent.resource(), r#""hi""#, &options)
        .await
        .expect("no trap")
        .expect("valid input");
    let (mut records, mut legacy, mut events) = (Vec::new(), Vec::new(), Vec::new());
    let mut answered = false;
    for _ in 0..100 {
        match next(&mut guest, session).await.expect("a step") {
            Poll::Step(Step::TraceRecords(batch)) => {
                assert!(!batch.is_empty());
                for record in batch {
                    records.push(serde_json::from_str::<Value>(&record.json).expect("JSON"));
                    if let Some(event) = record.legacy {
                        legacy.push(serde_json::from_str::<Value>(&event).expect("JSON"));
                    }
                }
            }
            Poll::Step(Step::Trace(TraceReport::Json(event))) => {
                events.push(serde_json::from_str::<Value>(&event).expect("JSON"));
            }
            Poll::Step(Step::Send(_)) => {
                assert_eq!(
                    records.len(),
                    3,
                    "the run's, the agent's and the call's spans first"
                );
                answer(
                    &mut guest,
                    session,
                    ok(anthropic(json!([{"type": "text", "text": "hello"}]))),
                )
                .await
                .expect("due");
                answered = true;
            }
            Poll::Step(Step::Event(_)) => {}
            Poll::Finished(RunReport::Json(result)) => {
                let result: Value = serde_json::from_str(&result).expect("JSON");
                assert_eq!(result["success"], true);
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(answered);
    let names: Vec<&str> = records
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "oma.run",
            "invoke_agent",
            "chat",
            "chat",
            "invoke_agent",
            "oma.run"
        ]
    );
    assert!(records.iter().all(|r| r["runId"] == "run-d"));
    assert_eq!(legacy, events, "each legacy event rides on its span's end");
    assert_eq!(events.len(), 2);
    assert!(!serde_json::to_string(&records).unwrap().contains(KEY));

    let refused = SessionOptions {
        records: Some(r#"{"capture": {"streamEvents": "some"}}"#.into()),
        ..json_options()
    };
    let agent = guest
        .create_agent_json(&config(json!({})))
        .await
        .unwrap()
        .expect("a valid configuration");
    let (store, bindings) = guest.parts();
    let error = bindings
        .oma_agent_driver()
        .agent()
        .call_run_json(store, agent.resource(), r#""hi""#, &refused)
        .await
        .expect("no trap")
        .expect_err("refused");
    assert!(
        error.message.contains("capture.streamEvents"),
        "{}",
        error.message
    );
}

/// `session.cancel` (OMA's `AbortSignal`) on a run whose request is in flight: the next steps
/// are the records ending its open spans as `cancelled` (OMA's `AbortError`, kind
/// `cancellation`) and the legacy `agent` event, then OMA's cancelled result; the request's late
/// answer and a second cancel are refused, and a cancelled `prompt` leaves the history as it
/// was.
#[tokio::test]
async fn a_cancelled_session_closes_its_trace_and_gives_omas_cancelled_result() {
    use oma_host_tests::driver_types::TraceReport;
    use oma_host_tests::TraceOptions;
    let mut guest = driver_guest().await;
    let agent = guest
        .create_agent_json(&config(json!({})))
        .await
        .unwrap()
        .expect("a valid configuration");
    let options = SessionOptions {
        trace: Some(TraceOptions {
            run_id: Some("run-c".into()),
            span_id: None,
            parent_id: None,
            agent: None,
            task_id: None,
        }),
        records: Some("{}".into()),
        ..json_options()
    };
    let (store, bindings) = guest.parts();
    let session = bindings
        .oma_agent_driver()
        .agent()
        .call_prompt_json(store, agent.resource(), r#""hi""#, &options)
        .await
        .expect("no trap")
        .expect("valid input");
    let mut records = Vec::new();
    let mut events = Vec::new();
    let mut cancelled = false;
    let result = loop {
        match next(&mut guest, session).await.expect("a step") {
            Poll::Step(Step::TraceRecords(batch)) => {
                records.extend(
                    batch
                        .into_iter()
                        .map(|r| serde_json::from_str::<Value>(&r.json).expect("JSON")),
                );
            }
            Poll::Step(Step::Trace(TraceReport::Json(event))) => {
                events.push(serde_json::from_str::<Value>(&event).expect("JSON"));
            }
            Poll::Step(Step::Send(_)) if !cancelled => {
                guest
                    .cancel(session)
                    .await
                    .expect("no trap")
                    .expect("a run under way can be cancelled");
                cancelled = true;
            }
            Poll::Finished(RunReport::Json(result)) => {
                break serde_json::from_str::<Value>(&result).expect("JSON")
            }
            other => panic!("only the trace's end and the result after a cancel, got {other:?}"),
        }
    };
    assert!(cancelled);
    assert_eq!(result["success"], false);
    assert_eq!(result["output"], "Run cancelled by caller.");
    assert_eq!(
        result["status"],
        json!({"code": "cancelled", "message": "Run cancelled by caller."})
    );
    assert_eq!(result["errorInfo"]["kind"], "cancellation");
    assert_eq!(result["errorInfo"]["name"], "AbortError");
    let shape: Vec<String> = records
        .iter()
        .map(|r| {
            format!(
                "{} {}",
                r["recordType"].as_str().unwrap(),
                r["name"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        shape,
        [
            "span_start oma.run",
            "span_start invoke_agent",
            "span_start chat",
            "span_end chat",
            "span_end invoke_agent",
            "span_end oma.run",
        ]
    );
    for ended in &records[3..] {
        assert_eq!(ended["status"]["code"], "cancelled", "{ended}");
        assert_eq!(ended["error"]["kind"], "cancellation", "{ended}");
        assert_eq!(ended["runId"], "run-c");
    }
    assert_eq!(events.len(), 1, "the legacy view's agent event: {events:?}");
    assert_eq!(events[0]["type"], "agent");
    // Nothing is owed any more.
    let late = answer(
        &mut guest,
        session,
        ok(anthropic(json!([{"type": "text", "text": "late"}]))),
    )
    .await;
    assert!(late.is_err(), "a late answer is refused");
    let again = guest.cancel(session).await.expect("no trap");
    assert!(again.is_err(), "the run is over");
    // A cancelled prompt commits nothing.
    assert_eq!(history_json(&mut guest, agent.resource()).await, "[]");
}

/// The Rust host's `DriverGuest::cancel_agent_stream`: a stream cancelled before its first step
/// still opens and closes its run's and agent's spans (both `cancelled`, delivered to the host's
/// record sink), its last event is `error` with OMA's cancelled result, nothing is sent, and a
/// second cancel is refused.
#[tokio::test]
async fn a_cancelled_stream_closes_its_trace_in_the_rust_host() {
    use oma_host_tests::{
        agent_config, endpoint, AgentEvent, CannedResponse, CaptureOutbound, DriverHarness,
        FailureKind, GuestOptions, RecordedRequest, RunInput, ScriptedHost, StatusCode,
    };
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let sent = Arc::new(AtomicUsize::new(0));
    let counted = sent.clone();
    let outbound = CaptureOutbound::new(move |_request: &RecordedRequest| {
        counted.fetch_add(1, Ordering::SeqCst);
        CannedResponse {
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            body: anthropic(json!([{"type": "text", "text": "hello"}])).into_bytes(),
        }
    });
    let host = ScriptedHost::new();
    let log = host.log();
    let mut guest = DriverHarness::shared()
        .expect("the portable guest loads")
        .instantiate_with(GuestOptions {
            hooks: Some(Box::new(outbound)),
            host: Some(Box::new(host)),
            ..Default::default()
        })
        .await
        .expect("it instantiates");
    let mut config = agent_config(
        "streamer",
        "claude-sonnet-4-6",
        endpoint("anthropic", None, Some(KEY)),
    );
    config.records = Some(r#"{"runId": "run-s"}"#.into());
    let agent = guest.create_agent(&config).await.unwrap().unwrap();
    let stream = guest
        .stream(&agent, &RunInput::Text("hi".into()))
        .await
        .unwrap()
        .expect("valid input");
    guest
        .cancel_agent_stream(&stream)
        .await
        .unwrap()
        .expect("a stream under way can be cancelled");
    let Some(AgentEvent::Error(result)) = guest.next_agent_event(&stream).await.unwrap() else {
        panic!("the stream ends with its error event");
    };
    let failure = result.failure.expect("a failed result");
    assert_eq!(failure.status.code, StatusCode::Cancelled);
    assert_eq!(failure.error_info.kind, FailureKind::Cancellation);
    assert_eq!(failure.error_info.name, "AbortError");
    assert_eq!(result.output, "Run cancelled by caller.");
    assert!(guest.next_agent_event(&stream).await.unwrap().is_none());
    assert_eq!(sent.load(Ordering::SeqCst), 0, "nothing was sent");
    {
        let log = log.lock();
        let records: Vec<Value> = log
            .records
            .iter()
            .map(|r| serde_json::from_str(&r.json).expect("a record is JSON"))
            .collect();
        let shape: Vec<String> = records
            .iter()
            .map(|r| {
                format!(
                    "{} {} {}",
                    r["recordType"].as_str().unwrap(),
                    r["name"].as_str().unwrap(),
                    r["status"]["code"].as_str().unwrap_or("-")
                )
            })
            .collect();
        assert_eq!(
            shape,
            [
                "span_start oma.run -",
                "span_start invoke_agent -",
                "span_end invoke_agent cancelled",
                "span_end oma.run cancelled",
            ]
        );
        assert!(records.iter().all(|r| r["runId"] == "run-s"));
    }
    let again = guest.cancel_agent_stream(&stream).await.unwrap();
    assert!(again.is_err(), "the run is over");
    guest.close_agent_stream(stream).await.unwrap();
}
