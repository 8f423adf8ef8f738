//! The `agent` export: each run is a [`RunMachine`] driven here, its HTTP steps performed with
//! wasi:http and its hook, tool, progress, evaluation and external steps answered through the
//! `host` imports. The same machine is what the `portable` world hands to its host.

use std::cell::RefCell;

use oma_core::agent::machine::{Answer, RunMachine, Step};
use oma_core::agent::session::{self, AgentEvent};
use oma_core::agent::turn::RunOutcome;
use oma_wasi as wasi;

use super::convert::*;
use super::exports::oma::agent::agent as ag;
use super::oma::agent::host;
use super::oma::agent::outcome as oc;
use super::oma::agent::types as wit;
use super::run::*;
use super::Component;

impl ag::Guest for Component {
    type Agent = AgentResource;
    type AgentStream = AgentStreamResource;

    fn run_agent(
        config: oc::AgentConfig,
        input: oc::RunInput,
        options: oc::RunAgentOptions,
    ) -> Result<oc::RunResult, wit::Error> {
        let machine = run_agent_machine(config, input, &options, wasi::random_u64())?;
        Ok(to_wit_result(Driver::new(machine).finish()))
    }
}

/// An `agent` resource.
pub struct AgentResource {
    agent: RefCell<session::Agent>,
}

impl ag::GuestAgent for AgentResource {
    fn create(config: oc::AgentConfig) -> Result<ag::Agent, wit::Error> {
        let (spec, history) = from_wit_config(config)?;
        let agent = session::Agent::new(spec, history)?;
        Ok(ag::Agent::new(AgentResource {
            agent: RefCell::new(agent),
        }))
    }

    fn run(&self, input: oc::RunInput) -> Result<oc::RunResult, wit::Error> {
        let machine =
            self.agent
                .borrow()
                .start(from_wit_input(input)?, false, wasi::random_u64())?;
        Ok(to_wit_result(Driver::new(machine).finish()))
    }

    fn stream(&self, input: oc::RunInput) -> Result<ag::AgentStream, wit::Error> {
        let machine =
            self.agent
                .borrow()
                .start(from_wit_input(input)?, true, wasi::random_u64())?;
        Ok(ag::AgentStream::new(AgentStreamResource {
            driver: RefCell::new(Driver::new(machine)),
        }))
    }

    fn prompt(&self, input: oc::PromptInput) -> Result<oc::RunResult, wit::Error> {
        let (turn, machine) = self
            .agent
            .borrow()
            .start_prompt(from_wit_prompt(input)?, wasi::random_u64())?;
        let outcome = Driver::new(machine).finish();
        self.agent.borrow_mut().commit(turn, &outcome);
        Ok(to_wit_result(outcome))
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

    fn reset(&self) {
        self.agent.borrow_mut().reset();
    }
}

/// An `agent-stream` resource: a run in flight.
pub struct AgentStreamResource {
    driver: RefCell<Driver>,
}

impl ag::GuestAgentStream for AgentStreamResource {
    fn next(&self) -> Option<oc::AgentEvent> {
        self.driver.borrow_mut().next_event().map(to_wit_event)
    }
}

/// A run machine and its HTTP in flight: performs each step with wasi:http or a `host`
/// import and feeds the answer back.
struct Driver {
    machine: RunMachine,
    http: wasi::HttpIo,
    done: bool,
}

impl Driver {
    fn new(machine: RunMachine) -> Self {
        Driver {
            machine,
            http: wasi::HttpIo::default(),
            done: false,
        }
    }

    /// Drives the run to its end.
    fn finish(mut self) -> RunOutcome {
        let mut last = None;
        while let Some(event) = self.next_event() {
            if let AgentEvent::Done(outcome) = event {
                last = Some(outcome);
            }
        }
        // `next_event` always ends with `Done`; should that ever break, say so in the result.
        last.unwrap_or_else(|| {
            let error = oma_core::Error::Host {
                message: "the run ended without a result".into(),
            };
            let failure = oma_core::agent::outcome::classify(&error, false, None);
            RunOutcome::failed(&error, 0, failure)
        })
    }

    /// The next event of the run (the last is `Done`), performing every step before it.
    fn next_event(&mut self) -> Option<AgentEvent> {
        if self.done {
            return None;
        }
        loop {
            let Some(step) = self.machine.poll(wasi::now_ms()) else {
                // The machine waits for an answer this driver owes it, or is over; either way
                // the run cannot go on.
                self.done = true;
                return None;
            };
            let answer = match step {
                Step::Event(event) => return Some(event),
                Step::Done(outcome) => {
                    self.done = true;
                    return Some(AgentEvent::Done(outcome));
                }
                Step::Progress(event) => {
                    host::progress(&to_wit_progress(event));
                    continue;
                }
                Step::Evaluation(record) => {
                    host::evaluation(&to_wit_evaluation(*record));
                    continue;
                }
                Step::BeforeRun {
                    agent,
                    context,
                    config,
                } => Answer::Hook(from_wit_hook_answer(host::before_run(&to_wit_context(
                    agent, context, config,
                )))),
                Step::CallTool(call) => {
                    let id = call.id.clone();
                    let agent = self.machine.agent_name().to_owned();
                    let outcome = host::call_tool(&agent, &to_wit_tool_use(call));
                    Answer::Tool {
                        id,
                        outcome: from_wit_tool_outcome(outcome),
                    }
                }
                Step::External { kind, text } => {
                    let agent = self.machine.agent_name().to_owned();
                    Answer::External(host::external_send(&agent, to_wit_external(kind), &text))
                }
                Step::Send(outgoing) => Answer::Http(self.http.send(&outgoing)),
                Step::Receive => Answer::Http(self.http.receive()),
                Step::Wait(ms) => Answer::Http(wasi::HttpIo::wait(ms)),
            };
            if self.machine.handle(answer).is_err() {
                // The machine asked for exactly this answer; a refusal would be a bug here,
                // and ending the run beats looping.
                self.done = true;
                return None;
            }
        }
    }
}
