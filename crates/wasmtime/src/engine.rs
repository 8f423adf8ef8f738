//! The engine, the compiled component and the `InstancePre` every guest is instantiated from.
//!
//! Compiling the guest with Cranelift takes seconds in a debug host, so it happens once per
//! [`Harness`] and once per guest build across processes: the compiled code is
//! serialised into a private per-user cache directory (see [`default_cache_dir`]) as
//! `<stem>-<key>.cwasm`, where `<key>` hashes the engine's precompile-compatibility hash and the
//! guest's bytes. A later process deserialises that file instead of compiling; a stale, foreign
//! or unreadable file only costs a compile.
//!
//! Deserialising a `.cwasm` runs its native code unchecked, so the cache is only used when
//! nobody else can write to it: the directory is created `0700`, and it (and each file read
//! from it) must be owned by the current user and not writable by group or others, or the cache
//! is off for that harness. Beside the guest (a predictable place inside a build tree) nothing
//! is read or written any more. On non-Unix hosts the cache is off.
//!
//! Every guest runs under [`Limits`]: the engine is compiled with epoch interruption, a thread
//! per harness advances the epoch every [`HarnessOptions::epoch_tick`], and each store gets a
//! deadline per exported call and a memory cap (`src/limits.rs`).

use std::collections::hash_map::DefaultHasher;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store};

use crate::bindings::ComponentPre;
use crate::guest::Guest;
use crate::limits::Limits;
use crate::source::ComponentSource;
use crate::state::{GuestOptions, HostState};
use crate::store::guarded_store;

/// How a [`Harness`] is built: [`HarnessOptions::new`] with the component and the defaults.
#[derive(Clone, Debug)]
pub struct HarnessOptions {
    /// The guest component, as bytes or a file its caller chooses.
    pub component: ComponentSource,
    /// Read and write the compiled code (`.cwasm`) in the cache directory.
    pub cache: bool,
    /// The cache directory; `None` (the default) is the per-user [`default_cache_dir`]. Either
    /// way it is used only if it is private to the current user (see the module docs).
    pub cache_dir: Option<PathBuf>,
    /// How many instances may be alive at once (the pooling allocator's slots).
    pub max_instances: u32,
    /// The most linear memory one instance may use, in bytes. The default, 1 GiB, fits 16 MiB
    /// inputs many times over. [`Limits::memory`] caps a store below that.
    pub max_memory: usize,
    /// Bytes of each linear-memory slot kept resident between instances: fewer page faults on
    /// the first large call of a reused slot, at the price of a `memset` when an instance drops.
    pub keep_resident: usize,
    /// The limits of every guest that does not set its own ([`GuestOptions::limits`]):
    /// `Limits::default()`, 30 s of guest time per call and 512 MiB of memory per store.
    pub limits: Limits,
    /// How often the epoch advances, i.e. how often a running guest's deadline is checked; 10 ms
    /// by default. A deadline is counted in whole ticks (at least one).
    pub epoch_tick: Duration,
}

impl HarnessOptions {
    /// The defaults for `component`: the private compiled-code cache on, 32 instances of at
    /// most 1 GiB of linear memory, nothing kept resident, `Limits::default()`, a 10 ms epoch.
    pub fn new(component: impl Into<ComponentSource>) -> Self {
        HarnessOptions {
            component: component.into(),
            cache: true,
            cache_dir: None,
            max_instances: 32,
            max_memory: 1 << 30,
            keep_resident: 0,
            limits: Limits::default(),
            epoch_tick: Duration::from_millis(10),
        }
    }
}

/// Where the compiled code of a [`Harness`] came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ComponentOrigin {
    /// Compiled with Cranelift in this process.
    Compiled,
    /// Deserialised from the `.cwasm` cache.
    Cached,
}

/// A component compiled (or loaded from the `.cwasm` cache) in an engine of its own, with the
/// epoch thread that holds its guests to their deadlines: what [`Harness`] and
/// [`DriverHarness`](crate::DriverHarness) are made of. A host that binds a world of its own
/// (`bindgen!` with [`bindings`](crate::bindings)' types) links [`Compiled::component`] and
/// instantiates it in [`Compiled::store`]s, so its guests run under the same limits.
pub struct Compiled {
    engine: Engine,
    component: Component,
    source: ComponentSource,
    origin: ComponentOrigin,
    load_time: Duration,
    cache_file: Option<PathBuf>,
    limits: Limits,
    epoch_tick: Duration,
}

impl fmt::Debug for Compiled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Compiled")
            .field("component", &self.source)
            .field("origin", &self.origin)
            .field("load_time", &self.load_time)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Compiled {
    /// A new engine (and its epoch thread) with `options.component` compiled in it, or loaded
    /// from the cache. Make one per process and keep it, as for [`Harness::new`].
    ///
    /// Fails if the component cannot be read or compiled.
    pub fn new(options: &HarnessOptions) -> anyhow::Result<Compiled> {
        let engine = engine(options)?;
        let started = Instant::now();
        let bytes = options.component.bytes()?;
        let (component, origin, cache_file) = load(&engine, options, &bytes)?;
        Ok(Compiled {
            engine,
            component,
            source: options.component.clone(),
            origin,
            load_time: started.elapsed(),
            cache_file,
            limits: options.limits,
            epoch_tick: options.epoch_tick.max(MIN_EPOCH_TICK),
        })
    }

    /// A store for one instance, set up as `options` says, under its limits (or else these),
    /// with its call clock started: instantiate the component in it, and call
    /// [`start_call`](crate::start_call) before each exported call.
    pub fn store(&self, options: GuestOptions) -> Store<HostState> {
        let limits = options.limits.unwrap_or(self.limits);
        let mut state = HostState::new(options);
        state.set_limits(limits, self.epoch_tick);
        guarded_store(&self.engine, state)
    }

    /// The engine the component was compiled in.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The compiled component.
    pub fn component(&self) -> &Component {
        &self.component
    }

    /// Where the component came from.
    pub fn source(&self) -> &ComponentSource {
        &self.source
    }

    /// Whether the compiled code was compiled here or loaded from the `.cwasm` cache.
    pub fn origin(&self) -> ComponentOrigin {
        self.origin
    }

    /// The `.cwasm` file read or written, if the cache was on and usable.
    pub fn cache_file(&self) -> Option<&Path> {
        self.cache_file.as_deref()
    }

    /// The limits a guest gets when its [`GuestOptions::limits`] is `None`.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// How long reading and compiling (or deserialising) the component took.
    pub fn load_time(&self) -> Duration {
        self.load_time
    }

    /// How often the epoch advances, i.e. how often a running guest's deadline is checked.
    pub fn epoch_tick(&self) -> Duration {
        self.epoch_tick
    }
}

/// An engine with the guest compiled and pre-linked: the factory for [`Guest`] instances.
pub struct Harness {
    compiled: Compiled,
    pre: ComponentPre<HostState>,
}

impl fmt::Debug for Harness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Harness")
            .field("compiled", &self.compiled)
            .finish_non_exhaustive()
    }
}

impl Harness {
    /// A new engine with the guest compiled (or loaded from the cache) and linked. Make one per
    /// process and keep it (in a `OnceLock`, say): each harness reserves its own pool and runs
    /// its own epoch thread (which ends when the engine is dropped), and instances are cheap.
    ///
    /// Fails if the component cannot be read, compiled or linked.
    pub fn new(options: HarnessOptions) -> anyhow::Result<Harness> {
        let compiled = Compiled::new(&options)?;
        let mut linker = Linker::<HostState>::new(compiled.engine());
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
        crate::bindings::Component::add_to_linker::<HostState, HasSelf<HostState>>(
            &mut linker,
            |state| state,
        )?;
        let pre = ComponentPre::new(linker.instantiate_pre(compiled.component())?)?;
        Ok(Harness { compiled, pre })
    }

    /// A fresh guest instance with the default [`GuestOptions`] (no network, no stdio).
    pub async fn instantiate(&self) -> anyhow::Result<Guest> {
        self.instantiate_with(GuestOptions::default()).await
    }

    /// A fresh guest instance set up as `options` says, e.g. with hooks for outbound HTTP.
    ///
    /// Instantiation runs under the guest's limits like a call; a guest that goes past them
    /// fails with [`LimitExceeded`](crate::LimitExceeded) and takes nothing else down.
    pub async fn instantiate_with(&self, options: GuestOptions) -> anyhow::Result<Guest> {
        let mut store = self.compiled.store(options);
        let bindings = self.pre.instantiate_async(&mut store).await?;
        Ok(Guest::new(store, bindings))
    }

    /// The engine every guest of this harness runs in.
    pub fn engine(&self) -> &Engine {
        self.compiled.engine()
    }

    /// The guest component this harness runs.
    pub fn component(&self) -> &ComponentSource {
        self.compiled.source()
    }

    /// Whether the compiled code was compiled here or loaded from the `.cwasm` cache.
    pub fn origin(&self) -> ComponentOrigin {
        self.compiled.origin()
    }

    /// The `.cwasm` file this harness read or wrote, if the cache was on and usable.
    pub fn cache_file(&self) -> Option<&Path> {
        self.compiled.cache_file()
    }

    /// The limits a guest gets when its [`GuestOptions::limits`] is `None`.
    pub fn limits(&self) -> Limits {
        self.compiled.limits()
    }

    /// How long reading and compiling (or deserialising) the guest took.
    pub fn load_time(&self) -> Duration {
        self.compiled.load_time()
    }
}

/// The shortest epoch tick: a finer one would keep a core busy advancing it.
const MIN_EPOCH_TICK: Duration = Duration::from_micros(100);

/// Advances `engine`'s epoch every `tick` until the engine is dropped.
fn start_epoch_ticker(engine: &Engine, tick: Duration) -> anyhow::Result<()> {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("oma-wasmtime-epoch".into())
        .spawn(move || loop {
            std::thread::sleep(tick);
            match weak.upgrade() {
                Some(engine) => {
                    crate::limits::advance_epoch_clock();
                    engine.increment_epoch();
                }
                None => break,
            }
        })
        .context("could not start the epoch thread")?;
    Ok(())
}

/// An engine with epoch interruption and its epoch thread: every harness's.
fn engine(options: &HarnessOptions) -> anyhow::Result<Engine> {
    let engine = engine_with(options, true)?;
    start_epoch_ticker(&engine, options.epoch_tick.max(MIN_EPOCH_TICK))?;
    Ok(engine)
}

/// Async (fiber) stacks the pool reserves per instance slot: the running call's, and the
/// worker fiber wasmtime's component-model runtime parks in a store between calls.
const STACKS_PER_INSTANCE: u32 = 2;

fn engine_with(options: &HarnessOptions, epochs: bool) -> anyhow::Result<Engine> {
    let mut pool = PoolingAllocationConfig::new();
    let instances = options.max_instances.max(1);
    pool.total_component_instances(instances)
        // A wasip2 guest is a handful of core instances (the program, the WASI adapter, shims).
        .total_core_instances(instances.saturating_mul(16))
        .max_core_instances_per_component(16)
        .total_memories(instances.saturating_mul(2))
        .max_memories_per_component(2)
        .total_tables(instances.saturating_mul(4))
        .max_tables_per_component(4)
        // Two async stacks per instance: besides the stack of the call in progress, a store
        // keeps the component-model runtime's worker fiber, parked on a stack of its own, once
        // wasmtime has used it (wasi-http streaming does), so the next call of the same
        // instance needs a second stack. With one per instance, a streamed run's last call
        // (dropping its stream) failed with "maximum concurrent limit of 1 for fibers
        // reached" in a one-instance harness.
        .total_stacks(instances.saturating_mul(STACKS_PER_INSTANCE))
        .max_memory_size(options.max_memory)
        .linear_memory_keep_resident(options.keep_resident)
        .table_keep_resident(options.keep_resident.min(1 << 16));
    if options.keep_resident > 0 {
        // Where the kernel has PAGEMAP_SCAN (Linux 6.7+), only the pages an instance dirtied
        // are reset, and the rest of the slot stays mapped: no `madvise`, no page faults on
        // the next instance. Elsewhere the low `keep_resident` bytes are reset with `memset`.
        pool.pagemap_scan(wasmtime::Enabled::Auto);
    }

    let mut config = Config::new();
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    config.epoch_interruption(epochs);
    if std::env::var_os("OMA_PERFMAP").is_some_and(|v| v == "1") {
        // `perf` can then name the guest's compiled functions (`/tmp/perf-<pid>.map`).
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    Engine::new(&config)
        .map_err(|e| anyhow::Error::from(e).context("could not create the wasmtime engine"))
}

/// The per-user cache directory: `$XDG_CACHE_HOME/oma-wasmtime` when that variable is an
/// absolute path, else `$HOME/.cache/oma-wasmtime`; `None` without either (or off Unix).
pub fn default_cache_dir() -> Option<PathBuf> {
    if !cfg!(unix) {
        return None;
    }
    let absolute = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|path| path.is_absolute())
    };
    absolute("XDG_CACHE_HOME")
        .or_else(|| absolute("HOME").map(|home| home.join(".cache")))
        .map(|base| base.join("oma-wasmtime"))
}

fn load(
    engine: &Engine,
    options: &HarnessOptions,
    bytes: &[u8],
) -> anyhow::Result<(Component, ComponentOrigin, Option<PathBuf>)> {
    let cache = if options.cache {
        options
            .cache_dir
            .clone()
            .or_else(default_cache_dir)
            .and_then(|dir| private_dir(&dir).ok())
            .map(|dir| cache_path(engine, &dir, options.component.stem("component"), bytes))
    } else {
        None
    };
    if let Some(path) = cache.as_deref().filter(|path| private_file(path)) {
        // SAFETY: the file is in a directory only this user can write to (checked above), is
        // owned by this user and writable by no one else, and was written there by this
        // function with `Component::serialize` (same engine configuration, per the key in its
        // name) and renamed into place whole; wasmtime also checks its header against the
        // engine. A file that fails to load is recompiled below.
        if let Ok(component) = unsafe { Component::deserialize_file(engine, path) } {
            return Ok((component, ComponentOrigin::Cached, cache));
        }
    }
    let component = Component::new(engine, bytes).map_err(|e| {
        anyhow::Error::from(e).context(format!("could not compile {}", options.component))
    })?;
    // The cache is an optimisation: an unwritable directory only costs a compile next time.
    let cache = cache.filter(|path| write_cache(&component, path).is_ok());
    Ok((component, ComponentOrigin::Compiled, cache))
}

/// `<dir>/<stem>-<key>.cwasm` for a guest named `stem` (its file's stem, or `component` for
/// bytes).
fn cache_path(engine: &Engine, dir: &Path, stem: &str, bytes: &[u8]) -> PathBuf {
    let mut hasher = DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    bytes.hash(&mut hasher);
    let stem = Some(stem)
        .filter(|stem| !stem.is_empty() && !stem.contains('-'))
        .unwrap_or("guest");
    dir.join(format!("{stem}-{:016x}.cwasm", hasher.finish()))
}

/// How many compiled builds of one guest (by file stem) the cache keeps, newest first: enough
/// for a few checkouts and both engine configurations side by side.
const KEEP_PER_GUEST: usize = 8;

/// `dir`, created `0700` if missing, if it is a directory (not a symlink) owned by the current
/// user and not writable by group or others.
#[cfg(unix)]
fn private_dir(dir: &Path) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent)?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let metadata = std::fs::symlink_metadata(dir)?;
    if metadata.is_dir() && owned_privately(&metadata) {
        Ok(dir.to_path_buf())
    } else {
        Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "{} is not a directory private to this user; the compiled-code cache is off",
                dir.display()
            ),
        ))
    }
}

#[cfg(not(unix))]
fn private_dir(_dir: &Path) -> std::io::Result<PathBuf> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "the compiled-code cache needs Unix permissions",
    ))
}

/// Whether `path` is a regular file (not a symlink) owned by the current user and not writable
/// by group or others.
#[cfg(unix)]
fn private_file(path: &Path) -> bool {
    std::fs::symlink_metadata(path)
        .is_ok_and(|metadata| metadata.is_file() && owned_privately(&metadata))
}

#[cfg(not(unix))]
fn private_file(_path: &Path) -> bool {
    false
}

#[cfg(unix)]
fn owned_privately(metadata: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    // SAFETY: `geteuid` has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    metadata.uid() == me && metadata.permissions().mode() & 0o022 == 0
}

/// Writes the compiled code atomically (a new `0600` temporary file, then rename) and removes
/// the oldest `.cwasm` files of the same guest beyond [`KEEP_PER_GUEST`].
fn write_cache(component: &Component, path: &Path) -> anyhow::Result<()> {
    use std::io::Write;
    let serialized = component.serialize().map_err(anyhow::Error::from)?;
    let temporary = path.with_extension(format!("cwasm.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&temporary);
    let mut open = std::fs::OpenOptions::new();
    open.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut open, 0o600);
    let written = open
        .open(&temporary)
        .and_then(|mut file| file.write_all(&serialized));
    if let Err(e) = written.and_then(|()| std::fs::rename(&temporary, path)) {
        let _ = std::fs::remove_file(&temporary);
        return Err(e.into());
    }

    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
        return Ok(());
    };
    let Some((stem, _)) = name.split_once('-') else {
        return Ok(());
    };
    let mut builds: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(dir)?
        .flatten()
        .filter(|entry| {
            entry.file_name().to_str().is_some_and(|other| {
                other != name && other.starts_with(&format!("{stem}-")) && other.ends_with(".cwasm")
            })
        })
        .map(|entry| {
            let modified = entry
                .metadata()
                .and_then(|m| m.modified())
                .unwrap_or(std::time::UNIX_EPOCH);
            (modified, entry.path())
        })
        .collect();
    builds.sort_by_key(|build| std::cmp::Reverse(build.0));
    for (_, stale) in builds.iter().skip(KEEP_PER_GUEST - 1) {
        let _ = std::fs::remove_file(stale);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cwasm_files(dir: &Path) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .expect("readable")
            .flatten()
            .map(|entry| entry.path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "cwasm"))
            .collect();
        files.sort();
        files
    }

    /// `(component (core module))` in the binary format: the component preamble (`\0asm`,
    /// version 0x0d, layer 1), then a core-module section (id 1, 8 bytes) holding the empty
    /// core module.
    const ONE_MODULE: &[u8] = b"\0asm\x0d\0\x01\0\x01\x08\0asm\x01\0\0\0";

    /// `(component (core module) (core module))`: another build of the guest, for a new key.
    const TWO_MODULES: &[u8] = b"\0asm\x0d\0\x01\0\x01\x08\0asm\x01\0\0\0\x01\x08\0asm\x01\0\0\0";

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("oma-wasmtime-unit-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    /// The cache with a component that compiles in milliseconds: written on a miss (in the
    /// cache directory, never beside the guest), read on a hit, never trusted when corrupt, and
    /// a new guest build gets a key of its own.
    #[test]
    fn the_cwasm_cache_hits_misses_and_recovers() {
        let dir = scratch("cache");
        let wasm = dir.join("tiny.wasm");
        let cache_dir = dir.join("cache");
        let options = HarnessOptions {
            cache_dir: Some(cache_dir.clone()),
            ..HarnessOptions::new(wasm.clone())
        };
        let engine = Engine::default();
        let load = |bytes: &[u8]| load(&engine, &options, bytes).expect("loads").1;
        let v1 = ONE_MODULE;
        std::fs::write(&wasm, v1).expect("write the guest");

        assert_eq!(load(v1), ComponentOrigin::Compiled);
        assert!(cwasm_files(&dir).is_empty(), "nothing beside the guest");
        let written = cwasm_files(&cache_dir);
        assert_eq!(written.len(), 1);
        assert!(written[0]
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("tiny-")));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&cache_dir), 0o700);
            assert_eq!(mode(&written[0]), 0o600);
        }
        assert_eq!(load(v1), ComponentOrigin::Cached);

        // Corrupt: replaced (never truncated in place, the code may be mapped) with garbage.
        std::fs::remove_file(&written[0]).expect("remove");
        std::fs::write(&written[0], b"not a cwasm").expect("corrupt");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let private = std::fs::Permissions::from_mode(0o600);
            std::fs::set_permissions(&written[0], private).expect("chmod");
        }
        assert_eq!(load(v1), ComponentOrigin::Compiled);
        assert_ne!(
            std::fs::read(&written[0]).expect("readable"),
            b"not a cwasm"
        );
        assert_eq!(load(v1), ComponentOrigin::Cached);

        // A new guest build gets a new key; the old one stays (other checkouts may use it).
        let v2 = TWO_MODULES;
        assert_eq!(load(v2), ComponentOrigin::Compiled);
        assert_eq!(cwasm_files(&cache_dir).len(), 2);
        assert_eq!(load(v1), ComponentOrigin::Cached);

        // Without the cache nothing is read or written.
        let uncached = HarnessOptions {
            cache: false,
            ..options.clone()
        };
        for file in cwasm_files(&cache_dir) {
            std::fs::remove_file(file).expect("remove");
        }
        let (_, origin, _) = super::load(&engine, &uncached, v2).expect("loads");
        assert_eq!(origin, ComponentOrigin::Compiled);
        assert!(cwasm_files(&cache_dir).is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A cache directory or file that someone else could write to is never read (its code
    /// would run unchecked) nor written.
    #[cfg(unix)]
    #[test]
    fn a_cache_others_can_write_to_is_not_used() {
        use std::os::unix::fs::PermissionsExt;
        let dir = scratch("shared");
        let wasm = dir.join("tiny.wasm");
        let v1 = ONE_MODULE;
        std::fs::write(&wasm, v1).expect("write the guest");
        let engine = Engine::default();
        let cache_dir = dir.join("cache");
        let options = HarnessOptions {
            cache_dir: Some(cache_dir.clone()),
            ..HarnessOptions::new(wasm)
        };
        let load = || load(&engine, &options, v1).expect("loads");
        assert_eq!(load().1, ComponentOrigin::Compiled);
        let (_, origin, file) = load();
        assert_eq!(origin, ComponentOrigin::Cached);
        let file = file.expect("a cache file");

        // A group- or world-writable file: not trusted (recompiled, then replaced privately).
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).expect("chmod");
        assert_eq!(load().1, ComponentOrigin::Compiled);
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(load().1, ComponentOrigin::Cached);

        // A world-writable directory: the cache is off, in both directions.
        std::fs::set_permissions(&cache_dir, std::fs::Permissions::from_mode(0o777))
            .expect("chmod");
        let (_, origin, file) = load();
        assert_eq!((origin, file), (ComponentOrigin::Compiled, None));
        std::fs::set_permissions(&cache_dir, std::fs::Permissions::from_mode(0o700))
            .expect("chmod");
        assert_eq!(load().1, ComponentOrigin::Cached);

        // A symlink in place of the directory: off.
        let elsewhere = dir.join("elsewhere");
        std::fs::rename(&cache_dir, &elsewhere).expect("move");
        std::os::unix::fs::symlink(&elsewhere, &cache_dir).expect("symlink");
        assert_eq!(load().2, None);
        std::fs::remove_file(&cache_dir).expect("unlink");
        std::fs::rename(&elsewhere, &cache_dir).expect("move back");

        // Owned by someone else (only root can arrange that): off.
        // SAFETY: `geteuid` has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::chown(&cache_dir, Some(65534), None).expect("chown");
            let (_, origin, file) = load();
            assert_eq!((origin, file), (ComponentOrigin::Compiled, None));
            std::os::unix::fs::chown(&cache_dir, Some(0), None).expect("chown back");
            assert_eq!(load().1, ComponentOrigin::Cached);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_default_cache_is_per_user() {
        let dir = default_cache_dir();
        if cfg!(unix) && std::env::var_os("HOME").is_some() {
            let dir = dir.expect("a cache directory");
            assert!(dir.is_absolute() && dir.ends_with("oma-wasmtime"));
        }
    }
}
