//! The run machine by value, with real wire formats: a scripted host answers each step, and
//! the requests it was asked to send are read back.

use std::collections::VecDeque;

use serde_json::{json, Value};

use super::*;
use crate::adapter::{Credentials, Endpoint};
use crate::agent::before_run::{BeforeRunResult, ExternalKind};
use crate::agent::config::AgentSettings;
use crate::agent::entry::{start_run_agent, Agent};
use crate::agent::exchange::{
    AgentEvent, EvaluationRecord, HookAnswer, ProgressEvent, ToolOutcome,
};
use crate::agent::input::PromptInput;
use crate::agent::outcome::outcome_json;
use crate::agent::structured::OutputSchema;
use crate::agent::turn::Event;
use crate::http::call::{CallAnswer, Outgoing};
use crate::http::{HttpResponse, TransportFailure, TransportFailureKind};
use crate::message::{
    ContentBlock, ImageBlock, MediaSource, Role, ToolResultBlock, ToolResultContent,
};

const KEY: &str = "sk-machine-SECRET-7fa1";
const NOW: u64 = 1_796_036_400_000;

/// An agent of `provider` whose calls make one attempt: these tests drive the machine, not a
/// provider's default retry policy (`http::call` tests that), so every failure ends its call.
fn settings(provider: &str) -> AgentSettings {
    let mut settings = AgentSettings {
        name: "helper".into(),
        model: "claude-x".into(),
        provider: provider.into(),
        endpoint: Endpoint {
            credentials: Credentials::ApiKey(KEY.into()),
            ..Endpoint::default()
        },
        ..AgentSettings::default()
    };
    settings.call.retry = Some(crate::retry::RetryPolicy::none());
    settings
}

fn spec() -> RunSpec {
    settings("anthropic")
        .into_spec()
        .expect("a known provider")
        .0
}

fn reply(text: &str, input: u64, output: u64) -> String {
    json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn", "usage": {"input_tokens": input, "output_tokens": output}
    })
    .to_string()
}

fn tool_reply(id: &str) -> String {
    json!({
        "id": "msg_t", "type": "message", "role": "assistant", "model": "claude-x",
        "content": [{"type": "tool_use", "id": id, "name": "lookup", "input": {"q": 1}}],
        "stop_reason": "tool_use", "usage": {"input_tokens": 5, "output_tokens": 5}
    })
    .to_string()
}

/// A host played from scripts, recording every step it was given.
#[derive(Default)]
struct Host {
    replies: VecDeque<(u16, String)>,
    hook: Option<HookAnswer>,
    tool: Option<ToolOutcome>,
    backend: Option<Result<String, String>>,
    sent: Vec<Outgoing>,
    hooks: Vec<BeforeRunContext>,
    tools: Vec<String>,
    external: Vec<String>,
    events: Vec<AgentEvent>,
    progress: Vec<ProgressEvent>,
    evaluations: Vec<EvaluationRecord>,
    waits: Vec<u64>,
    traces: Vec<crate::agent::trace::TraceEvent>,
    records: Vec<crate::agent::observability::record::Observed>,
    /// Values handed out to validate, and the verdicts given back in turn.
    validations: Vec<Value>,
    verdicts: VecDeque<Result<Value, String>>,
    /// The `custom` strategy's function.
    compress: Option<CompressFn>,
    /// What it was given: the number of messages and the estimate.
    compressions: Vec<(usize, u64)>,
    /// The `onLoopDetected` function's answers, in turn.
    loop_decisions: VecDeque<Result<String, String>>,
    /// The loops it was shown.
    loops: Vec<crate::agent::loop_detect::LoopInfo>,
}

type CompressFn = Box<dyn Fn(Vec<LlmMessage>) -> Result<Vec<LlmMessage>, Error>>;

impl Host {
    fn replying(replies: &[(u16, &str)]) -> Self {
        Host {
            replies: replies.iter().map(|(s, b)| (*s, (*b).to_owned())).collect(),
            ..Host::default()
        }
    }

    /// Steps `machine` to its end; the clock advances a millisecond per step.
    fn drive(&mut self, machine: &mut RunMachine) -> RunOutcome {
        let mut now = NOW;
        for _ in 0..10_000 {
            now += 1;
            let step = match machine.poll(now) {
                Poll::Step(step) => step,
                Poll::Finished(outcome) => {
                    assert_eq!(machine.poll(now), Poll::Over, "nothing after the outcome");
                    return *outcome;
                }
                other => panic!("a step while nothing is due, got {other:?}"),
            };
            let answer = match step {
                Step::Event(event) => {
                    self.events.push(event);
                    continue;
                }
                Step::Progress(event) => {
                    self.progress.push(event);
                    continue;
                }
                Step::Evaluation(record) => {
                    self.evaluations.push(*record);
                    continue;
                }
                Step::Trace(event) => {
                    self.traces.push(*event);
                    continue;
                }
                Step::Records(records) => {
                    assert!(!records.is_empty(), "a records step holds records");
                    self.records.extend(records);
                    continue;
                }
                Step::BeforeRun { context, .. } => {
                    self.hooks.push(context);
                    Answer::Hook(self.hook.clone().expect("a scripted hook"))
                }
                Step::Send(outgoing) => {
                    self.sent.push(outgoing);
                    let (status, body) = self.replies.pop_front().expect("a scripted reply");
                    Answer::Http(CallAnswer::Response(HttpResponse {
                        status,
                        headers: vec![],
                        body: body.into_bytes(),
                    }))
                }
                Step::Receive => panic!("whole responses need no reading"),
                Step::CallModel(_) => panic!("these agents have no adapter of their own"),
                Step::Wait(ms) => {
                    self.waits.push(ms);
                    Answer::Http(CallAnswer::Waited)
                }
                Step::CallTool(call) => {
                    self.tools.push(call.name.clone());
                    Answer::Tool {
                        id: call.id,
                        outcome: self.tool.clone().expect("a scripted tool"),
                    }
                }
                Step::External { text, .. } => {
                    self.external.push(text);
                    Answer::External(self.backend.clone().expect("a scripted backend"))
                }
                Step::Validate(value) => {
                    self.validations.push(value);
                    Answer::Validated(self.verdicts.pop_front().expect("a scripted verdict"))
                }
                Step::DecideLoop(info) => {
                    self.loops.push(info);
                    Answer::LoopDecision(self.loop_decisions.pop_front().expect("a decision"))
                }
                Step::Compress {
                    messages,
                    estimated_tokens,
                } => {
                    self.compressions.push((messages.len(), estimated_tokens));
                    let compress = self.compress.as_ref().expect("a scripted strategy");
                    Answer::Compressed(compress(messages))
                }
            };
            assert!(
                matches!(machine.poll(now), Poll::Waiting(due) if !due.is_empty()),
                "an answer is due"
            );
            machine.handle(answer).expect("the answer was asked for");
        }
        panic!("the run did not end");
    }

    /// Steps a run of many tool calls to its end, answering each call as soon as it is asked
    /// for (as the wasi step loop does); sends and tools only.
    fn drive_long(&mut self, machine: &mut RunMachine) -> RunOutcome {
        for _ in 0..1_000_000 {
            let answer = match machine.poll(NOW) {
                Poll::Finished(outcome) => return *outcome,
                Poll::Step(Step::Send(outgoing)) => {
                    self.sent.push(outgoing);
                    let (status, body) = self.replies.pop_front().expect("a scripted reply");
                    Answer::Http(CallAnswer::Response(HttpResponse {
                        status,
                        headers: vec![],
                        body: body.into_bytes(),
                    }))
                }
                Poll::Step(Step::CallTool(call)) => {
                    self.tools.push(call.name.clone());
                    Answer::Tool {
                        id: call.id,
                        outcome: self.tool.clone().expect("a scripted tool"),
                    }
                }
                Poll::Step(_) => continue,
                other => panic!("nothing should be due, got {other:?}"),
            };
            machine.handle(answer).expect("the answer was asked for");
        }
        panic!("the run did not end");
    }

    fn sent_bodies(&self) -> Vec<Value> {
        self.sent
            .iter()
            .map(|o| serde_json::from_str(&o.body).expect("JSON"))
            .collect()
    }
}

fn text(input: &str) -> RunInput {
    RunInput::Text(input.into())
}

#[test]
fn a_run_sends_the_input_and_returns_the_reply() {
    let agent = Agent::new(spec(), vec![]).expect("valid");
    let mut machine = agent.start(text("hi"), false, 1).expect("valid input");
    let mut host = Host::replying(&[(200, &reply("hello", 3, 2))]);
    let outcome = host.drive(&mut machine);
    assert!(outcome.success());
    assert_eq!(outcome.output, "hello");
    assert_eq!(outcome.turns, 1);
    assert_eq!(host.sent.len(), 1);
    assert_eq!(
        host.sent_bodies()[0]["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
    );
    assert!(host.sent[0]
        .headers
        .iter()
        .any(|(n, v)| n == "x-api-key" && v == KEY));
    assert_eq!(
        host.events,
        vec![AgentEvent::Turn(Event::Text("hello".into()))]
    );
    let value = outcome_json(&outcome);
    assert_eq!(value["success"], true);
    assert_eq!(
        value["tokenUsage"],
        json!({"input_tokens": 3, "output_tokens": 2})
    );
    assert!(value.get("status").is_none());
}

#[test]
fn a_prompt_commits_its_turn_and_reply_only_when_it_completes() {
    let mut agent = Agent::new(spec(), vec![]).expect("valid");
    let (turn, mut machine) = agent
        .start_prompt(PromptInput::Text("q".into()), 1)
        .expect("valid");
    assert!(
        agent.history().is_empty(),
        "nothing changes before the result"
    );
    let outcome = Host::replying(&[(200, &reply("a", 1, 1))]).drive(&mut machine);
    agent.commit(turn, &outcome);
    assert_eq!(agent.history().len(), 2);

    // A failed prompt keeps the user turn without a reply, as OMA does.
    let (turn, mut machine) = agent
        .start_prompt(PromptInput::Text("again".into()), 2)
        .expect("valid");
    let outcome = Host::replying(&[(400, "bad")]).drive(&mut machine);
    assert!(!outcome.success());
    agent.commit(turn, &outcome);
    assert_eq!(agent.history().len(), 3);
    assert_eq!(agent.history()[2], LlmMessage::user_text("again"));
}

#[test]
fn a_budget_stop_after_a_tool_call_leaves_history_valid() {
    let mut settings = settings("anthropic");
    settings.token_budget = Some(5);
    let (spec, _) = settings.into_spec().expect("valid");
    let mut agent = Agent::new(spec, vec![]).expect("valid");
    let (turn, mut machine) = agent
        .start_prompt(PromptInput::Text("q".into()), 1)
        .expect("valid");
    let outcome = Host::replying(&[(200, &tool_reply("t1"))]).drive(&mut machine);
    assert!(outcome.budget_exceeded());
    assert_eq!(outcome.messages.len(), 1, "the result keeps the turn");
    agent.commit(turn, &outcome);
    // The unanswered tool call is not kept: the next prompt would be refused by any provider.
    assert_eq!(agent.history(), [LlmMessage::user_text("q")]);
}

#[test]
fn a_run_past_its_deadline_ends_as_a_timeout() {
    let mut settings = settings("anthropic");
    settings.deadline_ms = Some(6);
    let (spec, _) = settings.into_spec().expect("valid");
    let agent = Agent::new(spec, vec![]).expect("valid");
    // A model that keeps calling tools; the host's clock moves a millisecond per step.
    let replies: Vec<(u16, String)> = (0..10)
        .map(|i| (200, tool_reply(&format!("t{i}"))))
        .collect();
    let mut host = Host {
        replies: replies.into_iter().collect(),
        tool: Some(ToolOutcome {
            content: ToolResultContent::Text("more".into()),
            is_error: None,
            gate: None,
        }),
        ..Host::default()
    };
    let mut machine = agent.start(text("q"), false, 1).expect("valid");
    let outcome = host.drive(&mut machine);
    let failure = outcome.failure().expect("failed");
    assert_eq!(
        failure.status.code,
        crate::agent::outcome::StatusCode::Timeout
    );
    assert_eq!(failure.error_info.name, "TimeoutError");
    assert!(host.sent.len() < 10, "the deadline stopped the loop");
    assert!(
        host.sent.iter().all(|o| o.timeout_ms <= 6),
        "no request outlives the run"
    );
}

#[test]
fn the_hook_rewrites_the_run_and_a_failing_hook_sends_nothing() {
    let mut spec = spec();
    spec.before_run = true;
    let agent = Agent::new(spec, vec![]).expect("valid");
    let mut machine = agent.start(text("hi"), false, 1).expect("valid");
    let mut host = Host::replying(&[(200, &reply("ok", 1, 1))]);
    host.hook = Some(HookAnswer::Result(BeforeRunResult {
        prompt: json!("hi (be brief)"),
        messages: None,
    }));
    assert!(host.drive(&mut machine).success());
    assert_eq!(host.hooks[0].prompt, "hi");
    assert_eq!(
        host.sent_bodies()[0]["messages"][0]["content"][0]["text"],
        "hi (be brief)"
    );

    let mut machine = agent.start(text("hi"), false, 1).expect("valid");
    let mut host = Host {
        hook: Some(HookAnswer::Failed("hook exploded".into())),
        ..Host::default()
    };
    let outcome = host.drive(&mut machine);
    assert_eq!(outcome.output, "hook exploded");
    let failure = outcome.failure().expect("failed");
    assert_eq!(
        failure.error_info.kind,
        crate::agent::outcome::FailureKind::Callback
    );
    assert!(host.sent.is_empty());
}

#[test]
fn external_backends_get_text_and_fail_as_results() {
    let mut settings = settings("anthropic");
    settings.external = Some(ExternalKind::Process);
    settings.system_prompt = Some("be brief".into());
    let (spec, _) = settings.into_spec().expect("valid");
    let agent = Agent::new(spec, vec![]).expect("valid");
    let mut host = Host {
        backend: Some(Ok("done".into())),
        ..Host::default()
    };
    let outcome = host.drive(&mut agent.start(text("task"), false, 1).expect("valid"));
    assert_eq!(outcome.output, "done");
    assert_eq!(host.external, ["be brief\n\ntask"]);
    let mut host = Host {
        backend: Some(Err("process exited with 1".into())),
        ..Host::default()
    };
    let outcome = host.drive(&mut agent.start(text("task"), false, 1).expect("valid"));
    assert!(!outcome.success());
    assert_eq!(outcome.output, "process exited with 1");
}

#[test]
fn tool_loops_and_broken_tool_answers() {
    let agent = Agent::new(spec(), vec![]).expect("valid");
    let mut host = Host::replying(&[(200, &tool_reply("t1")), (200, &reply("done", 1, 1))]);
    host.tool = Some(ToolOutcome {
        content: ToolResultContent::Text("42".into()),
        is_error: None,
        gate: None,
    });
    let outcome = host.drive(&mut agent.start(text("q"), false, 1).expect("valid"));
    assert!(outcome.success());
    assert_eq!(outcome.turns, 2);
    assert_eq!(host.tools, ["lookup"]);
    assert_eq!(
        host.sent_bodies()[1]["messages"][2]["content"][0]["content"],
        "42"
    );

    // An answer that breaks OMA's rules ends the run before the next request.
    let mut host = Host::replying(&[(200, &tool_reply("t1"))]);
    host.tool = Some(ToolOutcome {
        content: ToolResultContent::Parts(vec![]),
        is_error: None,
        gate: None,
    });
    let outcome = host.drive(&mut agent.start(text("q"), false, 1).expect("valid"));
    assert_eq!(
        outcome.output,
        "messages[2].content[0].content must not be an empty content-part array"
    );
    assert_eq!(host.sent.len(), 1);
}

/// OMA's result block carries the tool's `isError` as the tool said it: `false` is sent as
/// `is_error: false`, an absent one leaves the field out, in the request and the run's messages.
#[test]
fn a_tools_is_error_travels_as_the_tool_said_it() {
    let agent = Agent::new(spec(), vec![]).expect("valid");
    for (said, expected) in [
        (None, None),
        (Some(false), Some(json!(false))),
        (Some(true), Some(json!(true))),
    ] {
        let mut host = Host::replying(&[(200, &tool_reply("t1")), (200, &reply("done", 1, 1))]);
        host.tool = Some(ToolOutcome {
            content: ToolResultContent::Text("42".into()),
            is_error: said,
            gate: None,
        });
        let outcome = host.drive(&mut agent.start(text("q"), false, 1).expect("valid"));
        assert!(outcome.success());
        let block = &host.sent_bodies()[1]["messages"][2]["content"][0];
        assert_eq!(block.get("is_error").cloned(), expected, "{said:?}");
        let messages = crate::json::messages_to_value(&outcome.messages);
        assert_eq!(messages[1]["content"][0].get("is_error").cloned(), expected);
        assert_eq!(outcome.tool_calls[0].is_error, said == Some(true));
    }
}

#[test]
fn retries_are_waits_the_host_performs() {
    let mut settings = settings("anthropic");
    settings.call.retry = Some(crate::retry::RetryPolicy {
        max_attempts: 3,
        base_delay_ms: 10,
        backoff: 2.0,
        ..crate::retry::RetryPolicy::default()
    });
    let (spec, _) = settings.into_spec().expect("valid");
    let agent = Agent::new(spec, vec![]).expect("valid");
    let mut host = Host::replying(&[(503, "busy"), (529, "busy"), (200, &reply("ok", 1, 1))]);
    let outcome = host.drive(&mut agent.start(text("q"), false, 9).expect("valid"));
    assert!(outcome.success(), "{outcome:?}");
    assert_eq!(host.waits.len(), 2);
    assert!((5..=10).contains(&host.waits[0]) && (10..=20).contains(&host.waits[1]));
    let attempts: Vec<u32> = host.sent.iter().map(|o| o.attempt).collect();
    assert_eq!(attempts, [1, 2, 3]);
    // The same seed draws the same jitter.
    let mut again = Host::replying(&[(503, "busy"), (529, "busy"), (200, &reply("ok", 1, 1))]);
    again.drive(&mut agent.start(text("q"), false, 9).expect("valid"));
    assert_eq!(again.waits, host.waits);
}

#[test]
fn run_agent_reports_progress_and_evaluation_in_order() {
    let input = RunInput::Text("q".into());
    let mut machine = start_run_agent(
        spec(),
        input,
        true,
        Some((crate::agent::evaluation::StorePayloads::Full, 1.0)),
        1,
    )
    .expect("valid");
    let mut host = Host::replying(&[(200, &reply("a", 1, 1))]);
    let outcome = host.drive(&mut machine);
    let kinds: Vec<&str> = host.progress.iter().map(|p| p.kind).collect();
    assert_eq!(kinds, ["agent_start", "agent_complete"]);
    assert_eq!(host.progress[1].data, outcome_json(&outcome));
    assert_eq!(host.evaluations.len(), 1);
    assert!(
        host.evaluations[0].duration_ms > 0,
        "the host's clock moved"
    );
    assert_eq!(host.evaluations[0].input, "q");
}

#[test]
fn time_comes_from_the_host() {
    // Gemini makes up ids from the time; the machine's only clock is the one it is given.
    let agent =
        Agent::new(settings("gemini").into_spec().expect("valid").0, vec![]).expect("valid");
    let body = json!({
        "candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": {}}}]},
                        "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1}
    })
    .to_string();
    let mut host = Host::replying(&[(200, &body), (200, &body)]);
    host.tool = Some(ToolOutcome {
        content: ToolResultContent::Text("x".into()),
        is_error: None,
        gate: None,
    });
    let mut machine = agent.start(text("q"), false, 1).expect("valid");
    machine.run.spec.turn.max_turns = 1;
    let outcome = host.drive(&mut machine);
    let id = match &outcome.messages[0].content[0] {
        ContentBlock::ToolUse(call) => call.id.clone(),
        other => panic!("expected a tool call, got {other:?}"),
    };
    assert!(
        id.starts_with(&format!("gemini-{}", NOW / 1_000_000)),
        "{id}"
    );
}

#[test]
fn answers_that_were_not_asked_for_are_refused_and_change_nothing() {
    let agent = Agent::new(spec(), vec![]).expect("valid");
    let mut machine = agent.start(text("q"), false, 1).expect("valid");
    let tool = Answer::Tool {
        id: "t1".into(),
        outcome: ToolOutcome {
            content: ToolResultContent::Text("x".into()),
            is_error: None,
            gate: None,
        },
    };
    // Before the first step.
    assert_eq!(
        machine
            .handle(tool.clone())
            .expect_err("nothing asked")
            .reason
            .name(),
        "SessionStateError"
    );
    let Poll::Step(Step::Send(_)) = machine.poll(NOW) else {
        panic!("expected a send");
    };
    assert_eq!(machine.due(), vec![Due::Http]);
    assert_eq!(machine.poll(NOW), Poll::Waiting(vec![Due::Http]));
    for wrong in [
        tool.clone(),
        Answer::Hook(HookAnswer::Failed("x".into())),
        Answer::External(Ok("x".into())),
        Answer::Http(CallAnswer::Waited),
    ] {
        let error = machine.handle(wrong.clone()).expect_err("not due");
        assert_eq!(error.reason.code(), Some("SESSION_STATE"), "{error}");
        assert_eq!(
            error.answer, wrong,
            "a refused answer is handed back as it was"
        );
    }
    machine
        .handle(Answer::Http(CallAnswer::Response(HttpResponse {
            status: 200,
            headers: vec![],
            body: tool_reply("t1").into_bytes(),
        })))
        .expect("the right answer still works");
    // The turn's events, then the tool call.
    let mut steps = Vec::new();
    while let Poll::Step(step) = machine.poll(NOW) {
        steps.push(step);
    }
    assert!(matches!(steps.last(), Some(Step::CallTool(_))), "{steps:?}");
    let unknown = Answer::Tool {
        id: "nope".into(),
        outcome: ToolOutcome {
            content: ToolResultContent::Text("x".into()),
            is_error: None,
            gate: None,
        },
    };
    let error = machine.handle(unknown).expect_err("unknown id");
    assert!(error.to_string().contains("\"nope\""), "{error}");
    machine.handle(tool.clone()).expect("the call's answer");
    assert_eq!(
        machine
            .handle(tool)
            .expect_err("a second answer")
            .reason
            .name(),
        "SessionStateError"
    );
    machine
        .handle(Answer::Http(CallAnswer::Failure(TransportFailure::new(
            TransportFailureKind::Reset,
            "gone",
        ))))
        .expect_err("the next request was not handed out yet");
    let second = loop {
        match machine.poll(NOW) {
            Poll::Step(Step::Send(outgoing)) => break outgoing,
            Poll::Step(Step::Event(_)) => {}
            other => panic!("expected the second request, got {other:?}"),
        }
    };
    assert_eq!(second.attempt, 1);
    machine
        .handle(Answer::Http(CallAnswer::Failure(TransportFailure::new(
            TransportFailureKind::Reset,
            "gone",
        ))))
        .expect("due");
    let outcome = loop {
        match machine.poll(NOW) {
            Poll::Finished(outcome) => break *outcome,
            Poll::Step(_) => {}
            Poll::Waiting(_) | Poll::Over => panic!("the run must end"),
        }
    };
    assert_eq!(outcome.output, "transport error: gone");
    assert!(matches!(machine.poll(NOW), Poll::Waiting(_) | Poll::Over));
    assert!(machine
        .handle(Answer::Http(CallAnswer::End))
        .expect_err("after the result")
        .to_string()
        .contains("over"));
}

#[test]
fn streaming_turns_deliver_deltas_before_the_turn() {
    let agent = Agent::new(spec(), vec![]).expect("valid");
    let mut machine = agent.start(text("q"), true, 1).expect("valid");
    let Poll::Step(Step::Send(outgoing)) = machine.poll(NOW) else {
        panic!("expected a send");
    };
    assert!(outgoing.stream);
    let body: String = [
        r#"{"type":"message_start","message":{"id":"m","model":"c","usage":{"input_tokens":3,"output_tokens":1}}}"#,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"he"}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"llo"}}"#,
        r#"{"type":"content_block_stop","index":0}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}"#,
        r#"{"type":"message_stop"}"#,
    ]
    .iter()
    .map(|event| format!("data: {event}\n\n"))
    .collect();
    machine
        .handle(Answer::Http(CallAnswer::Head {
            status: 200,
            headers: vec![],
        }))
        .expect("due");
    let mut chunks = body.as_bytes().chunks(10);
    let mut events = Vec::new();
    let outcome = loop {
        match machine.poll(NOW) {
            Poll::Step(Step::Receive) => {
                let answer = chunks
                    .next()
                    .map_or(CallAnswer::End, |c| CallAnswer::Chunk(c.to_vec()));
                machine.handle(Answer::Http(answer)).expect("due");
            }
            Poll::Step(Step::Event(event)) => events.push(event),
            Poll::Finished(outcome) => break *outcome,
            other => panic!("unexpected {other:?}"),
        }
    };
    assert_eq!(
        events,
        vec![
            AgentEvent::TextDelta("he".into()),
            AgentEvent::TextDelta("llo".into()),
            AgentEvent::Turn(Event::Text("hello".into())),
        ]
    );
    assert_eq!(outcome.output, "hello");
}

#[test]
fn invalid_input_fails_before_any_step_and_images_pass_unchanged() {
    let agent = Agent::new(spec(), vec![]).expect("valid");
    let bad = RunInput::Messages(vec![LlmMessage {
        role: Role::User,
        content: vec![ContentBlock::ToolResult(ToolResultBlock {
            tool_use_id: "t".into(),
            content: ToolResultContent::Parts(vec![]),
            is_error: None,
        })],
    }]);
    assert_eq!(
        agent.start(bad, false, 1).expect_err("invalid").name(),
        "InvalidMessageError"
    );
    let image = RunInput::Messages(vec![LlmMessage {
        role: Role::User,
        content: vec![ContentBlock::Image(ImageBlock {
            source: MediaSource::Base64 {
                media_type: "image/png".into(),
                data: "aGk=".into(),
            },
        })],
    }]);
    let mut host = Host::replying(&[(200, &reply("an image", 1, 1))]);
    host.drive(&mut agent.start(image, false, 1).expect("valid"));
    assert_eq!(
        host.sent_bodies()[0]["messages"][0]["content"][0]["source"]["data"],
        "aGk="
    );
}

fn two_tools_reply() -> String {
    json!({
        "id": "msg_t", "type": "message", "role": "assistant", "model": "claude-x",
        "content": [
            {"type": "tool_use", "id": "a", "name": "lookup", "input": {"q": 1}},
            {"type": "tool_use", "id": "b", "name": "lookup", "input": {"q": 2}}
        ],
        "stop_reason": "tool_use", "usage": {"input_tokens": 5, "output_tokens": 5}
    })
    .to_string()
}

fn answer_ok(body: String) -> Answer {
    Answer::Http(CallAnswer::Response(HttpResponse {
        status: 200,
        headers: vec![],
        body: body.into_bytes(),
    }))
}

fn tool_answer(id: &str) -> Answer {
    Answer::Tool {
        id: id.into(),
        outcome: ToolOutcome {
            content: ToolResultContent::Text(format!("result {id}")),
            is_error: None,
            gate: None,
        },
    }
}

/// Steps out everything that needs no answer; returns what the poll ended on.
fn settle(machine: &mut RunMachine, now: u64) -> (Vec<Step>, Poll) {
    let mut steps = Vec::new();
    loop {
        match machine.poll(now) {
            Poll::Step(
                step @ (Step::Event(_) | Step::Progress(_) | Step::Evaluation(_) | Step::Trace(_)),
            ) => steps.push(step),
            other => return (steps, other),
        }
    }
}

#[test]
fn poll_says_which_answers_are_due() {
    let agent = Agent::new(spec(), vec![]).expect("valid");
    let mut machine = agent.start(text("q"), false, 1).expect("valid");
    assert!(machine.due().is_empty(), "nothing before the first poll");
    let Poll::Step(Step::Send(_)) = machine.poll(NOW) else {
        panic!("expected a send");
    };
    assert_eq!(machine.poll(NOW), Poll::Waiting(vec![Due::Http]));
    machine
        .handle(answer_ok(two_tools_reply()))
        .expect("the response is due");
    let (_, first) = settle(&mut machine, NOW);
    let (_, second) = settle(&mut machine, NOW);
    assert!(
        matches!(first, Poll::Step(Step::CallTool(ref c)) if c.id == "a"),
        "{first:?}"
    );
    assert!(
        matches!(second, Poll::Step(Step::CallTool(ref c)) if c.id == "b"),
        "{second:?}"
    );
    assert_eq!(
        machine.poll(NOW),
        Poll::Waiting(vec![Due::Tool("a".into()), Due::Tool("b".into())]),
        "both calls are due at once, so a host may run them concurrently"
    );
    machine.handle(tool_answer("b")).expect("b is due");
    assert_eq!(
        machine.poll(NOW),
        Poll::Waiting(vec![Due::Tool("a".into())])
    );
    machine.handle(tool_answer("a")).expect("a is due");
    let (_, next) = settle(&mut machine, NOW);
    assert!(matches!(next, Poll::Step(Step::Send(_))), "{next:?}");
    machine
        .handle(answer_ok(reply("done", 1, 1)))
        .expect("the response is due");
    let (_, end) = settle(&mut machine, NOW);
    let Poll::Finished(outcome) = end else {
        panic!("expected the outcome, got {end:?}");
    };
    assert!(outcome.success());
    assert_eq!(machine.poll(NOW), Poll::Over);
    assert_eq!(machine.wake_at(), None, "a finished run needs no time");
}

#[test]
fn a_tool_that_outlives_the_deadline_ends_the_run_with_a_timeout() {
    let mut settings = settings("anthropic");
    settings.deadline_ms = Some(1_000);
    let (spec, _) = settings.into_spec().expect("valid");
    let agent = Agent::new(spec, vec![]).expect("valid");
    let mut machine = agent.start(text("q"), false, 1).expect("valid");
    assert_eq!(
        machine.wake_at(),
        None,
        "the clock starts at the first poll"
    );
    let Poll::Step(Step::Send(_)) = machine.poll(NOW) else {
        panic!("expected a send");
    };
    assert_eq!(machine.wake_at(), Some(NOW + 1_000));
    machine
        .handle(answer_ok(tool_reply("t1")))
        .expect("the response is due");
    let (_, call) = settle(&mut machine, NOW + 10);
    assert!(matches!(call, Poll::Step(Step::CallTool(_))), "{call:?}");
    assert_eq!(
        machine.poll(NOW + 999),
        Poll::Waiting(vec![Due::Tool("t1".into())])
    );
    // The host polls at the instant the machine asked for, the tool still running.
    let wake = machine.wake_at().expect("a deadline");
    let (_, end) = settle(&mut machine, wake);
    let Poll::Finished(outcome) = end else {
        panic!("expected the outcome, got {end:?}");
    };
    let failure = outcome.failure().expect("failed");
    assert_eq!(
        failure.status.code,
        crate::agent::outcome::StatusCode::Timeout
    );
    assert_eq!(failure.error_info.name, "TimeoutError");
    assert_eq!(
        failure.error_info.kind,
        crate::agent::outcome::FailureKind::Timeout
    );
    // The tool's late answer is handed back: the run is over.
    let late = machine.handle(tool_answer("t1")).expect_err("too late");
    assert_eq!(late.answer, tool_answer("t1"));
    assert!(late.to_string().contains("over"), "{late}");
}

#[test]
fn wake_at_covers_a_retry_wait() {
    let mut settings = settings("anthropic");
    settings.call.retry = Some(crate::retry::RetryPolicy::from_oma(1, Some(250.0), None));
    let (spec, _) = settings.into_spec().expect("valid");
    let agent = Agent::new(spec, vec![]).expect("valid");
    let mut machine = agent.start(text("q"), false, 1).expect("valid");
    let Poll::Step(Step::Send(_)) = machine.poll(NOW) else {
        panic!("expected a send");
    };
    machine
        .handle(Answer::Http(CallAnswer::Response(HttpResponse {
            status: 503,
            headers: vec![],
            body: br#"{"type":"error","error":{"type":"overloaded_error","message":"busy"}}"#
                .to_vec(),
        })))
        .expect("the response is due");
    let (_, wait) = settle(&mut machine, NOW + 5);
    let Poll::Step(Step::Wait(ms)) = wait else {
        panic!("expected a retry wait, got {wait:?}");
    };
    let deadline = NOW + crate::http::Limits::default().deadline_ms;
    assert_eq!(machine.wake_at(), Some((NOW + 5 + ms).min(deadline)));
    machine
        .handle(Answer::Http(CallAnswer::Waited))
        .expect("the wait is due");
    assert_eq!(
        machine.wake_at(),
        settings_deadline(&machine),
        "the wait is over"
    );
}

fn settings_deadline(machine: &RunMachine) -> Option<u64> {
    machine.run.spec.deadline_ms.map(|deadline| NOW + deadline)
}

#[test]
fn a_run_in_flight_can_move_between_threads() {
    fn is_send<T: Send>() {}
    is_send::<RunMachine>();
    is_send::<crate::http::call::Call>();
}

/// A response with more tool calls than a response may carry ends the run with a typed,
/// terminal provider error before any tool is called or another request sent; one at the
/// limit runs all its calls in one turn.
#[test]
fn a_response_past_the_tool_call_limit_is_refused_before_any_tool_runs() {
    use crate::limits::MAX_TOOL_CALLS;
    let calls = |n: usize| {
        let content: Vec<Value> = (0..n)
            .map(|i| json!({"type": "tool_use", "id": format!("t{i}"), "name": "lookup", "input": {}}))
            .collect();
        json!({"id": "m", "type": "message", "role": "assistant", "model": "claude-x",
               "content": content, "stop_reason": "tool_use",
               "usage": {"input_tokens": 1, "output_tokens": 1}})
        .to_string()
    };
    let agent = Agent::new(spec(), vec![]).expect("valid");
    let too_many = calls(MAX_TOOL_CALLS + 1);
    let mut host = Host::replying(&[(200, too_many.as_str())]);
    host.tool = Some(ToolOutcome {
        content: ToolResultContent::Text("42".into()),
        is_error: None,
        gate: None,
    });
    let outcome = host.drive(&mut agent.start(text("q"), false, 1).expect("valid"));
    assert!(!outcome.success());
    assert!(host.tools.is_empty(), "no tool ran");
    assert_eq!(host.sent.len(), 1, "nothing retried");
    assert_eq!(
        outcome.output,
        "200 the response is too large: 4097 tool calls, more than the 4096 a response may carry"
    );

    let at_limit = calls(MAX_TOOL_CALLS);
    let done = reply("done", 1, 1);
    let mut host = Host::replying(&[(200, at_limit.as_str()), (200, done.as_str())]);
    host.tool = Some(ToolOutcome {
        content: ToolResultContent::Text("42".into()),
        is_error: None,
        gate: None,
    });
    let outcome = host.drive_long(&mut agent.start(text("q"), false, 1).expect("valid"));
    assert!(outcome.success(), "{}", outcome.output);
    assert_eq!(host.tools.len(), MAX_TOOL_CALLS);
    let sent = host.sent_bodies();
    assert_eq!(
        sent[1]["messages"][2]["content"].as_array().map(Vec::len),
        Some(MAX_TOOL_CALLS)
    );
}

/// OMA's trace events: an `llm_call` per answered model call, a `tool_call` per answered tool
/// call with its input redacted, the `agent` event last; ids from the options or the seed, times
/// from the polls.
#[test]
fn a_traced_run_hands_out_omas_trace_events() {
    use crate::agent::trace::{TraceData, TraceOptions};
    let tool = tool_reply("call_1");
    let answer = reply("done", 7, 3);
    let mut host = Host::replying(&[(200, tool.as_str()), (200, answer.as_str())]);
    host.tool = Some(ToolOutcome {
        content: ToolResultContent::Text("token=abcdef123456 found".into()),
        is_error: None,
        gate: None,
    });
    let options = TraceOptions {
        run_id: Some("run-7".into()),
        parent_id: Some("outer".into()),
        ..TraceOptions::default()
    };
    let mut machine = RunMachine::run(spec(), vec![LlmMessage::user_text("hi")], false, 9)
        .with_trace(options.clone());
    let outcome = host.drive(&mut machine);
    assert!(outcome.failure().is_none(), "{outcome:?}");
    let kinds: Vec<&str> = host.traces.iter().map(|e| e.kind()).collect();
    assert_eq!(kinds, ["llm_call", "tool_call", "llm_call", "agent"]);
    let agent = host.traces.last().expect("agent");
    assert!(host.traces.iter().all(|e| e.run_id == "run-7"));
    assert_eq!(agent.parent_id.as_deref(), Some("outer"));
    for event in &host.traces[..3] {
        assert_eq!(event.parent_id.as_deref(), Some(agent.span_id.as_str()));
        assert_ne!(event.span_id, agent.span_id);
        assert!(event.start_ms >= agent.start_ms && event.end_ms <= agent.end_ms);
        assert!(event.end_ms > event.start_ms, "{event:?}");
    }
    assert_eq!(agent.start_ms, NOW + 1, "from the first poll");
    match &host.traces[0].data {
        TraceData::LlmCall {
            model,
            turn,
            tokens,
            ..
        } => {
            assert_eq!(
                (model.as_str(), *turn, tokens.input_tokens),
                ("claude-x", 1, 5)
            );
        }
        other => panic!("{other:?}"),
    }
    match &host.traces[1].data {
        TraceData::ToolCall {
            tool,
            is_error,
            input,
            output,
            gate,
        } => {
            assert_eq!(gate, &None, "no gate decided this call");
            assert_eq!(tool, "lookup");
            assert!(!is_error);
            assert_eq!(input, &json!({"q": 1}));
            assert_eq!(output, "token=[redacted]");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        host.traces[2].data,
        TraceData::LlmCall { turn: 2, .. }
    ));
    match &agent.data {
        TraceData::Agent {
            turns,
            tokens,
            tool_calls,
        } => {
            assert_eq!((*turns, *tool_calls), (2, 1));
            assert_eq!(tokens.input_tokens, 12);
        }
        other => panic!("{other:?}"),
    }
    // The same seed and options give the same ids; the run's other draws are untouched.
    let mut again = Host::replying(&[(200, tool.as_str()), (200, answer.as_str())]);
    again.tool = host.tool.clone();
    let mut twin =
        RunMachine::run(spec(), vec![LlmMessage::user_text("hi")], false, 9).with_trace(options);
    again.drive(&mut twin);
    assert_eq!(again.traces, host.traces);
    let mut plain = Host::replying(&[(200, tool.as_str()), (200, answer.as_str())]);
    plain.tool = host.tool.clone();
    let mut untraced = RunMachine::run(spec(), vec![LlmMessage::user_text("hi")], false, 9);
    plain.drive(&mut untraced);
    assert!(plain.traces.is_empty());
    assert_eq!(plain.sent, host.sent, "tracing changes no request");
}

/// A failed model call has no `llm_call` event; the run's `agent` event still comes.
#[test]
fn a_failed_call_has_no_llm_call_event() {
    let mut host = Host::replying(&[(
        400,
        r#"{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}"#,
    )]);
    let mut machine = RunMachine::run(spec(), vec![LlmMessage::user_text("hi")], false, 1)
        .with_trace(crate::agent::trace::TraceOptions::default());
    let outcome = host.drive(&mut machine);
    assert!(outcome.failure().is_some());
    let kinds: Vec<&str> = host.traces.iter().map(|e| e.kind()).collect();
    assert_eq!(kinds, ["agent"]);
    assert_eq!(host.traces[0].run_id.len(), 36, "a made-up UUID");
}

/// The shared structured-output table (`fixtures/structured-output.json`), natively.
#[test]
fn structured_output_fixtures() {
    let table: Value = serde_json::from_str(include_str!(
        "../../../../../fixtures/structured-output.json"
    ))
    .expect("JSON");
    for case in table["cases"].as_array().expect("cases") {
        let name = case["name"].as_str().expect("a name");
        let expect = &case["expect"];
        let mut settings = settings("anthropic");
        settings.system_prompt = case["systemPrompt"].as_str().map(str::to_owned);
        settings.output_schema =
            Some(OutputSchema::new(case["schema"].clone(), false).expect("a schema"));
        let (spec, _) = settings.into_spec().expect("valid");
        let replies: Vec<(u16, String)> = case["answers"]
            .as_array()
            .expect("answers")
            .iter()
            .map(|a| (200, reply(a.as_str().expect("text"), 10, 5)))
            .collect();
        let mut host = Host {
            replies: replies.into_iter().collect(),
            ..Host::default()
        };
        let mut machine = RunMachine::run(spec, vec![LlmMessage::user_text("Rate it.")], false, 3);
        let outcome = host.drive(&mut machine);
        assert_eq!(outcome.success(), expect["success"], "{name}");
        assert_eq!(
            outcome.structured.clone().unwrap_or(Value::Null),
            expect["structured"],
            "{name}"
        );
        assert_eq!(outcome.output, expect["output"], "{name}");
        assert_eq!(host.sent.len() as u64, expect["requests"], "{name}");
        assert_eq!(
            json!([
                outcome.token_usage.input_tokens,
                outcome.token_usage.output_tokens
            ]),
            expect["tokens"],
            "{name}"
        );
        let bodies = host.sent_bodies();
        let system = format!(
            "{}\n\n## Output Format (REQUIRED)\n",
            case["systemPrompt"].as_str().expect("text")
        );
        for body in &bodies {
            assert!(
                body["system"]
                    .as_str()
                    .expect("a system prompt")
                    .starts_with(&system),
                "{name}"
            );
        }
        if let Some(feedback) = expect["feedback"].as_str() {
            let last = bodies[1]["messages"]
                .as_array()
                .expect("messages")
                .last()
                .cloned();
            let text = last.as_ref().map(|m| m["content"][0]["text"].clone());
            let text = text
                .as_ref()
                .and_then(Value::as_str)
                .expect("a feedback turn");
            assert!(text.starts_with("Your previous response did not produce valid JSON"));
            assert!(text.contains(feedback), "{name}: {text}");
            // The retry repeats the input, the first answer, then the feedback.
            assert_eq!(bodies[1]["messages"].as_array().map(Vec::len), Some(3));
            assert_eq!(outcome.messages.len(), 3, "{name}");
        }
        let written = outcome_json(&outcome);
        if let Some(info) = expect["errorInfo"].as_object() {
            for (key, value) in info {
                assert_eq!(&written["errorInfo"][key], value, "{name}: {key}");
            }
        }
        assert_eq!(
            written.get("structured").cloned().unwrap_or(Value::Null),
            expect["structured"],
            "{name}"
        );
    }
    for bad in table["badSchemas"].as_array().expect("bad schemas") {
        let config = json!({"name": "a", "model": "m", "provider": "anthropic", "outputSchema": bad["schema"]});
        let err = AgentSettings::from_json(&config.to_string()).expect_err("refused");
        let message = err.to_string();
        assert!(message.contains("outputSchema"), "{message}");
        assert!(
            message.contains(bad["error"].as_str().expect("text")),
            "{message}"
        );
    }
}

/// A host that validates gets the extracted value and its verdict decides; the budget counts
/// both attempts.
#[test]
fn host_verdicts_streams_and_the_merged_budget() {
    let mut validated = settings("anthropic");
    validated.output_schema =
        Some(OutputSchema::new(json!({"type": "object"}), true).expect("a schema"));
    let (spec, _) = validated.into_spec().expect("valid");
    let mut host = Host::replying(&[
        (200, &reply("{\"a\": 1}", 1, 1)),
        (200, &reply("[2]", 1, 1)),
    ]);
    host.verdicts = VecDeque::from([
        Err("Output validation failed:\n  - a: Expected string, received number".into()),
        Ok(json!(["two"])),
    ]);
    let mut machine = RunMachine::run(spec, vec![LlmMessage::user_text("q")], false, 1);
    let outcome = host.drive(&mut machine);
    assert_eq!(host.validations, vec![json!({"a": 1}), json!([2])]);
    assert!(outcome.success());
    assert_eq!(outcome.structured, Some(json!(["two"])));
    assert_eq!(outcome.turns, 2);

    // Over the budget once both attempts are counted: OMA's budget failure, merged.
    let mut budgeted = settings("anthropic");
    budgeted.output_schema =
        Some(OutputSchema::new(json!({"type": "object"}), false).expect("a schema"));
    budgeted.token_budget = Some(15);
    let (spec, _) = budgeted.into_spec().expect("valid");
    let mut host = Host::replying(&[(200, &reply("no", 5, 5)), (200, &reply("{}", 5, 5))]);
    let mut machine = RunMachine::run(spec, vec![LlmMessage::user_text("q")], false, 1);
    let outcome = host.drive(&mut machine);
    assert!(outcome.budget_exceeded());
    assert_eq!(outcome.structured, None);
    assert_eq!(outcome.output, "{}");
    assert_eq!(outcome.messages.len(), 3);
    assert_eq!(
        outcome.failure().map(|f| f.error_info.message.as_str()),
        Some("Agent \"helper\" exceeded token budget: 20 tokens used (budget: 15)")
    );
}

/// OMA's `summarize` strategy: past `maxTokens`, a summary request of its own (the summary
/// model, no tools, not streamed, traced as phase `summary` with the turn it prepares) comes
/// before the turn's request, which then carries the first user message as it was (its media
/// kept) and the recent turns with the summary before them; the old turns' media reaches the
/// summary request as placeholders only; the summary's usage counts.
#[test]
fn summarize_asks_the_model_for_a_summary_before_the_turn() {
    use crate::agent::context::{ContextStrategy, Summarize};
    use crate::agent::trace::{LlmPhase, TraceData, TraceOptions};
    use crate::message::{MediaSource, TextBlock, VideoBlock};
    let mut settings = settings("anthropic");
    settings.context.strategy = Some(ContextStrategy::Summarize(Summarize {
        max_tokens: 10,
        summary_model: Some("claude-mini".into()),
    }));
    settings.tools = vec![crate::adapter::ToolDefinition {
        name: "lookup".into(),
        description: "d".into(),
        input_schema: json!({"type": "object"}),
    }];
    let spec = settings.into_spec().expect("valid").0;
    let image = ContentBlock::Image(ImageBlock {
        source: MediaSource::Base64 {
            media_type: "image/png".into(),
            data: "iVBORw0KGgo=".into(),
        },
    });
    let video = ContentBlock::Video(VideoBlock {
        source: MediaSource::Base64 {
            media_type: "video/mp4".into(),
            data: "AAAAIGZ0eXBpc29t".into(),
        },
    });
    let text_block = |t: &str| ContentBlock::Text(TextBlock { text: t.into() });
    let messages = vec![
        LlmMessage {
            role: Role::User,
            content: vec![image.clone(), text_block("first question")],
        },
        LlmMessage {
            role: Role::Assistant,
            content: vec![text_block(&"an old and long answer ".repeat(4))],
        },
        LlmMessage {
            role: Role::User,
            content: vec![text_block("and this clip?"), video],
        },
        LlmMessage {
            role: Role::Assistant,
            content: vec![text_block("a recent answer")],
        },
        LlmMessage::user_text("the latest question"),
    ];
    let streamed: String = [
        r#"{"type":"message_start","message":{"id":"m","model":"c","usage":{"input_tokens":20,"output_tokens":0}}}"#,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"done"}}"#,
        r#"{"type":"content_block_stop","index":0}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}"#,
        r#"{"type":"message_stop"}"#,
    ]
    .iter()
    .map(|event| format!("data: {event}\n\n"))
    .collect();
    let mut host = Host::replying(&[
        (200, &reply("  - the user asked twice  ", 11, 4)),
        (200, &streamed),
    ]);
    let options = TraceOptions::default();
    let mut machine = RunMachine::run(spec.clone(), messages.clone(), true, 3).with_trace(options);
    let outcome = host.drive(&mut machine);
    assert!(outcome.success(), "{outcome:?}");
    let bodies = host.sent_bodies();
    assert_eq!(bodies.len(), 2);
    let summary = &bodies[0];
    assert_eq!(summary["model"], "claude-mini");
    assert!(
        summary.get("tools").is_none() && summary.get("stream").is_none(),
        "{summary}"
    );
    assert_eq!(summary["messages"].as_array().map(Vec::len), Some(1));
    let prompt = &summary["messages"][0]["content"];
    assert_eq!(
        prompt[0]["text"],
        crate::agent::context::SUMMARY_INSTRUCTION
    );
    let conversation = prompt[1]["text"].as_str().expect("text");
    assert!(conversation.starts_with("\n\nConversation:\n{\"role\":\"assistant\""));
    assert!(
        conversation.contains(r#"{"type":"text","text":"[video: video/mp4]"}"#),
        "{conversation}"
    );
    assert!(!conversation.contains("AAAAIGZ0eXBpc29t") && !conversation.contains("recent"));
    let turn = &bodies[1];
    assert_eq!(turn["model"], "claude-x");
    assert_eq!(turn["stream"], true);
    assert!(turn.get("tools").is_some());
    let sent = turn["messages"].as_array().expect("messages");
    assert_eq!(sent.len(), 3, "{turn}");
    assert_eq!(
        sent[0]["content"][0]["type"], "image",
        "the first user turn keeps its image"
    );
    assert_eq!(sent[0]["content"][0]["source"]["data"], "iVBORw0KGgo=");
    assert_eq!(sent[1]["content"][0]["text"], "a recent answer");
    assert_eq!(
        sent[2]["content"][0]["text"],
        "[Conversation summary]\n- the user asked twice\n\n"
    );
    assert_eq!(sent[2]["content"][1]["text"], "the latest question");
    assert_eq!(
        (
            outcome.token_usage.input_tokens,
            outcome.token_usage.output_tokens
        ),
        (31, 6)
    );
    assert_eq!(outcome.turns, 1);
    assert_eq!(
        outcome.messages.len(),
        1,
        "the run's messages are its own turns"
    );
    let calls: Vec<(LlmPhase, u32, String)> = host
        .traces
        .iter()
        .filter_map(|e| match &e.data {
            TraceData::LlmCall {
                phase, turn, model, ..
            } => Some((*phase, *turn, model.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        calls,
        [
            (LlmPhase::Summary, 1, "claude-mini".to_owned()),
            (LlmPhase::Turn, 1, "claude-x".to_owned())
        ]
    );

    // Under the threshold nothing is summarized; an empty summary says it is unavailable; a
    // failed summary request fails the run.
    let mut quiet = spec.clone();
    if let Some(ContextStrategy::Summarize(s)) = &mut quiet.turn.context.strategy {
        s.max_tokens = 1_000_000;
    }
    let mut host = Host::replying(&[(200, &reply("done", 1, 1))]);
    let mut without_video = messages.clone();
    without_video[2] = LlmMessage::user_text("and this clip?");
    host.drive(&mut RunMachine::run(quiet, without_video, false, 3));
    assert_eq!(host.sent.len(), 1);
    let mut host = Host::replying(&[(200, &reply(" ", 1, 1)), (200, &reply("done", 1, 1))]);
    host.drive(&mut RunMachine::run(
        spec.clone(),
        messages.clone(),
        false,
        3,
    ));
    assert_eq!(
        host.sent_bodies()[1]["messages"][2]["content"][0]["text"],
        "[Conversation summary unavailable]\n\n"
    );
    let mut host = Host::replying(&[(500, "{\"error\":{\"message\":\"down\"}}")]);
    let outcome = host.drive(&mut RunMachine::run(spec, messages, false, 3));
    assert!(!outcome.success());
    assert_eq!(host.sent.len(), 1);
}

/// OMA's `custom` strategy: before every request the host's function gets the conversation and
/// its estimate, and what it returns is sent; an empty answer, invalid messages or a failing
/// function end the run before anything is sent.
#[test]
fn a_custom_strategy_hands_the_conversation_to_the_host_before_every_request() {
    use crate::agent::context::ContextStrategy;
    let mut settings = settings("anthropic");
    settings.context.strategy = Some(ContextStrategy::Custom);
    let spec = settings.into_spec().expect("valid").0;
    let agent = Agent::new(spec, vec![]).expect("valid");
    let mut host = Host::replying(&[(200, &tool_reply("t1")), (200, &reply("done", 1, 1))]);
    host.tool = Some(ToolOutcome {
        content: ToolResultContent::Text("42".into()),
        is_error: None,
        gate: None,
    });
    // Keeps only the last message.
    host.compress = Some(Box::new(|mut messages: Vec<LlmMessage>| {
        Ok(messages.split_off(messages.len() - 1))
    }));
    let outcome = host.drive(&mut agent.start(text("question"), false, 1).expect("valid"));
    assert!(outcome.success(), "{outcome:?}");
    assert_eq!(host.compressions, [(1, 2), (3, 5)]);
    let bodies = host.sent_bodies();
    assert_eq!(
        bodies[0]["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "question"}]}])
    );
    assert_eq!(bodies[1]["messages"].as_array().map(Vec::len), Some(1));
    assert_eq!(
        bodies[1]["messages"][0]["content"][0]["type"],
        "tool_result"
    );
    assert_eq!(
        outcome.messages.len(),
        3,
        "the run's messages are its own turns"
    );

    for (answer, message) in [
        (
            Ok(vec![]),
            "contextStrategy.custom.compress must return a non-empty LLMMessage[]",
        ),
        (
            Ok(vec![LlmMessage {
                role: Role::User,
                content: vec![ContentBlock::Video(crate::message::VideoBlock {
                    source: crate::message::MediaSource::Url {
                        media_type: "video/mp4".into(),
                        url: "ftp://example.com/a.mp4".into(),
                    },
                })],
            }]),
            "messages[0].content[0].source.url must use HTTP or HTTPS",
        ),
        (
            Err(Error::Host {
                message: "the strategy threw".into(),
            }),
            "the strategy threw",
        ),
    ] {
        let mut host = Host::replying(&[]);
        host.compress = Some(Box::new(move |_| answer.clone()));
        let outcome = host.drive(&mut agent.start(text("question"), false, 1).expect("valid"));
        assert!(!outcome.success());
        assert!(outcome.output.starts_with(message), "{}", outcome.output);
        assert!(host.sent.is_empty(), "nothing sent");
    }
}

/// OMA's `onLoopDetected` as a function: the loop is announced, then the host is asked; its
/// words decide (`"continue"` goes on, `"inject"` warns, `"terminate"` ends, a warning already
/// given ends the run on `"warn"` again), and a failing function fails the run.
#[test]
fn an_on_loop_detected_function_decides_through_the_host() {
    use crate::agent::loop_detect::{LoopAction, LoopDetection};
    let mut settings = settings("anthropic");
    settings.loop_detection = Some(LoopDetection {
        max_repetitions: 2,
        window: 4,
        action: LoopAction::Ask,
    });
    let spec = settings.into_spec().expect("valid").0;
    let agent = Agent::new(spec, vec![]).expect("valid");
    let same = tool_reply("t1");
    let answered = |host: &mut Host| {
        host.tool = Some(ToolOutcome {
            content: ToolResultContent::Text("r".into()),
            is_error: None,
            gate: None,
        });
    };
    // continue, then inject (a warning after the tool results), then warn again: the end.
    let mut host = Host::replying(&[(200, &same), (200, &same), (200, &same), (200, &same)]);
    answered(&mut host);
    host.loop_decisions = ["continue", "inject", "warn"]
        .iter()
        .map(|w| Ok((*w).to_owned()))
        .collect();
    let outcome = host.drive(&mut agent.start(text("q"), false, 1).expect("valid"));
    assert!(outcome.success() && outcome.loop_detected, "{outcome:?}");
    assert_eq!(host.loops.len(), 3);
    assert_eq!(host.loops[0].repetitions, 2);
    assert_eq!(host.sent.len(), 4);
    let third = &host.sent_bodies()[3]["messages"];
    let warned = &third[third.as_array().map_or(0, Vec::len) - 1]["content"];
    assert!(warned[1]["text"]
        .as_str()
        .is_some_and(|t| t.starts_with("WARNING: You appear to be repeating")));
    let loop_events = host
        .events
        .iter()
        .filter(|e| matches!(e, AgentEvent::Turn(Event::LoopDetected(_))))
        .count();
    assert_eq!(loop_events, 3, "each loop announced once");

    // terminate at once; a failing function ends the run with its message.
    for (decision, success) in [
        (Ok("terminate".to_owned()), true),
        (Err("decider broke".to_owned()), false),
    ] {
        let mut host = Host::replying(&[(200, &same), (200, &same)]);
        answered(&mut host);
        host.loop_decisions = [decision].into_iter().collect();
        let outcome = host.drive(&mut agent.start(text("q"), false, 1).expect("valid"));
        assert_eq!(outcome.success(), success, "{outcome:?}");
        assert_eq!(host.sent.len(), 2);
        assert_eq!(host.tools.len(), 1, "the looping turn's calls are not made");
        if !success {
            assert_eq!(outcome.output, "decider broke");
        }
    }
}

/// OMA's gate fields on `tool_call`: when the host says a gate decided the call, the event
/// carries `gated`, `gateAction` and the reason redacted (left out when empty), in OMA's order.
#[test]
fn a_gated_tool_call_traces_the_gates_decision() {
    use crate::agent::exchange::ToolGate;
    use crate::agent::trace::TraceOptions;
    for (gate, expected) in [
        (
            ToolGate {
                action: "deny".into(),
                reason: Some("password=hunter22 is not allowed".into()),
            },
            json!({"gated": true, "gateAction": "deny",
                   "gateReason": "password=[redacted]"}),
        ),
        (
            ToolGate {
                action: "allow".into(),
                reason: Some(String::new()),
            },
            json!({"gated": true, "gateAction": "allow"}),
        ),
    ] {
        let mut host = Host::replying(&[(200, &tool_reply("t1")), (200, &reply("done", 1, 1))]);
        host.tool = Some(ToolOutcome {
            content: ToolResultContent::Text("Tool \"lookup\" denied by onToolCall.".into()),
            is_error: Some(true),
            gate: Some(gate),
        });
        let mut machine = RunMachine::run(spec(), vec![LlmMessage::user_text("hi")], false, 9)
            .with_trace(TraceOptions::default());
        assert!(host.drive(&mut machine).success());
        let event = host
            .traces
            .iter()
            .find(|e| e.kind() == "tool_call")
            .expect("a tool_call event")
            .to_json();
        let keys: Vec<&str> = event
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        let at = keys.iter().position(|k| *k == "isError").expect("isError");
        assert_eq!(keys[at + 1], "gated", "{keys:?}");
        for (key, value) in expected.as_object().expect("object") {
            assert_eq!(&event[key], value, "{event}");
        }
        if expected.get("gateReason").is_none() {
            assert!(event.get("gateReason").is_none());
        }
    }
}

/// The records of a run made with records on, as OMA's JSON.
fn recorded(host: &Host) -> Vec<Value> {
    host.records.iter().map(|o| o.record.clone()).collect()
}

/// `(recordType, name)` of each record, for the shape of a trace.
fn shape(records: &[Value]) -> Vec<(String, String)> {
    records
        .iter()
        .map(|r| {
            (
                r["recordType"].as_str().unwrap_or_default().to_owned(),
                r["name"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn with_records(machine: RunMachine, options: &str) -> RunMachine {
    use crate::agent::observability::options::RecordOptions;
    machine
        .with_records(RecordOptions::from_json(options).expect("options"))
        .expect("no conflicting run id")
}

fn start(name: &str) -> (String, String) {
    ("span_start".into(), name.into())
}

fn end(name: &str) -> (String, String) {
    ("span_end".into(), name.into())
}

/// A tool round trip with records and legacy events on: a run span, the agent's span under
/// it, a `chat` span per model call and an `execute_tool` span per tool call under the agent's,
/// every record of one trace in sequence; the legacy events ride on the span ends they are a
/// view of, with the same times and counts, and share the run's id.
#[test]
fn a_recorded_run_hands_out_omas_records() {
    use crate::agent::trace::TraceOptions;
    let tool = tool_reply("call_1");
    let answer = reply("done", 7, 3);
    let mut host = Host::replying(&[(200, tool.as_str()), (200, answer.as_str())]);
    host.tool = Some(ToolOutcome {
        content: ToolResultContent::Text("token=abcdef123456 found".into()),
        is_error: None,
        gate: None,
    });
    let machine = RunMachine::run(spec(), vec![LlmMessage::user_text("hi")], false, 9)
        .with_trace(TraceOptions::default());
    let mut machine = with_records(machine, r#"{"metadata": {"experiment": "a"}}"#);
    let outcome = host.drive(&mut machine);
    assert!(outcome.success(), "{outcome:?}");
    let records = recorded(&host);
    assert_eq!(
        shape(&records),
        [
            start("oma.run"),
            start("invoke_agent"),
            start("chat"),
            end("chat"),
            start("execute_tool"),
            end("execute_tool"),
            start("chat"),
            end("chat"),
            end("invoke_agent"),
            end("oma.run"),
        ]
    );
    let trace = &records[0]["traceId"];
    let run_id = host.traces[0].run_id.clone();
    let (root, agent) = (&records[0]["spanId"], &records[1]["spanId"]);
    for (at, record) in records.iter().enumerate() {
        assert_eq!(record["schemaVersion"], 2);
        assert_eq!(&record["traceId"], trace);
        assert_eq!(record["sequence"], at + 1);
        assert_eq!(
            record["runId"],
            run_id.as_str(),
            "one run id for both views"
        );
        assert_eq!(record["attempt"], 1);
        let parent = &record["parentSpanId"];
        match record["kind"].as_str() {
            Some("run") => assert!(parent.is_null()),
            Some("agent") => assert_eq!(parent, root),
            _ => assert_eq!(parent, agent),
        }
    }
    assert_eq!(
        records[0]["attributes"],
        json!({"oma.run.id": run_id, "oma.run.attempt": 1, "oma.meta.experiment": "a"})
    );
    assert_eq!(
        records[1]["attributes"],
        json!({"oma.agent.name": "helper"})
    );
    assert_eq!(
        records[3]["attributes"],
        json!({
            "oma.agent.name": "helper", "oma.llm.model": "claude-x",
            "oma.llm.provider": "anthropic", "oma.phase": "turn", "oma.llm.turn": 1,
            "oma.usage.input_tokens": 5, "oma.usage.output_tokens": 5,
            "oma.llm.response_model": "claude-x", "oma.status": "ok",
        })
    );
    assert_eq!(records[7]["attributes"]["oma.llm.turn"], 2);
    assert_eq!(
        records[5]["attributes"],
        json!({"oma.agent.name": "helper", "oma.tool.name": "lookup",
               "oma.tool.is_error": false, "oma.status": "ok"}),
        "no tool input or output unless the policy captures them"
    );
    assert_eq!(
        records[8]["attributes"],
        json!({"oma.agent.name": "helper", "oma.agent.turns": 2, "oma.agent.tool_calls": 1,
               "oma.usage.input_tokens": 12, "oma.usage.output_tokens": 8,
               "oma.status": "ok"})
    );
    assert_eq!(records[9]["status"], json!({"code": "ok"}));
    // Each legacy event rides on the span end it is a view of, with the same times.
    let carried: Vec<Value> = host
        .records
        .iter()
        .filter_map(|o| o.legacy.clone())
        .collect();
    let events: Vec<Value> = host.traces.iter().map(|e| e.to_json()).collect();
    assert_eq!(carried, events);
    for observed in host.records.iter().filter(|o| o.legacy.is_some()) {
        let (record, legacy) = (&observed.record, observed.legacy.as_ref().expect("legacy"));
        assert_eq!(record["recordType"], "span_end");
        assert_eq!(record["startUnixMs"], legacy["startMs"]);
        assert_eq!(record["endUnixMs"], legacy["endMs"]);
        assert_eq!(record["durationMs"], legacy["durationMs"]);
    }
    // Records change no request, and no other draw of the run.
    let mut plain = Host::replying(&[(200, tool.as_str()), (200, answer.as_str())]);
    plain.tool = host.tool.clone();
    plain.drive(&mut RunMachine::run(
        spec(),
        vec![LlmMessage::user_text("hi")],
        false,
        9,
    ));
    assert_eq!(plain.sent, host.sent);
    assert!(plain.records.is_empty());
    // The same seed, the same records.
    let mut again = Host::replying(&[(200, tool.as_str()), (200, answer.as_str())]);
    again.tool = host.tool.clone();
    let machine = RunMachine::run(spec(), vec![LlmMessage::user_text("hi")], false, 9)
        .with_trace(TraceOptions::default());
    again.drive(&mut with_records(
        machine,
        r#"{"metadata": {"experiment": "a"}}"#,
    ));
    assert_eq!(recorded(&again), records);
}

/// Records alone: no legacy event anywhere; a run id given is the records' own.
#[test]
fn records_without_legacy_events_and_a_given_run_id() {
    let mut host = Host::replying(&[(200, &reply("ok", 1, 1))]);
    let machine = RunMachine::run(spec(), vec![LlmMessage::user_text("hi")], false, 2);
    let mut machine = with_records(machine, r#"{"runId": "run-9"}"#);
    assert!(host.drive(&mut machine).success());
    assert!(host.traces.is_empty());
    assert!(host.records.iter().all(|o| o.legacy.is_none()));
    let records = recorded(&host);
    assert_eq!(records.len(), 6);
    assert!(records.iter().all(|r| r["runId"] == "run-9"));
    // A run id that disagrees with the trace options' is refused.
    let traced = RunMachine::run(spec(), vec![LlmMessage::user_text("hi")], false, 2).with_trace(
        crate::agent::trace::TraceOptions {
            run_id: Some("run-1".into()),
            ..Default::default()
        },
    );
    let options =
        crate::agent::observability::options::RecordOptions::from_json(r#"{"runId": "run-2"}"#)
            .expect("options");
    assert!(traced.with_records(options).is_err());
}

/// OMA 1.18.0: a tool's input and output on its `execute_tool` span when the capture policy
/// opts in, input with OMA's sensitive-field redaction, both redacted as text and cut to
/// `maxContentChars`; a failed tool's span ends as OMA classifies a failed tool.
/// Polls `machine` at `now` until it waits for an answer or finishes, collecting the records
/// and legacy events it hands out; the step that needs an answer, if one came.
fn poll_until_due(machine: &mut RunMachine, host: &mut Host, now: u64) -> Option<Step> {
    for _ in 0..100 {
        match machine.poll(now) {
            Poll::Step(Step::Records(records)) => host.records.extend(records),
            Poll::Step(Step::Trace(event)) => host.traces.push(*event),
            Poll::Step(Step::Event(_) | Step::Progress(_) | Step::Evaluation(_)) => {}
            Poll::Step(step) => return Some(step),
            Poll::Waiting(_) => return None,
            other => panic!("the run is not over yet, got {other:?}"),
        }
    }
    panic!("the run kept handing out steps");
}

/// Polls a cancelled `machine` to its outcome, collecting what closes its trace; nothing but
/// records and legacy events comes before the outcome.
fn finish_cancelled(machine: &mut RunMachine, host: &mut Host, now: u64) -> RunOutcome {
    for _ in 0..100 {
        match machine.poll(now) {
            Poll::Step(Step::Records(records)) => host.records.extend(records),
            Poll::Step(Step::Trace(event)) => host.traces.push(*event),
            Poll::Finished(outcome) => {
                assert_eq!(machine.poll(now), Poll::Over, "nothing after the outcome");
                return *outcome;
            }
            other => panic!("only the trace's end and the outcome, got {other:?}"),
        }
    }
    panic!("the cancelled run did not end");
}

/// A run its caller cancels while a tool call is out: the tool's, the agent's and the run's
/// spans end with status `cancelled` and OMA's `AbortError` (kind `cancellation`, not
/// retryable), the legacy `agent` event closes the legacy view, the outcome is OMA's cancelled
/// result, and the tool's late answer and a second cancel are refused.
#[test]
fn a_cancelled_run_ends_its_open_spans_as_cancelled() {
    use crate::agent::trace::TraceOptions;
    let tool = tool_reply("call_1");
    let mut host = Host::default();
    let machine = RunMachine::run(spec(), vec![LlmMessage::user_text("hi")], false, 9)
        .with_trace(TraceOptions::default());
    let mut machine = with_records(machine, "{}");
    let Some(Step::Send(_)) = poll_until_due(&mut machine, &mut host, NOW) else {
        panic!("the first request");
    };
    machine
        .handle(Answer::Http(CallAnswer::Response(HttpResponse {
            status: 200,
            headers: vec![],
            body: tool.into_bytes(),
        })))
        .expect("the response was asked for");
    let Some(Step::CallTool(call)) = poll_until_due(&mut machine, &mut host, NOW + 5) else {
        panic!("the tool call");
    };
    assert!(poll_until_due(&mut machine, &mut host, NOW + 6).is_none());
    machine
        .cancel(NOW + 40)
        .expect("a run under way can be cancelled");
    let outcome = finish_cancelled(&mut machine, &mut host, NOW + 41);
    let value = outcome_json(&outcome);
    assert_eq!(value["success"], false);
    assert_eq!(value["output"], "Run cancelled by caller.");
    assert_eq!(
        value["status"],
        json!({"code": "cancelled", "message": "Run cancelled by caller."})
    );
    assert_eq!(
        value["errorInfo"],
        json!({"kind": "cancellation", "name": "AbortError",
               "message": "Run cancelled by caller.", "retryable": false})
    );
    let records = recorded(&host);
    assert_eq!(
        shape(&records),
        [
            start("oma.run"),
            start("invoke_agent"),
            start("chat"),
            end("chat"),
            start("execute_tool"),
            end("execute_tool"),
            end("invoke_agent"),
            end("oma.run"),
        ]
    );
    let error = json!({"kind": "cancellation", "name": "AbortError",
                       "message": "Run cancelled by caller.", "retryable": false});
    for ended in &records[5..] {
        assert_eq!(
            ended["status"],
            json!({"code": "cancelled", "message": "Run cancelled by caller."}),
            "{ended}"
        );
        assert_eq!(ended["error"], error, "{ended}");
        assert_eq!(
            ended["endUnixMs"],
            NOW + 40,
            "ended when the caller cancelled"
        );
        assert_eq!(ended["attributes"]["oma.status"], "cancelled");
    }
    assert_eq!(records[3]["status"], json!({"code": "ok"}));
    // The legacy view is closed too: its `agent` event rides on the agent span's end.
    assert_eq!(
        host.traces.last().map(|e| e.to_json()["type"].clone()),
        Some(json!("agent"))
    );
    assert!(records[6]["attributes"]["oma.agent.name"] == "helper");
    assert!(host.records[6].legacy.is_some());
    // Nothing is waited for any more.
    let late = machine.handle(Answer::Tool {
        id: call.id,
        outcome: ToolOutcome {
            content: ToolResultContent::Text("late".into()),
            is_error: None,
            gate: None,
        },
    });
    assert!(late.is_err(), "a late answer is refused");
    assert!(matches!(
        machine.cancel(NOW + 50),
        Err(Error::Session { .. })
    ));
}

/// A run cancelled while its model call is in flight ends that call's span as cancelled; one
/// cancelled before its first poll still opens and closes its spans; a streamed one's last
/// stream event is `error`; a run without records hands out its outcome alone; a `run-agent`
/// run reports no `agent_complete`.
#[test]
fn a_run_cancelled_in_flight_or_before_it_began_closes_its_trace() {
    let mut host = Host::default();
    let mut machine = with_records(
        RunMachine::run(spec(), vec![LlmMessage::user_text("hi")], true, 3),
        r#"{"capture": {"streamEvents": "all"}}"#,
    );
    let Some(Step::Send(_)) = poll_until_due(&mut machine, &mut host, NOW) else {
        panic!("the first request");
    };
    machine.cancel(NOW + 7).expect("in flight");
    let outcome = finish_cancelled(&mut machine, &mut host, NOW + 8);
    assert_eq!(
        outcome.failure().map(|f| f.status.code),
        Some(crate::agent::outcome::StatusCode::Cancelled)
    );
    let records = recorded(&host);
    assert_eq!(
        shape(&records),
        [
            start("oma.run"),
            start("invoke_agent"),
            start("chat"),
            ("span_event".into(), "stream_chunk".into()),
            end("chat"),
            end("invoke_agent"),
            end("oma.run"),
        ]
    );
    assert_eq!(records[4]["status"]["code"], "cancelled");
    assert_eq!(records[4]["error"]["kind"], "cancellation");
    assert_eq!(records[3]["attributes"]["oma.stream.type"], "error");

    let mut never = Host::default();
    let mut machine = with_records(
        RunMachine::run(spec(), vec![LlmMessage::user_text("hi")], false, 3),
        "{}",
    );
    machine.cancel(NOW).expect("never polled");
    let outcome = finish_cancelled(&mut machine, &mut never, NOW);
    assert!(!outcome.success());
    let records = recorded(&never);
    assert_eq!(
        shape(&records),
        [
            start("oma.run"),
            start("invoke_agent"),
            end("invoke_agent"),
            end("oma.run"),
        ]
    );
    assert_eq!(records[3]["status"]["code"], "cancelled");

    let mut plain = Host::default();
    let mut machine = start_run_agent(spec(), text("hi"), true, None, 3).expect("valid");
    let Some(Step::Send(_)) = poll_until_due(&mut machine, &mut plain, NOW) else {
        panic!("the first request");
    };
    machine.cancel(NOW + 1).expect("in flight");
    let outcome = finish_cancelled(&mut machine, &mut plain, NOW + 2);
    assert_eq!(outcome.output, "Run cancelled by caller.");
    assert!(plain.records.is_empty() && plain.traces.is_empty());
}

#[test]
fn tool_input_and_output_are_captured_when_the_policy_opts_in() {
    let call = json!({
        "id": "msg_t", "type": "message", "role": "assistant", "model": "claude-x",
        "content": [{"type": "tool_use", "id": "t1", "name": "lookup",
                     "input": {"q": "paris", "apiKey": "abc"}}],
        "stop_reason": "tool_use", "usage": {"input_tokens": 5, "output_tokens": 5}
    })
    .to_string();
    let run = |policy: &str, failed: bool| {
        let mut host = Host::replying(&[(200, call.as_str()), (200, &reply("done", 1, 1))]);
        host.tool = Some(ToolOutcome {
            content: ToolResultContent::Text(
                "weather: sunny, key sk-abcdefghijklmnopqrstuv".into(),
            ),
            is_error: failed.then_some(true),
            gate: None,
        });
        let machine = RunMachine::run(spec(), vec![LlmMessage::user_text("hi")], false, 4);
        assert!(host.drive(&mut with_records(machine, policy)).success());
        let records = recorded(&host);
        let tool: Vec<Value> = records
            .into_iter()
            .filter(|r| r["kind"] == "tool")
            .collect();
        assert_eq!(tool.len(), 2);
        tool
    };
    let tool = run(
        r#"{"capture": {"toolInput": "redacted", "toolOutput": "redacted"}}"#,
        false,
    );
    assert_eq!(
        tool[0]["attributes"]["oma.tool.input"],
        r#"{"q":"paris","apiKey":"[redacted]"}"#
    );
    assert_eq!(
        tool[1]["attributes"]["oma.tool.output"],
        "weather: sunny, key [redacted]"
    );
    assert_eq!(
        tool[1]["attributes"]["oma.tool.input"],
        tool[0]["attributes"]["oma.tool.input"]
    );
    let only_input = run(
        r#"{"capture": {"toolInput": "redacted", "maxContentChars": 6}}"#,
        false,
    );
    assert_eq!(only_input[1]["attributes"]["oma.tool.input"], r#"{"q":""#);
    assert!(only_input[1]["attributes"].get("oma.tool.output").is_none());
    let none = run("{}", false);
    assert!(none[1]["attributes"].get("oma.tool.input").is_none());
    // A failed tool: status and error as OMA classifies a plain error of the recorded output.
    let failed = run("{}", true);
    assert_eq!(
        failed[1]["status"],
        json!({"code": "error", "message": "weather: sunny, key [redacted]"})
    );
    assert_eq!(
        failed[1]["error"],
        json!({"kind": "tool", "name": "Error", "message": "weather: sunny, key [redacted]",
               "retryable": true})
    );
    assert_eq!(failed[1]["attributes"]["oma.tool.is_error"], true);
    assert_eq!(failed[1]["attributes"]["oma.status"], "error");
    // errorMessage code-only leaves the error's message out, not the status's.
    let code_only = run(r#"{"capture": {"errorMessage": "code-only"}}"#, true);
    assert!(code_only[1]["error"].get("message").is_none());
    assert!(code_only[1]["status"].get("message").is_some());
}

/// A retried model call: a `retry_scheduled` event on its span per wait, with the attempt that
/// failed, the most attempts and the wait.
#[test]
fn a_retry_is_an_event_on_the_model_calls_span() {
    let mut settings = settings("anthropic");
    settings.call.retry = Some(crate::retry::RetryPolicy {
        max_attempts: 3,
        base_delay_ms: 10,
        backoff: 2.0,
        ..crate::retry::RetryPolicy::default()
    });
    let (spec, _) = settings.into_spec().expect("valid");
    let mut host = Host::replying(&[(503, "busy"), (529, "busy"), (200, &reply("ok", 1, 1))]);
    let machine = RunMachine::run(spec, vec![LlmMessage::user_text("hi")], false, 9);
    assert!(host.drive(&mut with_records(machine, "{}")).success());
    let records = recorded(&host);
    let retries: Vec<&Value> = records
        .iter()
        .filter(|r| r["name"] == "retry_scheduled")
        .collect();
    assert_eq!(retries.len(), 2);
    let chat = records
        .iter()
        .find(|r| r["name"] == "chat")
        .expect("a chat span");
    for (at, retry) in retries.iter().enumerate() {
        assert_eq!(retry["recordType"], "span_event");
        assert_eq!(retry["spanId"], chat["spanId"]);
        assert_eq!(retry["attributes"]["oma.retry.attempt"], at + 1);
        assert_eq!(retry["attributes"]["oma.retry.max_attempts"], 3);
        assert_eq!(retry["attributes"]["oma.retry.delay_ms"], host.waits[at]);
    }
    let chats = records.iter().filter(|r| r["name"] == "chat").count();
    assert_eq!(chats, 2, "one span for the call, however many attempts");
}

/// Steps a streamed run whose one answer is `body` (server-sent events), delivered in chunks;
/// the events and the records.
fn stream_recorded(options: &str, body: &str) -> (Vec<AgentEvent>, Vec<Value>, RunOutcome) {
    let agent = Agent::new(spec(), vec![]).expect("valid");
    let mut machine = with_records(agent.start(text("q"), true, 1).expect("valid"), options);
    let mut chunks = body.as_bytes().chunks(10);
    let (mut events, mut records) = (Vec::new(), Vec::new());
    let mut now = NOW;
    let outcome = loop {
        now += 1;
        match machine.poll(now) {
            Poll::Step(Step::Send(_)) => machine
                .handle(Answer::Http(CallAnswer::Head {
                    status: 200,
                    headers: vec![],
                }))
                .expect("due"),
            Poll::Step(Step::Receive) => {
                let answer = chunks
                    .next()
                    .map_or(CallAnswer::End, |c| CallAnswer::Chunk(c.to_vec()));
                machine.handle(Answer::Http(answer)).expect("due");
            }
            Poll::Step(Step::Event(event)) => events.push(event),
            Poll::Step(Step::Records(batch)) => {
                records.extend(batch.into_iter().map(|o| o.record));
            }
            Poll::Finished(outcome) => break *outcome,
            other => panic!("unexpected {other:?}"),
        }
    };
    (events, records, outcome)
}

fn sse(events: &[&str]) -> String {
    events
        .iter()
        .map(|event| format!("data: {event}\n\n"))
        .collect()
}

/// A streamed model call: `first_chunk` on its span when the first piece arrives, with the
/// time to it; `stream_chunk` events on the agent's span for every event the run streams only
/// when the policy keeps them all, ending with `done`; none under `streamEvents: "none"`.
#[test]
fn a_streamed_call_has_its_first_chunk_and_stream_chunks_when_asked_for() {
    let body = sse(&[
        r#"{"type":"message_start","message":{"id":"m","model":"c","usage":{"input_tokens":3,"output_tokens":1}}}"#,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"he"}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"llo"}}"#,
        r#"{"type":"content_block_stop","index":0}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}"#,
        r#"{"type":"message_stop"}"#,
    ]);
    let (events, records, outcome) = stream_recorded("{}", &body);
    assert_eq!(outcome.output, "hello");
    assert_eq!(events.len(), 3);
    let chat = records.iter().find(|r| r["name"] == "chat").expect("chat");
    let first: Vec<&Value> = records
        .iter()
        .filter(|r| r["name"] == "first_chunk")
        .collect();
    assert_eq!(first.len(), 1, "the first piece only");
    assert_eq!(first[0]["spanId"], chat["spanId"]);
    let waited = first[0]["attributes"]["oma.ttft.ms"]
        .as_u64()
        .expect("a time");
    assert_eq!(
        Some(waited),
        first[0]["timestampUnixMs"]
            .as_u64()
            .zip(chat["startUnixMs"].as_u64())
            .map(|(a, b)| a - b)
    );
    assert!(
        records.iter().all(|r| r["name"] != "stream_chunk"),
        "not by default"
    );

    let (_, all, _) = stream_recorded(r#"{"capture": {"streamEvents": "all"}}"#, &body);
    let kinds: Vec<&str> = all
        .iter()
        .filter(|r| r["name"] == "stream_chunk")
        .map(|r| {
            r["attributes"]["oma.stream.type"]
                .as_str()
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(kinds, ["text", "text", "done"]);
    let agent = all
        .iter()
        .find(|r| r["name"] == "invoke_agent")
        .expect("agent");
    assert!(all
        .iter()
        .filter(|r| r["name"] == "stream_chunk")
        .all(|r| r["spanId"] == agent["spanId"]));

    let (_, none, _) = stream_recorded(r#"{"capture": {"streamEvents": "none"}}"#, &body);
    assert!(none.iter().all(|r| r["name"] != "stream_chunk"));
    assert_eq!(
        none.iter().filter(|r| r["name"] == "first_chunk").count(),
        1
    );
}

/// A failed model call: its span ends as OMA classifies the provider's failure, and so do the
/// agent's and the run's, with the run's `errorInfo`.
#[test]
fn a_failed_call_ends_its_span_and_the_run_as_failed() {
    let mut host = Host::replying(&[(
        400,
        r#"{"type":"error","error":{"type":"invalid_request_error","message":"bad key sk-abcdefghijklmnopqrstuv"}}"#,
    )]);
    let machine = RunMachine::run(spec(), vec![LlmMessage::user_text("hi")], false, 1);
    let outcome = host.drive(&mut with_records(machine, "{}"));
    let failure = outcome.failure().expect("failed").clone();
    let records = recorded(&host);
    assert_eq!(
        shape(&records),
        [
            start("oma.run"),
            start("invoke_agent"),
            start("chat"),
            end("chat"),
            end("invoke_agent"),
            end("oma.run"),
        ]
    );
    let chat = &records[3];
    assert_eq!(chat["status"]["code"], "error");
    assert_eq!(chat["error"]["kind"], "provider");
    assert_eq!(chat["error"]["httpStatus"], 400);
    assert_eq!(chat["error"]["provider"], "anthropic");
    assert_eq!(chat["error"]["retryable"], false);
    let text = chat.to_string();
    assert!(!text.contains("sk-abcdefghijklmnopqrstuv"), "{text}");
    assert!(chat["attributes"].get("oma.usage.input_tokens").is_none());
    for ended in &records[4..] {
        assert_eq!(ended["status"], json!(failure.status));
        assert_eq!(ended["error"]["name"], failure.error_info.name.as_str());
        assert_eq!(
            ended["error"]["message"],
            failure.error_info.message.as_str()
        );
    }
}

/// A loop the run finds is a `loop_detected` event on the agent's span; a budget that runs
/// out a `budget_exhausted` event there, and the agent's and run's spans end with OMA's
/// `budget_exhausted` status.
#[test]
fn loops_and_budgets_are_events_on_the_agents_span() {
    use crate::agent::loop_detect::{LoopAction, LoopDetection};
    let mut looping = settings("anthropic");
    looping.loop_detection = Some(LoopDetection {
        max_repetitions: 2,
        window: 4,
        action: LoopAction::Terminate,
    });
    let spec = looping.into_spec().expect("valid").0;
    let same = tool_reply("t1");
    let mut host = Host::replying(&[(200, &same), (200, &same)]);
    host.tool = Some(ToolOutcome {
        content: ToolResultContent::Text("r".into()),
        is_error: None,
        gate: None,
    });
    let machine = RunMachine::run(spec, vec![LlmMessage::user_text("hi")], false, 1);
    let outcome = host.drive(&mut with_records(machine, "{}"));
    assert!(outcome.loop_detected);
    let records = recorded(&host);
    let agent = records
        .iter()
        .find(|r| r["name"] == "invoke_agent")
        .expect("agent");
    let found: Vec<&Value> = records
        .iter()
        .filter(|r| r["name"] == "loop_detected")
        .collect();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0]["spanId"], agent["spanId"]);
    assert_eq!(found[0]["attributes"]["oma.loop.repetitions"], 2);
    assert!(found[0]["attributes"]["oma.loop.kind"].is_string());
    assert_eq!(records.last().expect("run end")["status"]["code"], "ok");

    let mut budget = settings("anthropic");
    budget.token_budget = Some(5);
    let spec = budget.into_spec().expect("valid").0;
    let mut host = Host::replying(&[(200, &tool_reply("t1"))]);
    let machine = RunMachine::run(spec, vec![LlmMessage::user_text("hi")], false, 1);
    assert!(host
        .drive(&mut with_records(machine, "{}"))
        .budget_exceeded());
    let records = recorded(&host);
    let exhausted: Vec<&Value> = records
        .iter()
        .filter(|r| r["name"] == "budget_exhausted")
        .collect();
    assert_eq!(exhausted.len(), 1);
    assert_eq!(exhausted[0]["attributes"], json!({}));
    for ended in records.iter().rev().take(2) {
        assert_eq!(ended["status"]["code"], "budget_exhausted");
        assert_eq!(ended["error"]["kind"], "budget");
    }
}

/// `run-agent`'s agent span says `oma.phase: "agent"`, as OMA's `runAgent` does.
#[test]
fn run_agent_marks_its_agent_span() {
    let (spec, _) = settings("anthropic").into_spec().expect("valid");
    let mut host = Host::replying(&[(200, &reply("ok", 1, 1))]);
    let machine = RunMachine::run_agent(
        spec,
        vec![LlmMessage::user_text("hi")],
        None,
        false,
        None,
        3,
    );
    assert!(host.drive(&mut with_records(machine, "{}")).success());
    let records = recorded(&host);
    assert_eq!(records[1]["attributes"]["oma.phase"], "agent");
    assert_eq!(records[1]["attributes"]["oma.agent.name"], "helper");
}

/// A model call in flight at the run's deadline ends with the run, as a timeout.
#[test]
fn a_call_in_flight_at_the_deadline_ends_with_the_run() {
    let mut timed = settings("anthropic");
    timed.deadline_ms = Some(50);
    let (spec, _) = timed.into_spec().expect("valid");
    let machine = RunMachine::run(spec, vec![LlmMessage::user_text("hi")], false, 3);
    let mut machine = with_records(machine, "{}");
    let mut records = Vec::new();
    let take = |poll: Poll, records: &mut Vec<Value>| match poll {
        Poll::Step(Step::Records(batch)) => {
            records.extend(batch.into_iter().map(|o| o.record));
            true
        }
        _ => false,
    };
    while take(machine.poll(NOW), &mut records) {}
    // The send was handed out; no answer comes before the deadline.
    let outcome = loop {
        match machine.poll(NOW + 60) {
            Poll::Finished(outcome) => break *outcome,
            poll => assert!(take(poll, &mut records)),
        }
    };
    assert!(outcome.failure().is_some());
    let chat = records
        .iter()
        .find(|r| r["name"] == "chat" && r["recordType"] == "span_end")
        .expect("the call's end");
    assert_eq!(chat["status"]["code"], "timeout");
    assert_eq!(chat["endUnixMs"], NOW + 60);
    assert_eq!(
        records.last().expect("run end")["status"]["code"],
        "timeout"
    );
}
