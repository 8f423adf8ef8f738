//! What the evaluation asks of the component: the codec's scoring rules (`score-builtin`,
//! `judge`), its redaction, and agent runs (a target's, a judge's), through a guest of either
//! world ([`EvalGuest`]) shared by the scorers and targets that call it ([`SharedGuest`]).

use std::sync::Arc;

use super::runner::{BoxFuture, Redact};
use crate::bindings::exports::oma::agent::codec::JudgeStep;
use crate::bindings::oma::agent::outcome::{AgentConfig, RunAgentOptions, RunInput, RunResult};
use crate::bindings::oma::agent::types::Error as WitError;
use crate::state::RunCapture;
use crate::{CancelToken, DriverGuest, Guest};

/// The component's answer to a call: the outer error a trap or host failure, the inner one the
/// component's typed error.
pub type CodecResult<T> = anyhow::Result<Result<T, WitError>>;

/// A guest the evaluation calls: [`Guest`] (the `component` world) or [`DriverGuest`] (the
/// `portable` world), the only two. Its host
/// ([`GuestOptions::host`](crate::GuestOptions::host)) answers the runs' hooks, tools and model
/// calls (an agent's own [`LlmAdapter`](crate::LlmAdapter)).
pub trait EvalGuest: calls::Calls {}

impl<T: calls::Calls> EvalGuest for T {}

/// The calls behind [`EvalGuest`], out of reach outside the crate (so that only [`Guest`]
/// and [`DriverGuest`] are evaluation guests).
mod calls {
    use super::*;

    /// An agent run made for the evaluation, with what the host saw of it ([`RunCapture`]).
    pub struct EvalRun {
        pub(crate) result: RunResult,
        pub(crate) capture: RunCapture,
    }

    pub trait Calls: Redact + Send {
        /// `codec.score-builtin`: a built-in scorer's options checked (no `context`), or a
        /// sample scored.
        fn score_builtin<'a>(
            &'a mut self,
            scorer: &'a str,
            options: &'a str,
            context: Option<&'a str>,
        ) -> BoxFuture<'a, CodecResult<String>>;

        /// `codec.judge`: one step of a judge scorer.
        fn judge<'a>(
            &'a mut self,
            step: JudgeStep,
            request: &'a str,
        ) -> BoxFuture<'a, CodecResult<String>>;

        /// `run-agent` of `config` on `input` (no progress, no online evaluation), watched
        /// for what its result does not carry. `cancel` reaches a run of the `portable`
        /// world between its steps; a `component` world run is one call and runs to its end.
        fn run_watched<'a>(
            &'a mut self,
            config: &'a AgentConfig,
            input: &'a RunInput,
            cancel: &'a CancelToken,
        ) -> BoxFuture<'a, CodecResult<EvalRun>>;
    }
}

use calls::Calls;
pub(crate) use calls::EvalRun;

const NO_EXTRAS: RunAgentOptions = RunAgentOptions {
    progress: false,
    evaluation: None,
};

impl Calls for Guest {
    fn score_builtin<'a>(
        &'a mut self,
        scorer: &'a str,
        options: &'a str,
        context: Option<&'a str>,
    ) -> BoxFuture<'a, CodecResult<String>> {
        Box::pin(Guest::score_builtin(self, scorer, options, context))
    }

    fn judge<'a>(
        &'a mut self,
        step: JudgeStep,
        request: &'a str,
    ) -> BoxFuture<'a, CodecResult<String>> {
        Box::pin(Guest::judge(self, step, request))
    }

    fn run_watched<'a>(
        &'a mut self,
        config: &'a AgentConfig,
        input: &'a RunInput,
        _cancel: &'a CancelToken,
    ) -> BoxFuture<'a, CodecResult<EvalRun>> {
        Box::pin(async move {
            self.state_mut().begin_capture();
            let ran = self.run_agent(config, input, &NO_EXTRAS).await;
            let capture = self.state_mut().end_capture();
            Ok(ran?.map(|result| EvalRun { result, capture }))
        })
    }
}

impl Calls for DriverGuest {
    fn score_builtin<'a>(
        &'a mut self,
        scorer: &'a str,
        options: &'a str,
        context: Option<&'a str>,
    ) -> BoxFuture<'a, CodecResult<String>> {
        Box::pin(DriverGuest::score_builtin(self, scorer, options, context))
    }

    fn judge<'a>(
        &'a mut self,
        step: JudgeStep,
        request: &'a str,
    ) -> BoxFuture<'a, CodecResult<String>> {
        Box::pin(DriverGuest::judge(self, step, request))
    }

    fn run_watched<'a>(
        &'a mut self,
        config: &'a AgentConfig,
        input: &'a RunInput,
        cancel: &'a CancelToken,
    ) -> BoxFuture<'a, CodecResult<EvalRun>> {
        Box::pin(async move {
            self.state_mut().begin_capture();
            let ran = self
                .run_agent_cancellable(config, input, &NO_EXTRAS, cancel)
                .await;
            let capture = self.state_mut().end_capture();
            Ok(ran?.map(|result| EvalRun { result, capture }))
        })
    }
}

/// One guest shared by the scorers and targets that call it (and usable as the runner's
/// [`Redact`]): calls take turns on it, so samples that run agents on one shared guest run one
/// after another; give a target a guest of its own to run its agents beside the scorers'.
/// Cloning it shares the guest.
#[derive(Clone)]
pub struct SharedGuest(Arc<tokio::sync::Mutex<Box<dyn Calls>>>);

impl std::fmt::Debug for SharedGuest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedGuest").finish_non_exhaustive()
    }
}

impl SharedGuest {
    /// `guest`, shared.
    pub fn new(guest: impl EvalGuest + 'static) -> Self {
        SharedGuest(Arc::new(tokio::sync::Mutex::new(Box::new(guest))))
    }

    pub(crate) async fn score_builtin(
        &self,
        scorer: &str,
        options: &str,
        context: Option<&str>,
    ) -> CodecResult<String> {
        self.0
            .lock()
            .await
            .score_builtin(scorer, options, context)
            .await
    }

    pub(crate) async fn judge(&self, step: JudgeStep, request: &str) -> CodecResult<String> {
        self.0.lock().await.judge(step, request).await
    }

    pub(crate) async fn run(
        &self,
        config: &AgentConfig,
        input: &RunInput,
        cancel: &CancelToken,
    ) -> CodecResult<EvalRun> {
        self.0.lock().await.run_watched(config, input, cancel).await
    }
}

impl Redact for SharedGuest {
    fn redact<'a>(&'a mut self, text: &'a str) -> BoxFuture<'a, anyhow::Result<String>> {
        Box::pin(async move { self.0.lock().await.redact(text).await })
    }
}

/// A refusal or failure of one of OMA's evaluation rules, with the JavaScript class OMA throws
/// it as (`TypeError`, `RangeError`, `Error`; `TimeoutError` and `AbortError` for a judge cut
/// off) and OMA's message: a built-in scorer's or judge scorer's options refused when it is
/// made, or a judge's answer refused while scoring (then the sample's `scorer_error`, its
/// record naming the class).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleError {
    /// The class OMA throws it as.
    pub name: String,
    /// OMA's message.
    pub message: String,
}

impl RuleError {
    pub(crate) fn new(name: &str, message: impl Into<String>) -> Self {
        RuleError {
            name: name.to_owned(),
            message: message.into(),
        }
    }
}

impl From<WitError> for RuleError {
    fn from(error: WitError) -> Self {
        RuleError {
            name: error.name,
            message: error.message,
        }
    }
}

impl std::fmt::Display for RuleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for RuleError {}
