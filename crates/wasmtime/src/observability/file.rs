//! OMA's `FileTraceStore`: the [`InMemoryTraceStore`] kept in a durable NDJSON file (format
//! `oma.file_trace_store` 1, the file the JavaScript and Python packages write), for one
//! process at a time. Queries are the in-memory store's; every change is written to the file
//! (one batch, see `crate::durable_log`) before the call returns, and opening replays it.

use std::path::Path;

use serde_json::Value;

use super::store::{
    AppendResult, DeleteResult, InMemoryTraceStore, RetentionPolicy, RunPage, TraceQuery,
    TraceStoreError, TraceStoreErrorCode,
};
use crate::durable_log::{
    DiagnosticCallback, FileDiagnostic, FileStoreError, Format, Operation, ReplayRefusal,
};
use crate::durable_store::{
    durable_store_accessors, DurableStore, FileStoreOpError, Replay, StoreRefusal,
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
/// written, [`FileStoreOpError::Store`] with the [`TraceStoreError`]) or the file's failure
/// (OMA's `FileTraceStoreError`, [`FileStoreOpError::File`]).
pub type FileTraceStoreError = FileStoreOpError<TraceStoreError>;

impl StoreRefusal for TraceStoreError {}

/// A trace store in a file. Open it with [`open`](Self::open) over an empty
/// [`InMemoryTraceStore`] (its codec, clock and store diagnostics are the file store's). Its
/// methods are the in-memory store's, each change written to the file before it returns; a
/// write that fails is cut back and the store replays the file again, so it holds what the
/// file holds. [`TraceStoreExporter::for_file`](super::TraceStoreExporter::for_file) fills it
/// from a batching sink. Thread-safe: changes are made and written in one order under one lock.
pub struct FileTraceStore {
    durable: DurableStore<InMemoryTraceStore>,
}

impl std::fmt::Debug for FileTraceStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileTraceStore").finish_non_exhaustive()
    }
}

impl Replay for InMemoryTraceStore {
    const DELETED_KEY: &'static str = "runId";

    fn is_empty(&self) -> bool {
        InMemoryTraceStore::is_empty(self)
    }

    fn reset(&self) {
        InMemoryTraceStore::reset(self)
    }

    fn replay_append(&self, payloads: &[Value]) -> Result<(), ReplayRefusal> {
        match self.append(payloads) {
            Ok(_) => Ok(()),
            Err(e) if e.code == TraceStoreErrorCode::UnsupportedSchemaVersion => {
                Err(ReplayRefusal::SchemaMajor)
            }
            Err(_) => Err(ReplayRefusal::Invalid),
        }
    }

    fn replay_delete(&self, ids: &[String]) {
        self.delete_runs(ids);
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
        Ok(FileTraceStore {
            durable: DurableStore::open(path, &FORMAT, memory, on_diagnostic)?,
        })
    }

    fn memory(&self) -> &InMemoryTraceStore {
        self.durable.memory()
    }

    durable_store_accessors!();

    /// [`InMemoryTraceStore::append`], written as one batch of all of `records`.
    pub fn append(&self, records: &[Value]) -> Result<AppendResult, FileTraceStoreError> {
        let mut log = self.durable.usable()?;
        let result = self.memory().append(records)?;
        if !records.is_empty() {
            self.durable.persist(&mut log, Operation::Append, records)?;
        }
        Ok(result)
    }

    /// [`InMemoryTraceStore::append_records`]: what a run hands a sink, written as
    /// [`append`](Self::append) writes it.
    pub fn append_records(
        &self,
        records: &[crate::bindings::oma::agent::exchange::TraceRecord],
    ) -> Result<AppendResult, FileTraceStoreError> {
        self.append(&super::store::records_json(records)?)
    }

    /// [`InMemoryTraceStore::get_run`].
    pub async fn get_run(
        &self,
        run_id: &str,
        include_records: bool,
    ) -> Result<Option<serde_json::Map<String, Value>>, FileTraceStoreError> {
        self.durable.check()?;
        Ok(self.memory().get_run(run_id, include_records).await?)
    }

    /// [`InMemoryTraceStore::query_runs`].
    pub async fn query_runs(&self, query: &TraceQuery) -> Result<RunPage, FileTraceStoreError> {
        self.durable.check()?;
        Ok(self.memory().query_runs(query).await?)
    }

    /// [`InMemoryTraceStore::records`].
    pub async fn records(&self) -> Result<Vec<Value>, FileTraceStoreError> {
        self.durable.check()?;
        Ok(self.memory().records().await?)
    }

    fn delete_ids(&self, ids: &[String]) -> Result<DeleteResult, FileTraceStoreError> {
        let mut log = self.durable.usable()?;
        let result = self.memory().delete_runs(ids);
        if !result.run_ids.is_empty() {
            self.durable
                .persist_deletion(&mut log, result.run_ids.iter().map(String::as_str))?;
        }
        Ok(result)
    }

    /// [`InMemoryTraceStore::delete_run`], written as a delete batch when a run went.
    pub fn delete_run(&self, run_id: &str) -> Result<DeleteResult, FileTraceStoreError> {
        self.durable.check()?;
        if run_id.is_empty() {
            // The in-memory store's refusal of an empty id, with its message.
            self.memory().delete_run(run_id)?;
        }
        self.delete_ids(&[run_id.to_owned()])
    }

    /// [`InMemoryTraceStore::delete`], written as one delete batch.
    pub async fn delete(&self, query: &TraceQuery) -> Result<DeleteResult, FileTraceStoreError> {
        self.durable.check()?;
        let ids = self.memory().doomed_by_query(query).await?;
        self.delete_ids(&ids)
    }

    /// [`InMemoryTraceStore::apply_retention`], written as one delete batch.
    pub async fn apply_retention(
        &self,
        policy: &RetentionPolicy,
    ) -> Result<DeleteResult, FileTraceStoreError> {
        self.durable.check()?;
        let ids = self.memory().doomed_by_policy(policy).await?;
        self.delete_ids(&ids)
    }

    /// Rewrites the file with only the live records, through a temporary file beside it and
    /// a rename: the records written and the file's size in bytes.
    pub async fn compact(&self) -> Result<(u64, u64), FileTraceStoreError> {
        loop {
            let revision = {
                self.durable.check()?;
                self.memory().revision()
            };
            let records = self.memory().records().await?;
            let mut log = self.durable.usable()?;
            // A change made while the records were read would be lost: read them again.
            if self.memory().revision() == revision {
                return Ok(log.compact(&records)?);
            }
        }
    }
}
