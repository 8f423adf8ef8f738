//! OMA's `FileTraceStore`: the [`InMemoryTraceStore`] kept in a durable NDJSON file (format
//! `oma.file_trace_store` 1, the file the JavaScript and Python packages write), for one
//! process at a time. Queries are the in-memory store's; every change is written to the file
//! (one batch, see `crate::durable_log`) before the call returns, and opening replays it.

use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use serde_json::Value;

use super::store::{
    AppendResult, DeleteResult, InMemoryTraceStore, RetentionPolicy, RunPage, TraceQuery,
    TraceStoreError, TraceStoreErrorCode,
};
use crate::durable_log::{
    DiagnosticCallback, DurableLog, FileDiagnostic, FileStoreError, FileStoreErrorCode, Format,
    Operation, ReplayRefusal,
};

/// The file's format name.
pub const FILE_TRACE_STORE_FORMAT: &str = "oma.file_trace_store";
/// The file's format version.
pub const FILE_TRACE_STORE_FORMAT_VERSION: u64 = 1;

static FORMAT: Format = Format {
    name: FILE_TRACE_STORE_FORMAT,
    schema_key: "traceSchemaMajor",
    schema_major: super::store::TRACE_STORE_SCHEMA_MAJOR,
    label: "FileTraceStore",
    unsupported_schema_code: "UNSUPPORTED_TRACE_SCHEMA",
    schema_words: "trace schema",
};

/// What a [`FileTraceStore`] operation refused: the store's own refusal of the input (nothing
/// written) or the file's failure (OMA's `FileTraceStoreError`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileTraceStoreError {
    /// The input was refused, as [`InMemoryTraceStore`] refuses it.
    Store(TraceStoreError),
    /// The file failed, or the store is closed.
    File(FileStoreError),
}

impl std::fmt::Display for FileTraceStoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileTraceStoreError::Store(e) => e.fmt(f),
            FileTraceStoreError::File(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for FileTraceStoreError {}

impl From<TraceStoreError> for FileTraceStoreError {
    fn from(e: TraceStoreError) -> Self {
        FileTraceStoreError::Store(e)
    }
}

impl From<FileStoreError> for FileTraceStoreError {
    fn from(e: FileStoreError) -> Self {
        FileTraceStoreError::File(e)
    }
}

/// A trace store in a file. Open it with [`open`](Self::open) over an empty
/// [`InMemoryTraceStore`] (its codec, clock and store diagnostics are the file store's). Its
/// methods are the in-memory store's, each change written to the file before it returns; a
/// write that fails is cut back and the store replays the file again, so it holds what the
/// file holds. Thread-safe: changes are made and written in one order under one lock.
pub struct FileTraceStore {
    memory: InMemoryTraceStore,
    log: Mutex<DurableLog>,
}

impl std::fmt::Debug for FileTraceStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileTraceStore").finish_non_exhaustive()
    }
}

fn replay(
    memory: &InMemoryTraceStore,
) -> impl FnMut(Operation, Vec<Value>) -> Result<(), ReplayRefusal> + '_ {
    move |operation, payloads| match operation {
        Operation::Append => match memory.append(&payloads) {
            Ok(_) => Ok(()),
            Err(e) if e.code == TraceStoreErrorCode::UnsupportedSchemaVersion => {
                Err(ReplayRefusal::SchemaMajor)
            }
            Err(_) => Err(ReplayRefusal::Invalid),
        },
        Operation::Delete => {
            let mut ids = Vec::new();
            for payload in &payloads {
                match payload["runId"].as_str() {
                    Some(id) if !id.is_empty() && payload.is_object() => ids.push(id.to_owned()),
                    _ => return Err(ReplayRefusal::Invalid),
                }
            }
            memory.delete_runs(&ids);
            Ok(())
        }
    }
}

impl FileTraceStore {
    /// Opens the store at `path` (creating it, mode 0600, with its directory), replaying its
    /// committed batches into `memory` and cutting off an incomplete tail.
    pub fn open(
        path: impl AsRef<Path>,
        memory: InMemoryTraceStore,
    ) -> Result<FileTraceStore, FileStoreError> {
        Self::open_inner(path.as_ref(), memory, None)
    }

    /// [`open`](Self::open), telling `on_diagnostic` of what opening the file reports (a
    /// trailing partial line, an incomplete batch, a stale compaction file); a panic in it is
    /// contained.
    pub fn open_with_diagnostics(
        path: impl AsRef<Path>,
        memory: InMemoryTraceStore,
        on_diagnostic: impl Fn(&FileDiagnostic) + Send + Sync + 'static,
    ) -> Result<FileTraceStore, FileStoreError> {
        Self::open_inner(path.as_ref(), memory, Some(Box::new(on_diagnostic)))
    }

    fn open_inner(
        path: &Path,
        memory: InMemoryTraceStore,
        on_diagnostic: Option<DiagnosticCallback>,
    ) -> Result<FileTraceStore, FileStoreError> {
        let mut log = DurableLog::new(path, &FORMAT, on_diagnostic)?;
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
        Ok(FileTraceStore {
            memory,
            log: Mutex::new(log),
        })
    }

    fn lock(&self) -> MutexGuard<'_, DurableLog> {
        // The log's state changes only after its file operation returned.
        self.log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn usable(&self) -> Result<MutexGuard<'_, DurableLog>, FileStoreError> {
        let log = self.lock();
        log.check_usable()?;
        Ok(log)
    }

    fn check(&self) -> Result<(), FileStoreError> {
        self.lock().check_usable()
    }

    /// The store's file (absolute).
    pub fn file_path(&self) -> std::path::PathBuf {
        self.lock().path().to_path_buf()
    }

    /// The temporary file compaction writes beside it.
    pub fn compaction_temp_path(&self) -> std::path::PathBuf {
        self.lock().temp_path().to_path_buf()
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.lock().is_closed()
    }

    /// What opening the file reported.
    pub fn diagnostics(&self) -> Vec<FileDiagnostic> {
        self.lock().diagnostics().to_vec()
    }

    /// Writes `change` to the file, or when that fails replays the file again into the memory
    /// store (so it holds what the file holds) and returns the failure.
    fn persist(
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
                    "FileTraceStore could not rebuild state after a failed mutation.".into(),
                    "rollback",
                    None,
                    None,
                ));
            }
        }
        Err(failure)
    }

    /// [`InMemoryTraceStore::append`], written as one batch of all of `records`.
    pub fn append(&self, records: &[Value]) -> Result<AppendResult, FileTraceStoreError> {
        let mut log = self.usable()?;
        let result = self.memory.append(records)?;
        if !records.is_empty() {
            self.persist(&mut log, Operation::Append, records)?;
        }
        Ok(result)
    }

    /// [`InMemoryTraceStore::get_run`].
    pub async fn get_run(
        &self,
        run_id: &str,
        include_records: bool,
    ) -> Result<Option<serde_json::Map<String, Value>>, FileTraceStoreError> {
        self.check()?;
        Ok(self.memory.get_run(run_id, include_records).await?)
    }

    /// [`InMemoryTraceStore::query_runs`].
    pub async fn query_runs(&self, query: &TraceQuery) -> Result<RunPage, FileTraceStoreError> {
        self.check()?;
        Ok(self.memory.query_runs(query).await?)
    }

    /// [`InMemoryTraceStore::records`].
    pub async fn records(&self) -> Result<Vec<Value>, FileTraceStoreError> {
        self.check()?;
        Ok(self.memory.records().await?)
    }

    fn delete_ids(&self, ids: &[String]) -> Result<DeleteResult, FileTraceStoreError> {
        let mut log = self.usable()?;
        let result = self.memory.delete_runs(ids);
        if !result.run_ids.is_empty() {
            let payloads: Vec<Value> = result
                .run_ids
                .iter()
                .map(|id| serde_json::json!({ "runId": id }))
                .collect();
            self.persist(&mut log, Operation::Delete, &payloads)?;
        }
        Ok(result)
    }

    /// [`InMemoryTraceStore::delete_run`], written as a delete batch when a run went.
    pub fn delete_run(&self, run_id: &str) -> Result<DeleteResult, FileTraceStoreError> {
        self.check()?;
        if run_id.is_empty() {
            // The in-memory store's refusal of an empty id, with its message.
            self.memory.delete_run(run_id)?;
        }
        self.delete_ids(&[run_id.to_owned()])
    }

    /// [`InMemoryTraceStore::delete`], written as one delete batch.
    pub async fn delete(&self, query: &TraceQuery) -> Result<DeleteResult, FileTraceStoreError> {
        self.check()?;
        let ids = self.memory.doomed_by_query(query).await?;
        self.delete_ids(&ids)
    }

    /// [`InMemoryTraceStore::apply_retention`], written as one delete batch.
    pub async fn apply_retention(
        &self,
        policy: &RetentionPolicy,
    ) -> Result<DeleteResult, FileTraceStoreError> {
        self.check()?;
        let ids = self.memory.doomed_by_policy(policy).await?;
        self.delete_ids(&ids)
    }

    /// fsyncs every write that completed before the call.
    pub fn flush(&self) -> Result<(), FileStoreError> {
        self.usable()?.sync("flush")
    }

    /// Rewrites the file with only the live records, through a temporary file beside it and
    /// a rename: the records written and the file's size in bytes.
    pub async fn compact(&self) -> Result<(u64, u64), FileTraceStoreError> {
        loop {
            let revision = {
                self.check()?;
                self.memory.revision()
            };
            let records = self.memory.records().await?;
            let mut log = self.usable()?;
            // A change made while the records were read would be lost: read them again.
            if self.memory.revision() == revision {
                return Ok(log.compact(&records)?);
            }
        }
    }

    /// fsyncs and refuses later operations (`CLOSED`); closing again does nothing.
    pub fn close(&self) -> Result<(), FileStoreError> {
        self.lock().close()
    }
}
