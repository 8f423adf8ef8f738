//! `oma-host demo`: the whole pipeline on a bundled conversation, with no network and no key.
//!
//! A user turn with text, an image and a video goes through validation (and an invalid video
//! URL is refused), is formatted for two providers (Anthropic refuses the video before any
//! request; MiniMax gets a `video_url` part), then an agent runs it: the `beforeRun` hook
//! rewrites the prompt, the request goes out over wasi-http to a provider simulated on the
//! loopback interface, the model calls a tool the host answers, and the parsed result comes
//! back. Each stage prints what it did.

use oma_loopback::{LoopbackOnly, Reply, Simulator};
use oma_wasmtime::oma_json::{block_json, run_result_json, tool_use_json};
use oma_wasmtime::{
    agent_config, chat_request, endpoint, error_json, offline_options, BeforeRunAnswer,
    BeforeRunResult, GuestOptions, RunInput, ScriptedHost, ToolDefinition, ToolOutcome,
    ToolResultContent,
};
use serde_json::{json, Value};

use crate::{guest, guest_with, Failure};

/// The bundled conversation: one user turn with text, an image and a video URL.
const CONVERSATION: &str = include_str!("../../../examples/conversations/media.json");

/// The same turn with a video URL that is not HTTP(S).
const INVALID: &str = include_str!("../../../examples/conversations/invalid-video-url.json");

/// What the simulated model answers: first a tool call, then its final text.
fn scripted_replies() -> [Reply; 2] {
    let tool_call = json!({
        "id": "chatcmpl-demo-1", "object": "chat.completion", "model": "MiniMax-M1",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "Let me check a frame of the clip.",
            "tool_calls": [{"id": "call_frame_1", "type": "function", "function": {
                "name": "describe_frame", "arguments": "{\"at\":\"00:03\"}"}}]}}],
        "usage": {"prompt_tokens": 412, "completion_tokens": 21}
    });
    let answer = json!({
        "id": "chatcmpl-demo-2", "object": "chat.completion", "model": "MiniMax-M1",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {
            "role": "assistant",
            "content": "A ferry leaves the harbour at dusk; the screenshot shows the same quay."}}],
        "usage": {"prompt_tokens": 468, "completion_tokens": 17}
    });
    [
        Reply::json(200, &tool_call.to_string()),
        Reply::json(200, &answer.to_string()),
    ]
}

/// Long strings (base64) cut for display.
fn abbreviate(value: Value) -> Value {
    match value {
        Value::String(s) if s.len() > 160 && s.is_ascii() => {
            Value::String(format!("{}… ({} chars)", &s[..48], s.len()))
        }
        Value::Array(items) => Value::Array(items.into_iter().map(abbreviate).collect()),
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(k, v)| (k, abbreviate(v))).collect())
        }
        other => other,
    }
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(&abbreviate(value.clone())).unwrap_or_default()
}

fn stage(out: &mut String, title: &str) {
    out.push_str(&format!("\n== {title}\n"));
}

/// Runs the demo; returns everything it printed.
pub async fn demo() -> Result<String, Failure> {
    let mut out = String::from("oma-host demo: OMA's structured agent input through the oma-component guest\n(no network, no key: the provider is simulated on 127.0.0.1)\n");

    // 1. Validation.
    stage(
        &mut out,
        "1. validate the conversation (codec.messages-from-json)",
    );
    let mut codec = guest().await?;
    let messages = codec
        .messages_from_json(CONVERSATION)
        .await
        .map_err(Failure::Host)?
        .map_err(Failure::Component)?;
    let blocks: Vec<Value> = messages[0].content.iter().map(block_json).collect();
    out.push_str(&format!(
        "valid: 1 user turn with {} blocks\n{}\n",
        blocks.len(),
        pretty(&Value::Array(blocks))
    ));
    let refused = codec
        .messages_from_json(INVALID)
        .await
        .map_err(Failure::Host)?
        .err();
    out.push_str("the same turn with the video at mm_file://abc123 is refused:\n");
    out.push_str(
        &refused
            .map(|e| error_json(&e).to_string())
            .unwrap_or_else(|| "(accepted?!)".into()),
    );
    out.push('\n');

    // 2. Formatting for two providers.
    stage(
        &mut out,
        "2. format for two providers (codec.format-request; nothing is sent)",
    );
    let mut request = chat_request("claude-sonnet-4-6", messages.clone());
    let anthropic = endpoint("anthropic", None, Some("sk-demo-not-a-key"));
    match codec
        .format_request(&request, &anthropic)
        .await
        .map_err(Failure::Host)?
    {
        Ok(_) => out.push_str("anthropic: formatted (unexpected: it has no video mapping)\n"),
        Err(e) => out.push_str(&format!(
            "anthropic refuses before any request:\n{}\n",
            error_json(&e)
        )),
    }
    request.model = "MiniMax-M1".into();
    let minimax = endpoint("minimax", None, Some("sk-demo-not-a-key"));
    let http = codec
        .format_request(&request, &minimax)
        .await
        .map_err(Failure::Host)?
        .map_err(Failure::Component)?;
    let body: Value = serde_json::from_str(&http.body).unwrap_or(Value::Null);
    out.push_str(&format!(
        "minimax: POST {} with the user turn as\n{}\n",
        http.url,
        pretty(&body["messages"][0]["content"])
    ));

    // 3. The agent run.
    stage(
        &mut out,
        "3. run an agent (agent.run): hook, wasi-http, a tool call, the result",
    );
    let simulator = Simulator::start().map_err(Failure::Host)?;
    simulator.script(scripted_replies());
    let host = ScriptedHost::new()
        .with_hook(|context| {
            BeforeRunAnswer::Typed(BeforeRunResult {
                prompt: format!("{} Answer in one sentence.", context.prompt),
                messages: None,
            })
        })
        .with_tool(|call| ToolOutcome {
            content: ToolResultContent::Text(format!(
                "frame {}: a white ferry at a stone quay, lights on",
                serde_json::from_str::<Value>(&call.input)
                    .ok()
                    .and_then(|v| v["at"].as_str().map(str::to_owned))
                    .unwrap_or_default()
            )),
            is_error: None,
            gate: None,
        });
    let log = host.log();
    let mut guest = guest_with(GuestOptions {
        hooks: Some(Box::new(LoopbackOnly::new())),
        host: Some(Box::new(host)),
        ..GuestOptions::default()
    })
    .await?;
    let mut config = agent_config(
        "demo-viewer",
        "MiniMax-M1",
        endpoint(
            "minimax",
            Some(&simulator.base_url()),
            Some("sk-demo-not-a-key"),
        ),
    );
    config.before_run = true;
    config.call = offline_options();
    config.tools = vec![ToolDefinition {
        name: "describe_frame".into(),
        description: "Describes the video frame at a timestamp".into(),
        input_schema:
            r#"{"type":"object","properties":{"at":{"type":"string"}},"required":["at"]}"#.into(),
    }];
    let agent = guest
        .create_agent(&config)
        .await
        .map_err(Failure::Host)?
        .map_err(Failure::Component)?;
    let result = guest
        .run(&agent, &RunInput::Messages(messages))
        .await
        .map_err(Failure::Host)?
        .map_err(Failure::Component)?;

    let host_log = log.lock();
    if let Some(context) = host_log.before_run.first() {
        out.push_str(&format!(
            "beforeRun got prompt {:?} and {} message(s); it returned prompt {:?}\n",
            context.prompt,
            context.messages.len(),
            format!("{} Answer in one sentence.", context.prompt)
        ));
    }
    for (agent, call) in &host_log.tool_calls {
        out.push_str(&format!("{agent} called a tool: {}\n", tool_use_json(call)));
    }
    drop(host_log);
    for (n, recorded) in simulator.requests().iter().enumerate() {
        let body = recorded.json().unwrap_or(Value::Null);
        let sent = body["messages"].as_array().map(Vec::len).unwrap_or(0);
        out.push_str(&format!(
            "request {}: {} {} over wasi-http, {} bytes, {} message(s)\n",
            n + 1,
            recorded.method,
            recorded.path,
            recorded.body.len(),
            sent
        ));
        if n == 0 {
            out.push_str(&format!(
                "  the user turn after the hook:\n{}\n",
                pretty(&body["messages"][0]["content"])
            ));
        }
    }

    stage(&mut out, "4. the parsed result (OMA's AgentRunResult)");
    out.push_str(&pretty(&run_result_json(&result)));
    if !result.success {
        return Err(Failure::RunFailed(out));
    }
    Ok(out)
}
