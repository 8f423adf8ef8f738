//! The engine, the compiled component and the `InstancePre` every guest is instantiated from.
//!
//! Compiling the guest with Cranelift takes seconds in a debug host, so it happens once per
//! process ([`Harness::shared`]) and once per guest build across processes: the compiled code is
//! serialised to `<guest>.<key>.cwasm` beside the guest, where `<key>` hashes the engine's
//! precompile-compatibility hash and the guest's bytes. A later process deserialises that file
//! instead of compiling; a stale, foreign or unreadable file only costs a compile.

use std::collections::hash_map::DefaultHasher;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store};

use crate::bindings::ComponentPre;
use crate::guest::Guest;
use crate::state::{GuestOptions, HostState};

/// How a [`Harness`] is built. `HarnessOptions::default()` is what [`Harness::shared`] uses.
#[derive(Clone, Debug)]
pub struct HarnessOptions {
    /// The guest component (`.wasm`); defaults to the one `build.rs` built.
    pub wasm: PathBuf,
    /// Read and write the serialised `.cwasm` beside the guest.
    pub cache: bool,
    /// How many instances may be alive at once (the pooling allocator's slots).
    pub max_instances: u32,
    /// The most linear memory one instance may use, in bytes. The default, 1 GiB, fits 16 MiB
    /// inputs many times over.
    pub max_memory: usize,
    /// Bytes of each linear-memory slot kept resident between instances: fewer page faults on
    /// the first large call of a reused slot, at the price of a `memset` when an instance drops.
    pub keep_resident: usize,
}

impl Default for HarnessOptions {
    fn default() -> Self {
        HarnessOptions {
            wasm: PathBuf::from(crate::artifact::GUEST_WASM),
            cache: true,
            max_instances: 32,
            max_memory: 1 << 30,
            keep_resident: 0,
        }
    }
}

/// Where the compiled code of a [`Harness`] came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ComponentOrigin {
    /// Compiled with Cranelift in this process.
    Compiled,
    /// Deserialised from the `.cwasm` cache beside the guest.
    Cached,
}

/// An engine with the guest compiled and pre-linked: the factory for [`Guest`] instances.
pub struct Harness {
    engine: Engine,
    pre: ComponentPre<HostState>,
    wasm: PathBuf,
    origin: ComponentOrigin,
    load_time: Duration,
}

impl fmt::Debug for Harness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Harness")
            .field("wasm", &self.wasm)
            .field("origin", &self.origin)
            .field("load_time", &self.load_time)
            .finish_non_exhaustive()
    }
}

impl Harness {
    /// The process-wide harness for the guest `build.rs` built, created on first use.
    ///
    /// Fails if the guest cannot be read, compiled or linked; every later call fails the same way.
    pub fn shared() -> anyhow::Result<&'static Harness> {
        static SHARED: OnceLock<Result<Harness, String>> = OnceLock::new();
        SHARED
            .get_or_init(|| Harness::new(HarnessOptions::default()).map_err(|e| format!("{e:#}")))
            .as_ref()
            .map_err(|e| anyhow!("{e}"))
    }

    /// A harness of its own: a new engine, the guest compiled (or loaded from the cache) and
    /// linked. Prefer [`Harness::shared`]; each harness reserves its own pool.
    pub fn new(options: HarnessOptions) -> anyhow::Result<Harness> {
        let engine = engine(&options)?;
        let started = Instant::now();
        let bytes = std::fs::read(&options.wasm).with_context(|| {
            format!(
                "could not read the guest component {}",
                options.wasm.display()
            )
        })?;
        let (component, origin) = load_component(&engine, &options, &bytes)?;
        let load_time = started.elapsed();

        let mut linker = Linker::<HostState>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
        crate::bindings::Component::add_to_linker::<HostState, HasSelf<HostState>>(
            &mut linker,
            |state| state,
        )?;
        let pre = ComponentPre::new(linker.instantiate_pre(&component)?)?;

        Ok(Harness {
            engine,
            pre,
            wasm: options.wasm,
            origin,
            load_time,
        })
    }

    /// A fresh guest instance with the default [`GuestOptions`] (no network, no stdio).
    pub async fn instantiate(&self) -> anyhow::Result<Guest> {
        self.instantiate_with(GuestOptions::default()).await
    }

    /// A fresh guest instance set up as `options` says, e.g. with hooks for outbound HTTP.
    pub async fn instantiate_with(&self, options: GuestOptions) -> anyhow::Result<Guest> {
        let mut store = Store::new(&self.engine, HostState::new(options));
        let bindings = self.pre.instantiate_async(&mut store).await?;
        Ok(Guest::new(store, bindings))
    }

    /// The engine every guest of this harness runs in.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The guest component this harness runs.
    pub fn wasm_path(&self) -> &Path {
        &self.wasm
    }

    /// Whether the compiled code was compiled here or loaded from the `.cwasm` cache.
    pub fn origin(&self) -> ComponentOrigin {
        self.origin
    }

    /// How long reading and compiling (or deserialising) the guest took.
    pub fn load_time(&self) -> Duration {
        self.load_time
    }
}

pub(crate) fn engine(options: &HarnessOptions) -> anyhow::Result<Engine> {
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
        .total_stacks(instances)
        .max_memory_size(options.max_memory)
        .linear_memory_keep_resident(options.keep_resident);

    let mut config = Config::new();
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    Engine::new(&config)
        .map_err(|e| anyhow::Error::from(e).context("could not create the wasmtime engine"))
}

pub(crate) fn load_component(
    engine: &Engine,
    options: &HarnessOptions,
    bytes: &[u8],
) -> anyhow::Result<(Component, ComponentOrigin)> {
    let cache = options
        .cache
        .then(|| cache_path(engine, &options.wasm, bytes));
    if let Some(path) = cache.as_deref().filter(|path| path.is_file()) {
        // SAFETY: the file is one this function wrote with `Component::serialize` (same engine
        // configuration, per the key in its name) and renamed into place whole; wasmtime also
        // checks its header against the engine. A file that fails to load is recompiled below.
        if let Ok(component) = unsafe { Component::deserialize_file(engine, path) } {
            return Ok((component, ComponentOrigin::Cached));
        }
    }
    let component = Component::new(engine, bytes).map_err(|e| {
        anyhow::Error::from(e).context(format!(
            "could not compile the guest component {}",
            options.wasm.display()
        ))
    })?;
    if let Some(path) = cache {
        // The cache is an optimisation: a read-only target directory only costs a compile.
        let _ = write_cache(&component, &path);
    }
    Ok((component, ComponentOrigin::Compiled))
}

/// `<dir>/<stem>.<key>.cwasm` for the guest at `wasm`.
fn cache_path(engine: &Engine, wasm: &Path, bytes: &[u8]) -> PathBuf {
    let mut hasher = DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    bytes.hash(&mut hasher);
    let stem = wasm
        .file_stem()
        .and_then(|stem| stem.to_str())
        .unwrap_or("guest");
    wasm.with_file_name(format!("{stem}.{:016x}.cwasm", hasher.finish()))
}

/// Writes the compiled code atomically (temporary file, then rename) and removes the `.cwasm`
/// files of earlier guest builds.
fn write_cache(component: &Component, path: &Path) -> anyhow::Result<()> {
    let serialized = component.serialize().map_err(anyhow::Error::from)?;
    let temporary = path.with_extension(format!("cwasm.{}.tmp", std::process::id()));
    std::fs::write(&temporary, serialized)?;
    std::fs::rename(&temporary, path)?;

    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
        return Ok(());
    };
    let Some((stem, _)) = name.split_once('.') else {
        return Ok(());
    };
    for entry in std::fs::read_dir(dir)?.flatten() {
        let other = entry.file_name();
        let Some(other) = other.to_str() else {
            continue;
        };
        let stale =
            other != name && other.starts_with(&format!("{stem}.")) && other.ends_with(".cwasm");
        if stale {
            let _ = std::fs::remove_file(entry.path());
        }
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

    /// The cache with a component that compiles in milliseconds: written on a miss, read on a
    /// hit, never trusted when corrupt, and replaced (stale keys removed) when the guest changes.
    #[test]
    fn the_cwasm_cache_hits_misses_and_recovers() {
        let dir = std::env::temp_dir().join(format!("oma-harness-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let wasm = dir.join("tiny.wasm");
        let options = HarnessOptions {
            wasm: wasm.clone(),
            ..HarnessOptions::default()
        };
        let engine = Engine::default();
        let load = |bytes: &[u8]| load_component(&engine, &options, bytes).expect("loads").1;
        let v1 = b"(component (core module))";
        std::fs::write(&wasm, v1).expect("write the guest");

        assert_eq!(load(v1), ComponentOrigin::Compiled);
        let written = cwasm_files(&dir);
        assert_eq!(written.len(), 1);
        assert!(written[0]
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("tiny.")));
        assert_eq!(load(v1), ComponentOrigin::Cached);

        // Corrupt: replaced (never truncated in place, the code may be mapped) with garbage.
        std::fs::remove_file(&written[0]).expect("remove");
        std::fs::write(&written[0], b"not a cwasm").expect("corrupt");
        assert_eq!(load(v1), ComponentOrigin::Compiled);
        assert_ne!(
            std::fs::read(&written[0]).expect("readable"),
            b"not a cwasm"
        );
        assert_eq!(load(v1), ComponentOrigin::Cached);

        // A new guest build gets a new key; the old file goes.
        let v2 = b"(component (core module) (core module))";
        assert_eq!(load(v2), ComponentOrigin::Compiled);
        let rewritten = cwasm_files(&dir);
        assert_eq!(rewritten.len(), 1);
        assert_ne!(rewritten, written);

        // Without the cache nothing is read or written.
        let uncached = HarnessOptions {
            cache: false,
            ..options.clone()
        };
        std::fs::remove_file(&rewritten[0]).expect("remove");
        let (_, origin) = load_component(&engine, &uncached, v2).expect("loads");
        assert_eq!(origin, ComponentOrigin::Compiled);
        assert!(cwasm_files(&dir).is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
