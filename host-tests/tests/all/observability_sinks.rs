//! OMA's batching, composite and legacy-callback sinks of the Rust embedding
//! (`oma_wasmtime::observability`) over the shared tables `fixtures/observability/batching.json`,
//! `composite.json` and `legacy.json`, the ones the JavaScript and Python packages run against
//! their own sinks; each step emits a record of `records.json` by name.
//!
//! How the tables' scripted behaviours map to Rust: a child, callback or exporter that "throws"
//! returns an error (`getStats` that throws: a `stats` that panics, the one fallible call OMA's
//! interface has that Rust's returns no `Result` for); one that "hangs" blocks its thread on a
//! gate the case opens when it ends, so no thread outlives it; OMA's asynchronous callbacks are
//! callbacks run by `LegacyCallbackTraceSink::on_thread`'s worker (see `CALLBACKS`); a record
//! that is not JSON is text that does not parse. Every row of the composite and legacy tables
//! runs; the batching rows that cannot apply are in `BATCHING_EXCEPTIONS`, and the refused
//! options the types cannot hold in `REFUSED_BY_TYPE`, both checked against the table.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use oma_host_tests::observability::{
    AbortSignal, BatchingOptions, BatchingTraceSink, CompositeTraceSink, DiagnosticMode,
    DiagnosticOptions, ExportResult, ExportStatus, FlushResult, LegacyCallbackTraceSink, SinkError,
    TraceExporter, TraceSink, TraceSinkStats,
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
            // A key given as null must be absent.
            let present: serde_json::Map<String, Value> = wanted
                .iter()
                .filter(|(_, value)| !value.is_null())
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect();
            if counters.iter().all(|key| wanted.contains_key(*key)) {
                assert_eq!(got, Value::Object(present), "{name}: stats");
            } else {
                for (key, value) in wanted {
                    let at = got.get(key).unwrap_or(&Value::Null);
                    assert_eq!(at, value, "{name}: stats.{key} in {got}");
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

/// The rows of `batching.json` whose exporter answers what a Rust exporter cannot (its answer
/// is a typed `ExportResult`), by the answer's key, and why. The test checks that exactly these
/// rows are left out.
const BATCHING_EXCEPTIONS: &[(&str, &str)] = &[(
    "returns",
    "an exporter answering a value that is not an export result, or one with a status OMA does \
     not know: TraceExporter::export returns an ExportResult, whose status is an enum",
)];

/// The `refused` rows of `batching.json` whose value no `BatchingOptions` field can hold (a
/// negative or fractional count, a negative duration, a mode that is not a `DiagnosticMode`):
/// the type refuses them before the sink sees them.
const REFUSED_BY_TYPE: &[&str] = &[
    "maxQueueBytes",
    "maxRecordBytes",
    "exportTimeoutMs",
    "maxRetries",
    "retryDelayMs",
    "diagnostics",
];

/// An exporter scripted by a row of `batching.json` (its `contract.exporter`).
struct Exporter {
    answers: Vec<Value>,
    flush: Value,
    shutdown: Value,
    names: HashMap<String, String>,
    calls: Mutex<Vec<Vec<String>>>,
    called: Condvar,
    gate: Arc<Gate>,
}

impl Exporter {
    fn answer(&self, script: &Value, batch: u64) -> Result<ExportResult, SinkError> {
        if let Some(text) = script["throws"].as_str() {
            return Err(text.into());
        }
        if script["hangs"] == true {
            self.gate.wait();
            return Ok(ExportResult::success(0));
        }
        let status = match script["status"].as_str().unwrap() {
            "success" => ExportStatus::Success,
            "retryable" => ExportStatus::Retryable,
            "failure" => ExportStatus::Failure,
            other => panic!("status {other}"),
        };
        Ok(ExportResult {
            status,
            exported: match &script["exported"] {
                Value::String(all) if all == "all" => batch,
                count => count.as_u64().unwrap(),
            },
            retry_after: script["retryAfterMs"].as_u64().map(Duration::from_millis),
            code: script["code"].as_str().map(str::to_owned),
        })
    }

    fn wait_calls(&self, n: usize) {
        let calls = self.calls.lock().unwrap();
        let _ = self
            .called
            .wait_timeout_while(calls, Duration::from_secs(5), |calls| calls.len() < n)
            .unwrap();
    }
}

impl TraceExporter for Exporter {
    fn export(
        &self,
        records: &[TraceRecord],
        _signal: &AbortSignal,
    ) -> Result<ExportResult, SinkError> {
        let index = {
            let mut calls = self.calls.lock().unwrap();
            calls.push(
                records
                    .iter()
                    .map(|r| {
                        let value: Value = serde_json::from_str(&r.json).unwrap();
                        self.names[value["recordId"].as_str().unwrap()].clone()
                    })
                    .collect(),
            );
            calls.len() - 1
        };
        self.called.notify_all();
        let script = &self.answers[index.min(self.answers.len() - 1)];
        self.answer(script, records.len() as u64)
    }

    fn force_flush(&self, _signal: &AbortSignal) -> Result<ExportResult, SinkError> {
        match &self.flush {
            Value::Null => Ok(ExportResult::success(0)),
            script => self.answer(script, 0),
        }
    }

    fn shutdown(&self, _signal: &AbortSignal) -> Result<ExportResult, SinkError> {
        match &self.shutdown {
            Value::Null => Ok(ExportResult::success(0)),
            script => self.answer(script, 0),
        }
    }
}

/// The size of `names`' records as compact JSON (the contract's `bytesOf`).
fn bytes_of(value: &Value, records: &Value) -> u64 {
    match value.get("bytesOf") {
        Some(names) => names
            .as_array()
            .unwrap()
            .iter()
            .map(|n| records[n.as_str().unwrap()].to_string().len() as u64)
            .sum(),
        None => value.as_u64().unwrap(),
    }
}

/// A row's options as `BatchingOptions` (the contract's: no jitter, every diagnostic, a 60 s
/// scheduled delay unless given), or the option whose value no field can hold.
fn batching_options(
    options: &Value,
    records: &Value,
    diagnostics: DiagnosticOptions,
) -> Result<BatchingOptions, String> {
    let mut out = BatchingOptions {
        scheduled_delay: Duration::from_secs(60),
        retry_jitter: false,
        diagnostics,
        ..BatchingOptions::default()
    };
    for (key, value) in options.as_object().unwrap() {
        let count = || value.as_u64().ok_or_else(|| key.clone());
        let millis = || {
            value
                .as_u64()
                .map(Duration::from_millis)
                .ok_or_else(|| key.clone())
        };
        match key.as_str() {
            "maxQueueRecords" => out.max_queue_records = count()?,
            "maxQueueBytes" if value.get("bytesOf").is_some() => {
                out.max_queue_bytes = bytes_of(value, records)
            }
            "maxQueueBytes" => out.max_queue_bytes = count()?,
            "maxRecordBytes" if value.get("bytesOf").is_some() => {
                out.max_record_bytes = bytes_of(value, records)
            }
            "maxRecordBytes" => out.max_record_bytes = count()?,
            "maxBatchRecords" => out.max_batch_records = count()?,
            "scheduledDelayMs" => out.scheduled_delay = millis()?,
            "exportTimeoutMs" => out.export_timeout = millis()?,
            "maxRetries" => out.max_retries = count()?.try_into().map_err(|_| key.clone())?,
            "retryDelayMs" => out.retry_delay = millis()?,
            "retryBackoff" => out.retry_backoff = value.as_f64().ok_or_else(|| key.clone())?,
            "maxRetryDelayMs" => out.max_retry_delay = millis()?,
            "sinkName" => out.diagnostics.sink_name = Some(value.as_str().unwrap().to_owned()),
            "diagnostics" => match value.as_str() {
                Some("warn") => out.diagnostics.mode = DiagnosticMode::Warn,
                Some("silent") => out.diagnostics.mode = DiagnosticMode::Silent,
                _ => return Err(key.clone()),
            },
            other => panic!("an option the contract does not name: {other}"),
        }
    }
    Ok(out)
}

#[test]
fn batching_table() {
    let table = fixture(include_str!(
        "../../../fixtures/observability/batching.json"
    ));
    let records = records();
    let names: HashMap<String, String> = records
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, r)| (r["recordId"].as_str().unwrap().to_owned(), name.clone()))
        .collect();
    let cases = table["cases"].as_array().unwrap();
    let mut left_out = Vec::new();
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let answers = case["exporter"].as_array().unwrap().clone();
        if let Some((key, _)) = BATCHING_EXCEPTIONS
            .iter()
            .find(|(key, _)| answers.iter().any(|a| a.get(*key).is_some()))
        {
            left_out.push((*key, name));
            continue;
        }
        let gate = Arc::new(Gate::default());
        let _opens = Opens(gate.clone());
        let exporter = Arc::new(Exporter {
            answers,
            flush: case.get("exporterFlush").cloned().unwrap_or(Value::Null),
            shutdown: case.get("exporterShutdown").cloned().unwrap_or(Value::Null),
            names: names.clone(),
            calls: Mutex::new(Vec::new()),
            called: Condvar::new(),
            gate: gate.clone(),
        });
        let diagnosed = Arc::new(Mutex::new(Vec::<(String, Option<String>)>::new()));
        let seen = diagnosed.clone();
        let handler = DiagnosticOptions::handler(move |d| {
            seen.lock()
                .unwrap()
                .push((d.code.as_str().to_owned(), d.sink_name.clone()));
        });
        let options = batching_options(&case["options"], &records, handler).unwrap();
        let sink = BatchingTraceSink::new(exporter.clone(), options).expect("the sink");
        let mut plain = Vec::new();
        for step in case["steps"].as_array().unwrap() {
            if let Some(n) = step["waitExports"].as_u64() {
                run_steps(name, &sink, &json!(std::mem::take(&mut plain)), &records);
                exporter.wait_calls(n as usize);
                // And until the sink has settled what those calls delivered (the rows that wait
                // answer success), as a promise's settling would have before the next step.
                let handed: u64 = exporter.calls.lock().unwrap()[..n as usize]
                    .iter()
                    .map(|batch| batch.len() as u64)
                    .sum();
                let until = Instant::now() + STEP_CEILING;
                while Instant::now() < until {
                    let stats = sink.stats().unwrap();
                    if stats.accepted - stats.queued_records >= handed {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
            } else if let Some(record) = step["emitCyclic"].as_str() {
                run_steps(name, &sink, &json!(std::mem::take(&mut plain)), &records);
                // Rust's records are JSON text: a record that is not JSON is text that is not.
                let text = records[record].to_string();
                let broken = TraceRecord {
                    json: text[..text.len() - 1].to_owned(),
                    legacy: None,
                };
                sink.emit(&broken).unwrap();
            } else if let Some(times) = step["times"].as_u64() {
                let mut once = step.clone();
                once.as_object_mut().unwrap().remove("times");
                plain.extend(std::iter::repeat_n(once, times as usize));
            } else {
                plain.push(step.clone());
            }
        }
        run_steps(name, &sink, &json!(plain), &records);
        assert_eq!(
            json!(*exporter.calls.lock().unwrap()),
            case["expect"]["exports"],
            "{name}: exports"
        );
        let diagnosed = diagnosed.lock().unwrap().clone();
        let codes = Mutex::new(diagnosed.iter().map(|(c, _)| c.clone()).collect());
        assert_diagnostics(name, &case["expect"], &codes);
        if let Some(sink_name) = case["expect"]["sinkName"].as_str() {
            assert!(
                diagnosed
                    .iter()
                    .all(|(_, n)| n.as_deref() == Some(sink_name)),
                "{name}: sink names {diagnosed:?}"
            );
        }
    }
    let mut excepted: Vec<&str> = left_out.iter().map(|(key, _)| *key).collect();
    excepted.dedup();
    assert_eq!(
        excepted,
        BATCHING_EXCEPTIONS
            .iter()
            .map(|(k, _)| *k)
            .collect::<Vec<_>>(),
        "every exception names rows of the table"
    );
    assert_eq!(left_out.len(), 2, "{left_out:?}");

    let mut by_type = Vec::new();
    for row in table["refused"].as_array().unwrap() {
        let option = row["option"].as_str().unwrap();
        match batching_options(&row["options"], &records, DiagnosticOptions::default()) {
            Err(key) => {
                assert_eq!(key, option);
                by_type.push(option);
            }
            Ok(options) => {
                let error = BatchingTraceSink::new(
                    Arc::new(Exporter {
                        answers: vec![],
                        flush: Value::Null,
                        shutdown: Value::Null,
                        names: HashMap::new(),
                        calls: Mutex::new(Vec::new()),
                        called: Condvar::new(),
                        gate: Arc::new(Gate::default()),
                    }),
                    options,
                )
                .expect_err(option)
                .to_string();
                let snake: String = option
                    .trim_end_matches("Ms")
                    .chars()
                    .flat_map(|c| {
                        if c.is_ascii_uppercase() {
                            vec!['_', c.to_ascii_lowercase()]
                        } else {
                            vec![c]
                        }
                    })
                    .collect();
                assert!(
                    error.starts_with(&format!("{snake} must be")),
                    "{option}: {error}"
                );
            }
        }
    }
    assert_eq!(by_type, REFUSED_BY_TYPE);
}
