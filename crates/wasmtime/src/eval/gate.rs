//! OMA's `evaluateGate`: a run report held to thresholds on its aggregates, to scorer and
//! target health, and to a baseline report (regressions), with OMA's messages and numbers
//! written as JavaScript writes them.

use serde_json::{Map, Value};

use super::js_trim;
use super::set::{refuse_unknown, EvalDefinitionError};
use crate::number::js_number;

const POLICY: &str = "a gate policy";

/// A metric of a scorer's aggregate a threshold holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// The mean score.
    Avg,
    /// The median.
    P50,
    /// The 95th percentile.
    P95,
    /// The lowest score.
    Min,
    /// The share of passes.
    PassRate,
}

const METRICS: [(&str, Metric); 5] = [
    ("avg", Metric::Avg),
    ("p50", Metric::P50),
    ("p95", Metric::P95),
    ("min", Metric::Min),
    ("passRate", Metric::PassRate),
];

impl Metric {
    /// OMA's name of the metric (`passRate`).
    pub fn as_str(self) -> &'static str {
        METRICS
            .iter()
            .find(|(_, m)| *m == self)
            .map_or("avg", |(name, _)| name)
    }
}

/// A bound on one metric of one scorer (optionally of one tag's cases).
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    /// The scorer's name, trimmed.
    pub scorer: String,
    /// The metric held.
    pub metric: Metric,
    /// The least value allowed.
    pub min: Option<f64>,
    /// The greatest value allowed.
    pub max: Option<f64>,
    /// The tag whose cases' aggregate is held, trimmed.
    pub tag: Option<String>,
}

/// How far metrics may fall from a baseline report's.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BaselineRule {
    /// The drop allowed for every scorer without its own allowance.
    pub max_regression: Option<f64>,
    /// Each scorer's own allowance, by name.
    pub per_scorer: Vec<(String, f64)>,
    /// Whether a baseline of another eval set is a warning rather than a failure.
    pub allow_set_mismatch: bool,
}

/// A checked gate policy (OMA's `GatePolicy`, schema version 1).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GatePolicy {
    /// The thresholds, in order.
    pub thresholds: Vec<Threshold>,
    /// The share of scorer errors allowed (0.1 unless set).
    pub max_scorer_error_rate: Option<f64>,
    /// The share of samples whose target failed allowed (0 unless set).
    pub max_target_error_rate: Option<f64>,
    /// The baseline rule, when the policy has one.
    pub baseline: Option<BaselineRule>,
}

fn unit(value: Option<&Value>, field: &str) -> Result<Option<f64>, EvalDefinitionError> {
    match value {
        None => Ok(None),
        Some(v) => match v.as_f64() {
            Some(n) if (0.0..=1.0).contains(&n) => Ok(Some(n)),
            _ => Err(EvalDefinitionError::new(
                field,
                format!("{field} must be a number from 0 through 1"),
            )),
        },
    }
}

fn threshold(value: &Value, i: usize) -> Result<Threshold, EvalDefinitionError> {
    let at = format!("thresholds[{i}]");
    let Some(given) = value.as_object() else {
        return Err(EvalDefinitionError::new(
            &at,
            format!("{at} must be an object"),
        ));
    };
    refuse_unknown(
        given,
        &["scorer", "metric", "min", "max", "tag"],
        &format!("{at}."),
        POLICY,
    )?;
    let scorer = match given.get("scorer").and_then(Value::as_str).map(js_trim) {
        Some(name) if !name.is_empty() => name.to_owned(),
        _ => {
            return Err(EvalDefinitionError::new(
                format!("{at}.scorer"),
                format!("{at}.scorer must be a non-empty string"),
            ))
        }
    };
    let Some(metric) = given
        .get("metric")
        .and_then(Value::as_str)
        .and_then(|name| METRICS.iter().find(|(n, _)| *n == name))
        .map(|(_, m)| *m)
    else {
        let names: Vec<&str> = METRICS.iter().map(|(n, _)| *n).collect();
        return Err(EvalDefinitionError::new(
            format!("{at}.metric"),
            format!("{at}.metric must be one of {}", names.join(", ")),
        ));
    };
    let min = unit(given.get("min"), &format!("{at}.min"))?;
    let max = unit(given.get("max"), &format!("{at}.max"))?;
    match (min, max) {
        (None, None) => {
            return Err(EvalDefinitionError::new(
                &at,
                format!("{at}: at least one of min or max is required"),
            ))
        }
        (Some(min), Some(max)) if min > max => {
            return Err(EvalDefinitionError::new(
                &at,
                format!("{at}: min must be less than or equal to max"),
            ))
        }
        _ => {}
    }
    let tag = match given.get("tag") {
        None => None,
        Some(tag) => match tag.as_str().map(js_trim) {
            Some(tag) if !tag.is_empty() => Some(tag.to_owned()),
            _ => {
                return Err(EvalDefinitionError::new(
                    format!("{at}.tag"),
                    format!("{at}.tag must be a non-empty string"),
                ))
            }
        },
    };
    Ok(Threshold {
        scorer,
        metric,
        min,
        max,
        tag,
    })
}

fn baseline_rule(value: &Value) -> Result<BaselineRule, EvalDefinitionError> {
    let Some(given) = value.as_object() else {
        return Err(EvalDefinitionError::new(
            "baseline",
            "baseline must be an object",
        ));
    };
    refuse_unknown(
        given,
        &["maxRegression", "perScorer", "allowSetMismatch"],
        "baseline.",
        POLICY,
    )?;
    let max_regression = unit(given.get("maxRegression"), "baseline.maxRegression")?;
    let per_scorer = match given.get("perScorer") {
        None => Vec::new(),
        Some(Value::Object(allowances)) => allowances
            .iter()
            .map(|(name, value)| {
                let field = format!("baseline.perScorer.{name}");
                Ok((name.clone(), unit(Some(value), &field)?.unwrap_or(0.0)))
            })
            .collect::<Result<_, EvalDefinitionError>>()?,
        Some(_) => {
            return Err(EvalDefinitionError::new(
                "baseline.perScorer",
                "baseline.perScorer must be an object",
            ))
        }
    };
    let allow_set_mismatch = match given.get("allowSetMismatch") {
        None => false,
        Some(Value::Bool(allow)) => *allow,
        Some(_) => {
            return Err(EvalDefinitionError::new(
                "baseline.allowSetMismatch",
                "baseline.allowSetMismatch must be a boolean",
            ))
        }
    };
    Ok(BaselineRule {
        max_regression,
        per_scorer,
        allow_set_mismatch,
    })
}

impl GatePolicy {
    /// The policy given as OMA's JSON, checked (an error naming the field, in OMA's spelling),
    /// its scorer names and tags trimmed.
    pub fn from_json(policy: &Value) -> Result<GatePolicy, EvalDefinitionError> {
        let Some(given) = policy.as_object() else {
            return Err(EvalDefinitionError::new(
                "",
                "a gate policy must be an object",
            ));
        };
        refuse_unknown(
            given,
            &[
                "schemaVersion",
                "thresholds",
                "maxScorerErrorRate",
                "maxTargetErrorRate",
                "baseline",
            ],
            "",
            POLICY,
        )?;
        if given.get("schemaVersion").and_then(Value::as_f64) != Some(1.0) {
            return Err(EvalDefinitionError::new(
                "schemaVersion",
                "schemaVersion must be 1",
            ));
        }
        let Some(Value::Array(thresholds)) = given.get("thresholds") else {
            return Err(EvalDefinitionError::new(
                "thresholds",
                "thresholds must be an array",
            ));
        };
        let thresholds = thresholds
            .iter()
            .enumerate()
            .map(|(i, t)| threshold(t, i))
            .collect::<Result<_, _>>()?;
        let max_scorer_error_rate = unit(given.get("maxScorerErrorRate"), "maxScorerErrorRate")?;
        let max_target_error_rate = unit(given.get("maxTargetErrorRate"), "maxTargetErrorRate")?;
        let baseline = given.get("baseline").map(baseline_rule).transpose()?;
        Ok(GatePolicy {
            thresholds,
            max_scorer_error_rate,
            max_target_error_rate,
            baseline,
        })
    }
}

/// Why a gate failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateFailureKind {
    /// A metric outside its threshold.
    Threshold,
    /// A threshold's scorer, tag or metric missing from the report.
    MissingScorer,
    /// Too many scorer errors.
    ScorerHealth,
    /// Too many target errors.
    TargetHealth,
    /// A metric fell further than allowed from the baseline's.
    Regression,
    /// The baseline report is of another eval set.
    BaselineMismatch,
}

impl GateFailureKind {
    /// OMA's name of the kind (`missing_scorer`).
    pub fn as_str(self) -> &'static str {
        match self {
            GateFailureKind::Threshold => "threshold",
            GateFailureKind::MissingScorer => "missing_scorer",
            GateFailureKind::ScorerHealth => "scorer_health",
            GateFailureKind::TargetHealth => "target_health",
            GateFailureKind::Regression => "regression",
            GateFailureKind::BaselineMismatch => "baseline_mismatch",
        }
    }
}

/// One reason a gate failed (OMA's `GateFailure`).
#[derive(Debug, Clone, PartialEq)]
pub struct GateFailure {
    /// Why.
    pub kind: GateFailureKind,
    /// The threshold's scorer, for threshold, missing-scorer and regression failures.
    pub scorer: Option<String>,
    /// The threshold's metric, likewise.
    pub metric: Option<Metric>,
    /// The threshold's tag, when it has one.
    pub tag: Option<String>,
    /// The value found.
    pub actual: f64,
    /// The bound it broke.
    pub limit: f64,
    /// OMA's message.
    pub message: String,
}

impl GateFailure {
    fn health(kind: GateFailureKind, actual: f64, limit: f64, message: String) -> Self {
        GateFailure {
            kind,
            scorer: None,
            metric: None,
            tag: None,
            actual,
            limit,
            message,
        }
    }

    fn of(t: &Threshold, kind: GateFailureKind, actual: f64, limit: f64, message: String) -> Self {
        GateFailure {
            kind,
            scorer: Some(t.scorer.clone()),
            metric: Some(t.metric),
            tag: t.tag.clone(),
            actual,
            limit,
            message,
        }
    }

    /// The failure as OMA's JSON.
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        out.insert("kind".into(), self.kind.as_str().into());
        if let Some(scorer) = &self.scorer {
            out.insert("scorer".into(), scorer.clone().into());
        }
        if let Some(metric) = self.metric {
            out.insert("metric".into(), metric.as_str().into());
        }
        if let Some(tag) = &self.tag {
            out.insert("tag".into(), tag.clone().into());
        }
        out.insert("actual".into(), self.actual.into());
        out.insert("limit".into(), self.limit.into());
        out.insert("message".into(), self.message.clone().into());
        Value::Object(out)
    }
}

/// What a gate decided (OMA's `GateResult`).
#[derive(Debug, Clone, PartialEq)]
pub struct GateResult {
    /// Whether nothing failed.
    pub pass: bool,
    /// Each failure, in order.
    pub failures: Vec<GateFailure>,
    /// Each distinct warning, in order.
    pub warnings: Vec<String>,
}

impl GateResult {
    /// The result as OMA's JSON.
    pub fn to_json(&self) -> Value {
        let failures = self.failures.iter().map(GateFailure::to_json).collect();
        let mut out = Map::new();
        out.insert("pass".into(), self.pass.into());
        out.insert("failures".into(), Value::Array(failures));
        out.insert("warnings".into(), self.warnings.clone().into());
        Value::Object(out)
    }
}

fn aggregate_for<'a>(report: &'a Value, t: &Threshold) -> Option<&'a Value> {
    let aggregate = report["aggregates"]
        .as_array()?
        .iter()
        .find(|a| a["scorer"]["name"].as_str() == Some(t.scorer.as_str()))?;
    match &t.tag {
        None => Some(aggregate),
        Some(tag) => aggregate.get("byTag")?.get(tag),
    }
}

fn metric_of(report: &Value, t: &Threshold) -> Option<f64> {
    aggregate_for(report, t)?.get(t.metric.as_str())?.as_f64()
}

fn target_of(t: &Threshold) -> String {
    match &t.tag {
        None => format!("scorer \"{}\"", t.scorer),
        Some(tag) => format!("scorer \"{}\" for tag \"{tag}\"", t.scorer),
    }
}

fn version_of<'a>(report: &'a Value, scorer: &str) -> Option<&'a str> {
    report["aggregates"]
        .as_array()?
        .iter()
        .find(|a| a["scorer"]["name"].as_str() == Some(scorer))?["scorer"]
        .get("version")?
        .as_str()
}

fn shown_version(version: Option<&str>) -> String {
    version.map_or_else(|| "(unversioned)".into(), |v| format!("\"{v}\""))
}

fn set_of(report: &Value) -> String {
    let set = &report["evalSet"];
    format!(
        "{}@{}",
        set["name"].as_str().unwrap_or_default(),
        set["version"].as_str().unwrap_or_default()
    )
}

/// Whether `actual` is above `limit` by more than a few units in the last place.
fn exceeds(actual: f64, limit: f64) -> bool {
    let tolerance = f64::EPSILON * 4.0 * 1f64.max(actual.abs()).max(limit.abs());
    actual - limit > tolerance
}

fn threshold_failures(report: &Value, t: &Threshold, failures: &mut Vec<GateFailure>) {
    let target = target_of(t);
    let metric = t.metric.as_str();
    let Some(actual) = metric_of(report, t) else {
        let suffix = if t.metric == Metric::PassRate {
            " or has no scored records with a pass value"
        } else {
            ""
        };
        failures.push(GateFailure::of(
            t,
            GateFailureKind::MissingScorer,
            0.0,
            1.0,
            format!("Gate threshold references {target}, but the metric \"{metric}\" is unavailable{suffix}."),
        ));
        return;
    };
    if let Some(min) = t.min.filter(|min| actual < *min) {
        failures.push(GateFailure::of(
            t,
            GateFailureKind::Threshold,
            actual,
            min,
            format!(
                "Gate metric \"{metric}\" for {target} is {}, below minimum {}.",
                js_number(actual),
                js_number(min)
            ),
        ));
    }
    if let Some(max) = t.max.filter(|max| actual > *max) {
        failures.push(GateFailure::of(
            t,
            GateFailureKind::Threshold,
            actual,
            max,
            format!(
                "Gate metric \"{metric}\" for {target} is {}, above maximum {}.",
                js_number(actual),
                js_number(max)
            ),
        ));
    }
}

/// OMA's `evaluateGate(report, policy, baseline?)` on reports as OMA's JSON (the gate reads
/// `evalSet`, `caseCount`, `repeats`, the records' `status`, `aggregates` and
/// `totals.targetErrors`): thresholds on aggregates (a tag's when given), the scorer error
/// rate (0.1 unless set) and the target error rate (0 unless set), and with a baseline report
/// of the same set and scorer version, regressions beyond the allowance.
pub fn evaluate_gate(report: &Value, policy: &GatePolicy, baseline: Option<&Value>) -> GateResult {
    let mut failures = Vec::new();
    for t in &policy.thresholds {
        threshold_failures(report, t, &mut failures);
    }
    let mut warnings: Vec<String> = Vec::new();
    let mut warn = |message: String| {
        if !warnings.contains(&message) {
            warnings.push(message);
        }
    };
    let records = report["records"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let scorer_records = records
        .iter()
        .filter(|r| r["status"] == "scored" || r["status"] == "scorer_error")
        .count();
    let scorer_errors = records
        .iter()
        .filter(|r| r["status"] == "scorer_error")
        .count();
    let scorer_error_rate = if scorer_records == 0 {
        0.0
    } else {
        scorer_errors as f64 / scorer_records as f64
    };
    let max_scorer_error_rate = policy.max_scorer_error_rate.unwrap_or(0.1);
    if scorer_error_rate > max_scorer_error_rate {
        failures.push(GateFailure::health(
            GateFailureKind::ScorerHealth,
            scorer_error_rate,
            max_scorer_error_rate,
            format!(
                "Scorer error rate {} exceeds maximum {}.",
                js_number(scorer_error_rate),
                js_number(max_scorer_error_rate)
            ),
        ));
    }
    let samples =
        report["caseCount"].as_f64().unwrap_or(0.0) * report["repeats"].as_f64().unwrap_or(0.0);
    let target_errors = report["totals"]["targetErrors"].as_f64().unwrap_or(0.0);
    let target_error_rate = if samples == 0.0 {
        0.0
    } else {
        target_errors / samples
    };
    let max_target_error_rate = policy.max_target_error_rate.unwrap_or(0.0);
    if target_error_rate > max_target_error_rate {
        failures.push(GateFailure::health(
            GateFailureKind::TargetHealth,
            target_error_rate,
            max_target_error_rate,
            format!(
                "Target error rate {} exceeds maximum {}.",
                js_number(target_error_rate),
                js_number(max_target_error_rate)
            ),
        ));
    }
    match baseline {
        None => {
            if policy.baseline.is_some() {
                warn("Baseline policy is configured but no baseline report was provided; regression checks were skipped.".into());
            }
        }
        Some(baseline)
            if report["evalSet"]["name"] != baseline["evalSet"]["name"]
                || report["evalSet"]["version"] != baseline["evalSet"]["version"] =>
        {
            let message = format!(
                "Baseline EvalSet mismatch: current is {}, baseline is {}; regression checks were skipped.",
                set_of(report),
                set_of(baseline)
            );
            if policy
                .baseline
                .as_ref()
                .is_some_and(|b| b.allow_set_mismatch)
            {
                warn(message);
            } else {
                failures.push(GateFailure::health(
                    GateFailureKind::BaselineMismatch,
                    1.0,
                    0.0,
                    message,
                ));
            }
        }
        Some(baseline) => {
            for t in &policy.thresholds {
                let rule = policy.baseline.as_ref();
                let allowance = rule
                    .and_then(|b| b.per_scorer.iter().find(|(name, _)| *name == t.scorer))
                    .map(|(_, allowance)| *allowance)
                    .or_else(|| rule.and_then(|b| b.max_regression));
                let Some(max_regression) = allowance else {
                    continue;
                };
                let current_version = version_of(report, &t.scorer);
                let baseline_version = version_of(baseline, &t.scorer);
                if current_version != baseline_version {
                    warn(format!(
                        "Scorer version drift for \"{}\": current {}, baseline {}; regression checks were skipped for this scorer.",
                        t.scorer,
                        shown_version(current_version),
                        shown_version(baseline_version)
                    ));
                    continue;
                }
                let (Some(current), Some(before)) = (metric_of(report, t), metric_of(baseline, t))
                else {
                    warn(format!(
                        "Baseline metric \"{}\" for {} is unavailable; regression check was skipped.",
                        t.metric.as_str(),
                        target_of(t)
                    ));
                    continue;
                };
                let regression = before - current;
                if exceeds(regression, max_regression) {
                    failures.push(GateFailure::of(
                        t,
                        GateFailureKind::Regression,
                        regression,
                        max_regression,
                        format!(
                            "Gate metric \"{}\" for {} regressed by {} (baseline {}, current {}), exceeding {}.",
                            t.metric.as_str(),
                            target_of(t),
                            js_number(regression),
                            js_number(before),
                            js_number(current),
                            js_number(max_regression)
                        ),
                    ));
                }
            }
        }
    }
    GateResult {
        pass: failures.is_empty(),
        failures,
        warnings,
    }
}
