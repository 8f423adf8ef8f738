//! [`LoopbackOnly`]: the guest's outbound HTTP sent for real, to loopback hosts only (the
//! [`Simulator`](crate::Simulator)), and every other request denied before any connection.

use std::future::Future;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use wasmtime_wasi_http::{RequestOptions, WasiBody, WasiHttpHooks};

use oma_wasmtime::pool::{self, Pool};

type IoFuture = Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>;
type ResponseFuture = Box<
    dyn Future<Output = wasmtime_wasi_http::Result<(http::Response<WasiBody>, IoFuture)>> + Send,
>;

/// Sends requests for real, to loopback hosts only (`127.0.0.0/8`, `[::1]`, `localhost`);
/// every other request fails with `HTTP-request-denied` before any connection, and is counted.
/// The name is resolved once and only loopback addresses are connected to, whatever
/// `localhost` resolves to. Clones share the count.
///
/// Connections are kept alive and reused (the embedding's `pool`), as a production HTTP client
/// does.
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

    /// Sends `request` as the hook sends a guest's (loopback only, counted when denied, over the
    /// same kept-alive connections), for a request the host makes itself.
    pub async fn send(
        &self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
    ) -> wasmtime_wasi_http::Result<http::Response<WasiBody>> {
        if !self.admits(request.uri()) {
            return Err(wasmtime_wasi_http::Error::HttpRequestDenied);
        }
        pool::send(Arc::clone(&self.pool), request, options).await
    }

    /// Whether `uri` names a loopback host; a request that does not is counted as denied.
    fn admits(&self, uri: &http::Uri) -> bool {
        let loopback = is_loopback(uri);
        if !loopback {
            self.denied.fetch_add(1, Ordering::SeqCst);
        }
        loopback
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
        if !self.admits(request.uri()) {
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
