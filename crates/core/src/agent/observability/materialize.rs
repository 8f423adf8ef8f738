//! OMA's `materializeRun` (`docs/observability.md#materializing-a-run`): the records of one run,
//! in any order, read into the run a trace store shows: a summary (its attempts, when it started
//! and ended, its status and metadata, the agents, tasks, models and providers it involved, its
//! token usage and costs, whether it is complete) and its spans, each with its attributes, links
//! and events.
//!
//! A pure function over OMA's record JSON, so that every host (a store in JavaScript or Python)
//! materializes with the same rules. JavaScript sorts names with `localeCompare`; the order here
//! is [`locale_order`], which agrees with it on the ids, names and models runs carry.

use std::cmp::Ordering;

use serde_json::{Map, Value};

use crate::error::Error;
use crate::sort::sorted;

const INPUT_TOKEN_KEYS: &[&str] = &["oma.usage.input_tokens", "gen_ai.usage.input_tokens"];
const OUTPUT_TOKEN_KEYS: &[&str] = &["oma.usage.output_tokens", "gen_ai.usage.output_tokens"];
const CACHE_READ_KEYS: &[&str] = &[
    "oma.usage.cache_read_input_tokens",
    "gen_ai.usage.cache_read_input_tokens",
];
const CACHE_CREATE_KEYS: &[&str] = &["oma.usage.cache_creation_input_tokens"];
const REASONING_KEYS: &[&str] = &[
    "oma.usage.reasoning_output_tokens",
    "oma.reasoning.output_tokens",
];
const MODEL_KEYS: &[&str] = &[
    "oma.llm.model",
    "oma.model",
    "gen_ai.request.model",
    "gen_ai.response.model",
];
const PROVIDER_KEYS: &[&str] = &[
    "oma.llm.provider",
    "oma.provider",
    "gen_ai.provider.name",
    "gen_ai.system",
];
const METADATA_PREFIX: &str = "oma.meta.";
const METADATA_OVERRIDDEN: &str = "oma.meta._overridden";

/// The largest time a JavaScript date holds, in milliseconds either side of the epoch.
const MAX_DATE_MS: f64 = 8.64e15;

/// One record, checked: the fields materializing reads, and the record as it came.
struct Record {
    trace_id: String,
    span_id: String,
    parent_span_id: Option<String>,
    record_id: String,
    sequence: f64,
    timestamp: f64,
    run_id: String,
    attempt: f64,
    kind: Kind,
    value: Value,
}

/// What a record says, with the fields of its kind.
enum Kind {
    Start {
        kind: String,
        name: String,
        start: Value,
    },
    Event,
    End {
        kind: String,
        name: String,
        start: Value,
        end: Value,
        duration: Value,
        status: String,
    },
}

impl Record {
    fn attributes(&self) -> Option<&Map<String, Value>> {
        self.value.get("attributes").and_then(Value::as_object)
    }

    fn is_root(&self, end: bool) -> bool {
        let kind = match &self.kind {
            Kind::Start { kind, .. } if !end => kind,
            Kind::End { kind, .. } if end => kind,
            _ => return false,
        };
        kind == "run" && self.parent_span_id.is_none()
    }
}

/// Reads record `at` of the list, naming the first field that is not what OMA's schema says.
fn read(at: usize, value: Value) -> Result<Record, Error> {
    let bad = |field: &str, what: &str| Error::InvalidRequest {
        message: format!("the records are not valid: records[{at}].{field} must be {what}"),
    };
    let object = value.as_object().ok_or_else(|| Error::InvalidRequest {
        message: format!("the records are not valid: records[{at}] must be an object"),
    })?;
    let string = |field: &str| -> Result<String, Error> {
        object
            .get(field)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| bad(field, "a string"))
    };
    let number = |field: &str| -> Result<f64, Error> {
        object
            .get(field)
            .and_then(Value::as_f64)
            .ok_or_else(|| bad(field, "a number"))
    };
    let date = |field: &str| -> Result<f64, Error> {
        let ms = number(field)?;
        if ms.abs() > MAX_DATE_MS {
            return Err(bad(field, "a time a date can hold"));
        }
        Ok(ms)
    };
    let trace_id = string("traceId")?;
    let span_id = string("spanId")?;
    let parent_span_id = match object.get("parentSpanId") {
        None | Some(Value::Null) => None,
        Some(Value::String(parent)) => Some(parent.clone()).filter(|p| !p.is_empty()),
        Some(_) => return Err(bad("parentSpanId", "a string")),
    };
    let record_id = string("recordId")?;
    let sequence = number("sequence")?;
    let timestamp = date("timestampUnixMs")?;
    let run_id = string("runId")?;
    let attempt = number("attempt")?;
    if !object.get("attributes").is_some_and(Value::is_object) {
        return Err(bad("attributes", "an object"));
    }
    let kind = match string("recordType")?.as_str() {
        "span_start" => {
            date("startUnixMs")?;
            Kind::Start {
                kind: string("kind")?,
                name: string("name")?,
                start: object["startUnixMs"].clone(),
            }
        }
        "span_event" => Kind::Event,
        "span_end" => {
            date("startUnixMs")?;
            number("durationMs")?;
            let status = object
                .get("status")
                .and_then(|s| s.get("code"))
                .and_then(Value::as_str)
                .ok_or_else(|| bad("status.code", "a string"))?
                .to_owned();
            Kind::End {
                kind: string("kind")?,
                name: string("name")?,
                start: object["startUnixMs"].clone(),
                end: {
                    date("endUnixMs")?;
                    object["endUnixMs"].clone()
                },
                duration: object["durationMs"].clone(),
                status,
            }
        }
        _ => return Err(bad("recordType", "span_start, span_event or span_end")),
    };
    Ok(Record {
        trace_id,
        span_id,
        parent_span_id,
        record_id,
        sequence,
        timestamp,
        run_id,
        attempt,
        kind,
        value,
    })
}

/// The order JavaScript's `localeCompare` gives in its root locale, for the ASCII names and ids
/// runs hold: white space and punctuation first (in the root collation's order), then digits,
/// then letters without regard to case, then any other character by code point; ties broken by
/// case (lower first), then by code point.
pub fn locale_order(a: &str, b: &str) -> Ordering {
    fn primary(c: char) -> (u8, u32) {
        const PUNCTUATION: &str = " _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$";
        if let Some(at) = PUNCTUATION.find(c) {
            return (0, at as u32);
        }
        if c.is_ascii_digit() {
            return (1, c as u32);
        }
        if c.is_ascii_alphabetic() {
            return (2, c.to_ascii_lowercase() as u32);
        }
        (3, c as u32)
    }
    let primaries = a.chars().map(primary).cmp(b.chars().map(primary));
    primaries
        .then_with(|| {
            // Lower case before upper case at the first difference of case.
            let case = |c: char| u8::from(c.is_ascii_uppercase());
            a.chars().map(case).cmp(b.chars().map(case))
        })
        .then_with(|| a.cmp(b))
}

/// A number as JavaScript writes it: whole numbers without a fraction.
fn number(x: f64) -> Value {
    if x.is_finite() && x.fract() == 0.0 && x.abs() < 9_007_199_254_740_992.0 {
        Value::from(x as i64)
    } else {
        serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
    }
}

/// A time (ms since the epoch, within a date's range) as `Date.prototype.toISOString` writes
/// it: `YYYY-MM-DDTHH:mm:ss.sssZ`, six digits and a sign for years outside 0..=9999.
pub fn iso_date(ms: f64) -> String {
    let ms = ms.trunc() as i64;
    let days = ms.div_euclid(86_400_000);
    let in_day = ms.rem_euclid(86_400_000);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let year = if (0..=9999).contains(&year) {
        format!("{year:04}")
    } else if year < 0 {
        format!("-{:06}", -year)
    } else {
        format!("+{year:06}")
    };
    format!(
        "{year}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000
    )
}

/// The first finite number among `keys`, else 0.
fn number_attribute(attributes: Option<&Map<String, Value>>, keys: &[&str]) -> f64 {
    keys.iter()
        .filter_map(|key| attributes?.get(*key)?.as_f64())
        .find(|x| x.is_finite())
        .unwrap_or(0.0)
}

/// Every string among `keys`, a string array's included.
fn string_attributes<'a>(
    attributes: Option<&'a Map<String, Value>>,
    keys: &[&str],
) -> Vec<&'a str> {
    let mut out = Vec::new();
    for key in keys {
        match attributes.and_then(|a| a.get(*key)) {
            Some(Value::String(text)) => out.push(text.as_str()),
            Some(Value::Array(items)) => out.extend(items.iter().filter_map(Value::as_str)),
            _ => {}
        }
    }
    out
}

/// A set of names, kept sorted as [`locale_order`] sorts them.
#[derive(Default)]
struct Names(Vec<String>);

impl Names {
    fn add(&mut self, name: &str) {
        if !self.0.iter().any(|known| known == name) {
            self.0.push(name.to_owned());
        }
    }

    fn sorted(self) -> Value {
        Value::from(sorted(self.0, &|a: &String, b: &String| locale_order(a, b)))
    }
}

/// One span being gathered: its first start, its first end, its events.
#[derive(Default)]
struct Gathered {
    start: Option<usize>,
    end: Option<usize>,
    events: Vec<usize>,
}

/// OMA's `materializeRun` over `records` (OMA's record JSON, in any order): the run (OMA's
/// `StoredRun`: summary and spans, and the records sorted when `include_records`), or `None`
/// for no records. Fails when a record is not what OMA's schema says, naming the field.
pub fn materialize_run(records: Vec<Value>, include_records: bool) -> Result<Option<Value>, Error> {
    if records.is_empty() {
        return Ok(None);
    }
    let records = records
        .into_iter()
        .enumerate()
        .map(|(at, value)| read(at, value))
        .collect::<Result<Vec<_>, _>>()?;
    let records = sorted(records, &|a: &Record, b: &Record| {
        locale_order(&a.trace_id, &b.trace_id)
            .then_with(|| a.sequence.total_cmp(&b.sequence))
            .then_with(|| locale_order(&a.record_id, &b.record_id))
    });
    let run_id = records[0].run_id.clone();

    let mut keys: Vec<(String, String)> = Vec::new();
    let mut spans: Vec<Gathered> = Vec::new();
    let (mut agents, mut tasks, mut models, mut providers) = (
        Names::default(),
        Names::default(),
        Names::default(),
        Names::default(),
    );
    let mut tokens = [0.0f64; 5];
    let mut costs: Vec<(String, f64)> = Vec::new();
    for (at, record) in records.iter().enumerate() {
        let key = (record.trace_id.clone(), record.span_id.clone());
        let slot = match keys.iter().position(|k| *k == key) {
            Some(slot) => slot,
            None => {
                keys.push(key);
                spans.push(Gathered::default());
                spans.len() - 1
            }
        };
        let gathered = &mut spans[slot];
        match record.kind {
            Kind::Start { .. } => {
                gathered.start.get_or_insert(at);
            }
            Kind::End { .. } => {
                gathered.end.get_or_insert(at);
            }
            Kind::Event => gathered.events.push(at),
        }
        let attributes = record.attributes();
        string_attributes(attributes, &["oma.agent.name"])
            .into_iter()
            .for_each(|n| agents.add(n));
        string_attributes(attributes, &["oma.task.id"])
            .into_iter()
            .for_each(|n| tasks.add(n));
        string_attributes(attributes, MODEL_KEYS)
            .into_iter()
            .for_each(|n| models.add(n));
        string_attributes(attributes, PROVIDER_KEYS)
            .into_iter()
            .for_each(|n| providers.add(n));
        if let Kind::End { kind, name, .. } = &record.kind {
            if kind == "llm" || (kind == "routing" && name == "profile_execution_route") {
                for (total, keys) in tokens.iter_mut().zip([
                    INPUT_TOKEN_KEYS,
                    OUTPUT_TOKEN_KEYS,
                    CACHE_READ_KEYS,
                    CACHE_CREATE_KEYS,
                    REASONING_KEYS,
                ]) {
                    *total += number_attribute(attributes, keys);
                }
                let amount = number_attribute(attributes, &["oma.cost.amount"]);
                let currency = string_attributes(attributes, &["oma.cost.currency"]);
                if let (Some(currency), true) = (currency.first(), amount != 0.0) {
                    match costs.iter_mut().find(|(c, _)| c == currency) {
                        Some((_, total)) => *total += amount,
                        None => costs.push(((*currency).to_owned(), amount)),
                    }
                }
            }
            let provider = record
                .value
                .get("error")
                .and_then(|e| e.get("provider"))
                .and_then(Value::as_str)
                .filter(|p| !p.is_empty());
            if let Some(provider) = provider {
                providers.add(provider);
            }
        }
    }

    // The spans: a span of events alone (its start and end both lost) is left out.
    let mut materialized: Vec<(Value, Option<f64>)> = Vec::new();
    for gathered in &spans {
        let start = gathered.start.map(|at| &records[at]);
        let end = gathered.end.map(|at| &records[at]);
        let Some(source) = end.or(start) else {
            continue;
        };
        let mut span = Map::new();
        span.insert("traceId".into(), Value::from(source.trace_id.as_str()));
        span.insert("spanId".into(), Value::from(source.span_id.as_str()));
        if let Some(parent) = &source.parent_span_id {
            span.insert("parentSpanId".into(), Value::from(parent.as_str()));
        }
        let (kind, name, start_ms) = match (end.map(|e| &e.kind), start.map(|s| &s.kind)) {
            (
                Some(Kind::End {
                    kind, name, start, ..
                }),
                _,
            )
            | (_, Some(Kind::Start { kind, name, start })) => (kind, name, start),
            _ => continue,
        };
        if !kind.is_empty() {
            span.insert("kind".into(), Value::from(kind.as_str()));
        }
        if !name.is_empty() {
            span.insert("name".into(), Value::from(name.as_str()));
        }
        span.insert("startUnixMs".into(), start_ms.clone());
        if let Some(Kind::End {
            end,
            duration,
            status,
            ..
        }) = end.map(|e| &e.kind)
        {
            span.insert("endUnixMs".into(), end.clone());
            span.insert("durationMs".into(), duration.clone());
            span.insert("status".into(), Value::from(status.as_str()));
        }
        let mut attributes = start
            .and_then(Record::attributes)
            .cloned()
            .unwrap_or_default();
        if let Some(more) = end.and_then(Record::attributes) {
            for (key, value) in more {
                attributes.insert(key.clone(), value.clone());
            }
        }
        span.insert("attributes".into(), Value::Object(attributes));
        let links = end
            .and_then(|e| e.value.get("links"))
            .or_else(|| start.and_then(|s| s.value.get("links")))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        span.insert("links".into(), Value::Array(links));
        let events: Vec<Value> = gathered
            .events
            .iter()
            .map(|at| records[*at].value.clone())
            .collect();
        span.insert("events".into(), Value::Array(events));
        span.insert("incomplete".into(), Value::from(end.is_none()));
        materialized.push((Value::Object(span), start_ms.as_f64()));
    }
    let materialized = sorted(
        materialized,
        &|(a, a_start): &(Value, Option<f64>), (b, b_start): &(Value, Option<f64>)| {
            let text = |v: &Value, key: &str| v[key].as_str().unwrap_or_default().to_owned();
            let first = |start: &Option<f64>| start.unwrap_or(9_007_199_254_740_991.0);
            locale_order(&text(a, "traceId"), &text(b, "traceId"))
                .then_with(|| first(a_start).total_cmp(&first(b_start)))
                .then_with(|| locale_order(&text(a, "spanId"), &text(b, "spanId")))
        },
    );

    // The attempts, one per trace.
    let mut traces: Vec<&str> = Vec::new();
    for record in &records {
        if !traces.contains(&record.trace_id.as_str()) {
            traces.push(&record.trace_id);
        }
    }
    struct Attempt {
        attempt: f64,
        trace_id: String,
        started: f64,
        ended: Option<f64>,
        value: Value,
    }
    let mut attempts: Vec<Attempt> = Vec::new();
    for trace in traces {
        let of_trace: Vec<&Record> = records.iter().filter(|r| r.trace_id == trace).collect();
        let root_end = of_trace.iter().find(|r| r.is_root(true));
        let root_start = of_trace.iter().find(|r| r.is_root(false));
        let start_of = |record: &Record| match &record.kind {
            Kind::Start { start, .. } | Kind::End { start, .. } => start.as_f64(),
            Kind::Event => None,
        };
        let started = root_end
            .and_then(|r| start_of(r))
            .or_else(|| root_start.and_then(|r| start_of(r)))
            .unwrap_or_else(|| {
                of_trace
                    .iter()
                    .map(|r| r.timestamp)
                    .fold(f64::INFINITY, f64::min)
            });
        let attempt = of_trace
            .iter()
            .map(|r| r.attempt)
            .fold(f64::INFINITY, f64::min);
        let mut summary = Map::new();
        summary.insert("attempt".into(), number(attempt));
        summary.insert("traceId".into(), Value::from(trace));
        if let Some(root) = root_end.or(root_start).filter(|r| !r.span_id.is_empty()) {
            summary.insert("rootSpanId".into(), Value::from(root.span_id.as_str()));
        }
        summary.insert("startedAt".into(), Value::from(iso_date(started)));
        let mut ended = None;
        if let Some(Kind::End {
            end,
            duration,
            status,
            ..
        }) = root_end.map(|r| &r.kind)
        {
            let end = end.as_f64().unwrap_or_default();
            ended = Some(end.trunc());
            summary.insert("endedAt".into(), Value::from(iso_date(end)));
            summary.insert("durationMs".into(), duration.clone());
            summary.insert("status".into(), Value::from(status.as_str()));
        }
        let open_span = of_trace.iter().any(|r| {
            matches!(r.kind, Kind::Start { .. })
                && keys
                    .iter()
                    .position(|k| k.0 == r.trace_id && k.1 == r.span_id)
                    .is_some_and(|slot| spans[slot].end.is_none())
        });
        summary.insert(
            "incomplete".into(),
            Value::from(root_end.is_none() || open_span),
        );
        attempts.push(Attempt {
            attempt,
            trace_id: trace.to_owned(),
            started: started.trunc(),
            ended,
            value: Value::Object(summary),
        });
    }
    let attempts = sorted(attempts, &|a: &Attempt, b: &Attempt| {
        a.attempt
            .total_cmp(&b.attempt)
            .then_with(|| locale_order(&a.trace_id, &b.trace_id))
    });
    let latest = attempts
        .last()
        .map(|a| a.trace_id.clone())
        .unwrap_or_default();
    let root_attributes = |end: bool| {
        records
            .iter()
            .find(|r| r.trace_id == latest && r.is_root(end))
            .and_then(Record::attributes)
    };
    let mut metadata = Map::new();
    for attributes in [root_attributes(false), root_attributes(true)]
        .into_iter()
        .flatten()
    {
        for (key, value) in attributes {
            if let (Some(short), false) = (
                key.strip_prefix(METADATA_PREFIX),
                key == METADATA_OVERRIDDEN,
            ) {
                metadata.insert(short.to_owned(), value.clone());
            }
        }
    }
    let started_at = attempts
        .iter()
        .map(|a| a.started)
        .fold(f64::INFINITY, f64::min);
    let ended_at = attempts
        .iter()
        .filter_map(|a| a.ended)
        .fold(None, |most: Option<f64>, e| {
            Some(most.map_or(e, |m| m.max(e)))
        });
    let incomplete = attempts
        .iter()
        .any(|a| a.value["incomplete"].as_bool() == Some(true));
    let status = attempts.last().and_then(|a| a.value.get("status").cloned());

    let mut token_summary = Map::new();
    token_summary.insert("input_tokens".into(), number(tokens[0]));
    token_summary.insert("output_tokens".into(), number(tokens[1]));
    for (key, total) in [
        ("cache_read_input_tokens", tokens[2]),
        ("cache_creation_input_tokens", tokens[3]),
        ("reasoning_output_tokens", tokens[4]),
    ] {
        if total != 0.0 {
            token_summary.insert(key.into(), number(total));
        }
    }
    let costs: Vec<Value> = sorted(costs, &|(a, _): &(String, f64), (b, _): &(String, f64)| {
        locale_order(a, b)
    })
    .into_iter()
    .map(|(currency, amount)| {
        let mut cost = Map::new();
        cost.insert("currency".into(), Value::from(currency));
        cost.insert("amount".into(), number(amount));
        Value::Object(cost)
    })
    .collect();

    let mut run = Map::new();
    run.insert("schemaVersion".into(), Value::from(2));
    run.insert("runId".into(), Value::from(run_id));
    run.insert(
        "attempts".into(),
        Value::Array(attempts.into_iter().map(|a| a.value).collect()),
    );
    run.insert("startedAt".into(), Value::from(iso_date(started_at)));
    if let Some(ended) = ended_at {
        run.insert("endedAt".into(), Value::from(iso_date(ended)));
        run.insert("durationMs".into(), number((ended - started_at).max(0.0)));
    }
    if let Some(status) = status {
        run.insert("status".into(), status);
    }
    if !metadata.is_empty() {
        run.insert("metadata".into(), Value::Object(metadata));
    }
    run.insert("agents".into(), agents.sorted());
    run.insert("taskIds".into(), tasks.sorted());
    run.insert("models".into(), models.sorted());
    run.insert("providers".into(), providers.sorted());
    run.insert("tokens".into(), Value::Object(token_summary));
    run.insert("costs".into(), Value::Array(costs));
    run.insert("incomplete".into(), Value::from(incomplete));
    run.insert(
        "spans".into(),
        Value::Array(materialized.into_iter().map(|(span, _)| span).collect()),
    );
    if include_records {
        run.insert(
            "records".into(),
            Value::Array(records.into_iter().map(|r| r.value).collect()),
        );
    }
    Ok(Some(Value::Object(run)))
}

/// [`materialize_run`] of a JSON list of records, as the codec takes it: the run as JSON,
/// `null` for no records. Fails for text that is no JSON list of records, naming the field.
pub fn materialize_run_json(records: &str, include_records: bool) -> Result<String, Error> {
    let bad = |what: &dyn std::fmt::Display| Error::InvalidRequest {
        message: format!("the records are not valid: {what}"),
    };
    let records = match crate::json::parse_value(records).map_err(|e| bad(&e))? {
        Value::Array(records) => records,
        _ => return Err(bad(&"expected a list of records")),
    };
    Ok(materialize_run(records, include_records)?
        .unwrap_or(Value::Null)
        .to_string())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The shared table (`fixtures/observability/materialize.json`), which the component's codec
    /// runs too.
    #[test]
    fn the_shared_materialize_table() {
        let table: Value = serde_json::from_str(include_str!(
            "../../../../../fixtures/observability/materialize.json"
        ))
        .expect("the table");
        let cases = table["cases"].as_array().expect("cases");
        assert!(cases.len() >= 7);
        for case in cases {
            let name = case["name"].as_str().expect("a name");
            let records = case["records"].as_array().cloned().expect("records");
            let include = case["includeRecords"].as_bool().unwrap_or(false);
            let run = materialize_run(records, include).expect(name);
            let expect = &case["expect"];
            let got = run.unwrap_or(Value::Null);
            assert_eq!(&got, expect, "{name}");
            assert_eq!(got.to_string(), expect.to_string(), "{name}: key order");
        }
        for refused in table["refused"].as_array().expect("refused") {
            let field = refused["field"].as_str().expect("a field");
            let records = refused["records"].as_array().cloned().expect("records");
            let message = materialize_run(records, false)
                .expect_err(field)
                .to_string();
            assert!(message.contains(&format!("{field} ")), "{field}: {message}");
        }
    }

    /// Names sort as JavaScript's `localeCompare` sorts them: case aside first, punctuation
    /// before digits before letters.
    #[test]
    fn names_sort_as_locale_compare_sorts_them() {
        let mut names = vec![
            "Zeta", "alpha", "beta-2", "beta_2", "Beta", "beta", "b1", "10", "9",
        ];
        names.sort_by(|a, b| locale_order(a, b));
        assert_eq!(
            names,
            ["10", "9", "alpha", "b1", "beta", "Beta", "beta_2", "beta-2", "Zeta"]
        );
        let record = |agent: &str, sequence: u64| {
            json!({"schemaVersion": 2, "recordId": format!("r{sequence}"), "sequence": sequence,
                   "timestampUnixMs": 1, "runId": "r", "attempt": 1, "traceId": "t",
                   "spanId": format!("s{sequence}"), "recordType": "span_start", "kind": "agent",
                   "name": "invoke_agent", "startUnixMs": 1,
                   "attributes": {"oma.agent.name": agent}})
        };
        let run = materialize_run(vec![record("Zeta", 1), record("alpha", 2)], false)
            .expect("a run")
            .expect("records");
        assert_eq!(run["agents"], json!(["alpha", "Zeta"]));
    }

    /// Times as `toISOString` writes them, years past 9999 and before 0 included.
    #[test]
    fn dates_as_javascript_writes_them() {
        assert_eq!(iso_date(0.0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso_date(1_700_000_000_032.0), "2023-11-14T22:13:20.032Z");
        assert_eq!(iso_date(951_782_400_000.0), "2000-02-29T00:00:00.000Z");
        assert_eq!(iso_date(-1.0), "1969-12-31T23:59:59.999Z");
        assert_eq!(iso_date(1.9), "1970-01-01T00:00:00.001Z");
        assert_eq!(iso_date(8.64e15), "+275760-09-13T00:00:00.000Z");
        assert_eq!(
            iso_date(-62_198_755_200_000.0),
            "-000001-01-01T00:00:00.000Z"
        );
        assert_eq!(
            iso_date(253_402_300_800_000.0),
            "+010000-01-01T00:00:00.000Z"
        );
    }
}
