use serde_json::{json, Value};

use super::*;

fn table() -> Value {
    serde_json::from_str(include_str!("../../../../../fixtures/eval/scorers.json"))
        .expect("the table")
}

/// A row's `expect` against the value, or its `error` (`{"name", "message"}`) against the error.
fn check(outcome: Result<Value, Error>, row: &Value, name: &str) {
    match (outcome, row.get("error")) {
        (Ok(value), None) => {
            let expect = &row["expect"];
            assert_eq!(&value, expect, "{name}");
            assert_eq!(value.to_string(), expect.to_string(), "{name}: key order");
        }
        (Err(error), Some(wanted)) => {
            assert_eq!(error.name(), wanted["name"], "{name}");
            assert_eq!(error.to_string(), wanted["message"], "{name}");
        }
        (outcome, _) => panic!("{name}: {outcome:?} against {row}"),
    }
}

/// The shared table (`fixtures/eval/scorers.json`), which the codec and both packages run too.
#[test]
fn the_shared_scorer_table() {
    let table = table();
    let cases = table["scorers"].as_array().expect("scorers");
    assert!(cases.len() >= 30);
    for scorer in Builtin::ALL {
        assert!(
            cases.iter().any(|c| c["scorer"] == scorer.name()),
            "{} has cases",
            scorer.name()
        );
    }
    for case in cases {
        let name = case["name"].as_str().expect("a name");
        let scorer = Builtin::from_name(case["scorer"].as_str().expect("a scorer")).expect(name);
        check(
            score(scorer, &case["options"], &case["context"]),
            case,
            name,
        );
    }
}

#[test]
fn the_shared_option_table() {
    for row in table()["options"].as_array().expect("options") {
        let scorer = Builtin::from_name(row["scorer"].as_str().expect("a scorer")).expect("known");
        let name = format!("{} {}", row["scorer"], row["options"]);
        check(describe(scorer, &row["options"]), row, &name);
    }
}

#[test]
fn the_codec_entry_reads_json_and_names_what_it_refuses() {
    let described = score_json("no_progress", "{}", None).expect("described");
    assert_eq!(
        described,
        r#"{"name":"no_progress","version":"1","options":{"maxStallTurns":2}}"#
    );
    let scored = score_json("tool_call_success", "null", Some("{}")).expect("scored");
    assert!(scored.starts_with(r#"{"score":1,"pass":true,"#), "{scored}");

    let unknown = score_json("exact_match", "{}", None).expect_err("not built in");
    assert_eq!(unknown.name(), "TypeError");
    assert!(unknown
        .to_string()
        .contains("\"exact_match\" is not a built-in scorer"));
    let option = score_json("cost_budget", r#"{"maxTokens":1,"budget":2}"#, None)
        .expect_err("an option OMA does not have");
    assert!(
        option.to_string().contains("the option \"budget\""),
        "{option}"
    );
    let context = score_json("tool_call_success", "{}", Some(r#"{"output":"x"}"#))
        .expect_err("a context key the scorers do not read");
    assert!(context.to_string().contains("\"output\""), "{context}");
    assert!(score_json("tool_call_success", "{", None).is_err());
    assert!(score_json("tool_call_success", "{}", Some("[]")).is_err());
}

#[test]
fn a_structured_output_schema_the_host_checks() {
    let options = json!({"hostValidates": true});
    let present = json!({"result": {"structured": {"a": 1}}, "schemaValid": false});
    let scored = score(Builtin::StructuredOutputCompliance, &options, &present).expect("scored");
    assert_eq!(scored["score"], 0);
    assert_eq!(scored["details"]["schema_checked"], true);
    let unsaid = json!({"result": {"structured": {"a": 1}}});
    assert!(score(Builtin::StructuredOutputCompliance, &options, &unsaid).is_err());
    let both = json!({"hostValidates": true, "schema": {"type": "object"}});
    assert!(describe(Builtin::StructuredOutputCompliance, &both).is_err());
    let not_a_schema = json!({"schema": {"type": "object", "if": {}}});
    assert!(describe(Builtin::StructuredOutputCompliance, &not_a_schema).is_err());
}

#[test]
fn token_counts_that_are_not_numbers_are_refused_as_oma_refuses_the_detail() {
    let context = json!({"result": {"tokenUsage": {"input_tokens": "4", "output_tokens": 2}}});
    let error =
        score(Builtin::CostBudget, &json!({"maxTokens": 5}), &context).expect_err("refused");
    assert_eq!(error.to_string(), BAD_DETAIL);
}

#[test]
fn long_outputs_are_compared_in_time() {
    let text: String = (0..20_000)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    let spans: Vec<Value> = (1..=4)
        .map(|i| json!({"kind": "task", "attributes": {"oma.task.id": format!("t{i}")}}))
        .collect();
    let results: serde_json::Map<String, Value> = (1..=4)
        .map(|i| (format!("a:t{i}"), json!({"output": text})))
        .collect();
    let context = json!({"trace": {"spans": spans}, "result": {"agentResults": results}});
    let scored = score(Builtin::DuplicateWork, &json!({}), &context).expect("scored");
    assert_eq!(scored["details"]["duplicate_pairs"], 6);
}
