use serde_json::Value;

use super::*;

fn table() -> Value {
    serde_json::from_str(include_str!("../../../../../fixtures/eval/online.json"))
        .expect("the table")
}

/// Every row of the shared table (`fixtures/eval/online.json`), which the codec and both
/// packages run too: the answer and its key order, or the error's name and message.
#[test]
fn the_shared_online_table() {
    let table = table();
    for (key, step) in [
        ("case", Step::Case),
        ("record", Step::Record),
        ("flush", Step::Flush),
    ] {
        let rows = table[key].as_array().expect("rows");
        assert!(!rows.is_empty(), "{key}");
        for row in rows {
            let name = format!("{key}: {}", row["name"]);
            match (
                online_json(step, &row["request"].to_string()),
                row.get("error"),
            ) {
                (Ok(text), None) => assert_eq!(text, row["expect"].to_string(), "{name}"),
                (Err(error), Some(wanted)) => {
                    assert_eq!(error.name(), wanted["name"], "{name}");
                    assert_eq!(error.to_string(), wanted["message"], "{name}");
                }
                (outcome, _) => panic!("{name}: {outcome:?}"),
            }
        }
    }
}

/// The step of a window row's step name.
fn window_step(name: &str) -> Step {
    match name {
        "admit" => Step::Admit,
        "start" => Step::Start,
        "cost" => Step::Cost,
        "report" => Step::Report,
        other => panic!("no window step {other}"),
    }
}

/// Every sequence of the table's `window` rows, each step given the window the previous one
/// answered with: the answer without its window (and its key order), or the error.
#[test]
fn the_shared_window_table() {
    let table = table();
    let rows = table["window"].as_array().expect("rows");
    assert!(!rows.is_empty());
    for row in rows {
        let mut window: Option<Value> = None;
        for (index, step) in row["steps"].as_array().expect("steps").iter().enumerate() {
            let name = format!("window: {} (step {index})", row["name"]);
            let mut request = step["request"].clone();
            if let Some(window) = &window {
                request["window"] = window.clone();
            }
            let outcome = online_json(
                window_step(step["step"].as_str().expect("step")),
                &request.to_string(),
            );
            match (outcome, step.get("error")) {
                (Ok(text), None) => {
                    let mut answer: Value = serde_json::from_str(&text).expect("JSON");
                    window = answer.as_object_mut().expect("object").remove("window");
                    assert!(window.is_some(), "{name}: a window");
                    assert_eq!(answer.to_string(), step["expect"].to_string(), "{name}");
                }
                (Err(error), Some(wanted)) => {
                    assert_eq!(error.name(), wanted["name"], "{name}");
                    assert_eq!(error.to_string(), wanted["message"], "{name}");
                }
                (outcome, _) => panic!("{name}: {outcome:?}"),
            }
        }
    }
}

#[test]
fn a_window_round_trips_and_a_foreign_one_is_refused() {
    let first = online_json(
        Step::Admit,
        r#"{"now":0,"budget":{"maxEvaluationsPerMinute":2,"maxCostPerHour":1},"entryId":1,"evaluations":1,"queueLength":0,"maxQueueLength":1,"sample":true}"#,
    )
    .unwrap();
    let first: Value = serde_json::from_str(&first).unwrap();
    let cost = online_json(
        Step::Cost,
        &serde_json::json!({"now": 1.5, "window": first["window"], "amounts": [0.25]}).to_string(),
    )
    .unwrap();
    let cost: Value = serde_json::from_str(&cost).unwrap();
    assert_eq!(
        cost["window"],
        serde_json::json!({
            "reservations": [{"entryId": 1, "at": 0, "count": 1}],
            "costs": [{"at": 1.5, "amount": 0.25}],
            "diagnostics": {}
        })
    );
    let foreign = online_json(
        Step::Report,
        r#"{"now":0,"window":{"queue":[]},"event":"flush_timeout"}"#,
    )
    .unwrap_err();
    assert_eq!(foreign.name(), "TypeError");
}

#[test]
fn a_cut_never_splits_a_character() {
    // 11 code units are left for the text: five whole emoji (two units each), not five and a half.
    let cut = truncate(&"\u{1F600}".repeat(100), 40);
    assert_eq!(
        cut,
        format!("{}\n[truncated at 40 characters]", "\u{1F600}".repeat(5))
    );
}

#[test]
fn text_that_is_not_json_is_a_type_error() {
    let error = online_json(Step::Flush, "{").unwrap_err();
    assert_eq!(error.name(), "TypeError");
}
