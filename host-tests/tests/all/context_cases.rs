// Loop detection and context options through the component: OMA's `loopDetection`,
// `contextStrategy`, `compressToolResults`, `preserveReasoningAsText` and `compressReasoningText`
// on an agent's WIT configuration, against a scripted Anthropic provider.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use oma_host_tests::{
    agent_config, endpoint, AgentConfig, AgentEvent, CannedResponse, CaptureOutbound,
    ContentBlock, ContextStrategy, GuestOptions, LlmMessage, LoopAction, LoopDetection,
    ReasoningBlock, ReasoningTextCap, RecordedRequest, RequestLog, Role, RunInput, ScriptedHost,
    SummarizeStrategy, ToolDefinition, ToolOutcome, ToolResultContent, ToolUseBlock,
};
use serde_json::{json, Value};

use crate::common::{text, user};
use crate::worlds::AnyGuest as Guest;

fn tool_reply(id: &str) -> Value {
    json!({
        "id": "msg_t", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
        "content": [{"type": "tool_use", "id": id, "name": "lookup", "input": {"q": "same"}}],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 1, "output_tokens": 1}
    })
}

fn text_reply(text: &str) -> Value {
    json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1}
    })
}

/// A guest whose provider answers the n-th request with `replies[n]` (the last once they run
/// out) and whose host answers every tool call with a long text; and the requests it got.
async fn bench(replies: Vec<Value>) -> (Guest, RequestLog) {
    let count = Arc::new(AtomicUsize::new(0));
    let outbound = CaptureOutbound::new(move |request: &RecordedRequest| {
        let n = count.fetch_add(1, Ordering::SeqCst);
        let reply = &replies[n.min(replies.len() - 1)];
        let streamed = request.json().is_some_and(|body| body["stream"] == true);
        let (kind, body) = if streamed {
            ("text/event-stream", as_sse(reply))
        } else {
            ("application/json", reply.to_string())
        };
        CannedResponse {
            status: 200,
            headers: vec![("content-type".into(), kind.into())],
            body: body.into_bytes(),
        }
    });
    let log = outbound.log();
    let host = ScriptedHost::new().with_tool(|_call: &ToolUseBlock| ToolOutcome {
        content: ToolResultContent::Text("x".repeat(40)),
        is_error: None,
        gate: None,
    });
    let options = GuestOptions {
        hooks: Some(Box::new(outbound)),
        host: Some(Box::new(host)),
        ..Default::default()
    };
    (Guest::instantiate(super::WORLD, options).await, log)
}

/// An Anthropic tool-use message as the stream of events that carries it.
fn as_sse(message: &Value) -> String {
    let mut events = vec![json!({"type": "message_start", "message": {
        "id": "m", "type": "message", "role": "assistant", "content": [],
        "model": "claude-sonnet-4-6", "stop_reason": null,
        "usage": {"input_tokens": 1, "output_tokens": 1}}})];
    for (index, block) in message["content"].as_array().expect("content").iter().enumerate() {
        let (start, delta) = if block["type"] == "tool_use" {
            (
                json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
                json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
            )
        } else {
            (
                json!({"type": "text", "text": ""}),
                json!({"type": "text_delta", "text": block["text"]}),
            )
        };
        events.push(json!({"type": "content_block_start", "index": index, "content_block": start}));
        events.push(json!({"type": "content_block_delta", "index": index, "delta": delta}));
        events.push(json!({"type": "content_block_stop", "index": index}));
    }
    events.push(json!({"type": "message_delta", "delta": {"stop_reason": message["stop_reason"]},
        "usage": {"output_tokens": 1}}));
    events.push(json!({"type": "message_stop"}));
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().expect("type")))
        .collect()
}

fn config() -> AgentConfig {
    let mut config = agent_config(
        "looper",
        "claude-sonnet-4-6",
        endpoint("anthropic", Some("https://api.anthropic.com"), Some("sk-x")),
    );
    config.tools = vec![ToolDefinition {
        name: "lookup".into(),
        description: "Looks up".into(),
        input_schema: r#"{"type":"object"}"#.into(),
    }];
    config
}

fn sent(log: &RequestLog) -> Vec<Value> {
    log.all()
        .iter()
        .map(|r| r.json().expect("JSON")["messages"].clone())
        .collect()
}

#[tokio::test]
async fn a_looping_run_is_warned_then_ended_with_loop_detected() {
    let (mut guest, log) = bench(vec![tool_reply("c")]).await;
    let mut cfg = config();
    cfg.loop_detection = Some(LoopDetection {
        max_repetitions: Some(2),
        window: None,
        action: LoopAction::Warn,
    });
    let agent = guest.create_agent(&cfg).await.unwrap().unwrap();
    let stream = guest
        .stream(&agent, &RunInput::Text("go".into()))
        .await
        .unwrap()
        .unwrap();
    let events = guest.collect_agent_stream(stream).await.unwrap();
    let detected: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::LoopDetected(info) => Some(info),
            _ => None,
        })
        .collect();
    assert_eq!(detected.len(), 2, "warned, then ended: {events:?}");
    assert_eq!(detected[0].kind, "tool_repetition");
    assert_eq!(detected[0].repetitions, 2);
    let Some(AgentEvent::Done(result)) = events.last() else {
        panic!("a loop ends the run successfully: {events:?}");
    };
    assert!(result.success && result.loop_detected, "{result:?}");
    assert_eq!(result.turns, 3);
    let sent = sent(&log);
    assert_eq!(sent.len(), 3);
    // The warning went after the second turn's tool result.
    let warned = &sent[2][4]["content"];
    assert_eq!(warned[0]["type"], "tool_result");
    assert!(
        warned[1]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("WARNING: You appear to be repeating the same tool")),
        "{warned}"
    );
}

#[tokio::test]
async fn terminate_ends_at_the_first_loop_and_bad_settings_are_refused() {
    let (mut guest, log) = bench(vec![tool_reply("c")]).await;
    let mut cfg = config();
    cfg.loop_detection = Some(LoopDetection {
        max_repetitions: Some(2),
        window: Some(2),
        action: LoopAction::Terminate,
    });
    let agent = guest.create_agent(&cfg).await.unwrap().unwrap();
    let result = guest
        .run(&agent, &RunInput::Text("go".into()))
        .await
        .unwrap()
        .unwrap();
    assert!(result.success && result.loop_detected, "{result:?}");
    assert_eq!(result.turns, 2);
    assert_eq!(result.tool_calls.len(), 1, "the looping call is not made");
    assert_eq!(log.len(), 2);

    cfg.loop_detection = Some(LoopDetection {
        max_repetitions: Some(0),
        window: None,
        action: LoopAction::Warn,
    });
    let error = guest.create_agent(&cfg).await.unwrap().expect_err("refused");
    assert!(
        error.message.contains("`loop-detection.max-repetitions` must be a positive integer"),
        "{error:?}"
    );
    assert_eq!(log.len(), 2, "nothing sent");
}

#[tokio::test]
async fn a_sliding_window_and_tool_result_compression_shrink_what_is_sent() {
    let (mut guest, log) =
        bench(vec![tool_reply("a"), tool_reply("b"), tool_reply("c"), text_reply("done")])
            .await;
    let mut cfg = config();
    cfg.context.strategy = Some(ContextStrategy::SlidingWindow(2));
    cfg.context.compress_tool_results = Some(10);
    let agent = guest.create_agent(&cfg).await.unwrap().unwrap();
    let result = guest
        .run(&agent, &RunInput::Text("go".into()))
        .await
        .unwrap()
        .unwrap();
    assert!(result.success, "{result:?}");
    assert_eq!(result.messages.len(), 7, "the result keeps every message");
    let sent = sent(&log);
    assert_eq!(sent.len(), 4);
    // Second request: the first result is the newest, so whole.
    assert_eq!(sent[1][2]["content"][0]["content"], "x".repeat(40));
    // Third request: the first result was consumed, so compressed.
    assert_eq!(
        sent[2][2]["content"][0]["content"],
        "[Tool output compressed — 40 chars, already processed]"
    );
    // Fourth request: the first user turn, then the last two tool turns, the oldest dropped.
    let last = sent[3].as_array().expect("messages");
    assert_eq!(last.len(), 5, "{last:?}");
    assert_eq!(last[0]["content"][0]["text"], "go");
    assert_eq!(
        last[2]["content"][0]["text"],
        "[Earlier conversation history truncated — 1 turn(s) removed]\n\n"
    );
}

/// OMA's `summarize` strategy through the WIT: past `max-tokens`, a summary request of its own
/// (the summary model, no tools), then the turn with the summary before the recent turns.
#[tokio::test]
async fn a_summarize_strategy_asks_for_a_summary_first() {
    let (mut guest, log) = bench(vec![text_reply("- the user asked"), text_reply("done")]).await;
    let mut cfg = config();
    cfg.context.strategy = Some(ContextStrategy::Summarize(SummarizeStrategy {
        max_tokens: 5,
        summary_model: Some("claude-haiku-4-5".into()),
    }));
    let agent = guest.create_agent(&cfg).await.unwrap().unwrap();
    let assistant = |t: &str| LlmMessage {
        role: Role::Assistant,
        content: vec![text(t)],
    };
    let input = RunInput::Messages(vec![
        user(vec![text("first")]),
        assistant("an old answer that is long enough"),
        user(vec![text("second")]),
        assistant("a recent answer"),
        user(vec![text("latest")]),
    ]);
    let result = guest.run(&agent, &input).await.unwrap().unwrap();
    assert!(result.success, "{result:?}");
    assert_eq!(result.output, "done");
    assert_eq!(result.token_usage.input_tokens, 2, "the summary call counts");
    let bodies: Vec<Value> = log.all().iter().map(|r| r.json().expect("JSON")).collect();
    assert_eq!(bodies.len(), 2);
    assert_eq!(bodies[0]["model"], "claude-haiku-4-5");
    assert!(bodies[0].get("tools").is_none(), "{}", bodies[0]);
    assert!(bodies[0]["messages"][0]["content"][1]["text"]
        .as_str()
        .is_some_and(|t| t.starts_with("\n\nConversation:\n{\"role\":\"assistant\"")));
    let turn = bodies[1]["messages"].as_array().expect("messages");
    assert_eq!(bodies[1]["model"], "claude-sonnet-4-6");
    assert_eq!(turn.len(), 3, "{turn:?}");
    assert_eq!(
        turn[2]["content"][0]["text"],
        "[Conversation summary]\n- the user asked\n\n"
    );
}

/// OMA's `custom` strategy through the WIT: the host's function (`host.compress` in the
/// component world, a `compress` step in the portable world) gets the conversation and its
/// estimate before every request and answers with what is sent; a failing one ends the run
/// before anything is sent.
#[tokio::test]
async fn a_custom_strategy_asks_the_host_before_every_request() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    let count = Arc::new(AtomicUsize::new(0));
    let replies = [tool_reply("a"), text_reply("done")];
    let outbound = CaptureOutbound::new(move |_: &RecordedRequest| {
        let n = count.fetch_add(1, Ordering::SeqCst);
        CannedResponse {
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            body: replies[n.min(1)].to_string().into_bytes(),
        }
    });
    let log = outbound.log();
    let host = ScriptedHost::new()
        .with_tool(|_call: &ToolUseBlock| ToolOutcome {
            content: ToolResultContent::Text("x".repeat(40)),
            is_error: None,
            gate: None,
        })
        .with_compress(move |mut messages: Vec<LlmMessage>, estimated: u64| {
            record.lock().expect("lock").push((messages.len(), estimated));
            if estimated > 1000 {
                return Err("too big".into());
            }
            Ok(messages.split_off(messages.len() - 1))
        });
    let options = GuestOptions {
        hooks: Some(Box::new(outbound)),
        host: Some(Box::new(host)),
        ..Default::default()
    };
    let mut guest = Guest::instantiate(super::WORLD, options).await;
    let mut cfg = config();
    cfg.context.strategy = Some(ContextStrategy::Custom);
    let agent = guest.create_agent(&cfg).await.unwrap().unwrap();
    let result = guest
        .run(&agent, &RunInput::Text("go".into()))
        .await
        .unwrap()
        .unwrap();
    assert!(result.success, "{result:?}");
    assert_eq!(*seen.lock().expect("lock"), [(1, 1), (3, 14)]);
    let sent = sent(&log);
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[1].as_array().map(Vec::len), Some(1));
    assert_eq!(sent[1][0]["content"][0]["type"], "tool_result");
    assert_eq!(result.messages.len(), 3, "the result keeps every message");
    // The host's function fails: the run ends with its message, nothing more is sent.
    let big = RunInput::Text("y".repeat(8000));
    let failed = guest.run(&agent, &big).await.unwrap().unwrap();
    assert!(!failed.success);
    assert_eq!(failed.output, "too big");
    assert_eq!(log.len(), 2, "nothing sent");
}

/// OMA's `onLoopDetected` as a function through the WIT (`host.on-loop-detected` in the
/// component world, a `decide-loop` step in the portable world): asked on each loop, its word
/// decides.
#[tokio::test]
async fn an_on_loop_detected_function_decides_through_the_host() {
    let count = Arc::new(AtomicUsize::new(0));
    let outbound = CaptureOutbound::new(move |_: &RecordedRequest| {
        count.fetch_add(1, Ordering::SeqCst);
        CannedResponse {
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            body: tool_reply("c").to_string().into_bytes(),
        }
    });
    let log = outbound.log();
    let asked = Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = asked.clone();
    let host = ScriptedHost::new()
        .with_tool(|_call: &ToolUseBlock| ToolOutcome {
            content: ToolResultContent::Text("r".into()),
            is_error: None,
            gate: None,
        })
        .with_loop_decider(move |info| {
            let mut asked = record.lock().expect("lock");
            asked.push(info.repetitions);
            Ok(if asked.len() == 1 { "continue" } else { "terminate" }.to_owned())
        });
    let options = GuestOptions {
        hooks: Some(Box::new(outbound)),
        host: Some(Box::new(host)),
        ..Default::default()
    };
    let mut guest = Guest::instantiate(super::WORLD, options).await;
    let mut cfg = config();
    cfg.loop_detection = Some(LoopDetection {
        max_repetitions: Some(2),
        window: None,
        action: LoopAction::Callback,
    });
    let agent = guest.create_agent(&cfg).await.unwrap().unwrap();
    let result = guest
        .run(&agent, &RunInput::Text("go".into()))
        .await
        .unwrap()
        .unwrap();
    assert!(result.success, "{result:?}");
    assert!(result.loop_detected);
    assert_eq!(*asked.lock().expect("lock"), [2, 3]);
    assert_eq!(log.len(), 3, "continue went on, terminate ended");
    assert_eq!(result.tool_calls.len(), 2);
}

#[tokio::test]
async fn reasoning_of_another_provider_is_sent_as_cut_thinking_text_when_asked() {
    let (mut guest, log) = bench(vec![text_reply("ok")]).await;
    let input = RunInput::Messages(vec![
        user(vec![text("q")]),
        LlmMessage {
            role: Role::Assistant,
            content: vec![
                ContentBlock::Reasoning(ReasoningBlock {
                    text: "r".repeat(100),
                    signature: None,
                    redacted_data: None,
                    provenance: Some("openai".into()),
                }),
                text("a"),
            ],
        },
        user(vec![text("q2")]),
    ]);
    let mut cfg = config();
    let agent = guest.create_agent(&cfg).await.unwrap().unwrap();
    guest.run(&agent, &input).await.unwrap().unwrap();
    cfg.context.preserve_reasoning_as_text = true;
    cfg.context.compress_reasoning_text = ReasoningTextCap::MaxChars(30);
    let agent = guest.create_agent(&cfg).await.unwrap().unwrap();
    guest.run(&agent, &input).await.unwrap().unwrap();
    let sent = sent(&log);
    assert_eq!(sent[0][1]["content"], json!([{"type": "text", "text": "a"}]));
    assert_eq!(
        sent[1][1]["content"][0]["text"],
        format!(
            "<thinking>{}...[truncated]...{}</thinking>",
            "r".repeat(10),
            "r".repeat(3)
        )
    );
}
