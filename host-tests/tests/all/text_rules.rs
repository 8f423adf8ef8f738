//! The codec's text rules, which the language packages call instead of keeping copies: OMA's
//! secret redaction (`redact-sensitive-text`, `is-sensitive-name`) and its bash risk classifier
//! (`classify-bash-command`), through both worlds, over the tables the core's unit tests and the
//! packages' suites run (`fixtures/redaction.json`, `fixtures/bash-risk.json`).

use oma_host_tests::{BashRiskLevel, GuestOptions};

use crate::common::fixture;
use crate::worlds::{AnyGuest, World};

const REDACTION: &str = include_str!("../../../fixtures/redaction.json");
const BASH_RISK: &str = include_str!("../../../fixtures/bash-risk.json");

async fn every_row(world: World) {
    let mut guest = AnyGuest::instantiate(world, GuestOptions::default()).await;
    let redaction = fixture(REDACTION);
    for case in redaction["texts"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        let redacted = guest.redact_sensitive_text(text).await.unwrap();
        assert_eq!(
            redacted,
            case["redacted"].as_str().unwrap(),
            "{world:?} {text:?}"
        );
    }
    for case in redaction["names"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let sensitive = guest.is_sensitive_name(name).await.unwrap();
        assert_eq!(
            sensitive,
            case["sensitive"].as_bool().unwrap(),
            "{world:?} {name}"
        );
    }
    let risks = fixture(BASH_RISK);
    let cases = risks["cases"].as_array().unwrap();
    for case in cases {
        let command = case["command"].as_str().unwrap();
        let risk = guest.classify_bash_command(command).await.unwrap();
        let level = match risk.level {
            BashRiskLevel::Safe => "safe",
            BashRiskLevel::Review => "review",
            BashRiskLevel::High => "high",
        };
        assert_eq!(level, case["level"], "{world:?} {command:?}");
        assert_eq!(
            risk.reason,
            case["reason"].as_str().unwrap(),
            "{world:?} {command:?}"
        );
    }
    // Every level comes back, so the enum crosses both ways it can.
    for level in ["safe", "review", "high"] {
        assert!(cases.iter().any(|case| case["level"] == level), "{level}");
    }
}

#[tokio::test]
async fn the_component_world_redacts_and_classifies_as_the_tables_say() {
    every_row(World::Component).await;
}

#[tokio::test]
async fn the_portable_world_redacts_and_classifies_as_the_tables_say() {
    every_row(World::Driver).await;
}
