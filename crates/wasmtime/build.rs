//! Builds the guest's three components and records where the components landed:
//! `oma_component.wasm`, `oma_portable.wasm` and `oma_gateway.wasm` (worlds `component`,
//! `portable` and `gateway` of `wit/world.wit`: each built for `wasm32-unknown-unknown`, whose
//! standard library imports nothing, then made a component with `wit-component`).
//!
//! The building is `oma-guest-build`'s (`crates/guest-build`), which also serves the language
//! packages; this script picks the profile and the directory, and records the paths.
//!
//! The guest is built by a nested `cargo build` in its own target directory (`<target>/oma-guest`,
//! beside the outer build's profile directories), so the nested cargo never waits on the lock the
//! outer build holds, and repeated builds are incremental. The environment the outer cargo gives a
//! build script (`RUSTFLAGS`, `CARGO_ENCODED_RUSTFLAGS`, `CARGO_TARGET_DIR`, profile and feature
//! variables, clippy's rustc wrapper, ...) is removed so that it cannot leak into the guest build.
//!
//! Profiles: a debug host gets a `release` guest (small enough to compile quickly with Cranelift,
//! and quick to rebuild); a release host (`cargo bench`, `cargo build --release`) gets the
//! `wasm-release` guest whose size the budget counts. `OMA_GUEST_PROFILE` overrides the choice.
//!
//! The result is `$OUT_DIR/guest.rs`, which `src/lib.rs` includes: constants with the paths of
//! the three components and the profile.

use std::env;
use std::path::{Path, PathBuf};

fn main() {
    if let Err(message) = run() {
        eprintln!("error: {message}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let manifest_dir = PathBuf::from(var("CARGO_MANIFEST_DIR")?);
    let out_dir = PathBuf::from(var("OUT_DIR")?);
    let workspace = manifest_dir
        .parent()
        .and_then(Path::parent)
        .ok_or("crates/wasmtime is not two levels below the workspace")?
        .to_path_buf();

    // The guest is the world crates, the glue they share, the core they drive and the WIT.
    for watched in [
        "crates/core",
        "crates/wasi",
        "crates/glue",
        "crates/component",
        "crates/step",
        "crates/portable",
        "crates/gateway-rules",
        "crates/gateway",
        "crates/routes",
        "wit",
        "Cargo.toml",
        "Cargo.lock",
    ] {
        println!(
            "cargo:rerun-if-changed={}",
            workspace.join(watched).display()
        );
    }
    println!("cargo:rerun-if-env-changed=OMA_GUEST_PROFILE");

    let profile = match env::var("OMA_GUEST_PROFILE") {
        Ok(profile) if !profile.is_empty() => profile,
        _ if env::var("PROFILE").as_deref() == Ok("release") => "wasm-release".to_owned(),
        _ => "release".to_owned(),
    };
    let target_dir = guest_target_dir(&out_dir);
    let note = |message: &str| println!("cargo:warning={message}");
    let built = oma_guest_build::build_all(&workspace, &target_dir, &profile, &note)?;
    let (component, portable, gateway) = (built.component, built.portable, built.gateway);

    let utf8 = |path: &Path| {
        path.to_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("the guest path is not UTF-8: {}", path.display()))
    };
    let (artifact, portable, gateway) = (utf8(&component)?, utf8(&portable)?, utf8(&gateway)?);
    let generated = format!(
        "/// The path of the `oma-component` guest (world `component`, profile `{profile}`), \
         built by `crates/wasmtime/build.rs`.\n\
         pub const GUEST_WASM: &str = {artifact:?};\n\
         /// The path of the import-free `portable` world's component, beside `GUEST_WASM`.\n\
         pub const PORTABLE_WASM: &str = {portable:?};\n\
         /// The path of the `wasi:http/proxy` gateway's component, beside `GUEST_WASM`.\n\
         pub const GATEWAY_WASM: &str = {gateway:?};\n\
         /// The cargo profile the guest was built with.\n\
         pub const GUEST_PROFILE: &str = {profile:?};\n"
    );
    let generated_path = out_dir.join("guest.rs");
    std::fs::write(&generated_path, generated)
        .map_err(|e| format!("could not write {}: {e}", generated_path.display()))?;
    Ok(())
}

/// `<target>/oma-guest`, where `<target>` holds the outer build's profile directory.
///
/// `OUT_DIR` is `<target>[/<triple>]/<profile>/build/<pkg>-<hash>/out`; if it does not have that
/// shape (an unusual cargo), the guest is built under `OUT_DIR` instead.
fn guest_target_dir(out_dir: &Path) -> PathBuf {
    let build_dir = out_dir
        .ancestors()
        .find(|dir| dir.file_name().is_some_and(|name| name == "build"));
    match build_dir.and_then(Path::parent).and_then(Path::parent) {
        Some(target) => target.join("oma-guest"),
        None => out_dir.join("oma-guest"),
    }
}

fn var(key: &str) -> Result<String, String> {
    env::var(key).map_err(|_| format!("cargo did not set {key}"))
}
