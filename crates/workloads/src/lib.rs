//! The benchmark inputs: six OMA message lists, generated here, deterministically, so every
//! benchmark (the core's native ones in `crates/core/benches/`, the component's in
//! `host-tests/benches/`, and OMA on Node in `bench/oma-node/`) measures the same bytes on
//! every machine.
//!
//! [`generate`] builds a workload in memory; the `gen-workloads` binary writes all of them as
//! files (`cargo run -p oma-host-tests --bin gen-workloads -- target/workloads`) for the Node
//! benchmark. Each is a JSON array of OMA messages (`{"role", "content": [blocks]}`, snake_case
//! keys, `type` tags):
//!
//! | workload | messages | what |
//! |---|---|---|
//! | `chat-small` | 1 | one short user text |
//! | `chat-history-51` | 51 | 25 user/assistant pairs of 500-character texts, then a question |
//! | `vision-1mib` | 1 | a text and a `image/png` image of 768 KiB random bytes (1 MiB of base64) |
//! | `tools-rich-20` | 42 | 20 tool calls, each answered with a 300-character text, a URL image and a 2 KiB base64 PDF |
//! | `video-url` | 1 | a text and a `video/mp4` URL video (MiniMax's `video_url`) |
//! | `video-16mib` | 1 | a text and a `video/mp4` video of 12 MiB random bytes (16 MiB of base64) |

#![deny(missing_docs)]

use std::path::PathBuf;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde_json::{json, Value};

/// Every workload, in the generator's order.
pub const WORKLOADS: &[&str] = &[
    "chat-small",
    "chat-history-51",
    "vision-1mib",
    "tools-rich-20",
    "video-url",
    "video-16mib",
];

/// The seed of every workload's random stream.
const SEED: u64 = 20_261_130;

/// The words filler text is made of.
const WORDS: &[&str] = &[
    "agent", "message", "content", "block", "video", "image", "tool", "result", "provider", "wire",
    "format", "copy", "validate", "hook",
];

/// SplitMix64: a small, fast generator whose whole state is one `u64`; plenty for filler data.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// `n` random bytes, as standard base64 with padding.
    fn base64(&mut self, n: usize) -> String {
        let mut bytes = Vec::with_capacity(n + 8);
        while bytes.len() < n {
            bytes.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        bytes.truncate(n);
        STANDARD.encode(bytes)
    }

    /// Exactly `n` characters of words separated by single spaces.
    fn text(&mut self, n: usize) -> String {
        let mut out = String::with_capacity(n + 16);
        while out.len() < n {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(WORDS[(self.next_u64() % WORDS.len() as u64) as usize]);
        }
        out.truncate(n);
        out
    }
}

fn text(s: impl Into<String>) -> Value {
    json!({"type": "text", "text": s.into()})
}

fn user(content: Vec<Value>) -> Value {
    json!({"role": "user", "content": content})
}

fn assistant(content: Vec<Value>) -> Value {
    json!({"role": "assistant", "content": content})
}

fn media(kind: &str, media_type: &str, source: (&str, String)) -> Value {
    let (field, value) = source;
    let source_type = if field == "url" { "url" } else { "base64" };
    json!({"type": kind, "source": {"type": source_type, "media_type": media_type, field: value}})
}

/// The message list of workload `name`, or `None` for a name not in [`WORKLOADS`].
pub fn messages(name: &str) -> Option<Vec<Value>> {
    let mut rng = SplitMix64(SEED);
    let messages = match name {
        "chat-small" => vec![user(vec![text(
            "What is shown in the attached clip? Answer in one line.",
        )])],
        "chat-history-51" => {
            let mut turns = Vec::with_capacity(51);
            for _ in 0..25 {
                turns.push(user(vec![text(rng.text(500))]));
                turns.push(assistant(vec![text(rng.text(500))]));
            }
            turns.push(user(vec![text("Summarise the conversation so far.")]));
            turns
        }
        "vision-1mib" => vec![user(vec![
            text("What is shown here?"),
            media("image", "image/png", ("data", rng.base64(768 * 1024))),
        ])],
        "tools-rich-20" => {
            let mut turns = vec![user(vec![text("Inspect the repository and report.")])];
            for i in 0..20 {
                turns.push(assistant(vec![
                    text(format!("Calling tool step {i}.")),
                    json!({"type": "tool_use", "id": format!("call_{i}"), "name": "read_file",
                           "input": {"path": format!("src/file_{i}.rs"), "max_bytes": 4096}}),
                ]));
                let image = media(
                    "image",
                    "image/png",
                    ("url", format!("https://example.com/shots/{i}.png")),
                );
                let mut file = media("file", "application/pdf", ("data", rng.base64(2048)));
                file["filename"] = json!(format!("report_{i}.pdf"));
                turns.push(user(vec![json!({
                    "type": "tool_result",
                    "tool_use_id": format!("call_{i}"),
                    "content": [text(rng.text(300)), image, file],
                })]));
            }
            turns.push(user(vec![text("Now summarise.")]));
            turns
        }
        "video-url" => vec![user(vec![
            text("Describe the clip."),
            media(
                "video",
                "video/mp4",
                ("url", "https://example.com/clip.mp4".to_owned()),
            ),
        ])],
        "video-16mib" => vec![user(vec![
            text("Describe the clip."),
            media("video", "video/mp4", ("data", rng.base64(12 * 1024 * 1024))),
        ])],
        _ => return None,
    };
    Some(messages)
}

/// The OMA JSON text of workload `name` (compact), or `None` for a name not in [`WORKLOADS`].
/// The same name always gives the same bytes.
pub fn generate(name: &str) -> Option<String> {
    messages(name).map(|list| Value::Array(list).to_string())
}

/// `$OMA_WORKLOADS` when set: a directory of `NAME.json` files to benchmark instead of the
/// generated workloads.
pub fn workloads_dir() -> Option<PathBuf> {
    std::env::var_os("OMA_WORKLOADS").map(PathBuf::from)
}

/// The OMA JSON of workload `name`: read from `$OMA_WORKLOADS/NAME.json` when that variable is
/// set, generated in memory otherwise. `None`, with a note on standard error (`label` names what
/// is skipped, e.g. `run/chat-small`), when the file is missing or the name is unknown.
pub fn read_workload(label: &str, name: &str) -> Option<String> {
    let Some(dir) = workloads_dir() else {
        let text = generate(name);
        if text.is_none() {
            eprintln!("{label}: skipped, there is no workload named {name:?}");
        }
        return text;
    };
    let path = dir.join(format!("{name}.json"));
    match std::fs::read_to_string(&path) {
        Ok(text) => Some(text),
        Err(err) => {
            eprintln!(
                "{label}: skipped, cannot read {} ({err}); write the files with \
                 `cargo run -p oma-host-tests --bin gen-workloads -- DIR`, or unset OMA_WORKLOADS \
                 to generate them in memory",
                path.display()
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The base64 `data` of every media source in `messages`, in order.
    fn base64_lengths(messages: &[Value]) -> Vec<usize> {
        fn walk(value: &Value, out: &mut Vec<usize>) {
            match value {
                Value::Object(map) => {
                    if map.get("type") == Some(&json!("base64")) {
                        out.push(map["data"].as_str().expect("data is a string").len());
                    }
                    map.values().for_each(|v| walk(v, out));
                }
                Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
                _ => {}
            }
        }
        let mut out = Vec::new();
        messages.iter().for_each(|m| walk(m, &mut out));
        out
    }

    #[test]
    fn generated_workloads_are_deterministic_oma_json_of_the_expected_sizes() {
        // (name, messages, base64 lengths of its media)
        let expected: &[(&str, usize, &[usize])] = &[
            ("chat-small", 1, &[]),
            ("chat-history-51", 51, &[]),
            ("vision-1mib", 1, &[1 << 20]),
            ("tools-rich-20", 42, &[2732; 20]),
            ("video-url", 1, &[]),
            ("video-16mib", 1, &[16 << 20]),
        ];
        assert_eq!(
            expected.iter().map(|e| e.0).collect::<Vec<_>>(),
            WORKLOADS,
            "one expectation per workload, in order"
        );
        for &(name, count, lengths) in expected {
            let text = generate(name).expect("a known workload");
            assert_eq!(
                generate(name).as_deref(),
                Some(text.as_str()),
                "{name}: same bytes twice"
            );
            let parsed: Vec<Value> = serde_json::from_str(&text).expect("valid JSON");
            assert_eq!(parsed.len(), count, "{name}: messages");
            for message in &parsed {
                assert!(matches!(
                    message["role"].as_str(),
                    Some("user" | "assistant")
                ));
                let blocks = message["content"].as_array().expect("content is a list");
                assert!(
                    blocks.iter().all(|b| b["type"].is_string()),
                    "{name}: typed blocks"
                );
            }
            assert_eq!(base64_lengths(&parsed), lengths, "{name}: base64 lengths");
            for data in text.split("\"data\":\"").skip(1) {
                let data = &data[..data.find('"').expect("closed")];
                STANDARD.decode(data).expect("canonical base64");
            }
        }
        assert_eq!(generate("no-such-workload"), None);
    }

    #[test]
    fn filler_text_has_the_requested_length() {
        let messages = messages("chat-history-51").expect("known");
        for message in &messages[..50] {
            assert_eq!(
                message["content"][0]["text"].as_str().map(str::len),
                Some(500)
            );
        }
        let tools = messages_text_lengths("tools-rich-20");
        assert!(tools.iter().all(|&n| n == 300), "{tools:?}");
    }

    /// The lengths of the text parts inside the tool results of workload `name`.
    fn messages_text_lengths(name: &str) -> Vec<usize> {
        messages(name)
            .expect("known")
            .iter()
            .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
            .filter(|b| b["type"] == "tool_result")
            .map(|b| b["content"][0]["text"].as_str().map_or(0, str::len))
            .collect()
    }
}
