//! OMA's trace records, schema version 2 (`docs/observability.md#records`): the three kinds of
//! record a traced run is made of (a span's start, an event on a span, a span's end), their
//! words (span kinds, event names, status codes, error kinds) and their JSON, written in OMA's
//! key order.
//!
//! A record is built here as a value ([`TraceRecord`]) and leaves as OMA's JSON
//! ([`TraceRecord::to_json`]); everything that reads records (the capture policy's processing,
//! `materializeRun`, the execution receipt, the gateway's OpenTelemetry export) reads that JSON,
//! so a record made by the core and one a host hands back are read by the same code.

use serde_json::{Map, Value};

use crate::agent::outcome::{ErrorInfo, FailureKind, Status, StatusCode as FailedCode};
use crate::agent::trace::uuid_v4;
use crate::rng::Rng;

/// The schema version every record carries (`schemaVersion`).
pub const SCHEMA_VERSION: u64 = 2;

/// A record's attributes: names to strings, numbers, booleans or arrays of one of those, in
/// the order they were set.
pub type Attributes = Map<String, Value>;

/// Declares a closed list of OMA's words as an enum with `word` and `from_word`.
macro_rules! words {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident => $word:literal,)* }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vdoc])* $variant,)*
        }

        impl $name {
            /// Every value, in OMA's order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];

            /// OMA's word for it.
            pub fn word(self) -> &'static str {
                match self {
                    $($name::$variant => $word,)*
                }
            }

            /// The value OMA's `word` names.
            pub fn from_word(word: &str) -> Option<Self> {
                match word {
                    $($word => Some($name::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

words! {
    /// What a span is (OMA's `SpanKind`).
    SpanKind {
        /// A whole run (the root span, `oma.run`).
        Run => "run",
        /// An execution-routing decision.
        Routing => "routing",
        /// An agent's run (`invoke_agent`).
        Agent => "agent",
        /// A task of a team run.
        Task => "task",
        /// A model call (`chat`).
        Llm => "llm",
        /// A tool call (`execute_tool`).
        Tool => "tool",
        /// A team run's plan.
        Plan => "plan",
        /// A consensus round.
        Consensus => "consensus",
        /// A checkpoint.
        Checkpoint => "checkpoint",
        /// A user callback.
        Callback => "callback",
    }
}

words! {
    /// The name of an event on a span (OMA's `SpanEventName`).
    EventName {
        /// A failed attempt will be tried again after a wait.
        RetryScheduled => "retry_scheduled",
        /// The token budget ran out.
        BudgetExhausted => "budget_exhausted",
        /// The first piece of a streamed answer arrived.
        FirstChunk => "first_chunk",
        /// An approval was decided.
        ApprovalDecision => "approval_decision",
        /// A checkpoint could not be saved.
        CheckpointFailed => "checkpoint_failed",
        /// Telemetry reported on itself.
        TelemetryDiagnostic => "telemetry_diagnostic",
        /// The run repeats itself.
        LoopDetected => "loop_detected",
        /// A streamed event was delivered.
        StreamChunk => "stream_chunk",
        /// A consensus round reached its verdict.
        ConsensusVerdict => "consensus_verdict",
        /// A recovery decision was made.
        RecoveryDecision => "recovery_decision",
        /// A plan revision was applied.
        PlanRevisionApplied => "plan_revision_applied",
    }
}

words! {
    /// How a span ended (OMA's `RunStatusCode`).
    StatusCode {
        /// It did what it was for.
        Ok => "ok",
        /// It failed.
        Error => "error",
        /// It was cancelled.
        Cancelled => "cancelled",
        /// It ran out of time.
        Timeout => "timeout",
        /// A budget ran out.
        BudgetExhausted => "budget_exhausted",
        /// A policy refused it.
        Rejected => "rejected",
        /// It waits for an approval.
        Suspended => "suspended",
        /// It did not run.
        Skipped => "skipped",
    }
}

words! {
    /// Where a failure came from (OMA's `TraceErrorKind`).
    ErrorKind {
        /// The provider.
        Provider => "provider",
        /// A tool.
        Tool => "tool",
        /// The framework itself.
        Framework => "framework",
        /// A user callback (`beforeRun`, `afterRun`).
        Callback => "callback",
        /// A policy check.
        Validation => "validation",
        /// A timeout.
        Timeout => "timeout",
        /// A cancellation.
        Cancellation => "cancellation",
        /// A budget.
        Budget => "budget",
        /// A trace store.
        Store => "store",
        /// A trace exporter.
        Exporter => "exporter",
        /// Anything else.
        Unknown => "unknown",
    }
}

/// A span's status (OMA's `RunStatus`): its code and, for a failure, a redacted message of at
/// most 256 characters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpanStatus {
    /// How the span ended.
    pub code: StatusCode,
    /// Why, when it failed.
    pub message: Option<String>,
}

impl SpanStatus {
    /// `{"code": "ok"}`.
    pub fn ok() -> Self {
        SpanStatus {
            code: StatusCode::Ok,
            message: None,
        }
    }

    /// A failed run's status as its result reports it.
    pub fn of(status: &Status) -> Self {
        SpanStatus {
            code: match status.code {
                FailedCode::Error => StatusCode::Error,
                FailedCode::Timeout => StatusCode::Timeout,
                FailedCode::Rejected => StatusCode::Rejected,
                FailedCode::BudgetExhausted => StatusCode::BudgetExhausted,
                FailedCode::Cancelled => StatusCode::Cancelled,
            },
            message: status.message.clone().filter(|m| !m.is_empty()),
        }
    }

    fn to_json(&self) -> Value {
        let mut out = Map::new();
        out.insert("code".into(), Value::from(self.code.word()));
        if let Some(message) = &self.message {
            out.insert("message".into(), Value::from(message.as_str()));
        }
        Value::Object(out)
    }
}

/// A failure on a span (OMA's `StructuredTraceError`), every message already redacted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpanError {
    /// Where it came from.
    pub kind: ErrorKind,
    /// OMA's error code, when the class has one.
    pub code: Option<String>,
    /// The error's class name.
    pub name: Option<String>,
    /// The redacted message, at most 1024 characters.
    pub message: Option<String>,
    /// Whether trying again could succeed.
    pub retryable: Option<bool>,
    /// The provider's HTTP status.
    pub http_status: Option<u16>,
    /// The provider involved.
    pub provider: Option<String>,
}

impl SpanError {
    /// A failed run's `errorInfo` as a span's error.
    pub fn of(info: &ErrorInfo) -> Self {
        SpanError {
            kind: match info.kind {
                FailureKind::Validation => ErrorKind::Validation,
                FailureKind::Budget => ErrorKind::Budget,
                FailureKind::Timeout => ErrorKind::Timeout,
                FailureKind::Callback => ErrorKind::Callback,
                FailureKind::Provider => ErrorKind::Provider,
                FailureKind::Cancellation => ErrorKind::Cancellation,
                FailureKind::Unknown => ErrorKind::Unknown,
            },
            code: info.code.clone(),
            name: Some(info.name.clone()),
            message: Some(info.message.clone()).filter(|m| !m.is_empty()),
            retryable: Some(info.retryable),
            http_status: info.http_status,
            provider: info.provider.clone(),
        }
    }

    /// Written in the order OMA's `classifyRunFailure` builds it.
    fn to_json(&self) -> Value {
        let mut out = Map::new();
        out.insert("kind".into(), Value::from(self.kind.word()));
        if let Some(code) = &self.code {
            out.insert("code".into(), Value::from(code.as_str()));
        }
        if let Some(name) = &self.name {
            out.insert("name".into(), Value::from(name.as_str()));
        }
        if let Some(message) = &self.message {
            out.insert("message".into(), Value::from(message.as_str()));
        }
        if let Some(retryable) = self.retryable {
            out.insert("retryable".into(), Value::from(retryable));
        }
        if let Some(status) = self.http_status {
            out.insert("httpStatus".into(), Value::from(status));
        }
        if let Some(provider) = &self.provider {
            out.insert("provider".into(), Value::from(provider.as_str()));
        }
        Value::Object(out)
    }
}

/// What a record says about its span.
#[derive(Clone, Debug, PartialEq)]
pub enum RecordBody {
    /// `span_start`: the span began.
    Start {
        /// What the span is.
        kind: SpanKind,
        /// Its name (`oma.run`, `invoke_agent`, `chat`, `execute_tool`).
        name: &'static str,
        /// When it began, in milliseconds since the Unix epoch.
        start_ms: u64,
        /// Its attributes as it began.
        attributes: Attributes,
    },
    /// `span_event`: something happened on the span.
    Event {
        /// What happened.
        name: EventName,
        /// The event's own attributes.
        attributes: Attributes,
    },
    /// `span_end`: the span ended.
    End {
        /// What the span is.
        kind: SpanKind,
        /// Its name.
        name: &'static str,
        /// When it began.
        start_ms: u64,
        /// When it ended.
        end_ms: u64,
        /// How it ended.
        status: SpanStatus,
        /// Its failure, when it failed.
        error: Option<SpanError>,
        /// Every attribute of the span, those it began with first: a complete snapshot, usable
        /// even if its start record was lost.
        attributes: Attributes,
    },
}

/// One of OMA's trace records.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceRecord {
    /// The record's own id (a UUID).
    pub record_id: String,
    /// Its place in its trace: strictly increasing from 1.
    pub sequence: u64,
    /// When it was made, in milliseconds since the Unix epoch.
    pub timestamp_ms: u64,
    /// The run's id.
    pub run_id: String,
    /// The run's execution attempt, from 1.
    pub attempt: u32,
    /// The trace: 32 lowercase hex digits.
    pub trace_id: String,
    /// The span it is about: 16 lowercase hex digits.
    pub span_id: String,
    /// That span's parent; none for the run's root span.
    pub parent_span_id: Option<String>,
    /// What it says.
    pub body: RecordBody,
}

impl TraceRecord {
    /// OMA's `recordType`.
    pub fn record_type(&self) -> &'static str {
        match self.body {
            RecordBody::Start { .. } => "span_start",
            RecordBody::Event { .. } => "span_event",
            RecordBody::End { .. } => "span_end",
        }
    }

    /// The record as OMA's JSON, keys in OMA's order.
    pub fn to_json(&self) -> Value {
        self.clone().into_json()
    }

    /// As [`TraceRecord::to_json`], taking the record: its attributes move into the JSON.
    pub fn into_json(self) -> Value {
        let record_type = self.record_type();
        let mut out = Map::new();
        out.insert("schemaVersion".into(), Value::from(SCHEMA_VERSION));
        out.insert("recordId".into(), Value::from(self.record_id));
        out.insert("sequence".into(), Value::from(self.sequence));
        out.insert("timestampUnixMs".into(), Value::from(self.timestamp_ms));
        out.insert("runId".into(), Value::from(self.run_id));
        out.insert("attempt".into(), Value::from(self.attempt));
        out.insert("traceId".into(), Value::from(self.trace_id));
        out.insert("spanId".into(), Value::from(self.span_id));
        if let Some(parent) = self.parent_span_id {
            out.insert("parentSpanId".into(), Value::from(parent));
        }
        out.insert("recordType".into(), Value::from(record_type));
        match self.body {
            RecordBody::Start {
                kind,
                name,
                start_ms,
                attributes,
            } => {
                out.insert("kind".into(), Value::from(kind.word()));
                out.insert("name".into(), Value::from(name));
                out.insert("startUnixMs".into(), Value::from(start_ms));
                out.insert("attributes".into(), Value::Object(attributes));
            }
            RecordBody::Event { name, attributes } => {
                out.insert("name".into(), Value::from(name.word()));
                out.insert("attributes".into(), Value::Object(attributes));
            }
            RecordBody::End {
                kind,
                name,
                start_ms,
                end_ms,
                status,
                error,
                attributes,
            } => {
                out.insert("kind".into(), Value::from(kind.word()));
                out.insert("name".into(), Value::from(name));
                out.insert("startUnixMs".into(), Value::from(start_ms));
                out.insert("endUnixMs".into(), Value::from(end_ms));
                out.insert(
                    "durationMs".into(),
                    Value::from(end_ms.saturating_sub(start_ms)),
                );
                out.insert("status".into(), status.to_json());
                if let Some(error) = error {
                    out.insert("error".into(), error.to_json());
                }
                out.insert("attributes".into(), Value::Object(attributes));
            }
        }
        Value::Object(out)
    }
}

/// The ids and the numbering of one trace's records: the run's id, the trace's id, the next
/// sequence number, and the random source new span and record ids are drawn from. The run
/// machine's tracer makes its records with one; so does the gateway for the model calls of a chat
/// request, which no run machine makes.
#[derive(Debug)]
pub struct Recorder {
    run_id: String,
    trace_id: String,
    sequence: u64,
    rng: Rng,
}

impl Recorder {
    /// The records of the run `run_id` in the trace `trace_id` (a W3C trace id a host continues),
    /// or in a new trace drawn from `rng` when none is given; ids drawn from `rng`.
    pub fn new(run_id: String, trace_id: Option<String>, mut rng: Rng) -> Self {
        let trace_id = trace_id
            .unwrap_or_else(|| format!("{:016x}{:016x}", rng.next_u64() | 1, rng.next_u64()));
        Recorder {
            run_id,
            trace_id,
            sequence: 0,
            rng,
        }
    }

    /// The run's id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The trace's id.
    pub fn trace_id(&self) -> &str {
        &self.trace_id
    }

    /// A new span id: 16 lowercase hex digits, never all zeros (a W3C rule).
    pub fn span_id(&mut self) -> String {
        format!("{:016x}", self.rng.next_u64().max(1))
    }

    /// The next record of the trace, about the span `span_id` under `parent`, made at `now_ms`.
    pub fn record(
        &mut self,
        now_ms: u64,
        span_id: String,
        parent: Option<String>,
        body: RecordBody,
    ) -> TraceRecord {
        self.sequence += 1;
        TraceRecord {
            record_id: uuid_v4(&mut self.rng),
            sequence: self.sequence,
            timestamp_ms: now_ms,
            run_id: self.run_id.clone(),
            attempt: 1,
            trace_id: self.trace_id.clone(),
            span_id,
            parent_span_id: parent,
            body,
        }
    }
}

/// A record as a run hands it out: OMA's record JSON, processed by the run's capture policy,
/// and, for a run that is also traced the legacy way (`onTrace`), the legacy event it completes
/// (OMA attaches it for its `LegacyCallbackTraceSink`).
#[derive(Clone, Debug, PartialEq)]
pub struct Observed {
    /// OMA's `TraceRecord` JSON.
    pub record: Value,
    /// OMA's `TraceEvent` JSON of the legacy event this record completes.
    pub legacy: Option<Value>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn words_round_trip() {
        for kind in SpanKind::ALL {
            assert_eq!(SpanKind::from_word(kind.word()), Some(*kind));
        }
        for name in EventName::ALL {
            assert_eq!(EventName::from_word(name.word()), Some(*name));
        }
        for code in StatusCode::ALL {
            assert_eq!(StatusCode::from_word(code.word()), Some(*code));
        }
        for kind in ErrorKind::ALL {
            assert_eq!(ErrorKind::from_word(kind.word()), Some(*kind));
        }
        assert_eq!(SpanKind::ALL.len(), 10);
        assert_eq!(EventName::ALL.len(), 11);
        assert_eq!(SpanKind::from_word("Run"), None);
    }

    #[test]
    fn a_span_end_is_omas_json_in_omas_order() {
        let mut attributes = Attributes::new();
        attributes.insert("oma.tool.name".into(), json!("lookup"));
        attributes.insert("oma.status".into(), json!("error"));
        let record = TraceRecord {
            record_id: "r".into(),
            sequence: 3,
            timestamp_ms: 20,
            run_id: "run-1".into(),
            attempt: 1,
            trace_id: "4bf92f3577b34da6a3ce929d0e0e4736".into(),
            span_id: "00f067aa0ba902b7".into(),
            parent_span_id: Some("a1b2c3d4e5f60718".into()),
            body: RecordBody::End {
                kind: SpanKind::Tool,
                name: "execute_tool",
                start_ms: 11,
                end_ms: 20,
                status: SpanStatus {
                    code: StatusCode::Error,
                    message: Some("no".into()),
                },
                error: Some(SpanError {
                    kind: ErrorKind::Tool,
                    code: None,
                    name: Some("Error".into()),
                    message: Some("no".into()),
                    retryable: Some(true),
                    http_status: None,
                    provider: None,
                }),
                attributes,
            },
        };
        let text = record.to_json().to_string();
        assert_eq!(
            text,
            r#"{"schemaVersion":2,"recordId":"r","sequence":3,"timestampUnixMs":20,"runId":"run-1","attempt":1,"traceId":"4bf92f3577b34da6a3ce929d0e0e4736","spanId":"00f067aa0ba902b7","parentSpanId":"a1b2c3d4e5f60718","recordType":"span_end","kind":"tool","name":"execute_tool","startUnixMs":11,"endUnixMs":20,"durationMs":9,"status":{"code":"error","message":"no"},"error":{"kind":"tool","name":"Error","message":"no","retryable":true},"attributes":{"oma.tool.name":"lookup","oma.status":"error"}}"#
        );
    }
}
