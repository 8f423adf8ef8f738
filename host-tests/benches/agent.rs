//! `run/<workload>`: one full `agent.run` through the component against the loopback simulator,
//! on every workload of `oma_host_tests::workloads`, on one warm instance and one agent.
//!
//! A run is everything a host pays for one call: lowering the messages into the guest (the
//! defensive copy), validation, the turn loop, formatting, the egress check, the wasi-http
//! request over a real loopback socket, parsing, and lifting the result back. The simulator
//! answers each request with the canned text (no tool calls: one turn). Text and image
//! workloads go to the Anthropic format; the video workloads to MiniMax (OpenAI-compatible,
//! `video_url`), since Anthropic has no video mapping.
//!
//! `run_in_process/<workload>`: the same with the provider answered in-process by the
//! `CaptureOutbound` hook (no socket): what the component and the WIT boundary cost alone.
//!
//! `bare_post/<workload>`: the request a run of that workload sends (its method, path, headers
//! and body, captured once), sent by the host alone through the same pooled client to the same
//! simulator, with the whole response read: the floor a run through this host cannot go under.
//! A run's time above it is what the component and the WIT boundary add.
//!
//! The simulator serves from a thread of its own; with `OMA_BENCH_SERVER=main` it serves from
//! the benchmark's own (current-thread) runtime instead, so that client and provider share one
//! thread and no request crosses to another CPU. `bench/oma-node/run-bench.mjs` measures the
//! same thing for OMA on Node, and takes the same variable; the README sets the two side by
//! side. Workloads are generated in memory by `oma_host_tests::workloads`
//! (or read from `$OMA_WORKLOADS/NAME.json` when that is set; a missing file is skipped).

use oma_host_tests::Shared;
use std::time::Instant;

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use oma_host_tests::workloads::{read_workload, WORKLOADS};
use oma_host_tests::{
    agent_config, endpoint, offline_options, send_bare, AgentHandle, BareRequest, CannedResponse,
    CaptureOutbound, Guest, GuestOptions, Harness, LoopbackOnly, RecordedRequest, RunInput,
    Simulator, WasiHttpHooks,
};

fn run(c: &mut Criterion) {
    bench_runs(c, "run", false);
}

fn run_in_process(c: &mut Criterion) {
    bench_runs(c, "run_in_process", true);
}

/// One group of runs; `in_process` answers in-process instead of over the loopback socket.
fn bench_runs(c: &mut Criterion, group_name: &str, in_process: bool) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let harness = Harness::shared().expect("the guest loads");
    let simulator = simulator(&rt);
    let mut group = c.benchmark_group(group_name);
    for name in WORKLOADS {
        let Some(text) = read_workload(&format!("{group_name}/{name}"), name) else {
            continue;
        };
        let hooks: Box<dyn WasiHttpHooks> = if in_process {
            Box::new(CaptureOutbound::answering(CannedResponse::success_for))
        } else {
            Box::new(LoopbackOnly::new())
        };
        let Prepared {
            mut guest,
            agent,
            input,
        } = prepare(&rt, harness, hooks, &simulator.base_url(), name, &text);
        group.throughput(Throughput::Bytes(text.len() as u64));
        if name == &"video-16mib" {
            group.sample_size(20);
        } else {
            group.sample_size(100);
        }
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        let result = guest
                            .run(&agent, &input)
                            .await
                            .expect("no trap")
                            .expect("the input is valid");
                        assert!(result.success, "{:?}", result.failure);
                        black_box(result);
                    }
                    start.elapsed()
                })
            })
        });
    }
    group.finish();
}

/// The loopback simulator, on its own thread or, with `OMA_BENCH_SERVER=main`, on `rt`.
fn simulator(rt: &tokio::runtime::Runtime) -> Simulator {
    let started = match std::env::var("OMA_BENCH_SERVER").as_deref() {
        Ok("main") => Simulator::start_unrecorded_on(rt.handle()),
        Ok("thread") | Err(_) => Simulator::start_unrecorded(),
        Ok(other) => panic!("OMA_BENCH_SERVER is `main` or `thread`, not {other:?}"),
    };
    started.expect("the simulator starts")
}

/// The provider and model a workload's runs use: MiniMax for video (Anthropic has no video
/// mapping), Anthropic for the rest.
fn provider_for(name: &str) -> (&'static str, &'static str) {
    if name.starts_with("video") {
        ("minimax", "MiniMax-M1")
    } else {
        ("anthropic", "claude-sonnet-4-6")
    }
}

/// `bare_post/<workload>`: the run's request without the component (see the module docs).
fn bare_post(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let harness = Harness::shared().expect("the guest loads");
    let simulator = simulator(&rt);
    let base_url = simulator.base_url();
    let client = LoopbackOnly::new();
    let mut group = c.benchmark_group("bare_post");
    for name in WORKLOADS {
        let Some(text) = read_workload(&format!("bare_post/{name}"), name) else {
            continue;
        };
        let recorded = captured_request(&rt, harness, &base_url, name, &text);
        let request = BareRequest::new(&base_url, &recorded).expect("the request is valid");
        let (status, _) = rt
            .block_on(send_bare(&client, &request))
            .expect("the simulator answers");
        assert_eq!(status, 200, "the simulator accepts the run's request");
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.sample_size(if name == &"video-16mib" { 20 } else { 100 });
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        let answer = send_bare(&client, &request)
                            .await
                            .expect("the simulator answers");
                        black_box(answer);
                    }
                    start.elapsed()
                })
            })
        });
    }
    group.finish();
}

/// A guest with an agent for workload `name` (JSON `text`) whose provider is at `base_url`, and
/// the run's input.
struct Prepared {
    guest: Guest,
    agent: AgentHandle,
    input: RunInput,
}

fn prepare(
    rt: &tokio::runtime::Runtime,
    harness: &Harness,
    hooks: Box<dyn WasiHttpHooks>,
    base_url: &str,
    name: &str,
    text: &str,
) -> Prepared {
    let options = GuestOptions {
        hooks: Some(hooks),
        ..GuestOptions::default()
    };
    let mut guest = rt
        .block_on(harness.instantiate_with(options))
        .expect("instantiates");
    let messages = rt
        .block_on(guest.messages_from_json(text))
        .expect("no trap")
        .expect("the workload is valid");
    let (provider, model) = provider_for(name);
    let mut config = agent_config(
        "bench",
        model,
        endpoint(provider, Some(base_url), Some("sk-bench")),
    );
    config.call = offline_options();
    let agent = rt
        .block_on(guest.create_agent(&config))
        .expect("no trap")
        .expect("the agent is valid");
    Prepared {
        guest,
        agent,
        input: RunInput::Messages(messages),
    }
}

/// The one request a run of workload `name` (JSON `text`) sends to `base_url`, recorded by a
/// capturing hook instead of being sent.
fn captured_request(
    rt: &tokio::runtime::Runtime,
    harness: &Harness,
    base_url: &str,
    name: &str,
    text: &str,
) -> RecordedRequest {
    let capture = CaptureOutbound::new(CannedResponse::success_for);
    let log = capture.log();
    let Prepared {
        mut guest,
        agent,
        input,
    } = prepare(rt, harness, Box::new(capture), base_url, name, text);
    let result = rt
        .block_on(guest.run(&agent, &input))
        .expect("no trap")
        .expect("the input is valid");
    assert!(result.success, "{:?}", result.failure);
    let mut requests = log.all();
    assert_eq!(requests.len(), 1, "one turn, one request");
    requests.remove(0)
}

criterion_group!(benches, run, run_in_process, bare_post);
criterion_main!(benches);
