//! OMA's composite and legacy-callback sinks of the Rust embedding (`oma_wasmtime::observability`)
//! over the shared tables `fixtures/observability/composite.json` and `legacy.json`, the ones
//! the JavaScript and Python packages run against their own sinks; each step emits a record of
//! `records.json` by name.
//!
//! How the tables' scripted behaviours map to Rust: a child or callback that "throws" returns
//! an error (`getStats` that throws: a `stats` that panics, the one fallible call OMA's
//! interface has that Rust's returns no `Result` for); one that "hangs" blocks its thread on a
//! gate the case opens when it ends, so no thread outlives it; OMA's asynchronous callbacks are
//! callbacks run by `LegacyCallbackTraceSink::on_thread`'s worker (see `CALLBACKS`). Every row
//! of both tables runs.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use oma_host_tests::observability::{
    CompositeTraceSink, DiagnosticOptions, FlushResult, LegacyCallbackTraceSink, SinkError,
    TraceSink, TraceSinkStats,
};
use oma_host_tests::TraceRecord;
use serde_json::{json, Value};

use crate::common::fixture;

/// How each kind of legacy callback of `legacy.json` is built in Rust, and why. The test checks
/// that the table uses exactly these kinds.
const CALLBACKS: &[(&str, &str)] = &[
    ("sync", "an inline callback returning Ok"),
    ("syncThrows", "an inline callback returning an error"),
    (
        "async",
        "a callback on the sink's worker thread (Rust's counterpart of a promise) that takes \
         10 ms and returns Ok",
    ),
    (
        "asyncRejects",
        "a callback on the worker thread that takes 10 ms and returns an error",
    ),
    (
        "asyncHangs",
        "a callback on the worker thread that blocks until the case ends",
    ),
];

/// Longest a step with a bound of at most 1 s may take: a hang never holds a flush past it.
const STEP_CEILING: Duration = Duration::from_secs(5);

fn records() -> Value {
    fixture(include_str!("../../../fixtures/observability/records.json"))["records"].clone()
}

/// A gate scripted hangs wait on; opened when the case ends (also when it fails).
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    opened: Condvar,
}

impl Gate {
    fn wait(&self) {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.opened.wait(open).unwrap();
        }
    }

    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }
}

/// Opens its gate when dropped.
struct Opens(Arc<Gate>);

impl Drop for Opens {
    fn drop(&mut self) {
        self.0.open();
    }
}

/// A child sink scripted by a row of `composite.json` (its `contract.children`).
struct Child {
    script: Value,
    names: HashMap<String, String>,
    received: Mutex<Vec<String>>,
    gate: Arc<Gate>,
}

impl Child {
    fn answer(&self, script: &Value) -> Result<FlushResult, SinkError> {
        if script.is_null() {
            return Ok(FlushResult::OK);
        }
        if let Some(text) = script["throws"].as_str() {
            return Err(text.into());
        }
        if script["hangs"] == true {
            self.gate.wait();
            return Ok(FlushResult::OK);
        }
        Ok(flush_from_json(script))
    }
}

impl TraceSink for Child {
    fn emit(&self, record: &TraceRecord) -> Result<(), SinkError> {
        if self.script["emitThrows"] == true {
            return Err("broken".into());
        }
        if self.script["records"] == true {
            let value: Value = serde_json::from_str(&record.json).unwrap();
            let id = value["recordId"].as_str().unwrap();
            self.received.lock().unwrap().push(self.names[id].clone());
        }
        Ok(())
    }

    fn force_flush(&self, _timeout: Option<Duration>) -> Result<FlushResult, SinkError> {
        self.answer(&self.script["flush"])
    }

    fn shutdown(&self, _timeout: Option<Duration>) -> Result<FlushResult, SinkError> {
        self.answer(&self.script["shutdown"])
    }

    fn stats(&self) -> Option<TraceSinkStats> {
        assert!(self.script["statsThrow"] != true, "scripted stats failure");
        let stats = &self.script["stats"];
        (!stats.is_null()).then(|| TraceSinkStats {
            accepted: stats["accepted"].as_u64().unwrap(),
            exported: stats["exported"].as_u64().unwrap(),
            retried: stats["retried"].as_u64().unwrap(),
            failed: stats["failed"].as_u64().unwrap(),
            dropped: stats["dropped"].as_u64().unwrap(),
            queued_records: stats["queuedRecords"].as_u64().unwrap(),
            queued_bytes: stats["queuedBytes"].as_u64().unwrap(),
            last_error: stats["lastError"].as_str().map(str::to_owned),
        })
    }
}

fn flush_from_json(value: &Value) -> FlushResult {
    let status = match value["status"].as_str().unwrap() {
        "ok" => oma_host_tests::FlushStatus::Ok,
        "partial" => oma_host_tests::FlushStatus::Partial,
        "timeout" => oma_host_tests::FlushStatus::Timeout,
        "error" => oma_host_tests::FlushStatus::Error,
        other => panic!("status {other}"),
    };
    FlushResult {
        status,
        accepted: value["accepted"].as_u64().unwrap(),
        exported: value["exported"].as_u64().unwrap(),
        dropped: value["dropped"].as_u64().unwrap(),
        failed: value["failed"].as_u64().unwrap(),
    }
}

fn flush_json(result: &FlushResult) -> Value {
    json!({"status": result.status.as_str(), "accepted": result.accepted,
           "exported": result.exported, "dropped": result.dropped, "failed": result.failed})
}

/// The counters under OMA's names, `queued` and `lastFailureCode` being the aliases.
fn stats_json(stats: &TraceSinkStats) -> Value {
    let mut out = json!({"accepted": stats.accepted, "exported": stats.exported,
        "retried": stats.retried, "failed": stats.failed, "dropped": stats.dropped,
        "queuedRecords": stats.queued_records, "queuedBytes": stats.queued_bytes,
        "queued": stats.queued_records});
    if let Some(error) = &stats.last_error {
        out["lastError"] = json!(error);
        out["lastFailureCode"] = json!(error);
    }
    out
}

/// Runs `steps` against `sink` (the contract's `steps`), emitting records of `records.json`.
fn run_steps(name: &str, sink: &dyn TraceSink, steps: &Value, records: &Value) {
    for step in steps.as_array().unwrap() {
        if let Some(record) = step["emit"].as_str() {
            let record = TraceRecord {
                json: records[record].to_string(),
                legacy: step.get("legacy").map(Value::to_string),
            };
            let started = Instant::now();
            sink.emit(&record)
                .expect("a composite or legacy sink's emit never fails");
            assert!(started.elapsed() < STEP_CEILING, "{name}: emit held");
        } else if let Some(stats) = step.get("stats") {
            let got = stats_json(&sink.stats().expect("counters"));
            let wanted = stats.as_object().unwrap();
            let counters = [
                "accepted",
                "exported",
                "retried",
                "failed",
                "dropped",
                "queuedRecords",
                "queuedBytes",
                "queued",
            ];
            if counters.iter().all(|key| wanted.contains_key(*key)) {
                assert_eq!(&got, stats, "{name}: stats");
            } else {
                for (key, value) in wanted {
                    assert_eq!(&got[key], value, "{name}: stats.{key} in {got}");
                }
            }
        } else {
            let (operation, options) = match (step.get("flush"), step.get("shutdown")) {
                (Some(options), None) => ("flush", options),
                (None, Some(options)) => ("shutdown", options),
                _ => panic!("{name}: a step the contract does not name: {step}"),
            };
            let timeout = Duration::from_millis(options["timeoutMs"].as_u64().unwrap());
            let started = Instant::now();
            let result = match operation {
                "flush" => sink.force_flush(Some(timeout)),
                _ => sink.shutdown(Some(timeout)),
            }
            .expect("a composite or legacy sink's flush never fails");
            assert!(
                started.elapsed() < timeout + STEP_CEILING,
                "{name}: {operation} held past its bound"
            );
            assert_eq!(flush_json(&result), step["expect"], "{name}: {operation}");
        }
    }
}

/// Diagnostics reported, by code, each one (no throttle, OMA's `diagnosticIntervalMs: 0`).
fn diagnostics() -> (DiagnosticOptions, Arc<Mutex<Vec<String>>>) {
    let codes = Arc::new(Mutex::new(Vec::new()));
    let seen = codes.clone();
    let options = DiagnosticOptions::handler(move |diagnostic| {
        seen.lock()
            .unwrap()
            .push(diagnostic.code.as_str().to_owned());
    });
    (options, codes)
}

fn assert_diagnostics(name: &str, expect: &Value, codes: &Mutex<Vec<String>>) {
    let mut got = codes.lock().unwrap().clone();
    let mut wanted: Vec<String> = expect["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_owned())
        .collect();
    if expect["diagnosticsUnordered"] == true {
        got.sort();
        wanted.sort();
    }
    assert_eq!(got, wanted, "{name}: diagnostics");
}

#[test]
fn composite_table() {
    let table = fixture(include_str!(
        "../../../fixtures/observability/composite.json"
    ));
    let records = records();
    let names: HashMap<String, String> = records
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, r)| (r["recordId"].as_str().unwrap().to_owned(), name.clone()))
        .collect();
    let cases = table["cases"].as_array().unwrap();
    assert!(cases.len() >= 10);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let gate = Arc::new(Gate::default());
        let _opens = Opens(gate.clone());
        let children: Vec<Arc<Child>> = case["children"]
            .as_array()
            .unwrap()
            .iter()
            .map(|script| {
                Arc::new(Child {
                    script: script.clone(),
                    names: names.clone(),
                    received: Mutex::new(Vec::new()),
                    gate: gate.clone(),
                })
            })
            .collect();
        let (options, codes) = diagnostics();
        let sinks = children.iter().map(|c| c.clone() as Arc<dyn TraceSink>);
        let composite = CompositeTraceSink::new(sinks, options);
        run_steps(name, &composite, &case["steps"], &records);
        if let Some(received) = case["expect"].get("received") {
            let got: Vec<Vec<String>> = children
                .iter()
                .filter(|c| c.script["records"] == true)
                .map(|c| c.received.lock().unwrap().clone())
                .collect();
            assert_eq!(json!(got), *received, "{name}: received");
        }
        assert_diagnostics(name, &case["expect"], &codes);
    }
}

#[test]
fn legacy_table() {
    let table = fixture(include_str!("../../../fixtures/observability/legacy.json"));
    let records = records();
    let cases = table["cases"].as_array().unwrap();
    let mut used: Vec<&str> = cases
        .iter()
        .map(|c| c["callback"].as_str().unwrap())
        .collect();
    used.sort();
    used.dedup();
    let mut known: Vec<&str> = CALLBACKS.iter().map(|(kind, _)| *kind).collect();
    known.sort();
    assert_eq!(
        used, known,
        "every callback kind of the table, and only those, is mapped"
    );
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let kind = case["callback"].as_str().unwrap();
        let gate = Arc::new(Gate::default());
        let _opens = Opens(gate.clone());
        let events = Arc::new(Mutex::new(Vec::<Value>::new()));
        let seen = events.clone();
        let waits = gate.clone();
        let kind_owned = kind.to_owned();
        let callback = move |event: &Value| -> Result<(), SinkError> {
            seen.lock().unwrap().push(event.clone());
            match kind_owned.as_str() {
                "sync" => Ok(()),
                "syncThrows" => Err("broken".into()),
                "async" => {
                    std::thread::sleep(Duration::from_millis(10));
                    Ok(())
                }
                "asyncRejects" => {
                    std::thread::sleep(Duration::from_millis(10));
                    Err("rejected".into())
                }
                _ => {
                    waits.wait();
                    Ok(())
                }
            }
        };
        let (options, codes) = diagnostics();
        let sink = if kind.starts_with("sync") {
            LegacyCallbackTraceSink::new(callback, options)
        } else {
            LegacyCallbackTraceSink::on_thread(callback, options).expect("a worker thread")
        };
        run_steps(name, &sink, &case["steps"], &records);
        assert_eq!(
            json!(*events.lock().unwrap()),
            case["expect"]["events"],
            "{name}: events"
        );
        assert_diagnostics(name, &case["expect"], &codes);
    }
}
