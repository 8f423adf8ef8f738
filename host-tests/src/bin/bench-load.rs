//! `bench-load --url URL --body FILE [options]`: the load generator of `bench/gateway-bench/`.
//! It keeps `--connections` HTTP/1.1 keep-alive connections busy posting the same body, for
//! `--seconds` or until `--requests` have been sent, and prints one JSON object on standard
//! output: the requests counted, those that failed, the requests per second, and the
//! distributions (p50, p90, p99, max, mean, in ms) of the whole response's latency, of the time
//! to its first body chunk, and of the gaps between the server-sent events of one response (a
//! streamed answer's inter-chunk gap: from the end of one event, its blank line, to the end of
//! the next).
//!
//! Why our own and not `oha`: the streaming lane needs the time to the first chunk and the gaps
//! between chunks, which `oha` does not report, and CI gets it with the workspace instead of a
//! separate `cargo install`.
//!
//! - Loopback only: the URL's host must be a loopback address.
//! - A request counts as failed when its status is not 2xx, its connection fails (the
//!   connection is then opened again), or its body lacks `--expect` when given.
//! - `--warmup S` runs the same load for S seconds first, not counted.
//! - Requests in flight at the deadline are waited for and counted, as `oha -w` does.
//! - One thread: the generator takes at most one core of the machine it shares with the server
//!   under test.
//!
//! ```sh
//! bench-load --url http://127.0.0.1:8080/v1/chat/completions --body chat-small.json \
//!   --header 'content-type: application/json' --connections 8 --seconds 5 --expect simulator
//! ```

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use serde_json::{json, Value};
use tokio::net::TcpStream;
use wasmtime_wasi_http::io::TokioIo;

const USAGE: &str = "usage: bench-load --url URL --body FILE [--header 'name: value']... \
                     [--connections N] [--seconds S | --requests N] [--warmup S] \
                     [--expect TEXT] [--timeout-ms MS]";

/// What one run is asked to do.
struct Options {
    addr: SocketAddr,
    authority: String,
    path: String,
    body: Bytes,
    headers: Vec<(String, String)>,
    connections: usize,
    seconds: Option<f64>,
    requests: Option<u64>,
    warmup: f64,
    expect: Option<Vec<u8>>,
    timeout: Duration,
}

fn parse_options() -> Result<Options, String> {
    let mut url = None;
    let mut body_path = None;
    let mut headers = Vec::new();
    let mut connections = 1usize;
    let mut seconds = None;
    let mut requests = None;
    let mut warmup = 0.0f64;
    let mut expect = None;
    let mut timeout = Duration::from_secs(30);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        let number = |name: &str, text: String| -> Result<f64, String> {
            text.parse::<f64>()
                .ok()
                .filter(|n| n.is_finite() && *n >= 0.0)
                .ok_or(format!("{name} {text}: a non-negative number"))
        };
        match arg.as_str() {
            "--url" => url = Some(value("--url")?),
            "--body" => body_path = Some(value("--body")?),
            "--header" => {
                let text = value("--header")?;
                let (name, val) = text
                    .split_once(':')
                    .ok_or(format!("--header {text}: `name: value`"))?;
                headers.push((name.trim().to_owned(), val.trim().to_owned()));
            }
            "--connections" => {
                connections = number("--connections", value("--connections")?)? as usize;
            }
            "--seconds" => seconds = Some(number("--seconds", value("--seconds")?)?),
            "--requests" => requests = Some(number("--requests", value("--requests")?)? as u64),
            "--warmup" => warmup = number("--warmup", value("--warmup")?)?,
            "--expect" => expect = Some(value("--expect")?.into_bytes()),
            "--timeout-ms" => {
                timeout =
                    Duration::from_millis(number("--timeout-ms", value("--timeout-ms")?)? as u64);
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let url = url.ok_or("--url is required")?;
    let rest = url
        .strip_prefix("http://")
        .ok_or(format!("{url}: only http:// URLs"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let addr: SocketAddr = authority
        .parse()
        .map_err(|e| format!("{authority}: an IP:PORT address ({e})"))?;
    if !addr.ip().is_loopback() {
        return Err(format!("{} is not a loopback address", addr.ip()));
    }
    let body_path = body_path.ok_or("--body is required")?;
    let body = std::fs::read(&body_path).map_err(|e| format!("cannot read {body_path}: {e}"))?;
    if connections == 0 {
        return Err("--connections must be at least 1".into());
    }
    Ok(Options {
        addr,
        authority: authority.to_owned(),
        path: path.to_owned(),
        body: Bytes::from(body),
        headers,
        connections,
        seconds,
        requests,
        warmup,
        expect,
        timeout,
    })
}

/// What one connection measured, in microseconds.
#[derive(Default)]
struct Measured {
    ok: u64,
    failed: u64,
    latency: Vec<u32>,
    first_chunk: Vec<u32>,
    gaps: Vec<u32>,
    statuses: Vec<(u16, u64)>,
}

impl Measured {
    fn merge(&mut self, other: Measured) {
        self.ok += other.ok;
        self.failed += other.failed;
        self.latency.extend(other.latency);
        self.first_chunk.extend(other.first_chunk);
        self.gaps.extend(other.gaps);
        for (status, n) in other.statuses {
            self.count_status(status, n);
        }
    }

    fn count_status(&mut self, status: u16, n: u64) {
        match self.statuses.iter_mut().find(|(s, _)| *s == status) {
            Some((_, count)) => *count += n,
            None => self.statuses.push((status, n)),
        }
    }
}

/// When a phase stops starting requests: at a deadline, or once a shared budget of requests is
/// spent.
struct Stop {
    deadline: Instant,
    budget: Option<std::sync::atomic::AtomicU64>,
}

impl Stop {
    /// Whether another request may start (taking it from the budget).
    fn next(&self) -> bool {
        if Instant::now() >= self.deadline {
            return false;
        }
        match &self.budget {
            None => true,
            Some(left) => left
                .fetch_update(
                    std::sync::atomic::Ordering::Relaxed,
                    std::sync::atomic::Ordering::Relaxed,
                    |n| n.checked_sub(1),
                )
                .is_ok(),
        }
    }
}

type Sender = http1::SendRequest<Full<Bytes>>;

async fn connect(options: &Options) -> Option<Sender> {
    let stream = TcpStream::connect(options.addr).await.ok()?;
    let _ = stream.set_nodelay(true);
    let (sender, connection) = http1::handshake(TokioIo::new(stream)).await.ok()?;
    tokio::task::spawn_local(async move {
        let _ = connection.await;
    });
    Some(sender)
}

/// One connection's loop: requests one after the other until `stop` says no more.
async fn run_connection(options: Arc<Options>, stop: Arc<Stop>) -> Measured {
    let mut measured = Measured::default();
    let mut sender: Option<Sender> = None;
    while stop.next() {
        if sender.as_ref().is_none_or(|s| s.is_closed()) {
            sender = connect(&options).await;
        }
        let Some(live) = sender.as_mut() else {
            measured.failed += 1;
            measured.count_status(0, 1);
            // The server is not there: do not spin.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let outcome =
            tokio::time::timeout(options.timeout, one_request(&options, live, &mut measured)).await;
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(())) | Err(_) => {
                measured.failed += 1;
                measured.count_status(0, 1);
                sender = None;
            }
        }
    }
    measured
}

/// One request on `sender`; its figures go into `measured`. `Err` when the connection failed.
async fn one_request(
    options: &Options,
    sender: &mut Sender,
    measured: &mut Measured,
) -> Result<(), ()> {
    sender.ready().await.map_err(|_| ())?;
    let mut builder = hyper::Request::post(options.path.as_str())
        .header(http::header::HOST, options.authority.as_str());
    for (name, value) in &options.headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    let request = builder
        .body(Full::new(options.body.clone()))
        .map_err(|_| ())?;
    let started = Instant::now();
    let response = sender.send_request(request).await.map_err(|_| ())?;
    let status = response.status().as_u16();
    let mut body = response.into_body();
    let mut first = None;
    let mut last_event: Option<Instant> = None;
    let mut previous = 0u8;
    let mut text = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| ())?;
        if let Some(data) = frame.data_ref() {
            if data.is_empty() {
                continue;
            }
            let now = Instant::now();
            first.get_or_insert(now);
            // Each server-sent event ends with a blank line: the gaps are between the arrivals
            // of whole events, however the bytes were cut into chunks on the way.
            for &byte in data.iter() {
                if byte == b'\n' && previous == b'\n' {
                    if let Some(last) = last_event {
                        measured.gaps.push(micros(now - last));
                    }
                    last_event = Some(now);
                }
                if byte != b'\r' {
                    previous = byte;
                }
            }
            if options.expect.is_some() {
                text.extend_from_slice(data);
            }
        }
    }
    let ended = Instant::now();
    measured.count_status(status, 1);
    let expected = options
        .expect
        .as_deref()
        .is_none_or(|needle| text.windows(needle.len()).any(|w| w == needle));
    if (200..300).contains(&status) && expected {
        measured.ok += 1;
        measured.latency.push(micros(ended - started));
        measured
            .first_chunk
            .push(micros(first.unwrap_or(ended) - started));
    } else {
        measured.failed += 1;
    }
    Ok(())
}

fn micros(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}

/// Runs the load for `seconds` (or until `requests` are spent) and measures it.
async fn phase(options: &Arc<Options>, seconds: f64, requests: Option<u64>) -> (Measured, f64) {
    let started = Instant::now();
    let stop = Arc::new(Stop {
        deadline: started + Duration::from_secs_f64(seconds),
        budget: requests.map(std::sync::atomic::AtomicU64::new),
    });
    let tasks: Vec<_> = (0..options.connections)
        .map(|_| tokio::task::spawn_local(run_connection(Arc::clone(options), Arc::clone(&stop))))
        .collect();
    let mut all = Measured::default();
    for task in tasks {
        if let Ok(measured) = task.await {
            all.merge(measured);
        }
    }
    (all, started.elapsed().as_secs_f64())
}

/// p50, p90, p99, max and mean of `values` (µs), in ms.
fn distribution(values: &mut [u32]) -> Value {
    if values.is_empty() {
        return Value::Null;
    }
    values.sort_unstable();
    let at = |q: f64| {
        let i = ((values.len() as f64 * q).ceil() as usize).clamp(1, values.len()) - 1;
        f64::from(values[i]) / 1000.0
    };
    let mean = values.iter().map(|&v| f64::from(v)).sum::<f64>() / values.len() as f64 / 1000.0;
    json!({
        "p50": at(0.50), "p90": at(0.90), "p99": at(0.99),
        "max": f64::from(values[values.len() - 1]) / 1000.0, "mean": mean,
        "count": values.len(),
    })
}

fn main() -> ExitCode {
    let options = match parse_options() {
        Ok(options) => Arc::new(options),
        Err(message) => {
            if !message.is_empty() {
                eprintln!("bench-load: {message}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("bench-load: cannot build the runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let local = tokio::task::LocalSet::new();
    let (mut measured, elapsed) = local.block_on(&runtime, async {
        if options.warmup > 0.0 {
            phase(&options, options.warmup, None).await;
        }
        // A request count alone runs until it is spent, an hour at most.
        let seconds = match (options.seconds, options.requests) {
            (Some(seconds), _) => seconds,
            (None, Some(_)) => 3600.0,
            (None, None) => 5.0,
        };
        phase(&options, seconds, options.requests).await
    });
    measured.statuses.sort_unstable();
    let statuses: serde_json::Map<String, Value> = measured
        .statuses
        .iter()
        .map(|(status, n)| (status.to_string(), Value::from(*n)))
        .collect();
    let report = json!({
        "connections": options.connections,
        "seconds": elapsed,
        "ok": measured.ok,
        "failed": measured.failed,
        "statuses": statuses,
        "rps": measured.ok as f64 / elapsed.max(1e-9),
        "latency_ms": distribution(&mut measured.latency),
        "first_chunk_ms": distribution(&mut measured.first_chunk),
        "gap_ms": distribution(&mut measured.gaps),
    });
    println!("{report}");
    ExitCode::SUCCESS
}
