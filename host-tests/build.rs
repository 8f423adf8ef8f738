//! Builds the `oma-component` guest for `wasm32-wasip2` and records where the component landed.
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
//! The result is `$OUT_DIR/guest.rs`, which `src/lib.rs` includes: one constant with the path of
//! `oma_component.wasm`.

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Variables starting with `CARGO_` that the nested cargo may keep: where cargo lives, how it
/// reaches registries, how it prints, and the jobserver shared with the outer build.
const KEEP_CARGO_VARS: &[&str] = &[
    "CARGO_HOME",
    "CARGO_MAKEFLAGS",
    "CARGO_NET_",
    "CARGO_HTTP_",
    "CARGO_REGISTRY_",
    "CARGO_REGISTRIES_",
    "CARGO_TERM_",
];

/// Other variables that would change the nested build behind its back.
const REMOVE_VARS: &[&str] = &[
    "RUSTFLAGS",
    "RUSTC_WORKSPACE_WRAPPER",
    "CLIPPY_ARGS",
    "CLIPPY_CONF_DIR",
    "__CARGO_FIX_PLZ",
];

const GUEST_PACKAGE: &str = "oma-component";
const GUEST_TARGET: &str = "wasm32-wasip2";
const GUEST_ARTIFACT: &str = "oma_component.wasm";

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
        .ok_or("host-tests has no parent directory")?
        .to_path_buf();

    for watched in ["src", "wit", "Cargo.toml", "Cargo.lock"] {
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
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());

    let mut command = Command::new(cargo);
    command
        .arg("build")
        .arg("--manifest-path")
        .arg(workspace.join("Cargo.toml"))
        .args([
            "--package",
            GUEST_PACKAGE,
            "--lib",
            "--target",
            GUEST_TARGET,
        ])
        .args(["--profile", &profile])
        .arg("--target-dir")
        .arg(&target_dir)
        .current_dir(&workspace)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    for (key, _) in env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        let cargo_var =
            key.starts_with("CARGO_") && !KEEP_CARGO_VARS.iter().any(|keep| key.starts_with(keep));
        if cargo_var || REMOVE_VARS.contains(&key) {
            command.env_remove(key);
        }
    }

    let status = command
        .status()
        .map_err(|e| format!("could not run cargo to build the guest `{GUEST_PACKAGE}`: {e}"))?;
    if !status.success() {
        return Err(format!(
            "the guest `{GUEST_PACKAGE}` failed to build for {GUEST_TARGET} (profile `{profile}`, \
             target dir {}; {status}); its compiler output is above. \
             Hint: fix the guest, or run `rustup target add {GUEST_TARGET}` if the target is missing",
            target_dir.display()
        ));
    }

    let profile_dir = match profile.as_str() {
        "dev" | "test" => "debug",
        "bench" => "release",
        other => other,
    };
    let artifact = target_dir
        .join(GUEST_TARGET)
        .join(profile_dir)
        .join(GUEST_ARTIFACT);
    if !artifact.is_file() {
        return Err(format!(
            "the guest built, but its component is missing at {}",
            artifact.display()
        ));
    }
    let artifact = artifact
        .to_str()
        .ok_or_else(|| format!("the guest path is not UTF-8: {}", artifact.display()))?;

    let generated = format!(
        "/// The path of the `oma-component` guest (`{GUEST_TARGET}`, profile `{profile}`), \
         built by `host-tests/build.rs`.\n\
         pub const GUEST_WASM: &str = {artifact:?};\n\
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
