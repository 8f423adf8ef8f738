//! Runs the `oma-host` binary as a script would and checks its contract: exit status, stdout
//! and stderr.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};

fn conversations() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../conversations")
}

fn responses() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../responses")
}

fn path_str(path: PathBuf) -> String {
    path.to_str().expect("UTF-8 path").to_string()
}

/// Every variable `oma-host` reads a credential from, cleared in the child so that the
/// environment of the test run cannot change what it prints.
const KEY_VARIABLES: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "MINIMAX_API_KEY",
    "DEEPSEEK_API_KEY",
    "XAI_API_KEY",
    "AWS_BEARER_TOKEN_BEDROCK",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
];

fn oma_host(args: &[&str], stdin: Option<&str>) -> Output {
    oma_host_env(args, stdin, &[])
}

fn oma_host_env(args: &[&str], stdin: Option<&str>, env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_oma-host"));
    for name in KEY_VARIABLES {
        command.env_remove(name);
    }
    let mut child = command
        .envs(env.iter().copied())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("oma-host starts");
    let mut pipe = child.stdin.take().expect("stdin");
    if let Some(text) = stdin {
        pipe.write_all(text.as_bytes()).expect("write stdin");
    }
    drop(pipe);
    child.wait_with_output().expect("oma-host exits")
}

fn stdout_json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is JSON ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

#[test]
fn validate_prints_the_validated_conversation() {
    for name in ["media.json", "tools.json"] {
        let path = conversations().join(name);
        let output = oma_host(&["validate", path.to_str().expect("UTF-8 path")], None);
        assert_eq!(output.status.code(), Some(0), "{name}: {output:?}");
        let expected: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("readable")).expect("JSON");
        assert_eq!(stdout_json(&output), expected, "{name}");
        assert!(output.stderr.is_empty(), "{name}: {output:?}");
    }
}

#[test]
fn validate_reads_standard_input() {
    let output = oma_host(
        &["validate", "-"],
        Some(r#"[{"role": "user", "content": [{"type": "text", "text": "hi", "extra": 1}]}]"#),
    );
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}]\n"
    );
}

#[test]
fn an_invalid_conversation_prints_the_error_json_and_exits_1() {
    let path = conversations().join("invalid-video-url.json");
    let output = oma_host(&["validate", path.to_str().expect("UTF-8 path")], None);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert_eq!(
        stdout_json(&output),
        json!({"error": {
            "name": "InvalidMessageError",
            "code": "INVALID_MESSAGE",
            "message": "messages[0].content[1].source.url must be an absolute HTTP(S) URL",
            "retryable": false
        }})
    );

    for (input, message) in [
        (
            "{\"role\": \"user\"}",
            "messages must be an array, got object",
        ),
        (
            "[{\"role\": \"user\", \"content\": \"hi\"}]",
            "messages[0].content must be a ContentBlock[], got string",
        ),
    ] {
        let output = oma_host(&["validate", "-"], Some(input));
        assert_eq!(output.status.code(), Some(1), "{output:?}");
        assert_eq!(stdout_json(&output)["error"]["message"], message);
    }

    let output = oma_host(&["validate", "-"], Some("not json"));
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert_eq!(stdout_json(&output)["error"]["name"], "InvalidMessageError");
}

#[test]
fn usage_errors_exit_2_with_a_message_on_stderr() {
    for args in [
        &[][..],
        &["validate"],
        &["validate", "a.json", "b.json"],
        &["transmogrify", "a.json"],
        &["validate", "/nonexistent/oma-host-test.json"],
    ] {
        let output = oma_host(args, None);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {output:?}");
        assert!(output.stdout.is_empty(), "{args:?}: {output:?}");
        assert!(
            String::from_utf8_lossy(&output.stderr).starts_with("oma-host: "),
            "{args:?}: {output:?}"
        );
    }
}

#[test]
fn format_prints_the_request_for_anthropic() {
    let path = path_str(conversations().join("vision.json"));
    let output = oma_host(
        &[
            "format",
            "--provider",
            "anthropic",
            "--model",
            "claude-sonnet-4-6",
            "--system",
            "be brief",
            "--max-tokens",
            "256",
            "--temperature",
            "0.2",
            &path,
        ],
        None,
    );
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let request = stdout_json(&output);
    assert_eq!(request["method"], "POST");
    assert_eq!(request["url"], "https://api.anthropic.com/v1/messages");
    assert_eq!(request["headers"]["content-type"], "application/json");
    assert!(
        request["headers"]["anthropic-version"].is_string(),
        "{request}"
    );
    let body = &request["body"];
    assert_eq!(body["model"], "claude-sonnet-4-6");
    assert_eq!(body["system"], "be brief");
    assert_eq!(body["max_tokens"], 256);
    assert_eq!(body["temperature"], 0.2);
    let content = &body["messages"][0]["content"];
    assert_eq!(content[0]["type"], "text");
    assert_eq!(content[1]["type"], "image");
    assert_eq!(content[1]["source"]["media_type"], "image/png");
}

#[test]
fn format_refuses_video_on_anthropic() {
    let path = path_str(conversations().join("media.json"));
    let output = oma_host(
        &["format", "--provider", "anthropic", "--model", "m", &path],
        None,
    );
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert_eq!(
        stdout_json(&output),
        json!({"error": {
            "name": "UnsupportedContentBlockError",
            "code": "UNSUPPORTED_CONTENT_BLOCK",
            "message": "Anthropic Messages cannot represent content block type \"video\"",
            "retryable": false
        }})
    );
}

#[test]
fn format_sends_video_to_minimax_as_a_video_url_part() {
    let path = path_str(conversations().join("media.json"));
    let output = oma_host_env(
        &[
            "format",
            "--provider",
            "minimax",
            "--model",
            "MiniMax-M1",
            &path,
        ],
        None,
        &[("MINIMAX_API_KEY", "mm-test-secret-key")],
    );
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let request = stdout_json(&output);
    assert_eq!(request["url"], "https://api.minimax.io/v1/chat/completions");
    assert_eq!(request["headers"]["authorization"], "[redacted]");
    let content = &request["body"]["messages"][0]["content"];
    let video = content
        .as_array()
        .expect("content parts")
        .iter()
        .find(|part| part["type"] == "video_url")
        .unwrap_or_else(|| panic!("a video_url part in {content}"));
    assert_eq!(
        video["video_url"]["url"],
        "https://example.com/clips/harbour.mp4"
    );
    assert!(!String::from_utf8_lossy(&output.stdout).contains("mm-test-secret-key"));
}

#[test]
fn format_never_prints_the_key() {
    let path = path_str(conversations().join("vision.json"));
    let output = oma_host_env(
        &["format", "--provider", "anthropic", "--model", "m", &path],
        None,
        &[("ANTHROPIC_API_KEY", "sk-test-secret")],
    );
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stdout.contains("sk-test-secret"), "{stdout}");
    assert!(!stderr.contains("sk-test-secret"), "{stderr}");
    assert!(stdout.contains("[redacted]"), "{stdout}");
    assert_eq!(stdout_json(&output)["headers"]["x-api-key"], "[redacted]");

    // Without a key, no credential header is sent at all.
    let output = oma_host(
        &["format", "--provider", "anthropic", "--model", "m", &path],
        None,
    );
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(stdout_json(&output)["headers"].get("x-api-key").is_none());

    // Bedrock's SigV4 credentials: the signature and the session token are redacted too.
    let output = oma_host_env(
        &["format", "--provider", "bedrock", "--model", "m", &path],
        None,
        &[
            ("AWS_ACCESS_KEY_ID", "AKIDTESTACCESSKEY"),
            ("AWS_SECRET_ACCESS_KEY", "aws-test-secret-access-key"),
            ("AWS_SESSION_TOKEN", "aws-test-session-token"),
            ("AWS_REGION", "eu-west-1"),
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    for secret in [
        "AKIDTESTACCESSKEY",
        "aws-test-secret-access-key",
        "aws-test-session-token",
    ] {
        assert!(!stdout.contains(secret), "{stdout}");
    }
    let request = stdout_json(&output);
    assert_eq!(
        request["url"],
        "https://bedrock-runtime.eu-west-1.amazonaws.com/model/m/converse"
    );
    assert_eq!(request["headers"]["authorization"], "[redacted]");
    assert_eq!(request["headers"]["x-amz-security-token"], "[redacted]");
}

#[test]
fn format_of_an_unknown_provider_without_a_base_url_fails() {
    let path = path_str(conversations().join("vision.json"));
    let output = oma_host(
        &["format", "--provider", "no-such-llm", "--model", "m", &path],
        None,
    );
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let error = stdout_json(&output);
    assert_eq!(error["error"]["retryable"], false, "{error}");
    let message = error["error"]["message"].as_str().expect("a message");
    assert!(message.contains("unknown provider"), "{message}");

    // With a base URL, any name is an OpenAI-compatible server.
    let output = oma_host(
        &[
            "format",
            "--provider",
            "no-such-llm",
            "--model",
            "m",
            "--base-url",
            "http://localhost:8080/v1",
            &path,
        ],
        None,
    );
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(
        stdout_json(&output)["url"],
        "http://localhost:8080/v1/chat/completions"
    );
}

fn parse(provider: &str, model: Option<&str>) -> Value {
    let path = path_str(responses().join(format!("{provider}.json")));
    let mut args = vec!["parse", "--provider", provider];
    if let Some(model) = model {
        args.extend(["--model", model]);
    }
    args.push(&path);
    let output = oma_host(&args, None);
    assert_eq!(output.status.code(), Some(0), "{provider}: {output:?}");
    stdout_json(&output)
}

#[test]
fn parse_reads_each_providers_response() {
    assert_eq!(
        parse("anthropic", None),
        json!({
            "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
            "model": "claude-sonnet-4-6",
            "content": [
                {"type": "reasoning",
                 "text": "The user wants the release notes; I should read the file.",
                 "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds",
                 "provenance": "anthropic"},
                {"type": "text", "text": "I'll read the release notes first."},
                {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "read_file",
                 "input": {"path": "NOTES.md"}}
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 412, "output_tokens": 87}
        })
    );
    assert_eq!(
        parse("openai", None),
        json!({
            "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
            "model": "gpt-4o-2024-08-06",
            "content": [
                {"type": "text",
                 "text": "The clip shows a harbour at dusk; the screenshot is the same scene."},
                {"type": "tool_use", "id": "call_abc123", "name": "lookup_location",
                 "input": {"place": "harbour"}}
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 1117, "output_tokens": 46}
        })
    );
    assert_eq!(
        parse("bedrock", Some("anthropic.claude-sonnet-4-6")),
        json!({
            "id": "",
            "model": "anthropic.claude-sonnet-4-6",
            "content": [
                {"type": "reasoning", "text": "A short answer is enough.",
                 "signature": "ErcBCkgIBRABGAIiQHc2", "provenance": "bedrock"},
                {"type": "text",
                 "text": "Release 1.2.0 adds video blocks and stricter media validation."},
                {"type": "tool_use", "id": "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q", "name": "open_ticket",
                 "input": {"title": "Document 1.2.0"}}
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 221, "output_tokens": 58}
        })
    );

    // Gemini sends no ids: the component makes them, so only their form is fixed.
    let mut gemini = parse("gemini", Some("gemini-2.5-flash"));
    let id = gemini["id"].take();
    let call_id = gemini["content"][2]["id"].take();
    for id in [&id, &call_id] {
        assert!(
            id.as_str().is_some_and(|id| id.starts_with("gemini-")),
            "{id}"
        );
    }
    assert_ne!(id, call_id);
    assert_eq!(
        gemini,
        json!({
            "id": null,
            "model": "gemini-2.5-flash",
            "content": [
                {"type": "reasoning", "text": "Checking the weather before answering.",
                 "provenance": "gemini"},
                {"type": "text", "text": "Here is what I found."},
                {"type": "tool_use", "id": null, "name": "get_weather", "input": {"city": "Lisbon"},
                 "signature": "CiQB0e2Kb3dRh+BYdbZvmulSN2Pwwa2/"}
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 96, "output_tokens": 31}
        })
    );
}

#[test]
fn parse_of_a_malformed_body_prints_the_error_json() {
    let output = oma_host(&["parse", "--provider", "openai", "-"], Some("not json"));
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let error = stdout_json(&output);
    assert_eq!(error["error"]["provider"], "openai", "{error}");
    assert!(error["error"]["message"]
        .as_str()
        .is_some_and(|m| m.starts_with("malformed openai response")));

    let output = oma_host(&["parse", "--provider", "no-such-llm", "-"], Some("{}"));
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(stdout_json(&output)["error"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("unknown provider")));
}
