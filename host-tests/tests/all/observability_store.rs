//! OMA's in-memory trace store of the Rust embedding (`oma_wasmtime::observability`'s
//! `InMemoryTraceStore`) over the shared table `fixtures/observability/store.json`, the one the
//! JavaScript and Python packages run against their own stores, in both worlds (the store reads
//! runs back through each world's codec). Every row runs: queries and policies are read with
//! `TraceQuery::from_json` and `RetentionPolicy::from_json` (OMA's keys and refusals, which the
//! typed structs' own checks complete), records are OMA's JSON as the table gives them. Then a
//! batching sink fills a store through `TraceStoreExporter`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use oma_host_tests::observability::{
    BatchingOptions, BatchingTraceSink, ExportStatus, InMemoryTraceStore, RetentionPolicy,
    RunMaterializer, StoreDiagnostic, TraceQuery, TraceSink, TraceStoreError, TraceStoreExporter,
};
use oma_host_tests::{DriverHarness, GuestOptions, Harness, Shared, TraceRecord};
use serde_json::{json, Map, Value};

use crate::worlds::World;

fn table() -> Value {
    serde_json::from_str(include_str!("../../../fixtures/observability/store.json"))
        .expect("the table")
}

async fn codec(world: World) -> Box<dyn RunMaterializer> {
    match world {
        World::Component => Box::new(
            Harness::shared()
                .expect("the harness")
                .instantiate_with(GuestOptions::default())
                .await
                .expect("the guest"),
        ),
        World::Driver => Box::new(
            DriverHarness::shared()
                .expect("the harness")
                .instantiate_with(GuestOptions::default())
                .await
                .expect("the portable guest"),
        ),
    }
}

async fn store(world: World) -> InMemoryTraceStore {
    InMemoryTraceStore::new(codec(world).await)
}

fn error_json(error: &TraceStoreError) -> Value {
    json!({"code": error.code.as_str(), "field": error.field, "message": error.message})
}

fn append_json(store: &InMemoryTraceStore, records: &[Value]) -> Result<Value, TraceStoreError> {
    let result = store.append(records)?;
    let diagnostics: Vec<Value> = result
        .diagnostics
        .iter()
        .map(|d| {
            json!({"code": d.code.as_str(), "runId": d.run_id, "traceId": d.trace_id,
                   "spanId": d.span_id, "message": d.message})
        })
        .collect();
    Ok(
        json!({"written": result.written, "deduplicated": result.deduplicated,
              "diagnostics": diagnostics}),
    )
}

fn run_summary(run: Option<Map<String, Value>>, include: bool) -> Value {
    let Some(run) = run else {
        return Value::Null;
    };
    json!({
        "runId": run["runId"], "status": run.get("status"), "incomplete": run["incomplete"],
        "agents": run["agents"], "models": run["models"],
        "spans": run["spans"].as_array().expect("spans").len(),
        "records": if include { json!(run["records"].as_array().expect("records").len()) } else { Value::Null },
    })
}

fn deleted_json(result: oma_host_tests::observability::DeleteResult) -> Value {
    json!({"runsDeleted": result.runs_deleted, "recordsDeleted": result.records_deleted,
           "runIds": result.run_ids})
}

async fn step_outcome(store: &InMemoryTraceStore, step: &Value) -> Result<Value, TraceStoreError> {
    if let Some(records) = step.get("append") {
        return append_json(store, records.as_array().expect("records"));
    }
    if let Some(run_id) = step.get("getRun") {
        let include = step["includeRecords"].as_bool().unwrap_or(false);
        let run = store
            .get_run(run_id.as_str().expect("a run id"), include)
            .await?;
        return Ok(run_summary(run, include));
    }
    if let Some(query) = step.get("queryRuns") {
        let mut query = TraceQuery::from_json(query)?;
        let mut pages = Vec::new();
        loop {
            let page = store.query_runs(&query).await?;
            pages.push(
                page.items
                    .iter()
                    .map(|s| s["runId"].clone())
                    .collect::<Vec<_>>(),
            );
            match page.next_cursor {
                Some(cursor) if step["follow"] == true => query.cursor = Some(cursor),
                _ => return Ok(json!(pages)),
            }
        }
    }
    if let Some(run_id) = step.get("deleteRun") {
        return store
            .delete_run(run_id.as_str().expect("a run id"))
            .map(deleted_json);
    }
    if let Some(query) = step.get("delete") {
        return store
            .delete(&TraceQuery::from_json(query)?)
            .await
            .map(deleted_json);
    }
    let policy = RetentionPolicy::from_json(&step["retention"])?;
    store.apply_retention(&policy).await.map(deleted_json)
}

/// Every row of `store.json` in `world`.
async fn run_table(world: World) {
    let table = table();
    for case in table["append"].as_array().expect("append rows") {
        let name = case["name"].as_str().expect("a name");
        let store = store(world).await;
        let error = store
            .append(case["records"].as_array().expect("records"))
            .expect_err(name);
        assert_eq!(error_json(&error), case["error"], "{world:?} {name}");
        assert_eq!(
            store.records().await.expect(name),
            Vec::<Value>::new(),
            "{name}"
        );
    }
    for case in table["scenarios"].as_array().expect("scenarios") {
        let name = case["name"].as_str().expect("a name");
        let mut store = store(world).await;
        if let Some(now) = case["options"]["now"].as_f64() {
            store = store.with_clock(move || now);
        }
        for (i, step) in case["steps"].as_array().expect("steps").iter().enumerate() {
            let got = match step_outcome(&store, step).await {
                Ok(value) => ("expect", value),
                Err(error) => ("error", error_json(&error)),
            };
            assert!(
                step.get(got.0).is_some(),
                "{world:?} {name} step {i}: got {} {}",
                got.0,
                got.1
            );
            assert_eq!(got.1, step[got.0], "{world:?} {name} step {i}");
        }
    }
}

#[tokio::test]
async fn the_store_table_runs_through_the_component_world() {
    run_table(World::Component).await;
}

#[tokio::test]
async fn the_store_table_runs_through_the_portable_world() {
    run_table(World::Driver).await;
}

fn records_of_first_scenario() -> Vec<Value> {
    table()["scenarios"][0]["steps"][0]["append"]
        .as_array()
        .expect("records")
        .clone()
}

/// A batching sink fills a store through the exporter; a second export of the same batch is
/// harmless; a batch the store refuses fails for good; the diagnostics callback hears of a
/// record kept out, and a callback that panics changes nothing.
#[tokio::test]
async fn a_batching_sink_fills_the_store_through_the_exporter() {
    let heard: Arc<Mutex<Vec<StoreDiagnostic>>> = Arc::default();
    let log = heard.clone();
    let store = Arc::new(store(World::Component).await.with_diagnostics(move |d| {
        log.lock().unwrap().push(d.clone());
        panic!("a diagnostics callback that panics");
    }));
    let records = records_of_first_scenario();
    let sink = BatchingTraceSink::new(
        TraceStoreExporter::new(store.clone()),
        BatchingOptions::default(),
    )
    .expect("a sink");
    for record in &records {
        sink.emit(&TraceRecord {
            json: record.to_string(),
            legacy: None,
        })
        .expect("emitted");
    }
    let flushed = sink
        .force_flush(Some(Duration::from_secs(10)))
        .expect("flushed");
    assert_eq!(flushed.exported, records.len() as u64);
    let run = store.get_run("run-1", true).await.expect("read back");
    assert_eq!(
        run_summary(run, true)["records"],
        json!(records.len()),
        "every record kept"
    );

    let exporter = TraceStoreExporter::new(store.clone());
    let batch: Vec<TraceRecord> = records
        .iter()
        .map(|r| TraceRecord {
            json: r.to_string(),
            legacy: None,
        })
        .collect();
    let signal = oma_host_tests::observability::AbortSignal::default();
    let again = oma_host_tests::observability::TraceExporter::export(&exporter, &batch, &signal)
        .expect("an answer");
    assert_eq!(again.status, ExportStatus::Success);
    assert_eq!(store.records().await.expect("records").len(), records.len());

    let mut changed = records[0].clone();
    changed["name"] = json!("renamed");
    let kept_out = store.append(&[changed]).expect("appended");
    assert_eq!(kept_out.deduplicated, 1);
    assert_eq!(heard.lock().unwrap().len(), 1);

    let mut old = records[0].clone();
    old["schemaVersion"] = json!(1);
    old["recordId"] = json!("other");
    let refused = [TraceRecord {
        json: old.to_string(),
        legacy: None,
    }];
    let answer = oma_host_tests::observability::TraceExporter::export(&exporter, &refused, &signal)
        .expect("an answer");
    assert_eq!(answer.status, ExportStatus::Failure);
    assert_eq!(
        answer.code.as_deref(),
        Some("STORE_UNSUPPORTED_SCHEMA_VERSION")
    );
    let unreadable = [TraceRecord {
        json: "{".into(),
        legacy: None,
    }];
    let error = store.append_records(&unreadable).expect_err("not JSON");
    assert_eq!(error.message, "records[0] must be JSON-serializable.");
    sink.shutdown(Some(Duration::from_secs(10)))
        .expect("shut down");
}

/// What the JSON readers refuse beyond the table (a key OMA has not, a value of the wrong
/// type), and a cursor once runs were deleted.
#[tokio::test]
async fn queries_and_policies_are_refused_by_name_and_cursors_end_with_a_deletion() {
    let refused = |error: TraceStoreError| (error.field.unwrap_or_default(), error.message);
    assert_eq!(
        refused(TraceQuery::from_json(&json!({"runIds": ["a"]})).unwrap_err()),
        ("runIds".into(), "query has no key runIds.".into())
    );
    assert_eq!(
        refused(TraceQuery::from_json(&json!({"limit": 1.5})).unwrap_err()),
        (
            "limit".into(),
            "limit must be an integer from 1 through 500.".into()
        )
    );
    assert_eq!(
        TraceQuery::from_json(&json!({"limit": 2.0, "runId": "a"})).unwrap(),
        TraceQuery {
            limit: Some(2),
            run_id: Some(vec!["a".into()]),
            ..TraceQuery::default()
        }
    );
    assert_eq!(
        refused(TraceQuery::from_json(&json!({"agent": [1]})).unwrap_err()),
        (
            "agent".into(),
            "agent must contain non-empty strings.".into()
        )
    );
    assert_eq!(
        refused(RetentionPolicy::from_json(&json!({"maxRuns": 1, "keep": 2})).unwrap_err()),
        ("keep".into(), "policy has no key keep.".into())
    );
    assert_eq!(
        refused(RetentionPolicy::from_json(&json!({"maxRuns": 1.5})).unwrap_err()),
        (
            "maxRuns".into(),
            "maxRuns must be a non-negative integer.".into()
        )
    );

    let store = store(World::Component).await;
    let scenario = &table()["scenarios"][1];
    for step in scenario["steps"].as_array().expect("steps").iter().take(2) {
        store
            .append(step["append"].as_array().expect("records"))
            .expect("appended");
    }
    let first = TraceQuery {
        limit: Some(1),
        ..TraceQuery::default()
    };
    let page = store.query_runs(&first).await.expect("a page");
    let cursor = page.next_cursor.expect("more pages");
    let other = TraceQuery {
        limit: Some(1),
        order: Some(oma_host_tests::observability::QueryOrder::StartedAsc),
        cursor: Some(cursor.clone()),
        ..TraceQuery::default()
    };
    let mismatch = store.query_runs(&other).await.unwrap_err();
    assert_eq!(mismatch.code.as_str(), "INVALID_CURSOR");
    store.delete_run("run-a").expect("deleted");
    let stale = store
        .query_runs(&TraceQuery {
            cursor: Some(cursor),
            ..first
        })
        .await
        .unwrap_err();
    assert_eq!(
        refused(stale),
        (
            "cursor".into(),
            "Cursor does not match this query or is no longer valid.".into()
        )
    );
}
