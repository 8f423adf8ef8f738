//! `oma_host_tests::serve` in process, with the gateway the build made (`artifact::GATEWAY`), on
//! `127.0.0.1:0`: the routes answer through a fresh instance each, the environment given is
//! the one the component reads, requests beyond the pool wait for a slot, a stop lets the
//! request in flight finish, and a component that is not a `wasi:http/proxy` one is refused
//! before anything listens. Loopback only.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use oma_host_tests::artifact::{COMPONENT, GATEWAY};
use oma_host_tests::serve::{ServeOptions, Server};
use oma_host_tests::{Limits, Reply, Simulator, CANNED_TEXT};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use wasmtime_wasi_http::io::TokioIo;

/// A gateway served in process until [`Running::stop`].
struct Running {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: JoinHandle<anyhow::Result<()>>,
}

impl Running {
    /// Binds the gateway on a free loopback port with `env` and a small pool.
    fn start(env: &[(&str, &str)], max_instances: u32) -> Running {
        Running::start_with(ServeOptions {
            env: env
                .iter()
                .map(|(name, value)| (name.to_string(), value.to_string()))
                .collect(),
            max_instances,
            ..ServeOptions::new(GATEWAY)
        })
    }

    /// Binds the gateway on a free loopback port with `options` otherwise.
    fn start_with(options: ServeOptions) -> Running {
        let server = Server::bind(ServeOptions {
            addr: "127.0.0.1:0".parse().expect("an address"),
            ..options
        })
        .expect("the gateway compiles, links and binds");
        let addr = server.local_addr();
        assert!(addr.ip().is_loopback() && addr.port() != 0, "{addr}");
        assert_eq!(server.url(), format!("http://{addr}"));
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(server.serve_until(async {
            let _ = stopped.await;
        }));
        Running { addr, stop, task }
    }

    /// Asks the server to stop and waits until it has.
    async fn stop(self) {
        let _ = self.stop.send(());
        tokio::time::timeout(Duration::from_secs(60), self.task)
            .await
            .expect("the server stops")
            .expect("the server task did not panic")
            .expect("the server stopped cleanly");
    }
}

/// One answer: status, headers and the whole body.
struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "the body is JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// Sends one request on a connection of its own.
async fn send(
    addr: SocketAddr,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Answer {
    try_send(addr, method, path, headers, body)
        .await
        .expect("an answer")
}

/// Sends one request on a connection of its own; the error when the server closed the
/// connection before the request was written (a server may answer early and stop reading).
async fn try_send(
    addr: SocketAddr,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Result<Answer, hyper::Error> {
    let stream = TcpStream::connect(addr).await.expect("connects");
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(connection);
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr.to_string());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request
        .body(Full::new(Bytes::from(body.to_owned())))
        .expect("a request");
    let response = tokio::time::timeout(Duration::from_secs(60), sender.send_request(request))
        .await
        .expect("an answer in time")?;
    let (parts, body) = response.into_parts();
    let body = body.collect().await.expect("the whole body").to_bytes();
    Ok(Answer {
        status: parts.status,
        headers: parts.headers,
        body,
    })
}

async fn get(addr: SocketAddr, path: &str) -> Answer {
    send(addr, Method::GET, path, &[], "").await
}

const HI: &str = r#"[{"role": "user", "content": [{"type": "text", "text": "hi"}]}]"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_answers_its_routes() {
    let server = Running::start(&[], 4);

    let health = get(server.addr, "/healthz").await;
    assert_eq!(health.status, StatusCode::OK);
    assert_eq!(health.header("content-type"), Some("application/json"));
    assert_eq!(health.json(), json!({"status": "ok"}));

    let missing = get(server.addr, "/no/such/route").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    let error = &missing.json()["error"];
    assert_eq!(error["code"], "NOT_FOUND", "{error}");
    assert_eq!(error["retryable"], false, "{error}");

    let validated = send(server.addr, Method::POST, "/v1/validate", &[], HI).await;
    assert_eq!(validated.status, StatusCode::OK);
    assert_eq!(validated.json(), serde_json::from_str::<Value>(HI).unwrap());

    // Several requests on one keep-alive connection, each through an instance of its own.
    let stream = TcpStream::connect(server.addr).await.expect("connects");
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(connection);
    for _ in 0..3 {
        let request = Request::get("/healthz")
            .header("host", server.addr.to_string())
            .body(Full::new(Bytes::new()))
            .expect("a request");
        // The previous exchange may still be settling on the client's side.
        sender.ready().await.expect("the connection stays open");
        let response = sender.send_request(request).await.expect("an answer");
        assert_eq!(response.status(), StatusCode::OK);
        let body = response.into_body().collect().await.expect("a body");
        assert_eq!(body.to_bytes(), Bytes::from_static(br#"{"status":"ok"}"#));
    }
    server.stop().await;
}

/// The environment given is the component's: with `OMA_GATEWAY_TOKEN` set, the gateway asks
/// for it (its health check stays open).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_component_reads_the_environment_it_is_given() {
    let server = Running::start(&[("OMA_GATEWAY_TOKEN", "serve-test-token")], 4);

    let refused = send(server.addr, Method::POST, "/v1/validate", &[], HI).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    assert_eq!(refused.header("www-authenticate"), Some("Bearer"));
    assert!(!String::from_utf8_lossy(&refused.body).contains("serve-test-token"));

    let bearer = [("authorization", "Bearer serve-test-token")];
    let allowed = send(server.addr, Method::POST, "/v1/validate", &bearer, HI).await;
    assert_eq!(allowed.status, StatusCode::OK);
    assert_eq!(get(server.addr, "/healthz").await.status, StatusCode::OK);
    server.stop().await;
}

/// More requests at once than the pool has slots: the extra ones wait for a slot instead of
/// failing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_beyond_the_pool_wait_for_a_slot() {
    let server = Running::start(&[], 2);
    let answers: Vec<JoinHandle<Answer>> = (0..12)
        .map(|i| {
            let addr = server.addr;
            tokio::spawn(async move {
                match i % 2 {
                    0 => get(addr, "/healthz").await,
                    _ => send(addr, Method::POST, "/v1/validate", &[], HI).await,
                }
            })
        })
        .collect();
    for answer in answers {
        assert_eq!(answer.await.expect("no panic").status, StatusCode::OK);
    }
    server.stop().await;
}

/// A request without a `Host` header is answered by the host, not handed to the component.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_without_a_host_is_a_400() {
    let server = Running::start(&[], 2);
    let mut stream = TcpStream::connect(server.addr).await.expect("connects");
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nconnection: close\r\n\r\n")
        .await
        .expect("writes");
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(30), stream.read_to_string(&mut answer))
        .await
        .expect("an answer in time")
        .expect("reads");
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    assert!(answer.contains(r#""name":"Error""#), "{answer}");
    server.stop().await;
}

/// A stop while a run waits on its provider: the run finishes and is answered, then the server
/// returns and accepts nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_lets_the_request_in_flight_finish() {
    let simulator = Simulator::start().expect("the simulator starts");
    simulator.script([Reply::Delay(Duration::from_millis(1500))]);
    let base_url = simulator.base_url();
    let server = Running::start(
        &[
            ("ANTHROPIC_API_KEY", "sk-serve-test"),
            ("ANTHROPIC_BASE_URL", &base_url),
        ],
        2,
    );
    let addr = server.addr;
    let run = tokio::spawn(async move {
        let body = r#"{"provider": "anthropic", "model": "claude-sonnet-4-6", "prompt": "hi"}"#;
        send(addr, Method::POST, "/v1/run", &[], body).await
    });
    for _ in 0..600 {
        if simulator.request_count() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(simulator.request_count(), 1, "the run reached the provider");
    server.stop().await;

    let answer = run.await.expect("no panic");
    assert_eq!(answer.status, StatusCode::OK);
    let result = answer.json();
    assert_eq!(result["success"], true, "{result}");
    assert_eq!(result["output"], CANNED_TEXT, "{result}");
    assert!(!String::from_utf8_lossy(&answer.body).contains("sk-serve-test"));
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "nothing listens after the stop"
    );
}

/// The harness's limits hold per request: a guest past its memory cap or its deadline of guest
/// time, or a request past the wall-clock limit, is answered by the host with its error, and the
/// server goes on serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_limits_apply_to_every_request() {
    // 16 MiB of conversation: read whole within a 24 MiB memory cap, but not parsed within
    // it; and more than 1 ms of guest time.
    let text = "x".repeat(16 << 20);
    let big = json!([{"role": "user", "content": [{"type": "text", "text": text}]}]).to_string();

    let server = Running::start_with(ServeOptions {
        limits: Limits {
            deadline: Limits::DEFAULT_DEADLINE.into(),
            memory: Some(24 << 20),
        },
        max_instances: 2,
        ..ServeOptions::new(GATEWAY)
    });
    let answer = send(server.addr, Method::POST, "/v1/validate", &[], &big).await;
    assert_eq!(answer.status, StatusCode::INTERNAL_SERVER_ERROR);
    let error = &answer.json()["error"];
    assert_eq!(error["name"], "HostError", "{error}");
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.contains("linear memory")
                && m.contains("linear-memory limit")
                && !m.contains("backtrace")),
        "{error}"
    );
    assert_eq!(get(server.addr, "/healthz").await.status, StatusCode::OK);
    server.stop().await;

    let server = Running::start_with(ServeOptions {
        limits: Limits {
            deadline: Some(Duration::from_millis(1)),
            memory: None,
        },
        max_instances: 2,
        ..ServeOptions::new(GATEWAY)
    });
    // The deadline may pass while the body is still being read: the host then answers at once
    // and stops reading, which the client sees as a write to a closed connection.
    match try_send(server.addr, Method::POST, "/v1/validate", &[], &big).await {
        Ok(answer) => {
            assert_eq!(answer.status, StatusCode::INTERNAL_SERVER_ERROR);
            let error = &answer.json()["error"];
            assert!(
                error["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("deadline")),
                "{error}"
            );
        }
        Err(error) => assert!(
            format!("{error:?}").contains("BodyWrite"),
            "the request failed otherwise: {error:?}"
        ),
    }
    assert_eq!(get(server.addr, "/healthz").await.status, StatusCode::OK);
    server.stop().await;

    let simulator = Simulator::start().expect("the simulator starts");
    simulator.script([Reply::Delay(Duration::from_secs(5))]);
    let base_url = simulator.base_url();
    let server = Running::start_with(ServeOptions {
        env: vec![
            ("ANTHROPIC_API_KEY".into(), "sk-serve-test".into()),
            ("ANTHROPIC_BASE_URL".into(), base_url),
        ],
        request_timeout: Duration::from_millis(300),
        max_instances: 2,
        ..ServeOptions::new(GATEWAY)
    });
    let body = r#"{"provider": "anthropic", "model": "claude-sonnet-4-6", "prompt": "hi"}"#;
    let started = std::time::Instant::now();
    let answer = send(server.addr, Method::POST, "/v1/run", &[], body).await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(answer.status, StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(answer.json()["error"]["name"], "HostError");
    assert_eq!(get(server.addr, "/healthz").await.status, StatusCode::OK);
    server.stop().await;
}

/// A component that is not a `wasi:http/proxy` one (the agent component, with imports of its
/// own) is refused when the server is set up, with a message that says so.
#[test]
fn a_component_that_is_not_a_proxy_is_refused() {
    let error = Server::bind(ServeOptions {
        addr: "127.0.0.1:0".parse().expect("an address"),
        max_instances: 1,
        ..ServeOptions::new(COMPONENT)
    })
    .expect_err("the agent component is not a proxy");
    let message = format!("{error:#}");
    assert!(message.contains("wasi:http/proxy"), "{message}");

    let error = Server::bind(ServeOptions {
        addr: "127.0.0.1:0".parse().expect("an address"),
        max_instances: 1,
        ..ServeOptions::new(std::path::Path::new("/nonexistent/component.wasm"))
    })
    .expect_err("no such file");
    assert!(
        format!("{error:#}").contains("could not read the component"),
        "{error:#}"
    );
}

/// A loopback provider that accepts connections and holds every request open, never
/// answering; it reports each request's arrival and the instant its connection was closed by
/// the other side.
struct HoldingProvider {
    addr: SocketAddr,
    arrived: tokio::sync::mpsc::UnboundedReceiver<()>,
    closed: tokio::sync::mpsc::UnboundedReceiver<std::time::Instant>,
    task: JoinHandle<()>,
}

impl HoldingProvider {
    async fn start() -> HoldingProvider {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binds");
        let addr = listener.local_addr().expect("an address");
        let (arrived_tx, arrived) = tokio::sync::mpsc::unbounded_channel();
        let (closed_tx, closed) = tokio::sync::mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let arrived_tx = arrived_tx.clone();
                let closed_tx = closed_tx.clone();
                tokio::spawn(async move {
                    let mut seen = Vec::new();
                    let mut buffer = [0u8; 4096];
                    let mut told = false;
                    loop {
                        match stream.read(&mut buffer).await {
                            Ok(0) | Err(_) => {
                                let _ = closed_tx.send(std::time::Instant::now());
                                return;
                            }
                            Ok(n) => {
                                seen.extend_from_slice(&buffer[..n]);
                                if !told && seen.windows(4).any(|w| w == b"\r\n\r\n") {
                                    told = true;
                                    let _ = arrived_tx.send(());
                                }
                            }
                        }
                    }
                });
            }
        });
        HoldingProvider {
            addr,
            arrived,
            closed,
            task,
        }
    }
}

/// Writes a raw HTTP/1.1 request on a connection of its own and returns the connection, its
/// response unread.
async fn raw_request(addr: SocketAddr, path: &str, headers: &str, body: &str) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.expect("connects");
    let request = format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n{headers}\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.expect("writes");
    stream
}

/// A client that leaves cancels its run: the provider sees its connection closed within about
/// a second of the client closing its own, before the response (a plain run) and while the
/// body is being written (a streamed run, whose head went out before the provider was asked);
/// the request's place in flight is given back at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_cancels_its_run_and_its_provider_request() {
    let mut provider = HoldingProvider::start().await;
    let server = Running::start_with(ServeOptions {
        env: vec![
            ("ANTHROPIC_API_KEY".into(), "sk-serve-test".into()),
            (
                "ANTHROPIC_BASE_URL".into(),
                format!("http://{}", provider.addr),
            ),
        ],
        max_instances: 2,
        max_in_flight: 1,
        ..ServeOptions::new(GATEWAY)
    });
    let body = r#"{"provider": "anthropic", "model": "claude-sonnet-4-6", "prompt": "hi"}"#;
    for (what, headers) in [
        ("a plain run", ""),
        ("a streamed run", "accept: text/event-stream\r\n"),
    ] {
        let mut client = raw_request(server.addr, "/v1/run", headers, body).await;
        tokio::time::timeout(Duration::from_secs(30), provider.arrived.recv())
            .await
            .unwrap_or_else(|_| panic!("{what}: the run reached the provider"));
        if !headers.is_empty() {
            // The streamed response's head is out before the provider is asked.
            let mut head = [0u8; 12];
            tokio::time::timeout(Duration::from_secs(10), client.read_exact(&mut head))
                .await
                .expect("the head in time")
                .expect("reads");
            assert_eq!(&head, b"HTTP/1.1 200", "{what}");
        }
        // The only place in flight is taken: another request is turned away meanwhile.
        let busy = send(server.addr, Method::POST, "/v1/validate", &[], HI).await;
        assert_eq!(busy.status, StatusCode::SERVICE_UNAVAILABLE, "{what}");
        drop(client);
        let left = std::time::Instant::now();
        let closed = tokio::time::timeout(Duration::from_secs(5), provider.closed.recv())
            .await
            .unwrap_or_else(|_| panic!("{what}: the provider's connection was never closed"))
            .expect("a close");
        let after = closed.saturating_duration_since(left);
        assert!(
            after < Duration::from_millis(1200),
            "{what}: closed {after:?} after"
        );
        // The place is free again.
        let mut freed = None;
        for _ in 0..100 {
            let answer = send(server.addr, Method::POST, "/v1/validate", &[], HI).await;
            if answer.status == StatusCode::OK {
                freed = Some(answer);
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(
            freed.is_some(),
            "{what}: the place in flight was not given back"
        );
    }
    provider.task.abort();
    server.stop().await;
}

/// Past the limit of requests in flight a request is a `503` with `Retry-After`, while
/// `/healthz` is still answered; and a run whose instance would grow past the memory budget
/// all instances share is a `503` too, with the server serving on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pressure_is_answered_with_a_503_and_healthz_stays_up() {
    let mut provider = HoldingProvider::start().await;
    let server = Running::start_with(ServeOptions {
        env: vec![
            ("ANTHROPIC_API_KEY".into(), "sk-serve-test".into()),
            (
                "ANTHROPIC_BASE_URL".into(),
                format!("http://{}", provider.addr),
            ),
        ],
        max_instances: 2,
        max_in_flight: 2,
        ..ServeOptions::new(GATEWAY)
    });
    let body = r#"{"provider": "anthropic", "model": "claude-sonnet-4-6", "prompt": "hi"}"#;
    let mut held = Vec::new();
    for _ in 0..2 {
        held.push(raw_request(server.addr, "/v1/run", "", body).await);
        tokio::time::timeout(Duration::from_secs(30), provider.arrived.recv())
            .await
            .expect("the run reached the provider");
    }
    let refused = send(server.addr, Method::POST, "/v1/validate", &[], HI).await;
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.header("retry-after"), Some("1"));
    let error = &refused.json()["error"];
    assert_eq!(error["name"], "HostError", "{error}");
    assert_eq!(error["retryable"], true, "{error}");
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.contains("limit of 2 requests at once")),
        "{error}"
    );
    for _ in 0..3 {
        let health = get(server.addr, "/healthz").await;
        assert_eq!(health.status, StatusCode::OK, "healthz outside the limit");
    }
    drop(held);
    provider.task.abort();
    server.stop().await;

    // A budget smaller than one large request: its instance is stopped when it would grow past
    // it, and answered 503; small requests and the health check go on.
    let server = Running::start_with(ServeOptions {
        max_instances: 2,
        memory_budget: 32 << 20,
        ..ServeOptions::new(GATEWAY)
    });
    let text = "x".repeat(16 << 20);
    let big = json!([{"role": "user", "content": [{"type": "text", "text": text}]}]).to_string();
    let answer = send(server.addr, Method::POST, "/v1/validate", &[], &big).await;
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(answer.header("retry-after"), Some("1"));
    let error = &answer.json()["error"];
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.contains("shared budget of 33554432 bytes")),
        "{error}"
    );
    let small = send(server.addr, Method::POST, "/v1/validate", &[], HI).await;
    assert_eq!(small.status, StatusCode::OK);
    assert_eq!(get(server.addr, "/healthz").await.status, StatusCode::OK);
    server.stop().await;
}

/// A body under the body limit that holds a million empty text blocks (26 MB) is refused
/// before it is parsed, with a typed error naming the limit, and costs the instance little: it
/// fits in a 128 MiB memory cap. Several at once fit in the default budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_million_blocks_under_the_body_limit_are_refused_cheaply() {
    let block = r#"{"type":"text","text":""}"#;
    let blocks = vec![block; 1_000_000].join(",");
    let body = format!(r#"[{{"role":"user","content":[{blocks}]}}]"#);
    assert!(
        body.len() > 24 << 20 && body.len() < 32 << 20,
        "{}",
        body.len()
    );
    let server = Running::start_with(ServeOptions {
        limits: Limits {
            deadline: Limits::DEFAULT_DEADLINE.into(),
            memory: Some(128 << 20),
        },
        max_instances: 4,
        ..ServeOptions::new(GATEWAY)
    });
    let body = std::sync::Arc::new(body);
    let answers: Vec<JoinHandle<Answer>> = (0..3)
        .map(|_| {
            let (addr, body) = (server.addr, std::sync::Arc::clone(&body));
            tokio::spawn(async move { send(addr, Method::POST, "/v1/validate", &[], &body).await })
        })
        .collect();
    for answer in answers {
        let answer = answer.await.expect("no panic");
        assert_eq!(
            answer.status,
            StatusCode::PAYLOAD_TOO_LARGE,
            "{:?}",
            answer.body
        );
        let error = &answer.json()["error"];
        assert!(
            error["message"]
                .as_str()
                .is_some_and(|m| m.contains("values, the limit")
                    || m.contains("objects and arrays, the limit")),
            "{error}"
        );
    }
    assert_eq!(get(server.addr, "/healthz").await.status, StatusCode::OK);
    server.stop().await;
}

/// A trace collector that takes the gateway's exports and never answers costs the clients
/// nothing: with one request slot, each request's instance goes on with its export in a
/// finishing place (`FINISHING_INSTANCES`) once its answer is out, so the next request gets the
/// slot at once and is answered while the exports before it still wait on the collector (each
/// waits up to the export's 2-second timeout; a slot held by it would serve these requests
/// only once the export before had given up and closed its connection).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_never_answers_holds_no_request_slot() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    let simulator = Simulator::start().expect("the simulator starts");
    let base_url = simulator.base_url();
    let collector = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binds");
    let endpoint = format!("http://{}", collector.local_addr().expect("an address"));
    let (accepted, closed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let holder = {
        let (accepted, closed) = (Arc::clone(&accepted), Arc::clone(&closed));
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = collector.accept().await {
                accepted.fetch_add(1, Ordering::SeqCst);
                let closed = Arc::clone(&closed);
                // Reads the export and never answers; notes when the gateway gives up on it.
                tokio::spawn(async move {
                    let mut buffer = [0u8; 4096];
                    while matches!(stream.read(&mut buffer).await, Ok(n) if n > 0) {}
                    closed.fetch_add(1, Ordering::SeqCst);
                });
            }
        })
    };
    let server = Running::start(
        &[
            ("ANTHROPIC_API_KEY", "sk-serve-test"),
            ("ANTHROPIC_BASE_URL", &base_url),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
        ],
        1,
    );
    let body = r#"{"provider": "anthropic", "model": "claude-sonnet-4-6", "prompt": "hi"}"#;
    for _ in 0..3 {
        let answer = send(server.addr, Method::POST, "/v1/run", &[], body).await;
        assert_eq!(answer.status, StatusCode::OK);
        assert_eq!(answer.json()["output"], json!(CANNED_TEXT));
    }
    for _ in 0..100 {
        if accepted.load(Ordering::SeqCst) >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        accepted.load(Ordering::SeqCst) >= 2,
        "the exports reach the collector"
    );
    assert_eq!(
        closed.load(Ordering::SeqCst),
        0,
        "every request was answered while the exports before it still waited"
    );
    holder.abort();
    server.stop().await;
}
