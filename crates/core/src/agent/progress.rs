//! The payloads of progress events (`docs/agent.md#progress-payloads`): what `agent_start` carries.
//!
//! Each event gets its own copy of the input, so a consumer that changes it changes neither the
//! provider call nor what scorers see.

use serde_json::{json, Value};

use crate::agent::evaluation::RunInput;

/// The `data` of the `agent_start` progress event: `{"prompt": "<the string>"}` for a string
/// input (OMA's legacy shape), `{"messages": [...]}` (a copy of the messages, in OMA's JSON
/// shape) for structured input.
pub fn agent_start_data(input: &RunInput) -> Value {
    match input {
        RunInput::Text(prompt) => json!({ "prompt": prompt }),
        RunInput::Messages(messages) => {
            json!({ "messages": crate::json::messages_to_value(messages) })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::LlmMessage;

    #[test]
    fn string_input_keeps_the_legacy_shape() {
        assert_eq!(
            agent_start_data(&RunInput::Text("hi 😀".into())),
            json!({"prompt": "hi 😀"})
        );
        assert_eq!(
            agent_start_data(&RunInput::Text(String::new())),
            json!({"prompt": ""})
        );
    }

    #[test]
    fn structured_input_carries_the_messages() {
        let messages = vec![LlmMessage::user_text("q")];
        let data = agent_start_data(&RunInput::Messages(messages.clone()));
        assert_eq!(
            data,
            json!({"messages": [{"role": "user", "content": [{"type": "text", "text": "q"}]}]})
        );
        assert!(data.get("prompt").is_none());
        let back: Vec<LlmMessage> = serde_json::from_value(data["messages"].clone()).unwrap();
        assert_eq!(back, messages);
        assert_eq!(
            agent_start_data(&RunInput::Messages(vec![])),
            json!({"messages": []})
        );
    }
}
