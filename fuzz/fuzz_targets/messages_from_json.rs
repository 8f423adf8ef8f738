//! OMA JSON text in: never a panic; whatever is accepted is written back and read back equal.
#![no_main]

use libfuzzer_sys::fuzz_target;
use oma_core::json::{messages_from_json, messages_to_json};
use oma_core::validate::validate_messages;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(messages) = messages_from_json(&text) else {
        return;
    };
    validate_messages(&messages).expect("accepted messages pass typed validation");
    let written = messages_to_json(&messages);
    let again = messages_from_json(&written).expect("written messages are read back");
    assert_eq!(again, messages);
});
