//! Builds the `oma-component` guest in its two worlds and records where the components landed:
//! `oma_component.wasm` (world `component`, `wasm32-wasip2`) and `oma_portable.wasm` (world
//! `portable`: built for `wasm32-unknown-unknown`, whose standard library imports nothing, then
//! made a component here with `wit-component`, and written beside the first).
//!
//! A missing wasm target is added with `rustup target add` where rustup exists; where it does
//! not, the error says what to install.
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
const PORTABLE_TARGET: &str = "wasm32-unknown-unknown";
const PORTABLE_ARTIFACT: &str = "oma_portable.wasm";

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
    let component =
        build_guest(&workspace, &target_dir, &profile, GUEST_TARGET, &[])?.join(GUEST_ARTIFACT);
    if !component.is_file() {
        return Err(format!(
            "the guest built, but its component is missing at {}",
            component.display()
        ));
    }
    let core = build_guest(
        &workspace,
        &target_dir,
        &profile,
        PORTABLE_TARGET,
        &["--no-default-features", "--features", "portable"],
    )?
    .join(GUEST_ARTIFACT);
    let portable = component.with_file_name(PORTABLE_ARTIFACT);
    componentize(&core, &portable)?;

    let utf8 = |path: &Path| {
        path.to_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("the guest path is not UTF-8: {}", path.display()))
    };
    let (artifact, portable) = (utf8(&component)?, utf8(&portable)?);
    let generated = format!(
        "/// The path of the `oma-component` guest (`{GUEST_TARGET}`, profile `{profile}`), \
         built by `host-tests/build.rs`.\n\
         pub const GUEST_WASM: &str = {artifact:?};\n\
         /// The path of the import-free `portable` world's component, beside `GUEST_WASM`.\n\
         pub const PORTABLE_WASM: &str = {portable:?};\n\
         /// The cargo profile the guest was built with.\n\
         pub const GUEST_PROFILE: &str = {profile:?};\n"
    );
    let generated_path = out_dir.join("guest.rs");
    std::fs::write(&generated_path, generated)
        .map_err(|e| format!("could not write {}: {e}", generated_path.display()))?;
    Ok(())
}

/// Builds the guest library for `target` with `extra` cargo arguments; returns the directory
/// its artifact lands in.
fn build_guest(
    workspace: &Path,
    target_dir: &Path,
    profile: &str,
    target: &str,
    extra: &[&str],
) -> Result<PathBuf, String> {
    ensure_target(target)?;
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .arg("build")
        .arg("--manifest-path")
        .arg(workspace.join("Cargo.toml"))
        .args(["--package", GUEST_PACKAGE, "--lib", "--target", target])
        .args(extra)
        .args(["--profile", profile])
        .arg("--target-dir")
        .arg(target_dir)
        .current_dir(workspace)
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
            "the guest `{GUEST_PACKAGE}` failed to build for {target} (profile `{profile}`, \
             target dir {}; {status}); its compiler output is above",
            target_dir.display()
        ));
    }
    let profile_dir = match profile {
        "dev" | "test" => "debug",
        "bench" => "release",
        other => other,
    };
    Ok(target_dir.join(target).join(profile_dir))
}

/// Makes sure the standard library for `target` is installed: adds it with rustup where it is
/// missing and rustup exists, else says what to do.
fn ensure_target(target: &str) -> Result<(), String> {
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let sysroot = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned());
    if let Some(sysroot) = &sysroot {
        if Path::new(sysroot)
            .join("lib/rustlib")
            .join(target)
            .join("lib")
            .is_dir()
        {
            return Ok(());
        }
    }
    println!(
        "cargo:warning=installing the {target} standard library with `rustup target add {target}`"
    );
    let added = Command::new("rustup")
        .args(["target", "add", target])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .status();
    match added {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(format!(
            "`rustup target add {target}` failed ({status}); the guest needs the {target} \
             standard library: install it, then build again"
        )),
        Err(_) => Err(format!(
            "the guest needs the {target} standard library and rustup is not on PATH to add \
             it: install the target with your Rust distribution (e.g. `rustup target add \
             {target}`), then build again"
        )),
    }
}

/// Makes the core module at `core` (built for `wasm32-unknown-unknown`, with the world its
/// bindings embedded) a component at `out`.
fn componentize(core: &Path, out: &Path) -> Result<(), String> {
    let bytes =
        std::fs::read(core).map_err(|e| format!("could not read {}: {e}", core.display()))?;
    let component = wit_component::ComponentEncoder::default()
        .module(&bytes)
        .and_then(|encoder| encoder.validate(true).encode())
        .map_err(|e| format!("could not make {} a component: {e:#}", core.display()))?;
    let unchanged = std::fs::read(out).is_ok_and(|old| old == component);
    if !unchanged {
        std::fs::write(out, component)
            .map_err(|e| format!("could not write {}: {e}", out.display()))?;
    }
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
