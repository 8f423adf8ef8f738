//! The host's adapter: reading its answers, the options it is given, and whole runs whose model
//! calls it answers, driven through the run machine.

use std::collections::VecDeque;

use serde_json::{json, Value};

use super::*;
use crate::agent::config::AgentSettings;
use crate::agent::entry::Agent;
use crate::agent::evaluation::RunInput;
use crate::agent::exchange::{AgentEvent, ToolOutcome};
use crate::agent::machine::{Answer, Due, Poll, RunMachine, Step};
use crate::agent::outcome::{outcome_json, RunOutcome};
use crate::agent::turn::Event;
use crate::message::{ContentBlock, ToolResultContent, ToolUseBlock};

const NOW: u64 = 1_796_036_400_000;

fn response(text: &str) -> Value {
    json!({
        "id": "r1", "content": [{"type": "text", "text": text}], "model": "fixture",
        "stop_reason": "end_turn", "usage": {"input_tokens": 3, "output_tokens": 2},
    })
}

fn read(value: Value) -> Result<LlmResponse, String> {
    response_from_json(&value.to_string()).map_err(|e| {
        assert_eq!(e.name(), "InvalidMessageError", "{e}");
        e.to_string()
    })
}

#[test]
fn a_response_is_read_as_omas_llm_response() {
    let mut value = response("hi");
    value["extra"] = json!("ignored, as OMA ignores it");
    let read = read(value).expect("valid");
    assert_eq!(read.id, "r1");
    assert_eq!(read.model, "fixture");
    assert_eq!(read.stop_reason, "end_turn");
    assert_eq!(read.usage.total(), 5);
    assert_eq!(
        read.content,
        vec![ContentBlock::Text(crate::message::TextBlock {
            text: "hi".into()
        })]
    );
}

#[test]
fn a_malformed_response_names_the_field() {
    let with = |edit: &dyn Fn(&mut Value)| {
        let mut value = response("hi");
        edit(&mut value);
        read(value).expect_err("malformed")
    };
    for (message, edit) in [
        (
            "the adapter's LLMResponse is not valid: `content` must be a ContentBlock[], got string",
            &(|v: &mut Value| v["content"] = json!("hi")) as &dyn Fn(&mut Value),
        ),
        (
            "the adapter's LLMResponse is not valid: missing field `usage`",
            &|v: &mut Value| {
                v.as_object_mut().map(|o| o.remove("usage"));
            },
        ),
        (
            "the adapter's LLMResponse is not valid: `usage.output_tokens` must be a non-negative integer, got number 1.5",
            &|v: &mut Value| v["usage"]["output_tokens"] = json!(1.5),
        ),
        (
            "the adapter's LLMResponse is not valid: missing field `id`",
            &|v: &mut Value| v["id"] = Value::Null,
        ),
        (
            "the adapter's LLMResponse is not valid: `stop_reason` must be a string, got number 1",
            &|v: &mut Value| v["stop_reason"] = json!(1),
        ),
        (
            "the adapter's LLMResponse is not valid: content[0] must be a content block with a string \"type\"",
            &|v: &mut Value| v["content"] = json!([{"text": "no type"}]),
        ),
        (
            "the adapter's LLMResponse is not valid: content[1].source.url must use HTTP or HTTPS",
            &|v: &mut Value| {
                v["content"] = json!([
                    {"type": "text", "text": "a clip"},
                    {"type": "video", "source": {"type": "url", "media_type": "video/mp4",
                                                 "url": "ftp://x.example/v.mp4"}},
                ]);
            },
        ),
    ] {
        assert_eq!(with(edit), message);
    }
    assert_eq!(
        read(json!([1])).expect_err("not an object"),
        "the adapter's LLMResponse is not valid: expected an object, got array"
    );
    let error = response_from_json("{").expect_err("not JSON");
    assert!(
        error
            .to_string()
            .starts_with("the adapter's LLMResponse is not valid: it is not JSON"),
        "{error}"
    );
}

#[test]
fn stream_events_are_read_as_oma_writes_them() {
    let event = |value: Value| answer_from_event_json(&value.to_string());
    assert_eq!(
        event(json!({"type": "text", "data": "He"})),
        Ok(ModelAnswer::Event(StreamEvent::Text("He".into())))
    );
    assert_eq!(
        event(json!({"type": "reasoning", "data": "hmm"})),
        Ok(ModelAnswer::Event(StreamEvent::Reasoning("hmm".into())))
    );
    assert_eq!(
        event(json!({"type": "tool_use",
                     "data": {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}}})),
        Ok(ModelAnswer::Event(StreamEvent::ToolUse(ToolUseBlock {
            id: "t1".into(),
            name: "f".into(),
            input: json!({"a": 1}),
            signature: None,
        })))
    );
    let done = event(json!({"type": "done", "data": response("whole")})).expect("done");
    assert!(matches!(done, ModelAnswer::Event(StreamEvent::Done(r)) if r.id == "r1"));
    // `error` is the error the stream yielded: OMA classifies it by name, code and status.
    let error = event(json!({"type": "error",
                             "data": {"name": "APIError", "message": "slow down",
                                      "code": 42, "statusCode": 429}}))
    .expect_err("an error event");
    assert_eq!(
        error,
        Error::Thrown {
            name: "APIError".into(),
            message: "slow down".into(),
            code: Some("42".into()),
            status: Some(429),
        }
    );
    assert!(error.retryable());
    let plain = event(json!({"type": "error", "data": "boom"})).expect_err("an error event");
    assert_eq!((plain.name(), plain.to_string()), ("Error", "boom".into()));
    for (value, message) in [
        (
            json!({"type": "tool_result", "data": {}}),
            "the adapter's stream event is not valid: `type` must be \"text\", \"reasoning\", \"tool_use\", \"done\" or \"error\", got \"tool_result\"",
        ),
        (
            json!({"type": "text", "data": 3}),
            "the adapter's stream event is not valid: the data of a \"text\" event must be a string, got number",
        ),
        (
            json!({"data": "x"}),
            "the adapter's stream event is not valid: missing field `type`",
        ),
        (
            json!({"type": "done", "data": {"id": "x"}}),
            "the adapter's stream event is not valid: `data.content` must be a ContentBlock[], got undefined",
        ),
        (
            json!({"type": "tool_use", "data": {"id": "t"}}),
            "the adapter's stream event is not valid: missing field `data.name`",
        ),
    ] {
        assert_eq!(
            event(value).expect_err("malformed").to_string(),
            message
        );
    }
}

/// An agent with its own adapter, from OMA-style JSON with `extra` keys added.
fn adapter_agent(extra: Value) -> Agent {
    let mut config = json!({"name": "fixture-agent", "model": "fixture-model",
                            "adapter": {"name": "fixture-adapter"}});
    for (key, value) in extra.as_object().cloned().unwrap_or_default() {
        config[key] = value;
    }
    let (spec, history) = AgentSettings::from_json(&config.to_string())
        .expect("valid")
        .into_spec()
        .expect("no provider needed");
    Agent::new(spec, history).expect("valid")
}

/// The adapter of the tests: one script of answers per model call, and what it was given.
#[derive(Default)]
struct Adapter {
    scripts: VecDeque<Vec<Result<ModelAnswer, Error>>>,
    calls: Vec<ModelCall>,
    events: Vec<AgentEvent>,
    traces: Vec<Value>,
    tools: Vec<ToolUseBlock>,
}

impl Adapter {
    fn answering(scripts: Vec<Vec<Result<ModelAnswer, Error>>>) -> Self {
        Adapter {
            scripts: scripts.into(),
            ..Adapter::default()
        }
    }

    /// Steps `machine` to its end, answering each model call with its script, answer by
    /// answer (polling between them, as a host does while a stream yields).
    fn drive(&mut self, machine: &mut RunMachine) -> RunOutcome {
        let mut now = NOW;
        let mut pending: VecDeque<Result<ModelAnswer, Error>> = VecDeque::new();
        for _ in 0..10_000 {
            now += 1;
            let answer = match machine.poll(now) {
                Poll::Finished(outcome) => return *outcome,
                Poll::Step(Step::CallModel(call)) => {
                    self.calls.push(*call);
                    pending = self.scripts.pop_front().expect("a script").into();
                    continue;
                }
                Poll::Step(Step::Event(event)) => {
                    self.events.push(event);
                    continue;
                }
                Poll::Step(Step::Trace(event)) => {
                    self.traces.push(event.to_json());
                    continue;
                }
                Poll::Step(Step::CallTool(call)) => {
                    self.tools.push(call.clone());
                    Answer::Tool {
                        id: call.id,
                        outcome: ToolOutcome {
                            content: ToolResultContent::Text("42".into()),
                            is_error: None,
                            gate: None,
                        },
                    }
                }
                Poll::Waiting(due) => {
                    assert_eq!(due, vec![Due::Model]);
                    Answer::Model(pending.pop_front().expect("an answer in the script"))
                }
                other => panic!("unexpected {other:?}"),
            };
            machine.handle(answer).expect("the answer was asked for");
        }
        panic!("the run did not end");
    }
}

fn answer(value: Value) -> Result<ModelAnswer, Error> {
    response_from_value(value).map(ModelAnswer::Response)
}

fn event(value: Value) -> Result<ModelAnswer, Error> {
    answer_from_event_json(&value.to_string())
}

fn text(input: &str) -> RunInput {
    RunInput::Text(input.into())
}

#[test]
fn a_run_asks_the_adapter_instead_of_sending_http() {
    let agent = adapter_agent(json!({"systemPrompt": "be brief", "temperature": 0.2,
                                     "maxTokens": 64, "extraBody": {"seed": 7}}));
    let mut machine = agent.start(text("2 + 2?"), false, 1).expect("valid");
    let mut adapter = Adapter::answering(vec![vec![answer(response("4"))]]);
    let outcome = adapter.drive(&mut machine);
    assert!(outcome.success(), "{outcome:?}");
    assert_eq!(outcome.output, "4");
    assert_eq!(outcome.token_usage.total(), 5);
    assert_eq!(outcome.turns, 1);
    let call = &adapter.calls[0];
    assert_eq!(call.adapter, "fixture-adapter");
    assert!(!call.streamed());
    // The deadline of a provider call bounds it: 10 minutes by default.
    assert_eq!(call.timeout_ms, 600_000);
    let sent: Value = serde_json::from_str(&call.to_json()).expect("JSON");
    assert_eq!(
        sent,
        json!({
            "adapter": "fixture-adapter",
            "messages": [{"role": "user", "content": [{"type": "text", "text": "2 + 2?"}]}],
            "options": {"model": "fixture-model", "maxTokens": 64, "temperature": 0.2,
                        "extraBody": {"seed": 7}, "systemPrompt": "be brief"},
            "stream": false,
            "timeoutMs": 600_000,
        })
    );
    assert_eq!(
        adapter.events,
        vec![AgentEvent::Turn(Event::Text("4".into()))]
    );
}

#[test]
fn options_carry_what_the_agent_sets_as_oma_names_them() {
    let agent = adapter_agent(json!({
        "topP": 0.9, "topK": 5, "minP": 0.1, "parallelToolCalls": false,
        "frequencyPenalty": 0.5, "presencePenalty": -0.5,
        "thinking": {"enabled": true, "budgetTokens": 2048, "effort": "high"},
        "preserveReasoningAsText": true, "compressReasoningText": {"minChars": 300},
        "tools": [{"name": "lookup", "description": "finds", "inputSchema": {"type": "object"}}],
    }));
    let mut machine = agent.start(text("x"), false, 1).expect("valid");
    let mut adapter = Adapter::answering(vec![vec![answer(response("ok"))]]);
    assert!(adapter.drive(&mut machine).success());
    assert_eq!(
        adapter.calls[0].options_json(),
        json!({
            "model": "fixture-model",
            "tools": [{"name": "lookup", "description": "finds",
                       "inputSchema": {"type": "object"}}],
            "topP": 0.9, "topK": 5, "minP": 0.1, "parallelToolCalls": false,
            "frequencyPenalty": 0.5, "presencePenalty": -0.5,
            "thinking": {"enabled": true, "budgetTokens": 2048, "effort": "high"},
            "preserveReasoningAsText": true, "compressReasoningText": {"minChars": 300},
        })
    );
}

#[test]
fn tool_calls_go_round_through_the_adapter() {
    let agent = adapter_agent(json!({
        "tools": [{"name": "lookup", "description": "finds", "inputSchema": {"type": "object"}}],
    }));
    let mut machine = agent.start(text("find it"), false, 1).expect("valid");
    let mut first = response("");
    first["content"] =
        json!([{"type": "tool_use", "id": "t1", "name": "lookup", "input": {"q": 1}}]);
    first["stop_reason"] = json!("tool_use");
    let mut adapter = Adapter::answering(vec![
        vec![answer(first)],
        vec![answer(response("found 42"))],
    ]);
    let outcome = adapter.drive(&mut machine);
    assert!(outcome.success());
    assert_eq!(outcome.output, "found 42");
    assert_eq!(outcome.turns, 2);
    assert_eq!(outcome.tool_calls.len(), 1);
    assert_eq!(adapter.tools[0].name, "lookup");
    let second: Value = serde_json::from_str(&adapter.calls[1].to_json()).expect("JSON");
    assert_eq!(
        second["messages"][2],
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                            "content": "42"}]})
    );
}

#[test]
fn a_streamed_run_takes_the_adapters_events_as_deltas() {
    let agent = adapter_agent(json!({}));
    let mut machine = agent.start(text("hi"), true, 1).expect("valid");
    let mut adapter = Adapter::answering(vec![vec![
        event(json!({"type": "reasoning", "data": "thinking"})),
        event(json!({"type": "text", "data": "Hel"})),
        event(json!({"type": "text", "data": "lo"})),
        event(json!({"type": "done", "data": response("Hello")})),
    ]]);
    let outcome = adapter.drive(&mut machine);
    assert!(outcome.success());
    assert!(adapter.calls[0].streamed());
    assert_eq!(
        adapter.events,
        vec![
            AgentEvent::ReasoningDelta("thinking".into()),
            AgentEvent::TextDelta("Hel".into()),
            AgentEvent::TextDelta("lo".into()),
            AgentEvent::Turn(Event::Text("Hello".into())),
        ]
    );
    // A streamed run may be answered by `chat` too: no deltas then.
    let mut machine = agent.start(text("hi"), true, 1).expect("valid");
    let mut adapter = Adapter::answering(vec![vec![answer(response("Hello"))]]);
    assert!(adapter.drive(&mut machine).success());
    assert_eq!(
        adapter.events,
        vec![AgentEvent::Turn(Event::Text("Hello".into()))]
    );
}

/// The failure of a run, as OMA's `AgentRunResult` JSON shows it.
fn failure(outcome: &RunOutcome) -> (Value, Value) {
    assert!(!outcome.success());
    let json = outcome_json(outcome);
    (json["status"].clone(), json["errorInfo"].clone())
}

#[test]
fn a_failing_adapter_ends_the_run_as_oma_classifies_its_error() {
    let agent = adapter_agent(json!({}));
    let run = |script: Vec<Result<ModelAnswer, Error>>| {
        let mut machine = agent.start(text("hi"), false, 1).expect("valid");
        Adapter::answering(vec![script]).drive(&mut machine)
    };
    // A plain `Error`: no status, no provider configured.
    let outcome = run(vec![Err(thrown(None, "adapter down".into(), None, None))]);
    assert_eq!(outcome.output, "adapter down");
    assert_eq!(
        failure(&outcome),
        (
            json!({"code": "error", "message": "adapter down"}),
            json!({"kind": "unknown", "name": "Error", "message": "adapter down",
                   "retryable": true}),
        )
    );
    // An SDK's error with a status: a provider failure, retryable as OMA decides by status.
    let outcome = run(vec![Err(thrown(
        Some("APIError".into()),
        "bad request".into(),
        Some("invalid".into()),
        Some(400),
    ))]);
    assert_eq!(
        failure(&outcome).1,
        json!({"kind": "provider", "code": "invalid", "name": "APIError",
               "message": "bad request", "retryable": false, "httpStatus": 400})
    );
    // A malformed answer and a stream that stops before `done` are typed errors.
    let mut broken = response("x");
    broken["usage"] = json!({"input_tokens": "3"});
    let outcome = run(vec![answer(broken)]);
    assert_eq!(
        failure(&outcome).1["message"],
        "the adapter's LLMResponse is not valid: `usage.input_tokens` must be a non-negative integer, got string"
    );
    assert_eq!(failure(&outcome).1["name"], "InvalidMessageError");
    let outcome = run(vec![
        event(json!({"type": "text", "data": "par"})),
        Ok(ModelAnswer::End),
    ]);
    assert_eq!(
        outcome.output,
        "the stream of adapter \"fixture-adapter\" ended without a done event"
    );
}

#[test]
fn a_configured_provider_classifies_failures_as_omas_does() {
    let agent = adapter_agent(json!({"provider": "openai"}));
    let mut machine = agent.start(text("hi"), false, 1).expect("valid");
    let outcome = Adapter::answering(vec![vec![Err(thrown(None, "x".into(), None, None))]])
        .drive(&mut machine);
    let info = failure(&outcome).1;
    assert_eq!(
        (&info["kind"], &info["provider"]),
        (&json!("provider"), &json!("openai"))
    );
}

#[test]
fn an_adapter_that_does_not_answer_times_out() {
    let agent = adapter_agent(json!({"call": {"deadlineMs": 50}}));
    let mut machine = agent.start(text("hi"), false, 1).expect("valid");
    let Poll::Step(Step::CallModel(call)) = machine.poll(NOW) else {
        panic!("the call first");
    };
    assert_eq!(call.timeout_ms, 50);
    assert_eq!(machine.poll(NOW + 10), Poll::Waiting(vec![Due::Model]));
    assert_eq!(machine.wake_at(), Some(NOW + 50));
    let outcome = loop {
        match machine.poll(NOW + 50) {
            Poll::Finished(outcome) => break outcome,
            Poll::Step(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    };
    let (status, info) = failure(&outcome);
    assert_eq!(status["code"], "timeout");
    assert_eq!(info["name"], "LLMCallTimeoutError");
    assert_eq!(info["code"], "LLM_CALL_TIMEOUT");
    // The call's deadline lies within the run's.
    let agent = adapter_agent(json!({"deadlineMs": 20}));
    let mut machine = agent.start(text("hi"), false, 1).expect("valid");
    let Poll::Step(Step::CallModel(call)) = machine.poll(NOW) else {
        panic!("the call first");
    };
    assert_eq!(call.timeout_ms, 20);
}

#[test]
fn an_egress_policy_cannot_hold_an_adapter() {
    let agent = adapter_agent(json!({"call": {"egress": "offline"}}));
    let mut machine = agent.start(text("hi"), false, 1).expect("valid");
    let mut adapter = Adapter::default();
    let outcome = adapter.drive(&mut machine);
    assert!(adapter.calls.is_empty(), "nothing was asked of the adapter");
    assert_eq!(
        failure(&outcome),
        (
            json!({"code": "rejected",
                   "message": "Egress policy cannot enforce provider \"fixture-adapter\": custom and AI SDK adapters do not expose an enforceable request transport or target contract to OMA."}),
            json!({"kind": "validation", "code": "EGRESS_POLICY_UNSUPPORTED",
                   "name": "EgressPolicyError",
                   "message": "Egress policy cannot enforce provider \"fixture-adapter\": custom and AI SDK adapters do not expose an enforceable request transport or target contract to OMA.",
                   "retryable": false}),
        )
    );
}

#[test]
fn answers_that_do_not_fit_are_refused_and_change_nothing() {
    let agent = adapter_agent(json!({}));
    let mut machine = agent.start(text("hi"), true, 1).expect("valid");
    assert!(matches!(machine.poll(NOW), Poll::Step(Step::CallModel(_))));
    let http = Answer::Http(crate::http::call::CallAnswer::End);
    let refused = machine.handle(http.clone()).expect_err("no HTTP is due");
    assert_eq!(refused.answer, http);
    assert_eq!(refused.reason.name(), "SessionStateError");
    machine
        .handle(Answer::Model(event(json!({"type": "text", "data": "a"}))))
        .expect("the first event");
    assert!(matches!(machine.poll(NOW), Poll::Step(Step::Event(_))));
    // A whole response does not end a stream that began: its `done` does.
    let refused = machine
        .handle(Answer::Model(answer(response("a"))))
        .expect_err("a stream is in flight");
    assert!(
        refused
            .reason
            .to_string()
            .contains("the next event of the adapter's stream"),
        "{}",
        refused.reason
    );
    machine
        .handle(Answer::Model(event(
            json!({"type": "done", "data": response("a")}),
        )))
        .expect("done");
    let refused = machine
        .handle(Answer::Model(Ok(ModelAnswer::End)))
        .expect_err("the call is over");
    assert_eq!(refused.reason.name(), "SessionStateError");
}

#[test]
fn budgets_structured_output_and_traces_hold_for_an_adapter() {
    // The token budget reads the adapter's usage.
    let agent = adapter_agent(json!({"maxTokenBudget": 4}));
    let mut machine = agent.start(text("hi"), false, 1).expect("valid");
    let outcome = Adapter::answering(vec![vec![answer(response("big"))]]).drive(&mut machine);
    assert!(outcome.budget_exceeded());
    // Structured output: the retry with OMA's feedback goes to the adapter too.
    let agent = adapter_agent(json!({"outputSchema": {"type": "object", "required": ["n"]}}));
    let mut machine = agent.start(text("hi"), false, 1).expect("valid");
    let mut adapter = Adapter::answering(vec![
        vec![answer(response("{}"))],
        vec![answer(response("{\"n\": 4}"))],
    ]);
    let outcome = adapter.drive(&mut machine);
    assert_eq!(outcome.structured, Some(json!({"n": 4})));
    assert_eq!(adapter.calls.len(), 2);
    // A trace names the adapter as the model call's provider, as OMA's span does.
    let agent = adapter_agent(json!({}));
    let machine = agent.start(text("hi"), false, 1).expect("valid");
    let mut machine = machine.with_trace(crate::agent::trace::TraceOptions::default());
    let mut adapter = Adapter::answering(vec![vec![answer(response("ok"))]]);
    assert!(adapter.drive(&mut machine).success());
    assert_eq!(adapter.traces[0]["type"], "llm_call");
    assert_eq!(adapter.traces[0]["model"], "fixture-model");
}

#[test]
fn the_configuration_declares_the_adapter() {
    let settings = |text: &str| AgentSettings::from_json(text).map_err(|e| e.to_string());
    let adapter = settings(
        r#"{"model": "m", "adapter": {"name": "mine",
                                      "capabilities": {"echoesReasoning": "own-issued"}}}"#,
    )
    .expect("valid")
    .adapter
    .expect("an adapter");
    assert_eq!(adapter.echoes_reasoning, Some(EchoesReasoning::OwnIssued));
    for (text, message) in [
        (
            r#"{"model": "m"}"#,
            "the agent configuration is not valid: missing field `provider`",
        ),
        (
            r#"{"model": "m", "adapter": {}}"#,
            "the agent configuration is not valid: missing field `adapter.name`",
        ),
        (
            r#"{"model": "m", "adapter": {"name": "a", "chat": 1}}"#,
            "the agent configuration is not valid: unknown field `adapter.chat`, expected one of `name`, `capabilities`",
        ),
        (
            r#"{"model": "m", "adapter": {"name": "a", "capabilities": {"echoesReasoning": "always"}}}"#,
            "the agent configuration is not valid: `adapter.capabilities.echoesReasoning` must be \"never\", \"own-issued\" or \"tool-use-only\"",
        ),
    ] {
        assert_eq!(settings(text).expect_err(text), message);
    }
    // The hook is shown the declaration; an external backend takes precedence, as in OMA.
    let (spec, _) = settings(r#"{"model": "m", "adapter": {"name": "mine"}}"#)
        .expect("valid")
        .into_spec()
        .expect("valid");
    let config: Value = serde_json::from_str(&spec.config_json).expect("JSON");
    assert_eq!(config["adapter"], json!({"name": "mine"}));
    assert!(config.get("provider").is_none());
    let (spec, _) = settings(
        r#"{"model": "m", "provider": "p", "adapter": {"name": "mine"}, "backend": {"kind": "acp"}}"#,
    )
    .expect("valid")
    .into_spec()
    .expect("valid");
    assert_eq!(spec.adapter, None);
}
