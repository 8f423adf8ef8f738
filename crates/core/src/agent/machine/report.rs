//! What a run reports besides its outcome, at its start and its end: `run-agent`'s progress
//! events and evaluation case, and the trace's closing events.

use serde_json::json;

use super::{Run, Step};
use crate::agent::evaluation::{scorer_input, stored_payload, RunInput, StorePayloads};
use crate::agent::exchange::{EvaluationRecord, ProgressEvent};
use crate::agent::outcome::{outcome_json, Ending, RunOutcome};
use crate::agent::progress::agent_start_data;
use crate::agent::trace::error_type_of;
use crate::message::Role;

/// What `run-agent` adds around a run.
#[derive(Debug)]
pub(super) struct Reporting {
    pub(super) agent: String,
    pub(super) progress: bool,
    /// The input as given, for progress and evaluation; `None` when neither needs it.
    pub(super) given: Option<RunInput>,
    /// The evaluation policy, when this run was sampled.
    pub(super) evaluation: Option<StorePayloads>,
    /// The time of the first poll.
    pub(super) started_ms: Option<u64>,
}

impl Run {
    /// `run-agent`'s `agent_start`, at the first poll.
    pub(super) fn report_start(&mut self) {
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

    /// The trace's last events: the model call still in flight, given up with the run (its
    /// deadline, a cancel), then the run's `agent` event.
    pub(super) fn trace_end(&mut self, outcome: &RunOutcome) {
        let Some(tracer) = self.tracer.as_mut() else {
            return;
        };
        let class = match &outcome.ending {
            Ending::Failed(failure) | Ending::BudgetExceeded(failure) => {
                let info = &failure.error_info;
                error_type_of(info.http_status, &info.name)
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

    /// `run-agent`'s end: `budget_exceeded` when it applies, `agent_complete`, and the
    /// evaluation case when the run was sampled.
    pub(super) fn report_end(&mut self, outcome: &RunOutcome) {
        let Some(reporting) = self.reporting.take() else {
            return;
        };
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
                data: outcome_json(outcome),
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
}
