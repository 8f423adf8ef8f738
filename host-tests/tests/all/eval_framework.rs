//! OMA's evaluation framework of the Rust embedding (`oma_wasmtime::eval`) over the shared
//! tables the JavaScript and Python packages run: `fixtures/eval/sets.json` (eval sets and what
//! a scorer may answer) and `fixtures/eval/reports.json` (aggregates and gates). Every row runs:
//! the tables hand values over as OMA's JSON, which is how the Rust API takes sets, score
//! results, records, policies and reports.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use oma_host_tests::eval::{
    aggregate_records, evaluate_gate, run_eval_set, EvalProgress, EvalRecordStore, EvalSet,
    GatePolicy, Redact, RunOptions, ScoreContext, ScoreResult, Scorer, ScorerRef, StorePayloads,
    TargetContext, TargetOutput,
};
use oma_host_tests::{CancelToken, GuestOptions};
use serde_json::{json, Value};

use crate::common::fixture;
use crate::worlds::{AnyGuest, World};

const SETS: &str = include_str!("../../../fixtures/eval/sets.json");
const REPORTS: &str = include_str!("../../../fixtures/eval/reports.json");
const RUNNER: &str = include_str!("../../../fixtures/eval/runner.json");

/// JSON values equal with numbers compared as numbers (`1` and `1.0` are equal), as the tables'
/// contracts compare them.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

#[test]
fn sets_table() {
    let table = fixture(SETS);
    let valid = table["valid"].as_array().unwrap();
    assert!(!valid.is_empty());
    for row in valid {
        let set = EvalSet::define(&row["set"]).unwrap_or_else(|e| panic!("{}: {e}", row["name"]));
        assert_eq!(set.to_json(), row["expect"], "{}", row["name"]);
    }
    let invalid = table["invalid"].as_array().unwrap();
    assert!(!invalid.is_empty());
    for row in invalid {
        let error = EvalSet::define(&row["set"]).expect_err(&row["set"].to_string());
        assert_eq!(
            error.field,
            row["field"].as_str().unwrap(),
            "{}",
            row["set"]
        );
        match row.get("message") {
            Some(message) => assert_eq!(error.message, message.as_str().unwrap(), "{}", row["set"]),
            None => assert!(
                error.message.starts_with(&error.field),
                "{}: {}",
                row["set"],
                error.message
            ),
        }
    }
}

#[test]
fn scores_table() {
    let rows = fixture(SETS)["scores"].as_array().unwrap().clone();
    assert!(!rows.is_empty());
    for row in rows {
        match (
            ScoreResult::from_json(&row["result"]),
            row["error"].as_str(),
        ) {
            (Ok(result), None) => {
                assert!(same(&result.to_json(), &row["result"]), "{}", row["result"])
            }
            (Err(error), Some(message)) => assert_eq!(error.message, message, "{}", row["result"]),
            (outcome, _) => panic!("{}: {outcome:?}", row["result"]),
        }
    }
}

#[test]
fn typed_score_results_are_checked_as_json_ones() {
    let out_of_range = ScoreResult::new(f64::NAN).check().unwrap_err();
    assert_eq!(
        out_of_range.message,
        "ScoreResult.score must be a finite number in the range [0, 1]."
    );
    let mut nested = ScoreResult::new(0.5);
    nested.details = Some(serde_json::from_str(r#"{"d": {"x": 1}}"#).unwrap());
    assert_eq!(
        nested.check().unwrap_err().message,
        "ScoreResult.details values must be valid TraceAttributeValue values."
    );
    assert!(ScoreResult::new(1.0).check().is_ok());
}

fn scorer_ref(value: &Value) -> ScorerRef {
    ScorerRef {
        name: value["name"].as_str().unwrap().to_owned(),
        version: value.get("version").map(|v| v.as_str().unwrap().to_owned()),
    }
}

#[test]
fn aggregates_table() {
    let table = fixture(REPORTS);
    let rows = table["aggregates"].as_array().unwrap();
    assert!(!rows.is_empty());
    for row in rows {
        let records = row["records"].as_array().unwrap();
        let scorers: Vec<ScorerRef> = row["scorers"]
            .as_array()
            .unwrap()
            .iter()
            .map(scorer_ref)
            .collect();
        let tags: Vec<(String, Vec<String>)> = row["tagsByCase"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(id, tags)| {
                let tags = tags
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| t.as_str().unwrap().to_owned());
                (id.clone(), tags.collect())
            })
            .collect();
        let got: Vec<Value> = aggregate_records(records, &scorers, &tags)
            .iter()
            .map(|a| a.to_json())
            .collect();
        let got = Value::Array(got);
        assert!(same(&got, &row["expect"]), "{}: {got}", row["name"]);
    }
}

#[test]
fn gates_table() {
    let table = fixture(REPORTS);
    let rows = table["gates"].as_array().unwrap();
    assert!(!rows.is_empty());
    for row in rows {
        let policy = GatePolicy::from_json(&row["policy"])
            .unwrap_or_else(|e| panic!("{}: {e}", row["name"]));
        let got = evaluate_gate(&row["report"], &policy, row.get("baseline")).to_json();
        assert!(same(&got, &row["expect"]), "{}: {got}", row["name"]);
    }
    let refused = table["refusedPolicies"].as_array().unwrap();
    assert!(!refused.is_empty());
    for row in refused {
        let error = GatePolicy::from_json(&row["policy"]).expect_err(&row["policy"].to_string());
        assert_eq!(
            error.field,
            row["field"].as_str().unwrap(),
            "{}",
            row["policy"]
        );
    }
}

/// The `refused` rows of `runner.json` whose value no `RunOptions` field can hold (a
/// fractional count: `concurrency` is a `u64`), and why; the test checks them against the table.
const RUNNER_REFUSED_BY_TYPE: &[(&str, &str)] = &[(
    "concurrency",
    "1.5 is not a u64: RunOptions::concurrency refuses it by its type",
)];

/// A store whose append fails for the records of the case ids in `fail_for`, keeping the case
/// id of every record it kept.
struct TableStore {
    fail_for: Vec<String>,
    kept: Mutex<Vec<String>>,
}

impl EvalRecordStore for TableStore {
    fn append(&self, records: &[Value]) -> Result<(), String> {
        let ids: Vec<String> = records
            .iter()
            .map(|r| r["caseId"].as_str().unwrap().to_owned())
            .collect();
        if ids.iter().any(|id| self.fail_for.contains(id)) {
            return Err("append failed".into());
        }
        self.kept.lock().unwrap().extend(ids);
        Ok(())
    }
}

/// A scorer of a `runner.json` row (its `contract.scorers`).
fn table_scorer(spec: &Value) -> Scorer {
    let spec_for_score = spec.clone();
    let mut scorer = Scorer::new(
        spec["name"].as_str().unwrap(),
        move |context: ScoreContext| {
            let spec = spec_for_score.clone();
            async move {
                match spec["rule"].as_str() {
                    Some("exact") => {
                        let hit = context
                            .case
                            .expected
                            .as_ref()
                            .is_some_and(|e| same(e, &context.output));
                        let mut result = ScoreResult::new(if hit { 1.0 } else { 0.0 });
                        result.pass = Some(hit);
                        return Ok(result);
                    }
                    Some("length") => {
                        return Ok(ScoreResult::new(if context.output.is_string() {
                            1.0
                        } else {
                            0.0
                        }));
                    }
                    _ => {}
                }
                let answer = &spec["answers"][&context.case.id];
                if let Some(message) = answer["throws"].as_str() {
                    anyhow::bail!("{message}");
                }
                if answer["hangs"] == true {
                    std::future::pending::<()>().await;
                }
                // As the scorer answered it: the runner checks it.
                Ok(ScoreResult {
                    score: answer["score"].as_f64().unwrap_or(f64::NAN),
                    pass: answer.get("pass").map(|p| p.as_bool().unwrap()),
                    reason: answer.get("reason").map(|r| r.as_str().unwrap().to_owned()),
                    details: answer
                        .get("details")
                        .map(|d| d.as_object().unwrap().clone()),
                })
            }
        },
    );
    if let Some(version) = spec["version"].as_str() {
        scorer = scorer.with_version(version);
    }
    if let Some(ms) = spec["timeoutMs"].as_u64() {
        scorer = scorer.with_timeout(Duration::from_millis(ms));
    }
    scorer
}

/// A record without what the runner chooses itself (its ids, clock and the error's class).
fn comparable(record: &Value, eval_run_id: &mut Option<String>) -> Value {
    let mut record = record.as_object().unwrap().clone();
    assert!(record.remove("recordId").unwrap().is_string());
    assert!(record.remove("timestampUnixMs").unwrap().is_u64());
    let id = record
        .remove("evalRunId")
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(eval_run_id.get_or_insert(id.clone()), &id);
    let usage = record["usage"].as_object_mut().unwrap();
    assert!(usage.remove("durationMs").unwrap().is_u64());
    if usage.is_empty() {
        record.remove("usage");
    }
    if let Some(error) = record.get_mut("error") {
        assert!(error.as_object_mut().unwrap().remove("name").is_some());
    }
    Value::Object(record)
}

async fn runner_rows<R: Redact>(redactor: &mut R) {
    let table = fixture(RUNNER);
    let cases = table["cases"].as_array().unwrap();
    assert!(!cases.is_empty());
    for row in cases {
        let name = row["name"].as_str().unwrap();
        let set = EvalSet::define(&row["set"]).unwrap();
        let opts = &row["options"];
        let store = TableStore {
            fail_for: row["store"]["failFor"]
                .as_array()
                .map(|ids| {
                    ids.iter()
                        .map(|id| id.as_str().unwrap().to_owned())
                        .collect()
                })
                .unwrap_or_default(),
            kept: Mutex::new(Vec::new()),
        };
        let progress = Arc::new(Mutex::new(Vec::<Value>::new()));
        let cancel = CancelToken::new();
        let (seen, stop, cancel_after) = (
            progress.clone(),
            cancel.clone(),
            opts["cancelAfter"].as_u64(),
        );
        let options = RunOptions {
            scorers: row["scorers"]
                .as_array()
                .unwrap()
                .iter()
                .map(table_scorer)
                .collect(),
            repeats: opts["repeats"].as_u64(),
            concurrency: opts["concurrency"].as_u64(),
            filter_tags: opts["filterTags"]
                .as_array()
                .map(|t| t.iter().map(|t| t.as_str().unwrap().to_owned()).collect())
                .unwrap_or_default(),
            metadata: opts["metadata"].as_object().cloned().unwrap_or_default(),
            store: row
                .get("store")
                .map(|_| &store as &(dyn EvalRecordStore + Sync)),
            store_payloads: match opts["storePayloads"].as_str() {
                None | Some("none") => StorePayloads::None,
                Some("redacted") => StorePayloads::Redacted,
                Some("full") => StorePayloads::Full,
                Some(other) => panic!("{name}: {other}"),
            },
            cancel: Some(cancel),
            on_progress: Some(Box::new(move |event: &EvalProgress| {
                let mut seen = seen.lock().unwrap();
                seen.push(event.to_json());
                let done = seen.iter().filter(|e| e["type"] == "case_done").count() as u64;
                if Some(done) == cancel_after {
                    stop.cancel();
                }
            })),
            ..RunOptions::default()
        };
        let answers = row["target"].clone();
        let target = move |_input: Value, context: TargetContext| {
            let answer = answers[&context.case_id].clone();
            async move {
                if let Some(message) = answer["throws"].as_str() {
                    anyhow::bail!("{message}");
                }
                match answer.get("returns") {
                    Some(value) => TargetOutput::from_json(value),
                    None => TargetOutput::from_json(&answer),
                }
            }
        };
        let report = run_eval_set(&set, target, options, redactor)
            .await
            .expect("no trap")
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let expect = &row["expect"];
        let mut eval_run_id = None;
        let records: Vec<Value> = report
            .records
            .iter()
            .map(|r| comparable(r, &mut eval_run_id))
            .collect();
        let records = Value::Array(records);
        assert!(
            same(&records, &expect["records"]),
            "{name}: records {records}"
        );
        assert_eq!(
            Value::Array(progress.lock().unwrap().clone()),
            expect["progress"],
            "{name}: progress"
        );
        let json = report.to_json();
        let mut got = serde_json::Map::new();
        for key in [
            "caseCount",
            "repeats",
            "aborted",
            "warnings",
            "aggregates",
            "totals",
        ] {
            if let Some(value) = json.get(key) {
                got.insert(key.into(), value.clone());
            }
        }
        let got = Value::Object(got);
        assert!(same(&got, &expect["report"]), "{name}: report {got}");
        if let Some(stored) = expect.get("stored") {
            assert_eq!(
                json!(*store.kept.lock().unwrap()),
                *stored,
                "{name}: stored"
            );
        }
    }
    let refused = table["refused"].as_array().unwrap();
    let mut by_type = Vec::new();
    for row in refused {
        let (key, value) = row["options"].as_object().unwrap().iter().next().unwrap();
        let mut options = RunOptions::default();
        match key.as_str() {
            "repeats" => options.repeats = Some(value.as_u64().unwrap()),
            "evalRunId" => options.eval_run_id = Some(value.as_str().unwrap().to_owned()),
            _ if value.as_u64().is_none() => {
                by_type.push(key.as_str());
                continue;
            }
            other => panic!("an option the test does not map: {other}"),
        }
        let set = EvalSet::define(
            &json!({"name": "s", "version": "1", "cases": [{"id": "a", "input": 1}]}),
        )
        .unwrap();
        let ran = AtomicBool::new(false);
        let target = |_: Value, _: TargetContext| {
            ran.store(true, Ordering::SeqCst);
            async { Ok(TargetOutput::new(Value::Null)) }
        };
        let error = run_eval_set(&set, target, options, redactor)
            .await
            .unwrap()
            .unwrap_err();
        assert_eq!(error.0, row["error"].as_str().unwrap());
        assert!(
            !ran.load(Ordering::SeqCst),
            "no sample runs before the options are checked"
        );
    }
    let listed: Vec<&str> = RUNNER_REFUSED_BY_TYPE.iter().map(|(key, _)| *key).collect();
    assert_eq!(by_type, listed);
}

#[tokio::test]
async fn the_runner_table_through_the_component_world() {
    match AnyGuest::instantiate(World::Component, GuestOptions::default()).await {
        AnyGuest::Component(mut guest) => runner_rows(&mut *guest).await,
        AnyGuest::Driver(_) => unreachable!(),
    }
}

#[tokio::test]
async fn the_runner_table_through_the_portable_world() {
    match AnyGuest::instantiate(World::Driver, GuestOptions::default()).await {
        AnyGuest::Driver(mut guest) => runner_rows(&mut *guest).await,
        AnyGuest::Component(_) => unreachable!(),
    }
}

/// The table runs one sample at a time; with `concurrency: 2` two targets are in flight at once
/// on the caller's task, and the records stay in case order.
#[tokio::test]
async fn samples_run_concurrency_at_a_time_in_case_order() {
    let AnyGuest::Component(mut guest) =
        AnyGuest::instantiate(World::Component, GuestOptions::default()).await
    else {
        unreachable!()
    };
    let cases: Vec<Value> = (0..5)
        .map(|i| json!({"id": format!("c{i}"), "input": i}))
        .collect();
    let set = EvalSet::define(&json!({"name": "s", "version": "1", "cases": cases})).unwrap();
    let (in_flight, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let target = |input: Value, _: TargetContext| {
        let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        most.fetch_max(now, Ordering::SeqCst);
        let wait = Duration::from_millis(5 * (5 - input.as_u64().unwrap()));
        let done = &in_flight;
        async move {
            tokio::time::sleep(wait).await;
            done.fetch_sub(1, Ordering::SeqCst);
            Ok(TargetOutput::new(input))
        }
    };
    let options = RunOptions {
        scorers: vec![Scorer::new("any", |_| async { Ok(ScoreResult::new(1.0)) })],
        concurrency: Some(2),
        ..RunOptions::default()
    };
    // A run may be awaited from a spawned task: its future is `Send`.
    fn sendable<F: Send>(future: F) -> F {
        future
    }
    let run = sendable(run_eval_set(&set, target, options, &mut *guest));
    let report = run.await.unwrap().unwrap();
    assert_eq!(most.load(Ordering::SeqCst), 2);
    let order: Vec<&str> = report
        .records
        .iter()
        .map(|r| r["caseId"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["c0", "c1", "c2", "c3", "c4"]);
    assert_eq!(report.aggregates[0].scored_count, 5);
}
