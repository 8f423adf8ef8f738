//! `oma-guest-build [--profile PROFILE] [--target-dir DIR] [--world WORLD] [--check-sizes]`:
//! builds `oma_component.wasm`, `oma_portable.wasm`, `oma_portable_json.wasm`, `oma_gateway.wasm`
//! and `oma_routes.wasm` and prints where they landed, one path a line. With `--world portable`
//! (or `component`, `portable-json`, `gateway`, `routes`) it builds that artifact alone and
//! prints its one path: the Python package needs only the portable world, the JavaScript package
//! only the portable-json world, the Worker gateway only the routes world, and building one alone
//! skips the others. `--world fastly` builds the opt-in
//! `oma_fastly.wasm` (the gateway on Fastly Compute), which the default build leaves out. With
//! `--check-sizes` it then holds the `wasm-release` artifacts to their ceilings (`SIZE_LIMITS`,
//! or `FASTLY_SIZE_LIMIT` with `--world fastly`) and fails if one is over.
//!
//! The default profile is `wasm-release` (the shipped artifacts); the default directory is
//! `target/oma-guest` in the workspace, where the harness builds them too.

use std::path::PathBuf;
use std::process::ExitCode;

use oma_guest_build::{build_all, build_artifact, Artifact, ARTIFACTS, FASTLY, FASTLY_SIZE_LIMIT};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The artifact `--world name` chooses: one of [`ARTIFACTS`], or the opt-in [`FASTLY`].
fn world(name: &str) -> Result<Artifact, String> {
    oma_guest_build::artifact(name).ok_or_else(|| {
        let names: Vec<&str> = ARTIFACTS
            .iter()
            .chain([&FASTLY])
            .map(|artifact| artifact.flag)
            .collect();
        format!(
            "unknown world {name:?}: expected one of {}",
            names.join(", ")
        )
    })
}

fn run() -> Result<(), String> {
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .map_err(|e| format!("the workspace is not where it was built: {e}"))?;
    let mut profile = "wasm-release".to_owned();
    let mut target_dir = workspace.join("target").join("oma-guest");
    let mut check_sizes = false;
    let mut chosen = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--profile" => profile = args.next().ok_or("--profile needs a value")?,
            "--target-dir" => {
                target_dir = PathBuf::from(args.next().ok_or("--target-dir needs a value")?)
            }
            "--world" => chosen = Some(world(&args.next().ok_or("--world needs a value")?)?),
            "--check-sizes" => check_sizes = true,
            "-h" | "--help" => {
                println!(
                    "usage: oma-guest-build [--profile PROFILE] [--target-dir DIR] [--world WORLD] \
                     [--check-sizes]\n\
                     builds oma_component.wasm, oma_portable.wasm, oma_portable_json.wasm, \
                     oma_gateway.wasm and oma_routes.wasm (default profile wasm-release, default \
                     directory target/oma-guest) and prints their paths;\n\
                     --world component|portable|portable-json|gateway|routes builds that \
                     artifact alone and prints its path;\n\
                     --world fastly builds the opt-in oma_fastly.wasm (the gateway on Fastly Compute);\n\
                     --check-sizes then fails if a wasm-release artifact is over its size ceiling"
                );
                return Ok(());
            }
            other => return Err(format!("unknown argument {other:?}; see --help")),
        }
    }
    if check_sizes && chosen.is_some_and(|artifact| artifact != FASTLY) {
        return Err(
            "--check-sizes checks all five artifacts (or, with --world fastly, that one); leave \
             out --world"
                .into(),
        );
    }
    if check_sizes && profile != "wasm-release" {
        return Err(format!(
            "--check-sizes applies to the shipped profile, wasm-release, not {profile}"
        ));
    }
    eprintln!(
        "building the guest (profile {profile}) in {}",
        target_dir.display()
    );
    let note = |message: &str| eprintln!("{message}");
    if let Some(artifact) = chosen {
        let path = build_artifact(&workspace, &target_dir, &profile, artifact, &note)?;
        println!("{}", path.display());
        if check_sizes {
            let dir = path.parent().ok_or("the artifact has no directory")?;
            oma_guest_build::check_limits(dir, &[FASTLY_SIZE_LIMIT], &|line| {
                eprintln!("size: {line}")
            })?;
        }
        return Ok(());
    }
    let built = build_all(&workspace, &target_dir, &profile, &note)?;
    println!("{}", built.component.display());
    println!("{}", built.portable.display());
    println!("{}", built.gateway.display());
    println!("{}", built.routes.display());
    if check_sizes {
        let dir = built
            .component
            .parent()
            .ok_or("the artifacts have no directory")?;
        oma_guest_build::check_sizes(dir, &|line| eprintln!("size: {line}"))?;
    }
    Ok(())
}
