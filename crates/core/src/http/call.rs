//! One provider call as a state machine with no I/O: format, check egress, send, classify,
//! parse or decode, and retry what may be retried (see `docs/errors.md`).
//!
//! In the manner of the run machine ([`crate::agent::machine`]) and quinn-proto's
//! `poll`/`handle`: [`Call::poll`] says what the call needs now, one of three things
//! ([`CallPoll`]): a [`CallStep`] to perform or deliver (send this request, read more of the
//! body, wait this long, deliver a piece of a stream); that it is waiting for the answer to the
//! step handed out last, due by [`Call::wake_at`]; or that it is finished, with its result.
//! [`Call::handle`] is told what happened. The call owns what it reads a response with (the
//! provider's [`Adapter`] and the [`ResponseContext`] of its request), so an answer is all a
//! host hands it. Whoever holds the network performs the step: the wasi:http driver of the
//! `component` world, the run machine's host through the `driver` interface, the gateway's
//! fallback machine. Either way the decisions (what is retried, after how long, what an answer
//! means) are made here once.
//!
//! Call order:
//!
//! 1. [`Call::new`] (or [`Call::new_validated`]): validation, formatting and the egress check
//!    happen now; what fails is the call's result, and nothing is ever sent.
//! 2. `poll(now)`: perform each [`CallPoll::Step`]; `Send`, `Receive` and `Wait` need one
//!    [`Call::handle`] with the matching [`CallAnswer`], `Event` only delivery.
//! 3. On [`CallPoll::Waiting`], `handle` the answer when it arrives (at
//!    [`wake_at`](Call::wake_at) at the latest), then poll again.
//! 4. [`CallPoll::Finished`] carries the result, once; a later poll says [`CallPoll::Over`].
//!
//! Answers that do not fit the step fail with [`Error::Session`] and change nothing. Never
//! panics.
//!
//! Time comes in with each `poll`: a call past its deadline ([`Limits::deadline_ms`], counted
//! from the first send) ends with `LLMCallTimeoutError` at the next poll, however its bytes
//! trickle in; no step's timeout reaches past the deadline, and no wait is handed out that
//! would end after it. An attempt is held to its own timeout ([`Limits::timeout_ms`], cut to
//! what is left of the deadline) the same way: past it, a response still being read (a stream
//! of keep-alives, a body that trickles) ends with `LLMCallTimeoutError` at the next poll. A
//! timeout error names the limit that fired and its value.

use std::collections::VecDeque;
use std::sync::Arc;

use super::{classify_status, egress_url, EgressPolicy, HttpResponse, Limits, TransportFailure};
use crate::adapter::{
    Adapter, ChatRequest, Endpoint, HttpRequest, ResponseContext, StreamDecoder, StreamEvent,
    Validated,
};
use crate::error::{Error, Refused};
use crate::message::LlmResponse;
use crate::retry::{RequestedWait, RetryHints, RetryPolicy};
use crate::rng::Rng;

/// How a call is bounded and retried.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CallOptions {
    /// When to try again; `None` for the provider's default policy ([`Adapter::default_retry`],
    /// `docs/errors.md#default-retry-policy`).
    pub retry: Option<RetryPolicy>,
    /// Timeouts and size limits.
    pub limits: Limits,
    /// Where requests may go.
    pub egress: EgressPolicy,
}

/// A request to send, with how to send it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outgoing {
    /// The method, e.g. `POST`.
    pub method: String,
    /// The absolute URL.
    pub url: String,
    /// Header names (lowercase) and values, in order. They carry the key: show them to nobody.
    pub headers: Vec<(String, String)>,
    /// The JSON body, shared with the call while a retry may still send it: handing out an
    /// attempt copies no bytes, a host that only reads it (wasi:http) never copies it at all,
    /// and the last attempt's body is the call's no longer, so a host that takes it (the
    /// portable driver) does not copy it either.
    pub body: Arc<String>,
    /// The timeout to apply to connecting, the first byte and between bytes, in milliseconds.
    pub timeout_ms: u64,
    /// Whether the response is a stream to be delivered as it arrives.
    pub stream: bool,
    /// Which attempt this is, from 1.
    pub attempt: u32,
    /// `url` as parsed when its egress was checked, shared by every attempt: a transport that
    /// sends the URL's parts apart (wasi:http's scheme, authority and path) takes them from it
    /// instead of parsing `url` again. `None` for a request made elsewhere (a trace export),
    /// whose transport parses `url` itself.
    pub parsed: Option<Arc<url::Url>>,
}

/// A request made elsewhere, for [`Call::prepared`].
#[derive(Debug)]
pub struct Prepared {
    /// The request, or why it could not be made.
    pub request: Result<HttpRequest, Error>,
    /// What reading its answer needs to know of it.
    pub context: ResponseContext,
    /// Whether it asks for a streamed answer.
    pub stream: bool,
    /// Whether it asks the provider's token counter (its answer a count, as [`Call::count`]).
    pub count: bool,
}

/// A step the call hands out: something to perform, or a piece of a stream to deliver.
#[derive(Debug, PartialEq)]
pub enum CallStep {
    /// Send this request; answer with [`CallAnswer::Response`], or [`CallAnswer::Head`] followed
    /// by chunks, or [`CallAnswer::Failure`].
    Send(Outgoing),
    /// Read more of the response body; answer with [`CallAnswer::Chunk`], [`CallAnswer::End`] or
    /// [`CallAnswer::Failure`].
    Receive,
    /// Wait this many milliseconds before the next attempt; answer with [`CallAnswer::Waited`].
    Wait(u64),
    /// A piece of a streamed answer (text, reasoning, a tool call); no answer.
    Event(StreamEvent),
}

/// What [`Call::poll`] found: the three cases a host acts on, as the run machine's
/// [`Poll`](crate::agent::machine::Poll) has them, and [`CallPoll::Over`] for a call whose
/// result was already handed out. Waiting and finished are told apart, so a host that polls
/// at the wrong moment learns which it is.
// A step is handed out by value on every poll, the hot path of a call; boxing it would cost
// an allocation per step to shrink the rare `Waiting` and `Over`.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, PartialEq)]
pub enum CallPoll {
    /// Perform (or deliver) this step.
    Step(CallStep),
    /// The answer to the `Send` or `Wait` handed out last is due: nothing to do until it
    /// arrives, by [`Call::wake_at`].
    Waiting,
    /// The call is over, with its result (given once).
    Finished(Result<LlmResponse, Error>),
    /// The result was handed out by an earlier poll; nothing follows.
    Over,
}

/// What happened to the step the call asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallAnswer {
    /// The whole response.
    Response(HttpResponse),
    /// The response head; its body follows as chunks.
    Head {
        /// The status code.
        status: u16,
        /// Header names and values (names are compared without case).
        headers: Vec<(String, String)>,
    },
    /// The next bytes of the body.
    Chunk(Vec<u8>),
    /// The body ended.
    End,
    /// The request failed before a whole answer arrived.
    Failure(TransportFailure),
    /// The wait is over.
    Waited,
}

/// Where the call stands.
enum State {
    /// The next attempt is to be handed out.
    SendDue,
    /// A request was handed out; its response is due.
    Sent,
    /// The head arrived; body chunks are due.
    Receiving(Receiving),
    /// A wait is to be handed out.
    WaitDue(u64),
    /// A wait until this time (ms since the epoch) is to be handed out: the provider's
    /// `retry-after` date, turned into a length at the next poll.
    WaitUntil(u64),
    /// A wait was handed out; `Waited` is due.
    Waiting,
    /// The call ended: its result waits in `outcome` until a poll hands it out.
    Over,
}

struct Receiving {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    received: usize,
    /// Set for an accepted (2xx) streamed response: its bytes go to the decoder as they come.
    decoder: Option<Box<dyn StreamDecoder>>,
}

/// One provider call. See the module documentation for the call order.
pub struct Call {
    provider: String,
    /// The wire format: it reads the answers (errors, bodies, streams) of this call.
    adapter: Box<dyn Adapter>,
    /// What the adapter needs to know of the request to read its answer.
    context: ResponseContext,
    outgoing: Outgoing,
    options: CallOptions,
    /// The policy in force: the options' own, else the provider's default.
    retry: RetryPolicy,
    secrets: Vec<String>,
    rng: Rng,
    state: State,
    /// Pieces of a stream not yet handed out; they go before the result.
    events: VecDeque<StreamEvent>,
    /// The result, from when the call ends until a poll hands it out.
    outcome: Option<Result<LlmResponse, Error>>,
    /// When the first attempt was handed out (ms since the epoch).
    started_ms: Option<u64>,
    /// The error of the failed attempt a wait follows, for when the wait cannot happen.
    last_error: Option<Error>,
    /// The limit a transport timeout of the attempt in flight stands for, in milliseconds: the
    /// call's deadline when what was left of it cut the attempt's timeout, else the timeout.
    /// A timeout error names the limit that fired and its value, never one that did not.
    fired_limit_ms: u64,
    /// When the attempt in flight was handed out (ms since the epoch) and the timeout it was
    /// handed out with: the attempt's whole response, streamed or not, is held to it.
    attempt: Option<(u64, u64)>,
    /// When the wait handed out last ends (ms since the epoch), for [`Call::wake_at`].
    wait_ends_ms: u64,
    /// A call of the provider's token counter ([`Call::count`]): its answer is a count.
    count: bool,
}

impl std::fmt::Debug for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("provider", &self.provider)
            .field("url", &self.outgoing.url)
            .field("attempt", &self.outgoing.attempt)
            .finish_non_exhaustive()
    }
}

impl Call {
    /// A call of `request` to `endpoint` in `adapter`'s format. Validation, formatting and the
    /// egress check happen now: when one fails, the first poll finishes the call with the
    /// error and nothing is ever sent. The call keeps `adapter` and what it needs of `request`
    /// to read the answers. `seed` seeds the retry jitter.
    pub fn new(
        adapter: Box<dyn Adapter>,
        request: &ChatRequest,
        endpoint: &Endpoint,
        options: CallOptions,
        seed: u64,
    ) -> Call {
        let formatted = Validated::check(request)
            .and_then(|validated| adapter.format_validated(validated, endpoint));
        Call::with_formatted(adapter, request, formatted, options, seed, endpoint)
    }

    /// As [`Call::new`], for a request whose messages are already validated (a run's turn):
    /// nothing is checked twice.
    pub fn new_validated(
        adapter: Box<dyn Adapter>,
        request: Validated<'_>,
        endpoint: &Endpoint,
        options: CallOptions,
        seed: u64,
    ) -> Call {
        let formatted = adapter.format_validated(request, endpoint);
        Call::with_formatted(
            adapter,
            request.request(),
            formatted,
            options,
            seed,
            endpoint,
        )
    }

    /// A call of the provider's token counter for `request` ([`Adapter::format_count`]): the
    /// result is a response with no content whose `usage.input_tokens` is the provider's count
    /// (and nothing else). A provider with no counter finishes the call with an error at the
    /// first poll, nothing sent: [`crate::adapter::estimate_input_tokens`] is for it.
    pub fn count(
        adapter: Box<dyn Adapter>,
        request: &ChatRequest,
        endpoint: &Endpoint,
        options: CallOptions,
        seed: u64,
    ) -> Call {
        let formatted = Validated::check(request).and_then(|validated| {
            adapter
                .format_count(validated, endpoint)
                .unwrap_or_else(|| {
                    Err(Error::InvalidRequest {
                        message: format!("{} has no token counter", adapter.name()),
                    })
                })
        });
        let mut call = Call::with_formatted(adapter, request, formatted, options, seed, endpoint);
        call.outgoing.stream = false;
        call.count = true;
        call
    }

    /// A call of a request made elsewhere (the gateway's same-dialect route: the client's own
    /// request, [`crate::adapter::anthropic::forward`]), read with `adapter`. The egress check
    /// happens now; a request that could not be made finishes the call at the first poll.
    pub fn prepared(
        adapter: Box<dyn Adapter>,
        prepared: Prepared,
        endpoint: &Endpoint,
        options: CallOptions,
        seed: u64,
    ) -> Call {
        let shape = ChatRequest {
            stream: prepared.stream,
            ..ChatRequest::default()
        };
        let mut call =
            Call::with_formatted(adapter, &shape, prepared.request, options, seed, endpoint);
        call.context = prepared.context;
        call.count = prepared.count;
        call
    }

    /// A call whose answer is known without asking the provider (the estimate of a count where
    /// the provider has no counter): its first poll finishes it with `response`, and nothing is
    /// ever sent.
    pub fn answered(adapter: Box<dyn Adapter>, response: LlmResponse) -> Call {
        let known = Err(Error::Session {
            message: "the call's answer is known".into(),
        });
        let mut call = Call::with_formatted(
            adapter,
            &ChatRequest::default(),
            known,
            CallOptions::default(),
            0,
            &Endpoint::default(),
        );
        call.outcome = Some(Ok(response));
        call
    }

    fn with_formatted(
        adapter: Box<dyn Adapter>,
        request: &ChatRequest,
        formatted: Result<HttpRequest, Error>,
        options: CallOptions,
        seed: u64,
        endpoint: &Endpoint,
    ) -> Call {
        let secrets = endpoint.secrets();
        let mut call = Call {
            count: false,
            provider: adapter.name().to_owned(),
            context: ResponseContext::of(request),
            retry: options.retry.unwrap_or_else(|| adapter.default_retry()),
            adapter,
            outgoing: Outgoing {
                method: String::new(),
                url: String::new(),
                headers: Vec::new(),
                body: Arc::default(),
                timeout_ms: options.limits.timeout_ms,
                stream: request.stream,
                attempt: 1,
                parsed: None,
            },
            options,
            secrets,
            rng: Rng::new(seed),
            state: State::SendDue,
            events: VecDeque::new(),
            outcome: None,
            started_ms: None,
            last_error: None,
            fired_limit_ms: 0,
            attempt: None,
            wait_ends_ms: 0,
        };
        let formatted = formatted.and_then(|http| {
            if !(http.url.starts_with("https://") || http.url.starts_with("http://")) {
                return Err(Error::InvalidRequest {
                    message: "the request URL must be http or https".into(),
                });
            }
            let parsed = egress_url(&http.url, &call.options.egress)?;
            Ok((http.method, http.url, parsed, http.headers, http.body))
        });
        match formatted {
            Ok((method, url, parsed, headers, body)) => {
                call.outgoing.method = method;
                call.outgoing.url = url;
                call.outgoing.parsed = Some(Arc::new(parsed));
                call.outgoing.headers = headers;
                call.outgoing.body = Arc::new(body);
            }
            Err(error) => call.finish(Err(error)),
        }
        call
    }

    /// What the call needs at `now_ms` (milliseconds since the Unix epoch): a step, the answer
    /// it waits for, or its result.
    pub fn poll(&mut self, now_ms: u64) -> CallPoll {
        if let Some(out) = self.pending() {
            return out;
        }
        if let State::WaitUntil(at) = self.state {
            self.state = State::WaitDue(at.saturating_sub(now_ms));
        }
        if let (State::Receiving(receiving), Some((sent, timeout))) = (&self.state, self.attempt) {
            if now_ms.saturating_sub(sent) >= timeout {
                // The per-call timeout bounds the whole attempt, however its bytes come: a
                // stream of keep-alives ends here as a silent provider ends at the host's read.
                let accepted = receiving.decoder.is_some();
                self.state = State::Over;
                let error = Error::Timeout {
                    provider: self.provider.clone(),
                    timeout_ms: self.fired_limit_ms,
                };
                if accepted {
                    // A stream that was accepted is not sent again: its pieces are out.
                    self.finish(Err(error));
                } else {
                    self.fail(error, RetryHints::default());
                }
                if let Some(out) = self.pending() {
                    return out;
                }
            }
        }
        let deadline = self.options.limits.deadline_ms;
        let remaining = match self.started_ms {
            None => deadline,
            Some(started) => deadline.saturating_sub(now_ms.saturating_sub(started)),
        };
        let due = matches!(
            self.state,
            State::SendDue | State::Receiving(_) | State::WaitDue(_) | State::WaitUntil(_)
        );
        if due && remaining == 0 {
            // A retry that is due now has its own error to end with: the provider's.
            let error = match self.state {
                State::WaitDue(_) => self.last_error.take(),
                _ => None,
            };
            self.finish(Err(error.unwrap_or(Error::Timeout {
                provider: self.provider.clone(),
                timeout_ms: deadline,
            })));
            return self.pending().unwrap_or(CallPoll::Over);
        }
        match &self.state {
            State::SendDue => {
                self.started_ms.get_or_insert(now_ms);
                self.state = State::Sent;
                let mut outgoing = self.outgoing.clone();
                outgoing.timeout_ms = outgoing.timeout_ms.min(remaining);
                self.fired_limit_ms = if remaining < self.outgoing.timeout_ms {
                    deadline
                } else {
                    self.outgoing.timeout_ms
                };
                self.attempt = Some((now_ms, outgoing.timeout_ms));
                if self.retry.is_last(self.outgoing.attempt) {
                    // No attempt follows, so the call lets go of the body: a host that takes it
                    // (the portable driver) takes it without a copy.
                    outgoing.body = std::mem::take(&mut self.outgoing.body);
                }
                CallPoll::Step(CallStep::Send(outgoing))
            }
            State::Receiving(_) => CallPoll::Step(CallStep::Receive),
            State::WaitDue(ms) if *ms >= remaining => {
                // The wait would end past the deadline: give up now, with the last error.
                let error = match std::mem::replace(&mut self.state, State::Over) {
                    State::WaitDue(_) => self.last_error.take(),
                    _ => None,
                };
                self.finish(Err(error.unwrap_or(Error::Timeout {
                    provider: self.provider.clone(),
                    timeout_ms: deadline,
                })));
                self.pending().unwrap_or(CallPoll::Over)
            }
            State::WaitDue(ms) => {
                let ms = *ms;
                self.state = State::Waiting;
                self.wait_ends_ms = now_ms.saturating_add(ms);
                CallPoll::Step(CallStep::Wait(ms))
            }
            State::Sent | State::Waiting => CallPoll::Waiting,
            // Turned into `WaitDue` above; kept for the match to be whole.
            State::WaitUntil(_) => CallPoll::Waiting,
            State::Over => CallPoll::Over,
        }
    }

    /// What was produced and not yet handed out: the next piece of a stream, else the result.
    fn pending(&mut self) -> Option<CallPoll> {
        if let Some(event) = self.events.pop_front() {
            return Some(CallPoll::Step(CallStep::Event(event)));
        }
        self.outcome.take().map(CallPoll::Finished)
    }

    /// The instant (milliseconds since the Unix epoch) by which the answer the call waits for
    /// is due: while a request is out, the end of its attempt's timeout (the `timeout_ms` it
    /// was handed out with, which the transport holds the request to, answering with a timeout
    /// failure; a response still being read is ended by the first poll from that instant on);
    /// during a retry wait, the wait's end. Neither reaches past the call's deadline. `None`
    /// while neither is out (a step is ready, or the call is over). A host that waits for the
    /// transport with a timer of its own sets it to this instant.
    pub fn wake_at(&self) -> Option<u64> {
        match self.state {
            State::Sent | State::Receiving(_) => self
                .attempt
                .map(|(sent, timeout)| sent.saturating_add(timeout)),
            State::Waiting => Some(self.wait_ends_ms),
            _ => None,
        }
    }

    /// The attempt handed out last, from 1: while a retry wait is out, the one that failed.
    pub fn attempt(&self) -> u32 {
        self.outgoing.attempt
    }

    /// The most attempts the call's retry policy makes, the first included.
    pub fn max_attempts(&self) -> u32 {
        self.retry.max_attempts.clamp(1, crate::retry::MAX_ATTEMPTS)
    }

    /// Whether the call is waiting for an answer (a step was handed out and not answered).
    pub fn awaits_answer(&self) -> bool {
        self.events.is_empty() && matches!(self.state, State::Sent | State::Waiting)
    }

    /// Whether a streamed response was accepted: its head was a 2xx, and from now on its body
    /// is decoded as it arrives and never sent again.
    pub fn accepted(&self) -> bool {
        matches!(&self.state, State::Receiving(receiving) if receiving.decoder.is_some())
    }

    /// The name of the answer the call waits for, for error messages.
    pub fn expected(&self) -> &'static str {
        match self.state {
            State::Sent => "an HTTP response, a response head or a transport failure",
            State::Receiving(_) => "a body chunk, the end of the body or a transport failure",
            State::Waiting => "the end of the wait",
            _ => "no answer (poll for the next step)",
        }
    }

    /// Feeds the answer to the step handed out last; the call reads it with its own adapter.
    /// Fails with [`Error::Session`], changing nothing, when the answer does not fit the step
    /// (or comes while steps or the result wait to be polled): the answer is handed back in
    /// the [`Refused`].
    #[must_use = "an answer the call did not ask for is handed back, refused"]
    pub fn handle(&mut self, answer: CallAnswer) -> Result<(), Refused<CallAnswer>> {
        if !self.events.is_empty() || self.outcome.is_some() {
            return Err(self.refuse(answer));
        }
        match (std::mem::replace(&mut self.state, State::Over), answer) {
            (State::Sent, CallAnswer::Response(response)) => {
                if let Some(error) = self.encoded(response.status, &response.headers) {
                    self.refuse_encoded(response.status, &response.headers, error);
                    return Ok(());
                }
                // A whole response is a head, one chunk and the end.
                let receiving = self.receiving(response.status, response.headers);
                if let Some(receiving) = self.on_chunk(receiving, response.body) {
                    self.end_body(receiving);
                }
            }
            (State::Sent, CallAnswer::Head { status, headers }) => {
                if let Some(error) = self.encoded(status, &headers) {
                    self.refuse_encoded(status, &headers, error);
                    return Ok(());
                }
                let receiving = self.receiving(status, headers);
                self.state = State::Receiving(receiving);
            }
            (State::Receiving(receiving), CallAnswer::Chunk(bytes)) => {
                if let Some(receiving) = self.on_chunk(receiving, bytes) {
                    self.state = State::Receiving(receiving);
                }
            }
            (State::Receiving(receiving), CallAnswer::End) => self.end_body(receiving),
            (State::Sent, CallAnswer::Failure(failure)) => {
                let error = failure.into_error(&self.provider, self.fired_limit_ms);
                self.fail(error, RetryHints::default());
            }
            (State::Receiving(receiving), CallAnswer::Failure(failure)) => {
                let error = failure.into_error(&self.provider, self.fired_limit_ms);
                if receiving.decoder.is_some() {
                    // A stream that was accepted is not sent again: its pieces are out.
                    self.finish(Err(error));
                } else {
                    self.fail(error, RetryHints::default());
                }
            }
            (State::Waiting, CallAnswer::Waited) => {
                self.outgoing.attempt += 1;
                self.state = State::SendDue;
            }
            (state, answer) => {
                self.state = state;
                return Err(self.refuse(answer));
            }
        }
        Ok(())
    }

    fn refuse(&self, answer: CallAnswer) -> Refused<CallAnswer> {
        let given = match &answer {
            CallAnswer::Response(_) => "an HTTP response",
            CallAnswer::Head { .. } => "a response head",
            CallAnswer::Chunk(_) => "a body chunk",
            CallAnswer::End => "the end of a body",
            CallAnswer::Failure(_) => "a transport failure",
            CallAnswer::Waited => "the end of a wait",
        };
        let message = format!(
            "unexpected answer: got {given}, the call waits for {}",
            self.expected()
        );
        Refused::new(answer, message)
    }

    /// The error for a body in a content encoding other than `identity`, if it is one. Hosts
    /// ask for `identity` and nothing here inflates a body, so an encoded body could only be
    /// read as garbage, and inflating it would let a few kilobytes grow past any limit before
    /// a byte is counted. The encoding is named when it is a short token (never cut, so the
    /// redaction of a key echoed there leaves no prefix).
    fn encoded(&self, status: u16, headers: &[(String, String)]) -> Option<Error> {
        let value = headers
            .iter()
            .filter(|(name, _)| name.eq_ignore_ascii_case("content-encoding"))
            .map(|(_, value)| value.trim())
            .find(|value| !value.is_empty() && !value.eq_ignore_ascii_case("identity"))?;
        let named = value.len() <= 32 && value.bytes().all(|b| b.is_ascii_graphic() || b == b' ');
        Some(Error::Provider {
            provider: self.provider.clone(),
            status: Some(status),
            message: if named {
                format!("the response body is content-encoded ({value}); only identity is accepted")
            } else {
                "the response body is content-encoded; only identity is accepted".into()
            },
            code: None,
            error_type: None,
        })
    }

    /// Ends an attempt whose body is encoded, before any of it is read: a 2xx is not asked for
    /// again (the same provider would encode it again), any other status is retried as its
    /// status says.
    fn refuse_encoded(&mut self, status: u16, headers: &[(String, String)], error: Error) {
        if (200..300).contains(&status) {
            return self.finish(Err(error));
        }
        let hints = RetryHints {
            wait: crate::retry::requested_wait(headers),
            should_retry: None,
        };
        self.fail(error, hints);
    }

    fn receiving(&self, status: u16, headers: Vec<(String, String)>) -> Receiving {
        let headers = headers
            .into_iter()
            .map(|(name, value)| (name.to_ascii_lowercase(), value))
            .collect();
        let accepted = (200..300).contains(&status);
        Receiving {
            status,
            headers,
            body: Vec::new(),
            received: 0,
            decoder: (accepted && self.outgoing.stream)
                .then(|| self.adapter.stream_decoder(&self.context)),
        }
    }

    /// Takes the next bytes of the body: counts them against the limit, and decodes them when
    /// the response is an accepted stream. `None` when they ended the call (or its attempt).
    fn on_chunk(&mut self, mut receiving: Receiving, bytes: Vec<u8>) -> Option<Receiving> {
        receiving.received = receiving.received.saturating_add(bytes.len());
        let outcome = if receiving.received > self.options.limits.max_response_bytes {
            let error = Error::Provider {
                provider: self.provider.clone(),
                status: Some(receiving.status),
                message: format!(
                    "response body exceeds the limit of {} bytes",
                    self.options.limits.max_response_bytes
                ),
                code: None,
                error_type: None,
            };
            if (200..300).contains(&receiving.status) {
                // A completion too large to take would be as large the next time.
                self.finish(Err(error));
                return None;
            }
            Err(error)
        } else {
            match &mut receiving.decoder {
                Some(decoder) => decoder.feed(&bytes).map(|events| self.emit(events)),
                None => {
                    receiving.body.extend_from_slice(&bytes);
                    Ok(())
                }
            }
        };
        match outcome {
            // The stream's last event arrived with these bytes: the call is over.
            Ok(()) if self.outcome.is_some() => None,
            Ok(()) => Some(receiving),
            // A stream that was accepted is not sent again: its pieces are out.
            Err(error) if receiving.decoder.is_some() => {
                self.finish(Err(error));
                None
            }
            Err(error) => {
                self.fail(error, RetryHints::default());
                None
            }
        }
    }

    /// The body is complete: finish the stream, or classify and parse the whole response.
    fn end_body(&mut self, receiving: Receiving) {
        if let Some(mut decoder) = receiving.decoder {
            match decoder.finish() {
                Ok(events) => self.emit(events),
                Err(error) => return self.finish(Err(error)),
            }
            if self.outcome.is_none() {
                self.finish(Err(Error::Provider {
                    provider: self.provider.clone(),
                    status: None,
                    message: "the stream ended without a complete response".into(),
                    code: None,
                    error_type: None,
                }));
            }
            return;
        }
        let response = HttpResponse {
            status: receiving.status,
            headers: receiving.headers,
            body: receiving.body,
        };
        let secrets: Vec<&str> = self.secrets.iter().map(String::as_str).collect();
        let classified = classify_status(
            &self.provider,
            &response,
            &|headers, body| self.adapter.error_detail(headers, body),
            &secrets,
        );
        if let Err(failure) = classified {
            return self.fail(failure.error, failure.hints);
        }
        // A 2xx body that does not parse is an answer that was paid for: not asked again.
        let parsed = if self.count {
            self.adapter
                .parse_count(&response.body)
                .map(|count| LlmResponse {
                    id: String::new(),
                    content: Vec::new(),
                    model: self.context.model.clone(),
                    stop_reason: String::new(),
                    usage: crate::message::TokenUsage::new(count, 0),
                    stop_sequence: None,
                })
        } else {
            self.adapter.parse(&self.context, &response.body)
        };
        self.finish(parsed);
    }

    /// Queues the events of a stream; its `Done` ends the call, and nothing after it counts.
    fn emit(&mut self, events: Vec<StreamEvent>) {
        for event in events {
            match event {
                StreamEvent::Done(response) => return self.finish(Ok(response)),
                other => self.events.push_back(other),
            }
        }
    }

    /// A failed attempt: wait and try again when the policy says so, else end with the error.
    /// A wait the provider asked for is honoured however long it is; the next poll ends the
    /// call with this error instead if the wait would end past the deadline.
    fn fail(&mut self, error: Error, hints: RetryHints) {
        let until = match hints.wait {
            Some(RequestedWait::Until(at)) => Some(at),
            _ => None,
        };
        // A date is turned into a length at the next poll, which knows the time.
        let hints = match until {
            Some(_) => RetryHints {
                wait: Some(RequestedWait::After(0)),
                ..hints
            },
            None => hints,
        };
        let delay = self.retry.next_delay_ms(
            self.outgoing.attempt,
            &error,
            self.rng.next_unit(),
            hints,
            0,
        );
        match (delay, until) {
            (Some(_), Some(at)) => {
                self.state = State::WaitUntil(at);
                self.last_error = Some(error);
            }
            (Some(ms), None) => {
                self.state = State::WaitDue(ms);
                self.last_error = Some(error);
            }
            (None, _) => self.finish(Err(error)),
        }
    }

    /// Ends the call with `result`, handed out by the next poll after the pieces queued before
    /// it. The call ends once: a later result (none is made today) would change nothing.
    fn finish(&mut self, result: Result<LlmResponse, Error>) {
        if self.outcome.is_some() {
            return;
        }
        // A response past the size limits ends the call before the run does anything with it.
        let result = result.and_then(|response| {
            crate::limits::check_response(&self.provider, &response).map(|()| response)
        });
        let secrets: Vec<&str> = self.secrets.iter().map(String::as_str).collect();
        self.state = State::Over;
        self.outcome = Some(result.map_err(|error| error.redact(&secrets)));
    }
}

#[cfg(test)]
mod tests;
