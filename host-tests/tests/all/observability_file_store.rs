//! OMA's file trace store of the Rust embedding (`oma_wasmtime::observability`'s
//! `FileTraceStore`) over the shared table `fixtures/observability/file-store.json`, the one the
//! JavaScript and Python packages run: every file beside it opened as it is (runs, records,
//! diagnostics, the size the file is cut to, or OMA's error with its line), and the file a store
//! writes, byte for byte but the batch ids. Every row applies to Rust: none is skipped. Then
//! reopening, compaction, retention, a closed store and a write that fails. Files are written
//! only under a temporary directory of each test, removed at its end.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use oma_host_tests::observability::{
    FileDiagnostic, FileStoreErrorCode, FileTraceStore, FileTraceStoreError, InMemoryTraceStore,
    RetentionPolicy, TraceQuery,
};
use oma_host_tests::{GuestOptions, Harness, Shared};
use serde_json::{json, Value};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/observability");

fn table() -> Value {
    serde_json::from_str(include_str!(
        "../../../fixtures/observability/file-store.json"
    ))
    .expect("the table")
}

fn records_table() -> Value {
    serde_json::from_str(include_str!("../../../fixtures/observability/records.json"))
        .expect("the records")
}

/// A fresh directory under the system's temporary directory, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let path = std::env::temp_dir().join(format!(
            "oma-file-store-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("a temporary directory");
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn memory() -> InMemoryTraceStore {
    InMemoryTraceStore::new(
        Harness::shared()
            .expect("the harness")
            .instantiate_with(GuestOptions::default())
            .await
            .expect("the guest"),
    )
}

fn diagnostic_json(d: &FileDiagnostic) -> Value {
    let mut out = json!({"code": d.code, "severity": d.severity()});
    if let Some(line) = d.line_number {
        out["lineNumber"] = json!(line);
    }
    out["message"] = json!(d.message);
    out
}

async fn run_ids(store: &FileTraceStore) -> Vec<Value> {
    let query = TraceQuery::from_json(&json!({"order": "started_asc"})).expect("a query");
    store
        .query_runs(&query)
        .await
        .expect("runs")
        .items
        .iter()
        .map(|s| s["runId"].clone())
        .collect()
}

/// Every `open` row: the file copied to a fresh path, opened, and read back.
#[tokio::test]
async fn every_file_of_the_table_opens_as_oma_opens_it() {
    let table = table();
    let rows = table["open"].as_array().expect("open rows");
    let mut ran = 0;
    for case in rows {
        let name = case["file"].as_str().expect("a file");
        let dir = TempDir::new();
        let path = dir.0.join("traces.ndjson");
        std::fs::copy(Path::new(FIXTURES).join("file-store").join(name), &path).expect(name);
        let heard: Arc<Mutex<Vec<Value>>> = Arc::default();
        let log = heard.clone();
        let opened = FileTraceStore::open_with_diagnostics(&path, memory().await, move |d| {
            log.lock().unwrap().push(diagnostic_json(d));
        });
        let expect = &case["expect"];
        match opened {
            Err(error) => {
                let mut got = json!({"code": error.code.as_str(), "message": error.message});
                if let Some(line) = error.line_number {
                    got["lineNumber"] = json!(line);
                }
                assert_eq!(got, expect["error"], "{name}");
            }
            Ok(store) => {
                assert!(expect.get("error").is_none(), "{name} opened");
                assert_eq!(json!(run_ids(&store).await), expect["runs"], "{name}");
                assert_eq!(
                    json!(store.records().await.expect(name).len()),
                    expect["records"],
                    "{name}"
                );
                assert_eq!(
                    json!(*heard.lock().unwrap()),
                    expect["diagnostics"],
                    "{name}"
                );
                let reported: Vec<Value> =
                    store.diagnostics().iter().map(diagnostic_json).collect();
                assert_eq!(json!(reported), expect["diagnostics"], "{name}");
                assert_eq!(
                    json!(std::fs::metadata(&path).expect(name).len()),
                    expect["sizeAfterOpen"],
                    "{name}"
                );
                store.close().expect(name);
            }
        }
        ran += 1;
    }
    // No row is left out for Rust: the table of rows that cannot apply is empty.
    let not_applicable: &[(&str, &str)] = &[];
    assert_eq!(ran + not_applicable.len(), rows.len());
}

/// Replaces each batch id by `b-1`, `b-2`, ... in order of first appearance.
fn number_batches(text: &str) -> String {
    let mut ids: Vec<String> = Vec::new();
    let marker = "\"batchId\":\"";
    let mut rest = text;
    while let Some(at) = rest.find(marker) {
        let tail = &rest[at + marker.len()..];
        let end = tail.find('"').expect("a closing quote");
        let id = tail[..end].to_owned();
        if !ids.contains(&id) {
            ids.push(id);
        }
        rest = &tail[end..];
    }
    let mut out = text.to_owned();
    for (i, id) in ids.iter().enumerate() {
        out = out.replace(id.as_str(), &format!("b-{}", i + 1));
    }
    out
}

fn named_records(names: &Value) -> Vec<Value> {
    let records = records_table();
    names
        .as_array()
        .expect("names")
        .iter()
        .map(|n| records["records"][n.as_str().expect("a name")].clone())
        .collect()
}

/// The `writes` row: the file a store writes is OMA's, byte for byte but the batch ids; and
/// it opens again to what was written.
#[tokio::test]
async fn a_store_writes_the_file_oma_writes() {
    let table = table();
    let rows = table["writes"].as_array().expect("write rows");
    for case in rows {
        let dir = TempDir::new();
        let path = dir.0.join("nested").join("traces.ndjson");
        let store = FileTraceStore::open(&path, memory().await).expect("a new store");
        let appended = store
            .append(&named_records(&case["append"]))
            .expect("an append");
        assert_eq!(appended.written, 10);
        let deleted = store
            .delete_run(case["deleteRun"].as_str().expect("a run"))
            .expect("a deletion");
        assert_eq!(deleted.runs_deleted, 1);
        store.close().expect("closed");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path)
                .expect("the file")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let written = std::fs::read_to_string(&path).expect("the file");
        let expected = std::fs::read_to_string(
            Path::new(FIXTURES)
                .join("file-store")
                .join(case["file"].as_str().expect("a file")),
        )
        .expect("the fixture");
        assert_eq!(number_batches(&written), expected);
        let again = FileTraceStore::open(&path, memory().await).expect("reopened");
        assert!(again.records().await.expect("records").is_empty());
        assert!(again.diagnostics().is_empty());
    }
}

/// Appends, a retention and a compaction persist; a reopened store holds the same runs; a
/// closed store refuses with `CLOSED`; input the store refuses writes nothing.
#[tokio::test]
async fn changes_persist_and_compaction_keeps_the_live_records() {
    let dir = TempDir::new();
    let path = dir.0.join("traces.ndjson");
    let all = named_records(&json!([
        "run_start",
        "agent_start",
        "llm_start",
        "first_chunk",
        "stream_chunk",
        "llm_end",
        "tool_start",
        "tool_end",
        "agent_end",
        "run_end"
    ]));
    let store = FileTraceStore::open(&path, memory().await).expect("a store");
    store.append(&all[..4]).expect("first half");
    store.append(&all[4..]).expect("second half");
    let again = store.append(&all).expect("again");
    assert_eq!((again.written, again.deduplicated), (0, 10));
    let size = std::fs::metadata(&path).expect("the file").len();
    let refused = store
        .append(&[json!({"schemaVersion": 1})])
        .expect_err("refused");
    assert!(
        matches!(refused, FileTraceStoreError::Store(_)),
        "{refused:?}"
    );
    assert_eq!(std::fs::metadata(&path).expect("the file").len(), size);
    let run = store
        .get_run("run-1", true)
        .await
        .expect("a run")
        .expect("run-1");
    store.flush().expect("flushed");
    let (written, bytes) = store.compact().await.expect("compacted");
    assert_eq!(written, 10);
    assert!(bytes < size, "{bytes} < {size}");
    assert_eq!(std::fs::metadata(&path).expect("the file").len(), bytes);
    assert!(!store.compaction_temp_path().exists());
    store.close().expect("closed");
    store.close().expect("closing twice");
    assert!(store.is_closed());
    let closed = store.append(&all).expect_err("closed");
    let FileTraceStoreError::File(closed) = closed else {
        panic!("a file error: {closed:?}")
    };
    assert_eq!(closed.code, FileStoreErrorCode::Closed);
    assert_eq!(closed.message, "FileTraceStore is closing or closed.");

    let reopened = FileTraceStore::open(&path, memory().await).expect("reopened");
    assert_eq!(
        reopened.get_run("run-1", true).await.expect("a run"),
        Some(run)
    );
    let policy = RetentionPolicy::from_json(&json!({"maxRuns": 0})).expect("a policy");
    let deleted = reopened.apply_retention(&policy).await.expect("retention");
    assert_eq!(deleted.run_ids, vec!["run-1".to_owned()]);
    reopened.close().expect("closed");
    let last = FileTraceStore::open(&path, memory().await).expect("reopened");
    assert!(run_ids(&last).await.is_empty());
}

/// A store refuses a path it cannot use and an in-memory store that already holds records; a
/// write that cannot complete nor be cut back leaves the store refusing with
/// `RECOVERY_REQUIRED` until it is opened again.
#[tokio::test]
async fn refusals_and_a_write_that_fails() {
    let empty = FileTraceStore::open("", memory().await).expect_err("an empty path");
    assert_eq!(empty.code, FileStoreErrorCode::InvalidPath);
    assert_eq!(
        empty.message,
        "FileTraceStore path must be a non-empty filesystem path."
    );
    let dir = TempDir::new();
    let path = dir.0.join("traces.ndjson");
    let all = named_records(&json!(["run_start", "agent_start"]));
    let used = memory().await;
    used.append(&all).expect("records");
    let refused = FileTraceStore::open(&path, used).expect_err("a store with records");
    assert_eq!(refused.code, FileStoreErrorCode::InvalidArgument);

    let store = FileTraceStore::open(&path, memory().await).expect("a store");
    std::fs::remove_file(&path).expect("removed");
    std::fs::create_dir(&path).expect("a directory where the file was");
    let failed = store.append(&all).expect_err("a failed write");
    let FileTraceStoreError::File(failed) = failed else {
        panic!("a file error: {failed:?}")
    };
    assert_eq!(failed.code, FileStoreErrorCode::RecoveryRequired);
    let FileTraceStoreError::File(after) = store.append(&all).expect_err("refused") else {
        panic!("a file error")
    };
    assert_eq!(after.code, FileStoreErrorCode::RecoveryRequired);
    assert_eq!(
        after.message,
        "FileTraceStore requires reopen/recovery before further operations."
    );
    assert_eq!(
        store.close().expect_err("not clean").code,
        FileStoreErrorCode::RecoveryRequired
    );
    std::fs::remove_dir(&path).expect("removed");
    std::fs::write(&path, "{\"type\":\"file_header\"}\n").expect("a file");
    std::fs::write(
        dir.0.join("other.ndjson.compact.tmp"),
        "left by a compaction",
    )
    .expect("a temp file");
    let stale = FileTraceStore::open(dir.0.join("other.ndjson"), memory().await)
        .expect_err("a temp file without its target");
    assert_eq!(stale.code, FileStoreErrorCode::StaleCompactionFile);
}
