//! The `portable` world, as a dynamic host drives it.
//!
//! `driver_run/<workload>`: one run of a `driver` session with the answers in memory: the input
//! as OMA JSON text (`run-json`), the steps until `send`, the canned provider answer as a string
//! (`response`), and the result as OMA JSON text (`done`). What a JavaScript or Python host pays
//! the component for one `run()`, without its own HTTP.
//!
//! `parse-response/<provider>`: `codec.parse-response` with the body as a string, against the
//! native adapter. (`format-request`, whose body is a string too, is in `benches/component.rs`.)

use oma_host_tests::Shared;
use std::time::Instant;

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use oma_host_tests::driver_types::{
    Answer, Payloads, Poll, Response, RunReport, SessionOptions, Step,
};
use oma_host_tests::workloads::{read_workload, WORKLOADS};
use oma_host_tests::{Ask, DriverHarness, GuestOptions};
use serde_json::json;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

fn driver_run(c: &mut Criterion) {
    let rt = runtime();
    let harness = DriverHarness::shared().expect("the portable guest loads");
    let mut group = c.benchmark_group("driver_run");
    for name in WORKLOADS {
        let Some(text) = read_workload(&format!("driver_run/{name}"), name) else {
            continue;
        };
        let mut guest = rt
            .block_on(harness.instantiate_with(GuestOptions::default()))
            .expect("instantiates");
        let (provider, model, path) = if name.starts_with("video") {
            ("minimax", "MiniMax-M1", "/v1/chat/completions")
        } else {
            ("anthropic", "claude-sonnet-4-6", "/v1/messages")
        };
        let config = json!({
            "name": "bench", "model": model, "provider": provider,
            "baseURL": "http://127.0.0.1:9", "apiKey": "sk-bench"
        })
        .to_string();
        let agent = rt
            .block_on(guest.create_agent_json(&config))
            .expect("no trap")
            .expect("a valid configuration");
        let reply = String::from_utf8(Ask::of(path, br#"{"model":"m"}"#).success_body())
            .expect("a JSON reply");
        let options = SessionOptions {
            payloads: Payloads::Json,
            seed: 1,
            trace: None,
            records: None,
        };
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.sample_size(if text.len() > 1 << 20 { 20 } else { 100 });
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        let (store, bindings) = guest.parts();
                        let session = bindings
                            .oma_agent_driver()
                            .agent()
                            .call_run_json(store, agent.resource(), &text, &options)
                            .await
                            .expect("no trap")
                            .expect("the workload is valid");
                        let result = loop {
                            match guest.next_step(session).await.expect("no trap") {
                                Ok(Poll::Step(Step::Send(request))) => {
                                    black_box(request);
                                    let answer = Answer::Response(Response {
                                        status: 200,
                                        headers: Vec::new(),
                                        body: reply.clone(),
                                    });
                                    guest
                                        .answer(session, &answer)
                                        .await
                                        .expect("no trap")
                                        .expect("due");
                                }
                                Ok(Poll::Finished(RunReport::Json(result))) => break result,
                                Ok(_) => {}
                                Err(error) => panic!("{}", error.message),
                            }
                        };
                        assert!(result.starts_with(r#"{"success":true"#), "{result}");
                        let (store, _) = guest.parts();
                        session.resource_drop_async(store).await.expect("drops");
                    }
                    start.elapsed()
                })
            })
        });
    }
    group.finish();
}

fn parse_response(c: &mut Criterion) {
    let rt = runtime();
    let harness = oma_host_tests::Harness::shared().expect("the guest loads");
    let mut guest = rt.block_on(harness.instantiate()).expect("instantiates");
    let mut group = c.benchmark_group("parse-response");
    for (provider, path) in [
        ("anthropic", "/v1/messages"),
        ("openai", "/v1/chat/completions"),
        ("gemini", "/v1beta/models/m:generateContent"),
        ("bedrock", "/model/m/converse"),
    ] {
        let body = String::from_utf8(Ask::of(path, br#"{"model":"m"}"#).success_body())
            .expect("a JSON reply");
        let request = oma_host_tests::chat_request("m", Vec::new());
        let endpoint = oma_host_tests::endpoint(provider, None, None);
        let parsed = rt
            .block_on(guest.parse_response(&request, &endpoint, &body))
            .expect("no trap");
        assert!(parsed.is_ok(), "{provider}: {parsed:?}");
        let adapter =
            oma_core::adapter::for_provider(provider, None, oma_core::adapter::IdSource::default())
                .expect("a known provider");
        let native_context = oma_core::adapter::ResponseContext {
            model: "m".into(),
            message_count: 0,
        };
        group.bench_function(BenchmarkId::new("component", provider), |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        let parsed = guest
                            .parse_response(&request, &endpoint, black_box(&body))
                            .await
                            .expect("no trap");
                        black_box(parsed.expect("parses"));
                    }
                    start.elapsed()
                })
            })
        });
        group.bench_function(BenchmarkId::new("native", provider), |b| {
            b.iter(|| {
                adapter
                    .parse(&native_context, black_box(body.as_bytes()))
                    .expect("parses")
            })
        });
    }
    group.finish();
}

criterion_group!(benches, driver_run, parse_response);
criterion_main!(benches);
