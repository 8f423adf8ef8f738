//! The gateway benchmark's own tools (`bench/gateway-bench/`): `bench-load`, the load generator,
//! against `loopback-provider`, whole and with a streamed answer paced by `--chunk-gap-ms`.
//! What the benchmark reports (requests counted, failures, the time to the first chunk and the
//! gaps between chunks) must be what happened on the wire.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

/// A provider started for one test, killed when dropped.
struct Provider {
    child: Child,
    url: String,
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn provider(args: &[&str]) -> Provider {
    let mut child = Command::new(env!("CARGO_BIN_EXE_loopback-provider"))
        .args(["--threads", "1", "--max-seconds", "60"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("loopback-provider starts");
    let stderr = child.stderr.take().expect("its stderr");
    let mut line = String::new();
    BufReader::new(stderr)
        .read_line(&mut line)
        .expect("its first line");
    let url = line
        .split("listening on ")
        .nth(1)
        .expect("a listening line")
        .trim()
        .to_owned();
    Provider { child, url }
}

fn load(url: &str, body: &str, args: &[&str]) -> Value {
    let dir = std::env::temp_dir().join(format!("oma-bench-tools-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let file = dir.join(format!("{}.json", body.len()));
    std::fs::write(&file, body).expect("the body written");
    let out = Command::new(env!("CARGO_BIN_EXE_bench-load"))
        .args(["--url", url, "--body"])
        .arg(&file)
        .args(["--header", "content-type: application/json"])
        .args(["--timeout-ms", "10000"])
        .args(args)
        .output()
        .expect("bench-load runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON report")
}

/// The provider's counters (`GET /__stats`), over a plain connection.
fn provider_stats(url: &str) -> Value {
    use std::io::{Read, Write};
    let addr = url.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(addr).expect("the provider answers");
    write!(
        stream,
        "GET /__stats HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n"
    )
    .expect("the request written");
    let mut text = String::new();
    stream.read_to_string(&mut text).expect("the answer read");
    let body = text.split("\r\n\r\n").nth(1).expect("a body");
    serde_json::from_str(body).expect("JSON counters")
}

#[test]
fn bench_load_counts_what_the_provider_answered() {
    let provider = provider(&[]);
    let url = format!("{}/v1/chat/completions", provider.url);
    let body = r#"{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}"#;
    let report = load(
        &url,
        body,
        &[
            "--connections",
            "2",
            "--requests",
            "20",
            "--expect",
            "simulator",
        ],
    );
    assert_eq!(report["ok"], 20, "{report}");
    assert_eq!(report["failed"], 0, "{report}");
    assert_eq!(report["statuses"]["200"], 20, "{report}");
    assert_eq!(report["latency_ms"]["count"], 20, "{report}");
    let stats = provider_stats(&provider.url);
    assert_eq!(stats["requests"], 20, "{stats}");
    assert!(
        stats["connections"].as_u64() <= Some(3),
        "kept alive (and this one): {stats}"
    );

    // An answer without the expected text is a failure, and so is a status that is not 2xx.
    let missing = load(
        &url,
        body,
        &["--requests", "3", "--expect", "not in the answer"],
    );
    assert_eq!(
        (missing["ok"].as_u64(), missing["failed"].as_u64()),
        (Some(0), Some(3))
    );
    let unknown = load(
        &format!("{}/v1/nowhere", provider.url),
        body,
        &["--requests", "2"],
    );
    assert_eq!(unknown["failed"], 2, "{unknown}");
    assert_eq!(unknown["statuses"]["404"], 2, "{unknown}");
}

#[test]
fn a_paced_stream_shows_its_gaps_and_its_first_chunk() {
    let gap_ms = 100.0;
    let provider = provider(&["--chunk-gap-ms", "100"]);
    let url = format!("{}/v1/chat/completions", provider.url);
    let stream = r#"{"model": "gpt-4o-mini", "stream": true, "messages": [{"role": "user", "content": "hi"}]}"#;
    let report = load(&url, stream, &["--requests", "2", "--expect", "simulator"]);
    assert_eq!(report["ok"], 2, "{report}");
    let first = report["first_chunk_ms"]["p50"]
        .as_f64()
        .expect("a first chunk");
    let gap = report["gap_ms"]["p50"]
        .as_f64()
        .expect("gaps between chunks");
    assert!(first < gap_ms, "the first event goes out at once: {report}");
    assert!(gap >= gap_ms * 0.9, "events {gap_ms} ms apart: {report}");
    let latency = report["latency_ms"]["p50"].as_f64().expect("a latency");
    // An OpenAI stream is several events (the pieces of the text, the end, `[DONE]`).
    assert!(latency >= gap_ms * 3.0, "{report}");

    // A whole answer from the same provider is not paced.
    let whole = r#"{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}"#;
    let report = load(&url, whole, &["--requests", "2", "--expect", "simulator"]);
    assert_eq!(report["ok"], 2, "{report}");
    assert!(
        report["latency_ms"]["p50"].as_f64().expect("a latency") < gap_ms,
        "{report}"
    );
    assert!(report["gap_ms"].is_null(), "one chunk, no gaps: {report}");
}
