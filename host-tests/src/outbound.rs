//! Hooks for the guest's outbound HTTP in tests, besides the embedding's
//! [`DenyOutbound`](crate::DenyOutbound) and [`AllowOutbound`](crate::AllowOutbound):
//!
//! - [`CaptureOutbound`] records each request and answers it in-process from a closure, with no
//!   socket: the default for tests that only ask "was anything sent, and what";
//! - [`LoopbackOnly`] sends requests for real, but only to loopback addresses (the
//!   [`Simulator`](crate::Simulator)); anything else is denied as `HTTP-request-denied` and
//!   counted.

use std::future::Future;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use wasmtime_wasi_http::{RequestOptions, WasiBody, WasiHttpHooks};

use oma_wasmtime::pool::{self, Pool};

use crate::canned::Ask;
use crate::simulator::{RecordedRequest, RequestLog};

type IoFuture = Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>;
type ResponseFuture = Box<
    dyn Future<Output = wasmtime_wasi_http::Result<(http::Response<WasiBody>, IoFuture)>> + Send,
>;

/// An answer a [`CaptureOutbound`] gives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CannedResponse {
    /// The status code.
    pub status: u16,
    /// Header names and values.
    pub headers: Vec<(String, String)>,
    /// The whole body.
    pub body: Vec<u8>,
}

impl CannedResponse {
    /// The simulator's success for `request`'s wire format (a stream arrives in one piece).
    pub fn success_for(request: &RecordedRequest) -> CannedResponse {
        let ask = Ask::of(&request.path, &request.body);
        let (status, body, content_type) = if ask.route == crate::canned::Route::Unknown {
            let (body, content_type) = ask.error_body(404);
            (404, body, content_type)
        } else {
            (200, ask.success_body(), ask.content_type())
        };
        CannedResponse {
            status,
            headers: vec![("content-type".to_owned(), content_type.to_owned())],
            body,
        }
    }
}

type Answer = dyn Fn(&RecordedRequest) -> CannedResponse + Send + Sync;

/// Records every outbound request and answers it from a closure, in-process.
#[derive(Clone)]
pub struct CaptureOutbound {
    log: RequestLog,
    answer: Arc<Answer>,
    record: bool,
}

impl std::fmt::Debug for CaptureOutbound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureOutbound")
            .field("requests", &self.log.len())
            .finish_non_exhaustive()
    }
}

impl Default for CaptureOutbound {
    /// Answers like the simulator's [`Reply::Success`](crate::Reply::Success).
    fn default() -> Self {
        CaptureOutbound::new(CannedResponse::success_for)
    }
}

impl CaptureOutbound {
    /// A hook that answers each request with `answer(request)`.
    pub fn new(
        answer: impl Fn(&RecordedRequest) -> CannedResponse + Send + Sync + 'static,
    ) -> Self {
        CaptureOutbound {
            log: RequestLog::default(),
            answer: Arc::new(answer),
            record: true,
        }
    }

    /// A hook that answers like [`CaptureOutbound::new`] but records nothing (its log stays
    /// empty): for benchmarks, whose many large requests should not pile up.
    pub fn answering(
        answer: impl Fn(&RecordedRequest) -> CannedResponse + Send + Sync + 'static,
    ) -> Self {
        CaptureOutbound {
            record: false,
            ..CaptureOutbound::new(answer)
        }
    }

    /// The requests recorded so far; keep it before boxing the hook into
    /// [`GuestOptions`](crate::GuestOptions).
    pub fn log(&self) -> RequestLog {
        self.log.clone()
    }
}

impl WasiHttpHooks for CaptureOutbound {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        _options: Option<RequestOptions>,
        _fut: IoFuture,
    ) -> ResponseFuture {
        let log = self.log.clone();
        let answer = Arc::clone(&self.answer);
        let record = self.record;
        Box::new(async move {
            let (parts, body) = request.into_parts();
            let body = body.collect().await?.to_bytes().to_vec();
            let recorded = RecordedRequest::from_parts(&parts, body);
            let canned = answer(&recorded);
            if record {
                log.push(recorded);
            }
            let mut response = http::Response::new(
                Full::new(Bytes::from(canned.body))
                    .map_err(|never| match never {})
                    .boxed_unsync(),
            );
            *response.status_mut() = http::StatusCode::from_u16(canned.status)
                .map_err(|_| wasmtime_wasi_http::Error::HttpProtocolError)?;
            for (name, value) in &canned.headers {
                let name = http::HeaderName::from_bytes(name.as_bytes())
                    .map_err(|_| wasmtime_wasi_http::Error::HttpProtocolError)?;
                let value = http::HeaderValue::from_str(value)
                    .map_err(|_| wasmtime_wasi_http::Error::HttpProtocolError)?;
                response.headers_mut().append(name, value);
            }
            let io: IoFuture = Box::new(async { Ok(()) });
            Ok((response, io))
        })
    }
}

/// Sends requests for real, to loopback hosts only (`127.0.0.0/8`, `[::1]`, `localhost`);
/// every other request fails with `HTTP-request-denied` before any connection, and is counted.
/// The name is resolved once and only loopback addresses are connected to, whatever
/// `localhost` resolves to. Clones share the count.
///
/// Connections are kept alive and reused (see `pool.rs`), as a production HTTP client does.
#[derive(Clone, Default)]
pub struct LoopbackOnly {
    denied: Arc<AtomicUsize>,
    pool: Arc<Pool>,
}

impl std::fmt::Debug for LoopbackOnly {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoopbackOnly")
            .field("denied", &self.denied())
            .finish_non_exhaustive()
    }
}

impl LoopbackOnly {
    /// A hook with a count of zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many requests were denied so far.
    pub fn denied(&self) -> usize {
        self.denied.load(Ordering::SeqCst)
    }

    /// Sends `request` outside any guest, through the same pooled client the guest's requests
    /// take, and reads the whole response: what one request costs the host without the
    /// component. The `bare_post` benchmark measures runs against it. Returns the status and the
    /// body.
    pub async fn send_bare(
        &self,
        request: &BareRequest,
    ) -> Result<(u16, Vec<u8>), wasmtime_wasi_http::Error> {
        if !is_loopback(&request.uri) {
            self.denied.fetch_add(1, Ordering::SeqCst);
            return Err(wasmtime_wasi_http::Error::HttpRequestDenied);
        }
        let mut builder = http::Request::builder()
            .method(request.method.clone())
            .uri(request.uri.clone());
        for (name, value) in &request.headers {
            builder = builder.header(name, value);
        }
        let body = Full::new(request.body.clone())
            .map_err(|never| match never {})
            .boxed_unsync();
        let request = builder
            .body(body)
            .map_err(|_| wasmtime_wasi_http::Error::HttpRequestUriInvalid)?;
        let response = pool::send(Arc::clone(&self.pool), request, None).await?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await?.to_bytes();
        Ok((status, body.to_vec()))
    }
}

/// A recorded request made ready to send again and again with [`LoopbackOnly::send_bare`]: the
/// URI and method parsed once, the body shared (each send copies no bytes of it).
#[derive(Clone, Debug)]
pub struct BareRequest {
    method: http::Method,
    uri: http::Uri,
    headers: Vec<(String, String)>,
    body: Bytes,
}

impl BareRequest {
    /// `request` as sent to `base_url` (an origin, e.g. the simulator's).
    pub fn new(
        base_url: &str,
        request: &RecordedRequest,
    ) -> Result<Self, wasmtime_wasi_http::Error> {
        let method = http::Method::from_bytes(request.method.as_bytes())
            .map_err(|_| wasmtime_wasi_http::Error::HttpRequestMethodInvalid)?;
        let uri = format!("{}{}", base_url.trim_end_matches('/'), request.path)
            .parse()
            .map_err(|_| wasmtime_wasi_http::Error::HttpRequestUriInvalid)?;
        Ok(BareRequest {
            method,
            uri,
            headers: request.headers.clone(),
            body: Bytes::from(request.body.clone()),
        })
    }
}

/// Whether a request URI names a loopback host.
pub fn is_loopback(uri: &http::Uri) -> bool {
    let Some(host) = uri.host() else {
        return false;
    };
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => bare.eq_ignore_ascii_case("localhost"),
    }
}

impl WasiHttpHooks for LoopbackOnly {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: IoFuture,
    ) -> ResponseFuture {
        if !is_loopback(request.uri()) {
            self.denied.fetch_add(1, Ordering::SeqCst);
            return Box::new(async { Err(wasmtime_wasi_http::Error::HttpRequestDenied) });
        }
        let pool = Arc::clone(&self.pool);
        Box::new(async move {
            let response = pool::send(pool, request, options).await?;
            // The connection's I/O runs in a task of its own.
            let io: IoFuture = Box::new(async { Ok(()) });
            Ok((response, io))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_hosts_pass() {
        for uri in [
            "http://127.0.0.1:8080/v1",
            "http://127.2.3.4/",
            "http://[::1]:9/x",
            "http://LOCALHOST:1/",
        ] {
            assert!(is_loopback(&uri.parse().unwrap()), "{uri}");
        }
        for uri in [
            "https://api.anthropic.com/v1/messages",
            "http://10.0.0.1/",
            "http://[::2]/",
            "http://localhost.evil.example/",
            "/relative",
        ] {
            assert!(!is_loopback(&uri.parse().unwrap()), "{uri}");
        }
    }
}
