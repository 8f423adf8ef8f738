//! Where the time of a `run()` against the loopback provider goes, thread by thread: wall time,
//! the calling thread's CPU time and the other threads' (the simulator's, when it has a thread
//! of its own), per call, for a run and for the bare POST of the same request (see
//! `benches/agent.rs`). Three rounds of each, after a warm-up.
//!
//! ```sh
//! cargo run --release -p oma-host-tests --example thread_cpu -- [WORKLOAD] [CALLS] [thread|main]
//! # every thread on one CPU: no wakeup crosses CPUs
//! taskset -c 0 target/release/examples/thread_cpu chat-small 20000
//! ```
//!
//! `main` serves the simulator from the calling thread's own runtime. Linux only (per-thread
//! CPU time from `getrusage(RUSAGE_THREAD)`). A diagnostic, not a benchmark: the medians the
//! README quotes come from criterion.

use oma_host_tests::Shared;
use std::time::Instant;

use anyhow::{bail, Context};
use oma_host_tests::workloads::read_workload;
use oma_host_tests::{
    agent_config, endpoint, offline_options, send_bare, AgentHandle, BareRequest, CannedResponse,
    CaptureOutbound, Guest, GuestOptions, Harness, LoopbackOnly, RunInput, Simulator,
    WasiHttpHooks,
};

/// CPU time (user and system, µs) and voluntary context switches of `who`.
#[cfg(target_os = "linux")]
fn cpu(who: libc::c_int) -> (f64, i64) {
    // SAFETY: `getrusage` fills the zeroed struct it is given and keeps no pointer to it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(who, &mut usage) };
    let micros = |t: libc::timeval| t.tv_sec as f64 * 1e6 + t.tv_usec as f64;
    (
        micros(usage.ru_utime) + micros(usage.ru_stime),
        usage.ru_nvcsw,
    )
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("thread_cpu reads per-thread CPU time with getrusage(RUSAGE_THREAD): Linux only");
}

#[cfg(target_os = "linux")]
fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "chat-small".into());
    let calls: u32 = match args.next() {
        Some(n) => n.parse().context("CALLS is a number")?,
        None => 20_000,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let simulator = match args.next().as_deref() {
        None | Some("thread") => Simulator::start_unrecorded()?,
        Some("main") => Simulator::start_unrecorded_on(rt.handle())?,
        Some(other) => bail!("the server is `thread` or `main`, not {other:?}"),
    };
    let harness = Harness::shared()?;
    let Some(text) = read_workload("thread_cpu", &name) else {
        bail!("no workload named {name:?}");
    };
    let base_url = simulator.base_url();
    let prepare =
        |hooks: Box<dyn WasiHttpHooks>| -> anyhow::Result<(Guest, AgentHandle, RunInput)> {
            let options = GuestOptions {
                hooks: Some(hooks),
                ..GuestOptions::default()
            };
            let mut guest = rt.block_on(harness.instantiate_with(options))?;
            let messages = rt
                .block_on(guest.messages_from_json(&text))?
                .map_err(|e| anyhow::anyhow!("the workload is not valid: {}", e.message))?;
            let mut config = agent_config(
                "thread_cpu",
                "claude-sonnet-4-6",
                endpoint("anthropic", Some(&base_url), Some("sk-bench")),
            );
            config.call = offline_options();
            let agent = rt
                .block_on(guest.create_agent(&config))?
                .map_err(|e| anyhow::anyhow!("the agent is not valid: {}", e.message))?;
            Ok((guest, agent, RunInput::Messages(messages)))
        };
    // The exact request a run sends, captured once, for the bare POST.
    let capture = CaptureOutbound::new(CannedResponse::success_for);
    let log = capture.log();
    let (mut guest, agent, input) = prepare(Box::new(capture))?;
    let _ = rt.block_on(guest.run(&agent, &input))?;
    let Some(recorded) = log.all().into_iter().next() else {
        bail!("the run sent no request");
    };
    let request = BareRequest::new(&base_url, &recorded)?;
    let client = LoopbackOnly::new();
    let (mut guest, agent, input) = prepare(Box::new(LoopbackOnly::new()))?;

    println!("{name}, {calls} calls a round; µs per call");
    for round in 1..=3 {
        for kind in ["run", "bare POST"] {
            let mut batch = |count: u32| -> anyhow::Result<()> {
                rt.block_on(async {
                    for _ in 0..count {
                        if kind == "run" {
                            let result = guest.run(&agent, &input).await?;
                            if !result.is_ok_and(|r| r.success) {
                                bail!("a run failed");
                            }
                        } else {
                            send_bare(&client, &request).await?;
                        }
                    }
                    Ok(())
                })
            };
            batch(calls / 10 + 1)?;
            let (all_before, _) = cpu(libc::RUSAGE_SELF);
            let (own_before, switches_before) = cpu(libc::RUSAGE_THREAD);
            let started = Instant::now();
            batch(calls)?;
            let wall = started.elapsed().as_secs_f64() * 1e6;
            let (all_after, _) = cpu(libc::RUSAGE_SELF);
            let (own_after, switches_after) = cpu(libc::RUSAGE_THREAD);
            let per = |x: f64| x / f64::from(calls);
            println!(
                "round {round} {kind:9}  wall {:7.1}  this thread's CPU {:7.1}  other threads' CPU {:7.1}  \
                 voluntary switches {:.2}",
                per(wall),
                per(own_after - own_before),
                per((all_after - all_before) - (own_after - own_before)),
                (switches_after - switches_before) as f64 / f64::from(calls),
            );
        }
    }
    Ok(())
}
