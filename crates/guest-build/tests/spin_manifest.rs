//! The Spin manifest in `packages/gateway` stays in step with the build: it points at the
//! artifact this crate writes, builds it with this crate, and sets only variables the gateway
//! documents. (Spin itself is not in any registry this repository installs from, so the
//! manifest is checked here rather than run.)

use std::path::Path;

fn manifest() -> toml::Table {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packages/gateway/spin.toml");
    let text = std::fs::read_to_string(&path).expect("packages/gateway/spin.toml");
    text.parse().expect("valid TOML")
}

fn get<'a>(value: &'a toml::Value, path: &[&str]) -> &'a toml::Value {
    path.iter().fold(value, |value, key| {
        value
            .get(*key)
            .unwrap_or_else(|| panic!("spin.toml has no {}", path.join(".")))
    })
}

#[test]
fn the_spin_manifest_runs_the_gateway_artifact() {
    let manifest = toml::Value::Table(manifest());
    assert_eq!(
        get(&manifest, &["spin_manifest_version"]).as_integer(),
        Some(2)
    );
    let triggers = get(&manifest, &["trigger", "http"])
        .as_array()
        .expect("http triggers");
    assert_eq!(triggers.len(), 1);
    assert_eq!(get(&triggers[0], &["route"]).as_str(), Some("/..."));
    let id = get(&triggers[0], &["component"]).as_str().expect("an id");
    let component = get(&manifest, &["component", id]);

    let source = get(component, &["source"]).as_str().expect("a source");
    let expected = format!(
        "../../target/oma-guest/{}/wasm-release/{}",
        oma_guest_build::ARTIFACT_DIR,
        oma_guest_build::GATEWAY_ARTIFACT
    );
    assert_eq!(
        source, expected,
        "where `cargo run -p oma-guest-build` writes it"
    );

    let build = get(component, &["build", "command"])
        .as_str()
        .expect("a build");
    assert!(build.contains("-p oma-guest-build"), "{build}");
    assert_eq!(
        get(component, &["build", "workdir"]).as_str(),
        Some("../..")
    );

    let docs = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/gateway.md"),
    )
    .expect("docs/gateway.md");
    let environment = get(component, &["environment"])
        .as_table()
        .expect("an environment table");
    for (name, value) in environment {
        assert!(
            docs.contains(&format!("`{name}`")),
            "{name} is not a documented gateway variable"
        );
        assert!(
            !name.ends_with("_API_KEY") && !name.contains("SECRET") && !name.contains("TOKEN"),
            "{name}: secrets never go in the manifest"
        );
        assert!(value.is_str(), "{name}: Spin takes strings");
    }
    for host in get(component, &["allowed_outbound_hosts"])
        .as_array()
        .expect("allowed_outbound_hosts")
    {
        let host = host.as_str().expect("a string");
        assert!(host.starts_with("https://"), "{host}: providers over TLS");
    }
}
