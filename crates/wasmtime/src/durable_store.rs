//! A store kept in a durable log (`crate::durable_log`): an in-memory store ([`Replay`]) and
//! its file under one lock. Opening replays the file into the store; each change is made in
//! the store and written to the file as one batch under the lock before the call returns; a
//! write that fails is cut back and the file replayed again, so the store holds what the file
//! holds. OMA's two file stores are this skeleton over their in-memory stores:
//! [`FileTraceStore`](crate::observability::FileTraceStore) and
//! [`FileEvalStore`](crate::eval::FileEvalStore).

use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use serde_json::Value;

use crate::durable_log::{
    DiagnosticCallback, DurableLog, FileDiagnostic, FileStoreError, FileStoreErrorCode, Format,
    Operation, ReplayRefusal,
};

/// What a file store's operation refused: the in-memory store's refusal of the input (nothing
/// written), or the file's failure (OMA's `FileTraceStoreError`, `FileEvalStoreError`).
/// [`FileTraceStoreError`](crate::observability::FileTraceStoreError) and
/// [`FileEvalStoreError`](crate::eval::FileEvalStoreError) are it for each store's refusal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileStoreOpError<E> {
    /// The input was refused, as the in-memory store refuses it.
    Store(E),
    /// The file failed, or the store is closed.
    File(FileStoreError),
}

impl<E: std::fmt::Display> std::fmt::Display for FileStoreOpError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileStoreOpError::Store(e) => e.fmt(f),
            FileStoreOpError::File(e) => e.fmt(f),
        }
    }
}

impl<E: std::fmt::Debug + std::fmt::Display> std::error::Error for FileStoreOpError<E> {}

/// An in-memory store's refusal of input (what [`FileStoreOpError::Store`] holds): the trace
/// store's and the evaluation store's errors.
pub trait StoreRefusal {}

impl<E: StoreRefusal> From<E> for FileStoreOpError<E> {
    fn from(e: E) -> Self {
        FileStoreOpError::Store(e)
    }
}

impl<E> From<FileStoreError> for FileStoreOpError<E> {
    fn from(e: FileStoreError) -> Self {
        FileStoreOpError::File(e)
    }
}

/// An in-memory store a file keeps: how a committed batch of the file goes back into it.
pub(crate) trait Replay {
    /// The key naming each item of a deletion's payloads (`runId`, `recordId`).
    const DELETED_KEY: &'static str;

    /// Whether it holds nothing (a file store opens only into an empty store).
    fn is_empty(&self) -> bool;

    /// Empties it, before the file is replayed again.
    fn reset(&self);

    /// Takes an append batch read back from the file.
    fn replay_append(&self, payloads: &[Value]) -> Result<(), ReplayRefusal>;

    /// Takes a delete batch read back from the file: the ids it names.
    fn replay_delete(&self, ids: &[String]);
}

/// The replay of `memory`, in the form the log reads its batches into.
fn replay<M: Replay>(
    memory: &M,
) -> impl FnMut(Operation, Vec<Value>) -> Result<(), ReplayRefusal> + '_ {
    move |operation, payloads| match operation {
        Operation::Append => memory.replay_append(&payloads),
        Operation::Delete => {
            let mut ids = Vec::with_capacity(payloads.len());
            for payload in &payloads {
                match payload[M::DELETED_KEY].as_str() {
                    Some(id) if !id.is_empty() && payload.is_object() => ids.push(id.to_owned()),
                    _ => return Err(ReplayRefusal::Invalid),
                }
            }
            memory.replay_delete(&ids);
            Ok(())
        }
    }
}

/// An in-memory store and its durable log, under one lock (see the module).
pub(crate) struct DurableStore<M> {
    memory: M,
    log: Mutex<DurableLog>,
    format: &'static Format,
}

impl<M: Replay> DurableStore<M> {
    /// Opens the file at `path` (creating it, mode 0600, with its directory), replaying its
    /// committed batches into `memory`, which must be empty, and cutting off an incomplete tail.
    pub(crate) fn open(
        path: &Path,
        format: &'static Format,
        memory: M,
        on_diagnostic: Option<DiagnosticCallback>,
    ) -> Result<Self, FileStoreError> {
        let mut log = DurableLog::new(path, format, on_diagnostic)?;
        if !memory.is_empty() {
            return Err(log.error(
                FileStoreErrorCode::InvalidArgument,
                "the in-memory store a file store opens into must be empty".into(),
                "open",
                None,
                None,
            ));
        }
        log.open(&mut replay(&memory))?;
        Ok(DurableStore {
            memory,
            log: Mutex::new(log),
            format,
        })
    }

    /// The in-memory store.
    pub(crate) fn memory(&self) -> &M {
        &self.memory
    }

    fn lock(&self) -> MutexGuard<'_, DurableLog> {
        // The log's state changes only after its file operation returned.
        self.log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The log, locked, once it is usable (not closed, not failed).
    pub(crate) fn usable(&self) -> Result<MutexGuard<'_, DurableLog>, FileStoreError> {
        let log = self.lock();
        log.check_usable()?;
        Ok(log)
    }

    /// Whether the log is usable, without keeping it locked.
    pub(crate) fn check(&self) -> Result<(), FileStoreError> {
        self.lock().check_usable()
    }

    /// Writes a change to the file, or when that fails replays the file again into the memory
    /// store (so it holds what the file holds) and returns the failure.
    pub(crate) fn persist(
        &self,
        log: &mut DurableLog,
        operation: Operation,
        payloads: &[Value],
    ) -> Result<(), FileStoreError> {
        let Err(failure) = log.write(operation, payloads) else {
            return Ok(());
        };
        if !log.is_failed() {
            self.memory.reset();
            if log.read(&mut replay(&self.memory), false).is_err() {
                log.fail();
                return Err(log.error(
                    FileStoreErrorCode::RecoveryRequired,
                    format!(
                        "{} could not rebuild state after a failed mutation.",
                        self.format.label
                    ),
                    "rollback",
                    None,
                    None,
                ));
            }
        }
        Err(failure)
    }

    /// Writes the deletion of `ids` (one batch naming each by [`Replay::DELETED_KEY`]).
    pub(crate) fn persist_deletion<'a>(
        &self,
        log: &mut DurableLog,
        ids: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), FileStoreError> {
        let payloads: Vec<Value> = ids
            .into_iter()
            .map(|id| serde_json::json!({ M::DELETED_KEY: id }))
            .collect();
        self.persist(log, Operation::Delete, &payloads)
    }

    /// The store's file (absolute).
    pub(crate) fn file_path(&self) -> std::path::PathBuf {
        self.lock().path().to_path_buf()
    }

    /// The temporary file compaction writes beside it.
    pub(crate) fn compaction_temp_path(&self) -> std::path::PathBuf {
        self.lock().temp_path().to_path_buf()
    }

    /// Whether the store was closed.
    pub(crate) fn is_closed(&self) -> bool {
        self.lock().is_closed()
    }

    /// What opening the file reported.
    pub(crate) fn diagnostics(&self) -> Vec<FileDiagnostic> {
        self.lock().diagnostics().to_vec()
    }

    /// fsyncs every write that completed before the call.
    pub(crate) fn flush(&self) -> Result<(), FileStoreError> {
        self.usable()?.sync("flush")
    }

    /// fsyncs and refuses later operations (`CLOSED`); closing again does nothing.
    pub(crate) fn close(&self) -> Result<(), FileStoreError> {
        self.lock().close()
    }
}

/// The accessors every file store has, over its [`DurableStore`] field `durable`: the file's
/// path and compaction file, whether it is closed, what opening reported, `flush` and `close`.
macro_rules! durable_store_accessors {
    () => {
        /// The store's file (absolute).
        pub fn file_path(&self) -> std::path::PathBuf {
            self.durable.file_path()
        }

        /// The temporary file compaction writes beside it.
        pub fn compaction_temp_path(&self) -> std::path::PathBuf {
            self.durable.compaction_temp_path()
        }

        /// Whether [`close`](Self::close) was called.
        pub fn is_closed(&self) -> bool {
            self.durable.is_closed()
        }

        /// What opening the file reported.
        pub fn diagnostics(&self) -> Vec<$crate::durable_log::FileDiagnostic> {
            self.durable.diagnostics()
        }

        /// fsyncs every write that completed before the call.
        pub fn flush(&self) -> Result<(), $crate::durable_log::FileStoreError> {
            self.durable.flush()
        }

        /// fsyncs and refuses later operations (`CLOSED`); closing again does nothing.
        pub fn close(&self) -> Result<(), $crate::durable_log::FileStoreError> {
            self.durable.close()
        }
    };
}

pub(crate) use durable_store_accessors;
