//! The wasi:http side of the gateway: `wasi:http/incoming-handler`. Each request is one
//! [`RequestMachine`] of the gateway's rules (`oma-gateway-rules`), stepped to its end by their
//! blocking loop ([`serve`]) with what this file gives it: the request (its head, then its body
//! within the limits the machine says), the response (whole, or as server-sent events while the
//! run goes on), `wasi:keyvalue` for the per-token limits, stderr for the log lines, and
//! wasi:http for the provider calls and the trace export ([`HttpIo`], the transport the
//! `component` world uses too). Nothing is decided here; the Fastly layer (`crates/fastly`)
//! serves the same way over Fastly's hostcalls.

use exports::wasi::http::incoming_handler::Guest;
use wasip2::http::types::{
    Fields, IncomingBody, IncomingRequest, Method, OutgoingBody, OutgoingResponse, ResponseOutparam,
};
use wasip2::io::streams::{InputStream, OutputStream, StreamError};

use oma_gateway_rules::request::{
    BodyFailure, BodyLimits, CountOps, ForgetOps, RequestHead, RequestMachine,
};
use oma_gateway_rules::serve::{serve, Exchange};
use oma_gateway_rules::{Reply, Settings, STREAM_HEADERS};
use oma_wasi::HttpIo;

// The world `gateway` of `wit/world.wit`, bound here so that the component's type is that
// world: its WASI 0.2.12 imports are the `wasip2` crate's bindings (which `oma-wasi` and this
// file call); the `incoming-handler` export and the `wasi:keyvalue` imports (which `wasip2`
// does not bind) are generated.
wit_bindgen::generate!({
    world: "gateway",
    path: "../../wit",
    with: {
        "wasi:cli/environment@0.2.12": wasip2::cli::environment,
        "wasi:cli/stderr@0.2.12": wasip2::cli::stderr,
        "wasi:http/outgoing-handler@0.2.12": wasip2::http::outgoing_handler,
        "wasi:http/types@0.2.12": wasip2::http::types,
        "wasi:io/error@0.2.12": wasip2::io::error,
        "wasi:io/poll@0.2.12": wasip2::io::poll,
        "wasi:io/streams@0.2.12": wasip2::io::streams,
        "wasi:clocks/monotonic-clock@0.2.12": wasip2::clocks::monotonic_clock,
        "wasi:clocks/wall-clock@0.2.12": wasip2::clocks::wall_clock,
        "wasi:random/random@0.2.12": wasip2::random::random,
        "wasi:keyvalue/store@0.2.0-draft": generate,
        "wasi:keyvalue/atomics@0.2.0-draft": generate,
    },
});

/// The gateway's export.
struct Gateway;

export!(Gateway);

/// How much of a request body is read at a time.
const READ_CHUNK: u64 = 64 * 1024;

impl Guest for Gateway {
    fn handle(request: IncomingRequest, out: ResponseOutparam) {
        let head = RequestHead {
            method: method_name(&request.method()),
            path: request.path_with_query().unwrap_or_default(),
            headers: request
                .headers()
                .entries()
                .into_iter()
                .map(|(name, value)| (name, String::from_utf8_lossy(&value).into_owned()))
                .collect(),
        };
        let settings = Settings::from_vars(wasip2::cli::environment::get_environment());
        let machine =
            RequestMachine::new(settings, head, oma_wasi::now_ms(), oma_wasi::random_u64());
        let mut exchange = WasiExchange {
            request: &request,
            out: Some(out),
            events: None,
        };
        serve(machine, &mut exchange);
    }
}

/// One request over wasi:http, and its response: the outparam until a head is sent, then the
/// body of a stream of events.
struct WasiExchange<'a> {
    request: &'a IncomingRequest,
    out: Option<ResponseOutparam>,
    events: Option<(OutgoingBody, OutputStream)>,
}

impl Exchange for WasiExchange<'_> {
    type Transport = HttpIo;

    fn read_body(&mut self, limits: &BodyLimits) -> Result<Vec<u8>, BodyFailure> {
        let body = self
            .request
            .consume()
            .map_err(|()| BodyFailure::Broken("the body was already taken".into()))?;
        let stream = body
            .stream()
            .map_err(|()| BodyFailure::Broken("the body stream was already taken".into()))?;
        let bytes = read_stream(&stream, limits)?;
        drop(stream);
        drop(IncomingBody::finish(body));
        Ok(bytes)
    }

    fn respond(&mut self, reply: &Reply) {
        let Some(out) = self.out.take() else {
            return;
        };
        let mut headers: Vec<(String, Vec<u8>)> = vec![(
            "content-length".into(),
            reply.body.len().to_string().into_bytes(),
        )];
        headers.extend(
            reply
                .all_headers()
                .into_iter()
                .map(|(name, value)| (name, value.into_bytes())),
        );
        let Some((body, stream)) = start_response(out, reply.status, &headers) else {
            return;
        };
        let _ = oma_wasi::write_all(&stream, reply.body.as_bytes());
        drop(stream);
        let _ = OutgoingBody::finish(body, None);
    }

    fn open_events(&mut self) -> bool {
        let headers =
            STREAM_HEADERS.map(|(name, value)| (name.to_owned(), value.as_bytes().to_vec()));
        self.events = self
            .out
            .take()
            .and_then(|out| start_response(out, 200, &headers));
        self.events.is_some()
    }

    fn write_events(&mut self, bytes: &[u8]) -> bool {
        self.events
            .as_ref()
            .is_some_and(|(_, stream)| oma_wasi::write_all(stream, bytes).is_ok())
    }

    fn close_events(&mut self) {
        if let Some((body, stream)) = self.events.take() {
            drop(stream);
            let _ = OutgoingBody::finish(body, None);
        }
    }

    fn transport(&mut self) -> HttpIo {
        HttpIo::default()
    }

    fn count(&mut self, ops: &CountOps) -> Result<Vec<u64>, String> {
        let bucket = wasi::keyvalue::store::open(&ops.store).map_err(|error| describe(&error))?;
        ops.add
            .iter()
            .map(|(key, delta)| {
                wasi::keyvalue::atomics::increment(&bucket, key, *delta)
                    .map_err(|error| describe(&error))
            })
            .collect()
    }

    fn forget(&mut self, ops: &ForgetOps) {
        if let Ok(bucket) = wasi::keyvalue::store::open(&ops.store) {
            for name in &ops.names {
                let _ = bucket.delete(name);
            }
        }
    }

    fn log(&mut self, line: &str) {
        let stderr = wasip2::cli::stderr::get_stderr();
        let _ = stderr.blocking_write_and_flush(line.as_bytes());
    }
}

fn describe(error: &wasi::keyvalue::store::Error) -> String {
    use wasi::keyvalue::store::Error;
    match error {
        Error::NoSuchStore => "no such store".into(),
        Error::AccessDenied => "access denied".into(),
        Error::Other(other) => other.clone(),
    }
}

/// The whole of `stream`, within `limits`: at most their bytes, read before their deadline
/// (wall clock, ms); the declared length (already checked against the limit) is allocated at
/// once.
fn read_stream(stream: &InputStream, limits: &BodyLimits) -> Result<Vec<u8>, BodyFailure> {
    let expected = limits.declared.unwrap_or(0).min(limits.max_bytes);
    let mut bytes = Vec::with_capacity(usize::try_from(expected).unwrap_or(0));
    loop {
        let left = limits.deadline_at_ms.saturating_sub(oma_wasi::now_ms());
        if left == 0 {
            return Err(BodyFailure::TimedOut);
        }
        // What has arrived is taken without waiting (a read never blocks), and the end is seen
        // the same way: the two pollables and the poll, five calls into the host, only when
        // nothing has come yet.
        let read = match stream.read(READ_CHUNK) {
            Ok(chunk) if chunk.is_empty() => {
                let readable = stream.subscribe();
                let timer = wasip2::clocks::monotonic_clock::subscribe_duration(
                    left.saturating_mul(1_000_000),
                );
                if !wasip2::io::poll::poll(&[&readable, &timer]).contains(&0) {
                    return Err(BodyFailure::TimedOut);
                }
                stream.read(READ_CHUNK)
            }
            read => read,
        };
        match read {
            Ok(chunk) => {
                if bytes.len() as u64 + chunk.len() as u64 > limits.max_bytes {
                    return Err(BodyFailure::TooLarge);
                }
                bytes.extend_from_slice(&chunk);
            }
            Err(StreamError::Closed) => break,
            Err(StreamError::LastOperationFailed(_)) => {
                return Err(BodyFailure::Broken("the connection failed".into()))
            }
        }
    }
    Ok(bytes)
}

/// Sends the response head; returns the body to write, or `None` when the host refused the
/// head (then an empty 500 went out instead).
fn start_response(
    out: ResponseOutparam,
    status: u16,
    headers: &[(String, Vec<u8>)],
) -> Option<(OutgoingBody, OutputStream)> {
    let fields = Fields::from_list(headers).unwrap_or_else(|_| Fields::new());
    let response = OutgoingResponse::new(fields);
    let _ = response.set_status_code(status);
    let body = response.body().ok()?;
    ResponseOutparam::set(out, Ok(response));
    let stream = body.write().ok()?;
    Some((body, stream))
}

fn method_name(method: &Method) -> String {
    match method {
        Method::Get => "GET".into(),
        Method::Head => "HEAD".into(),
        Method::Post => "POST".into(),
        Method::Put => "PUT".into(),
        Method::Delete => "DELETE".into(),
        Method::Connect => "CONNECT".into(),
        Method::Options => "OPTIONS".into(),
        Method::Trace => "TRACE".into(),
        Method::Patch => "PATCH".into(),
        Method::Other(other) => other.clone(),
    }
}
