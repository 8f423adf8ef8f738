//! A hook's JSON answer: `BeforeRunResult::from_value` and `merge` never panic, and a merged
//! list always passes validation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use oma_core::agent::before_run::{merge, BeforeRunContext, BeforeRunResult, ExternalKind};
use oma_core::json::messages_from_json;
use oma_core::validate::validate_messages;

const CONVERSATION: &str = r#"[
  {"role": "user", "content": [{"type": "text", "text": "Hi"},
    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]},
  {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "n", "input": {"x": 1}}]},
  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "r"},
    {"type": "text", "text": "more"}]}
]"#;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let Ok(answer) = serde_json::from_slice::<serde_json::Value>(body) else {
        return;
    };
    let messages = messages_from_json(CONVERSATION).expect("the conversation is valid");
    let ctx = BeforeRunContext::new(&messages);
    let external = match selector % 3 {
        0 => None,
        1 => Some(ExternalKind::Process),
        _ => Some(ExternalKind::Acp),
    };
    let result = BeforeRunResult::from_value(answer);
    if let Ok(merged) = merge(ctx, result, external) {
        validate_messages(&merged).expect("a merged list is valid");
    }
});
