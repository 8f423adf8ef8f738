use serde_json::{json, Value};

use super::*;

fn table() -> Value {
    let table: Value =
        serde_json::from_str(include_str!("../../../../../fixtures/eval/scorers.json"))
            .expect("the table");
    table["judge"].clone()
}

fn check(outcome: Result<Value, Error>, row: &Value, name: &str) {
    match (outcome, row.get("error")) {
        (Ok(value), None) => {
            assert_eq!(value, row["expect"], "{name}");
            assert_eq!(
                value.to_string(),
                row["expect"].to_string(),
                "{name}: key order"
            );
        }
        (Err(error), Some(wanted)) => {
            assert_eq!(error.name(), wanted["name"], "{name}");
            assert_eq!(error.to_string(), wanted["message"], "{name}");
        }
        (outcome, _) => panic!("{name}: {outcome:?} against {row}"),
    }
}

/// The judge rows of the shared table (`fixtures/eval/scorers.json`).
#[test]
fn the_shared_judge_tables() {
    let table = table();
    for row in table["options"].as_array().expect("options") {
        check(options(&row["options"]), row, &row["options"].to_string());
    }
    for row in table["prompts"].as_array().expect("prompts") {
        check(
            prompt(&row["request"]),
            row,
            row["name"].as_str().expect("a name"),
        );
    }
    for row in table["verdicts"].as_array().expect("verdicts") {
        check(
            verdict(&row["request"]),
            row,
            row["name"].as_str().expect("a name"),
        );
    }
    for row in table["aggregates"].as_array().expect("aggregates") {
        check(
            aggregate(&row["request"]),
            row,
            row["name"].as_str().expect("a name"),
        );
    }
}

#[test]
fn extract_reads_an_answer_as_a_structured_answer_is_read() {
    let value = extract(&json!({"output": "The verdict: {\"score\": 1}"})).expect("read");
    assert_eq!(value, json!({"value": {"score": 1}}));
    let error = extract(&json!({"output": "none"})).expect_err("no JSON");
    assert_eq!(error.name(), "Error");
    assert!(extract(&json!({"output": 1})).is_err());
}

#[test]
fn requests_name_what_they_do_not_take() {
    let error = prompt(&json!({"instructions": "x"})).expect_err("unknown");
    assert!(error.to_string().contains("\"instructions\""), "{error}");
    assert!(prompt(&json!({"preset": "faithfulness"})).is_err());
    assert!(prompt(&json!({"preset": "answer_relevancy", "instruction": "x"})).is_err());
    assert!(prompt(&json!({"schema": 3})).is_err());
    let both = json!({"judge": {"name": "j"}, "output": "{}", "value": {}});
    assert!(verdict(&both).is_err());
    let schema_and_value = json!({"judge": {"name": "j"}, "value": {"score": 1}, "schema": {}});
    assert!(verdict(&schema_and_value).is_err());
    assert!(
        verdict(&json!({"output": "{}"})).is_err(),
        "a judge without a name"
    );
    assert!(aggregate(&json!({"verdicts": [], "quorum": 1})).is_err());
    assert!(options(&json!({"judges": [{"name": "a"}], "verdictSchema": {}})).is_err());
    assert!(judge_json(Step::Prompt, "{").is_err());
}

#[test]
fn the_codec_entry_gives_json_text() {
    let out = judge_json(Step::Options, r#"{"judges":[{"name":"a"},{"name":"b"}]}"#).expect("ok");
    assert_eq!(
        out,
        r#"{"judges":[{"name":"a","model":"unknown"},{"name":"b","model":"unknown"}],"quorum":1}"#
    );
}
