//! `oma-guest-build [--profile PROFILE] [--target-dir DIR] [--check-sizes]`: builds
//! `oma_component.wasm`, `oma_portable.wasm` and `oma_gateway.wasm` and prints where they landed,
//! one path a line. With `--check-sizes` it then holds the `wasm-release` artifacts to their
//! ceilings (`SIZE_LIMITS`) and fails if one is over.
//!
//! The default profile is `wasm-release` (the shipped artifacts); the default directory is
//! `target/oma-guest` in the workspace, where the harness builds them too.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .map_err(|e| format!("the workspace is not where it was built: {e}"))?;
    let mut profile = "wasm-release".to_owned();
    let mut target_dir = workspace.join("target").join("oma-guest");
    let mut check_sizes = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--profile" => profile = args.next().ok_or("--profile needs a value")?,
            "--target-dir" => {
                target_dir = PathBuf::from(args.next().ok_or("--target-dir needs a value")?)
            }
            "--check-sizes" => check_sizes = true,
            "-h" | "--help" => {
                println!(
                    "usage: oma-guest-build [--profile PROFILE] [--target-dir DIR] [--check-sizes]\n\
                     builds oma_component.wasm, oma_portable.wasm and oma_gateway.wasm (default profile \
                     wasm-release, default directory target/oma-guest) and prints their paths;\n\
                     --check-sizes then fails if a wasm-release artifact is over its size ceiling"
                );
                return Ok(());
            }
            other => return Err(format!("unknown argument {other:?}; see --help")),
        }
    }
    eprintln!(
        "building the guest (profile {profile}) in {}",
        target_dir.display()
    );
    let note = |message: &str| eprintln!("{message}");
    let built = oma_guest_build::build_all(&workspace, &target_dir, &profile, &note)?;
    println!("{}", built.component.display());
    println!("{}", built.portable.display());
    println!("{}", built.gateway.display());
    if check_sizes {
        if profile != "wasm-release" {
            return Err(format!(
                "--check-sizes applies to the shipped profile, wasm-release, not {profile}"
            ));
        }
        let dir = built
            .component
            .parent()
            .ok_or("the artifacts have no directory")?;
        oma_guest_build::check_sizes(dir, &|line| eprintln!("size: {line}"))?;
    }
    Ok(())
}
