//! `round_trip/<workload>`: one `provider.chat` through the component against the loopback
//! simulator (format, egress check, wasi-http send over a real socket, parse), for the
//! `chat-small` and `vision-1mib` workloads, on one warm instance.
//!
//! Workloads are generated in memory by `oma_host_tests::workloads` (or read from
//! `$OMA_WORKLOADS/NAME.json` when that is set; a missing file is skipped with a message).

use oma_host_tests::Shared;
use std::time::Instant;

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use oma_host_tests::workloads::read_workload;
use oma_host_tests::{
    call_options, chat_request, endpoint, EgressPolicy, GuestOptions, Harness, LoopbackOnly,
    Simulator,
};

const WORKLOADS: &[&str] = &["chat-small", "vision-1mib"];

fn round_trip(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let harness = Harness::shared().expect("the guest loads");
    let simulator = Simulator::start_unrecorded().expect("the simulator starts");
    let endpoint = endpoint("anthropic", Some(&simulator.base_url()), Some("sk-bench"));
    let options = oma_host_tests::CallOptions {
        egress: EgressPolicy::Offline,
        ..call_options()
    };
    let mut group = c.benchmark_group("round_trip");
    for name in WORKLOADS {
        let Some(text) = read_workload(&format!("round_trip/{name}"), name) else {
            continue;
        };
        let hooks = GuestOptions {
            hooks: Some(Box::new(LoopbackOnly::new())),
            ..GuestOptions::default()
        };
        let mut guest = rt
            .block_on(harness.instantiate_with(hooks))
            .expect("instantiates");
        let messages = rt
            .block_on(guest.messages_from_json(&text))
            .expect("no trap")
            .expect("the workload is valid");
        let request = chat_request("claude-sonnet-4-6", messages);
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        let response = guest
                            .chat(&request, &endpoint, &options)
                            .await
                            .expect("no trap")
                            .expect("the simulator answers");
                        black_box(response);
                    }
                    start.elapsed()
                })
            })
        });
    }
    group.finish();
}

criterion_group!(benches, round_trip);
criterion_main!(benches);
