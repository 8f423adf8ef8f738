//! OMA's in-memory evaluation store of the Rust embedding (`oma_wasmtime::eval`'s
//! `InMemoryEvalStore`) over the shared table `fixtures/eval/store.json`, the one the JavaScript
//! and Python packages run against their own stores. Every row runs (the table of rows that
//! cannot apply to Rust is empty, and checked to stay so): records, queries, deletions and
//! policies are OMA's JSON as the table gives them. Then `run_eval_set` writes a run's records
//! to a store, which reads them back by eval run.

use oma_host_tests::eval::{
    run_eval_set, EvalRecordStore, EvalSet, EvalStoreError, InMemoryEvalStore, RunOptions,
    ScoreContext, ScoreResult, Scorer, TargetContext, TargetOutput,
};
use oma_host_tests::GuestOptions;
use serde_json::{json, Value};

use crate::common::fixture;
use crate::worlds::{AnyGuest, World};

const TABLE: &str = include_str!("../../../fixtures/eval/store.json");

/// Rows of the table that cannot apply to the Rust store, by name, with why. None: the store
/// takes OMA's JSON records, queries and policies as they are, and its options (`maxRecords`,
/// the clock `now`) are its builder's.
const NOT_FOR_RUST: &[(&str, &str)] = &[];

fn error_json(error: &EvalStoreError) -> Value {
    json!({"code": error.code.as_str(), "field": error.field, "message": error.message})
}

fn ids(records: &[Value]) -> Value {
    records.iter().map(|r| r["recordId"].clone()).collect()
}

fn append_json(store: &InMemoryEvalStore, records: &[Value]) -> Result<Value, EvalStoreError> {
    let result = store.append(records)?;
    // The in-memory store has no diagnostics to give (OMA's gives none either).
    Ok(
        json!({"written": result.written, "deduplicated": result.deduplicated,
              "diagnostics": []}),
    )
}

fn store_of(options: &Value, name: &str) -> InMemoryEvalStore {
    let mut store = InMemoryEvalStore::new();
    for (key, value) in options.as_object().into_iter().flatten() {
        match key.as_str() {
            "maxRecords" => store = store.with_max_records(value.as_u64().unwrap()),
            "now" => {
                let now = value.as_f64().unwrap();
                store = store.with_clock(move || now);
            }
            other => panic!("{name}: an option the table does not define: {other}"),
        }
    }
    store
}

fn skipped(name: &str) -> bool {
    NOT_FOR_RUST.iter().any(|(row, _)| *row == name)
}

#[test]
fn the_store_table_append_rows() {
    let table = fixture(TABLE);
    let rows = table["append"].as_array().unwrap();
    assert!(!rows.is_empty());
    let mut ran = 0;
    for row in rows {
        let name = row["name"].as_str().unwrap();
        if skipped(name) {
            continue;
        }
        let store = InMemoryEvalStore::new();
        let records = row["records"].as_array().unwrap();
        let error = store.append(records).expect_err(name);
        assert_eq!(error_json(&error), row["error"], "{name}");
        assert!(store.records().is_empty(), "{name}: nothing kept");
        ran += 1;
    }
    assert_eq!(ran, rows.len());
}

#[test]
fn the_store_table_scenarios() {
    let table = fixture(TABLE);
    let scenarios = table["scenarios"].as_array().unwrap();
    assert!(!scenarios.is_empty());
    let mut ran = 0;
    for scenario in scenarios {
        let name = scenario["name"].as_str().unwrap();
        if skipped(name) {
            continue;
        }
        let store = store_of(&scenario["options"], name);
        for (i, step) in scenario["steps"].as_array().unwrap().iter().enumerate() {
            let at = format!("{name}, step {i}");
            let outcome = if let Some(records) = step.get("append") {
                append_json(&store, records.as_array().unwrap())
            } else if let Some(query) = step.get("query") {
                let mut pages = Vec::new();
                let mut query = query.clone();
                let follow = step["follow"] == true;
                loop {
                    match store.query(&query) {
                        Ok(page) => {
                            pages.push(ids(&page.items));
                            match page.next_cursor {
                                Some(cursor) if follow => query["cursor"] = json!(cursor),
                                _ => break Ok(Value::Array(pages)),
                            }
                        }
                        Err(e) => break Err(e),
                    }
                }
            } else if let Some(query) = step.get("delete") {
                store.delete(query).map(|r| {
                    json!({"runsDeleted": r.runs_deleted, "recordsDeleted": r.records_deleted,
                           "runIds": r.run_ids})
                })
            } else if let Some(policy) = step.get("retention") {
                store.apply_retention(policy).map(|r| {
                    json!({"runsDeleted": r.runs_deleted, "recordsDeleted": r.records_deleted,
                           "runIds": r.run_ids})
                })
            } else if let Some(expect) = step.get("records") {
                assert_eq!(&ids(&store.records()), expect, "{at}: records");
                continue;
            } else {
                panic!("{at}: a step the table does not define: {step}");
            };
            match (outcome, step.get("expect"), step.get("error")) {
                (Ok(got), Some(expect), None) => assert_eq!(&got, expect, "{at}"),
                (Err(e), None, Some(expect)) => assert_eq!(&error_json(&e), expect, "{at}"),
                (got, _, _) => panic!("{at}: {got:?} against {step}"),
            }
        }
        ran += 1;
    }
    assert_eq!(ran, scenarios.len());
}

#[test]
fn rows_not_for_rust_are_rows_of_the_table() {
    let table = fixture(TABLE);
    let names: Vec<&str> = table["append"]
        .as_array()
        .unwrap()
        .iter()
        .chain(table["scenarios"].as_array().unwrap())
        .map(|row| row["name"].as_str().unwrap())
        .collect();
    for (row, why) in NOT_FOR_RUST {
        assert!(names.contains(row), "{row} is not a row of the table");
        assert!(!why.is_empty(), "{row}: say why");
    }
}

#[test]
fn a_cursor_is_refused_by_another_store_and_after_a_deletion() {
    let record = |id: &str, ms: u64| {
        json!({"schemaVersion": 1, "recordId": id, "evalRunId": "run-a", "source": "offline",
               "timestampUnixMs": ms, "scorer": {"name": "exact"}, "status": "scored",
               "metadata": {}})
    };
    let (one, two) = (InMemoryEvalStore::new(), InMemoryEvalStore::new());
    let records = [record("a", 1), record("b", 2), record("c", 3)];
    one.append(&records).unwrap();
    two.append(&records).unwrap();
    let cursor = one
        .query(&json!({"limit": 1}))
        .unwrap()
        .next_cursor
        .unwrap();
    let refused = two
        .query(&json!({"limit": 1, "cursor": cursor}))
        .unwrap_err();
    assert_eq!(
        refused.message,
        "Cursor is invalid or has been tampered with."
    );
    let other_query = one
        .query(&json!({"limit": 1, "order": "time_asc", "cursor": cursor}))
        .unwrap_err();
    assert_eq!(
        other_query.message,
        "Cursor does not match this query or is no longer valid."
    );
    // A page after the cursor's snapshot does not see what was appended since.
    one.append(&[record("d", 4)]).unwrap();
    let page = one.query(&json!({"limit": 1, "cursor": cursor})).unwrap();
    assert_eq!(ids(&page.items), json!(["b"]));
    one.delete(&json!({"evalRunId": "gone"})).unwrap();
    assert!(one.query(&json!({"limit": 1, "cursor": cursor})).is_ok());
    one.delete(&json!({"before": "1970-01-01T00:00:00.002Z"}))
        .unwrap();
    let stale = one
        .query(&json!({"limit": 1, "cursor": cursor}))
        .unwrap_err();
    assert_eq!(error_json(&stale)["code"], "INVALID_CURSOR");
    let unknown = one.query(&json!({"runIds": ["r"]})).unwrap_err();
    assert_eq!(
        unknown.message,
        "runIds is not a field of an evaluation query."
    );
}

#[tokio::test]
async fn run_eval_set_writes_its_records_to_the_store() {
    let AnyGuest::Component(mut guest) =
        AnyGuest::instantiate(World::Component, GuestOptions::default()).await
    else {
        panic!("the component world")
    };
    let set = EvalSet::define(&json!({
        "name": "smoke", "version": "1",
        "cases": [{"id": "c1", "input": "hi", "expected": "hi"},
                  {"id": "c2", "input": "yo", "expected": "no"}],
    }))
    .unwrap();
    let store = InMemoryEvalStore::new();
    let exact = Scorer::new("exact", |context: ScoreContext| async move {
        let hit = context.case.expected.as_ref() == Some(&context.output);
        let mut result = ScoreResult::new(if hit { 1.0 } else { 0.0 });
        result.pass = Some(hit);
        Ok(result)
    });
    let options = RunOptions {
        scorers: vec![exact],
        store: Some(&store as &(dyn EvalRecordStore + Sync)),
        ..RunOptions::default()
    };
    let target =
        |input: Value, _context: TargetContext| async move { Ok(TargetOutput::new(input)) };
    let report = run_eval_set(&set, target, options, &mut *guest)
        .await
        .expect("no trap")
        .expect("the options");
    assert_eq!(report.records.len(), 2);
    let eval_run_id = report.records[0]["evalRunId"].clone();
    let page = store
        .query(&json!({"evalRunId": eval_run_id, "order": "time_asc"}))
        .unwrap();
    let mut kept: Vec<Value> = page.items;
    kept.sort_by_key(|r| r["caseId"].as_str().unwrap().to_owned());
    let mut reported = report.records.clone();
    reported.sort_by_key(|r| r["caseId"].as_str().unwrap().to_owned());
    assert_eq!(kept, reported);
    assert_eq!(
        kept.iter().map(|r| r["pass"].clone()).collect::<Vec<_>>(),
        [json!(true), json!(false)]
    );
    // The records are kept once: a second append of them is all deduplicated.
    let again = store.append(&report.records).unwrap();
    assert_eq!((again.written, again.deduplicated), (0, 2));
}

/// The schema major a refusal names is written as JavaScript writes a number (`1e-7`, `1e+21`,
/// `2`), as in OMA's message.
#[test]
fn a_refused_schema_major_is_named_as_javascript_writes_it() {
    let store = InMemoryEvalStore::new();
    for (major, text) in [
        (json!(2), "2"),
        (json!(1e-7), "1e-7"),
        (json!(1e21), "1e+21"),
    ] {
        let refused = store
            .append(&[json!({"schemaVersion": major})])
            .expect_err("refused");
        assert_eq!(
            refused.message,
            format!("Unsupported EvalRecord schema major {text}; supported major is 1.")
        );
    }
}
