//! `oma-host serve`: the gateway (`oma_gateway.wasm`, `docs/gateway.md`), or any other
//! `wasi:http/proxy` component given with `--component`, behind an HTTP/1.1 server on
//! `--addr` (`127.0.0.1:8080` by default), until SIGINT or SIGTERM.
//!
//! The server is [`oma_wasmtime::serve`]: one fresh instance per request from the pooling
//! allocator, the harness's limits (guest time per call, memory per instance, and a
//! wall-clock limit per request), outbound requests through the address guard with the policy
//! of `oma-host run` (public, loopback and private addresses). Connections are accepted on the
//! main thread and served by one thread per core, each with a single-threaded tokio runtime
//! ([`ServeOptions::workers`]).
//!
//! The component's environment is the process's variables the gateway reads and no others:
//! names that start with `OMA_GATEWAY_`, `OTEL_EXPORTER_OTLP_` or `AWS_`, or end in `_API_KEY`
//! or `_BASE_URL`
//! ([`oma_wasmtime::serve::passes_through`]), read once at start. Their names are listed on
//! standard error after the line that says where the server listens,
//! `oma-host: listening on http://IP:PORT` (with the real port when `--addr` asks for port 0);
//! their values never are. The guest's own output (one line per request) goes to standard
//! error too. On a signal the server stops accepting, finishes the requests in flight (30 s at
//! most) and exits 0.
//!
//! `--keyvalue memory` or `--keyvalue redis://HOST:PORT[/DB]` links a `wasi:keyvalue` store
//! ([`oma_wasmtime::keyvalue`]): the gateway counts its per-token limits there when
//! `OMA_GATEWAY_LIMITS_BUCKET` names a bucket (`docs/deploy.md#limits-across-replicas`). With
//! Redis, every `oma-host serve` pointed at the same server shares the counts; `memory` is this
//! process's. With `OMA_GATEWAY_KEYS` set, the limits are counted whatever the options say
//! ([`limits_store`]): in this process's memory unless `--keyvalue` names a store, in the bucket
//! `OMA_GATEWAY_LIMITS_BUCKET` names or else in [`DEFAULT_BUCKET`] (each request has an instance
//! of its own, so an instance's memory would count nothing), and a line on standard error says
//! where. Without keys and without the option the component has no store.
//!
//! Under pressure: `--max-in-flight N` requests at once (1024 by default) and
//! `--memory-budget MIB` of linear memory for all instances together (1024 MiB by default);
//! past either a request is answered `503` with `Retry-After`, and `GET /healthz` is answered
//! outside both. `--max-instances N` (256) instances run at once; more requests wait for one.

use std::net::SocketAddr;
use std::path::PathBuf;

use oma_wasmtime::serve::{
    gateway_environment, ServeOptions, Server, DEFAULT_ADDR, DEFAULT_MAX_INSTANCES,
    DEFAULT_MAX_IN_FLIGHT, DEFAULT_MEMORY_BUDGET,
};

use oma_gateway_rules::limits::{BUCKET_VARIABLE, KEYS_VARIABLE};
use oma_wasmtime::keyvalue::KeyValue;
use oma_wasmtime::ComponentSource;

use crate::{options_and_operands, Failure};

/// The operands of `serve`.
#[derive(Debug, PartialEq)]
pub struct ServeArgs {
    /// `--addr IP:PORT`.
    addr: SocketAddr,
    /// `--component PATH`; `None` is the gateway this binary was built with.
    component: Option<PathBuf>,
    /// `--max-in-flight N`: requests admitted at once.
    max_in_flight: u32,
    /// `--memory-budget MIB`, in bytes: the linear memory of all instances together.
    memory_budget: usize,
    /// `--max-instances N`: instances alive at once.
    max_instances: u32,
    /// `--keyvalue memory|redis://HOST:PORT`: the component's `wasi:keyvalue` store (checked
    /// here, connected at the first use); `None`: no store.
    keyvalue: Option<String>,
}

/// The bucket the per-token limits are counted in when `OMA_GATEWAY_KEYS` is set and
/// `OMA_GATEWAY_LIMITS_BUCKET` is not.
pub const DEFAULT_BUCKET: &str = "oma-gateway";

/// The store the component counts its per-token limits in, for `env` (the component's
/// environment, completed with the bucket when it needs one) and `--keyvalue`'s `spec`, with the
/// line that says where they are counted (none without `OMA_GATEWAY_KEYS`).
///
/// Every request gets an instance of its own, so limits counted in an instance's memory would
/// count nothing: with keys set, the counts live in this process's memory unless `--keyvalue`
/// names a store, in the bucket `OMA_GATEWAY_LIMITS_BUCKET` names or else [`DEFAULT_BUCKET`].
/// A Redis URL is never repeated (it may hold a password).
pub fn limits_store(
    env: &mut Vec<(String, String)>,
    spec: Option<&str>,
) -> anyhow::Result<(KeyValue, Option<String>)> {
    let value = |name: &str| {
        env.iter()
            .find(|(n, v)| n == name && !v.trim().is_empty())
            .map(|(_, v)| v.clone())
    };
    let keys = value(KEYS_VARIABLE).is_some();
    let store = match spec {
        Some(spec) => KeyValue::parse(spec)?,
        None if keys => KeyValue::memory(),
        None => KeyValue::none(),
    };
    if !keys {
        return Ok((store, None));
    }
    let bucket = match value(BUCKET_VARIABLE) {
        Some(bucket) => bucket,
        None => {
            env.retain(|(name, _)| name != BUCKET_VARIABLE);
            env.push((BUCKET_VARIABLE.to_owned(), DEFAULT_BUCKET.to_owned()));
            env.sort();
            DEFAULT_BUCKET.to_owned()
        }
    };
    let place = match spec {
        Some(spec) if spec != "memory" => {
            "the Redis server of --keyvalue, shared by every oma-host serve that uses it"
        }
        _ => {
            "this process's memory, one count for all its requests (--keyvalue \
             redis://HOST:PORT shares them between processes)"
        }
    };
    let line = format!(
        "oma-host: per-token limits ({KEYS_VARIABLE}) are counted in {place}, bucket {bucket:?}"
    );
    Ok((store, Some(line)))
}

/// The most `--memory-budget` may be, in MiB (1 TiB).
const MAX_BUDGET_MIB: u64 = 1 << 20;

/// A whole number from 1 to `max` for `--name`.
fn count(name: &str, value: Option<String>, default: u64, max: u64) -> Result<u64, String> {
    let Some(value) = value else {
        return Ok(default);
    };
    value
        .parse::<u64>()
        .ok()
        .filter(|n| (1..=max).contains(n))
        .ok_or_else(|| format!("--{name} must be a whole number from 1 to {max}, got `{value}`"))
}

/// Parses the arguments after `serve`.
pub fn parse_args(args: &[String]) -> Result<ServeArgs, String> {
    let (mut options, operands) = options_and_operands(
        "serve",
        args,
        &[
            "addr",
            "component",
            "max-in-flight",
            "memory-budget",
            "max-instances",
            "keyvalue",
        ],
        &[],
    )?;
    if let Some(operand) = operands.first() {
        return Err(format!("`serve` takes no operands, got `{operand}`"));
    }
    let addr = match options.take("addr") {
        None => DEFAULT_ADDR,
        Some(addr) => addr.parse().map_err(|_| {
            format!("--addr must be an IP address and a port, such as 127.0.0.1:8080, got `{addr}`")
        })?,
    };
    let max_in_flight = count(
        "max-in-flight",
        options.take("max-in-flight"),
        DEFAULT_MAX_IN_FLIGHT.into(),
        1 << 20,
    )?;
    let budget_mib = count(
        "memory-budget",
        options.take("memory-budget"),
        (DEFAULT_MEMORY_BUDGET >> 20) as u64,
        MAX_BUDGET_MIB,
    )?;
    let max_instances = count(
        "max-instances",
        options.take("max-instances"),
        DEFAULT_MAX_INSTANCES.into(),
        4096,
    )?;
    let keyvalue = options.take("keyvalue");
    if let Some(spec) = &keyvalue {
        // The value may hold a password: it is never repeated.
        KeyValue::parse(spec)
            .map_err(|_| "--keyvalue takes `memory` or a redis://HOST:PORT URL".to_owned())?;
    }
    Ok(ServeArgs {
        keyvalue,
        addr,
        component: options.take("component").map(PathBuf::from),
        max_in_flight: u32::try_from(max_in_flight).unwrap_or(u32::MAX),
        memory_budget: usize::try_from(budget_mib << 20).unwrap_or(usize::MAX),
        max_instances: u32::try_from(max_instances).unwrap_or(u32::MAX),
    })
}

/// `serve`: binds, says where, and serves until SIGINT or SIGTERM. Fails (exit 1, the error
/// JSON on stdout) if the component cannot be loaded or the address bound.
pub fn serve(args: ServeArgs) -> Result<(), Failure> {
    // The main thread accepts connections and waits for the signals; the server's workers
    // serve them, each on a runtime of its own.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::Host(anyhow::anyhow!("could not start the runtime: {e}")))?;
    runtime.block_on(async {
        let mut env = gateway_environment();
        let (keyvalue, limits) =
            limits_store(&mut env, args.keyvalue.as_deref()).map_err(Failure::Host)?;
        let options = ServeOptions {
            addr: args.addr,
            env,
            max_in_flight: args.max_in_flight,
            memory_budget: args.memory_budget,
            max_instances: args.max_instances,
            keyvalue,
            // The gateway this binary carries, unless `--component` names another.
            ..ServeOptions::new(match args.component {
                Some(path) => ComponentSource::File(path),
                None => ComponentSource::from(oma_artifacts::GATEWAY),
            })
        };
        let names: Vec<String> = options.env.iter().map(|(name, _)| name.clone()).collect();
        let server = Server::bind(options).map_err(Failure::Host)?;
        // Before the line that says the server is up: a signal right after it stops it
        // gracefully instead of killing it.
        let stop = stop_signal().map_err(Failure::Host)?;
        eprintln!("oma-host: listening on {}", server.url());
        if names.is_empty() {
            eprintln!("oma-host: the component's environment is empty");
        } else {
            eprintln!(
                "oma-host: the component's environment: {} (values not shown)",
                names.join(", ")
            );
        }
        if let Some(line) = limits {
            eprintln!("{line}");
        }
        server.serve_until(stop).await.map_err(Failure::Host)?;
        eprintln!("oma-host: stopped");
        Ok(())
    })
}

/// A future that resolves on the first SIGINT or SIGTERM. The handlers are installed when this
/// is called, not when the future is first polled.
#[cfg(unix)]
fn stop_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    Ok(async move {
        let name = tokio::select! {
            _ = interrupt.recv() => "SIGINT",
            _ = terminate.recv() => "SIGTERM",
        };
        eprintln!("oma-host: {name}: stopping, finishing the requests in flight");
    })
}

/// A future that resolves on the first Ctrl-C.
#[cfg(not(unix))]
fn stop_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    Ok(async {
        let _ = tokio::signal::ctrl_c().await;
        eprintln!("oma-host: Ctrl-C: stopping, finishing the requests in flight");
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::args;

    #[test]
    fn serve_command_lines() {
        let ok = parse_args(&args(&[])).unwrap();
        assert_eq!(
            ok,
            ServeArgs {
                addr: "127.0.0.1:8080".parse().unwrap(),
                component: None,
                max_in_flight: 1024,
                memory_budget: 1 << 30,
                max_instances: 256,
                keyvalue: None,
            }
        );
        let ok = parse_args(&args(&["--keyvalue", "redis://127.0.0.1:6379"])).unwrap();
        assert_eq!(ok.keyvalue.as_deref(), Some("redis://127.0.0.1:6379"));
        let ok = parse_args(&args(&["--keyvalue=memory"])).unwrap();
        assert_eq!(ok.keyvalue.as_deref(), Some("memory"));
        let ok = parse_args(&args(&[
            "--max-in-flight",
            "8",
            "--memory-budget=256",
            "--max-instances",
            "4",
        ]))
        .unwrap();
        assert_eq!(
            (ok.max_in_flight, ok.memory_budget, ok.max_instances),
            (8, 256 << 20, 4)
        );
        let ok = parse_args(&args(&[
            "--addr",
            "127.0.0.1:0",
            "--component=/tmp/other.wasm",
        ]))
        .unwrap();
        assert_eq!(ok.addr, "127.0.0.1:0".parse().unwrap());
        assert_eq!(ok.component, Some(PathBuf::from("/tmp/other.wasm")));
        let ok = parse_args(&args(&["--addr=[::1]:9000"])).unwrap();
        assert_eq!(ok.addr, "[::1]:9000".parse().unwrap());
        for (line, error) in [
            (&["--addr", "localhost:8080"][..], "--addr must be an IP address and a port, such as 127.0.0.1:8080, got `localhost:8080`"),
            (&["--addr", "127.0.0.1"], "--addr must be an IP address and a port, such as 127.0.0.1:8080, got `127.0.0.1`"),
            (&["--addr"], "--addr needs a value"),
            (&["--addr", "127.0.0.1:1", "--addr", "127.0.0.1:2"], "--addr is given twice"),
            (&["--port", "8080"], "`serve` has no option `--port`"),
            (&["gateway.wasm"], "`serve` takes no operands, got `gateway.wasm`"),
            (&["-v"], "`serve` has no option `-v`"),
            (&["--max-in-flight", "0"], "--max-in-flight must be a whole number from 1 to 1048576, got `0`"),
            (&["--memory-budget", "1.5"], "--memory-budget must be a whole number from 1 to 1048576, got `1.5`"),
            (&["--max-instances", "many"], "--max-instances must be a whole number from 1 to 4096, got `many`"),
            (&["--keyvalue", "memcached://p4ss@h:1"], "--keyvalue takes `memory` or a redis://HOST:PORT URL"),
        ] {
            assert_eq!(parse_args(&args(line)).unwrap_err(), error, "{line:?}");
        }
    }

    fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn keys_are_counted_in_the_process_unless_a_store_is_named() {
        let keys = ("OMA_GATEWAY_KEYS", r#"{"k": {"rpm": 1}}"#);
        // Keys without a store or a bucket: this process's memory, in the default bucket.
        let mut env = vars(&[keys]);
        let (store, line) = limits_store(&mut env, None).unwrap();
        assert!(store.is_some());
        assert_eq!(
            env,
            vars(&[keys, ("OMA_GATEWAY_LIMITS_BUCKET", DEFAULT_BUCKET)])
        );
        let line = line.expect("said where");
        assert!(
            line.contains("this process's memory") && line.contains("\"oma-gateway\""),
            "{line}"
        );
        // A bucket of the operator's is kept; Redis is named, its URL never shown.
        let mut env = vars(&[keys, ("OMA_GATEWAY_LIMITS_BUCKET", "team")]);
        let (store, line) = limits_store(&mut env, Some("redis://:p4ss@127.0.0.1:6379")).unwrap();
        assert!(store.is_some());
        assert_eq!(env.len(), 2);
        let line = line.expect("said where");
        assert!(
            line.contains("Redis") && line.contains("\"team\""),
            "{line}"
        );
        assert!(!line.contains("p4ss") && !line.contains("6379"), "{line}");
        // No keys: no store unless named, nothing added, nothing said.
        let mut env = vars(&[("OMA_GATEWAY_TOKEN", "t")]);
        let (store, line) = limits_store(&mut env, None).unwrap();
        assert!(!store.is_some() && line.is_none());
        assert_eq!(env, vars(&[("OMA_GATEWAY_TOKEN", "t")]));
        let (store, _) = limits_store(&mut env, Some("memory")).unwrap();
        assert!(store.is_some());
    }
}
