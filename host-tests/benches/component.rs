//! Benchmarks of the guest through wasmtime, against the same code run natively.
//!
//! - `instantiate`: a fresh instance from the `InstancePre` (pooling allocator), dropped again.
//! - `from_json+validate/<workload>`: `messages-from-json` then `validate-messages` on every
//!   workload of `oma_host_tests::workloads`, through the component (one warm instance) and natively
//!   (`oma_core::json::messages_from_json` + `oma_core::validate::validate_messages`).
//! - `validate/<workload>`: `validate-messages` alone on already-typed messages (through the
//!   component this includes lowering the messages into the guest).
//!
//! - `format-request/<workload>`: `codec.format-request` on the typed messages of every workload
//!   (lowering the request, validation, conversion, and lifting the HTTP request back), through
//!   the component and natively (`adapter::for_provider(..).format(..)`). Video workloads go to
//!   `openai` (the README's "video-16mib, OpenAI-compatible" figure), the others to `anthropic`
//!   (its "vision-1mib, Anthropic" figure); see [`format_provider`].
//!
//! Workloads are generated in memory by `oma_host_tests::workloads` (or read from
//! `$OMA_WORKLOADS/NAME.json` when that is set). `cargo bench` builds the guest with the
//! `wasm-release` profile.

use oma_host_tests::Shared;
use std::future::Future;
use std::time::{Duration, Instant};

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use oma_host_tests::workloads::{read_workload, WORKLOADS};
use oma_host_tests::{Endpoint, Guest, Harness};
use tokio::runtime::Runtime;

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a tokio runtime")
}

/// Runs `iters` iterations of `f` inside one `block_on` and times them.
fn timed<F, Fut>(rt: &Runtime, iters: u64, mut f: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    rt.block_on(async {
        let start = Instant::now();
        for _ in 0..iters {
            f().await;
        }
        start.elapsed()
    })
}

fn instantiate(c: &mut Criterion) {
    let rt = runtime();
    let harness = Harness::shared().expect("the guest loads");
    eprintln!(
        "guest: {} ({:?}, loaded in {:?})",
        harness.component(),
        harness.origin(),
        harness.load_time()
    );
    c.bench_function("instantiate", |b| {
        b.iter_custom(|iters| {
            timed(&rt, iters, || async {
                let guest = harness.instantiate().await.expect("instantiates");
                black_box(guest);
            })
        })
    });
}

async fn from_json_and_validate(guest: &mut Guest, text: &str) {
    let messages = guest
        .messages_from_json(text)
        .await
        .expect("no trap")
        .expect("the workload is valid");
    guest
        .validate_messages(&messages)
        .await
        .expect("no trap")
        .expect("the workload is valid");
    black_box(messages);
}

/// Every workload that could be had, by name (a missing one is reported by `read_workload`).
fn load_workloads() -> Vec<(&'static str, String)> {
    WORKLOADS
        .iter()
        .filter_map(|name| {
            read_workload(&format!("workloads/{name}"), name).map(|text| (*name, text))
        })
        .collect()
}

fn workloads(c: &mut Criterion) {
    let loaded = load_workloads();
    let rt = runtime();
    let harness = Harness::shared().expect("the guest loads");
    for (name, text) in &loaded {
        let mut guest = rt.block_on(harness.instantiate()).expect("instantiates");
        let mut group = c.benchmark_group("from_json+validate");
        group.throughput(Throughput::Bytes(text.len() as u64));
        if text.len() > 1 << 20 {
            group.sample_size(10);
        }
        group.bench_function(BenchmarkId::new("component", name), |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        from_json_and_validate(&mut guest, text).await;
                    }
                    start.elapsed()
                })
            })
        });
        group.bench_function(BenchmarkId::new("native", name), |b| {
            b.iter(|| {
                let messages = oma_core::json::messages_from_json(black_box(text))
                    .expect("the workload is valid");
                oma_core::validate::validate_messages(&messages).expect("valid");
                messages
            })
        });
        group.finish();

        let typed = rt
            .block_on(guest.messages_from_json(text))
            .expect("no trap")
            .expect("valid");
        let native = oma_core::json::messages_from_json(text).expect("valid");
        let mut group = c.benchmark_group("validate");
        group.throughput(Throughput::Bytes(text.len() as u64));
        if text.len() > 1 << 20 {
            group.sample_size(10);
        }
        group.bench_function(BenchmarkId::new("component", name), |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        guest
                            .validate_messages(black_box(&typed))
                            .await
                            .expect("no trap")
                            .expect("valid");
                    }
                    start.elapsed()
                })
            })
        });
        group.bench_function(BenchmarkId::new("native", name), |b| {
            b.iter(|| oma_core::validate::validate_messages(black_box(&native)))
        });
        group.finish();
    }
}

/// The provider a workload is formatted for: `openai` for video (Anthropic has no video block),
/// `anthropic` for everything else.
fn format_provider(workload: &str) -> &'static str {
    if workload.starts_with("video") {
        "openai"
    } else {
        "anthropic"
    }
}

/// A key that is only ever formatted, never sent.
const BENCH_KEY: &str = "sk-bench-not-a-key";

fn format_requests(c: &mut Criterion) {
    let loaded = load_workloads();
    let rt = runtime();
    let harness = Harness::shared().expect("the guest loads");
    let mut group = c.benchmark_group("format-request");
    for (name, text) in &loaded {
        let provider = format_provider(name);
        let mut guest = rt.block_on(harness.instantiate()).expect("instantiates");
        let messages = rt
            .block_on(guest.messages_from_json(text))
            .expect("no trap")
            .expect("the workload is valid");
        let mut request = oma_host_tests::chat_request("bench-model", messages);
        request.system_prompt = Some("You are a benchmark.".into());
        request.sampling.max_tokens = Some(1024);
        let endpoint = Endpoint {
            provider: provider.into(),
            base_url: None,
            api_key: Some(BENCH_KEY.into()),
            region: None,
            aws: None,
            now_ms: None,
        };
        let native_request = oma_core::adapter::ChatRequest {
            model: "bench-model".into(),
            system_prompt: Some("You are a benchmark.".into()),
            messages: oma_core::json::messages_from_json(text).expect("valid"),
            sampling: oma_core::adapter::Sampling {
                max_tokens: Some(1024),
                ..Default::default()
            },
            ..Default::default()
        };
        let native_endpoint = oma_core::adapter::Endpoint {
            credentials: oma_core::adapter::Credentials::ApiKey(BENCH_KEY.into()),
            ..Default::default()
        };
        let adapter =
            oma_core::adapter::for_provider(provider, None, oma_core::adapter::IdSource::default())
                .expect("a known provider");

        // Both sides must build the same body, or the comparison means nothing.
        let through = rt
            .block_on(guest.format_request(&request, &endpoint))
            .expect("no trap")
            .expect("the workload formats");
        let native = adapter
            .format(&native_request, &native_endpoint)
            .expect("the workload formats");
        assert_eq!(through.body, native.body, "{name}: the bodies differ");
        eprintln!(
            "format-request/{name}: {provider}, {} -> {} body bytes",
            text.len(),
            native.body.len()
        );

        group.throughput(Throughput::Bytes(text.len() as u64));
        group.sample_size(if text.len() > 1 << 20 { 10 } else { 100 });
        group.bench_function(BenchmarkId::new("component", name), |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        let http = guest
                            .format_request(black_box(&request), &endpoint)
                            .await
                            .expect("no trap")
                            .expect("formats");
                        black_box(http);
                    }
                    start.elapsed()
                })
            })
        });
        group.bench_function(BenchmarkId::new("native", name), |b| {
            b.iter(|| {
                adapter
                    .format(black_box(&native_request), &native_endpoint)
                    .expect("formats")
            })
        });
    }
    group.finish();
}

criterion_group!(benches, instantiate, workloads, format_requests);
criterion_main!(benches);
