//! `oma_fastly.wasm` is a Fastly Compute service: built as `oma-guest-build --world fastly`
//! builds it, its component type, decoded, exports `fastly:compute/http-incoming` with its
//! `handle`, imports only interfaces (and functions) of Fastly's `service` world as vendored in
//! `crates/fastly/wit` (nothing of `wasi:http`, no WASI version but the world's), and
//! `wit-component` agrees that it targets that world, which checks every type. Viceroy, and
//! Fastly, link a component against that world; one that strays from it does not start there.

use std::path::{Path, PathBuf};

use oma_guest_build::world::{self, Imports};
use oma_guest_build::{build_artifact, FASTLY};
use wit_component::DecodedWasm;
use wit_parser::{Resolve, WorldId};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Fastly's WIT resolved, and its world `fastly:compute/service`.
fn service() -> (Resolve, WorldId) {
    let mut resolve = Resolve::default();
    let (package, _) = resolve
        .push_dir(workspace().join("crates/fastly/wit"))
        .expect("crates/fastly/wit resolves");
    let ours = resolve
        .select_world(&[package], Some("gateway"))
        .expect("oma:fastly/gateway");
    let service = resolve
        .package_names
        .iter()
        .find(|(name, _)| name.namespace == "fastly" && name.name == "compute")
        .map(|(_, id)| *id)
        .expect("the vendored WIT has fastly:compute");
    let world = resolve
        .select_world(&[service], Some("service"))
        .expect("fastly:compute/service");
    assert_eq!(
        world::items(&resolve, ours),
        world::items(&resolve, world),
        "oma:fastly/gateway is Fastly's service world and nothing else"
    );
    (resolve, world)
}

/// How the component `bytes` strays from Fastly's `service` world (empty: not at all): it may
/// import any of the world's interfaces, as a component imports what it calls.
fn differences(bytes: &[u8]) -> Vec<String> {
    let (resolve, world) = service();
    world::differences(&resolve, world, bytes, Imports::Subset)
}

#[test]
fn the_fastly_artifact_targets_fastlys_service_world() {
    let target_dir = workspace().join("target/oma-guest");
    let path = build_artifact(&workspace(), &target_dir, "wasm-release", FASTLY, &|note| {
        eprintln!("{note}")
    })
    .expect("oma_fastly.wasm builds");
    let bytes = std::fs::read(&path).expect("the artifact is readable");
    let found = differences(&bytes);
    assert!(
        found.is_empty(),
        "{} is not a fastly:compute/service component:\n  {}",
        path.display(),
        found.join("\n  ")
    );
    // What the layer needs of the platform, spelled out: a change here changes what a Fastly
    // service must offer (docs/deploy.md).
    let Ok(DecodedWasm::Component(resolve, world)) = wit_component::decode(&bytes) else {
        unreachable!("decoded above");
    };
    let (imports, _) = world::items(&resolve, world);
    for needed in [
        "fastly:compute/http-req@0.1.0",
        "fastly:compute/http-body@0.1.0",
        "fastly:compute/http-resp@0.1.0",
        "fastly:compute/backend@0.1.0",
        "fastly:compute/config-store@0.1.0",
        "fastly:compute/secret-store@0.1.0",
    ] {
        assert!(imports.contains_key(needed), "{needed} in {imports:?}");
    }
    assert!(
        !imports.keys().any(|name| name.starts_with("wasi:http/")),
        "nothing of wasi:http: {imports:?}"
    );
}

/// The check does catch a stray component: the wasi:http gateway's world is not Fastly's.
#[test]
fn a_wasi_http_component_is_not_a_fastly_service() {
    let mut resolve = Resolve::default();
    let (package, _) = resolve
        .push_dir(workspace().join("wit"))
        .expect("wit/ resolves");
    let gateway = resolve.select_world(&[package], Some("gateway")).unwrap();
    let mut module =
        wit_component::dummy_module(&resolve, gateway, wit_parser::ManglingAndAbi::Standard32);
    wit_component::embed_component_metadata(
        &mut module,
        &resolve,
        gateway,
        wit_component::StringEncoding::UTF8,
        false,
    )
    .expect("the metadata embeds");
    let component = wit_component::ComponentEncoder::default()
        .module(&module)
        .and_then(|encoder| encoder.validate(true).encode())
        .expect("the module becomes a component");
    let found = differences(&component);
    assert!(
        found
            .iter()
            .any(|d| d.contains("wasi:http/outgoing-handler@0.2.12")),
        "{found:?}"
    );
    assert!(found.iter().any(|d| d.starts_with("exports")), "{found:?}");
}
