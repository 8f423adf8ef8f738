//! One agent API over both worlds, so a test runs unchanged against the `component` world
//! (its own wasi:http and `host` imports) and the `portable` world (a `driver` session stepped
//! by the harness with the same hooks).

use oma_host_tests::Shared;
use oma_host_tests::{
    AgentConfig, AgentEvent, AgentHandle, AgentStreamHandle, BashRisk, DriverGuest, DriverHarness,
    Guest, GuestOptions, Harness, JudgeStep, LlmMessage, OnlineStep, PromptInput, RunAgentOptions,
    RunInput, RunResult, WitError,
};

/// Which world a test runs against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum World {
    /// `oma_component.wasm`.
    Component,
    /// `oma_portable.wasm`, stepped through `driver` sessions.
    Driver,
}

/// A guest of either world. One lives per test, so the variants' sizes (the driver's bindings
/// hold an index per export) do not matter.
#[allow(clippy::large_enum_variant)]
pub enum AnyGuest {
    /// Boxed, as the other: both guests are large, and of different sizes.
    Component(Box<Guest>),
    /// Boxed.
    Driver(Box<DriverGuest>),
}

impl AnyGuest {
    /// A fresh instance of `world` set up as `options` says.
    pub async fn instantiate(world: World, options: GuestOptions) -> AnyGuest {
        match world {
            World::Component => AnyGuest::Component(Box::new(
                Harness::shared()
                    .expect("the harness loads the guest")
                    .instantiate_with(options)
                    .await
                    .expect("the guest instantiates"),
            )),
            World::Driver => AnyGuest::Driver(Box::new(
                DriverHarness::shared()
                    .expect("the harness loads the portable guest")
                    .instantiate_with(options)
                    .await
                    .expect("the portable guest instantiates"),
            )),
        }
    }
}

macro_rules! both {
    ($( fn $name:ident(&mut self $(, $arg:ident: $ty:ty)*) -> $ret:ty; )*) => {
        impl AnyGuest {
            $(
                pub async fn $name(&mut self $(, $arg: $ty)*) -> $ret {
                    match self {
                        AnyGuest::Component(guest) => guest.$name($($arg),*).await,
                        AnyGuest::Driver(guest) => guest.$name($($arg),*).await,
                    }
                }
            )*
        }
    };
}

both! {
    fn create_agent(&mut self, config: &AgentConfig) -> anyhow::Result<Result<AgentHandle, WitError>>;
    fn run(&mut self, agent: &AgentHandle, input: &RunInput) -> anyhow::Result<Result<RunResult, WitError>>;
    fn stream(&mut self, agent: &AgentHandle, input: &RunInput) -> anyhow::Result<Result<AgentStreamHandle, WitError>>;
    fn next_agent_event(&mut self, stream: &AgentStreamHandle) -> anyhow::Result<Option<AgentEvent>>;
    fn close_agent_stream(&mut self, stream: AgentStreamHandle) -> anyhow::Result<()>;
    fn collect_agent_stream(&mut self, stream: AgentStreamHandle) -> anyhow::Result<Vec<AgentEvent>>;
    fn prompt(&mut self, agent: &AgentHandle, input: &PromptInput) -> anyhow::Result<Result<RunResult, WitError>>;
    fn get_history(&mut self, agent: &AgentHandle) -> anyhow::Result<Vec<LlmMessage>>;
    fn reset(&mut self, agent: &AgentHandle) -> anyhow::Result<()>;
    fn drop_agent(&mut self, agent: AgentHandle) -> anyhow::Result<()>;
    fn run_agent(&mut self, config: &AgentConfig, input: &RunInput, options: &RunAgentOptions) -> anyhow::Result<Result<RunResult, WitError>>;
    fn materialize_run(&mut self, records: &str, include_records: bool) -> anyhow::Result<Result<String, WitError>>;
    fn build_execution_receipt(&mut self, result: &str, trace: Option<&str>) -> anyhow::Result<Result<String, WitError>>;
    fn score_builtin(&mut self, scorer: &str, options: &str, context: Option<&str>) -> anyhow::Result<Result<String, WitError>>;
    fn judge(&mut self, step: JudgeStep, request: &str) -> anyhow::Result<Result<String, WitError>>;
    fn online_evaluation(&mut self, step: OnlineStep, request: &str) -> anyhow::Result<Result<String, WitError>>;
    fn redact_sensitive_text(&mut self, text: &str) -> anyhow::Result<String>;
    fn is_sensitive_name(&mut self, name: &str) -> anyhow::Result<bool>;
    fn classify_bash_command(&mut self, command: &str) -> anyhow::Result<BashRisk>;
}
