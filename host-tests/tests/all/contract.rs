//! The WIT is the whole contract: each built artifact's component type, decoded, imports and
//! exports exactly what its world in `wit/world.wit` declares, interface by interface and
//! version by version, and its types are those of the declared world. A component that starts
//! importing something its world does not declare (say `wasi:cli/stdin`), or stops exporting
//! something it does, fails here.

use std::collections::BTreeSet;
use std::path::Path;

use oma_guest_build::world::{self, items, Imports};
use oma_host_tests::artifact::{
    COMPONENT_FILE, GATEWAY_FILE, PORTABLE_FILE, PORTABLE_JSON_FILE, ROUTES_FILE,
};
use wit_component::{ComponentEncoder, StringEncoding};
use wit_parser::{ManglingAndAbi, PackageId, Resolve, WorldId};

/// The version of WASI the worlds use (the vendored `wit/deps`).
const WASI: &str = "0.2.12";

/// `wit/` resolved, with its package.
fn declared() -> (Resolve, PackageId) {
    let mut resolve = Resolve::default();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit");
    let (package, _) = resolve.push_dir(&dir).expect("wit/ resolves");
    (resolve, package)
}

/// How the component `bytes` differs from the world `name` of `wit/` (empty: not at all):
/// [`world::differences`], every declared import required (each world is declared for exactly
/// its artifact).
fn differences(bytes: &[u8], name: &str) -> Vec<String> {
    let (resolve, package) = declared();
    let world = resolve
        .select_world(&[package], Some(name))
        .unwrap_or_else(|e| panic!("wit/ declares world {name}: {e:#}"));
    world::differences(&resolve, world, bytes, Imports::Declared)
}

/// Fails with every difference between the artifact at `path` and world `name`.
fn assert_matches(path: &str, name: &str) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    let differences = differences(&bytes, name);
    assert!(
        differences.is_empty(),
        "{path} is not its world `{name}` of wit/world.wit:\n  {}",
        differences.join("\n  ")
    );
}

#[test]
fn the_component_artifact_is_its_declared_world() {
    assert_matches(COMPONENT_FILE, "component");
}

#[test]
fn the_portable_artifact_is_its_declared_world() {
    assert_matches(PORTABLE_FILE, "portable");
}

#[test]
fn the_portable_json_artifact_is_its_declared_world() {
    assert_matches(PORTABLE_JSON_FILE, "portable-json");
}

/// The JavaScript package's world exports the JSON driver and the codec's text operations, and
/// nothing typed that a JSON host would carry the glue of without calling it: neither `driver`
/// nor `codec`. It imports nothing.
#[test]
fn the_portable_json_world_exports_only_the_json_interfaces_and_imports_nothing() {
    let (resolve, package) = declared();
    let world = resolve
        .select_world(&[package], Some("portable-json"))
        .unwrap();
    let (imports, exports) = items(&resolve, world);
    assert!(
        imports.is_empty(),
        "the portable-json world imports {imports:?}"
    );
    for wanted in ["json-driver", "json-codec"] {
        assert!(
            exports.contains_key(&format!("oma:agent/{wanted}@0.1.0")),
            "the portable-json world does not export {wanted}: {exports:?}"
        );
    }
    for unwanted in ["driver", "codec", "routes"] {
        assert!(
            !exports.contains_key(&format!("oma:agent/{unwanted}@0.1.0")),
            "the portable-json world exports {unwanted}: {exports:?}"
        );
    }
}

#[test]
fn the_routes_artifact_is_its_declared_world() {
    assert_matches(ROUTES_FILE, "gateway-routes");
}

/// The gateway's HTTP rules (`routes`) are a world of their own, importing nothing; the
/// portable world, which the language packages carry, has none of them.
#[test]
fn the_routes_world_exports_the_routes_and_imports_nothing_and_the_portable_world_has_none() {
    let (resolve, package) = declared();
    let world = resolve
        .select_world(&[package], Some("gateway-routes"))
        .unwrap();
    let (imports, exports) = items(&resolve, world);
    assert!(imports.is_empty(), "the routes world imports {imports:?}");
    let routes = exports
        .get("oma:agent/routes@0.1.0")
        .unwrap_or_else(|| panic!("the routes world does not export routes: {exports:?}"));
    for function in [
        "[constructor]request",
        "[method]request.next",
        "[method]request.answer",
        "log-line",
    ] {
        assert!(
            routes.contains(function),
            "routes has no {function}: {routes:?}"
        );
    }
    // The step types are a data interface of their own; the driver is the portable world's.
    assert!(
        exports.contains_key("oma:agent/gateway-types@0.1.0"),
        "the routes world does not export its data interface: {exports:?}"
    );
    assert!(
        !exports.contains_key("oma:agent/driver@0.1.0"),
        "the routes world exports the driver: {exports:?}"
    );
    assert!(
        !exports.contains_key("oma:agent/codec@0.1.0"),
        "the routes world exports the codec: {exports:?}"
    );
    let portable = resolve.select_world(&[package], Some("portable")).unwrap();
    let (imports, exports) = items(&resolve, portable);
    assert!(imports.is_empty(), "the portable world imports {imports:?}");
    assert!(
        !exports.contains_key("oma:agent/routes@0.1.0"),
        "the portable world exports routes: {exports:?}"
    );
    let built = differences(&std::fs::read(PORTABLE_FILE).unwrap(), "portable");
    assert!(built.is_empty(), "{PORTABLE_FILE}: {built:?}");
}

#[test]
fn the_gateway_artifact_is_its_declared_world() {
    assert_matches(GATEWAY_FILE, "gateway");
}

/// What the `component` world imports, spelled out: a change here is a change of what every
/// host must provide, and the docs (`docs/worlds.md`) list the same.
#[test]
fn the_component_world_imports_wasi_http_clocks_and_random_and_no_cli() {
    let (resolve, package) = declared();
    let world = resolve.select_world(&[package], Some("component")).unwrap();
    let (imports, exports) = items(&resolve, world);
    let mut expected: BTreeSet<String> = [
        "http/types",
        "http/outgoing-handler",
        "io/error",
        "io/poll",
        "io/streams",
        "clocks/monotonic-clock",
        "clocks/wall-clock",
        "random/random",
    ]
    .iter()
    .map(|name| format!("wasi:{name}@{WASI}"))
    .collect();
    for name in ["types", "wire", "outcome", "exchange", "host"] {
        expected.insert(format!("oma:agent/{name}@0.1.0"));
    }
    assert_eq!(imports.keys().cloned().collect::<BTreeSet<_>>(), expected);
    assert!(!imports.keys().any(|name| name.starts_with("wasi:cli/")));
    let exports: Vec<_> = exports.keys().cloned().collect();
    assert_eq!(
        exports,
        ["agent", "codec", "provider"].map(|name| format!("oma:agent/{name}@0.1.0"))
    );
}

/// The gateway is a `wasi:http/proxy` component: it exports what the proxy world exports and
/// imports only what that world offers, plus `wasi:cli/environment` and the two
/// `wasi:keyvalue` interfaces its shared limits are counted with.
#[test]
fn the_gateway_world_is_the_proxy_world_with_the_environment() {
    let (resolve, package) = declared();
    let gateway = resolve.select_world(&[package], Some("gateway")).unwrap();
    let http = resolve
        .package_names
        .iter()
        .find(|(name, _)| name.namespace == "wasi" && name.name == "http")
        .map(|(_, id)| *id)
        .expect("wit/deps has wasi:http");
    let proxy = resolve.select_world(&[http], Some("proxy")).unwrap();
    let (imports, exports) = items(&resolve, gateway);
    let (proxy_imports, proxy_exports) = items(&resolve, proxy);
    let beyond: Vec<_> = imports
        .keys()
        .filter(|name| !proxy_imports.contains_key(*name))
        .collect();
    assert_eq!(
        beyond,
        [
            &format!("wasi:cli/environment@{WASI}"),
            "wasi:keyvalue/atomics@0.2.0-draft",
            "wasi:keyvalue/store@0.2.0-draft",
        ]
    );
    assert_eq!(
        exports.keys().collect::<Vec<_>>(),
        proxy_exports.keys().collect::<Vec<_>>()
    );
    assert!(!imports.contains_key(&format!("wasi:cli/stdin@{WASI}")));
}

/// A component made for `world` of `resolve` (a core module that imports and exports all of
/// it, made a component the way the build makes the artifacts).
fn component_of(resolve: &Resolve, world: WorldId) -> Vec<u8> {
    let mut module = wit_component::dummy_module(resolve, world, ManglingAndAbi::Standard32);
    wit_component::embed_component_metadata(
        &mut module,
        resolve,
        world,
        StringEncoding::UTF8,
        false,
    )
    .expect("the metadata embeds");
    ComponentEncoder::default()
        .module(&module)
        .and_then(|encoder| encoder.validate(true).encode())
        .expect("the module becomes a component")
}

/// The comparison does catch drift: a component for the declared world matches it, one that
/// also imports `wasi:cli/stdin` or exports one interface less does not, and the differences
/// name the interface.
#[test]
fn a_component_that_imports_stdin_or_drops_an_export_does_not_match() {
    let (mut resolve, package) = declared();
    let faithful = resolve.select_world(&[package], Some("component")).unwrap();
    assert_eq!(
        differences(&component_of(&resolve, faithful), "component"),
        Vec::<String>::new()
    );

    let test = resolve
        .push_str(
            "drift.wit",
            &format!(
                "package oma:drift;
                 world with-stdin {{
                     include oma:agent/component@0.1.0;
                     import wasi:cli/stdin@{WASI};
                 }}
                 world without-agent {{
                     import oma:agent/host@0.1.0;
                     import wasi:http/outgoing-handler@{WASI};
                     import wasi:clocks/monotonic-clock@{WASI};
                     import wasi:clocks/wall-clock@{WASI};
                     import wasi:random/random@{WASI};
                     export oma:agent/codec@0.1.0;
                     export oma:agent/provider@0.1.0;
                 }}"
            ),
        )
        .expect("the drifted worlds resolve");

    let with_stdin = resolve.select_world(&[test], Some("with-stdin")).unwrap();
    let found = differences(&component_of(&resolve, with_stdin), "component");
    assert_eq!(
        found,
        [format!(
            "imports wasi:cli/stdin@{WASI}, which world component does not declare"
        )],
    );

    let without_agent = resolve
        .select_world(&[test], Some("without-agent"))
        .unwrap();
    let found = differences(&component_of(&resolve, without_agent), "component");
    assert_eq!(
        found,
        ["does not export oma:agent/agent@0.1.0, which world component declares"],
    );
}
