//! OMA's `buildExecutionReceipt` (`docs/observability.md#execution-receipts`): the facts of an
//! execution (which worker roles ran, in what order, what depended on what, the tokens and the
//! time it took, whether the facts are complete) read from a run's result and, optionally, its
//! legacy trace events, never from the text the agents wrote.
//!
//! A pure function over OMA's JSON that never fails: what it cannot read makes the receipt
//! `partial`, and a result that is no object gives the empty receipt.

use serde_json::{Map, Value};

/// The flags a receipt copies from a result.
const FLAGS: [&str; 3] = [
    "consequential-no-independence",
    "governance-overridden",
    "review-skipped-due-to-budget",
];

/// The scopes an approval decision may have.
const SCOPES: [&str; 4] = ["plan", "task_round", "task_dispatch", "tool_call"];

/// A non-empty string.
fn text(value: Option<&Value>) -> Option<&str> {
    value.and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// A worker's role: a name that is neither `unknown` nor a coordinator's.
fn worker(value: Option<&Value>) -> Option<&str> {
    text(value).filter(|role| {
        *role != "unknown" && *role != "coordinator" && !role.starts_with("coordinator:")
    })
}

fn finite(value: Option<&Value>) -> Option<f64> {
    value.and_then(Value::as_f64).filter(|x| x.is_finite())
}

/// A number as JavaScript writes it.
fn number(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 9_007_199_254_740_992.0 {
        Value::from(x as i64)
    } else {
        serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
    }
}

/// `{input, output}` of a token usage with both counts, else `null`.
fn tokens(value: Option<&Value>) -> Value {
    let Some(usage) = value.and_then(Value::as_object) else {
        return Value::Null;
    };
    match (usage.get("input_tokens"), usage.get("output_tokens")) {
        (Some(input), Some(output)) if finite(Some(input)).and(finite(Some(output))).is_some() => {
            let mut out = Map::new();
            out.insert("input".into(), input.clone());
            out.insert("output".into(), output.clone());
            Value::Object(out)
        }
        _ => Value::Null,
    }
}

/// The known flags of a result, each once, in their order.
fn flags(value: Option<&Value>) -> Option<Value> {
    let mut out: Vec<Value> = Vec::new();
    for flag in value?.as_array()? {
        if let Some(flag) = flag.as_str().filter(|f| FLAGS.contains(f)) {
            if !out.iter().any(|known| known == flag) {
                out.push(Value::from(flag));
            }
        }
    }
    (!out.is_empty()).then_some(Value::Array(out))
}

/// The well-formed approval decisions of a result.
fn approvals(value: Option<&Value>) -> Option<Value> {
    let mut out = Vec::new();
    for item in value?.as_array()? {
        let Some(reviewer) = item.get("reviewer").filter(|r| r.is_object()) else {
            continue;
        };
        if !item.is_object() {
            continue;
        }
        let request_id = text(item.get("requestId"));
        let scope = item
            .get("scope")
            .and_then(Value::as_str)
            .filter(|s| SCOPES.contains(s));
        let hash = text(item.get("requestHash"));
        let decision = item
            .get("decision")
            .and_then(Value::as_str)
            .filter(|d| *d == "approved" || *d == "rejected");
        let reviewer_id = text(reviewer.get("id"));
        let display = text(reviewer.get("displayName"));
        let decided = text(item.get("decidedAt"));
        let (
            Some(request_id),
            Some(scope),
            Some(hash),
            Some(decision),
            Some(reviewer_id),
            Some(decided),
        ) = (request_id, scope, hash, decision, reviewer_id, decided)
        else {
            continue;
        };
        let mut kept = Map::new();
        kept.insert("requestId".into(), Value::from(request_id));
        kept.insert("scope".into(), Value::from(scope));
        kept.insert("requestHash".into(), Value::from(hash));
        kept.insert("decision".into(), Value::from(decision));
        kept.insert("reviewerId".into(), Value::from(reviewer_id));
        if let Some(display) = display {
            kept.insert("reviewerDisplayName".into(), Value::from(display));
        }
        kept.insert("decidedAt".into(), Value::from(decided));
        out.push(Value::Object(kept));
    }
    (!out.is_empty()).then_some(Value::Array(out))
}

/// The receipt of nothing readable.
fn empty() -> Value {
    let mut out = Map::new();
    out.insert("mode".into(), Value::from("single"));
    for key in [
        "rolesExecuted",
        "workerInstancesExecuted",
        "executionOrder",
        "dependencyEdges",
    ] {
        out.insert(key.into(), Value::Array(Vec::new()));
    }
    out.insert("independentRolesCount".into(), Value::from(0));
    out.insert("independentReviewOccurred".into(), Value::from(false));
    out.insert("totalTokens".into(), Value::Null);
    out.insert("durationMs".into(), Value::Null);
    out.insert("partial".into(), Value::from(true));
    Value::Object(out)
}

/// Roles in the order they were first seen, with their earliest start.
#[derive(Default)]
struct Earliest(Vec<(String, f64)>);

impl Earliest {
    fn see(&mut self, role: &str, start: f64) {
        match self.0.iter_mut().find(|(r, _)| r == role) {
            Some((_, earliest)) if start < *earliest => *earliest = start,
            Some(_) => {}
            None => self.0.push((role.to_owned(), start)),
        }
    }

    fn get(&self, role: &str) -> Option<f64> {
        self.0.iter().find(|(r, _)| r == role).map(|(_, s)| *s)
    }

    /// `roles` by earliest start, ties in their order.
    fn order(&self, roles: &[String]) -> Vec<String> {
        let earliest = |role: &String| self.get(role).unwrap_or(0.0);
        crate::sort::sorted(roles.to_vec(), &|a: &String, b: &String| {
            earliest(a).total_cmp(&earliest(b))
        })
    }
}

fn strings(items: &[String]) -> Value {
    Value::from(items.to_vec())
}

/// The head of a receipt: its ids, flags and approvals, in OMA's order.
fn head(result: &Map<String, Value>, ids: &[(&str, Option<&str>)]) -> Map<String, Value> {
    let mut out = Map::new();
    for (key, id) in ids {
        if let Some(id) = id {
            out.insert((*key).into(), Value::from(*id));
        }
    }
    if let Some(flags) = flags(result.get("flags")) {
        out.insert("flags".into(), flags);
    }
    if let Some(approvals) = approvals(result.get("approvalDecisions")) {
        out.insert("approvalDecisions".into(), approvals);
    }
    out
}

/// A single agent's receipt: the worker roles of its `agent` events.
fn agent_receipt(
    result: &Map<String, Value>,
    events: &[&Map<String, Value>],
    partial: bool,
) -> Value {
    let workers: Vec<&&Map<String, Value>> = events
        .iter()
        .filter(|e| e.get("type").and_then(Value::as_str) == Some("agent"))
        .filter(|e| worker(e.get("agent")).is_some())
        .collect();
    let mut earliest = Earliest::default();
    let mut missing = false;
    for event in &workers {
        match (worker(event.get("agent")), finite(event.get("startMs"))) {
            (Some(role), Some(start)) => earliest.see(role, start),
            _ => missing = true,
        }
    }
    let roles: Vec<String> = earliest.0.iter().map(|(r, _)| r.clone()).collect();
    let order = earliest.order(&roles);
    let starts: Vec<f64> = workers
        .iter()
        .filter_map(|e| finite(e.get("startMs")))
        .collect();
    let ends: Vec<f64> = workers
        .iter()
        .filter_map(|e| finite(e.get("endMs")))
        .collect();
    let duration = (!starts.is_empty() && !ends.is_empty()).then(|| {
        let last = ends.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let first = starts.iter().copied().fold(f64::INFINITY, f64::min);
        (last - first).max(0.0)
    });
    let total = tokens(result.get("tokenUsage"));
    let partial = partial
        || workers.is_empty()
        || roles.is_empty()
        || missing
        || duration.is_none()
        || total.is_null();
    let mut out = head(result, &[]);
    out.insert("mode".into(), Value::from(mode(&roles)));
    out.insert("rolesExecuted".into(), strings(&roles));
    out.insert("workerInstancesExecuted".into(), strings(&roles));
    out.insert("executionOrder".into(), strings(&order));
    out.insert("dependencyEdges".into(), Value::Array(Vec::new()));
    out.insert("independentRolesCount".into(), Value::from(roles.len()));
    out.insert("independentReviewOccurred".into(), Value::from(false));
    out.insert("totalTokens".into(), total);
    out.insert("durationMs".into(), duration.map_or(Value::Null, number));
    out.insert("partial".into(), Value::from(partial));
    Value::Object(out)
}

fn mode(roles: &[String]) -> &'static str {
    if roles.len() > 1 {
        "multi-agent"
    } else {
        "single"
    }
}

/// What a receipt knows of one task.
struct Task {
    id: Option<String>,
    role: Option<String>,
    task_role: Option<String>,
    depends_on: Vec<String>,
    start: Option<f64>,
}

/// The `task` events of a trace, by task id: the earliest start of each.
fn traced_tasks(events: &[&Map<String, Value>]) -> Vec<Task> {
    let mut tasks: Vec<Task> = Vec::new();
    for event in events {
        if event.get("type").and_then(Value::as_str) != Some("task") {
            continue;
        }
        let Some(id) = text(event.get("taskId")) else {
            continue;
        };
        let candidate = Task {
            id: Some(id.to_owned()),
            role: worker(event.get("agent")).map(str::to_owned),
            task_role: text(event.get("taskRole")).map(str::to_owned),
            depends_on: Vec::new(),
            start: finite(event.get("startMs")),
        };
        match tasks.iter_mut().find(|t| t.id.as_deref() == Some(id)) {
            None => tasks.push(candidate),
            Some(known) => {
                let earlier = match (candidate.start, known.start) {
                    (Some(c), Some(k)) => c < k,
                    (Some(_), None) => true,
                    (None, _) => false,
                };
                if earlier {
                    *known = candidate;
                }
            }
        }
    }
    tasks
}

/// A team run's receipt: its tasks' roles, order and dependencies.
fn team_receipt(
    result: &Map<String, Value>,
    events: &[&Map<String, Value>],
    partial: bool,
) -> Value {
    let decision = result.get("routingDecision").filter(|d| d.is_object());
    let id_of = |key: &str| text(decision.and_then(|d| d.get(key)));
    let raw_tasks = result.get("tasks").and_then(Value::as_array);
    let traced = traced_tasks(events);
    let mut partial = partial || raw_tasks.is_none();
    let mut tasks: Vec<Task> = Vec::new();
    for value in raw_tasks.into_iter().flatten() {
        let Some(task) = value.as_object() else {
            partial = true;
            continue;
        };
        let id = text(task.get("id"));
        let seen = id.and_then(|id| traced.iter().find(|t| t.id.as_deref() == Some(id)));
        let metrics = task.get("metrics").and_then(Value::as_object);
        let status = text(task.get("status"));
        if metrics.is_none()
            && seen.is_none()
            && matches!(status, Some("pending" | "blocked" | "skipped"))
        {
            continue;
        }
        let assignee = text(task.get("assignee"));
        let role = worker(task.get("assignee"))
            .map(str::to_owned)
            .or_else(|| seen.and_then(|t| t.role.clone()));
        let task_role = text(task.get("role"))
            .map(str::to_owned)
            .or_else(|| seen.and_then(|t| t.task_role.clone()));
        let raw_depends = task.get("dependsOn").and_then(Value::as_array);
        let depends_on: Vec<String> = raw_depends
            .into_iter()
            .flatten()
            .filter_map(|d| d.as_str().map(str::to_owned))
            .collect();
        let start = match metrics {
            Some(metrics) if finite(metrics.get("startMs")).is_some() => {
                finite(metrics.get("startMs"))
            }
            _ => seen.and_then(|t| t.start),
        };
        let traced_role = seen.and_then(|t| t.role.as_ref()).is_some();
        if id.is_none() || (assignee.is_none() && !traced_role) || raw_depends.is_none() {
            partial = true;
        }
        if raw_depends.is_some_and(|raw| raw.len() != depends_on.len()) {
            partial = true;
        }
        if role.is_some() && start.is_none() {
            partial = true;
        }
        tasks.push(Task {
            id: id.map(str::to_owned),
            role,
            task_role,
            depends_on,
            start,
        });
    }

    let mut roles: Vec<String> = Vec::new();
    let mut earliest = Earliest::default();
    let mut order_complete = true;
    for task in &tasks {
        let Some(role) = &task.role else {
            continue;
        };
        if !roles.contains(role) {
            roles.push(role.clone());
        }
        match task.start {
            Some(start) => earliest.see(role, start),
            None => order_complete = false,
        }
    }
    let order = if order_complete && earliest.0.len() == roles.len() {
        earliest.order(&roles)
    } else {
        Vec::new()
    };
    let mut task_roles: Vec<String> = Vec::new();
    for task in tasks.iter().filter(|t| t.role.is_some()) {
        if let Some(task_role) = &task.task_role {
            if !task_roles.contains(task_role) {
                task_roles.push(task_role.clone());
            }
        }
    }
    let role_of = |id: &str| {
        tasks
            .iter()
            .rev()
            .find(|t| t.id.as_deref() == Some(id) && t.role.is_some())
            .and_then(|t| t.role.clone())
    };
    let mut edges: Vec<Value> = Vec::new();
    for task in &tasks {
        let Some(role) = &task.role else {
            continue;
        };
        for dependency in &task.depends_on {
            let Some(predecessor) = role_of(dependency) else {
                let known = tasks.iter().find(|t| t.id.as_deref() == Some(dependency));
                if known.is_none_or(|t| t.role.is_some()) {
                    partial = true;
                }
                continue;
            };
            if &predecessor != role {
                let mut edge = Map::new();
                edge.insert("from".into(), Value::from(predecessor));
                edge.insert("to".into(), Value::from(role.as_str()));
                edges.push(Value::Object(edge));
            }
        }
    }
    let total = tokens(result.get("totalTokenUsage"));
    let duration = result
        .get("metrics")
        .and_then(Value::as_object)
        .and_then(|m| m.get("totalDurationMs"))
        .filter(|d| finite(Some(d)).is_some())
        .cloned()
        .unwrap_or(Value::Null);
    if roles.is_empty() || !order_complete || total.is_null() || duration.is_null() {
        partial = true;
    }
    let mut out = head(
        result,
        &[
            ("id", id_of("receiptId")),
            ("routingDecisionId", id_of("decisionId")),
            ("routingDecisionSpanId", id_of("traceSpanId")),
        ],
    );
    out.insert("mode".into(), Value::from(mode(&roles)));
    out.insert("rolesExecuted".into(), strings(&roles));
    out.insert("workerInstancesExecuted".into(), strings(&roles));
    if !task_roles.is_empty() {
        out.insert("taskRolesExecuted".into(), strings(&task_roles));
    }
    let review = roles.len() >= 2 && !edges.is_empty();
    out.insert("executionOrder".into(), strings(&order));
    out.insert("dependencyEdges".into(), Value::Array(edges));
    out.insert("independentRolesCount".into(), Value::from(roles.len()));
    out.insert("independentReviewOccurred".into(), Value::from(review));
    out.insert("totalTokens".into(), total);
    out.insert("durationMs".into(), duration);
    out.insert("partial".into(), Value::from(partial));
    Value::Object(out)
}

/// OMA's `buildExecutionReceipt` of `result` (an `AgentRunResult` or a team's result, as OMA
/// JSON) and `trace` (its legacy trace events, when given): the receipt as OMA's JSON. A team's
/// result is one with a `tasks` list or a `totalTokenUsage`.
pub fn build_execution_receipt(result: &Value, trace: Option<&Value>) -> Value {
    let (events, partial): (Vec<&Map<String, Value>>, bool) = match trace {
        None => (Vec::new(), false),
        Some(Value::Array(items)) => {
            let events: Vec<&Map<String, Value>> =
                items.iter().filter_map(Value::as_object).collect();
            let partial = events.len() != items.len();
            (events, partial)
        }
        Some(_) => (Vec::new(), true),
    };
    let Some(result) = result.as_object() else {
        return empty();
    };
    if result.get("tasks").is_some_and(Value::is_array) || result.contains_key("totalTokenUsage") {
        team_receipt(result, &events, partial)
    } else {
        agent_receipt(result, &events, partial)
    }
}

/// [`build_execution_receipt`] of JSON texts, as the codec takes them. Fails only for text that
/// is not JSON.
pub fn build_execution_receipt_json(
    result: &str,
    trace: Option<&str>,
) -> Result<String, crate::error::Error> {
    let read = |text: &str, what: &str| {
        crate::json::parse_value(text).map_err(|e| crate::error::Error::InvalidRequest {
            message: format!("the {what} is not JSON: {e}"),
        })
    };
    let result = read(result, "result")?;
    let trace = trace.map(|trace| read(trace, "trace")).transpose()?;
    Ok(build_execution_receipt(&result, trace.as_ref()).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shared table (`fixtures/observability/receipt.json`), which the component's codec
    /// runs too.
    #[test]
    fn the_shared_receipt_table() {
        let table: Value = serde_json::from_str(include_str!(
            "../../../../../fixtures/observability/receipt.json"
        ))
        .expect("the table");
        let cases = table["cases"].as_array().expect("cases");
        assert!(cases.len() >= 13);
        for case in cases {
            let name = case["name"].as_str().expect("a name");
            let receipt = build_execution_receipt(&case["result"], case.get("trace"));
            assert_eq!(receipt, case["expect"], "{name}");
            assert_eq!(
                receipt.to_string(),
                case["expect"].to_string(),
                "{name}: key order"
            );
        }
    }
}
