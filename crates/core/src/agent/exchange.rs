//! What a run hands to its host and takes back, besides HTTP: the hook's answer, a tool's
//! outcome, progress events, evaluation cases and the events a stream delivers. The Rust side of
//! the WIT interface `exchange` (and of `outcome`'s `agent-event`); the run machine
//! ([`crate::agent::machine`]) speaks in these types, and every world converts them.

use serde_json::Value;

use crate::agent::before_run::BeforeRunResult;
use crate::agent::outcome::RunOutcome;
use crate::agent::turn::Event;
use crate::error::Error;
use crate::message::ToolResultContent;

/// How a `beforeRun` hook answered.
#[derive(Clone, Debug, PartialEq)]
pub enum HookAnswer {
    /// Its result, to be merged.
    Result(BeforeRunResult),
    /// It failed (OMA: it threw) with this message.
    Failed(String),
    /// Its answer could not be read (e.g. messages that do not convert); ends the run as a
    /// hook failure with this error.
    Rejected(Error),
}

impl HookAnswer {
    /// A hook's result given as OMA JSON text (`{"prompt", "messages"}`), checked as OMA checks a
    /// JavaScript hook's return value; text that is not JSON is a rejected answer.
    pub fn from_json(text: &str) -> Self {
        match crate::json::from_str(text) {
            Ok(value) => HookAnswer::Result(BeforeRunResult::from_value(value)),
            Err(e) => HookAnswer::Rejected(Error::invalid(format!(
                "beforeRun result must be JSON text: {e}"
            ))),
        }
    }
}

/// What a tool-call gate (OMA's `onToolCall`, run by the host before the tool) decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolGate {
    /// `allow`, `deny` or `suspend`.
    pub action: String,
    /// The gate's reason, when it gave one.
    pub reason: Option<String>,
}

/// What a tool returned.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolOutcome {
    /// The answer.
    pub content: ToolResultContent,
    /// Whether the tool failed, as the tool said it (OMA's optional `ToolResult.isError`): the
    /// result block carries exactly this, so `Some(false)` is sent as `is_error: false` by the
    /// wire formats that have the field and `None` leaves it out.
    pub is_error: Option<bool>,
    /// The gate's decision, when a gate decided the call; traced on the `tool_call` event.
    pub gate: Option<ToolGate>,
}

impl ToolOutcome {
    /// Whether the tool failed (`is_error` is `Some(true)`).
    #[must_use]
    pub fn failed(&self) -> bool {
        self.is_error == Some(true)
    }
}

/// A progress event of `run-agent`: OMA's `{type, agent, data}`.
#[derive(Clone, Debug, PartialEq)]
pub struct ProgressEvent {
    /// `agent_start`, `budget_exceeded` or `agent_complete`.
    pub kind: &'static str,
    /// The agent's name.
    pub agent: String,
    /// The event's data, in OMA's JSON shape.
    pub data: Value,
}

/// An online-evaluation case of `run-agent`.
#[derive(Clone, Debug, PartialEq)]
pub struct EvaluationRecord {
    /// The agent's name.
    pub agent: String,
    /// What scorers get as input, per the payload policy.
    pub input: String,
    /// The stored payload `{input, output}`; `None` under the `none` policy.
    pub payload: Option<Value>,
    /// The full result.
    pub result: RunOutcome,
    /// How long the run took.
    pub duration_ms: u64,
}

/// An event of a run, as `stream` delivers it.
#[derive(Clone, Debug, PartialEq)]
pub enum AgentEvent {
    /// A piece of text as the provider sent it (streaming only).
    TextDelta(String),
    /// A piece of reasoning as the provider sent it (streaming only).
    ReasoningDelta(String),
    /// A turn-level event of the loop (text, tool use, tool result, budget exceeded).
    Turn(Event),
    /// The run is over; the result says whether it succeeded.
    Done(RunOutcome),
}
