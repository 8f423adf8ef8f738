//! A run machine (what a `driver` session is) under any sequence of answers at any times: it
//! never panics, ends at most once, and refuses every answer after its result.
#![no_main]

use libfuzzer_sys::fuzz_target;
use oma_core::agent::before_run::BeforeRunResult;
use oma_core::agent::config::AgentSettings;
use oma_core::agent::exchange::{HookAnswer, ToolOutcome};
use oma_core::agent::machine::{Answer, Poll, RunMachine, Step};
use oma_core::http::call::CallAnswer;
use oma_core::retry::RetryPolicy;
use oma_core::http::{HttpResponse, TransportFailure, TransportFailureKind};
use oma_core::message::{LlmMessage, ToolResultContent};

const PROVIDERS: [&str; 4] = ["anthropic", "openai", "gemini", "bedrock"];

const TEXT: &[u8] = br#"{"id":"m","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}"#;
const TOOL: &[u8] = br#"{"id":"m","type":"message","role":"assistant","model":"m","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}],"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":1}}"#;

fn machine(selector: u8) -> RunMachine {
    let mut settings = AgentSettings {
        name: "fuzz".into(),
        model: "m".into(),
        provider: PROVIDERS[usize::from(selector) % PROVIDERS.len()].into(),
        before_run: selector & 4 != 0,
        max_turns: Some(3),
        token_budget: Some(1_000),
        deadline_ms: (selector & 16 != 0).then_some(20_000),
        ..AgentSettings::default()
    };
    settings.endpoint.base_url = Some("http://127.0.0.1:9".into());
    settings.endpoint.region = Some("us-east-1".into());
    settings.call.retry = Some(RetryPolicy {
        max_attempts: 3,
        base_delay_ms: 1,
        backoff: 2.0,
        ..RetryPolicy::default()
    });
    let (spec, _) = settings.into_spec().expect("a valid configuration");
    RunMachine::run(spec, vec![LlmMessage::user_text("q")], selector & 8 != 0, 7)
}

/// Reads one answer from the front of `data`, taking what it uses.
fn answer(data: &mut &[u8]) -> Option<(Answer, u64)> {
    let (&op, rest) = data.split_first()?;
    let (&arg, rest) = rest.split_first().unwrap_or((&0, rest));
    let len = usize::from(arg % 48).min(rest.len());
    let (bytes, rest) = rest.split_at(len);
    *data = rest;
    let status = u16::from(arg) * 3;
    let answer = match op % 12 {
        0 => Answer::Http(CallAnswer::Response(HttpResponse {
            status: if arg % 2 == 0 { 200 } else { status },
            headers: vec![("retry-after".into(), "0".into())],
            body: match arg % 3 {
                0 => TEXT.to_vec(),
                1 => TOOL.to_vec(),
                _ => bytes.to_vec(),
            },
        })),
        1 => Answer::Http(CallAnswer::Head {
            status: if arg % 2 == 0 { 200 } else { status },
            headers: vec![],
        }),
        2 | 3 => Answer::Http(CallAnswer::Chunk(bytes.to_vec())),
        4 => Answer::Http(CallAnswer::End),
        5 => Answer::Http(CallAnswer::Waited),
        6 => {
            let kind = [
                TransportFailureKind::Refused,
                TransportFailureKind::Reset,
                TransportFailureKind::TimedOut,
                TransportFailureKind::Denied,
                TransportFailureKind::Other,
            ][usize::from(arg) % 5];
            Answer::Http(CallAnswer::Failure(TransportFailure::new(
                kind,
                &String::from_utf8_lossy(bytes),
            )))
        }
        7 => Answer::Hook(HookAnswer::Failed(String::from_utf8_lossy(bytes).into())),
        8 => Answer::Hook(HookAnswer::Result(BeforeRunResult {
            prompt: serde_json::from_slice(bytes).unwrap_or(serde_json::Value::Null),
            messages: None,
        })),
        9 | 10 => Answer::Tool {
            id: if arg % 2 == 0 {
                "t1".into()
            } else {
                String::from_utf8_lossy(bytes).into()
            },
            outcome: ToolOutcome {
                content: ToolResultContent::Text(String::from_utf8_lossy(bytes).into()),
                is_error: (arg & 4 != 0).then_some(true),
                gate: None,
            },
        },
        _ => Answer::External(if arg % 2 == 0 {
            Ok(String::from_utf8_lossy(bytes).into())
        } else {
            Err("failed".into())
        }),
    };
    Some((answer, u64::from(arg) * 97))
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, mut data)) = data.split_first() else {
        return;
    };
    let mut machine = machine(selector);
    let mut now = 1_796_036_400_000u64;
    let mut done = 0;
    while let Some((answer, tick)) = answer(&mut data) {
        now += tick;
        for _ in 0..64 {
            match machine.poll(now) {
                Poll::Finished(_) => done += 1,
                Poll::Step(Step::Event(_) | Step::Progress(_) | Step::Evaluation(_)) => {}
                Poll::Step(_) | Poll::Waiting(_) | Poll::Over => break,
            }
        }
        let refused = machine.handle(answer).is_err();
        assert!(done == 0 || refused, "an answer after the result was taken");
    }
    assert!(done <= 1, "the run ended more than once");
});
