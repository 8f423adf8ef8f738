//! OMA's `BatchingTraceSink`: a bounded queue of records exported in batches through a
//! [`TraceExporter`] by a worker thread, with OMA's limits, priorities, retries and
//! diagnostics.
//!
//! `emit` only measures the record and queues it. When the queue would pass its record or
//! byte limit, the oldest record of the lowest priority (stream chunks, then other events, then
//! span starts; span ends last) that is not above the new record's gives way; when none may,
//! the new record is dropped. A batch goes out when `max_batch_records` are queued, or
//! `scheduled_delay` after the first record of a quiet spell, or at a flush. Each export call
//! runs on a thread of its own, bounded by `export_timeout`; a retryable answer (or a timeout,
//! or an error) retries what was not delivered, `max_retries` times with backoff (and jitter),
//! honouring the exporter's `retry_after`; then the records count as failed. Nothing here ever
//! fails the run or blocks it.

use std::collections::hash_map::RandomState;
use std::collections::{BTreeSet, VecDeque};
use std::hash::{BuildHasher, Hasher};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use super::sink::{
    DiagnosticCode, DiagnosticOptions, DiagnosticReporter, DiagnosticSeverity, FlushResult,
    FlushStatus, SinkError, TraceSink, TraceSinkStats,
};
use crate::bindings::oma::agent::exchange::TraceRecord;

/// Export calls left running past `export_timeout` that a sink lets stay alive at once; while
/// that many have not returned, a batch's export counts as timed out without a new call (each
/// holds a thread: an exporter that never returns must not take one per attempt).
pub const MAX_ABANDONED_EXPORTS: usize = 4;

/// Tells an exporter that the sink stopped waiting for its call (OMA's `AbortSignal`): a long
/// export may give up when it is set.
#[derive(Clone, Debug, Default)]
pub struct AbortSignal(Arc<AtomicBool>);

impl AbortSignal {
    /// Whether the sink stopped waiting.
    pub fn is_aborted(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    fn abort(&self) {
        self.0.store(true, Ordering::Release);
    }
}

/// How an export call went (OMA's `ExportResult.status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportStatus {
    /// Delivered (`exported` records of the batch; fewer is a permanent partial result).
    Success,
    /// Not delivered now; the records past `exported` may be retried.
    Retryable,
    /// Not delivered, never to be.
    Failure,
}

/// An exporter's answer to one call (OMA's `ExportResult`): `exported` is the delivered prefix
/// of the batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportResult {
    /// How it went.
    pub status: ExportStatus,
    /// How many records of the batch, from its start, were delivered.
    pub exported: u64,
    /// For a retryable answer, how long to wait before the retry (instead of the backoff).
    pub retry_after: Option<Duration>,
    /// A failure code, kept in the counters' `last_error` (at most 128 characters).
    pub code: Option<String>,
}

impl ExportResult {
    /// `exported` records delivered.
    pub fn success(exported: u64) -> Self {
        ExportResult {
            status: ExportStatus::Success,
            exported,
            retry_after: None,
            code: None,
        }
    }
}

/// Delivers batches of records somewhere (a store, a collector, a file): OMA's
/// `TraceExporter`. Each call runs on a thread of the sink's and may block; the sink stops
/// waiting at its timeout and sets `signal`.
pub trait TraceExporter: Send + Sync + 'static {
    /// Delivers `records`, in order, as far as it can.
    fn export(
        &self,
        records: &[TraceRecord],
        signal: &AbortSignal,
    ) -> Result<ExportResult, SinkError>;

    /// Delivers what the exporter itself holds; called after the sink's own queue was
    /// flushed. Anything but a success makes the flush fail. Nothing to do by default.
    fn force_flush(&self, signal: &AbortSignal) -> Result<ExportResult, SinkError> {
        let _ = signal;
        Ok(ExportResult::success(0))
    }

    /// Releases the exporter; called once, after the sink's last flush. Nothing by default.
    fn shutdown(&self, signal: &AbortSignal) -> Result<ExportResult, SinkError> {
        let _ = signal;
        Ok(ExportResult::success(0))
    }
}

impl<T: TraceExporter + ?Sized> TraceExporter for Arc<T> {
    fn export(
        &self,
        records: &[TraceRecord],
        signal: &AbortSignal,
    ) -> Result<ExportResult, SinkError> {
        (**self).export(records, signal)
    }

    fn force_flush(&self, signal: &AbortSignal) -> Result<ExportResult, SinkError> {
        (**self).force_flush(signal)
    }

    fn shutdown(&self, signal: &AbortSignal) -> Result<ExportResult, SinkError> {
        (**self).shutdown(signal)
    }
}

/// A [`BatchingTraceSink`]'s options: OMA's, with OMA's defaults (`Default`).
#[derive(Clone, Debug)]
pub struct BatchingOptions {
    /// Most records queued (2048).
    pub max_queue_records: u64,
    /// Most bytes of record JSON queued (16 MiB).
    pub max_queue_bytes: u64,
    /// Largest record taken, in bytes of JSON (256 KiB); a larger one is dropped.
    pub max_record_bytes: u64,
    /// Most records in one export call (512).
    pub max_batch_records: u64,
    /// How long a quiet queue waits before it is exported (5 s; at least 1 ms).
    pub scheduled_delay: Duration,
    /// How long one export call may take (30 s; at least 1 ms); also a flush's bound when it
    /// is given none.
    pub export_timeout: Duration,
    /// Retries after the first attempt (3).
    pub max_retries: u32,
    /// The first retry's delay (1 s).
    pub retry_delay: Duration,
    /// What each later delay is multiplied by (2; at least 1).
    pub retry_backoff: f64,
    /// The longest delay backoff reaches (30 s; at least 1 ms).
    pub max_retry_delay: Duration,
    /// Whether each delay is drawn between half of it and all of it (true).
    pub retry_jitter: bool,
    /// Diagnostics (the sink's name defaults to `BatchingTraceSink`).
    pub diagnostics: DiagnosticOptions,
}

impl Default for BatchingOptions {
    fn default() -> Self {
        BatchingOptions {
            max_queue_records: 2_048,
            max_queue_bytes: 16 * 1024 * 1024,
            max_record_bytes: 256 * 1024,
            max_batch_records: 512,
            scheduled_delay: Duration::from_secs(5),
            export_timeout: Duration::from_secs(30),
            max_retries: 3,
            retry_delay: Duration::from_secs(1),
            retry_backoff: 2.0,
            max_retry_delay: Duration::from_secs(30),
            retry_jitter: true,
            diagnostics: DiagnosticOptions::default(),
        }
    }
}

impl BatchingOptions {
    /// The first option out of range, named, with why.
    fn check(&self) -> Result<(), String> {
        for (name, value) in [
            ("max_queue_records", self.max_queue_records),
            ("max_queue_bytes", self.max_queue_bytes),
            ("max_record_bytes", self.max_record_bytes),
            ("max_batch_records", self.max_batch_records),
        ] {
            if value == 0 {
                return Err(format!("{name} must be an integer >= 1, got 0"));
            }
        }
        for (name, value) in [
            ("scheduled_delay", self.scheduled_delay),
            ("export_timeout", self.export_timeout),
            ("max_retry_delay", self.max_retry_delay),
        ] {
            if value < Duration::from_millis(1) {
                return Err(format!("{name} must be at least 1 ms, got {value:?}"));
            }
        }
        if !(self.retry_backoff >= 1.0 && self.retry_backoff.is_finite()) {
            return Err(format!(
                "retry_backoff must be a number >= 1, got {}",
                self.retry_backoff
            ));
        }
        Ok(())
    }
}

/// Options a [`BatchingTraceSink`] refuses, or a worker thread that could not start.
#[derive(Debug)]
pub enum BatchingError {
    /// An option out of range; the message names it.
    Option(String),
    /// The worker thread could not be started.
    Thread(std::io::Error),
}

impl std::fmt::Display for BatchingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BatchingError::Option(message) => f.write_str(message),
            BatchingError::Thread(error) => write!(f, "the sink's worker did not start: {error}"),
        }
    }
}

impl std::error::Error for BatchingError {}

/// The two keys of a record its priority reads; parsing into it also checks that the record
/// is JSON.
#[derive(serde::Deserialize)]
struct Head<'a> {
    #[serde(rename = "recordType", borrow)]
    record_type: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    name: Option<std::borrow::Cow<'a, str>>,
}

/// What survives a full queue longest: span ends, then starts, then events, stream chunks
/// least.
fn priority(head: &Head<'_>) -> u8 {
    match head.record_type.as_deref() {
        Some("span_end") => 3,
        Some("span_start") => 2,
        _ if head.name.as_deref() == Some("stream_chunk") => 0,
        _ => 1,
    }
}

struct Entry {
    id: u64,
    record: TraceRecord,
    bytes: u64,
    priority: u8,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Entry>,
    accepted: u64,
    exported: u64,
    retried: u64,
    failed: u64,
    dropped: u64,
    /// Accepted and not yet settled: queued, or in an export.
    queued_records: u64,
    queued_bytes: u64,
    last_error: Option<String>,
    next_id: u64,
    /// Every id up to here is settled (exported, failed or displaced); `settled_above` holds
    /// those settled out of order.
    settled_through: u64,
    settled_above: BTreeSet<u64>,
    /// When the scheduled export is due.
    due: Option<Instant>,
    /// An export is wanted now.
    wake: bool,
    /// The worker is exporting.
    busy: bool,
    /// Callers waiting in `force_flush`: the worker drains on until they are served.
    flushing: u32,
    closing: bool,
    /// The sink was dropped: the worker exports what it holds and ends.
    gone: bool,
    /// The exporter's `force_flush` running now, for concurrent flushes to wait on.
    exporter_flush: Option<Arc<Outcome>>,
}

impl State {
    fn settle(&mut self, id: u64) {
        self.settled_above.insert(id);
        while self.settled_above.remove(&(self.settled_through + 1)) {
            self.settled_through += 1;
        }
    }

    /// An entry leaves the queue's counts (exported, failed or displaced).
    fn release(&mut self, entry: &Entry) {
        self.queued_records -= 1;
        self.queued_bytes -= entry.bytes;
        self.settle(entry.id);
    }
}

/// A result one thread sets and others wait for.
#[derive(Default)]
struct Outcome {
    value: Mutex<Option<FlushStatus>>,
    set: Condvar,
}

struct Inner {
    state: Mutex<State>,
    changed: Condvar,
    exporter: Arc<dyn TraceExporter>,
    options: BatchingOptions,
    diagnostics: DiagnosticReporter,
    abandoned: Arc<AtomicUsize>,
}

/// A [`TraceSink`] that exports records in batches through a [`TraceExporter`] from a worker
/// thread of its own (see the module). Dropping it lets the worker export what it holds and
/// end.
pub struct BatchingTraceSink {
    inner: Arc<Inner>,
    shutdown_result: OnceLock<FlushResult>,
}

impl std::fmt::Debug for BatchingTraceSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchingTraceSink")
            .field("options", &self.inner.options)
            .finish_non_exhaustive()
    }
}

/// How a call bounded in time ended.
enum Bounded<T> {
    Value(T),
    Failed,
    TimedOut,
}

/// Runs `call` on a thread of its own and waits for it at most `bound`. A call still running
/// then is left to finish on its own, counted in `abandoned` until it does.
fn bounded<T: Send + 'static>(
    call: impl FnOnce() -> Result<T, SinkError> + Send + 'static,
    bound: Duration,
    abandoned: &Arc<AtomicUsize>,
) -> Bounded<T> {
    // 0: running, 1: answered, 2: abandoned.
    let fate = Arc::new(Mutex::new(0u8));
    let (tx, rx) = mpsc::channel();
    let (thread_fate, thread_abandoned) = (fate.clone(), abandoned.clone());
    let spawned = std::thread::Builder::new()
        .name("oma-trace-export".into())
        .spawn(move || {
            let answer = catch_unwind(AssertUnwindSafe(call));
            let mut fate = thread_fate.lock().unwrap_or_else(|p| p.into_inner());
            if *fate == 2 {
                thread_abandoned.fetch_sub(1, Ordering::AcqRel);
            } else {
                *fate = 1;
                let _ = tx.send(answer);
            }
        });
    if spawned.is_err() {
        return Bounded::Failed;
    }
    let answer = match rx.recv_timeout(bound) {
        Ok(answer) => answer,
        Err(_) => {
            let mut fate = fate.lock().unwrap_or_else(|p| p.into_inner());
            if *fate == 1 {
                // It answered as the wait ended.
                drop(fate);
                match rx.recv() {
                    Ok(answer) => answer,
                    Err(_) => return Bounded::Failed,
                }
            } else {
                *fate = 2;
                abandoned.fetch_add(1, Ordering::AcqRel);
                return Bounded::TimedOut;
            }
        }
    };
    match answer {
        Ok(Ok(value)) => Bounded::Value(value),
        _ => Bounded::Failed,
    }
}

/// A number in [0, 1) for jitter, from the standard library's per-process random keys.
fn unit_random() -> f64 {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(0);
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

impl BatchingTraceSink {
    /// A sink exporting through `exporter` with `options`; refuses an option out of range
    /// (naming it) and fails when its worker thread cannot start.
    pub fn new(
        exporter: impl TraceExporter,
        options: BatchingOptions,
    ) -> Result<Self, BatchingError> {
        options.check().map_err(BatchingError::Option)?;
        let inner = Arc::new(Inner {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            exporter: Arc::new(exporter),
            diagnostics: DiagnosticReporter::new(options.diagnostics.clone(), "BatchingTraceSink"),
            options,
            abandoned: Arc::new(AtomicUsize::new(0)),
        });
        let worker = inner.clone();
        std::thread::Builder::new()
            .name("oma-batching-trace-sink".into())
            .spawn(move || worker.run())
            .map_err(BatchingError::Thread)?;
        Ok(BatchingTraceSink {
            inner,
            shutdown_result: OnceLock::new(),
        })
    }
}

impl Drop for BatchingTraceSink {
    fn drop(&mut self) {
        self.inner.state().gone = true;
        self.inner.changed.notify_all();
    }
}

impl Inner {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn report(&self, code: DiagnosticCode, message: &'static str, severity: DiagnosticSeverity) {
        self.diagnostics.report(code, message, severity);
    }

    fn stats(&self) -> TraceSinkStats {
        let state = self.state();
        TraceSinkStats {
            accepted: state.accepted,
            exported: state.exported,
            retried: state.retried,
            failed: state.failed,
            dropped: state.dropped,
            queued_records: state.queued_records,
            queued_bytes: state.queued_bytes,
            last_error: state.last_error.clone(),
        }
    }

    fn emit(&self, record: &TraceRecord) {
        if self.state().closing {
            self.state().dropped += 1;
            self.report(
                DiagnosticCode::EmitAfterShutdown,
                "Trace record rejected after sink shutdown began.",
                DiagnosticSeverity::Warning,
            );
            return;
        }
        let bytes = record.json.len() as u64;
        let parsed = serde_json::from_str::<Head<'_>>(&record.json);
        let parsed = match parsed {
            Ok(value) if bytes <= self.options.max_record_bytes => value,
            _ => {
                self.state().dropped += 1;
                self.report(
                    DiagnosticCode::RecordTooLarge,
                    "Trace record exceeded the configured size limit or was not serializable.",
                    DiagnosticSeverity::Warning,
                );
                return;
            }
        };
        let mut incoming = Entry {
            id: 0,
            record: record.clone(),
            bytes,
            priority: priority(&parsed),
        };
        let (room, displaced) = {
            let mut state = self.state();
            let (room, displaced) = self.make_room(&mut state, &incoming);
            if room {
                state.next_id += 1;
                incoming.id = state.next_id;
                state.accepted += 1;
                state.queued_records += 1;
                state.queued_bytes += bytes;
                state.queue.push_back(incoming);
                if state.queue.len() as u64 >= self.options.max_batch_records {
                    state.wake = true;
                } else if state.due.is_none() && !state.busy {
                    state.due = Instant::now().checked_add(self.options.scheduled_delay);
                }
            } else {
                state.dropped += 1;
            }
            (room, displaced)
        };
        self.changed.notify_all();
        for _ in 0..displaced {
            self.report(
                DiagnosticCode::QueueFull,
                "A lower-priority queued trace record was dropped to preserve bounded memory.",
                DiagnosticSeverity::Warning,
            );
        }
        if !room {
            self.report(
                DiagnosticCode::QueueFull,
                "Trace record dropped because the bounded queue is full.",
                DiagnosticSeverity::Warning,
            );
        }
    }

    /// Displaces queued records of the lowest priority, oldest first, while `incoming` does
    /// not fit and one not above it remains; whether it fits now, and how many gave way.
    fn make_room(&self, state: &mut State, incoming: &Entry) -> (bool, usize) {
        let mut displaced = 0;
        while state.queued_records + 1 > self.options.max_queue_records
            || state.queued_bytes + incoming.bytes > self.options.max_queue_bytes
        {
            let lowest = state
                .queue
                .iter()
                .enumerate()
                .min_by_key(|(index, entry)| (entry.priority, *index))
                .map(|(index, entry)| (index, entry.priority));
            match lowest {
                Some((index, priority)) if priority <= incoming.priority => {
                    if let Some(entry) = state.queue.remove(index) {
                        state.dropped += 1;
                        state.release(&entry);
                        displaced += 1;
                    }
                }
                _ => return (false, displaced),
            }
        }
        (true, displaced)
    }

    /// The worker: waits for a reason to export (a full batch, a flush, shutdown, the
    /// scheduled delay), exports, and ends once the sink is dropped and its queue is done.
    fn run(&self) {
        loop {
            let mut state = self.state();
            loop {
                let urgent = state.wake || state.closing || state.flushing > 0 || state.gone;
                if !state.queue.is_empty() && urgent {
                    break;
                }
                if state.queue.is_empty() {
                    if state.gone {
                        return;
                    }
                    state = self.changed.wait(state).unwrap_or_else(|p| p.into_inner());
                    continue;
                }
                match state.due {
                    None => state.due = Instant::now().checked_add(self.options.scheduled_delay),
                    Some(due) => {
                        let left = due.saturating_duration_since(Instant::now());
                        if left.is_zero() {
                            break;
                        }
                        state = self
                            .changed
                            .wait_timeout(state, left)
                            .unwrap_or_else(|p| p.into_inner())
                            .0;
                    }
                }
            }
            state.due = None;
            state.busy = true;
            drop(state);
            self.drain();
            let mut state = self.state();
            state.busy = false;
            let urgent = state.wake || state.closing || state.flushing > 0;
            if !state.queue.is_empty() && !urgent && state.due.is_none() {
                state.due = Instant::now().checked_add(self.options.scheduled_delay);
            }
        }
    }

    /// Exports batches while the queue is full enough or someone waits for it.
    fn drain(&self) {
        loop {
            let batch: Vec<Entry> = {
                let mut state = self.state();
                if state.queue.is_empty() {
                    return;
                }
                state.wake = false;
                let take = state
                    .queue
                    .len()
                    .min(self.options.max_batch_records as usize);
                state.queue.drain(..take).collect()
            };
            self.export_batch(batch);
            let state = self.state();
            let urgent = state.wake || state.closing || state.flushing > 0 || state.gone;
            if !urgent && (state.queue.len() as u64) < self.options.max_batch_records {
                return;
            }
        }
    }

    /// Exports one batch, retrying what was not delivered as the answers allow.
    fn export_batch(&self, batch: Vec<Entry>) {
        let mut remaining = batch;
        let mut retry = 0u32;
        while !remaining.is_empty() {
            let records: Vec<TraceRecord> = remaining.iter().map(|e| e.record.clone()).collect();
            let signal = AbortSignal::default();
            let outcome = if self.abandoned.load(Ordering::Acquire) >= MAX_ABANDONED_EXPORTS {
                Bounded::TimedOut
            } else {
                let (exporter, call_signal) = (self.exporter.clone(), signal.clone());
                bounded(
                    move || exporter.export(&records, &call_signal),
                    self.options.export_timeout,
                    &self.abandoned,
                )
            };
            let retryable = |code: &str| ExportResult {
                status: ExportStatus::Retryable,
                exported: 0,
                retry_after: None,
                code: Some(code.to_owned()),
            };
            let result = match outcome {
                Bounded::Value(result) => result,
                Bounded::TimedOut => {
                    signal.abort();
                    self.report(
                        DiagnosticCode::ExportTimeout,
                        "Trace exporter exceeded its configured timeout.",
                        DiagnosticSeverity::Error,
                    );
                    retryable("EXPORT_TIMEOUT")
                }
                Bounded::Failed => retryable("EXPORT_REJECTED"),
            };
            let code: Option<String> = result
                .code
                .as_deref()
                .filter(|c| !c.is_empty())
                .map(|c| c.chars().take(128).collect());
            let delivered = (result.exported.min(remaining.len() as u64)) as usize;
            let again =
                result.status == ExportStatus::Retryable && retry < self.options.max_retries;
            if delivered < remaining.len() && !again {
                // Diagnosed before the records settle, so that a flush that saw them settle
                // also saw the diagnostic.
                self.report(
                    DiagnosticCode::ExportFailed,
                    "Trace exporter permanently failed to deliver one or more records.",
                    DiagnosticSeverity::Error,
                );
            }
            {
                let mut state = self.state();
                for entry in remaining.drain(..delivered) {
                    state.exported += 1;
                    state.release(&entry);
                }
                if remaining.is_empty() {
                    drop(state);
                    self.changed.notify_all();
                    return;
                }
                if result.status != ExportStatus::Success {
                    state.last_error = Some(code.clone().unwrap_or_else(|| {
                        match result.status {
                            ExportStatus::Retryable => "EXPORT_RETRYABLE",
                            _ => "EXPORT_FAILED",
                        }
                        .to_owned()
                    }));
                }
                if again {
                    retry += 1;
                    state.retried += remaining.len() as u64;
                } else {
                    state.last_error = Some(code.clone().unwrap_or_else(|| {
                        match result.status {
                            ExportStatus::Success => "PARTIAL_EXPORT",
                            _ => "EXPORT_FAILED",
                        }
                        .to_owned()
                    }));
                    for entry in remaining.drain(..) {
                        state.failed += 1;
                        state.release(&entry);
                    }
                }
            }
            self.changed.notify_all();
            if !again {
                return;
            }
            let nominal = match result.retry_after {
                Some(after) => after.as_secs_f64() * 1000.0,
                None => {
                    let backoff = self.options.retry_backoff.powi(retry as i32 - 1);
                    (self.options.retry_delay.as_secs_f64() * 1000.0 * backoff)
                        .min(self.options.max_retry_delay.as_secs_f64() * 1000.0)
                }
            };
            let delay_ms = if self.options.retry_jitter {
                (nominal / 2.0 + unit_random() * nominal / 2.0).floor()
            } else {
                nominal
            };
            self.report(
                DiagnosticCode::ExportFailed,
                "Trace exporter reported a retryable delivery failure.",
                DiagnosticSeverity::Warning,
            );
            if delay_ms > 0.0 {
                // An exporter's `retry_after` is honoured as it is, however long.
                let delay = Duration::try_from_secs_f64(delay_ms / 1000.0).unwrap_or(Duration::MAX);
                std::thread::sleep(delay);
            }
        }
    }

    /// `ok` without failures or drops; else `partial` when some was delivered, `error` when
    /// none was.
    fn status(stats: &TraceSinkStats) -> FlushStatus {
        if stats.failed == 0 && stats.dropped == 0 {
            FlushStatus::Ok
        } else if stats.exported > 0 {
            FlushStatus::Partial
        } else {
            FlushStatus::Error
        }
    }

    fn force_flush(&self, timeout: Option<Duration>) -> FlushResult {
        let started = Instant::now();
        let bound = timeout.unwrap_or(self.options.export_timeout);
        let deadline = started.checked_add(bound);
        let completed = {
            let mut state = self.state();
            let target = state.next_id;
            if target > state.settled_through {
                state.due = None;
                state.wake = true;
                state.flushing += 1;
                self.changed.notify_all();
                while target > state.settled_through {
                    let left = deadline.map_or(Duration::MAX, |d| {
                        d.saturating_duration_since(Instant::now())
                    });
                    if left.is_zero() {
                        break;
                    }
                    state = self
                        .changed
                        .wait_timeout(state, left)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
                state.flushing -= 1;
            }
            target <= state.settled_through
        };
        let stats = self.stats();
        if !completed {
            self.report(
                DiagnosticCode::FlushTimeout,
                "Trace flush timed out before its acceptance watermark settled.",
                DiagnosticSeverity::Warning,
            );
            return FlushResult::from_stats(&stats, FlushStatus::Timeout);
        }
        let left = bound.saturating_sub(started.elapsed());
        match self.flush_exporter(left) {
            FlushStatus::Timeout => {
                self.report(
                    DiagnosticCode::FlushTimeout,
                    "Trace exporter forceFlush timed out.",
                    DiagnosticSeverity::Warning,
                );
                FlushResult::from_stats(&self.stats(), FlushStatus::Timeout)
            }
            FlushStatus::Error => {
                self.state().last_error = Some("EXPORTER_FLUSH_FAILED".into());
                self.report(
                    DiagnosticCode::ExportFailed,
                    "Trace exporter forceFlush failed.",
                    DiagnosticSeverity::Error,
                );
                let status = if stats.exported > 0 {
                    FlushStatus::Partial
                } else {
                    FlushStatus::Error
                };
                FlushResult::from_stats(&self.stats(), status)
            }
            _ => FlushResult::from_stats(&stats, Self::status(&stats)),
        }
    }

    /// Calls the exporter's `force_flush` within `bound`: `ok`, `error` or `timeout`. A flush
    /// that finds one running waits for its outcome instead.
    fn flush_exporter(&self, bound: Duration) -> FlushStatus {
        let (outcome, mine) = {
            let mut state = self.state();
            match &state.exporter_flush {
                Some(running) => (running.clone(), false),
                None => {
                    let outcome = Arc::new(Outcome::default());
                    state.exporter_flush = Some(outcome.clone());
                    (outcome, true)
                }
            }
        };
        if !mine {
            let value = outcome.value.lock().unwrap_or_else(|p| p.into_inner());
            let (value, _) = outcome
                .set
                .wait_timeout_while(value, bound, |v| v.is_none())
                .unwrap_or_else(|p| p.into_inner());
            return value.unwrap_or(FlushStatus::Timeout);
        }
        let signal = AbortSignal::default();
        let (exporter, call_signal) = (self.exporter.clone(), signal.clone());
        let status = match bounded(
            move || exporter.force_flush(&call_signal),
            bound,
            &self.abandoned,
        ) {
            Bounded::Value(answer) if answer.status == ExportStatus::Success => FlushStatus::Ok,
            Bounded::Value(_) | Bounded::Failed => FlushStatus::Error,
            Bounded::TimedOut => {
                signal.abort();
                FlushStatus::Timeout
            }
        };
        self.state().exporter_flush = None;
        *outcome.value.lock().unwrap_or_else(|p| p.into_inner()) = Some(status);
        outcome.set.notify_all();
        status
    }

    /// Flushes, then calls the exporter's `shutdown`, all within `timeout`.
    fn shutdown(&self, timeout: Option<Duration>) -> FlushResult {
        let started = Instant::now();
        let bound = timeout.unwrap_or(self.options.export_timeout);
        let flushed = self.force_flush(Some(bound));
        if flushed.status == FlushStatus::Timeout {
            return flushed;
        }
        let signal = AbortSignal::default();
        let (exporter, call_signal) = (self.exporter.clone(), signal.clone());
        let left = bound.saturating_sub(started.elapsed());
        let outcome = bounded(
            move || exporter.shutdown(&call_signal),
            left,
            &self.abandoned,
        );
        let failed_status = if flushed.status == FlushStatus::Ok {
            FlushStatus::Error
        } else {
            FlushStatus::Partial
        };
        let (code, message, status) = match outcome {
            Bounded::Value(answer) if answer.status == ExportStatus::Success => return flushed,
            Bounded::TimedOut => {
                signal.abort();
                (
                    "SHUTDOWN_TIMEOUT".to_owned(),
                    "Trace exporter shutdown timed out.",
                    FlushStatus::Timeout,
                )
            }
            Bounded::Failed => (
                "SHUTDOWN_REJECTED".to_owned(),
                "Trace exporter shutdown rejected.",
                failed_status,
            ),
            Bounded::Value(answer) => (
                answer
                    .code
                    .filter(|c| !c.is_empty())
                    .unwrap_or_else(|| "SHUTDOWN_FAILED".to_owned()),
                "Trace exporter shutdown failed.",
                failed_status,
            ),
        };
        self.state().last_error = Some(code);
        self.report(
            DiagnosticCode::ShutdownFailed,
            message,
            DiagnosticSeverity::Error,
        );
        FlushResult::from_stats(&self.stats(), status)
    }
}

impl TraceSink for BatchingTraceSink {
    /// Queues `record` (never blocks, never fails).
    fn emit(&self, record: &TraceRecord) -> Result<(), SinkError> {
        self.inner.emit(record);
        Ok(())
    }

    /// Exports what was accepted before the call, then calls the exporter's `force_flush`,
    /// waiting at most `timeout` (`export_timeout` when none is given).
    fn force_flush(&self, timeout: Option<Duration>) -> Result<FlushResult, SinkError> {
        Ok(self.inner.force_flush(timeout))
    }

    /// Refuses records from now on, flushes what was accepted, then calls the exporter's
    /// `shutdown`, all within `timeout`; once, a later or concurrent call giving the first
    /// call's result.
    fn shutdown(&self, timeout: Option<Duration>) -> Result<FlushResult, SinkError> {
        Ok(*self.shutdown_result.get_or_init(|| {
            {
                let mut state = self.inner.state();
                state.closing = true;
                state.due = None;
            }
            self.inner.changed.notify_all();
            self.inner.shutdown(timeout)
        }))
    }

    fn stats(&self) -> Option<TraceSinkStats> {
        Some(self.inner.stats())
    }
}
