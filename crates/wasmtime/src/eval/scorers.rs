//! OMA's built-in scorers as [`Scorer`]s: cost budget, dependency utilization, duplicate work,
//! no progress, structured-output compliance and tool-call success. What each computes, and how
//! its options are checked, are the component's rules (the codec's `score-builtin`,
//! docs/evaluation.md#built-in-scorers); a scorer made here hands each sample's result and
//! stored trace to them.

use serde_json::{json, Map, Value};

use super::component::{RuleError, SharedGuest};
use super::runner::{ScoreContext, Scorer};
use super::score::ScoreResult;

/// A scorer made, or its options refused with OMA's class and message (the outer error a trap).
pub type MadeScorer = anyhow::Result<Result<Scorer, RuleError>>;

/// The built-in scorer `name` (as records name it: `cost_budget`, `dependency_utilization`,
/// `duplicate_work`, `no_progress`, `structured_output_compliance`, `tool_call_success`) made
/// with `options` (OMA's option names, as JSON): checked now, with OMA's class and message, an
/// option OMA does not have refused by name. It scores each sample's `result` and `trace` (a
/// scorer without the data it needs says so in its details and scores 1), on `guest`.
pub async fn builtin_scorer(guest: &SharedGuest, name: &str, options: &Value) -> MadeScorer {
    let described = match guest
        .score_builtin(name, &options.to_string(), None)
        .await?
    {
        Ok(text) => serde_json::from_str::<Value>(&text)?,
        Err(error) => return Ok(Err(error.into())),
    };
    let (Some(name), Some(version)) = (
        described["name"].as_str().map(str::to_owned),
        described["version"].as_str().map(str::to_owned),
    ) else {
        anyhow::bail!("the codec described a built-in scorer without its name and version");
    };
    let checked = described["options"].to_string();
    let guest = guest.clone();
    let rule = name.clone();
    let scorer = Scorer::new(name, move |context: ScoreContext| {
        let guest = guest.clone();
        let rule = rule.clone();
        let checked = checked.clone();
        async move {
            let mut given = Map::new();
            if let Some(result) = context.result {
                given.insert("result".into(), result);
            }
            if let Some(trace) = context.trace {
                given.insert("trace".into(), trace);
            }
            let given = Value::Object(given).to_string();
            match guest.score_builtin(&rule, &checked, Some(&given)).await? {
                Ok(text) => Ok(ScoreResult::from_json(&serde_json::from_str(&text)?)?),
                Err(error) => Err(RuleError::from(error).into()),
            }
        }
    })
    .with_version(version);
    Ok(Ok(scorer))
}

/// OMA's `costBudgetScorer({maxTokens?, maxCostAmount?})`: the result's tokens and the trace's
/// costs against hard ceilings (at least one, each positive).
pub async fn cost_budget_scorer(guest: &SharedGuest, options: &Value) -> MadeScorer {
    builtin_scorer(guest, "cost_budget", options).await
}

/// OMA's `dependencyUtilizationScorer()`: the share of the trace's tasks with dependencies
/// whose chains completed.
pub async fn dependency_utilization_scorer(guest: &SharedGuest) -> MadeScorer {
    builtin_scorer(guest, "dependency_utilization", &json!({})).await
}

/// OMA's `duplicateWorkScorer({threshold?})`: pairwise uniqueness of a team's task outputs.
pub async fn duplicate_work_scorer(guest: &SharedGuest, options: &Value) -> MadeScorer {
    builtin_scorer(guest, "duplicate_work", options).await
}

/// OMA's `noProgressScorer({maxStallTurns?})`: runs of failed task attempts without a tool call.
pub async fn no_progress_scorer(guest: &SharedGuest, options: &Value) -> MadeScorer {
    builtin_scorer(guest, "no_progress", options).await
}

/// OMA's `structuredOutputComplianceScorer(schema?)`: the result's structured output is there,
/// and matches `schema` (a JSON Schema, checked by the component) when one is given.
pub async fn structured_output_compliance_scorer(
    guest: &SharedGuest,
    schema: Option<&Value>,
) -> MadeScorer {
    let options = match schema {
        Some(schema) => json!({ "schema": schema }),
        None => json!({}),
    };
    builtin_scorer(guest, "structured_output_compliance", &options).await
}

/// OMA's `toolCallSuccessScorer()`: the share of the run's tool calls that succeeded.
pub async fn tool_call_success_scorer(guest: &SharedGuest) -> MadeScorer {
    builtin_scorer(guest, "tool_call_success", &json!({})).await
}
