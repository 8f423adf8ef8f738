//! How a run begins: the `beforeRun` hook and its answer, then either the external backend
//! (and its reply) or the turn loop.

use super::{Attempts, Phase, Run, Step, Turns};
use crate::agent::before_run::{self, transport_prompt, BeforeRunContext, ExternalKind};
use crate::agent::exchange::HookAnswer;
use crate::agent::outcome::{Ending, RunOutcome};
use crate::error::Error;
use crate::http::EgressPolicy;
use crate::message::{ContentBlock, LlmMessage, Role, TextBlock, TokenUsage};

impl Run {
    /// The hook, or straight to the backend.
    pub(super) fn start(&mut self, messages: Vec<LlmMessage>) -> Phase {
        if !self.spec.before_run {
            return self.begin(messages);
        }
        // The run's own copy becomes the context; the hook gets a copy of that, and an
        // unchanged list comes back out of the merge without another.
        let context = BeforeRunContext::from_messages(messages);
        self.queue.push_back(Step::BeforeRun {
            agent: self.spec.name().to_owned(),
            context: context.clone(),
            config: self.spec.config_json.clone(),
        });
        Phase::Hook(context)
    }

    /// The hook answered: its result merged into `context` begins the run, its failure ends it.
    pub(super) fn hooked(&mut self, context: BeforeRunContext, answer: HookAnswer) -> Phase {
        let merged = match answer {
            HookAnswer::Failed(message) => Err(Error::Host { message }),
            HookAnswer::Rejected(error) => Err(error),
            HookAnswer::Result(result) => before_run::merge(context, result, self.spec.external),
        };
        match merged {
            Ok(messages) => self.begin(messages),
            Err(error) => self.fail(&error, true),
        }
    }

    /// The external backend gets the latest user text; otherwise the turn loop starts.
    pub(super) fn begin(&mut self, messages: Vec<LlmMessage>) -> Phase {
        if self.spec.output_schema.is_some() && self.attempts.is_none() && !self.streaming {
            self.attempts = Some(Box::new(Attempts::new(messages.clone())));
        }
        if let Some(kind) = self.spec.external {
            let prompt = transport_prompt(&messages);
            let text = match (kind, self.spec.template.system_prompt.as_deref()) {
                (ExternalKind::Process, Some(system)) if !system.is_empty() => {
                    format!("{system}\n\n{prompt}")
                }
                _ => prompt,
            };
            self.queue.push_back(Step::External { kind, text });
            return Phase::External;
        }
        if let Some(adapter) = &self.spec.adapter {
            // OMA refuses a policy it cannot enforce: an adapter's requests are its own.
            if self.spec.call.egress != EgressPolicy::Open {
                let error = Error::EgressUnsupported {
                    adapter: adapter.name.clone(),
                };
                return self.fail(&error, false);
            }
        }
        let mut template = self.spec.template.clone();
        template.stream = self.streaming;
        Phase::Turns(Box::new(Turns::new(
            messages,
            template,
            self.spec.turn.clone(),
        )))
    }

    /// The external backend replied: its output is the attempt's one turn, its failure ends
    /// the run.
    pub(super) fn replied(&mut self, reply: Result<String, String>) -> Phase {
        match reply {
            Ok(output) => self.settle(RunOutcome {
                messages: vec![LlmMessage {
                    role: Role::Assistant,
                    content: vec![ContentBlock::Text(TextBlock {
                        text: output.clone(),
                    })],
                }],
                output,
                token_usage: TokenUsage::default(),
                tool_calls: Vec::new(),
                turns: 1,
                ending: Ending::Completed,
                loop_detected: false,
                structured: None,
            }),
            Err(message) => self.fail(&Error::Host { message }, false),
        }
    }
}
