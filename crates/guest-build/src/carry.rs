//! What the build script of a crate that carries components does: builds them from the
//! repository's sources, copies them into its `OUT_DIR` and writes `$OUT_DIR/artifacts.rs`,
//! which the crate `include!`s: for each artifact the bytes (`include_bytes!`, so a binary that
//! uses them carries them and never reads a path of the machine that built it) and where the
//! copy is (for tests that hand a file to an outside runtime), and the profile they were built
//! with.
//!
//! Two crates do it: `oma-artifacts` (`host-tests/artifacts`) carries what the binaries embed,
//! the `component` world and the gateway; the test kit (`host-tests`) the worlds only its
//! tests drive, `portable`, `portable-json` and `routes`. A build of the CLI builds the two it
//! carries and no more; `cargo test` builds all five, in one guest directory, whose cargo
//! compiles the core they share once.
//!
//! The guest is built by a nested `cargo build` in its own target directory (`<target>/oma-guest`,
//! beside the outer build's profile directories), so the nested cargo never waits on the lock the
//! outer build holds, and repeated builds are incremental. The environment the outer cargo gives
//! a build script is removed ([`build_guest`](crate::build_guest)) so that it cannot leak into
//! the guest build.
//!
//! Profiles: a debug host gets a `wasm-dev` guest (optimised at LLVM's cheaper level 1: the
//! guest's build is on the critical path of a cold `cargo run -p oma-host -- demo`, and a debug
//! host's tests need it correct, not fast); a release host (`cargo bench`, `cargo build
//! --release`, `cargo install`) gets the `wasm-release` guest whose size the budget counts.
//! `OMA_GUEST_PROFILE` overrides the choice.

use std::env;
use std::path::{Path, PathBuf};

use crate::{build_artifacts, Artifact};

/// The sources of the guest under the workspace: the world crates (the `component` world is
/// the root package, `src/`), the glue they share, the core they drive and the WIT.
const GUEST_SOURCES: &[&str] = &[
    "src",
    "crates/core",
    "crates/wasi",
    "crates/glue",
    "crates/step",
    "crates/portable",
    "crates/portable-json",
    "crates/gateway-rules",
    "crates/gateway",
    "crates/routes",
    "wit",
    "Cargo.toml",
    "Cargo.lock",
];

/// Runs as the build script of a crate that carries `artifacts` (see the module docs), with
/// `workspace` the repository's root. Prints cargo's instructions on standard output; an error
/// says what failed.
pub fn carry(workspace: &Path, artifacts: &[Artifact]) -> Result<(), String> {
    let workspace = &workspace
        .canonicalize()
        .map_err(|e| format!("the workspace {} is not there: {e}", workspace.display()))?;
    let out_dir = PathBuf::from(var("OUT_DIR")?);
    for watched in GUEST_SOURCES {
        println!(
            "cargo:rerun-if-changed={}",
            workspace.join(watched).display()
        );
    }
    println!("cargo:rerun-if-env-changed=OMA_GUEST_PROFILE");

    let profile = match env::var("OMA_GUEST_PROFILE") {
        Ok(profile) if !profile.is_empty() => profile,
        _ if env::var("PROFILE").as_deref() == Ok("release") => "wasm-release".to_owned(),
        _ => "wasm-dev".to_owned(),
    };
    let target_dir = guest_target_dir(&out_dir);
    let note = |message: &str| println!("cargo:warning={message}");
    let dir = build_artifacts(workspace, &target_dir, &profile, artifacts, &note)?;
    // Copies in `OUT_DIR`: what `include_bytes!` reads is this build's, whatever a later build
    // of another profile or checkout writes to the shared guest directory.
    let mut consts = String::new();
    for artifact in artifacts {
        let built = dir.join(artifact.file);
        let copy = out_dir.join(artifact.file);
        std::fs::copy(&built, &copy).map_err(|e| {
            format!(
                "could not copy {} to {}: {e}",
                built.display(),
                copy.display()
            )
        })?;
        let copy = copy
            .to_str()
            .ok_or_else(|| format!("the output path is not UTF-8: {}", copy.display()))?;
        // `portable-json` -> `PORTABLE_JSON`.
        let name = artifact.flag.to_uppercase().replace('-', "_");
        consts.push_str(&format!(
            "/// `{}`: the component of world `{}`.\npub const {name}: &[u8] = \
             include_bytes!({copy:?});\n",
            artifact.file, artifact.world
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
        .map_err(|e| format!("could not write {}: {e}", generated_path.display()))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guest_directory_is_beside_the_profile_directories() {
        let out = Path::new("/w/target/debug/build/oma-artifacts-0123/out");
        assert_eq!(guest_target_dir(out), Path::new("/w/target/oma-guest"));
        let cross = Path::new("/w/target/x86_64-unknown-linux-gnu/release/build/p-1/out");
        assert_eq!(
            guest_target_dir(cross),
            Path::new("/w/target/x86_64-unknown-linux-gnu/oma-guest")
        );
        let odd = Path::new("/somewhere/out");
        assert_eq!(guest_target_dir(odd), Path::new("/somewhere/out/oma-guest"));
    }
}
