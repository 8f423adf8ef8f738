//! The `routes` world (`oma_routes.wasm`) for tests of the gateway's rules through a component:
//! the gateway's HTTP decisions as the Worker gateway gets them. It imports nothing, so it
//! instantiates with an empty linker under the harness's limits.

use wasmtime::{Engine, Store};

use crate::driver::empty_linker;
use crate::engine::{engine, guard_store, load_component, HarnessOptions};
use crate::state::{GuestOptions, HostState};

/// The `routes` world as a Rust host sees it: the data interfaces as imports (the component
/// exports them; structurally they are the same types), and the driver (whose steps and answers
/// a `routes` run uses) and the routes as exports.
#[allow(missing_docs)]
pub(crate) mod bindings {
    wasmtime::component::bindgen!({
        inline: "
            package oma:harness;

            world routes-host {
                import oma:agent/types@0.1.0;
                import oma:agent/wire@0.1.0;
                import oma:agent/outcome@0.1.0;
                import oma:agent/exchange@0.1.0;
                export oma:agent/driver@0.1.0;
                export oma:agent/routes@0.1.0;
            }
        ",
        path: "../../wit",
        world: "oma:harness/routes-host",
        with: {
            "oma:agent/types": crate::bindings::oma::agent::types,
            "oma:agent/wire": crate::bindings::oma::agent::wire,
            "oma:agent/outcome": crate::bindings::oma::agent::outcome,
            "oma:agent/exchange": crate::bindings::oma::agent::exchange,
        },
        exports: { default: async },
        additional_derives: [PartialEq],
    });
}

use bindings::{RoutesHost, RoutesHostPre};

/// A compiled `oma_routes.wasm`, ready to instantiate.
pub struct RoutesHarness {
    engine: Engine,
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
        let engine = engine(&options)?;
        let bytes = options.component.bytes()?;
        let (component, _) = load_component(&engine, &options, &bytes)?;
        let pre = RoutesHostPre::new(empty_linker(&engine).instantiate_pre(&component)?)?;
        Ok(RoutesHarness { engine, pre })
    }

    /// A fresh instance.
    pub async fn instantiate(&self) -> anyhow::Result<RoutesGuest> {
        let mut store = Store::new(&self.engine, HostState::new(GuestOptions::default()));
        guard_store(&mut store);
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
    /// The store and the bindings, for calls of the `routes` export.
    pub fn parts(&mut self) -> (&mut Store<HostState>, &RoutesHost) {
        (&mut self.store, &self.bindings)
    }
}
