//! OMA's built-in rule scorers (`docs/evaluation.md#built-in-scorers`): cost budget, dependency
//! utilization, duplicate work, no progress, structured-output compliance and tool-call success.
//! Each reads a run's result (OMA's `AgentRunResult`, or a team's result with its `agentResults`
//! as an object keyed `<agent>:<task>`) and, when the host has one, the run's stored trace
//! (OMA's `StoredRun`), and gives OMA's score result: the score, the verdict when the scorer has
//! one, OMA's reason and OMA's details, keys in OMA's order.
//!
//! A scorer's options are checked when it is made, with OMA's messages; a scorer without the
//! data it needs says so in its details (`applicable: false`) rather than scoring zero.

use std::collections::HashSet;

use serde_json::{json, Map, Value};

use super::{given, number, object, parse, range_error, refuse_unknown, type_error};
use crate::error::Error;
use crate::json::schema;

/// The version every built-in scorer carries (OMA's `version: '1'`).
pub const VERSION: &str = "1";

/// OMA's built-in rule scorers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Builtin {
    /// `costBudgetScorer`: hard token and observed-cost ceilings.
    CostBudget,
    /// `dependencyUtilizationScorer`: dependency-bearing tasks that completed with every
    /// dependency successful.
    DependencyUtilization,
    /// `duplicateWorkScorer`: pairwise uniqueness of a team's task outputs.
    DuplicateWork,
    /// `noProgressScorer`: consecutive failed task attempts that called no tool.
    NoProgress,
    /// `structuredOutputComplianceScorer`: structured output present, and matching a schema.
    StructuredOutputCompliance,
    /// `toolCallSuccessScorer`: the share of recorded tool calls that succeeded.
    ToolCallSuccess,
}

impl Builtin {
    /// Every built-in scorer.
    pub const ALL: [Builtin; 6] = [
        Builtin::CostBudget,
        Builtin::DependencyUtilization,
        Builtin::DuplicateWork,
        Builtin::NoProgress,
        Builtin::StructuredOutputCompliance,
        Builtin::ToolCallSuccess,
    ];

    /// The scorer's name, as its records carry it (`cost_budget`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Builtin::CostBudget => "cost_budget",
            Builtin::DependencyUtilization => "dependency_utilization",
            Builtin::DuplicateWork => "duplicate_work",
            Builtin::NoProgress => "no_progress",
            Builtin::StructuredOutputCompliance => "structured_output_compliance",
            Builtin::ToolCallSuccess => "tool_call_success",
        }
    }

    /// The scorer named `name`, if it is one.
    pub fn from_name(name: &str) -> Option<Builtin> {
        Builtin::ALL.into_iter().find(|b| b.name() == name)
    }

    /// The options the scorer takes, by OMA's names.
    fn option_keys(self) -> &'static [&'static str] {
        match self {
            Builtin::CostBudget => &["maxTokens", "maxCostAmount"],
            Builtin::DuplicateWork => &["threshold"],
            Builtin::NoProgress => &["maxStallTurns"],
            Builtin::StructuredOutputCompliance => &["schema", "hostValidates"],
            Builtin::DependencyUtilization | Builtin::ToolCallSuccess => &[],
        }
    }

    /// OMA's factory, naming the scorer in messages.
    fn factory(self) -> &'static str {
        match self {
            Builtin::CostBudget => "costBudgetScorer",
            Builtin::DependencyUtilization => "dependencyUtilizationScorer",
            Builtin::DuplicateWork => "duplicateWorkScorer",
            Builtin::NoProgress => "noProgressScorer",
            Builtin::StructuredOutputCompliance => "structuredOutputComplianceScorer",
            Builtin::ToolCallSuccess => "toolCallSuccessScorer",
        }
    }
}

/// A scorer's options, checked, with OMA's defaults filled in.
#[derive(Clone, Debug, PartialEq)]
enum Options {
    CostBudget {
        max_tokens: Option<f64>,
        max_cost_amount: Option<f64>,
    },
    DuplicateWork {
        threshold: f64,
    },
    NoProgress {
        max_stall_turns: f64,
    },
    StructuredOutput {
        check: SchemaCheck,
    },
    None,
}

/// How a structured-output scorer checks the value against a schema.
#[derive(Clone, Debug, PartialEq)]
enum SchemaCheck {
    /// No schema: presence only.
    None,
    /// A JSON Schema this component checks.
    Schema(Value),
    /// The host checks with its own schema (a zod schema, a pydantic model) and says whether
    /// the value passed (`schemaValid` in the context).
    Host,
}

/// A positive finite limit, or OMA's `RangeError` naming it.
fn positive_limit(value: Option<&Value>, name: &str) -> Result<Option<f64>, Error> {
    let Some(value) = value else {
        return Ok(None);
    };
    match value.as_f64() {
        Some(x) if x.is_finite() && x > 0.0 => Ok(Some(x)),
        _ => Err(range_error(format!(
            "{name} must be a positive finite number."
        ))),
    }
}

/// `options` of `scorer` checked as OMA checks them when the scorer is made.
fn read_options(scorer: Builtin, options: &Value) -> Result<Options, Error> {
    let empty = Map::new();
    let options = if options.is_null() {
        &empty
    } else {
        object(options, &format!("{} options", scorer.factory()))?
    };
    refuse_unknown(options, scorer.option_keys(), scorer.factory())?;
    Ok(match scorer {
        Builtin::CostBudget => {
            // OMA reads the limits with `=== undefined`: null is a value, and not a positive one.
            let max_tokens = positive_limit(options.get("maxTokens"), "maxTokens")?;
            let max_cost_amount = positive_limit(options.get("maxCostAmount"), "maxCostAmount")?;
            if max_tokens.is_none() && max_cost_amount.is_none() {
                return Err(type_error(
                    "costBudgetScorer requires maxTokens and/or maxCostAmount.",
                ));
            }
            Options::CostBudget {
                max_tokens,
                max_cost_amount,
            }
        }
        Builtin::DuplicateWork => {
            let threshold = match given(options, "threshold") {
                None => 0.8,
                Some(value) => match value.as_f64() {
                    Some(x) if (0.0..=1.0).contains(&x) => x,
                    _ => {
                        return Err(range_error(
                            "DuplicateWorkScorerOptions.threshold must be in the range [0, 1].",
                        ))
                    }
                },
            };
            Options::DuplicateWork { threshold }
        }
        Builtin::NoProgress => {
            let max_stall_turns =
                match given(options, "maxStallTurns") {
                    None => 2.0,
                    Some(value) => match value.as_f64() {
                        Some(x) if x.fract() == 0.0 && x >= 0.0 && x.is_finite() => x,
                        _ => return Err(range_error(
                            "NoProgressScorerOptions.maxStallTurns must be a non-negative integer.",
                        )),
                    },
                };
            Options::NoProgress { max_stall_turns }
        }
        Builtin::StructuredOutputCompliance => {
            let host = match given(options, "hostValidates") {
                None => false,
                Some(Value::Bool(host)) => *host,
                Some(_) => {
                    return Err(type_error(
                        "structuredOutputComplianceScorer hostValidates must be a boolean",
                    ))
                }
            };
            let check = match (given(options, "schema"), host) {
                (Some(_), true) => return Err(type_error(
                    "structuredOutputComplianceScorer takes a schema or hostValidates, not both",
                )),
                (Some(schema), false) => {
                    schema::check_schema(schema).map_err(|why| {
                        type_error(format!(
                            "structuredOutputComplianceScorer schema is not a JSON Schema: {why}"
                        ))
                    })?;
                    SchemaCheck::Schema(schema.clone())
                }
                (None, true) => SchemaCheck::Host,
                (None, false) => SchemaCheck::None,
            };
            Options::StructuredOutput { check }
        }
        Builtin::DependencyUtilization | Builtin::ToolCallSuccess => Options::None,
    })
}

/// The options as a host keeps them: OMA's names, defaults filled in.
fn options_json(options: &Options) -> Value {
    let mut out = Map::new();
    match options {
        Options::CostBudget {
            max_tokens,
            max_cost_amount,
        } => {
            if let Some(x) = max_tokens {
                out.insert("maxTokens".into(), number(*x));
            }
            if let Some(x) = max_cost_amount {
                out.insert("maxCostAmount".into(), number(*x));
            }
        }
        Options::DuplicateWork { threshold } => {
            out.insert("threshold".into(), number(*threshold));
        }
        Options::NoProgress { max_stall_turns } => {
            out.insert("maxStallTurns".into(), number(*max_stall_turns));
        }
        Options::StructuredOutput { check } => match check {
            SchemaCheck::None => {}
            SchemaCheck::Schema(schema) => {
                out.insert("schema".into(), schema.clone());
            }
            SchemaCheck::Host => {
                out.insert("hostValidates".into(), Value::Bool(true));
            }
        },
        Options::None => {}
    }
    Value::Object(out)
}

/// `scorer` with `options` checked as OMA checks them when the scorer is made: its identity and
/// options, `{"name", "version", "options"}`, with OMA's defaults filled in. Fails with OMA's
/// `RangeError` or `TypeError`, or a `TypeError` naming an option OMA does not have.
pub fn describe(scorer: Builtin, options: &Value) -> Result<Value, Error> {
    let options = read_options(scorer, options)?;
    Ok(json!({
        "name": scorer.name(),
        "version": VERSION,
        "options": options_json(&options),
    }))
}

/// What a built-in scorer reads of a sample: the run's result and its stored trace, each when
/// the host has one, and (for a structured-output scorer whose host checks the schema) whether
/// the structured value passed.
struct Context<'a> {
    result: Option<&'a Map<String, Value>>,
    trace: Option<&'a Map<String, Value>>,
    schema_valid: Option<bool>,
}

fn read_context(context: &Value) -> Result<Context<'_>, Error> {
    let context = object(context, "the scorer context")?;
    refuse_unknown(
        context,
        &["result", "trace", "schemaValid"],
        "the scorer context",
    )?;
    let result = match given(context, "result") {
        None => None,
        Some(result) => Some(object(result, "context.result")?),
    };
    let trace = match given(context, "trace") {
        None => None,
        Some(trace) => Some(object(trace, "context.trace")?),
    };
    let schema_valid = match given(context, "schemaValid") {
        None => None,
        Some(Value::Bool(valid)) => Some(*valid),
        Some(_) => return Err(type_error("context.schemaValid must be a boolean")),
    };
    Ok(Context {
        result,
        trace,
        schema_valid,
    })
}

/// OMA's message for a detail value that is no trace attribute (a token count that is not a
/// number makes one).
const BAD_DETAIL: &str = "ScoreResult.details values must be valid TraceAttributeValue values.";

/// The score result of `scorer` with `options` on `context`: OMA's `{score, pass?, reason,
/// details}`. Fails with OMA's error where OMA's scorer throws (a cost budget over several
/// currencies), and with a `TypeError` for options or a context of the wrong shape.
pub fn score(scorer: Builtin, options: &Value, context: &Value) -> Result<Value, Error> {
    let options = read_options(scorer, options)?;
    let context = read_context(context)?;
    match (scorer, &options) {
        (
            Builtin::CostBudget,
            Options::CostBudget {
                max_tokens,
                max_cost_amount,
            },
        ) => cost_budget(*max_tokens, *max_cost_amount, &context),
        (Builtin::DependencyUtilization, _) => Ok(dependency_utilization(&context)),
        (Builtin::DuplicateWork, Options::DuplicateWork { threshold }) => {
            Ok(duplicate_work(*threshold, &context))
        }
        (Builtin::NoProgress, Options::NoProgress { max_stall_turns }) => {
            Ok(no_progress(*max_stall_turns, &context))
        }
        (Builtin::StructuredOutputCompliance, Options::StructuredOutput { check }) => {
            structured_output(check, &context)
        }
        (Builtin::ToolCallSuccess, _) => Ok(tool_call_success(&context)),
        _ => Err(type_error(format!(
            "{} was given options of another scorer",
            scorer.factory()
        ))),
    }
}

/// The codec's entry: `scorer` by name, `options` and (when given) `context` as JSON text.
/// Without a context, the options are checked and described ([`describe`]); with one, the
/// sample is scored ([`score`]).
pub fn score_json(scorer: &str, options: &str, context: Option<&str>) -> Result<String, Error> {
    let builtin = Builtin::from_name(scorer).ok_or_else(|| {
        type_error(format!(
            "\"{scorer}\" is not a built-in scorer (known: {})",
            Builtin::ALL.map(Builtin::name).join(", ")
        ))
    })?;
    let options = parse(options, "scorer's options")?;
    let out = match context {
        None => describe(builtin, &options)?,
        Some(context) => score(builtin, &options, &parse(context, "scorer context")?)?,
    };
    Ok(out.to_string())
}

/// A result: `{score, pass?, reason?, details}` in OMA's key order.
fn result(score: f64, pass: Option<bool>, reason: String, details: Map<String, Value>) -> Value {
    let mut out = Map::new();
    out.insert("score".into(), number(score));
    if let Some(pass) = pass {
        out.insert("pass".into(), Value::Bool(pass));
    }
    out.insert("reason".into(), Value::String(reason));
    out.insert("details".into(), Value::Object(details));
    Value::Object(out)
}

/// `details` from key and value pairs, in order.
fn details<const N: usize>(pairs: [(&str, Value); N]) -> Map<String, Value> {
    pairs
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value))
        .collect()
}

/// A run result's token usage (a team's `totalTokenUsage`, an agent's `tokenUsage`): `None`
/// without one.
fn result_tokens(result: &Map<String, Value>) -> Option<&Value> {
    let usage = if result.contains_key("totalTokenUsage") {
        result.get("totalTokenUsage")
    } else {
        result.get("tokenUsage")
    };
    usage.filter(|usage| !usage.is_null())
}

fn cost_budget(
    max_tokens: Option<f64>,
    max_cost_amount: Option<f64>,
    context: &Context<'_>,
) -> Result<Value, Error> {
    let total_tokens = match context.result.and_then(result_tokens) {
        None => None,
        Some(usage) => {
            let count = |key: &str| usage.get(key).and_then(Value::as_f64);
            match (count("input_tokens"), count("output_tokens")) {
                (Some(input), Some(output)) => Some(input + output),
                _ => return Err(type_error(BAD_DETAIL)),
            }
        }
    };
    let costs: &[Value] = context
        .trace
        .and_then(|trace| trace.get("costs"))
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    let mut currencies: Vec<&Value> = Vec::new();
    for cost in costs {
        let currency = cost.get("currency").unwrap_or(&Value::Null);
        if !currencies.contains(&currency) {
            currencies.push(currency);
        }
    }
    if max_cost_amount.is_some() && currencies.len() > 1 {
        return Err(type_error(
            "costBudgetScorer cannot compare cost amounts across multiple currencies.",
        ));
    }
    let cost_amount = if costs.is_empty() {
        None
    } else {
        let mut sum = 0.0;
        for cost in costs {
            sum += cost
                .get("amount")
                .and_then(Value::as_f64)
                .ok_or_else(|| type_error(BAD_DETAIL))?;
        }
        Some(sum)
    };
    let token_pass = max_tokens
        .zip(total_tokens)
        .map(|(max, total)| total <= max);
    let cost_pass = max_cost_amount
        .zip(cost_amount)
        .map(|(max, amount)| amount <= max);
    let checks: Vec<bool> = [token_pass, cost_pass].into_iter().flatten().collect();
    let pass = checks.iter().all(|pass| *pass);
    let mut missing = Vec::new();
    if max_tokens.is_some() && total_tokens.is_none() {
        missing.push("token usage");
    }
    if max_cost_amount.is_some() && cost_amount.is_none() {
        missing.push("cost data");
    }
    let reason = if !missing.is_empty() {
        format!(
            "{}; {} unavailable.",
            if pass {
                "Configured observed budgets passed"
            } else {
                "A configured observed budget was exceeded"
            },
            missing.join(" and ")
        )
    } else if pass {
        "All configured budgets passed.".to_owned()
    } else {
        "At least one configured budget was exceeded.".to_owned()
    };
    let mut out = details([
        ("applicable", Value::Bool(!checks.is_empty())),
        ("data_complete", Value::Bool(missing.is_empty())),
    ]);
    if let Some(total) = total_tokens {
        out.insert("total_tokens".into(), number(total));
    }
    if let Some(max) = max_tokens {
        out.insert("max_tokens".into(), number(max));
    }
    if let Some(amount) = cost_amount {
        out.insert("cost_amount".into(), number(amount));
    }
    if let Some(max) = max_cost_amount {
        out.insert("max_cost_amount".into(), number(max));
    }
    if let [currency] = currencies.as_slice() {
        if !currency.is_null() {
            out.insert("currency".into(), (*currency).clone());
        }
    }
    Ok(result(
        if pass { 1.0 } else { 0.0 },
        (!checks.is_empty()).then_some(pass),
        reason,
        out,
    ))
}

/// The spans of a stored trace.
fn spans(trace: &Map<String, Value>) -> Vec<&Map<String, Value>> {
    trace
        .get("spans")
        .and_then(Value::as_array)
        .map(|spans| spans.iter().filter_map(Value::as_object).collect())
        .unwrap_or_default()
}

fn str_field<'a>(span: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    span.get(key).and_then(Value::as_str)
}

/// A span's attribute when it is a string.
fn string_attribute<'a>(span: &'a Map<String, Value>, name: &str) -> Option<&'a str> {
    span.get("attributes")
        .and_then(|attributes| attributes.get(name))
        .and_then(Value::as_str)
}

/// A span's attribute when it is a number.
fn number_attribute(span: &Map<String, Value>, name: &str) -> Option<f64> {
    span.get("attributes")
        .and_then(|attributes| attributes.get(name))
        .filter(|value| value.is_number())
        .and_then(Value::as_f64)
}

fn is_kind(span: &Map<String, Value>, kind: &str) -> bool {
    str_field(span, "kind") == Some(kind)
}

fn is_ok(span: &Map<String, Value>) -> bool {
    str_field(span, "status") == Some("ok")
}

fn dependency_utilization(context: &Context<'_>) -> Value {
    let not_applicable = |reason: &str| {
        result(
            1.0,
            None,
            reason.to_owned(),
            details([
                ("applicable", Value::Bool(false)),
                ("dependency_tasks", number(0.0)),
                ("complete_dependency_tasks", number(0.0)),
                ("missing_dependency_links", number(0.0)),
            ]),
        )
    };
    let Some(trace) = context.trace else {
        return not_applicable("No trace was supplied; dependency utilization was not evaluated.");
    };
    let tasks: Vec<_> = spans(trace)
        .into_iter()
        .filter(|span| is_kind(span, "task"))
        .collect();
    // OMA keys the tasks by span id in a Map: a later span with the same id wins.
    let by_span_id = |id: Option<&str>| {
        tasks
            .iter()
            .rev()
            .find(|span| id.is_some() && str_field(span, "spanId") == id)
    };
    let dependent: Vec<(&Map<String, Value>, Vec<&Value>)> = tasks
        .iter()
        .map(|span| {
            let links = span
                .get("links")
                .and_then(Value::as_array)
                .map(|links| {
                    links
                        .iter()
                        .filter(|link| {
                            link.get("relation").and_then(Value::as_str) == Some("depends_on")
                        })
                        .collect()
                })
                .unwrap_or_default();
            (*span, links)
        })
        .filter(|(_, links): &(_, Vec<&Value>)| !links.is_empty())
        .collect();
    if dependent.is_empty() {
        return not_applicable(
            "The trace contained no task dependency links; the scorer is not applicable.",
        );
    }
    let mut missing = 0u32;
    let mut complete = 0u32;
    for (span, links) in &dependent {
        // As OMA's `every`: the first link that is missing or unsuccessful ends the check.
        let mut all_ok = true;
        for link in links {
            match by_span_id(link.get("spanId").and_then(Value::as_str)) {
                None => {
                    missing += 1;
                    all_ok = false;
                    break;
                }
                Some(dependency) if !is_ok(dependency) => {
                    all_ok = false;
                    break;
                }
                Some(_) => {}
            }
        }
        if is_ok(span) && all_ok {
            complete += 1;
        }
    }
    let total = dependent.len() as f64;
    result(
        f64::from(complete) / total,
        None,
        format!(
            "{complete} of {} dependency-bearing tasks completed with all linked dependencies successful.",
            dependent.len()
        ),
        details([
            ("applicable", Value::Bool(true)),
            ("dependency_tasks", number(total)),
            ("complete_dependency_tasks", number(f64::from(complete))),
            ("missing_dependency_links", number(f64::from(missing))),
        ]),
    )
}

/// White space as JavaScript's `\s` and `trim` see it.
fn js_space(c: char) -> bool {
    crate::agent::structured::js_space(c)
}

/// The agent result's output for a task span of a team run, trimmed, when it has one that is
/// not empty: by `<agent>:<task>`, else the first result whose key ends in `:<task>`.
fn task_output(agent_results: &Map<String, Value>, span: &Map<String, Value>) -> Option<String> {
    let task_id = string_attribute(span, "oma.task.id")?;
    let exact = string_attribute(span, "oma.agent.name")
        .and_then(|agent| agent_results.get(&format!("{agent}:{task_id}")));
    let suffix = format!(":{task_id}");
    let matched = exact.or_else(|| {
        agent_results
            .iter()
            .find(|(key, _)| key.ends_with(&suffix))
            .map(|(_, value)| value)
    })?;
    let output = matched.get("output")?.as_str()?.trim_matches(js_space);
    (!output.is_empty()).then(|| output.to_owned())
}

/// The character 3-grams of `text`, lowercased with white space runs made one space and
/// trimmed (the whole text when shorter than three characters).
fn shingles(text: &str) -> HashSet<String> {
    let lower = text.to_lowercase();
    let mut collapsed = String::with_capacity(lower.len());
    let mut in_space = false;
    for c in lower.chars() {
        if js_space(c) {
            if !in_space {
                collapsed.push(' ');
            }
            in_space = true;
        } else {
            collapsed.push(c);
            in_space = false;
        }
    }
    let chars: Vec<char> = collapsed.trim_matches(js_space).chars().collect();
    if chars.is_empty() {
        return HashSet::new();
    }
    let width = chars.len().min(3);
    chars
        .windows(width)
        .map(|window| window.iter().collect())
        .collect()
}

/// Jaccard similarity of two texts' shingles (1 when both have none).
fn similarity(left: &HashSet<String>, right: &HashSet<String>) -> f64 {
    if left.is_empty() && right.is_empty() {
        return 1.0;
    }
    let intersection = left.intersection(right).count() as f64;
    intersection / (left.len() as f64 + right.len() as f64 - intersection)
}

fn duplicate_work(threshold: f64, context: &Context<'_>) -> Value {
    let not_applicable = |reason: &str| {
        result(
            1.0,
            None,
            reason.to_owned(),
            details([
                ("applicable", Value::Bool(false)),
                ("compared_pairs", number(0.0)),
                ("duplicate_pairs", number(0.0)),
                ("threshold", number(threshold)),
                ("max_similarity", number(0.0)),
            ]),
        )
    };
    let agent_results = context
        .result
        .filter(|result| result.contains_key("agentResults"))
        .and_then(|result| result.get("agentResults"))
        .and_then(Value::as_object);
    let (Some(trace), Some(agent_results)) = (context.trace, agent_results) else {
        return not_applicable(
            "A StoredRun trace and TeamRunResult are required; duplicate work was not evaluated.",
        );
    };
    let outputs: Vec<HashSet<String>> = spans(trace)
        .into_iter()
        .filter(|span| is_kind(span, "task"))
        .filter_map(|span| task_output(agent_results, span))
        .map(|output| shingles(&output))
        .collect();
    let mut pairs = 0u32;
    let mut duplicates = 0u32;
    let mut max_similarity = 0.0f64;
    for left in 0..outputs.len() {
        for right in left + 1..outputs.len() {
            let value = similarity(&outputs[left], &outputs[right]);
            pairs += 1;
            max_similarity = max_similarity.max(value);
            if value >= threshold {
                duplicates += 1;
            }
        }
    }
    if pairs == 0 {
        return not_applicable(
            "Fewer than two non-empty task outputs were available; duplicate work was not evaluated.",
        );
    }
    result(
        1.0 - f64::from(duplicates) / f64::from(pairs),
        None,
        format!("{duplicates} of {pairs} task-output pairs met the duplicate-work threshold."),
        details([
            ("applicable", Value::Bool(true)),
            ("compared_pairs", number(f64::from(pairs))),
            ("duplicate_pairs", number(f64::from(duplicates))),
            ("threshold", number(threshold)),
            ("max_similarity", number(max_similarity)),
        ]),
    )
}

fn no_progress(max_stall_turns: f64, context: &Context<'_>) -> Value {
    let not_applicable = |reason: &str| {
        result(
            1.0,
            None,
            reason.to_owned(),
            details([
                ("applicable", Value::Bool(false)),
                ("observed_attempts", number(0.0)),
                ("stalled_attempts", number(0.0)),
                ("max_consecutive_stalls", number(0.0)),
                ("max_stall_turns", number(max_stall_turns)),
            ]),
        )
    };
    let Some(trace) = context.trace else {
        return not_applicable("No trace was supplied; no-progress attempts were not evaluated.");
    };
    let spans = spans(trace);
    // OMA keys the tasks by task id in a Map: a later span with the same id wins.
    let task_of = |task_id: &str| {
        spans.iter().rev().find(|span| {
            is_kind(span, "task") && string_attribute(span, "oma.task.id") == Some(task_id)
        })
    };
    let start = |span: &Map<String, Value>| {
        span.get("startUnixMs")
            .and_then(Value::as_f64)
            .unwrap_or(0.0)
    };
    let mut agents: Vec<&Map<String, Value>> = spans
        .iter()
        .copied()
        .filter(|span| is_kind(span, "agent") && string_attribute(span, "oma.task.id").is_some())
        .collect();
    // A stable sort, as JavaScript's.
    crate::sort::sort_by(&mut agents, &|a, b| start(a).total_cmp(&start(b)));
    let children = |agent: &Map<String, Value>, kind: &str| {
        let id = str_field(agent, "spanId");
        spans
            .iter()
            .filter(|span| {
                is_kind(span, kind) && id.is_some() && str_field(span, "parentSpanId") == id
            })
            .count() as f64
    };
    let end = |span: &Map<String, Value>| span.get("endUnixMs").and_then(Value::as_f64);
    let (mut observed, mut stalled, mut consecutive, mut max_consecutive) =
        (0u32, 0u32, 0u32, 0u32);
    for agent in agents {
        let turns =
            number_attribute(agent, "oma.agent.turns").unwrap_or_else(|| children(agent, "llm"));
        if turns == 0.0 {
            continue;
        }
        observed += 1;
        let tool_calls = number_attribute(agent, "oma.agent.tool_calls")
            .unwrap_or_else(|| children(agent, "tool"));
        let task = string_attribute(agent, "oma.task.id").and_then(task_of);
        let completed_by_attempt = task.is_some_and(|task| {
            is_ok(task)
                && matches!((end(task), end(agent)), (Some(task_end), Some(agent_end)) if task_end <= agent_end)
        });
        if tool_calls == 0.0 && !is_ok(agent) && !completed_by_attempt {
            stalled += 1;
            consecutive += 1;
            max_consecutive = max_consecutive.max(consecutive);
        } else {
            consecutive = 0;
        }
    }
    if observed == 0 {
        return not_applicable(
            "No task-agent attempts with LLM calls were present; the scorer is not applicable.",
        );
    }
    let max = f64::from(max_consecutive);
    let score = if max <= max_stall_turns {
        1.0
    } else if max_stall_turns == 0.0 {
        0.0
    } else {
        max_stall_turns / max
    };
    result(
        score,
        None,
        format!(
            "Maximum consecutive stalled task-agent attempts: {max_consecutive} (allowed: {}).",
            number(max_stall_turns)
        ),
        details([
            ("applicable", Value::Bool(true)),
            ("observed_attempts", number(f64::from(observed))),
            ("stalled_attempts", number(f64::from(stalled))),
            ("max_consecutive_stalls", number(max)),
            ("max_stall_turns", number(max_stall_turns)),
        ]),
    )
}

fn structured_output(check: &SchemaCheck, context: &Context<'_>) -> Result<Value, Error> {
    let checked = !matches!(check, SchemaCheck::None);
    let structured = context.result.and_then(|result| result.get("structured"));
    let Some(structured) = structured else {
        return Ok(result(
            0.0,
            Some(false),
            "The target result did not contain structured output.".to_owned(),
            details([
                ("structured_present", Value::Bool(false)),
                ("schema_checked", Value::Bool(checked)),
            ]),
        ));
    };
    let valid = match check {
        SchemaCheck::None => true,
        SchemaCheck::Schema(schema) => schema::issues(schema, structured).is_empty(),
        SchemaCheck::Host => context.schema_valid.ok_or_else(|| {
            type_error("context.schemaValid must be a boolean when the host checks the schema")
        })?,
    };
    let reason = match (valid, checked) {
        (true, false) => "Structured output was present.",
        (true, true) => "Structured output matched the supplied schema.",
        (false, _) => "Structured output did not match the supplied schema.",
    };
    Ok(result(
        if valid { 1.0 } else { 0.0 },
        Some(valid),
        reason.to_owned(),
        details([
            ("structured_present", Value::Bool(true)),
            ("schema_checked", Value::Bool(checked)),
        ]),
    ))
}

/// The tool calls a run result records: an agent's `toolCalls`, or those of every agent result
/// of a team.
fn result_tool_calls(result: &Map<String, Value>) -> Option<usize> {
    let count = |calls: Option<&Value>| calls.and_then(Value::as_array).map_or(0, Vec::len);
    if result.contains_key("toolCalls") {
        return Some(count(result.get("toolCalls")));
    }
    if result.contains_key("agentResults") {
        return Some(
            result
                .get("agentResults")
                .and_then(Value::as_object)
                .map_or(0, |results| {
                    results
                        .values()
                        .map(|agent| count(agent.get("toolCalls")))
                        .sum()
                }),
        );
    }
    None
}

fn tool_call_success(context: &Context<'_>) -> Value {
    let tool_spans: Vec<_> = context
        .trace
        .map(spans)
        .unwrap_or_default()
        .into_iter()
        .filter(|span| is_kind(span, "tool"))
        .collect();
    let from_trace = !tool_spans.is_empty();
    let total = if from_trace {
        tool_spans.len()
    } else {
        context.result.and_then(result_tool_calls).unwrap_or(0)
    };
    // A result's tool calls say nothing of errors: without a trace they count as successful.
    let successful = if from_trace {
        tool_spans
            .iter()
            .filter(|span| {
                let is_error = span
                    .get("attributes")
                    .and_then(|attributes| attributes.get("oma.tool.is_error"))
                    == Some(&Value::Bool(true));
                !is_error && is_ok(span)
            })
            .count()
    } else {
        total
    };
    if total == 0 {
        return result(
            1.0,
            Some(true),
            "No tool calls were recorded; the scorer is not applicable.".to_owned(),
            details([
                ("tool_calls", number(0.0)),
                ("successful_tool_calls", number(0.0)),
                ("source", Value::from("none")),
            ]),
        );
    }
    result(
        successful as f64 / total as f64,
        Some(successful == total),
        format!("{successful} of {total} recorded tool calls succeeded."),
        details([
            ("tool_calls", number(total as f64)),
            ("successful_tool_calls", number(successful as f64)),
            (
                "source",
                Value::from(if from_trace { "trace" } else { "result" }),
            ),
        ]),
    )
}

#[cfg(test)]
mod tests;
