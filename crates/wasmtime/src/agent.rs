//! The `agent` interface through a [`Guest`]: agents ([`Guest::create_agent`], then
//! [`Guest::run`], [`Guest::stream`], [`Guest::prompt`], [`Guest::get_history`],
//! [`Guest::reset`]) and one-off runs ([`Guest::run_agent`]).
//!
//! Agents and streams are resources owned by the guest's store; [`Guest::drop_agent`] and
//! [`Guest::close_agent_stream`] free them, and the instance frees the rest when it goes.

use wasmtime::component::ResourceAny;

use crate::bindings::oma::agent::outcome::{AgentConfig, AgentEvent, PromptInput, RunAgentOptions};
use crate::bindings::oma::agent::outcome::{ContextOptions, ReasoningTextCap, RunInput, RunResult};
use crate::bindings::oma::agent::types::{Error as WitError, LlmMessage};
use crate::bindings::oma::agent::wire::{CallOptions, Endpoint};
use crate::guest::Guest;
use crate::provider::{call_options, chat_request};

/// The most events [`Guest::collect_agent_stream`] reads before giving up on a stream that
/// does not end.
pub const MAX_AGENT_EVENTS: usize = 100_000;

/// An `agent` resource in a guest's store (of either world), and the agent's name.
#[derive(Debug)]
pub struct AgentHandle {
    pub(crate) resource: ResourceAny,
    pub(crate) name: String,
}

impl AgentHandle {
    /// The resource, for calls the harness does not wrap.
    pub fn resource(&self) -> ResourceAny {
        self.resource
    }

    pub(crate) fn new(resource: ResourceAny, name: &str) -> Self {
        AgentHandle {
            resource,
            name: name.to_owned(),
        }
    }
}

/// A streamed run in a guest's store: an `agent-stream` resource, or a `driver` session and
/// the HTTP it has in flight.
#[derive(Debug)]
pub struct AgentStreamHandle {
    pub(crate) resource: ResourceAny,
    pub(crate) flight: u64,
}

impl AgentStreamHandle {
    pub(crate) fn with_flight(resource: ResourceAny, flight: u64) -> Self {
        AgentStreamHandle { resource, flight }
    }
}

/// An agent configuration with OMA's defaults: no system prompt, no tools, 10 turns, no
/// budget, no hook, no history, one attempt per call ([`call_options`]).
pub fn agent_config(name: &str, model: &str, endpoint: Endpoint) -> AgentConfig {
    AgentConfig {
        name: name.to_owned(),
        model: model.to_owned(),
        endpoint,
        adapter: None,
        system_prompt: None,
        sampling: chat_request(model, Vec::new()).sampling,
        thinking_budget: None,
        extra_body: None,
        tools: Vec::new(),
        max_turns: None,
        token_budget: None,
        deadline_ms: None,
        call: call_options(),
        history: Vec::new(),
        before_run: false,
        external: None,
        loop_detection: None,
        context: ContextOptions {
            strategy: None,
            compress_tool_results: None,
            preserve_reasoning_as_text: false,
            compress_reasoning_text: ReasoningTextCap::Standard,
        },
        trace: None,
        records: None,
        output_schema: None,
    }
}

impl Guest {
    /// `agent.create`: a new agent; fails if its history is invalid.
    pub async fn create_agent(
        &mut self,
        config: &AgentConfig,
    ) -> anyhow::Result<Result<AgentHandle, WitError>> {
        let (store, bindings) = self.parts();
        Ok(bindings
            .oma_agent_agent()
            .agent()
            .call_create(store, config)
            .await?
            .map(|resource| AgentHandle::new(resource, &config.name)))
    }

    /// `agent.run`: a fresh conversation; a failed run is an `Ok` result with `success: false`.
    pub async fn run(
        &mut self,
        agent: &AgentHandle,
        input: &RunInput,
    ) -> anyhow::Result<Result<RunResult, WitError>> {
        let (store, bindings) = self.parts();
        Ok(bindings
            .oma_agent_agent()
            .agent()
            .call_run(store, agent.resource, input)
            .await?)
    }

    /// `agent.stream`: validates now, then events come from [`Guest::next_agent_event`].
    pub async fn stream(
        &mut self,
        agent: &AgentHandle,
        input: &RunInput,
    ) -> anyhow::Result<Result<AgentStreamHandle, WitError>> {
        let (store, bindings) = self.parts();
        Ok(bindings
            .oma_agent_agent()
            .agent()
            .call_stream(store, agent.resource, input)
            .await?
            .map(|resource| AgentStreamHandle::with_flight(resource, 0)))
    }

    /// `agent-stream.next`: the next event, `None` after the last.
    pub async fn next_agent_event(
        &mut self,
        stream: &AgentStreamHandle,
    ) -> anyhow::Result<Option<AgentEvent>> {
        let (store, bindings) = self.parts();
        Ok(bindings
            .oma_agent_agent()
            .agent_stream()
            .call_next(store, stream.resource)
            .await?)
    }

    /// Drops a stream, abandoning the run.
    pub async fn close_agent_stream(&mut self, stream: AgentStreamHandle) -> anyhow::Result<()> {
        let (store, _) = self.parts();
        stream.resource.resource_drop_async(store).await?;
        Ok(())
    }

    /// Reads a stream to its end and drops it.
    pub async fn collect_agent_stream(
        &mut self,
        stream: AgentStreamHandle,
    ) -> anyhow::Result<Vec<AgentEvent>> {
        let mut events = Vec::new();
        for _ in 0..MAX_AGENT_EVENTS {
            match self.next_agent_event(&stream).await {
                Ok(Some(event)) => events.push(event),
                Ok(None) => {
                    self.close_agent_stream(stream).await?;
                    return Ok(events);
                }
                Err(trap) => {
                    let _ = self.close_agent_stream(stream).await;
                    return Err(trap);
                }
            }
        }
        self.close_agent_stream(stream).await?;
        Err(anyhow::anyhow!(
            "the agent stream did not end within {MAX_AGENT_EVENTS} events"
        ))
    }

    /// `agent.prompt`: one user turn appended to history, with the run's messages.
    pub async fn prompt(
        &mut self,
        agent: &AgentHandle,
        input: &PromptInput,
    ) -> anyhow::Result<Result<RunResult, WitError>> {
        let (store, bindings) = self.parts();
        Ok(bindings
            .oma_agent_agent()
            .agent()
            .call_prompt(store, agent.resource, input)
            .await?)
    }

    /// `agent.get-history`: a copy of the persistent history.
    pub async fn get_history(&mut self, agent: &AgentHandle) -> anyhow::Result<Vec<LlmMessage>> {
        let (store, bindings) = self.parts();
        Ok(bindings
            .oma_agent_agent()
            .agent()
            .call_get_history(store, agent.resource)
            .await?)
    }

    /// `agent.reset`: clears the persistent history.
    pub async fn reset(&mut self, agent: &AgentHandle) -> anyhow::Result<()> {
        let (store, bindings) = self.parts();
        bindings
            .oma_agent_agent()
            .agent()
            .call_reset(store, agent.resource)
            .await?;
        Ok(())
    }

    /// Drops an agent.
    pub async fn drop_agent(&mut self, agent: AgentHandle) -> anyhow::Result<()> {
        let (store, _) = self.parts();
        agent.resource.resource_drop_async(store).await?;
        Ok(())
    }

    /// `agent.run-agent`: a one-off agent with progress and evaluation.
    pub async fn run_agent(
        &mut self,
        config: &AgentConfig,
        input: &RunInput,
        options: &RunAgentOptions,
    ) -> anyhow::Result<Result<RunResult, WitError>> {
        let (store, bindings) = self.parts();
        Ok(bindings
            .oma_agent_agent()
            .call_run_agent(store, config, input, *options)
            .await?)
    }
}

/// Call options that keep requests on the loopback interface.
pub fn offline_options() -> CallOptions {
    CallOptions {
        egress: crate::bindings::oma::agent::wire::EgressPolicy::Offline,
        ..call_options()
    }
}
