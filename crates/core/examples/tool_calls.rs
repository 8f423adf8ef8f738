//! How the cost of one turn grows with its tool calls: a timing printout, not a test.
//!
//! ```sh
//! cargo run --release -p oma-core --example tool_calls
//! ```
//!
//! Natively (the core's run machine, no wasm), for each n:
//!
//! - `run`: a whole run over an Anthropic response with n tool calls, each answered as soon as
//!   it is asked for (as the wasi step loop and the Rust driver do), then a final text turn:
//!   parsing, the turn loop, the tool results, the second request's formatting. Up to
//!   `oma_core::limits::MAX_TOOL_CALLS`; past it the response is refused, and the time of that
//!   refusal is shown instead.
//! - `turn loop`: the turn loop alone (no parsing, no formatting) over n calls, past the limit
//!   too, to show that the work per call stays flat.
//!
//! Linear work shows as a flat `µs/call` column.

use std::time::{Duration, Instant};

use oma_core::adapter::{ChatRequest, Credentials, Endpoint};
use oma_core::agent::config::AgentSettings;
use oma_core::agent::exchange::ToolOutcome;
use oma_core::agent::machine::{Answer, Poll, RunMachine, Step};
use oma_core::agent::turn::{Action, TurnLoop, TurnOptions};
use oma_core::http::call::CallAnswer;
use oma_core::http::HttpResponse;
use oma_core::limits::MAX_TOOL_CALLS;
use oma_core::message::{
    ContentBlock, LlmMessage, LlmResponse, TokenUsage, ToolResultContent, ToolUseBlock,
};
use serde_json::json;

const NOW: u64 = 1_796_036_400_000;

/// An Anthropic response with `n` tool calls.
fn response_body(n: usize) -> Vec<u8> {
    let content: Vec<_> = (0..n)
        .map(|i| {
            json!({"type": "tool_use", "id": format!("toolu_{i:08}"), "name": "lookup",
                        "input": {"q": i}})
        })
        .collect();
    json!({"id": "msg", "type": "message", "role": "assistant", "model": "m",
           "content": content, "stop_reason": "tool_use",
           "usage": {"input_tokens": 1, "output_tokens": 1}})
    .to_string()
    .into_bytes()
}

fn final_body() -> Vec<u8> {
    json!({"id": "msg2", "type": "message", "role": "assistant", "model": "m",
           "content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn",
           "usage": {"input_tokens": 1, "output_tokens": 1}})
    .to_string()
    .into_bytes()
}

/// A whole run natively; whether it succeeded, and how long it took.
fn run(n: usize) -> (bool, Duration, String) {
    let settings = AgentSettings {
        name: "bench".into(),
        model: "m".into(),
        provider: "anthropic".into(),
        endpoint: Endpoint {
            credentials: Credentials::ApiKey("sk-bench-key".into()),
            ..Endpoint::default()
        },
        ..AgentSettings::default()
    };
    let spec = settings.into_spec().expect("anthropic is known").0;
    let mut bodies = vec![response_body(n), final_body()].into_iter();
    let started = Instant::now();
    let mut machine = RunMachine::run(spec, vec![LlmMessage::user_text("go")], false, 1);
    let mut now = NOW;
    loop {
        now += 1;
        let step = match machine.poll(now) {
            Poll::Step(step) => step,
            Poll::Finished(outcome) => {
                return (outcome.success(), started.elapsed(), outcome.output);
            }
            other => panic!("nothing should be due here, got {other:?}"),
        };
        let answer = match step {
            Step::Send(_) => Answer::Http(CallAnswer::Response(HttpResponse {
                status: 200,
                headers: vec![],
                body: bodies.next().unwrap_or_else(final_body),
            })),
            Step::CallTool(call) => Answer::Tool {
                id: call.id,
                outcome: ToolOutcome {
                    content: ToolResultContent::Text("ok".into()),
                    is_error: None,
                    gate: None,
                },
            },
            _ => continue,
        };
        machine.handle(answer).expect("the answer was asked for");
    }
}

/// The turn loop alone over `n` calls; how long it took.
fn turn_loop(n: usize) -> Duration {
    let calls: Vec<ContentBlock> = (0..n)
        .map(|i| {
            ContentBlock::ToolUse(ToolUseBlock {
                id: format!("toolu_{i:08}"),
                name: "lookup".into(),
                input: json!({"q": i}),
                signature: None,
            })
        })
        .collect();
    let response = LlmResponse {
        id: "r".into(),
        content: calls,
        model: "m".into(),
        stop_reason: "tool_use".into(),
        usage: TokenUsage::default(),
        stop_sequence: None,
    };
    let started = Instant::now();
    let mut turn = TurnLoop::new(
        vec![LlmMessage::user_text("go")],
        ChatRequest::default(),
        TurnOptions {
            max_turns: 1,
            ..TurnOptions::default()
        },
    );
    while turn.poll().is_some() {}
    turn.handle_response(response).expect("due");
    let mut ids = Vec::with_capacity(n);
    while let Some(action) = turn.poll() {
        if let Action::CallTool(call) = action {
            ids.push(call.id);
        }
    }
    for id in ids {
        let _ = turn.result_position(&id);
        turn.handle_tool_result(&id, ToolResultContent::Text("ok".into()), false)
            .expect("due");
    }
    while turn.poll().is_some() {}
    started.elapsed()
}

fn main() {
    println!("limit: {MAX_TOOL_CALLS} tool calls per response");
    println!("{:>7}  {:>10}  {:>9}  what", "calls", "ms", "µs/call");
    for n in [1_000, 2_000, 4_000, 5_000, 20_000, 40_000] {
        let (ok, took, output) = run(n);
        let what = if ok {
            "run: completed".to_owned()
        } else {
            format!(
                "run: refused ({})",
                output.chars().take(70).collect::<String>()
            )
        };
        println!(
            "{n:>7}  {:>10.1}  {:>9.2}  {what}",
            took.as_secs_f64() * 1e3,
            took.as_secs_f64() * 1e6 / n as f64
        );
    }
    for n in [5_000, 20_000, 40_000] {
        let took = turn_loop(n);
        println!(
            "{n:>7}  {:>10.1}  {:>9.2}  turn loop alone",
            took.as_secs_f64() * 1e3,
            took.as_secs_f64() * 1e6 / n as f64
        );
    }
}
