//! What a run and its host exchange: the [`Step`]s the machine hands out, what a poll found
//! ([`Poll`]), the answers it waits for ([`Due`]) and the [`Answer`]s it takes.

use crate::agent::before_run::{BeforeRunContext, ExternalKind};
use crate::agent::exchange::{
    AgentEvent, EvaluationRecord, HookAnswer, ProgressEvent, ToolOutcome,
};
use crate::agent::host_adapter::{ModelAnswer, ModelCall};
use crate::agent::loop_detect::LoopInfo;
use crate::agent::observability::record::Observed;
use crate::agent::outcome::RunOutcome;
use crate::agent::trace::TraceEvent;
use crate::error::Error;
use crate::http::call::{CallAnswer, Outgoing};
use crate::message::{LlmMessage, ToolUseBlock};

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
    CallTool(ToolUseBlock),
    /// Call the agent's own LLM adapter (OMA's `adapter.chat(messages, options)`, or its
    /// `stream` when the run streams) instead of sending an HTTP request; answer with
    /// [`Answer::Model`]: the whole response, or the stream's events up to `done`.
    CallModel(Box<ModelCall>),
    /// Call OMA's `onLoopDetected` function with this loop (already announced as an event);
    /// answer with [`Answer::LoopDecision`].
    DecideLoop(LoopInfo),
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
    /// One of OMA's trace events, for a run made with
    /// [`RunMachine::with_trace`](super::RunMachine::with_trace); no answer.
    Trace(Box<TraceEvent>),
    /// OMA's trace records, in sequence order, for a run made with
    /// [`RunMachine::with_records`](super::RunMachine::with_records); no answer. Records made
    /// one after another come as one step.
    Records(Vec<Observed>),
    /// Check this JSON value, read from the final answer, against the schema the host holds
    /// (an output schema the host validates); answer with [`Answer::Validated`].
    Validate(serde_json::Value),
}

/// What [`RunMachine::poll`](super::RunMachine::poll) found: the three cases a host acts on,
/// and [`Poll::Over`] for a machine whose outcome was already handed out.
// A step is handed out by value on every poll, the hot path of a run; boxing it would cost an
// allocation per step to shrink the rare `Waiting` and `Over`.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, PartialEq)]
pub enum Poll {
    /// Perform (or deliver) this step.
    Step(Step),
    /// Nothing to do until these answers arrive (or
    /// [`RunMachine::wake_at`](super::RunMachine::wake_at) passes). Never empty.
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
    /// The answer of the agent's own LLM adapter to the last `CallModel`: its response, the
    /// next event of its stream, or its failure.
    Model,
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
    /// What the agent's own LLM adapter answered to a [`Step::CallModel`]: `chat`'s response,
    /// one event of its stream, or the stream's end; or its failure (it threw, its stream
    /// yielded `error`, or its answer is not what OMA's contract says, read as
    /// [`crate::agent::host_adapter::read`] reads it), which ends the call.
    Model(Result<ModelAnswer, Error>),
}

impl Answer {
    /// What this answer is, for the message that refuses it.
    pub(super) fn name(&self) -> &'static str {
        match self {
            Answer::Hook(_) => "a beforeRun answer",
            Answer::Http(_) => "an HTTP answer",
            Answer::Tool { .. } => "a tool outcome",
            Answer::External(_) => "an external backend's reply",
            Answer::Validated(_) => "a validation verdict",
            Answer::Compressed(_) => "compressed messages",
            Answer::LoopDecision(_) => "a loop decision",
            Answer::Model(_) => "an LLM adapter's answer",
        }
    }
}
