//! What reading a message list straight into the model saves over reading it through a
//! `serde_json::Value`, OMA's guard and the typing.
//!
//! On the generated workloads, natively:
//!
//! - `full`: the text parsed into a [`Value`] (after the value count), then
//!   [`messages_from_value`] (the guard and the typing): every message list before;
//! - `direct`: [`messages_from_json`], which reads the list straight into the model
//!   ([`direct_messages`]: messages and blocks without a `Value`, a block with media as a small
//!   `Value` through the guard and the typing) and takes the full path only where that gives up.
//!
//! `cargo bench -p oma-core --bench read` (criterion options after `--`). Results:
//! docs/performance.md, "A long history".

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use oma_core::json::{direct_messages, from_str, messages_from_json, messages_from_value};
use serde_json::Value;

const WORKLOADS: &[&str] = &[
    "chat-small",
    "chat-history-51",
    "tools-rich-20",
    "vision-1mib",
];

fn read(c: &mut Criterion) {
    let mut group = c.benchmark_group("read");
    for name in WORKLOADS {
        let text = oma_workloads::generate(name).expect("a known workload");
        let full = |text: &str| {
            let value: Value = from_str(text).expect("JSON");
            messages_from_value(value).expect("valid")
        };
        assert_eq!(messages_from_json(&text).expect("valid"), full(&text));
        assert!(direct_messages(&text).is_some(), "{name} is read directly");
        group.bench_function(BenchmarkId::new("full", name), |b| {
            b.iter(|| full(black_box(&text)))
        });
        group.bench_function(BenchmarkId::new("direct", name), |b| {
            b.iter(|| messages_from_json(black_box(&text)).expect("valid"))
        });
    }
    group.finish();
}

criterion_group!(benches, read);
criterion_main!(benches);
