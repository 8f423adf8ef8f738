//! Embedding `oma_component.wasm` from Rust: read an OMA conversation (JSON), validate it as OMA
//! does, and build the requests two providers would get, sending nothing.
//!
//! ```sh
//! cargo run -p oma-example-embed                       # examples/conversations/media.json
//! cargo run -p oma-example-embed -- my-conversation.json
//! ```
//!
//! The conversation's video goes to MiniMax as a `video_url` part; Anthropic's format has no
//! video, so formatting it for Anthropic fails with `UnsupportedContentBlockError` before any
//! request exists. An invalid conversation (try `examples/conversations/invalid-video-url.json`)
//! stops at validation with OMA's message, and the program exits 1.

use anyhow::Context;
use oma_wasmtime::{chat_request, endpoint, Harness, HarnessOptions};

/// The conversation read when no file is named.
const DEFAULT_CONVERSATION: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/../conversations/media.json");

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<std::process::ExitCode> {
    let (file, label) = match std::env::args().nth(1) {
        Some(file) => (file.clone(), file),
        None => (
            DEFAULT_CONVERSATION.to_owned(),
            "examples/conversations/media.json".to_owned(),
        ),
    };
    let json = std::fs::read_to_string(&file).with_context(|| format!("could not read {label}"))?;

    // One harness per process: the component compiled once (and cached), instances are cheap.
    let harness = Harness::new(HarnessOptions::new(oma_artifacts::COMPONENT))?;
    let mut guest = harness.instantiate().await?;

    // OMA's shape guard and media rules: a typed error with OMA's message, or the messages.
    let messages = match guest.messages_from_json(&json).await? {
        Ok(messages) => messages,
        Err(error) => {
            println!("invalid conversation: {} ({:?})", error.message, error.kind);
            return Ok(std::process::ExitCode::FAILURE);
        }
    };
    println!("{label}: {} message(s), valid", messages.len());

    for (provider, model) in [
        ("minimax", "MiniMax-M1"),
        ("anthropic", "claude-sonnet-4-6"),
    ] {
        let request = chat_request(model, messages.clone());
        let target = endpoint(provider, None, Some("sk-example"));
        match guest.format_request(&request, &target).await? {
            Ok(http) => {
                // The headers carry the key: show their names only.
                let names: Vec<&str> = http.headers.iter().map(|(name, _)| name.as_str()).collect();
                println!(
                    "{provider}: {} {} with headers {names:?}, {} bytes of body",
                    http.method,
                    http.url,
                    http.body.len()
                );
            }
            Err(error) => println!("{provider}: refused before any request: {}", error.message),
        }
    }
    Ok(std::process::ExitCode::SUCCESS)
}
