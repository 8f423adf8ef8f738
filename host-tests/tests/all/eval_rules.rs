//! OMA's evaluation rules through the codec (`score-builtin`, `judge`, `online-evaluation`),
//! through both worlds, over the tables the core's unit tests and the packages' suites run
//! (`fixtures/eval/scorers.json`, `fixtures/eval/online.json`): every built-in scorer's options
//! and scores, every step of a judge scorer, and every online evaluation row (the evaluator's
//! windows as the sequences of steps the table gives), with OMA's error classes and messages.

use oma_host_tests::{ErrorKind, GuestOptions, JudgeStep, OnlineStep, WitError};
use serde_json::Value;

use crate::common::fixture;
use crate::worlds::{AnyGuest, World};

const SCORERS: &str = include_str!("../../../fixtures/eval/scorers.json");
const ONLINE: &str = include_str!("../../../fixtures/eval/online.json");

/// A row's `expect` (compared as JSON text: keys in order) or its `error` against the outcome.
fn check(outcome: Result<String, WitError>, row: &Value, what: &str) {
    match (outcome, row.get("error")) {
        (Ok(text), None) => assert_eq!(text, row["expect"].to_string(), "{what}"),
        (Err(error), Some(wanted)) => {
            assert_eq!(error.kind, ErrorKind::Other, "{what}");
            assert_eq!(error.name, wanted["name"].as_str().unwrap(), "{what}");
            assert_eq!(error.message, wanted["message"].as_str().unwrap(), "{what}");
        }
        (outcome, _) => panic!("{what}: {outcome:?} against {row}"),
    }
}

async fn every_row(world: World) {
    let mut guest = AnyGuest::instantiate(world, GuestOptions::default()).await;
    let table = fixture(SCORERS);
    for case in table["scorers"].as_array().unwrap() {
        let name = format!("{world:?} {}", case["name"]);
        let scored = guest
            .score_builtin(
                case["scorer"].as_str().unwrap(),
                &case["options"].to_string(),
                Some(&case["context"].to_string()),
            )
            .await
            .unwrap();
        check(scored, case, &name);
    }
    for row in table["options"].as_array().unwrap() {
        let name = format!("{world:?} {} {}", row["scorer"], row["options"]);
        let described = guest
            .score_builtin(
                row["scorer"].as_str().unwrap(),
                &row["options"].to_string(),
                None,
            )
            .await
            .unwrap();
        check(described, row, &name);
    }
    let judge = &table["judge"];
    for (key, step, request) in [
        ("options", JudgeStep::Options, "options"),
        ("prompts", JudgeStep::Prompt, "request"),
        ("verdicts", JudgeStep::Verdict, "request"),
        ("aggregates", JudgeStep::Aggregate, "request"),
    ] {
        for row in judge[key].as_array().unwrap() {
            let name = format!("{world:?} {key} {}", row[request]);
            let out = guest.judge(step, &row[request].to_string()).await.unwrap();
            check(out, row, &name);
        }
    }
    let extracted = guest
        .judge(
            JudgeStep::Extract,
            r#"{"output":"```json\n{\"score\":1}\n```"}"#,
        )
        .await
        .unwrap();
    assert_eq!(
        extracted.as_deref(),
        Ok(r#"{"value":{"score":1}}"#),
        "{world:?}"
    );
    let unknown = guest
        .score_builtin("exact_match", "{}", None)
        .await
        .unwrap();
    assert_eq!(unknown.expect_err("not built in").name, "TypeError");
    let broken = guest.judge(JudgeStep::Prompt, "{").await.unwrap();
    assert!(broken.is_err(), "{world:?}: text that is not JSON");
    let online = fixture(ONLINE);
    for (key, step) in [
        ("case", OnlineStep::Case),
        ("record", OnlineStep::Record),
        ("flush", OnlineStep::Flush),
    ] {
        let rows = online[key].as_array().unwrap();
        assert!(!rows.is_empty(), "{key}");
        for row in rows {
            let name = format!("{world:?} online {key} {}", row["name"]);
            let out = guest
                .online_evaluation(step, &row["request"].to_string())
                .await
                .unwrap();
            check(out, row, &name);
        }
    }
    // The evaluator's windows: each row a sequence, each step on the window the last one gave.
    for row in online["window"].as_array().unwrap() {
        let mut window: Option<Value> = None;
        for (index, item) in row["steps"].as_array().unwrap().iter().enumerate() {
            let name = format!("{world:?} online window {} (step {index})", row["name"]);
            let step = match item["step"].as_str().unwrap() {
                "admit" => OnlineStep::Admit,
                "start" => OnlineStep::Start,
                "cost" => OnlineStep::Cost,
                "report" => OnlineStep::Report,
                other => panic!("{name}: no step {other}"),
            };
            let mut request = item["request"].clone();
            if let Some(window) = &window {
                request["window"] = window.clone();
            }
            let out = guest
                .online_evaluation(step, &request.to_string())
                .await
                .unwrap();
            // The answer without its window is the row's; the window goes to the next step.
            let out = out.map(|text| {
                let mut answer: Value = serde_json::from_str(&text).unwrap();
                window = answer.as_object_mut().unwrap().remove("window");
                assert!(window.is_some(), "{name}: a window");
                answer.to_string()
            });
            check(out, item, &name);
        }
    }
}

#[tokio::test]
async fn the_component_world_scores_and_judges_as_the_table_says() {
    every_row(World::Component).await;
}

#[tokio::test]
async fn the_portable_world_scores_and_judges_as_the_table_says() {
    every_row(World::Driver).await;
}
