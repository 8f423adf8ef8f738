//! The Rust bindings generated from `wit/` (wasmtime's `bindgen!`), in one place the rest of
//! the crate imports from:
//!
//! - here at the top, the `component` world as this host binds it: the `oma:agent` part of
//!   world `component` (the `host` import and the `codec`, `provider` and `agent` exports). Its
//!   WASI imports are not generated: the engine's linker takes them from wasmtime-wasi and
//!   wasmtime-wasi-http, and a world-level `add_to_linker` would define them a second time;
//! - [`portable`]: the `portable` world as a Rust host sees it;
//! - [`keyvalue`]: `wasi:keyvalue` (`store`, `atomics`), which the gateway server provides.
//!
//! A host that binds another world of `oma:agent` maps its data interfaces to the ones here
//! (`bindgen!`'s `with`, as [`portable`] does), so every world shares one set of Rust types:
//! the test kit binds the `routes` world that way.

#![allow(missing_docs)] // Generated from `wit/`; the WIT doc comments become the Rust docs.

wasmtime::component::bindgen!({
    inline: "
        package oma:harness;

        world component {
            import oma:agent/host@0.1.0;
            export oma:agent/codec@0.1.0;
            export oma:agent/provider@0.1.0;
            export oma:agent/agent@0.1.0;
        }
    ",
    world: "oma:harness/component",
    path: "../../wit",
    exports: { default: async },
    additional_derives: [PartialEq],
});

/// The `portable` world as a Rust host sees it: the data interfaces as imports, so that their
/// Rust types are the `component` world's (the component exports them; structurally they are
/// the same types), and the codec and the driver as exports.
pub mod portable {
    wasmtime::component::bindgen!({
        inline: "
            package oma:harness;

            world portable-host {
                import oma:agent/types@0.1.0;
                import oma:agent/wire@0.1.0;
                import oma:agent/outcome@0.1.0;
                import oma:agent/exchange@0.1.0;
                export oma:agent/codec@0.1.0;
                export oma:agent/driver@0.1.0;
            }
        ",
        path: "../../wit",
        world: "oma:harness/portable-host",
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

/// `wasi:keyvalue/store` and `wasi:keyvalue/atomics` (0.2.0-draft) as a host provides them
/// (`crate::keyvalue`), with the host's [`Bucket`](keyvalue::Bucket) behind each `bucket`
/// resource.
pub mod keyvalue {
    wasmtime::component::bindgen!({
        inline: "
            package oma:keyvalue-host;

            world keyvalue {
                import wasi:keyvalue/store@0.2.0-draft;
                import wasi:keyvalue/atomics@0.2.0-draft;
            }
        ",
        world: "oma:keyvalue-host/keyvalue",
        path: "../../wit",
        imports: { default: async },
        with: {
            "wasi:keyvalue/store.bucket": crate::bindings::keyvalue::Bucket,
        },
    });

    /// An open bucket: its name, which prefixes its keys.
    pub struct Bucket {
        pub(crate) name: String,
    }
}
