//! The wasmtime-based harness of oma-component: the guest its `artifacts` crate and its own
//! build script build, driven in every world by the tests and benchmarks here, and what they
//! need around the wasmtime embedding (nothing a production host needs).
//!
//! - [`artifact`]: the five components this repository builds, as bytes: the two the binaries
//!   carry (`oma-artifacts`) and the three only tests drive (this crate's `build.rs`);
//! - [`Shared`]: one process-wide [`Harness`] for `oma_component.wasm`, one [`DriverHarness`]
//!   for `oma_portable.wasm` and one [`RoutesHarness`] for `oma_routes.wasm`
//!   (`Harness::shared()`), compiled once per test binary;
//! - [`RoutesHarness`]: the `routes` world (`oma_routes.wasm`), the gateway's rules as the
//!   Worker gateway gets them, bound here for its tests;
//! - the loopback provider (`oma-loopback`, re-exported): [`Simulator`], which answers every
//!   wire format with canned answers ([`canned`](CANNED_TEXT)), records requests, plays
//!   scripted replies and injects faults, and [`LoopbackOnly`], which lets the guest's requests
//!   reach loopback addresses, the simulator, and nothing else;
//! - [`CaptureOutbound`]: answers the guest's requests in-process and records them;
//! - [`workloads`]: the generated benchmark inputs (`chat-small`, `chat-history-51`,
//!   `tools-rich-20`, `vision-1mib`, `video-16mib`, ...);
//! - the `loopback-provider` and `gen-workloads` binaries.
//!
//! Everything of the embedding (`oma-wasmtime`) and of the loopback provider is re-exported,
//! so a test imports one crate.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use oma_host_tests::{call_options, chat_request, endpoint, GuestOptions, Harness, LlmMessage,
//!                   ContentBlock, LoopbackOnly, Role, Shared, Simulator, CANNED_TEXT};
//!
//! let simulator = Simulator::start()?;
//! let options = GuestOptions { hooks: Some(Box::new(LoopbackOnly::new())), ..Default::default() };
//! let mut guest = Harness::shared()?.instantiate_with(options).await?;
//! let hi = LlmMessage { role: Role::User, content: vec![ContentBlock::Text("hi".into())] };
//! let response = guest
//!     .chat(
//!         &chat_request("claude-sonnet-4-6", vec![hi]),
//!         &endpoint("anthropic", Some(&simulator.base_url()), Some("sk-test")),
//!         &call_options(),
//!     )
//!     .await??;
//! assert_eq!(response.content, vec![ContentBlock::Text(CANNED_TEXT.into())]);
//! assert_eq!(simulator.request_count(), 1);
//! # Ok(()) }
//! ```
//!
//! An agent run with a `beforeRun` hook answered by a [`ScriptedHost`]:
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use oma_host_tests::{agent_config, endpoint, offline_options, BeforeRunAnswer, BeforeRunResult,
//!                   GuestOptions, Harness, LoopbackOnly, RunInput, ScriptedHost, Shared, Simulator};
//!
//! let simulator = Simulator::start()?;
//! let host = ScriptedHost::new().with_hook(|context| {
//!     BeforeRunAnswer::Typed(BeforeRunResult {
//!         prompt: format!("{} (be brief)", context.prompt),
//!         messages: None,
//!     })
//! });
//! let log = host.log();
//! let options = GuestOptions {
//!     hooks: Some(Box::new(LoopbackOnly::new())),
//!     host: Some(Box::new(host)),
//!     ..Default::default()
//! };
//! let mut guest = Harness::shared()?.instantiate_with(options).await?;
//! let mut config = agent_config(
//!     "helper",
//!     "claude-sonnet-4-6",
//!     endpoint("anthropic", Some(&simulator.base_url()), Some("sk-test")),
//! );
//! config.before_run = true;
//! config.call = offline_options();
//! let agent = guest.create_agent(&config).await??;
//! let result = guest.run(&agent, &RunInput::Text("Hello?".into())).await??;
//! assert!(result.success);
//! assert_eq!(log.lock().before_run[0].prompt, "Hello?");
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

use std::sync::OnceLock;

/// The five components this repository builds, as bytes (each with its `*_FILE`): the two the
/// binaries carry (`oma-artifacts`: `COMPONENT`, `GATEWAY`) and the three only the tests drive,
/// built by this crate's `build.rs` (`PORTABLE`, `PORTABLE_JSON`, `ROUTES`).
pub mod artifact {
    pub use oma_artifacts::*;
    include!(concat!(env!("OUT_DIR"), "/artifacts.rs"));
}

mod outbound;
mod routes;
/// The benchmark inputs (the `oma-workloads` crate, re-exported so a bench imports one crate).
pub use oma_workloads as workloads;

pub use oma_wasmtime::*;

pub use oma_loopback::*;
pub use outbound::{send_bare, BareRequest, CannedResponse, CaptureOutbound};
pub use routes::{instantiate_empty, routes_types, RoutesGuest, RoutesHarness};

/// A retry schedule of the tests' own (OMA's, with a 10 ms base delay and backoff 2), in place
/// of the provider's default: `max_attempts` attempts in all, so that a test of retries waits
/// milliseconds.
pub fn retries(max_attempts: u32) -> Option<RetryOptions> {
    Some(RetryOptions {
        max_attempts,
        base_delay_ms: 10,
        backoff: 2.0,
    })
}

/// The process-wide harness of a component this repository builds, made on first use: what
/// every test and benchmark instantiates its guests from, so the component is compiled (or read
/// from the compiled-code cache) once per process.
pub trait Shared: Sized + 'static {
    /// The shared harness; fails if the component cannot be compiled or linked, and every later
    /// call fails the same way.
    fn shared() -> anyhow::Result<&'static Self>;
}

impl Shared for Harness {
    /// `oma_component.wasm` with [`HarnessOptions::new`]'s defaults.
    fn shared() -> anyhow::Result<&'static Harness> {
        static SHARED: OnceLock<Result<Harness, String>> = OnceLock::new();
        SHARED
            .get_or_init(|| {
                Harness::new(HarnessOptions::new(artifact::COMPONENT)).map_err(|e| format!("{e:#}"))
            })
            .as_ref()
            .map_err(|e| anyhow::anyhow!("{e}"))
    }
}

impl Shared for RoutesHarness {
    /// `oma_routes.wasm` with [`HarnessOptions::new`]'s defaults.
    fn shared() -> anyhow::Result<&'static RoutesHarness> {
        static SHARED: OnceLock<Result<RoutesHarness, String>> = OnceLock::new();
        SHARED
            .get_or_init(|| {
                RoutesHarness::new(HarnessOptions::new(artifact::ROUTES))
                    .map_err(|e| format!("{e:#}"))
            })
            .as_ref()
            .map_err(|e| anyhow::anyhow!("{e}"))
    }
}

impl Shared for DriverHarness {
    /// `oma_portable.wasm` with [`HarnessOptions::new`]'s defaults.
    fn shared() -> anyhow::Result<&'static DriverHarness> {
        static SHARED: OnceLock<Result<DriverHarness, String>> = OnceLock::new();
        SHARED
            .get_or_init(|| {
                DriverHarness::new(HarnessOptions::new(artifact::PORTABLE))
                    .map_err(|e| format!("{e:#}"))
            })
            .as_ref()
            .map_err(|e| anyhow::anyhow!("{e}"))
    }
}
