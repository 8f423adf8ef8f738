//! The `driver` export: agents whose runs are sessions (`crates/glue/session.rs`) handed to the
//! host as `session` resources. Each `next` polls the run and gives what it found (a step, the
//! answers it waits for with the instant to ask again, or the result) as a WIT value; each
//! `answer` is converted and handed to it. OMA JSON is accepted wherever a dynamic host holds
//! JSON.

use std::cell::RefCell;

use oma_core::agent::entry;
use oma_core::agent::evaluation::RunInput;
use oma_core::agent::host_adapter::{self, ModelAnswer};
use oma_core::agent::input::PromptInput;
use oma_core::agent::machine::{Answer, Due, Step};
use oma_core::agent::outcome::outcome_json;
use oma_core::agent::outcome::RunOutcome;
use oma_core::error::Error;
use oma_core::http::call::CallAnswer;
use oma_core::json;

use super::convert::*;
use super::exports::oma::agent::driver as dr;
use super::http::{from_wit_failure, from_wit_head, from_wit_response, to_wit_outgoing};
use super::run::*;
use super::session::{
    compressed_from_json, evaluation_json, hook_context_json, prompt_input_json, run_agent_json,
    run_input_json, tool_json_answer, validated_json, AgentCell, Polled, Session,
};
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
        SessionResource::wrap(machine, &session)
    }

    fn run_agent_json(
        config: String,
        input: String,
        options: oc::RunAgentOptions,
        session: dr::SessionOptions,
    ) -> Result<dr::Session, wit::Error> {
        let machine = run_agent_json(
            &config,
            &input,
            Vec::new(),
            options.progress,
            from_wit_evaluation(&options),
            session.seed,
        )?;
        SessionResource::wrap(machine, &session)
    }
}

/// An `agent` resource.
pub struct AgentResource {
    agent: AgentCell,
}

impl AgentResource {
    fn wrap(agent: AgentCell) -> dr::Agent {
        dr::Agent::new(AgentResource { agent })
    }

    fn run_session(
        &self,
        input: RunInput,
        streaming: bool,
        options: dr::SessionOptions,
    ) -> Result<dr::Session, wit::Error> {
        let session = self.agent.run(
            input,
            streaming,
            options.seed,
            options.trace.map(from_wit_trace_options),
            options.records.as_deref(),
        )?;
        Ok(SessionResource::of(session, options.payloads))
    }

    fn prompt_session(
        &self,
        input: PromptInput,
        options: dr::SessionOptions,
    ) -> Result<dr::Session, wit::Error> {
        let session = self.agent.prompt(
            input,
            options.seed,
            options.trace.map(from_wit_trace_options),
            options.records.as_deref(),
        )?;
        Ok(SessionResource::of(session, options.payloads))
    }
}

impl dr::GuestAgent for AgentResource {
    fn create(config: oc::AgentConfig) -> Result<dr::Agent, wit::Error> {
        let (spec, history) = from_wit_config(config)?;
        Ok(AgentResource::wrap(AgentCell::new(entry::Agent::new(
            spec, history,
        )?)))
    }

    fn create_json(config: String) -> Result<dr::Agent, wit::Error> {
        Ok(AgentResource::wrap(AgentCell::from_json(&config)?))
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
        self.agent
            .history()
            .into_iter()
            .map(to_wit_message)
            .collect()
    }

    fn get_history_json(&self) -> String {
        self.agent.history_json()
    }

    fn reset(&self) {
        self.agent.reset();
    }
}

/// A `session` resource: one run in flight, with the form its bulky values are handed out in.
pub struct SessionResource {
    session: RefCell<Session>,
    json: bool,
}

impl SessionResource {
    fn of(session: Session, payloads: dr::Payloads) -> dr::Session {
        dr::Session::new(SessionResource {
            session: RefCell::new(session),
            json: matches!(payloads, dr::Payloads::Json),
        })
    }

    /// A session over `machine`, traced and recorded when its options ask. Fails for records
    /// options OMA refuses, naming them.
    fn wrap(
        machine: oma_core::agent::machine::RunMachine,
        options: &dr::SessionOptions,
    ) -> Result<dr::Session, wit::Error> {
        let session = Session::new(
            machine,
            options.trace.clone().map(from_wit_trace_options),
            options.records.as_deref(),
            None,
        )?;
        Ok(SessionResource::of(session, options.payloads))
    }
}

impl dr::GuestSession for SessionResource {
    fn next(&self, now_ms: u64) -> Result<dr::Poll, wit::Error> {
        Ok(match self.session.borrow_mut().next(now_ms)? {
            Polled::Step(step) => dr::Poll::Step(to_wit_step(step, self.json)),
            Polled::Waiting(due, wake_at_ms) => to_wit_waiting(due, wake_at_ms),
            Polled::Finished(outcome) => dr::Poll::Finished(report(*outcome, self.json)),
        })
    }

    fn answer(&self, answer: dr::Answer) -> Result<(), wit::Error> {
        let answer = from_wit_answer(answer);
        Ok(self.session.borrow_mut().answer(answer)?)
    }

    fn cancel(&self, now_ms: u64) -> Result<(), wit::Error> {
        Ok(self.session.borrow_mut().cancel(now_ms)?)
    }
}

/// A step of the machine as the WIT value `next` hands out; bulky values as JSON when `json`.
fn to_wit_step(step: Step, json: bool) -> dr::Step {
    match step {
        Step::BeforeRun {
            agent,
            context,
            config,
        } => dr::Step::BeforeRun(if json {
            dr::HookContext::Json(hook_context_json(&agent, &context, &config))
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
            dr::TraceReport::Json(serde_json::to_string(&*event).expect("a trace event is JSON"))
        } else {
            dr::TraceReport::Typed(to_wit_trace(*event))
        }),
        Step::Records(records) => dr::Step::TraceRecords(to_wit_records(records)),
        Step::Validate(value) => dr::Step::ValidateOutput(value.to_string()),
    }
}

/// The poll of a machine that waits for `due`, to be asked again by `wake_at_ms` at the latest.
fn to_wit_waiting(due: Vec<Due>, wake_at_ms: Option<u64>) -> dr::Poll {
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

fn report(outcome: RunOutcome, json: bool) -> dr::RunReport {
    if json {
        dr::RunReport::Json(outcome_json(&outcome).to_string())
    } else {
        dr::RunReport::Typed(to_wit_result(outcome))
    }
}

fn from_wit_answer(answer: dr::Answer) -> Result<Answer, Error> {
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
        dr::Answer::ToolJson(tool) => tool_json_answer(
            tool.id,
            &tool.content,
            tool.is_error,
            tool.gate.map(from_wit_gate),
        )?,
        dr::Answer::External(reply) => Answer::External(reply),
        dr::Answer::Validated(Ok(text)) => Answer::Validated(Ok(validated_json(&text)?)),
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
