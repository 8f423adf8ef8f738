//! Sets `oma_gateway_rules_only` for the gateway's rules that `src/lib.rs` compiles in (its
//! `routes` export): the gateway's wasi:http handler is left out of this world.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(oma_gateway_rules_only)");
    println!("cargo::rustc-cfg=oma_gateway_rules_only");
}
