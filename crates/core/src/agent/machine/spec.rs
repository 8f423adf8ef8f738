//! What a run knows about its agent ([`RunSpec`]): the request every turn starts from, the
//! limits, the hook, the backend and how its provider is called.

use crate::adapter::{self, Adapter, ChatRequest, Endpoint, IdSource};
use crate::agent::before_run::ExternalKind;
use crate::agent::host_adapter::HostAdapter;
use crate::agent::observability::options::RecordOptions;
use crate::agent::structured::OutputSchema;
use crate::agent::trace::TraceOptions;
use crate::agent::turn::TurnOptions;
use crate::error::Error;
use crate::http::call::CallOptions;

/// Everything a run needs to know about its agent.
#[derive(Clone, Debug)]
pub struct RunSpec {
    /// The request every turn starts from: model, system prompt, tools, sampling; its messages
    /// are ignored.
    pub template: ChatRequest,
    /// The agent's name, turn limit, token budget and provider.
    pub turn: TurnOptions,
    /// Whether to call the `beforeRun` hook.
    pub before_run: bool,
    /// An external text-only backend instead of a provider.
    pub external: Option<ExternalKind>,
    /// The agent's own LLM adapter, which the host runs, instead of a provider: each model
    /// call is a [`Step::CallModel`](super::Step::CallModel). `None` with an external backend.
    pub adapter: Option<HostAdapter>,
    /// The agent's configuration as OMA JSON for the hook's context, without secrets.
    pub config_json: String,
    /// The most the run may take, in milliseconds from its first step; `None` for no limit.
    pub deadline_ms: Option<u64>,
    /// Trace every run of this spec; `None` for no tracing (see
    /// [`RunMachine::with_trace`](super::RunMachine::with_trace)).
    pub trace: Option<TraceOptions>,
    /// Make OMA's trace records of every run of this spec; `None` for none (see
    /// [`RunMachine::with_records`](super::RunMachine::with_records)).
    pub records: Option<RecordOptions>,
    /// The provider (`anthropic`, `openai`, `gemini`, ...), which picks the wire format.
    pub provider: String,
    /// Where requests go and the credentials; its `timestamp` is set per request.
    pub endpoint: Endpoint,
    /// Retries, timeouts, size limit and egress policy of each provider call.
    pub call: CallOptions,
    /// The final answer's schema (OMA's `outputSchema`); `None` for free text. Its instruction
    /// is already in `template.system_prompt` (`AgentSettings::into_spec` puts it there).
    pub output_schema: Option<OutputSchema>,
}

impl RunSpec {
    /// The agent's name.
    pub fn name(&self) -> &str {
        &self.turn.agent_name
    }

    /// The provider a trace names: the adapter's name for an agent with its own, none for a
    /// run on an external backend.
    pub(super) fn traced_provider(&self) -> Option<&str> {
        if let Some(adapter) = &self.adapter {
            return Some(adapter.name.as_str());
        }
        (self.external.is_none() && !self.provider.is_empty()).then_some(self.provider.as_str())
    }

    /// The wire format of this spec's provider; fails for an unknown provider without a base
    /// URL. `ids` feeds the ids a format makes up (Gemini).
    pub fn adapter(&self, ids: IdSource) -> Result<Box<dyn Adapter>, Error> {
        adapter::for_provider(&self.provider, self.endpoint.base_url.as_deref(), ids)
    }
}
