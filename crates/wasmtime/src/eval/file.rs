//! OMA's `FileEvalStore`: the [`InMemoryEvalStore`] kept in a durable NDJSON file (format
//! `oma.file_eval_store` 1, the file the JavaScript and Python packages write), for one
//! process at a time. Queries are the in-memory store's; every change is written to the file
//! (one batch, see `crate::durable_log`) before the call returns, and opening replays it. A
//! deletion is written as the record ids it removed.

use std::path::Path;

use serde_json::Value;

use super::store::{
    EvalAppendResult, EvalDeleteResult, EvalPage, EvalStoreError, EvalStoreErrorCode,
    InMemoryEvalStore,
};
use crate::durable_log::{
    DiagnosticCallback, FileDiagnostic, FileStoreError, Format, Operation, ReplayRefusal,
};
use crate::durable_store::{
    durable_store_accessors, DurableStore, FileStoreOpError, Replay, StoreRefusal,
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
/// written, [`FileStoreOpError::Store`] with the [`EvalStoreError`]) or the file's failure
/// (OMA's `FileEvalStoreError`, [`FileStoreOpError::File`]).
pub type FileEvalStoreError = FileStoreOpError<EvalStoreError>;

impl StoreRefusal for EvalStoreError {}

/// An evaluation store in a file. Open it with [`open`](Self::open) over an empty
/// [`InMemoryEvalStore`] (its capacity and retention clock are the file store's). Its methods
/// are the in-memory store's, each change written to the file before it returns; a write that
/// fails is cut back and the store replays the file again, so it holds what the file holds.
/// Thread-safe: changes are made and written in one order under one lock.
pub struct FileEvalStore {
    durable: DurableStore<InMemoryEvalStore>,
}

impl std::fmt::Debug for FileEvalStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileEvalStore").finish_non_exhaustive()
    }
}

impl Replay for InMemoryEvalStore {
    const DELETED_KEY: &'static str = "recordId";

    fn is_empty(&self) -> bool {
        InMemoryEvalStore::is_empty(self)
    }

    fn reset(&self) {
        InMemoryEvalStore::reset(self)
    }

    fn replay_append(&self, payloads: &[Value]) -> Result<(), ReplayRefusal> {
        match self.append(payloads) {
            Ok(_) => Ok(()),
            Err(e) if e.code == EvalStoreErrorCode::UnsupportedSchemaVersion => {
                Err(ReplayRefusal::SchemaMajor)
            }
            Err(_) => Err(ReplayRefusal::Invalid),
        }
    }

    fn replay_delete(&self, ids: &[String]) {
        self.delete_record_ids(ids);
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
        Ok(FileEvalStore {
            durable: DurableStore::open(path, &FORMAT, memory, on_diagnostic)?,
        })
    }

    fn memory(&self) -> &InMemoryEvalStore {
        self.durable.memory()
    }

    durable_store_accessors!();

    /// [`InMemoryEvalStore::append`], written as one batch of all of `records`.
    pub fn append(&self, records: &[Value]) -> Result<EvalAppendResult, FileEvalStoreError> {
        let mut log = self.durable.usable()?;
        let result = self.memory().append(records)?;
        if !records.is_empty() {
            self.durable.persist(&mut log, Operation::Append, records)?;
        }
        Ok(result)
    }

    /// [`InMemoryEvalStore::query`].
    pub fn query(&self, query: &Value) -> Result<EvalPage, FileEvalStoreError> {
        let _log = self.durable.usable()?;
        Ok(self.memory().query(query)?)
    }

    /// [`InMemoryEvalStore::records`].
    pub fn records(&self) -> Result<Vec<Value>, FileEvalStoreError> {
        let _log = self.durable.usable()?;
        Ok(self.memory().records())
    }

    /// Runs `remove` on the memory store and writes the records it removed as one delete batch.
    fn deleting(
        &self,
        remove: impl FnOnce(&InMemoryEvalStore) -> Result<EvalDeleteResult, EvalStoreError>,
    ) -> Result<EvalDeleteResult, FileEvalStoreError> {
        let mut log = self.durable.usable()?;
        let before = self.memory().record_ids();
        let result = remove(self.memory())?;
        if result.records_deleted > 0 {
            let remaining = self.memory().record_id_set();
            let removed = before.iter().filter(|id| !remaining.contains(*id));
            self.durable
                .persist_deletion(&mut log, removed.map(String::as_str))?;
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

    /// Rewrites the file with only the live records, through a temporary file beside it and
    /// a rename: the records written and the file's size in bytes.
    pub fn compact(&self) -> Result<(u64, u64), FileStoreError> {
        let mut log = self.durable.usable()?;
        let records = self.memory().records();
        log.compact(&records)
    }
}

impl super::EvalRecordStore for FileEvalStore {
    fn append(&self, records: &[Value]) -> Result<(), String> {
        FileEvalStore::append(self, records)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}
