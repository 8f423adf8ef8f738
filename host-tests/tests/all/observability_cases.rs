use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use oma_host_tests::{
    agent_config, endpoint, oma_json, AgentConfig, CannedResponse, CaptureOutbound, ErrorKind,
    GuestOptions, RecordedRequest, RunInput, ScriptedHost, ToolDefinition, ToolOutcome,
    ToolResultContent, TraceOptions,
};
use serde_json::{json, Value};

use crate::worlds::AnyGuest as Guest;

/// An Anthropic answer: a text, or a call of `lookup`.
fn answer(call: bool) -> Value {
    let content = if call {
        json!([{"type": "tool_use", "id": "t1", "name": "lookup",
                "input": {"city": "Paris", "password": "hunter2"}}])
    } else {
        json!([{"type": "text", "text": "Sunny."}])
    };
    json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
        "content": content, "stop_reason": if call { "tool_use" } else { "end_turn" },
        "usage": {"input_tokens": 10, "output_tokens": 5}
    })
}

/// A guest whose provider answers a tool call, then text, and whose host's tool answers.
async fn guest(host: ScriptedHost) -> Guest {
    let count = Arc::new(AtomicUsize::new(0));
    let outbound = CaptureOutbound::new(move |_request: &RecordedRequest| {
        let n = count.fetch_add(1, Ordering::SeqCst);
        CannedResponse {
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            body: answer(n == 0).to_string().into_bytes(),
        }
    });
    let options = GuestOptions {
        hooks: Some(Box::new(outbound)),
        host: Some(Box::new(host)),
        ..Default::default()
    };
    Guest::instantiate(super::WORLD, options).await
}

fn config(records: &str) -> AgentConfig {
    let mut config = agent_config(
        "forecaster",
        "claude-sonnet-4-6",
        endpoint("anthropic", None, Some("sk-obs-SECRET-1234")),
    );
    config.tools = vec![ToolDefinition {
        name: "lookup".into(),
        description: "Looks up".into(),
        input_schema: r#"{"type":"object"}"#.into(),
    }];
    config.records = Some(records.into());
    config
}

/// OMA's records of a tool round trip through this world's host (`host.trace-records`, or
/// `trace-records` steps): one trace of a run span, the agent's span, two model calls and a tool
/// call, every record processed by the capture policy (the tool's input captured, redacted);
/// the legacy events ride on the span ends they are a view of, equal to those the host got.
#[tokio::test]
async fn a_recorded_run_delivers_omas_records() {
    let host = ScriptedHost::new().with_tool(|_| ToolOutcome {
        content: ToolResultContent::Text("18C, key sk-abcdefghijklmnopqrstuv".into()),
        is_error: None,
        gate: None,
    });
    let log = host.log();
    let mut guest = guest(host).await;
    let mut config = config(
        r#"{"capture": {"toolInput": "redacted"}, "runId": "run-obs", "metadata": {"dataset": "d1"}}"#,
    );
    config.trace = Some(TraceOptions {
        run_id: None,
        span_id: None,
        parent_id: None,
        agent: None,
        task_id: None,
    });
    let agent = guest.create_agent(&config).await.unwrap().unwrap();
    let result = guest
        .run(&agent, &RunInput::Text("Weather?".into()))
        .await
        .unwrap()
        .unwrap();
    assert!(result.success, "{result:?}");
    let log = log.lock();
    let records: Vec<Value> = log
        .records
        .iter()
        .map(|r| serde_json::from_str(&r.json).expect("a record is JSON"))
        .collect();
    let shape: Vec<String> = records
        .iter()
        .map(|r| format!("{} {}", r["recordType"].as_str().unwrap(), r["name"].as_str().unwrap()))
        .collect();
    assert_eq!(
        shape,
        [
            "span_start oma.run",
            "span_start invoke_agent",
            "span_start chat",
            "span_end chat",
            "span_start execute_tool",
            "span_end execute_tool",
            "span_start chat",
            "span_end chat",
            "span_end invoke_agent",
            "span_end oma.run",
        ]
    );
    for (at, record) in records.iter().enumerate() {
        assert_eq!(record["traceId"], records[0]["traceId"]);
        assert_eq!(record["sequence"], at + 1);
        assert_eq!(record["runId"], "run-obs");
    }
    assert_eq!(records[0]["attributes"]["oma.meta.dataset"], "d1");
    assert_eq!(
        records[5]["attributes"]["oma.tool.input"],
        r#"{"city":"Paris","password":"[redacted]"}"#
    );
    assert!(records[5]["attributes"].get("oma.tool.output").is_none());
    assert_eq!(records[3]["attributes"]["oma.usage.input_tokens"], 10);
    assert_eq!(records[8]["attributes"]["oma.agent.name"], "forecaster");
    let text = serde_json::to_string(&records).expect("JSON");
    assert!(!text.contains("SECRET") && !text.contains("hunter2"), "{text}");
    // The legacy view: the events the host got, riding on their span ends.
    let carried: Vec<Value> = log
        .records
        .iter()
        .filter_map(|r| r.legacy.as_deref())
        .map(|l| serde_json::from_str(l).expect("a legacy event is JSON"))
        .collect();
    let events: Vec<Value> = log.traces.iter().map(oma_json::trace_json).collect();
    assert_eq!(carried, events);
    assert_eq!(events.len(), 4);
    assert!(events.iter().all(|e| e["runId"] == "run-obs"));
}

/// A run's records reach the host's trace sinks (`ScriptedHost::with_sink`) in order: a
/// composite of a closure, a child that fails every record, the legacy-callback sink on its
/// worker thread, and a batching sink. The failing child stops neither the others nor the run;
/// after shutdown the callback has had the legacy events the host got, and the closure and the
/// batching sink's exporter every record.
#[tokio::test]
async fn a_runs_records_reach_omas_sinks() {
    use oma_host_tests::observability::{
        AbortSignal, BatchingOptions, BatchingTraceSink, CompositeTraceSink, DiagnosticOptions,
        ExportResult, FlushStatus, FnSink, LegacyCallbackTraceSink, SinkError, TraceExporter,
        TraceSink,
    };
    use oma_host_tests::TraceRecord;
    use std::sync::Mutex;

    struct Refuses;
    impl TraceSink for Refuses {
        fn emit(&self, _record: &TraceRecord) -> Result<(), SinkError> {
            Err("refused".into())
        }
    }
    #[derive(Default)]
    struct Collects(Mutex<Vec<TraceRecord>>);
    impl TraceExporter for Collects {
        fn export(
            &self,
            records: &[TraceRecord],
            _signal: &AbortSignal,
        ) -> Result<ExportResult, SinkError> {
            self.0.lock().unwrap().extend_from_slice(records);
            Ok(ExportResult::success(records.len() as u64))
        }
    }
    let collected = Arc::new(Collects::default());
    let batching = BatchingTraceSink::new(collected.clone(), BatchingOptions::default())
        .expect("the batching sink");

    let events = Arc::new(Mutex::new(Vec::<Value>::new()));
    let seen = events.clone();
    let legacy = LegacyCallbackTraceSink::on_thread(
        move |event: &Value| {
            seen.lock().unwrap().push(event.clone());
            Ok(())
        },
        DiagnosticOptions::default(),
    )
    .expect("a worker thread");
    let names = Arc::new(Mutex::new(Vec::<String>::new()));
    let into = names.clone();
    let closure = FnSink::new(move |record: &TraceRecord| {
        let value: Value = serde_json::from_str(&record.json).unwrap();
        into.lock().unwrap().push(value["name"].as_str().unwrap().to_owned());
    });
    let codes = Arc::new(Mutex::new(Vec::<String>::new()));
    let diagnosed = codes.clone();
    let composite = Arc::new(CompositeTraceSink::new(
        [
            Arc::new(closure) as Arc<dyn TraceSink>,
            Arc::new(Refuses),
            Arc::new(legacy),
            Arc::new(batching),
        ],
        DiagnosticOptions::handler(move |d| diagnosed.lock().unwrap().push(d.code.as_str().into())),
    ));
    let host = ScriptedHost::new()
        .with_tool(|_| ToolOutcome {
            content: ToolResultContent::Text("18C".into()),
            is_error: None,
            gate: None,
        })
        .with_sink(composite.clone());
    let log = host.log();
    let mut guest = guest(host).await;
    let mut config = config(r#"{"runId": "run-sinks"}"#);
    config.trace = Some(TraceOptions {
        run_id: None,
        span_id: None,
        parent_id: None,
        agent: None,
        task_id: None,
    });
    let agent = guest.create_agent(&config).await.unwrap().unwrap();
    let result = guest
        .run(&agent, &RunInput::Text("Weather?".into()))
        .await
        .unwrap()
        .unwrap();
    assert!(result.success, "{result:?}");
    let flushed = composite
        .shutdown(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    // The legacy sink delivered its four events and the batching sink the ten records; the
    // refusing child has no counters.
    assert_eq!(flushed.status, FlushStatus::Ok, "{flushed:?}");
    assert_eq!((flushed.accepted, flushed.exported), (14, 14));
    let log = log.lock();
    let logged: Vec<String> = log
        .records
        .iter()
        .map(|r| serde_json::from_str::<Value>(&r.json).unwrap()["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(logged.len(), 10);
    assert_eq!(*names.lock().unwrap(), logged);
    assert_eq!(*collected.0.lock().unwrap(), log.records);
    let traces: Vec<Value> = log.traces.iter().map(oma_json::trace_json).collect();
    assert_eq!(*events.lock().unwrap(), traces);
    assert_eq!(codes.lock().unwrap().len(), 10, "one sink_emit_failed a record");
    assert!(codes.lock().unwrap().iter().all(|c| c == "sink_emit_failed"));
    assert_eq!(composite.stats().unwrap().failed, 10);
}

/// A run's records through OMA's `SensitiveDataProcessor` in front of a sink, called on the run's
/// path: the run captures tool inputs and outputs, the processor (a portable guest of its own,
/// on its thread) keeps the outputs only, so its sink gets every record the host got, less the
/// inputs.
#[tokio::test]
async fn a_runs_records_pass_a_sensitive_data_processor() {
    use oma_host_tests::observability::{FnSink, SensitiveDataProcessor};
    use oma_host_tests::{DriverHarness, Shared, TraceRecord};
    use std::sync::Mutex;

    let codec = DriverHarness::shared()
        .expect("the harness")
        .instantiate_with(GuestOptions::default())
        .await
        .expect("the portable guest");
    let kept = Arc::new(Mutex::new(Vec::<Value>::new()));
    let into = kept.clone();
    let sink = FnSink::new(move |record: &TraceRecord| {
        into.lock()
            .unwrap()
            .push(serde_json::from_str(&record.json).unwrap());
    });
    let processor = SensitiveDataProcessor::new(
        sink,
        codec,
        &json!({"capture": {"toolOutput": "redacted"}}),
    )
    .expect("OMA's options");
    let host = ScriptedHost::new()
        .with_tool(|_| ToolOutcome {
            content: ToolResultContent::Text("18C".into()),
            is_error: None,
            gate: None,
        })
        .with_sink(processor);
    let log = host.log();
    let mut guest = guest(host).await;
    let config = config(
        r#"{"runId": "run-processed", "capture": {"toolInput": "redacted", "toolOutput": "redacted"}}"#,
    );
    let agent = guest.create_agent(&config).await.unwrap().unwrap();
    let result = guest
        .run(&agent, &RunInput::Text("Weather?".into()))
        .await
        .unwrap()
        .unwrap();
    assert!(result.success, "{result:?}");
    let logged: Vec<Value> = log
        .lock()
        .records
        .iter()
        .map(|r| serde_json::from_str(&r.json).unwrap())
        .collect();
    let kept = kept.lock().unwrap();
    assert_eq!(kept.len(), logged.len());
    let attribute = |records: &[Value], key: &str| -> Vec<Value> {
        records
            .iter()
            .filter_map(|r| r["attributes"].get(key).cloned())
            .collect()
    };
    assert!(!attribute(&logged, "oma.tool.input").is_empty());
    assert!(attribute(&kept, "oma.tool.input").is_empty());
    assert!(!attribute(&kept, "oma.tool.output").is_empty());
    assert_eq!(
        attribute(&kept, "oma.tool.output"),
        attribute(&logged, "oma.tool.output")
    );
    for (kept, logged) in kept.iter().zip(&logged) {
        assert_eq!(kept["recordId"], logged["recordId"]);
    }
}

/// Records without the legacy view carry none; options OMA refuses fail `create`, naming them.
#[tokio::test]
async fn records_alone_and_refused_options() {
    let host = ScriptedHost::new().with_tool(|_| ToolOutcome {
        content: ToolResultContent::Text("18C".into()),
        is_error: None,
        gate: None,
    });
    let log = host.log();
    let mut guest = guest(host).await;
    let agent = guest.create_agent(&config("{}")).await.unwrap().unwrap();
    let result = guest
        .run(&agent, &RunInput::Text("Weather?".into()))
        .await
        .unwrap()
        .unwrap();
    assert!(result.success);
    {
        let log = log.lock();
        assert_eq!(log.records.len(), 10);
        assert!(log.records.iter().all(|r| r.legacy.is_none()));
        assert!(log.traces.is_empty());
    }
    for (records, named) in [
        (r#"{"capture": {"prompt": "all"}}"#, "capture.prompt"),
        (r#"{"sinks": []}"#, "sinks"),
        (r#"{"runId": ""}"#, "runId must contain between 1 and 128 characters."),
        (r#"{"metadata": {"oma.x": 1}}"#, "reserved \"oma.\" prefix"),
    ] {
        let error = guest
            .create_agent(&config(records))
            .await
            .unwrap()
            .expect_err("refused");
        assert_eq!(error.kind, ErrorKind::Other, "{records}");
        assert!(error.message.contains(named), "{records}: {}", error.message);
    }
}

/// OMA's `materializeRun` and `buildExecutionReceipt` through this world's codec: the shared
/// tables (`fixtures/observability/materialize.json`, `receipt.json`) the core's tests run.
#[tokio::test]
async fn the_codec_materializes_runs_and_builds_receipts_as_the_tables_say() {
    let mut guest = Guest::instantiate(super::WORLD, GuestOptions::default()).await;
    let table: Value = serde_json::from_str(include_str!(
        "../../../fixtures/observability/materialize.json"
    ))
    .expect("the table");
    for case in table["cases"].as_array().expect("cases") {
        let name = case["name"].as_str().expect("a name");
        let include = case["includeRecords"].as_bool().unwrap_or(false);
        let run = guest
            .materialize_run(&case["records"].to_string(), include)
            .await
            .unwrap()
            .expect(name);
        assert_eq!(run, case["expect"].to_string(), "{name}");
    }
    for refused in table["refused"].as_array().expect("refused") {
        let field = refused["field"].as_str().expect("a field");
        let error = guest
            .materialize_run(&refused["records"].to_string(), false)
            .await
            .unwrap()
            .expect_err(field);
        assert!(error.message.contains(field), "{field}: {}", error.message);
    }
    let not_a_list = guest.materialize_run("{}", false).await.unwrap();
    assert!(not_a_list.is_err());

    let table: Value =
        serde_json::from_str(include_str!("../../../fixtures/observability/receipt.json"))
            .expect("the table");
    for case in table["cases"].as_array().expect("cases") {
        let name = case["name"].as_str().expect("a name");
        let trace = case.get("trace").map(Value::to_string);
        let receipt = guest
            .build_execution_receipt(&case["result"].to_string(), trace.as_deref())
            .await
            .unwrap()
            .expect(name);
        assert_eq!(receipt, case["expect"].to_string(), "{name}");
    }
    let broken = guest.build_execution_receipt("{", None).await.unwrap();
    assert!(broken.is_err(), "text that is not JSON");
}
