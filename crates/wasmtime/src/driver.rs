//! The `portable` world (`oma_portable.wasm`) through wasmtime: instantiated from an empty
//! linker, its runs stepped by a host loop that performs each step of a `driver` session with
//! the same hooks the `component` world's imports reach.
//!
//! A [`DriverGuest`] offers the agent calls of a [`Guest`](crate::Guest) (`create_agent`, `run`,
//! `stream`, `prompt`, `get_history`, `reset`, `run_agent`), so one test runs against both
//! worlds. Each run is a session: `send` steps go to the [`GuestOptions::hooks`] (the
//! [`CaptureOutbound`](crate::CaptureOutbound), [`LoopbackOnly`](crate::LoopbackOnly), ...
//! that would see the other world's wasi:http requests), the hook, tool, model, progress,
//! evaluation and external steps to the [`GuestOptions::host`], and `wait` steps to the tokio
//! timer.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::anyhow;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use wasmtime::component::{Linker, ResourceAny};
use wasmtime::Store;
use wasmtime_wasi_http::{RequestOptions, WasiBody};

use crate::agent::{AgentHandle, AgentStreamHandle, MAX_AGENT_EVENTS};
use crate::bindings::exports::oma::agent::codec::{BashRisk, BashRiskLevel, JudgeStep, OnlineStep};
use crate::bindings::oma::agent::exchange::ModelReply;
use crate::bindings::oma::agent::outcome::{
    AgentConfig, AgentEvent, PromptInput, RunAgentOptions, RunInput, RunResult,
};
use crate::bindings::oma::agent::types::{Error as WitError, LlmMessage};
use crate::bindings::portable::exports::oma::agent::codec::{
    BashRiskLevel as PortableLevel, JudgeStep as PortableStep, OnlineStep as PortableOnline,
};
use crate::bindings::portable::exports::oma::agent::driver::{
    Answer, CompressMessages, Due, EvaluationCase, HookContext, OutgoingRequest, Payloads, Poll,
    ResponseHead, RunReport, SessionOptions, Step, ToolAnswer, TraceReport, TransportFailure,
    TransportFailureKind,
};
use crate::bindings::portable::{PortableHost, PortableHostPre};
use crate::engine::{Compiled, HarnessOptions};
use crate::llm_adapter;
use crate::state::{GuestOptions, HostState};
use crate::store::start_call;

/// The most steps one run may take before the host loop gives up on it.
pub const MAX_SESSION_STEPS: usize = 1_000_000;

/// An engine with the portable guest compiled and pre-instantiated from an empty linker.
pub struct DriverHarness {
    compiled: Compiled,
    pre: PortableHostPre<HostState>,
}

impl std::fmt::Debug for DriverHarness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DriverHarness").finish_non_exhaustive()
    }
}

impl DriverHarness {
    /// A new engine with the portable component `options.component` compiled (or loaded from
    /// the cache) and pre-instantiated from an empty linker. Make one per process and keep it,
    /// as for [`Harness::new`](crate::Harness::new).
    ///
    /// Fails if the component cannot be read or compiled, or imports anything at all.
    pub fn new(options: HarnessOptions) -> anyhow::Result<DriverHarness> {
        let compiled = Compiled::new(&options)?;
        // The portable world imports nothing: an empty linker.
        let linker = Linker::<HostState>::new(compiled.engine());
        let pre = PortableHostPre::new(linker.instantiate_pre(compiled.component())?)?;
        Ok(DriverHarness { compiled, pre })
    }

    /// A fresh instance whose steps go to `options`' hooks and host. It runs under the same
    /// limits as the other world's guests: a deadline per exported call and a memory cap.
    pub async fn instantiate_with(&self, options: GuestOptions) -> anyhow::Result<DriverGuest> {
        let mut store = self.compiled.store(options);
        let bindings = self.pre.instantiate_async(&mut store).await?;
        Ok(DriverGuest {
            store,
            bindings,
            flights: HashMap::new(),
            next_flight: 1,
        })
    }
}

/// A caller's way to cancel a run the host drives (OMA's `AbortSignal`, Python's
/// `CancelToken`): cloned into whatever may decide to give up (a tool, another task) and handed
/// to [`DriverGuest::run_agent_cancellable`]. Once cancelled it stays cancelled.
#[derive(Clone, Debug, Default)]
pub struct CancelToken {
    flag: Arc<AtomicBool>,
    /// The token this one was made from ([`CancelToken::child`]), cancelled with it.
    parent: Option<Box<CancelToken>>,
}

impl CancelToken {
    /// A token not cancelled.
    pub fn new() -> Self {
        CancelToken::default()
    }

    /// A token cancelled when this one is, and also on its own: cancelling it leaves this one
    /// as it is (a scorer's deadline within its evaluation, say).
    pub fn child(&self) -> Self {
        CancelToken {
            flag: Arc::default(),
            parent: Some(Box::new(self.clone())),
        }
    }

    /// Cancels the runs this token was given to (and any it is given to later).
    pub fn cancel(&self) {
        self.flag.store(true, Ordering::SeqCst);
    }

    /// Whether [`CancelToken::cancel`] was called, on this token or one it was made from.
    pub fn is_cancelled(&self) -> bool {
        self.flag.load(Ordering::SeqCst) || self.parent.as_ref().is_some_and(|p| p.is_cancelled())
    }
}

/// The HTTP of one session in flight: the response body being read, and the run's agent; and
/// the rest of an LLM adapter's stream, answered event by event as the session asks; and the
/// caller's cancel token, with whether the session was told.
struct Flight {
    agent: String,
    body: Option<WasiBody>,
    between_bytes: Duration,
    model: VecDeque<Answer>,
    cancel: Option<CancelToken>,
    cancelled: bool,
}

impl Flight {
    fn new(agent: &str) -> Self {
        Flight {
            agent: agent.to_owned(),
            body: None,
            between_bytes: Duration::from_secs(30),
            model: VecDeque::new(),
            cancel: None,
            cancelled: false,
        }
    }

    /// Whether the caller cancelled and the session has not been told yet.
    fn cancel_due(&self) -> bool {
        !self.cancelled && self.cancel.as_ref().is_some_and(CancelToken::is_cancelled)
    }
}

/// A live portable instance.
pub struct DriverGuest {
    store: Store<HostState>,
    bindings: PortableHost,
    flights: HashMap<u64, Flight>,
    next_flight: u64,
}

impl std::fmt::Debug for DriverGuest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DriverGuest").finish_non_exhaustive()
    }
}

/// What one step of the host loop came to.
enum Driven {
    Event(AgentEvent),
    Done(RunResult),
    Continue,
}

fn typed(seed: u64) -> SessionOptions {
    SessionOptions {
        payloads: Payloads::Typed,
        seed,
        // The agent configuration's `trace` and `records` apply.
        trace: None,
        records: None,
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl DriverGuest {
    /// The host state of this instance.
    pub fn state_mut(&mut self) -> &mut HostState {
        self.store.data_mut()
    }

    /// `codec.messages-to-json` of the portable world.
    pub async fn messages_to_json(
        &mut self,
        messages: &[LlmMessage],
    ) -> anyhow::Result<Result<String, WitError>> {
        start_call(&mut self.store);
        Ok(self
            .bindings
            .oma_agent_codec()
            .call_messages_to_json(&mut self.store, messages)
            .await?)
    }

    /// `codec.materialize-run` of the portable world.
    pub async fn materialize_run(
        &mut self,
        records: &str,
        include_records: bool,
    ) -> anyhow::Result<Result<String, WitError>> {
        start_call(&mut self.store);
        Ok(self
            .bindings
            .oma_agent_codec()
            .call_materialize_run(&mut self.store, records, include_records)
            .await?)
    }

    /// `codec.process-trace-record` of the portable world: OMA's `SensitiveDataProcessor` with
    /// `options` (JSON) checked and, given a record (JSON), applied to it: the record its sink
    /// gets, or `None` when it is dropped.
    ///
    /// The outer error is a trap or host failure; the inner one the component's typed error.
    pub async fn process_trace_record(
        &mut self,
        options: &str,
        record: Option<&str>,
    ) -> anyhow::Result<Result<Option<String>, WitError>> {
        start_call(&mut self.store);
        Ok(self
            .bindings
            .oma_agent_codec()
            .call_process_trace_record(&mut self.store, options, record)
            .await?)
    }

    /// `codec.build-execution-receipt` of the portable world.
    pub async fn build_execution_receipt(
        &mut self,
        result: &str,
        trace: Option<&str>,
    ) -> anyhow::Result<Result<String, WitError>> {
        start_call(&mut self.store);
        Ok(self
            .bindings
            .oma_agent_codec()
            .call_build_execution_receipt(&mut self.store, result, trace)
            .await?)
    }

    /// `codec.score-builtin` of the portable world.
    pub async fn score_builtin(
        &mut self,
        scorer: &str,
        options: &str,
        context: Option<&str>,
    ) -> anyhow::Result<Result<String, WitError>> {
        start_call(&mut self.store);
        Ok(self
            .bindings
            .oma_agent_codec()
            .call_score_builtin(&mut self.store, scorer, options, context)
            .await?)
    }

    /// `codec.judge` of the portable world, taking the `component` world's step.
    pub async fn judge(
        &mut self,
        step: JudgeStep,
        request: &str,
    ) -> anyhow::Result<Result<String, WitError>> {
        start_call(&mut self.store);
        let step = match step {
            JudgeStep::Options => PortableStep::Options,
            JudgeStep::Prompt => PortableStep::Prompt,
            JudgeStep::Extract => PortableStep::Extract,
            JudgeStep::Verdict => PortableStep::Verdict,
            JudgeStep::Aggregate => PortableStep::Aggregate,
        };
        Ok(self
            .bindings
            .oma_agent_codec()
            .call_judge(&mut self.store, step, request)
            .await?)
    }

    /// `codec.online-evaluation` of the portable world, taking the `component` world's step.
    pub async fn online_evaluation(
        &mut self,
        step: OnlineStep,
        request: &str,
    ) -> anyhow::Result<Result<String, WitError>> {
        start_call(&mut self.store);
        let step = match step {
            OnlineStep::Case => PortableOnline::Case,
            OnlineStep::Record => PortableOnline::Record,
            OnlineStep::Flush => PortableOnline::Flush,
            OnlineStep::Admit => PortableOnline::Admit,
            OnlineStep::Start => PortableOnline::Start,
            OnlineStep::Cost => PortableOnline::Cost,
            OnlineStep::Report => PortableOnline::Report,
        };
        Ok(self
            .bindings
            .oma_agent_codec()
            .call_online_evaluation(&mut self.store, step, request)
            .await?)
    }

    /// `codec.redact-sensitive-text` of the portable world.
    pub async fn redact_sensitive_text(&mut self, text: &str) -> anyhow::Result<String> {
        start_call(&mut self.store);
        Ok(self
            .bindings
            .oma_agent_codec()
            .call_redact_sensitive_text(&mut self.store, text)
            .await?)
    }

    /// `codec.is-sensitive-name` of the portable world.
    pub async fn is_sensitive_name(&mut self, name: &str) -> anyhow::Result<bool> {
        start_call(&mut self.store);
        Ok(self
            .bindings
            .oma_agent_codec()
            .call_is_sensitive_name(&mut self.store, name)
            .await?)
    }

    /// `codec.classify-bash-command` of the portable world, as the `component` world's type.
    pub async fn classify_bash_command(&mut self, command: &str) -> anyhow::Result<BashRisk> {
        start_call(&mut self.store);
        let risk = self
            .bindings
            .oma_agent_codec()
            .call_classify_bash_command(&mut self.store, command)
            .await?;
        Ok(BashRisk {
            level: match risk.level {
                PortableLevel::Safe => BashRiskLevel::Safe,
                PortableLevel::Review => BashRiskLevel::Review,
                PortableLevel::High => BashRiskLevel::High,
            },
            reason: risk.reason,
        })
    }

    /// `driver.agent.create`.
    pub async fn create_agent(
        &mut self,
        config: &AgentConfig,
    ) -> anyhow::Result<Result<AgentHandle, WitError>> {
        start_call(&mut self.store);
        let driver = self.bindings.oma_agent_driver();
        Ok(driver
            .agent()
            .call_create(&mut self.store, config)
            .await?
            .map(|resource| AgentHandle::new(resource, &config.name)))
    }

    /// `driver.agent.create-json`.
    pub async fn create_agent_json(
        &mut self,
        config: &str,
    ) -> anyhow::Result<Result<AgentHandle, WitError>> {
        start_call(&mut self.store);
        let name = serde_json::from_str::<serde_json::Value>(config)
            .ok()
            .and_then(|v| v["name"].as_str().map(str::to_owned))
            .unwrap_or_else(|| "agent".into());
        let driver = self.bindings.oma_agent_driver();
        Ok(driver
            .agent()
            .call_create_json(&mut self.store, config)
            .await?
            .map(|resource| AgentHandle::new(resource, &name)))
    }

    /// `driver.agent.run`, with the session driven to its result.
    pub async fn run(
        &mut self,
        agent: &AgentHandle,
        input: &RunInput,
    ) -> anyhow::Result<Result<RunResult, WitError>> {
        start_call(&mut self.store);
        let driver = self.bindings.oma_agent_driver();
        let session = driver
            .agent()
            .call_run(&mut self.store, agent.resource, input, &typed(7))
            .await?;
        match session {
            Ok(session) => Ok(Ok(self.finish(session, &agent.name).await?)),
            Err(error) => Ok(Err(error)),
        }
    }

    /// `driver.agent.prompt`, with the session driven to its result.
    pub async fn prompt(
        &mut self,
        agent: &AgentHandle,
        input: &PromptInput,
    ) -> anyhow::Result<Result<RunResult, WitError>> {
        start_call(&mut self.store);
        let driver = self.bindings.oma_agent_driver();
        let session = driver
            .agent()
            .call_prompt(&mut self.store, agent.resource, input, &typed(7))
            .await?;
        match session {
            Ok(session) => Ok(Ok(self.finish(session, &agent.name).await?)),
            Err(error) => Ok(Err(error)),
        }
    }

    /// `driver.agent.stream`: the session; its events come from
    /// [`DriverGuest::next_agent_event`].
    pub async fn stream(
        &mut self,
        agent: &AgentHandle,
        input: &RunInput,
    ) -> anyhow::Result<Result<AgentStreamHandle, WitError>> {
        start_call(&mut self.store);
        let driver = self.bindings.oma_agent_driver();
        let session = driver
            .agent()
            .call_stream(&mut self.store, agent.resource, input, &typed(7))
            .await?;
        Ok(session.map(|resource| {
            let id = self.track(&agent.name);
            AgentStreamHandle::with_flight(resource, id)
        }))
    }

    /// The next event of a streamed session (its result as the last, `done` or `error`), `None`
    /// after that.
    pub async fn next_agent_event(
        &mut self,
        stream: &AgentStreamHandle,
    ) -> anyhow::Result<Option<AgentEvent>> {
        let id = stream.flight;
        let Some(mut flight) = self.flights.remove(&id) else {
            return Ok(None);
        };
        for _ in 0..MAX_SESSION_STEPS {
            match self.step(stream.resource, &mut flight).await? {
                Driven::Event(event) => {
                    self.flights.insert(id, flight);
                    return Ok(Some(event));
                }
                Driven::Done(result) => {
                    let event = if result.success {
                        AgentEvent::Done(result)
                    } else {
                        AgentEvent::Error(result)
                    };
                    return Ok(Some(event));
                }
                Driven::Continue => {}
            }
        }
        Err(anyhow!(
            "the session did not end within {MAX_SESSION_STEPS} steps"
        ))
    }

    /// Drops a session, abandoning its run.
    pub async fn close_agent_stream(&mut self, stream: AgentStreamHandle) -> anyhow::Result<()> {
        self.flights.remove(&stream.flight);
        stream.resource.resource_drop_async(&mut self.store).await?;
        Ok(())
    }

    /// Reads a streamed session to its end and drops it.
    pub async fn collect_agent_stream(
        &mut self,
        stream: AgentStreamHandle,
    ) -> anyhow::Result<Vec<AgentEvent>> {
        let mut events = Vec::new();
        for _ in 0..MAX_AGENT_EVENTS {
            match self.next_agent_event(&stream).await {
                Ok(Some(event)) => events.push(event),
                Ok(None) => {
                    self.close_agent_stream(stream).await?;
                    return Ok(events);
                }
                Err(error) => {
                    let _ = self.close_agent_stream(stream).await;
                    return Err(error);
                }
            }
        }
        self.close_agent_stream(stream).await?;
        Err(anyhow!(
            "the stream did not end within {MAX_AGENT_EVENTS} events"
        ))
    }

    /// `driver.agent.get-history`.
    pub async fn get_history(&mut self, agent: &AgentHandle) -> anyhow::Result<Vec<LlmMessage>> {
        start_call(&mut self.store);
        let driver = self.bindings.oma_agent_driver();
        Ok(driver
            .agent()
            .call_get_history(&mut self.store, agent.resource)
            .await?)
    }

    /// `driver.agent.reset`.
    pub async fn reset(&mut self, agent: &AgentHandle) -> anyhow::Result<()> {
        start_call(&mut self.store);
        let driver = self.bindings.oma_agent_driver();
        driver
            .agent()
            .call_reset(&mut self.store, agent.resource)
            .await?;
        Ok(())
    }

    /// Drops an agent (its sessions live on).
    pub async fn drop_agent(&mut self, agent: AgentHandle) -> anyhow::Result<()> {
        agent.resource.resource_drop_async(&mut self.store).await?;
        Ok(())
    }

    /// `driver.run-agent`, with the session driven to its result.
    pub async fn run_agent(
        &mut self,
        config: &AgentConfig,
        input: &RunInput,
        options: &RunAgentOptions,
    ) -> anyhow::Result<Result<RunResult, WitError>> {
        self.start_run_agent(config, input, options, None).await
    }

    /// `driver.run-agent` as [`DriverGuest::run_agent`], cancellable by its caller through
    /// `cancel`: once the token is cancelled (before the run, or while one of its steps is
    /// performed, a tool call say), the session is told (`session.cancel`) before it is asked
    /// for its next step, the answer of the step in hand is dropped (it came too late), and the
    /// session is driven on to OMA's cancelled result, delivering the records and legacy events
    /// that close the run's trace to the host.
    pub async fn run_agent_cancellable(
        &mut self,
        config: &AgentConfig,
        input: &RunInput,
        options: &RunAgentOptions,
        cancel: &CancelToken,
    ) -> anyhow::Result<Result<RunResult, WitError>> {
        self.start_run_agent(config, input, options, Some(cancel))
            .await
    }

    /// `driver.run-agent`'s session driven to its result, cancellable when `cancel` is given.
    async fn start_run_agent(
        &mut self,
        config: &AgentConfig,
        input: &RunInput,
        options: &RunAgentOptions,
        cancel: Option<&CancelToken>,
    ) -> anyhow::Result<Result<RunResult, WitError>> {
        start_call(&mut self.store);
        let driver = self.bindings.oma_agent_driver();
        let session = driver
            .call_run_agent(&mut self.store, config, input, *options, &typed(7))
            .await?;
        match session {
            Ok(session) => {
                let mut flight = Flight::new(&config.name);
                flight.cancel = cancel.cloned();
                Ok(Ok(self.drive(session, flight).await?))
            }
            Err(error) => Ok(Err(error)),
        }
    }

    /// `session.next`, unperformed: the raw poll, for a host that performs the steps itself.
    pub async fn next_step(
        &mut self,
        session: ResourceAny,
    ) -> anyhow::Result<Result<Poll, WitError>> {
        start_call(&mut self.store);
        let driver = self.bindings.oma_agent_driver();
        Ok(driver
            .session()
            .call_next(&mut self.store, session, now_ms())
            .await?)
    }

    /// `session.answer`, as given: a performed step's answer, from a host that steps itself.
    pub async fn answer(
        &mut self,
        session: ResourceAny,
        answer: &Answer,
    ) -> anyhow::Result<Result<(), WitError>> {
        start_call(&mut self.store);
        let driver = self.bindings.oma_agent_driver();
        Ok(driver
            .session()
            .call_answer(&mut self.store, session, answer)
            .await?)
    }

    /// `session.cancel` at this instant: the caller cancelled the run (OMA's `AbortSignal`).
    /// The session's next steps close its trace (the records ending its open spans as
    /// `cancelled`) and give OMA's cancelled result.
    pub async fn cancel(&mut self, session: ResourceAny) -> anyhow::Result<Result<(), WitError>> {
        start_call(&mut self.store);
        let driver = self.bindings.oma_agent_driver();
        Ok(driver
            .session()
            .call_cancel(&mut self.store, session, now_ms())
            .await?)
    }

    /// Cancels a streamed session (OMA's `AbortSignal` on `stream`): the response in flight is
    /// abandoned, and [`DriverGuest::next_agent_event`] then delivers what closes the run's
    /// trace to the host and gives the `error` event with OMA's cancelled result. Fails with
    /// the session's `SessionStateError` once the stream has ended.
    pub async fn cancel_agent_stream(
        &mut self,
        stream: &AgentStreamHandle,
    ) -> anyhow::Result<Result<(), WitError>> {
        if let Some(flight) = self.flights.get_mut(&stream.flight) {
            flight.body = None;
            flight.model.clear();
        }
        self.cancel(stream.resource).await
    }

    /// The typed bindings of this instance, for calls the wrappers above do not cover.
    pub fn parts(&mut self) -> (&mut Store<HostState>, &PortableHost) {
        (&mut self.store, &self.bindings)
    }

    fn track(&mut self, agent: &str) -> u64 {
        let id = self.next_flight;
        self.next_flight += 1;
        self.flights.insert(id, Flight::new(agent));
        id
    }

    /// Drives `session` to its result and drops it.
    async fn finish(&mut self, session: ResourceAny, agent: &str) -> anyhow::Result<RunResult> {
        self.drive(session, Flight::new(agent)).await
    }

    /// Drives `session` to its result with `flight` and drops it.
    async fn drive(
        &mut self,
        session: ResourceAny,
        mut flight: Flight,
    ) -> anyhow::Result<RunResult> {
        let mut outcome = Err(anyhow!(
            "the session did not end within {MAX_SESSION_STEPS} steps"
        ));
        for _ in 0..MAX_SESSION_STEPS {
            match self.step(session, &mut flight).await {
                Ok(Driven::Done(result)) => {
                    outcome = Ok(result);
                    break;
                }
                Ok(_) => {}
                Err(error) => {
                    outcome = Err(error);
                    break;
                }
            }
        }
        session.resource_drop_async(&mut self.store).await?;
        outcome
    }

    /// Asks for one step and performs it; first tells the session of its caller's cancel.
    async fn step(&mut self, session: ResourceAny, flight: &mut Flight) -> anyhow::Result<Driven> {
        if flight.cancel_due() {
            flight.cancelled = true;
            flight.body = None;
            flight.model.clear();
            // Refused only when the run is already over: its result stands.
            let _ = self.cancel(session).await?;
        }
        let step = match self.next_step(session).await? {
            Ok(Poll::Step(step)) => step,
            Ok(Poll::Finished(RunReport::Typed(result))) => return Ok(Driven::Done(result)),
            Ok(Poll::Finished(RunReport::Json(_))) => {
                return Err(anyhow!("a typed session gave JSON"))
            }
            // The next event of an adapter's stream.
            Ok(Poll::Waiting(waiting))
                if waiting.due.contains(&Due::Model) && !flight.model.is_empty() =>
            {
                let answer = flight.model.pop_front().unwrap_or(Answer::ModelEnd);
                return match self.answer(session, &answer).await? {
                    Ok(()) => Ok(Driven::Continue),
                    Err(error) => Err(anyhow!("session.answer refused: {}", error.message)),
                };
            }
            // This driver answers every other step before it asks again, so nothing else can
            // be due.
            Ok(Poll::Waiting(waiting)) => {
                return Err(anyhow!("the session waits for {:?}", waiting.due))
            }
            Err(error) => return Err(anyhow!("session.next failed: {}", error.message)),
        };
        let answer = match step {
            Step::Event(event) => return Ok(Driven::Event(event)),
            Step::Progress(event) => {
                self.store.data_mut().agent_host().progress(event);
                return Ok(Driven::Continue);
            }
            Step::Evaluation(EvaluationCase::Typed(record)) => {
                self.store.data_mut().agent_host().evaluation(record);
                return Ok(Driven::Continue);
            }
            Step::Trace(TraceReport::Typed(event)) => {
                self.store.data_mut().agent_host().trace(event);
                return Ok(Driven::Continue);
            }
            Step::TraceRecords(records) => {
                self.store.data_mut().trace_records(records);
                return Ok(Driven::Continue);
            }
            Step::DecideLoop(info) => Answer::LoopDecision(
                self.store
                    .data_mut()
                    .agent_host()
                    .on_loop_detected(&flight.agent, info),
            ),
            Step::Compress(request) => match request.messages {
                CompressMessages::Typed(messages) => {
                    match self.store.data_mut().agent_host().compress(
                        &flight.agent,
                        messages,
                        request.estimated_tokens,
                    ) {
                        Ok(messages) => Answer::Compressed(messages),
                        Err(message) => Answer::CompressFailed(message),
                    }
                }
                CompressMessages::Json(_) => return Err(anyhow!("a typed session gave JSON")),
            },
            Step::Evaluation(EvaluationCase::Json(_))
            | Step::BeforeRun(HookContext::Json(_))
            | Step::Trace(TraceReport::Json(_)) => {
                return Err(anyhow!("a typed session gave JSON"))
            }
            Step::BeforeRun(HookContext::Typed(context)) => {
                Answer::Hook(self.store.data_mut().agent_host().before_run(context))
            }
            Step::CallTool(call) => {
                let id = call.id.clone();
                let outcome = self.store.data_mut().call_tool(&flight.agent, call);
                Answer::Tool(ToolAnswer { id, outcome })
            }
            Step::CallModel(call) => {
                let host = self.store.data_mut().agent_host();
                flight.model.clear();
                match llm_adapter::reply(host, &flight.agent, &call) {
                    ModelReply::Response(response) => Answer::ModelResponse(response),
                    ModelReply::Failed(error) => Answer::ModelFailed(error),
                    ModelReply::Events(events) => {
                        // The stream's end follows its events; the session stops asking after
                        // `done` or `error`.
                        flight.model = events.into_iter().map(Answer::ModelEvent).collect();
                        flight.model.push_back(Answer::ModelEnd);
                        flight.model.pop_front().unwrap_or(Answer::ModelEnd)
                    }
                }
            }
            Step::ExternalSend(request) => {
                Answer::External(self.store.data_mut().agent_host().external_send(
                    &flight.agent,
                    request.kind,
                    request.text,
                ))
            }
            Step::Send(request) => self.send(request, flight).await,
            Step::Receive => receive(flight).await,
            Step::Wait(ms) => {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Answer::Waited
            }
            // Asked only by an agent made with `"outputValidation": "host"`, which a typed
            // configuration cannot say (the component's validator checks its schema).
            Step::ValidateOutput(_) => Answer::Validated(Err(
                "Output validation failed:\n  - (root): this host has no validator of its own"
                    .into(),
            )),
        };
        if flight.cancel_due() {
            // The caller cancelled while the step was performed: its answer comes too late.
            return Ok(Driven::Continue);
        }
        match self.answer(session, &answer).await? {
            Ok(()) => Ok(Driven::Continue),
            Err(error) => Err(anyhow!("session.answer refused: {}", error.message)),
        }
    }

    /// Sends a request through the installed hooks; answers with its head or the failure.
    async fn send(&mut self, request: OutgoingRequest, flight: &mut Flight) -> Answer {
        flight.body = None;
        let timeout = Duration::from_millis(request.timeout_ms);
        flight.between_bytes = timeout;
        let mut builder = http::Request::builder()
            .method(request.method.as_str())
            .uri(request.url.as_str());
        for (name, value) in &request.headers {
            builder = builder.header(name.as_str(), value.as_str());
        }
        builder = builder.header("content-length", request.body.len().to_string());
        let body: WasiBody = Full::new(Bytes::from(request.body.into_bytes()))
            .map_err(|never| match never {})
            .boxed_unsync();
        let http_request = match builder.body(body) {
            Ok(r) => r,
            Err(e) => return failure(TransportFailureKind::Other, &e.to_string()),
        };
        let options = RequestOptions {
            connect_timeout: Some(timeout),
            first_byte_timeout: Some(timeout),
            between_bytes_timeout: Some(timeout),
        };
        let future = self.store.data_mut().hooks_mut().send_request(
            http_request,
            Some(options),
            Box::new(async { Ok(()) }),
        );
        let sent = tokio::time::timeout(timeout, Box::into_pin(future)).await;
        let (response, io) = match sent {
            Err(_) => return failure(TransportFailureKind::TimedOut, "no response in time"),
            Ok(Err(error)) => return transport_failure(&error),
            Ok(Ok(parts)) => parts,
        };
        // The connection's I/O runs beside the body; its errors surface in the body.
        tokio::spawn(async move {
            let _ = Box::into_pin(io).await;
        });
        let (parts, body) = response.into_parts();
        flight.body = Some(body);
        Answer::Head(ResponseHead {
            status: parts.status.as_u16(),
            headers: parts
                .headers
                .iter()
                .map(|(n, v)| {
                    (
                        n.as_str().to_owned(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect(),
        })
    }
}

/// Reads the next data of the body in flight.
async fn receive(flight: &mut Flight) -> Answer {
    let Some(body) = flight.body.as_mut() else {
        return Answer::End;
    };
    loop {
        match tokio::time::timeout(flight.between_bytes, body.frame()).await {
            Err(_) => {
                flight.body = None;
                return failure(TransportFailureKind::TimedOut, "connection read timeout");
            }
            Ok(None) => {
                flight.body = None;
                return Answer::End;
            }
            Ok(Some(Err(error))) => {
                flight.body = None;
                return transport_failure(&error);
            }
            Ok(Some(Ok(frame))) => match frame.into_data() {
                Ok(data) if !data.is_empty() => return Answer::Chunk(data.to_vec()),
                // Empty data and trailers carry nothing for the run.
                _ => {}
            },
        }
    }
}

fn failure(kind: TransportFailureKind, message: &str) -> Answer {
    Answer::Failure(TransportFailure {
        kind,
        message: message.to_owned(),
    })
}

/// A wasi-http error as the driver's transport failure.
fn transport_failure(error: &wasmtime_wasi_http::Error) -> Answer {
    use wasmtime_wasi_http::Error as E;
    let kind = match error {
        E::ConnectionTimeout
        | E::ConnectionReadTimeout
        | E::ConnectionWriteTimeout
        | E::HttpResponseTimeout => TransportFailureKind::TimedOut,
        E::HttpRequestDenied => TransportFailureKind::Denied,
        E::ConnectionRefused => TransportFailureKind::Refused,
        E::ConnectionTerminated | E::HttpResponseIncomplete => TransportFailureKind::Reset,
        _ => TransportFailureKind::Other,
    };
    failure(kind, &format!("{error:?}"))
}
