//! The per-scorer aggregates of a run's records (OMA's report aggregates): scorer errors are
//! counted apart and never enter a score; percentiles by nearest rank.

use crate::number::js_json_number;
use serde_json::{Map, Value};

/// A scorer as records name it: its name and, when it has one, its version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScorerRef {
    /// The scorer's name.
    pub name: String,
    /// The scorer's version.
    pub version: Option<String>,
}

impl ScorerRef {
    fn to_json(&self) -> Value {
        let mut out = Map::new();
        out.insert("name".into(), self.name.clone().into());
        if let Some(version) = &self.version {
            out.insert("version".into(), version.clone().into());
        }
        Value::Object(out)
    }

    fn names(&self, record: &Value) -> bool {
        let scorer = &record["scorer"];
        scorer["name"].as_str() == Some(self.name.as_str())
            && scorer.get("version").and_then(Value::as_str) == self.version.as_deref()
    }
}

/// One scorer's statistics over a run's records (OMA's `ScorerAggregate`).
#[derive(Debug, Clone, PartialEq)]
pub struct Aggregate {
    /// The scorer.
    pub scorer: ScorerRef,
    /// How many `scored` records carry a score.
    pub scored_count: u64,
    /// How many `scorer_error` records there are.
    pub error_count: u64,
    /// The mean score (summed in ascending order), 0 without scores.
    pub avg: f64,
    /// The median by nearest rank, 0 without scores.
    pub p50: f64,
    /// The 95th percentile by nearest rank, 0 without scores.
    pub p95: f64,
    /// The lowest score, 0 without scores.
    pub min: f64,
    /// The highest score, 0 without scores.
    pub max: f64,
    /// The share of passes among the scores that say pass or fail, when any does.
    pub pass_rate: Option<f64>,
    /// The same per tag of the run's cases, in the order the cases first name them (none when
    /// no case has a tag).
    pub by_tag: Option<Vec<(String, Aggregate)>>,
}

impl Aggregate {
    /// The aggregate as OMA's JSON.
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        out.insert("scorer".into(), self.scorer.to_json());
        out.insert("scoredCount".into(), self.scored_count.into());
        out.insert("errorCount".into(), self.error_count.into());
        for (key, value) in [
            ("avg", self.avg),
            ("p50", self.p50),
            ("p95", self.p95),
            ("min", self.min),
            ("max", self.max),
        ] {
            out.insert(key.into(), js_json_number(value));
        }
        if let Some(rate) = self.pass_rate {
            out.insert("passRate".into(), js_json_number(rate));
        }
        if let Some(by_tag) = &self.by_tag {
            let tags = by_tag
                .iter()
                .map(|(tag, aggregate)| (tag.clone(), aggregate.to_json()))
                .collect();
            out.insert("byTag".into(), Value::Object(tags));
        }
        Value::Object(out)
    }
}

fn nearest_rank(sorted: &[f64], percentile: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((percentile * sorted.len() as f64).ceil() as usize).max(1);
    sorted[rank.min(sorted.len()) - 1]
}

fn aggregate_one(scorer: &ScorerRef, records: &[&Value]) -> Aggregate {
    let matching: Vec<&Value> = records
        .iter()
        .copied()
        .filter(|r| scorer.names(r))
        .collect();
    let scored: Vec<&Value> = matching
        .iter()
        .copied()
        .filter(|r| r["status"] == "scored" && r["score"].is_number())
        .collect();
    let mut scores: Vec<f64> = scored.iter().filter_map(|r| r["score"].as_f64()).collect();
    // Stable, and -0 and 0 equal, as JavaScript's `sort((a, b) => a - b)`.
    scores.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    let judged: Vec<&Value> = scored
        .iter()
        .copied()
        .filter(|r| r.get("pass").is_some())
        .collect();
    let count = scores.len();
    Aggregate {
        scorer: scorer.clone(),
        scored_count: count as u64,
        error_count: matching
            .iter()
            .filter(|r| r["status"] == "scorer_error")
            .count() as u64,
        avg: if count == 0 {
            0.0
        } else {
            scores.iter().sum::<f64>() / count as f64
        },
        p50: nearest_rank(&scores, 0.5),
        p95: nearest_rank(&scores, 0.95),
        min: scores.first().copied().unwrap_or(0.0),
        max: scores.last().copied().unwrap_or(0.0),
        pass_rate: (!judged.is_empty()).then(|| {
            judged.iter().filter(|r| r["pass"] == true).count() as f64 / judged.len() as f64
        }),
        by_tag: None,
    }
}

/// One aggregate per scorer of `scorers` (in order) over `records` (OMA's evaluation records
/// as JSON; the rule reads `caseId`, `scorer`, `status`, `score` and `pass`), with an aggregate
/// per tag when any case of `tags_by_case` (each case of the run with its tags) has one.
pub fn aggregate_records(
    records: &[Value],
    scorers: &[ScorerRef],
    tags_by_case: &[(String, Vec<String>)],
) -> Vec<Aggregate> {
    let mut tags: Vec<&str> = Vec::new();
    for tag in tags_by_case.iter().flat_map(|(_, tags)| tags) {
        if !tags.contains(&tag.as_str()) {
            tags.push(tag);
        }
    }
    let all: Vec<&Value> = records.iter().collect();
    scorers
        .iter()
        .map(|scorer| {
            let mut aggregate = aggregate_one(scorer, &all);
            if !tags.is_empty() {
                let by_tag = tags
                    .iter()
                    .map(|tag| {
                        let tagged: Vec<&Value> = all
                            .iter()
                            .copied()
                            .filter(|r| {
                                let case = r["caseId"].as_str();
                                tags_by_case.iter().any(|(id, tags)| {
                                    Some(id.as_str()) == case && tags.iter().any(|t| t == tag)
                                })
                            })
                            .collect();
                        ((*tag).to_owned(), aggregate_one(scorer, &tagged))
                    })
                    .collect();
                aggregate.by_tag = Some(by_tag);
            }
            aggregate
        })
        .collect()
}
