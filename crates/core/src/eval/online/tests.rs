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
