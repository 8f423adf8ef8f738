//! OMA's `FileEvalStore`: the [`InMemoryEvalStore`] kept in a durable NDJSON file (format
//! `oma.file_eval_store` 1, the file the JavaScript and Python packages write), for one
//! process at a time. Queries are the in-memory store's; every change is written to the file
//! (one batch, see `crate::durable_log`) before the call returns, and opening replays it. A
//! deletion is written as the record ids it removed.

use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use serde_json::Value;

use super::store::{
    EvalAppendResult, EvalDeleteResult, EvalPage, EvalStoreError, EvalStoreErrorCode,
    InMemoryEvalStore,
};
use crate::durable_log::{
    DiagnosticCallback, DurableLog, FileDiagnostic, FileStoreError, FileStoreErrorCode, Format,
    Operation, ReplayRefusal,
};

/// The file's format name.
pub const FILE_EVAL_STORE_FORMAT: &str = "oma.file_eval_store";
/// The file's format version.
pub const FILE_EVAL_STORE_FORMAT_VERSION: u64 = 1;

static FORMAT: Format = Format {
    name: FILE_EVAL_STORE_FORMAT,
    schema_key: "evalSchemaMajor",
    schema_major: super::store::EVAL_STORE_SCHEMA_MAJOR,
    label: "FileEvalStore",
    unsupported_schema_code: "UNSUPPORTED_EVAL_SCHEMA",
    schema_words: "evaluation schema",
};

/// What a [`FileEvalStore`] operation refused: the store's own refusal of the input (nothing
/// written) or the file's failure (OMA's `FileEvalStoreError`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileEvalStoreError {
    /// The input was refused, as [`InMemoryEvalStore`] refuses it.
    Store(EvalStoreError),
    /// The file failed, or the store is closed.
    File(FileStoreError),
}

impl std::fmt::Display for FileEvalStoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileEvalStoreError::Store(e) => e.fmt(f),
            FileEvalStoreError::File(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for FileEvalStoreError {}

impl From<EvalStoreError> for FileEvalStoreError {
    fn from(e: EvalStoreError) -> Self {
        FileEvalStoreError::Store(e)
    }
}

impl From<FileStoreError> for FileEvalStoreError {
    fn from(e: FileStoreError) -> Self {
        FileEvalStoreError::File(e)
    }
}

/// An evaluation store in a file. Open it with [`open`](Self::open) over an empty
/// [`InMemoryEvalStore`] (its capacity and retention clock are the file store's). Its methods
/// are the in-memory store's, each change written to the file before it returns; a write that
/// fails is cut back and the store replays the file again, so it holds what the file holds.
/// Thread-safe: changes are made and written in one order under one lock.
pub struct FileEvalStore {
    memory: InMemoryEvalStore,
    log: Mutex<DurableLog>,
}

impl std::fmt::Debug for FileEvalStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileEvalStore").finish_non_exhaustive()
    }
}

fn replay(
    memory: &InMemoryEvalStore,
) -> impl FnMut(Operation, Vec<Value>) -> Result<(), ReplayRefusal> + '_ {
    move |operation, payloads| match operation {
        Operation::Append => match memory.append(&payloads) {
            Ok(_) => Ok(()),
            Err(e) if e.code == EvalStoreErrorCode::UnsupportedSchemaVersion => {
                Err(ReplayRefusal::SchemaMajor)
            }
            Err(_) => Err(ReplayRefusal::Invalid),
        },
        Operation::Delete => {
            let mut ids = Vec::new();
            for payload in &payloads {
                match payload["recordId"].as_str() {
                    Some(id) if !id.is_empty() && payload.is_object() => ids.push(id.to_owned()),
                    _ => return Err(ReplayRefusal::Invalid),
                }
            }
            memory.delete_record_ids(&ids);
            Ok(())
        }
    }
}

impl FileEvalStore {
    /// Opens the store at `path` (creating it, mode 0600, with its directory), replaying its
    /// committed batches into `memory` and cutting off an incomplete tail.
    pub fn open(
        path: impl AsRef<Path>,
        memory: InMemoryEvalStore,
    ) -> Result<FileEvalStore, FileStoreError> {
        Self::open_inner(path.as_ref(), memory, None)
    }

    /// [`open`](Self::open), telling `on_diagnostic` of what opening the file reports (a
    /// trailing partial line, an incomplete batch, a stale compaction file); a panic in it is
    /// contained.
    pub fn open_with_diagnostics(
        path: impl AsRef<Path>,
        memory: InMemoryEvalStore,
        on_diagnostic: impl Fn(&FileDiagnostic) + Send + Sync + 'static,
    ) -> Result<FileEvalStore, FileStoreError> {
        Self::open_inner(path.as_ref(), memory, Some(Box::new(on_diagnostic)))
    }

    fn open_inner(
        path: &Path,
        memory: InMemoryEvalStore,
        on_diagnostic: Option<DiagnosticCallback>,
    ) -> Result<FileEvalStore, FileStoreError> {
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
        Ok(FileEvalStore {
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

    /// Writes a change to the file, or when that fails replays the file again into the memory
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
                    "FileEvalStore could not rebuild state after a failed mutation.".into(),
                    "rollback",
                    None,
                    None,
                ));
            }
        }
        Err(failure)
    }

    /// [`InMemoryEvalStore::append`], written as one batch of all of `records`.
    pub fn append(&self, records: &[Value]) -> Result<EvalAppendResult, FileEvalStoreError> {
        let mut log = self.usable()?;
        let result = self.memory.append(records)?;
        if !records.is_empty() {
            self.persist(&mut log, Operation::Append, records)?;
        }
        Ok(result)
    }

    /// [`InMemoryEvalStore::query`].
    pub fn query(&self, query: &Value) -> Result<EvalPage, FileEvalStoreError> {
        let _log = self.usable()?;
        Ok(self.memory.query(query)?)
    }

    /// [`InMemoryEvalStore::records`].
    pub fn records(&self) -> Result<Vec<Value>, FileEvalStoreError> {
        let _log = self.usable()?;
        Ok(self.memory.records())
    }

    /// Runs `remove` on the memory store and writes the records it removed as one delete batch.
    fn deleting(
        &self,
        remove: impl FnOnce(&InMemoryEvalStore) -> Result<EvalDeleteResult, EvalStoreError>,
    ) -> Result<EvalDeleteResult, FileEvalStoreError> {
        let mut log = self.usable()?;
        let before = self.memory.record_ids();
        let result = remove(&self.memory)?;
        if result.records_deleted > 0 {
            let remaining = self.memory.record_id_set();
            let payloads: Vec<Value> = before
                .into_iter()
                .filter(|id| !remaining.contains(id))
                .map(|id| serde_json::json!({ "recordId": id }))
                .collect();
            self.persist(&mut log, Operation::Delete, &payloads)?;
        }
        Ok(result)
    }

    /// [`InMemoryEvalStore::delete`], written as one delete batch when records went.
    pub fn delete(&self, query: &Value) -> Result<EvalDeleteResult, FileEvalStoreError> {
        self.deleting(|memory| memory.delete(query))
    }

    /// [`InMemoryEvalStore::apply_retention`], written as one delete batch when records went.
    pub fn apply_retention(&self, policy: &Value) -> Result<EvalDeleteResult, FileEvalStoreError> {
        self.deleting(|memory| memory.apply_retention(policy))
    }

    /// fsyncs every write that completed before the call.
    pub fn flush(&self) -> Result<(), FileStoreError> {
        self.usable()?.sync("flush")
    }

    /// Rewrites the file with only the live records, through a temporary file beside it and
    /// a rename: the records written and the file's size in bytes.
    pub fn compact(&self) -> Result<(u64, u64), FileStoreError> {
        let mut log = self.usable()?;
        let records = self.memory.records();
        log.compact(&records)
    }

    /// fsyncs and refuses later operations (`CLOSED`); closing again does nothing.
    pub fn close(&self) -> Result<(), FileStoreError> {
        self.lock().close()
    }
}

impl super::EvalRecordStore for FileEvalStore {
    fn append(&self, records: &[Value]) -> Result<(), String> {
        FileEvalStore::append(self, records)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}
