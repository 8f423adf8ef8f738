//! The documents say what the code does, checked wherever a test can read both:
//!
//! - [`paths`]: every repository path a document names exists;
//! - [`worlds`]: the worlds and artifacts the documents name are those of `wit/` and of the
//!   build (`oma_guest_build::ARTIFACTS`), a count of them in any document or comment is their
//!   number, and a size ceiling a document quotes is the build's;
//! - [`crates`]: `docs/architecture.md`'s table of crates and its dependency picture are the
//!   workspace (`cargo metadata`), its table of dependencies names every dependency, and what
//!   it says `cargo test` runs is what `default-members` runs;
//! - [`readme`]: the README's two commands stand on its first screen.
//!
//! Each check fails when the code changes and the documents do not: a new world, artifact,
//! crate or dependency, an arrow that went.

mod crates;
mod markdown;
mod paths;
mod readme;
mod workspace;
mod worlds;

use std::path::{Path, PathBuf};

/// The repository's root.
fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host-tests is one level below the repository")
        .to_path_buf()
}

/// The text of the file at `relative` (to the root).
fn read(relative: &str) -> String {
    let path = repository().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {relative}: {e}"))
}

/// The documents checked: the README, every page of `docs/`, and the READMEs beside the code.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut found = vec![root.join("README.md")];
    for dir in [
        "docs",
        "packages",
        "fixtures",
        "examples",
        "fuzz",
        "bench",
        "host-tests",
    ] {
        collect(&root.join(dir), &mut found);
    }
    found
}

/// Installed and generated trees, which are not the repository's own.
fn generated(name: &str) -> bool {
    matches!(
        name,
        "node_modules" | "target" | "gen" | ".venv" | "dist" | "build"
    ) || name.starts_with('.')
}

fn collect(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() {
            if !generated(&name) {
                collect(&path, found);
            }
        } else if name.ends_with(".md") && (dir.ends_with("docs") || name == "README.md") {
            found.push(path);
        }
    }
}
