//! A run with an output schema (OMA's `validateStructuredOutput`): each attempt's final answer
//! is read and checked (by the schema here, or by the host), and one that does not match is
//! tried once more with OMA's feedback turn; the two attempts end as one outcome.

use super::{Phase, Run, Step};
use crate::agent::outcome::{classify_budget, Ending, RunOutcome};
use crate::agent::structured;
use crate::agent::turn::TokenBudgetExceeded;
use crate::message::LlmMessage;

/// The attempts of a run with an output schema.
pub(super) struct Attempts {
    /// The messages the first attempt ran on (after the hook), which the retry repeats.
    input: Vec<LlmMessage>,
    /// The first attempt's outcome, its messages ending with the feedback turn, while the
    /// retry runs.
    first: Option<RunOutcome>,
    /// Whether the retry started (there is no third attempt).
    retried: bool,
}

impl Attempts {
    /// The first attempt, about to run on `input`.
    pub(super) fn new(input: Vec<LlmMessage>) -> Self {
        Attempts {
            input,
            first: None,
            retried: false,
        }
    }
}

impl Run {
    /// An attempt's outcome: the result, or, with an output schema, its final answer read and
    /// validated (by the schema here, or by the host), as OMA's `validateStructuredOutput` does.
    /// A failed attempt ends the run as it is; the retry's outcome is merged with the first's,
    /// and a merged usage over the token budget ends it as OMA's budget failure.
    pub(super) fn settle(&mut self, outcome: RunOutcome) -> Phase {
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
                    let exceeded = TokenBudgetExceeded {
                        agent: self.spec.turn.agent_name.clone(),
                        used,
                        budget: budget.unwrap_or_default(),
                    };
                    merged.ending = Ending::BudgetExceeded(classify_budget(&exceeded.to_string()));
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
                Phase::Validate(Box::new(outcome))
            }
            Ok(value) => match schema.validate(&value) {
                Ok(()) => self.accept(outcome, value),
                Err(message) => self.reject(outcome, &message),
            },
        }
    }

    /// The host's verdict on the final answer's value.
    pub(super) fn validated(
        &mut self,
        outcome: RunOutcome,
        verdict: Result<serde_json::Value, String>,
    ) -> Phase {
        match verdict {
            Ok(value) => self.accept(outcome, value),
            Err(message) => self.reject(outcome, &message),
        }
    }

    /// The final answer matched the schema: the run succeeds with its value.
    fn accept(&mut self, mut outcome: RunOutcome, value: serde_json::Value) -> Phase {
        outcome.structured = Some(value);
        self.end(outcome)
    }

    /// The final answer did not match: the retry, with OMA's feedback turn after the first
    /// attempt's messages, or after the retry OMA's `StructuredOutputValidationError`.
    fn reject(&mut self, mut outcome: RunOutcome, message: &str) -> Phase {
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
        self.begin(messages)
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
