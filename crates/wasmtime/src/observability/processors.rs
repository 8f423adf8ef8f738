//! OMA's record processors: the [`FilteringSink`], which hands on the records a predicate keeps,
//! and the [`SensitiveDataProcessor`], the privacy boundary a user puts in front of a sink
//! (an attribute allowlist, credentials and reasoning removed, content kept only where the
//! capture policy allows it, secrets redacted, strings cut). The processor's rule is the guest's
//! (`codec.process-trace-record`), the one every record of a run already passed, so this crate
//! keeps no copy of it.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

use super::sink::{FlushResult, SinkError, TraceSink, TraceSinkStats};
use crate::bindings::oma::agent::exchange::TraceRecord;
use crate::bindings::oma::agent::types::Error as WitError;

/// Hands on the records `keep` accepts (OMA's `FilteringSink`). A predicate that panics drops
/// that record only: filters are telemetry code and never fail the run. Flush, shutdown and
/// counters are the wrapped sink's.
pub struct FilteringSink<F> {
    sink: Box<dyn TraceSink>,
    keep: F,
}

impl<F> std::fmt::Debug for FilteringSink<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FilteringSink").finish_non_exhaustive()
    }
}

impl<F: Fn(&TraceRecord) -> bool + Send + Sync> FilteringSink<F> {
    /// `sink` behind the predicate `keep`.
    pub fn new(sink: impl TraceSink + 'static, keep: F) -> Self {
        FilteringSink {
            sink: Box::new(sink),
            keep,
        }
    }
}

impl<F: Fn(&TraceRecord) -> bool + Send + Sync> TraceSink for FilteringSink<F> {
    fn emit(&self, record: &TraceRecord) -> Result<(), SinkError> {
        match catch_unwind(AssertUnwindSafe(|| (self.keep)(record))) {
            Ok(true) => self.sink.emit(record),
            Ok(false) | Err(_) => Ok(()),
        }
    }

    fn force_flush(&self, timeout: Option<Duration>) -> Result<FlushResult, SinkError> {
        self.sink.force_flush(timeout)
    }

    fn shutdown(&self, timeout: Option<Duration>) -> Result<FlushResult, SinkError> {
        self.sink.shutdown(timeout)
    }

    fn stats(&self) -> Option<TraceSinkStats> {
        self.sink.stats()
    }
}

/// The future a [`RecordProcessor`] answers with: the codec's outer (trap or host) and inner
/// (typed) results.
pub type ProcessFuture<'a> =
    Pin<Box<dyn Future<Output = anyhow::Result<Result<Option<String>, WitError>>> + Send + 'a>>;

/// A guest whose codec processes records (`codec.process-trace-record`):
/// [`Guest`](crate::Guest) and [`DriverGuest`](crate::DriverGuest).
pub trait RecordProcessor: Send {
    /// The processor of `options` (OMA's options as JSON) checked and, given a record (JSON),
    /// applied to it: the record its sink gets, or `None` when it is dropped.
    fn process_trace_record<'a>(
        &'a mut self,
        options: &'a str,
        record: Option<&'a str>,
    ) -> ProcessFuture<'a>;
}

impl<T: RecordProcessor + ?Sized> RecordProcessor for Box<T> {
    fn process_trace_record<'a>(
        &'a mut self,
        options: &'a str,
        record: Option<&'a str>,
    ) -> ProcessFuture<'a> {
        (**self).process_trace_record(options, record)
    }
}

impl RecordProcessor for crate::Guest {
    fn process_trace_record<'a>(
        &'a mut self,
        options: &'a str,
        record: Option<&'a str>,
    ) -> ProcessFuture<'a> {
        Box::pin(crate::Guest::process_trace_record(self, options, record))
    }
}

impl RecordProcessor for crate::DriverGuest {
    fn process_trace_record<'a>(
        &'a mut self,
        options: &'a str,
        record: Option<&'a str>,
    ) -> ProcessFuture<'a> {
        Box::pin(crate::DriverGuest::process_trace_record(
            self, options, record,
        ))
    }
}

/// Why a [`SensitiveDataProcessor`] could not be made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SensitiveDataError {
    /// The options are not OMA's: `name` is the class OMA's contract gives the refusal
    /// (`TypeError` for an unknown option or a value of the wrong type, `RangeError` for a value
    /// outside the option's choices) and `message` names the option (`` `capture.prompt` must
    /// be "none" or "redacted" ``).
    Refused {
        /// `TypeError` or `RangeError`.
        name: String,
        /// What was refused, naming the option.
        message: String,
    },
    /// The guest could not be reached: it trapped, or its thread could not be started.
    Codec(String),
}

impl std::fmt::Display for SensitiveDataError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SensitiveDataError::Refused { name, message } => write!(f, "{name}: {message}"),
            SensitiveDataError::Codec(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for SensitiveDataError {}

/// What the guest's thread answers: the processed record, `None` for a dropped one, or why
/// nothing came back (the guest's typed error, or its failure).
type Answer = Result<Option<String>, SensitiveDataError>;

struct Request {
    record: Option<String>,
    reply: mpsc::SyncSender<Answer>,
}

/// OMA's `SensitiveDataProcessor`: each record is processed by the guest's codec with the
/// processor's options and the result handed to the wrapped sink; a record the processing
/// drops (a `stream_chunk` event under `streamEvents: "none"`) never reaches it.
///
/// The options are OMA's (`attributeAllowlist`, and `capture`: `prompt`, `completion`,
/// `toolInput`, `toolOutput`, `errorMessage`, `stack`, `streamEvents`, `maxContentChars`),
/// checked by the guest when the processor is made. The guest is the processor's own: it runs
/// on a thread of the processor's, so `emit` (called on a run's path, from synchronous code)
/// waits only for the processing of its record. A record the guest refuses (not a JSON object
/// with an `attributes` object) or cannot process (it trapped) is not delivered, and `emit`
/// says so with an error that holds no part of the record. The record handed on carries no
/// legacy event: as in OMA, the processed record is a new one.
pub struct SensitiveDataProcessor {
    sink: Box<dyn TraceSink>,
    requests: mpsc::Sender<Request>,
}

impl std::fmt::Debug for SensitiveDataProcessor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SensitiveDataProcessor")
            .finish_non_exhaustive()
    }
}

impl SensitiveDataProcessor {
    /// `sink` behind the processor of `options` (OMA's `SensitiveDataProcessorOptions` as JSON;
    /// `{}` for OMA's defaults), whose records `codec` (a guest of either world, the
    /// processor's alone) processes. Options the guest refuses are
    /// [`SensitiveDataError::Refused`], naming the option.
    pub fn new(
        sink: impl TraceSink + 'static,
        codec: impl RecordProcessor + 'static,
        options: &Value,
    ) -> Result<Self, SensitiveDataError> {
        let requests = spawn_worker(Box::new(codec), options.to_string())?;
        let processor = SensitiveDataProcessor {
            sink: Box::new(sink),
            requests,
        };
        processor.ask(None)?;
        Ok(processor)
    }

    /// Has the guest's thread process `record` (or only check the options).
    fn ask(&self, record: Option<String>) -> Answer {
        let (reply, answer) = mpsc::sync_channel(1);
        let stopped = || SensitiveDataError::Codec("the processor's guest has stopped".into());
        if self.requests.send(Request { record, reply }).is_err() {
            return Err(stopped());
        }
        answer.recv().unwrap_or_else(|_| Err(stopped()))
    }

    /// The record as the wrapped sink would get it (OMA's record JSON), or `None` when the
    /// processor drops it; an error when the guest refuses or cannot process it.
    pub fn process(&self, record: &str) -> Result<Option<String>, SinkError> {
        match self.ask(Some(record.to_owned())) {
            Ok(processed) => Ok(processed),
            Err(SensitiveDataError::Refused { .. }) => {
                Err("the record is not a trace record".into())
            }
            Err(SensitiveDataError::Codec(message)) => Err(message.into()),
        }
    }
}

/// Starts the thread that owns `codec` and answers requests until the processor is dropped.
fn spawn_worker(
    mut codec: Box<dyn RecordProcessor>,
    options: String,
) -> Result<mpsc::Sender<Request>, SensitiveDataError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| SensitiveDataError::Codec(format!("cannot start the processor: {e}")))?;
    let (requests, receiver) = mpsc::channel::<Request>();
    std::thread::Builder::new()
        .name("oma-sensitive-data".into())
        .spawn(move || {
            while let Ok(Request { record, reply }) = receiver.recv() {
                let answer =
                    runtime.block_on(codec.process_trace_record(&options, record.as_deref()));
                let answer = match answer {
                    Ok(Ok(processed)) => Ok(processed),
                    Ok(Err(error)) => Err(SensitiveDataError::Refused {
                        name: error.name,
                        message: error.message,
                    }),
                    Err(trap) => Err(SensitiveDataError::Codec(format!(
                        "the processor's guest failed: {trap}"
                    ))),
                };
                let _ = reply.send(answer);
            }
        })
        .map_err(|e| SensitiveDataError::Codec(format!("cannot start the processor: {e}")))?;
    Ok(requests)
}

impl TraceSink for SensitiveDataProcessor {
    fn emit(&self, record: &TraceRecord) -> Result<(), SinkError> {
        match self.process(&record.json)? {
            Some(json) => self.sink.emit(&TraceRecord { json, legacy: None }),
            None => Ok(()),
        }
    }

    fn force_flush(&self, timeout: Option<Duration>) -> Result<FlushResult, SinkError> {
        self.sink.force_flush(timeout)
    }

    fn shutdown(&self, timeout: Option<Duration>) -> Result<FlushResult, SinkError> {
        self.sink.shutdown(timeout)
    }

    fn stats(&self) -> Option<TraceSinkStats> {
        self.sink.stats()
    }
}
