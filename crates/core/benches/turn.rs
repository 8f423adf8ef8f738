//! What validating a conversation once per run, instead of once per turn, saves on each turn.
//!
//! A run validates its conversation when it is made (every message that joins it later, a
//! hook's, a tool result, a response, is checked as it joins), and each turn's adapter is handed
//! the request as [`Validated`], so it formats without checking again. Before, every adapter's
//! `format` validated the whole conversation again on every turn. This benchmark measures, on
//! the generated workloads, natively:
//!
//! - `validate`: [`validate_messages`] of the conversation, the work each turn no longer does;
//! - `format`: [`Adapter::format`], which validates and then formats (every turn before);
//! - `format-validated`: [`Adapter::format_validated`] of a request validated once (every turn
//!   now).
//!
//! `cargo bench -p oma-core --bench turn` (criterion options after `--`). Results and how they
//! were taken: docs/performance.md, "Validated once".

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use oma_core::adapter::{
    for_provider, Adapter, ChatRequest, Credentials, Endpoint, IdSource, Sampling, Validated,
};
use oma_core::json::messages_from_json;
use oma_core::validate::validate_messages;

/// The workloads whose conversations have many messages or many blocks: what a long run sends
/// on every turn.
const WORKLOADS: &[&str] = &["chat-small", "chat-history-51", "tools-rich-20"];

/// The wire formats measured: OMA's default provider and the OpenAI-compatible one.
const PROVIDERS: &[&str] = &["anthropic", "openai"];

fn request(text: &str) -> ChatRequest {
    ChatRequest {
        model: "bench-model".into(),
        system_prompt: Some("You are a benchmark.".into()),
        messages: messages_from_json(text).expect("the workload is valid OMA JSON"),
        sampling: Sampling {
            max_tokens: Some(1024),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn turn(c: &mut Criterion) {
    let endpoint = Endpoint {
        credentials: Credentials::ApiKey("sk-bench".into()),
        ..Default::default()
    };
    let mut group = c.benchmark_group("turn");
    for name in WORKLOADS {
        let text = oma_workloads::generate(name).expect("a known workload");
        let request = request(&text);
        group.throughput(Throughput::Elements(1));
        group.bench_function(BenchmarkId::new("validate", name), |b| {
            b.iter(|| validate_messages(black_box(&request.messages)).expect("valid"))
        });
        for provider in PROVIDERS {
            let adapter: Box<dyn Adapter> =
                for_provider(provider, None, IdSource::default()).expect("a known provider");
            let validated = Validated::check(&request).expect("valid");
            // Both paths must build the same request, or the comparison means nothing.
            let checked = adapter.format(&request, &endpoint).expect("formats");
            let trusted = adapter
                .format_validated(validated, &endpoint)
                .expect("formats");
            assert_eq!(
                checked.body, trusted.body,
                "{name}/{provider}: the bodies differ"
            );
            let id = format!("{name}/{provider}");
            group.bench_function(BenchmarkId::new("format", &id), |b| {
                b.iter(|| {
                    adapter
                        .format(black_box(&request), &endpoint)
                        .expect("formats")
                })
            });
            group.bench_function(BenchmarkId::new("format-validated", &id), |b| {
                b.iter(|| {
                    adapter
                        .format_validated(black_box(validated), &endpoint)
                        .expect("formats")
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, turn);
criterion_main!(benches);
