use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use oma_host_tests::{
    agent_config, endpoint, oma_json, CancelToken, CannedResponse, CaptureOutbound, GuestOptions,
    RecordedRequest, RunAgentOptions, RunInput, ScriptedHost, ToolDefinition, ToolOutcome,
    ToolResultContent,
};
use serde_json::{json, Value};

use crate::worlds::{AnyGuest as Guest, World};

/// The provider's key: it must never reach a record.
const KEY: &str = "sk-ant-runs-SECRET-0042";

/// The rows of `fixtures/observability/runs.json` that cannot run through the Rust host in a
/// world, by the row's `cancel`, and why. The test checks that each names rows of the table and
/// that exactly these rows are left out, so a row is never skipped silently.
const EXCEPTIONS: &[(World, &str, &str)] = &[
    (
        World::Component,
        "tool",
        "a component-world run is one export call with no cancel; the portable world's \
         session.cancel (DriverGuest::run_agent_cancellable) is the Rust host's cancel",
    ),
    (
        World::Component,
        "before",
        "a component-world run is one export call with no cancel; the portable world's \
         session.cancel (DriverGuest::run_agent_cancellable) is the Rust host's cancel",
    ),
];

fn table() -> Vec<Value> {
    let table: Value =
        serde_json::from_str(include_str!("../../../fixtures/observability/runs.json"))
            .expect("the table");
    table["cases"].as_array().expect("cases").clone()
}

/// Why this world leaves `case` out, if it does.
fn exception(case: &Value) -> Option<&'static str> {
    let cancel = case["cancel"].as_str()?;
    EXCEPTIONS
        .iter()
        .find(|(world, row, _)| *world == super::WORLD && *row == cancel)
        .map(|(_, _, why)| *why)
}

/// What one row's run gave: OMA's result JSON, the records the host's record sink received, and
/// how many requests reached the provider.
struct Ran {
    result: Value,
    records: Vec<Value>,
    requests: usize,
}

/// Runs `case` with OMA's `runAgent` (`run-agent`), its records on (`agent-config.records`: the
/// capture policy, the run's id and metadata), against a provider that answers the row's
/// replies in order and a host whose tools answer the row's `returns`; a `cancel` row cancels
/// through the Rust host's cancel token, before the run or from inside the tool.
async fn run(case: &Value) -> Ran {
    let replies: Arc<Mutex<VecDeque<Value>>> = Arc::new(Mutex::new(
        case["replies"].as_array().expect("replies").iter().cloned().collect(),
    ));
    let requests = Arc::new(Mutex::new(0usize));
    let (queue, counted) = (replies.clone(), requests.clone());
    let outbound = CaptureOutbound::new(move |_request: &RecordedRequest| {
        *counted.lock().unwrap() += 1;
        match queue.lock().unwrap().pop_front() {
            Some(reply) => CannedResponse {
                status: reply["status"].as_u64().expect("a status") as u16,
                headers: vec![("content-type".into(), "application/json".into())],
                body: reply["body"].to_string().into_bytes(),
            },
            None => CannedResponse {
                status: 599,
                headers: Vec::new(),
                body: b"no reply scripted for this request".to_vec(),
            },
        }
    });
    let token = CancelToken::new();
    let cancel = case["cancel"].as_str();
    if cancel == Some("before") {
        token.cancel();
    }
    let tools: Vec<Value> = case["agent"]["tools"].as_array().cloned().unwrap_or_default();
    let answers = tools.clone();
    let in_tool = (cancel == Some("tool")).then(|| token.clone());
    let records = Arc::new(Mutex::new(Vec::new()));
    let sink = records.clone();
    let host = ScriptedHost::new()
        .with_tool(move |call| {
            let tool = answers
                .iter()
                .find(|t| t["name"] == call.name.as_str())
                .expect("a tool of the row");
            if let Some(token) = &in_tool {
                token.cancel(); // the caller cancels the run while its tool runs
            }
            ToolOutcome {
                content: ToolResultContent::Text(tool["returns"].as_str().expect("text").into()),
                is_error: None,
                gate: None,
            }
        })
        .with_record_sink(move |record| {
            let record: Value = serde_json::from_str(&record.json).expect("a record is JSON");
            sink.lock().unwrap().push(record);
        });
    let mut guest = Guest::instantiate(
        super::WORLD,
        GuestOptions {
            hooks: Some(Box::new(outbound)),
            host: Some(Box::new(host)),
            ..Default::default()
        },
    )
    .await;
    let agent = &case["agent"];
    let mut config = agent_config(
        agent["name"].as_str().expect("a name"),
        "claude-test",
        endpoint("anthropic", None, Some(KEY)),
    );
    config.tools = tools
        .iter()
        .map(|t| ToolDefinition {
            name: t["name"].as_str().expect("a name").into(),
            description: t["description"].as_str().expect("a description").into(),
            input_schema: t["inputSchema"].to_string(),
        })
        .collect();
    let mut options = json!({"runId": case["run"]["runId"]});
    if let Some(metadata) = case["run"].get("metadata") {
        options["metadata"] = metadata.clone();
    }
    if let Some(capture) = case.get("capture") {
        options["capture"] = capture.clone();
    }
    config.records = Some(options.to_string());
    let input = RunInput::Text(case["run"]["prompt"].as_str().expect("a prompt").into());
    let run_options = RunAgentOptions {
        progress: false,
        evaluation: None,
    };
    let result = match &mut guest {
        Guest::Driver(driver) => {
            driver
                .run_agent_cancellable(&config, &input, &run_options, &token)
                .await
        }
        Guest::Component(_) => {
            assert!(cancel.is_none(), "the component world has no cancel");
            guest.run_agent(&config, &input, &run_options).await
        }
    }
    .expect("no trap")
    .expect("the run starts");
    let records = records.lock().unwrap().clone();
    let requests = *requests.lock().unwrap();
    Ran {
        result: oma_json::run_result_json(&result),
        records,
        requests,
    }
}

/// `fixtures/observability/runs.json`, the table both packages run end to end, through the
/// Rust host: each row's records as its record sink received them, materialized as a store
/// reads a run back (the codec's `materialize-run`, which both packages' stores call), and
/// compared with the row as the packages compare it. The packages' `identity` has no
/// counterpart on the typed result: the records name the run instead (every record carries the
/// row's run id, and the stored run's root is the one root span the sink got).
#[tokio::test]
async fn the_runs_table_through_the_rust_host() {
    let cases = table();
    for (world, cancel, _) in EXCEPTIONS {
        assert!(
            cases.iter().any(|c| c["cancel"] == *cancel),
            "{world:?}: the exception for {cancel:?} names no row of the table"
        );
    }
    let mut ran = 0;
    for case in &cases {
        let name = case["name"].as_str().expect("a name");
        if exception(case).is_some() {
            continue;
        }
        ran += 1;
        let Ran {
            result,
            records,
            requests,
        } = run(case).await;
        let expect = &case["expect"];
        // The typed result states a status only when the run failed; a success is OMA's `ok`.
        let status = match &result["status"]["code"] {
            Value::Null if result["success"] == true => json!("ok"),
            code => code.clone(),
        };
        assert_eq!(
            json!({"success": result["success"], "status": status}),
            expect["result"],
            "{name}: {result}"
        );
        let sent = case["replies"].as_array().expect("replies").len();
        assert_eq!(requests, sent, "{name}: the requests the provider got");
        let mut guest = Guest::instantiate(super::WORLD, GuestOptions::default()).await;
        let stored = guest
            .materialize_run(&Value::from(records.clone()).to_string(), true)
            .await
            .expect("no trap")
            .expect(name);
        let stored: Value = serde_json::from_str(&stored).expect("the stored run is JSON");
        for (key, value) in expect["run"].as_object().expect("run") {
            assert_eq!(&stored[key], value, "{name}: run.{key}");
        }
        let spans = stored["spans"].as_array().expect("spans");
        let mut shapes: Vec<String> = spans
            .iter()
            .map(|s| {
                format!(
                    "{} {} {}",
                    s["kind"].as_str().unwrap_or("-"),
                    s["name"].as_str().unwrap_or("-"),
                    s["status"].as_str().unwrap_or("-")
                )
            })
            .collect();
        shapes.sort();
        assert_eq!(Value::from(shapes), expect["spans"], "{name}: spans");
        let mut counts = json!({"span_start": 0, "span_event": 0, "span_end": 0});
        for record in stored["records"].as_array().expect("records") {
            let kind = record["recordType"].as_str().expect("a record type");
            counts[kind] = json!(counts[kind].as_u64().expect("a count") + 1);
        }
        assert_eq!(counts, expect["records"], "{name}: records");
        for (span, attributes) in expect["attributes"].as_object().expect("attributes") {
            let named: Vec<&Value> = spans
                .iter()
                .filter(|s| format!("{} {}", s["kind"].as_str().unwrap_or("-"), s["name"].as_str().unwrap_or("-")) == *span)
                .collect();
            assert_eq!(named.len(), 1, "{name}: {span}");
            for (key, value) in attributes.as_object().expect("attributes") {
                assert_eq!(&named[0]["attributes"][key], value, "{name}: {span} {key}");
            }
        }
        // The run's identity: its id on every record, its trace's root the sink's root span.
        let run_id = &case["run"]["runId"];
        assert!(records.iter().all(|r| &r["runId"] == run_id), "{name}");
        let roots: Vec<&Value> = records
            .iter()
            .filter(|r| r["kind"] == "run" && r["recordType"] == "span_end")
            .collect();
        assert_eq!(roots.len(), 1, "{name}: one root span ends");
        let attempt = &stored["attempts"][0];
        assert_eq!(
            (&roots[0]["traceId"], &roots[0]["spanId"]),
            (&attempt["traceId"], &attempt["rootSpanId"]),
            "{name}: the stored run's root"
        );
        let text = stored.to_string();
        assert!(!text.contains(KEY), "{name}: the key reached a record");
    }
    let left_out = EXCEPTIONS.iter().filter(|(w, ..)| *w == super::WORLD).count();
    assert_eq!(ran + left_out, cases.len(), "every row runs or is an exception");
}
