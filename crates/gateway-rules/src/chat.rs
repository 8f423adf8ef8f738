//! One chat request in front of a provider, with fallbacks: the machine behind the
//! OpenAI-compatible route (`/v1/chat/completions`). It holds the client's conversation as an
//! OMA [`ChatRequest`], already validated, and the ordered targets to try (the requested
//! `<provider>/<model>`, then the fallbacks `OMA_GATEWAY_FALLBACKS` names for it), and makes one
//! provider [`Call`] at a time, so that each target gets its provider's own retry policy (or
//! `OMA_GATEWAY_MAX_RETRIES`).
//!
//! A call that ends with a retryable failure (a 429, a 5xx, a time-out, a refused or broken
//! connection: [`Error::retryable`]) moves on to the next target, unless a piece of a streamed
//! answer was already handed out; a terminal failure (an invalid message, a 400-class answer, a
//! 401 from a provider) ends the request at once. Every attempt is recorded ([`Attempt`]), for
//! the response (which target answered) and the trace (which were tried).
//!
//! Like the run machine, it performs no I/O: [`ChatMachine::poll`] hands out what to do and
//! [`ChatMachine::handle`] takes what happened, so every host drives it (the step loop of
//! `serve`, the `routes` world's `run`).

use std::collections::VecDeque;

use oma_core::adapter::{self, ChatRequest, IdSource, StreamEvent};
use oma_core::error::Error;
use oma_core::http::call::{Call, CallAnswer, CallOptions, CallPoll, CallStep, Outgoing};
use oma_core::http::retry::RetryPolicy;
use oma_core::http::Limits;
use oma_core::message::LlmResponse;

use crate::env::Settings;

/// The OMA request both compatible routes send to `target`: `conversation` (OMA's message JSON,
/// read from the client's shape by the route) through OMA's shape guard and validation, with
/// OMA's messages, and the rest as the route read it. A route maps the error to its own shape.
pub fn chat_request(
    target: &Target,
    system_prompt: Option<String>,
    conversation: serde_json::Value,
    tools: Vec<oma_core::adapter::ToolDefinition>,
    sampling: oma_core::adapter::Sampling,
    stream: bool,
) -> Result<ChatRequest, Error> {
    let messages = oma_core::json::messages_from_value(conversation)?;
    oma_core::validate::validate_messages(&messages)?;
    Ok(ChatRequest {
        model: target.model.clone(),
        system_prompt,
        messages,
        tools,
        sampling,
        stream,
        ..ChatRequest::default()
    })
}

/// A `<provider>/<model>` to try.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The provider's name, e.g. `anthropic`.
    pub provider: String,
    /// The provider's model id.
    pub model: String,
}

impl Target {
    /// Reads `<provider>/<model>` (the provider is what comes before the first `/`); `None`
    /// when either part is empty.
    pub fn parse(text: &str) -> Option<Target> {
        let (provider, model) = text.split_once('/')?;
        let (provider, model) = (provider.trim(), model.trim());
        (!provider.is_empty() && !model.is_empty()).then(|| Target {
            provider: provider.to_owned(),
            model: model.to_owned(),
        })
    }

    /// `<provider>/<model>`.
    pub fn label(&self) -> String {
        format!("{}/{}", self.provider, self.model)
    }
}

/// How one attempt ended, for the trace and the response.
#[derive(Clone, Debug, PartialEq)]
pub struct Attempt {
    /// What was tried.
    pub target: Target,
    /// When it began and ended (ms since the Unix epoch).
    pub started_ms: u64,
    /// When it ended.
    pub ended_ms: u64,
    /// Whether a request reached the wire.
    pub sent: bool,
    /// Its failure, `None` when it answered.
    pub error: Option<Error>,
    /// Tokens read and written, when it answered.
    pub usage: Option<(u64, u64)>,
    /// The model the provider says answered.
    pub response_model: Option<String>,
}

/// What the machine needs next.
#[derive(Debug)]
pub enum ChatStep {
    /// Send this request; answer with the head (or whole response) or the failure.
    Send(Outgoing),
    /// Read more of the response body.
    Receive,
    /// Wait this many milliseconds (a retry's pause).
    Wait(u64),
    /// A piece of a streamed answer.
    Event(StreamEvent),
    /// The request is over: the answer and the target that gave it, or the last failure.
    Done(Result<(LlmResponse, Target), Error>),
}

/// The attempt in flight.
struct Current {
    target: Target,
    /// The call to the target; it keeps its adapter and what it reads the answer with.
    call: Call,
    started_ms: Option<u64>,
    sent: bool,
}

/// One chat request and its fallbacks. See the module documentation.
pub struct ChatMachine {
    settings: Settings,
    /// The conversation, sampling and tools, without a model (each target sets its own).
    request: ChatRequest,
    /// The targets not tried yet.
    rest: VecDeque<Target>,
    current: Option<Current>,
    /// A first step taken to check the request before anything is sent.
    held: Option<CallPoll>,
    attempts: Vec<Attempt>,
    /// Whether a piece of a streamed answer was handed out (then there is no moving on).
    streamed: bool,
    started_ms: Option<u64>,
    seed: u64,
    now_at_start: u64,
    over: bool,
}

impl std::fmt::Debug for ChatMachine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatMachine")
            .field("attempts", &self.attempts)
            .finish_non_exhaustive()
    }
}

impl ChatMachine {
    /// The machine for `request` (its model is ignored) to `targets` in order (the first the
    /// requested one). The first target's request is formatted now: what it refuses (an
    /// invalid message, content its format cannot carry, an egress refusal) is returned, with
    /// nothing sent; a fallback that cannot take the request is skipped when its turn comes.
    pub fn new(
        settings: &Settings,
        request: ChatRequest,
        targets: Vec<Target>,
        now_ms: u64,
        seed: u64,
    ) -> Result<ChatMachine, Error> {
        let mut rest: VecDeque<Target> = targets.into();
        let first = rest.pop_front().ok_or_else(|| Error::InvalidRequest {
            message: "the request names no model".into(),
        })?;
        let mut machine = ChatMachine {
            settings: settings.clone(),
            request,
            rest,
            current: None,
            held: None,
            attempts: Vec::new(),
            streamed: false,
            started_ms: None,
            seed,
            now_at_start: now_ms,
            over: false,
        };
        let mut current = machine.attempt(first, settings.deadline_ms)?;
        match current.call.poll(now_ms) {
            CallPoll::Finished(Err(error)) => return Err(error),
            step => machine.held = Some(step),
        }
        current.started_ms = Some(now_ms);
        machine.current = Some(current);
        Ok(machine)
    }

    /// Every attempt so far, in order (the one in flight not yet).
    pub fn attempts(&self) -> &[Attempt] {
        &self.attempts
    }

    /// Whether any request reached the wire.
    pub fn sent(&self) -> bool {
        self.attempts.iter().any(|a| a.sent) || self.current.as_ref().is_some_and(|c| c.sent)
    }

    /// A call of `target` within `deadline_ms`, or why the target cannot take the request.
    fn attempt(&mut self, target: Target, deadline_ms: u64) -> Result<Current, Error> {
        let provider = self.settings.provider(&target.provider);
        if self.settings.egress.is_none() && !provider.configured() {
            return Err(Error::EgressDenied {
                message: format!(
                    "egress denied: the provider {:?} is not configured on this gateway (its key \
                     or base URL is not set)",
                    target.provider
                ),
            });
        }
        let ids = IdSource {
            epoch_ms: self.now_at_start,
            seed: self.seed,
        };
        let adapter =
            adapter::for_provider(&target.provider, provider.endpoint.base_url.as_deref(), ids)?;
        let request = ChatRequest {
            model: target.model.clone(),
            ..self.request.clone()
        };
        let options = CallOptions {
            retry: self
                .settings
                .max_retries
                .map(|n| RetryPolicy::from_oma(i64::from(n), None, None)),
            limits: Limits {
                deadline_ms,
                ..Limits::default()
            },
            egress: self.settings.egress_for(&provider),
        };
        self.seed = oma_core::rng::Rng::new(self.seed).next_u64();
        let call = Call::new(adapter, &request, &provider.endpoint, options, self.seed);
        Ok(Current {
            target,
            call,
            started_ms: None,
            sent: false,
        })
    }

    /// The next step at `now_ms` (ms since the Unix epoch). After `Done`, `Done` again with a
    /// session error.
    pub fn poll(&mut self, now_ms: u64) -> ChatStep {
        let started = *self.started_ms.get_or_insert(now_ms);
        loop {
            if self.over {
                return ChatStep::Done(Err(Error::Session {
                    message: "the chat request is over".into(),
                }));
            }
            let Some(current) = self.current.as_mut() else {
                self.over = true;
                return ChatStep::Done(Err(Error::Session {
                    message: "the chat request has no target left".into(),
                }));
            };
            current.started_ms.get_or_insert(now_ms);
            let step = match self.held.take() {
                Some(step) => step,
                None => current.call.poll(now_ms),
            };
            match step {
                CallPoll::Step(CallStep::Send(outgoing)) => {
                    current.sent = true;
                    return ChatStep::Send(outgoing);
                }
                CallPoll::Step(CallStep::Receive) => return ChatStep::Receive,
                CallPoll::Step(CallStep::Wait(ms)) => return ChatStep::Wait(ms),
                CallPoll::Step(CallStep::Event(event)) => {
                    self.streamed = true;
                    return ChatStep::Event(event);
                }
                // `Over` never comes: a finished call is dropped with its result.
                CallPoll::Waiting | CallPoll::Over => {
                    self.over = true;
                    return ChatStep::Done(Err(Error::Session {
                        message: "the chat request was polled while an answer was due".into(),
                    }));
                }
                CallPoll::Finished(result) => {
                    let Some(current) = self.current.take() else {
                        continue;
                    };
                    let attempt = Attempt {
                        target: current.target.clone(),
                        started_ms: current.started_ms.unwrap_or(now_ms),
                        ended_ms: now_ms,
                        sent: current.sent,
                        error: result.as_ref().err().cloned(),
                        usage: result
                            .as_ref()
                            .ok()
                            .map(|r| (r.usage.input_tokens, r.usage.output_tokens)),
                        response_model: result.as_ref().ok().map(|r| r.model.clone()),
                    };
                    self.attempts.push(attempt);
                    match result {
                        Ok(response) => {
                            self.over = true;
                            return ChatStep::Done(Ok((response, current.target)));
                        }
                        Err(error) if !error.retryable() || self.streamed => {
                            self.over = true;
                            return ChatStep::Done(Err(error));
                        }
                        Err(error) => {
                            let left = self
                                .settings
                                .deadline_ms
                                .saturating_sub(now_ms.saturating_sub(started));
                            match self.next_target(left, now_ms) {
                                Some(next) => self.current = Some(next),
                                None => {
                                    self.over = true;
                                    return ChatStep::Done(Err(error));
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// The next fallback that can take the request; those that cannot are recorded as tried.
    fn next_target(&mut self, left_ms: u64, now_ms: u64) -> Option<Current> {
        if left_ms == 0 {
            return None;
        }
        while let Some(target) = self.rest.pop_front() {
            match self.attempt(target.clone(), left_ms) {
                Ok(current) => return Some(current),
                Err(error) => self.attempts.push(Attempt {
                    target,
                    started_ms: now_ms,
                    ended_ms: now_ms,
                    sent: false,
                    error: Some(error),
                    usage: None,
                    response_model: None,
                }),
            }
        }
        None
    }

    /// Feeds the answer to the step handed out last.
    pub fn handle(&mut self, answer: CallAnswer) -> Result<(), Error> {
        let current = self.current.as_mut().ok_or_else(|| Error::Session {
            message: "unexpected answer: no call is in flight".into(),
        })?;
        current
            .call
            .handle(answer)
            .map_err(|refused| refused.reason)
    }
}
