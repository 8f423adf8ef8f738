//! The components the binaries of this repository carry, built from its sources by `build.rs`
//! and embedded as bytes: `COMPONENT` (`oma_component.wasm`, the `component` world) and
//! `GATEWAY` (`oma_gateway.wasm`, the `wasi:http/proxy` gateway).
//!
//! A binary that depends on this crate carries the components inside it (`include_bytes!`), so
//! it runs wherever it is copied, with the build directory gone: the `oma-host` CLI takes its
//! defaults from here, the harness (`oma-host-tests`) these two of its guests, and the Rust
//! example (`examples/embed`) its component. The worlds no binary carries (`portable`,
//! `routes`) are built by the harness's own build script, so a build of the CLI builds only
//! these two. The embedding itself (`oma-wasmtime`) takes a component as bytes or from a path its
//! caller chooses and builds nothing.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use oma_wasmtime::{Harness, HarnessOptions};
//!
//! let harness = Harness::new(HarnessOptions::new(oma_artifacts::COMPONENT))?;
//! let mut guest = harness.instantiate().await?;
//! # let _ = &mut guest; Ok(()) }
//! ```
//!
//! The `*_FILE` constants say where the build left each component: only tests and tools of the
//! machine that built them may read those (an outside runtime such as `wasmtime serve` takes a
//! file); nothing that ships reads them.

#![deny(missing_docs)]

include!(concat!(env!("OUT_DIR"), "/artifacts.rs"));

#[cfg(test)]
mod tests {
    /// Each constant holds a whole component (the component-model preamble: `\0asm`, version
    /// 0x0d, layer 1), and the file beside it holds the same bytes.
    #[test]
    fn every_artifact_is_a_component() {
        for (bytes, file) in [
            (super::COMPONENT, super::COMPONENT_FILE),
            (super::GATEWAY, super::GATEWAY_FILE),
        ] {
            assert_eq!(&bytes[..8], b"\0asm\x0d\0\x01\0", "{file}");
            assert_eq!(std::fs::read(file).unwrap(), bytes, "{file}");
        }
    }
}
