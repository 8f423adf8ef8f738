//! OMA's observability for one run (`docs/observability.md`): its trace records (schema v2:
//! spans of the run, the agent, each model call and each tool call, and events on them), made
//! by the tracer from what the run machine tells it, processed by the run's capture policy, and
//! the legacy `onTrace` events as a second view of the same spans.
//!
//! The rooms: [`record`] (the record values and their JSON), [`capture`] (the capture policy
//! and sensitive-data processing), [`options`] (how a host turns records on), `tracer` (the
//! spans of a run and both views of them), [`materialize`] (OMA's `materializeRun`), [`receipt`] (OMA's
//! `buildExecutionReceipt`).

pub mod capture;
pub mod materialize;
pub mod options;
pub mod receipt;
pub mod record;
pub(crate) mod tracer;
