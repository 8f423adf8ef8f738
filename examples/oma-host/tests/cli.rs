//! Runs the `oma-host` binary as a script would and checks its contract: exit status, stdout
//! and stderr.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};

fn conversations() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../conversations")
}

fn oma_host(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_oma-host"))
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
