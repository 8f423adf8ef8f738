//! Where runs start: OMA's `Agent` (the configuration a run is made from and the persistent
//! history that `prompt` appends to) and OMA's `runAgent`. The runs themselves are
//! [`RunMachine`]s; this module only prepares their input and commits what a `prompt` produced
//! (see `docs/agent.md`).
//!
//! One run, in order: the input is prepared ([`crate::agent::input`]: validated and owned, or
//! refused before anything happens); a [`RunMachine`] runs the hook, the turns, the tools and
//! any external backend; the outcome becomes the result; [`Agent::commit`] appends a completed
//! `prompt`'s user turn and the messages it produced.

use crate::agent::evaluation::{RunInput, StorePayloads};
use crate::agent::input::{prepare_prompt, prepare_run, PromptInput};
use crate::agent::machine::{RunMachine, RunSpec};
use crate::agent::outcome::RunOutcome;
use crate::error::Error;
use crate::message::{ContentBlock, LlmMessage, Role};
use crate::validate::validate_messages;

/// An agent with a persistent history (OMA's `Agent`).
#[derive(Clone, Debug)]
pub struct Agent {
    spec: RunSpec,
    history: Vec<LlmMessage>,
}

impl Agent {
    /// An agent whose history is seeded with `history`, validated first.
    pub fn new(spec: RunSpec, history: Vec<LlmMessage>) -> Result<Self, Error> {
        validate_messages(&history)?;
        Ok(Agent { spec, history })
    }

    /// What the agent runs with.
    pub fn spec(&self) -> &RunSpec {
        &self.spec
    }

    /// A fresh `run` (or, with `streaming`, `stream`); invalid input fails here, before
    /// anything happens. History is neither read nor written.
    pub fn start(&self, input: RunInput, streaming: bool, seed: u64) -> Result<RunMachine, Error> {
        let messages = prepare_run(input, self.spec.external)?;
        Ok(RunMachine::run(
            self.spec.clone(),
            messages,
            streaming,
            seed,
        ))
    }

    /// OMA's `prompt()`: the user turn, and a run over the whole history followed by it.
    /// Invalid input fails here. History changes only through [`Agent::commit`] of the turn
    /// and the run's outcome.
    pub fn start_prompt(
        &self,
        input: PromptInput,
        seed: u64,
    ) -> Result<(LlmMessage, RunMachine), Error> {
        let turn = prepare_prompt(input, self.spec.external)?;
        let mut messages = Vec::with_capacity(self.history.len() + 1);
        messages.extend_from_slice(&self.history);
        messages.push(turn.clone());
        Ok((
            turn,
            RunMachine::run(self.spec.clone(), messages, false, seed),
        ))
    }

    /// Appends a completed `prompt`: its user turn, then the messages its run produced (none
    /// after a failure, so the turn stays without a reply, as in OMA).
    ///
    /// A run stopped by its token budget right after the model asked for tools produced an
    /// assistant turn whose `tool_use` blocks were never answered; every provider refuses a
    /// conversation like that, so that last turn stays in the result but not in the history.
    pub fn commit(&mut self, turn: LlmMessage, outcome: &RunOutcome) {
        self.history.push(turn);
        let mut produced = outcome.messages.as_slice();
        if let Some((last, before)) = produced.split_last() {
            let unanswered = last.role == Role::Assistant
                && last
                    .content
                    .iter()
                    .any(|block| matches!(block, ContentBlock::ToolUse(_)));
            if unanswered {
                produced = before;
            }
        }
        self.history.extend(produced.iter().cloned());
    }

    /// The persistent history.
    pub fn history(&self) -> &[LlmMessage] {
        &self.history
    }

    /// Clears the persistent history.
    pub fn reset(&mut self) {
        self.history.clear();
    }
}

/// OMA's `runAgent` as a machine: the input is prepared now (invalid input fails before any
/// progress event or evaluation); `evaluation` is the payload policy and the sample rate.
pub fn start_run_agent(
    spec: RunSpec,
    input: RunInput,
    progress: bool,
    evaluation: Option<(StorePayloads, f64)>,
    seed: u64,
) -> Result<RunMachine, Error> {
    // Progress and evaluation see the input as it was given: a copy of its own, taken only
    // when one of them may need it (the run takes the original).
    let given = (progress || evaluation.is_some()).then(|| input.clone());
    let messages = prepare_run(input, spec.external)?;
    Ok(RunMachine::run_agent(
        spec, messages, given, progress, evaluation, seed,
    ))
}
