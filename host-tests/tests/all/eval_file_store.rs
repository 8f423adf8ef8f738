//! OMA's file evaluation store of the Rust embedding (`oma_wasmtime::eval`'s `FileEvalStore`)
//! over the shared table `fixtures/eval/file-store.json`, the one the JavaScript and Python
//! packages run: every file beside it opened as it is (records, diagnostics, the size the file is
//! cut to, or OMA's error with its line), and the file a store writes, byte for byte but the
//! batch ids. Every row applies to Rust (the table of rows that cannot is empty, and checked to
//! stay so). Then reopening, compaction, retention, a closed store and a write that fails.
//! Files are written only under a temporary directory of each test, removed at its end.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use oma_host_tests::eval::{
    FileDiagnostic, FileEvalStore, FileEvalStoreError, FileStoreErrorCode, InMemoryEvalStore,
};
use serde_json::{json, Value};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/eval/file-store");

fn table() -> Value {
    serde_json::from_str(include_str!("../../../fixtures/eval/file-store.json")).expect("the table")
}

/// Rows of the table that cannot apply to the Rust store, by file, with why. None.
const NOT_APPLICABLE: &[(&str, &str)] = &[];

/// A fresh directory under the system's temporary directory, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let path = std::env::temp_dir().join(format!(
            "oma-eval-file-store-{}-{}",
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

fn diagnostic_json(d: &FileDiagnostic) -> Value {
    let mut out = json!({"code": d.code, "severity": d.severity()});
    if let Some(line) = d.line_number {
        out["lineNumber"] = json!(line);
    }
    out["message"] = json!(d.message);
    out
}

fn ids(store: &FileEvalStore) -> Value {
    json!(store
        .records()
        .expect("records")
        .iter()
        .map(|r| r["recordId"].clone())
        .collect::<Vec<_>>())
}

/// Every `open` row: the file copied to a fresh path, opened, and read back.
#[test]
fn every_file_of_the_table_opens_as_oma_opens_it() {
    let table = table();
    let rows = table["open"].as_array().expect("open rows");
    let mut ran = 0;
    for case in rows {
        let name = case["file"].as_str().expect("a file");
        if NOT_APPLICABLE.iter().any(|(file, _)| *file == name) {
            continue;
        }
        let dir = TempDir::new();
        let path = dir.0.join("evals.ndjson");
        std::fs::copy(Path::new(FIXTURES).join(name), &path).expect(name);
        let heard: Arc<Mutex<Vec<Value>>> = Arc::default();
        let log = heard.clone();
        let opened =
            FileEvalStore::open_with_diagnostics(&path, InMemoryEvalStore::new(), move |d| {
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
                assert_eq!(ids(&store), expect["records"], "{name}");
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
    assert!(NOT_APPLICABLE.is_empty(), "every row applies to Rust");
    assert_eq!(ran, rows.len());
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

/// The `writes` row: the file a store writes is OMA's, byte for byte but the batch ids; and it
/// opens again to what was left.
#[test]
fn a_store_writes_the_file_oma_writes() {
    let table = table();
    for case in table["writes"].as_array().expect("write rows") {
        let dir = TempDir::new();
        let path = dir.0.join("nested").join("evals.ndjson");
        let store = FileEvalStore::open(&path, InMemoryEvalStore::new()).expect("a new store");
        let records = case["append"].as_array().expect("records");
        let appended = store.append(records).expect("an append");
        assert_eq!(appended.written, records.len() as u64);
        let deleted = store
            .delete(&json!({"evalRunId": case["deleteEvalRunId"]}))
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
            Path::new(FIXTURES).join(case["file"].as_str().expect("a file")),
        )
        .expect("the fixture");
        assert_eq!(number_batches(&written), expected);
        let again = FileEvalStore::open(&path, InMemoryEvalStore::new()).expect("reopened");
        let kept: Vec<&Value> = records
            .iter()
            .filter(|r| r["evalRunId"] != case["deleteEvalRunId"])
            .collect();
        assert_eq!(
            ids(&again),
            json!(kept
                .iter()
                .map(|r| r["recordId"].clone())
                .collect::<Vec<_>>())
        );
        assert!(again.diagnostics().is_empty());
    }
}

fn record(id: &str, run: &str, time: u64) -> Value {
    json!({
        "schemaVersion": 1, "recordId": id, "evalRunId": run, "source": "offline",
        "timestampUnixMs": time, "scorer": {"name": "exact"}, "status": "scored", "score": 1,
        "metadata": {}
    })
}

/// Appends, a retention and a compaction persist; a reopened store holds the same records; a
/// closed store refuses with `CLOSED`; input the store refuses writes nothing.
#[test]
fn changes_persist_and_compaction_keeps_the_live_records() {
    let dir = TempDir::new();
    let path = dir.0.join("evals.ndjson");
    let all = [
        record("a", "run-1", 1),
        record("b", "run-1", 2),
        record("c", "run-2", 3),
    ];
    let store = FileEvalStore::open(&path, InMemoryEvalStore::new()).expect("a store");
    store.append(&all[..2]).expect("first");
    store.append(&all[2..]).expect("second");
    let again = store.append(&all).expect("again");
    assert_eq!((again.written, again.deduplicated), (0, 3));
    let size = std::fs::metadata(&path).expect("the file").len();
    let refused = store
        .append(&[json!({"schemaVersion": 1})])
        .expect_err("refused");
    assert!(
        matches!(refused, FileEvalStoreError::Store(_)),
        "{refused:?}"
    );
    let nothing = store
        .delete(&json!({"evalRunId": "none"}))
        .expect("nothing to delete");
    assert_eq!(nothing.records_deleted, 0);
    assert_eq!(std::fs::metadata(&path).expect("the file").len(), size);
    let page = store
        .query(&json!({"evalRunId": "run-1", "order": "time_asc"}))
        .expect("a page");
    assert_eq!(page.items, all[..2].to_vec());
    let deleted = store
        .apply_retention(&json!({"maxRecords": 2}))
        .expect("retention");
    assert_eq!(deleted.run_ids, vec!["run-1".to_owned()]);
    store.flush().expect("flushed");
    let grown = std::fs::metadata(&path).expect("the file").len();
    let (written, bytes) = store.compact().expect("compacted");
    assert_eq!(written, 2);
    assert!(bytes < grown, "{bytes} < {grown}");
    assert_eq!(std::fs::metadata(&path).expect("the file").len(), bytes);
    assert!(!store.compaction_temp_path().exists());
    store.close().expect("closed");
    store.close().expect("closing twice");
    assert!(store.is_closed());
    let FileEvalStoreError::File(closed) = store.append(&all).expect_err("closed") else {
        panic!("a file error")
    };
    assert_eq!(closed.code, FileStoreErrorCode::Closed);
    assert_eq!(closed.message, "FileEvalStore is closing or closed.");

    let reopened = FileEvalStore::open(&path, InMemoryEvalStore::new()).expect("reopened");
    assert_eq!(ids(&reopened), json!(["b", "c"]));
}

/// A store refuses a path it cannot use and an in-memory store that already holds records; a
/// write that cannot complete nor be cut back leaves the store refusing with
/// `RECOVERY_REQUIRED`.
#[test]
fn refusals_and_a_write_that_fails() {
    let empty = FileEvalStore::open("", InMemoryEvalStore::new()).expect_err("an empty path");
    assert_eq!(empty.code, FileStoreErrorCode::InvalidPath);
    assert_eq!(
        empty.message,
        "FileEvalStore path must be a non-empty filesystem path."
    );
    let dir = TempDir::new();
    let path = dir.0.join("evals.ndjson");
    let all = [record("a", "run-1", 1)];
    let used = InMemoryEvalStore::new();
    used.append(&all).expect("records");
    let refused = FileEvalStore::open(&path, used).expect_err("a store with records");
    assert_eq!(refused.code, FileStoreErrorCode::InvalidArgument);

    let store = FileEvalStore::open(&path, InMemoryEvalStore::new()).expect("a store");
    std::fs::remove_file(&path).expect("removed");
    std::fs::create_dir(&path).expect("a directory where the file was");
    let FileEvalStoreError::File(failed) = store.append(&all).expect_err("a failed write") else {
        panic!("a file error")
    };
    assert_eq!(failed.code, FileStoreErrorCode::RecoveryRequired);
    let FileEvalStoreError::File(after) = store.append(&all).expect_err("refused") else {
        panic!("a file error")
    };
    assert_eq!(
        after.message,
        "FileEvalStore requires reopen/recovery before further operations."
    );
}
