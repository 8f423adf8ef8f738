//! The `portable-json` world (`oma_portable_json.wasm`): the agent with OMA JSON in and out
//! (`json-driver`) and the codec's text operations (`json-codec`), importing nothing, for hosts
//! that hold JSON: the JavaScript package. wit-bindgen glue; nothing else.
//!
//! The same agent as the `portable` world's, without its typed exports: a host's generated glue
//! carries code for every exported function (jco writes each function's lifting and lowering
//! out in JavaScript), so a JSON host would otherwise ship the typed functions' glue without
//! calling them, and the core module their bindings and conversions.
//!
//! Built for `wasm32-unknown-unknown` only, as the `portable` world is: natively the crate is
//! empty. The glue is included from `crates/glue/` by `#[path]`, compiled against this world's
//! bindings; `convert.rs` and `run.rs` also hold the conversions of the typed exports this world
//! does not have, which are not called here (and not linked).

#![cfg_attr(not(target_arch = "wasm32"), allow(rustdoc::broken_intra_doc_links))]
#![cfg(target_arch = "wasm32")]

#[path = "../../glue/convert.rs"]
#[allow(dead_code)]
mod convert;
#[path = "../../glue/http.rs"]
mod http;
#[path = "../../glue/json_codec.rs"]
mod json_codec;
#[path = "../../glue/json_driver.rs"]
mod json_driver;
#[path = "../../glue/run.rs"]
#[allow(dead_code)]
mod run;
#[path = "../../glue/session.rs"]
#[allow(dead_code)]
mod session;

wit_bindgen::generate!({
    world: "portable-json",
    path: "../../wit",
});

/// The data interfaces as this world sees them (exports), for the shared glue.
mod wit {
    pub use super::exports::oma::agent::{exchange, outcome, types, wire};
}

struct Component;

export!(Component);
