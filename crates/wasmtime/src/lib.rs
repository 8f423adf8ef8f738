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
//! [`GuardedOutbound`] send for real, to the addresses an [`AddressPolicy`] allows. Other
//! [`WasiHttpHooks`] go in through [`GuestOptions`]: the loopback provider's `LoopbackOnly`
//! (crate `oma-loopback`) lets requests reach its `Simulator` (a provider on the loopback
//! interface that answers every wire format) and nothing else, and the test kit's
//! `CaptureOutbound` answers them in-process and records them.
//!
//! Agents: the component's `host` imports (the `beforeRun` hook, tools, progress, evaluation,
//! external backends, the model calls of an agent's own LLM adapter) go to the [`AgentHost`] in
//! [`GuestOptions::host`]; [`ScriptedHost`] answers with closures and [`LlmAdapter`]s and
//! records what it was handed. A run's trace records go to [`TraceSink`]s
//! ([`ScriptedHost::with_sink`]); [`observability`] holds OMA's batching, composite and
//! legacy-callback sinks, and [`eval`] OMA's evaluation framework (eval sets, score results,
//! the runner, report aggregates, gates, the built-in scorers and LLM judges, agent targets,
//! the evaluation stores).
//!
//! [`serve`] runs a `wasi:http/proxy` component (the gateway, `oma_gateway.wasm`) behind an
//! HTTP/1.1 server, one instance per request from the pooling allocator, under the same limits
//! and address guard: `oma-host serve`, and tests that start it in process.
//!
//! The import-free `portable` world runs through [`DriverHarness`]: an empty linker, and a
//! [`DriverGuest`] whose agent calls step a `driver` session, performing each step with the
//! same [`GuestOptions`] hooks and host, so one test runs against both worlds.
//!
//! The generated bindings are in [`bindings`]; a host that binds another world of `oma:agent`
//! maps its types to them, compiles its component into a [`Compiled`] and instantiates it in
//! [`Compiled::store`]s, under the same cache and limits (the test kit binds the `routes`
//! world so).
//!
//! The crate docs of the loopback provider (`oma-loopback`) and of the test kit
//! (`oma-host-tests`) show an agent run, a provider call and a hook against its simulator.

#![deny(missing_docs)]

mod address;
mod agent;
mod agent_host;
pub mod bindings;
mod driver;
mod durable_log;
mod durable_store;
mod engine;
mod error_json;
pub mod eval;
mod guard;
mod guest;
pub mod keyvalue;
mod limits;
mod llm_adapter;
mod number;
pub mod observability;
pub mod oma_json;
pub mod pool;
mod provider;
pub mod serve;
mod source;
mod state;
mod store;

/// The `driver` interface's own types (steps, answers, session options), for hosts that step
/// a session themselves ([`DriverGuest::next_step`], [`DriverGuest::answer`]).
pub use bindings::portable::exports::oma::agent::driver as driver_types;

pub use address::{classify, AddressClass};
pub use agent::{agent_config, offline_options, AgentHandle, AgentStreamHandle, MAX_AGENT_EVENTS};
pub use agent_host::{AgentHost, HostLog, LogHandle, NoHost, ScriptedHost};
pub use bindings::exports::oma::agent::codec::{BashRisk, BashRiskLevel, JudgeStep, OnlineStep};
pub use bindings::exports::oma::agent::provider::StreamEvent;
pub use bindings::oma::agent::exchange::{
    AgentTrace, BeforeRunAnswer, BeforeRunContext, BeforeRunResult, EvaluationRecord, LlmCallTrace,
    LlmPhase, ProgressEvent, ThrownError, ToolCallTrace, ToolGate, ToolOutcome, TraceData,
    TraceEvent, TraceRecord,
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
pub use driver::{CancelToken, DriverGuest, DriverHarness, MAX_SESSION_STEPS};
pub use engine::{default_cache_dir, Compiled, ComponentOrigin, Harness, HarnessOptions};
pub use error_json::{error_json, host_error_json, host_error_message};
pub use guard::{
    AddressPolicy, AllowOutbound, GuardedOutbound, Refusal, Resolve, ResolveFuture, StaticResolver,
    SystemResolver,
};
pub use guest::Guest;
pub use limits::{LimitExceeded, Limits, MemoryBudget};
pub use llm_adapter::{thrown, LlmAdapter, ModelCall, ModelEvent, ModelReply};
pub use observability::{
    BatchingTraceSink, CompositeTraceSink, FilteringSink, FlushResult, FlushStatus,
    LegacyCallbackTraceSink, SensitiveDataProcessor, TraceExporter, TraceSink, TraceSinkStats,
};
pub use provider::{call_options, chat_request, endpoint, ChatStreamHandle, MAX_STREAM_EVENTS};
pub use source::ComponentSource;
pub use state::{DenyOutbound, GuestOptions, HostState};
pub use store::start_call;
pub use wasmtime_wasi_http::WasiHttpHooks;
