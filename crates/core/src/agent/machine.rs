//! One run as a state machine with no I/O (OMA's `Agent.run`/`stream`/`prompt` and `runAgent`;
//! see `docs/agent.md`): it owns the whole run, from the `beforeRun` hook to the result, and says
//! at each point what it needs from the world.
//!
//! In the manner of rustls's `Connection` and quinn-proto's `poll`/`handle`: [`RunMachine::poll`]
//! says what the run needs now, one of three things ([`Poll`]): a [`Step`] to perform or deliver
//! (call the hook, send this request, read more of the body, wait, call this tool, send this
//! text to an external backend, deliver an event, a progress event or an evaluation case);
//! that it is waiting for the answers listed ([`Due`]); or that it is finished, with its
//! outcome. [`RunMachine::handle`] takes the [`Answer`] to a step that needs one.
//! [`RunMachine::wake_at`] says when the machine next needs a `poll` even if no answer comes
//! (the end of a retry wait, the run's deadline), so that a host holds a hook, a tool or an
//! external backend to the deadline: it polls at that instant, and a run past its deadline ends
//! with OMA's timeout whatever was in flight. Time comes in with each `poll` and randomness
//! from the seed the run was made with, so the machine reads no clock and no random source.
//!
//! Call order:
//!
//! 1. Make a machine ([`RunMachine::run`] or [`RunMachine::run_agent`]) over prepared input
//!    ([`crate::agent::input`]): invalid input has already failed, before anything happened.
//! 2. `poll(now)`: perform each [`Poll::Step`]; a step either needs an answer (`BeforeRun`,
//!    `Send`, `Receive`, `Wait`, `CallTool`, `External`) or only delivery (`Event`,
//!    `Progress`, `Evaluation`).
//! 3. On [`Poll::Waiting`], `handle` the answers listed as they arrive (tool calls of one turn
//!    in any order, at once if the host likes), polling again after each, and at
//!    [`wake_at`](RunMachine::wake_at) at the latest.
//! 4. [`Poll::Finished`] carries the outcome, once; a later poll says [`Poll::Over`].
//!
//! An answer the machine did not ask for (a tool outcome while it waits for HTTP, an unknown
//! tool id, a second answer to one step, anything after the result) is handed back in a
//! [`Refused`] with an [`Error::Session`] as the reason, and nothing changes: the convention the
//! call and turn machines share. Everything that goes wrong in the run itself (a hook that
//! failed, a provider error, unsupported content, a broken tool answer, an exceeded budget, the
//! deadline) ends it with a failed [`RunOutcome`], never with an error. Never panics.

use std::collections::VecDeque;

use serde_json::json;

use crate::adapter::{self, Adapter, ChatRequest, Endpoint, IdSource, StreamEvent};
use crate::agent::before_run::{self, transport_prompt, BeforeRunContext, ExternalKind};
use crate::agent::evaluation::{scorer_input, stored_payload, RunInput, StorePayloads};
use crate::agent::exchange::{
    AgentEvent, EvaluationRecord, HookAnswer, ProgressEvent, ToolOutcome,
};
use crate::agent::outcome::classify;
use crate::agent::outcome::outcome_json;
use crate::agent::outcome::{Ending, RunOutcome};
use crate::agent::progress::agent_start_data;
use crate::agent::structured::{self, OutputSchema};
use crate::agent::trace::{TraceEvent, TraceOptions, Tracer};
use crate::agent::turn::{Action, TurnLoop, TurnOptions};
use crate::error::{Error, Refused};
use crate::http::call::{Call, CallAnswer, CallOptions, CallPoll, CallStep, Outgoing};
use crate::message::{ContentBlock, LlmMessage, Role, TextBlock, TokenUsage, ToolResultBlock};
use crate::rng::Rng;
use crate::validate::validate_tool_result_at;

/// Everything a run needs to know about its agent.
#[derive(Clone, Debug)]
pub struct RunSpec {
    /// The request every turn starts from: model, system prompt, tools, sampling; its messages
    /// are ignored.
    pub template: ChatRequest,
    /// The agent's name, turn limit, token budget and provider.
    pub turn: TurnOptions,
    /// Whether to call the `beforeRun` hook.
    pub before_run: bool,
    /// An external text-only backend instead of a provider.
    pub external: Option<ExternalKind>,
    /// The agent's configuration as OMA JSON for the hook's context, without secrets.
    pub config_json: String,
    /// The most the run may take, in milliseconds from its first step; `None` for no limit.
    pub deadline_ms: Option<u64>,
    /// Trace every run of this spec; `None` for no tracing (see [`RunMachine::with_trace`]).
    pub trace: Option<TraceOptions>,
    /// The provider (`anthropic`, `openai`, `gemini`, ...), which picks the wire format.
    pub provider: String,
    /// Where requests go and the credentials; its `timestamp` is set per request.
    pub endpoint: Endpoint,
    /// Retries, timeouts, size limit and egress policy of each provider call.
    pub call: CallOptions,
    /// The final answer's schema (OMA's `outputSchema`); `None` for free text. Its instruction
    /// is already in `template.system_prompt` (`AgentSettings::into_spec` puts it there).
    pub output_schema: Option<OutputSchema>,
}

impl RunSpec {
    /// The agent's name.
    pub fn name(&self) -> &str {
        &self.turn.agent_name
    }

    /// The provider a trace names: none for a run on an external backend.
    fn traced_provider(&self) -> Option<&str> {
        (self.external.is_none() && !self.provider.is_empty()).then_some(self.provider.as_str())
    }

    /// The wire format of this spec's provider; fails for an unknown provider without a base
    /// URL. `ids` feeds the ids a format makes up (Gemini).
    pub fn adapter(&self, ids: IdSource) -> Result<Box<dyn Adapter>, Error> {
        adapter::for_provider(&self.provider, self.endpoint.base_url.as_deref(), ids)
    }
}

/// What the machine needs next, or has to deliver.
#[derive(Debug, PartialEq)]
pub enum Step {
    /// Run the `beforeRun` hook on this context (a copy of its own); answer with
    /// [`Answer::Hook`].
    BeforeRun {
        /// The agent's name.
        agent: String,
        /// The hook's context: the prompt and the effective messages.
        context: BeforeRunContext,
        /// The agent's configuration as OMA JSON, without secrets.
        config: String,
    },
    /// Send this HTTP request; answer with a response, a head then chunks, or a failure
    /// ([`Answer::Http`]).
    Send(Outgoing),
    /// Read more of the response body; answer with a chunk, the end, or a failure.
    Receive,
    /// Wait this many milliseconds before retrying; answer with [`CallAnswer::Waited`].
    Wait(u64),
    /// Call this tool; answer with [`Answer::Tool`] under the call's id.
    CallTool(crate::message::ToolUseBlock),
    /// Call OMA's `onLoopDetected` function with this loop (already announced as an event);
    /// answer with [`Answer::LoopDecision`].
    DecideLoop(crate::agent::loop_detect::LoopInfo),
    /// Call the `custom` context strategy's function with the conversation about to be sent
    /// and its token estimate (OMA's `compress(messages, estimatedTokens)`); answer with
    /// [`Answer::Compressed`].
    Compress {
        /// The conversation (a copy of its own).
        messages: Vec<LlmMessage>,
        /// OMA's `estimateTokens` of it.
        estimated_tokens: u64,
    },
    /// Send this text through an external text-only backend; answer with [`Answer::External`].
    External {
        /// Which backend.
        kind: ExternalKind,
        /// The text to send.
        text: String,
    },
    /// An event of the run (deltas when streaming, turn texts, tool calls and results, an
    /// exceeded budget); no answer.
    Event(AgentEvent),
    /// A progress event of `run-agent`; no answer.
    Progress(ProgressEvent),
    /// An online-evaluation case of `run-agent`; no answer.
    Evaluation(Box<EvaluationRecord>),
    /// One of OMA's trace events, for a run made with [`RunMachine::with_trace`]; no answer.
    Trace(Box<TraceEvent>),
    /// Check this JSON value, read from the final answer, against the schema the host holds
    /// (an output schema the host validates); answer with [`Answer::Validated`].
    Validate(serde_json::Value),
}

/// What [`RunMachine::poll`] found: the three cases a host acts on, and [`Poll::Over`] for a
/// machine whose outcome was already handed out.
// A step is handed out by value on every poll, the hot path of a run; boxing it would cost an
// allocation per step to shrink the rare `Waiting` and `Over`.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, PartialEq)]
pub enum Poll {
    /// Perform (or deliver) this step.
    Step(Step),
    /// Nothing to do until these answers arrive (or [`RunMachine::wake_at`] passes). Never
    /// empty.
    Waiting(Vec<Due>),
    /// The run is over, with its outcome (given once).
    Finished(Box<RunOutcome>),
    /// The outcome was handed out by an earlier poll; nothing follows.
    Over,
}

/// An answer the machine waits for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Due {
    /// The `beforeRun` hook's answer.
    Hook,
    /// The answer to the last `Send`, `Receive` or `Wait`.
    Http,
    /// The outcome of the tool call with this id.
    Tool(String),
    /// The external backend's reply.
    External,
    /// The host's verdict on the value of a [`Step::Validate`].
    Validation,
    /// The `custom` context strategy's messages.
    Compress,
    /// The `onLoopDetected` function's decision.
    LoopDecision,
}

/// The answer to a step.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// How the `beforeRun` hook answered.
    Hook(HookAnswer),
    /// What happened to a `Send`, `Receive` or `Wait`.
    Http(CallAnswer),
    /// What the tool call `id` returned.
    Tool {
        /// The id of the tool-use block answered.
        id: String,
        /// The tool's answer.
        outcome: ToolOutcome,
    },
    /// An external backend's output, or its failure message.
    External(Result<String, String>),
    /// The host's verdict on a [`Step::Validate`]: the value as it validated it (a validator
    /// may fill in defaults or drop unknown keys), or OMA's message naming the problems
    /// (`Output validation failed:` then `  - <path>: <message>` lines).
    Validated(Result<serde_json::Value, String>),
    /// What the `custom` context strategy's function returned, or how it failed (a thrown
    /// error as [`Error::Host`], an answer that is not messages as the error reading it).
    Compressed(Result<Vec<LlmMessage>, Error>),
    /// What the `onLoopDetected` function answered (OMA's `"terminate"`, `"warn"`, `"inject"`,
    /// anything else to go on), or its failure message (it threw), which ends the run.
    LoopDecision(Result<String, String>),
}

/// What `run-agent` adds around a run.
#[derive(Debug)]
struct Reporting {
    agent: String,
    progress: bool,
    /// The input as given, for progress and evaluation; `None` when neither needs it.
    given: Option<RunInput>,
    /// The evaluation policy, when this run was sampled.
    evaluation: Option<StorePayloads>,
    /// The time of the first poll.
    started_ms: Option<u64>,
}

/// Where the run stands.
enum Phase {
    /// Prepared; nothing has happened yet.
    Start(Vec<LlmMessage>),
    /// The hook was handed out; its answer is due.
    Hook(BeforeRunContext),
    /// The text was handed to the external backend; its answer is due.
    External,
    /// The turn loop is running, with the provider call of the current turn when one is in
    /// flight.
    Turns(Box<Turns>),
    /// The final answer's value was handed to the host to validate; its verdict is due.
    Validate(Box<RunOutcome>),
    /// The run ended: the steps that follow it are queued, and its outcome waits to be handed
    /// out (`None` once it was).
    Over(Option<Box<RunOutcome>>),
}

/// The attempts of a run with an output schema (OMA's `validateStructuredOutput`).
struct Attempts {
    /// The messages the first attempt ran on (after the hook), which the retry repeats.
    input: Vec<LlmMessage>,
    /// The first attempt's outcome, its messages ending with the feedback turn, while the
    /// retry runs.
    first: Option<RunOutcome>,
    /// Whether the retry started (there is no third attempt).
    retried: bool,
}

struct Turns {
    turn: TurnLoop,
    call: Option<Call>,
}

/// One run. See the module documentation for the call order.
pub struct RunMachine {
    spec: RunSpec,
    streaming: bool,
    phase: Phase,
    queue: VecDeque<Step>,
    rng: Rng,
    now_ms: u64,
    /// The time of the first poll.
    started_ms: Option<u64>,
    /// When the retry wait handed out last ends, while it is due.
    wait_until_ms: Option<u64>,
    reporting: Option<Reporting>,
    /// The run's seed.
    seed: u64,
    /// Trace events, when the host asked for them.
    tracer: Option<Box<Tracer>>,
    /// The attempts, for a run with an output schema once its turns began.
    attempts: Option<Box<Attempts>>,
    /// The retry's turns were just set up and have not been stepped yet.
    retry_began: bool,
}

impl std::fmt::Debug for RunMachine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunMachine")
            .field("agent", &self.spec.name())
            .field("streaming", &self.streaming)
            .finish_non_exhaustive()
    }
}

impl RunMachine {
    /// A run of `spec` over prepared `messages` (`run`, `stream`, `prompt`). With `streaming`,
    /// each turn is a streamed request whose pieces come out as
    /// [`AgentEvent::TextDelta`]/[`AgentEvent::ReasoningDelta`] events. `seed` seeds every
    /// random draw of the run.
    pub fn run(spec: RunSpec, messages: Vec<LlmMessage>, streaming: bool, seed: u64) -> Self {
        let tracer = spec.trace.clone().map(|options| {
            Box::new(Tracer::new(
                options,
                spec.name(),
                spec.traced_provider(),
                seed,
            ))
        });
        RunMachine {
            spec,
            streaming,
            phase: Phase::Start(messages),
            queue: VecDeque::new(),
            rng: Rng::new(seed),
            now_ms: 0,
            started_ms: None,
            wait_until_ms: None,
            reporting: None,
            seed,
            tracer,
            attempts: None,
            retry_began: false,
        }
    }

    /// The same run, handing out OMA's trace events as [`Step::Trace`]: an `llm_call` per
    /// model call that answered, a `tool_call` per answered tool call and the run's `agent`
    /// event before its result (`docs/agent.md#tracing`). Ids that `options` leaves out are
    /// drawn from the run's seed; a traced run's other draws are those of an untraced one.
    #[must_use]
    pub fn with_trace(mut self, options: TraceOptions) -> Self {
        let provider = self.spec.traced_provider();
        self.tracer = Some(Box::new(Tracer::new(
            options,
            self.spec.name(),
            provider,
            self.seed,
        )));
        self
    }

    /// OMA's `runAgent` over prepared `messages`, `given` being the input as the caller gave it
    /// (needed only with progress or evaluation):
    /// progress `agent_start` first, then the run, `budget_exceeded` when it applies,
    /// `agent_complete`, and the evaluation case when the run is sampled (drawn now).
    pub fn run_agent(
        spec: RunSpec,
        messages: Vec<LlmMessage>,
        given: Option<RunInput>,
        progress: bool,
        evaluation: Option<(StorePayloads, f64)>,
        seed: u64,
    ) -> Self {
        let mut machine = RunMachine::run(spec, messages, false, seed);
        let sampled = evaluation
            .filter(|(_, rate)| *rate >= 1.0 || (*rate > 0.0 && machine.rng.next_unit() < *rate))
            .map(|(policy, _)| policy);
        machine.reporting = Some(Reporting {
            agent: machine.spec.name().to_owned(),
            progress,
            given: given.filter(|_| progress || sampled.is_some()),
            evaluation: sampled,
            started_ms: None,
        });
        machine
    }

    /// The name of the agent this run belongs to.
    pub fn agent_name(&self) -> &str {
        self.spec.name()
    }

    /// The answers the machine waits for; empty while steps are queued, before the first poll
    /// and after the end.
    pub fn due(&self) -> Vec<Due> {
        if !self.queue.is_empty() {
            return Vec::new();
        }
        match &self.phase {
            Phase::Hook(_) => vec![Due::Hook],
            Phase::External => vec![Due::External],
            Phase::Validate(_) => vec![Due::Validation],
            Phase::Turns(turns) => match &turns.call {
                Some(call) if call.awaits_answer() => vec![Due::Http],
                Some(_) => Vec::new(),
                None if turns.turn.awaits_compression() => vec![Due::Compress],
                None if turns.turn.awaits_loop_decision() => vec![Due::LoopDecision],
                None => turns.turn.pending_tools().map(Due::Tool).collect(),
            },
            Phase::Start(_) | Phase::Over(_) => Vec::new(),
        }
    }

    /// The instant (milliseconds since the Unix epoch) at which the machine needs a `poll`
    /// even if no answer has come: the end of a retry wait it handed out, or the run's
    /// deadline, whichever is first. `None` before the first poll, without either, and once the
    /// run is over. A host that holds a hook, a tool or an external backend polls at this
    /// instant; past the deadline the run ends with OMA's timeout.
    pub fn wake_at(&self) -> Option<u64> {
        if matches!(self.phase, Phase::Over(_)) {
            return None;
        }
        let deadline = self
            .spec
            .deadline_ms
            .zip(self.started_ms)
            .map(|(deadline, started)| started.saturating_add(deadline));
        match (deadline, self.wait_until_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// What the run needs at time `now_ms` (milliseconds since the Unix epoch): a step, the
    /// answers it waits for, or its outcome.
    pub fn poll(&mut self, now_ms: u64) -> Poll {
        self.now_ms = now_ms;
        self.started_ms.get_or_insert(now_ms);
        self.report_start();
        if let Some(tracer) = self.tracer.as_mut() {
            // Tool calls answered since the last poll end now.
            for event in tracer.take_answered(now_ms) {
                self.queue.push_back(Step::Trace(Box::new(event)));
            }
        }
        if self.remaining_ms() == Some(0) && !matches!(self.phase, Phase::Over(_)) {
            // Past the run's deadline: whatever was in flight is abandoned.
            // OMA's whole-run timeout, which names the agent and the run's limit.
            let deadline = self.spec.deadline_ms.unwrap_or_default();
            let error = Error::RunTimeout {
                agent: self.spec.turn.agent_name.clone(),
                timeout_ms: deadline,
            };
            self.fail(&error, false);
        }
        loop {
            if let Some(step) = self.queue.pop_front() {
                return Poll::Step(step);
            }
            match std::mem::replace(&mut self.phase, Phase::Over(None)) {
                Phase::Start(messages) => self.start(messages),
                Phase::Over(outcome) => {
                    return match outcome {
                        Some(outcome) => Poll::Finished(outcome),
                        None => Poll::Over,
                    };
                }
                phase @ (Phase::Hook(_) | Phase::External | Phase::Validate(_)) => {
                    self.phase = phase;
                    return Poll::Waiting(self.due());
                }
                Phase::Turns(turns) => {
                    if let Some(step) = self.step_turns(turns) {
                        return Poll::Step(step);
                    }
                    if std::mem::take(&mut self.retry_began) {
                        // The output schema's retry began: its turns start now.
                        continue;
                    }
                    if !matches!(self.phase, Phase::Over(_)) && self.queue.is_empty() {
                        return Poll::Waiting(self.due());
                    }
                }
            }
        }
    }

    /// Feeds the answer to a step. Hands it back, refused with an [`Error::Session`] and
    /// changing nothing, when the machine did not ask for it.
    #[must_use = "an answer the run did not ask for is handed back, refused"]
    pub fn handle(&mut self, answer: Answer) -> Result<(), Refused<Answer>> {
        if !self.queue.is_empty() {
            return Err(self.refuse(answer));
        }
        match (
            std::mem::replace(&mut self.phase, Phase::Over(None)),
            answer,
        ) {
            (Phase::Hook(context), Answer::Hook(answer)) => {
                let merged = match answer {
                    HookAnswer::Failed(message) => Err(Error::Host { message }),
                    HookAnswer::Rejected(error) => Err(error),
                    HookAnswer::Result(result) => {
                        before_run::merge(context, result, self.spec.external)
                    }
                };
                match merged {
                    Ok(messages) => self.begin(messages),
                    Err(error) => self.fail(&error, true),
                }
                Ok(())
            }
            (Phase::Validate(outcome), Answer::Validated(verdict)) => {
                match verdict {
                    Ok(value) => self.accept(*outcome, value),
                    Err(message) => self.reject(*outcome, &message),
                }
                Ok(())
            }
            (Phase::External, Answer::External(reply)) => {
                match reply {
                    Ok(output) => self.settle(RunOutcome {
                        messages: vec![LlmMessage {
                            role: Role::Assistant,
                            content: vec![ContentBlock::Text(TextBlock {
                                text: output.clone(),
                            })],
                        }],
                        output,
                        token_usage: TokenUsage::default(),
                        tool_calls: Vec::new(),
                        turns: 1,
                        ending: Ending::Completed,
                        loop_detected: false,
                        structured: None,
                    }),
                    Err(message) => self.fail(&Error::Host { message }, false),
                }
                Ok(())
            }
            (Phase::Turns(mut turns), Answer::Http(answer)) => {
                let result = match &mut turns.call {
                    Some(call) => call
                        .handle(answer)
                        .map_err(|refused| refused.map(Answer::Http)),
                    None => {
                        self.phase = Phase::Turns(turns);
                        return Err(self.refuse(Answer::Http(answer)));
                    }
                };
                if result.is_ok() {
                    self.wait_until_ms = None;
                }
                self.phase = Phase::Turns(turns);
                result
            }
            (Phase::Turns(mut turns), Answer::Tool { id, outcome }) => {
                let position = match &turns.call {
                    None => turns.turn.result_position(&id),
                    Some(_) => None,
                };
                let Some((message, block)) = position else {
                    self.phase = Phase::Turns(turns);
                    let message = format!(
                        "unexpected answer: no tool call with id {:?} is waiting for its result",
                        shorten(&id)
                    );
                    return Err(Refused::new(Answer::Tool { id, outcome }, message));
                };
                // A tool's answer is input too: it must pass OMA's rules (media, error
                // results) before it can travel in the next request.
                let result = ToolResultBlock {
                    tool_use_id: id,
                    content: outcome.content,
                    is_error: outcome.is_error,
                };
                // The position was checked, so the loop takes the result (or the failure).
                let checked = crate::limits::check_tool_result(&result.content)
                    .and_then(|()| validate_tool_result_at(&result, message, block));
                let _ = match checked {
                    Ok(()) => {
                        if let Some(tracer) = self.tracer.as_mut() {
                            tracer.tool_answered(
                                &result.tool_use_id,
                                &result.content,
                                outcome.is_error == Some(true),
                                outcome.gate.clone(),
                            );
                        }
                        turns
                            .turn
                            .handle_tool_answer(
                                &result.tool_use_id,
                                result.content,
                                outcome.is_error,
                            )
                            .map_err(drop)
                    }
                    Err(error) => turns.turn.handle_failure(error).map_err(drop),
                };
                self.phase = Phase::Turns(turns);
                Ok(())
            }
            (Phase::Turns(mut turns), Answer::Compressed(answer))
                if turns.call.is_none() && turns.turn.awaits_compression() =>
            {
                // Due, so the loop takes it.
                let _ = turns.turn.handle_compressed(answer);
                self.phase = Phase::Turns(turns);
                Ok(())
            }
            (Phase::Turns(mut turns), Answer::LoopDecision(answer))
                if turns.call.is_none() && turns.turn.awaits_loop_decision() =>
            {
                // Due, so the loop takes it.
                let _ = turns
                    .turn
                    .handle_loop_decision(answer.map_err(|message| Error::Host { message }));
                self.phase = Phase::Turns(turns);
                Ok(())
            }
            (phase, answer) => {
                self.phase = phase;
                Err(self.refuse(answer))
            }
        }
    }

    /// The hook, or straight to the backend.
    fn start(&mut self, messages: Vec<LlmMessage>) {
        if !self.spec.before_run {
            return self.begin(messages);
        }
        // The run's own copy becomes the context; the hook gets a copy of that, and an
        // unchanged list comes back out of the merge without another.
        let context = BeforeRunContext::from_messages(messages);
        self.queue.push_back(Step::BeforeRun {
            agent: self.spec.name().to_owned(),
            context: context.clone(),
            config: self.spec.config_json.clone(),
        });
        self.phase = Phase::Hook(context);
    }

    /// The external backend gets the latest user text; otherwise the turn loop starts.
    fn begin(&mut self, messages: Vec<LlmMessage>) {
        if self.spec.output_schema.is_some() && self.attempts.is_none() && !self.streaming {
            self.attempts = Some(Box::new(Attempts {
                input: messages.clone(),
                first: None,
                retried: false,
            }));
        }
        if let Some(kind) = self.spec.external {
            let prompt = transport_prompt(&messages);
            let text = match (kind, self.spec.template.system_prompt.as_deref()) {
                (ExternalKind::Process, Some(system)) if !system.is_empty() => {
                    format!("{system}\n\n{prompt}")
                }
                _ => prompt,
            };
            self.queue.push_back(Step::External { kind, text });
            self.phase = Phase::External;
            return;
        }
        let mut template = self.spec.template.clone();
        template.stream = self.streaming;
        let turn = TurnLoop::new(messages, template, self.spec.turn.clone());
        self.phase = Phase::Turns(Box::new(Turns { turn, call: None }));
    }

    /// Advances the turns until a step is ready or an answer is due; sets the phase back.
    fn step_turns(&mut self, mut turns: Box<Turns>) -> Option<Step> {
        loop {
            if let Some(call) = &mut turns.call {
                match call.poll(self.now_ms) {
                    CallPoll::Step(CallStep::Send(mut outgoing)) => {
                        // No request may outlive the run.
                        if let Some(remaining) = self.remaining_ms() {
                            outgoing.timeout_ms = outgoing.timeout_ms.min(remaining.max(1));
                        }
                        self.phase = Phase::Turns(turns);
                        return Some(Step::Send(outgoing));
                    }
                    CallPoll::Step(CallStep::Receive) => {
                        self.phase = Phase::Turns(turns);
                        return Some(Step::Receive);
                    }
                    CallPoll::Step(CallStep::Wait(ms)) => {
                        self.wait_until_ms = Some(self.now_ms.saturating_add(ms));
                        self.phase = Phase::Turns(turns);
                        return Some(Step::Wait(ms));
                    }
                    CallPoll::Step(CallStep::Event(event)) => {
                        let event = match event {
                            StreamEvent::Text(text) => AgentEvent::TextDelta(text),
                            StreamEvent::Reasoning(text) => AgentEvent::ReasoningDelta(text),
                            // Tool calls are announced by the loop once the turn is complete;
                            // OMA's stream has no event for a signature, a redacted block or
                            // the early usage (the turn's response carries them).
                            StreamEvent::ToolUse(_)
                            | StreamEvent::Done(_)
                            | StreamEvent::ReasoningSignature(_)
                            | StreamEvent::RedactedReasoning(_)
                            | StreamEvent::Usage(_) => continue,
                        };
                        self.phase = Phase::Turns(turns);
                        return Some(Step::Event(event));
                    }
                    CallPoll::Finished(result) => {
                        turns.call = None;
                        let traced = match (&result, self.tracer.as_mut()) {
                            (Ok(response), Some(tracer)) => {
                                tracer.llm_answered(self.now_ms, response)
                            }
                            (Err(error), Some(tracer)) => tracer
                                .llm_failed(self.now_ms, crate::agent::trace::error_type(error)),
                            (_, None) => None,
                        };
                        // A response is due while a call is in flight, so the loop takes it.
                        let _ = match result {
                            Ok(response) => turns.turn.handle_response(response).map_err(drop),
                            Err(error) => turns.turn.handle_failure(error).map_err(drop),
                        };
                        if let Some(event) = traced {
                            // Delivered before the turn's own events, as OMA emits it.
                            self.queue.push_back(Step::Trace(Box::new(event)));
                            self.phase = Phase::Turns(turns);
                            return None;
                        }
                    }
                    // `Over` never comes: the call is dropped with its result.
                    CallPoll::Waiting | CallPoll::Over => {
                        self.phase = Phase::Turns(turns);
                        return None;
                    }
                }
                continue;
            }
            match turns.turn.poll() {
                Some(Action::SendRequest) => {
                    if let Some(tracer) = self.tracer.as_mut() {
                        let phase = if turns.turn.summarizing() {
                            crate::agent::trace::LlmPhase::Summary
                        } else {
                            crate::agent::trace::LlmPhase::Turn
                        };
                        tracer.llm_started(self.now_ms, phase, &turns.turn.request().model);
                    }
                    let seed = self.rng.next_u64();
                    let ids = IdSource {
                        epoch_ms: self.now_ms,
                        seed: self.rng.next_u64(),
                    };
                    match self.spec.adapter(ids) {
                        Ok(adapter) => {
                            let endpoint = Endpoint {
                                timestamp: Some(adapter::amz_timestamp(self.now_ms / 1000)),
                                ..self.spec.endpoint.clone()
                            };
                            turns.call = Some(Call::new_validated(
                                adapter,
                                turns.turn.validated(),
                                &endpoint,
                                self.spec.call.clone(),
                                seed,
                            ));
                        }
                        Err(error) => {
                            // The loop asked for a request, so it is not over.
                            let _ = turns.turn.handle_failure(error);
                        }
                    }
                }
                Some(Action::DecideLoop(info)) => {
                    self.phase = Phase::Turns(turns);
                    return Some(Step::DecideLoop(info));
                }
                Some(Action::Compress {
                    messages,
                    estimated_tokens,
                }) => {
                    self.phase = Phase::Turns(turns);
                    return Some(Step::Compress {
                        messages,
                        estimated_tokens,
                    });
                }
                Some(Action::CallTool(call)) => {
                    if let Some(tracer) = self.tracer.as_mut() {
                        tracer.tool_started(self.now_ms, &call.id, &call.name, &call.input);
                    }
                    self.phase = Phase::Turns(turns);
                    return Some(Step::CallTool(call));
                }
                Some(Action::Emit(event)) => {
                    self.phase = Phase::Turns(turns);
                    return Some(Step::Event(AgentEvent::Turn(event)));
                }
                Some(Action::Done(outcome)) => {
                    self.settle(outcome);
                    return None;
                }
                None => {
                    self.phase = Phase::Turns(turns);
                    return None;
                }
            }
        }
    }

    /// An attempt's outcome: the result, or, with an output schema, its final answer read and
    /// validated (by the schema here, or by the host), as OMA's `validateStructuredOutput` does.
    /// A failed attempt ends the run as it is; the retry's outcome is merged with the first's,
    /// and a merged usage over the token budget ends it as OMA's budget failure.
    fn settle(&mut self, outcome: RunOutcome) {
        let Some(attempts) = self.attempts.as_mut() else {
            return self.end(outcome);
        };
        let outcome = match attempts.first.take() {
            _ if !attempts.retried && !outcome.success() => return self.end(outcome),
            None => outcome,
            // The retry threw, in OMA's terms: its failure is the result.
            Some(_) if matches!(outcome.ending, Ending::Failed(_)) => return self.end(outcome),
            Some(first) => {
                let over_budget = outcome.budget_exceeded();
                let mut merged = merge(first, outcome);
                let used = merged.token_usage.total();
                let budget = self.spec.turn.token_budget;
                if over_budget || budget.is_some_and(|budget| used > budget) {
                    let exceeded = crate::agent::turn::TokenBudgetExceeded {
                        agent: self.spec.turn.agent_name.clone(),
                        used,
                        budget: budget.unwrap_or_default(),
                    };
                    merged.ending = Ending::BudgetExceeded(crate::agent::outcome::classify_budget(
                        &exceeded.to_string(),
                    ));
                    return self.end(merged);
                }
                merged
            }
        };
        let Some(schema) = self.spec.output_schema.as_ref() else {
            return self.end(outcome);
        };
        match structured::extract_json(&outcome.output) {
            Err(message) => self.reject(outcome, &message),
            Ok(value) if schema.host_validates() => {
                self.queue.push_back(Step::Validate(value));
                self.phase = Phase::Validate(Box::new(outcome));
            }
            Ok(value) => match schema.validate(&value) {
                Ok(()) => self.accept(outcome, value),
                Err(message) => self.reject(outcome, &message),
            },
        }
    }

    /// The final answer matched the schema: the run succeeds with its value.
    fn accept(&mut self, mut outcome: RunOutcome, value: serde_json::Value) {
        outcome.structured = Some(value);
        self.end(outcome);
    }

    /// The final answer did not match: the retry, with OMA's feedback turn after the first
    /// attempt's messages, or after the retry OMA's `StructuredOutputValidationError`.
    fn reject(&mut self, mut outcome: RunOutcome, message: &str) {
        let Some(attempts) = self.attempts.as_mut() else {
            return self.end(outcome);
        };
        if attempts.retried {
            // The retry failed too.
            outcome.structured = None;
            outcome.loop_detected = false;
            outcome.ending = Ending::Failed(structured::validation_failure());
            return self.end(outcome);
        }
        let turn = structured::feedback(message);
        let mut messages = std::mem::take(&mut attempts.input);
        messages.extend(outcome.messages.iter().cloned());
        messages.push(turn.clone());
        outcome.messages.push(turn);
        attempts.first = Some(outcome);
        attempts.retried = true;
        self.retry_began = true;
        self.begin(messages);
    }

    /// Ends the run with `error` (kind `callback` when it came from the hook).
    fn fail(&mut self, error: &Error, from_hook: bool) {
        let failure = classify(error, from_hook, self.spec.turn.provider.as_deref());
        self.end(RunOutcome::failed(error, 0, failure));
    }

    /// Queues what follows a run: `run-agent`'s progress and evaluation, then `Done`.
    fn end(&mut self, outcome: RunOutcome) {
        self.wait_until_ms = None;
        if let Some(tracer) = self.tracer.as_mut() {
            // A call still in flight was given up with the run (its deadline, a cancel).
            let class = match &outcome.ending {
                Ending::Failed(failure) | Ending::BudgetExceeded(failure) => {
                    let info = &failure.error_info;
                    crate::agent::trace::error_type_of(info.http_status, &info.name)
                }
                Ending::Completed => "cancelled".to_owned(),
            };
            if let Some(event) = tracer.llm_failed(self.now_ms, class) {
                self.queue.push_back(Step::Trace(Box::new(event)));
            }
            let assistant = outcome
                .messages
                .iter()
                .filter(|m| m.role == Role::Assistant)
                .count();
            let event = tracer.agent(
                self.started_ms.unwrap_or(self.now_ms),
                self.now_ms,
                u32::try_from(assistant).unwrap_or(u32::MAX),
                outcome.token_usage,
                u32::try_from(outcome.tool_calls.len()).unwrap_or(u32::MAX),
            );
            self.queue.push_back(Step::Trace(Box::new(event)));
        }
        if let Some(reporting) = self.reporting.take() {
            if reporting.progress {
                if outcome.budget_exceeded() {
                    // OMA hands over its `TokenBudgetExceededError`; this is that error's JSON.
                    let used = outcome.token_usage.total();
                    self.queue.push_back(Step::Progress(ProgressEvent {
                        kind: "budget_exceeded",
                        agent: reporting.agent.clone(),
                        data: json!({
                            "name": "TokenBudgetExceededError",
                            "code": "TOKEN_BUDGET_EXCEEDED",
                            "message": outcome
                                .failure()
                                .map_or("", |failure| failure.error_info.message.as_str()),
                            "agent": reporting.agent,
                            "tokensUsed": used,
                            "budget": self.spec.turn.token_budget.unwrap_or_default(),
                        }),
                    }));
                }
                self.queue.push_back(Step::Progress(ProgressEvent {
                    kind: "agent_complete",
                    agent: reporting.agent.clone(),
                    data: outcome_json(&outcome),
                }));
            }
            if let (Some(policy), Some(input)) = (reporting.evaluation, &reporting.given) {
                let started = reporting.started_ms.unwrap_or(self.now_ms);
                self.queue
                    .push_back(Step::Evaluation(Box::new(EvaluationRecord {
                        agent: reporting.agent,
                        input: scorer_input(input, policy),
                        payload: stored_payload(input, &outcome.output, policy),
                        result: outcome.clone(),
                        duration_ms: self.now_ms.saturating_sub(started),
                    })));
            }
        }
        self.phase = Phase::Over(Some(Box::new(outcome)));
    }

    /// What is left of the run's deadline, if it has one.
    fn remaining_ms(&self) -> Option<u64> {
        let deadline = self.spec.deadline_ms?;
        let elapsed = self
            .now_ms
            .saturating_sub(self.started_ms.unwrap_or(self.now_ms));
        Some(deadline.saturating_sub(elapsed))
    }

    /// `run-agent`'s `agent_start`, at the first poll.
    fn report_start(&mut self) {
        let Some(reporting) = self.reporting.as_mut() else {
            return;
        };
        if reporting.started_ms.is_some() {
            return;
        }
        reporting.started_ms = Some(self.now_ms);
        if let (true, Some(input)) = (reporting.progress, &reporting.given) {
            self.queue.push_back(Step::Progress(ProgressEvent {
                kind: "agent_start",
                agent: reporting.agent.clone(),
                data: agent_start_data(input),
            }));
        }
    }

    fn refuse(&self, answer: Answer) -> Refused<Answer> {
        let given = match &answer {
            Answer::Hook(_) => "a beforeRun answer",
            Answer::Http(_) => "an HTTP answer",
            Answer::Tool { .. } => "a tool outcome",
            Answer::External(_) => "an external backend's reply",
            Answer::Validated(_) => "a validation verdict",
            Answer::Compressed(_) => "compressed messages",
            Answer::LoopDecision(_) => "a loop decision",
        };
        let expected = if !self.queue.is_empty() {
            "no answer until the queued steps are polled"
        } else {
            match &self.phase {
                Phase::Start(_) => "no answer (poll for the first step)",
                Phase::Hook(_) => "the beforeRun answer",
                Phase::Validate(_) => "the host's validation verdict",
                Phase::External => "the external backend's reply",
                Phase::Turns(turns) => match &turns.call {
                    Some(call) => call.expected(),
                    None if turns.turn.awaits_compression() => "the custom strategy's messages",
                    None if turns.turn.awaits_loop_decision() => "the onLoopDetected decision",
                    None => "tool outcomes",
                },
                Phase::Over(_) => "nothing: the run is over",
            }
        };
        let message = format!("unexpected answer: got {given}, the run waits for {expected}");
        Refused::new(answer, message)
    }
}

/// The first attempt (its messages ending with the feedback turn) and the retry as one
/// outcome, as OMA merges them: the retry's output and ending, both attempts' messages, usage,
/// tool calls and requests.
fn merge(first: RunOutcome, retry: RunOutcome) -> RunOutcome {
    let mut messages = first.messages;
    messages.extend(retry.messages);
    let mut tool_calls = first.tool_calls;
    tool_calls.extend(retry.tool_calls);
    let mut token_usage = first.token_usage;
    token_usage.add(retry.token_usage);
    RunOutcome {
        output: retry.output,
        messages,
        token_usage,
        tool_calls,
        turns: first.turns.saturating_add(retry.turns),
        ending: retry.ending,
        loop_detected: false,
        structured: None,
    }
}

/// At most 64 characters of an id, for a message.
fn shorten(id: &str) -> String {
    id.chars().take(64).collect()
}

#[cfg(test)]
mod tests;
