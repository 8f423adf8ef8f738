//! An agent with its own LLM adapter (`docs/agent.md#your-own-llm-adapter`), through the Rust
//! host: the shared table `fixtures/adapter/cases.json`, run with a typed [`LlmAdapter`] behind
//! `ScriptedHost` in both worlds (the `component` world's `host.call-model`, the `portable`
//! world's `call-model` steps), and through `driver` sessions stepped by hand with
//! `payloads: json`, answered as the language packages answer them (which reaches the answers a
//! typed adapter cannot give: a response that is not OMA's shape).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use oma_host_tests::driver_types::{
    Answer, Due, Payloads, Poll, RunReport, SessionOptions, Step, ToolAnswerJson,
};
use oma_host_tests::oma_json::{messages_json, run_result_json};
use oma_host_tests::{
    agent_config, endpoint, AgentConfig, AgentEvent, ContentBlock, GuestOptions, HostAdapter,
    LlmAdapter, LlmResponse, MediaSource, ModelCall, ModelEvent, RunInput, RunResult, ScriptedHost,
    ThrownError, TokenUsage, ToolDefinition, ToolOutcome, ToolResultContent, ToolUseBlock,
    UrlSource,
};
use serde_json::{json, Value};

use crate::worlds::{AnyGuest, World};

const CASES: &str = include_str!("../../../fixtures/adapter/cases.json");
const ADAPTER: &str = "fixture-adapter";

fn cases() -> Vec<Value> {
    let table: Value = serde_json::from_str(CASES).expect("the table is JSON");
    table["cases"].as_array().expect("cases").clone()
}

/// What a case's run gave: the result as OMA's JSON, the text deltas, and the calls the
/// adapter got (`{messages, options}`).
#[derive(Debug, Default)]
struct Observed {
    result: Value,
    deltas: Vec<String>,
    calls: Vec<Value>,
}

/// Holds `observed` to the case's `expect`.
fn check(case: &Value, observed: &Observed, how: &str) {
    let name = case["name"].as_str().unwrap_or("?");
    let expect = &case["expect"];
    for (key, value) in expect["result"].as_object().expect("expect.result") {
        assert_eq!(
            observed.result.get(key),
            Some(value),
            "{name} ({how}): result.{key} in {}",
            observed.result
        );
    }
    if let Some(names) = expect.get("toolNames") {
        let got: Vec<Value> = observed.result["toolCalls"]
            .as_array()
            .map(|calls| calls.iter().map(|c| c["toolName"].clone()).collect())
            .unwrap_or_default();
        assert_eq!(&Value::Array(got), names, "{name} ({how}): tool names");
    }
    if let Some(calls) = expect.get("calls") {
        assert_eq!(
            &Value::Array(observed.calls.clone()),
            calls,
            "{name} ({how}): calls"
        );
    }
    if let Some(deltas) = expect.get("deltas") {
        assert_eq!(
            json!(observed.deltas),
            *deltas,
            "{name} ({how}): text deltas"
        );
    }
}

/// The typed configuration of a case's agent.
fn typed_config(case: &Value) -> AgentConfig {
    let agent = &case["agent"];
    let mut config = agent_config(
        agent["name"].as_str().unwrap_or("agent"),
        agent["model"].as_str().unwrap_or("model"),
        endpoint("", None, None),
    );
    config.adapter = Some(HostAdapter {
        name: ADAPTER.into(),
        echoes_reasoning: None,
    });
    config.system_prompt = agent["systemPrompt"].as_str().map(str::to_owned);
    config.sampling.max_tokens = agent["maxTokens"].as_u64().map(|n| n as u32);
    config.sampling.temperature = agent["temperature"].as_f64();
    config.token_budget = agent["maxTokenBudget"].as_u64();
    if agent["call"]["egress"] == "offline" {
        config.call.egress = oma_host_tests::EgressPolicy::Offline;
    }
    config.tools = agent["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|name| ToolDefinition {
            name: name.as_str().unwrap_or_default().into(),
            description: "finds things".into(),
            input_schema: r#"{"type":"object"}"#.into(),
        })
        .collect();
    config
}

/// A content block of the table as a typed value; `None` for what no typed value can hold
/// (the case is then one for OMA JSON only).
fn typed_block(block: &Value) -> Option<ContentBlock> {
    match block["type"].as_str()? {
        "text" => Some(ContentBlock::Text(block["text"].as_str()?.into())),
        "tool_use" => Some(ContentBlock::ToolUse(ToolUseBlock {
            id: block["id"].as_str()?.into(),
            name: block["name"].as_str()?.into(),
            input: block["input"].to_string(),
            signature: None,
        })),
        "video" => Some(ContentBlock::Video(oma_host_tests::VideoBlock {
            source: MediaSource::Url(UrlSource {
                media_type: block["source"]["media_type"].as_str()?.into(),
                url: block["source"]["url"].as_str()?.into(),
            }),
        })),
        _ => None,
    }
}

fn typed_response(response: &Value) -> Option<LlmResponse> {
    Some(LlmResponse {
        id: response["id"].as_str()?.into(),
        content: response["content"]
            .as_array()?
            .iter()
            .map(typed_block)
            .collect::<Option<_>>()?,
        model: response["model"].as_str()?.into(),
        stop_reason: response["stop_reason"].as_str()?.into(),
        usage: TokenUsage {
            input_tokens: response["usage"]["input_tokens"].as_u64()?,
            output_tokens: response["usage"]["output_tokens"].as_u64()?,
        },
    })
}

fn typed_thrown(error: &Value) -> ThrownError {
    ThrownError {
        name: error["name"].as_str().unwrap_or("Error").into(),
        message: error["message"].as_str().unwrap_or_default().into(),
        code: error["code"].as_str().map(str::to_owned),
        status: error["status"].as_u64().map(|n| n as u16),
    }
}

fn typed_event(event: &Value) -> Option<ModelEvent> {
    let data = &event["data"];
    Some(match event["type"].as_str()? {
        "text" => ModelEvent::Text(data.as_str()?.into()),
        "reasoning" => ModelEvent::Reasoning(data.as_str()?.into()),
        "tool_use" => match typed_block(data)? {
            ContentBlock::ToolUse(call) => ModelEvent::ToolUse(call),
            _ => return None,
        },
        "done" => ModelEvent::Done(typed_response(data)?),
        "error" => ModelEvent::Error(typed_thrown(data)),
        _ => return None,
    })
}

/// Whether every answer of the case's script has a typed form.
fn typed_script(case: &Value) -> bool {
    case["script"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|entry| {
            entry.get("throws").is_some()
                || entry
                    .get("response")
                    .is_some_and(|r| typed_response(r).is_some())
                || entry.get("events").is_some_and(|events| {
                    events
                        .as_array()
                        .is_some_and(|events| events.iter().all(|e| typed_event(e).is_some()))
                })
        })
}

/// The case's adapter, typed: answers from the script, records each call as OMA JSON.
struct Scripted {
    script: VecDeque<Value>,
    calls: Arc<Mutex<Vec<Value>>>,
}

impl Scripted {
    fn next(&mut self, call: &ModelCall) -> Value {
        assert_eq!(call.adapter, ADAPTER);
        self.calls
            .lock()
            .expect("calls")
            .push(json!({"messages": messages_json(&call.messages), "options": call.options}));
        self.script
            .pop_front()
            .expect("the adapter is called as often as its script says")
    }
}

impl LlmAdapter for Scripted {
    fn chat(&mut self, call: &ModelCall) -> Result<LlmResponse, ThrownError> {
        let entry = self.next(call);
        match (entry.get("response"), entry.get("throws")) {
            (Some(response), _) => Ok(typed_response(response).expect("a typed response")),
            (_, Some(error)) => Err(typed_thrown(error)),
            _ => panic!("chat has no answer in {entry}"),
        }
    }

    fn stream(&mut self, call: &ModelCall) -> Vec<ModelEvent> {
        let entry = self.next(call);
        match (entry.get("events"), entry.get("throws")) {
            (Some(events), _) => events
                .as_array()
                .expect("events")
                .iter()
                .map(|e| typed_event(e).expect("a typed event"))
                .collect(),
            (_, Some(error)) => vec![ModelEvent::Error(typed_thrown(error))],
            _ => panic!("stream has no answer in {entry}"),
        }
    }
}

/// The answer of the case's tool `name`.
fn tool_answer(case: &Value, name: &str) -> String {
    case["toolAnswers"][name]
        .as_str()
        .unwrap_or("no such tool")
        .to_owned()
}

async fn run_typed(world: World, case: &Value) -> Observed {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let adapter = Scripted {
        script: case["script"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into(),
        calls: calls.clone(),
    };
    let answers = case.clone();
    let host = ScriptedHost::new()
        .with_adapter(ADAPTER, adapter)
        .with_tool(move |call: &ToolUseBlock| ToolOutcome {
            content: ToolResultContent::Text(tool_answer(&answers, &call.name)),
            is_error: None,
            gate: None,
        });
    let options = GuestOptions {
        host: Some(Box::new(host)),
        ..Default::default()
    };
    let mut guest = AnyGuest::instantiate(world, options).await;
    let agent = guest
        .create_agent(&typed_config(case))
        .await
        .expect("no trap")
        .expect("the agent is made");
    let input = RunInput::Text(case["input"].as_str().unwrap_or_default().into());
    let mut observed = Observed::default();
    let result: RunResult = if case["call"] == "stream" {
        let stream = guest
            .stream(&agent, &input)
            .await
            .expect("no trap")
            .expect("a stream");
        let events = guest
            .collect_agent_stream(stream)
            .await
            .expect("the stream ends");
        let mut last = None;
        for event in events {
            match event {
                AgentEvent::TextDelta(text) => observed.deltas.push(text),
                AgentEvent::Done(result) | AgentEvent::Error(result) => last = Some(result),
                _ => {}
            }
        }
        last.expect("the stream ends with its result")
    } else {
        guest
            .run(&agent, &input)
            .await
            .expect("no trap")
            .expect("a result")
    };
    observed.result = run_result_json(&result);
    observed.calls = calls.lock().expect("calls").clone();
    observed
}

#[tokio::test]
async fn the_adapter_table_through_typed_values_in_both_worlds() {
    let mut ran = 0;
    for case in cases() {
        if !typed_script(&case) {
            continue;
        }
        for world in [World::Component, World::Driver] {
            let observed = run_typed(world, &case).await;
            check(&case, &observed, &format!("typed, {world:?}"));
        }
        ran += 1;
    }
    assert!(ran >= 8, "most cases have a typed form; {ran} ran");
}

/// The agent's configuration as OMA JSON, as the packages give it.
fn json_config(case: &Value) -> String {
    let mut config = case["agent"].clone();
    config["adapter"] = json!({"name": ADAPTER});
    if let Some(tools) = config["tools"].as_array().cloned() {
        config["tools"] = tools
            .iter()
            .map(|name| {
                json!({"name": name, "description": "finds things",
                       "inputSchema": {"type": "object"}})
            })
            .collect();
    }
    config.to_string()
}

/// One case through a `driver` session with `payloads: json`: each model call answered with
/// OMA JSON (`model-response`, one `model-event` per event then `model-end`, or
/// `model-failed`), as the JavaScript and Python packages answer.
async fn run_json(case: &Value) -> Observed {
    let mut guest = crate::common::driver_guest().await;
    let agent = guest
        .create_agent_json(&json_config(case))
        .await
        .expect("no trap")
        .expect("the agent is made");
    let options = SessionOptions {
        payloads: Payloads::Json,
        seed: 7,
        trace: None,
        records: None,
    };
    let input = json!(case["input"]).to_string();
    let (store, bindings) = guest.parts();
    let agents = bindings.oma_agent_driver().agent();
    let session = if case["call"] == "stream" {
        agents
            .call_stream_json(&mut *store, agent.resource(), &input, &options)
            .await
    } else {
        agents
            .call_run_json(&mut *store, agent.resource(), &input, &options)
            .await
    }
    .expect("no trap")
    .expect("a session");
    let mut script: VecDeque<Value> = case["script"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into();
    let mut pending: VecDeque<Answer> = VecDeque::new();
    let mut observed = Observed::default();
    for _ in 0..1_000 {
        let answer = match guest.next_step(session).await.expect("no trap") {
            Ok(Poll::Finished(RunReport::Json(text))) => {
                observed.result = serde_json::from_str(&text).expect("the result is JSON");
                return observed;
            }
            Ok(Poll::Waiting(waiting)) => {
                assert_eq!(
                    waiting.due,
                    vec![Due::Model],
                    "only the adapter is waited for"
                );
                pending
                    .pop_front()
                    .expect("an answer of the stream is left")
            }
            Ok(Poll::Step(Step::CallModel(text))) => {
                let call: Value = serde_json::from_str(&text).expect("the call is JSON");
                assert_eq!(call["adapter"], ADAPTER);
                assert_eq!(call["stream"], case["call"] == "stream");
                observed
                    .calls
                    .push(json!({"messages": call["messages"], "options": call["options"]}));
                let entry = script.pop_front().expect("the script has an answer");
                pending.clear();
                if let Some(response) = entry.get("response") {
                    Answer::ModelResponse(response.to_string())
                } else if let Some(error) = entry.get("throws") {
                    Answer::ModelFailed(typed_thrown(error))
                } else {
                    pending = entry["events"]
                        .as_array()
                        .expect("events")
                        .iter()
                        .map(|e| Answer::ModelEvent(e.to_string()))
                        .collect();
                    pending.push_back(Answer::ModelEnd);
                    pending.pop_front().expect("an answer")
                }
            }
            Ok(Poll::Step(Step::CallTool(call))) => Answer::ToolJson(ToolAnswerJson {
                content: json!(tool_answer(case, &call.name)).to_string(),
                id: call.id,
                is_error: None,
                gate: None,
            }),
            Ok(Poll::Step(Step::Event(oma_host_tests::AgentEvent::TextDelta(text)))) => {
                observed.deltas.push(text);
                continue;
            }
            Ok(Poll::Step(Step::Event(_) | Step::Trace(_))) => continue,
            other => panic!("{}: unexpected {other:?}", case["name"]),
        };
        guest
            .answer(session, &answer)
            .await
            .expect("no trap")
            .expect("the answer was asked for");
    }
    panic!("{}: the session did not end", case["name"]);
}

#[tokio::test]
async fn the_adapter_table_through_oma_json_sessions() {
    for case in cases() {
        let observed = run_json(&case).await;
        check(&case, &observed, "OMA JSON, driver");
    }
}

/// Answers a session cannot take are refused and change nothing; the rest of the stream after
/// `done` is never asked for.
#[tokio::test]
async fn an_answer_out_of_turn_is_refused() {
    let mut guest = crate::common::driver_guest().await;
    let agent = guest
        .create_agent_json(r#"{"model": "m", "adapter": {"name": "fixture-adapter"}}"#)
        .await
        .expect("no trap")
        .expect("the agent");
    let options = SessionOptions {
        payloads: Payloads::Json,
        seed: 1,
        trace: None,
        records: None,
    };
    let (store, bindings) = guest.parts();
    let session = bindings
        .oma_agent_driver()
        .agent()
        .call_run_json(&mut *store, agent.resource(), "\"hi\"", &options)
        .await
        .expect("no trap")
        .expect("a session");
    let step = guest
        .next_step(session)
        .await
        .expect("no trap")
        .expect("a step");
    assert!(matches!(step, Poll::Step(Step::CallModel(_))), "{step:?}");
    let refused = guest
        .answer(session, &Answer::Waited)
        .await
        .expect("no trap")
        .expect_err("the adapter's answer is due, not HTTP's");
    assert_eq!(refused.kind, oma_host_tests::ErrorKind::SessionState);
    guest
        .answer(
            session,
            &Answer::ModelEvent(
                json!({"type": "done", "data": {"id": "1", "content": [], "model": "m",
                                                "stop_reason": "end_turn",
                                                "usage": {"input_tokens": 0, "output_tokens": 0}}})
                .to_string(),
            ),
        )
        .await
        .expect("no trap")
        .expect("done ends the call");
    let refused = guest
        .answer(session, &Answer::ModelEnd)
        .await
        .expect("no trap")
        .expect_err("the call is over");
    assert_eq!(refused.kind, oma_host_tests::ErrorKind::SessionState);
}
