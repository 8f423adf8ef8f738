//! The `routes` world (`oma_routes.wasm`) for tests of the gateway's rules through a component:
//! the gateway's request machine as the Worker gateway drives it. It imports nothing, so it
//! instantiates from an empty linker, under the embedding's cache and limits ([`Compiled`]).
//!
//! Also [`instantiate_empty`], which says what a component imports by instantiating it with
//! nothing at all.

use wasmtime::component::{Component, Linker};
use wasmtime::{Engine, Store};

use oma_wasmtime::{start_call, Compiled, HarnessOptions, HostState};

/// The `routes` world as a Rust host sees it: the data interfaces as imports, `types` and
/// `wire` mapped to the embedding's types (the component exports them; structurally they are
/// the same types), and the routes (the gateway's request machine) as the export.
#[allow(missing_docs)] // Generated from `wit/`; the WIT doc comments become the Rust docs.
mod bindings {
    wasmtime::component::bindgen!({
        inline: "
            package oma:harness;

            world routes-host {
                import oma:agent/types@0.1.0;
                import oma:agent/wire@0.1.0;
                import oma:agent/gateway-types@0.1.0;
                export oma:agent/routes@0.1.0;
            }
        ",
        path: "../wit",
        world: "oma:harness/routes-host",
        with: {
            "oma:agent/types": oma_wasmtime::bindings::oma::agent::types,
            "oma:agent/wire": oma_wasmtime::bindings::oma::agent::wire,
        },
        exports: { default: async },
        additional_derives: [PartialEq],
    });
}

use bindings::{RoutesHost, RoutesHostPre};

/// The `gateway-types` interface's types (request heads, replies, a gateway request's steps,
/// polls and inputs, and the `wire` HTTP types they use), for tests of the gateway's request
/// machine through the routes world.
pub use bindings::oma::agent::gateway_types as routes_types;

/// A compiled `oma_routes.wasm`, ready to instantiate.
pub struct RoutesHarness {
    compiled: Compiled,
    pre: RoutesHostPre<HostState>,
}

impl std::fmt::Debug for RoutesHarness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoutesHarness").finish_non_exhaustive()
    }
}

impl RoutesHarness {
    /// A new engine with the routes component `options.component` compiled (or loaded from the
    /// cache) and pre-instantiated from an empty linker.
    ///
    /// Fails if the component cannot be read or compiled, or imports anything at all.
    pub fn new(options: HarnessOptions) -> anyhow::Result<RoutesHarness> {
        let compiled = Compiled::new(&options)?;
        let linker = Linker::<HostState>::new(compiled.engine());
        let pre = RoutesHostPre::new(linker.instantiate_pre(compiled.component())?)?;
        Ok(RoutesHarness { compiled, pre })
    }

    /// A fresh instance.
    pub async fn instantiate(&self) -> anyhow::Result<RoutesGuest> {
        let mut store = self.compiled.store(Default::default());
        let bindings = self.pre.instantiate_async(&mut store).await?;
        Ok(RoutesGuest { store, bindings })
    }
}

/// A live `oma_routes.wasm` instance.
pub struct RoutesGuest {
    store: Store<HostState>,
    bindings: RoutesHost,
}

impl std::fmt::Debug for RoutesGuest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoutesGuest").finish_non_exhaustive()
    }
}

impl RoutesGuest {
    /// The store and the bindings for one call of the `routes` export (the call's clock
    /// started, so each call gets its own deadline).
    pub fn parts(&mut self) -> (&mut Store<HostState>, &RoutesHost) {
        start_call(&mut self.store);
        (&mut self.store, &self.bindings)
    }
}

/// Compiles `wasm` and instantiates it with an empty linker: the names of what it imports
/// (none, for a world that imports nothing), or the failure to instantiate.
pub async fn instantiate_empty(wasm: &[u8]) -> anyhow::Result<Vec<String>> {
    let engine = Engine::default();
    let component = Component::new(&engine, wasm)?;
    let imports: Vec<String> = component
        .component_type()
        .imports(&engine)
        .map(|(name, _)| name.to_owned())
        .collect();
    let mut store = Store::new(&engine, ());
    Linker::<()>::new(&engine)
        .instantiate_async(&mut store, &component)
        .await?;
    Ok(imports)
}
