//! What a run reports besides its outcome: `run-agent`'s progress events and evaluation case,
//! and its trace (the tracer made at the first poll, what steps tell it, its closing records and
//! events, all queued as steps).

use serde_json::json;

use super::{Run, Step};
use crate::agent::evaluation::{scorer_input, stored_payload, RunInput, StorePayloads};
use crate::agent::exchange::{AgentEvent, EvaluationRecord, ProgressEvent};
use crate::agent::observability::record::Observed;
use crate::agent::observability::tracer::{Traced, Tracer};
use crate::agent::outcome::{outcome_json, RunOutcome};
use crate::agent::progress::agent_start_data;
use crate::agent::turn::Event;

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

    /// The trace's last records and events: what was still in flight ends with the run (a
    /// model call given up at its deadline, tool calls never answered), then the agent's span
    /// (the legacy `agent` event) and the run's.
    pub(super) fn trace_end(&mut self, outcome: &RunOutcome) {
        let streaming = self.streaming;
        let Some(tracer) = self.tracer.as_mut() else {
            return;
        };
        if streaming {
            // A streamed run's last event, as OMA's stream ends.
            tracer.streamed(
                self.now_ms,
                if outcome.success() { "done" } else { "error" },
            );
        }
        tracer.end(self.now_ms, outcome);
        self.drain_trace();
    }

    /// What a step handed out tells the trace: an event of the run may be a `stream_chunk`
    /// (a streamed run), a `loop_detected` or a `budget_exhausted` on the agent's span.
    pub(super) fn trace_step(&mut self, step: &Step) {
        let streaming = self.streaming;
        let (Some(tracer), Step::Event(event)) = (self.tracer.as_mut(), step) else {
            return;
        };
        let now = self.now_ms;
        let kind = match event {
            AgentEvent::TextDelta(_) => Some("text"),
            AgentEvent::ReasoningDelta(_) => Some("reasoning"),
            AgentEvent::Turn(Event::ToolUse(_)) => Some("tool_use"),
            AgentEvent::Turn(Event::ToolResult(_)) => Some("tool_result"),
            AgentEvent::Turn(Event::LoopDetected(info)) => {
                tracer.loop_detected(now, info.kind.word(), info.repetitions);
                Some("loop_detected")
            }
            AgentEvent::Turn(Event::BudgetExceeded(_)) => {
                tracer.budget_exhausted(now);
                Some("budget_exceeded")
            }
            AgentEvent::Turn(Event::Text(_)) | AgentEvent::Done(_) => None,
        };
        if let (true, Some(kind)) = (streaming, kind) {
            tracer.streamed(now, kind);
        }
        self.drain_trace();
    }

    /// The tracer of a traced run, made at its first poll, when the run's root and agent spans
    /// begin.
    pub(super) fn trace_start(&mut self) {
        if self.tracer.is_some() || (self.trace.is_none() && self.records.is_none()) {
            return;
        }
        let mut tracer = Tracer::new(
            self.trace.clone(),
            self.records.clone(),
            self.spec.name(),
            self.spec.traced_provider(),
            self.run_agent,
            self.seed,
        );
        tracer.start(self.now_ms);
        self.tracer = Some(Box::new(tracer));
        self.drain_trace();
    }

    /// Queues what the tracer has for the host: legacy events as [`Step::Trace`], records as
    /// [`Step::Records`]. Whether anything was queued.
    pub(super) fn drain_trace(&mut self) -> bool {
        let Some(tracer) = self.tracer.as_mut() else {
            return false;
        };
        let traced = tracer.take();
        let queued = !traced.is_empty();
        let mut records: Vec<Observed> = Vec::new();
        for item in traced {
            match item {
                Traced::Record(record) => records.push(record),
                Traced::Event(event) => {
                    if !records.is_empty() {
                        self.queue
                            .push_back(Step::Records(std::mem::take(&mut records)));
                    }
                    self.queue.push_back(Step::Trace(Box::new(event)));
                }
            }
        }
        if !records.is_empty() {
            self.queue.push_back(Step::Records(records));
        }
        queued
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
