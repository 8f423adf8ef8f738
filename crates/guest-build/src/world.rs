//! Whether a built component is the world it was built for: its component type, decoded,
//! compared with a world of resolved WIT, interface by interface and version by version. The
//! contract test holds every artifact to its world in `wit/world.wit` with it, and the Fastly
//! test holds `oma_fastly.wasm` to Fastly's `service` world.

use std::collections::{BTreeMap, BTreeSet};

use wit_component::DecodedWasm;
use wit_parser::{IndexMap, Resolve, WorldId, WorldItem, WorldKey};

/// What a world imports or exports: each item by name (an interface by its id with version,
/// `func NAME` and `type NAME` for a world's own functions and types) with the names of the
/// functions it holds.
pub type Items = BTreeMap<String, BTreeSet<String>>;

/// The imports and exports of `world`.
pub fn items(resolve: &Resolve, world: WorldId) -> (Items, Items) {
    let of = |map: &IndexMap<WorldKey, WorldItem>| -> Items {
        map.iter()
            .map(|(key, item)| match item {
                WorldItem::Interface { id, .. } => (
                    resolve
                        .id_of(*id)
                        .unwrap_or_else(|| resolve.name_world_key(key)),
                    resolve.interfaces[*id].functions.keys().cloned().collect(),
                ),
                WorldItem::Function(f) => (format!("func {}", f.name), BTreeSet::new()),
                WorldItem::Type { .. } => (
                    format!("type {}", resolve.name_world_key(key)),
                    BTreeSet::new(),
                ),
            })
            .collect()
    };
    let world = &resolve.worlds[world];
    (of(&world.imports), of(&world.exports))
}

/// How much of its world's imports a component must import.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Imports {
    /// Every interface the world imports (a world declared for exactly this component).
    Declared,
    /// Any of them (a platform's world, of which a component imports what it calls).
    Subset,
}

/// How the component `bytes` differs from `world` of `resolve` (empty: not at all).
///
/// The interfaces imported must be the world's (all of them, or with [`Imports::Subset`] some),
/// and those exported exactly the world's, with the same versions; an exported interface must
/// hold the declared functions, an imported one only functions the declared interface has (a
/// component imports the functions it calls); and `wit-component` must agree that the
/// component targets the world, which checks every type.
pub fn differences(
    resolve: &Resolve,
    world: WorldId,
    bytes: &[u8],
    imports: Imports,
) -> Vec<String> {
    let name = &resolve.worlds[world].name;
    let (want_imports, want_exports) = items(resolve, world);
    let decoded = match wit_component::decode(bytes) {
        Ok(DecodedWasm::Component(resolve, world)) => (resolve, world),
        Ok(DecodedWasm::WitPackage(..)) => return vec!["not a component".to_owned()],
        Err(e) => return vec![format!("does not decode: {e:#}")],
    };
    let (got_imports, got_exports) = items(&decoded.0, decoded.1);

    let mut differences = Vec::new();
    for (direction, verb, want, got, exact) in [
        ("imports", "import", &want_imports, &got_imports, false),
        ("exports", "export", &want_exports, &got_exports, true),
    ] {
        for item in got.keys().filter(|item| !want.contains_key(*item)) {
            differences.push(format!(
                "{direction} {item}, which world {name} does not declare"
            ));
        }
        if exact || imports == Imports::Declared {
            for item in want.keys().filter(|item| !got.contains_key(*item)) {
                differences.push(format!(
                    "does not {verb} {item}, which world {name} declares"
                ));
            }
        }
        for (item, functions) in got {
            let Some(declared) = want.get(item) else {
                continue;
            };
            let extra: Vec<_> = functions.difference(declared).collect();
            if !extra.is_empty() {
                differences.push(format!(
                    "{direction} {item} with undeclared functions {extra:?}"
                ));
            }
            let missing: Vec<_> = declared.difference(functions).collect();
            if exact && !missing.is_empty() {
                differences.push(format!(
                    "{direction} {item} without the functions {missing:?}"
                ));
            }
        }
    }
    if differences.is_empty() {
        if let Err(e) = wit_component::targets(resolve, world, bytes, false) {
            differences.push(format!("does not target world {name}: {e:#}"));
        }
    }
    differences
}
