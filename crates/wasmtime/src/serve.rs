//! An HTTP/1.1 server that runs a `wasi:http/proxy` component in process: `oma_gateway.wasm`
//! (`docs/gateway.md`), or any other component that exports `wasi:http/incoming-handler`.
//! `oma-host serve` is this server, with the gateway it carries; tests start it in process.
//!
//! ```no_run
//! # async fn demo(gateway: &'static [u8]) -> anyhow::Result<()> {
//! use oma_wasmtime::serve::{ServeOptions, Server};
//!
//! // `gateway`: the bytes of `oma_gateway.wasm`, e.g. `oma_artifacts::GATEWAY`.
//! let server = Server::bind(ServeOptions {
//!     addr: "127.0.0.1:0".parse()?,
//!     ..ServeOptions::new(gateway)
//! })?;
//! eprintln!("oma-host: listening on {}", server.url());
//! let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//! let running = tokio::spawn(server.serve_until(async {
//!     let _ = stopped.await;
//! }));
//! // ... requests to the server's URL ...
//! let _ = stop.send(());
//! running.await??;
//! # Ok(()) }
//! ```
//!
//! - **A runtime per core.** Connections are accepted on the runtime `serve_until` runs in and
//!   handed, each to the one with the fewest, to [`ServeOptions::workers`] threads (one per
//!   core by default), each running a single-threaded tokio runtime of its own. A request's
//!   connection, its instance and its provider connections (kept alive per thread) then live
//!   on one thread: no request wakes another thread to run a task it spawned, which on a
//!   multi-thread runtime cost more CPU than the guest's own work (`docs/performance.md`).
//! - **One instance per request.** The component is compiled once (through the harness's
//!   private compiled-code cache), linked once against all of WASI p2 (so `wasi:cli/environment`
//!   works, as `wasmtime serve -Scli`) and `wasi:http`, and pre-instantiated as a [`ProxyPre`];
//!   every request gets a fresh store and instance, dropped when its response has been written.
//!   Nothing a request leaves in the guest's memory reaches the next one.
//! - **The pooling allocator.** Instances come from a pool of
//!   [`ServeOptions::max_instances`] slots (and [`HEALTH_INSTANCES`] more kept for
//!   `GET /healthz`), each linear memory at most [`ServeOptions::max_memory`]. A request
//!   waits for a free slot rather than failing.
//! - **Pressure.** At most [`ServeOptions::max_in_flight`] requests are admitted at once
//!   (those waiting for a slot included), and the linear memory of all their instances together
//!   is held to [`ServeOptions::memory_budget`] ([`MemoryBudget`]): a request past the first,
//!   or arriving while less than [`ADMISSION_MEMORY`] of the budget is free, or whose instance
//!   would grow past the budget, is answered `503` with `Retry-After` ([`RETRY_AFTER_SECS`]).
//!   `GET /healthz` is answered outside both limits, by an instance from its own slots.
//! - **Clients that leave.** A request whose client closes its connection, before the response
//!   or while its body is being written, has its instance dropped within a tick: the run stops,
//!   and its provider requests in flight are dropped with it (their connections closed).
//! - **Limits.** Every store runs under the harness's [`Limits`]: a deadline of guest time for
//!   instantiation and again for the handler (time spent waiting in host calls, such as on a
//!   provider, does not count), checked every epoch tick, at which a busy guest also yields its
//!   thread so that it cannot starve other requests; and a memory cap per store. On top of that,
//!   [`ServeOptions::request_timeout`] bounds a request's wall-clock time, streaming included:
//!   past it the instance is dropped.
//! - **Outbound requests** go through a fresh [`GuardedOutbound`] per request (sharing the
//!   server's idle provider connections, so they are kept alive across requests) with
//!   [`ServeOptions::policy`] ([`AddressPolicy::LOCAL_SERVERS`] by default, as `oma-host run`:
//!   public, loopback and private addresses, never link-local, cloud-metadata or unspecified
//!   ones, checked after DNS resolution). A refusal is noted on standard error.
//! - **The environment** the component sees is [`ServeOptions::env`] and nothing else; for
//!   `oma-host serve` that is [`gateway_environment`]: the variables of the process the gateway
//!   reads ([`passes_through`]), read once at start. Values are never printed.
//! - **Standard output and error** of the guest go to the process's standard error (the
//!   gateway writes one line per request there). The server's own lines start with
//!   `oma-host: `.
//! - **Stopping.** [`Server::serve_until`] stops accepting connections when its future
//!   resolves, lets every open connection finish the response it is writing (keep-alive
//!   connections are closed after it), waits for the instances still running, and returns; at
//!   most [`ServeOptions::shutdown_grace`] later it returns regardless.
//!
//! Errors of the host itself (the guest trapped, went past a limit, or never answered) are
//! answered in the gateway's error shape, `{"error": {"name": "HostError", "message",
//! "retryable"}}`: `504` for [`ServeOptions::request_timeout`], `500` otherwise; a request
//! without a `Host` header is a `400`.

use std::convert::Infallible;
use std::ffi::OsString;
use std::fmt;
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE, HOST};
use http::StatusCode;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use serde_json::{Map, Value};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, watch, OwnedSemaphorePermit, Semaphore};
use wasmtime::component::{Linker, Resource};
use wasmtime::{Engine, Store, UpdateDeadline};
use wasmtime_wasi::WasiCtx;
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::p2::bindings::http::types::Scheme;
use wasmtime_wasi_http::p2::bindings::ProxyPre;
use wasmtime_wasi_http::p2::body::HyperOutgoingBody;
use wasmtime_wasi_http::p2::types::{HostIncomingRequest, HostResponseOutparam};
use wasmtime_wasi_http::WasiHttpView;

use crate::engine::{Compiled, ComponentOrigin, HarnessOptions};
use crate::error_json::host_error_message;
use crate::guard::{AddressPolicy, GuardedOutbound};
use crate::keyvalue::KeyValue;
use crate::limits::{LimitExceeded, Limits, MemoryBudget};
use crate::source::ComponentSource;
use crate::state::HostState;
use crate::store::{guarded_store, start_call};

/// Where `oma-host serve` listens unless told otherwise: `127.0.0.1:8080`.
pub const DEFAULT_ADDR: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 8080);

/// How many instances may run at once by default: the pool's slots, and so the most requests
/// served concurrently (more wait for a slot).
pub const DEFAULT_MAX_INSTANCES: u32 = 256;

/// The most wall-clock time one request may take by default, from the start of its instance
/// to the last byte of its body, provider calls and streaming included: 10 minutes, well past
/// the gateway's own default deadline (`OMA_GATEWAY_DEADLINE_MS`, 2 minutes).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(600);

/// How much of each memory slot stays resident between requests by default: 16 MiB, more than
/// a request with a 1 MiB image touches, where the memory budget leaves room for it
/// ([`ServeOptions::slot_resident_bytes`]).
pub const DEFAULT_KEEP_RESIDENT: usize = 16 << 20;

/// The pages idle slots keep resident, all slots together, may take at most this share of the
/// memory budget (one part in four): the budget counts live instances, and a slot keeps the
/// pages of its last instance after it is gone, so without a bound a burst as wide as the pool
/// would leave up to `max_instances x keep_resident` resident with nothing running.
pub const RESIDENT_SHARE_OF_BUDGET: usize = 4;

/// How long a stop waits by default for the requests in flight: 30 s.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// How many requests may be in flight at once by default (waiting for a slot included): past
/// it a request is answered `503`. Each waiting request holds only its connection.
pub const DEFAULT_MAX_IN_FLIGHT: u32 = 1024;

/// The linear memory all instances may hold together by default: 1 GiB. With the host's own
/// memory and the slots' resident pages, `oma-host serve` stays near this (see
/// `docs/security.md#limits`).
pub const DEFAULT_MEMORY_BUDGET: usize = 1 << 30;

/// How much of the memory budget must be free for a request to be admitted: 8 MiB, about what
/// a small request's instance takes.
pub const ADMISSION_MEMORY: usize = 8 << 20;

/// The pool slots kept for `GET /healthz`, which is answered outside the request limits.
pub const HEALTH_INSTANCES: u32 = 4;

/// The instances that may go on after their response is out, beside the pool's request slots
/// (the gateway exports a request's traces then). An instance whose response has gone out whole
/// gives its request slot and its admission back and takes one of these until it ends, so that
/// what it still does (an export to a collector that is slow or gone, bounded by the export's
/// own timeout) never holds a slot a client waits for. When all are taken, the instance is
/// stopped at once and the drop noted on standard error.
pub const FINISHING_INSTANCES: u32 = 16;

/// The `Retry-After` of a `503` under pressure, in seconds.
pub const RETRY_AFTER_SECS: u64 = 1;

/// How a [`Server`] is set up. `ServeOptions::new(component)` serves `component` on
/// [`DEFAULT_ADDR`] with an empty environment and the defaults below; `oma-host serve` serves
/// the gateway it carries and sets [`env`](ServeOptions::env) to [`gateway_environment`].
#[derive(Clone)]
pub struct ServeOptions {
    /// The `wasi:http/proxy` component, as bytes or a file its caller chooses.
    pub component: ComponentSource,
    /// Where to listen; port 0 picks a free port ([`Server::local_addr`] tells which).
    pub addr: SocketAddr,
    /// The component's whole environment (`wasi:cli/environment`), as name and value pairs.
    pub env: Vec<(String, String)>,
    /// The pool's slots: how many instances may be alive at once, i.e. how many requests are
    /// served concurrently; [`DEFAULT_MAX_INSTANCES`] by default.
    pub max_instances: u32,
    /// The most linear memory one memory of an instance may reserve, in bytes (the pool's slot
    /// size); [`Limits::DEFAULT_MEMORY`] (512 MiB) by default. [`Limits::memory`] caps the
    /// instance's memories together.
    pub max_memory: usize,
    /// Bytes of each memory slot kept resident between requests, [`DEFAULT_KEEP_RESIDENT`] by
    /// default: a request's instance gets the pages the last one used, reset to their initial
    /// contents, instead of fresh pages it faults in one by one (the largest single cost of a
    /// small request). 0 gives every slot back to the kernel after each request.
    pub keep_resident: usize,
    /// Guest time per call and memory per store: `Limits::default()`, 30 s and 512 MiB.
    pub limits: Limits,
    /// How many requests (other than `GET /healthz`) may be in flight at once, those waiting
    /// for a slot included; [`DEFAULT_MAX_IN_FLIGHT`] by default. Past it, `503`.
    pub max_in_flight: u32,
    /// The most linear memory all instances may hold together, in bytes;
    /// [`DEFAULT_MEMORY_BUDGET`] by default. Past it, `503`.
    pub memory_budget: usize,
    /// The most wall-clock time one request may take; [`DEFAULT_REQUEST_TIMEOUT`] by default.
    pub request_timeout: Duration,
    /// How long a stop waits for the requests in flight; [`DEFAULT_SHUTDOWN_GRACE`] by default.
    pub shutdown_grace: Duration,
    /// The addresses the component's outbound requests may reach;
    /// [`AddressPolicy::LOCAL_SERVERS`] by default.
    pub policy: AddressPolicy,
    /// Use the harness's private compiled-code cache (see [`HarnessOptions::cache`]).
    pub cache: bool,
    /// The cache directory; `None` is the per-user default
    /// ([`default_cache_dir`](crate::default_cache_dir)).
    pub cache_dir: Option<PathBuf>,
    /// The component's `wasi:keyvalue` store ([`KeyValue`]): none by default (every `open`
    /// fails), one map in memory, or a Redis server shared by every replica.
    pub keyvalue: KeyValue,
    /// How many threads serve the connections, each with a single-threaded runtime of its own
    /// (see the module docs); [`default_workers`] (one per core) by default. 0 serves them on
    /// the runtime [`Server::serve_until`] runs in.
    pub workers: usize,
}

/// One worker thread per core the process may use ([`ServeOptions::workers`]); 1 when that
/// cannot be told.
pub fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

impl ServeOptions {
    /// The bytes each memory slot keeps resident between requests: [`ServeOptions::keep_resident`],
    /// lowered where needed so that the request slots and the [`HEALTH_INSTANCES`] together
    /// keep at most a [`RESIDENT_SHARE_OF_BUDGET`]th of [`ServeOptions::memory_budget`]. With
    /// the defaults (1 GiB, 256 slots) that is 1 MiB a slot; a smaller pool keeps more of each
    /// slot. The [`FINISHING_INSTANCES`] are left out of the share: an instance is in one only
    /// for the moments after its response, and the most they keep besides is
    /// `FINISHING_INSTANCES` slots' worth (6% more at the defaults).
    pub fn slot_resident_bytes(&self) -> usize {
        let slots = self.max_instances.max(1).saturating_add(HEALTH_INSTANCES) as usize;
        let share = self.memory_budget / RESIDENT_SHARE_OF_BUDGET / slots;
        // Whole host pages: wasmtime keeps resident in pages.
        let share = share & !(4096 - 1);
        self.keep_resident.min(share)
    }

    /// The pool's slots in all: the request slots, the [`HEALTH_INSTANCES`] and the
    /// [`FINISHING_INSTANCES`].
    fn pool_slots(&self) -> u32 {
        self.max_instances
            .max(1)
            .saturating_add(HEALTH_INSTANCES)
            .saturating_add(FINISHING_INSTANCES)
    }
}

impl ServeOptions {
    /// The defaults for `component`: [`DEFAULT_ADDR`], an empty environment,
    /// [`DEFAULT_MAX_INSTANCES`] slots, [`DEFAULT_MAX_IN_FLIGHT`] requests,
    /// [`DEFAULT_MEMORY_BUDGET`], [`DEFAULT_REQUEST_TIMEOUT`], [`AddressPolicy::LOCAL_SERVERS`],
    /// the compiled-code cache on.
    pub fn new(component: impl Into<ComponentSource>) -> Self {
        ServeOptions {
            component: component.into(),
            addr: DEFAULT_ADDR,
            env: Vec::new(),
            max_instances: DEFAULT_MAX_INSTANCES,
            max_memory: Limits::DEFAULT_MEMORY,
            keep_resident: DEFAULT_KEEP_RESIDENT,
            limits: Limits::default(),
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            memory_budget: DEFAULT_MEMORY_BUDGET,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            policy: AddressPolicy::LOCAL_SERVERS,
            cache: true,
            cache_dir: None,
            keyvalue: KeyValue::none(),
            workers: default_workers(),
        }
    }
}

impl fmt::Debug for ServeOptions {
    /// Shows the environment's names only: its values are keys.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.env.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("ServeOptions")
            .field("component", &self.component)
            .field("addr", &self.addr)
            .field("env", &names)
            .field("max_instances", &self.max_instances)
            .field("max_memory", &self.max_memory)
            .field("limits", &self.limits)
            .field("max_in_flight", &self.max_in_flight)
            .field("memory_budget", &self.memory_budget)
            .field("request_timeout", &self.request_timeout)
            .field("shutdown_grace", &self.shutdown_grace)
            .field("policy", &self.policy)
            .field("cache", &self.cache)
            .field("cache_dir", &self.cache_dir)
            .field("workers", &self.workers)
            .finish()
    }
}

/// Whether the process variable `name` reaches the gateway: the names it reads
/// (`docs/gateway.md`) and no others. Those that start with `OMA_GATEWAY_` (its own settings),
/// `OTEL_EXPORTER_OTLP_` (where its traces go) or `AWS_` (Bedrock's credentials, region and
/// endpoint), and those that end in `_API_KEY` or `_BASE_URL` (a provider's key and base URL).
/// Everything else (`PATH`, `HOME`, other programs' secrets) stays out of the component.
pub fn passes_through(name: &str) -> bool {
    name.starts_with("OMA_GATEWAY_")
        || name.starts_with("OTEL_EXPORTER_OTLP_")
        || name.starts_with("AWS_")
        || name.ends_with("_API_KEY")
        || name.ends_with("_BASE_URL")
}

/// The process's variables that [`passes_through`] lets through, sorted by name; variables
/// whose name or value is not UTF-8 are left out.
pub fn gateway_environment() -> Vec<(String, String)> {
    environment_from(std::env::vars_os())
}

fn environment_from(vars: impl IntoIterator<Item = (OsString, OsString)>) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = vars
        .into_iter()
        .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)))
        .filter(|(name, _)| passes_through(name))
        .collect();
    env.sort();
    env
}

/// A component compiled, linked and pre-instantiated, and a socket bound: ready to serve with
/// [`Server::serve_until`].
pub struct Server {
    listener: std::net::TcpListener,
    addr: SocketAddr,
    shared: Arc<Shared>,
    origin: ComponentOrigin,
    load_time: Duration,
    workers: usize,
}

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Server")
            .field("addr", &self.addr)
            .field("component", &self.shared.component)
            .field("origin", &self.origin)
            .field("load_time", &self.load_time)
            .field("workers", &self.workers)
            .finish_non_exhaustive()
    }
}

/// What every request's task needs.
struct Shared {
    component: ComponentSource,
    engine: Engine,
    pre: ProxyPre<HostState>,
    env: Vec<(String, String)>,
    keyvalue: KeyValue,
    limits: Limits,
    epoch_tick: Duration,
    request_timeout: Duration,
    shutdown_grace: Duration,
    policy: AddressPolicy,
    /// The provider connections kept alive across requests when connections are served on the
    /// caller's runtime (each request's guard shares them); each worker keeps its own.
    connections: GuardedOutbound,
    /// One permit per pool slot: a request holds one from before its store exists until the
    /// store is dropped.
    slots: Arc<Semaphore>,
    max_instances: u32,
    /// The slots kept for `GET /healthz`.
    health_slots: Arc<Semaphore>,
    /// The places of instances going on after their response ([`FINISHING_INSTANCES`]).
    finishing: Arc<Semaphore>,
    /// One permit per request admitted (other than `GET /healthz`), held until its instance is
    /// gone.
    in_flight: Arc<Semaphore>,
    max_in_flight: u32,
    /// The linear memory all request instances share.
    budget: MemoryBudget,
    /// Requests admitted so far (other than `GET /healthz`): the idle trim's cue.
    admitted: AtomicU64,
}

impl Server {
    /// Compiles (or loads from the cache) and links `options.component`, checks that it is a
    /// `wasi:http/proxy` component whose imports can all be met, and binds `options.addr`.
    /// Nothing is served until [`Server::serve_until`].
    ///
    /// Fails if the component cannot be read, compiled or linked, or the address cannot be
    /// bound.
    pub fn bind(options: ServeOptions) -> anyhow::Result<Server> {
        let max_instances = options.max_instances.max(1);
        let harness = HarnessOptions {
            cache: options.cache,
            cache_dir: options.cache_dir.clone(),
            max_instances: options.pool_slots(),
            max_memory: options.max_memory,
            keep_resident: options.slot_resident_bytes(),
            limits: options.limits,
            ..HarnessOptions::new(options.component.clone())
        };
        let compiled = Compiled::new(&harness)?;
        let path = &options.component;
        let mut linker = Linker::<HostState>::new(compiled.engine());
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
        crate::keyvalue::add_to_linker(&mut linker, HostState::keyvalue_view)?;
        let instance_pre = linker.instantiate_pre(compiled.component()).map_err(|e| {
            anyhow::Error::from(e).context(format!(
                "{path} imports something a wasi:http/proxy host with wasi:cli does not provide"
            ))
        })?;
        let pre = ProxyPre::new(instance_pre).map_err(|e| {
            anyhow::Error::from(e).context(format!(
                "{path} is not a wasi:http/proxy component (it must export \
                 wasi:http/incoming-handler)"
            ))
        })?;

        let listener = std::net::TcpListener::bind(options.addr)
            .with_context(|| format!("could not listen on {}", options.addr))?;
        listener
            .set_nonblocking(true)
            .context("could not make the listening socket non-blocking")?;
        let addr = listener
            .local_addr()
            .context("could not read the listening address")?;

        Ok(Server {
            listener,
            addr,
            shared: Arc::new(Shared {
                component: options.component,
                engine: compiled.engine().clone(),
                pre,
                env: options.env,
                keyvalue: options.keyvalue,
                limits: options.limits,
                epoch_tick: compiled.epoch_tick(),
                request_timeout: options.request_timeout,
                shutdown_grace: options.shutdown_grace,
                policy: options.policy,
                connections: GuardedOutbound::new(options.policy),
                slots: Arc::new(Semaphore::new(max_instances as usize)),
                max_instances,
                health_slots: Arc::new(Semaphore::new(HEALTH_INSTANCES as usize)),
                finishing: Arc::new(Semaphore::new(FINISHING_INSTANCES as usize)),
                in_flight: Arc::new(Semaphore::new(options.max_in_flight.max(1) as usize)),
                max_in_flight: options.max_in_flight.max(1),
                budget: MemoryBudget::new(options.memory_budget),
                admitted: AtomicU64::new(0),
            }),
            origin: compiled.origin(),
            load_time: compiled.load_time(),
            workers: options.workers,
        })
    }

    /// The address it listens on, with the real port when port 0 was asked for.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://IP:PORT`, the base URL of [`Server::local_addr`].
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The component it serves.
    pub fn component(&self) -> &ComponentSource {
        &self.shared.component
    }

    /// Whether the compiled code was compiled here or loaded from the cache.
    pub fn origin(&self) -> ComponentOrigin {
        self.origin
    }

    /// How long reading and compiling (or deserialising) the component took.
    pub fn load_time(&self) -> Duration {
        self.load_time
    }

    /// Serves HTTP/1.1 until `shutdown` resolves, then stops gracefully (see the module docs)
    /// and returns. Must run inside a tokio runtime with I/O and time enabled, which accepts the
    /// connections and hands them to the [`ServeOptions::workers`] threads (started here,
    /// ended on return); with no workers it serves them itself, and a multi-thread runtime then
    /// lets requests run in parallel.
    ///
    /// Fails only if the listening socket cannot be registered with the runtime or a worker
    /// thread cannot be started; a failed request or connection is answered or closed and noted
    /// on standard error.
    pub async fn serve_until(self, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
        let listener = tokio::net::TcpListener::from_std(self.listener)
            .context("could not register the listening socket with the runtime")?;
        let shared = self.shared;
        let workers = (0..self.workers)
            .map(|index| Worker::start(index, shared.policy))
            .collect::<anyhow::Result<Vec<Worker>>>()?;
        let (stop, stopping) = watch::channel(false);
        let mut connections = tokio::task::JoinSet::new();
        let mut shutdown = std::pin::pin!(shutdown);
        let mut idle_check = tokio::time::interval(IDLE_TRIM_CHECK);
        idle_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut trimmed_at = 0;
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                _ = idle_check.tick() => {
                    // Idle after serving: the memory the requests' host buffers took goes back.
                    let admitted = shared.admitted.load(Ordering::Relaxed);
                    let idle = shared.in_flight.available_permits() == shared.max_in_flight as usize;
                    if idle && admitted != trimmed_at {
                        trimmed_at = admitted;
                        trim_heap();
                    }
                }
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => {
                        let shared = Arc::clone(&shared);
                        let stopping = stopping.clone();
                        match workers.iter().min_by_key(|worker| worker.open()) {
                            None => {
                                let pool = shared.connections.clone();
                                connections.spawn(connection(stream, shared, pool, stopping));
                            }
                            Some(worker) => worker.serve(&mut connections, stream, shared, stopping),
                        }
                    }
                    Err(e) => {
                        // Out of descriptors, say: a pause instead of a busy loop.
                        eprintln!("oma-host: could not accept a connection: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                },
            }
        }
        drop(listener);
        let _ = stop.send(true);
        let drained = tokio::time::timeout(shared.shutdown_grace, async {
            while connections.join_next().await.is_some() {}
            // Every slot free: no instance is running any more.
            let _ = shared.slots.acquire_many(shared.max_instances).await;
            let _ = shared.health_slots.acquire_many(HEALTH_INSTANCES).await;
            let _ = shared.finishing.acquire_many(FINISHING_INSTANCES).await;
        })
        .await;
        if drained.is_err() {
            eprintln!(
                "oma-host: stopped with requests still running after {} s",
                shared.shutdown_grace.as_secs_f64()
            );
            connections.abort_all();
        }
        // Dropping the workers ends their threads, and with them their runtimes.
        drop(workers);
        Ok(())
    }
}

/// A thread with a single-threaded tokio runtime that serves the connections handed to it, and
/// the provider connections its requests keep alive. Dropping it ends the thread, and what
/// still runs on it is dropped with its runtime.
struct Worker {
    runtime: tokio::runtime::Handle,
    /// Idle provider connections, shared by this worker's requests only: a connection's task
    /// runs on the runtime that opened it, so a request on another thread would wake this one.
    connections: GuardedOutbound,
    /// The connections this worker serves now: a new one goes to the worker with the fewest.
    open: Arc<AtomicU64>,
    /// Dropped with the worker: the thread's runtime then stops.
    _stop: oneshot::Sender<()>,
}

impl Worker {
    fn start(index: usize, policy: AddressPolicy) -> anyhow::Result<Worker> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("could not start a worker's runtime")?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        std::thread::Builder::new()
            .name(format!("oma-serve-{index}"))
            .spawn(move || {
                runtime.block_on(async {
                    let _ = stopped.await;
                });
                // Without waiting for blocking work (a name lookup) still under way.
                runtime.shutdown_background();
            })
            .context("could not start a worker thread")?;
        Ok(Worker {
            runtime: handle,
            connections: GuardedOutbound::new(policy),
            open: Arc::new(AtomicU64::new(0)),
            _stop: stop,
        })
    }

    fn open(&self) -> u64 {
        self.open.load(Ordering::Relaxed)
    }

    /// Serves `stream` on this worker's thread, as a task of `connections`.
    fn serve(
        &self,
        connections: &mut tokio::task::JoinSet<()>,
        stream: TcpStream,
        shared: Arc<Shared>,
        stopping: watch::Receiver<bool>,
    ) {
        // The socket leaves this runtime's reactor for the worker's.
        let stream = match stream.into_std() {
            Ok(stream) => stream,
            Err(e) => {
                eprintln!("oma-host: could not hand a connection to a worker: {e}");
                return;
            }
        };
        let open = Counted::new(&self.open);
        let pool = self.connections.clone();
        connections.spawn_on(
            async move {
                let _open = open;
                match TcpStream::from_std(stream) {
                    Ok(stream) => connection(stream, shared, pool, stopping).await,
                    Err(e) => eprintln!("oma-host: a worker could not take a connection: {e}"),
                }
            },
            &self.runtime,
        );
    }
}

/// One in a worker's count of open connections, for as long as it lives.
struct Counted(Arc<AtomicU64>);

impl Counted {
    fn new(count: &Arc<AtomicU64>) -> Counted {
        count.fetch_add(1, Ordering::Relaxed);
        Counted(Arc::clone(count))
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How often the server looks whether it is idle, to give freed memory back ([`trim_heap`]).
const IDLE_TRIM_CHECK: Duration = Duration::from_secs(1);

/// Gives the C allocator's free memory back to the kernel. A burst of large requests leaves
/// their host-side buffers (bodies, the provider requests) freed but held by glibc's arenas,
/// hundreds of MiB of it after 256 vision-1mib runs at once; the server calls this when no
/// request is in flight and some were served since the last call, at most once a second.
fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only returns free memory of the allocator to the kernel; it takes
    // no pointers and is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Serves one connection until it closes, or until a stop, after which it finishes the
/// response in progress and closes.
/// `pool` holds the provider connections its requests keep alive.
async fn connection(
    stream: TcpStream,
    shared: Arc<Shared>,
    pool: GuardedOutbound,
    mut stopping: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let service = hyper::service::service_fn(move |request| {
        let shared = Arc::clone(&shared);
        let pool = pool.clone();
        async move { Ok::<_, Infallible>(handle(shared, &pool, request).await) }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    // The timer makes hyper's header read timeout (30 s) apply: a client that never finishes
    // its headers does not hold the connection forever.
    builder.timer(TokioTimer).keep_alive(true);
    let mut served = std::pin::pin!(builder.serve_connection(TokioIo::new(stream), service));
    tokio::select! {
        // A connection's own errors (a client that went away) concern no one else.
        _ = served.as_mut() => return,
        _ = stopping.wait_for(|stop| *stop) => {}
    }
    served.as_mut().graceful_shutdown();
    let _ = served.await;
}

/// How a request's instance ended.
enum Ended {
    /// The handler returned.
    Returned,
    /// The guest went past a [`Limits`] bound.
    Limit(LimitExceeded),
    /// The guest trapped or a host call failed.
    Failed,
    /// [`ServeOptions::request_timeout`] passed.
    TimedOut,
}

/// Aborts a request's instance task when dropped before [`Cancel::disarm`]: the handler's
/// future is dropped when its client's connection closes before the response, and the
/// response body when it closes before the body's end.
struct Cancel(Option<tokio::task::AbortHandle>);

impl Cancel {
    fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for Cancel {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
        }
    }
}

/// What a request's instance holds while it lives.
enum Held {
    /// Until its response has gone out: its pool slot and its admission (none for
    /// `GET /healthz`).
    Serving {
        _slot: OwnedSemaphorePermit,
        _admission: Option<OwnedSemaphorePermit>,
    },
    /// After: one of the [`FINISHING_INSTANCES`] places.
    Finishing { _place: OwnedSemaphorePermit },
    /// The instance is gone.
    Nothing,
}

/// The instance task's permits, shared with its response body, which trades them for a
/// finishing place once the response is out ([`Watched`]).
type Holding = Arc<std::sync::Mutex<Held>>;

fn held(holding: &Holding) -> std::sync::MutexGuard<'_, Held> {
    holding
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A response body that cancels its instance if it is dropped before its end (the client
/// left while it was being written). Once the body has gone out whole (its last byte of a
/// declared length, which hyper drops the body after without asking for more, or its end), the
/// instance goes on with what it does after answering (the gateway's trace export) in a
/// finishing place, its request slot and admission given back ([`FINISHING_INSTANCES`]).
struct Watched {
    body: HyperOutgoingBody,
    cancel: Cancel,
    /// The bytes still due of a body whose `content-length` was declared.
    remaining: Option<u64>,
    /// What the body trades once it has gone out whole.
    finish: Option<Finish>,
}

/// What an instance needs to move to a finishing place.
struct Finish {
    holding: Holding,
    finishing: Arc<Semaphore>,
    task: tokio::task::AbortHandle,
    label: String,
}

impl Watched {
    /// The response has gone out whole: the instance may go on, in a finishing place, or is
    /// stopped when there is none.
    fn completed(&mut self) {
        self.cancel.disarm();
        let Some(finish) = self.finish.take() else {
            return;
        };
        let mut held = held(&finish.holding);
        if !matches!(*held, Held::Serving { .. }) {
            // The instance is gone already.
            return;
        }
        match finish.finishing.try_acquire_owned() {
            // The request's slot and admission go back here, with the old value.
            Ok(place) => *held = Held::Finishing { _place: place },
            Err(_) => {
                *held = Held::Nothing;
                drop(held);
                finish.task.abort();
                eprintln!(
                    "oma-host: {}: stopped after its response: {FINISHING_INSTANCES} instances                      were finishing already (what it still did after answering, such as a                      trace export, was dropped)",
                    finish.label
                );
            }
        }
    }
}

impl hyper::body::Body for Watched {
    type Data = Bytes;
    type Error = <HyperOutgoingBody as hyper::body::Body>::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        match &polled {
            Poll::Ready(None) => self.completed(),
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(remaining), Some(data)) = (self.remaining, frame.data_ref()) {
                    let left = remaining.saturating_sub(data.len() as u64);
                    self.remaining = Some(left);
                    if left == 0 {
                        self.completed();
                    }
                }
            }
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// The `503` of a server under pressure, with `Retry-After`: retryable, since the same request
/// may fit once others are done.
fn unavailable(message: &str) -> Response {
    let mut response =
        error_response_with(StatusCode::SERVICE_UNAVAILABLE, "HostError", message, true);
    response.headers_mut().insert(
        http::header::RETRY_AFTER,
        HeaderValue::from(RETRY_AFTER_SECS),
    );
    response
}

/// Whether the request is the health check, answered outside the request limits.
fn is_health_check<B>(request: &hyper::Request<B>) -> bool {
    request.method() == http::Method::GET && request.uri().path() == "/healthz"
}

/// One request: a fresh instance handles it in a task of its own (which goes on writing the
/// body after the head has been returned here); its provider requests share `pool`'s idle
/// connections.
async fn handle(
    shared: Arc<Shared>,
    pool: &GuardedOutbound,
    request: hyper::Request<Incoming>,
) -> Response {
    if request.uri().authority().is_none()
        && request
            .headers()
            .get(HOST)
            .is_none_or(|host| host.to_str().is_err())
    {
        return error_response(
            StatusCode::BAD_REQUEST,
            "Error",
            "the request has no Host header (HTTP/1.1 requires one)",
        );
    }
    let health = is_health_check(&request);
    let admitted = if health {
        None
    } else {
        let Ok(permit) = Arc::clone(&shared.in_flight).try_acquire_owned() else {
            return unavailable(&format!(
                "the server is serving its limit of {} requests at once; try again shortly",
                shared.max_in_flight
            ));
        };
        if shared.budget.available() < ADMISSION_MEMORY {
            return unavailable(&format!(
                "the server's instances hold their memory budget of {} bytes; try again shortly",
                shared.budget.limit()
            ));
        }
        shared.admitted.fetch_add(1, Ordering::Relaxed);
        Some(permit)
    };
    let slots = if health {
        &shared.health_slots
    } else {
        &shared.slots
    };
    let Ok(slot) = Arc::clone(slots).acquire_owned().await else {
        return error_response(
            StatusCode::SERVICE_UNAVAILABLE,
            "HostError",
            "the server is stopping",
        );
    };
    let label = format!("{} {}", request.method(), request.uri().path());
    let guard = GuardedOutbound::new(shared.policy).sharing_connections(pool);
    let mut store = new_store(&shared, guard.clone());
    if !health {
        store
            .data_mut()
            .guard_mut()
            .share_budget(shared.budget.clone());
    }
    let (sender, receiver) = oneshot::channel();
    let incoming = store
        .data_mut()
        .http()
        .new_incoming_request(Scheme::Http, request);
    let resources = match incoming {
        Ok(request) => store
            .data_mut()
            .http()
            .new_response_outparam(sender)
            .map(|out| (request, out)),
        Err(e) => Err(e),
    };
    let (request, out) = match resources {
        Ok(resources) => resources,
        Err(e) => {
            eprintln!("oma-host: {label}: could not hand the request to the component: {e:#}");
            return error_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                "HostError",
                "the request could not be handed to the component",
            );
        }
    };
    let holding: Holding = Arc::new(std::sync::Mutex::new(Held::Serving {
        _slot: slot,
        _admission: admitted,
    }));
    let mut task = tokio::spawn(run_instance(
        Arc::clone(&shared),
        store,
        request,
        out,
        Arc::clone(&holding),
        guard,
        label.clone(),
    ));
    // Should this future be dropped (the client left before the response), so is the instance.
    let mut cancel = Cancel(Some(task.abort_handle()));
    let answered = receiver.await;
    cancel.disarm();
    match answered {
        Ok(Ok(response)) => {
            let (parts, body) = response.into_parts();
            let remaining = parts
                .headers
                .get(http::header::CONTENT_LENGTH)
                .and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
            let mut watched = Watched {
                body,
                cancel: Cancel(Some(task.abort_handle())),
                remaining,
                finish: Some(Finish {
                    holding,
                    finishing: Arc::clone(&shared.finishing),
                    task: task.abort_handle(),
                    label,
                }),
            };
            if remaining == Some(0) {
                watched.completed();
            }
            hyper::Response::from_parts(parts, watched.boxed_unsync())
        }
        Ok(Err(code)) => {
            // Only the variant: whatever text the guest put in it stays out of the log.
            let kind = format!("{code:?}");
            let kind = kind.split(['(', ' ', '{']).next().unwrap_or_default();
            eprintln!("oma-host: {label}: the component answered with the error code {kind}");
            error_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                "HostError",
                &format!("the component answered with the error code {kind}"),
            )
        }
        // The instance ended without setting a response.
        Err(_) => match (&mut task).await {
            Ok(Ended::TimedOut) => error_response(
                StatusCode::GATEWAY_TIMEOUT,
                "HostError",
                &format!(
                    "the request took longer than the host's limit of {} s",
                    shared.request_timeout.as_secs_f64()
                ),
            ),
            Ok(Ended::Limit(exceeded @ LimitExceeded::Budget { .. })) => {
                unavailable(&format!("{exceeded}; try again shortly"))
            }
            Ok(Ended::Limit(exceeded)) => error_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                "HostError",
                &host_error_message(&anyhow::Error::new(exceeded)),
            ),
            Ok(Ended::Returned) => error_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                "HostError",
                "the component returned without answering",
            ),
            Ok(Ended::Failed) | Err(_) => error_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                "HostError",
                "the component failed before answering",
            ),
        },
    }
}

/// A store for one request: the component's environment, its stdout and stderr on the
/// process's stderr, `guard` for outbound HTTP, the limits, and an epoch callback that yields
/// every tick.
fn new_store(shared: &Shared, guard: GuardedOutbound) -> Store<HostState> {
    let mut wasi = WasiCtx::builder();
    wasi.envs(&shared.env)
        .stdout(tokio::io::stderr())
        .stderr(tokio::io::stderr());
    let mut state = HostState::with_wasi(wasi.build(), Box::new(guard), shared.limits);
    state.set_limits(shared.limits, shared.epoch_tick);
    state.set_keyvalue(shared.keyvalue.clone());
    let mut store = guarded_store(&shared.engine, state);
    // The harness's callback ends a call past its deadline; this one also yields to the
    // runtime at every tick, so a guest that computes does not hold a worker thread.
    store.epoch_deadline_callback(|mut context| {
        match context.data_mut().guard_mut().deadline_reached() {
            Ok(_) => Ok(UpdateDeadline::Yield(1)),
            Err(exceeded) => Err(wasmtime::Error::new(exceeded)),
        }
    });
    store.set_epoch_deadline(1);
    store
}

/// Instantiates the component and calls its handler, under the request's wall-clock limit;
/// notes on stderr how it failed, if it did, and what the guard refused. The slot is given
/// back once the store is gone.
async fn run_instance(
    shared: Arc<Shared>,
    mut store: Store<HostState>,
    request: Resource<HostIncomingRequest>,
    out: Resource<HostResponseOutparam>,
    holding: Holding,
    guard: GuardedOutbound,
    label: String,
) -> Ended {
    let ran = tokio::time::timeout(shared.request_timeout, async {
        let proxy = shared.pre.instantiate_async(&mut store).await?;
        start_call(&mut store);
        store.set_epoch_deadline(1);
        proxy
            .wasi_http_incoming_handler()
            .call_handle(&mut store, request, out)
            .await
    })
    .await;
    let ended = match ran {
        Ok(Ok(())) => Ended::Returned,
        Ok(Err(error)) => {
            let error = anyhow::Error::from(error);
            match LimitExceeded::of(&error) {
                Some(exceeded) => {
                    eprintln!("oma-host: {label}: {exceeded}");
                    Ended::Limit(exceeded.clone())
                }
                None => {
                    // One line, without the guest's wasm backtrace.
                    let message = host_error_message(&error);
                    eprintln!("oma-host: {label}: the component failed: {message}");
                    Ended::Failed
                }
            }
        }
        Err(_) => {
            eprintln!(
                "oma-host: {label}: stopped after {} s, the host's limit per request",
                shared.request_timeout.as_secs_f64()
            );
            Ended::TimedOut
        }
    };
    for refusal in guard.refusals() {
        eprintln!(
            "oma-host: {label}: {refusal}; the component may reach public, loopback and private \
             addresses only, never link-local, cloud-metadata or unspecified ones"
        );
    }
    drop(store);
    *held(&holding) = Held::Nothing;
    ended
}

/// What the handler answers: the component's response, or the host's error.
type Response = hyper::Response<HyperOutgoingBody>;

/// `{"error": {"name", "message", "retryable": false}}` with `status`, as the gateway's errors.
fn error_response(status: StatusCode, name: &str, message: &str) -> Response {
    error_response_with(status, name, message, false)
}

/// [`error_response`] with `retryable` as given.
fn error_response_with(status: StatusCode, name: &str, message: &str, retryable: bool) -> Response {
    let mut error = Map::new();
    error.insert("name".into(), Value::from(name));
    error.insert("message".into(), Value::from(message));
    error.insert("retryable".into(), Value::Bool(retryable));
    let mut body = Map::new();
    body.insert("error".into(), Value::Object(error));
    let text = Value::Object(body).to_string();
    let body = Full::new(Bytes::from(text))
        .map_err(|never| match never {})
        .boxed_unsync();
    let mut response = hyper::Response::new(body);
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// hyper's timer on tokio's clock.
#[derive(Clone, Copy, Debug)]
struct TokioTimer;

impl hyper::rt::Timer for TokioTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(TokioSleep(Box::pin(tokio::time::sleep(duration))))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(TokioSleep(Box::pin(tokio::time::sleep_until(
            deadline.into(),
        ))))
    }
}

/// A tokio sleep as hyper's [`Sleep`](hyper::rt::Sleep).
struct TokioSleep(Pin<Box<tokio::time::Sleep>>);

impl Future for TokioSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<()> {
        self.0.as_mut().poll(cx)
    }
}

impl hyper::rt::Sleep for TokioSleep {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_slots_keep_at_most_a_quarter_of_the_budget_resident() {
        let defaults = ServeOptions::new(Vec::new());
        // 1 GiB over 4, over 260 slots: just under 1 MiB a slot, in whole pages (the finishing
        // places are left out of the share).
        let per_slot = defaults.slot_resident_bytes();
        assert_eq!(per_slot, 1_032_192);
        let slots = (defaults.max_instances + HEALTH_INSTANCES) as usize;
        assert!(per_slot * slots <= defaults.memory_budget / RESIDENT_SHARE_OF_BUDGET);
        // A small pool keeps what `keep_resident` asks for.
        let small = ServeOptions {
            max_instances: 8,
            ..ServeOptions::new(Vec::new())
        };
        assert_eq!(small.slot_resident_bytes(), DEFAULT_KEEP_RESIDENT);
        // Nothing kept stays nothing kept.
        let none = ServeOptions {
            keep_resident: 0,
            ..ServeOptions::new(Vec::new())
        };
        assert_eq!(none.slot_resident_bytes(), 0);
    }

    #[test]
    fn only_the_gateways_variables_pass_through() {
        let vars = [
            ("PATH", "/usr/bin"),
            ("HOME", "/home/me"),
            ("OMA_GATEWAY_TOKEN", "t"),
            ("OMA_GATEWAY_EGRESS", "open"),
            ("ANTHROPIC_API_KEY", "a"),
            ("MY_LLM_BASE_URL", "http://127.0.0.1:1"),
            ("AWS_REGION", "eu-west-1"),
            ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", "http://127.0.0.1:2"),
            ("GITHUB_TOKEN", "g"),
            ("OMA_COMPONENT", "x.wasm"),
            ("API_KEY_FILE", "/k"),
            ("oma_gateway_token", "lowercase"),
        ]
        .map(|(name, value)| (OsString::from(name), OsString::from(value)));
        let names: Vec<String> = environment_from(vars)
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        assert_eq!(
            names,
            [
                "ANTHROPIC_API_KEY",
                "AWS_ENDPOINT_URL_BEDROCK_RUNTIME",
                "AWS_REGION",
                "MY_LLM_BASE_URL",
                "OMA_GATEWAY_EGRESS",
                "OMA_GATEWAY_TOKEN",
            ]
        );
    }

    #[cfg(unix)]
    #[test]
    fn variables_that_are_not_utf8_are_left_out() {
        use std::os::unix::ffi::OsStringExt;
        let vars = [
            (
                OsString::from("OPENAI_API_KEY"),
                OsString::from_vec(vec![0xff]),
            ),
            (
                OsString::from_vec(b"X\xff_API_KEY".to_vec()),
                OsString::from("k"),
            ),
            (OsString::from("AWS_REGION"), OsString::from("us-east-1")),
        ];
        assert_eq!(
            environment_from(vars),
            [("AWS_REGION".to_owned(), "us-east-1".to_owned())]
        );
    }

    #[test]
    fn the_options_never_show_a_value_of_the_environment() {
        let options = ServeOptions {
            env: vec![("OPENAI_API_KEY".into(), "sk-very-secret".into())],
            ..ServeOptions::new(Vec::new())
        };
        let shown = format!("{options:?}");
        assert!(shown.contains("OPENAI_API_KEY"), "{shown}");
        assert!(!shown.contains("sk-very-secret"), "{shown}");
    }

    #[test]
    fn host_errors_have_the_gateways_shape() {
        let response = error_response(StatusCode::GATEWAY_TIMEOUT, "HostError", "late");
        assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT);
        assert_eq!(
            response
                .headers()
                .get(CONTENT_TYPE)
                .map(HeaderValue::as_bytes),
            Some(&b"application/json"[..])
        );
        let body = body_text(response);
        assert_eq!(
            body,
            r#"{"error":{"name":"HostError","message":"late","retryable":false}}"#
        );
    }

    /// The whole body of a response built from a `Full`, without a runtime.
    fn body_text(response: Response) -> String {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let bytes = runtime
            .block_on(response.into_body().collect())
            .expect("a full body")
            .to_bytes();
        String::from_utf8(bytes.to_vec()).expect("UTF-8")
    }
}
