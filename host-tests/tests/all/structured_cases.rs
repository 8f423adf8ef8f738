// Structured output through the component (OMA's `outputSchema`, `docs/agent.md#structured-output`):
// the shared table `fixtures/structured-output.json`, which the JavaScript and Python suites run
// too, on an agent's WIT configuration against a scripted Anthropic provider.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use oma_host_tests::{
    agent_config, endpoint, CannedResponse, CaptureOutbound, GuestOptions, RecordedRequest,
    RequestLog, RunInput,
};
use serde_json::{json, Value};

use crate::worlds::AnyGuest as Guest;

const TABLE: &str = include_str!("../../../fixtures/structured-output.json");

/// A guest whose provider answers the n-th request with the n-th text of `answers`.
async fn bench(answers: Vec<String>) -> (Guest, RequestLog) {
    let count = Arc::new(AtomicUsize::new(0));
    let outbound = CaptureOutbound::new(move |_request: &RecordedRequest| {
        let n = count.fetch_add(1, Ordering::SeqCst);
        let text = &answers[n.min(answers.len() - 1)];
        let reply = json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 10, "output_tokens": 5}
        });
        CannedResponse {
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            body: reply.to_string().into_bytes(),
        }
    });
    let log = outbound.log();
    let options = GuestOptions {
        hooks: Some(Box::new(outbound)),
        ..Default::default()
    };
    (Guest::instantiate(super::WORLD, options).await, log)
}

fn config(schema: &Value, system: Option<&str>) -> oma_host_tests::AgentConfig {
    let mut config = agent_config(
        "rater",
        "claude-sonnet-4-6",
        endpoint("anthropic", Some("https://api.anthropic.com"), Some("sk-x")),
    );
    config.system_prompt = system.map(str::to_owned);
    config.output_schema = Some(schema.to_string());
    config
}

#[tokio::test]
async fn the_shared_table() {
    let table: Value = serde_json::from_str(TABLE).expect("JSON");
    for case in table["cases"].as_array().expect("cases") {
        let name = case["name"].as_str().expect("a name");
        let expect = &case["expect"];
        let answers = case["answers"]
            .as_array()
            .expect("answers")
            .iter()
            .map(|a| a.as_str().expect("text").to_owned())
            .collect();
        let (mut guest, log) = bench(answers).await;
        let agent = guest
            .create_agent(&config(&case["schema"], case["systemPrompt"].as_str()))
            .await
            .unwrap()
            .expect("a valid schema");
        let result = guest
            .run(&agent, &RunInput::Text("Rate it.".into()))
            .await
            .unwrap()
            .expect("a result");
        assert_eq!(json!(result.success), expect["success"], "{name}");
        let structured: Value = result
            .structured
            .as_deref()
            .map(|text| serde_json::from_str(text).expect("JSON text"))
            .unwrap_or(Value::Null);
        assert_eq!(structured, expect["structured"], "{name}");
        assert_eq!(json!(result.output), expect["output"], "{name}");
        assert_eq!(
            json!([result.token_usage.input_tokens, result.token_usage.output_tokens]),
            expect["tokens"],
            "{name}"
        );
        let bodies: Vec<Value> = log.all().iter().map(|r| r.json().expect("JSON")).collect();
        assert_eq!(json!(bodies.len()), expect["requests"], "{name}");
        let system = format!(
            "{}\n\n## Output Format (REQUIRED)\n",
            case["systemPrompt"].as_str().expect("text")
        );
        for body in &bodies {
            assert!(
                body["system"].as_str().is_some_and(|s| s.starts_with(&system)),
                "{name}: {}",
                body["system"]
            );
        }
        if let Some(feedback) = expect["feedback"].as_str() {
            let last = &bodies[1]["messages"][2];
            assert_eq!(last["role"], "user", "{name}");
            let text = last["content"][0]["text"].as_str().expect("a feedback text");
            assert!(text.contains(feedback), "{name}: {text}");
        }
        if let Some(info) = expect["errorInfo"].as_object() {
            let failure = result.failure.as_ref().expect("a failure");
            let got = json!({
                // The WIT enum's Debug form, `FailureKind::Validation`, as OMA's word.
                "kind": format!("{:?}", failure.error_info.kind)
                    .rsplit("::")
                    .next()
                    .map(str::to_lowercase),
                "code": failure.error_info.code,
                "name": failure.error_info.name,
                "message": failure.error_info.message,
                "retryable": failure.error_info.retryable,
            });
            for (key, value) in info {
                assert_eq!(&got[key], value, "{name}: {key}");
            }
        }
    }
}

#[tokio::test]
async fn a_schema_that_is_no_schema_is_refused_before_any_request() {
    let table: Value = serde_json::from_str(TABLE).expect("JSON");
    let (mut guest, log) = bench(vec!["{}".into()]).await;
    for bad in table["badSchemas"].as_array().expect("bad schemas") {
        let error = guest
            .create_agent(&config(&bad["schema"], None))
            .await
            .unwrap()
            .expect_err("refused");
        assert!(error.message.contains("outputSchema"), "{}", error.message);
        assert!(
            error.message.contains(bad["error"].as_str().expect("text")),
            "{}",
            error.message
        );
    }
    // Not JSON at all.
    let mut cfg = config(&json!({}), None);
    cfg.output_schema = Some("{not json".into());
    let error = guest.create_agent(&cfg).await.unwrap().expect_err("refused");
    assert!(error.message.contains("`outputSchema` is not JSON"), "{}", error.message);
    assert!(log.all().is_empty(), "nothing was sent");
}
