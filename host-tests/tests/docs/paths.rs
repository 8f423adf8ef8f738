//! The documents name only files that exist: every repository path written in backticks or
//! linked in `README.md`, `docs/*.md`, the packages' and the fixtures' READMEs and
//! `examples/README.md` must be there, so a doc cannot keep naming a file after it moved or went.

use std::path::{Path, PathBuf};

use crate::{documents, repository};

/// The top-level directories (and files) whose paths the documents name.
const ROOTS: &[&str] = &[
    "src/",
    "crates/",
    "host-tests/",
    "examples/",
    "packages/",
    "wit/",
    "docs/",
    "fixtures/",
    "fuzz/",
    "bench/",
    ".ci/",
];

/// How a document names a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Named {
    /// In backticks: a repository path, or something else entirely (a command, a pattern).
    Code,
    /// The target of a Markdown link: relative to the document.
    Link,
}

/// The candidate paths in `text`: spans in backticks and the targets of Markdown links.
fn named_paths(text: &str) -> Vec<(Named, String)> {
    let mut names = Vec::new();
    for (i, span) in text.split('`').enumerate() {
        if i % 2 == 1 {
            names.push((Named::Code, span.to_owned()));
        }
    }
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        if let Some(end) = rest.find(')') {
            names.push((Named::Link, rest[..end].to_owned()));
        }
    }
    names
}

/// The packages of this repository (`packages/core` and the like name OMA's tree).
const PACKAGES: &[&str] = &["js", "python", "gateway", "wasmcloud", "worker"];

/// Where the path `name`, named by the document at `doc`, may be: `None` if it is no plain
/// path of this repository (a URL, a pattern, a command line, a placeholder, a generated
/// directory, a file of another project), else the places it may mean: beside the document,
/// from the root, or in one of the packages (a package's README names its own `src/`).
fn as_path(root: &Path, doc: &Path, kind: Named, name: &str) -> Option<Vec<PathBuf>> {
    let name = name.split('#').next()?.trim();
    // `path:line` and `path:item` name the file.
    let name = name.split(':').next()?;
    if name.is_empty()
        || name.contains(char::is_whitespace)
        || name.contains(['<', '>', '*', '{', '}', '$', '|', '?', '[', ']', '='])
        || name.contains("...")
        || name.contains('…')
        || name.starts_with("http")
        || name.starts_with("mailto")
        // Generated or installed: made by a build, not kept in the repository.
        || name.contains("target/")
        || name.contains("gen/")
        || name.contains("node_modules")
        // TypeScript sources are OMA's and the SDKs' (this repository has only `.d.ts`).
        || (name.ends_with(".ts") && !name.ends_with(".d.ts"))
    {
        return None;
    }
    if let Some(package) = name.strip_prefix("packages/") {
        let package = package.split('/').next().unwrap_or("");
        if !PACKAGES.contains(&package) {
            return None;
        }
    }
    let base = doc.parent()?;
    let looks_like_ours = ROOTS.iter().any(|top| name.starts_with(top));
    if kind == Named::Link || name.starts_with("../") {
        return Some(vec![base.join(name)]);
    }
    if !looks_like_ours {
        return None;
    }
    let mut places = vec![root.join(name), base.join(name)];
    places.extend(
        PACKAGES
            .iter()
            .map(|package| root.join("packages").join(package).join(name)),
    );
    Some(places)
}

#[test]
fn every_path_a_document_names_exists() {
    let root = repository();
    let mut missing = Vec::new();
    let documents = documents(&root);
    assert!(
        documents.len() > 10,
        "too few documents found: {documents:?}"
    );
    for doc in &documents {
        let text = std::fs::read_to_string(doc).expect("a readable document");
        for (kind, name) in named_paths(&text) {
            if let Some(places) = as_path(&root, doc, kind, &name) {
                if !places.iter().any(|path| path.exists()) {
                    let doc = doc.strip_prefix(&root).unwrap_or(doc);
                    missing.push(format!("{}: {name}", doc.display()));
                }
            }
        }
    }
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "documents name paths that do not exist:\n  {}",
        missing.join("\n  ")
    );
}

/// The check itself finds a missing path and passes over what is not a path.
#[test]
fn the_check_tells_paths_from_other_spans() {
    let root = repository();
    let doc = root.join("docs/architecture.md");
    let places = |kind, name: &str| as_path(&root, &doc, kind, name);
    let first = |kind, name: &str| places(kind, name).map(|places| places[0].clone());
    assert_eq!(
        first(Named::Code, "crates/core/src/lib.rs:12"),
        Some(root.join("crates/core/src/lib.rs"))
    );
    assert_eq!(
        first(Named::Code, "host-tests/nowhere.rs"),
        Some(root.join("host-tests/nowhere.rs"))
    );
    assert_eq!(
        places(Named::Code, "crates/core/src/adapter/<provider>/stream.rs"),
        None
    );
    assert_eq!(places(Named::Code, "cargo test -p oma-core"), None);
    assert_eq!(places(Named::Link, "https://example.invalid/x.md"), None);
    assert_eq!(
        places(Named::Code, "packages/core/src/agent/runner.ts"),
        None
    );
    assert_eq!(
        first(Named::Link, "cli.md#serve"),
        Some(root.join("docs/cli.md"))
    );
    assert_eq!(
        named_paths("see `src/lib.rs` and [the CLI](cli.md#serve)"),
        vec![
            (Named::Code, "src/lib.rs".to_owned()),
            (Named::Link, "cli.md#serve".to_owned())
        ]
    );
}
