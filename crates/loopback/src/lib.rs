//! A model provider on the loopback interface, for runs that must not leave the machine:
//! `oma-host demo` runs its agent against it, and the tests and benchmarks of `oma-host-tests`
//! and of the CLI drive every world against it.
//!
//! - [`Simulator`]: an HTTP/1.1 server on `127.0.0.1` that answers every wire format
//!   (Anthropic, OpenAI-compatible, Gemini, Bedrock) with [`canned`](CANNED_TEXT) answers
//!   (and Anthropic's token counter with the canned input count),
//!   plays scripted [`Reply`]s (statuses, delays, cut or stalled streams, recorded answers) and
//!   records each request;
//! - [`LoopbackOnly`]: the guest's outbound-HTTP hook that sends to loopback addresses only and
//!   denies (and counts) every other request, so a guest pointed at the simulator reaches it
//!   and nothing else;
//! - [`Ask`]: which wire format a request is for and the bodies each format answers with, for
//!   anything else that answers like the simulator.
//!
//! ```no_run
//! # async fn demo(component: &'static [u8]) -> anyhow::Result<()> {
//! use oma_loopback::{LoopbackOnly, Simulator, CANNED_TEXT};
//! use oma_wasmtime::{
//!     agent_config, endpoint, offline_options, GuestOptions, Harness, HarnessOptions, RunInput,
//! };
//!
//! let simulator = Simulator::start()?;
//! let harness = Harness::new(HarnessOptions::new(component))?; // oma_component.wasm
//! let options = GuestOptions { hooks: Some(Box::new(LoopbackOnly::new())), ..Default::default() };
//! let mut guest = harness.instantiate_with(options).await?;
//! let provider = endpoint("anthropic", Some(&simulator.base_url()), Some("sk-test"));
//! let mut config = agent_config("a", "claude-sonnet-4-6", provider);
//! config.call = offline_options();
//! let agent = guest.create_agent(&config).await??;
//! let result = guest.run(&agent, &RunInput::Text("Hello?".into())).await??;
//! assert_eq!(result.output, CANNED_TEXT);
//! assert_eq!(simulator.request_count(), 1);
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

mod canned;
mod loopback_only;
mod simulator;

pub use canned::{aws_event_message, Ask, Route, CANNED_PIECES, CANNED_TEXT, CANNED_USAGE};
pub use loopback_only::{is_loopback, LoopbackOnly};
pub use simulator::{RecordedRequest, Reply, RequestLog, Simulator};
