//! Runs the `oma-host` binary as a script would and checks its contract: exit status, stdout
//! and stderr.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use oma_loopback::{Reply, Simulator, CANNED_TEXT};
use serde_json::{json, Value};

fn conversations() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/conversations")
}

fn responses() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/responses")
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
            "message": "Anthropic Messages cannot represent the \"video\" content block: OMA does not map video for this adapter yet",
            "retryable": false,
            "provider": "Anthropic Messages",
            "blockType": "video"
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

/// A base URL's userinfo and credential query values are never printed, from `--base-url` or
/// the environment.
#[test]
fn format_never_prints_the_credentials_of_a_base_url() {
    let path = path_str(conversations().join("vision.json"));
    let from_flag = oma_host_env(
        &[
            "format",
            "--provider",
            "openai",
            "--model",
            "m",
            "--base-url",
            "http://user:flag-pass-9911@127.0.0.1:9/v1?api-key=flag-query-7733",
            &path,
        ],
        None,
        &[],
    );
    let from_env = oma_host_env(
        &["format", "--provider", "openai", "--model", "m", &path],
        None,
        &[("OPENAI_BASE_URL", "http://env-token-5522@127.0.0.1:9/v1")],
    );
    for output in [from_flag, from_env] {
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        let shown = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        for secret in ["flag-pass-9911", "flag-query-7733", "env-token-5522"] {
            assert!(!shown.contains(secret), "{shown}");
        }
        let url = stdout_json(&output)["url"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(url.starts_with("http://[redacted]@127.0.0.1:9/v1"), "{url}");
    }
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

// ---------------------------------------------------------------- demo and run

#[test]
fn demo_runs_the_whole_pipeline_offline() {
    let output = oma_host(&["demo"], None);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for needle in [
        "== 1. validate",
        "must be an absolute HTTP(S) URL",
        "UnsupportedContentBlockError",
        "\"type\": \"video_url\"",
        "beforeRun got prompt",
        "called a tool: {\"type\":\"tool_use\",\"id\":\"call_frame_1\"",
        "request 2: POST /chat/completions over wasi-http",
        "Answer in one sentence.",
        "\"success\": true",
        "\"toolName\": \"describe_frame\"",
    ] {
        assert!(stdout.contains(needle), "missing {needle:?} in:\n{stdout}");
    }
    assert!(
        !stdout.contains("sk-demo-not-a-key"),
        "the demo key was printed"
    );
}

/// `oma-host run` against the loopback simulator, with `OPENAI_API_KEY` set to `KEY`.
fn run_against(simulator: &Simulator, extra: &[&str], stdin: Option<&str>) -> Output {
    let base = simulator.base_url();
    let mut args = vec![
        "run",
        "--provider",
        "openai",
        "--model",
        "gpt-4o",
        "--base-url",
        &base,
    ];
    args.extend_from_slice(extra);
    oma_host_env(&args, stdin, &[("OPENAI_API_KEY", RUN_KEY)])
}

const RUN_KEY: &str = "sk-run-SECRET-5e1f";

#[test]
fn run_sends_the_conversation_and_prints_the_result() {
    let simulator = Simulator::start().unwrap();
    let output = run_against(
        &simulator,
        &[&path_str(conversations().join("media.json"))],
        None,
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    let result = stdout_json(&output);
    assert_eq!(result["success"], true);
    assert_eq!(result["output"], CANNED_TEXT);
    assert_eq!(result["messages"][0]["role"], "assistant");
    assert_eq!(result["tokenUsage"]["input_tokens"], 12);
    let request = &simulator.requests()[0];
    assert_eq!(
        request.header("authorization"),
        Some(format!("Bearer {RUN_KEY}").as_str())
    );
    let body = request.json().unwrap();
    assert_eq!(body["messages"][0]["content"][2]["type"], "video_url");
    assert!(!String::from_utf8_lossy(&output.stdout).contains(RUN_KEY));
}

/// A run past `--timeout` ends as a failed result with status `timeout` (exit 1), however long
/// the provider would have taken.
#[test]
fn run_past_its_timeout_fails_with_status_timeout() {
    let simulator = Simulator::start().unwrap();
    simulator.script([Reply::Delay(std::time::Duration::from_secs(5))]);
    let started = std::time::Instant::now();
    let output = run_against(&simulator, &["--text", "hi", "--timeout", "0.5"], None);
    assert!(!output.status.success());
    let result = stdout_json(&output);
    assert_eq!(result["success"], false, "{result}");
    assert_eq!(result["status"]["code"], "timeout", "{result}");
    assert_eq!(result["errorInfo"]["name"], "TimeoutError");
    assert_eq!(
        result["errorInfo"]["message"],
        "Agent \"oma-host\" exceeded whole-run timeout of 500ms"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(4),
        "the run did not wait for the provider"
    );
}

#[test]
fn run_with_a_before_run_command_rewrites_the_prompt() {
    let simulator = Simulator::start().unwrap();
    let hook = r#"cat >/dev/null; echo '{"prompt": "rewritten by the hook"}'"#;
    let output = run_against(
        &simulator,
        &["--text", "original", "--before-run", hook],
        None,
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    let body = simulator.requests()[0].json().unwrap();
    assert_eq!(body["messages"][0]["content"], "rewritten by the hook");

    // The hook sees OMA's context on its standard input.
    let simulator = Simulator::start().unwrap();
    let check = r#"input=$(cat); case "$input" in *'"prompt":"hi","messages":[{"role":"user"'*'"model":"gpt-4o"'*) echo '{"prompt":"context seen"}';; *) echo '{"prompt":"context missing"}';; esac"#;
    let output = run_against(&simulator, &["--text", "hi", "--before-run", check], None);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    let body = simulator.requests()[0].json().unwrap();
    assert_eq!(body["messages"][0]["content"], "context seen");
}

#[test]
fn a_failing_hook_command_is_a_failed_run() {
    let simulator = Simulator::start().unwrap();
    let output = run_against(
        &simulator,
        &["--text", "hi", "--before-run", "echo nope >&2; exit 3"],
        None,
    );
    assert_eq!(output.status.code(), Some(1));
    let result = stdout_json(&output);
    assert_eq!(result["success"], false);
    assert_eq!(result["errorInfo"]["kind"], "callback");
    assert!(
        result["output"].as_str().unwrap().contains("nope"),
        "{result}"
    );
    assert_eq!(simulator.request_count(), 0);
    // A hook that answers with a non-string prompt fails as OMA's InvalidMessageError.
    let output = run_against(
        &simulator,
        &["--text", "hi", "--before-run", "echo '{\"prompt\": 1}'"],
        None,
    );
    let result = stdout_json(&output);
    assert_eq!(result["output"], "beforeRun.prompt must be a string");
    assert_eq!(result["errorInfo"]["code"], "INVALID_MESSAGE");
}

#[test]
fn run_streams_events_as_json_lines() {
    let simulator = Simulator::start().unwrap();
    let output = run_against(&simulator, &["--text", "hi", "--stream"], None);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON lines"))
        .collect();
    let deltas: Vec<&str> = lines
        .iter()
        .filter(|l| l["type"] == "text_delta")
        .map(|l| l["text"].as_str().unwrap())
        .collect();
    assert_eq!(deltas.concat(), CANNED_TEXT);
    assert!(deltas.len() > 1, "pieces arrive one by one: {deltas:?}");
    let last = lines.last().unwrap();
    assert_eq!(last["success"], true);
}

#[test]
fn run_prompt_appends_to_the_given_history() {
    let simulator = Simulator::start().unwrap();
    let history = r#"[{"role":"user","content":[{"type":"text","text":"earlier"}]},{"role":"assistant","content":[{"type":"text","text":"noted"}]}]"#;
    let blocks = r#"[{"type":"text","text":"and now?"}]"#;
    let output = run_against(
        &simulator,
        &["--prompt", "--history", "-", "--text", "and now?"],
        Some(history),
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    let body = simulator.requests()[0].json().unwrap();
    assert_eq!(body["messages"].as_array().unwrap().len(), 3);
    // Blocks from a file (here stdin) are one user turn.
    let output = run_against(&simulator, &["--prompt", "-"], Some(blocks));
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    // Invalid blocks are the error JSON, nothing sent.
    let count = simulator.request_count();
    let output = run_against(
        &simulator,
        &["--prompt", "-"],
        Some(
            r#"[{"type":"video","source":{"type":"url","media_type":"video/mp4","url":"ftp://x/y"}}]"#,
        ),
    );
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stdout_json(&output)["error"]["name"], "InvalidMessageError");
    assert_eq!(simulator.request_count(), count);
}

#[test]
fn run_progress_prints_events_on_stderr() {
    let simulator = Simulator::start().unwrap();
    let output = run_against(&simulator, &["--text", "hi", "--progress"], None);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    let events: Vec<Value> = stderr
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON lines"))
        .collect();
    assert_eq!(events[0]["type"], "agent_start");
    assert_eq!(events[0]["data"], json!({"prompt": "hi"}));
    assert_eq!(events[1]["type"], "agent_complete");
    assert_eq!(events[1]["data"]["success"], true);
}

/// `--trace FILE` writes OMA's trace events as JSON lines: the `llm_call`, then the `agent`,
/// one run id, the agent span as the call's parent; `--trace -` prints them before the result.
#[test]
fn run_trace_writes_omas_trace_events_as_json_lines() {
    let simulator = Simulator::start().unwrap();
    let file = std::env::temp_dir().join(format!("oma-host-trace-{}.jsonl", std::process::id()));
    let output = run_against(
        &simulator,
        &["--text", "hi", "--trace", &path_str(file.clone())],
        None,
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    assert_eq!(stdout_json(&output)["success"], true);
    let text = std::fs::read_to_string(&file).unwrap();
    let events: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON lines"))
        .collect();
    assert_eq!(events.len(), 2, "{text}");
    assert_eq!(events[0]["type"], "llm_call");
    assert_eq!(events[0]["model"], "gpt-4o");
    assert_eq!(events[0]["phase"], "turn");
    assert_eq!(events[0]["turn"], 1);
    assert_eq!(events[0]["tokens"]["input_tokens"], 12);
    assert_eq!(events[1]["type"], "agent");
    assert_eq!(events[1]["agent"], "oma-host");
    assert_eq!(events[1]["turns"], 1);
    assert_eq!(events[1]["toolCalls"], 0);
    assert_eq!(events[0]["runId"], events[1]["runId"]);
    assert_eq!(events[0]["parentId"], events[1]["spanId"]);
    for event in &events {
        let (start, end) = (
            event["startMs"].as_u64().unwrap(),
            event["endMs"].as_u64().unwrap(),
        );
        assert_eq!(event["durationMs"].as_u64().unwrap(), end - start);
    }
    assert!(!text.contains(RUN_KEY));
    let _ = std::fs::remove_file(&file);
    let output = run_against(&simulator, &["--text", "hi", "--trace", "-"], None);
    assert!(output.status.success());
    let stdout = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON lines"))
        .collect();
    assert_eq!(lines.len(), 3, "{stdout}");
    assert_eq!(lines[1]["type"], "agent");
    assert_eq!(lines[2]["success"], true, "the result comes last");
}

#[test]
fn a_provider_failure_is_a_failed_result_without_the_key() {
    let simulator = Simulator::start().unwrap();
    simulator.script([Reply::json(
        401,
        &format!(r#"{{"error": {{"message": "Incorrect API key provided: {RUN_KEY}"}}}}"#),
    )]);
    let output = run_against(&simulator, &["--text", "hi"], None);
    assert_eq!(output.status.code(), Some(1));
    let result = stdout_json(&output);
    assert_eq!(result["success"], false);
    assert_eq!(result["errorInfo"]["httpStatus"], 401);
    assert_eq!(result["status"]["code"], "error");
    assert!(!String::from_utf8_lossy(&output.stdout).contains(RUN_KEY));
}

/// `oma-host run` against the simulator that must end within `limit`: a hang fails the test
/// instead of stalling it.
fn run_within(
    simulator: &Simulator,
    base_url: Option<&str>,
    extra: &[&str],
    stdin: &str,
    limit: std::time::Duration,
) -> Output {
    let base = base_url.map_or_else(|| simulator.base_url(), str::to_owned);
    let mut command = Command::new(env!("CARGO_BIN_EXE_oma-host"));
    for name in KEY_VARIABLES {
        command.env_remove(name);
    }
    let mut child = command
        .env("OPENAI_API_KEY", RUN_KEY)
        .args(["run", "--provider", "openai", "--model", "gpt-4o"])
        .args(["--base-url", &base])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("oma-host starts");
    let mut pipe = child.stdin.take().expect("stdin");
    let stdin = stdin.to_owned();
    let writer = std::thread::spawn(move || {
        let _ = pipe.write_all(stdin.as_bytes());
    });
    let started = std::time::Instant::now();
    while child.try_wait().expect("waits").is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("oma-host did not finish within {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    writer.join().expect("the writer ends");
    child.wait_with_output().expect("oma-host exits")
}

/// A conversation with a 1 MiB image (base64), as OMA JSON.
fn one_mib_image_conversation() -> String {
    json!([{"role": "user", "content": [
        {"type": "text", "text": "What is in this picture?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": "A".repeat(1 << 20)}}
    ]}])
    .to_string()
}

/// `cat` echoes the context while it is still being written: with the context written from a
/// thread of its own this finishes (it used to deadlock once the pipes filled).
#[test]
fn a_hook_that_echoes_a_large_context_does_not_deadlock() {
    let simulator = Simulator::start().unwrap();
    let output = run_within(
        &simulator,
        None,
        &["--before-run", "cat", "-"],
        &one_mib_image_conversation(),
        std::time::Duration::from_secs(120),
    );
    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(stdout_json(&output)["success"], true);
    let body = simulator.requests()[0].json().unwrap();
    let sent = body.to_string();
    assert!(sent.contains(&"A".repeat(1 << 20)), "the image went out");
}

/// A timeout ends what the hook command started too, not only the shell.
#[test]
fn a_hook_timeout_ends_the_commands_children() {
    let simulator = Simulator::start().unwrap();
    let pid_file = std::env::temp_dir().join(format!("oma-host-hook-{}.pid", std::process::id()));
    let hook = format!("sleep 30 & echo $! > {}; wait", pid_file.display());
    let output = run_within(
        &simulator,
        None,
        &[
            "--text",
            "hi",
            "--before-run",
            &hook,
            "--hook-timeout",
            "0.5",
        ],
        "",
        std::time::Duration::from_secs(60),
    );
    assert_eq!(output.status.code(), Some(1));
    let pid = std::fs::read_to_string(&pid_file).expect("the hook wrote its child's pid");
    let _ = std::fs::remove_file(&pid_file);
    let stat = format!("/proc/{}/stat", pid.trim());
    let gone = (0..100).any(|_| {
        let alive = std::fs::read_to_string(&stat)
            .map(|text| !text.split(") ").nth(1).unwrap_or("").starts_with('Z'))
            .unwrap_or(false);
        if alive {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        !alive
    });
    assert!(gone, "the hook's child {} outlived the timeout", pid.trim());
}

#[test]
fn a_hook_past_its_timeout_fails_the_run() {
    let simulator = Simulator::start().unwrap();
    let started = std::time::Instant::now();
    let output = run_within(
        &simulator,
        None,
        &[
            "--text",
            "hi",
            "--before-run",
            "exec sleep 30",
            "--hook-timeout",
            "0.5",
        ],
        "",
        std::time::Duration::from_secs(60),
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    assert_eq!(output.status.code(), Some(1));
    let result = stdout_json(&output);
    assert_eq!(result["success"], false);
    assert_eq!(result["errorInfo"]["kind"], "callback");
    assert!(
        result["output"]
            .as_str()
            .unwrap()
            .contains("timed out after 0.5 s"),
        "{result}"
    );
    assert_eq!(simulator.request_count(), 0);
}

#[test]
fn a_hook_that_writes_too_much_fails_the_run() {
    let simulator = Simulator::start().unwrap();
    let output = run_within(
        &simulator,
        None,
        &["--text", "hi", "--before-run", "head -c 70000000 /dev/zero"],
        "",
        std::time::Duration::from_secs(60),
    );
    assert_eq!(output.status.code(), Some(1));
    let result = stdout_json(&output);
    assert!(
        result["output"]
            .as_str()
            .unwrap()
            .contains("wrote more than 64 MiB"),
        "{result}"
    );
    assert_eq!(simulator.request_count(), 0);
}

/// `run` reaches loopback (the simulator, above) but never a metadata or link-local address,
/// in any form: refused before any socket opens (nothing is sent anywhere), noted on stderr.
#[test]
fn run_never_reaches_metadata_or_link_local_addresses() {
    let simulator = Simulator::start().unwrap();
    for base in [
        "http://169.254.169.254/v1",
        "http://[::ffff:169.254.169.254]/v1",
        "http://[fd00:ec2::254]/v1",
        "http://169.254.10.1:8080/v1",
        "http://[fe80::1]:8080/v1",
        "http://0.0.0.0:8080/v1",
    ] {
        let output = run_within(
            &simulator,
            Some(base),
            &["--text", "hi"],
            "",
            std::time::Duration::from_secs(60),
        );
        assert_eq!(output.status.code(), Some(1), "{base}");
        let result = stdout_json(&output);
        assert_eq!(result["success"], false, "{base}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("refused to connect to"), "{base}: {stderr}");
        assert!(!stderr.contains(RUN_KEY) && !result.to_string().contains(RUN_KEY));
    }
    assert_eq!(simulator.request_count(), 0);
}

// ---------------------------------------------------------------- OMA_COMPONENT

/// Every command that runs the guest, with the built-in guest and with `OMA_COMPONENT` naming
/// the built component: the same exit status and, where the output does not depend on the
/// moment (`validate`, `format`, `parse`), the same output; every run ends with its result.
/// `run --stream` with `OMA_COMPONENT` used to end with "maximum concurrent limit of 1 for
/// fibers reached" after its events, and `demo` (two instances) could not run at all.
/// (`serve` runs the gateway component, chosen with `--component`, not `OMA_COMPONENT`;
/// `tests/gateway.rs` covers it.)
#[test]
fn every_command_runs_with_the_built_in_guest_and_with_oma_component() {
    let component = oma_artifacts::COMPONENT_FILE;
    assert!(
        std::path::Path::new(component).is_file(),
        "the built component at {component}"
    );
    let media = path_str(conversations().join("media.json"));
    let tools = path_str(conversations().join("tools.json"));
    let response = path_str(responses().join("openai.json"));
    let invalid = path_str(conversations().join("invalid-video-url.json"));
    let offline: Vec<(Vec<&str>, Option<&str>)> = vec![
        (vec!["validate", &media], None),
        (vec!["validate", "-"], Some("[]")),
        (
            vec![
                "format",
                "--provider",
                "anthropic",
                "--model",
                "claude-sonnet-4-6",
                &tools,
            ],
            None,
        ),
        (
            vec![
                "parse",
                "--provider",
                "openai",
                "--model",
                "gpt-4o",
                &response,
            ],
            None,
        ),
        (vec!["validate", &invalid], None),
    ];
    for (args, stdin) in &offline {
        let built_in = oma_host(args, *stdin);
        let overridden = oma_host_env(args, *stdin, &[("OMA_COMPONENT", component)]);
        assert_eq!(
            built_in.status.code(),
            overridden.status.code(),
            "{args:?}: {overridden:?}"
        );
        assert_eq!(
            String::from_utf8_lossy(&built_in.stdout),
            String::from_utf8_lossy(&overridden.stdout),
            "{args:?}"
        );
    }

    for env in [vec![], vec![("OMA_COMPONENT", component)]] {
        let simulator = Simulator::start().unwrap();
        let base = simulator.base_url();
        let run = |extra: &[&str], stdin: Option<&str>| {
            let mut args = vec![
                "run",
                "--provider",
                "openai",
                "--model",
                "gpt-4o",
                "--base-url",
                &base,
            ];
            args.extend_from_slice(extra);
            let mut env = env.clone();
            env.push(("OPENAI_API_KEY", RUN_KEY));
            oma_host_env(&args, stdin, &env)
        };
        let label = if env.is_empty() {
            "built-in"
        } else {
            "OMA_COMPONENT"
        };
        let last_line = |output: &Output| -> Value {
            let stdout = String::from_utf8_lossy(&output.stdout);
            let line = stdout.lines().last().unwrap_or_default().to_owned();
            serde_json::from_str(&line).unwrap_or_else(|e| {
                panic!(
                    "{label}: a JSON result last ({e}): {stdout}\n{}",
                    String::from_utf8_lossy(&output.stderr)
                )
            })
        };
        for extra in [
            &["--text", "hi"][..],
            &["--text", "hi", "--stream"],
            &["--text", "hi", "--progress"],
            &["--prompt", "--text", "hi"],
            &[&media],
            &[&media, "--stream"],
        ] {
            let output = run(extra, None);
            let result = last_line(&output);
            assert_eq!(output.status.code(), Some(0), "{label} {extra:?}: {result}");
            assert_eq!(result["success"], true, "{label} {extra:?}: {result}");
            assert_eq!(result["output"], CANNED_TEXT, "{label} {extra:?}");
        }
        // A failed streamed run ends with its result too, and exits 1.
        simulator.script([Reply::status(400)]);
        let output = run(&["--text", "hi", "--stream"], None);
        let result = last_line(&output);
        assert_eq!(output.status.code(), Some(1), "{label}: {result}");
        assert_eq!(result["success"], false, "{label}: {result}");
        assert_eq!(result["errorInfo"]["httpStatus"], 400, "{label}: {result}");

        let mut env = env.clone();
        env.push(("OPENAI_API_KEY", "unused"));
        let demo = oma_host_env(&["demo"], None, &env);
        let stdout = String::from_utf8_lossy(&demo.stdout);
        assert!(
            demo.status.success(),
            "{label}: {stdout}\n{}",
            String::from_utf8_lossy(&demo.stderr)
        );
        assert!(stdout.contains("\"success\": true"), "{label}: {stdout}");
    }
}

/// `oma-host run` has no retry count of its own: a provider's 500 is retried by the provider's
/// default policy (the OpenAI SDK's: after about half a second), and a 400 is not retried.
#[test]
fn run_retries_as_the_providers_default_policy_says() {
    let simulator = Simulator::start().unwrap();
    simulator.script([Reply::status(500)]);
    let output = run_against(&simulator, &["--text", "hi"], None);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(simulator.request_count(), 2);

    let simulator = Simulator::start().unwrap();
    simulator.script([Reply::status(500), Reply::status(500), Reply::status(500)]);
    let output = run_against(&simulator, &["--text", "hi"], None);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        simulator.request_count(),
        3,
        "two retries, as the SDK makes"
    );

    // The provider's code reaches the printed result.
    let simulator = Simulator::start().unwrap();
    simulator.script([Reply::json(
        400,
        r#"{"error": {"message": "Unsupported parameter: 'max_tokens'.", "type": "invalid_request_error", "param": "max_tokens", "code": "unsupported_parameter"}}"#,
    )]);
    let output = run_against(&simulator, &["--text", "hi"], None);
    assert_eq!(output.status.code(), Some(1));
    let result = stdout_json(&output);
    assert_eq!(
        result["errorInfo"]["code"], "unsupported_parameter",
        "{result}"
    );
    assert_eq!(simulator.request_count(), 1);
}

/// An OpenAI chat completion whose text is `text`.
fn completion(text: &str) -> String {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    })
    .to_string()
}

/// `--output-schema FILE` gives the final answer OMA's `outputSchema`: the instruction in the
/// system prompt, one retry with OMA's feedback, `structured` in the printed result; a schema
/// that is no schema fails before any request, naming `outputSchema`.
#[test]
fn run_output_schema_validates_the_answer_with_one_retry() {
    let dir = std::env::temp_dir();
    let schema = dir.join(format!("oma-host-schema-{}.json", std::process::id()));
    std::fs::write(
        &schema,
        r#"{"type": "object", "properties": {"mood": {"type": "string"}}, "required": ["mood"]}"#,
    )
    .unwrap();
    let simulator = Simulator::start().unwrap();
    simulator.script([
        Reply::json(200, &completion("Mostly fine.")),
        Reply::json(200, &completion(r#"{"mood": "good"}"#)),
    ]);
    let output = run_against(
        &simulator,
        &[
            "--text",
            "Rate it.",
            "--output-schema",
            &path_str(schema.clone()),
        ],
        None,
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    let result = stdout_json(&output);
    assert_eq!(result["structured"], json!({"mood": "good"}));
    assert_eq!(result["tokenUsage"]["input_tokens"], 20);
    let requests = simulator.requests();
    assert_eq!(requests.len(), 2);
    let first = requests[0].json().unwrap();
    assert!(first["messages"][0]["content"]
        .as_str()
        .is_some_and(|s| s.contains("## Output Format (REQUIRED)")));
    let retry = requests[1].json().unwrap();
    let feedback = retry["messages"]
        .as_array()
        .unwrap()
        .last()
        .cloned()
        .unwrap();
    assert!(feedback["content"]
        .to_string()
        .contains("Raw output begins with: \\\"Mostly fine.\\\""));

    std::fs::write(&schema, r#"{"type": "text"}"#).unwrap();
    let simulator = Simulator::start().unwrap();
    let output = run_against(
        &simulator,
        &[
            "--text",
            "Rate it.",
            "--output-schema",
            &path_str(schema.clone()),
        ],
        None,
    );
    std::fs::remove_file(&schema).ok();
    assert_eq!(output.status.code(), Some(1));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("outputSchema"), "{text}");
    assert!(simulator.requests().is_empty());
}
