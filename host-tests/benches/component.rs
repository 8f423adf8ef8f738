//! Benchmarks of the guest through wasmtime, against the same code run natively.
//!
//! - `instantiate`: a fresh instance from the `InstancePre` (pooling allocator), dropped again.
//! - `from_json+validate/<workload>`: `messages-from-json` then `validate-messages` on every
//!   workload of `bench/gen_workloads.py`, through the component (one warm instance) and natively
//!   (`oma_component::json::messages_from_json` + `oma_component::validate::validate_messages`).
//! - `validate/<workload>`: `validate-messages` alone on already-typed messages (through the
//!   component this includes lowering the messages into the guest).
//!
//! Workloads are read from `$OMA_WORKLOADS` (default `target/workloads` in the workspace);
//! generate them with `python3 ../shared/bench/gen_workloads.py target/workloads` from the
//! workspace root. `cargo bench` builds the guest with the `wasm-release` profile.

use std::future::Future;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use oma_harness::{Guest, Harness};
use tokio::runtime::Runtime;

const WORKLOADS: &[&str] = &[
    "chat-small",
    "chat-history-51",
    "vision-1mib",
    "tools-rich-20",
    "video-url",
    "video-16mib",
];

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a tokio runtime")
}

fn workloads_dir() -> PathBuf {
    match std::env::var_os("OMA_WORKLOADS") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/workloads")),
    }
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
        harness.wasm_path().display(),
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

fn workloads(c: &mut Criterion) {
    let dir = workloads_dir();
    let loaded: Vec<(&str, String)> = WORKLOADS
        .iter()
        .filter_map(|name| {
            let path = dir.join(format!("{name}.json"));
            std::fs::read_to_string(&path)
                .ok()
                .map(|text| (*name, text))
        })
        .collect();
    if loaded.len() < WORKLOADS.len() {
        eprintln!(
            "workloads missing in {}: generate them with \
             `python3 ../shared/bench/gen_workloads.py target/workloads` from the workspace root \
             (or set OMA_WORKLOADS); benchmarking the {} found",
            dir.display(),
            loaded.len()
        );
    }

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
                let messages = oma_component::json::messages_from_json(black_box(text))
                    .expect("the workload is valid");
                oma_component::validate::validate_messages(&messages).expect("valid");
                messages
            })
        });
        group.finish();

        let typed = rt
            .block_on(guest.messages_from_json(text))
            .expect("no trap")
            .expect("valid");
        let native = oma_component::json::messages_from_json(text).expect("valid");
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
            b.iter(|| oma_component::validate::validate_messages(black_box(&native)))
        });
        group.finish();
    }
}

criterion_group!(benches, instantiate, workloads);
criterion_main!(benches);
