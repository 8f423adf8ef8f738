//! The host side of the component's `host` imports: the `beforeRun` hook, tool calls, the
//! model calls of an agent's own LLM adapter, progress events, evaluation records and external
//! backends.
//!
//! A guest instance holds one [`AgentHost`]; [`ScriptedHost`] is the one tests and the CLI use.
//! It answers as it is told (a hook, a tool, a backend, each a closure; adapters, each an
//! [`LlmAdapter`]) and records everything the component handed over in a [`HostLog`] that stays
//! readable from outside the store.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::bindings::oma::agent::exchange::{
    BeforeRunAnswer, BeforeRunContext, EvaluationRecord, ProgressEvent, ToolOutcome, TraceEvent,
    TraceRecord,
};
use crate::bindings::oma::agent::outcome::{ExternalKind, LoopInfo};
use crate::bindings::oma::agent::types::{LlmMessage, ToolResultContent, ToolUseBlock};
use crate::llm_adapter::{self, LlmAdapter, ModelCall, ModelReply};
use crate::observability::{FnSink, TraceSink as RecordSink};

/// What the component may ask of its host during a run. Every method has the answer of a host
/// that offers nothing: no hook (the hook fails), no tools (an error result), no backend.
pub trait AgentHost: Send {
    /// Runs the `beforeRun` hook.
    fn before_run(&mut self, context: BeforeRunContext) -> BeforeRunAnswer {
        let _ = context;
        BeforeRunAnswer::Failed("this host has no beforeRun hook".into())
    }

    /// Calls a tool.
    fn call_tool(&mut self, agent: &str, call: ToolUseBlock) -> ToolOutcome {
        let _ = agent;
        ToolOutcome {
            content: ToolResultContent::Text(format!("Tool \"{}\" is not available", call.name)),
            is_error: Some(true),
            gate: None,
        }
    }

    /// Calls the agent's own LLM adapter (`agent-config.adapter`) for one model call:
    /// `chat`'s response, its stream's events when `call.stream`, or what it threw.
    fn call_model(&mut self, agent: &str, call: ModelCall) -> ModelReply {
        let _ = agent;
        ModelReply::Failed(llm_adapter::thrown(format!(
            "this host has no LLM adapter named \"{}\"",
            call.adapter
        )))
    }

    /// Receives a progress event.
    fn progress(&mut self, event: ProgressEvent) {
        let _ = event;
    }

    /// Receives an evaluation record.
    fn evaluation(&mut self, record: EvaluationRecord) {
        let _ = record;
    }

    /// Receives one of OMA's trace events of a traced run (`agent-config.trace`).
    fn trace(&mut self, event: TraceEvent) {
        let _ = event;
    }

    /// Receives OMA's trace records of a run made with records on (`agent-config.records`, or
    /// a session's `records`), in sequence order: each record's JSON and the legacy event it
    /// carries.
    fn trace_records(&mut self, records: Vec<TraceRecord>) {
        let _ = records;
    }

    /// Sends text through an external backend.
    fn external_send(
        &mut self,
        agent: &str,
        kind: ExternalKind,
        text: String,
    ) -> Result<String, String> {
        let _ = (agent, kind, text);
        Err("this host has no external backend".into())
    }

    /// Calls the `custom` context strategy's function (OMA's `compress(messages,
    /// estimatedTokens)`): the conversation to send instead, or the function's failure.
    fn compress(
        &mut self,
        agent: &str,
        messages: Vec<LlmMessage>,
        estimated_tokens: u64,
    ) -> Result<Vec<LlmMessage>, String> {
        let _ = (agent, messages, estimated_tokens);
        Err("this host has no custom context strategy".into())
    }

    /// Calls OMA's `onLoopDetected` function: OMA's word (`terminate`, `warn`, `inject`,
    /// anything else to go on), or the function's failure.
    fn on_loop_detected(&mut self, agent: &str, info: LoopInfo) -> Result<String, String> {
        let _ = (agent, info);
        Err("this host has no onLoopDetected function".into())
    }
}

/// The host of a guest created without one: it offers nothing.
#[derive(Debug, Default)]
pub struct NoHost;

impl AgentHost for NoHost {}

/// Everything the component handed to a [`ScriptedHost`], in order.
#[derive(Debug, Default)]
pub struct HostLog {
    /// The contexts the hook received.
    pub before_run: Vec<BeforeRunContext>,
    /// The tool calls, with the agent's name.
    pub tool_calls: Vec<(String, ToolUseBlock)>,
    /// The model calls handed to LLM adapters, with the agent's name.
    pub model_calls: Vec<(String, ModelCall)>,
    /// The progress events.
    pub progress: Vec<ProgressEvent>,
    /// The evaluation records.
    pub evaluations: Vec<EvaluationRecord>,
    /// The trace events.
    pub traces: Vec<TraceEvent>,
    /// The trace records.
    pub records: Vec<TraceRecord>,
    /// The texts sent through external backends, with the backend's kind.
    pub external: Vec<(ExternalKind, String)>,
}

type Hook = Box<dyn FnMut(&BeforeRunContext) -> BeforeRunAnswer + Send>;
type Tool = Box<dyn FnMut(&ToolUseBlock) -> ToolOutcome + Send>;
type Backend = Box<dyn FnMut(&str) -> Result<String, String> + Send>;
type ProgressSink = Box<dyn FnMut(&ProgressEvent) + Send>;
type TraceSink = Box<dyn FnMut(&TraceEvent) + Send>;
type Compress = Box<dyn FnMut(Vec<LlmMessage>, u64) -> Result<Vec<LlmMessage>, String> + Send>;
type LoopDecider = Box<dyn FnMut(&LoopInfo) -> Result<String, String> + Send>;

/// A host that answers with closures and records what it was given.
#[derive(Default)]
pub struct ScriptedHost {
    log: Arc<Mutex<HostLog>>,
    hook: Option<Hook>,
    tool: Option<Tool>,
    backend: Option<Backend>,
    progress_sink: Option<ProgressSink>,
    trace_sink: Option<TraceSink>,
    record_sinks: Vec<Box<dyn RecordSink>>,
    compress: Option<Compress>,
    loop_decider: Option<LoopDecider>,
    /// The LLM adapters, by the name an agent's configuration gives them.
    adapters: HashMap<String, Box<dyn LlmAdapter>>,
}

impl std::fmt::Debug for ScriptedHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedHost").finish_non_exhaustive()
    }
}

/// A shared view of a [`ScriptedHost`]'s log, kept by the test while the host lives in the
/// guest's store.
#[derive(Clone, Debug, Default)]
pub struct LogHandle(Arc<Mutex<HostLog>>);

impl LogHandle {
    /// The log. A poisoned lock (a panicking closure) still yields what was recorded.
    pub fn lock(&self) -> MutexGuard<'_, HostLog> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl ScriptedHost {
    /// A host with no hook, no tools and no backend, recording everything.
    pub fn new() -> Self {
        ScriptedHost::default()
    }

    /// A handle on the log.
    pub fn log(&self) -> LogHandle {
        LogHandle(self.log.clone())
    }

    /// Answers `beforeRun` with `hook`.
    pub fn with_hook(
        mut self,
        hook: impl FnMut(&BeforeRunContext) -> BeforeRunAnswer + Send + 'static,
    ) -> Self {
        self.hook = Some(Box::new(hook));
        self
    }

    /// Answers every tool call with `tool`.
    pub fn with_tool(
        mut self,
        tool: impl FnMut(&ToolUseBlock) -> ToolOutcome + Send + 'static,
    ) -> Self {
        self.tool = Some(Box::new(tool));
        self
    }

    /// Answers the model calls of agents whose configuration names `name` as their adapter
    /// (`agent-config.adapter`) with `adapter`: `chat` for a run, `stream` for a streamed one.
    pub fn with_adapter(mut self, name: &str, adapter: impl LlmAdapter + 'static) -> Self {
        self.adapters.insert(name.to_owned(), Box::new(adapter));
        self
    }

    /// Answers external-backend sends with `backend`.
    pub fn with_backend(
        mut self,
        backend: impl FnMut(&str) -> Result<String, String> + Send + 'static,
    ) -> Self {
        self.backend = Some(Box::new(backend));
        self
    }

    /// Answers the `custom` context strategy with `compress` (the conversation and its token
    /// estimate in, the conversation to send out).
    pub fn with_compress(
        mut self,
        compress: impl FnMut(Vec<LlmMessage>, u64) -> Result<Vec<LlmMessage>, String> + Send + 'static,
    ) -> Self {
        self.compress = Some(Box::new(compress));
        self
    }

    /// Answers OMA's `onLoopDetected` with `decide` (OMA's word, or a failure).
    pub fn with_loop_decider(
        mut self,
        decide: impl FnMut(&LoopInfo) -> Result<String, String> + Send + 'static,
    ) -> Self {
        self.loop_decider = Some(Box::new(decide));
        self
    }

    /// Also passes each trace event to `sink` as it arrives (e.g. to write it out).
    pub fn with_trace_sink(mut self, sink: impl FnMut(&TraceEvent) + Send + 'static) -> Self {
        self.trace_sink = Some(Box::new(sink));
        self
    }

    /// Also passes each trace record to `sink` as it arrives (e.g. to write it out): a closure
    /// as a [`TraceSink`](crate::TraceSink) ([`FnSink`]), as [`with_sink`](Self::with_sink).
    pub fn with_record_sink(self, sink: impl FnMut(&TraceRecord) + Send + 'static) -> Self {
        self.with_sink(FnSink::new(sink))
    }

    /// Also emits each trace record to `sink` as it arrives, after the sinks given before it
    /// (OMA's `observability.sinks`). Keep an `Arc` of the sink to flush it or shut it down
    /// after the run. What the sink's `emit` returns never reaches the run (OMA's rule: a sink
    /// never fails a run); a [`CompositeTraceSink`](crate::CompositeTraceSink) around it
    /// counts and diagnoses its failures.
    pub fn with_sink(mut self, sink: impl RecordSink + 'static) -> Self {
        self.record_sinks.push(Box::new(sink));
        self
    }

    /// Also passes each progress event to `sink` as it arrives (e.g. to print it).
    pub fn with_progress_sink(mut self, sink: impl FnMut(&ProgressEvent) + Send + 'static) -> Self {
        self.progress_sink = Some(Box::new(sink));
        self
    }

    fn record(&self) -> MutexGuard<'_, HostLog> {
        self.log
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl AgentHost for ScriptedHost {
    fn before_run(&mut self, context: BeforeRunContext) -> BeforeRunAnswer {
        let answer = match &mut self.hook {
            Some(hook) => hook(&context),
            None => NoHost.before_run(context.clone()),
        };
        self.record().before_run.push(context);
        answer
    }

    fn call_tool(&mut self, agent: &str, call: ToolUseBlock) -> ToolOutcome {
        let outcome = match &mut self.tool {
            Some(tool) => tool(&call),
            None => NoHost.call_tool(agent, call.clone()),
        };
        self.record().tool_calls.push((agent.to_owned(), call));
        outcome
    }

    fn call_model(&mut self, agent: &str, call: ModelCall) -> ModelReply {
        let reply = match self.adapters.get_mut(&call.adapter) {
            Some(adapter) => llm_adapter::answer(adapter.as_mut(), &call),
            None => NoHost.call_model(agent, call.clone()),
        };
        self.record().model_calls.push((agent.to_owned(), call));
        reply
    }

    fn progress(&mut self, event: ProgressEvent) {
        if let Some(sink) = &mut self.progress_sink {
            sink(&event);
        }
        self.record().progress.push(event);
    }

    fn evaluation(&mut self, record: EvaluationRecord) {
        self.record().evaluations.push(record);
    }

    fn trace(&mut self, event: TraceEvent) {
        if let Some(sink) = &mut self.trace_sink {
            sink(&event);
        }
        self.record().traces.push(event);
    }

    fn trace_records(&mut self, records: Vec<TraceRecord>) {
        for record in &records {
            for sink in &self.record_sinks {
                // A sink never fails the run, by an error or a panic: its failures are its own
                // to count (`with_sink`).
                let _ =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sink.emit(record)));
            }
        }
        self.record().records.extend(records);
    }

    fn external_send(
        &mut self,
        agent: &str,
        kind: ExternalKind,
        text: String,
    ) -> Result<String, String> {
        let answer = match &mut self.backend {
            Some(backend) => backend(&text),
            None => NoHost.external_send(agent, kind, text.clone()),
        };
        self.record().external.push((kind, text));
        answer
    }

    fn compress(
        &mut self,
        agent: &str,
        messages: Vec<LlmMessage>,
        estimated_tokens: u64,
    ) -> Result<Vec<LlmMessage>, String> {
        match &mut self.compress {
            Some(compress) => compress(messages, estimated_tokens),
            None => NoHost.compress(agent, messages, estimated_tokens),
        }
    }

    fn on_loop_detected(&mut self, agent: &str, info: LoopInfo) -> Result<String, String> {
        match &mut self.loop_decider {
            Some(decide) => decide(&info),
            None => NoHost.on_loop_detected(agent, info),
        }
    }
}
