//! The `agent` export and the `host` imports: the agent runtime of [`crate::agent::session`]
//! driven by wasi-http ([`crate::call`]) and the host's hooks.

use std::cell::RefCell;

use serde_json::{json, Value};

use crate::adapter::{self as a, StreamEvent};
use crate::agent::before_run::{BeforeRunContext, BeforeRunResult, ExternalKind};
use crate::agent::evaluation::{RunInput, StorePayloads};
use crate::agent::input::PromptInput;
use crate::agent::outcome::{FailureKind, StatusCode};
use crate::agent::session::{
    self, AgentEvent, EvaluationRecord, HookAnswer, Io, ProgressEvent, Run, RunSpec, ToolOutcome,
    TurnStream,
};
use crate::agent::turn::{Event, RunOutcome, TurnOptions, DEFAULT_MAX_TURNS};
use crate::call::{self, CallOptions};
use crate::error::Error;
use crate::message as m;
use crate::transport;

use super::convert::*;
use super::exports::oma::agent::agent as ag;
use super::oma::agent::host;
use super::oma::agent::outcome as oc;
use super::oma::agent::types as wit;
use super::oma::agent::wire;
use super::Component;

impl ag::Guest for Component {
    type Agent = AgentResource;
    type AgentStream = AgentStreamResource;

    fn run_agent(
        config: ag::AgentConfig,
        input: oc::RunInput,
        options: ag::RunAgentOptions,
    ) -> Result<oc::RunResult, wit::Error> {
        let (spec, mut io, _history) = from_wit_config(config)?;
        let evaluation = options.evaluation.map(|e| session::Evaluation {
            store_payloads: match e.store_payloads {
                ag::StorePayloads::None => StorePayloads::None,
                ag::StorePayloads::Redacted => StorePayloads::Redacted,
                ag::StorePayloads::Full => StorePayloads::Full,
            },
            sample_rate: e.sample_rate,
        });
        let outcome = session::run_agent(
            spec,
            from_wit_input(input)?,
            options.progress,
            evaluation,
            &mut io,
        )?;
        Ok(to_wit_result(outcome))
    }
}

/// An `agent` resource: the agent and where its requests go.
pub struct AgentResource {
    agent: RefCell<session::Agent>,
    io: WasmIo,
}

impl ag::GuestAgent for AgentResource {
    fn create(config: ag::AgentConfig) -> Result<ag::Agent, wit::Error> {
        let (spec, io, history) = from_wit_config(config)?;
        let agent = session::Agent::new(spec, history)?;
        Ok(ag::Agent::new(AgentResource {
            agent: RefCell::new(agent),
            io,
        }))
    }

    fn run(&self, input: oc::RunInput) -> Result<oc::RunResult, wit::Error> {
        let run: Run<call::ChatStream> =
            self.agent.borrow().start(from_wit_input(input)?, false)?;
        Ok(to_wit_result(run.finish(&mut self.io.clone())))
    }

    fn stream(&self, input: oc::RunInput) -> Result<ag::AgentStream, wit::Error> {
        let run = self.agent.borrow().start(from_wit_input(input)?, true)?;
        Ok(ag::AgentStream::new(AgentStreamResource {
            state: RefCell::new((run, self.io.clone())),
        }))
    }

    fn prompt(&self, input: ag::PromptInput) -> Result<oc::RunResult, wit::Error> {
        let input = match input {
            ag::PromptInput::Text(text) => PromptInput::Text(text),
            ag::PromptInput::Blocks(blocks) => {
                let [turn] = convert_single_turn(blocks)?;
                PromptInput::Blocks(turn.content)
            }
        };
        let outcome = self
            .agent
            .borrow_mut()
            .prompt(input, &mut self.io.clone())?;
        Ok(to_wit_result(outcome))
    }

    fn get_history(&self) -> Vec<wit::LlmMessage> {
        let agent = self.agent.borrow();
        agent
            .history()
            .iter()
            .cloned()
            .map(to_wit_message)
            .collect()
    }

    fn reset(&self) {
        self.agent.borrow_mut().reset();
    }
}

/// An `agent-stream` resource: a run in flight with its own copy of the agent's endpoint.
pub struct AgentStreamResource {
    state: RefCell<(Run<call::ChatStream>, WasmIo)>,
}

impl ag::GuestAgentStream for AgentStreamResource {
    fn next(&self) -> Option<ag::AgentEvent> {
        let mut state = self.state.borrow_mut();
        let (run, io) = &mut *state;
        run.next_event(io).map(to_wit_event)
    }
}

/// The blocks of a `prompt` as the one user turn they form, converted with OMA's paths.
fn convert_single_turn(blocks: Vec<wit::ContentBlock>) -> Result<[m::LlmMessage; 1], Error> {
    let mut messages = from_wit_messages(vec![wit::LlmMessage {
        role: wit::Role::User,
        content: blocks,
    }])?;
    let turn = messages.pop().unwrap_or(m::LlmMessage {
        role: m::Role::User,
        content: Vec::new(),
    });
    Ok([turn])
}

fn from_wit_input(input: oc::RunInput) -> Result<RunInput, Error> {
    Ok(match input {
        oc::RunInput::Text(text) => RunInput::Text(text),
        oc::RunInput::Messages(messages) => RunInput::Messages(from_wit_messages(messages)?),
    })
}

/// The run spec, the I/O and the seed history of an agent configuration. Fails on tool
/// schemas that are not JSON and on a provider without a known default URL.
fn from_wit_config(
    config: ag::AgentConfig,
) -> Result<(RunSpec, WasmIo, Vec<m::LlmMessage>), Error> {
    let external = config.external.map(|kind| match kind {
        oc::ExternalKind::Process => ExternalKind::Process,
        oc::ExternalKind::Acp => ExternalKind::Acp,
    });
    if external.is_none() {
        // An unknown provider without a base URL fails now, not on the first run.
        adapter_for(&config.endpoint)?;
    }
    let tool_names: Vec<&str> = config.tools.iter().map(|t| t.name.as_str()).collect();
    let mut agent_json = json!({
        "name": config.name,
        "model": config.model,
        "provider": config.endpoint.provider,
        "maxTurns": config.max_turns.unwrap_or(DEFAULT_MAX_TURNS),
        "tools": tool_names,
    });
    if let Some(url) = &config.endpoint.base_url {
        agent_json["baseURL"] = json!(url);
    }
    if let Some(system) = &config.system_prompt {
        agent_json["systemPrompt"] = json!(system);
    }
    if let Some(budget) = config.token_budget {
        agent_json["maxTokenBudget"] = json!(budget);
    }
    if let Some(kind) = external {
        agent_json["backend"] = json!({ "kind": kind.word() });
    }
    let template = a::ChatRequest {
        model: config.model,
        system_prompt: config.system_prompt,
        messages: Vec::new(),
        tools: from_wit_tools(config.tools)?,
        sampling: from_wit_sampling(config.sampling),
        thinking: from_wit_thinking(config.thinking_budget),
        extra_body: Default::default(),
        preserve_reasoning_as_text: false,
        stream: false,
    };
    let spec = RunSpec {
        template,
        turn: TurnOptions {
            agent_name: config.name,
            max_turns: config.max_turns.unwrap_or(DEFAULT_MAX_TURNS),
            token_budget: config.token_budget,
            provider: external.is_none().then(|| config.endpoint.provider.clone()),
        },
        before_run: config.before_run,
        external,
        config_json: agent_json.to_string(),
    };
    let history = from_wit_messages(config.history)?;
    let io = WasmIo {
        endpoint: config.endpoint,
        options: from_wit_options(config.call),
    };
    Ok((spec, io, history))
}

/// The [`Io`] of the component: wasi-http for the provider, the `host` imports for the rest.
#[derive(Clone)]
struct WasmIo {
    endpoint: wire::Endpoint,
    options: CallOptions,
}

impl TurnStream for call::ChatStream {
    fn next_event(&mut self) -> Result<Option<StreamEvent>, Error> {
        call::ChatStream::next_event(self)
    }
}

impl Io for WasmIo {
    type Stream = call::ChatStream;

    fn chat(&mut self, request: &a::ChatRequest) -> Result<m::LlmResponse, Error> {
        let adapter = adapter_for(&self.endpoint)?;
        let endpoint = from_wit_endpoint(self.endpoint.clone());
        call::chat(adapter.as_ref(), request, &endpoint, &self.options)
    }

    fn open_stream(&mut self, request: &a::ChatRequest) -> Result<call::ChatStream, Error> {
        let adapter = adapter_for(&self.endpoint)?;
        let endpoint = from_wit_endpoint(self.endpoint.clone());
        call::chat_stream(adapter.as_ref(), request, &endpoint, &self.options)
    }

    fn before_run(&mut self, agent: &str, context: &BeforeRunContext, config: &str) -> HookAnswer {
        let answer = host::before_run(&host::BeforeRunContext {
            agent: agent.to_owned(),
            prompt: context.prompt.clone(),
            messages: context
                .messages
                .iter()
                .cloned()
                .map(to_wit_message)
                .collect(),
            config: config.to_owned(),
        });
        match answer {
            host::BeforeRunAnswer::Failed(message) => HookAnswer::Failed(message),
            host::BeforeRunAnswer::Json(text) => match serde_json::from_str::<Value>(&text) {
                Ok(value) => HookAnswer::Result(BeforeRunResult::from_value(value)),
                Err(e) => HookAnswer::Rejected(Error::invalid(format!(
                    "beforeRun result must be JSON text: {e}"
                ))),
            },
            host::BeforeRunAnswer::Typed(result) => {
                let messages = match result.messages.map(from_wit_messages).transpose() {
                    Ok(messages) => messages,
                    Err(error) => return HookAnswer::Rejected(error),
                };
                match messages.map(serde_json::to_value).transpose() {
                    Ok(messages) => HookAnswer::Result(BeforeRunResult {
                        prompt: Value::String(result.prompt),
                        messages,
                    }),
                    Err(e) => HookAnswer::Rejected(Error::invalid(format!(
                        "beforeRun.messages could not be copied: {e}"
                    ))),
                }
            }
        }
    }

    fn call_tool(&mut self, agent: &str, call: m::ToolUseBlock) -> ToolOutcome {
        let outcome = host::call_tool(agent, &to_wit_tool_use(call));
        ToolOutcome {
            content: from_wit_content(outcome.content),
            is_error: outcome.is_error,
        }
    }

    fn external_send(
        &mut self,
        agent: &str,
        kind: ExternalKind,
        text: String,
    ) -> Result<String, String> {
        let kind = match kind {
            ExternalKind::Process => oc::ExternalKind::Process,
            ExternalKind::Acp => oc::ExternalKind::Acp,
        };
        host::external_send(agent, kind, &text)
    }

    fn progress(&mut self, event: ProgressEvent) {
        host::progress(&host::ProgressEvent {
            type_: event.kind.to_owned(),
            agent: event.agent,
            data: event.data.to_string(),
        });
    }

    fn evaluation(&mut self, record: EvaluationRecord) {
        host::evaluation(&host::EvaluationRecord {
            agent: record.agent,
            input: record.input,
            payload: record.payload.map(|p| p.to_string()),
            result: to_wit_result(record.result),
            duration_ms: record.duration_ms,
        });
    }

    fn now_ms(&mut self) -> u64 {
        wasip2::clocks::monotonic_clock::now() / 1_000_000
    }

    fn random_unit(&mut self) -> f64 {
        transport::random_unit()
    }
}

fn to_wit_event(event: AgentEvent) -> ag::AgentEvent {
    match event {
        AgentEvent::TextDelta(text) => ag::AgentEvent::TextDelta(text),
        AgentEvent::ReasoningDelta(text) => ag::AgentEvent::ReasoningDelta(text),
        AgentEvent::Turn(Event::Text(text)) => ag::AgentEvent::Text(text),
        AgentEvent::Turn(Event::ToolUse(call)) => ag::AgentEvent::ToolUse(to_wit_tool_use(call)),
        AgentEvent::Turn(Event::ToolResult(result)) => {
            ag::AgentEvent::ToolResult(wit::ToolResultBlock {
                tool_use_id: result.tool_use_id,
                content: to_wit_content(result.content),
                is_error: result.is_error,
            })
        }
        AgentEvent::Turn(Event::BudgetExceeded(exceeded)) => {
            ag::AgentEvent::BudgetExceeded(exceeded.to_string())
        }
        AgentEvent::Done(outcome) if outcome.success => {
            ag::AgentEvent::Done(to_wit_result(outcome))
        }
        AgentEvent::Done(outcome) => ag::AgentEvent::Error(to_wit_result(outcome)),
    }
}

fn to_wit_result(outcome: RunOutcome) -> oc::RunResult {
    oc::RunResult {
        success: outcome.success,
        output: outcome.output,
        messages: outcome.messages.into_iter().map(to_wit_message).collect(),
        token_usage: wire::TokenUsage {
            input_tokens: outcome.token_usage.input_tokens,
            output_tokens: outcome.token_usage.output_tokens,
        },
        tool_calls: outcome
            .tool_calls
            .into_iter()
            .map(|call| oc::ToolCallRecord {
                tool_name: call.tool_name,
                input: call.input.to_string(),
                output: to_wit_content(call.output),
                is_error: call.is_error,
            })
            .collect(),
        turns: outcome.turns,
        budget_exceeded: outcome.budget_exceeded,
        failure: outcome.failure.map(|failure| oc::RunFailure {
            status: oc::RunStatus {
                code: match failure.status.code {
                    StatusCode::Timeout => oc::StatusCode::Timeout,
                    StatusCode::Rejected => oc::StatusCode::Rejected,
                    StatusCode::BudgetExhausted => oc::StatusCode::BudgetExhausted,
                    _ => oc::StatusCode::Error,
                },
                message: failure.status.message,
            },
            error_info: oc::ErrorInfo {
                kind: match failure.error_info.kind {
                    FailureKind::Validation => oc::FailureKind::Validation,
                    FailureKind::Budget => oc::FailureKind::Budget,
                    FailureKind::Callback => oc::FailureKind::Callback,
                    FailureKind::Provider => oc::FailureKind::Provider,
                    _ => oc::FailureKind::Unknown,
                },
                code: failure.error_info.code,
                name: failure.error_info.name,
                message: failure.error_info.message,
                retryable: failure.error_info.retryable,
                http_status: failure.error_info.http_status,
                provider: failure.error_info.provider,
            },
        }),
    }
}
