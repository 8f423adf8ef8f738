//! The `json-driver` export: the `driver` export's sessions (`crates/glue/session.rs`) with OMA
//! JSON in and out, for hosts that hold JSON. Each `next` polls the run and gives what it found
//! as the interface's WIT value, every bulky value as OMA JSON text; each `answer` is converted
//! and handed to it.

use std::cell::RefCell;

use oma_core::agent::exchange::{AgentEvent, HookAnswer};
use oma_core::agent::host_adapter::{self, ModelAnswer};
use oma_core::agent::machine::{Answer, Due, RunMachine, Step};
use oma_core::agent::outcome::outcome_json;
use oma_core::agent::turn::Event;
use oma_core::error::Error;
use oma_core::http::call::CallAnswer;
use oma_core::json;

use super::convert::*;
use super::exports::oma::agent::json_driver as jd;
use super::http::{from_wit_failure, from_wit_head, from_wit_response, to_wit_outgoing};
use super::run::*;
use super::session::{
    compressed_from_json, evaluation_json, hook_context_json, prompt_input_json, run_agent_json,
    run_input_json, tool_json_answer, validated_json, AgentCell, Polled, Session,
};
use super::wit::outcome as oc;
use super::wit::types as wit;
use super::Component;

impl jd::Guest for Component {
    type Agent = AgentResource;
    type Session = SessionResource;

    fn run_agent(
        config: String,
        input: String,
        strings: Vec<(String, String)>,
        options: oc::RunAgentOptions,
        session: jd::SessionOptions,
    ) -> Result<jd::Session, wit::Error> {
        let machine = run_agent_json(
            &config,
            &input,
            strings,
            options.progress,
            from_wit_evaluation(&options),
            session.seed,
        )?;
        SessionResource::wrap(machine, session)
    }
}

/// An `agent` resource.
pub struct AgentResource {
    agent: AgentCell,
}

impl AgentResource {
    fn run_session(
        &self,
        input: String,
        strings: Vec<(String, String)>,
        streaming: bool,
        options: jd::SessionOptions,
    ) -> Result<jd::Session, wit::Error> {
        let session = self.agent.run(
            run_input_json(&input, strings)?,
            streaming,
            options.seed,
            options.trace.map(from_wit_trace_options),
            options.records.as_deref(),
        )?;
        Ok(SessionResource::of(session, streaming))
    }

    fn prompt_session(
        &self,
        input: String,
        strings: Vec<(String, String)>,
        options: jd::SessionOptions,
    ) -> Result<jd::Session, wit::Error> {
        let session = self.agent.prompt(
            prompt_input_json(&input, strings)?,
            options.seed,
            options.trace.map(from_wit_trace_options),
            options.records.as_deref(),
        )?;
        Ok(SessionResource::of(session, false))
    }
}

impl jd::GuestAgent for AgentResource {
    fn create(config: String) -> Result<jd::Agent, wit::Error> {
        Ok(jd::Agent::new(AgentResource {
            agent: AgentCell::from_json(&config)?,
        }))
    }

    fn run(&self, input: String, options: jd::SessionOptions) -> Result<jd::Session, wit::Error> {
        self.run_session(input, Vec::new(), false, options)
    }

    fn run_parts(
        &self,
        input: String,
        strings: Vec<(String, String)>,
        options: jd::SessionOptions,
    ) -> Result<jd::Session, wit::Error> {
        self.run_session(input, strings, false, options)
    }

    fn stream(
        &self,
        input: String,
        options: jd::SessionOptions,
    ) -> Result<jd::Session, wit::Error> {
        self.run_session(input, Vec::new(), true, options)
    }

    fn stream_parts(
        &self,
        input: String,
        strings: Vec<(String, String)>,
        options: jd::SessionOptions,
    ) -> Result<jd::Session, wit::Error> {
        self.run_session(input, strings, true, options)
    }

    fn prompt(
        &self,
        input: String,
        options: jd::SessionOptions,
    ) -> Result<jd::Session, wit::Error> {
        self.prompt_session(input, Vec::new(), options)
    }

    fn prompt_parts(
        &self,
        input: String,
        strings: Vec<(String, String)>,
        options: jd::SessionOptions,
    ) -> Result<jd::Session, wit::Error> {
        self.prompt_session(input, strings, options)
    }

    fn history(&self) -> String {
        self.agent.history_json()
    }

    fn reset(&self) {
        self.agent.reset();
    }
}

/// A `session` resource: one run in flight.
pub struct SessionResource {
    session: RefCell<Session>,
    /// Whether `event` steps are handed out: only a `stream` session's caller reads them. A
    /// `run`, `prompt` or `run-agent` session's result holds what they say, so `next` passes
    /// over them (the run's trace has seen them already), saving the host a call for each.
    events: bool,
}

impl SessionResource {
    fn of(session: Session, events: bool) -> jd::Session {
        jd::Session::new(SessionResource {
            session: RefCell::new(session),
            events,
        })
    }

    /// A session over `machine`, traced and recorded when its options ask. Fails for records
    /// options OMA refuses, naming them.
    fn wrap(machine: RunMachine, options: jd::SessionOptions) -> Result<jd::Session, wit::Error> {
        let session = Session::new(
            machine,
            options.trace.map(from_wit_trace_options),
            options.records.as_deref(),
            None,
        )?;
        Ok(SessionResource::of(session, false))
    }
}

impl jd::GuestSession for SessionResource {
    fn next(&self, now_ms: u64) -> Result<jd::Poll, wit::Error> {
        let mut session = self.session.borrow_mut();
        loop {
            match session.next(now_ms)? {
                Polled::Step(Step::Event(_)) if !self.events => {}
                Polled::Step(step) => {
                    // The run's end comes as `finished`; an event saying it is not handed out.
                    if let Some(step) = to_wit_step(step) {
                        return Ok(jd::Poll::Step(step));
                    }
                }
                Polled::Waiting(due, wake_at_ms) => {
                    return Ok(jd::Poll::Waiting(jd::Waiting {
                        due: due.into_iter().map(to_wit_due).collect(),
                        wake_at_ms,
                    }))
                }
                Polled::Finished(outcome) => {
                    return Ok(jd::Poll::Finished(json_text(&outcome_json(&outcome))))
                }
            }
        }
    }

    fn answer(&self, answer: jd::Answer) -> Result<(), wit::Error> {
        let answer = from_wit_answer(answer);
        Ok(self.session.borrow_mut().answer(answer)?)
    }

    fn cancel(&self, now_ms: u64) -> Result<(), wit::Error> {
        Ok(self.session.borrow_mut().cancel(now_ms)?)
    }
}

/// A step of the machine as `next` hands it out, bulky values as OMA JSON; `None` for the
/// event of the run's end, which `finished` carries.
fn to_wit_step(step: Step) -> Option<jd::Step> {
    Some(match step {
        Step::BeforeRun {
            agent,
            context,
            config,
        } => jd::Step::BeforeRun(hook_context_json(&agent, &context, &config)),
        Step::Send(outgoing) => jd::Step::Send(to_wit_outgoing(outgoing)),
        Step::Receive => jd::Step::Receive,
        Step::Wait(ms) => jd::Step::Wait(ms),
        Step::CallTool(call) => jd::Step::CallTool(to_wit_tool_use(call)),
        Step::CallModel(call) => jd::Step::CallModel(call.to_json()),
        Step::External { kind, text } => jd::Step::ExternalSend(jd::ExternalRequest {
            kind: to_wit_external(kind),
            text,
        }),
        Step::DecideLoop(info) => jd::Step::DecideLoop(to_wit_loop_info(info)),
        Step::Compress {
            messages,
            estimated_tokens,
        } => jd::Step::Compress(jd::CompressRequest {
            messages: json::messages_to_json(&messages),
            estimated_tokens,
        }),
        Step::Event(event) => jd::Step::Event(to_wit_event(event)?),
        Step::Progress(event) => jd::Step::Progress(to_wit_progress(event)),
        Step::Evaluation(record) => jd::Step::Evaluation(evaluation_json(*record)),
        Step::Trace(event) => {
            jd::Step::Trace(serde_json::to_string(&*event).expect("a trace event is JSON"))
        }
        Step::Records(records) => jd::Step::TraceRecords(to_wit_records(records)),
        Step::Validate(value) => jd::Step::ValidateOutput(value.to_string()),
    })
}

/// A run event as the `event` step carries it; `None` for the run's end.
fn to_wit_event(event: AgentEvent) -> Option<jd::RunEvent> {
    Some(match event {
        AgentEvent::TextDelta(text) => jd::RunEvent::TextDelta(text),
        AgentEvent::ReasoningDelta(text) => jd::RunEvent::ReasoningDelta(text),
        AgentEvent::Turn(Event::Text(text)) => jd::RunEvent::Text(text),
        AgentEvent::Turn(Event::ToolUse(call)) => jd::RunEvent::ToolUse(to_wit_tool_use(call)),
        AgentEvent::Turn(Event::ToolResult(result)) => {
            jd::RunEvent::ToolResult(wit::ToolResultBlock {
                tool_use_id: result.tool_use_id,
                content: to_wit_content(result.content),
                is_error: result.is_error,
            })
        }
        AgentEvent::Turn(Event::BudgetExceeded(exceeded)) => {
            jd::RunEvent::BudgetExceeded(exceeded.to_string())
        }
        AgentEvent::Turn(Event::LoopDetected(info)) => {
            jd::RunEvent::LoopDetected(to_wit_loop_info(info))
        }
        AgentEvent::Done(_) => return None,
    })
}

fn to_wit_due(due: Due) -> jd::Due {
    match due {
        Due::Hook => jd::Due::BeforeRun,
        Due::Http => jd::Due::Http,
        Due::Tool(id) => jd::Due::Tool(id),
        Due::External => jd::Due::External,
        Due::Validation => jd::Due::Validation,
        Due::Compress => jd::Due::Compress,
        Due::LoopDecision => jd::Due::LoopDecision,
        Due::Model => jd::Due::Model,
    }
}

fn from_wit_answer(answer: jd::Answer) -> Result<Answer, Error> {
    Ok(match answer {
        jd::Answer::Hook(Ok(text)) => Answer::Hook(HookAnswer::from_json(&text)),
        jd::Answer::Hook(Err(message)) => Answer::Hook(HookAnswer::Failed(message)),
        jd::Answer::Response(response) => Answer::Http(from_wit_response(response)),
        jd::Answer::Head(head) => Answer::Http(from_wit_head(head)),
        jd::Answer::Chunk(bytes) => Answer::Http(CallAnswer::Chunk(bytes)),
        jd::Answer::End => Answer::Http(CallAnswer::End),
        jd::Answer::Failure(failure) => Answer::Http(from_wit_failure(failure)),
        jd::Answer::Waited => Answer::Http(CallAnswer::Waited),
        jd::Answer::ToolJson(tool) => tool_json_answer(
            tool.id,
            &tool.content,
            tool.is_error,
            tool.gate.map(from_wit_gate),
        )?,
        jd::Answer::External(reply) => Answer::External(reply),
        jd::Answer::Validated(Ok(text)) => Answer::Validated(Ok(validated_json(&text)?)),
        jd::Answer::Validated(Err(message)) => Answer::Validated(Err(message)),
        // What the strategy returned is input: read as OMA checks it, never a failed call.
        jd::Answer::CompressedJson(text) => Answer::Compressed(compressed_from_json(&text)),
        jd::Answer::CompressFailed(message) => Answer::Compressed(Err(Error::Host { message })),
        jd::Answer::LoopDecision(decision) => Answer::LoopDecision(decision),
        // What the adapter gave is input: read and checked, a malformed answer the call's
        // failure (which ends the run as failed), never a failed `answer`.
        jd::Answer::ModelResponse(text) => {
            Answer::Model(host_adapter::response_from_json(&text).map(ModelAnswer::Response))
        }
        jd::Answer::ModelEvent(text) => Answer::Model(host_adapter::answer_from_event_json(&text)),
        jd::Answer::ModelEnd => Answer::Model(Ok(ModelAnswer::End)),
        jd::Answer::ModelFailed(error) => Answer::Model(Err(from_wit_thrown(error))),
    })
}
