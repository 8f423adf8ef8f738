//! The embedding itself: one shared harness, the `.cwasm` cache, a bounded
//! instance pool that fails politely, and installable outbound-HTTP hooks.

use std::path::{Path, PathBuf};

use oma_harness::{ComponentOrigin, DenyOutbound, GuestOptions, Harness, HarnessOptions};

fn cwasm_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .expect("readable")
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "cwasm"))
        .collect()
}

#[test]
fn the_shared_harness_is_built_once() {
    let first = Harness::shared().expect("loads");
    let second = Harness::shared().expect("loads");
    assert!(std::ptr::eq(first, second));
    assert_eq!(
        first.wasm_path(),
        Path::new(oma_harness::artifact::GUEST_WASM)
    );
    assert!(first.wasm_path().is_file());
}

#[test]
fn compiled_code_is_cached_beside_the_guest() {
    let shared = Harness::shared().expect("loads");
    let guest_dir = shared.wasm_path().parent().expect("a directory");
    let cached = cwasm_files(guest_dir);
    assert!(!cached.is_empty(), "the shared harness wrote its .cwasm");

    // A copy of the guest and its cache in a fresh directory loads from the cache, with another
    // pool size (the pool is not part of the key). Misses and corrupt files: `src/engine.rs`.
    let dir = std::env::temp_dir().join(format!("oma-harness-cache-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let wasm = dir.join(shared.wasm_path().file_name().expect("a file name"));
    std::fs::copy(shared.wasm_path(), &wasm).expect("copy the guest");
    for file in &cached {
        std::fs::copy(file, dir.join(file.file_name().expect("a name"))).expect("copy the cache");
    }
    let harness = Harness::new(HarnessOptions {
        wasm,
        max_instances: 2,
        ..HarnessOptions::default()
    })
    .expect("loads");
    assert_eq!(harness.origin(), ComponentOrigin::Cached);
    drop(harness);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn an_exhausted_pool_is_an_error_not_a_crash() {
    let harness = Harness::new(HarnessOptions {
        max_instances: 2,
        ..HarnessOptions::default()
    })
    .expect("loads");
    let mut first = harness.instantiate().await.expect("slot 1");
    let _second = harness.instantiate().await.expect("slot 2");
    assert!(harness.instantiate().await.is_err(), "no third slot");
    // The live instances are unaffected, and a slot frees up when an instance drops.
    assert!(first.validate_messages(&[]).await.expect("no trap").is_ok());
    drop(first);
    let mut third = harness.instantiate().await.expect("a freed slot");
    assert!(third.validate_messages(&[]).await.expect("no trap").is_ok());
}

#[tokio::test]
async fn a_test_can_install_its_own_http_hooks() {
    let harness = Harness::shared().expect("loads");
    let mut guest = harness
        .instantiate_with(GuestOptions {
            hooks: Some(Box::new(DenyOutbound)),
            ..GuestOptions::default()
        })
        .await
        .expect("instantiates");
    assert!(guest.validate_messages(&[]).await.expect("no trap").is_ok());
    let _hooks = guest.state_mut().hooks_mut();
}
