//! Keep-alive for the loopback hook and the address guard: HTTP/1.1 connections are kept after
//! a response has been read to its end and reused by the next request to the same authority,
//! as Node's fetch (undici) and every production HTTP client do. wasmtime's
//! `default_send_request` opens a fresh connection per request.
//!
//! A connection goes back to the pool only after its response body ended cleanly; a body that
//! fails, times out or is dropped half-read takes its connection with it. The request
//! options' timeouts apply as in `default_send_request`: connect, first byte, between bytes.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use tokio::net::TcpStream;
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody};

/// The timeout used when the request options set none (as `default_send_request`).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// The most idle connections kept per authority; more are closed when they fall idle.
const MAX_IDLE_PER_AUTHORITY: usize = 64;

/// Idle connections by authority (`host:port`, with the scheme where it can be either).
#[derive(Default)]
pub struct Pool {
    idle: Mutex<HashMap<String, Vec<SendRequest<WasiBody>>>>,
}

impl Pool {
    /// An idle connection to `authority` that is still open.
    fn take(&self, authority: &str) -> Option<SendRequest<WasiBody>> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let senders = idle.get_mut(authority)?;
        while let Some(sender) = senders.pop() {
            if sender.is_ready() && !sender.is_closed() {
                return Some(sender);
            }
        }
        None
    }

    fn put(&self, authority: String, sender: SendRequest<WasiBody>) {
        if sender.is_closed() {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let senders = idle.entry(authority).or_default();
        if senders.len() < MAX_IDLE_PER_AUTHORITY {
            senders.push(sender);
        }
    }
}

/// The request options' timeouts, with `default_send_request`'s default where one is unset.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timeouts {
    /// To connect (and for TLS, to shake hands).
    pub(crate) connect: Duration,
    /// For the response head.
    pub(crate) first_byte: Duration,
    /// Between two pieces of the body.
    pub(crate) between_bytes: Duration,
}

impl Timeouts {
    pub(crate) fn of(options: Option<RequestOptions>) -> Self {
        let pick = |get: fn(&RequestOptions) -> Option<Duration>| {
            options.as_ref().and_then(get).unwrap_or(DEFAULT_TIMEOUT)
        };
        Timeouts {
            connect: pick(|o| o.connect_timeout),
            first_byte: pick(|o| o.first_byte_timeout),
            between_bytes: pick(|o| o.between_bytes_timeout).max(Duration::from_nanos(1)),
        }
    }
}

/// Sends `request` over an idle connection `pool` holds under `key`, or over the one `connect`
/// opens; the response body gives the connection back once it has ended cleanly.
pub(crate) async fn send_pooled<F>(
    pool: Arc<Pool>,
    key: String,
    mut request: http::Request<WasiBody>,
    timeouts: Timeouts,
    connect: impl FnOnce() -> F,
) -> Result<http::Response<WasiBody>, Error>
where
    F: std::future::Future<Output = Result<SendRequest<WasiBody>, Error>>,
{
    // On the wire, HTTP/1.1 names only the path; the authority travels as `Host`.
    let path = request
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    *request.uri_mut() = http::Uri::builder()
        .path_and_query(path)
        .build()
        .map_err(|_| Error::HttpRequestUriInvalid)?;
    let mut sender = match pool.take(&key) {
        Some(sender) => sender,
        None => connect().await?,
    };
    let response = tokio::time::timeout(timeouts.first_byte, sender.send_request(request))
        .await
        .map_err(|_| Error::ConnectionReadTimeout)?
        .map_err(Error::from)?;
    let mut timeout = tokio::time::interval(timeouts.between_bytes);
    timeout.reset();
    Ok(response.map(|incoming| {
        PooledBody {
            incoming,
            timeout,
            release: Some((pool, key, sender)),
        }
        .boxed_unsync()
    }))
}

/// Sends `request` over a pooled (or new) HTTP/1.1 connection; plain HTTP only.
pub async fn send(
    pool: Arc<Pool>,
    request: http::Request<WasiBody>,
    options: Option<RequestOptions>,
) -> Result<http::Response<WasiBody>, Error> {
    let uri = request.uri();
    if uri.scheme() == Some(&http::uri::Scheme::HTTPS) {
        // Loopback providers speak plain HTTP; TLS is the default sender's business.
        return Err(Error::HttpProtocolError);
    }
    let authority = uri.authority().ok_or(Error::HttpRequestUriInvalid)?;
    let authority = match authority.port() {
        Some(_) => authority.to_string(),
        None => format!("{authority}:80"),
    };
    let timeouts = Timeouts::of(options);
    let to = authority.clone();
    send_pooled(pool, authority, request, timeouts, || {
        connect(to, timeouts.connect)
    })
    .await
}

/// An HTTP/1.1 connection over `stream`, its I/O driven by a task of its own.
pub(crate) async fn handshake<S>(
    stream: S,
    timeout: Duration,
) -> Result<SendRequest<WasiBody>, Error>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let (sender, connection) = tokio::time::timeout(
        timeout,
        hyper::client::conn::http1::handshake(TokioIo::new(stream)),
    )
    .await
    .map_err(|_| Error::ConnectionTimeout)?
    .map_err(Error::from)?;
    tokio::spawn(async move {
        // The connection ends when the server closes it or its sender is dropped.
        let _ = connection.await;
    });
    Ok(sender)
}

/// A new connection. The name is resolved here and only its loopback addresses are connected
/// to (`localhost` could be mapped elsewhere); none is `HTTP-request-denied`.
async fn connect(authority: String, timeout: Duration) -> Result<SendRequest<WasiBody>, Error> {
    let addresses: Vec<std::net::SocketAddr> =
        tokio::time::timeout(timeout, tokio::net::lookup_host(&authority))
            .await
            .map_err(|_| Error::DnsTimeout)?
            .map_err(|e| Error::DnsError {
                rcode: Some(e.to_string()),
                info_code: None,
            })?
            .collect();
    let loopback = |address: &std::net::SocketAddr| {
        crate::address::classify(address.ip()) == crate::address::AddressClass::Loopback
    };
    if addresses.is_empty() || !addresses.iter().all(loopback) {
        return Err(Error::HttpRequestDenied);
    }
    let stream = tokio::time::timeout(timeout, TcpStream::connect(&addresses[..]))
        .await
        .map_err(|_| Error::ConnectionTimeout)?
        .map_err(Error::Connect)?;
    let _ = stream.set_nodelay(true);
    handshake(stream, timeout).await
}

/// A response body that returns its connection to the pool once it has ended cleanly, and
/// fails when the provider falls silent for longer than the between-bytes timeout.
struct PooledBody {
    incoming: Incoming,
    timeout: tokio::time::Interval,
    release: Option<(Arc<Pool>, String, SendRequest<WasiBody>)>,
}

impl Body for PooledBody {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        match Pin::new(&mut self.incoming).poll_frame(cx) {
            Poll::Ready(None) => {
                if let Some((pool, authority, sender)) = self.release.take() {
                    pool.put(authority, sender);
                }
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(err))) => {
                self.release = None;
                let err = if err.is_timeout() {
                    Error::HttpResponseTimeout
                } else {
                    Error::from(err)
                };
                Poll::Ready(Some(Err(err)))
            }
            Poll::Ready(Some(Ok(frame))) => {
                self.timeout.reset();
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Pending => {
                ready!(self.timeout.poll_tick(cx));
                self.release = None;
                Poll::Ready(Some(Err(Error::ConnectionReadTimeout)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.incoming.size_hint()
    }
}
