//! The `driver` export: agents whose runs are [`RunMachine`]s handed to the host as `session`
//! resources. Each `next` polls the machine and gives what it found (a step, the answers it
//! waits for with the instant to ask again, or the result) as a WIT value; each `answer` is
//! converted and handed to it. OMA JSON is accepted wherever a dynamic host holds JSON.

use std::cell::RefCell;
use std::rc::{Rc, Weak};

use serde_json::{json, Value};

use oma_core::agent::config::AgentSettings;
use oma_core::agent::entry;
use oma_core::agent::evaluation::RunInput;
use oma_core::agent::exchange::{EvaluationRecord, ToolOutcome};
use oma_core::agent::host_adapter::{self, ModelAnswer};
use oma_core::agent::input::PromptInput;
use oma_core::agent::machine::{Answer, Due, Poll, RunMachine, Step};
use oma_core::agent::observability::options::RecordOptions;
use oma_core::agent::outcome::outcome_json;
use oma_core::agent::outcome::RunOutcome;
use oma_core::error::Error;
use oma_core::http::call::CallAnswer;
use oma_core::json;
use oma_core::message::LlmMessage;

use super::convert::*;
use super::exports::oma::agent::driver as dr;
use super::http::{from_wit_failure, from_wit_head, from_wit_response, to_wit_outgoing};
use super::run::*;
use super::wit::outcome as oc;
use super::wit::types as wit;
use super::Component;

impl dr::Guest for Component {
    type Agent = AgentResource;
    type Session = SessionResource;

    fn run_agent(
        config: oc::AgentConfig,
        input: oc::RunInput,
        options: oc::RunAgentOptions,
        session: dr::SessionOptions,
    ) -> Result<dr::Session, wit::Error> {
        let machine = run_agent_machine(config, input, &options, session.seed)?;
        SessionResource::wrap(machine, &session, None)
    }

    fn run_agent_json(
        config: String,
        input: String,
        options: oc::RunAgentOptions,
        session: dr::SessionOptions,
    ) -> Result<dr::Session, wit::Error> {
        let (spec, _history) = AgentSettings::from_json(&config)?.into_spec()?;
        let machine = entry::start_run_agent(
            spec,
            run_input_json(&input, Vec::new())?,
            options.progress,
            from_wit_evaluation(&options),
            session.seed,
        )?;
        SessionResource::wrap(machine, &session, None)
    }
}

/// An `agent` resource. Its sessions hold a weak reference, so dropping the agent leaves them
/// running (a `prompt` then has no history to commit to).
pub struct AgentResource {
    agent: Rc<RefCell<entry::Agent>>,
}

impl AgentResource {
    fn wrap(agent: entry::Agent) -> dr::Agent {
        dr::Agent::new(AgentResource {
            agent: Rc::new(RefCell::new(agent)),
        })
    }

    fn run_session(
        &self,
        input: RunInput,
        streaming: bool,
        options: dr::SessionOptions,
    ) -> Result<dr::Session, wit::Error> {
        let machine = self.agent.borrow().start(input, streaming, options.seed)?;
        SessionResource::wrap(machine, &options, None)
    }

    fn prompt_session(
        &self,
        input: PromptInput,
        options: dr::SessionOptions,
    ) -> Result<dr::Session, wit::Error> {
        let (turn, machine) = self.agent.borrow().start_prompt(input, options.seed)?;
        let commit = Some((Rc::downgrade(&self.agent), turn));
        SessionResource::wrap(machine, &options, commit)
    }
}

impl dr::GuestAgent for AgentResource {
    fn create(config: oc::AgentConfig) -> Result<dr::Agent, wit::Error> {
        let (spec, history) = from_wit_config(config)?;
        Ok(AgentResource::wrap(entry::Agent::new(spec, history)?))
    }

    fn create_json(config: String) -> Result<dr::Agent, wit::Error> {
        let (spec, history) = AgentSettings::from_json(&config)?.into_spec()?;
        Ok(AgentResource::wrap(entry::Agent::new(spec, history)?))
    }

    fn run(
        &self,
        input: oc::RunInput,
        options: dr::SessionOptions,
    ) -> Result<dr::Session, wit::Error> {
        self.run_session(from_wit_input(input)?, false, options)
    }

    fn run_json(
        &self,
        input: String,
        options: dr::SessionOptions,
    ) -> Result<dr::Session, wit::Error> {
        self.run_session(run_input_json(&input, Vec::new())?, false, options)
    }

    fn run_json_parts(
        &self,
        input: String,
        strings: Vec<(String, String)>,
        options: dr::SessionOptions,
    ) -> Result<dr::Session, wit::Error> {
        self.run_session(run_input_json(&input, strings)?, false, options)
    }

    fn stream(
        &self,
        input: oc::RunInput,
        options: dr::SessionOptions,
    ) -> Result<dr::Session, wit::Error> {
        self.run_session(from_wit_input(input)?, true, options)
    }

    fn stream_json(
        &self,
        input: String,
        options: dr::SessionOptions,
    ) -> Result<dr::Session, wit::Error> {
        self.run_session(run_input_json(&input, Vec::new())?, true, options)
    }

    fn stream_json_parts(
        &self,
        input: String,
        strings: Vec<(String, String)>,
        options: dr::SessionOptions,
    ) -> Result<dr::Session, wit::Error> {
        self.run_session(run_input_json(&input, strings)?, true, options)
    }

    fn prompt(
        &self,
        input: oc::PromptInput,
        options: dr::SessionOptions,
    ) -> Result<dr::Session, wit::Error> {
        self.prompt_session(from_wit_prompt(input)?, options)
    }

    fn prompt_json(
        &self,
        input: String,
        options: dr::SessionOptions,
    ) -> Result<dr::Session, wit::Error> {
        self.prompt_session(prompt_input_json(&input, Vec::new())?, options)
    }

    fn prompt_json_parts(
        &self,
        input: String,
        strings: Vec<(String, String)>,
        options: dr::SessionOptions,
    ) -> Result<dr::Session, wit::Error> {
        self.prompt_session(prompt_input_json(&input, strings)?, options)
    }

    fn get_history(&self) -> Vec<wit::LlmMessage> {
        let agent = self.agent.borrow();
        agent
            .history()
            .iter()
            .cloned()
            .map(to_wit_message)
            .collect()
    }

    fn get_history_json(&self) -> String {
        let agent = self.agent.borrow();
        json::messages_to_json(agent.history())
    }

    fn reset(&self) {
        self.agent.borrow_mut().reset();
    }
}

/// OMA's `string | LLMMessage[]` as JSON text, with the long strings passed beside it.
fn run_input_json(text: &str, strings: Vec<(String, String)>) -> Result<RunInput, Error> {
    match parse_json(text, strings)? {
        Value::String(text) => Ok(RunInput::Text(text)),
        other => Ok(RunInput::Messages(json::messages_from_value(other)?)),
    }
}

/// A prompt's `string | ContentBlock[]` as JSON text (with the long strings passed beside it);
/// blocks are checked as the one user turn they form.
fn prompt_input_json(text: &str, strings: Vec<(String, String)>) -> Result<PromptInput, Error> {
    match parse_json(text, strings)? {
        Value::String(text) => Ok(PromptInput::Text(text)),
        blocks => {
            let mut turn = json::messages_from_value(json!([{"role": "user", "content": blocks}]))?;
            Ok(PromptInput::Blocks(
                turn.pop().map(|turn| turn.content).unwrap_or_default(),
            ))
        }
    }
}

fn parse_json(text: &str, strings: Vec<(String, String)>) -> Result<Value, Error> {
    let mut value = oma_core::json::from_str(text)
        .map_err(|e| Error::invalid(format!("input must be JSON text: {e}")))?;
    json::place_strings(&mut value, strings)?;
    Ok(value)
}

/// A `session` resource: one run in flight.
pub struct SessionResource {
    state: RefCell<SessionState>,
}

struct SessionState {
    machine: RunMachine,
    payloads: dr::Payloads,
    /// For a `prompt`: the agent and the user turn to commit when the run completes.
    commit: Option<(Weak<RefCell<entry::Agent>>, LlmMessage)>,
    over: bool,
}

impl SessionResource {
    /// A session over `machine`, traced and recorded when its options ask (over the agent's
    /// own `trace` and `records`). Fails for records options OMA refuses, naming them.
    fn wrap(
        machine: RunMachine,
        options: &dr::SessionOptions,
        commit: Option<(Weak<RefCell<entry::Agent>>, LlmMessage)>,
    ) -> Result<dr::Session, wit::Error> {
        let machine = match options.trace.clone() {
            Some(trace) => machine.with_trace(from_wit_trace_options(trace)),
            None => machine,
        };
        let machine = match options.records.as_deref() {
            Some(records) => machine.with_records(RecordOptions::from_json(records)?)?,
            None => machine,
        };
        Ok(dr::Session::new(SessionResource {
            state: RefCell::new(SessionState {
                machine,
                payloads: options.payloads,
                commit,
                over: false,
            }),
        }))
    }
}

impl dr::GuestSession for SessionResource {
    fn next(&self, now_ms: u64) -> Result<dr::Poll, wit::Error> {
        let mut state = self.state.borrow_mut();
        if state.over {
            return Err(session_error("the run is over: its result was given"));
        }
        let step = match state.machine.poll(now_ms) {
            Poll::Step(step) => step,
            Poll::Waiting(due) => return Ok(to_wit_waiting(due, state.machine.wake_at())),
            Poll::Finished(outcome) => {
                state.over = true;
                if let Some((agent, turn)) = state.commit.take() {
                    if let Some(agent) = agent.upgrade() {
                        agent.borrow_mut().commit(turn, &outcome);
                    }
                }
                let json = matches!(state.payloads, dr::Payloads::Json);
                return Ok(dr::Poll::Finished(report(*outcome, json)));
            }
            Poll::Over => {
                state.over = true;
                return Err(session_error("the run is over: its result was given"));
            }
        };
        let json = matches!(state.payloads, dr::Payloads::Json);
        Ok(dr::Poll::Step(to_wit_step(step, json)))
    }

    fn answer(&self, answer: dr::Answer) -> Result<(), wit::Error> {
        let mut state = self.state.borrow_mut();
        if state.over {
            return Err(session_error(
                "unexpected answer: the run is over, nothing is waiting",
            ));
        }
        let answer = from_wit_answer(answer)?;
        state
            .machine
            .handle(answer)
            .map_err(|refused| refused.reason.into())
    }
}

/// A step of the machine as the WIT value `next` hands out; bulky values as JSON when `json`.
pub(super) fn to_wit_step(step: Step, json: bool) -> dr::Step {
    match step {
        Step::BeforeRun {
            agent,
            context,
            config,
        } => dr::Step::BeforeRun(if json {
            let config: Value = serde_json::from_str(&config).unwrap_or(Value::Null);
            dr::HookContext::Json(
                json!({
                    "agent": agent,
                    "prompt": context.prompt,
                    "messages": json::messages_to_value(&context.messages),
                    "config": config,
                })
                .to_string(),
            )
        } else {
            dr::HookContext::Typed(to_wit_context(agent, context, config))
        }),
        Step::Send(outgoing) => dr::Step::Send(to_wit_outgoing(outgoing)),
        Step::Receive => dr::Step::Receive,
        Step::Wait(ms) => dr::Step::Wait(ms),
        Step::CallTool(call) => dr::Step::CallTool(to_wit_tool_use(call)),
        Step::CallModel(call) => dr::Step::CallModel(call.to_json()),
        Step::External { kind, text } => dr::Step::ExternalSend(dr::ExternalRequest {
            kind: to_wit_external(kind),
            text,
        }),
        Step::DecideLoop(info) => dr::Step::DecideLoop(to_wit_loop_info(info)),
        Step::Compress {
            messages,
            estimated_tokens,
        } => dr::Step::Compress(dr::CompressRequest {
            messages: if json {
                dr::CompressMessages::Json(json::messages_to_json(&messages))
            } else {
                dr::CompressMessages::Typed(messages.into_iter().map(to_wit_message).collect())
            },
            estimated_tokens,
        }),
        Step::Event(event) => dr::Step::Event(to_wit_event(event)),
        Step::Progress(event) => dr::Step::Progress(to_wit_progress(event)),
        Step::Evaluation(record) => dr::Step::Evaluation(if json {
            dr::EvaluationCase::Json(evaluation_json(*record))
        } else {
            dr::EvaluationCase::Typed(to_wit_evaluation(*record))
        }),
        Step::Trace(event) => dr::Step::Trace(if json {
            dr::TraceReport::Json(event.to_json().to_string())
        } else {
            dr::TraceReport::Typed(to_wit_trace(*event))
        }),
        Step::Records(records) => dr::Step::TraceRecords(to_wit_records(records)),
        Step::Validate(value) => dr::Step::ValidateOutput(value.to_string()),
    }
}

/// The poll of a machine that waits for `due`, to be asked again by `wake_at_ms` at the latest.
pub(super) fn to_wit_waiting(due: Vec<Due>, wake_at_ms: Option<u64>) -> dr::Poll {
    dr::Poll::Waiting(dr::Waiting {
        due: due.into_iter().map(to_wit_due).collect(),
        wake_at_ms,
    })
}

fn to_wit_due(due: Due) -> dr::Due {
    match due {
        Due::Hook => dr::Due::BeforeRun,
        Due::Http => dr::Due::Http,
        Due::Tool(id) => dr::Due::Tool(id),
        Due::External => dr::Due::External,
        Due::Validation => dr::Due::Validation,
        Due::Compress => dr::Due::Compress,
        Due::LoopDecision => dr::Due::LoopDecision,
        Due::Model => dr::Due::Model,
    }
}

pub(super) fn session_error(message: &str) -> wit::Error {
    Error::Session {
        message: message.into(),
    }
    .into()
}

fn report(outcome: RunOutcome, json: bool) -> dr::RunReport {
    if json {
        dr::RunReport::Json(outcome_json(&outcome).to_string())
    } else {
        dr::RunReport::Typed(to_wit_result(outcome))
    }
}

fn evaluation_json(record: EvaluationRecord) -> String {
    json!({
        "agent": record.agent,
        "input": record.input,
        "payload": record.payload,
        "result": outcome_json(&record.result),
        "durationMs": record.duration_ms,
    })
    .to_string()
}

pub(super) fn from_wit_answer(answer: dr::Answer) -> Result<Answer, Error> {
    Ok(match answer {
        dr::Answer::Hook(answer) => Answer::Hook(from_wit_hook_answer(answer)),
        dr::Answer::Response(response) => Answer::Http(from_wit_response(response)),
        dr::Answer::Head(head) => Answer::Http(from_wit_head(head)),
        dr::Answer::Chunk(bytes) => Answer::Http(CallAnswer::Chunk(bytes)),
        dr::Answer::End => Answer::Http(CallAnswer::End),
        dr::Answer::Failure(failure) => Answer::Http(from_wit_failure(failure)),
        dr::Answer::Waited => Answer::Http(CallAnswer::Waited),
        dr::Answer::Tool(tool) => Answer::Tool {
            id: tool.id,
            outcome: from_wit_tool_outcome(tool.outcome),
        },
        dr::Answer::ToolJson(tool) => {
            let content = json::tool_result_content_from_json(&tool.content)?;
            Answer::Tool {
                id: tool.id,
                outcome: ToolOutcome {
                    content,
                    is_error: tool.is_error,
                    gate: tool.gate.map(from_wit_gate),
                },
            }
        }
        dr::Answer::External(reply) => Answer::External(reply),
        dr::Answer::Validated(Ok(text)) => {
            Answer::Validated(Ok(json::from_str(&text).map_err(|e| {
                Error::InvalidRequest {
                    message: format!("the validated value is not JSON text: {e}"),
                }
            })?))
        }
        dr::Answer::Validated(Err(message)) => Answer::Validated(Err(message)),
        // What the strategy returned is input: read as OMA checks it (a typed list is checked
        // by the loop with the same rules), never a failed call.
        dr::Answer::Compressed(messages) => Answer::Compressed(from_wit_messages(messages)),
        dr::Answer::CompressedJson(text) => Answer::Compressed(compressed_from_json(&text)),
        dr::Answer::CompressFailed(message) => Answer::Compressed(Err(Error::Host { message })),
        dr::Answer::LoopDecision(decision) => Answer::LoopDecision(decision),
        // What the adapter gave is input: read and checked, a malformed answer the call's
        // failure (which ends the run as failed), never a failed `answer`.
        dr::Answer::ModelResponse(text) => {
            Answer::Model(host_adapter::response_from_json(&text).map(ModelAnswer::Response))
        }
        dr::Answer::ModelEvent(text) => Answer::Model(host_adapter::answer_from_event_json(&text)),
        dr::Answer::ModelEnd => Answer::Model(Ok(ModelAnswer::End)),
        dr::Answer::ModelFailed(error) => Answer::Model(Err(from_wit_thrown(error))),
    })
}

/// The `custom` strategy's answer as OMA JSON: a list is read with OMA's shape guard (the turn
/// loop refuses an empty one), anything else is OMA's error for an answer that is no messages.
fn compressed_from_json(text: &str) -> Result<Vec<oma_core::message::LlmMessage>, Error> {
    match serde_json::from_str::<Value>(text) {
        Ok(items @ Value::Array(_)) => json::messages_from_value(items),
        _ => Err(oma_core::agent::context::custom_compress_not_messages()),
    }
}
