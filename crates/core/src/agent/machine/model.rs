//! The model calls of an agent with its own LLM adapter (`docs/agent.md#your-own-llm-adapter`):
//! each is handed to the host as a [`Step::CallModel`] instead of HTTP steps, answered with the
//! adapter's response or its stream's events, and ends as a provider call does (`turns.rs`:
//! traced, then given to the turn loop).

use super::turns::{Moved, Turns};
use super::{refuse, Answer, Flow, Run, Step};
use crate::adapter::StreamEvent;
use crate::agent::exchange::AgentEvent;
use crate::agent::host_adapter::{HostCall, HostPoll, ModelAnswer, ModelCall};
use crate::error::{Error, Refused};

impl Run {
    /// The adapter's call in flight, if there is one, moved on: the call to hand out, a delta
    /// of its stream, or its result given to the loop.
    pub(super) fn step_host(&mut self, turns: &mut Turns) -> Option<Moved> {
        let host = turns.host.as_mut()?;
        let moved = match host.poll(self.now_ms) {
            HostPoll::Step(call) => Moved::Stay(Flow::Step(Step::CallModel(call))),
            HostPoll::Delta(StreamEvent::Text(text)) => {
                Moved::Stay(Flow::Step(Step::Event(AgentEvent::TextDelta(text))))
            }
            HostPoll::Delta(StreamEvent::Reasoning(text)) => {
                Moved::Stay(Flow::Step(Step::Event(AgentEvent::ReasoningDelta(text))))
            }
            // Only text and reasoning pieces are kept as deltas.
            HostPoll::Delta(_) => Moved::On,
            HostPoll::Waiting => Moved::Stay(Flow::Waiting),
            HostPoll::Finished(result) => {
                turns.host = None;
                self.call_finished(turns, result)
            }
        };
        Some(moved)
    }

    /// The turn's model call, for the agent's adapter: the request the loop would send (a copy
    /// of its own), bounded by the agent's call deadline within what is left of the run's.
    pub(super) fn call_host_model(&mut self, turns: &mut Turns) {
        let Some(adapter) = self.spec.adapter.as_ref() else {
            return;
        };
        let mut timeout_ms = self.spec.call.limits.deadline_ms;
        if let Some(remaining) = self.remaining_ms() {
            timeout_ms = timeout_ms.min(remaining.max(1));
        }
        turns.host = Some(HostCall::new(ModelCall {
            adapter: adapter.name.clone(),
            request: turns.turn.request().clone(),
            timeout_ms,
        }));
    }

    /// The adapter's answer, for the call in flight.
    pub(super) fn answer_model(
        &mut self,
        turns: &mut Turns,
        answer: Result<ModelAnswer, Error>,
    ) -> Result<(), Refused<Answer>> {
        let Some(host) = turns.host.as_mut() else {
            return Err(refuse(Answer::Model(answer), turns.expected()));
        };
        host.handle(answer)
            .map_err(|refused| refused.map(Answer::Model))
    }
}
