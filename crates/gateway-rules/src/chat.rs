//! One chat request in front of a provider, with fallbacks: the machine behind the
//! OpenAI-compatible route (`/v1/chat/completions`). It holds the client's conversation as an
//! OMA [`ChatRequest`], already validated, and the ordered targets to try (the requested
//! `<provider>/<model>`, then the fallbacks `OMA_GATEWAY_FALLBACKS` names for it), and makes one
//! provider [`Call`] at a time, so that each target gets its provider's own retry policy (or
//! `OMA_GATEWAY_MAX_RETRIES`).
//!
//! A call that ends with a retryable failure (a 429, a 5xx, a time-out, a refused or broken
//! connection: [`Error::retryable`]) moves on to the next target, unless a piece of a streamed
//! answer was already handed out, or the target's last attempt was answered with a success
//! (2xx) whose body could not be used (it does not parse, it is too large, it was cut off): that
//! completion was paid for, and asking another target would pay for a second one. A terminal
//! failure (an invalid message, a 400-class answer, a 401 from a provider) ends the request at
//! once. Every attempt that ended is kept (its target, times, and usage and
//! answering model, or its failure as OMA classifies it), the one record the token count of the
//! limits is read from, and the OpenTelemetry spans ([`crate::trace`]) through OMA's trace
//! records of its model calls ([`ChatMachine::records`]), as a `/v1/run`'s are read from its
//! run's records.
//!
//! Like the run machine, it performs no I/O: [`ChatMachine::poll`] hands out what to do and
//! [`ChatMachine::handle`] takes what happened, so every host drives it (the step loop of
//! `serve`, the `routes` world's `run`).

use std::collections::VecDeque;

use oma_core::adapter::anthropic;
use oma_core::adapter::{self, ChatRequest, IdSource, ResponseContext, StreamEvent, Validated};
use oma_core::agent::observability::capture::SensitiveData;
use oma_core::agent::observability::options::TraceParent;
use oma_core::agent::observability::record::{
    Attributes, RecordBody, Recorder, SpanError, SpanKind, SpanStatus,
};
use oma_core::agent::outcome::{classify, Failure};
use oma_core::agent::trace as oma_trace;
use oma_core::error::{Error, Refused};
use oma_core::http::call::{Call, CallAnswer, CallOptions, CallPoll, CallStep, Outgoing, Prepared};
use oma_core::http::Limits;
use oma_core::message::{LlmResponse, TokenUsage};
use oma_core::retry::RetryPolicy;
use oma_core::rng::Rng;
use serde_json::Value;

use crate::env::Settings;
use crate::fields::Dialect;

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

/// Mixed into a request's seed for its run id.
const TRACE_IDS: u64 = 0x6761_7465_7761_7921;
/// Mixed into a request's seed for the ids of its trace records.
const RECORD_IDS: u64 = 0x6761_7465_7265_6364;

/// An attempt that ended: its target, when it ran, and what it got.
#[derive(Clone, Debug)]
struct Attempt {
    target: Target,
    started_ms: u64,
    ended_ms: u64,
    /// The usage and the model that answered (when the provider named one), or the failure
    /// as OMA classifies it (redacted).
    outcome: Result<(TokenUsage, Option<String>), Failure>,
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

/// How a chat request reaches its targets beyond the OMA request: the client's own request for
/// the targets of its dialect, and whether the request is a count of its input tokens.
#[derive(Clone, Debug, Default)]
pub struct ChatMode {
    /// The client's own Anthropic request, which an Anthropic target is sent as it is but for
    /// the model ([`anthropic::forward`]): the same dialect, so every field and block the
    /// client wrote reaches the provider, byte for byte.
    pub forward: Option<Forwarded>,
    /// Count the request's input tokens instead of answering it: each target's own counter
    /// ([`Call::count`]), or the estimate where it has none
    /// ([`adapter::estimate_input_tokens`]); the answer's `usage.input_tokens` is the count.
    pub count: bool,
    /// The client's fields beyond the conversation, applied to each target by the field table
    /// ([`crate::fields::apply`]): passed, mapped, or refused (or dropped, as the operator
    /// allows) before the target is sent anything.
    pub fields: Option<crate::fields::ClientFields>,
    /// The client's own OpenAI request, which an OpenAI-compatible target is sent as written
    /// but for what the gateway writes itself ([`crate::openai::OwnRequest::body`]): the same
    /// rule as [`ChatMode::forward`], for `/v1/chat/completions`. `None` when the request holds
    /// a part such a target takes in another form ([`crate::openai::sent_as_written`]): then
    /// every target is sent OMA's request.
    pub openai: Option<crate::openai::OwnRequest>,
}

/// A client's own request, kept for the targets of its dialect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Forwarded {
    /// The body as the client sent it.
    pub body: String,
    /// Where its top-level `model` string is.
    pub model_at: std::ops::Range<usize>,
    /// The provider's route, with the client's query: `v1/messages?beta=true`.
    pub path: String,
    /// The client's `anthropic-version`.
    pub version: Option<String>,
    /// The client's `anthropic-beta`.
    pub beta: Option<String>,
}

/// The attempt in flight.
struct Current {
    target: Target,
    /// The call to the target; it keeps its adapter and what it reads the answer with.
    call: Call,
    started_ms: Option<u64>,
    /// Whether the attempt in flight was answered with a success (2xx) status.
    succeeded: bool,
    /// Whether bytes of the attempt's accepted stream arrived.
    began: bool,
    /// Whether the early usage of an Anthropic stream (its `message_start`, the event it
    /// opens with) was handed out; for the other formats, which report usage only at their
    /// end, nothing is waited for.
    opened: bool,
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
    /// Every attempt that ended, in order.
    attempts: Vec<Attempt>,
    /// The request's id, its records' `runId`.
    run_id: String,
    /// Whether a request was handed out to be sent.
    sent: bool,
    /// Whether a piece of a streamed answer was handed out (then there is no moving on).
    streamed: bool,
    started_ms: Option<u64>,
    seed: u64,
    now_at_start: u64,
    over: bool,
    mode: ChatMode,
    /// The fields dropped for each target tried, as `OMA_GATEWAY_DROP_PARAMS` allowed.
    dropped: Vec<(Target, Vec<String>)>,
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
        ChatMachine::with_mode(
            settings,
            request,
            targets,
            ChatMode::default(),
            now_ms,
            seed,
        )
    }

    /// As [`ChatMachine::new`], reaching the targets as `mode` says.
    pub fn with_mode(
        settings: &Settings,
        request: ChatRequest,
        targets: Vec<Target>,
        mode: ChatMode,
        now_ms: u64,
        seed: u64,
    ) -> Result<ChatMachine, Error> {
        let mut rest: VecDeque<Target> = targets.into();
        let first = rest.pop_front().ok_or_else(|| Error::InvalidRequest {
            message: "the request names no model".into(),
        })?;
        let run_id = oma_trace::uuid_v4(&mut Rng::new(seed ^ TRACE_IDS));
        let mut machine = ChatMachine {
            settings: settings.clone(),
            request,
            rest,
            current: None,
            held: None,
            attempts: Vec::new(),
            run_id,
            sent: false,
            streamed: false,
            started_ms: None,
            seed,
            now_at_start: now_ms,
            over: false,
            mode,
            dropped: Vec::new(),
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

    /// OMA's trace records of every attempt so far, in order (the one in flight not yet), in
    /// the trace of `parent` (the gateway request's span, their parent): for each, the start
    /// and the end of a `chat` span (kind `llm`) with the target's model and provider
    /// (`oma.llm.model`, `oma.llm.provider`, `oma.phase` `turn`, `oma.llm.turn` 1), and at its
    /// end the usage and the model that answered (`oma.usage.*`, `oma.llm.response_model`; the
    /// cache's reads the provider counts in its input as `oma.usage.cached_input_tokens`), or
    /// the failure as OMA classifies a failed model call (status, error kind, class, code,
    /// retryability, HTTP status, provider), as a run's model calls are recorded
    /// (`docs/observability.md`); processed by OMA's sensitive-data processing with the default
    /// capture policy. A count makes none.
    pub fn records(&self, parent: &TraceParent) -> Vec<Value> {
        let rng = Rng::new(self.seed ^ RECORD_IDS);
        let mut recorder = Recorder::new(self.run_id.clone(), Some(parent.trace_id.clone()), rng);
        let processing = SensitiveData::default();
        let mut records = Vec::new();
        for attempt in &self.attempts {
            let span = recorder.span_id();
            let mut attributes = Attributes::new();
            attributes.insert("oma.llm.model".into(), attempt.target.model.as_str().into());
            let provider = attempt.target.provider.as_str();
            attributes.insert("oma.llm.provider".into(), provider.into());
            attributes.insert("oma.phase".into(), "turn".into());
            attributes.insert("oma.llm.turn".into(), 1.into());
            let start = RecordBody::Start {
                kind: SpanKind::Llm,
                name: "chat",
                start_ms: attempt.started_ms,
                attributes: attributes.clone(),
            };
            let (status, error) = match &attempt.outcome {
                Ok((usage, model)) => {
                    attributes.insert("oma.usage.input_tokens".into(), usage.input_tokens.into());
                    let output = usage.output_tokens;
                    attributes.insert("oma.usage.output_tokens".into(), output.into());
                    for (key, count) in [
                        (
                            "oma.usage.cache_read_input_tokens",
                            usage.cache_read_input_tokens,
                        ),
                        (
                            "oma.usage.cache_creation_input_tokens",
                            usage.cache_creation_input_tokens,
                        ),
                        ("oma.usage.cached_input_tokens", usage.cached_input_tokens),
                    ] {
                        if count > 0 {
                            attributes.insert(key.into(), count.into());
                        }
                    }
                    if let Some(model) = model {
                        attributes.insert("oma.llm.response_model".into(), model.as_str().into());
                    }
                    (SpanStatus::ok(), None)
                }
                Err(failure) => (
                    SpanStatus::of(&failure.status),
                    Some(SpanError::of(&failure.error_info)),
                ),
            };
            attributes.insert("oma.status".into(), status.code.word().into());
            let end = RecordBody::End {
                kind: SpanKind::Llm,
                name: "chat",
                start_ms: attempt.started_ms,
                end_ms: attempt.ended_ms,
                status,
                error,
                attributes,
            };
            for (at, body) in [(attempt.started_ms, start), (attempt.ended_ms, end)] {
                let parent = Some(parent.span_id.clone());
                let record = recorder.record(at, span.clone(), parent, body);
                records.extend(processing.process(record.into_json()));
            }
        }
        records
    }

    /// The tokens the providers reported (read, the prompt cache's included, and written), over
    /// every attempt.
    pub fn tokens_used(&self) -> u64 {
        self.attempts
            .iter()
            .map(|attempt| match &attempt.outcome {
                Ok((usage, _)) => usage.all(),
                Err(_) => 0,
            })
            .fold(0, u64::saturating_add)
    }

    /// The fields dropped for each target tried so far (as `OMA_GATEWAY_DROP_PARAMS` allows),
    /// in the order the targets were tried; targets that dropped none are not listed.
    pub fn dropped(&self) -> &[(Target, Vec<String>)] {
        &self.dropped
    }

    /// Whether any request reached the wire.
    pub fn sent(&self) -> bool {
        self.sent
    }

    /// Whether the provider's streamed answer began: the call in flight accepted it (a 2xx head,
    /// after which it is neither retried nor moved on from) and its first event arrived. The
    /// pieces it completed are handed out before the next [`ChatStep::Receive`]. For an
    /// Anthropic target the first event is `message_start`, whose usage the gateway's own
    /// `message_start` carries, so its early usage is waited for even when its bytes come in
    /// more than one read; for the other formats, their first bytes.
    pub fn began(&self) -> bool {
        self.current.as_ref().is_some_and(|current| {
            current.began
                && current.call.accepted()
                && (current.opened || current.target.provider != anthropic::NAME)
        })
    }

    /// Records an attempt of `target` from `started_ms` to `ended_ms` that ended with `result`.
    fn record(
        &mut self,
        target: &Target,
        started_ms: u64,
        ended_ms: u64,
        result: Result<&LlmResponse, &Error>,
    ) {
        if self.mode.count {
            // A count is no model call: no span, no tokens used.
            return;
        }
        let outcome = match result {
            Ok(response) => Ok((
                response.usage,
                Some(response.model.clone()).filter(|m| !m.is_empty()),
            )),
            Err(error) => Err(classify(error, false, Some(&target.provider))),
        };
        self.attempts.push(Attempt {
            target: target.clone(),
            started_ms,
            ended_ms: ended_ms.max(started_ms),
            outcome,
        });
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
        let mut request = ChatRequest {
            model: target.model.clone(),
            ..self.request.clone()
        };
        // The AI SDK bridge has no dialect here: its request is refused as it is made.
        let dialect = crate::fields::Dialect::of(&target.provider);
        // A target of the client's own dialect is sent the client's own request, when the
        // route kept it.
        let own = match dialect {
            Some(Dialect::Anthropic) => self.mode.forward.is_some(),
            Some(Dialect::OpenAi) => self.mode.openai.is_some(),
            _ => false,
        };
        let mut dropped_here = Vec::new();
        if let (Some(fields), Some(dialect)) = (&self.mode.fields, dialect) {
            let dropped = crate::fields::apply(
                fields,
                dialect,
                &target.label(),
                &mut request,
                &self.settings.drop_params,
                own,
            )?;
            if !dropped.is_empty() {
                dropped_here.clone_from(&dropped);
                self.dropped.push((target.clone(), dropped));
            }
        }
        // The prompt cache's markers and the client's betas: rows of the table too (on
        // `/v1/messages` and its count, whose client request the route keeps).
        if let (Some(forwarded), Some(dialect)) = (&self.mode.forward, dialect) {
            let dropped = crate::fields::apply_markers_and_betas(
                dialect,
                &target.label(),
                &mut request,
                !self.mode.count,
                forwarded.beta.as_deref(),
                &self.settings.drop_params,
            )?;
            if !dropped.is_empty() {
                match self.dropped.last_mut() {
                    Some((last, names)) if *last == target => names.extend(dropped),
                    _ => self.dropped.push((target.clone(), dropped)),
                }
            }
        }
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
        let endpoint = &provider.endpoint;
        let count = self.mode.count;
        let call = match &self.mode.forward {
            Some(forwarded) if target.provider == anthropic::NAME => {
                let forward = anthropic::Forward {
                    body: &forwarded.body,
                    model_at: forwarded.model_at.clone(),
                    path: &forwarded.path,
                    version: forwarded.version.as_deref(),
                    beta: forwarded.beta.as_deref(),
                };
                // What Anthropic's format refuses of the request as read (a block it has no
                // type for, a marker it cannot place) is refused before anything is sent,
                // as for any other target; what is sent is the client's own request.
                let checked = Validated::check(&request).and_then(|validated| match count {
                    true => adapter
                        .format_count(validated, endpoint)
                        .unwrap_or_else(|| adapter.format_validated(validated, endpoint)),
                    false => adapter.format_validated(validated, endpoint),
                });
                let prepared = Prepared {
                    request: checked
                        .and_then(|_| anthropic::forward(&forward, &target.model, endpoint)),
                    context: ResponseContext::of(&request),
                    stream: request.stream && !count,
                    count,
                };
                Call::prepared(adapter, prepared, endpoint, options, self.seed)
            }
            _ if own && dialect == Some(Dialect::OpenAi) => {
                // What the format refuses of the request as read is refused before anything is
                // sent, as for any other target; what is sent is the client's own request, at
                // the format's URL with its headers.
                let own = self.mode.openai.as_ref();
                let made = Validated::check(&request)
                    .and_then(|validated| adapter.format_validated(validated, endpoint))
                    .map(|mut http| {
                        if let Some(own) = own {
                            http.body = own.body(&target.model, request.stream, &dropped_here);
                        }
                        http
                    });
                let prepared = Prepared {
                    request: made,
                    context: ResponseContext::of(&request),
                    stream: request.stream,
                    count: false,
                };
                Call::prepared(adapter, prepared, endpoint, options, self.seed)
            }
            _ if count => {
                let formatted = match Validated::check(&request) {
                    Ok(validated) => adapter.format_count(validated, endpoint),
                    Err(error) => Some(Err(error)),
                };
                match formatted {
                    Some(request_made) => {
                        let prepared = Prepared {
                            request: request_made,
                            context: ResponseContext::of(&request),
                            stream: false,
                            count,
                        };
                        Call::prepared(adapter, prepared, endpoint, options, self.seed)
                    }
                    None => {
                        let estimate = LlmResponse {
                            id: String::new(),
                            content: Vec::new(),
                            model: target.model.clone(),
                            stop_reason: String::new(),
                            usage: TokenUsage::new(adapter::estimate_input_tokens(&request), 0),
                            stop_sequence: None,
                        };
                        Call::answered(adapter, estimate)
                    }
                }
            }
            _ => Call::new(adapter, &request, endpoint, options, self.seed),
        };
        Ok(Current {
            target,
            call,
            started_ms: None,
            succeeded: false,
            began: false,
            opened: false,
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
                    self.sent = true;
                    current.succeeded = false;
                    return ChatStep::Send(outgoing);
                }
                CallPoll::Step(CallStep::Receive) => return ChatStep::Receive,
                CallPoll::Step(CallStep::Wait(ms)) => return ChatStep::Wait(ms),
                CallPoll::Step(CallStep::Event(event)) => {
                    // The provider's early usage is no piece of the answer: a failure after
                    // it may still move on.
                    if matches!(event, StreamEvent::Usage(_)) {
                        current.opened = true;
                    } else {
                        self.streamed = true;
                    }
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
                    let started_ms = current.started_ms.unwrap_or(now_ms);
                    self.record(&current.target, started_ms, now_ms, result.as_ref());
                    match result {
                        Ok(response) => {
                            self.over = true;
                            return ChatStep::Done(Ok((response, current.target)));
                        }
                        // A success whose body could not be used was paid for: no second one.
                        Err(error) if !error.retryable() || self.streamed || current.succeeded => {
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
                Err(error) => self.record(&target, now_ms, now_ms, Err(&error)),
            }
        }
        None
    }

    /// The instant the call in flight next needs a poll even if no answer comes (the end of
    /// its attempt's timeout or of a wait); `None` when there is none.
    pub fn wake_at(&self) -> Option<u64> {
        self.current
            .as_ref()
            .and_then(|current| current.call.wake_at())
    }

    /// Feeds the answer to the step handed out last; an answer the call did not ask for is
    /// handed back with a `SessionStateError` as the reason, and nothing changes.
    pub fn handle(&mut self, answer: CallAnswer) -> Result<(), Refused<CallAnswer>> {
        let Some(current) = self.current.as_mut() else {
            return Err(Refused::new(
                answer,
                "unexpected answer: no call is in flight".into(),
            ));
        };
        let status = match &answer {
            CallAnswer::Head { status, .. } => Some(*status),
            CallAnswer::Response(response) => Some(response.status),
            _ => None,
        };
        let bytes = matches!(&answer, CallAnswer::Chunk(bytes) if !bytes.is_empty());
        current.call.handle(answer)?;
        if let Some(status) = status {
            current.succeeded = (200..300).contains(&status);
            current.began = false;
            current.opened = false;
        }
        current.began |= bytes;
        Ok(())
    }
}
