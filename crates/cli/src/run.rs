//! `oma-host run`: an agent run for real, through the component, against a provider.
//!
//! The key comes from the provider's usual variable and never shows in the output. Without
//! `--prompt`, `--stream` or `--progress` this is `agent.run`; `--prompt` is `agent.prompt`
//! on the history of `--history`; `--stream` prints each event as a JSON line as it arrives;
//! `--progress` runs through `run-agent` and prints its progress events as JSON lines on
//! standard error. `--before-run CMD` runs `sh -c CMD` as the hook: the context
//! `{"prompt", "messages", "agent"}` on its standard input, the result `{"prompt",
//! "messages"?}` expected on its standard output; a failing command fails the run, and so does
//! one that runs longer than `--hook-timeout` (60 s by default) or writes more than
//! [`HOOK_OUTPUT_LIMIT`]. The context is written from a thread of its own while the output is
//! read, so a hook that echoes a large context as it reads it (`cat`) cannot deadlock.
//!
//! Outbound requests go through a [`GuardedOutbound`] with [`AddressPolicy::LOCAL_SERVERS`]:
//! the provider the user named may be on the public internet, on loopback or on the LAN (local
//! model servers), but never at a link-local, unspecified or cloud-metadata address, checked
//! after DNS resolution; a refusal is noted on standard error.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use oma_wasmtime::oma_json::{event_json, messages_json, run_result_json};
use oma_wasmtime::{
    agent_config, AddressPolicy, AgentEvent, BeforeRunAnswer, BeforeRunContext, ContentBlock,
    GuardedOutbound, Guest, GuestOptions, PromptInput, RunAgentOptions, RunInput, RunResult,
    ScriptedHost,
};
use serde_json::{json, Value};

use crate::{
    endpoint_from, env_var, guest_with, options_and_operands, read_input, read_messages,
    single_input, Failure, Input, RequestArgs, REQUEST_OPTIONS,
};

/// The operands of `run`.
#[derive(Debug, PartialEq)]
pub struct RunArgs {
    request: RequestArgs,
    source: Source,
    before_run: Option<String>,
    hook_timeout: Duration,
    timeout: Duration,
    history: Option<Input>,
    prompt: bool,
    stream: bool,
    progress: bool,
    /// `--trace FILE|-`: where OMA's trace events go, as JSON lines.
    trace: Option<Input>,
    /// `--output-schema FILE`: the JSON Schema of the final answer (OMA's `outputSchema`).
    output_schema: Option<Input>,
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
        &[
            &REQUEST_OPTIONS[..],
            &[
                "text",
                "before-run",
                "hook-timeout",
                "timeout",
                "history",
                "trace",
                "output-schema",
            ],
        ]
        .concat(),
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
        hook_timeout: match options.take("hook-timeout") {
            None => DEFAULT_HOOK_TIMEOUT,
            Some(seconds) => seconds_option("--hook-timeout", &seconds)?,
        },
        timeout: match options.take("timeout") {
            None => DEFAULT_RUN_TIMEOUT,
            Some(seconds) => seconds_option("--timeout", &seconds)?,
        },
        history: options.take("history").map(|path| match path.as_str() {
            "-" => Input::Stdin,
            _ => Input::File(path.into()),
        }),
        prompt: options.take("prompt").is_some(),
        stream: options.take("stream").is_some(),
        progress: options.take("progress").is_some(),
        trace: options.take("trace").map(|path| match path.as_str() {
            "-" => Input::Stdin,
            _ => Input::File(path.into()),
        }),
        output_schema: options
            .take("output-schema")
            .map(|path| match path.as_str() {
                "-" => Input::Stdin,
                _ => Input::File(path.into()),
            }),
    };
    if args.progress && (args.prompt || args.stream) {
        return Err(
            "--progress runs through run-agent and cannot be combined with --prompt or --stream"
                .into(),
        );
    }
    if args.hook_timeout != DEFAULT_HOOK_TIMEOUT && args.before_run.is_none() {
        return Err("--hook-timeout limits the --before-run command: it needs --before-run".into());
    }
    if args.prompt && args.stream {
        return Err("--prompt and --stream cannot be combined".into());
    }
    if args.output_schema == Some(Input::Stdin)
        && (matches!(args.source, Source::File(Input::Stdin)) || args.history == Some(Input::Stdin))
    {
        return Err("only one of FILE, --history and --output-schema can be standard input".into());
    }
    if args.history.is_some() && !args.prompt {
        return Err("--history seeds prompt(): it needs --prompt (run() ignores history)".into());
    }
    if matches!(args.source, Source::File(Input::Stdin)) && args.history == Some(Input::Stdin) {
        return Err("only one of FILE and --history can be standard input".into());
    }
    Ok(args)
}

/// How long a `--before-run` command may take by default.
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(60);

/// The most a `--before-run` command may write on its standard output: a context carries the
/// whole conversation, media included, so this is generous.
pub const HOOK_OUTPUT_LIMIT: usize = 64 << 20;

/// The most of a failing hook's standard error kept for its failure message.
const HOOK_STDERR_LIMIT: usize = 64 << 10;

/// Ends a hook command and everything it started (its process group), and reaps it.
fn kill_tree(child: &mut std::process::Child) {
    #[cfg(unix)]
    if let Ok(pid) = libc::pid_t::try_from(child.id()) {
        // SAFETY: kill(2) with a negative pid signals the process group the command leads
        // (it was spawned as a group leader); no memory is involved.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// How long a whole run may take by default (`--timeout`): hook, turns and tools.
pub const DEFAULT_RUN_TIMEOUT: Duration = Duration::from_secs(600);

/// `--hook-timeout SECONDS` or `--timeout SECONDS`: a positive number of seconds, at most a day.
fn seconds_option(flag: &str, seconds: &str) -> Result<Duration, String> {
    seconds
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s > 0.0 && *s <= 86_400.0)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| {
            format!("{flag} must be a number of seconds above 0 (at most 86400), got `{seconds}`")
        })
}

/// Runs the agent; returns the result JSON to print, or `RunFailed` with it.
pub async fn run(args: RunArgs) -> Result<String, Failure> {
    let request = &args.request;
    let (endpoint, secrets) = endpoint_from(&request.provider, request.base_url.clone(), env_var);
    let mut host = ScriptedHost::new();
    if let Some(command) = args.before_run.clone() {
        let timeout = args.hook_timeout;
        host = host.with_hook(move |context| run_hook(&command, context, timeout));
    }
    if args.progress {
        let secrets = secrets.clone();
        host = host.with_progress_sink(move |event| {
            let data = serde_json::from_str::<Value>(&event.data).unwrap_or(Value::Null);
            let line = json!({"type": event.type_, "agent": event.agent, "data": data});
            eprintln!("{}", scrub(&line.to_string(), &secrets));
        });
    }
    if let Some(target) = &args.trace {
        host = host.with_trace_sink(trace_sink(target, secrets.clone())?);
    }
    let guard = GuardedOutbound::new(AddressPolicy::LOCAL_SERVERS);
    let mut guest = guest_with(GuestOptions {
        hooks: Some(Box::new(guard.clone())),
        host: Some(Box::new(host)),
        ..GuestOptions::default()
    })
    .await?;
    let result = run_agent(&args, &mut guest, endpoint, &secrets).await;
    for refusal in guard.refusals() {
        eprintln!(
            "oma-host: {refusal}; `run` reaches public, loopback and private addresses only, \
             never link-local, cloud-metadata or unspecified ones"
        );
    }
    result
}

async fn run_agent(
    args: &RunArgs,
    guest: &mut Guest,
    endpoint: oma_wasmtime::Endpoint,
    secrets: &[String],
) -> Result<String, Failure> {
    let request = &args.request;
    let mut config = agent_config("oma-host", &request.model, endpoint);
    request.apply(&mut config.system_prompt, &mut config.sampling);
    config.before_run = args.before_run.is_some();
    if args.trace.is_some() {
        // A fresh run id and agent span per run, made up by the component.
        config.trace = Some(oma_wasmtime::TraceOptions {
            run_id: None,
            span_id: None,
            parent_id: None,
            agent: None,
            task_id: None,
        });
    }
    // Each provider's default retry policy (`docs/errors.md#default-retry-policy`), the one the
    // component, the packages and the gateway apply too.
    config.call.retry = None;
    config.call.timeout_ms = 120_000;
    // A run past its deadline ends as a failed result with status `timeout` (exit 1).
    config.deadline_ms = Some(u64::try_from(args.timeout.as_millis()).unwrap_or(u64::MAX));
    if let Some(history) = &args.history {
        config.history = read_messages(guest, history).await?;
    }
    if let Some(schema) = &args.output_schema {
        // Checked by the component when the agent is made (a schema that is no schema fails
        // there, naming `outputSchema`, before any request).
        let bytes = crate::read_input(schema)?;
        config.output_schema =
            Some(String::from_utf8(bytes).map_err(|e| Failure::NotText(e.utf8_error()))?);
    }

    let result = if args.prompt {
        let input = match &args.source {
            Source::Text(text) => PromptInput::Text(text.clone()),
            Source::File(input) => PromptInput::Blocks(read_blocks(guest, input).await?),
        };
        let agent = create(guest, &config).await?;
        component(guest.prompt(&agent, &input).await)?
    } else {
        let input = match &args.source {
            Source::Text(text) => RunInput::Text(text.clone()),
            Source::File(input) => RunInput::Messages(read_messages(guest, input).await?),
        };
        if args.progress {
            let options = RunAgentOptions {
                progress: true,
                evaluation: None,
            };
            component(guest.run_agent(&config, &input, &options).await)?
        } else if args.stream {
            let agent = create(guest, &config).await?;
            let stream = component(guest.stream(&agent, &input).await)?;
            stream_events(guest, stream, secrets).await?
        } else {
            let agent = create(guest, &config).await?;
            component(guest.run(&agent, &input).await)?
        }
    };
    let text = scrub(&run_result_json(&result).to_string(), secrets);
    if result.success {
        Ok(text)
    } else {
        Err(Failure::RunFailed(text))
    }
}

/// Writes each trace event as one JSON line (OMA's `TraceEvent`, secrets scrubbed) to the
/// file (created or truncated) or, for `-`, to standard output as it arrives. A write that
/// fails is noted once on standard error and the run goes on (a trace sink never fails a run).
fn trace_sink(
    target: &Input,
    secrets: Vec<String>,
) -> Result<impl FnMut(&oma_wasmtime::TraceEvent) + Send + 'static, Failure> {
    let mut out: Box<dyn Write + Send> = match target {
        Input::Stdin => Box::new(std::io::stdout()),
        Input::File(path) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(path).map_err(|e| {
                Failure::Usage(format!("--trace: cannot create {}: {e}", path.display()))
            })?,
        )),
    };
    let mut failed = false;
    Ok(move |event: &oma_wasmtime::TraceEvent| {
        let line = scrub(
            &oma_wasmtime::oma_json::trace_json(event).to_string(),
            &secrets,
        );
        if let Err(error) = writeln!(out, "{line}").and_then(|()| out.flush()) {
            if !failed {
                eprintln!("oma-host: --trace: {error}; the run goes on without its trace");
                failed = true;
            }
        }
    })
}

/// The outer (host) and inner (component) errors of a call as a [`Failure`].
fn component<T>(outcome: anyhow::Result<Result<T, oma_wasmtime::WitError>>) -> Result<T, Failure> {
    outcome.map_err(Failure::Host)?.map_err(Failure::Component)
}

async fn create(
    guest: &mut Guest,
    config: &oma_wasmtime::AgentConfig,
) -> Result<oma_wasmtime::AgentHandle, Failure> {
    component(guest.create_agent(config).await)
}

/// Prints each event as a JSON line as it arrives and returns the final result.
async fn stream_events(
    guest: &mut Guest,
    stream: oma_wasmtime::AgentStreamHandle,
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

/// Runs `sh -c command` as the `beforeRun` hook: the context goes to its standard input from a
/// thread of its own while its output is read (capped at [`HOOK_OUTPUT_LIMIT`]); past
/// `timeout` the command is killed and the hook fails.
fn run_hook(command: &str, context: &BeforeRunContext, timeout: Duration) -> BeforeRunAnswer {
    let started = Instant::now();
    let agent = serde_json::from_str::<Value>(&context.config).unwrap_or(Value::Null);
    let input = json!({
        "prompt": context.prompt,
        "messages": messages_json(&context.messages),
        "agent": agent,
    })
    .to_string();
    let mut shell = Command::new("sh");
    shell
        .arg("-c")
        .arg(command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Its own process group, so that a timeout ends whatever the command started too.
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut shell, 0);
    let child = shell.spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) => return BeforeRunAnswer::Failed(format!("beforeRun command did not start: {e}")),
    };
    if let Some(mut stdin) = child.stdin.take() {
        std::thread::spawn(move || {
            // A hook that does not read its input is allowed: a closed pipe is not a failure.
            let _ = stdin.write_all(input.as_bytes());
        });
    }
    let stdout = read_in_background(child.stdout.take(), HOOK_OUTPUT_LIMIT);
    let stderr = read_in_background(child.stderr.take(), HOOK_STDERR_LIMIT);
    let deadline = started + timeout;
    let left = || deadline.saturating_duration_since(Instant::now());

    // The output ends when the command (and whatever it started) closes it; the command may
    // also be stopped by the timeout or by writing too much.
    let failure = match stdout.recv_timeout(left()) {
        Ok(Ok(Captured::Whole(bytes))) => Ok(bytes),
        Ok(Ok(Captured::Overflow)) => Err(format!(
            "beforeRun command wrote more than {} MiB",
            HOOK_OUTPUT_LIMIT >> 20
        )),
        Ok(Err(e)) => Err(format!("beforeRun command failed: {e}")),
        Err(_) => Err(format!(
            "beforeRun command timed out after {}",
            seconds(timeout)
        )),
    };
    let output = match failure {
        Ok(bytes) => bytes,
        Err(message) => {
            kill_tree(&mut child);
            return BeforeRunAnswer::Failed(message);
        }
    };
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if left().is_zero() => {
                kill_tree(&mut child);
                return BeforeRunAnswer::Failed(format!(
                    "beforeRun command timed out after {}",
                    seconds(timeout)
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5).min(left())),
            Err(e) => return BeforeRunAnswer::Failed(format!("beforeRun command failed: {e}")),
        }
    };
    if status.success() {
        return BeforeRunAnswer::Json(String::from_utf8_lossy(&output).into_owned());
    }
    let stderr = match stderr.recv_timeout(left().max(Duration::from_millis(100))) {
        Ok(Ok(Captured::Whole(bytes))) => String::from_utf8_lossy(&bytes).into_owned(),
        _ => String::new(),
    };
    BeforeRunAnswer::Failed(format!(
        "beforeRun command failed ({status}): {}",
        stderr.trim()
    ))
}

/// What a capped read of a pipe gave.
enum Captured {
    /// Everything, to the end.
    Whole(Vec<u8>),
    /// More than the cap; reading stopped (the pipe is closed, so the writer gets `EPIPE`).
    Overflow,
}

/// Reads `pipe` to its end on a thread of its own, keeping at most `limit` bytes.
fn read_in_background(
    pipe: Option<impl Read + Send + 'static>,
    limit: usize,
) -> mpsc::Receiver<std::io::Result<Captured>> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let result = match pipe {
            None => Ok(Captured::Whole(bytes)),
            Some(pipe) => {
                let limit = u64::try_from(limit).unwrap_or(u64::MAX);
                match pipe.take(limit.saturating_add(1)).read_to_end(&mut bytes) {
                    Ok(_) if bytes.len() as u64 > limit => Ok(Captured::Overflow),
                    Ok(_) => Ok(Captured::Whole(bytes)),
                    Err(e) => Err(e),
                }
            }
        };
        let _ = sender.send(result);
    });
    receiver
}

/// `timeout` for a message: `60 s`, `0.5 s`.
fn seconds(timeout: Duration) -> String {
    format!("{} s", timeout.as_secs_f64())
}

/// `text` with every secret of 4 characters or more replaced by `[redacted]`, in every form the
/// core redacts (`oma_core::secret::redact_known`: as it is, base64, percent-encoded): the
/// component already keeps keys out of results; this is the host's own guarantee for what it
/// prints.
fn scrub(text: &str, secrets: &[String]) -> String {
    let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
    oma_core::secret::redact_known(text, &secrets).into_owned()
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
        assert_eq!(ok.hook_timeout, DEFAULT_HOOK_TIMEOUT);
        assert_eq!(ok.timeout, DEFAULT_RUN_TIMEOUT);
        let ok = parse_args(&args(&[
            "--provider",
            "openai",
            "--model",
            "m",
            "--text",
            "hi",
            "--before-run",
            "cat",
            "--hook-timeout",
            "1.5",
        ]))
        .unwrap();
        assert_eq!(ok.hook_timeout, Duration::from_millis(1500));
        for (line, error) in [
            (&["--provider", "p", "--model", "m"][..], "`run` needs a FILE (or - for standard input)"),
            (&["--provider", "p", "--model", "m", "--text", "t", "f"], "`run` takes a FILE or --text, not both"),
            (&["--model", "m", "--text", "t"], "`run` needs --provider"),
            (&["--provider", "p", "--model", "m", "--text", "t", "--stream=yes"], "--stream takes no value"),
            (&["--provider", "p", "--model", "m", "--text", "t", "--progress", "--stream"], "--progress runs through run-agent and cannot be combined with --prompt or --stream"),
            (&["--provider", "p", "--model", "m", "--text", "t", "--history", "h"], "--history seeds prompt(): it needs --prompt (run() ignores history)"),
            (&["--provider", "p", "--model", "m", "--text", "t", "--prompt", "--prompt"], "--prompt is given twice"),
            (&["--provider", "p", "--model", "m", "--text", "t", "--hook-timeout", "5"], "--hook-timeout limits the --before-run command: it needs --before-run"),
            (&["--provider", "p", "--model", "m", "--text", "t", "--before-run", "cat", "--hook-timeout", "0"], "--hook-timeout must be a number of seconds above 0 (at most 86400), got `0`"),
            (&["--provider", "p", "--model", "m", "--text", "t", "--before-run", "cat", "--hook-timeout", "soon"], "--hook-timeout must be a number of seconds above 0 (at most 86400), got `soon`"),
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
        // Encoded forms too: base64 and percent-encoding.
        let key = "sk-cli-secret/42".to_string();
        assert_eq!(
            scrub(
                "echo c2stY2xpLXNlY3JldC80Mg and sk-cli-secret%2F42",
                std::slice::from_ref(&key)
            ),
            "echo [redacted] and [redacted]"
        );
    }
}
