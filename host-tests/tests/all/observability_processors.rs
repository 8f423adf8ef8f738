//! OMA's record processors of the Rust embedding (`oma_wasmtime::observability`'s
//! `SensitiveDataProcessor` and `FilteringSink`) over the shared table
//! `fixtures/observability/processors.json`, the one the JavaScript and Python packages run
//! against theirs. Every row runs: the processor's cases and refusals in both worlds (the
//! processing is each world's codec, `process-trace-record`), the filtering cases once (no guest
//! is involved), with a predicate that "raises" panicking.

use std::sync::{Arc, Mutex};

use oma_host_tests::observability::{
    FilteringSink, FnSink, RecordProcessor, SensitiveDataError, SensitiveDataProcessor, TraceSink,
};
use oma_host_tests::{DriverHarness, GuestOptions, Harness, Shared, TraceRecord};
use serde_json::{json, Value};

use crate::worlds::World;

fn table() -> Value {
    serde_json::from_str(include_str!(
        "../../../fixtures/observability/processors.json"
    ))
    .expect("the table")
}

fn records() -> Value {
    serde_json::from_str::<Value>(include_str!("../../../fixtures/observability/records.json"))
        .expect("the records")["records"]
        .clone()
}

async fn codec(world: World) -> Box<dyn RecordProcessor> {
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

/// What a recording sink was handed.
type Received = Arc<Mutex<Vec<TraceRecord>>>;

/// A sink that keeps what it is handed.
fn recording() -> (FnSink<impl FnMut(&TraceRecord) + Send>, Received) {
    let received = Received::default();
    let kept = received.clone();
    let sink = FnSink::new(move |record: &TraceRecord| kept.lock().unwrap().push(record.clone()));
    (sink, received)
}

async fn run_table(world: World) {
    let table = table();
    let cases = table["cases"].as_array().expect("cases");
    assert!(cases.len() >= 10);
    for case in cases {
        let name = case["name"].as_str().expect("a name");
        let (inner, received) = recording();
        let processor = SensitiveDataProcessor::new(inner, codec(world).await, &case["processor"])
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let record = TraceRecord {
            json: case["record"].to_string(),
            legacy: Some(r#"{"type":"llm_call"}"#.into()),
        };
        processor
            .emit(&record)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let received = received.lock().unwrap();
        if case["expect"].is_null() {
            assert!(received.is_empty(), "{name}: {received:?}");
            continue;
        }
        assert_eq!(received.len(), 1, "{name}");
        let got: Value = serde_json::from_str(&received[0].json).expect("JSON");
        assert_eq!(got, case["expect"], "{name}");
        // Key order too, as a sink that writes the JSON sees it.
        assert_eq!(received[0].json, case["expect"].to_string(), "{name}");
        assert_eq!(
            received[0].legacy, None,
            "{name}: the processed record is a new one"
        );
    }
    for refused in table["refused"].as_array().expect("refused") {
        let option = refused["option"].as_str().expect("an option");
        let (inner, received) = recording();
        match SensitiveDataProcessor::new(inner, codec(world).await, &refused["processor"]) {
            Err(SensitiveDataError::Refused { name, message }) => {
                assert!(
                    name == "TypeError" || name == "RangeError",
                    "{option}: {name}"
                );
                assert!(
                    message.contains(&format!("`{option}`")),
                    "{option}: {message}"
                );
            }
            other => panic!("{option}: {other:?}"),
        }
        assert!(received.lock().unwrap().is_empty());
    }
}

#[tokio::test]
async fn the_processor_table_runs_through_the_component_world() {
    run_table(World::Component).await;
}

#[tokio::test]
async fn the_processor_table_runs_through_the_portable_world() {
    run_table(World::Driver).await;
}

#[tokio::test]
async fn a_record_that_is_not_one_is_refused_and_nothing_delivered() {
    for world in [World::Component, World::Driver] {
        let (inner, received) = recording();
        let processor =
            SensitiveDataProcessor::new(inner, codec(world).await, &json!({})).expect("made");
        for bad in ["not json", "[]", r#"{"recordType":"span_start"}"#] {
            let record = TraceRecord {
                json: bad.into(),
                legacy: None,
            };
            let error = processor.emit(&record).expect_err(bad).to_string();
            assert!(!error.contains(bad), "{bad}: {error}");
        }
        assert!(received.lock().unwrap().is_empty());
        // The processor goes on after a refusal.
        let good = records()["llm_end"].to_string();
        processor
            .emit(&TraceRecord {
                json: good,
                legacy: None,
            })
            .expect("processed");
        assert_eq!(received.lock().unwrap().len(), 1);
    }
}

#[test]
fn the_filtering_table() {
    let table = table();
    let records = records();
    let filtering = table["filtering"].as_array().expect("filtering");
    assert!(!filtering.is_empty());
    for case in filtering {
        let name = case["name"].as_str().expect("a name");
        let keep = case["keep"].as_object().expect("keep").clone();
        let throws_for = keep
            .get("throwsFor")
            .and_then(Value::as_str)
            .map(|name| records[name].clone());
        let (inner, received) = recording();
        let sink = FilteringSink::new(inner, move |record: &TraceRecord| {
            let record: Value = serde_json::from_str(&record.json).expect("JSON");
            match &throws_for {
                Some(raises) => {
                    assert!(&record != raises, "the predicate raises for this record");
                    true
                }
                None => keep.iter().all(|(key, value)| &record[key] == value),
            }
        });
        for emitted in case["emit"].as_array().expect("emit") {
            let record = &records[emitted.as_str().expect("a name")];
            assert!(record.is_object(), "{name}: {emitted}");
            sink.emit(&TraceRecord {
                json: record.to_string(),
                legacy: None,
            })
            .expect("a filter never fails the caller");
        }
        let got: Vec<Value> = received
            .lock()
            .unwrap()
            .iter()
            .map(|record| serde_json::from_str(&record.json).expect("JSON"))
            .collect();
        let expect: Vec<Value> = case["expect"]
            .as_array()
            .expect("expect")
            .iter()
            .map(|name| records[name.as_str().expect("a name")].clone())
            .collect();
        assert_eq!(got, expect, "{name}");
    }
}
