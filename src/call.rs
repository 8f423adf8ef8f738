//! One provider call, driven end to end: format, check egress, send, classify, parse, and
//! retry what may be retried (`behaviour.md` §6.3, §6.5).
//!
//! Everything that decides is pure and tested natively (adapters, [`check_egress`],
//! [`classify_status`], [`RetryPolicy`]); this module only strings those decisions around the
//! transport, so it is built for wasm32 alone, and tested through the component.

use std::collections::VecDeque;

use crate::adapter::{Adapter, ChatRequest, Endpoint, StreamDecoder, StreamEvent};
use crate::agent::retry::RetryPolicy;
use crate::error::Error;
use crate::message::LlmResponse;
use crate::transport::{
    self, check_egress, classify_status, EgressPolicy, Failure, Incoming, Limits,
};

/// How a call is bounded and retried.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CallOptions {
    /// When to try again.
    pub retry: RetryPolicy,
    /// Timeouts and size limits.
    pub limits: Limits,
    /// Where requests may go.
    pub egress: EgressPolicy,
}

/// Sends one chat turn and parses the answer, retrying retryable failures.
pub fn chat(
    adapter: &dyn Adapter,
    request: &ChatRequest,
    endpoint: &Endpoint,
    options: &CallOptions,
) -> Result<LlmResponse, Error> {
    let http = adapter.format(request, endpoint)?;
    check_egress(&http.url, &options.egress)?;
    with_retry(&options.retry, || {
        let response = transport::send(adapter.name(), &http, &options.limits)?;
        classify_status(adapter.name(), &response, &|body| {
            adapter.error_message(body)
        })?;
        Ok(adapter.parse(request, &response.body)?)
    })
    .map_err(|error| error.redact(&endpoint.secrets()))
}

/// Starts a streamed chat turn; retries happen only before the response head is accepted.
/// The request must have its `stream` flag set (the caller owns it, and copying it to set the
/// flag here would copy its media, which may be many megabytes).
pub fn chat_stream(
    adapter: &dyn Adapter,
    request: &ChatRequest,
    endpoint: &Endpoint,
    options: &CallOptions,
) -> Result<ChatStream, Error> {
    if !request.stream {
        return Err(Error::InvalidRequest {
            message: "a streamed call needs a request with `stream` set".into(),
        });
    }
    let http = adapter.format(request, endpoint)?;
    check_egress(&http.url, &options.egress)?;
    let incoming = with_retry(&options.retry, || {
        let incoming = transport::start(adapter.name(), &http, &options.limits)?;
        if (200..300).contains(&incoming.head.status) {
            return Ok(incoming);
        }
        let response = incoming.read_to_end()?;
        classify_status(adapter.name(), &response, &|body| {
            adapter.error_message(body)
        })?;
        Err(Failure::from(Error::Provider {
            provider: adapter.name().to_string(),
            status: Some(response.status),
            message: "unexpected status".into(),
        }))
    })
    .map_err(|error| error.redact(&endpoint.secrets()))?;
    Ok(ChatStream {
        incoming,
        decoder: adapter.stream_decoder(request),
        pending: VecDeque::new(),
        finished: false,
        secrets: endpoint.secrets().into_iter().map(str::to_owned).collect(),
    })
}

fn with_retry<T>(
    policy: &RetryPolicy,
    mut attempt: impl FnMut() -> Result<T, Failure>,
) -> Result<T, Error> {
    let mut number = 1;
    loop {
        match attempt() {
            Ok(value) => return Ok(value),
            Err(failure) => {
                match policy.next_delay_ms(
                    number,
                    &failure.error,
                    transport::random_unit(),
                    failure.retry_after_ms,
                ) {
                    Some(delay) => transport::pause(delay),
                    None => return Err(failure.error),
                }
                number += 1;
            }
        }
    }
}

/// A streamed turn in flight: events come out as the provider's bytes arrive.
pub struct ChatStream {
    incoming: Incoming,
    decoder: Box<dyn StreamDecoder>,
    pending: VecDeque<StreamEvent>,
    finished: bool,
    /// The endpoint's secrets, kept out of the errors of the stream (a provider may echo them).
    secrets: Vec<String>,
}

impl ChatStream {
    /// The next event, `None` after the last; after an error, `None` too.
    pub fn next_event(&mut self) -> Result<Option<StreamEvent>, Error> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Ok(Some(event));
            }
            if self.finished {
                return Ok(None);
            }
            let step = match self.incoming.next_chunk() {
                Ok(Some(bytes)) => self.decoder.feed(&bytes),
                Ok(None) => {
                    self.finished = true;
                    self.decoder.finish()
                }
                Err(error) => Err(error),
            };
            match step {
                Ok(events) => self.pending.extend(events),
                Err(error) => {
                    self.finished = true;
                    let secrets: Vec<&str> = self.secrets.iter().map(String::as_str).collect();
                    return Err(error.redact(&secrets));
                }
            }
        }
    }
}
