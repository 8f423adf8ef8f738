//! Builds the components the binaries of this repository carry, `oma_component.wasm` and
//! `oma_gateway.wasm` (worlds `component` and `gateway` of `wit/world.wit`), and hands them to
//! `src/lib.rs` as bytes: `oma-guest-build`'s `carry` (`crates/guest-build/src/carry.rs`) does
//! it all, as for the worlds only the test kit drives (`host-tests/build.rs`).

use std::path::Path;

fn main() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let carried = ["component", "gateway"].map(oma_guest_build::artifact);
    let built = match carried {
        [Some(component), Some(gateway)] => {
            oma_guest_build::carry::carry(&workspace, &[component, gateway])
        }
        _ => Err("oma-guest-build names no `component` or `gateway` artifact".to_owned()),
    };
    if let Err(message) = built {
        eprintln!("error: {message}");
        std::process::exit(1);
    }
}
