//! The one step loop of the worlds that do their own I/O: drives a [`RunMachine`] to its end,
//! performing its HTTP steps with a [`Transport`] (`oma-wasi`'s `HttpIo` over wasi:http, or the
//! Fastly layer's over Fastly's hostcalls) and handing every other step to the world that runs it
//! ([`StepHost`]). The `component` world answers those through its `host` imports; the gateway
//! answers them itself (no tools, no hook). All get the same loop, the same deadline handling
//! and the same fallback should the machine ever refuse an answer.
//!
//! Pure: the loop compiles on every target, so that any binding (and a native test) can drive
//! it with a transport of its own. It is a crate of its own, apart from the wasi:http transport
//! (`oma-wasi`), so that a layer without wasi:http (Fastly's) depends on the loop alone.

#![deny(missing_docs)]

use oma_core::agent::before_run::{BeforeRunContext, ExternalKind};
use oma_core::agent::exchange::{
    AgentEvent, EvaluationRecord, HookAnswer, ProgressEvent, ToolOutcome,
};
use std::collections::VecDeque;

use oma_core::agent::host_adapter::{ModelAnswer, ModelCall};
use oma_core::agent::machine::{Answer, Due, Poll, RunMachine, Step};
use oma_core::agent::outcome::RunOutcome;
use oma_core::http::call::{CallAnswer, Outgoing};
use oma_core::message::ToolUseBlock;

/// How a run's HTTP steps are performed: one request in flight at a time, its head answered by
/// [`Transport::send`] and its body read chunk by chunk by [`Transport::receive`]. What a
/// failure means (timeout, retry, egress) is the run's to decide, not the transport's.
pub trait Transport {
    /// Sends a request and answers with its head ([`CallAnswer::Head`]; the body stays in
    /// flight) or the failure ([`CallAnswer::Failure`]).
    fn send(&mut self, outgoing: &Outgoing) -> CallAnswer;
    /// The next chunk of the body in flight ([`CallAnswer::Chunk`]), its end
    /// ([`CallAnswer::End`]) or the failure.
    fn receive(&mut self) -> CallAnswer;
    /// Waits `ms` milliseconds (between retries); answers [`CallAnswer::Waited`].
    fn wait(&mut self, ms: u64) -> CallAnswer;
    /// Milliseconds since the Unix epoch, from the host's wall clock.
    fn now_ms(&self) -> u64;
}

/// What a world does with the steps wasi:http cannot perform. Calls are synchronous: the run
/// waits for each answer (a host import returns when it is done).
pub trait StepHost {
    /// Runs the `beforeRun` hook of `agent` on `context`.
    fn before_run(
        &mut self,
        agent: String,
        context: BeforeRunContext,
        config: String,
    ) -> HookAnswer;
    /// Calls the tool `call` asks for, for `agent`.
    fn call_tool(&mut self, agent: &str, call: ToolUseBlock) -> ToolOutcome;
    /// Calls the agent's own LLM adapter for one model call: its answers in order (`chat`'s
    /// response, or its stream's events up to `done`), or its failure. A host without
    /// adapters (the gateway, whose configurations cannot name one) keeps this default, which
    /// fails the run saying so.
    fn call_model(
        &mut self,
        agent: &str,
        call: ModelCall,
    ) -> Vec<Result<ModelAnswer, oma_core::error::Error>> {
        let _ = (agent, call);
        vec![Err(oma_core::error::Error::InvalidRequest {
            message: "the agent's adapter needs a host that runs it, which this one is not"
                .to_owned(),
        })]
    }
    /// Sends `text` through the external backend `kind`.
    fn external(&mut self, agent: &str, kind: ExternalKind, text: String)
        -> Result<String, String>;
    /// Delivers a progress event of `run-agent`.
    fn progress(&mut self, event: ProgressEvent);
    /// Delivers an evaluation case of `run-agent`.
    fn evaluation(&mut self, record: EvaluationRecord);
    /// Delivers one of OMA's trace events of a traced run; a host without a trace sink
    /// drops it.
    fn trace(&mut self, event: oma_core::agent::trace::TraceEvent) {
        let _ = event;
    }
    /// Delivers OMA's trace records of a run made with records on, in sequence order; a host
    /// without a record sink drops them.
    fn records(&mut self, records: Vec<oma_core::agent::observability::record::Observed>) {
        let _ = records;
    }
    /// Calls OMA's `onLoopDetected` function with a loop the run found: OMA's words back
    /// (`"terminate"`, `"warn"`, `"inject"`, anything else to go on), or its failure. A host
    /// without one keeps this default, which fails the run saying so.
    fn on_loop_detected(
        &mut self,
        agent: &str,
        info: oma_core::agent::loop_detect::LoopInfo,
    ) -> Result<String, String> {
        let _ = (agent, info);
        Err(
            "loopDetection.onLoopDetected needs a function, which this host does not provide"
                .to_owned(),
        )
    }
    /// Calls the `custom` context strategy's function (OMA's `compress(messages,
    /// estimatedTokens)`) with the conversation about to be sent; `Err` when it failed. A host
    /// without one (the gateway, which refuses the strategy) keeps this default, which fails
    /// the run saying so.
    fn compress(
        &mut self,
        agent: &str,
        messages: Vec<oma_core::message::LlmMessage>,
        estimated_tokens: u64,
    ) -> Result<Vec<oma_core::message::LlmMessage>, oma_core::error::Error> {
        let _ = (agent, messages, estimated_tokens);
        Err(oma_core::error::Error::InvalidRequest {
            message: "contextStrategy \"custom\" needs a compress function, which this host does not provide".to_owned(),
        })
    }
}

/// What [`WasiRun::next`] has to tell.
#[derive(Debug)]
pub enum Next {
    /// An event of the run.
    Event(AgentEvent),
    /// A request is about to go out (it is sent on the next call of [`WasiRun::next`]), so a
    /// caller that answers over HTTP itself can commit to its own response first.
    Sending,
    /// The run is over.
    Done(RunOutcome),
}

/// A run machine and its HTTP in flight, on transport `T` (`oma-wasi`'s `HttpIo` over
/// wasi:http for the `component` world and the gateway).
pub struct WasiRun<T: Transport> {
    machine: RunMachine,
    http: T,
    /// The request announced by [`Next::Sending`], sent at the next call.
    held: Option<Outgoing>,
    /// The adapter's answers to the model call in flight not given yet: the rest of its
    /// stream, given one by one as the run waits for them.
    model: VecDeque<Result<ModelAnswer, oma_core::error::Error>>,
    over: bool,
}

impl<T: Transport> WasiRun<T> {
    /// A run of `machine` whose HTTP steps `transport` performs, nothing done yet.
    pub fn with_transport(machine: RunMachine, transport: T) -> Self {
        WasiRun {
            machine,
            http: transport,
            held: None,
            model: VecDeque::new(),
            over: false,
        }
    }

    /// Runs to the end, delivering events to nobody; the outcome.
    pub fn finish(mut self, host: &mut dyn StepHost) -> RunOutcome {
        loop {
            if let Next::Done(outcome) = self.next(host) {
                return outcome;
            }
        }
    }

    /// Performs steps until there is something to tell. After [`Next::Done`] it says `Done`
    /// again with a failed outcome: the run is over.
    pub fn next(&mut self, host: &mut dyn StepHost) -> Next {
        loop {
            if self.over {
                return Next::Done(broken_run());
            }
            let answer = if let Some(outgoing) = self.held.take() {
                Answer::Http(self.http.send(&outgoing))
            } else {
                let step = match self.machine.poll(self.http.now_ms()) {
                    Poll::Step(step) => step,
                    Poll::Finished(outcome) => {
                        self.over = true;
                        return Next::Done(*outcome);
                    }
                    // The rest of the adapter's stream, as the run asks for it.
                    Poll::Waiting(due) if due.contains(&Due::Model) && !self.model.is_empty() => {
                        let answer = self.model.pop_front().map(Answer::Model);
                        if answer.is_some_and(|answer| self.machine.handle(answer).is_err()) {
                            self.over = true;
                            return Next::Done(broken_run());
                        }
                        continue;
                    }
                    // Every other answer is given before the next poll, so nothing can be due
                    // here; should it be, the run cannot go on.
                    Poll::Waiting(_) | Poll::Over => {
                        self.over = true;
                        return Next::Done(broken_run());
                    }
                };
                match step {
                    Step::Event(event) => return Next::Event(event),
                    Step::Send(outgoing) => {
                        self.held = Some(outgoing);
                        return Next::Sending;
                    }
                    Step::Receive => Answer::Http(self.http.receive()),
                    Step::Wait(ms) => Answer::Http(self.http.wait(ms)),
                    Step::Progress(event) => {
                        host.progress(event);
                        continue;
                    }
                    Step::Evaluation(record) => {
                        host.evaluation(*record);
                        continue;
                    }
                    Step::Trace(event) => {
                        host.trace(*event);
                        continue;
                    }
                    Step::Records(records) => {
                        host.records(records);
                        continue;
                    }
                    Step::BeforeRun {
                        agent,
                        context,
                        config,
                    } => Answer::Hook(host.before_run(agent, context, config)),
                    Step::CallTool(call) => {
                        let id = call.id.clone();
                        let outcome = host.call_tool(self.machine.agent_name(), call);
                        Answer::Tool { id, outcome }
                    }
                    Step::CallModel(call) => {
                        self.model = host.call_model(self.machine.agent_name(), *call).into();
                        // A host that gave nothing ended its stream at once.
                        Answer::Model(self.model.pop_front().unwrap_or(Ok(ModelAnswer::End)))
                    }
                    Step::External { kind, text } => {
                        Answer::External(host.external(self.machine.agent_name(), kind, text))
                    }
                    // Only a configuration with `"outputValidation": "host"` asks, and the
                    // hosts of this loop (the `component` world, the gateways) make none: the
                    // core's own validator checks their schemas. Should one ask, the answer
                    // counts as not validated rather than as valid.
                    Step::Validate(_) => Answer::Validated(Err(
                        oma_core::agent::structured::NO_HOST_VALIDATOR.into(),
                    )),
                    Step::DecideLoop(info) => {
                        Answer::LoopDecision(host.on_loop_detected(self.machine.agent_name(), info))
                    }
                    Step::Compress {
                        messages,
                        estimated_tokens,
                    } => Answer::Compressed(host.compress(
                        self.machine.agent_name(),
                        messages,
                        estimated_tokens,
                    )),
                }
            };
            if self.machine.handle(answer).is_err() {
                // The machine asked for exactly this answer; a refusal would be a bug here,
                // and ending the run beats looping.
                self.over = true;
                return Next::Done(broken_run());
            }
        }
    }
}

/// The outcome of a run the driver could not go on with: reported as a failed run rather than
/// a hang or a trap.
fn broken_run() -> RunOutcome {
    let error = oma_core::Error::Host {
        message: "the run ended without a result".into(),
    };
    let failure = oma_core::agent::outcome::classify(&error, false, None);
    RunOutcome::failed(&error, 0, failure)
}
