//! OMA's `LegacyCallbackTraceSink`: the bridge from trace records to the older `onTrace`
//! callback, which gets OMA's legacy trace events (`llm_call`, `tool_call`, `agent`, ...) in
//! their exact JSON shape.
//!
//! A record that completes a legacy event carries it (`TraceRecord::legacy`, set for runs
//! traced the legacy way too); the sink hands the callback that event and ignores every other
//! record. The callback runs either inline, on the run's path ([`LegacyCallbackTraceSink::new`],
//! OMA's synchronous callback), or on a worker thread of the sink's own that takes the events
//! in order from a bounded queue ([`LegacyCallbackTraceSink::on_thread`], the counterpart of
//! OMA's asynchronous callback: a slow or hanging callback never holds the run, and
//! `force_flush` waits for the events handed over before it, within its timeout).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::sink::{
    DiagnosticCode, DiagnosticOptions, DiagnosticReporter, DiagnosticSeverity, FlushResult,
    FlushStatus, SinkError, TraceSink, TraceSinkStats, DEFAULT_FLUSH_TIMEOUT,
};
use crate::bindings::oma::agent::exchange::TraceRecord;

/// How many events an [`on_thread`](LegacyCallbackTraceSink::on_thread) sink holds for its
/// worker; one more is dropped and diagnosed (`queue_full`).
pub const LEGACY_QUEUE_CAPACITY: usize = 2048;

/// The code a failed callback leaves in the counters' `last_error` (OMA's).
const FAILURE_CODE: &str = "LEGACY_CALLBACK_FAILED";

type Callback = dyn Fn(&Value) -> Result<(), SinkError> + Send + Sync;

/// Calls a callback with the legacy trace event each record carries (see the module). A
/// callback that fails (an error or a panic) is counted as failed and diagnosed; the run never
/// sees it.
pub struct LegacyCallbackTraceSink {
    shared: Arc<Shared>,
    delivery: Delivery,
    shutdown_result: OnceLock<FlushResult>,
}

impl std::fmt::Debug for LegacyCallbackTraceSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LegacyCallbackTraceSink")
            .field("counts", &*self.shared.state())
            .finish_non_exhaustive()
    }
}

enum Delivery {
    Inline(Box<Callback>),
    /// The worker's queue; `None` once shutdown let the worker finish.
    Worker(Mutex<Option<SyncSender<Value>>>),
}

struct Shared {
    state: Mutex<Counts>,
    /// Signalled each time the worker finishes an event.
    settled: Condvar,
    diagnostics: DiagnosticReporter,
}

#[derive(Debug, Default)]
struct Counts {
    accepted: u64,
    exported: u64,
    failed: u64,
    dropped: u64,
    closing: bool,
    /// Events handed to the worker, and those it finished.
    handed: u64,
    done: u64,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, Counts> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl LegacyCallbackTraceSink {
    /// A sink calling `callback` inline, on the run's path: it should return at once.
    /// Diagnostics as `diagnostics` says (its name defaults to `LegacyCallbackTraceSink`).
    pub fn new(
        callback: impl Fn(&Value) -> Result<(), SinkError> + Send + Sync + 'static,
        diagnostics: DiagnosticOptions,
    ) -> Self {
        LegacyCallbackTraceSink {
            shared: Self::shared(diagnostics),
            delivery: Delivery::Inline(Box::new(callback)),
            shutdown_result: OnceLock::new(),
        }
    }

    /// A sink calling `callback` on a worker thread of its own, in order, from a queue of
    /// [`LEGACY_QUEUE_CAPACITY`] events: for a callback that takes time (writes, sends). The
    /// worker ends after shutdown, or when the sink is dropped, once its queue is done. Fails
    /// only when the thread cannot be started.
    pub fn on_thread(
        callback: impl Fn(&Value) -> Result<(), SinkError> + Send + Sync + 'static,
        diagnostics: DiagnosticOptions,
    ) -> std::io::Result<Self> {
        let shared = Self::shared(diagnostics);
        let (tx, rx) = mpsc::sync_channel::<Value>(LEGACY_QUEUE_CAPACITY);
        let worker = shared.clone();
        std::thread::Builder::new()
            .name("oma-legacy-trace".into())
            .spawn(move || {
                for event in rx {
                    let ok = matches!(
                        catch_unwind(AssertUnwindSafe(|| callback(&event))),
                        Ok(Ok(()))
                    );
                    // Diagnosed before it counts as done, so a flush that saw it done also
                    // saw its diagnostic.
                    if !ok {
                        worker.diagnostics.report(
                            DiagnosticCode::ExportFailed,
                            "Legacy trace callback rejected.",
                            DiagnosticSeverity::Error,
                        );
                    }
                    {
                        let mut state = worker.state();
                        state.done += 1;
                        if ok {
                            state.exported += 1;
                        } else {
                            state.failed += 1;
                        }
                    }
                    worker.settled.notify_all();
                }
            })?;
        Ok(LegacyCallbackTraceSink {
            shared,
            delivery: Delivery::Worker(Mutex::new(Some(tx))),
            shutdown_result: OnceLock::new(),
        })
    }

    fn shared(diagnostics: DiagnosticOptions) -> Arc<Shared> {
        Arc::new(Shared {
            state: Mutex::new(Counts::default()),
            settled: Condvar::new(),
            diagnostics: DiagnosticReporter::new(diagnostics, "LegacyCallbackTraceSink"),
        })
    }

    fn counters(&self) -> TraceSinkStats {
        let state = self.shared.state();
        let queued = state.handed - state.done;
        TraceSinkStats {
            accepted: state.accepted,
            exported: state.exported,
            retried: 0,
            failed: state.failed,
            dropped: state.dropped,
            queued_records: queued,
            queued_bytes: 0,
            last_error: (state.failed > 0).then(|| FAILURE_CODE.to_owned()),
        }
    }

    /// `ok` without failures or drops; else `partial` when some was delivered, `error` when
    /// none was.
    fn settled_result(&self) -> FlushResult {
        let stats = self.counters();
        let status = if stats.failed == 0 && stats.dropped == 0 {
            FlushStatus::Ok
        } else if stats.exported > 0 {
            FlushStatus::Partial
        } else {
            FlushStatus::Error
        };
        FlushResult::from_stats(&stats, status)
    }

    fn report(&self, code: DiagnosticCode, message: &'static str, severity: DiagnosticSeverity) {
        self.shared.diagnostics.report(code, message, severity);
    }
}

impl TraceSink for LegacyCallbackTraceSink {
    fn emit(&self, record: &TraceRecord) -> Result<(), SinkError> {
        let Some(text) = record.legacy.as_deref() else {
            return Ok(());
        };
        let mut state = self.shared.state();
        if state.closing {
            state.dropped += 1;
            drop(state);
            self.report(
                DiagnosticCode::EmitAfterShutdown,
                "Legacy trace event rejected after sink shutdown began.",
                DiagnosticSeverity::Warning,
            );
            return Ok(());
        }
        state.accepted += 1;
        let event = serde_json::from_str::<Value>(text);
        match (&self.delivery, event) {
            (Delivery::Inline(callback), Ok(event)) => {
                drop(state);
                let ok = matches!(
                    catch_unwind(AssertUnwindSafe(|| callback(&event))),
                    Ok(Ok(()))
                );
                let mut state = self.shared.state();
                if ok {
                    state.exported += 1;
                    return Ok(());
                }
                state.failed += 1;
            }
            (Delivery::Worker(queue), Ok(event)) => {
                let queue = queue.lock().unwrap_or_else(|p| p.into_inner());
                match queue.as_ref().map(|tx| tx.try_send(event)) {
                    Some(Ok(())) => {
                        state.handed += 1;
                        return Ok(());
                    }
                    Some(Err(TrySendError::Full(_))) => {
                        state.accepted -= 1;
                        state.dropped += 1;
                        drop(state);
                        self.report(
                            DiagnosticCode::QueueFull,
                            "Trace record dropped because the bounded queue is full.",
                            DiagnosticSeverity::Warning,
                        );
                        return Ok(());
                    }
                    // The worker is gone (it cannot be while the sink accepts): a failure.
                    Some(Err(TrySendError::Disconnected(_))) | None => {
                        state.failed += 1;
                        drop(state);
                    }
                }
            }
            // The core always attaches JSON; anything else is this callback's failure.
            (_, Err(_)) => {
                state.failed += 1;
                drop(state);
            }
        }
        // Here no lock is held: a diagnostic handler may read the sink's counters.
        self.report(
            DiagnosticCode::SinkEmitFailed,
            "Legacy trace callback threw synchronously.",
            DiagnosticSeverity::Error,
        );
        Ok(())
    }

    /// Waits for the events handed to the worker before the call (none for an inline
    /// callback), at most `timeout` (30 s when none is given): `timeout` if they are not all
    /// done by then.
    fn force_flush(&self, timeout: Option<Duration>) -> Result<FlushResult, SinkError> {
        let bound = timeout.unwrap_or(DEFAULT_FLUSH_TIMEOUT);
        let deadline = Instant::now().checked_add(bound);
        let mut state = self.shared.state();
        let watermark = state.handed;
        while state.done < watermark {
            let left = match deadline {
                Some(deadline) => deadline.saturating_duration_since(Instant::now()),
                None => Duration::MAX,
            };
            if left.is_zero() {
                drop(state);
                self.report(
                    DiagnosticCode::FlushTimeout,
                    "Legacy trace callback flush timed out.",
                    DiagnosticSeverity::Warning,
                );
                return Ok(FlushResult::from_stats(
                    &self.counters(),
                    FlushStatus::Timeout,
                ));
            }
            state = self
                .shared
                .settled
                .wait_timeout(state, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        drop(state);
        Ok(self.settled_result())
    }

    /// Refuses later events, then flushes; once, a later or concurrent call giving the first
    /// call's result. The worker finishes what it holds and ends.
    fn shutdown(&self, timeout: Option<Duration>) -> Result<FlushResult, SinkError> {
        let result = self.shutdown_result.get_or_init(|| {
            self.shared.state().closing = true;
            let result = self.force_flush(timeout).unwrap_or(FlushResult {
                status: FlushStatus::Error,
                ..FlushResult::OK
            });
            if let Delivery::Worker(queue) = &self.delivery {
                queue.lock().unwrap_or_else(|p| p.into_inner()).take();
            }
            result
        });
        Ok(*result)
    }

    /// Counts of events (records without one are not counted); `queued_records` the events the
    /// worker has not finished; `last_error` `LEGACY_CALLBACK_FAILED` after a failure.
    fn stats(&self) -> Option<TraceSinkStats> {
        Some(self.counters())
    }
}
