//! The `agent` export: each run is a [`RunMachine`] driven here, its HTTP steps performed with
//! wasi:http and its hook, tool, progress, evaluation and external steps answered through the
//! `host` imports. The same machine is what the `portable` world hands to its host.

use std::cell::RefCell;

use oma_core::agent::before_run::{BeforeRunContext, ExternalKind};
use oma_core::agent::entry;
use oma_core::agent::exchange::{
    AgentEvent, EvaluationRecord, HookAnswer, ProgressEvent, ToolOutcome,
};
use oma_core::agent::host_adapter::{ModelAnswer, ModelCall};
use oma_core::agent::machine::RunMachine;
use oma_core::agent::outcome::RunOutcome;
use oma_core::message::ToolUseBlock;
use oma_wasi::{self as wasi, HttpIo, Next, StepHost, WasiRun};

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
    agent: RefCell<entry::Agent>,
}

impl ag::GuestAgent for AgentResource {
    fn create(config: oc::AgentConfig) -> Result<ag::Agent, wit::Error> {
        let (spec, history) = from_wit_config(config)?;
        let agent = entry::Agent::new(spec, history)?;
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

/// The `host` imports, as the wasi step loop's [`StepHost`].
struct HostImports;

impl StepHost for HostImports {
    fn before_run(
        &mut self,
        agent: String,
        context: BeforeRunContext,
        config: String,
    ) -> HookAnswer {
        from_wit_hook_answer(host::before_run(&to_wit_context(agent, context, config)))
    }

    fn call_tool(&mut self, agent: &str, call: ToolUseBlock) -> ToolOutcome {
        from_wit_tool_outcome(host::call_tool(agent, &to_wit_tool_use(call)))
    }

    fn call_model(
        &mut self,
        agent: &str,
        call: ModelCall,
    ) -> Vec<Result<ModelAnswer, oma_core::error::Error>> {
        from_wit_model_reply(host::call_model(agent, &call.to_json()))
    }

    fn external(
        &mut self,
        agent: &str,
        kind: ExternalKind,
        text: String,
    ) -> Result<String, String> {
        host::external_send(agent, to_wit_external(kind), &text)
    }

    fn progress(&mut self, event: ProgressEvent) {
        host::progress(&to_wit_progress(event));
    }

    fn evaluation(&mut self, record: EvaluationRecord) {
        host::evaluation(&to_wit_evaluation(record));
    }

    fn trace(&mut self, event: oma_core::agent::trace::TraceEvent) {
        host::trace(&to_wit_trace(event));
    }

    fn records(&mut self, records: Vec<oma_core::agent::observability::record::Observed>) {
        host::trace_records(&to_wit_records(records));
    }

    fn on_loop_detected(
        &mut self,
        agent: &str,
        info: oma_core::agent::loop_detect::LoopInfo,
    ) -> Result<String, String> {
        host::on_loop_detected(agent, &to_wit_loop_info(info))
    }

    fn compress(
        &mut self,
        agent: &str,
        messages: Vec<oma_core::message::LlmMessage>,
        estimated_tokens: u64,
    ) -> Result<Vec<oma_core::message::LlmMessage>, oma_core::error::Error> {
        let messages: Vec<_> = messages.into_iter().map(to_wit_message).collect();
        match host::compress(agent, &messages, estimated_tokens) {
            // Checked by the loop with OMA's rules.
            Ok(messages) => from_wit_messages(messages),
            Err(message) => Err(oma_core::error::Error::Host { message }),
        }
    }
}

/// A run on the wasi step loop, its events handed out one at a time.
struct Driver {
    run: WasiRun<HttpIo>,
    done: bool,
}

impl Driver {
    fn new(machine: RunMachine) -> Self {
        Driver {
            run: wasi::run_of(machine),
            done: false,
        }
    }

    /// Drives the run to its end.
    fn finish(self) -> RunOutcome {
        self.run.finish(&mut HostImports)
    }

    /// The next event of the run (the last is `Done`), performing every step before it.
    fn next_event(&mut self) -> Option<AgentEvent> {
        if self.done {
            return None;
        }
        loop {
            match self.run.next(&mut HostImports) {
                Next::Event(event) => return Some(event),
                Next::Sending => continue,
                Next::Done(outcome) => {
                    self.done = true;
                    return Some(AgentEvent::Done(outcome));
                }
            }
        }
    }
}

/// What the `component` world's `host.call-model` returned, as the answers the run takes one
/// by one: the response, or the events (with the end when they stop before `done` or `error`,
/// so that the call fails saying so), or the failure.
fn from_wit_model_reply(
    reply: host::ModelReply,
) -> Vec<Result<ModelAnswer, oma_core::error::Error>> {
    use oma_core::agent::host_adapter::{answer_from_event_json, response_from_json};
    match reply {
        host::ModelReply::Response(text) => {
            vec![response_from_json(&text).map(ModelAnswer::Response)]
        }
        host::ModelReply::Failed(error) => vec![Err(from_wit_thrown(error))],
        host::ModelReply::Events(events) => {
            let mut answers = Vec::with_capacity(events.len() + 1);
            for event in events {
                let answer = answer_from_event_json(&event);
                let last = matches!(
                    answer,
                    Err(_) | Ok(ModelAnswer::Event(oma_core::adapter::StreamEvent::Done(_)))
                );
                answers.push(answer);
                if last {
                    return answers;
                }
            }
            answers.push(Ok(ModelAnswer::End));
            answers
        }
    }
}
