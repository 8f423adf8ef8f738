//! `oma-host`: the command-line host for the oma-component guest.
//!
//! Every subcommand reads a file (or `-` for standard input): OMA JSON for `validate` and
//! `format`, a provider's response body for `parse`. It runs the input through the component in
//! wasmtime and follows the contract the README gives (errors as in `docs/errors.md`): success
//! exits 0 and prints JSON on standard output; a failure exits 1 and prints the error JSON
//! (`{"error": {"name", "code", "message", "retryable"}}`) on standard output; a usage error
//! exits 2 with a message on standard error.
//!
//! `format` builds a request with the key from the provider's usual variable and prints it with
//! every credential as `[redacted]`; it refuses to print at all if a key would show anywhere
//! else. Nothing is ever sent.
//!
//! `OMA_COMPONENT=path/to/oma_component.wasm` runs another build of the guest than the one this
//! binary was built with.
//!
//! `serve` is the exception to all of the above: it runs the gateway component
//! (`oma_gateway.wasm`) behind an HTTP server until it gets a signal; see `src/serve.rs`.

// `Failure` carries the component's error record by value to the one place that prints it, once
// per process: its size costs nothing worth a box.
#![allow(clippy::result_large_err)]

mod demo;
mod run;
mod serve;

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use oma_wasmtime::{
    error_json, AwsCredentials, ComponentSource, ContentBlock, Endpoint, Guest, GuestOptions,
    Harness, HarnessOptions, HttpRequest, LlmMessage, Role, WitError,
};
use serde_json::{json, Value};

const USAGE: &str = r#"usage: oma-host <command> [options]

commands:
  validate FILE   check an OMA JSON message list (FILE, or - for standard input) and print
                  it back as validated OMA JSON
  format --provider P --model M [--system TEXT] [--max-tokens N] [--temperature T]
         [--base-url URL] FILE
                  print the HTTP request a provider call with the conversation in FILE would
                  send, as {"method", "url", "headers", "body"}; sends nothing. "headers" is an
                  object of lowercase names to values (a repeated name joined with ", ");
                  "body" is the body's JSON (a string if it is not JSON). Every credential
                  shows as "[redacted]"
  parse --provider P [--model M] [--base-url URL] FILE
                  read a provider's successful response body (FILE) and print OMA's response,
                  {"id", "model", "content", "stop_reason", "usage"}; --model is the model of
                  the request it answers (Gemini and Bedrock bodies do not name it)
  run --provider P --model M [--system TEXT] [--max-tokens N] [--temperature T]
      [--base-url URL] (FILE | --text TEXT) [--before-run CMD [--hook-timeout SECONDS]]
      [--timeout SECONDS] [--prompt [--history FILE]] [--stream] [--progress]
      [--trace FILE|-] [--output-schema FILE]
                  run an agent for real and print OMA's run result ({"success", "output",
                  "messages", "tokenUsage", "toolCalls", "turns", "status"?, "errorInfo"?});
                  a failed run exits 1 with its result; --timeout bounds the whole run
                  (600 s by default: past it the run fails with status "timeout"). --before-run runs `sh -c CMD` as the
                  beforeRun hook ({"prompt", "messages", "agent"} on its stdin, {"prompt",
                  "messages"?} expected on its stdout, at most 64 MiB, within --hook-timeout
                  seconds, 60 by default); --prompt uses prompt() (FILE is then a
                  content-block list) on the history of --history FILE; --stream prints events
                  as JSON lines as they arrive; --progress runs through run-agent and prints
                  progress events as JSON lines on stderr; --trace writes OMA's trace events as
                  JSON lines to FILE (- for stdout); --output-schema FILE gives the final
                  answer a JSON Schema (OMA's outputSchema: the result's "structured", one
                  retry with OMA's feedback). Requests go to public, loopback
                  and private (LAN) addresses only, checked after DNS resolution: never to
                  link-local, cloud-metadata or unspecified ones
  serve [--addr IP:PORT] [--component PATH] [--max-in-flight N] [--memory-budget MIB]
        [--max-instances N] [--keyvalue memory|redis://HOST:PORT]
                  serve the gateway (oma_gateway.wasm, or the wasi:http/proxy component at
                  PATH) over HTTP/1.1 on --addr (127.0.0.1:8080 by default; port 0 picks a free
                  one) until SIGINT or SIGTERM, printing "oma-host: listening on
                  http://IP:PORT" on stderr. One fresh instance per request (the pooling
                  allocator); the component's environment is only the variables named
                  OMA_GATEWAY_*, OTEL_EXPORTER_OTLP_*, AWS_*, *_API_KEY and *_BASE_URL; its
                  requests go where run's do.
                  At most --max-in-flight requests at once (1024) and --memory-budget MiB of
                  memory for all instances together (1024): past either, 503 with Retry-After
                  (GET /healthz is answered outside both); --max-instances (256) run at once,
                  more wait for one. A client that disconnects cancels its run. --keyvalue
                  links a wasi:keyvalue store (this process's memory, or a Redis server every
                  replica shares) where the gateway counts OMA_GATEWAY_KEYS' limits when
                  OMA_GATEWAY_LIMITS_BUCKET names a bucket
  demo            the whole pipeline on a bundled conversation with an image and a video, with
                  no network and no key: validation, two wire formats, the hook, wasi-http to a
                  loopback provider, a tool call, the result

providers: anthropic, openai, minimax, deepseek, grok, gemini, bedrock, ai-sdk, mimo, doubao,
  hunyuan, qiniu, or any other name with --base-url for an OpenAI-compatible server

keys (format, run): read from ANTHROPIC_API_KEY, OPENAI_API_KEY, MINIMAX_API_KEY, DEEPSEEK_API_KEY,
  XAI_API_KEY (grok), GEMINI_API_KEY, and <PROVIDER>_API_KEY for any other name (upper-cased,
  '-' as '_'); Bedrock uses AWS_BEARER_TOKEN_BEDROCK, or AWS_ACCESS_KEY_ID,
  AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, with AWS_REGION (or AWS_DEFAULT_REGION).
  A key is used to build the request but never printed.

base URL (format, run): --base-url, else <PROVIDER>_BASE_URL (XAI_BASE_URL for grok; Bedrock
  also AWS_ENDPOINT_URL_BEDROCK_RUNTIME), else the provider's public URL: the names the
  gateway reads.

options:
  -h, --help      print this help
  -V, --version   print the version

Exit status: 0 on success (JSON on stdout), 1 on a failure (the error JSON on stdout),
2 on a usage error (a message on stderr).
Environment: OMA_COMPONENT overrides the path of the guest component.
Limits: each call into the component may spend 30 s in the guest (waiting for a provider, a hook
or a tool does not count) and the component may use 512 MiB of memory; past either the command
fails with an error JSON. serve applies both to each request's instance, answering 500, and ends a
request after 10 minutes (504 if nothing was answered yet); it exits 0 after SIGINT or SIGTERM."#;

/// A parsed command line.
#[derive(Debug, PartialEq)]
enum Command {
    /// `--help`.
    Help,
    /// `--version`.
    Version,
    /// `validate FILE`.
    Validate { input: Input },
    /// `format --provider P --model M [...] FILE`.
    Format(FormatArgs),
    /// `parse --provider P [--model M] [--base-url URL] FILE`.
    Parse(ParseArgs),
    /// `run --provider P --model M [...] (FILE | --text TEXT)`.
    Run(run::RunArgs),
    /// `demo`.
    Demo,
    /// `serve [--addr IP:PORT] [--component PATH]`.
    Serve(serve::ServeArgs),
}

/// The operands of `format`.
#[derive(Debug, PartialEq)]
struct FormatArgs {
    request: RequestArgs,
    input: Input,
}

/// What `format` and `run` share: the provider, the model and the request options.
#[derive(Debug, PartialEq)]
struct RequestArgs {
    provider: String,
    model: String,
    system: Option<String>,
    max_tokens: Option<u32>,
    temperature: Option<f64>,
    base_url: Option<String>,
}

/// The option names of [`RequestArgs`].
const REQUEST_OPTIONS: [&str; 6] = [
    "provider",
    "model",
    "system",
    "max-tokens",
    "temperature",
    "base-url",
];

impl RequestArgs {
    /// Takes the request options out of `options`; `--provider` and `--model` are required.
    fn take(command: &str, options: &mut Options) -> Result<RequestArgs, String> {
        let (max_tokens, temperature) = sampling_options(options)?;
        Ok(RequestArgs {
            provider: options.required(command, "provider")?,
            model: options.required(command, "model")?,
            system: options.take("system"),
            max_tokens,
            temperature,
            base_url: options.take("base-url"),
        })
    }

    /// Sets the system prompt and the sampling options given on the command line.
    fn apply(&self, system_prompt: &mut Option<String>, sampling: &mut oma_wasmtime::Sampling) {
        system_prompt.clone_from(&self.system);
        sampling.max_tokens = self.max_tokens;
        sampling.temperature = self.temperature;
    }
}

/// The operands of `parse`.
#[derive(Debug, PartialEq)]
struct ParseArgs {
    provider: String,
    model: Option<String>,
    base_url: Option<String>,
    input: Input,
}

/// Where the OMA JSON comes from.
#[derive(Debug, PartialEq, Eq)]
enum Input {
    Stdin,
    File(PathBuf),
}

/// What went wrong, and so which exit status and stream it gets.
enum Failure {
    /// The command line is wrong or the input cannot be read: exit 2, message on stderr.
    Usage(String),
    /// The component refused the input: exit 1, the error JSON on stdout.
    Component(WitError),
    /// The host could not run the component: exit 1, an error JSON on stdout.
    Host(anyhow::Error),
    /// The input is not UTF-8 text, so it cannot be JSON: exit 1, an error JSON on stdout.
    NotText(std::str::Utf8Error),
    /// A run that ended with `success: false`: exit 1, its result (this text) on stdout.
    RunFailed(String),
}

fn parse(args: &[String]) -> Result<Command, String> {
    let (first, rest) = match args.split_first() {
        Some((first, rest)) => (first.as_str(), rest),
        None => return Err("no command given".into()),
    };
    match first {
        "-h" | "--help" | "help" => Ok(Command::Help),
        "-V" | "--version" => Ok(Command::Version),
        "validate" => Ok(Command::Validate {
            input: one_input("validate", rest)?,
        }),
        "format" => {
            let (mut options, input) = with_options("format", rest, &REQUEST_OPTIONS)?;
            Ok(Command::Format(FormatArgs {
                request: RequestArgs::take("format", &mut options)?,
                input,
            }))
        }
        "run" => run::parse_args(rest).map(Command::Run),
        "serve" => serve::parse_args(rest).map(Command::Serve),
        "demo" => match rest {
            [] => Ok(Command::Demo),
            _ => Err("`demo` takes no arguments".into()),
        },
        "parse" => {
            let (mut options, input) =
                with_options("parse", rest, &["provider", "model", "base-url"])?;
            Ok(Command::Parse(ParseArgs {
                provider: options.required("parse", "provider")?,
                model: options.take("model"),
                base_url: options.take("base-url"),
                input,
            }))
        }
        other if other.starts_with('-') => Err(format!("unknown option `{other}`")),
        other => Err(format!("unknown command `{other}`")),
    }
}

/// `--max-tokens` and `--temperature`, checked.
fn sampling_options(options: &mut Options) -> Result<(Option<u32>, Option<f64>), String> {
    let max_tokens = match options.take("max-tokens") {
        None => None,
        Some(n) => Some(
            n.parse::<u32>()
                .map_err(|_| format!("--max-tokens must be a whole number of tokens, got `{n}`"))?,
        ),
    };
    let temperature = match options.take("temperature") {
        None => None,
        Some(t) => match t.parse::<f64>() {
            Ok(t) if t.is_finite() => Some(t),
            _ => return Err(format!("--temperature must be a number, got `{t}`")),
        },
    };
    Ok((max_tokens, temperature))
}

/// The single FILE operand of a subcommand that has no options; `-` is standard input, `--`
/// ends the options.
fn one_input(command: &str, args: &[String]) -> Result<Input, String> {
    let (_, operands) = options_and_operands(command, args, &[], &[])?;
    single_input(command, &operands)
}

/// The `--name value` (or `--name=value`) options of a subcommand, by name.
struct Options(Vec<(&'static str, String)>);

impl Options {
    fn take(&mut self, name: &str) -> Option<String> {
        let i = self.0.iter().position(|(n, _)| *n == name)?;
        Some(self.0.swap_remove(i).1)
    }

    fn required(&mut self, command: &str, name: &str) -> Result<String, String> {
        self.take(name)
            .ok_or_else(|| format!("`{command}` needs --{name}"))
    }
}

/// The options (each at most once, from `known`) and the single FILE operand of a subcommand.
fn with_options(
    command: &str,
    args: &[String],
    known: &[&'static str],
) -> Result<(Options, Input), String> {
    let (options, operands) = options_and_operands(command, args, known, &[])?;
    Ok((options, single_input(command, &operands)?))
}

/// The one FILE operand of a subcommand; `-` is standard input.
fn single_input(command: &str, operands: &[String]) -> Result<Input, String> {
    match operands {
        [one] if one == "-" => Ok(Input::Stdin),
        [one] => Ok(Input::File(PathBuf::from(one))),
        [] => Err(format!(
            "`{command}` needs a FILE (or - for standard input)"
        )),
        _ => Err(format!(
            "`{command}` takes one FILE, got {}",
            operands.len()
        )),
    }
}

/// The options of a subcommand: `--name value` (or `--name=value`) for the names in `known`,
/// each at most once; bare `--name` for the names in `switches` (recorded with the value
/// `"true"`); and the operands, in order.
fn options_and_operands(
    command: &str,
    args: &[String],
    known: &[&'static str],
    switches: &[&'static str],
) -> Result<(Options, Vec<String>), String> {
    let mut options = Vec::new();
    let mut operands = Vec::new();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let Some(flag) = arg.strip_prefix("--").filter(|f| !f.is_empty()) else {
            if arg == "--" {
                operands.extend(args.by_ref().cloned());
                break;
            }
            if arg.starts_with('-') && arg != "-" {
                return Err(format!("`{command}` has no option `{arg}`"));
            }
            operands.push(arg.clone());
            continue;
        };
        let (name, inline) = match flag.split_once('=') {
            Some((name, value)) => (name, Some(value.to_string())),
            None => (flag, None),
        };
        let (name, value) = if let Some(switch) = switches.iter().copied().find(|k| *k == name) {
            if inline.is_some() {
                return Err(format!("--{switch} takes no value"));
            }
            (switch, "true".to_owned())
        } else {
            let Some(name) = known.iter().copied().find(|k| *k == name) else {
                return Err(format!("`{command}` has no option `--{name}`"));
            };
            let value = match inline {
                Some(value) => value,
                None => args
                    .next()
                    .cloned()
                    .ok_or_else(|| format!("--{name} needs a value"))?,
            };
            (name, value)
        };
        if options.iter().any(|(n, _)| *n == name) {
            return Err(format!("--{name} is given twice"));
        }
        options.push((name, value));
    }
    Ok((Options(options), operands))
}

fn read_input(input: &Input) -> Result<Vec<u8>, Failure> {
    let mut bytes = Vec::new();
    match input {
        Input::Stdin => std::io::stdin()
            .read_to_end(&mut bytes)
            .map(|_| bytes)
            .map_err(|e| Failure::Usage(format!("could not read standard input: {e}"))),
        Input::File(path) => std::fs::read(path)
            .map_err(|e| Failure::Usage(format!("could not read {}: {e}", path.display()))),
    }
}

async fn guest() -> Result<Guest, Failure> {
    guest_with(GuestOptions::default()).await
}

/// The harness every guest of this process comes from, made once: for the component this
/// binary carries (`oma_artifacts::COMPONENT`), or, with `OMA_COMPONENT` set, for that file,
/// with the same options either way, so that the two behave alike (a command that needs two
/// instances, as `demo` does, or a run that streams, gets them either way).
fn harness() -> Result<&'static Harness, Failure> {
    static HARNESS: std::sync::OnceLock<Result<Harness, String>> = std::sync::OnceLock::new();
    HARNESS
        .get_or_init(|| {
            let component = match std::env::var_os("OMA_COMPONENT") {
                Some(wasm) => ComponentSource::File(wasm.into()),
                None => ComponentSource::from(oma_artifacts::COMPONENT),
            };
            Harness::new(HarnessOptions::new(component)).map_err(|e| format!("{e:#}"))
        })
        .as_ref()
        .map_err(|e| Failure::Host(anyhow::anyhow!("{e}")))
}

/// A guest set up as `options` says (outbound HTTP, the host's hooks).
async fn guest_with(options: GuestOptions) -> Result<Guest, Failure> {
    harness()?
        .instantiate_with(options)
        .await
        .map_err(Failure::Host)
}

/// `validate FILE`: messages-from-json, then messages-to-json; returns the JSON text to print.
async fn validate(input: &Input) -> Result<String, Failure> {
    let bytes = read_input(input)?;
    let text = std::str::from_utf8(&bytes).map_err(Failure::NotText)?;
    let mut guest = guest().await?;
    let messages = guest
        .messages_from_json(text)
        .await
        .map_err(Failure::Host)?
        .map_err(Failure::Component)?;
    guest
        .messages_to_json(&messages)
        .await
        .map_err(Failure::Host)?
        .map_err(Failure::Component)
}

/// The endpoint for `provider`, its credentials (and, without `base_url`, its base URL) read
/// through `var` under the names the gateway reads too (`docs/gateway.md#configuration-the-environment-only`;
/// an unset or empty variable counts as absent), and every secret it holds, so that output can
/// be checked.
fn endpoint_from(
    provider: &str,
    base_url: Option<String>,
    var: impl Fn(&str) -> Option<String>,
) -> (Endpoint, Vec<String>) {
    use oma_core::adapter::Credentials;
    let read = oma_gateway_rules::env::provider_env(provider, base_url, var);
    let mut endpoint = Endpoint {
        provider: provider.to_string(),
        base_url: read.endpoint.base_url,
        api_key: None,
        region: read.endpoint.region,
        aws: None,
        now_ms: None,
    };
    match read.endpoint.credentials {
        Credentials::None => {}
        Credentials::ApiKey(key) => endpoint.api_key = Some(key),
        Credentials::Aws {
            access_key_id,
            secret_access_key,
            session_token,
        } => {
            endpoint.aws = Some(AwsCredentials {
                access_key_id,
                secret_access_key,
                session_token,
            })
        }
    }
    (endpoint, read.secrets)
}

fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// `{"method", "url", "headers", "body"}` for display, every credential `[redacted]` (the
/// rules are the gateway's `/v1/format`, from one implementation). Fails, printing nothing of
/// the request, if a secret would still appear (e.g. because the conversation holds the key).
fn render_request(http: &HttpRequest, secrets: &[String]) -> Result<String, Failure> {
    let request = oma_core::adapter::HttpRequest {
        method: http.method.clone(),
        url: http.url.clone(),
        headers: http.headers.clone(),
        body: http.body.clone(),
    };
    oma_core::http::display::render_request(&request, secrets)
        .map_err(|error| Failure::Host(anyhow::anyhow!("{error}")))
}

/// Parses OMA JSON from `input` into the guest's messages.
async fn read_messages(guest: &mut Guest, input: &Input) -> Result<Vec<LlmMessage>, Failure> {
    let bytes = read_input(input)?;
    let text = std::str::from_utf8(&bytes).map_err(Failure::NotText)?;
    guest
        .messages_from_json(text)
        .await
        .map_err(Failure::Host)?
        .map_err(Failure::Component)
}

/// `format`: the request the component would send, redacted; returns the JSON text to print.
async fn format(args: FormatArgs) -> Result<String, Failure> {
    let mut guest = guest().await?;
    let messages = read_messages(&mut guest, &args.input).await?;
    let options = args.request;
    let mut request = oma_wasmtime::chat_request(&options.model, messages);
    options.apply(&mut request.system_prompt, &mut request.sampling);
    let (endpoint, secrets) = endpoint_from(&options.provider, options.base_url, env_var);
    let http = guest
        .format_request(&request, &endpoint)
        .await
        .map_err(Failure::Host)?
        .map_err(Failure::Component)?;
    render_request(&http, &secrets)
}

/// `parse`: a provider's response body as OMA's response; returns the JSON text to print.
async fn parse_response(args: ParseArgs) -> Result<String, Failure> {
    let body = read_input(&args.input)?;
    let mut guest = guest().await?;
    let request = oma_wasmtime::chat_request(&args.model.unwrap_or_default(), Vec::new());
    let (endpoint, _) = endpoint_from(&args.provider, args.base_url, |_| None);
    let response = guest
        .parse_response(&request, &endpoint, &String::from_utf8_lossy(&body))
        .await
        .map_err(Failure::Host)?
        .map_err(Failure::Component)?;
    let content = blocks_to_json(&mut guest, response.content).await?;
    Ok(json!({
        "id": response.id,
        "model": response.model,
        "content": content,
        "stop_reason": response.stop_reason,
        "usage": {
            "input_tokens": response.usage.input_tokens,
            "output_tokens": response.usage.output_tokens,
        },
    })
    .to_string())
}

/// Content blocks in OMA's JSON shape, written by the component's `messages-to-json`.
async fn blocks_to_json(guest: &mut Guest, content: Vec<ContentBlock>) -> Result<Value, Failure> {
    let message = LlmMessage {
        role: Role::Assistant,
        content,
    };
    let text = guest
        .messages_to_json(std::slice::from_ref(&message))
        .await
        .map_err(Failure::Host)?
        .map_err(Failure::Component)?;
    let mut messages: Value = serde_json::from_str(&text).map_err(|e| {
        Failure::Host(anyhow::anyhow!(
            "messages-to-json returned invalid JSON: {e}"
        ))
    })?;
    match messages
        .get_mut(0)
        .and_then(|m| m.get_mut("content"))
        .map(Value::take)
    {
        Some(content @ Value::Array(_)) => Ok(content),
        _ => Err(Failure::Host(anyhow::anyhow!(
            "messages-to-json did not return the message it was given"
        ))),
    }
}

fn error_value(failure: &Failure) -> Option<Value> {
    match failure {
        Failure::Usage(_) | Failure::RunFailed(_) => None,
        Failure::Component(error) => Some(error_json(error)),
        // One line, which limit when one was hit, never the guest's wasm backtrace.
        Failure::Host(error) => Some(oma_wasmtime::host_error_json(error)),
        Failure::NotText(error) => Some(json!({"error": {
            "name": "InvalidMessageError",
            "code": "INVALID_MESSAGE",
            "message": format!("messages must be valid JSON: the input is not UTF-8 ({error})"),
            "retryable": false,
        }})),
    }
}

/// Writes `text` and a newline to stdout; a closed pipe is not worth a panic.
fn print_stdout(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out
        .write_all(text.as_bytes())
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
}

/// Every command but `serve`, on a current-thread runtime; returns the text to print on
/// success.
async fn execute(command: Command) -> Result<String, Failure> {
    match command {
        Command::Help => Ok(USAGE.to_owned()),
        Command::Version => Ok(format!("oma-host {}", env!("CARGO_PKG_VERSION"))),
        Command::Validate { input } => validate(&input).await,
        Command::Format(args) => format(args).await,
        Command::Parse(args) => parse_response(args).await,
        Command::Run(args) => run::run(args).await,
        Command::Demo => demo::demo().await,
        // `main` runs it on a multi-thread runtime of its own, never inside this one.
        Command::Serve(_) => Err(Failure::Host(anyhow::anyhow!(
            "`serve` needs a runtime of its own and cannot run inside another"
        ))),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let command = match parse(&args) {
        Ok(command) => command,
        Err(message) => {
            eprintln!("oma-host: {message}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let result = match command {
        // A server on a multi-thread runtime of its own; it prints nothing on stdout.
        Command::Serve(args) => match serve::serve(args) {
            Ok(()) => return ExitCode::SUCCESS,
            Err(failure) => Err(failure),
        },
        command => match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime.block_on(execute(command)),
            Err(e) => Err(Failure::Host(anyhow::anyhow!(
                "could not start the runtime: {e}"
            ))),
        },
    };
    match result {
        Ok(output) => {
            print_stdout(&output);
            ExitCode::SUCCESS
        }
        Err(Failure::RunFailed(text)) => {
            print_stdout(&text);
            ExitCode::from(1)
        }
        Err(failure) => match error_value(&failure) {
            Some(value) => {
                print_stdout(&value.to_string());
                ExitCode::from(1)
            }
            None => {
                if let Failure::Usage(message) = failure {
                    eprintln!("oma-host: {message}");
                }
                ExitCode::from(2)
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A command line as `parse` gets it.
    pub(crate) fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    /// A trap is reported as one typed line without the wasm backtrace wasmtime attaches, and
    /// names the linear-memory limit when that is what ended the call.
    #[test]
    fn a_trap_is_a_host_error_without_a_backtrace() {
        let backtrace = "error while executing at wasm backtrace:\n    0: 0x5b7f - \
                         oma_component.wasm!sbrk\n    1: 0x61a2 - oma_component.wasm!malloc";
        let memory = anyhow::Error::new(oma_wasmtime::LimitExceeded::Memory {
            limit: 512 << 20,
            requested: (512 << 20) + 65536,
        })
        .context(backtrace);
        let trap = anyhow::anyhow!("wasm trap: wasm `unreachable` instruction executed")
            .context(backtrace)
            .context("the run failed");
        for (failure, says, code) in [
            (
                memory,
                "past its limit of 536870912 bytes",
                json!("GUEST_LIMIT_EXCEEDED"),
            ),
            (
                trap,
                "the run failed: wasm trap: wasm `unreachable`",
                Value::Null,
            ),
        ] {
            let value = error_value(&Failure::Host(failure)).expect("an error JSON");
            let message = value["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            assert_eq!(value["error"]["name"], "HostError", "{value}");
            assert_eq!(value["error"]["code"], code, "{value}");
            assert!(message.contains(says), "{message}");
            assert!(
                !message.contains("backtrace") && !message.contains(".wasm!"),
                "{message}"
            );
            assert!(!message.contains('\n'), "{message}");
        }
        let value = error_value(&Failure::Host(anyhow::Error::new(
            oma_wasmtime::LimitExceeded::Memory {
                limit: 1,
                requested: 2,
            },
        )))
        .expect("an error JSON");
        assert!(
            value["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("linear-memory limit")),
            "{value}"
        );
    }

    #[test]
    fn command_lines() {
        let file = |p: &str| {
            Ok(Command::Validate {
                input: Input::File(PathBuf::from(p)),
            })
        };
        let cases: &[(&[&str], Result<Command, &str>)] = &[
            (&["validate", "a.json"], file("a.json")),
            (
                &["validate", "-"],
                Ok(Command::Validate {
                    input: Input::Stdin,
                }),
            ),
            (&["validate", "--", "-odd.json"], file("-odd.json")),
            (&["--help"], Ok(Command::Help)),
            (&["-V"], Ok(Command::Version)),
            (&[], Err("no command given")),
            (&["frobnicate"], Err("unknown command `frobnicate`")),
            (
                &["serve", "gateway.wasm"],
                Err("`serve` takes no operands, got `gateway.wasm`"),
            ),
            (&["--verbose"], Err("unknown option `--verbose`")),
            (
                &["validate"],
                Err("`validate` needs a FILE (or - for standard input)"),
            ),
            (
                &["validate", "a", "b"],
                Err("`validate` takes one FILE, got 2"),
            ),
            (
                &["validate", "--pretty", "a"],
                Err("`validate` has no option `--pretty`"),
            ),
            (
                &[
                    "format",
                    "--provider",
                    "openai",
                    "--model=gpt-4o",
                    "--system",
                    "be brief",
                    "--max-tokens",
                    "64",
                    "--temperature=0.5",
                    "--base-url",
                    "http://localhost:8080/v1",
                    "a.json",
                ],
                Ok(Command::Format(FormatArgs {
                    request: RequestArgs {
                        provider: "openai".into(),
                        model: "gpt-4o".into(),
                        system: Some("be brief".into()),
                        max_tokens: Some(64),
                        temperature: Some(0.5),
                        base_url: Some("http://localhost:8080/v1".into()),
                    },
                    input: Input::File(PathBuf::from("a.json")),
                })),
            ),
            (
                &["parse", "-", "--provider", "gemini"],
                Ok(Command::Parse(ParseArgs {
                    provider: "gemini".into(),
                    model: None,
                    base_url: None,
                    input: Input::Stdin,
                })),
            ),
            (
                &["format", "--provider", "openai", "a.json"],
                Err("`format` needs --model"),
            ),
            (&["parse", "a.json"], Err("`parse` needs --provider")),
            (
                &["parse", "--provider", "a", "--provider", "b", "x"],
                Err("--provider is given twice"),
            ),
            (
                &["parse", "x", "--provider"],
                Err("--provider needs a value"),
            ),
            (
                &["parse", "--system", "s", "x"],
                Err("`parse` has no option `--system`"),
            ),
            (
                &[
                    "format",
                    "--provider",
                    "p",
                    "--model",
                    "m",
                    "--max-tokens",
                    "-1",
                    "x",
                ],
                Err("--max-tokens must be a whole number of tokens, got `-1`"),
            ),
            (
                &[
                    "format",
                    "--provider",
                    "p",
                    "--model",
                    "m",
                    "--temperature",
                    "NaN",
                    "x",
                ],
                Err("--temperature must be a number, got `NaN`"),
            ),
            (
                &["format", "--provider", "p", "--model", "m"],
                Err("`format` needs a FILE (or - for standard input)"),
            ),
        ];
        for (line, expected) in cases {
            match (parse(&args(line)), expected) {
                (Ok(got), Ok(want)) => assert_eq!(&got, want, "{line:?}"),
                (Err(got), Err(want)) => assert_eq!(got, *want, "{line:?}"),
                (got, want) => panic!("{line:?}: got {got:?}, want {want:?}"),
            }
        }
    }

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn keys_come_from_the_providers_usual_variables() {
        let vars = [
            ("ANTHROPIC_API_KEY", "a"),
            ("OPENAI_API_KEY", "o"),
            ("XAI_API_KEY", "x"),
            ("MY_LLM_API_KEY", "m"),
            ("DEEPSEEK_API_KEY", ""),
        ];
        for (provider, key) in [
            ("anthropic", Some("a")),
            ("openai", Some("o")),
            ("grok", Some("x")),
            ("my-llm", Some("m")),
            ("deepseek", None),
            ("gemini", None),
        ] {
            let (endpoint, secrets) = endpoint_from(provider, None, env(&vars));
            assert_eq!(endpoint.api_key.as_deref(), key, "{provider}");
            assert_eq!(secrets.len(), usize::from(key.is_some()), "{provider}");
        }

        let aws = [
            ("AWS_ACCESS_KEY_ID", "AKID"),
            ("AWS_SECRET_ACCESS_KEY", "secret"),
            ("AWS_SESSION_TOKEN", "session"),
            ("AWS_DEFAULT_REGION", "eu-west-1"),
        ];
        let (endpoint, secrets) = endpoint_from("bedrock", None, env(&aws));
        assert_eq!(endpoint.region.as_deref(), Some("eu-west-1"));
        assert_eq!(endpoint.api_key, None);
        assert_eq!(secrets, ["AKID", "secret", "session"]);

        let bearer = [
            ("AWS_BEARER_TOKEN_BEDROCK", "bearer"),
            ("AWS_REGION", "us-west-2"),
        ];
        let (endpoint, secrets) = endpoint_from("bedrock", None, env(&bearer));
        assert_eq!(endpoint.api_key.as_deref(), Some("bearer"));
        assert!(endpoint.aws.is_none());
        assert_eq!(endpoint.region.as_deref(), Some("us-west-2"));
        assert_eq!(secrets, ["bearer"]);
    }
}
