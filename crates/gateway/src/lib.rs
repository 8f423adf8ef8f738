//! The gateway (`oma_gateway.wasm`, `docs/gateway.md`): the gateway's rules
//! (`oma-gateway-rules`) behind `wasi:http/incoming-handler`, for runtimes that host
//! `wasi:http/proxy` components.
//!
//! This crate is the binding only: it gives the rules' `serve` the request, the response and
//! `oma-wasi`'s wasi:http transport, and writes the request's log line. Built for wasm32 only:
//! natively the crate is empty, so that the workspace builds and tests everywhere (the rules
//! are tested natively in their own crate).

// Natively the crate is empty, so the crate docs' links to its wasm32 items cannot resolve
// there; `cargo doc --target wasm32-unknown-unknown` resolves them.
#![cfg_attr(not(target_arch = "wasm32"), allow(rustdoc::broken_intra_doc_links))]
#![cfg(target_arch = "wasm32")]

mod handler;
