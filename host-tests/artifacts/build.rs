//! Builds the guest's four components and hands them to `src/lib.rs` as bytes:
//! `oma_component.wasm`, `oma_portable.wasm`, `oma_gateway.wasm` and `oma_routes.wasm` (worlds
//! `component`, `portable`, `gateway` and `gateway-routes` of `wit/world.wit`: each built for
//! `wasm32-unknown-unknown`, whose standard library imports nothing, then made a component with
//! `wit-component`).
//!
//! The building is `oma-guest-build`'s (`crates/guest-build`), which also serves the language
//! packages; this script picks the profile and the directory, copies the components into
//! `OUT_DIR` and writes `$OUT_DIR/artifacts.rs`, which `src/lib.rs` includes: the bytes of each
//! component (`include_bytes!`, so a binary that uses them carries them and never reads a path
//! of the machine that built it), and where the copies are, for tests that hand a file to an
//! outside runtime.
//!
//! The guest is built by a nested `cargo build` in its own target directory (`<target>/oma-guest`,
//! beside the outer build's profile directories), so the nested cargo never waits on the lock the
//! outer build holds, and repeated builds are incremental. The environment the outer cargo gives a
//! build script (`RUSTFLAGS`, `CARGO_ENCODED_RUSTFLAGS`, `CARGO_TARGET_DIR`, profile and feature
//! variables, clippy's rustc wrapper, ...) is removed so that it cannot leak into the guest build.
//!
//! Profiles: a debug host gets a `release` guest (small enough to compile quickly with Cranelift,
//! and quick to rebuild); a release host (`cargo bench`, `cargo build --release`,
//! `cargo install`) gets the `wasm-release` guest whose size the budget counts.
//! `OMA_GUEST_PROFILE` overrides the choice.

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
        .ok_or("host-tests/artifacts is not two levels below the workspace")?
        .to_path_buf();

    // The guest is the world crates (the `component` world is the root package, `src/`), the
    // glue they share, the core they drive and the WIT.
    for watched in [
        "src",
        "crates/core",
        "crates/wasi",
        "crates/glue",
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
    // Copies in `OUT_DIR`: what `include_bytes!` reads is this build's, whatever a later build
    // of another profile or checkout writes to the shared guest directory.
    let mut consts = String::new();
    for (name, built, doc) in [
        (
            "COMPONENT",
            &built.component,
            "`oma_component.wasm`: the `component` world (wasi:http, the `host` imports).",
        ),
        (
            "PORTABLE",
            &built.portable,
            "`oma_portable.wasm`: the `portable` world, which imports nothing.",
        ),
        (
            "GATEWAY",
            &built.gateway,
            "`oma_gateway.wasm`: the `wasi:http/proxy` gateway.",
        ),
        (
            "ROUTES",
            &built.routes,
            "`oma_routes.wasm`: the gateway's rules for hosts with their own HTTP server (the \
             Worker gateway).",
        ),
    ] {
        let file = built
            .file_name()
            .ok_or_else(|| format!("{} has no file name", built.display()))?;
        let copy = out_dir.join(file);
        std::fs::copy(built, &copy).map_err(|e| {
            format!(
                "could not copy {} to {}: {e}",
                built.display(),
                copy.display()
            )
        })?;
        let copy = copy
            .to_str()
            .ok_or_else(|| format!("the output path is not UTF-8: {}", copy.display()))?;
        consts.push_str(&format!(
            "/// {doc}\npub const {name}: &[u8] = include_bytes!({copy:?});\n"
        ));
        consts.push_str(&format!(
            "/// Where the build left {name}'s bytes: only for tests and tools on the machine that \
             built them.\npub const {name}_FILE: &str = {copy:?};\n"
        ));
    }
    consts.push_str(&format!(
        "/// The cargo profile the components were built with.\npub const PROFILE: &str = {profile:?};\n"
    ));
    let generated_path = out_dir.join("artifacts.rs");
    std::fs::write(&generated_path, consts)
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
