//! The per-instance host state: the WASI and wasi-http contexts, the resource table, and the
//! hooks that decide what happens to the guest's outbound HTTP requests.

use std::future::Future;

use wasmtime::component::ResourceTable;

use crate::agent_host::{AgentHost, NoHost};
use crate::bindings::oma::agent::exchange::{
    BeforeRunAnswer, BeforeRunContext, EvaluationRecord, ProgressEvent, ToolOutcome, TraceRecord,
};
use crate::bindings::oma::agent::outcome::ExternalKind;
use crate::bindings::oma::agent::types::ToolUseBlock;
use crate::keyvalue::{KeyValue, KeyValueView};
use crate::limits::{Limits, StoreGuard};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{
    RequestOptions, WasiBody, WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks, WasiHttpView,
};

/// How to set up one guest instance. `GuestOptions::default()` gives a sandbox with no
/// network (every outbound request is denied), no environment, no files and no stdio.
#[derive(Default)]
pub struct GuestOptions {
    /// The hooks for the guest's outbound HTTP; `None` installs [`DenyOutbound`].
    pub hooks: Option<Box<dyn WasiHttpHooks>>,
    /// Let the guest write to the host's standard error. The `component` world imports no
    /// stderr (`docs/worlds.md`), so this matters only for a guest built with one to debug it.
    pub inherit_stderr: bool,
    /// The host's answers to the component's `host` imports; `None` installs [`NoHost`].
    pub host: Option<Box<dyn AgentHost>>,
    /// This guest's deadline per call and memory cap; `None` takes the harness's
    /// ([`HarnessOptions::limits`](crate::HarnessOptions::limits), by default 30 s of guest
    /// time per call and 512 MiB per store).
    pub limits: Option<Limits>,
}

impl std::fmt::Debug for GuestOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuestOptions")
            .field("hooks", &self.hooks.as_ref().map(|_| "custom"))
            .field("inherit_stderr", &self.inherit_stderr)
            .field("host", &self.host.as_ref().map(|_| "custom"))
            .field("limits", &self.limits)
            .finish()
    }
}

/// The `T` of each guest's `Store<T>`.
pub struct HostState {
    wasi: WasiCtx,
    http: WasiHttpCtx,
    table: ResourceTable,
    hooks: Box<dyn WasiHttpHooks>,
    host: Box<dyn AgentHost>,
    guard: StoreGuard,
    /// The `wasi:keyvalue` store (the gateway server's; none elsewhere).
    keyvalue: KeyValue,
    /// What a run made for an eval target is watched for ([`RunCapture`]), while one is.
    capture: Option<RunCapture>,
}

/// What the host sees of one run that its result does not carry, kept for an eval target
/// ([`target_from_agent`](crate::eval::target_from_agent)): the trace and span ids of the
/// run's root span (from its trace records, when the run makes them) and how long each tool
/// call took, in call order (OMA's `toolCalls[].duration`), as the language packages take them.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct RunCapture {
    /// The root `run` span's trace id and span id.
    pub(crate) root: Option<(String, String)>,
    /// Each tool call's duration in milliseconds.
    pub(crate) tool_ms: Vec<u64>,
}

impl RunCapture {
    fn see_records(&mut self, records: &[TraceRecord]) {
        if self.root.is_some() {
            return;
        }
        for record in records {
            let Ok(value) = serde_json::from_str::<serde_json::Value>(&record.json) else {
                continue;
            };
            let root = value["recordType"] == "span_start"
                && value["kind"] == "run"
                && value
                    .get("parentSpanId")
                    .is_none_or(serde_json::Value::is_null);
            if let (true, Some(trace), Some(span)) =
                (root, value["traceId"].as_str(), value["spanId"].as_str())
            {
                self.root = Some((trace.to_owned(), span.to_owned()));
                return;
            }
        }
    }
}

impl HostState {
    /// A fresh state set up as `options` says.
    pub fn new(options: GuestOptions) -> Self {
        let mut wasi = WasiCtx::builder();
        if options.inherit_stderr {
            wasi.inherit_stderr();
        }
        HostState {
            wasi: wasi.build(),
            http: WasiHttpCtx::new(),
            table: ResourceTable::new(),
            hooks: options.hooks.unwrap_or_else(|| Box::new(DenyOutbound)),
            host: options.host.unwrap_or_else(|| Box::new(NoHost)),
            guard: StoreGuard::new(options.limits.unwrap_or_default()),
            keyvalue: KeyValue::none(),
            capture: None,
        }
    }

    /// A state around a WASI context the caller built (the gateway server's: an environment
    /// and stdio of its own), with `hooks` for outbound HTTP and no `host` imports.
    pub(crate) fn with_wasi(wasi: WasiCtx, hooks: Box<dyn WasiHttpHooks>, limits: Limits) -> Self {
        HostState {
            wasi,
            http: WasiHttpCtx::new(),
            table: ResourceTable::new(),
            hooks,
            host: Box::new(NoHost),
            guard: StoreGuard::new(limits),
            keyvalue: KeyValue::none(),
            capture: None,
        }
    }

    /// Links `keyvalue` as this store's `wasi:keyvalue` ([`crate::keyvalue`]).
    pub(crate) fn set_keyvalue(&mut self, keyvalue: KeyValue) {
        self.keyvalue = keyvalue;
    }

    /// This store's `wasi:keyvalue`: its [`KeyValue`] and its resource table.
    pub(crate) fn keyvalue_view(&mut self) -> KeyValueView<'_> {
        KeyValueView::new(&self.keyvalue, &mut self.table)
    }

    /// The limits this guest runs under (they apply in stores of a [`Harness`](crate::Harness)).
    pub fn limits(&self) -> Limits {
        self.guard.limits()
    }

    pub(crate) fn set_limits(&mut self, limits: Limits, tick: std::time::Duration) {
        self.guard = StoreGuard::new(limits);
        self.guard.set_tick(tick);
    }

    pub(crate) fn guard_mut(&mut self) -> &mut StoreGuard {
        &mut self.guard
    }

    /// The installed answers to the run's hooks, tools, progress, evaluation and external
    /// backends.
    pub fn agent_host(&mut self) -> &mut dyn AgentHost {
        &mut *self.host
    }

    /// Starts watching a run ([`RunCapture`]), dropping what an earlier one left.
    pub(crate) fn begin_capture(&mut self) {
        self.capture = Some(RunCapture::default());
    }

    /// What was seen since [`begin_capture`](Self::begin_capture), and stops watching.
    pub(crate) fn end_capture(&mut self) -> RunCapture {
        self.capture.take().unwrap_or_default()
    }

    /// A tool call handed to the installed host (timed while a run is watched).
    pub(crate) fn call_tool(&mut self, agent: &str, call: ToolUseBlock) -> ToolOutcome {
        let started = std::time::Instant::now();
        let outcome = self.host.call_tool(agent, call);
        if let Some(capture) = &mut self.capture {
            capture.tool_ms.push(started.elapsed().as_millis() as u64);
        }
        outcome
    }

    /// Trace records handed to the installed host (read for the root span while a run is
    /// watched).
    pub(crate) fn trace_records(&mut self, records: Vec<TraceRecord>) {
        if let Some(capture) = &mut self.capture {
            capture.see_records(&records);
        }
        self.host.trace_records(records)
    }

    /// The installed outbound-HTTP hooks, e.g. to inspect what a recording hook captured.
    pub fn hooks_mut(&mut self) -> &mut dyn WasiHttpHooks {
        &mut *self.hooks
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for HostState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut *self.hooks,
        }
    }
}

/// The default outbound-HTTP policy: every request fails with `HTTP-request-denied` before any
/// connection is made, so nothing ever leaves the process.
#[derive(Clone, Copy, Debug, Default)]
pub struct DenyOutbound;

type ResponseFuture = Box<
    dyn Future<
            Output = wasmtime_wasi_http::Result<(
                http::Response<WasiBody>,
                Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
            )>,
        > + Send,
>;

impl WasiHttpHooks for DenyOutbound {
    fn send_request(
        &mut self,
        _request: http::Request<WasiBody>,
        _options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
    ) -> ResponseFuture {
        Box::new(async { Err(wasmtime_wasi_http::Error::HttpRequestDenied) })
    }
}

// The component's `host` imports go to the installed [`AgentHost`]; the type-only interfaces
// need no functions.
impl crate::bindings::oma::agent::host::Host for HostState {
    fn before_run(&mut self, context: BeforeRunContext) -> BeforeRunAnswer {
        self.host.before_run(context)
    }

    fn call_tool(&mut self, agent: String, call: ToolUseBlock) -> ToolOutcome {
        HostState::call_tool(self, &agent, call)
    }

    fn call_model(
        &mut self,
        agent: String,
        call: String,
    ) -> crate::bindings::oma::agent::exchange::ModelReply {
        crate::llm_adapter::reply(&mut *self.host, &agent, &call)
    }

    fn progress(&mut self, event: ProgressEvent) {
        self.host.progress(event)
    }

    fn evaluation(&mut self, record: EvaluationRecord) {
        self.host.evaluation(record)
    }

    fn trace(&mut self, event: crate::bindings::oma::agent::exchange::TraceEvent) {
        self.host.trace(event)
    }

    fn trace_records(&mut self, records: Vec<TraceRecord>) {
        HostState::trace_records(self, records)
    }

    fn external_send(
        &mut self,
        agent: String,
        kind: ExternalKind,
        text: String,
    ) -> Result<String, String> {
        self.host.external_send(&agent, kind, text)
    }

    fn compress(
        &mut self,
        agent: String,
        messages: Vec<crate::bindings::oma::agent::types::LlmMessage>,
        estimated_tokens: u64,
    ) -> Result<Vec<crate::bindings::oma::agent::types::LlmMessage>, String> {
        self.host.compress(&agent, messages, estimated_tokens)
    }

    fn on_loop_detected(
        &mut self,
        agent: String,
        info: crate::bindings::oma::agent::outcome::LoopInfo,
    ) -> Result<String, String> {
        self.host.on_loop_detected(&agent, info)
    }
}

impl crate::bindings::oma::agent::types::Host for HostState {}
impl crate::bindings::oma::agent::wire::Host for HostState {}
impl crate::bindings::oma::agent::outcome::Host for HostState {}
impl crate::bindings::oma::agent::exchange::Host for HostState {}
