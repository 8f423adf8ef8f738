//! Arbitrary typed messages: validation never panics; messages it accepts round-trip through
//! OMA JSON and are formatted by every adapter without a panic.
#![no_main]

use arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;
use oma_component_fuzz::{adapter, messages, PROVIDERS};
use oma_core::adapter::{ChatRequest, Endpoint};
use oma_core::json::{messages_from_json, messages_to_json};
use oma_core::validate::validate_messages;

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(messages) = messages(&mut u) else {
        return;
    };
    let valid = validate_messages(&messages).is_ok();
    let written = messages_to_json(&messages);
    // The typed checks and the JSON path agree on what is valid.
    let read = messages_from_json(&written);
    assert_eq!(read.is_ok(), valid, "{written}");
    if let Ok(read) = read {
        assert_eq!(read, messages);
    }
    let preserve = u.arbitrary().unwrap_or(false);
    let request = ChatRequest {
        model: "m".into(),
        messages,
        preserve_reasoning_as_text: preserve,
        ..ChatRequest::default()
    };
    for selector in 0..PROVIDERS.len() as u8 {
        let formatted = adapter(selector).format(&request, &Endpoint::default());
        if !valid {
            assert!(formatted.is_err(), "invalid messages were formatted");
        }
    }
});
