//! The gateway on Fastly Compute (`oma_fastly.wasm`, `docs/deploy.md`): each request is one
//! request machine of the gateway's rules (`oma-gateway-rules`), stepped by their blocking loop
//! (`serve`) over Fastly's `fastly:compute/service` world instead of `wasi:http/proxy`. Nothing
//! is decided here: this file only moves bytes between Fastly's hostcalls and the machine.
//!
//! - The request and the response: Fastly's `http-incoming.handle` export, `http-req`,
//!   `http-body` and `http-resp` (`send-downstream`, and `send-downstream-streaming` for
//!   server-sent events).
//! - The provider calls (`FastlyIo`, a `Transport` of the one step loop): one dynamic
//!   backend per origin (`backend.register-dynamic-backend`), sent uncached with the call's
//!   timeouts.
//! - The configuration: Fastly has no environment for a service, so each variable the gateway
//!   reads (`variable_names`) is looked up in the secret store `oma_gateway_secrets`, then in
//!   the config store `oma_gateway`, and what is found goes through the same
//!   `Settings::from_vars` as the environment of the wasi:http gateway.
//!
//! Built for wasm32 only: natively the crate is empty, so the workspace builds everywhere.

// Natively the crate is empty, so the crate docs' links to its wasm32 items cannot resolve
// there; `cargo doc --target wasm32-unknown-unknown` resolves them.
#![cfg_attr(not(target_arch = "wasm32"), allow(rustdoc::broken_intra_doc_links))]
#![cfg(target_arch = "wasm32")]
#![deny(missing_docs)]

use std::collections::HashMap;

use bindings::exports::fastly::compute::http_incoming::Guest;
use bindings::fastly::compute::async_io;
use bindings::fastly::compute::backend::{self, Backend, DynamicBackendOptions};
use bindings::fastly::compute::config_store;
use bindings::fastly::compute::http_body::{self, Body};
use bindings::fastly::compute::http_req::{self, Request, SendErrorDetail};
use bindings::fastly::compute::http_resp::{self, Response};
use bindings::fastly::compute::secret_store;
use bindings::fastly::compute::types::Error as FastlyError;
use bindings::wasi;

use oma_core::http::call::{CallAnswer, Outgoing};
use oma_core::http::{TransportFailure, TransportFailureKind as Kind};
use oma_gateway_rules::env::{variable_names, BadVariable, PROVIDERS_VARIABLE};
use oma_gateway_rules::request::{BodyFailure, BodyLimits, RequestHead, RequestMachine};
use oma_gateway_rules::serve::{serve, Exchange};
use oma_gateway_rules::{Reply, Settings};
use oma_step::Transport;

/// Fastly's `service` world (`wit/world.wit`), bound: only what the layer calls is imported by
/// the component.
mod bindings {
    wit_bindgen::generate!({
        world: "oma:fastly/gateway",
        path: "wit",
        generate_all,
    });
}

/// The config store the gateway's settings are read from.
pub const CONFIG_STORE: &str = "oma_gateway";
/// The secret store read before it (keys and tokens belong there).
pub const SECRET_STORE: &str = "oma_gateway_secrets";

/// How much of a body is read at a time.
const READ_CHUNK: u32 = 64 * 1024;
/// The longest header value or configuration value read.
const MAX_VALUE: u64 = 1 << 20;

/// The gateway's export.
struct Gateway;

bindings::export!(Gateway with_types_in bindings);

impl Guest for Gateway {
    fn handle(request: Request, body: Body) -> Result<(), ()> {
        let uri = request.get_uri(MAX_VALUE).unwrap_or_default();
        let head = RequestHead {
            method: request.get_method(1024).unwrap_or_default(),
            path: path_of(&uri),
            headers: request_headers(&request),
        };
        let machine = RequestMachine::new(
            settings(),
            head,
            now_ms(),
            wasi::random::random::get_random_u64(),
        );
        let mut exchange = FastlyExchange {
            body: Some(body),
            events: None,
        };
        serve(machine, &mut exchange);
        Ok(())
    }
}

/// A request's headers: every name (lowercase), with its first value.
fn request_headers(request: &Request) -> Vec<(String, String)> {
    header_list(
        |cursor| request.get_header_names(MAX_VALUE, cursor).ok(),
        |name| request.get_header_value(name, MAX_VALUE).ok().flatten(),
    )
}

/// The path and query of a request's URI (Fastly gives the whole URL).
fn path_of(uri: &str) -> String {
    match url::Url::parse(uri) {
        Ok(url) => match url.query() {
            Some(query) => format!("{}?{query}", url.path()),
            None => url.path().to_owned(),
        },
        Err(_) => uri.to_owned(),
    }
}

/// The gateway's settings from the stores: each variable it reads, from the secret store if it
/// is there, else from the config store; a store that does not exist holds nothing.
fn settings() -> Result<Settings, BadVariable> {
    let secrets = secret_store::Store::open(SECRET_STORE).ok();
    let config = config_store::Store::open(CONFIG_STORE).ok();
    let lookup = |name: &str| -> Option<String> {
        let secret = secrets
            .as_ref()
            .and_then(|store| store.get(name).ok().flatten())
            .and_then(|secret| secret.plaintext(MAX_VALUE).ok())
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned());
        secret.or_else(|| {
            config
                .as_ref()
                .and_then(|store| store.get(name, MAX_VALUE).ok().flatten())
        })
    };
    let providers = lookup(PROVIDERS_VARIABLE);
    let vars: Vec<(String, String)> = variable_names(providers.as_deref())
        .into_iter()
        .filter_map(|name| lookup(&name).map(|value| (name, value)))
        .collect();
    Settings::from_vars(vars)
}

/// One request's body on Fastly until it is read, and its response: the body of a stream of
/// events once one is open.
struct FastlyExchange {
    body: Option<Body>,
    events: Option<Body>,
}

impl Exchange for FastlyExchange {
    type Transport = FastlyIo;

    fn read_body(&mut self, limits: &BodyLimits) -> Result<Vec<u8>, BodyFailure> {
        let body = self
            .body
            .take()
            .ok_or_else(|| BodyFailure::Broken("the body was already taken".into()))?;
        let expected = limits.declared.unwrap_or(0).min(limits.max_bytes);
        let mut bytes = Vec::with_capacity(usize::try_from(expected).unwrap_or(0));
        loop {
            let left = limits.deadline_at_ms.saturating_sub(now_ms());
            let wait = u32::try_from(left).unwrap_or(u32::MAX);
            if left == 0 || async_io::select_with_timeout(&[&body], wait).is_none() {
                return Err(BodyFailure::TimedOut);
            }
            match http_body::read(&body, READ_CHUNK) {
                Ok(chunk) if chunk.is_empty() => break,
                Ok(chunk) => {
                    if bytes.len() as u64 + chunk.len() as u64 > limits.max_bytes {
                        return Err(BodyFailure::TooLarge);
                    }
                    bytes.extend_from_slice(&chunk);
                }
                Err(_) => return Err(BodyFailure::Broken("the connection failed".into())),
            }
        }
        let _ = http_body::close(body);
        Ok(bytes)
    }

    fn respond(&mut self, reply: &Reply) {
        let Some(response) = response_head(reply.status, &reply.all_headers()) else {
            return;
        };
        let Ok(body) = http_body::new() else {
            return;
        };
        // A response the platform cannot take leaves it to answer for us; nothing more can be
        // said to the caller.
        if write_all(&body, reply.body.as_bytes()) {
            let _ = http_resp::send_downstream(response, body);
        }
    }

    fn open_events(&mut self) -> bool {
        let headers = oma_gateway_rules::STREAM_HEADERS
            .map(|(name, value)| (name.to_owned(), value.to_owned()));
        let Some(response) = response_head(200, &headers) else {
            return false;
        };
        let Ok(body) = http_body::new() else {
            return false;
        };
        if http_resp::send_downstream_streaming(response, &body).is_err() {
            return false;
        }
        self.events = Some(body);
        true
    }

    fn write_events(&mut self, bytes: &[u8]) -> bool {
        self.events
            .as_ref()
            .is_some_and(|body| write_all(body, bytes))
    }

    fn close_events(&mut self) {
        if let Some(body) = self.events.take() {
            let _ = http_body::close(body);
        }
    }

    fn transport(&mut self) -> FastlyIo {
        FastlyIo::default()
    }

    fn log(&mut self, line: &str) {
        let _ = wasi::cli::stderr::get_stderr().blocking_write_and_flush(line.as_bytes());
    }
}

/// A response head with `status` and `headers`; `None` when the platform refuses it.
fn response_head(status: u16, headers: &[(String, String)]) -> Option<Response> {
    let response = Response::new().ok()?;
    response.set_status(status).ok()?;
    for (name, value) in headers {
        response.insert_header(name, value.as_bytes()).ok()?;
    }
    Some(response)
}

/// Writes all of `bytes` to `body`; false when the body is closed (the reader went away).
fn write_all(body: &Body, bytes: &[u8]) -> bool {
    let mut rest = bytes;
    while !rest.is_empty() {
        match http_body::write(body, rest) {
            Ok(0) | Err(_) => return false,
            Ok(n) => rest = &rest[(n as usize).min(rest.len())..],
        }
    }
    true
}

/// The HTTP of a run on Fastly: each request to a provider through a dynamic backend for its
/// origin (registered once per origin and request), sent uncached; the response body read chunk
/// by chunk within the call's timeout.
#[derive(Default)]
pub struct FastlyIo {
    backends: HashMap<String, Backend>,
    body: Option<Body>,
    /// The timeout of the request in flight, between two chunks of its body.
    timeout_ms: u64,
}

impl FastlyIo {
    /// The backend for `url`'s origin, registered on first use with the call's timeouts.
    fn backend(&mut self, url: &url::Url, timeout_ms: u32) -> Result<&Backend, TransportFailure> {
        let fail = |message: &str| TransportFailure::new(Kind::Other, message);
        let tls = match url.scheme() {
            "https" => true,
            "http" => false,
            _ => return Err(fail("the request URL is neither http nor https")),
        };
        let host = url
            .host_str()
            .ok_or_else(|| fail("the request URL has no host"))?;
        let port = url
            .port_or_known_default()
            .ok_or_else(|| fail("the request URL has no port"))?;
        let origin = url.origin().ascii_serialization();
        if !self.backends.contains_key(&origin) {
            let options = DynamicBackendOptions::new();
            options.connect_timeout(timeout_ms);
            options.first_byte_timeout(timeout_ms);
            options.between_bytes_timeout(timeout_ms);
            options.use_tls(tls);
            options.override_host(host);
            if tls {
                options.cert_hostname(host);
                options.sni_hostname(host);
            }
            // Backend names are the service's to choose and must be unique in the sandbox.
            let name = format!("oma-{}", self.backends.len());
            let registered =
                backend::register_dynamic_backend(&name, &format!("{host}:{port}"), options)
                    .map_err(|e| match e {
                        FastlyError::Unsupported => TransportFailure::new(
                            Kind::Denied,
                            "dynamic backends are not enabled for this Fastly service",
                        ),
                        other => fail(&format!("the backend could not be registered: {other:?}")),
                    })?;
            self.backends.insert(origin.clone(), registered);
        }
        self.backends
            .get(&origin)
            .ok_or_else(|| fail("the backend was lost"))
    }

    fn start(&mut self, outgoing: &Outgoing) -> Result<CallAnswer, TransportFailure> {
        let fail = |message: &str| TransportFailure::new(Kind::Other, message);
        // Parsed once: by the egress check of a provider call, here for a request made elsewhere.
        let parsed_here;
        let url = match &outgoing.parsed {
            Some(url) => url.as_ref(),
            None => {
                parsed_here = url::Url::parse(&outgoing.url)
                    .map_err(|_| fail("the request URL does not parse"))?;
                &parsed_here
            }
        };
        let timeout = u32::try_from(outgoing.timeout_ms).unwrap_or(u32::MAX);
        self.timeout_ms = outgoing.timeout_ms;
        let request = Request::new().map_err(|_| fail("no request could be made"))?;
        request
            .set_method(&outgoing.method)
            .map_err(|_| fail("invalid request method"))?;
        request
            .set_uri(url.as_str())
            .map_err(|_| fail("invalid request URL"))?;
        for (name, value) in &outgoing.headers {
            request
                .append_header(name, value.as_bytes())
                .map_err(|_| fail("invalid request header"))?;
        }
        let body = http_body::new().map_err(|_| fail("no request body could be made"))?;
        if !write_all(&body, outgoing.body.as_bytes()) {
            return Err(fail("the request body could not be written"));
        }
        let backend = self.backend(url, timeout)?;
        let (response, body) =
            http_req::send_uncached(request, body, backend).map_err(|e| failure_of(&e))?;
        let status = response.get_status().unwrap_or(0);
        let headers = response_headers(&response);
        self.body = Some(body);
        Ok(CallAnswer::Head { status, headers })
    }
}

impl Transport for FastlyIo {
    fn send(&mut self, outgoing: &Outgoing) -> CallAnswer {
        self.body = None;
        match self.start(outgoing) {
            Ok(answer) => answer,
            Err(failure) => CallAnswer::Failure(failure),
        }
    }

    fn receive(&mut self) -> CallAnswer {
        let Some(body) = self.body.as_ref() else {
            return CallAnswer::End;
        };
        let wait = u32::try_from(self.timeout_ms).unwrap_or(u32::MAX);
        let answer = if async_io::select_with_timeout(&[body], wait).is_none() {
            CallAnswer::Failure(TransportFailure::new(
                Kind::TimedOut,
                "the response body stopped arriving",
            ))
        } else {
            match http_body::read(body, READ_CHUNK) {
                Ok(chunk) if chunk.is_empty() => CallAnswer::End,
                Ok(chunk) => return CallAnswer::Chunk(chunk),
                Err(FastlyError::HttpIncomplete) => CallAnswer::Failure(TransportFailure::new(
                    Kind::Reset,
                    "the response body was cut off",
                )),
                Err(other) => CallAnswer::Failure(TransportFailure::new(
                    Kind::Other,
                    &format!("the response body could not be read: {other:?}"),
                )),
            }
        };
        self.body = None;
        answer
    }

    fn wait(&mut self, ms: u64) -> CallAnswer {
        wasi::clocks::monotonic_clock::subscribe_duration(ms.saturating_mul(1_000_000)).block();
        CallAnswer::Waited
    }

    fn now_ms(&self) -> u64 {
        now_ms()
    }
}

/// A response's headers: every name (lowercase), with its first value.
fn response_headers(response: &Response) -> Vec<(String, String)> {
    header_list(
        |cursor| response.get_header_names(MAX_VALUE, cursor).ok(),
        |name| response.get_header_value(name, MAX_VALUE).ok().flatten(),
    )
}

/// Every header name (lowercase) with its first value, from Fastly's paged list of names
/// (`names(cursor)`: NUL-separated names and the cursor of the next page) and `value(name)`.
fn header_list(
    names: impl Fn(u32) -> Option<(String, Option<u32>)>,
    value: impl Fn(&str) -> Option<Vec<u8>>,
) -> Vec<(String, String)> {
    let mut all = Vec::new();
    let mut cursor = 0;
    while let Some((list, next)) = names(cursor) {
        all.extend(
            list.split('\0')
                .filter(|name| !name.is_empty())
                .map(str::to_owned),
        );
        match next {
            Some(next) if next > cursor => cursor = next,
            _ => break,
        }
    }
    all.into_iter()
        .filter_map(|name| {
            let value = value(&name)?;
            Some((
                name.to_ascii_lowercase(),
                String::from_utf8_lossy(&value).into_owned(),
            ))
        })
        .collect()
}

/// A failed send as a [`TransportFailure`].
fn failure_of(error: &http_req::ErrorWithDetail) -> TransportFailure {
    let kind = match &error.detail {
        Some(
            SendErrorDetail::ConnectionTimeout
            | SendErrorDetail::HttpResponseTimeout
            | SendErrorDetail::DnsTimeout,
        ) => Kind::TimedOut,
        Some(SendErrorDetail::ConnectionRefused) => Kind::Refused,
        Some(SendErrorDetail::ConnectionTerminated | SendErrorDetail::HttpIncompleteResponse) => {
            Kind::Reset
        }
        Some(detail) => return TransportFailure::new(Kind::Other, &format!("{detail:?}")),
        None => {
            return TransportFailure::new(Kind::Other, &format!("{:?}", error.error));
        }
    };
    TransportFailure::new(kind, "")
}

/// Milliseconds since the Unix epoch, from the wall clock.
fn now_ms() -> u64 {
    let now = wasi::clocks::wall_clock::now();
    now.seconds
        .saturating_mul(1000)
        .saturating_add(u64::from(now.nanoseconds / 1_000_000))
}
