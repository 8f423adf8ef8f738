//! OMA's trace sinks for Rust embedders: the [`TraceSink`] trait (OMA's `TraceSink`), the
//! [`BatchingTraceSink`] that exports records in batches through a [`TraceExporter`], the
//! [`CompositeTraceSink`] that fans records out to several, and the
//! [`LegacyCallbackTraceSink`] that hands the legacy trace events riding on records to a
//! callback, the [`FilteringSink`] that keeps the records a predicate accepts, and the
//! [`SensitiveDataProcessor`] that hands a sink each record as OMA's sensitive-data processing
//! leaves it (the guest's codec processing it); and OMA's [`InMemoryTraceStore`], which a
//! [`TraceStoreExporter`] fills from a batching sink and which reads runs back through the
//! guest's codec, and OMA's [`FileTraceStore`], that store kept in a durable file.
//!
//! A run's records reach a host through [`AgentHost::trace_records`](crate::AgentHost);
//! [`ScriptedHost::with_sink`](crate::ScriptedHost::with_sink) hands each to a sink (and
//! [`ScriptedHost::with_record_sink`](crate::ScriptedHost::with_record_sink) to a closure,
//! which is a sink through [`FnSink`]). As in OMA, a sink's `emit` is called on the run's path
//! and must return at once; what it does wrong (an error, a panic, a hang in flush) never fails
//! or holds the run: the composite and legacy sinks count it, report it as a
//! [`TelemetryDiagnostic`] and bound every wait by a timeout, on threads of their own.

mod batching;
mod composite;
mod file;
mod legacy;
mod processors;
mod sink;
mod store;

pub use crate::durable_log::{FileDiagnostic, FileStoreError, FileStoreErrorCode};
pub use crate::durable_store::FileStoreOpError;
pub use batching::{
    AbortSignal, BatchingError, BatchingOptions, BatchingTraceSink, ExportResult, ExportStatus,
    TraceExporter, MAX_ABANDONED_EXPORTS,
};
pub use composite::CompositeTraceSink;
pub use file::{
    FileTraceStore, FileTraceStoreError, FILE_TRACE_STORE_FORMAT, FILE_TRACE_STORE_FORMAT_VERSION,
};
pub use legacy::{LegacyCallbackTraceSink, LEGACY_QUEUE_CAPACITY};
pub use processors::{
    FilteringSink, ProcessFuture, RecordProcessor, SensitiveDataError, SensitiveDataProcessor,
};
pub use sink::{
    DiagnosticCode, DiagnosticHandler, DiagnosticMode, DiagnosticOptions, DiagnosticSeverity,
    FlushResult, FlushStatus, FnSink, SinkError, TelemetryDiagnostic, TraceSink, TraceSinkStats,
    DEFAULT_FLUSH_TIMEOUT,
};
pub use store::{
    AppendResult, DeleteResult, InMemoryTraceStore, MaterializeFuture, QueryOrder, RetentionPolicy,
    RunMaterializer, RunPage, StoreDiagnostic, StoreDiagnosticCode, TraceQuery, TraceStoreError,
    TraceStoreErrorCode, TraceStoreExporter, TRACE_STORE_SCHEMA_MAJOR,
};

/// ISO-8601 times as milliseconds, shared with the evaluation store (`crate::eval`).
pub(crate) use store::iso_ms;
