//! The spans of one run, and the two views a host may ask for (`docs/observability.md`): OMA's
//! trace records (schema v2: a `run` span, the agent's `invoke_agent` span, a `chat` span per
//! model call, an `execute_tool` span per tool call, and events on them) and OMA's legacy
//! `onTrace` events (an `llm_call`, a `tool_call` and an `agent` event). Both are made from the
//! same span as it ends, with the same times and counts: a legacy event is the view of a span
//! end that OMA's `LegacyCallbackTraceSink` gets, and when both views are on it rides on its
//! record too.
//!
//! The run machine tells the tracer what happens, with the time of the poll it happened at;
//! the tracer queues what a host is to be handed ([`Traced`]), which the machine turns into
//! steps. Ids come from random sources seeded with the run's seed (each view its own, so a run
//! makes the same retry and sampling draws whatever it traces). Records pass the run's capture
//! policy ([`SensitiveData`]) before they are queued.

use serde_json::Value;

use super::capture::{Content, SensitiveData, StreamEvents};
use super::options::RecordOptions;
use super::record::{
    Attributes, ErrorKind, EventName, Observed, RecordBody, Recorder, SpanError, SpanKind,
    SpanStatus, StatusCode,
};
use crate::agent::exchange::ToolGate;
use crate::agent::outcome::{classify, truncate_units, Ending, Failure, RunOutcome};
use crate::agent::redact::redact_secrets;
use crate::agent::trace::{redact_value, uuid_v4, LlmPhase, TraceData, TraceEvent, TraceOptions};
use crate::error::Error;
use crate::message::{LlmResponse, Role, ToolResultContent};
use crate::rng::Rng;

/// What the tracer has for the host, in order.
#[derive(Debug)]
pub(crate) enum Traced {
    /// A legacy `onTrace` event.
    Event(TraceEvent),
    /// A record.
    Record(Observed),
}

/// What the legacy view keeps of its options.
#[derive(Debug)]
struct Legacy {
    run_id: String,
    /// The agent span's id, the parent of the other events.
    span_id: String,
    parent_id: Option<String>,
    rng: Rng,
}

/// What the records view keeps: the run's ids and numbering, its spans, the policy.
#[derive(Debug)]
struct Records {
    recorder: Recorder,
    root_span_id: String,
    /// The root span's parent: the span of a trace the host continues, if any.
    root_parent: Option<String>,
    agent_span_id: String,
    processing: SensitiveData,
    /// The root span's attributes (`oma.run.id`, `oma.run.attempt`, `oma.meta.*`).
    root_attributes: Attributes,
    /// The agent span's attributes as it began.
    agent_attributes: Attributes,
}

/// The model call in flight.
#[derive(Debug)]
struct OpenLlm {
    start_ms: u64,
    turn: u32,
    phase: LlmPhase,
    model: String,
    /// Its record span and the attributes it began with.
    span: Option<(String, Attributes)>,
    /// Whether a piece of its streamed answer arrived.
    chunked: bool,
}

/// A tool call in flight.
#[derive(Debug)]
struct OpenTool {
    id: String,
    tool: String,
    /// Its input with OMA's sensitive-field redaction applied.
    input: Value,
    start_ms: u64,
    span: Option<(String, Attributes)>,
}

/// A tool call answered, ending at the next poll.
#[derive(Debug)]
struct AnsweredTool {
    open: OpenTool,
    is_error: bool,
    /// The answer as recorded: its text, media as placeholders (not yet redacted).
    output: String,
    gate: Option<ToolGate>,
}

/// The tracing state of one run.
#[derive(Debug)]
pub(crate) struct Tracer {
    legacy: Option<Legacy>,
    records: Option<Records>,
    agent: String,
    task_id: Option<String>,
    provider: Option<String>,
    started_ms: Option<u64>,
    llm: Option<OpenLlm>,
    /// Model calls of phase `turn` so far.
    turns: u32,
    tools: Vec<OpenTool>,
    answered: Vec<AnsweredTool>,
    out: Vec<Traced>,
}

impl Tracer {
    /// Tracing for a run of `agent` (a call of `run-agent` when `run_agent`) seeded with
    /// `seed`: legacy events with `legacy`, records with `records`. The two views share the
    /// run's id: the one given (they agree when both give one, [`RecordOptions`] is checked
    /// against the trace options before), else one drawn.
    pub(crate) fn new(
        legacy: Option<TraceOptions>,
        records: Option<RecordOptions>,
        agent: &str,
        provider: Option<&str>,
        run_agent: bool,
        seed: u64,
    ) -> Self {
        let given_run_id = legacy
            .as_ref()
            .and_then(|o| o.run_id.clone())
            .or_else(|| records.as_ref().and_then(|o| o.run_id.clone()));
        let agent_name = legacy
            .as_ref()
            .and_then(|o| o.agent.clone())
            .unwrap_or_else(|| agent.to_owned());
        let task_id = legacy.as_ref().and_then(|o| o.task_id.clone());
        let legacy = legacy.map(|options| {
            let mut rng = Rng::new(seed ^ 0x6f6d_615f_7472_6163);
            let run_id = given_run_id.clone().unwrap_or_else(|| uuid_v4(&mut rng));
            let span_id = options.span_id.unwrap_or_else(|| uuid_v4(&mut rng));
            Legacy {
                run_id,
                span_id,
                parent_id: options.parent_id,
                rng,
            }
        });
        let records = records.map(|options| {
            let mut rng = Rng::new(seed ^ 0x6f6d_615f_7265_636f);
            let run_id = match (&legacy, given_run_id) {
                (_, Some(id)) => id,
                (Some(legacy), None) => legacy.run_id.clone(),
                (None, None) => uuid_v4(&mut rng),
            };
            let (trace_id, root_parent) = match options.parent {
                Some(parent) => (Some(parent.trace_id), Some(parent.span_id)),
                None => (None, None),
            };
            let mut recorder = Recorder::new(run_id.clone(), trace_id, rng);
            let root_span_id = recorder.span_id();
            let agent_span_id = recorder.span_id();
            let mut root_attributes = Attributes::new();
            root_attributes.insert("oma.run.id".into(), Value::from(run_id.as_str()));
            root_attributes.insert("oma.run.attempt".into(), Value::from(1));
            for (key, value) in options.metadata {
                root_attributes.insert(format!("oma.meta.{key}"), value);
            }
            let mut agent_attributes = Attributes::new();
            agent_attributes.insert("oma.agent.name".into(), Value::from(agent_name.as_str()));
            if run_agent {
                agent_attributes.insert("oma.phase".into(), Value::from("agent"));
            }
            if let Some(task) = &task_id {
                agent_attributes.insert("oma.task.id".into(), Value::from(task.as_str()));
            }
            Records {
                recorder,
                root_span_id,
                root_parent,
                agent_span_id,
                processing: SensitiveData {
                    allowlist: None,
                    capture: options.capture,
                },
                root_attributes,
                agent_attributes,
            }
        });
        Tracer {
            legacy,
            records,
            agent: agent_name,
            task_id,
            provider: provider.map(str::to_owned),
            started_ms: None,
            llm: None,
            turns: 0,
            tools: Vec::new(),
            answered: Vec::new(),
            out: Vec::new(),
        }
    }

    /// What the tracer has for the host, in order; empty after.
    pub(crate) fn take(&mut self) -> Vec<Traced> {
        std::mem::take(&mut self.out)
    }

    /// The attributes every span of the agent carries: its name, and the task's id.
    fn agent_attributes(&self) -> Attributes {
        let mut attributes = Attributes::new();
        attributes.insert("oma.agent.name".into(), Value::from(self.agent.as_str()));
        attributes
    }

    fn with_task(&self, mut attributes: Attributes) -> Attributes {
        if let Some(task) = &self.task_id {
            attributes.insert("oma.task.id".into(), Value::from(task.as_str()));
        }
        attributes
    }

    /// Queues a record of `span_id` under `parent` at `now_ms`, processed by the run's policy
    /// (and carrying `legacy`, the legacy event it completes, when there is one).
    fn record(
        &mut self,
        now_ms: u64,
        span_id: String,
        parent: Option<String>,
        body: RecordBody,
        legacy: Option<&TraceEvent>,
    ) {
        let Some(records) = self.records.as_mut() else {
            return;
        };
        let record = records.recorder.record(now_ms, span_id, parent, body);
        if let Some(record) = records.processing.process(record.into_json()) {
            self.out.push(Traced::Record(Observed {
                record,
                legacy: legacy.map(TraceEvent::to_json),
            }));
        }
    }

    /// Queues a legacy event.
    fn event(&mut self, event: Option<TraceEvent>) {
        if let Some(event) = event {
            self.out.push(Traced::Event(event));
        }
    }

    /// A legacy event of a call under the agent span, with a fresh id.
    fn legacy_event(&mut self, start_ms: u64, end_ms: u64, data: TraceData) -> Option<TraceEvent> {
        let legacy = self.legacy.as_mut()?;
        Some(TraceEvent {
            run_id: legacy.run_id.clone(),
            span_id: uuid_v4(&mut legacy.rng),
            parent_id: Some(legacy.span_id.clone()),
            task_id: self.task_id.clone(),
            agent: self.agent.clone(),
            start_ms,
            end_ms,
            data,
        })
    }

    /// The run began at `now_ms` (its first poll): its root span and its agent span start.
    pub(crate) fn start(&mut self, now_ms: u64) {
        if self.started_ms.is_some() {
            return;
        }
        self.started_ms = Some(now_ms);
        let Some(records) = &self.records else {
            return;
        };
        let (root, agent) = (records.root_span_id.clone(), records.agent_span_id.clone());
        let root_parent = records.root_parent.clone();
        let root_attributes = records.root_attributes.clone();
        let agent_attributes = records.agent_attributes.clone();
        self.record(
            now_ms,
            root.clone(),
            root_parent,
            RecordBody::Start {
                kind: SpanKind::Run,
                name: "oma.run",
                start_ms: now_ms,
                attributes: root_attributes,
            },
            None,
        );
        self.record(
            now_ms,
            agent,
            Some(root),
            RecordBody::Start {
                kind: SpanKind::Agent,
                name: "invoke_agent",
                start_ms: now_ms,
                attributes: agent_attributes,
            },
            None,
        );
    }

    /// The agent span's id, the parent of the run's model and tool spans.
    fn agent_span(&self) -> Option<String> {
        self.records.as_ref().map(|r| r.agent_span_id.clone())
    }

    fn new_span(&mut self) -> Option<String> {
        self.records.as_mut().map(|r| r.recorder.span_id())
    }

    /// A model call to `model` starts at `now_ms`. A summary call carries the number of the
    /// turn it prepares (OMA's), so it does not count as a turn itself.
    pub(crate) fn llm_started(&mut self, now_ms: u64, phase: LlmPhase, model: &str) {
        let turn = self.turns.saturating_add(1);
        if phase == LlmPhase::Turn {
            self.turns = turn;
        }
        let span = self.new_span().map(|id| {
            let mut attributes = self.agent_attributes();
            attributes.insert("oma.llm.model".into(), Value::from(model));
            if let Some(provider) = &self.provider {
                attributes.insert("oma.llm.provider".into(), Value::from(provider.as_str()));
            }
            attributes.insert("oma.phase".into(), Value::from(phase.word()));
            attributes.insert("oma.llm.turn".into(), Value::from(turn));
            (id, self.with_task(attributes))
        });
        if let Some((id, attributes)) = &span {
            let parent = self.agent_span();
            self.record(
                now_ms,
                id.clone(),
                parent,
                RecordBody::Start {
                    kind: SpanKind::Llm,
                    name: "chat",
                    start_ms: now_ms,
                    attributes: attributes.clone(),
                },
                None,
            );
        }
        self.llm = Some(OpenLlm {
            start_ms: now_ms,
            turn,
            phase,
            model: model.to_owned(),
            span,
            chunked: false,
        });
    }

    /// The model call in flight answered at `now_ms` with `response`.
    pub(crate) fn llm_answered(&mut self, now_ms: u64, response: &LlmResponse) {
        let Some(open) = self.llm.take() else {
            return;
        };
        let response_model = Some(response.model.clone()).filter(|m| !m.is_empty());
        let event = self.legacy_event(
            open.start_ms,
            now_ms,
            TraceData::LlmCall {
                model: open.model,
                phase: open.phase,
                turn: open.turn,
                tokens: response.usage,
            },
        );
        if let Some((id, mut attributes)) = open.span {
            attributes.insert(
                "oma.usage.input_tokens".into(),
                Value::from(response.usage.input_tokens),
            );
            attributes.insert(
                "oma.usage.output_tokens".into(),
                Value::from(response.usage.output_tokens),
            );
            let usage = &response.usage;
            for (key, count) in [
                (
                    "oma.usage.cache_read_input_tokens",
                    usage.cache_read_input_tokens,
                ),
                (
                    "oma.usage.cache_creation_input_tokens",
                    usage.cache_creation_input_tokens,
                ),
            ] {
                if count > 0 {
                    attributes.insert(key.into(), Value::from(count));
                }
            }
            if let Some(model) = &response_model {
                attributes.insert("oma.llm.response_model".into(), Value::from(model.as_str()));
            }
            self.end_span(
                now_ms,
                id,
                SpanKind::Llm,
                "chat",
                open.start_ms,
                SpanStatus::ok(),
                None,
                attributes,
                event.as_ref(),
            );
        }
        self.event(event);
    }

    /// The model call in flight failed at `now_ms` with `error`.
    pub(crate) fn llm_failed(&mut self, now_ms: u64, error: &Error) {
        let failure = classify(error, false, self.provider.as_deref());
        self.llm_ended(now_ms, Some(&failure), StatusCode::Error);
    }

    /// The model call in flight, if any, ended with the run at `now_ms`: `failure` is the run's
    /// (its deadline), none for a run that ended otherwise (cancelled).
    fn llm_abandoned(&mut self, now_ms: u64, failure: Option<&Failure>) {
        self.llm_ended(now_ms, failure, StatusCode::Cancelled);
    }

    /// Ends the model call in flight as failed: its span's end with the failure; no legacy
    /// event (OMA's `onTrace` sees none for a failed call).
    fn llm_ended(&mut self, now_ms: u64, failure: Option<&Failure>, otherwise: StatusCode) {
        let Some(open) = self.llm.take() else {
            return;
        };
        if let Some((id, attributes)) = open.span {
            let (status, error) = match failure {
                Some(failure) => (
                    SpanStatus::of(&failure.status),
                    Some(SpanError::of(&failure.error_info)),
                ),
                None => (
                    SpanStatus {
                        code: otherwise,
                        message: None,
                    },
                    None,
                ),
            };
            self.end_span(
                now_ms,
                id,
                SpanKind::Llm,
                "chat",
                open.start_ms,
                status,
                error,
                attributes,
                None,
            );
        }
    }

    /// A span ends at `now_ms`: its record, with every attribute it carries and `oma.status`
    /// last, as OMA writes a span's end.
    #[allow(clippy::too_many_arguments)]
    fn end_span(
        &mut self,
        now_ms: u64,
        id: String,
        kind: SpanKind,
        name: &'static str,
        start_ms: u64,
        status: SpanStatus,
        error: Option<SpanError>,
        mut attributes: Attributes,
        legacy: Option<&TraceEvent>,
    ) {
        let parent = match kind {
            SpanKind::Run => self.records.as_ref().and_then(|r| r.root_parent.clone()),
            SpanKind::Agent => self.records.as_ref().map(|r| r.root_span_id.clone()),
            _ => self.agent_span(),
        };
        attributes.insert("oma.status".into(), Value::from(status.code.word()));
        self.record(
            now_ms,
            id,
            parent,
            RecordBody::End {
                kind,
                name,
                start_ms,
                end_ms: now_ms.max(start_ms),
                status,
                error,
                attributes,
            },
            legacy,
        );
    }

    /// An event on the span `id` (under `parent`) at `now_ms`.
    fn span_event(
        &mut self,
        now_ms: u64,
        id: String,
        parent: Option<String>,
        name: EventName,
        attributes: Attributes,
    ) {
        self.record(
            now_ms,
            id,
            parent,
            RecordBody::Event { name, attributes },
            None,
        );
    }

    /// The model call in flight failed its attempt `attempt` of `max_attempts` and is tried
    /// again after `delay_ms` (OMA's `retry_scheduled`).
    pub(crate) fn retry_scheduled(
        &mut self,
        now_ms: u64,
        attempt: u32,
        max_attempts: u32,
        delay_ms: u64,
    ) {
        let Some(id) = self
            .llm
            .as_ref()
            .and_then(|o| o.span.as_ref())
            .map(|s| s.0.clone())
        else {
            return;
        };
        let mut attributes = Attributes::new();
        attributes.insert("oma.retry.attempt".into(), Value::from(attempt));
        attributes.insert("oma.retry.max_attempts".into(), Value::from(max_attempts));
        attributes.insert("oma.retry.delay_ms".into(), Value::from(delay_ms));
        let parent = self.agent_span();
        self.span_event(now_ms, id, parent, EventName::RetryScheduled, attributes);
    }

    /// A piece of the streamed answer of the model call in flight arrived at `now_ms`: the
    /// first is a `first_chunk` event on its span, with the time it took (`oma.ttft.ms`).
    pub(crate) fn chunk(&mut self, now_ms: u64) {
        let Some(open) = self.llm.as_mut() else {
            return;
        };
        if open.chunked {
            return;
        }
        open.chunked = true;
        let waited = now_ms.saturating_sub(open.start_ms);
        let Some(id) = open.span.as_ref().map(|s| s.0.clone()) else {
            return;
        };
        let mut attributes = Attributes::new();
        attributes.insert("oma.ttft.ms".into(), Value::from(waited));
        let parent = self.agent_span();
        self.span_event(now_ms, id, parent, EventName::FirstChunk, attributes);
    }

    /// A streamed run delivered an event of OMA's stream type `kind` (`text`, `reasoning`,
    /// `tool_use`, `tool_result`, `loop_detected`, `budget_exceeded`): a `stream_chunk` event on
    /// the agent span when the policy keeps every stream event.
    pub(crate) fn streamed(&mut self, now_ms: u64, kind: &'static str) {
        let Some(records) = &self.records else {
            return;
        };
        if records.processing.capture.stream_events != StreamEvents::All {
            return;
        }
        let (id, parent) = (records.agent_span_id.clone(), records.root_span_id.clone());
        let mut attributes = Attributes::new();
        attributes.insert("oma.stream.type".into(), Value::from(kind));
        self.span_event(now_ms, id, Some(parent), EventName::StreamChunk, attributes);
    }

    /// The run found a loop (OMA's `loop_detected`), on the agent span.
    pub(crate) fn loop_detected(&mut self, now_ms: u64, kind: &str, repetitions: u32) {
        let Some(records) = &self.records else {
            return;
        };
        let (id, parent) = (records.agent_span_id.clone(), records.root_span_id.clone());
        let mut attributes = Attributes::new();
        attributes.insert("oma.loop.kind".into(), Value::from(kind));
        attributes.insert("oma.loop.repetitions".into(), Value::from(repetitions));
        self.span_event(
            now_ms,
            id,
            Some(parent),
            EventName::LoopDetected,
            attributes,
        );
    }

    /// The run's token budget ran out (OMA's `budget_exhausted`), on the agent span.
    pub(crate) fn budget_exhausted(&mut self, now_ms: u64) {
        let Some(records) = &self.records else {
            return;
        };
        let (id, parent) = (records.agent_span_id.clone(), records.root_span_id.clone());
        self.span_event(
            now_ms,
            id,
            Some(parent),
            EventName::BudgetExhausted,
            Attributes::new(),
        );
    }

    /// A tool call is handed out at `now_ms`.
    pub(crate) fn tool_started(&mut self, now_ms: u64, id: &str, tool: &str, input: &Value) {
        let input = redact_value(input);
        let span = self.new_span().map(|span| {
            let mut attributes = self.agent_attributes();
            attributes.insert("oma.tool.name".into(), Value::from(tool));
            let mut attributes = self.with_task(attributes);
            if self.captures_tool(|c| c.tool_input) {
                attributes.insert("oma.tool.input".into(), Value::from(input.to_string()));
            }
            (span, attributes)
        });
        if let Some((span, attributes)) = &span {
            let parent = self.agent_span();
            self.record(
                now_ms,
                span.clone(),
                parent,
                RecordBody::Start {
                    kind: SpanKind::Tool,
                    name: "execute_tool",
                    start_ms: now_ms,
                    attributes: attributes.clone(),
                },
                None,
            );
        }
        self.tools.push(OpenTool {
            id: id.to_owned(),
            tool: tool.to_owned(),
            input,
            start_ms: now_ms,
            span,
        });
    }

    /// Whether the records capture the tool content `which` picks from the policy.
    fn captures_tool(&self, which: impl Fn(&super::capture::CapturePolicy) -> Content) -> bool {
        self.records
            .as_ref()
            .is_some_and(|r| which(&r.processing.capture) == Content::Redacted)
    }

    /// The tool call `id` was answered with `content`; its span ends at the next poll.
    pub(crate) fn tool_answered(
        &mut self,
        id: &str,
        content: &ToolResultContent,
        is_error: bool,
        gate: Option<ToolGate>,
    ) {
        let Some(at) = self.tools.iter().position(|open| open.id == id) else {
            return;
        };
        let open = self.tools.swap_remove(at);
        self.answered.push(AnsweredTool {
            open,
            is_error,
            output: content.summary(),
            gate,
        });
    }

    /// The answered tool calls end at `now_ms` (the poll after their answers).
    pub(crate) fn end_answered(&mut self, now_ms: u64) {
        for answered in std::mem::take(&mut self.answered) {
            self.tool_ended(now_ms, answered);
        }
    }

    fn tool_ended(&mut self, now_ms: u64, answered: AnsweredTool) {
        let AnsweredTool {
            open,
            is_error,
            output,
            gate,
        } = answered;
        let redacted = redact_secrets(&output);
        let event = self.legacy_event(
            open.start_ms,
            now_ms.max(open.start_ms),
            TraceData::ToolCall {
                tool: open.tool,
                is_error,
                input: open.input,
                output: redacted.clone(),
                // OMA redacts the reason as text, and keeps the action as the gate gave it.
                gate: gate.map(|gate| ToolGate {
                    action: gate.action,
                    reason: gate.reason.map(|reason| redact_secrets(&reason)),
                }),
            },
        );
        if let Some((id, mut attributes)) = open.span {
            attributes.insert("oma.tool.is_error".into(), Value::from(is_error));
            if self.captures_tool(|c| c.tool_output) {
                attributes.insert("oma.tool.output".into(), Value::from(output.as_str()));
            }
            // OMA's classification of a failed tool: a plain `Error` of its recorded output.
            let (status, error) = if is_error {
                let message = |max| Some(truncate_units(&redacted, max)).filter(|m| !m.is_empty());
                (
                    SpanStatus {
                        code: StatusCode::Error,
                        message: message(256),
                    },
                    Some(SpanError {
                        kind: ErrorKind::Tool,
                        code: None,
                        name: Some("Error".into()),
                        message: message(1024),
                        retryable: Some(true),
                        http_status: None,
                        provider: None,
                    }),
                )
            } else {
                (SpanStatus::ok(), None)
            };
            self.end_span(
                now_ms,
                id,
                SpanKind::Tool,
                "execute_tool",
                open.start_ms,
                status,
                error,
                attributes,
                event.as_ref(),
            );
        }
        self.event(event);
    }

    /// The run ended at `now_ms` with `outcome`: what is still in flight ends with it (a model
    /// call, tool calls whose answers never came), then the agent span (the legacy `agent`
    /// event) and the root span.
    pub(crate) fn end(&mut self, now_ms: u64, outcome: &RunOutcome) {
        let failure = match &outcome.ending {
            Ending::Failed(failure) | Ending::BudgetExceeded(failure) => Some(failure),
            Ending::Completed => None,
        };
        self.llm_abandoned(now_ms, failure);
        self.end_answered(now_ms);
        for open in std::mem::take(&mut self.tools) {
            if let Some((id, attributes)) = open.span {
                let (status, error) = match failure {
                    Some(failure) => (
                        SpanStatus::of(&failure.status),
                        Some(SpanError::of(&failure.error_info)),
                    ),
                    None => (
                        SpanStatus {
                            code: StatusCode::Cancelled,
                            message: None,
                        },
                        None,
                    ),
                };
                self.end_span(
                    now_ms,
                    id,
                    SpanKind::Tool,
                    "execute_tool",
                    open.start_ms,
                    status,
                    error,
                    attributes,
                    None,
                );
            }
        }
        let start_ms = self.started_ms.unwrap_or(now_ms);
        let turns = outcome
            .messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count();
        let turns = u32::try_from(turns).unwrap_or(u32::MAX);
        let tool_calls = u32::try_from(outcome.tool_calls.len()).unwrap_or(u32::MAX);
        let event = self.legacy.as_ref().map(|legacy| TraceEvent {
            run_id: legacy.run_id.clone(),
            span_id: legacy.span_id.clone(),
            parent_id: legacy.parent_id.clone(),
            task_id: self.task_id.clone(),
            agent: self.agent.clone(),
            start_ms,
            end_ms: now_ms,
            data: TraceData::Agent {
                turns,
                tokens: outcome.token_usage,
                tool_calls,
            },
        });
        if let Some(records) = &self.records {
            let (status, error) = match failure {
                Some(failure) => (
                    SpanStatus::of(&failure.status),
                    Some(SpanError::of(&failure.error_info)),
                ),
                None => (SpanStatus::ok(), None),
            };
            let agent = records.agent_span_id.clone();
            let root = records.root_span_id.clone();
            let mut attributes = records.agent_attributes.clone();
            let root_attributes = records.root_attributes.clone();
            attributes.insert("oma.agent.name".into(), Value::from(self.agent.as_str()));
            attributes.insert("oma.agent.turns".into(), Value::from(turns));
            attributes.insert("oma.agent.tool_calls".into(), Value::from(tool_calls));
            attributes.insert(
                "oma.usage.input_tokens".into(),
                Value::from(outcome.token_usage.input_tokens),
            );
            attributes.insert(
                "oma.usage.output_tokens".into(),
                Value::from(outcome.token_usage.output_tokens),
            );
            self.end_span(
                now_ms,
                agent,
                SpanKind::Agent,
                "invoke_agent",
                start_ms,
                status.clone(),
                error.clone(),
                attributes,
                event.as_ref(),
            );
            self.end_span(
                now_ms,
                root,
                SpanKind::Run,
                "oma.run",
                start_ms,
                status,
                error,
                root_attributes,
                None,
            );
        }
        self.event(event);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::message::TokenUsage;

    fn records(traced: Vec<Traced>) -> Vec<Value> {
        traced
            .into_iter()
            .filter_map(|t| match t {
                Traced::Record(observed) => Some(observed.record),
                Traced::Event(_) => None,
            })
            .collect()
    }

    fn events(traced: Vec<Traced>) -> Vec<TraceEvent> {
        traced
            .into_iter()
            .filter_map(|t| match t {
                Traced::Event(event) => Some(event),
                Traced::Record(_) => None,
            })
            .collect()
    }

    fn outcome(usage: TokenUsage) -> RunOutcome {
        RunOutcome {
            output: "x".into(),
            messages: vec![crate::message::LlmMessage {
                role: Role::Assistant,
                content: Vec::new(),
            }],
            token_usage: usage,
            tool_calls: Vec::new(),
            turns: 1,
            ending: Ending::Completed,
            loop_detected: false,
            structured: None,
        }
    }

    #[test]
    fn legacy_events_are_omas_json_in_omas_key_order() {
        let options = TraceOptions {
            run_id: Some("run-1".into()),
            span_id: Some("span-a".into()),
            ..TraceOptions::default()
        };
        let mut tracer = Tracer::new(Some(options), None, "helper", Some("anthropic"), false, 1);
        tracer.start(900);
        tracer.llm_started(1000, LlmPhase::Turn, "m");
        let usage = TokenUsage::new(3, 4);
        let response = LlmResponse {
            id: "r".into(),
            content: Vec::new(),
            model: "m-2026".into(),
            stop_reason: "end_turn".into(),
            usage,
            stop_sequence: None,
        };
        tracer.llm_answered(1250, &response);
        let mut out = events(tracer.take());
        assert_eq!(out.len(), 1, "one event, no record");
        let event = out.remove(0);
        assert!(matches!(&event.data, TraceData::LlmCall { turn: 1, .. }));
        let text = serde_json::to_string(&event.to_json()).expect("JSON");
        let keys = [
            "type",
            "runId",
            "spanId",
            "parentId",
            "agent",
            "model",
            "phase",
            "turn",
            "tokens",
            "startMs",
            "endMs",
            "durationMs",
        ];
        let mut last = 0;
        for key in keys {
            let at = text.find(&format!("\"{key}\"")).expect(key);
            assert!(at >= last, "{key} out of order in {text}");
            last = at;
        }
        let json = event.to_json();
        assert_eq!(json["parentId"], "span-a");
        assert_eq!(json["durationMs"], 250);
        assert_eq!(json["turn"], 1);
        tracer.end(1300, &outcome(usage));
        let agent = events(tracer.take()).remove(0).to_json();
        assert_eq!(agent["spanId"], "span-a");
        assert_eq!(agent["startMs"], 900);
        assert!(agent.get("parentId").is_none());
        assert_eq!(agent["toolCalls"], 0);
        // What OMA's event has not stays out of its JSON.
        for extra in ["provider", "responseModel", "response_model", "error"] {
            assert!(json.get(extra).is_none(), "{extra} in {json}");
        }
    }

    /// A failed model call has no legacy event (OMA's `onTrace` sees none), and its span ends
    /// with OMA's classification of the failure.
    #[test]
    fn a_failed_call_has_no_legacy_event_and_its_span_ends_with_the_failure() {
        let failed = Error::Provider {
            provider: "openai".into(),
            status: Some(503),
            message: "overloaded".into(),
            code: None,
            error_type: None,
        };
        let mut oma = Tracer::new(Some(TraceOptions::default()), None, "a", None, false, 1);
        oma.llm_started(10, LlmPhase::Turn, "m");
        oma.llm_failed(20, &failed);
        assert!(oma.take().is_empty(), "OMA traces none");
        let mut gateway = Tracer::new(
            Some(TraceOptions::default()),
            Some(RecordOptions::default()),
            "a",
            Some("openai"),
            false,
            1,
        );
        gateway.start(5);
        gateway.llm_started(10, LlmPhase::Turn, "m");
        gateway.llm_failed(20, &failed);
        let out = gateway.take();
        assert!(
            out.iter().all(|t| matches!(t, Traced::Record(_))),
            "no legacy event"
        );
        let end = records(out).pop().expect("the span's end");
        assert_eq!(end["recordType"], "span_end");
        assert_eq!(
            end["status"],
            json!({"code": "error", "message": "503 overloaded"})
        );
        assert_eq!(end["error"]["kind"], "provider");
        assert_eq!(end["error"]["httpStatus"], 503);
        assert_eq!(end["error"]["provider"], "openai");
        gateway.llm_failed(30, &failed);
        assert!(gateway.take().is_empty(), "nothing in flight");
    }

    /// A run that continues a host's trace: its records take the trace's id, and its span is
    /// the host's span's child.
    #[test]
    fn a_run_continues_the_trace_it_is_given() {
        let options = RecordOptions {
            parent: Some(super::super::options::TraceParent {
                trace_id: "4bf92f3577b34da6a3ce929d0e0e4736".into(),
                span_id: "00f067aa0ba902b7".into(),
            }),
            ..RecordOptions::default()
        };
        let mut tracer = Tracer::new(None, Some(options), "a", None, false, 5);
        tracer.start(100);
        tracer.end(200, &outcome(TokenUsage::default()));
        let out = records(tracer.take());
        assert_eq!(out.len(), 4);
        assert!(out
            .iter()
            .all(|r| r["traceId"] == "4bf92f3577b34da6a3ce929d0e0e4736"));
        assert_eq!(out[0]["parentSpanId"], "00f067aa0ba902b7");
        assert_eq!(
            out[3]["parentSpanId"], "00f067aa0ba902b7",
            "the run span's end too"
        );
    }

    /// Ids are W3C's (32 and 16 lowercase hex digits, never zero), drawn from the seed: the
    /// same seed, the same ids; the run's id is shared by both views.
    #[test]
    fn ids_are_w3c_and_shared_by_both_views() {
        let options = RecordOptions::default();
        let mut tracer = Tracer::new(
            Some(TraceOptions::default()),
            Some(options.clone()),
            "a",
            None,
            false,
            5,
        );
        tracer.start(100);
        let out = records(tracer.take());
        assert_eq!(out.len(), 2);
        let trace = out[0]["traceId"].as_str().expect("a trace id");
        assert_eq!(trace.len(), 32);
        assert!(trace
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        assert_eq!(out[0]["spanId"].as_str().map(str::len), Some(16));
        assert_eq!(out[1]["parentSpanId"], out[0]["spanId"]);
        assert_eq!(out[0]["sequence"], 1);
        assert_eq!(out[1]["sequence"], 2);
        let legacy_run = tracer.legacy.as_ref().map(|l| l.run_id.clone());
        assert_eq!(out[0]["runId"].as_str(), legacy_run.as_deref());
        let mut twin = Tracer::new(
            Some(TraceOptions::default()),
            Some(options),
            "a",
            None,
            false,
            5,
        );
        twin.start(100);
        assert_eq!(records(twin.take()), out);
    }
}
