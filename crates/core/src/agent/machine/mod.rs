//! One run as a state machine with no I/O (OMA's `Agent.run`/`stream`/`prompt` and `runAgent`;
//! see `docs/agent.md`): it owns the whole run, from the `beforeRun` hook to the result, and says
//! at each point what it needs from the world.
//!
//! In the manner of rustls's `Connection` and quinn-proto's `poll`/`handle`: [`RunMachine::poll`]
//! says what the run needs now, one of three things ([`Poll`]): a [`Step`] to perform or deliver
//! (call the hook, send this request, read more of the body, wait, call the agent's own LLM
//! adapter, call this tool, send this text to an external backend, deliver an event, a progress
//! event or an evaluation case);
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
//!    `Send`, `Receive`, `Wait`, `CallModel`, `CallTool`, `External`) or only delivery
//!    (`Event`, `Progress`, `Evaluation`).
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

//!
//! The machine keeps where the run stands (its phase) apart from everything else the run holds,
//! and every step takes the phase by value and returns the next one, as
//! [`Call`](crate::http::call::Call) does with its state: one function takes the phase and puts
//! the next one back, so no step can leave the machine without one. The steps are kept by job:
//! `begin.rs` (the hook, the external backend, the turn loop's start), `turns.rs` (the turn loop
//! and its model calls), `model.rs` (the model calls of an agent with its own LLM adapter),
//! `attempts.rs` (an output schema's check and retry), `report.rs` (what a
//! run reports besides its outcome); `spec.rs` and `step.rs` hold the types a host sees. A new
//! kind of step is a [`Step`] and an [`Answer`], a phase or a turn-loop action that hands it
//! out, and the arm of `Run::answer` (or `Run::answer_turns`) that takes its answer.

mod attempts;
mod begin;
mod model;
mod report;
mod spec;
mod step;
mod turns;

use std::collections::VecDeque;

pub use self::spec::RunSpec;
pub use self::step::{Answer, Due, Poll, Step};

use self::attempts::Attempts;
use self::report::Reporting;
use self::turns::Turns;
use crate::agent::before_run::BeforeRunContext;
use crate::agent::evaluation::{RunInput, StorePayloads};
use crate::agent::observability::options::RecordOptions;
use crate::agent::observability::tracer::Tracer;
use crate::agent::outcome::{classify, RunOutcome};
use crate::agent::trace::TraceOptions;
use crate::error::{Error, Refused};
use crate::message::LlmMessage;
use crate::rng::Rng;

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

impl Phase {
    /// The answers this phase waits for.
    fn due(&self) -> Vec<Due> {
        match self {
            Phase::Hook(_) => vec![Due::Hook],
            Phase::External => vec![Due::External],
            Phase::Validate(_) => vec![Due::Validation],
            Phase::Turns(turns) => turns.due(),
            Phase::Start(_) | Phase::Over(_) => Vec::new(),
        }
    }

    /// The answer this phase waits for, for the message that refuses another.
    fn expected(&self) -> &'static str {
        match self {
            Phase::Start(_) => "no answer (poll for the first step)",
            Phase::Hook(_) => "the beforeRun answer",
            Phase::Validate(_) => "the host's validation verdict",
            Phase::External => "the external backend's reply",
            Phase::Turns(turns) => turns.expected(),
            Phase::Over(_) => "nothing: the run is over",
        }
    }
}

/// What one step of [`Run::step`] came to, for [`RunMachine::poll`].
// Carries the step `poll` hands out by value, as [`Poll`] does, and for the same reason.
#[allow(clippy::large_enum_variant)]
enum Flow {
    /// Hand out this step.
    Step(Step),
    /// Step again: steps were queued, or a new phase began.
    Again,
    /// Nothing to do until an answer comes.
    Waiting,
    /// The run is over: its outcome, `None` once it was handed out.
    Finished(Option<Box<RunOutcome>>),
}

/// Everything a run holds besides its phase. Steps borrow it and take the phase by value.
struct Run {
    spec: RunSpec,
    streaming: bool,
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
    /// Whether this is a call of `run-agent` (its agent span says so).
    run_agent: bool,
    /// The legacy trace events the run is to make (OMA's `onTrace`), when asked for.
    trace: Option<TraceOptions>,
    /// The trace records the run is to make (OMA's `observability`), when asked for.
    records: Option<RecordOptions>,
    /// The spans of a traced run, from its first poll.
    tracer: Option<Box<Tracer>>,
    /// The attempts, for a run with an output schema once its turns began.
    attempts: Option<Box<Attempts>>,
}

/// One run. See the module documentation for the call order.
pub struct RunMachine {
    /// Where the run stands; taken and put back by [`RunMachine::advance`] only.
    phase: Phase,
    run: Run,
}

impl std::fmt::Debug for RunMachine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunMachine")
            .field("agent", &self.run.spec.name())
            .field("streaming", &self.run.streaming)
            .finish_non_exhaustive()
    }
}

impl RunMachine {
    /// A run of `spec` over prepared `messages` (`run`, `stream`, `prompt`). With `streaming`,
    /// each turn is a streamed request whose pieces come out as
    /// [`AgentEvent::TextDelta`](crate::agent::exchange::AgentEvent::TextDelta)/
    /// [`AgentEvent::ReasoningDelta`](crate::agent::exchange::AgentEvent::ReasoningDelta)
    /// events. `seed` seeds every random draw of the run.
    pub fn run(spec: RunSpec, messages: Vec<LlmMessage>, streaming: bool, seed: u64) -> Self {
        let (trace, records) = (spec.trace.clone(), spec.records.clone());
        RunMachine {
            phase: Phase::Start(messages),
            run: Run {
                spec,
                streaming,
                queue: VecDeque::new(),
                rng: Rng::new(seed),
                now_ms: 0,
                started_ms: None,
                wait_until_ms: None,
                reporting: None,
                seed,
                run_agent: false,
                trace,
                records,
                tracer: None,
                attempts: None,
            },
        }
    }

    /// The same run, handing out OMA's trace events as [`Step::Trace`]: an `llm_call` per
    /// model call that answered, a `tool_call` per answered tool call and the run's `agent`
    /// event before its result (`docs/agent.md#tracing`). Ids that `options` leaves out are
    /// drawn from the run's seed; a traced run's other draws are those of an untraced one.
    #[must_use]
    pub fn with_trace(mut self, options: TraceOptions) -> Self {
        self.run.trace = Some(options);
        self
    }

    /// The same run, handing out OMA's trace records as [`Step::Records`] (a `run` span, the
    /// agent's span, a span per model call and per tool call, events on them), processed by
    /// `options`' capture policy (`docs/observability.md`). For a run traced with
    /// [`with_trace`](Self::with_trace) too, each record that completes a legacy event carries
    /// it, and the two share the run's id. Fails, changing nothing, when `options` names a run
    /// id other than the trace options' (set those first).
    pub fn with_records(mut self, options: RecordOptions) -> Result<Self, Error> {
        let given = self.run.trace.as_ref().and_then(|t| t.run_id.as_deref());
        if let (Some(traced), Some(recorded)) = (given, options.run_id.as_deref()) {
            if traced != recorded {
                return Err(Error::InvalidRequest {
                    message: format!(
                        "the observability options name the run {recorded:?}, the trace options \
                         the run {traced:?}: give one run id"
                    ),
                });
            }
        }
        self.run.records = Some(options);
        Ok(self)
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
        let run = &mut machine.run;
        run.run_agent = true;
        let sampled = evaluation
            .filter(|(_, rate)| *rate >= 1.0 || (*rate > 0.0 && run.rng.next_unit() < *rate))
            .map(|(policy, _)| policy);
        run.reporting = Some(Reporting {
            agent: run.spec.name().to_owned(),
            progress,
            given: given.filter(|_| progress || sampled.is_some()),
            evaluation: sampled,
            started_ms: None,
        });
        machine
    }

    /// The name of the agent this run belongs to.
    pub fn agent_name(&self) -> &str {
        self.run.spec.name()
    }

    /// The answers the machine waits for; empty while steps are queued, before the first poll
    /// and after the end.
    pub fn due(&self) -> Vec<Due> {
        if !self.run.queue.is_empty() {
            return Vec::new();
        }
        self.phase.due()
    }

    /// The instant (milliseconds since the Unix epoch) at which the machine needs a `poll`
    /// even if no answer has come: the end of a retry wait it handed out, the deadline of a
    /// call of the agent's own LLM adapter, or the run's deadline, whichever is first. `None`
    /// before the first poll, without any, and once the run is over. A host that holds a hook,
    /// a tool, an adapter or an external backend polls at this instant; past the run's deadline
    /// the run ends with OMA's timeout, past an adapter call's the call fails with OMA's
    /// `LLMCallTimeoutError`.
    pub fn wake_at(&self) -> Option<u64> {
        if matches!(self.phase, Phase::Over(_)) {
            return None;
        }
        let deadline = self
            .run
            .spec
            .deadline_ms
            .zip(self.run.started_ms)
            .map(|(deadline, started)| started.saturating_add(deadline));
        let call = match &self.phase {
            Phase::Turns(turns) => turns.wake_at(),
            _ => None,
        };
        [deadline, self.run.wait_until_ms, call]
            .into_iter()
            .flatten()
            .min()
    }

    /// What the run needs at time `now_ms` (milliseconds since the Unix epoch): a step, the
    /// answers it waits for, or its outcome.
    pub fn poll(&mut self, now_ms: u64) -> Poll {
        let run = &mut self.run;
        run.now_ms = now_ms;
        run.started_ms.get_or_insert(now_ms);
        run.report_start();
        run.trace_start();
        if let Some(tracer) = run.tracer.as_mut() {
            // Tool calls answered since the last poll end now.
            tracer.end_answered(now_ms);
            run.drain_trace();
        }
        if run.remaining_ms() == Some(0) && !matches!(self.phase, Phase::Over(_)) {
            // Past the run's deadline: whatever was in flight is abandoned.
            // OMA's whole-run timeout, which names the agent and the run's limit.
            let error = Error::RunTimeout {
                agent: run.spec.turn.agent_name.clone(),
                timeout_ms: run.spec.deadline_ms.unwrap_or_default(),
            };
            self.advance(|run, _abandoned| (run.fail(&error, false), ()));
        }
        loop {
            if let Some(step) = self.run.next_queued() {
                return Poll::Step(step);
            }
            match self.advance(Run::step) {
                Flow::Step(step) => {
                    self.run.trace_step(&step);
                    if self.run.queue.is_empty() {
                        return Poll::Step(step);
                    }
                    // What the step queued (its trace) goes first.
                    self.run.queue.push_back(step);
                }
                Flow::Waiting if self.run.queue.is_empty() => return Poll::Waiting(self.due()),
                Flow::Waiting | Flow::Again => {}
                Flow::Finished(Some(outcome)) => return Poll::Finished(outcome),
                Flow::Finished(None) => return Poll::Over,
            }
        }
    }

    /// Feeds the answer to a step. Hands it back, refused with an [`Error::Session`] and
    /// changing nothing, when the machine did not ask for it.
    #[must_use = "an answer the run did not ask for is handed back, refused"]
    pub fn handle(&mut self, answer: Answer) -> Result<(), Refused<Answer>> {
        if !self.run.queue.is_empty() {
            return Err(refuse(
                answer,
                "no answer until the queued steps are polled",
            ));
        }
        self.advance(|run, phase| run.answer(phase, answer))
    }

    /// The caller cancelled the run at `now_ms` (OMA's `AbortSignal`): whatever was in flight
    /// (the hook, a model call, tool calls, an external reply, a retry wait) is abandoned and
    /// the run ends with [`RunOutcome::cancelled`]. What closes its trace comes first: polls
    /// hand out the records ending every open span with status `cancelled` (error kind
    /// `cancellation`) and the legacy events, then the outcome. Queued steps that need an
    /// answer or report to the caller (events, progress, evaluation) are dropped, and none
    /// follow: a cancelled run reports no `agent_complete`. A run never polled is traced from
    /// `now_ms`, so its records still open and close. Fails with [`Error::Session`], changing
    /// nothing, once the run has ended.
    pub fn cancel(&mut self, now_ms: u64) -> Result<(), Error> {
        if matches!(self.phase, Phase::Over(_)) {
            return Err(Error::Session {
                message: "the run is over: there is nothing to cancel".into(),
            });
        }
        let run = &mut self.run;
        run.now_ms = now_ms;
        run.started_ms.get_or_insert(now_ms);
        run.queue
            .retain(|step| matches!(step, Step::Records(_) | Step::Trace(_)));
        run.trace_start();
        if let Some(tracer) = run.tracer.as_mut() {
            tracer.end_answered(now_ms);
            run.drain_trace();
        }
        // What the caller asked for is not reported: the caller has left.
        run.reporting = None;
        // As a failed run reports it (the deadline's timeout too): no messages, no turns.
        self.advance(|run, _abandoned| (run.end(RunOutcome::cancelled(0)), ()));
        Ok(())
    }

    /// Moves the run on by one step: `step` takes the phase and gives back the next one with
    /// what came of it. The only place the phase is taken and put back.
    fn advance<T>(&mut self, step: impl FnOnce(&mut Run, Phase) -> (Phase, T)) -> T {
        let phase = std::mem::replace(&mut self.phase, Phase::Over(None));
        let (next, came) = step(&mut self.run, phase);
        self.phase = next;
        came
    }
}

impl Run {
    /// What the run does next from `phase`, when no queued step is waiting.
    fn step(&mut self, phase: Phase) -> (Phase, Flow) {
        match phase {
            Phase::Start(messages) => (self.start(messages), Flow::Again),
            Phase::Turns(turns) => self.step_turns(turns),
            Phase::Over(outcome) => (Phase::Over(None), Flow::Finished(outcome)),
            waiting @ (Phase::Hook(_) | Phase::External | Phase::Validate(_)) => {
                (waiting, Flow::Waiting)
            }
        }
    }

    /// Takes `answer` in `phase`: the next phase, and the answer handed back, refused, when
    /// the phase did not ask for it (the phase then as it was).
    fn answer(&mut self, phase: Phase, answer: Answer) -> (Phase, Result<(), Refused<Answer>>) {
        match (phase, answer) {
            (Phase::Hook(context), Answer::Hook(answer)) => (self.hooked(context, answer), Ok(())),
            (Phase::External, Answer::External(reply)) => (self.replied(reply), Ok(())),
            (Phase::Validate(outcome), Answer::Validated(verdict)) => {
                (self.validated(*outcome, verdict), Ok(()))
            }
            (Phase::Turns(turns), answer) => self.answer_turns(turns, answer),
            (phase, answer) => {
                let refused = refuse(answer, phase.expected());
                (phase, Err(refused))
            }
        }
    }

    /// Ends the run with `error` (kind `callback` when it came from the hook).
    fn fail(&mut self, error: &Error, from_hook: bool) -> Phase {
        let failure = classify(error, from_hook, self.spec.turn.provider.as_deref());
        self.end(RunOutcome::failed(error, 0, failure))
    }

    /// Ends the run with `outcome`: queues what follows it (its trace, `run-agent`'s progress
    /// and evaluation), then the outcome.
    fn end(&mut self, outcome: RunOutcome) -> Phase {
        self.wait_until_ms = None;
        self.trace_end(&outcome);
        self.report_end(&outcome);
        Phase::Over(Some(Box::new(outcome)))
    }

    /// The next queued step: records queued one after another go out as one step.
    fn next_queued(&mut self) -> Option<Step> {
        let step = self.queue.pop_front()?;
        let Step::Records(mut records) = step else {
            return Some(step);
        };
        while let Some(Step::Records(more)) = self.queue.front_mut() {
            records.append(more);
            self.queue.pop_front();
        }
        Some(Step::Records(records))
    }

    /// What is left of the run's deadline, if it has one.
    fn remaining_ms(&self) -> Option<u64> {
        let deadline = self.spec.deadline_ms?;
        let elapsed = self
            .now_ms
            .saturating_sub(self.started_ms.unwrap_or(self.now_ms));
        Some(deadline.saturating_sub(elapsed))
    }
}

/// `answer` handed back: the run waits for `expected`.
fn refuse(answer: Answer, expected: &str) -> Refused<Answer> {
    let message = format!(
        "unexpected answer: got {}, the run waits for {expected}",
        answer.name()
    );
    Refused::new(answer, message)
}

#[cfg(test)]
mod tests;
