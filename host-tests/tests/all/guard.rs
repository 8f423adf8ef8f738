//! `messages-from-json` against OMA's shape guard (`docs/messages.md#the-shape-guard`, with
//! `docs/media.md` and `docs/messages.md#prompt-input`) and the component's own typing. The fixture
//! tables (`reject.json`, `accept.json`, and the native unit tests' `guard_cases.json`) are read
//! into one list of cases; one loop pins every verdict and exact message, another checks that the
//! component and the native library agree on every case.

use oma_host_tests::{error_json, Guest};
use serde_json::Value;

use crate::common::{assert_invalid_message, fixture, guest, ACCEPT, GUARD_CASES, REJECT};

/// One case: an input and its verdict.
struct Case {
    name: String,
    input: Value,
    /// The exact message, or `None` when the input is accepted.
    error: Option<String>,
    /// What `messages-to-json` writes back, when it differs from `input` (dropped fields).
    expect: Option<Value>,
}

fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    let tables = [
        ("reject.json", REJECT, "messages"),
        ("accept.json", ACCEPT, "messages"),
        ("guard_cases.json", GUARD_CASES, "input"),
    ];
    for (file, text, input_key) in tables {
        for case in fixture(text).as_array().expect("a list of cases") {
            cases.push(Case {
                name: format!("{file}: {}", case["name"].as_str().expect("a name")),
                input: case[input_key].clone(),
                error: case["error"].as_str().map(str::to_owned),
                expect: case.get("expect").cloned(),
            });
        }
    }
    assert!(cases.len() > 250, "every table is there");
    cases
}

/// Runs one accepted case through from-json, validate and to-json; returns the JSON written.
async fn accepted(guest: &mut Guest, name: &str, input: &str) -> Result<Value, String> {
    let messages = guest
        .messages_from_json(input)
        .await
        .expect("no trap")
        .map_err(|e| format!("{name}: rejected: {}", e.message))?;
    guest
        .validate_messages(&messages)
        .await
        .expect("no trap")
        .map_err(|e| format!("{name}: validate-messages rejected: {}", e.message))?;
    let written = guest
        .messages_to_json(&messages)
        .await
        .expect("no trap")
        .map_err(|e| format!("{name}: messages-to-json rejected: {}", e.message))?;
    let again = guest
        .messages_from_json(&written)
        .await
        .expect("no trap")
        .map_err(|e| format!("{name}: its own output is rejected: {}", e.message))?;
    if again != messages {
        return Err(format!("{name}: from-json of to-json changed the messages"));
    }
    serde_json::from_str(&written).map_err(|e| format!("{name}: to-json wrote bad JSON: {e}"))
}

#[tokio::test]
async fn every_case_gets_its_verdict_and_exact_message() {
    let mut guest = guest().await;
    let mut failures = Vec::new();
    for case in cases() {
        let input = case.input.to_string();
        match &case.error {
            Some(expected) => match guest.messages_from_json(&input).await.expect("no trap") {
                Ok(messages) => failures.push(format!("{}: accepted as {messages:?}", case.name)),
                Err(error) => {
                    assert_invalid_message(&error);
                    if &error.message != expected {
                        failures.push(format!(
                            "{}:\n   got: {}\n  want: {expected}",
                            case.name, error.message
                        ));
                    }
                }
            },
            None => match accepted(&mut guest, &case.name, &input).await {
                Err(failure) => failures.push(failure),
                Ok(written) => {
                    if case
                        .expect
                        .as_ref()
                        .is_some_and(|expect| *expect != written)
                    {
                        failures.push(format!("{}: wrote {written}", case.name));
                    }
                }
            },
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test]
async fn the_component_and_the_native_library_agree_on_every_case() {
    let mut guest = guest().await;
    for case in cases() {
        let input = case.input.to_string();
        let native = oma_core::json::messages_from_json(&input);
        let through_wasm = guest.messages_from_json(&input).await.expect("no trap");
        match (native, through_wasm) {
            (Ok(native), Ok(messages)) => {
                let written = guest
                    .messages_to_json(&messages)
                    .await
                    .expect("no trap")
                    .expect("valid");
                assert_eq!(
                    written,
                    oma_core::json::messages_to_json(&native),
                    "{}",
                    case.name
                );
            }
            (Err(native), Err(error)) => {
                assert_eq!(error_json(&error), native.to_json(), "{}", case.name)
            }
            (native, wasm) => panic!("{}: native {native:?}, component {wasm:?}", case.name),
        }
    }
}

#[tokio::test]
async fn text_that_is_not_json_is_an_invalid_message() {
    let mut guest = guest().await;
    let inputs = [
        "",
        "   ",
        "not json",
        "[{\"role\": \"user\",",
        "[1, 2,]",
        "\u{feff}[]",
        "[] []",
    ];
    for input in inputs {
        let error = guest
            .messages_from_json(input)
            .await
            .expect("no trap")
            .expect_err(input);
        assert_invalid_message(&error);
        assert!(
            error.message.starts_with("messages must be valid JSON"),
            "{input:?}: {}",
            error.message
        );
    }
}

#[tokio::test]
async fn error_json_follows_the_error_contract() {
    let mut guest = guest().await;
    let error = guest
        .messages_from_json(r#"[{"role": "user", "content": "hi"}]"#)
        .await
        .expect("no trap")
        .expect_err("content is a string");
    assert_eq!(
        error_json(&error),
        serde_json::json!({"error": {
            "name": "InvalidMessageError",
            "code": "INVALID_MESSAGE",
            "message": "messages[0].content must be a ContentBlock[], got string",
            "retryable": false
        }})
    );
}
