//! The test kit of oma-component: what tests, benchmarks and the CLI's offline demo need
//! around the wasmtime embedding, and nothing a production host needs.
//!
//! - [`Simulator`]: a loopback provider that answers every wire format with canned answers
//!   ([`canned`](CANNED_TEXT)), records requests, plays scripted replies and injects faults;
//! - [`CaptureOutbound`] (answers the guest's requests in-process and records them) and
//!   [`LoopbackOnly`] (lets them reach loopback addresses, the simulator, and nothing else);
//! - [`workloads`]: the generated benchmark inputs (`chat-small`, `chat-history-51`,
//!   `tools-rich-20`, `vision-1mib`, `video-16mib`, ...);
//! - the `loopback-provider` and `gen-workloads` binaries.
//!
//! Everything of the embedding (`oma-wasmtime`) is re-exported, so a test imports one crate.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use oma_testkit::{call_options, chat_request, endpoint, GuestOptions, Harness, LlmMessage,
//!                   ContentBlock, LoopbackOnly, Role, Simulator, CANNED_TEXT};
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
//! use oma_testkit::{agent_config, endpoint, offline_options, BeforeRunAnswer, BeforeRunResult,
//!                   GuestOptions, Harness, LoopbackOnly, RunInput, ScriptedHost, Simulator};
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

mod canned;
mod outbound;
mod simulator;
/// The benchmark inputs (the `oma-workloads` crate, re-exported so a bench imports one crate).
pub use oma_workloads as workloads;

pub use oma_wasmtime::*;

pub use canned::{aws_event_message, Ask, Route, CANNED_PIECES, CANNED_TEXT, CANNED_USAGE};
pub use outbound::{is_loopback, BareRequest, CannedResponse, CaptureOutbound, LoopbackOnly};
pub use simulator::{RecordedRequest, Reply, RequestLog, Simulator};
