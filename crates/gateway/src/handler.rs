//! The wasi:http side of the gateway: `wasi:http/incoming-handler`. It gives [`serve`] the
//! request (head, then the body within the limit and the deadline) and the response (whole, or
//! as server-sent events while the run goes on), and the run's provider calls go out on
//! wasi:http ([`HttpIo`], the transport the `component` world uses too). What is answered is
//! decided by the gateway's rules (`oma-gateway-rules`); the Fastly layer (`crates/fastly`)
//! serves the same way over Fastly's hostcalls.

use exports::wasi::http::incoming_handler::Guest;
use wasip2::http::types::{
    Fields, IncomingBody, IncomingRequest, Method, OutgoingBody, OutgoingResponse, ResponseOutparam,
};
use wasip2::io::streams::{InputStream, OutputStream, StreamError};

use oma_gateway_rules::limits::Counter;
use oma_gateway_rules::serve::{serve, Exchange};
use oma_gateway_rules::{log_line, Reply, Settings, STREAM_HEADERS};
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
        let started = monotonic_ms();
        let method = method_name(&request.method());
        let path = request.path_with_query().unwrap_or_default();
        let settings = Settings::from_vars(wasip2::cli::environment::get_environment());
        let mut exchange = WasiExchange {
            request: &request,
            out: Some(out),
            events: None,
        };
        let status = serve(settings, &method, &path, &mut exchange);
        drop(exchange);
        drop(request);
        let line = log_line(
            &method,
            &path,
            status,
            monotonic_ms().saturating_sub(started),
        );
        let stderr = wasip2::cli::stderr::get_stderr();
        let _ = stderr.blocking_write_and_flush(line.as_bytes());
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

    fn header(&self, name: &str) -> Option<String> {
        self.request
            .headers()
            .get(name)
            .into_iter()
            .next()
            .map(|value| String::from_utf8_lossy(&value).into_owned())
    }

    fn now_ms(&self) -> u64 {
        oma_wasi::now_ms()
    }

    fn random_u64(&self) -> u64 {
        oma_wasi::random_u64()
    }

    fn read_body(
        &mut self,
        declared: Option<u64>,
        limit: u64,
        deadline_at: u64,
    ) -> Result<Vec<u8>, Reply> {
        let body = self
            .request
            .consume()
            .map_err(|()| Reply::unreadable("the body was already taken"))?;
        let stream = body
            .stream()
            .map_err(|()| Reply::unreadable("the body stream was already taken"))?;
        let bytes = read_stream(&stream, declared, limit, deadline_at)?;
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

    fn log(&mut self, line: &str) {
        let stderr = wasip2::cli::stderr::get_stderr();
        let _ = stderr.blocking_write_and_flush(line.as_bytes());
    }

    fn limits_store(&mut self, bucket: &str) -> Result<Box<dyn Counter>, String> {
        wasi::keyvalue::store::open(bucket)
            .map(|bucket| Box::new(Bucket(bucket)) as Box<dyn Counter>)
            .map_err(|error| describe(&error))
    }
}

/// A `wasi:keyvalue` bucket of the host, counting with `atomics.increment`.
struct Bucket(wasi::keyvalue::store::Bucket);

impl Counter for Bucket {
    fn increment(&mut self, key: &str, delta: u64) -> Result<u64, String> {
        wasi::keyvalue::atomics::increment(&self.0, key, delta).map_err(|error| describe(&error))
    }

    fn delete(&mut self, key: &str) {
        let _ = self.0.delete(key);
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

/// The whole of `stream`, at most `limit` bytes, read before `deadline_at` (wall clock, ms); the
/// declared length (already checked against the limit) is allocated at once.
fn read_stream(
    stream: &InputStream,
    declared: Option<u64>,
    limit: u64,
    deadline_at: u64,
) -> Result<Vec<u8>, Reply> {
    let expected = declared.unwrap_or(0).min(limit);
    let mut bytes = Vec::with_capacity(usize::try_from(expected).unwrap_or(0));
    loop {
        let left = deadline_at.saturating_sub(oma_wasi::now_ms());
        let readable = stream.subscribe();
        let timer =
            wasip2::clocks::monotonic_clock::subscribe_duration(left.saturating_mul(1_000_000));
        if left == 0 || !wasip2::io::poll::poll(&[&readable, &timer]).contains(&0) {
            return Err(Reply::body_timeout());
        }
        match stream.read(READ_CHUNK) {
            Ok(chunk) => {
                if bytes.len() as u64 + chunk.len() as u64 > limit {
                    return Err(Reply::too_large(limit));
                }
                bytes.extend_from_slice(&chunk);
            }
            Err(StreamError::Closed) => break,
            Err(StreamError::LastOperationFailed(_)) => {
                return Err(Reply::unreadable("the connection failed"))
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

fn monotonic_ms() -> u64 {
    wasip2::clocks::monotonic_clock::now() / 1_000_000
}
