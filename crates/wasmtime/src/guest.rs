//! One instance of the guest: its store and the typed bindings of its exports.

use wasmtime::Store;

use crate::bindings::exports::oma::agent::codec::{BashRisk, JudgeStep, OnlineStep};
use crate::bindings::oma::agent::types::{Error as WitError, LlmMessage};
use crate::bindings::oma::agent::wire::{ChatRequest, Endpoint, HttpRequest, LlmResponse};
use crate::bindings::Component;
use crate::limits::Limits;
use crate::state::HostState;
use crate::store::start_call;

/// A live guest instance. Calls run one at a time (`&mut self`); an instance survives any number
/// of calls, failed ones included, until it traps.
///
/// Each call runs under the instance's [`Limits`](crate::Limits): a call that spends longer than
/// its deadline in the guest, or a guest that grows its memory past the cap, ends with an error
/// whose source is a [`LimitExceeded`](crate::LimitExceeded); the instance is then unusable (as
/// after any trap) and every other instance goes on.
pub struct Guest {
    store: Store<HostState>,
    bindings: Component,
}

impl std::fmt::Debug for Guest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guest").finish_non_exhaustive()
    }
}

impl Guest {
    pub(crate) fn new(store: Store<HostState>, bindings: Component) -> Self {
        Guest { store, bindings }
    }

    /// `codec.messages-from-json`: parses and validates an OMA JSON message list.
    ///
    /// The outer error is a trap or host failure; the inner one the component's typed error.
    pub async fn messages_from_json(
        &mut self,
        json: &str,
    ) -> anyhow::Result<Result<Vec<LlmMessage>, WitError>> {
        self.start_call();
        Ok(self
            .bindings
            .oma_agent_codec()
            .call_messages_from_json(&mut self.store, json)
            .await?)
    }

    /// `codec.messages-to-json`: validates messages and serialises them to OMA JSON.
    ///
    /// The outer error is a trap or host failure; the inner one the component's typed error.
    pub async fn messages_to_json(
        &mut self,
        messages: &[LlmMessage],
    ) -> anyhow::Result<Result<String, WitError>> {
        self.start_call();
        Ok(self
            .bindings
            .oma_agent_codec()
            .call_messages_to_json(&mut self.store, messages)
            .await?)
    }

    /// `codec.materialize-run`: OMA's `materializeRun` of a JSON list of trace records (the run
    /// as JSON, `null` for none).
    ///
    /// The outer error is a trap or host failure; the inner one the component's typed error.
    pub async fn materialize_run(
        &mut self,
        records: &str,
        include_records: bool,
    ) -> anyhow::Result<Result<String, WitError>> {
        self.start_call();
        Ok(self
            .bindings
            .oma_agent_codec()
            .call_materialize_run(&mut self.store, records, include_records)
            .await?)
    }

    /// `codec.process-trace-record`: OMA's `SensitiveDataProcessor` with `options`
    /// (JSON) checked and, given a record (JSON), applied to it: the record its sink gets, or
    /// `None` when it is dropped.
    ///
    /// The outer error is a trap or host failure; the inner one the component's typed error.
    pub async fn process_trace_record(
        &mut self,
        options: &str,
        record: Option<&str>,
    ) -> anyhow::Result<Result<Option<String>, WitError>> {
        self.start_call();
        Ok(self
            .bindings
            .oma_agent_codec()
            .call_process_trace_record(&mut self.store, options, record)
            .await?)
    }

    /// `codec.build-execution-receipt`: OMA's `buildExecutionReceipt` of a run's result and,
    /// when given, its legacy trace events (JSON in, the receipt's JSON out).
    ///
    /// The outer error is a trap or host failure; the inner one the component's typed error.
    pub async fn build_execution_receipt(
        &mut self,
        result: &str,
        trace: Option<&str>,
    ) -> anyhow::Result<Result<String, WitError>> {
        self.start_call();
        Ok(self
            .bindings
            .oma_agent_codec()
            .call_build_execution_receipt(&mut self.store, result, trace)
            .await?)
    }

    /// `codec.score-builtin`: one of OMA's built-in scorers by name, its options checked and
    /// described (no `context`) or a sample scored (JSON in and out).
    ///
    /// The outer error is a trap or host failure; the inner one the component's typed error.
    pub async fn score_builtin(
        &mut self,
        scorer: &str,
        options: &str,
        context: Option<&str>,
    ) -> anyhow::Result<Result<String, WitError>> {
        self.start_call();
        Ok(self
            .bindings
            .oma_agent_codec()
            .call_score_builtin(&mut self.store, scorer, options, context)
            .await?)
    }

    /// `codec.judge`: one step of OMA's LLM judge scorers on its request (JSON in and out).
    ///
    /// The outer error is a trap or host failure; the inner one the component's typed error.
    pub async fn judge(
        &mut self,
        step: JudgeStep,
        request: &str,
    ) -> anyhow::Result<Result<String, WitError>> {
        self.start_call();
        Ok(self
            .bindings
            .oma_agent_codec()
            .call_judge(&mut self.store, step, request)
            .await?)
    }

    /// `codec.online-evaluation`: one step of OMA's online evaluation rules on its request
    /// (JSON in and out).
    ///
    /// The outer error is a trap or host failure; the inner one the component's typed error.
    pub async fn online_evaluation(
        &mut self,
        step: OnlineStep,
        request: &str,
    ) -> anyhow::Result<Result<String, WitError>> {
        self.start_call();
        Ok(self
            .bindings
            .oma_agent_codec()
            .call_online_evaluation(&mut self.store, step, request)
            .await?)
    }

    /// `codec.validate-messages`: checks messages against OMA's rules.
    ///
    /// The outer error is a trap or host failure; the inner one the component's typed error.
    pub async fn validate_messages(
        &mut self,
        messages: &[LlmMessage],
    ) -> anyhow::Result<Result<(), WitError>> {
        self.start_call();
        Ok(self
            .bindings
            .oma_agent_codec()
            .call_validate_messages(&mut self.store, messages)
            .await?)
    }

    /// `codec.format-request`: builds the HTTP request a provider call would send, and sends
    /// nothing. The returned headers carry the endpoint's key: never print them unredacted.
    ///
    /// The outer error is a trap or host failure; the inner one the component's typed error.
    pub async fn format_request(
        &mut self,
        request: &ChatRequest,
        endpoint: &Endpoint,
    ) -> anyhow::Result<Result<HttpRequest, WitError>> {
        self.start_call();
        Ok(self
            .bindings
            .oma_agent_codec()
            .call_format_request(&mut self.store, request, endpoint)
            .await?)
    }

    /// `codec.parse-response`: reads a provider's successful response `body` to `request` into
    /// OMA's response.
    ///
    /// The outer error is a trap or host failure; the inner one the component's typed error.
    pub async fn parse_response(
        &mut self,
        request: &ChatRequest,
        endpoint: &Endpoint,
        body: &str,
    ) -> anyhow::Result<Result<LlmResponse, WitError>> {
        self.start_call();
        Ok(self
            .bindings
            .oma_agent_codec()
            .call_parse_response(&mut self.store, request, endpoint, body)
            .await?)
    }

    /// `codec.redact-sensitive-text`: OMA's secret redaction applied to `text`.
    pub async fn redact_sensitive_text(&mut self, text: &str) -> anyhow::Result<String> {
        self.start_call();
        Ok(self
            .bindings
            .oma_agent_codec()
            .call_redact_sensitive_text(&mut self.store, text)
            .await?)
    }

    /// `codec.is-sensitive-name`: whether OMA finds `name` sensitive.
    pub async fn is_sensitive_name(&mut self, name: &str) -> anyhow::Result<bool> {
        self.start_call();
        Ok(self
            .bindings
            .oma_agent_codec()
            .call_is_sensitive_name(&mut self.store, name)
            .await?)
    }

    /// `codec.classify-bash-command`: OMA's risk level and reason for `command`.
    pub async fn classify_bash_command(&mut self, command: &str) -> anyhow::Result<BashRisk> {
        self.start_call();
        Ok(self
            .bindings
            .oma_agent_codec()
            .call_classify_bash_command(&mut self.store, command)
            .await?)
    }

    /// The store and the bindings, for the calls of other modules of the harness: each use is
    /// one exported call, so this starts the call's clock (its deadline) too.
    pub(crate) fn parts(&mut self) -> (&mut Store<HostState>, &Component) {
        self.start_call();
        (&mut self.store, &self.bindings)
    }

    /// Starts the clock of the next exported call.
    fn start_call(&mut self) {
        start_call(&mut self.store);
    }

    /// The limits of this instance's calls.
    pub fn limits(&self) -> Limits {
        self.store.data().limits()
    }

    /// Other limits for this instance's next calls, e.g. a tighter deadline for input from an
    /// untrusted source. The memory the instance already holds counts against the new cap.
    pub fn set_limits(&mut self, limits: Limits) {
        self.store.data_mut().guard_mut().set_limits(limits);
    }

    /// The host state of this instance, e.g. to reach the hooks a test installed.
    pub fn state_mut(&mut self) -> &mut HostState {
        self.store.data_mut()
    }
}
