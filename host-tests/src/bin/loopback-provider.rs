//! `loopback-provider [--addr 127.0.0.1:PORT] [--threads N] [--max-seconds S] [--hold-ms MS]
//! [--chunk-gap-ms MS]`: a provider for
//! load tests, answering every wire format with the canned bodies of [`oma_loopback::Ask`] (the
//! same bytes the test [`Simulator`](oma_loopback::Simulator) sends) as fast as it can.
//!
//! Unlike the simulator (one thread, a request log, scripted faults), it keeps nothing per
//! request but two counters, runs on a multi-threaded tokio runtime, and never fails: it is
//! there to not be the bottleneck of `bench/gateway-load/`. Each request's body is read whole
//! and parsed as JSON for its `model` and `stream` fields, as a real provider would.
//!
//! - The address must be a loopback one (`127.0.0.0/8` or `::1`); port 0 picks a free port.
//! - It prints `loopback-provider: listening on http://ADDR` on stderr once it accepts.
//! - `GET /__stats` answers `{"requests": N, "body_bytes": B, "connections": C, "open": O}`:
//!   the provider requests answered so far (`/__stats` itself not counted), the bytes of their
//!   bodies, the connections accepted (a client that keeps connections alive opens few), and
//!   the connections open now (this one included).
//! - With `--hold-ms MS` every provider request is held that long before it is answered: a
//!   slow provider, for the load test's abandoned clients (a client that leaves should close
//!   the request it caused, which `open` shows).
//! - With `--chunk-gap-ms MS` a streamed answer's events go out one at a time, MS apart (the
//!   first at once): a model that generates, for the streaming lane of `bench/gateway-bench/`,
//!   which measures what a gateway adds to the time to the first chunk and to the gaps between
//!   chunks. Whole answers are unchanged.
//! - It exits by itself after `--max-seconds` (600 by default), and on a closed standard input
//!   if `--exit-on-stdin-eof` is given.
//!
//! ```sh
//! cargo run --release -p oma-host-tests --bin loopback-provider -- --addr 127.0.0.1:8787
//! ```

use std::convert::Infallible;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::service::service_fn;
use oma_loopback::Ask;
use wasmtime_wasi_http::io::TokioIo;

/// The counters `GET /__stats` reports.
#[derive(Default)]
struct Stats {
    requests: AtomicU64,
    body_bytes: AtomicU64,
    connections: AtomicU64,
    open: AtomicU64,
}

struct Options {
    addr: SocketAddr,
    threads: usize,
    max_seconds: u64,
    exit_on_stdin_eof: bool,
    hold: Duration,
    gap: Duration,
}

const USAGE: &str = "usage: loopback-provider [--addr 127.0.0.1:PORT] [--threads N] \
                     [--max-seconds S] [--hold-ms MS] [--chunk-gap-ms MS] [--exit-on-stdin-eof]";

fn parse_options() -> Result<Options, String> {
    let mut options = Options {
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        threads: 2,
        max_seconds: 600,
        exit_on_stdin_eof: false,
        hold: Duration::ZERO,
        gap: Duration::ZERO,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--addr" => {
                let text = value("--addr")?;
                options.addr = text.parse().map_err(|e| format!("--addr {text}: {e}"))?;
            }
            "--threads" => {
                let text = value("--threads")?;
                options.threads = text
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or(format!("--threads {text}: a positive integer"))?;
            }
            "--max-seconds" => {
                let text = value("--max-seconds")?;
                options.max_seconds = text
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or(format!("--max-seconds {text}: a positive integer"))?;
            }
            "--hold-ms" => {
                let text = value("--hold-ms")?;
                let ms = text
                    .parse::<u64>()
                    .ok()
                    .ok_or(format!("--hold-ms {text}: a whole number of milliseconds"))?;
                options.hold = Duration::from_millis(ms);
            }
            "--chunk-gap-ms" => {
                let text = value("--chunk-gap-ms")?;
                let ms = text.parse::<u64>().ok().ok_or(format!(
                    "--chunk-gap-ms {text}: a whole number of milliseconds"
                ))?;
                options.gap = Duration::from_millis(ms);
            }
            "--exit-on-stdin-eof" => options.exit_on_stdin_eof = true,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if !options.addr.ip().is_loopback() {
        return Err(format!("{} is not a loopback address", options.addr.ip()));
    }
    Ok(options)
}

fn main() -> ExitCode {
    let options = match parse_options() {
        Ok(options) => options,
        Err(message) => {
            if !message.is_empty() {
                eprintln!("loopback-provider: {message}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(options.threads)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("loopback-provider: cannot build the runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    if options.exit_on_stdin_eof {
        // A plain thread: a blocking read that returns when the parent closes the pipe.
        std::thread::spawn(|| {
            let mut sink = Vec::new();
            let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
            eprintln!("loopback-provider: standard input closed, exiting");
            std::process::exit(0);
        });
    }
    let max = Duration::from_secs(options.max_seconds);
    runtime.block_on(async move {
        let listener = match tokio::net::TcpListener::bind(options.addr).await {
            Ok(listener) => listener,
            Err(err) => {
                eprintln!(
                    "loopback-provider: cannot listen on {}: {err}",
                    options.addr
                );
                return ExitCode::FAILURE;
            }
        };
        let local = listener.local_addr().unwrap_or(options.addr);
        eprintln!("loopback-provider: listening on http://{local}");
        let stats = Arc::new(Stats::default());
        let pacing = Pacing {
            hold: options.hold,
            gap: options.gap,
        };
        match tokio::time::timeout(max, accept_loop(listener, stats, pacing)).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(_) => {
                eprintln!(
                    "loopback-provider: --max-seconds {} passed, exiting",
                    max.as_secs()
                );
                ExitCode::SUCCESS
            }
        }
    })
}

/// How the provider paces its answers: `--hold-ms` and `--chunk-gap-ms`.
#[derive(Clone, Copy)]
struct Pacing {
    hold: Duration,
    gap: Duration,
}

async fn accept_loop(listener: tokio::net::TcpListener, stats: Arc<Stats>, pacing: Pacing) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // E.g. out of file descriptors: back off instead of spinning.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        stats.connections.fetch_add(1, Ordering::Relaxed);
        stats.open.fetch_add(1, Ordering::Relaxed);
        let stats = Arc::clone(&stats);
        tokio::spawn(async move {
            let counted = Arc::clone(&stats);
            let service = service_fn(move |request| answer(Arc::clone(&stats), request, pacing));
            let _ = hyper::server::conn::http1::Builder::new()
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service)
                .await;
            counted.open.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

async fn answer(
    stats: Arc<Stats>,
    request: http::Request<Incoming>,
    pacing: Pacing,
) -> Result<http::Response<Paced>, Infallible> {
    let (parts, body) = request.into_parts();
    let body = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let path = parts
        .uri
        .path_and_query()
        .map_or_else(|| parts.uri.path(), |pq| pq.as_str());
    if parts.method == http::Method::GET && path == "/__stats" {
        let text = format!(
            "{{\"requests\":{},\"body_bytes\":{},\"connections\":{},\"open\":{}}}",
            stats.requests.load(Ordering::Relaxed),
            stats.body_bytes.load(Ordering::Relaxed),
            stats.connections.load(Ordering::Relaxed),
            stats.open.load(Ordering::Relaxed)
        );
        return Ok(response(200, "application/json", text.into_bytes()));
    }
    stats.requests.fetch_add(1, Ordering::Relaxed);
    stats
        .body_bytes
        .fetch_add(body.len() as u64, Ordering::Relaxed);
    if !pacing.hold.is_zero() {
        // A connection closed meanwhile drops this future, and with it the connection.
        tokio::time::sleep(pacing.hold).await;
    }
    let ask = Ask::of(path, &body);
    if ask.route == oma_host_tests::Route::Unknown || parts.method != http::Method::POST {
        let (text, content_type) = ask.error_body(404);
        return Ok(response(404, content_type, text));
    }
    if ask.stream && !pacing.gap.is_zero() {
        let chunks = ask.success_chunks(0).into_iter().map(Bytes::from).collect();
        let mut paced = response(200, ask.content_type(), Vec::new());
        *paced.body_mut() = Paced::chunks(chunks, pacing.gap);
        return Ok(paced);
    }
    Ok(response(200, ask.content_type(), ask.success_body()))
}

/// A response body: whole, or a stream's events `gap` apart (the first at once).
struct Paced {
    chunks: VecDeque<Bytes>,
    gap: Duration,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Paced {
    fn whole(body: Vec<u8>) -> Self {
        Paced {
            chunks: VecDeque::from([Bytes::from(body)]),
            gap: Duration::ZERO,
            sleep: None,
        }
    }

    fn chunks(chunks: VecDeque<Bytes>, gap: Duration) -> Self {
        Paced {
            chunks,
            gap,
            sleep: None,
        }
    }
}

impl hyper::body::Body for Paced {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(sleep) = self.sleep.as_mut() {
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.sleep = None;
        }
        let Some(chunk) = self.chunks.pop_front() else {
            return Poll::Ready(None);
        };
        if !self.chunks.is_empty() && !self.gap.is_zero() {
            self.sleep = Some(Box::pin(tokio::time::sleep(self.gap)));
        }
        Poll::Ready(Some(Ok(Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        if self.gap.is_zero() || self.chunks.len() <= 1 {
            let len: usize = self.chunks.iter().map(Bytes::len).sum();
            SizeHint::with_exact(len as u64)
        } else {
            SizeHint::default()
        }
    }
}

fn response(status: u16, content_type: &str, body: Vec<u8>) -> http::Response<Paced> {
    let mut response = http::Response::new(Paced::whole(body));
    *response.status_mut() = http::StatusCode::from_u16(status).unwrap_or_default();
    let headers = response.headers_mut();
    if let Ok(value) = http::HeaderValue::from_str(content_type) {
        headers.insert(http::header::CONTENT_TYPE, value);
    }
    headers.insert("request-id", http::HeaderValue::from_static("req_sim_01"));
    response
}
