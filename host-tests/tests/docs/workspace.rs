//! The workspace as cargo sees it (`cargo metadata --no-deps`): its members, where each lives,
//! what each depends on, and the members `cargo test` at the root runs.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::Value;

use crate::repository;

/// How one member depends on another: linked into it, or only used to build or test it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// A `[dependencies]` entry (target-specific ones included): drawn `──>`.
    Normal,
    /// Only a `[build-dependencies]` or `[dev-dependencies]` entry: drawn `··>`.
    BuildOrDev,
}

/// One workspace member.
#[derive(Debug)]
pub struct Member {
    /// Its directory relative to the repository's root (empty for the root package).
    pub dir: String,
    /// The members it depends on, each with the strongest kind it is declared with.
    pub members: BTreeMap<String, Kind>,
    /// Every other package it depends on (renames undone), of any kind.
    pub external: BTreeSet<String>,
}

/// The workspace's members and its default members.
#[derive(Debug)]
pub struct Workspace {
    /// Every member, by name.
    pub members: BTreeMap<String, Member>,
    /// The members `cargo test` at the root runs (all of them without `default-members`).
    pub default_members: BTreeSet<String>,
}

impl Workspace {
    /// Reads the workspace with the cargo that runs the tests.
    pub fn read() -> Workspace {
        let root = repository();
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let output = Command::new(cargo)
            .args([
                "metadata",
                "--format-version",
                "1",
                "--no-deps",
                "--offline",
            ])
            .current_dir(&root)
            .output()
            .expect("cargo runs");
        assert!(
            output.status.success(),
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let metadata: Value =
            serde_json::from_slice(&output.stdout).expect("cargo metadata's JSON");
        Workspace::from_metadata(&metadata, &root.to_string_lossy())
    }

    /// The workspace described by `cargo metadata`'s JSON, its paths relative to `root`.
    pub fn from_metadata(metadata: &Value, root: &str) -> Workspace {
        let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
        let ids = |key: &str| -> BTreeSet<String> {
            metadata[key]
                .as_array()
                .unwrap_or_else(|| panic!("cargo metadata has no `{key}`"))
                .iter()
                .map(text)
                .collect()
        };
        let member_ids = ids("workspace_members");
        let default_ids = ids("workspace_default_members");
        let packages: Vec<&Value> = metadata["packages"]
            .as_array()
            .expect("cargo metadata's packages")
            .iter()
            .filter(|package| member_ids.contains(&text(&package["id"])))
            .collect();
        let names: BTreeSet<String> = packages.iter().map(|p| text(&p["name"])).collect();
        let root = root.trim_end_matches('/');
        let mut members = BTreeMap::new();
        for package in &packages {
            let name = text(&package["name"]);
            let manifest = text(&package["manifest_path"]);
            let dir = manifest
                .strip_suffix("Cargo.toml")
                .and_then(|dir| dir.strip_prefix(root))
                .unwrap_or_else(|| panic!("{manifest} is not under {root}"))
                .trim_matches('/')
                .to_owned();
            let mut on_members = BTreeMap::new();
            let mut external = BTreeSet::new();
            for dependency in package["dependencies"].as_array().into_iter().flatten() {
                let dependency_name = text(&dependency["name"]);
                let kind = match dependency["kind"].as_str() {
                    None => Kind::Normal,
                    Some(_) => Kind::BuildOrDev,
                };
                if dependency["path"].is_string() && names.contains(&dependency_name) {
                    let entry = on_members.entry(dependency_name).or_insert(kind);
                    *entry = (*entry).min(kind);
                } else {
                    external.insert(dependency_name);
                }
            }
            members.insert(
                name,
                Member {
                    dir,
                    members: on_members,
                    external,
                },
            );
        }
        let default_members = packages
            .iter()
            .filter(|package| default_ids.contains(&text(&package["id"])))
            .map(|package| text(&package["name"]))
            .collect();
        Workspace {
            members,
            default_members,
        }
    }

    /// The members `cargo test` at the root leaves out.
    pub fn left_out_of_cargo_test(&self) -> BTreeSet<String> {
        self.members
            .keys()
            .filter(|name| !self.default_members.contains(*name))
            .cloned()
            .collect()
    }

    /// Every package some member depends on that is not a member.
    pub fn external(&self) -> BTreeSet<String> {
        self.members
            .values()
            .flat_map(|member| member.external.iter().cloned())
            .collect()
    }
}

/// The reading of `cargo metadata`: members by path, kinds merged (a dependency declared for
/// both building and linking is linked), renames undone, the default members.
#[test]
fn the_workspace_is_read_from_cargo_metadata() {
    let metadata = serde_json::json!({
        "workspace_members": ["path+file:///r#a@0.1.0", "path+file:///r/crates/b#b@0.1.0"],
        "workspace_default_members": ["path+file:///r#a@0.1.0"],
        "packages": [
            {"id": "path+file:///r#a@0.1.0", "name": "a", "manifest_path": "/r/Cargo.toml",
             "dependencies": [
                {"name": "b", "kind": "dev", "path": "/r/crates/b"},
                {"name": "b", "kind": null, "path": "/r/crates/b"},
                {"name": "serde", "kind": null, "rename": "s"}]},
            {"id": "path+file:///r/crates/b#b@0.1.0", "name": "b",
             "manifest_path": "/r/crates/b/Cargo.toml",
             "dependencies": [{"name": "a", "kind": "build", "path": "/r"}]}
        ]
    });
    let workspace = Workspace::from_metadata(&metadata, "/r");
    let a = &workspace.members["a"];
    assert_eq!(a.dir, "");
    assert_eq!(a.members, BTreeMap::from([("b".to_owned(), Kind::Normal)]));
    assert_eq!(a.external, BTreeSet::from(["serde".to_owned()]));
    let b = &workspace.members["b"];
    assert_eq!(b.dir, "crates/b");
    assert_eq!(
        b.members,
        BTreeMap::from([("a".to_owned(), Kind::BuildOrDev)])
    );
    assert_eq!(
        workspace.left_out_of_cargo_test(),
        BTreeSet::from(["b".to_owned()])
    );
}
