//! Builds the worlds only the tests drive, `oma_portable.wasm`, `oma_portable_json.wasm` and
//! `oma_routes.wasm` (worlds `portable`, `portable-json` and `gateway-routes` of
//! `wit/world.wit`), and hands them to `src/lib.rs` as bytes, beside the two `oma-artifacts` carries: `oma-guest-build`'s `carry`
//! (`crates/guest-build/src/carry.rs`) does it all, in the same guest directory.

use std::path::Path;

fn main() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let driven = ["portable", "portable-json", "routes"].map(oma_guest_build::artifact);
    let built = match driven {
        [Some(portable), Some(portable_json), Some(routes)] => {
            oma_guest_build::carry::carry(&workspace, &[portable, portable_json, routes])
        }
        _ => Err(
            "oma-guest-build names no `portable`, `portable-json` or `routes` artifact".to_owned(),
        ),
    };
    if let Err(message) = built {
        eprintln!("error: {message}");
        std::process::exit(1);
    }
}
