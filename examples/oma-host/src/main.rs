//! `oma-host`: the command-line host for the oma-component guest.
//!
//! Every subcommand reads OMA JSON from a file (or `-` for standard input), runs it through the
//! component in wasmtime, and follows the contract of `DESIGN.md`: success exits 0 and prints
//! JSON on standard output; a failure exits 1 and prints the error JSON
//! (`{"error": {"name", "code", "message", "retryable"}}`) on standard output; a usage error
//! exits 2 with a message on standard error.
//!
//! `OMA_COMPONENT=path/to/oma_component.wasm` runs another build of the guest than the one this
//! binary was built with.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use oma_harness::{error_json, Guest, Harness, HarnessOptions, WitError};
use serde_json::{json, Value};

const USAGE: &str = "\
usage: oma-host <command> [options]

commands:
  validate FILE   check an OMA JSON message list (FILE, or - for standard input) and print
                  it back as validated OMA JSON

options:
  -h, --help      print this help
  -V, --version   print the version

Exit status: 0 on success (JSON on stdout), 1 on a failure (the error JSON on stdout),
2 on a usage error (a message on stderr).
Environment: OMA_COMPONENT overrides the path of the guest component.";

/// A parsed command line.
#[derive(Debug, PartialEq, Eq)]
enum Command {
    /// `--help`.
    Help,
    /// `--version`.
    Version,
    /// `validate FILE`.
    Validate { input: Input },
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
        other if other.starts_with('-') => Err(format!("unknown option `{other}`")),
        other => Err(format!("unknown command `{other}`")),
    }
}

/// The single FILE operand of a subcommand; `-` is standard input, `--` ends the options.
fn one_input(command: &str, args: &[String]) -> Result<Input, String> {
    let mut operands = Vec::new();
    let mut options_done = false;
    for arg in args {
        match arg.as_str() {
            "--" if !options_done => options_done = true,
            "-" => operands.push(arg),
            flag if flag.starts_with('-') && !options_done => {
                return Err(format!("`{command}` has no option `{flag}`"));
            }
            _ => operands.push(arg),
        }
    }
    match operands.as_slice() {
        [one] if one.as_str() == "-" => Ok(Input::Stdin),
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
    let harness = match std::env::var_os("OMA_COMPONENT") {
        Some(wasm) => Harness::new(HarnessOptions {
            wasm: wasm.into(),
            max_instances: 1,
            ..HarnessOptions::default()
        })
        .map(|harness| &*Box::leak(Box::new(harness))),
        None => Harness::shared(),
    }
    .map_err(Failure::Host)?;
    harness.instantiate().await.map_err(Failure::Host)
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

fn error_value(failure: &Failure) -> Option<Value> {
    match failure {
        Failure::Usage(_) => None,
        Failure::Component(error) => Some(error_json(error)),
        Failure::Host(error) => Some(json!({"error": {
            "name": "HostError",
            "code": null,
            "message": format!("{error:#}"),
            "retryable": false,
        }})),
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

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let command = match parse(&args) {
        Ok(command) => command,
        Err(message) => {
            eprintln!("oma-host: {message}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let result = match command {
        Command::Help => Ok(USAGE.to_owned()),
        Command::Version => Ok(format!("oma-host {}", env!("CARGO_PKG_VERSION"))),
        Command::Validate { input } => validate(&input).await,
    };
    match result {
        Ok(output) => {
            print_stdout(&output);
            ExitCode::SUCCESS
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

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
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
        ];
        for (line, expected) in cases {
            match (parse(&args(line)), expected) {
                (Ok(got), Ok(want)) => assert_eq!(&got, want, "{line:?}"),
                (Err(got), Err(want)) => assert_eq!(got, *want, "{line:?}"),
                (got, want) => panic!("{line:?}: got {got:?}, want {want:?}"),
            }
        }
    }
}
