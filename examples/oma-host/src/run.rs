//! `oma-host run`: an agent run for real, through the component, against a provider.
//!
//! The key comes from the provider's usual variable and never shows in the output. Without
//! `--prompt`, `--stream` or `--progress` this is `agent.run`; `--prompt` is `agent.prompt`
//! on the history of `--history`; `--stream` prints each event as a JSON line as it arrives;
//! `--progress` runs through `run-agent` and prints its progress events as JSON lines on
//! standard error. `--before-run CMD` runs `sh -c CMD` as the hook: the context
//! `{"prompt", "messages", "agent"}` on its standard input, the result `{"prompt",
//! "messages"?}` expected on its standard output; a failing command fails the run.

use std::io::Write;
use std::process::{Command, Stdio};

use oma_harness::oma_json::{event_json, messages_json, run_result_json};
use oma_harness::{
    agent_config, AgentEvent, AllowOutbound, BeforeRunAnswer, BeforeRunContext, ContentBlock,
    Guest, GuestOptions, PromptInput, RunAgentOptions, RunInput, RunResult, ScriptedHost,
};
use serde_json::{json, Value};

use crate::{
    endpoint_from, env_var, guest_with, options_and_operands, read_input, read_messages,
    single_input, Failure, Input, RequestArgs, REDACTED, REQUEST_OPTIONS,
};

/// The operands of `run`.
#[derive(Debug, PartialEq)]
pub struct RunArgs {
    request: RequestArgs,
    source: Source,
    before_run: Option<String>,
    history: Option<Input>,
    prompt: bool,
    stream: bool,
    progress: bool,
}

/// Where the run's input comes from.
#[derive(Debug, PartialEq)]
enum Source {
    /// `--text TEXT`: one user text message.
    Text(String),
    /// FILE: an OMA message list, or with `--prompt` a content-block list (one user turn).
    File(Input),
}

/// Parses the arguments after `run`.
pub fn parse_args(args: &[String]) -> Result<RunArgs, String> {
    let (mut options, operands) = options_and_operands(
        "run",
        args,
        &[&REQUEST_OPTIONS[..], &["text", "before-run", "history"]].concat(),
        &["prompt", "stream", "progress"],
    )?;
    let source = match (options.take("text"), operands.is_empty()) {
        (Some(text), true) => Source::Text(text),
        (Some(_), false) => return Err("`run` takes a FILE or --text, not both".into()),
        (None, _) => Source::File(single_input("run", &operands)?),
    };
    let args = RunArgs {
        request: RequestArgs::take("run", &mut options)?,
        source,
        before_run: options.take("before-run"),
        history: options.take("history").map(|path| match path.as_str() {
            "-" => Input::Stdin,
            _ => Input::File(path.into()),
        }),
        prompt: options.take("prompt").is_some(),
        stream: options.take("stream").is_some(),
        progress: options.take("progress").is_some(),
    };
    if args.progress && (args.prompt || args.stream) {
        return Err(
            "--progress runs through run-agent and cannot be combined with --prompt or --stream"
                .into(),
        );
    }
    if args.prompt && args.stream {
        return Err("--prompt and --stream cannot be combined".into());
    }
    if args.history.is_some() && !args.prompt {
        return Err("--history seeds prompt(): it needs --prompt (run() ignores history)".into());
    }
    if matches!(args.source, Source::File(Input::Stdin)) && args.history == Some(Input::Stdin) {
        return Err("only one of FILE and --history can be standard input".into());
    }
    Ok(args)
}

/// Runs the agent; returns the result JSON to print, or `RunFailed` with it.
pub async fn run(args: RunArgs) -> Result<String, Failure> {
    let request = &args.request;
    let (endpoint, secrets) = endpoint_from(&request.provider, request.base_url.clone(), env_var);
    let mut host = ScriptedHost::new();
    if let Some(command) = args.before_run.clone() {
        host = host.with_hook(move |context| run_hook(&command, context));
    }
    if args.progress {
        let secrets = secrets.clone();
        host = host.with_progress_sink(move |event| {
            let data = serde_json::from_str::<Value>(&event.data).unwrap_or(Value::Null);
            let line = json!({"type": event.type_, "agent": event.agent, "data": data});
            eprintln!("{}", scrub(&line.to_string(), &secrets));
        });
    }
    let mut guest = guest_with(GuestOptions {
        hooks: Some(Box::new(AllowOutbound)),
        host: Some(Box::new(host)),
        ..GuestOptions::default()
    })
    .await?;

    let mut config = agent_config("oma-host", &request.model, endpoint);
    request.apply(&mut config.system_prompt, &mut config.sampling);
    config.before_run = args.before_run.is_some();
    config.call.max_attempts = 3;
    config.call.base_delay_ms = 1_000;
    config.call.timeout_ms = 120_000;
    if let Some(history) = &args.history {
        config.history = read_messages(&mut guest, history).await?;
    }

    let result = if args.prompt {
        let input = match &args.source {
            Source::Text(text) => PromptInput::Text(text.clone()),
            Source::File(input) => PromptInput::Blocks(read_blocks(&mut guest, input).await?),
        };
        let agent = create(&mut guest, &config).await?;
        component(guest.prompt(&agent, &input).await)?
    } else {
        let input = match &args.source {
            Source::Text(text) => RunInput::Text(text.clone()),
            Source::File(input) => RunInput::Messages(read_messages(&mut guest, input).await?),
        };
        if args.progress {
            let options = RunAgentOptions {
                progress: true,
                evaluation: None,
            };
            component(guest.run_agent(&config, &input, &options).await)?
        } else if args.stream {
            let agent = create(&mut guest, &config).await?;
            let stream = component(guest.stream(&agent, &input).await)?;
            stream_events(&mut guest, stream, &secrets).await?
        } else {
            let agent = create(&mut guest, &config).await?;
            component(guest.run(&agent, &input).await)?
        }
    };
    let text = scrub(&run_result_json(&result).to_string(), &secrets);
    if result.success {
        Ok(text)
    } else {
        Err(Failure::RunFailed(text))
    }
}

/// The outer (host) and inner (component) errors of a call as a [`Failure`].
fn component<T>(outcome: anyhow::Result<Result<T, oma_harness::WitError>>) -> Result<T, Failure> {
    outcome.map_err(Failure::Host)?.map_err(Failure::Component)
}

async fn create(
    guest: &mut Guest,
    config: &oma_harness::AgentConfig,
) -> Result<oma_harness::AgentHandle, Failure> {
    component(guest.create_agent(config).await)
}

/// Prints each event as a JSON line as it arrives and returns the final result.
async fn stream_events(
    guest: &mut Guest,
    stream: oma_harness::AgentStreamHandle,
    secrets: &[String],
) -> Result<RunResult, Failure> {
    let mut out = std::io::stdout();
    loop {
        match guest
            .next_agent_event(&stream)
            .await
            .map_err(Failure::Host)?
        {
            Some(AgentEvent::Done(result) | AgentEvent::Error(result)) => {
                guest
                    .close_agent_stream(stream)
                    .await
                    .map_err(Failure::Host)?;
                return Ok(result);
            }
            Some(event) => {
                let line = scrub(&event_json(&event).to_string(), secrets);
                let _ = writeln!(out, "{line}").and_then(|()| out.flush());
            }
            None => {
                return Err(Failure::Host(anyhow::anyhow!(
                    "the stream ended without a result"
                )))
            }
        }
    }
}

/// A content-block list (`prompt()`'s structured input) from OMA JSON, read through the
/// component as the one user turn it forms, so errors carry OMA's `messages[0]...` paths.
async fn read_blocks(guest: &mut Guest, input: &Input) -> Result<Vec<ContentBlock>, Failure> {
    let bytes = read_input(input)?;
    let text = std::str::from_utf8(&bytes).map_err(Failure::NotText)?;
    let blocks: Value = serde_json::from_str(text).map_err(|e| {
        Failure::Usage(format!(
            "--prompt reads a JSON array of content blocks: {e}"
        ))
    })?;
    let turn = json!([{"role": "user", "content": blocks}]).to_string();
    let mut messages = component(guest.messages_from_json(&turn).await)?;
    Ok(messages.pop().map(|m| m.content).unwrap_or_default())
}

/// Runs `sh -c command` as the `beforeRun` hook.
fn run_hook(command: &str, context: &BeforeRunContext) -> BeforeRunAnswer {
    let agent = serde_json::from_str::<Value>(&context.config).unwrap_or(Value::Null);
    let input = json!({
        "prompt": context.prompt,
        "messages": messages_json(&context.messages),
        "agent": agent,
    })
    .to_string();
    let child = Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) => return BeforeRunAnswer::Failed(format!("beforeRun command did not start: {e}")),
    };
    if let Some(mut stdin) = child.stdin.take() {
        // A hook that does not read its input is allowed: a closed pipe is not a failure.
        let _ = stdin.write_all(input.as_bytes());
    }
    match child.wait_with_output() {
        Ok(output) if output.status.success() => {
            BeforeRunAnswer::Json(String::from_utf8_lossy(&output.stdout).into_owned())
        }
        Ok(output) => BeforeRunAnswer::Failed(format!(
            "beforeRun command failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )),
        Err(e) => BeforeRunAnswer::Failed(format!("beforeRun command failed: {e}")),
    }
}

/// `text` with every secret of 4 characters or more replaced by `[redacted]`: the component
/// already keeps keys out of results; this is the host's own guarantee for what it prints.
fn scrub(text: &str, secrets: &[String]) -> String {
    secrets
        .iter()
        .filter(|s| s.len() >= 4)
        .fold(text.to_owned(), |text, secret| {
            text.replace(secret.as_str(), REDACTED)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::args;

    #[test]
    fn run_command_lines() {
        let ok = parse_args(&args(&[
            "--provider",
            "openai",
            "--model",
            "m",
            "--text",
            "hi",
            "--stream",
        ]))
        .unwrap();
        assert_eq!(ok.source, Source::Text("hi".into()));
        assert!(ok.stream && !ok.prompt && !ok.progress);
        let ok = parse_args(&args(&[
            "--provider",
            "openai",
            "--model",
            "m",
            "--prompt",
            "--history",
            "h.json",
            "b.json",
        ]))
        .unwrap();
        assert_eq!(ok.history, Some(Input::File("h.json".into())));
        assert_eq!(ok.source, Source::File(Input::File("b.json".into())));
        for (line, error) in [
            (&["--provider", "p", "--model", "m"][..], "`run` needs a FILE (or - for standard input)"),
            (&["--provider", "p", "--model", "m", "--text", "t", "f"], "`run` takes a FILE or --text, not both"),
            (&["--model", "m", "--text", "t"], "`run` needs --provider"),
            (&["--provider", "p", "--model", "m", "--text", "t", "--stream=yes"], "--stream takes no value"),
            (&["--provider", "p", "--model", "m", "--text", "t", "--progress", "--stream"], "--progress runs through run-agent and cannot be combined with --prompt or --stream"),
            (&["--provider", "p", "--model", "m", "--text", "t", "--history", "h"], "--history seeds prompt(): it needs --prompt (run() ignores history)"),
            (&["--provider", "p", "--model", "m", "--text", "t", "--prompt", "--prompt"], "--prompt is given twice"),
        ] {
            assert_eq!(parse_args(&args(line)).unwrap_err(), error, "{line:?}");
        }
    }

    #[test]
    fn scrub_replaces_every_secret() {
        assert_eq!(
            scrub("key sk-1234 and sk-1234", &["sk-1234".into(), "ab".into()]),
            "key [redacted] and [redacted]"
        );
    }
}
