//! OMA's evaluation framework of the Rust embedding (`oma_wasmtime::eval`) over the shared
//! tables the JavaScript and Python packages run: `fixtures/eval/sets.json` (eval sets and what
//! a scorer may answer) and `fixtures/eval/reports.json` (aggregates and gates). Every row runs:
//! the tables hand values over as OMA's JSON, which is how the Rust API takes sets, score
//! results, records, policies and reports.

use oma_host_tests::eval::{
    aggregate_records, evaluate_gate, EvalSet, GatePolicy, ScoreResult, ScorerRef,
};
use serde_json::Value;

use crate::common::fixture;

const SETS: &str = include_str!("../../../fixtures/eval/sets.json");
const REPORTS: &str = include_str!("../../../fixtures/eval/reports.json");

/// JSON values equal with numbers compared as numbers (`1` and `1.0` are equal), as the tables'
/// contracts compare them.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

#[test]
fn sets_table() {
    let table = fixture(SETS);
    let valid = table["valid"].as_array().unwrap();
    assert!(!valid.is_empty());
    for row in valid {
        let set = EvalSet::define(&row["set"]).unwrap_or_else(|e| panic!("{}: {e}", row["name"]));
        assert_eq!(set.to_json(), row["expect"], "{}", row["name"]);
    }
    let invalid = table["invalid"].as_array().unwrap();
    assert!(!invalid.is_empty());
    for row in invalid {
        let error = EvalSet::define(&row["set"]).expect_err(&row["set"].to_string());
        assert_eq!(
            error.field,
            row["field"].as_str().unwrap(),
            "{}",
            row["set"]
        );
        match row.get("message") {
            Some(message) => assert_eq!(error.message, message.as_str().unwrap(), "{}", row["set"]),
            None => assert!(
                error.message.starts_with(&error.field),
                "{}: {}",
                row["set"],
                error.message
            ),
        }
    }
}

#[test]
fn scores_table() {
    let rows = fixture(SETS)["scores"].as_array().unwrap().clone();
    assert!(!rows.is_empty());
    for row in rows {
        match (
            ScoreResult::from_json(&row["result"]),
            row["error"].as_str(),
        ) {
            (Ok(result), None) => {
                assert!(same(&result.to_json(), &row["result"]), "{}", row["result"])
            }
            (Err(error), Some(message)) => assert_eq!(error.message, message, "{}", row["result"]),
            (outcome, _) => panic!("{}: {outcome:?}", row["result"]),
        }
    }
}

#[test]
fn typed_score_results_are_checked_as_json_ones() {
    let out_of_range = ScoreResult::new(f64::NAN).check().unwrap_err();
    assert_eq!(
        out_of_range.message,
        "ScoreResult.score must be a finite number in the range [0, 1]."
    );
    let mut nested = ScoreResult::new(0.5);
    nested.details = Some(serde_json::from_str(r#"{"d": {"x": 1}}"#).unwrap());
    assert_eq!(
        nested.check().unwrap_err().message,
        "ScoreResult.details values must be valid TraceAttributeValue values."
    );
    assert!(ScoreResult::new(1.0).check().is_ok());
}

fn scorer_ref(value: &Value) -> ScorerRef {
    ScorerRef {
        name: value["name"].as_str().unwrap().to_owned(),
        version: value.get("version").map(|v| v.as_str().unwrap().to_owned()),
    }
}

#[test]
fn aggregates_table() {
    let table = fixture(REPORTS);
    let rows = table["aggregates"].as_array().unwrap();
    assert!(!rows.is_empty());
    for row in rows {
        let records = row["records"].as_array().unwrap();
        let scorers: Vec<ScorerRef> = row["scorers"]
            .as_array()
            .unwrap()
            .iter()
            .map(scorer_ref)
            .collect();
        let tags: Vec<(String, Vec<String>)> = row["tagsByCase"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(id, tags)| {
                let tags = tags
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| t.as_str().unwrap().to_owned());
                (id.clone(), tags.collect())
            })
            .collect();
        let got: Vec<Value> = aggregate_records(records, &scorers, &tags)
            .iter()
            .map(|a| a.to_json())
            .collect();
        let got = Value::Array(got);
        assert!(same(&got, &row["expect"]), "{}: {got}", row["name"]);
    }
}

#[test]
fn gates_table() {
    let table = fixture(REPORTS);
    let rows = table["gates"].as_array().unwrap();
    assert!(!rows.is_empty());
    for row in rows {
        let policy = GatePolicy::from_json(&row["policy"])
            .unwrap_or_else(|e| panic!("{}: {e}", row["name"]));
        let got = evaluate_gate(&row["report"], &policy, row.get("baseline")).to_json();
        assert!(same(&got, &row["expect"]), "{}: {got}", row["name"]);
    }
    let refused = table["refusedPolicies"].as_array().unwrap();
    assert!(!refused.is_empty());
    for row in refused {
        let error = GatePolicy::from_json(&row["policy"]).expect_err(&row["policy"].to_string());
        assert_eq!(
            error.field,
            row["field"].as_str().unwrap(),
            "{}",
            row["policy"]
        );
    }
}
