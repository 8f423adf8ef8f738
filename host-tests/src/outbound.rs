//! The guest's outbound HTTP in tests, besides the embedding's
//! [`DenyOutbound`](crate::DenyOutbound) and [`AllowOutbound`](crate::AllowOutbound) and the
//! loopback provider's [`LoopbackOnly`](crate::LoopbackOnly):
//!
//! - [`CaptureOutbound`] records each request and answers it in-process from a closure, with no
//!   socket: the default for tests that only ask "was anything sent, and what";
//! - [`BareRequest`] and [`send_bare`]: a recorded request sent again by the host alone, through
//!   a [`LoopbackOnly`](crate::LoopbackOnly), for benchmarks that weigh a run against the bare
//!   request.

use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use wasmtime_wasi_http::{RequestOptions, WasiBody, WasiHttpHooks};

use oma_loopback::{Ask, LoopbackOnly, RecordedRequest, RequestLog, Route};

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
        let (status, body, content_type) = if ask.route == Route::Unknown {
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

/// A recorded request made ready to send again and again with [`send_bare`]: the
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

/// Sends `request` outside any guest, through `client` (the pooled client the guest's requests
/// take), and reads the whole response: what one request costs the host without the component.
/// The `bare_post` benchmark measures runs against it. Returns the status and the body.
pub async fn send_bare(
    client: &LoopbackOnly,
    request: &BareRequest,
) -> Result<(u16, Vec<u8>), wasmtime_wasi_http::Error> {
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
    let response = client.send(request, None).await?;
    let status = response.status().as_u16();
    let body = response.into_body().collect().await?.to_bytes();
    Ok((status, body.to_vec()))
}
