//! A provider simulator: a loopback HTTP/1.1 server on `127.0.0.1:0` that answers every wire
//! format with canned bodies or streams, records every request, and plays the replies (faults
//! among them) of a script.
//!
//! The server runs on a thread of its own with its own single-threaded tokio runtime, so it
//! serves the guest whatever runtime (or none) the test uses; dropping the [`Simulator`] stops
//! it and cancels whatever it was still sending. Requests are answered in order from the
//! script ([`Simulator::script`]); once the script is used up, every request gets
//! [`Reply::Success`]. Streams are sent one event per chunk, [`Simulator::CHUNK_DELAY`] apart,
//! so incremental delivery can be observed.
//!
//! Point the guest at [`Simulator::base_url`] and install
//! [`LoopbackOnly`](crate::LoopbackOnly) as its hooks: requests then reach this server and
//! nothing else.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::service::service_fn;
use tokio::sync::{mpsc, oneshot};
use wasmtime_wasi_http::io::TokioIo;

use crate::canned::{Ask, Route};

/// One request as the server (or a capture hook) received it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedRequest {
    /// The method, e.g. `POST`.
    pub method: String,
    /// The path with its query, e.g. `/v1beta/models/m:streamGenerateContent?alt=sse`.
    pub path: String,
    /// Header names (lowercase) and values, in order.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl RecordedRequest {
    /// The first value of a header, by lowercase name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON, if it is JSON.
    pub fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_slice(&self.body).ok()
    }

    /// The body as text (invalid UTF-8 replaced).
    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The request of `parts` and its whole `body`, as the server records it.
    pub fn from_parts(parts: &http::request::Parts, body: Vec<u8>) -> Self {
        RecordedRequest {
            method: parts.method.as_str().to_owned(),
            path: parts
                .uri
                .path_and_query()
                .map_or_else(|| parts.uri.path().to_owned(), |pq| pq.as_str().to_owned()),
            headers: parts
                .headers
                .iter()
                .map(|(name, value)| {
                    (
                        name.as_str().to_ascii_lowercase(),
                        String::from_utf8_lossy(value.as_bytes()).into_owned(),
                    )
                })
                .collect(),
            body,
        }
    }
}

/// A shared, append-only list of recorded requests. Clones share the list.
#[derive(Clone, Debug, Default)]
pub struct RequestLog(Arc<Mutex<Vec<RecordedRequest>>>);

impl RequestLog {
    /// How many requests were recorded.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no request was recorded.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// A copy of every recorded request, oldest first.
    pub fn all(&self) -> Vec<RecordedRequest> {
        self.lock().clone()
    }

    /// Appends `request`.
    pub fn push(&self, request: RecordedRequest) {
        self.lock().push(request);
    }

    fn lock(&self) -> MutexGuard<'_, Vec<RecordedRequest>> {
        // A panicking test thread cannot leave the list half-written: pushes are single moves.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// How the simulator answers one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// The format's realistic success: JSON, or an SSE (AWS event) stream when the request asks
    /// for one. Unknown paths get 404.
    Success,
    /// `status` with the format's error body, and a `retry-after` header when given.
    Status {
        /// The HTTP status, e.g. 429, 500, 503, 400.
        status: u16,
        /// The `retry-after` value, in seconds, e.g. `"0.01"`.
        retry_after: Option<String>,
    },
    /// Waits this long before sending the response head, then answers as `Success`.
    Delay(Duration),
    /// 200 with a body that is cut off mid-JSON.
    MalformedJson,
    /// The success, chunked, with the connection closed after about half of it.
    Truncated,
    /// The success, chunked, falling silent for this long after about half of it (a provider
    /// that stalls mid-stream), then finishing.
    Stall(Duration),
    /// The success, chunked, falling silent for `pause` after its first `events` chunks (a
    /// stream that began and waits for its model's next piece), then finishing.
    StallAfter {
        /// How many chunks go out before the pause.
        events: usize,
        /// How long the pause lasts.
        pause: Duration,
    },
    /// 200 with a valid JSON success padded to at least this many bytes.
    Oversized(usize),
    /// A recorded answer: `status` and `headers` (a `content-type` among them), then each chunk
    /// as it was recorded, [`Simulator::CHUNK_DELAY`] apart (one chunk: sent whole, with a
    /// length), so a recorded stream reaches the client event by event, byte for byte.
    Recorded {
        /// The HTTP status.
        status: u16,
        /// Header names and values, in order.
        headers: Vec<(String, String)>,
        /// The body, in the pieces it is flushed in.
        chunks: Vec<Vec<u8>>,
    },
    /// Exactly this answer, sent whole.
    Custom {
        /// The HTTP status.
        status: u16,
        /// The `content-type`.
        content_type: String,
        /// The body.
        body: Vec<u8>,
    },
}

impl Reply {
    /// `status` with the format's error body.
    pub fn status(status: u16) -> Reply {
        Reply::Status {
            status,
            retry_after: None,
        }
    }

    /// `status` with `body` as JSON.
    pub fn json(status: u16, body: &str) -> Reply {
        Reply::Custom {
            status,
            content_type: "application/json".to_owned(),
            body: body.as_bytes().to_vec(),
        }
    }

    /// 200 with `body` as an SSE stream, sent whole.
    pub fn sse(body: &str) -> Reply {
        Reply::Custom {
            status: 200,
            content_type: "text/event-stream".to_owned(),
            body: body.as_bytes().to_vec(),
        }
    }

    /// 429 with `retry-after: <seconds>`.
    pub fn rate_limited(seconds: &str) -> Reply {
        Reply::Status {
            status: 429,
            retry_after: Some(seconds.to_owned()),
        }
    }
}

struct Shared {
    log: RequestLog,
    /// Whether requests are kept in `log` (benchmarks turn it off).
    record: bool,
    /// Connections accepted so far.
    connections: std::sync::atomic::AtomicUsize,
    script: Mutex<VecDeque<Reply>>,
    chunk_delay: Duration,
}

impl Shared {
    fn next_reply(&self) -> Reply {
        self.script
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .pop_front()
            .unwrap_or(Reply::Success)
    }
}

/// The loopback provider. Stops when dropped.
pub struct Simulator {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for Simulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Simulator")
            .field("addr", &self.addr)
            .field("requests", &self.shared.log.len())
            .finish_non_exhaustive()
    }
}

impl Simulator {
    /// The pause between two chunks of a stream.
    pub const CHUNK_DELAY: Duration = Duration::from_millis(5);

    /// Starts a simulator on a free loopback port.
    ///
    /// Fails if no port can be bound or no thread started.
    pub fn start() -> anyhow::Result<Simulator> {
        Self::start_with(Self::CHUNK_DELAY)
    }

    /// Starts a simulator whose streams pause `chunk_delay` between chunks.
    ///
    /// Fails if no port can be bound or no thread started.
    pub fn start_with(chunk_delay: Duration) -> anyhow::Result<Simulator> {
        Self::launch(chunk_delay, true)
    }

    /// Starts a simulator that keeps no requests (its log stays empty): for benchmarks, where
    /// thousands of large bodies would pile up in memory and the page faults of a growing heap
    /// would be measured with every request. A real provider keeps nothing either.
    ///
    /// Fails if no port can be bound or no thread started.
    pub fn start_unrecorded() -> anyhow::Result<Simulator> {
        Self::launch(Self::CHUNK_DELAY, false)
    }

    /// Starts an unrecorded simulator (as [`Simulator::start_unrecorded`]) that serves from the
    /// tokio runtime of `handle` instead of a thread of its own: with a current-thread runtime,
    /// client and provider share one thread, as a Node program serving and calling on one event
    /// loop does. No request then crosses to another CPU, so the benchmark measures no
    /// cross-CPU wakeup (on a virtual machine the dearest part of a loopback exchange). The
    /// simulator answers only while that runtime runs (inside its `block_on`).
    ///
    /// Fails if no port can be bound.
    pub fn start_unrecorded_on(handle: &tokio::runtime::Handle) -> anyhow::Result<Simulator> {
        let (listener, addr, shared) = Self::bind(Self::CHUNK_DELAY, false)?;
        let (shutdown, stop) = oneshot::channel();
        handle.spawn(serve(listener, Arc::clone(&shared), stop));
        Ok(Simulator {
            addr,
            shared,
            shutdown: Some(shutdown),
            thread: None,
        })
    }

    /// A listener on a free loopback port, its address, and the state its connections share.
    fn bind(
        chunk_delay: Duration,
        record: bool,
    ) -> anyhow::Result<(std::net::TcpListener, SocketAddr, Arc<Shared>)> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")
            .context("the simulator could not bind a loopback port")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            log: RequestLog::default(),
            record,
            connections: Default::default(),
            script: Mutex::new(VecDeque::new()),
            chunk_delay,
        });
        Ok((listener, addr, shared))
    }

    fn launch(chunk_delay: Duration, record: bool) -> anyhow::Result<Simulator> {
        let (listener, addr, shared) = Self::bind(chunk_delay, record)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("the simulator could not build its runtime")?;
        let (shutdown, stop) = oneshot::channel();
        let server = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name(format!("oma-simulator-{}", addr.port()))
            .spawn(move || {
                runtime.block_on(serve(listener, server, stop));
                // Connections still sending (delays, streams) are cancelled here.
                runtime.shutdown_timeout(Duration::from_secs(1));
            })
            .context("the simulator could not start its thread")?;
        Ok(Simulator {
            addr,
            shared,
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:<port>`: the base URL for every provider.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Queues replies for the next requests, in order (after any still queued).
    pub fn script(&self, replies: impl IntoIterator<Item = Reply>) {
        self.shared
            .script
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .extend(replies);
    }

    /// Drops every reply still queued, returning how many there were: a test that scripted a
    /// fault its request never used (the client refused before sending anything) leaves the
    /// next test a clean script.
    pub fn clear_script(&self) -> usize {
        let mut script = self
            .shared
            .script
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let left = script.len();
        script.clear();
        left
    }

    /// A copy of every request received so far, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.log.all()
    }

    /// How many requests were received so far.
    pub fn request_count(&self) -> usize {
        self.shared.log.len()
    }

    /// How many connections were accepted so far (a client that keeps connections alive makes
    /// fewer than it sends requests).
    pub fn connection_count(&self) -> usize {
        self.shared
            .connections
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The shared request log (clones see later requests too).
    pub fn log(&self) -> RequestLog {
        self.shared.log.clone()
    }
}

impl Drop for Simulator {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Accepts connections until `stop` fires (or the `Simulator` is gone).
async fn serve(
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
    mut stop: oneshot::Receiver<()>,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    loop {
        tokio::select! {
            _ = &mut stop => return,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else {
                    // E.g. out of file descriptors: back off instead of spinning.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                shared.connections.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let shared = Arc::clone(&shared);
                tokio::spawn(async move {
                    let service = service_fn(move |request| answer(Arc::clone(&shared), request));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        }
    }
}

async fn answer(
    shared: Arc<Shared>,
    request: http::Request<Incoming>,
) -> Result<http::Response<SimBody>, Infallible> {
    let (parts, body) = request.into_parts();
    let body = match body.collect().await {
        Ok(collected) => collected.to_bytes().to_vec(),
        Err(_) => Vec::new(),
    };
    let recorded = RecordedRequest::from_parts(&parts, body);
    let ask = Ask::of(&recorded.path, &recorded.body);
    if shared.record {
        shared.log.push(recorded);
    }
    let reply = shared.next_reply();
    Ok(respond(&ask, reply, shared.chunk_delay).await)
}

async fn respond(ask: &Ask, reply: Reply, chunk_delay: Duration) -> http::Response<SimBody> {
    if ask.route == Route::Unknown {
        let (body, content_type) = ask.error_body(404);
        return response(404, content_type, &[], SimBody::full(body));
    }
    match reply {
        Reply::Success => success(ask, chunk_delay),
        Reply::Delay(delay) => {
            tokio::time::sleep(delay).await;
            success(ask, chunk_delay)
        }
        Reply::Status {
            status,
            retry_after,
        } => {
            let (body, content_type) = ask.error_body(status);
            let extra: Vec<(&str, String)> = retry_after
                .into_iter()
                .map(|value| ("retry-after", value))
                .collect();
            response(status, content_type, &extra, SimBody::full(body))
        }
        Reply::MalformedJson => {
            let mut body = Ask {
                stream: false,
                ..ask.clone()
            }
            .success_body();
            body.truncate(body.len() / 2);
            response(200, "application/json", &[], SimBody::full(body))
        }
        Reply::Truncated | Reply::Stall(_) => {
            let mut chunks = ask.success_chunks(0);
            if chunks.len() == 1 {
                let whole = chunks.remove(0);
                let (head, tail) = whole.split_at(whole.len() / 2);
                chunks = vec![head.to_vec(), tail.to_vec()];
            }
            let at = chunks.len().div_ceil(2);
            let cut = match reply {
                Reply::Stall(pause) => Cut::Stall(at, pause),
                _ => Cut::Close(at),
            };
            success_from(ask, chunks, chunk_delay, cut)
        }
        Reply::StallAfter { events, pause } => success_from(
            ask,
            ask.success_chunks(0),
            chunk_delay,
            Cut::Stall(events, pause),
        ),
        Reply::Oversized(size) => {
            let json = Ask {
                stream: false,
                ..ask.clone()
            };
            let body = json.success_chunks(size).concat();
            response(200, "application/json", &[], SimBody::full(body))
        }
        Reply::Custom {
            status,
            content_type,
            body,
        } => response(status, &content_type, &[], SimBody::full(body)),
        Reply::Recorded {
            status,
            headers,
            mut chunks,
        } => {
            let body = if chunks.len() == 1 {
                SimBody::full(chunks.remove(0))
            } else {
                SimBody::chunked(chunks, chunk_delay, Cut::None)
            };
            let mut answer = response(status, "", &[], body);
            for (name, value) in headers {
                if let (Ok(name), Ok(value)) = (
                    http::HeaderName::from_bytes(name.as_bytes()),
                    http::HeaderValue::from_str(&value),
                ) {
                    answer.headers_mut().append(name, value);
                }
            }
            answer
        }
    }
}

fn success(ask: &Ask, chunk_delay: Duration) -> http::Response<SimBody> {
    success_from(ask, ask.success_chunks(0), chunk_delay, Cut::None)
}

fn success_from(
    ask: &Ask,
    chunks: Vec<Vec<u8>>,
    chunk_delay: Duration,
    cut: Cut,
) -> http::Response<SimBody> {
    let body = if ask.stream || cut != Cut::None {
        SimBody::chunked(chunks, chunk_delay, cut)
    } else {
        SimBody::full(chunks.concat())
    };
    response(200, ask.content_type(), &[], body)
}

fn response(
    status: u16,
    content_type: &str,
    extra: &[(&str, String)],
    body: SimBody,
) -> http::Response<SimBody> {
    let mut response = http::Response::new(body);
    *response.status_mut() =
        http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    if !content_type.is_empty() {
        if let Ok(value) = http::HeaderValue::from_str(content_type) {
            headers.insert(http::header::CONTENT_TYPE, value);
        }
    }
    for (name, value) in extra {
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(name.as_bytes()),
            http::HeaderValue::from_str(value),
        ) {
            headers.insert(name, value);
        }
    }
    response
}

/// Where a chunked body goes wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cut {
    /// It does not.
    None,
    /// The connection is closed before chunk `n`.
    Close(usize),
    /// The server falls silent before chunk `n`, for this long.
    Stall(usize, Duration),
}

/// A response body: whole (with a content length) or chunks from a sender task.
struct SimBody(BodyKind);

enum BodyKind {
    Full(Option<Bytes>),
    Chunks(mpsc::Receiver<Result<Bytes, std::io::Error>>),
}

impl SimBody {
    fn full(bytes: Vec<u8>) -> SimBody {
        SimBody(BodyKind::Full(Some(Bytes::from(bytes))))
    }

    /// Sends `chunks` `delay` apart; a [`Cut::Close`] fails the body at that chunk, which makes
    /// the server drop the connection mid-response, and a [`Cut::Stall`] pauses there.
    fn chunked(chunks: Vec<Vec<u8>>, delay: Duration, cut: Cut) -> SimBody {
        let (sender, receiver) = mpsc::channel(4);
        tokio::spawn(async move {
            for (i, chunk) in chunks.into_iter().enumerate() {
                match cut {
                    Cut::Close(at) if at == i => {
                        let cut = std::io::Error::new(
                            std::io::ErrorKind::ConnectionAborted,
                            "the simulator cut the response short",
                        );
                        let _ = sender.send(Err(cut)).await;
                        return;
                    }
                    Cut::Stall(at, pause) if at == i => tokio::time::sleep(pause).await,
                    _ => {}
                }
                if i > 0 {
                    tokio::time::sleep(delay).await;
                }
                if sender.send(Ok(Bytes::from(chunk))).await.is_err() {
                    return;
                }
            }
        });
        SimBody(BodyKind::Chunks(receiver))
    }
}

impl Body for SimBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        match &mut self.get_mut().0 {
            BodyKind::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            BodyKind::Chunks(receiver) => receiver
                .poll_recv(cx)
                .map(|chunk| chunk.map(|result| result.map(Frame::data))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.0, BodyKind::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match &self.0 {
            BodyKind::Full(Some(bytes)) => SizeHint::with_exact(bytes.len() as u64),
            BodyKind::Full(None) => SizeHint::with_exact(0),
            BodyKind::Chunks(_) => SizeHint::default(),
        }
    }
}
