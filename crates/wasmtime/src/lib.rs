//! The wasmtime embedding of the oma-component guest: what the `oma-host` CLI and Rust
//! embedders use.
//!
//! It takes a component as bytes or from a file its caller chooses ([`ComponentSource`]; the
//! `oma-artifacts` crate carries the ones this repository builds), compiles it once per
//! [`Harness`] (and caches the compiled code across processes in a private per-user
//! directory), links WASI p2 and wasi-http, and hands out fresh instances. Tests, benchmarks and
//! the `oma-host` CLI all go through it, so the component is exercised exactly as a Rust host
//! would embed it.
//!
//! ```no_run
//! # async fn demo(component: &'static [u8]) -> anyhow::Result<()> {
//! use oma_wasmtime::{ErrorKind, Harness, HarnessOptions};
//!
//! // `component`: the bytes of `oma_component.wasm`, e.g. `oma_artifacts::COMPONENT`.
//! let harness = Harness::new(HarnessOptions::new(component))?;
//! let mut guest = harness.instantiate().await?;
//! let messages = guest
//!     .messages_from_json(r#"[{"role": "user", "content": [{"type": "text", "text": "hi"}]}]"#)
//!     .await??;
//! assert_eq!(messages.len(), 1);
//!
//! let err = guest.messages_from_json(r#"[{"role": "user", "content": "hi"}]"#).await?.unwrap_err();
//! assert_eq!(err.kind, ErrorKind::InvalidMessage);
//! assert_eq!(err.message, "messages[0].content must be a ContentBlock[], got string");
//! # Ok(()) }
//! ```
//!
//! Every call returns `anyhow::Result<Result<T, WitError>>`: the outer error is a trap or a host
//! failure (the instance is then unusable), the inner one the component's typed error. Nothing in
//! this crate panics on guest input.
//!
//! Outbound HTTP is denied by default ([`DenyOutbound`]); [`AllowOutbound`] and
//! [`GuardedOutbound`] send for real, to the addresses an [`AddressPolicy`] allows. Tests
//! install their own [`WasiHttpHooks`] through [`GuestOptions`]: the test kit's
//! `CaptureOutbound` answers requests in-process and records them, and its `LoopbackOnly` lets
//! them reach its loopback `Simulator` (a provider that answers every wire format, records
//! requests and injects faults) and nothing else.
//!
//! Agents: the component's `host` imports (the `beforeRun` hook, tools, progress, evaluation,
//! external backends, the model calls of an agent's own LLM adapter) go to the [`AgentHost`] in
//! [`GuestOptions::host`]; [`ScriptedHost`] answers with closures and [`LlmAdapter`]s and
//! records what it was handed.
//!
//! [`serve`] runs a `wasi:http/proxy` component (the gateway, `oma_gateway.wasm`) behind an
//! HTTP/1.1 server, one instance per request from the pooling allocator, under the same limits
//! and address guard: `oma-host serve`, and tests that start it in process.
//!
//! The import-free `portable` world runs through [`DriverHarness`]: an empty linker, and a
//! [`DriverGuest`] whose agent calls step a `driver` session, performing each step with the
//! same [`GuestOptions`] hooks and host, so one test runs against both worlds.
//!
//! The test kit's crate docs (`oma-host-tests`) show a provider call and an agent run with a hook
//! against its simulator.

#![deny(missing_docs)]

mod address;
mod agent;
mod agent_host;
mod driver;
mod engine;
mod error_json;
mod guard;
mod guest;
pub mod keyvalue;
mod limits;
mod llm_adapter;
pub mod oma_json;
pub mod pool;
mod provider;
mod routes;
pub mod serve;
mod source;
mod state;

/// The `component` world as this host binds it: the `oma:agent` part of `wit/world.wit`'s
/// world `component` (the `host` import and the three exports). Its WASI imports are not
/// generated here: the engine's linker takes them from wasmtime-wasi and wasmtime-wasi-http,
/// and a world-level `add_to_linker` would define them a second time.
#[allow(missing_docs)] // Generated from `wit/`; the WIT doc comments become the Rust docs.
mod bindings {
    wasmtime::component::bindgen!({
        inline: "
            package oma:harness;

            world component {
                import oma:agent/host@0.1.0;
                export oma:agent/codec@0.1.0;
                export oma:agent/provider@0.1.0;
                export oma:agent/agent@0.1.0;
            }
        ",
        world: "oma:harness/component",
        path: "../../wit",
        exports: { default: async },
        additional_derives: [PartialEq],
    });
}

/// The `portable` world as a Rust host sees it: the data interfaces as imports, so that their
/// Rust types are the ones of [`bindings`] (the component exports them; structurally they are
/// the same types), and the codec and the driver as exports.
#[allow(missing_docs)]
mod portable_bindings {
    wasmtime::component::bindgen!({
        inline: "
            package oma:harness;

            world portable-host {
                import oma:agent/types@0.1.0;
                import oma:agent/wire@0.1.0;
                import oma:agent/outcome@0.1.0;
                import oma:agent/exchange@0.1.0;
                export oma:agent/codec@0.1.0;
                export oma:agent/driver@0.1.0;
            }
        ",
        path: "../../wit",
        world: "oma:harness/portable-host",
        with: {
            "oma:agent/types": crate::bindings::oma::agent::types,
            "oma:agent/wire": crate::bindings::oma::agent::wire,
            "oma:agent/outcome": crate::bindings::oma::agent::outcome,
            "oma:agent/exchange": crate::bindings::oma::agent::exchange,
        },
        exports: { default: async },
        additional_derives: [PartialEq],
    });
}

/// The `driver` interface's own types (steps, answers, session options), for tests of the
/// session protocol.
pub use portable_bindings::exports::oma::agent::driver as driver_types;

/// The `routes` interface's types (request heads, replies, verdicts), for tests of the
/// gateway's rules through the routes world (`oma_routes.wasm`).
pub use routes::bindings::exports::oma::agent::routes as routes_types;

/// The `driver` interface's types as the routes world exports them (a `routes` run's steps and
/// answers).
pub use routes::bindings::exports::oma::agent::driver as routes_driver_types;

pub use routes::{RoutesGuest, RoutesHarness};

pub use address::{classify, AddressClass};
pub use agent::{agent_config, offline_options, AgentHandle, AgentStreamHandle, MAX_AGENT_EVENTS};
pub use agent_host::{AgentHost, HostLog, LogHandle, NoHost, ScriptedHost};
pub use bindings::exports::oma::agent::provider::StreamEvent;
pub use bindings::oma::agent::exchange::{
    AgentTrace, BeforeRunAnswer, BeforeRunContext, BeforeRunResult, EvaluationRecord, LlmCallTrace,
    LlmPhase, ModelCall, ModelEvent, ModelReply, ProgressEvent, ThrownError, ToolCallTrace,
    ToolGate, ToolOutcome, TraceData, TraceEvent,
};
pub use bindings::oma::agent::outcome::{
    AgentConfig, AgentEvent, EchoesReasoning, ErrorInfo, EvaluationOptions, ExternalKind,
    FailureKind, HostAdapter, PromptInput, RunAgentOptions, RunFailure, RunInput, RunResult,
    RunStatus, StatusCode, StorePayloads, ToolCallRecord, TraceOptions,
};
pub use bindings::oma::agent::outcome::{
    CompactStrategy, ContextOptions, ContextStrategy, LoopAction, LoopDetection, LoopInfo,
    ReasoningTextCap, SummarizeStrategy,
};
pub use bindings::oma::agent::types::{
    Base64Source, ContentBlock, Error as WitError, ErrorKind, FilePart, ImageBlock, LlmMessage,
    MediaSource, ReasoningBlock, Role, ToolResultBlock, ToolResultContent, ToolResultPart,
    ToolUseBlock, UrlSource, VideoBlock,
};
pub use bindings::oma::agent::wire::{
    AwsCredentials, CallOptions, ChatRequest, EgressPolicy, Endpoint, HttpRequest, LlmResponse,
    RetryOptions, Sampling, TokenUsage, ToolDefinition,
};
pub use driver::{empty_linker, instantiate_empty, DriverGuest, DriverHarness, MAX_SESSION_STEPS};
pub use engine::{default_cache_dir, ComponentOrigin, Harness, HarnessOptions};
pub use error_json::{error_json, host_error_json, host_error_message};
pub use guard::{
    AddressPolicy, AllowOutbound, GuardedOutbound, Refusal, Resolve, ResolveFuture, StaticResolver,
    SystemResolver,
};
pub use guest::Guest;
pub use limits::{LimitExceeded, Limits, MemoryBudget};
pub use llm_adapter::{thrown, LlmAdapter};
pub use provider::{
    call_options, chat_request, endpoint, retries, ChatStreamHandle, MAX_STREAM_EVENTS,
};
pub use source::ComponentSource;
pub use state::{DenyOutbound, GuestOptions, HostState};
pub use wasmtime_wasi_http::WasiHttpHooks;
