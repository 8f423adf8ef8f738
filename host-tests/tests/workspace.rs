//! `cargo test` at the root (the README's test command, and CI's) tests every workspace member:
//! the root is a package, so cargo builds and tests `default-members` only, and a member left
//! out of that list would go untested without a word.

use std::path::Path;

fn list(manifest: &toml::Table, key: &str) -> Vec<String> {
    let mut names: Vec<String> = manifest["workspace"][key]
        .as_array()
        .unwrap_or_else(|| panic!("workspace.{key} is a list"))
        .iter()
        .map(|member| {
            member
                .as_str()
                .unwrap_or_else(|| panic!("workspace.{key} holds paths"))
                .to_owned()
        })
        .collect();
    names.sort();
    names
}

#[test]
fn cargo_test_at_the_root_tests_every_member() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host-tests is one level below the workspace");
    let text = std::fs::read_to_string(root.join("Cargo.toml")).expect("the root manifest");
    let manifest: toml::Table = text.parse().expect("the root manifest is TOML");
    let members = list(&manifest, "members");
    let defaults = list(&manifest, "default-members");
    let untested: Vec<&String> = members.iter().filter(|m| !defaults.contains(m)).collect();
    assert!(
        untested.is_empty(),
        "workspace members missing from default-members (so `cargo test` skips them): {untested:?}"
    );
    for member in &members {
        assert!(
            root.join(member).join("Cargo.toml").is_file(),
            "{member} is a package"
        );
    }
}
