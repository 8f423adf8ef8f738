//! The `portable` world (`oma_portable.wasm`): the codec and the host-driven `driver`, with no
//! imports at all: the agent only (the gateway's rules are `oma_routes.wasm`'s). wit-bindgen
//! glue; nothing else.
//!
//! Built for `wasm32-unknown-unknown` (whose standard library imports nothing) and made a
//! component by the build; the world has no clock and no random source, so a codec call takes
//! its time from the endpoint's `now-ms` and a session from its host.
//!
//! Built for wasm32 only: natively the crate is empty, so that the workspace builds and tests
//! everywhere. The glue it shares with the other worlds is included from `crates/glue/` by
//! `#[path]`: wit-bindgen generates each world its own Rust types for the same WIT interfaces
//! (the `component` world imports them, the `portable`
//! world exports them), so the conversions must be compiled once
//! against each set of bindings, and `with` remapping does not reach exported interfaces.

// Natively the crate is empty, so the crate docs' links to its wasm32 items cannot resolve
// there; `cargo doc --target wasm32-unknown-unknown` resolves them.
#![cfg_attr(not(target_arch = "wasm32"), allow(rustdoc::broken_intra_doc_links))]
#![cfg(target_arch = "wasm32")]

#[path = "../../glue/codec.rs"]
mod codec;
#[path = "../../glue/convert.rs"]
mod convert;
#[path = "../../glue/driver.rs"]
mod driver;
#[path = "../../glue/http.rs"]
mod http;
#[path = "../../glue/run.rs"]
mod run;
#[path = "../../glue/session.rs"]
mod session;

wit_bindgen::generate!({
    world: "portable",
    path: "../../wit",
});

/// The data interfaces as this world sees them (exports), for the shared glue.
mod wit {
    pub use super::exports::oma::agent::{exchange, outcome, types, wire};
}

struct Component;

export!(Component);

/// This world has no clock: a codec call without `now-ms` happens at the epoch.
fn now_ms() -> u64 {
    0
}

/// This world has no random source: ids a format makes up derive from the request's time.
fn random_seed(now_ms: u64) -> u64 {
    oma_core::rng::Rng::new(now_ms).next_u64()
}
