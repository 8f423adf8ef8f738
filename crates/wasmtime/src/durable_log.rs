//! The durable file under OMA's file stores (its `FileTraceStore` and `FileEvalStore`): an
//! append-only NDJSON log for one process and one store instance at a time.
//!
//! The first line is a header naming the format, its version (1) and the schema major of what
//! the file holds. Every change (an append of items, a deletion by id) is one batch of lines: a
//! `batch_start` with the item count and the SHA-256 (hex) of the items (each item's JSON text
//! followed by a newline), a `batch_item` per item, and a `batch_commit` repeating the count and
//! the checksum. A batch is written with one `write` on a file opened for appending.
//!
//! Opening replays the committed batches in order. A final batch without its commit, or a last
//! line without its newline, is what an interrupted write leaves: it is reported as a warning
//! and cut off, so a change is replayed whole or not at all. Anything else that does not read
//! is corruption, refused with the line it is on. JSON is written as JavaScript writes it (keys
//! in their order, numbers as `JSON.stringify` writes them), so the checksums and the files are
//! those the JavaScript and Python packages write. A failed write is cut back to where it began;
//! compaction writes the live items to a temporary file beside the target and renames it over.
//! The file is created with mode 0600.

use std::fs::{File, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest, Sha256};

/// What kind of failure a [`FileStoreError`] is (OMA's codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileStoreErrorCode {
    /// `INVALID_PATH`: the path is empty or holds a NUL.
    InvalidPath,
    /// `INVALID_ARGUMENT`: what the store was opened with cannot be used.
    InvalidArgument,
    /// `OPEN_FAILED`: the file could not be inspected or created.
    OpenFailed,
    /// `STALE_COMPACTION_FILE`: a compaction's temporary file without the target.
    StaleCompactionFile,
    /// `READ_FAILED`: the file could not be read.
    ReadFailed,
    /// `CORRUPT_FILE`: a complete line or a committed batch that does not read.
    CorruptFile,
    /// `UNSUPPORTED_FILE_FORMAT`: a header of another format version.
    UnsupportedFileFormat,
    /// The store's code for a schema major it does not take (`UNSUPPORTED_TRACE_SCHEMA`).
    UnsupportedSchema(&'static str),
    /// `RECOVERY_FAILED`: an incomplete tail could not be cut off.
    RecoveryFailed,
    /// `WRITE_FAILED`: a change was not written (and was cut back).
    WriteFailed,
    /// `RECOVERY_REQUIRED`: a failed write could not be cut back; reopen the file.
    RecoveryRequired,
    /// `SYNC_FAILED`: an fsync failed.
    SyncFailed,
    /// `RENAME_FAILED`: compaction could not rename its file over the target.
    RenameFailed,
    /// `COMPACTION_FAILED`: compaction failed around the rename.
    CompactionFailed,
    /// `CLOSED`: the store is closed.
    Closed,
}

impl FileStoreErrorCode {
    /// The code as OMA spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            FileStoreErrorCode::InvalidPath => "INVALID_PATH",
            FileStoreErrorCode::InvalidArgument => "INVALID_ARGUMENT",
            FileStoreErrorCode::OpenFailed => "OPEN_FAILED",
            FileStoreErrorCode::StaleCompactionFile => "STALE_COMPACTION_FILE",
            FileStoreErrorCode::ReadFailed => "READ_FAILED",
            FileStoreErrorCode::CorruptFile => "CORRUPT_FILE",
            FileStoreErrorCode::UnsupportedFileFormat => "UNSUPPORTED_FILE_FORMAT",
            FileStoreErrorCode::UnsupportedSchema(code) => code,
            FileStoreErrorCode::RecoveryFailed => "RECOVERY_FAILED",
            FileStoreErrorCode::WriteFailed => "WRITE_FAILED",
            FileStoreErrorCode::RecoveryRequired => "RECOVERY_REQUIRED",
            FileStoreErrorCode::SyncFailed => "SYNC_FAILED",
            FileStoreErrorCode::RenameFailed => "RENAME_FAILED",
            FileStoreErrorCode::CompactionFailed => "COMPACTION_FAILED",
            FileStoreErrorCode::Closed => "CLOSED",
        }
    }
}

/// A file store's lifecycle or file-system failure (OMA's `FileTraceStoreError`): the code,
/// OMA's message, the operation, the file, the line when one is at fault and the kind of the
/// I/O error behind it. It never holds an item of the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileStoreError {
    /// What kind of failure.
    pub code: FileStoreErrorCode,
    /// OMA's message.
    pub message: String,
    /// Where it happened (`open`, `recover`, `recover.batch`, `append.write`, ...).
    pub operation: &'static str,
    /// The store's file (empty when the path itself was refused).
    pub path: PathBuf,
    /// The line at fault (1 for the header), when one is.
    pub line_number: Option<u64>,
    /// The I/O error behind it, when one is.
    pub cause: Option<io::ErrorKind>,
}

impl std::fmt::Display for FileStoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for FileStoreError {}

/// A warning a file store reports on opening (OMA's file diagnostics, severity `warning`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileDiagnostic {
    /// `trailing_partial_line`, `incomplete_batch`, `stale_compaction_file`,
    /// `directory_sync_unsupported`.
    pub code: &'static str,
    /// The line it is about, when one is.
    pub line_number: Option<u64>,
    /// OMA's message.
    pub message: &'static str,
}

impl FileDiagnostic {
    /// Always `warning`, as in OMA.
    pub fn severity(&self) -> &'static str {
        "warning"
    }
}

/// One kind of change a batch carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Operation {
    Append,
    Delete,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Append => "append",
            Operation::Delete => "delete",
        }
    }
}

/// Why a store refused a committed batch while the file was replayed.
pub(crate) enum ReplayRefusal {
    /// Items of a schema major the store does not take.
    SchemaMajor,
    /// Anything else.
    Invalid,
}

/// One store's file format: its name, the header's schema key and major, the name its
/// messages start with and its code for an unsupported schema.
pub(crate) struct Format {
    pub name: &'static str,
    pub schema_key: &'static str,
    pub schema_major: u64,
    pub label: &'static str,
    pub unsupported_schema_code: &'static str,
    pub schema_words: &'static str,
}

impl Format {
    fn header(&self) -> String {
        format!(
            "{{\"type\":\"file_header\",\"format\":{},\"formatVersion\":1,\"{}\":{}}}\n",
            Value::from(self.name),
            self.schema_key,
            self.schema_major
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LogState {
    Open,
    Closed,
    Failed,
}

pub(crate) type DiagnosticCallback = Box<dyn Fn(&FileDiagnostic) + Send + Sync>;

/// The file of one store (see the module). Not synchronized: its store calls it under a lock.
pub(crate) struct DurableLog {
    path: PathBuf,
    temp_path: PathBuf,
    format: &'static Format,
    state: LogState,
    diagnostics: Vec<FileDiagnostic>,
    on_diagnostic: Option<DiagnosticCallback>,
}

/// `value`'s JSON text as JavaScript's `JSON.stringify` writes it.
pub(crate) fn js_json(value: &Value, out: &mut String) {
    match value {
        Value::Number(n) if n.is_f64() => match n.as_f64() {
            Some(x) => out.push_str(&crate::number::js_number(x)),
            None => out.push_str("null"),
        },
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                js_json(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::from(key.as_str()).to_string());
                out.push(':');
                js_json(item, out);
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

fn js_text(value: &Value) -> String {
    let mut out = String::new();
    js_json(value, &mut out);
    out
}

/// The SHA-256 (hex) of each payload's JSON text and a newline.
pub(crate) fn checksum(payloads: &[Value]) -> String {
    let mut digest = Sha256::new();
    for payload in payloads {
        digest.update(js_text(payload).as_bytes());
        digest.update(b"\n");
    }
    digest
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A random version-4 UUID, for a batch's id.
fn batch_id() -> String {
    let mut bytes = [0u8; 16];
    for (i, chunk) in bytes.chunks_mut(8).enumerate() {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_usize(i);
        hasher.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        chunk.copy_from_slice(&hasher.finish().to_le_bytes());
    }
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// The lines of one batch, each ending in a newline.
pub(crate) fn batch_text(operation: Operation, payloads: &[Value], id: &str) -> String {
    let sha = checksum(payloads);
    let id_json = Value::from(id).to_string();
    let mut out = format!(
        "{{\"type\":\"batch_start\",\"formatVersion\":1,\"batchId\":{id_json},\"operation\":\"{}\",\"itemCount\":{},\"payloadSha256\":\"{sha}\"}}\n",
        operation.as_str(),
        payloads.len()
    );
    for (index, payload) in payloads.iter().enumerate() {
        out.push_str(&format!(
            "{{\"type\":\"batch_item\",\"batchId\":{id_json},\"index\":{index},\"payload\":"
        ));
        js_json(payload, &mut out);
        out.push_str("}\n");
    }
    out.push_str(&format!(
        "{{\"type\":\"batch_commit\",\"batchId\":{id_json},\"itemCount\":{},\"payloadSha256\":\"{sha}\"}}\n",
        payloads.len()
    ));
    out
}

fn whole(value: &Value) -> Option<u64> {
    value.as_u64().or_else(|| {
        value
            .as_f64()
            .filter(|x| x.fract() == 0.0 && *x >= 0.0 && *x < 9.0e15)
            .map(|x| x as u64)
    })
}

fn non_empty(value: &Value) -> bool {
    value.as_str().is_some_and(|s| !s.is_empty())
}

struct Pending {
    id: String,
    operation: Operation,
    count: u64,
    sha: String,
    payloads: Vec<Value>,
    line: u64,
}

impl DurableLog {
    /// The log of the file at `path` (checked and made absolute), not yet opened.
    pub(crate) fn new(
        path: &Path,
        format: &'static Format,
        on_diagnostic: Option<DiagnosticCallback>,
    ) -> Result<DurableLog, FileStoreError> {
        let text = path.as_os_str();
        if text.is_empty() || text.as_encoded_bytes().contains(&0) {
            return Err(FileStoreError {
                code: FileStoreErrorCode::InvalidPath,
                message: format!("{} path must be a non-empty filesystem path.", format.label),
                operation: "open",
                path: PathBuf::new(),
                line_number: None,
                cause: None,
            });
        }
        let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let mut temp = path.clone().into_os_string();
        temp.push(".compact.tmp");
        Ok(DurableLog {
            path,
            temp_path: PathBuf::from(temp),
            format,
            state: LogState::Open,
            diagnostics: Vec::new(),
            on_diagnostic,
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn temp_path(&self) -> &Path {
        &self.temp_path
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.state == LogState::Closed
    }

    pub(crate) fn diagnostics(&self) -> &[FileDiagnostic] {
        &self.diagnostics
    }

    pub(crate) fn error(
        &self,
        code: FileStoreErrorCode,
        message: String,
        operation: &'static str,
        cause: Option<&io::Error>,
        line_number: Option<u64>,
    ) -> FileStoreError {
        FileStoreError {
            code,
            message,
            operation,
            path: self.path.clone(),
            line_number,
            cause: cause.map(io::Error::kind),
        }
    }

    fn corruption(&self, message: &str, line: u64) -> FileStoreError {
        self.error(
            FileStoreErrorCode::CorruptFile,
            message.to_owned(),
            "recover",
            None,
            Some(line),
        )
    }

    fn diagnose(&mut self, code: &'static str, message: &'static str, line: Option<u64>) {
        let diagnostic = FileDiagnostic {
            code,
            line_number: line,
            message,
        };
        if let Some(callback) = &self.on_diagnostic {
            // Diagnostics never affect storage: a callback that panics changes nothing.
            let _ =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| callback(&diagnostic)));
        }
        self.diagnostics.push(diagnostic);
    }

    fn exists(&self, path: &Path) -> Result<bool, FileStoreError> {
        match std::fs::metadata(path) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(self.error(
                FileStoreErrorCode::OpenFailed,
                format!(
                    "{} could not inspect its filesystem path.",
                    self.format.label
                ),
                "open",
                Some(&e),
                None,
            )),
        }
    }

    /// Creates the file when it is missing, then replays it through `apply`, cutting off an
    /// incomplete tail.
    pub(crate) fn open(
        &mut self,
        apply: &mut dyn FnMut(Operation, Vec<Value>) -> Result<(), ReplayRefusal>,
    ) -> Result<(), FileStoreError> {
        let temp_exists = self.exists(&self.temp_path.clone())?;
        let target_exists = self.exists(&self.path.clone())?;
        if !target_exists && temp_exists {
            return Err(self.error(
                FileStoreErrorCode::StaleCompactionFile,
                "A compaction temp file exists without the target file; refusing to create an empty store.".into(),
                "open",
                None,
                None,
            ));
        }
        if !target_exists {
            self.create()?;
        }
        if temp_exists {
            self.diagnose(
                "stale_compaction_file",
                "A stale compaction temp file was found; the committed target file remains authoritative.",
                None,
            );
        }
        self.read(apply, true)
    }

    fn create(&mut self) -> Result<(), FileStoreError> {
        let failed = |log: &DurableLog, e: &io::Error| {
            log.error(
                FileStoreErrorCode::OpenFailed,
                format!("{} could not create its data file.", log.format.label),
                "open.create",
                Some(e),
                None,
            )
        };
        if let Some(parent) = self.path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| failed(self, &e))?;
        }
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = match options.open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(()),
            Err(e) => return Err(failed(self, &e)),
        };
        file.write_all(self.format.header().as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(|e| failed(self, &e))?;
        drop(file);
        self.sync_directory("open.create")
    }

    /// Replays the committed batches of the file through `apply`; with `repair`, cuts off an
    /// incomplete tail.
    pub(crate) fn read(
        &mut self,
        apply: &mut dyn FnMut(Operation, Vec<Value>) -> Result<(), ReplayRefusal>,
        repair: bool,
    ) -> Result<(), FileStoreError> {
        let label = self.format.label;
        let raw = std::fs::read(&self.path).map_err(|e| {
            self.error(
                FileStoreErrorCode::ReadFailed,
                format!("{label} could not read its data file."),
                "recover.read",
                Some(&e),
                None,
            )
        })?;
        let (mut offset, mut line_number, mut committed) = (0usize, 0u64, 0usize);
        let mut header = false;
        let mut pending: Option<Pending> = None;
        while offset < raw.len() {
            let Some(newline) = raw[offset..].iter().position(|b| *b == b'\n') else {
                self.diagnose(
                    "trailing_partial_line",
                    "A trailing partial NDJSON line was ignored and will be truncated.",
                    Some(line_number + 1),
                );
                break;
            };
            line_number += 1;
            let line = &raw[offset..offset + newline];
            let following = offset + newline + 1;
            if line.is_empty() {
                return Err(self.corruption(
                    &format!("{label} encountered an empty complete NDJSON line."),
                    line_number,
                ));
            }
            let value: Value = match serde_json::from_slice(line) {
                Ok(value @ Value::Object(_)) => value,
                _ => {
                    return Err(self.corruption(
                        &format!("{label} encountered an invalid complete NDJSON line."),
                        line_number,
                    ))
                }
            };
            if !header {
                self.check_header(&value, line_number)?;
                header = true;
                offset = following;
                committed = following;
                continue;
            }
            match value["type"].as_str() {
                Some("batch_start") => {
                    if pending.is_some() {
                        return Err(self.corruption(
                            "A new batch began before the prior batch committed.",
                            line_number,
                        ));
                    }
                    let operation = match value["operation"].as_str() {
                        Some("append") => Some(Operation::Append),
                        Some("delete") => Some(Operation::Delete),
                        _ => None,
                    };
                    let count = whole(&value["itemCount"]);
                    match (operation, count) {
                        (Some(operation), Some(count))
                            if whole(&value["formatVersion"]) == Some(1)
                                && non_empty(&value["batchId"])
                                && non_empty(&value["payloadSha256"]) =>
                        {
                            pending = Some(Pending {
                                id: value["batchId"].as_str().unwrap_or_default().to_owned(),
                                operation,
                                count,
                                sha: value["payloadSha256"]
                                    .as_str()
                                    .unwrap_or_default()
                                    .to_owned(),
                                payloads: Vec::new(),
                                line: line_number,
                            });
                        }
                        _ => {
                            return Err(self
                                .corruption("A batch_start envelope is malformed.", line_number))
                        }
                    }
                }
                Some("batch_item") => {
                    let Some(batch) = pending.as_mut() else {
                        return Err(self.corruption(
                            "A batch item appeared without a batch start.",
                            line_number,
                        ));
                    };
                    let Value::Object(mut item) = value else {
                        unreachable!("a line is an object")
                    };
                    let index = whole(&item["index"]).filter(|_| !item["index"].is_null());
                    let payload = item.remove("payload");
                    let (Some(index), Some(payload), true) =
                        (index, payload, non_empty(&item["batchId"]))
                    else {
                        return Err(
                            self.corruption("A batch_item envelope is malformed.", line_number)
                        );
                    };
                    if item["batchId"] != batch.id.as_str() || index != batch.payloads.len() as u64
                    {
                        return Err(self.corruption(
                            "A batch item has a mismatched id or non-contiguous index.",
                            line_number,
                        ));
                    }
                    if batch.payloads.len() as u64 >= batch.count {
                        return Err(self.corruption(
                            "A batch contains more items than declared.",
                            line_number,
                        ));
                    }
                    batch.payloads.push(payload);
                }
                Some("batch_commit") => {
                    let Some(batch) = pending.take() else {
                        return Err(self.corruption(
                            "A batch commit appeared without a batch start.",
                            line_number,
                        ));
                    };
                    let count = whole(&value["itemCount"]);
                    if !non_empty(&value["batchId"])
                        || count.is_none()
                        || !non_empty(&value["payloadSha256"])
                    {
                        return Err(
                            self.corruption("A batch_commit envelope is malformed.", line_number)
                        );
                    }
                    if value["batchId"] != batch.id.as_str()
                        || count != Some(batch.count)
                        || batch.payloads.len() as u64 != batch.count
                        || value["payloadSha256"] != batch.sha.as_str()
                        || checksum(&batch.payloads) != batch.sha
                    {
                        return Err(self.corruption(
                            "A committed batch failed its id, count, or checksum validation.",
                            line_number,
                        ));
                    }
                    match apply(batch.operation, batch.payloads) {
                        Ok(()) => {}
                        Err(ReplayRefusal::SchemaMajor) => {
                            return Err(self.error(
                                FileStoreErrorCode::UnsupportedSchema(
                                    self.format.unsupported_schema_code,
                                ),
                                format!(
                                    "A committed batch contains an unsupported {} major.",
                                    self.format.schema_words
                                ),
                                "recover.batch",
                                None,
                                Some(line_number),
                            ))
                        }
                        Err(ReplayRefusal::Invalid) => {
                            return Err(self.error(
                                FileStoreErrorCode::CorruptFile,
                                "A committed batch contains invalid data.".into(),
                                "recover.batch",
                                None,
                                Some(line_number),
                            ))
                        }
                    }
                    committed = following;
                }
                _ => {
                    return Err(self.corruption(
                        &format!("{label} encountered an unknown envelope line type."),
                        line_number,
                    ))
                }
            }
            offset = following;
        }
        if !header {
            return Err(self.error(
                FileStoreErrorCode::CorruptFile,
                format!("{label} has no complete version header."),
                "recover",
                None,
                None,
            ));
        }
        let partial = offset < raw.len();
        if let Some(batch) = &pending {
            let line = batch.line;
            self.diagnose(
                "incomplete_batch",
                "An uncommitted trailing batch was ignored and will be truncated.",
                Some(line),
            );
        }
        if (partial || pending.is_some()) && repair {
            self.truncate(committed as u64).map_err(|e| {
                self.error(
                    FileStoreErrorCode::RecoveryFailed,
                    format!("{label} could not truncate an incomplete tail during recovery."),
                    "recover.truncate",
                    Some(&e),
                    None,
                )
            })?;
        }
        Ok(())
    }

    fn check_header(&self, value: &Value, line: u64) -> Result<(), FileStoreError> {
        let format = self.format;
        if value["type"] != "file_header" || value["format"] != format.name {
            return Err(
                self.corruption(&format!("{} header format is invalid.", format.label), line)
            );
        }
        // `1.0` is 1, as JavaScript reads it.
        if whole(&value["formatVersion"]) != Some(1) {
            return Err(self.error(
                FileStoreErrorCode::UnsupportedFileFormat,
                format!("{} file format version is unsupported.", format.label),
                "recover.header",
                None,
                Some(line),
            ));
        }
        if whole(&value[format.schema_key]) != Some(format.schema_major) {
            return Err(self.error(
                FileStoreErrorCode::UnsupportedSchema(format.unsupported_schema_code),
                format!(
                    "{} {} major is unsupported.",
                    format.label, format.schema_words
                ),
                "recover.header",
                None,
                Some(line),
            ));
        }
        Ok(())
    }

    /// Refuses an operation on a closed log, or on one a failed write left unusable.
    pub(crate) fn check_usable(&self) -> Result<(), FileStoreError> {
        let label = self.format.label;
        match self.state {
            LogState::Open => Ok(()),
            LogState::Failed => Err(self.error(
                FileStoreErrorCode::RecoveryRequired,
                format!("{label} requires reopen/recovery before further operations."),
                "operation",
                None,
                None,
            )),
            LogState::Closed => Err(self.error(
                FileStoreErrorCode::Closed,
                format!("{label} is closing or closed."),
                "operation",
                None,
                None,
            )),
        }
    }

    /// Marks the log unusable until the file is opened again.
    pub(crate) fn fail(&mut self) {
        self.state = LogState::Failed;
    }

    pub(crate) fn is_failed(&self) -> bool {
        self.state == LogState::Failed
    }

    /// Appends one batch with one write; a write that fails is cut back to where it began (or
    /// the log becomes unusable when even that fails).
    pub(crate) fn write(
        &mut self,
        operation: Operation,
        payloads: &[Value],
    ) -> Result<(), FileStoreError> {
        let label = self.format.label;
        let start = std::fs::metadata(&self.path)
            .map(|m| m.len())
            .map_err(|e| {
                self.error(
                    FileStoreErrorCode::WriteFailed,
                    format!("{label} could not inspect its data file before writing."),
                    "append.stat",
                    Some(&e),
                    None,
                )
            })?;
        let text = batch_text(operation, payloads, &batch_id());
        let written = OpenOptions::new()
            .append(true)
            .open(&self.path)
            .and_then(|mut file| file.write_all(text.as_bytes()));
        if let Err(e) = written {
            let failure = self.error(
                FileStoreErrorCode::WriteFailed,
                format!("{label} append did not complete; the mutation was not acknowledged."),
                "append.write",
                Some(&e),
                None,
            );
            if let Err(rollback) = self.truncate(start) {
                self.state = LogState::Failed;
                return Err(self.error(
                    FileStoreErrorCode::RecoveryRequired,
                    format!("{label} could not roll back a failed append; reopen is required."),
                    "append.rollback",
                    Some(&rollback),
                    None,
                ));
            }
            return Err(failure);
        }
        Ok(())
    }

    fn truncate(&self, length: u64) -> io::Result<()> {
        let file = OpenOptions::new().write(true).open(&self.path)?;
        file.set_len(length)?;
        file.sync_all()
    }

    /// fsyncs the file.
    pub(crate) fn sync(&self, operation: &'static str) -> Result<(), FileStoreError> {
        File::open(&self.path)
            .and_then(|file| file.sync_all())
            .map_err(|e| {
                self.error(
                    FileStoreErrorCode::SyncFailed,
                    format!("{} could not fsync its data file.", self.format.label),
                    operation,
                    Some(&e),
                    None,
                )
            })
    }

    fn sync_directory(&mut self, operation: &'static str) -> Result<(), FileStoreError> {
        let directory = self.path.parent().unwrap_or(Path::new("."));
        match File::open(directory).and_then(|dir| dir.sync_all()) {
            Ok(()) => Ok(()),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::InvalidInput
                        | io::ErrorKind::Unsupported
                        | io::ErrorKind::IsADirectory
                        | io::ErrorKind::PermissionDenied
                ) =>
            {
                self.diagnose(
                    "directory_sync_unsupported",
                    "The platform/filesystem does not support directory fsync; rename durability is best-effort.",
                    None,
                );
                Ok(())
            }
            Err(e) => Err(self.error(
                FileStoreErrorCode::SyncFailed,
                format!(
                    "{} could not fsync the parent directory after an atomic rename.",
                    self.format.label
                ),
                operation,
                Some(&e),
                None,
            )),
        }
    }

    /// Rewrites the file as one append batch of `payloads` through the temporary file and a
    /// rename; returns the records written and the file's new size.
    pub(crate) fn compact(&mut self, payloads: &[Value]) -> Result<(u64, u64), FileStoreError> {
        let label = self.format.label;
        let mut body = self.format.header();
        if !payloads.is_empty() {
            let id = format!("compact-{}", &checksum(payloads)[..24]);
            body.push_str(&batch_text(Operation::Append, payloads, &id));
        }
        let failed = |log: &DurableLog, e: &io::Error, renamed: bool| {
            log.error(
                FileStoreErrorCode::CompactionFailed,
                if renamed {
                    format!("{label} replaced the compacted file but could not confirm the final durability step.")
                } else {
                    format!("{label} compaction failed before replacing the committed target file.")
                },
                "compact",
                Some(e),
                None,
            )
        };
        let mut options = OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        options
            .open(&self.temp_path)
            .and_then(|mut file| {
                file.write_all(body.as_bytes())?;
                file.sync_all()
            })
            .map_err(|e| failed(self, &e, false))?;
        std::fs::rename(&self.temp_path, &self.path).map_err(|e| {
            self.error(
                FileStoreErrorCode::RenameFailed,
                format!("{label} compaction could not atomically replace the target; the original remains authoritative."),
                "compact.rename",
                Some(&e),
                None,
            )
        })?;
        self.sync_directory("compact")?;
        let size = std::fs::metadata(&self.path)
            .map(|m| m.len())
            .map_err(|e| failed(self, &e, true))?;
        Ok((payloads.len() as u64, size))
    }

    /// fsyncs and refuses later operations; closing a closed log does nothing.
    pub(crate) fn close(&mut self) -> Result<(), FileStoreError> {
        match self.state {
            LogState::Closed => Ok(()),
            LogState::Failed => {
                self.state = LogState::Closed;
                Err(self.error(
                    FileStoreErrorCode::RecoveryRequired,
                    format!(
                        "{} cannot close cleanly after an unrecoverable write failure.",
                        self.format.label
                    ),
                    "close",
                    None,
                    None,
                ))
            }
            LogState::Open => {
                let synced = self.sync("close");
                self.state = LogState::Closed;
                synced
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::checksum;
    use serde_json::json;

    #[test]
    fn whole_numbers_are_read_as_javascript_reads_them() {
        assert_eq!(super::whole(&json!(1.0)), Some(1));
        assert_eq!(super::whole(&json!(2)), Some(2));
        assert_eq!(super::whole(&json!(1.5)), None);
        assert_eq!(super::whole(&json!(-1)), None);
        assert_eq!(super::whole(&json!("1")), None);
    }

    #[test]
    fn the_checksum_is_that_of_the_delete_batch_in_the_fixture() {
        assert_eq!(
            checksum(&[json!({"runId": "run-2"})]),
            "0c446ba07bdc14a8d5337a636d05d0a30ab6218eaea66decfbcfa21664f88abf"
        );
    }
}
