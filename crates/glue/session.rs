//! What a session of the `driver` export and of the `json-driver` export does, whatever the
//! WIT types it is handed out in: an agent's runs as [`RunMachine`]s, polled and answered, a
//! `prompt` committed to its agent's history when it completes, and the OMA JSON both exports
//! take and give (run and prompt input, the hook's context, evaluation cases, tool and
//! compression answers). `crates/glue/driver.rs` and `crates/glue/json_driver.rs` convert
//! between these and their own bindings' types.

use std::cell::RefCell;
use std::rc::{Rc, Weak};

use serde_json::{json, Value};

use oma_core::agent::before_run::BeforeRunContext;
use oma_core::agent::entry;
use oma_core::agent::evaluation::{RunInput, StorePayloads};
use oma_core::agent::exchange::{EvaluationRecord, ToolGate, ToolOutcome};
use oma_core::agent::input::PromptInput;
use oma_core::agent::machine::{Answer, Due, Poll, RunMachine, Step};
use oma_core::agent::observability::options::RecordOptions;
use oma_core::agent::outcome::{outcome_json, RunOutcome};
use oma_core::agent::trace::TraceOptions;
use oma_core::error::Error;
use oma_core::json;
use oma_core::message::LlmMessage;

/// An agent with its persistent history. Its sessions hold a weak reference, so dropping the
/// agent leaves them running (a `prompt` then has no history to commit to).
pub(super) struct AgentCell {
    agent: Rc<RefCell<entry::Agent>>,
}

impl AgentCell {
    /// An agent from OMA-style configuration JSON (`agent.create-json`).
    pub(super) fn from_json(config: &str) -> Result<Self, Error> {
        let (spec, history) =
            oma_core::agent::config::AgentSettings::from_json(config)?.into_spec()?;
        Ok(Self::new(entry::Agent::new(spec, history)?))
    }

    pub(super) fn new(agent: entry::Agent) -> Self {
        AgentCell {
            agent: Rc::new(RefCell::new(agent)),
        }
    }

    /// A fresh run (`streaming` for `stream`); history is neither read nor written.
    pub(super) fn run(
        &self,
        input: RunInput,
        streaming: bool,
        seed: u64,
        trace: Option<TraceOptions>,
        records: Option<&str>,
    ) -> Result<Session, Error> {
        let machine = self.agent.borrow().start(input, streaming, seed)?;
        Session::new(machine, trace, records, None)
    }

    /// A `prompt` on the history, committed when its session completes.
    pub(super) fn prompt(
        &self,
        input: PromptInput,
        seed: u64,
        trace: Option<TraceOptions>,
        records: Option<&str>,
    ) -> Result<Session, Error> {
        let (turn, machine) = self.agent.borrow().start_prompt(input, seed)?;
        let commit = Some((Rc::downgrade(&self.agent), turn));
        Session::new(machine, trace, records, commit)
    }

    /// A copy of the persistent history.
    pub(super) fn history(&self) -> Vec<LlmMessage> {
        self.agent.borrow().history().to_vec()
    }

    /// The persistent history as OMA JSON.
    pub(super) fn history_json(&self) -> String {
        json::messages_to_json(self.agent.borrow().history())
    }

    /// Clears the persistent history.
    pub(super) fn reset(&self) {
        self.agent.borrow_mut().reset();
    }
}

/// What a session's `next` found.
pub(super) enum Polled {
    /// A step to perform or deliver.
    Step(Step),
    /// The answers due, and the instant to ask again at the latest.
    Waiting(Vec<Due>, Option<u64>),
    /// The run's result (a `prompt`'s turn committed already).
    Finished(Box<RunOutcome>),
}

/// One run in flight.
pub(super) struct Session {
    machine: RunMachine,
    /// For a `prompt`: the agent and the user turn to commit when the run completes.
    commit: Option<(Weak<RefCell<entry::Agent>>, LlmMessage)>,
    over: bool,
}

impl Session {
    /// A session over `machine`, traced and recorded when its options ask (over the agent's own
    /// `trace` and `records`). Fails for records options OMA refuses, naming them.
    pub(super) fn new(
        machine: RunMachine,
        trace: Option<TraceOptions>,
        records: Option<&str>,
        commit: Option<(Weak<RefCell<entry::Agent>>, LlmMessage)>,
    ) -> Result<Self, Error> {
        let machine = match trace {
            Some(trace) => machine.with_trace(trace),
            None => machine,
        };
        let machine = match records {
            Some(records) => machine.with_records(RecordOptions::from_json(records)?)?,
            None => machine,
        };
        Ok(Session {
            machine,
            commit,
            over: false,
        })
    }

    /// What the run needs at `now_ms`. Fails only once the result was given.
    pub(super) fn next(&mut self, now_ms: u64) -> Result<Polled, Error> {
        if self.over {
            return Err(session_error("the run is over: its result was given"));
        }
        match self.machine.poll(now_ms) {
            Poll::Step(step) => Ok(Polled::Step(step)),
            Poll::Waiting(due) => Ok(Polled::Waiting(due, self.machine.wake_at())),
            Poll::Finished(outcome) => {
                self.over = true;
                if let Some((agent, turn)) = self.commit.take() {
                    if let Some(agent) = agent.upgrade() {
                        agent.borrow_mut().commit(turn, &outcome);
                    }
                }
                Ok(Polled::Finished(outcome))
            }
            Poll::Over => {
                self.over = true;
                Err(session_error("the run is over: its result was given"))
            }
        }
    }

    /// Hands an answer to the run; `answer` is the converted answer, or why it could not be
    /// read (refused, changing nothing).
    pub(super) fn answer(&mut self, answer: Result<Answer, Error>) -> Result<(), Error> {
        if self.over {
            return Err(session_error(
                "unexpected answer: the run is over, nothing is waiting",
            ));
        }
        self.machine
            .handle(answer?)
            .map_err(|refused| refused.reason)
    }
}

impl Session {
    /// The caller cancelled the run at `now_ms`: `next` hands out what closes its trace, then
    /// OMA's cancelled result. A `prompt` commits nothing. Fails once the result was given or
    /// the run has ended.
    pub(super) fn cancel(&mut self, now_ms: u64) -> Result<(), Error> {
        if self.over {
            return Err(session_error("the run is over: its result was given"));
        }
        self.machine.cancel(now_ms)?;
        // OMA's cancelled `prompt` leaves the history as it was.
        self.commit = None;
        Ok(())
    }
}

/// OMA's `runAgent` of an OMA-style configuration and OMA JSON input (with its long strings
/// passed beside the text, as `run_input_json` takes them): the run's machine, with progress
/// events when `progress`, and evaluated under `evaluation`'s policy and sample rate.
pub(super) fn run_agent_json(
    config: &str,
    input: &str,
    strings: Vec<(String, String)>,
    progress: bool,
    evaluation: Option<(StorePayloads, f64)>,
    seed: u64,
) -> Result<RunMachine, Error> {
    let (spec, _history) =
        oma_core::agent::config::AgentSettings::from_json(config)?.into_spec()?;
    entry::start_run_agent(
        spec,
        run_input_json(input, strings)?,
        progress,
        evaluation,
        seed,
    )
}

/// OMA's `SessionStateError` with `message`.
pub(super) fn session_error(message: &str) -> Error {
    Error::Session {
        message: message.into(),
    }
}

/// OMA's `string | LLMMessage[]` as JSON text, with the long strings passed beside it. A
/// message list with nothing beside it is read straight into the model where it can be
/// (`json::direct_messages`: the same messages the guard and the typing give), else through a
/// `Value`.
pub(super) fn run_input_json(
    text: &str,
    strings: Vec<(String, String)>,
) -> Result<RunInput, Error> {
    if strings.is_empty() {
        if let Some(messages) = json::direct_messages(text) {
            return Ok(RunInput::Messages(messages));
        }
    }
    match parse_json(text, strings)? {
        Value::String(text) => Ok(RunInput::Text(text)),
        other => Ok(RunInput::Messages(json::messages_from_value(other)?)),
    }
}

/// A prompt's `string | ContentBlock[]` as JSON text (with the long strings passed beside it);
/// blocks are checked as the one user turn they form.
pub(super) fn prompt_input_json(
    text: &str,
    strings: Vec<(String, String)>,
) -> Result<PromptInput, Error> {
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

/// The `beforeRun` hook's context as OMA JSON: `{"agent", "prompt", "messages", "config"}`.
pub(super) fn hook_context_json(agent: &str, context: &BeforeRunContext, config: &str) -> String {
    let config: Value = serde_json::from_str(config).unwrap_or(Value::Null);
    json!({
        "agent": agent,
        "prompt": context.prompt,
        "messages": json::messages_to_value(&context.messages),
        "config": config,
    })
    .to_string()
}

/// An evaluation case as OMA JSON: `{"agent", "input", "payload", "result", "durationMs"}`.
pub(super) fn evaluation_json(record: EvaluationRecord) -> String {
    json!({
        "agent": record.agent,
        "input": record.input,
        "payload": record.payload,
        "result": outcome_json(&record.result),
        "durationMs": record.duration_ms,
    })
    .to_string()
}

/// A tool's answer given as OMA JSON content; content that is not OMA JSON is refused.
pub(super) fn tool_json_answer(
    id: String,
    content: &str,
    is_error: Option<bool>,
    gate: Option<ToolGate>,
) -> Result<Answer, Error> {
    let content = json::tool_result_content_from_json(content)?;
    Ok(Answer::Tool {
        id,
        outcome: ToolOutcome {
            content,
            is_error,
            gate,
        },
    })
}

/// The host validator's value (JSON text), as the run takes it.
pub(super) fn validated_json(text: &str) -> Result<Value, Error> {
    json::from_str(text).map_err(|e| Error::InvalidRequest {
        message: format!("the validated value is not JSON text: {e}"),
    })
}

/// The `custom` strategy's answer as OMA JSON: a list is read with OMA's shape guard (the turn
/// loop refuses an empty one), anything else is OMA's error for an answer that is no messages.
pub(super) fn compressed_from_json(text: &str) -> Result<Vec<LlmMessage>, Error> {
    match serde_json::from_str::<Value>(text) {
        Ok(items @ Value::Array(_)) => json::messages_from_value(items),
        _ => Err(oma_core::agent::context::custom_compress_not_messages()),
    }
}
