//! WIT values of runs to and from the model: configurations, inputs, hook answers, tool
//! outcomes, events, progress, evaluation cases and results. Conversions only.
//!
//! Shared by every world that runs agents (see `convert.rs` for how `super::wit` is set).

use serde_json::Value;

use oma_core::agent::before_run::{BeforeRunContext, BeforeRunResult, ExternalKind};
use oma_core::agent::config::AgentSettings;
use oma_core::agent::evaluation::{RunInput, StorePayloads};
use oma_core::agent::exchange::{
    AgentEvent, EvaluationRecord, HookAnswer, ProgressEvent, ToolOutcome,
};
use oma_core::agent::host_adapter::{self as ha, EchoesReasoning, HostAdapter};
use oma_core::agent::input::PromptInput;
use oma_core::agent::machine::RunSpec;
use oma_core::agent::observability::options::RecordOptions;
use oma_core::agent::observability::record::Observed;
use oma_core::agent::outcome::RunOutcome;
use oma_core::agent::outcome::{FailureKind, StatusCode};
use oma_core::agent::trace::{LlmPhase, TraceData, TraceEvent, TraceOptions};
use oma_core::agent::turn::Event;
use oma_core::error::Error;
use oma_core::message as m;

use super::convert::*;
use super::wit::exchange as ex;
use super::wit::outcome as oc;
use super::wit::types as wit;
use super::wit::wire;

/// The run spec and seed history of a typed configuration. Fails on tool schemas that are not
/// JSON, an invalid history, and a provider without a known default URL.
pub(super) fn from_wit_config(
    config: oc::AgentConfig,
) -> Result<(RunSpec, Vec<m::LlmMessage>), Error> {
    let provider = config.endpoint.provider.clone();
    let endpoint = from_wit_endpoint(config.endpoint, 0);
    AgentSettings {
        name: config.name,
        model: config.model,
        provider,
        adapter: config.adapter.map(from_wit_adapter),
        endpoint: oma_core::adapter::Endpoint {
            timestamp: None,
            ..endpoint
        },
        system_prompt: config.system_prompt,
        sampling: from_wit_sampling(config.sampling),
        thinking: from_wit_thinking(config.thinking_budget),
        extra_body: from_wit_extra_body(config.extra_body.as_deref())?,
        tools: from_wit_tools(config.tools)?,
        max_turns: config.max_turns,
        token_budget: config.token_budget,
        deadline_ms: config.deadline_ms,
        call: from_wit_options(config.call),
        history: from_wit_messages(config.history)?,
        before_run: config.before_run,
        external: config.external.map(from_wit_external),
        loop_detection: config
            .loop_detection
            .map(from_wit_loop_detection)
            .transpose()?,
        context: from_wit_context(config.context),
        trace: config.trace.map(from_wit_trace_options),
        records: config
            .records
            .as_deref()
            .map(RecordOptions::from_json)
            .transpose()?,
        output_schema: config
            .output_schema
            .as_deref()
            .map(oma_core::agent::structured::OutputSchema::from_text)
            .transpose()?,
    }
    .into_spec()
}

/// `run-agent`'s machine from its WIT arguments (the configuration's history is not used).
pub(super) fn run_agent_machine(
    config: oc::AgentConfig,
    input: oc::RunInput,
    options: &oc::RunAgentOptions,
    seed: u64,
) -> Result<oma_core::agent::machine::RunMachine, Error> {
    let (spec, _history) = from_wit_config(config)?;
    oma_core::agent::entry::start_run_agent(
        spec,
        from_wit_input(input)?,
        options.progress,
        from_wit_evaluation(options),
        seed,
    )
}

/// Trace records as their WIT form: each record's JSON, and the legacy event it carries.
pub(super) fn to_wit_records(records: Vec<Observed>) -> Vec<ex::TraceRecord> {
    records
        .into_iter()
        .map(|observed| ex::TraceRecord {
            json: json_text(&observed.record),
            legacy: observed.legacy.as_ref().map(json_text),
        })
        .collect()
}

/// A JSON value as compact text, written straight into a buffer (the same text as its
/// `to_string`, which goes through `fmt`'s machinery a piece at a time).
pub(super) fn json_text(value: &serde_json::Value) -> String {
    serde_json::to_string(value).expect("a JSON value")
}

/// Trace options from their WIT form.
pub(super) fn from_wit_trace_options(options: oc::TraceOptions) -> TraceOptions {
    TraceOptions {
        run_id: options.run_id,
        span_id: options.span_id,
        parent_id: options.parent_id,
        agent: options.agent,
        task_id: options.task_id,
    }
}

/// A trace event in its WIT form (the tool input as JSON text).
pub(super) fn to_wit_trace(event: TraceEvent) -> ex::TraceEvent {
    let usage = |u: m::TokenUsage| wire::TokenUsage {
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
    };
    let duration_ms = event.duration_ms();
    let data = match event.data {
        TraceData::LlmCall {
            model,
            phase,
            turn,
            tokens,
            ..
        } => ex::TraceData::LlmCall(ex::LlmCallTrace {
            model,
            phase: match phase {
                LlmPhase::Turn => ex::LlmPhase::Turn,
                LlmPhase::Summary => ex::LlmPhase::Summary,
            },
            turn,
            tokens: usage(tokens),
        }),
        TraceData::ToolCall {
            tool,
            is_error,
            input,
            output,
            gate,
        } => ex::TraceData::ToolCall(ex::ToolCallTrace {
            tool,
            is_error,
            input: input.to_string(),
            output,
            gate: gate.map(|gate| ex::ToolGate {
                action: gate.action,
                reason: gate.reason,
            }),
        }),
        TraceData::Agent {
            turns,
            tokens,
            tool_calls,
        } => ex::TraceData::Agent(ex::AgentTrace {
            turns,
            tokens: usage(tokens),
            tool_calls,
        }),
    };
    ex::TraceEvent {
        run_id: event.run_id,
        span_id: event.span_id,
        parent_id: event.parent_id,
        task_id: event.task_id,
        agent: event.agent,
        start_ms: event.start_ms,
        end_ms: event.end_ms,
        duration_ms,
        data,
    }
}

/// The agent's own LLM adapter, as its configuration declares it.
pub(super) fn from_wit_adapter(adapter: oc::HostAdapter) -> HostAdapter {
    HostAdapter {
        name: adapter.name,
        echoes_reasoning: adapter.echoes_reasoning.map(|echoes| match echoes {
            oc::EchoesReasoning::Never => EchoesReasoning::Never,
            oc::EchoesReasoning::OwnIssued => EchoesReasoning::OwnIssued,
            oc::EchoesReasoning::ToolUseOnly => EchoesReasoning::ToolUseOnly,
        }),
    }
}

/// What an adapter threw.
pub(super) fn from_wit_thrown(error: ex::ThrownError) -> Error {
    ha::thrown(Some(error.name), error.message, error.code, error.status)
}

pub(super) fn from_wit_external(kind: oc::ExternalKind) -> ExternalKind {
    match kind {
        oc::ExternalKind::Process => ExternalKind::Process,
        oc::ExternalKind::Acp => ExternalKind::Acp,
    }
}

pub(super) fn to_wit_external(kind: ExternalKind) -> oc::ExternalKind {
    match kind {
        ExternalKind::Process => oc::ExternalKind::Process,
        ExternalKind::Acp => oc::ExternalKind::Acp,
    }
}

pub(super) fn from_wit_input(input: oc::RunInput) -> Result<RunInput, Error> {
    Ok(match input {
        oc::RunInput::Text(text) => RunInput::Text(text),
        oc::RunInput::Messages(messages) => RunInput::Messages(from_wit_messages(messages)?),
    })
}

pub(super) fn from_wit_prompt(input: oc::PromptInput) -> Result<PromptInput, Error> {
    Ok(match input {
        oc::PromptInput::Text(text) => PromptInput::Text(text),
        oc::PromptInput::Blocks(blocks) => {
            // Converted as the one user turn they form, so paths read `messages[0]...`.
            let mut messages = from_wit_messages(vec![wit::LlmMessage {
                role: wit::Role::User,
                content: blocks,
            }])?;
            PromptInput::Blocks(messages.pop().map(|turn| turn.content).unwrap_or_default())
        }
    })
}

pub(super) fn from_wit_evaluation(options: &oc::RunAgentOptions) -> Option<(StorePayloads, f64)> {
    options.evaluation.as_ref().map(|e| {
        let policy = match e.store_payloads {
            oc::StorePayloads::None => StorePayloads::None,
            oc::StorePayloads::Redacted => StorePayloads::Redacted,
            oc::StorePayloads::Full => StorePayloads::Full,
        };
        (policy, e.sample_rate)
    })
}

/// The hook's context as the `host` import and the typed driver step carry it.
pub(super) fn to_wit_context(
    agent: String,
    context: BeforeRunContext,
    config: String,
) -> ex::BeforeRunContext {
    ex::BeforeRunContext {
        agent,
        prompt: context.prompt,
        messages: context.messages.into_iter().map(to_wit_message).collect(),
        config,
    }
}

/// A hook's answer: failed, OMA JSON (checked as OMA checks a JavaScript hook's return value),
/// or typed.
pub(super) fn from_wit_hook_answer(answer: ex::BeforeRunAnswer) -> HookAnswer {
    match answer {
        ex::BeforeRunAnswer::Failed(message) => HookAnswer::Failed(message),
        ex::BeforeRunAnswer::Json(text) => HookAnswer::from_json(&text),
        ex::BeforeRunAnswer::Typed(result) => {
            let messages = match result.messages.map(from_wit_messages).transpose() {
                Ok(messages) => messages,
                Err(error) => return HookAnswer::Rejected(error),
            };
            HookAnswer::Result(BeforeRunResult {
                prompt: Value::String(result.prompt),
                messages: messages.as_deref().map(oma_core::json::messages_to_value),
            })
        }
    }
}

/// A gate's decision from the WIT.
pub(super) fn from_wit_gate(gate: ex::ToolGate) -> oma_core::agent::exchange::ToolGate {
    oma_core::agent::exchange::ToolGate {
        action: gate.action,
        reason: gate.reason,
    }
}

pub(super) fn from_wit_tool_outcome(outcome: ex::ToolOutcome) -> ToolOutcome {
    ToolOutcome {
        content: from_wit_content(outcome.content),
        is_error: outcome.is_error,
        gate: outcome.gate.map(from_wit_gate),
    }
}

pub(super) fn to_wit_progress(event: ProgressEvent) -> ex::ProgressEvent {
    ex::ProgressEvent {
        type_: event.kind.to_owned(),
        agent: event.agent,
        data: event.data.to_string(),
    }
}

pub(super) fn to_wit_evaluation(record: EvaluationRecord) -> ex::EvaluationRecord {
    ex::EvaluationRecord {
        agent: record.agent,
        input: record.input,
        payload: record.payload.map(|p| p.to_string()),
        result: to_wit_result(record.result),
        duration_ms: record.duration_ms,
    }
}

/// An event as the `agent` interface's streams and the driver's `event` steps carry it. The
/// run's end is `done` (success) or `error` (failure).
pub(super) fn to_wit_event(event: AgentEvent) -> oc::AgentEvent {
    match event {
        AgentEvent::TextDelta(text) => oc::AgentEvent::TextDelta(text),
        AgentEvent::ReasoningDelta(text) => oc::AgentEvent::ReasoningDelta(text),
        AgentEvent::Turn(Event::Text(text)) => oc::AgentEvent::Text(text),
        AgentEvent::Turn(Event::ToolUse(call)) => oc::AgentEvent::ToolUse(to_wit_tool_use(call)),
        AgentEvent::Turn(Event::ToolResult(result)) => {
            oc::AgentEvent::ToolResult(wit::ToolResultBlock {
                tool_use_id: result.tool_use_id,
                content: to_wit_content(result.content),
                is_error: result.is_error,
            })
        }
        AgentEvent::Turn(Event::BudgetExceeded(exceeded)) => {
            oc::AgentEvent::BudgetExceeded(exceeded.to_string())
        }
        AgentEvent::Turn(Event::LoopDetected(info)) => {
            oc::AgentEvent::LoopDetected(to_wit_loop_info(info))
        }
        AgentEvent::Done(outcome) if outcome.success() => {
            oc::AgentEvent::Done(to_wit_result(outcome))
        }
        AgentEvent::Done(outcome) => oc::AgentEvent::Error(to_wit_result(outcome)),
    }
}

/// OMA's `LoopDetectionInfo` as the WIT `loop-info`.
pub(super) fn to_wit_loop_info(info: oma_core::agent::loop_detect::LoopInfo) -> oc::LoopInfo {
    oc::LoopInfo {
        kind: info.kind.word().to_owned(),
        repetitions: info.repetitions,
        detail: info.detail,
    }
}

pub(super) fn to_wit_result(outcome: RunOutcome) -> oc::RunResult {
    let success = outcome.success();
    let budget_exceeded = outcome.budget_exceeded();
    let loop_detected = outcome.loop_detected;
    let failure = outcome.failure().cloned();
    oc::RunResult {
        structured: outcome.structured.as_ref().map(Value::to_string),
        loop_detected,
        success,
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
        budget_exceeded,
        failure: failure.map(|failure| oc::RunFailure {
            status: oc::RunStatus {
                code: match failure.status.code {
                    StatusCode::Timeout => oc::StatusCode::Timeout,
                    StatusCode::Rejected => oc::StatusCode::Rejected,
                    StatusCode::BudgetExhausted => oc::StatusCode::BudgetExhausted,
                    StatusCode::Cancelled => oc::StatusCode::Cancelled,
                    _ => oc::StatusCode::Error,
                },
                message: failure.status.message,
            },
            error_info: oc::ErrorInfo {
                kind: match failure.error_info.kind {
                    FailureKind::Validation => oc::FailureKind::Validation,
                    FailureKind::Budget => oc::FailureKind::Budget,
                    FailureKind::Timeout => oc::FailureKind::Timeout,
                    FailureKind::Callback => oc::FailureKind::Callback,
                    FailureKind::Provider => oc::FailureKind::Provider,
                    FailureKind::Cancellation => oc::FailureKind::Cancellation,
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

/// `loop-detection`; a count of 0 is refused, naming the field, before any request.
pub(super) fn from_wit_loop_detection(
    detection: oc::LoopDetection,
) -> Result<oma_core::agent::loop_detect::LoopDetection, Error> {
    use oma_core::agent::loop_detect::{LoopAction, LoopDetection};
    let positive = |value: Option<u32>, field: &str, default: u32| match value {
        Some(0) => Err(Error::InvalidRequest {
            message: format!(
                "the agent configuration is not valid: `loop-detection.{field}` must be a \
                 positive integer, got 0"
            ),
        }),
        other => Ok(other.unwrap_or(default)),
    };
    let defaults = LoopDetection::default();
    Ok(LoopDetection {
        max_repetitions: positive(
            detection.max_repetitions,
            "max-repetitions",
            defaults.max_repetitions,
        )?,
        window: positive(detection.window, "window", defaults.window)?,
        action: match detection.action {
            oc::LoopAction::Warn => LoopAction::Warn,
            oc::LoopAction::Terminate => LoopAction::Terminate,
            oc::LoopAction::Callback => LoopAction::Ask,
        },
    })
}

/// `context-options`, with OMA's defaults for what it leaves out.
pub(super) fn from_wit_context(
    options: oc::ContextOptions,
) -> oma_core::agent::context::ContextOptions {
    use oma_core::agent::context::{
        Compact, ContextOptions, ContextStrategy, ReasoningText, Summarize,
    };
    ContextOptions {
        strategy: options.strategy.map(|strategy| match strategy {
            oc::ContextStrategy::SlidingWindow(max_turns) => {
                ContextStrategy::SlidingWindow { max_turns }
            }
            oc::ContextStrategy::Compact(c) => {
                let d = Compact::with_defaults(c.max_tokens);
                ContextStrategy::Compact(Compact {
                    preserve_recent_turns: c
                        .preserve_recent_turns
                        .unwrap_or(d.preserve_recent_turns),
                    min_tool_result_chars: c
                        .min_tool_result_chars
                        .unwrap_or(d.min_tool_result_chars),
                    min_text_block_chars: c.min_text_block_chars.unwrap_or(d.min_text_block_chars),
                    text_block_excerpt_chars: c
                        .text_block_excerpt_chars
                        .unwrap_or(d.text_block_excerpt_chars),
                    ..d
                })
            }
            oc::ContextStrategy::Summarize(s) => ContextStrategy::Summarize(Summarize {
                max_tokens: s.max_tokens,
                summary_model: s.summary_model,
            }),
            oc::ContextStrategy::Custom => ContextStrategy::Custom,
        }),
        compress_tool_results: options.compress_tool_results,
        preserve_reasoning_as_text: options.preserve_reasoning_as_text,
        compress_reasoning_text: match options.compress_reasoning_text {
            oc::ReasoningTextCap::Standard => ReasoningText::Default,
            oc::ReasoningTextCap::Whole => ReasoningText::Whole,
            oc::ReasoningTextCap::MaxChars(n) => ReasoningText::MaxChars(n),
        },
    }
}
