//! The embedding itself: one shared harness, the `.cwasm` cache, a bounded
//! instance pool that fails politely, and installable outbound-HTTP hooks.

use std::path::{Path, PathBuf};

use oma_host_tests::{
    ComponentOrigin, ComponentSource, DenyOutbound, GuestOptions, Harness, HarnessOptions, Shared,
};

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
    // The harness runs the bytes the test binary carries, not a file of the build.
    assert_eq!(
        first.component(),
        &ComponentSource::from(oma_host_tests::artifact::COMPONENT)
    );
    assert_eq!(first.component().path(), None);
}

#[test]
fn compiled_code_is_cached_in_a_private_directory_not_beside_the_guest() {
    let shared = Harness::shared().expect("loads");
    let guest_dir = Path::new(oma_host_tests::artifact::COMPONENT_FILE)
        .parent()
        .expect("a directory");
    let Some(cached) = shared.cache_file() else {
        // No private per-user directory here (no HOME, or not Unix): the cache is off.
        return;
    };
    assert!(cached.is_file());
    assert!(!cached.starts_with(guest_dir));
    assert!(oma_host_tests::default_cache_dir().is_some_and(|dir| cached.starts_with(dir)));

    // A file of the same bytes elsewhere loads from the same cache (the key is the engine and
    // the bytes, not where they came from; bytes are filed under the stem `component`), with
    // another pool size (the pool is not part of the key). Misses, corrupt files and unsafe
    // directories: `crates/wasmtime/src/engine.rs`.
    let dir = std::env::temp_dir().join(format!("oma-wasmtime-cache-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let wasm = dir.join("component.wasm");
    std::fs::write(&wasm, oma_host_tests::artifact::COMPONENT).expect("write the guest");
    let harness = Harness::new(HarnessOptions {
        max_instances: 2,
        ..HarnessOptions::new(wasm)
    })
    .expect("loads");
    assert_eq!(harness.origin(), ComponentOrigin::Cached);
    assert_eq!(harness.cache_file(), Some(cached));
    assert!(cwasm_files(&dir).is_empty());
    drop(harness);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn an_exhausted_pool_is_an_error_not_a_crash() {
    let harness = Harness::new(HarnessOptions {
        max_instances: 2,
        ..HarnessOptions::new(oma_host_tests::artifact::COMPONENT)
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

/// A harness with a single instance slot runs every kind of call of one guest, a streamed run
/// to its end and the drop of its stream included: one guest needs one instance, whatever it
/// does. (`oma-host` with `OMA_COMPONENT` used a one-slot harness and failed at the end of
/// `run --stream` with "maximum concurrent limit of 1 for fibers reached".)
#[tokio::test]
async fn a_one_instance_harness_runs_a_whole_streamed_run() {
    use oma_host_tests::{agent_config, endpoint, AgentEvent, LoopbackOnly, RunInput, Simulator};
    let harness = Harness::new(HarnessOptions {
        max_instances: 1,
        ..HarnessOptions::new(oma_host_tests::artifact::COMPONENT)
    })
    .expect("loads");
    let simulator = Simulator::start().expect("the simulator starts");
    for round in 0..2 {
        let mut guest = harness
            .instantiate_with(GuestOptions {
                hooks: Some(Box::new(LoopbackOnly::new())),
                ..GuestOptions::default()
            })
            .await
            .expect("the one slot");
        let config = agent_config(
            "one-slot",
            "gpt-4o",
            endpoint("openai", Some(&simulator.base_url()), Some("sk-one")),
        );
        let agent = guest.create_agent(&config).await.unwrap().expect("valid");
        let input = RunInput::Text("hi".into());
        let result = guest
            .run(&agent, &input)
            .await
            .expect("no trap")
            .expect("ok");
        assert!(result.success, "{round}: {result:?}");
        let stream = guest.stream(&agent, &input).await.unwrap().expect("valid");
        let events = guest
            .collect_agent_stream(stream)
            .await
            .unwrap_or_else(|e| panic!("round {round}: {e:#}"));
        assert!(
            matches!(events.last(), Some(AgentEvent::Done(r)) if r.success),
            "{round}: {events:?}"
        );
        guest.drop_agent(agent).await.expect("dropped");
    }
}
