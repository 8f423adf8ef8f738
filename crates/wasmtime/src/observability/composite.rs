//! OMA's `CompositeSink`: one sink that hands every record to several.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, OnceLock};
use std::time::{Duration, Instant};

use super::sink::{
    stats_of, DiagnosticCode, DiagnosticOptions, DiagnosticReporter, DiagnosticSeverity,
    FlushResult, FlushStatus, SinkError, TraceSink, TraceSinkStats, DEFAULT_FLUSH_TIMEOUT,
};
use crate::bindings::oma::agent::exchange::TraceRecord;

/// Hands each record to every child sink in order. A child whose `emit` fails (an error or a
/// panic) is counted and diagnosed (`sink_emit_failed`) and the others still get the record.
/// `force_flush` and `shutdown` call all children at once, each on a thread of its own and held
/// to the timeout (30 s when none is given): a child that fails counts as `error` with one
/// more failure, one that does not answer in time as `timeout` with its counters, and its
/// thread is left to finish on its own. After `shutdown` began, records are refused
/// (`emit_after_shutdown`) and no child gets them.
pub struct CompositeTraceSink {
    sinks: Vec<Arc<dyn TraceSink>>,
    diagnostics: Arc<DiagnosticReporter>,
    closing: AtomicBool,
    emit_failures: AtomicU64,
    shutdown_result: OnceLock<FlushResult>,
}

impl std::fmt::Debug for CompositeTraceSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompositeTraceSink")
            .field("sinks", &self.sinks.len())
            .finish_non_exhaustive()
    }
}

#[derive(Clone, Copy)]
enum Operation {
    Flush,
    Shutdown,
}

impl CompositeTraceSink {
    /// The composite of `sinks`, reporting as `diagnostics` says (its name defaults to
    /// `CompositeSink`).
    pub fn new(
        sinks: impl IntoIterator<Item = Arc<dyn TraceSink>>,
        diagnostics: DiagnosticOptions,
    ) -> Self {
        CompositeTraceSink {
            sinks: sinks.into_iter().collect(),
            diagnostics: Arc::new(DiagnosticReporter::new(diagnostics, "CompositeSink")),
            closing: AtomicBool::new(false),
            emit_failures: AtomicU64::new(0),
            shutdown_result: OnceLock::new(),
        }
    }

    /// Calls `operation` on every child at once and waits for each until `timeout`.
    fn call_children(&self, operation: Operation, timeout: Option<Duration>) -> FlushResult {
        let bound = timeout.unwrap_or(DEFAULT_FLUSH_TIMEOUT);
        let deadline = Instant::now().checked_add(bound);
        let (tx, rx) = mpsc::channel();
        let mut results: Vec<Option<FlushResult>> = vec![None; self.sinks.len()];
        let mut waiting = 0;
        for (index, sink) in self.sinks.iter().enumerate() {
            let child = sink.clone();
            let tx = tx.clone();
            let spawned = std::thread::Builder::new()
                .name("oma-composite-sink".into())
                .spawn(move || {
                    let answer = catch_unwind(AssertUnwindSafe(|| match operation {
                        Operation::Flush => child.force_flush(timeout),
                        Operation::Shutdown => child.shutdown(timeout),
                    }));
                    let answer = answer.unwrap_or_else(|_| Err("the sink panicked".into()));
                    let _ = tx.send((index, answer));
                });
            match spawned {
                Ok(_) => waiting += 1,
                Err(_) => results[index] = Some(self.failed(operation, sink.as_ref())),
            }
        }
        drop(tx);
        while waiting > 0 {
            let received = match deadline {
                Some(deadline) => {
                    rx.recv_timeout(deadline.saturating_duration_since(Instant::now()))
                }
                None => rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected),
            };
            let Ok((index, answer)) = received else { break };
            waiting -= 1;
            results[index] = Some(match answer {
                Ok(result) => result,
                Err(_) => self.failed(operation, self.sinks[index].as_ref()),
            });
        }
        let results: Vec<FlushResult> = results
            .into_iter()
            .zip(&self.sinks)
            .map(|(result, sink)| {
                result.unwrap_or_else(|| {
                    let (code, message) = match operation {
                        Operation::Flush => (
                            DiagnosticCode::FlushTimeout,
                            "A child trace sink flush operation timed out.",
                        ),
                        Operation::Shutdown => (
                            DiagnosticCode::ShutdownFailed,
                            "A child trace sink shutdown operation timed out.",
                        ),
                    };
                    self.diagnostics
                        .report(code, message, DiagnosticSeverity::Error);
                    FlushResult::from_stats(&stats_of(sink.as_ref()), FlushStatus::Timeout)
                })
            })
            .collect();
        FlushResult::combine(&results)
    }

    /// A child's failed flush or shutdown: diagnosed, `error` with one more failure.
    fn failed(&self, operation: Operation, sink: &dyn TraceSink) -> FlushResult {
        let (code, message) = match operation {
            Operation::Flush => (
                DiagnosticCode::ExportFailed,
                "A child trace sink rejected flush.",
            ),
            Operation::Shutdown => (
                DiagnosticCode::ShutdownFailed,
                "A child trace sink rejected shutdown.",
            ),
        };
        self.diagnostics
            .report(code, message, DiagnosticSeverity::Error);
        let mut result = FlushResult::from_stats(&stats_of(sink), FlushStatus::Error);
        result.failed += 1;
        result
    }
}

impl TraceSink for CompositeTraceSink {
    fn emit(&self, record: &TraceRecord) -> Result<(), SinkError> {
        if self.closing.load(Ordering::Acquire) {
            self.diagnostics.report(
                DiagnosticCode::EmitAfterShutdown,
                "Trace record rejected after composite shutdown began.",
                DiagnosticSeverity::Warning,
            );
            return Ok(());
        }
        for sink in &self.sinks {
            let accepted = catch_unwind(AssertUnwindSafe(|| sink.emit(record)));
            if !matches!(accepted, Ok(Ok(()))) {
                self.emit_failures.fetch_add(1, Ordering::Relaxed);
                self.diagnostics.report(
                    DiagnosticCode::SinkEmitFailed,
                    "A child trace sink threw while accepting a record.",
                    DiagnosticSeverity::Error,
                );
            }
        }
        Ok(())
    }

    fn force_flush(&self, timeout: Option<Duration>) -> Result<FlushResult, SinkError> {
        Ok(self.call_children(Operation::Flush, timeout))
    }

    /// Shuts every child down once; a later or concurrent call waits for and gives the first
    /// call's result.
    fn shutdown(&self, timeout: Option<Duration>) -> Result<FlushResult, SinkError> {
        Ok(*self.shutdown_result.get_or_init(|| {
            self.closing.store(true, Ordering::Release);
            self.call_children(Operation::Shutdown, timeout)
        }))
    }

    /// The children's counters summed (a child without any counts zero), the composite's own
    /// emit failures added to `failed`, and the last error of the last child that has one.
    fn stats(&self) -> Option<TraceSinkStats> {
        let mut out = TraceSinkStats {
            failed: self.emit_failures.load(Ordering::Relaxed),
            ..TraceSinkStats::default()
        };
        for sink in &self.sinks {
            let stats = stats_of(sink.as_ref());
            out.accepted += stats.accepted;
            out.exported += stats.exported;
            out.retried += stats.retried;
            out.failed += stats.failed;
            out.dropped += stats.dropped;
            out.queued_records += stats.queued_records;
            out.queued_bytes += stats.queued_bytes;
            if let Some(error) = stats.last_error.filter(|e| !e.is_empty()) {
                out.last_error = Some(error);
            }
        }
        Some(out)
    }
}
