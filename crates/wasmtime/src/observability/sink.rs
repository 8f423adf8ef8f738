//! The sink trait, its flush results and counters, and the diagnostics every sink of this
//! module reports through (OMA's `TraceSink`, `FlushResult`, `TraceSinkStats`,
//! `TelemetryDiagnostic`).

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::bindings::oma::agent::exchange::TraceRecord;

/// What a sink's failure carries: any error. Sinks never put a record's content or a secret in
/// it, and the sinks of this module never pass it on (a diagnostic holds a fixed message).
pub type SinkError = Box<dyn std::error::Error + Send + Sync>;

/// How long the composite and legacy sinks wait for a flush or shutdown given no timeout
/// (OMA's 30 s).
pub const DEFAULT_FLUSH_TIMEOUT: Duration = Duration::from_secs(30);

/// The outcome of a flush or shutdown, as a whole (OMA's `FlushResult.status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FlushStatus {
    /// Everything accepted was delivered.
    Ok,
    /// Some was delivered, some not.
    Partial,
    /// The wait ended at its timeout.
    Timeout,
    /// Nothing could be delivered.
    Error,
}

impl FlushStatus {
    /// OMA's word for it: `ok`, `partial`, `timeout` or `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            FlushStatus::Ok => "ok",
            FlushStatus::Partial => "partial",
            FlushStatus::Timeout => "timeout",
            FlushStatus::Error => "error",
        }
    }
}

/// What a flush or shutdown gives (OMA's `FlushResult`): its status and the sink's counts of
/// records accepted, exported, dropped and failed so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlushResult {
    /// The outcome.
    pub status: FlushStatus,
    /// Records the sink accepted.
    pub accepted: u64,
    /// Records delivered.
    pub exported: u64,
    /// Records dropped (a full queue, after shutdown).
    pub dropped: u64,
    /// Records whose delivery failed.
    pub failed: u64,
}

impl FlushResult {
    /// `ok` with zero counts: what a sink with nothing to deliver answers.
    pub const OK: FlushResult = FlushResult {
        status: FlushStatus::Ok,
        accepted: 0,
        exported: 0,
        dropped: 0,
        failed: 0,
    };

    /// A result with `stats`' counts.
    pub fn from_stats(stats: &TraceSinkStats, status: FlushStatus) -> FlushResult {
        FlushResult {
            status,
            accepted: stats.accepted,
            exported: stats.exported,
            dropped: stats.dropped,
            failed: stats.failed,
        }
    }

    /// Several results as one (OMA's composite rule): `ok` when all are (or there are none),
    /// `timeout` or `error` when all are that, else `partial`; the counts summed.
    pub fn combine(results: &[FlushResult]) -> FlushResult {
        let all = |status| results.iter().all(|r| r.status == status);
        let status = if all(FlushStatus::Ok) {
            FlushStatus::Ok
        } else if all(FlushStatus::Timeout) {
            FlushStatus::Timeout
        } else if all(FlushStatus::Error) {
            FlushStatus::Error
        } else {
            FlushStatus::Partial
        };
        let sum = |count: fn(&FlushResult) -> u64| results.iter().map(count).sum();
        FlushResult {
            status,
            accepted: sum(|r| r.accepted),
            exported: sum(|r| r.exported),
            dropped: sum(|r| r.dropped),
            failed: sum(|r| r.failed),
        }
    }
}

/// A sink's counters (OMA's `TraceSinkStats`; its `queued` and `lastFailureCode` are aliases of
/// `queued_records` and `last_error`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TraceSinkStats {
    /// Records accepted.
    pub accepted: u64,
    /// Records delivered.
    pub exported: u64,
    /// Deliveries retried.
    pub retried: u64,
    /// Records whose delivery failed.
    pub failed: u64,
    /// Records dropped.
    pub dropped: u64,
    /// Records waiting for delivery.
    pub queued_records: u64,
    /// Their size in bytes, for sinks that count it.
    pub queued_bytes: u64,
    /// The code of the last failure, if any.
    pub last_error: Option<String>,
}

/// Takes the trace records of runs (OMA's `TraceSink`).
///
/// `emit` is called on the run's path for each record, in order, and must return at once: a
/// sink that delivers somewhere slow queues the record and delivers on a thread of its own. An
/// error from `emit` never reaches the run (a [`CompositeTraceSink`](super::CompositeTraceSink)
/// counts and diagnoses it). `force_flush` delivers what was accepted before it was called,
/// within `timeout` when one is given; `shutdown` flushes, then refuses later records, and
/// answers every later call with its first result.
pub trait TraceSink: Send + Sync {
    /// Accepts one record.
    fn emit(&self, record: &TraceRecord) -> Result<(), SinkError>;

    /// Delivers what was accepted so far; a sink with nothing to deliver answers `ok`.
    fn force_flush(&self, timeout: Option<Duration>) -> Result<FlushResult, SinkError> {
        let _ = timeout;
        Ok(FlushResult::OK)
    }

    /// Flushes and stops accepting records; a sink with nothing to deliver answers `ok`.
    fn shutdown(&self, timeout: Option<Duration>) -> Result<FlushResult, SinkError> {
        let _ = timeout;
        Ok(FlushResult::OK)
    }

    /// The sink's counters, for sinks that keep them (OMA's optional `getStats`).
    fn stats(&self) -> Option<TraceSinkStats> {
        None
    }
}

impl<T: TraceSink + ?Sized> TraceSink for Arc<T> {
    fn emit(&self, record: &TraceRecord) -> Result<(), SinkError> {
        (**self).emit(record)
    }

    fn force_flush(&self, timeout: Option<Duration>) -> Result<FlushResult, SinkError> {
        (**self).force_flush(timeout)
    }

    fn shutdown(&self, timeout: Option<Duration>) -> Result<FlushResult, SinkError> {
        (**self).shutdown(timeout)
    }

    fn stats(&self) -> Option<TraceSinkStats> {
        (**self).stats()
    }
}

/// A closure as a sink: each record is handed to it, one call at a time; flush and shutdown
/// have nothing to do.
pub struct FnSink<F>(Mutex<F>);

impl<F: FnMut(&TraceRecord) + Send> FnSink<F> {
    /// The sink calling `f`.
    pub fn new(f: F) -> Self {
        FnSink(Mutex::new(f))
    }
}

impl<F> std::fmt::Debug for FnSink<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FnSink").finish_non_exhaustive()
    }
}

impl<F: FnMut(&TraceRecord) + Send> TraceSink for FnSink<F> {
    fn emit(&self, record: &TraceRecord) -> Result<(), SinkError> {
        // A closure that panicked once still gets the later records.
        let mut f = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        f(record);
        Ok(())
    }
}

/// A sink's counters, or empty ones when it keeps none or its `stats` panics (OMA's
/// `safeStats`: counters are telemetry and never fail the caller).
pub(crate) fn stats_of(sink: &dyn TraceSink) -> TraceSinkStats {
    catch_unwind(AssertUnwindSafe(|| sink.stats()))
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// OMA's telemetry problem codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DiagnosticCode {
    /// A sink (a child, a callback) failed while accepting a record.
    SinkEmitFailed,
    /// A record was dropped because the queue was full.
    QueueFull,
    /// A record was larger than the sink takes.
    RecordTooLarge,
    /// A delivery failed.
    ExportFailed,
    /// A delivery did not answer in time.
    ExportTimeout,
    /// A flush ended at its timeout.
    FlushTimeout,
    /// A shutdown failed or ended at its timeout.
    ShutdownFailed,
    /// A record came after shutdown began.
    EmitAfterShutdown,
}

impl DiagnosticCode {
    /// OMA's code, e.g. `sink_emit_failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            DiagnosticCode::SinkEmitFailed => "sink_emit_failed",
            DiagnosticCode::QueueFull => "queue_full",
            DiagnosticCode::RecordTooLarge => "record_too_large",
            DiagnosticCode::ExportFailed => "export_failed",
            DiagnosticCode::ExportTimeout => "export_timeout",
            DiagnosticCode::FlushTimeout => "flush_timeout",
            DiagnosticCode::ShutdownFailed => "shutdown_failed",
            DiagnosticCode::EmitAfterShutdown => "emit_after_shutdown",
        }
    }
}

/// How serious a diagnostic is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiagnosticSeverity {
    /// Something was lost or late, the sink goes on.
    Warning,
    /// Something failed.
    Error,
}

/// A telemetry problem (OMA's `TelemetryDiagnostic`): its code, how many times it happened so
/// far, the sink's name and a fixed message that never holds a record or an error's text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TelemetryDiagnostic {
    /// What happened.
    pub code: DiagnosticCode,
    /// How serious it is.
    pub severity: DiagnosticSeverity,
    /// How many times this code was reported by the sink, this one included.
    pub count: u64,
    /// The sink's name.
    pub sink_name: Option<String>,
    /// OMA's fixed message for it.
    pub message: &'static str,
}

/// Where diagnostics go when no handler takes them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DiagnosticMode {
    /// Written to standard error (OMA's `console.warn`).
    #[default]
    Warn,
    /// Dropped.
    Silent,
}

/// A function that takes diagnostics (OMA's `onDiagnostic`). One that panics is ignored.
pub type DiagnosticHandler = Arc<dyn Fn(&TelemetryDiagnostic) + Send + Sync>;

/// How a sink reports its problems (OMA's `DiagnosticOptions`): to `on_diagnostic`, else by
/// `mode`, at most once per code in each `interval` (60 s by default; zero reports each).
#[derive(Clone)]
pub struct DiagnosticOptions {
    /// Where diagnostics go without a handler.
    pub mode: DiagnosticMode,
    /// The handler, if any.
    pub on_diagnostic: Option<DiagnosticHandler>,
    /// The least time between two reports of one code.
    pub interval: Duration,
    /// The name diagnostics carry (the sink's kind when not given).
    pub sink_name: Option<String>,
}

impl Default for DiagnosticOptions {
    fn default() -> Self {
        DiagnosticOptions {
            mode: DiagnosticMode::Warn,
            on_diagnostic: None,
            interval: Duration::from_secs(60),
            sink_name: None,
        }
    }
}

impl std::fmt::Debug for DiagnosticOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiagnosticOptions")
            .field("mode", &self.mode)
            .field("on_diagnostic", &self.on_diagnostic.is_some())
            .field("interval", &self.interval)
            .field("sink_name", &self.sink_name)
            .finish()
    }
}

impl DiagnosticOptions {
    /// Diagnostics to `handler`, each one reported (no throttle).
    pub fn handler(handler: impl Fn(&TelemetryDiagnostic) + Send + Sync + 'static) -> Self {
        DiagnosticOptions {
            on_diagnostic: Some(Arc::new(handler)),
            interval: Duration::ZERO,
            ..DiagnosticOptions::default()
        }
    }
}

/// Counts problems by code and reports them as [`DiagnosticOptions`] say.
pub(crate) struct DiagnosticReporter {
    options: DiagnosticOptions,
    sink_name: String,
    seen: Mutex<HashMap<DiagnosticCode, (u64, Instant)>>,
}

impl DiagnosticReporter {
    pub(crate) fn new(options: DiagnosticOptions, default_name: &str) -> Self {
        let sink_name = options
            .sink_name
            .clone()
            .unwrap_or_else(|| default_name.to_owned());
        DiagnosticReporter {
            options,
            sink_name,
            seen: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn report(
        &self,
        code: DiagnosticCode,
        message: &'static str,
        severity: DiagnosticSeverity,
    ) {
        let count = {
            let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            let now = Instant::now();
            match seen.get_mut(&code) {
                Some((count, last)) => {
                    *count += 1;
                    if now.duration_since(*last) < self.options.interval {
                        return;
                    }
                    *last = now;
                    *count
                }
                None => {
                    seen.insert(code, (1, now));
                    1
                }
            }
        };
        let diagnostic = TelemetryDiagnostic {
            code,
            severity,
            count,
            sink_name: Some(self.sink_name.clone()),
            message,
        };
        match &self.options.on_diagnostic {
            // A handler is telemetry too: its panic never reaches the sink's caller.
            Some(handler) => {
                let _ = catch_unwind(AssertUnwindSafe(|| handler(&diagnostic)));
            }
            None if self.options.mode == DiagnosticMode::Warn => {
                eprintln!(
                    "[open-multi-agent observability] {}: {}",
                    code.as_str(),
                    message
                );
            }
            None => {}
        }
    }
}
