//! A host a guest cannot hang or exhaust, and an address guard it cannot talk past:
//!
//! - a call that spends longer than its deadline in the guest ends with
//!   `LimitExceeded::Deadline` (epoch interruption), time spent in host imports does not count,
//!   and the harness goes on with new instances;
//! - a store that grows its linear memory past its cap ends with `LimitExceeded::Memory`, and
//!   other instances of the same harness go on;
//! - `GuardedOutbound` refuses, before any socket opens, a host name that resolves (through a
//!   stub resolver) to loopback, private, link-local, shared, unspecified or metadata addresses
//!   in any of their forms, and connects to exactly the address it checked. Only loopback is
//!   ever connected to here.

use oma_host_tests::Shared;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use oma_host_tests::{
    agent_config, call_options, chat_request, endpoint, AddressPolicy, AllowOutbound,
    BeforeRunAnswer, BeforeRunResult, CaptureOutbound, ErrorKind, GuardedOutbound, GuestOptions,
    Harness, HarnessOptions, LimitExceeded, Limits, RunInput, ScriptedHost, Simulator,
    StaticResolver, WasiHttpHooks, CANNED_TEXT,
};
use serde_json::json;

use crate::common::{text, user};

fn shared() -> &'static Harness {
    Harness::shared().expect("the harness loads the guest")
}

/// A conversation of `count` user turns of `size` bytes of text each.
fn history(count: usize, size: usize) -> String {
    let turn = json!({"role": "user", "content": [{"type": "text", "text": "x".repeat(size)}]});
    serde_json::Value::Array(vec![turn; count]).to_string()
}

#[test]
fn embedders_get_documented_defaults() {
    let defaults = HarnessOptions::new(oma_host_tests::artifact::COMPONENT);
    assert_eq!(defaults.limits, Limits::default());
    assert_eq!(defaults.limits.deadline, Some(Duration::from_secs(30)));
    assert_eq!(defaults.limits.memory, Some(512 << 20));
    assert_eq!(defaults.epoch_tick, Duration::from_millis(10));
    assert_eq!(shared().limits(), Limits::default());
}

#[tokio::test]
async fn a_huge_history_hits_the_memory_cap_and_the_harness_goes_on() {
    let harness = shared();
    let cap = 24 << 20;
    let mut capped = harness
        .instantiate_with(GuestOptions {
            limits: Some(Limits {
                memory: Some(cap),
                ..Limits::default()
            }),
            ..GuestOptions::default()
        })
        .await
        .expect("the guest instantiates under 24 MiB");
    assert_eq!(capped.limits().memory, Some(cap));
    // Small input: fine under the cap.
    let small = history(2, 10);
    assert_eq!(
        capped
            .messages_from_json(&small)
            .await
            .expect("no trap")
            .expect("valid")
            .len(),
        2
    );

    // 32 MiB of history does not fit in 24 MiB: a clean error, no crash, no abort.
    let huge = history(64, 512 << 10);
    assert!(huge.len() > 32 << 20);
    let error = capped
        .messages_from_json(&huge)
        .await
        .expect_err("the cap ends the call");
    match LimitExceeded::of(&error) {
        Some(LimitExceeded::Memory { limit, requested }) => {
            assert_eq!(*limit, cap);
            assert!(*requested > cap, "{requested}");
        }
        other => panic!("not the memory cap: {other:?} ({error:#})"),
    }
    assert!(
        format!("{error:#}").contains("past its limit of 25165824 bytes"),
        "{error:#}"
    );

    // The instance is spent, as after any trap; another one of the same harness takes the same
    // history (its default cap is 512 MiB).
    assert!(capped.messages_from_json(&small).await.is_err());
    let mut other = harness.instantiate().await.expect("instantiates");
    let messages = other
        .messages_from_json(&huge)
        .await
        .expect("no trap under the default cap")
        .expect("valid");
    assert_eq!(messages.len(), 64);
}

/// The portable world runs under the same limits: a run whose input cannot fit ends with the
/// memory error, and another instance of the same harness takes the same input.
#[tokio::test]
async fn the_portable_world_has_the_same_memory_cap() {
    let harness = oma_host_tests::DriverHarness::shared().expect("the portable guest loads");
    let cap = 24 << 20;
    let mut capped = harness
        .instantiate_with(GuestOptions {
            limits: Some(Limits {
                memory: Some(cap),
                ..Limits::default()
            }),
            ..GuestOptions::default()
        })
        .await
        .expect("instantiates under 24 MiB");
    let config = oma_host_tests::agent_config(
        "capped",
        "claude-sonnet-4-6",
        oma_host_tests::endpoint("anthropic", Some("http://127.0.0.1:9"), Some("sk-x")),
    );
    let agent = capped.create_agent(&config).await.unwrap().unwrap();
    let huge = oma_host_tests::RunInput::Text("x".repeat(32 << 20));
    let error = capped
        .run(&agent, &huge)
        .await
        .expect_err("the cap ends the call");
    assert!(
        matches!(
            LimitExceeded::of(&error),
            Some(LimitExceeded::Memory { .. })
        ),
        "{error:#}"
    );
    let mut other = harness
        .instantiate_with(GuestOptions::default())
        .await
        .expect("instantiates");
    let agent = other.create_agent(&config).await.unwrap().unwrap();
    let (store, bindings) = other.parts();
    let session = bindings
        .oma_agent_driver()
        .agent()
        .call_run(
            store,
            agent.resource(),
            &huge,
            &oma_host_tests::driver_types::SessionOptions {
                payloads: oma_host_tests::driver_types::Payloads::Json,
                seed: 1,
                trace: None,
                records: None,
            },
        )
        .await
        .expect("no trap under the default cap");
    assert!(session.is_ok());
}

#[tokio::test]
async fn a_cap_below_what_instantiation_needs_fails_instantiation_cleanly() {
    let harness = shared();
    let error = harness
        .instantiate_with(GuestOptions {
            limits: Some(Limits {
                memory: Some(64 << 10),
                ..Limits::default()
            }),
            ..GuestOptions::default()
        })
        .await
        .expect_err("64 KiB is not enough for the guest");
    assert!(
        matches!(
            LimitExceeded::of(&error),
            Some(LimitExceeded::Memory { limit: 65536, .. })
        ),
        "{error:#}"
    );
    let mut guest = harness.instantiate().await.expect("instantiates");
    assert!(guest.validate_messages(&[]).await.expect("no trap").is_ok());
}

/// The 16 MiB workload takes milliseconds of real work in the guest; with the epoch advancing
/// every millisecond and a deadline of one tick, the call is interrupted, and the harness goes
/// on.
#[tokio::test]
async fn a_call_past_its_deadline_is_interrupted_and_the_harness_goes_on() {
    let tick = Duration::from_millis(1);
    let harness = Harness::new(HarnessOptions {
        max_instances: 4,
        epoch_tick: tick,
        ..HarnessOptions::new(oma_host_tests::artifact::COMPONENT)
    })
    .expect("loads");
    let workload = oma_host_tests::workloads::generate("video-16mib").expect("a workload");
    let one_tick = Limits {
        deadline: Some(tick),
        ..Limits::default()
    };

    let mut guest = harness.instantiate().await.expect("instantiates");
    guest.set_limits(one_tick);
    let started = Instant::now();
    let error = guest
        .messages_from_json(&workload)
        .await
        .expect_err("interrupted");
    assert_eq!(
        LimitExceeded::of(&error),
        Some(&LimitExceeded::Deadline { limit: tick }),
        "{error:#}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    // A guest set up with the short deadline from the start is interrupted the same way.
    drop(guest);

    // The same harness: a new instance with the default deadline does the same work.
    let mut fresh = harness.instantiate().await.expect("instantiates");
    assert_eq!(fresh.limits().deadline, Some(Duration::from_secs(30)));
    let messages = fresh
        .messages_from_json(&workload)
        .await
        .expect("no interruption in 30 s")
        .expect("valid");
    assert_eq!(messages.len(), 1);
    // And the per-call clock restarts: many calls add up to more than one deadline.
    fresh.set_limits(Limits {
        deadline: Some(Duration::from_millis(500)),
        ..Limits::default()
    });
    for _ in 0..20 {
        fresh
            .messages_from_json(&history(10, 100))
            .await
            .expect("no interruption")
            .expect("valid");
    }
}

/// Waiting for the host (here a `beforeRun` hook that takes longer than the whole deadline)
/// is not guest time: the run succeeds.
#[tokio::test]
async fn time_spent_in_host_imports_does_not_count() {
    let host = ScriptedHost::new().with_hook(|context| {
        std::thread::sleep(Duration::from_millis(400));
        BeforeRunAnswer::Typed(BeforeRunResult {
            prompt: context.prompt.clone(),
            messages: None,
        })
    });
    let mut guest = shared()
        .instantiate_with(GuestOptions {
            hooks: Some(Box::new(CaptureOutbound::default())),
            host: Some(Box::new(host)),
            limits: Some(Limits {
                deadline: Some(Duration::from_millis(200)),
                ..Limits::default()
            }),
            ..GuestOptions::default()
        })
        .await
        .expect("instantiates");
    let mut config = agent_config(
        "slow-hook",
        "claude-sonnet-4-6",
        endpoint(
            "anthropic",
            Some("https://api.anthropic.com"),
            Some("sk-test"),
        ),
    );
    config.before_run = true;
    let agent = guest
        .create_agent(&config)
        .await
        .expect("no trap")
        .expect("created");
    let result = guest
        .run(&agent, &RunInput::Text("hi".into()))
        .await
        .expect("not interrupted")
        .expect("runs");
    assert!(result.success, "{result:?}");
    assert_eq!(result.output, CANNED_TEXT);
}

// ---- The address guard, with a stub resolver ----

fn ip(text: &str) -> IpAddr {
    text.parse().expect("an IP address")
}

/// A guest whose outbound HTTP goes through `hooks`.
async fn guest_with(hooks: impl WasiHttpHooks + 'static) -> oma_host_tests::Guest {
    shared()
        .instantiate_with(GuestOptions {
            hooks: Some(Box::new(hooks)),
            ..GuestOptions::default()
        })
        .await
        .expect("instantiates")
}

/// One chat call to `base_url`; the component's error if it failed.
async fn chat(
    hooks: impl WasiHttpHooks + 'static,
    base_url: &str,
) -> Result<(), oma_host_tests::WitError> {
    let mut guest = guest_with(hooks).await;
    let request = chat_request("claude-sonnet-4-6", vec![user(vec![text("hi")])]);
    guest
        .chat(
            &request,
            &endpoint("anthropic", Some(base_url), Some("sk-test")),
            &call_options(),
        )
        .await
        .expect("no trap")
        .map(|_| ())
}

/// Names that resolve to forbidden addresses are refused before any socket opens, whatever the
/// form of the address; the refusal is the component's `EgressDenied`.
#[tokio::test]
async fn names_resolving_to_forbidden_addresses_are_refused_before_connecting() {
    let simulator = Simulator::start().expect("starts");
    let port = simulator.base_url().rsplit(':').next().unwrap().to_owned();
    let cases: &[(&str, &[&str], AddressPolicy)] = &[
        ("loopback.test", &["127.0.0.1"], AddressPolicy::PUBLIC_ONLY),
        (
            "mapped-loopback.test",
            &["::ffff:127.0.0.1"],
            AddressPolicy::PUBLIC_ONLY,
        ),
        ("lan.test", &["192.168.1.20"], AddressPolicy::PUBLIC_ONLY),
        ("ula.test", &["fd12:3456::1"], AddressPolicy::PUBLIC_ONLY),
        ("cgnat.test", &["100.64.0.7"], AddressPolicy::LOCAL_SERVERS),
        (
            "link-local.test",
            &["169.254.10.10"],
            AddressPolicy::LOCAL_SERVERS,
        ),
        (
            "link-local6.test",
            &["fe80::1"],
            AddressPolicy::LOCAL_SERVERS,
        ),
        ("zero.test", &["0.0.0.0"], AddressPolicy::LOCAL_SERVERS),
        (
            "metadata.test",
            &["169.254.169.254"],
            AddressPolicy::LOCAL_SERVERS,
        ),
        (
            "metadata6.test",
            &["fd00:ec2::254"],
            AddressPolicy::LOCAL_SERVERS,
        ),
        (
            "metadata-mapped.test",
            &["::ffff:169.254.169.254"],
            AddressPolicy::LOCAL_SERVERS,
        ),
        (
            "metadata-nat64.test",
            &["64:ff9b::a9fe:a9fe"],
            AddressPolicy::LOCAL_SERVERS,
        ),
        // One bad address among good ones refuses the name: no rebinding through the list.
        (
            "mixed.test",
            &["127.0.0.1", "::ffff:169.254.169.254"],
            AddressPolicy::LOCAL_SERVERS,
        ),
    ];
    for (name, addresses, policy) in cases {
        let resolver = StaticResolver::new().with(name, addresses.iter().map(|a| ip(a)));
        let guard = GuardedOutbound::new(*policy).with_resolver(resolver.clone());
        let error = chat(guard.clone(), &format!("http://{name}:{port}"))
            .await
            .expect_err("refused");
        assert_eq!(error.kind, ErrorKind::EgressDenied, "{name}: {error:?}");
        assert_eq!(
            resolver.lookups(),
            [name.to_string()],
            "{name}: resolved once"
        );
        assert_eq!(guard.connections(), 0, "{name}: no socket");
        let refusals = guard.refusals();
        assert_eq!(refusals.len(), 1, "{name}");
        assert_eq!(refusals[0].host, *name);
        assert!(!refusals[0].addresses.is_empty(), "{name}");
    }
    assert_eq!(simulator.request_count(), 0);
}

/// IP literals are checked as they are, without resolution.
#[tokio::test]
async fn forbidden_ip_literals_are_refused_without_resolution() {
    for host in [
        "169.254.169.254",
        "[::ffff:169.254.169.254]",
        "[::ffff:a9fe:a9fe]",
        "[fd00:ec2::254]",
        "[fe80::1]",
        "0.0.0.0",
    ] {
        let resolver = StaticResolver::new();
        let guard =
            GuardedOutbound::new(AddressPolicy::LOCAL_SERVERS).with_resolver(resolver.clone());
        let error = chat(guard.clone(), &format!("http://{host}:9"))
            .await
            .expect_err("refused");
        assert_eq!(error.kind, ErrorKind::EgressDenied, "{host}: {error:?}");
        assert!(resolver.lookups().is_empty(), "{host}");
        assert_eq!(guard.connections(), 0, "{host}");
        assert_eq!(guard.refusals().len(), 1, "{host}");
    }
}

/// An allowed name is connected to at the very address the resolver gave, and the request
/// still names the host (`Host` header) it was made for.
#[tokio::test]
async fn an_allowed_name_is_reached_at_the_checked_address() {
    let simulator = Simulator::start().expect("starts");
    let port = simulator.base_url().rsplit(':').next().unwrap().to_owned();
    let resolver = StaticResolver::new().with("models.lan.test", [ip("127.0.0.1")]);
    let guard = GuardedOutbound::new(AddressPolicy::LOCAL_SERVERS).with_resolver(resolver);
    chat(guard.clone(), &format!("http://models.lan.test:{port}"))
        .await
        .expect("reached");
    assert_eq!(guard.connections(), 1);
    assert!(guard.refusals().is_empty());
    assert_eq!(simulator.request_count(), 1);
    let request = &simulator.requests()[0];
    let host = request
        .headers
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case("host"))
        .map(|(_, value)| value.as_str());
    assert_eq!(host, Some(format!("models.lan.test:{port}").as_str()));
}

/// The guard keeps connections alive: a second request to the same host reuses the first's
/// connection (and a guard sharing them does too), while a name that resolves to a refused
/// address is refused even though a connection to the same port is open.
#[tokio::test]
async fn the_guard_keeps_connections_alive_and_still_checks_every_request() {
    let simulator = Simulator::start().expect("starts");
    let port = simulator.base_url().rsplit(':').next().unwrap().to_owned();
    let resolver = StaticResolver::new()
        .with("models.lan.test", [ip("127.0.0.1")])
        .with("metadata.test", [ip("169.254.169.254")]);
    let guard = GuardedOutbound::new(AddressPolicy::LOCAL_SERVERS).with_resolver(resolver.clone());
    let url = format!("http://models.lan.test:{port}");
    for _ in 0..3 {
        chat(guard.clone(), &url).await.expect("reached");
    }
    let other = GuardedOutbound::new(AddressPolicy::LOCAL_SERVERS)
        .with_resolver(resolver)
        .sharing_connections(&guard);
    chat(other.clone(), &url).await.expect("reached");
    assert_eq!(simulator.request_count(), 4);
    assert_eq!(
        simulator.connection_count(),
        1,
        "one connection served all four"
    );
    assert_eq!(guard.connections() + other.connections(), 1);
    let error = chat(other.clone(), &format!("http://metadata.test:{port}"))
        .await
        .expect_err("refused");
    assert_eq!(error.kind, ErrorKind::EgressDenied, "{error:?}");
    assert_eq!(simulator.request_count(), 4);
}

/// `AllowOutbound`, the real sender for embedders, is the public-only guard: the loopback
/// simulator is out of its reach.
#[tokio::test]
async fn allow_outbound_is_guarded_by_default() {
    let simulator = Simulator::start().expect("starts");
    let error = chat(AllowOutbound, &simulator.base_url())
        .await
        .expect_err("loopback is not public");
    assert_eq!(error.kind, ErrorKind::EgressDenied, "{error:?}");
    let error = chat(GuardedOutbound::default(), &simulator.base_url())
        .await
        .expect_err("loopback is not public");
    assert_eq!(error.kind, ErrorKind::EgressDenied, "{error:?}");
    assert_eq!(simulator.request_count(), 0);
}
