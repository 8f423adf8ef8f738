//! wasi:http: the only code of the guest that touches the network, shared by the worlds that do
//! their own I/O, `component` (`oma-component`) and `gateway` (`oma-gateway`).
//!
//! It performs what a [`Call`](oma_core::http::call::Call) asks for, on the synchronous
//! wasi:http and wasi:io calls: a response body can stay in flight between two exported calls (a
//! stream's `next`), which an async runtime scoped to one call cannot offer. Failures are
//! reported as [`TransportFailure`]s; deciding what they mean (timeout, retry, egress) is the
//! call's job.
//!
//! [`HttpIo`] is the [`Transport`] of the step loop (`oma-step`, re-exported here for the worlds
//! that use both); [`run_of`] makes a run on it. The crate is wasm32 only (natively it is empty,
//! so that the workspace builds everywhere): a layer without wasi:http (Fastly's) depends on
//! `oma-step` alone instead of leaving a feature out here.

// Natively the crate is empty, so the crate docs' links to its wasm32 items cannot resolve
// there; `cargo doc --target wasm32-unknown-unknown` resolves them.
#![cfg_attr(not(target_arch = "wasm32"), allow(rustdoc::broken_intra_doc_links))]
#![cfg(target_arch = "wasm32")]
#![deny(missing_docs)]

pub use oma_step::{Next, StepHost, Transport, WasiRun};

use oma_core::agent::machine::RunMachine;

use wasip2::http::outgoing_handler;
use wasip2::http::types::{
    ErrorCode, Fields, IncomingBody, Method, OutgoingBody, OutgoingRequest, RequestOptions, Scheme,
};
use wasip2::io::streams::{InputStream, OutputStream, StreamError};

use oma_core::adapter::StreamEvent;
use oma_core::error::Error;
use oma_core::http::call::{Call, CallAnswer, CallPoll, CallStep, Outgoing};
use oma_core::http::{TransportFailure, TransportFailureKind as Kind};
use oma_core::message::LlmResponse;

const READ_CHUNK: u64 = 64 * 1024;

/// A response whose head has arrived and whose body is read chunk by chunk.
pub struct Incoming {
    // Field order is drop order: the stream must go before the body it belongs to.
    stream: InputStream,
    _body: IncomingBody,
    done: bool,
}

impl Incoming {
    /// The next chunk of the body, `None` at its end. Blocks until bytes arrive.
    pub fn next_chunk(&mut self) -> Result<Option<Vec<u8>>, TransportFailure> {
        if self.done {
            return Ok(None);
        }
        match self.stream.blocking_read(READ_CHUNK) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(StreamError::Closed) => {
                self.done = true;
                Ok(None)
            }
            Err(StreamError::LastOperationFailed(e)) => {
                self.done = true;
                let code = wasip2::http::types::http_error_code(&e);
                Err(failure_of(code, &e.to_debug_string()))
            }
        }
    }
}

/// A response head: status, headers (names lowercase), and the body still to read.
pub struct Head {
    /// The status code.
    pub status: u16,
    /// Header names (lowercase) and values.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Incoming,
}

/// Sends a request and waits for the response head. Redirects are not followed.
pub fn start(request: &Outgoing) -> Result<Head, TransportFailure> {
    let fail = |message: &str| TransportFailure::new(Kind::Other, message);
    // Parsed once: by the egress check of a provider call, here for a request made elsewhere.
    let parsed_here;
    let url = match &request.parsed {
        Some(url) => url.as_ref(),
        None => {
            parsed_here = url::Url::parse(&request.url)
                .map_err(|_| fail("the request URL does not parse"))?;
            &parsed_here
        }
    };
    let mut entries: Vec<(String, Vec<u8>)> = request
        .headers
        .iter()
        .map(|(n, v)| (n.clone(), v.as_bytes().to_vec()))
        .collect();
    entries.push((
        "content-length".into(),
        request.body.len().to_string().into_bytes(),
    ));
    let headers = Fields::from_list(&entries).map_err(|_| fail("invalid request header"))?;
    let outgoing = OutgoingRequest::new(headers);
    let method = match request.method.as_str() {
        "GET" => Method::Get,
        "POST" => Method::Post,
        other => Method::Other(other.to_string()),
    };
    let scheme = match url.scheme() {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        other => Scheme::Other(other.to_string()),
    };
    let authority = match url.port() {
        Some(port) => format!("{}:{port}", url.host_str().unwrap_or_default()),
        None => url.host_str().unwrap_or_default().to_string(),
    };
    let path = match url.query() {
        Some(query) => format!("{}?{query}", url.path()),
        None => url.path().to_string(),
    };
    let set = |ok: Result<(), ()>, what: &str| ok.map_err(|()| fail(what));
    set(outgoing.set_method(&method), "invalid request method")?;
    set(outgoing.set_scheme(Some(&scheme)), "invalid request scheme")?;
    set(
        outgoing.set_authority(Some(&authority)),
        "invalid request authority",
    )?;
    set(
        outgoing.set_path_with_query(Some(&path)),
        "invalid request path",
    )?;
    let body = outgoing
        .body()
        .map_err(|()| fail("request body taken twice"))?;

    let options = RequestOptions::new();
    let nanos = request.timeout_ms.saturating_mul(1_000_000);
    // A host that does not support a timeout keeps its own; that is not an error.
    let _ = options.set_connect_timeout(Some(nanos));
    let _ = options.set_first_byte_timeout(Some(nanos));
    let _ = options.set_between_bytes_timeout(Some(nanos));

    let future = outgoing_handler::handle(outgoing, Some(options))
        .map_err(|code| failure_of(Some(code), ""))?;
    // The host reads the body while we write it; a write failure means the request failed,
    // and the response future says why.
    write_body(body, request.body.as_bytes());
    future.subscribe().block();
    let response = match future.get() {
        Some(Ok(Ok(response))) => response,
        Some(Ok(Err(code))) => return Err(failure_of(Some(code), "")),
        _ => return Err(TransportFailure::new(Kind::Reset, "the response was lost")),
    };
    let status = response.status();
    let headers = response
        .headers()
        .entries()
        .into_iter()
        .map(|(n, v)| {
            (
                n.to_ascii_lowercase(),
                String::from_utf8_lossy(&v).into_owned(),
            )
        })
        .collect();
    let body = response
        .consume()
        .map_err(|()| fail("response body taken twice"))?;
    let stream = body
        .stream()
        .map_err(|()| fail("response body stream taken twice"))?;
    Ok(Head {
        status,
        headers,
        body: Incoming {
            stream,
            _body: body,
            done: false,
        },
    })
}

fn write_body(body: OutgoingBody, bytes: &[u8]) {
    if let Ok(out) = body.write() {
        // A failure shows in the response future, which says why.
        let _ = write_all(&out, bytes);
    }
    let _ = OutgoingBody::finish(body, None);
}

/// Writes all of `bytes` to `out` as fast as it accepts them, then flushes. Fails when the
/// stream is closed or broken (the reader went away).
pub fn write_all(out: &OutputStream, bytes: &[u8]) -> Result<(), StreamError> {
    let mut rest = bytes;
    while !rest.is_empty() {
        // Waited for only when the stream has no room: a pollable made, waited on and dropped
        // are three calls into the host, and a stream that has just been opened has room.
        let mut permit = out.check_write()?;
        if permit == 0 {
            out.subscribe().block();
            permit = out.check_write()?;
        }
        let n = usize::try_from(permit)
            .unwrap_or(usize::MAX)
            .min(rest.len());
        if n == 0 {
            continue;
        }
        out.write(&rest[..n])?;
        rest = &rest[n..];
    }
    out.blocking_flush()
}

/// Sleeps for `ms` milliseconds (between retries).
pub fn pause(ms: u64) {
    wasip2::clocks::monotonic_clock::subscribe_duration(ms.saturating_mul(1_000_000)).block();
}

/// A random 64-bit number from the host.
pub fn random_u64() -> u64 {
    wasip2::random::random::get_random_u64()
}

/// Milliseconds since the Unix epoch, from the host's wall clock.
pub fn now_ms() -> u64 {
    let now = wasip2::clocks::wall_clock::now();
    now.seconds
        .saturating_mul(1000)
        .saturating_add(u64::from(now.nanoseconds / 1_000_000))
}

/// A wasi-http failure as a [`TransportFailure`].
fn failure_of(code: Option<ErrorCode>, detail: &str) -> TransportFailure {
    let kind = match code {
        Some(
            ErrorCode::ConnectionTimeout
            | ErrorCode::ConnectionReadTimeout
            | ErrorCode::ConnectionWriteTimeout
            | ErrorCode::HttpResponseTimeout,
        ) => Kind::TimedOut,
        Some(ErrorCode::HttpRequestDenied) => Kind::Denied,
        Some(ErrorCode::ConnectionRefused) => Kind::Refused,
        Some(ErrorCode::ConnectionTerminated | ErrorCode::HttpResponseIncomplete) => Kind::Reset,
        Some(code) => return TransportFailure::new(Kind::Other, &format!("{code:?}")),
        None => return TransportFailure::from_text(detail),
    };
    TransportFailure::new(kind, detail)
}

/// The HTTP of one call in flight: performs `Send`, `Receive` and `Wait` steps and gives the
/// answers a [`Call`] (or a run machine) takes.
#[derive(Default)]
pub struct HttpIo {
    body: Option<Incoming>,
}

impl HttpIo {
    /// Sends a request and answers with its head (the body is read by [`HttpIo::receive`]) or
    /// the failure.
    pub fn send(&mut self, outgoing: &Outgoing) -> CallAnswer {
        self.body = None;
        match start(outgoing) {
            Ok(head) => {
                self.body = Some(head.body);
                CallAnswer::Head {
                    status: head.status,
                    headers: head.headers,
                }
            }
            Err(failure) => CallAnswer::Failure(failure),
        }
    }

    /// Reads the next chunk of the body in flight.
    pub fn receive(&mut self) -> CallAnswer {
        match self.body.as_mut().map(Incoming::next_chunk) {
            Some(Ok(Some(bytes))) => CallAnswer::Chunk(bytes),
            Some(Ok(None)) | None => {
                self.body = None;
                CallAnswer::End
            }
            Some(Err(failure)) => {
                self.body = None;
                CallAnswer::Failure(failure)
            }
        }
    }

    /// Waits `ms` milliseconds.
    pub fn wait(ms: u64) -> CallAnswer {
        pause(ms);
        CallAnswer::Waited
    }

    /// Performs the next step of `call` and feeds it the answer; returns what the call gives
    /// out (a piece of a stream, or its result), `None` when it has more to do.
    pub fn step(&mut self, call: &mut Call) -> Option<CallEvent> {
        let answer = match call.poll(now_ms()) {
            CallPoll::Step(CallStep::Send(outgoing)) => self.send(&outgoing),
            CallPoll::Step(CallStep::Receive) => self.receive(),
            CallPoll::Step(CallStep::Wait(ms)) => HttpIo::wait(ms),
            CallPoll::Step(CallStep::Event(event)) => return Some(CallEvent::Event(event)),
            CallPoll::Finished(result) => return Some(CallEvent::Done(result)),
            // Every step is answered at once, so neither comes; should one, the call ends.
            CallPoll::Waiting | CallPoll::Over => {
                return Some(CallEvent::Done(Err(Error::Session {
                    message: "the call stalled".into(),
                })))
            }
        };
        // The call asked for exactly this answer, so it cannot refuse it; should it ever, the
        // refusal ends the call rather than looping.
        match call.handle(answer) {
            Ok(()) => None,
            Err(refused) => Some(CallEvent::Done(Err(refused.reason))),
        }
    }
}

/// What a driven call gives out.
pub enum CallEvent {
    /// A piece of a streamed answer.
    Event(StreamEvent),
    /// The call is over.
    Done(Result<LlmResponse, Error>),
}

/// A run of `machine` over wasi:http, nothing done yet.
pub fn run_of(machine: RunMachine) -> WasiRun<HttpIo> {
    WasiRun::with_transport(machine, HttpIo::default())
}

impl Transport for HttpIo {
    fn send(&mut self, outgoing: &Outgoing) -> CallAnswer {
        HttpIo::send(self, outgoing)
    }

    fn receive(&mut self) -> CallAnswer {
        HttpIo::receive(self)
    }

    fn wait(&mut self, ms: u64) -> CallAnswer {
        HttpIo::wait(ms)
    }

    fn now_ms(&self) -> u64 {
        now_ms()
    }
}
