//! The `routes` world (`oma_routes.wasm`): the gateway's request machine (`oma-gateway-rules`)
//! for a host that serves HTTP with its own means (the Cloudflare Worker gateway), importing
//! nothing. wit-bindgen glue; nothing else.
//!
//! The conversions of the HTTP a host performs (`wire`'s request, response and failure) are the
//! shared glue of `crates/glue/http.rs`, included by `#[path]` as in the portable world:
//! wit-bindgen generates each world its own Rust types for the same WIT interfaces, so the
//! conversions are compiled once against each set of bindings.
//!
//! Built for wasm32 only: natively the crate is empty, so that the workspace builds and tests
//! everywhere.

// Natively the crate is empty, so the crate docs' links to its wasm32 items cannot resolve
// there; `cargo doc --target wasm32-unknown-unknown` resolves them.
#![cfg_attr(not(target_arch = "wasm32"), allow(rustdoc::broken_intra_doc_links))]
#![cfg(target_arch = "wasm32")]

// The conversions the codec and the agent use go unused here; the error's is this world's.
#[allow(dead_code)]
#[path = "../../glue/convert.rs"]
mod convert;
#[path = "../../glue/http.rs"]
mod http;
mod routes;

wit_bindgen::generate!({
    world: "gateway-routes",
    path: "../../wit",
});

/// The data interfaces as this world sees them (exports), for the shared glue.
mod wit {
    pub use super::exports::oma::agent::{types, wire};
}

struct Component;

export!(Component);
