//! The turn loop's phase: the loop stepped to its next action, each model call made as a
//! provider call ([`Call`]) whose HTTP steps the host performs, or handed to the agent's own
//! LLM adapter (`model.rs`), and the answers the loop waits for (HTTP, the adapter's, tool
//! outcomes, the `custom` strategy's messages, the `onLoopDetected` decision).

use super::{refuse, Answer, Due, Flow, Phase, Run, Step};
use crate::adapter::{self, ChatRequest, Endpoint, IdSource, StreamEvent};
use crate::agent::exchange::{AgentEvent, ToolOutcome};
use crate::agent::host_adapter::HostCall;
use crate::agent::outcome::RunOutcome;
use crate::agent::trace::LlmPhase;
use crate::agent::turn::{Action, TurnLoop, TurnOptions};
use crate::error::{Error, Refused};
use crate::http::call::{Call, CallAnswer, CallPoll, CallStep};
use crate::message::{LlmMessage, LlmResponse, ToolResultBlock};
use crate::validate::validate_tool_result_at;

/// The turn loop, with the model call of the current turn when one is in flight: a provider
/// call, or a call of the agent's own adapter.
pub(super) struct Turns {
    pub(super) turn: TurnLoop,
    call: Option<Call>,
    pub(super) host: Option<HostCall>,
}

/// What one move of the turns came to.
pub(super) enum Moved {
    /// Move again: the loop or the call has more to say.
    On,
    /// The turns stay as they are, and the run does this.
    Stay(Flow),
    /// The loop ended the attempt with this outcome.
    Done(RunOutcome),
}

impl Turns {
    /// A loop over `messages`, each turn's request made from `template`.
    pub(super) fn new(
        messages: Vec<LlmMessage>,
        template: ChatRequest,
        options: TurnOptions,
    ) -> Self {
        Turns {
            turn: TurnLoop::new(messages, template, options),
            call: None,
            host: None,
        }
    }

    /// Whether a model call is in flight.
    fn calling(&self) -> bool {
        self.call.is_some() || self.host.is_some()
    }

    /// The instant by which the adapter's call in flight fails unless answered.
    pub(super) fn wake_at(&self) -> Option<u64> {
        self.host.as_ref().and_then(HostCall::wake_at)
    }

    /// The answers the turns wait for.
    pub(super) fn due(&self) -> Vec<Due> {
        if let Some(host) = &self.host {
            return if host.awaits_answer() {
                vec![Due::Model]
            } else {
                Vec::new()
            };
        }
        match &self.call {
            Some(call) if call.awaits_answer() => vec![Due::Http],
            Some(_) => Vec::new(),
            None if self.turn.awaits_compression() => vec![Due::Compress],
            None if self.turn.awaits_loop_decision() => vec![Due::LoopDecision],
            None => self.turn.pending_tools().map(Due::Tool).collect(),
        }
    }

    /// The answer the turns wait for, for the message that refuses another.
    pub(super) fn expected(&self) -> &'static str {
        if let Some(host) = &self.host {
            return host.expected();
        }
        match &self.call {
            Some(call) => call.expected(),
            None if self.turn.awaits_compression() => "the custom strategy's messages",
            None if self.turn.awaits_loop_decision() => "the onLoopDetected decision",
            None => "tool outcomes",
        }
    }
}

impl Run {
    /// Advances the turns until a step is ready, an answer is due or the attempt ends.
    pub(super) fn step_turns(&mut self, mut turns: Box<Turns>) -> (Phase, Flow) {
        loop {
            let moved = match self.step_call(&mut turns) {
                Some(moved) => moved,
                None => match self.step_host(&mut turns) {
                    Some(moved) => moved,
                    None => self.step_turn(&mut turns),
                },
            };
            match moved {
                Moved::On => {}
                Moved::Stay(flow) => return (Phase::Turns(turns), flow),
                Moved::Done(outcome) => return (self.settle(outcome), Flow::Again),
            }
        }
    }

    /// The provider call in flight, if there is one, moved on: a step of it to hand out, or
    /// its result given to the loop.
    fn step_call(&mut self, turns: &mut Turns) -> Option<Moved> {
        let call = turns.call.as_mut()?;
        let moved = match call.poll(self.now_ms) {
            CallPoll::Step(CallStep::Send(mut outgoing)) => {
                // No request may outlive the run.
                if let Some(remaining) = self.remaining_ms() {
                    outgoing.timeout_ms = outgoing.timeout_ms.min(remaining.max(1));
                }
                Moved::Stay(Flow::Step(Step::Send(outgoing)))
            }
            CallPoll::Step(CallStep::Receive) => Moved::Stay(Flow::Step(Step::Receive)),
            CallPoll::Step(CallStep::Wait(ms)) => {
                self.wait_until_ms = Some(self.now_ms.saturating_add(ms));
                if let Some(tracer) = self.tracer.as_mut() {
                    tracer.retry_scheduled(self.now_ms, call.attempt(), call.max_attempts(), ms);
                    self.drain_trace();
                }
                Moved::Stay(Flow::Step(Step::Wait(ms)))
            }
            CallPoll::Step(CallStep::Event(event)) => {
                // The first piece of the answer itself (not its usage or a signature) marks
                // the time to the first chunk.
                let content = matches!(
                    event,
                    StreamEvent::Text(_)
                        | StreamEvent::Reasoning(_)
                        | StreamEvent::ToolUse(_)
                        | StreamEvent::RedactedReasoning(_)
                );
                if let (Some(tracer), true) = (self.tracer.as_mut(), content) {
                    tracer.chunk(self.now_ms);
                    self.drain_trace();
                }
                match event {
                    StreamEvent::Text(text) => {
                        Moved::Stay(Flow::Step(Step::Event(AgentEvent::TextDelta(text))))
                    }
                    StreamEvent::Reasoning(text) => {
                        Moved::Stay(Flow::Step(Step::Event(AgentEvent::ReasoningDelta(text))))
                    }
                    // Tool calls are announced by the loop once the turn is complete; OMA's
                    // stream has no event for a signature, a redacted block or the early usage
                    // (the turn's response carries them).
                    StreamEvent::ToolUse(_)
                    | StreamEvent::Done(_)
                    | StreamEvent::ReasoningSignature(_)
                    | StreamEvent::RedactedReasoning(_)
                    | StreamEvent::Usage(_) => Moved::On,
                }
            }
            CallPoll::Finished(result) => {
                turns.call = None;
                self.call_finished(turns, result)
            }
            // `Over` never comes: the call is dropped with its result.
            CallPoll::Waiting | CallPoll::Over => Moved::Stay(Flow::Waiting),
        };
        Some(moved)
    }

    /// The model call of the turn is over, with the response or why there is none: traced,
    /// then given to the loop.
    pub(super) fn call_finished(
        &mut self,
        turns: &mut Turns,
        result: Result<LlmResponse, Error>,
    ) -> Moved {
        if let Some(tracer) = self.tracer.as_mut() {
            match &result {
                Ok(response) => tracer.llm_answered(self.now_ms, response),
                Err(error) => tracer.llm_failed(self.now_ms, error),
            }
        }
        // A response is due while a call is in flight, so the loop takes it.
        let _ = match result {
            Ok(response) => turns.turn.handle_response(response).map_err(drop),
            Err(error) => turns.turn.handle_failure(error).map_err(drop),
        };
        // The call's trace goes before the turn's own events, as OMA emits it.
        if self.drain_trace() {
            Moved::Stay(Flow::Again)
        } else {
            Moved::On
        }
    }

    /// The loop's next action, with no call in flight.
    fn step_turn(&mut self, turns: &mut Turns) -> Moved {
        let step = match turns.turn.poll() {
            Some(Action::SendRequest) => {
                self.call_model(turns);
                return Moved::On;
            }
            Some(Action::DecideLoop(info)) => Step::DecideLoop(info),
            Some(Action::Compress {
                messages,
                estimated_tokens,
            }) => Step::Compress {
                messages,
                estimated_tokens,
            },
            Some(Action::CallTool(call)) => {
                if let Some(tracer) = self.tracer.as_mut() {
                    tracer.tool_started(self.now_ms, &call.id, &call.name, &call.input);
                    self.drain_trace();
                }
                Step::CallTool(call)
            }
            Some(Action::Emit(event)) => Step::Event(AgentEvent::Turn(event)),
            Some(Action::Done(outcome)) => return Moved::Done(outcome),
            None => return Moved::Stay(Flow::Waiting),
        };
        Moved::Stay(Flow::Step(step))
    }

    /// The model call of the turn the loop asked for: a call of the agent's own adapter, or a
    /// provider call in the spec's wire format, whose steps the next moves hand out. A format
    /// that cannot be made fails the turn.
    fn call_model(&mut self, turns: &mut Turns) {
        if let Some(tracer) = self.tracer.as_mut() {
            let phase = if turns.turn.summarizing() {
                LlmPhase::Summary
            } else {
                LlmPhase::Turn
            };
            tracer.llm_started(self.now_ms, phase, &turns.turn.request().model);
            self.drain_trace();
        }
        if self.spec.adapter.is_some() {
            self.call_host_model(turns);
            return;
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

    /// Takes `answer` while the turns run: the turns after it, and the answer handed back,
    /// refused, when they did not ask for it.
    pub(super) fn answer_turns(
        &mut self,
        mut turns: Box<Turns>,
        answer: Answer,
    ) -> (Phase, Result<(), Refused<Answer>>) {
        let taken = match answer {
            Answer::Http(answer) => self.answer_call(&mut turns, answer),
            Answer::Model(answer) => self.answer_model(&mut turns, answer),
            Answer::Tool { id, outcome } => self.answer_tool(&mut turns, id, outcome),
            Answer::Compressed(answer) if !turns.calling() && turns.turn.awaits_compression() => {
                // Due, so the loop takes it.
                let _ = turns.turn.handle_compressed(answer);
                Ok(())
            }
            Answer::LoopDecision(answer)
                if !turns.calling() && turns.turn.awaits_loop_decision() =>
            {
                // Due, so the loop takes it.
                let _ = turns
                    .turn
                    .handle_loop_decision(answer.map_err(|message| Error::Host { message }));
                Ok(())
            }
            answer => Err(refuse(answer, turns.expected())),
        };
        (Phase::Turns(turns), taken)
    }

    /// What happened to the step of the provider call in flight.
    fn answer_call(
        &mut self,
        turns: &mut Turns,
        answer: CallAnswer,
    ) -> Result<(), Refused<Answer>> {
        let Some(call) = turns.call.as_mut() else {
            return Err(refuse(Answer::Http(answer), turns.expected()));
        };
        call.handle(answer)
            .map_err(|refused| refused.map(Answer::Http))?;
        self.wait_until_ms = None;
        Ok(())
    }

    /// A tool's outcome, for the tool call `id` the loop waits for.
    fn answer_tool(
        &mut self,
        turns: &mut Turns,
        id: String,
        outcome: ToolOutcome,
    ) -> Result<(), Refused<Answer>> {
        let position = match turns.calling() {
            false => turns.turn.result_position(&id),
            true => None,
        };
        let Some((message, block)) = position else {
            let message = format!(
                "unexpected answer: no tool call with id {:?} is waiting for its result",
                shorten(&id)
            );
            return Err(Refused::new(Answer::Tool { id, outcome }, message));
        };
        // A tool's answer is input too: it must pass OMA's rules (media, error results)
        // before it can travel in the next request.
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
                        outcome.gate,
                    );
                }
                turns
                    .turn
                    .handle_tool_answer(&result.tool_use_id, result.content, outcome.is_error)
                    .map_err(drop)
            }
            Err(error) => turns.turn.handle_failure(error).map_err(drop),
        };
        Ok(())
    }
}

/// At most 64 characters of an id, for a message.
fn shorten(id: &str) -> String {
    id.chars().take(64).collect()
}
