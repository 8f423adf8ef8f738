//! Link settings of the `gateway` world only: its linear memory starts at 16 MiB.
//!
//! A `wasi:http/proxy` host gives every request a fresh instance, often from a pool that keeps
//! the slot's pages between requests. A memory that starts at the usual 1 MiB grows during
//! almost every request, and a pooled slot is shrunk back before the next one: two `mprotect`
//! calls (and the TLB shootdowns they cause on every core) per request, about a tenth of a
//! small request's CPU in `oma-host serve`. Starting at 16 MiB, a request up to a few MiB of
//! input never grows its memory. Pages that are never touched cost nothing.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let wasm = std::env::var("CARGO_CFG_TARGET_ARCH").is_ok_and(|arch| arch == "wasm32");
    let gateway = std::env::var_os("CARGO_FEATURE_GATEWAY").is_some();
    if wasm && gateway {
        println!("cargo:rustc-link-arg-cdylib=--initial-memory={}", 16 << 20);
    }
}
