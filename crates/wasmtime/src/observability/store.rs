//! OMA's `InMemoryTraceStore` and `TraceStoreExporter` for Rust embedders: the reference trace
//! store, for tests and short-lived local runs. Records are checked with OMA's messages, kept
//! once per `recordId` (a second end of one span is kept out and reported), read back by run as
//! the codec materializes them (`codec.materialize-run`, the rule every host calls), listed in
//! pages with opaque cursors, and deleted by run, by query or by a retention policy.

use std::collections::hash_map::RandomState;
use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Map, Value};

use super::batching::{AbortSignal, ExportResult, ExportStatus, TraceExporter};
use super::sink::SinkError;
use crate::bindings::oma::agent::exchange::TraceRecord;
use crate::bindings::oma::agent::types::Error as WitError;

/// The record schema major a store takes.
pub const TRACE_STORE_SCHEMA_MAJOR: u64 = 2;

const STATUS_CODES: &[&str] = &[
    "ok",
    "error",
    "cancelled",
    "timeout",
    "budget_exhausted",
    "rejected",
    "suspended",
    "skipped",
];
const SPAN_KINDS: &[&str] = &[
    "run",
    "routing",
    "agent",
    "task",
    "llm",
    "tool",
    "plan",
    "consensus",
    "checkpoint",
    "callback",
];
const EVENT_NAMES: &[&str] = &[
    "retry_scheduled",
    "budget_exhausted",
    "first_chunk",
    "approval_decision",
    "checkpoint_failed",
    "telemetry_diagnostic",
    "loop_detected",
    "stream_chunk",
    "consensus_verdict",
];
const LINK_RELATIONS: &[&str] = &["continued_from", "depends_on", "consumed", "delegated_from"];
const POLICY_KEYS: &[&str] = &["maxAgeMs", "maxRuns", "statuses"];

/// What kind of refusal a [`TraceStoreError`] is: OMA's three codes, and one of ours for a
/// codec that failed to read back what the store holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceStoreErrorCode {
    /// `INVALID_ARGUMENT`: a record, query or policy is not what the contract allows.
    InvalidArgument,
    /// `INVALID_CURSOR`: a cursor this store did not give, or one no longer valid.
    InvalidCursor,
    /// `UNSUPPORTED_SCHEMA_VERSION`: a record of another schema major.
    UnsupportedSchemaVersion,
    /// `MATERIALIZE_FAILED`: the codec trapped or refused the records of a run (the guest's
    /// failure, not the caller's input).
    MaterializeFailed,
}

impl TraceStoreErrorCode {
    /// The code as OMA spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            TraceStoreErrorCode::InvalidArgument => "INVALID_ARGUMENT",
            TraceStoreErrorCode::InvalidCursor => "INVALID_CURSOR",
            TraceStoreErrorCode::UnsupportedSchemaVersion => "UNSUPPORTED_SCHEMA_VERSION",
            TraceStoreErrorCode::MaterializeFailed => "MATERIALIZE_FAILED",
        }
    }
}

/// A store refused its input (OMA's `TraceStoreError`): the code, where (`records[0].sequence`,
/// `limit`) and OMA's message. Nothing was changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceStoreError {
    /// What kind of refusal.
    pub code: TraceStoreErrorCode,
    /// The field refused, when one is.
    pub field: Option<String>,
    /// OMA's message.
    pub message: String,
}

impl std::fmt::Display for TraceStoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for TraceStoreError {}

fn fail(field: &str, message: String) -> TraceStoreError {
    fail_with(TraceStoreErrorCode::InvalidArgument, field, message)
}

fn fail_with(code: TraceStoreErrorCode, field: &str, message: String) -> TraceStoreError {
    TraceStoreError {
        code,
        field: Some(field.to_owned()),
        message,
    }
}

fn codec_failed(message: String) -> TraceStoreError {
    TraceStoreError {
        code: TraceStoreErrorCode::MaterializeFailed,
        field: None,
        message,
    }
}

/// Why a record was kept out of the store by [`InMemoryTraceStore::append`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreDiagnosticCode {
    /// `record_id_collision`: a `recordId` already kept with another payload (the first stays).
    RecordIdCollision,
    /// `duplicate_span_end`: a second end of one span (the first stays authoritative).
    DuplicateSpanEnd,
}

impl StoreDiagnosticCode {
    /// The code as OMA spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            StoreDiagnosticCode::RecordIdCollision => "record_id_collision",
            StoreDiagnosticCode::DuplicateSpanEnd => "duplicate_span_end",
        }
    }
}

/// A record kept out of the store (OMA's `TraceStoreDiagnostic`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreDiagnostic {
    /// Why.
    pub code: StoreDiagnosticCode,
    /// The record's run.
    pub run_id: String,
    /// The record's trace.
    pub trace_id: String,
    /// The record's span.
    pub span_id: String,
    /// OMA's message.
    pub message: String,
}

/// What one [`InMemoryTraceStore::append`] did (OMA's `AppendResult`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AppendResult {
    /// Records kept.
    pub written: u64,
    /// Records already kept (same `recordId`) or a second end of a span.
    pub deduplicated: u64,
    /// The records kept out that OMA reports.
    pub diagnostics: Vec<StoreDiagnostic>,
}

/// What a deletion did (OMA's `DeleteResult`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeleteResult {
    /// Runs deleted.
    pub runs_deleted: u64,
    /// Their records.
    pub records_deleted: u64,
    /// The runs deleted, oldest first.
    pub run_ids: Vec<String>,
}

/// One page of [`InMemoryTraceStore::query_runs`] (OMA's `TraceQueryResult`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunPage {
    /// The runs, as OMA's `RunSummary` JSON (the materialized run without spans and records).
    pub items: Vec<Map<String, Value>>,
    /// Pass it as [`TraceQuery::cursor`] (with the same query) for the next page; `None` when
    /// no page follows.
    pub next_cursor: Option<String>,
}

/// In which order runs are listed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum QueryOrder {
    /// Oldest first (`started_asc`).
    StartedAsc,
    /// Newest first (`started_desc`), OMA's default.
    #[default]
    StartedDesc,
}

impl QueryOrder {
    fn as_str(self) -> &'static str {
        match self {
            QueryOrder::StartedAsc => "started_asc",
            QueryOrder::StartedDesc => "started_desc",
        }
    }
}

/// Which runs to list or delete (OMA's `TraceQuery`; `delete` takes it without `limit`,
/// `cursor` and `order`, OMA's `TraceDeleteQuery`). A list matches a run that has any of its
/// values; each list must hold non-empty strings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TraceQuery {
    /// Only these runs.
    pub run_id: Option<Vec<String>>,
    /// Runs started at or after this ISO-8601 time.
    pub started_after: Option<String>,
    /// Runs started before this ISO-8601 time.
    pub started_before: Option<String>,
    /// Runs that ended with one of these statuses (OMA's status codes).
    pub status: Option<Vec<String>>,
    /// Runs with one of these agents.
    pub agent: Option<Vec<String>>,
    /// Runs with one of these tasks.
    pub task_id: Option<Vec<String>>,
    /// Runs that called one of these models.
    pub model: Option<Vec<String>>,
    /// Runs that called one of these providers.
    pub provider: Option<Vec<String>>,
    /// Most runs on a page, 1 through 500 (50).
    pub limit: Option<u32>,
    /// The `next_cursor` of the page before.
    pub cursor: Option<String>,
    /// The order (newest first).
    pub order: Option<QueryOrder>,
}

/// What retention deletes (OMA's `RetentionPolicy`): runs started more than `max_age_ms` ago,
/// and all but the newest `max_runs`; with `statuses`, only among runs that ended with one of
/// them (alone: all of those). At least one must be set.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RetentionPolicy {
    /// Oldest run kept, in milliseconds before the store's clock.
    pub max_age_ms: Option<f64>,
    /// Most runs kept.
    pub max_runs: Option<u64>,
    /// Only runs that ended with one of these statuses.
    pub statuses: Option<Vec<String>>,
}

fn json_strings(value: &Value, field: &str) -> Result<Option<Vec<String>>, TraceStoreError> {
    let refuse = || fail(field, format!("{field} must contain non-empty strings."));
    match value {
        Value::Null => Ok(None),
        Value::String(text) => Ok(Some(vec![text.clone()])),
        Value::Array(items) => items
            .iter()
            .map(|item| item.as_str().map(str::to_owned).ok_or_else(refuse))
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        _ => Err(refuse()),
    }
}

impl TraceQuery {
    /// A query from OMA's JSON `TraceQuery` (camelCase keys, a list or one string where OMA
    /// takes either), with OMA's refusals: a key OMA has not, a value of the wrong type.
    pub fn from_json(query: &Value) -> Result<TraceQuery, TraceStoreError> {
        let Some(map) = query.as_object() else {
            return Err(fail("query", "query must be an object.".into()));
        };
        let mut out = TraceQuery::default();
        for (key, value) in map {
            match key.as_str() {
                "runId" => out.run_id = json_strings(value, "runId")?,
                "status" => out.status = json_strings(value, "status")?,
                "agent" => out.agent = json_strings(value, "agent")?,
                "taskId" => out.task_id = json_strings(value, "taskId")?,
                "model" => out.model = json_strings(value, "model")?,
                "provider" => out.provider = json_strings(value, "provider")?,
                "startedAfter" | "startedBefore" => {
                    let time = match value {
                        Value::Null => None,
                        Value::String(text) => Some(text.clone()),
                        _ => {
                            return Err(fail(
                                key,
                                format!("{key} must be a valid ISO-8601 timestamp."),
                            ))
                        }
                    };
                    if key == "startedAfter" {
                        out.started_after = time;
                    } else {
                        out.started_before = time;
                    }
                }
                "limit" => {
                    out.limit = match value {
                        Value::Null => None,
                        _ => Some(
                            // A whole number written with a fraction (`2.0`) is the integer
                            // JavaScript reads; one past `u32` is refused by the range check.
                            value
                                .as_f64()
                                .filter(|n| n.fract() == 0.0 && *n >= 0.0)
                                .map(|n| n.min(f64::from(u32::MAX)) as u32)
                                .ok_or_else(|| {
                                    fail(
                                        "limit",
                                        "limit must be an integer from 1 through 500.".into(),
                                    )
                                })?,
                        ),
                    }
                }
                "cursor" => {
                    out.cursor = match value {
                        Value::Null => None,
                        Value::String(text) => Some(text.clone()),
                        _ => return Err(bad_cursor_type()),
                    }
                }
                "order" => {
                    out.order = match value.as_str() {
                        _ if value.is_null() => None,
                        Some("started_asc") => Some(QueryOrder::StartedAsc),
                        Some("started_desc") => Some(QueryOrder::StartedDesc),
                        _ => {
                            return Err(fail(
                                "order",
                                "order must be started_asc or started_desc.".into(),
                            ))
                        }
                    }
                }
                _ => return Err(fail(key, format!("query has no key {key}."))),
            }
        }
        Ok(out)
    }
}

impl RetentionPolicy {
    /// A policy from OMA's JSON `RetentionPolicy` (`maxAgeMs`, `maxRuns`, `statuses`), with
    /// OMA's refusals.
    pub fn from_json(policy: &Value) -> Result<RetentionPolicy, TraceStoreError> {
        let Some(map) = policy.as_object() else {
            return Err(fail("policy", "policy must be an object.".into()));
        };
        let mut out = RetentionPolicy::default();
        for (key, value) in map {
            match key.as_str() {
                "maxAgeMs" if !value.is_null() => {
                    out.max_age_ms = Some(value.as_f64().ok_or_else(|| {
                        fail("maxAgeMs", "maxAgeMs must be a finite number >= 0.".into())
                    })?)
                }
                "maxRuns" if !value.is_null() => {
                    out.max_runs = Some(value.as_u64().ok_or_else(|| {
                        fail("maxRuns", "maxRuns must be a non-negative integer.".into())
                    })?)
                }
                "statuses" => out.statuses = json_strings(value, "statuses")?,
                _ if POLICY_KEYS.contains(&key.as_str()) => {}
                _ => return Err(fail(key, format!("policy has no key {key}."))),
            }
        }
        Ok(out)
    }
}

fn bad_cursor_type() -> TraceStoreError {
    fail_with(
        TraceStoreErrorCode::InvalidCursor,
        "cursor",
        "cursor must be an opaque non-empty string.".into(),
    )
}

// The record checks, with OMA's messages.

fn non_empty(value: Option<&Value>, field: &str) -> Result<(), TraceStoreError> {
    match value.and_then(Value::as_str) {
        Some(text) if !text.is_empty() => Ok(()),
        _ => Err(fail(field, format!("{field} must be a non-empty string."))),
    }
}

fn finite(value: Option<&Value>, field: &str, least: u32) -> Result<f64, TraceStoreError> {
    match value.and_then(Value::as_f64) {
        Some(n) if n.is_finite() && n >= f64::from(least) => Ok(n),
        _ => Err(fail(
            field,
            format!("{field} must be a finite number >= {least}."),
        )),
    }
}

fn integer(n: f64, field: &str) -> Result<(), TraceStoreError> {
    if n.fract() == 0.0 {
        Ok(())
    } else {
        Err(fail(field, format!("{field} must be an integer.")))
    }
}

fn is_attribute(value: &Value) -> bool {
    fn kind(item: &Value) -> Option<u8> {
        match item {
            Value::String(_) => Some(0),
            Value::Bool(_) => Some(1),
            Value::Number(n) if n.as_f64().is_some_and(f64::is_finite) => Some(2),
            _ => None,
        }
    }
    if kind(value).is_some() {
        return true;
    }
    let Some(items) = value.as_array() else {
        return false;
    };
    let kinds: Option<BTreeSet<u8>> = items.iter().map(kind).collect();
    kinds.is_some_and(|kinds| kinds.len() <= 1)
}

fn present(value: Option<&Value>) -> Option<&Value> {
    value.filter(|v| !v.is_null())
}

/// Refuses (with OMA's message) what is not a trace record of schema 2; `index` is the
/// record's place in the appended list.
fn check_record(record: &Value, index: usize) -> Result<(), TraceStoreError> {
    let prefix = format!("records[{index}]");
    let Some(map) = record.as_object() else {
        return Err(fail(&prefix, format!("{prefix} must be an object.")));
    };
    let field = |name: &str| format!("{prefix}.{name}");
    let get = |name: &str| map.get(name);
    let version = get("schemaVersion");
    if version.and_then(Value::as_f64) != Some(TRACE_STORE_SCHEMA_MAJOR as f64) {
        return Err(match version.filter(|v| v.is_number()) {
            Some(number) => fail_with(
                TraceStoreErrorCode::UnsupportedSchemaVersion,
                &field("schemaVersion"),
                format!(
                    "Unsupported TraceRecord schema major {number}; supported major is {TRACE_STORE_SCHEMA_MAJOR}."
                ),
            ),
            None => fail(
                &field("schemaVersion"),
                format!("{prefix}.schemaVersion must be {TRACE_STORE_SCHEMA_MAJOR}."),
            ),
        });
    }
    non_empty(get("recordId"), &field("recordId"))?;
    let sequence = finite(get("sequence"), &field("sequence"), 1)?;
    integer(sequence, &field("sequence"))?;
    finite(get("timestampUnixMs"), &field("timestampUnixMs"), 0)?;
    non_empty(get("runId"), &field("runId"))?;
    let attempt = finite(get("attempt"), &field("attempt"), 1)?;
    integer(attempt, &field("attempt"))?;
    non_empty(get("traceId"), &field("traceId"))?;
    non_empty(get("spanId"), &field("spanId"))?;
    if let Some(parent) = present(get("parentSpanId")) {
        non_empty(Some(parent), &field("parentSpanId"))?;
    }
    let kind = get("recordType").and_then(Value::as_str);
    if !matches!(kind, Some("span_start" | "span_event" | "span_end")) {
        return Err(fail(
            &field("recordType"),
            format!("{prefix}.recordType is invalid."),
        ));
    }
    let Some(attributes) = get("attributes").and_then(Value::as_object) else {
        return Err(fail(
            &field("attributes"),
            format!("{prefix}.attributes must be an object."),
        ));
    };
    for (key, value) in attributes {
        if !is_attribute(value) {
            let name = format!("{prefix}.attributes.{key}");
            return Err(fail(
                &name,
                format!("{name} is not a supported trace attribute."),
            ));
        }
    }
    if matches!(kind, Some("span_start" | "span_end")) {
        non_empty(get("kind"), &field("kind"))?;
        if !get("kind")
            .and_then(Value::as_str)
            .is_some_and(|k| SPAN_KINDS.contains(&k))
        {
            return Err(fail(&field("kind"), format!("{prefix}.kind is invalid.")));
        }
        non_empty(get("name"), &field("name"))?;
        finite(get("startUnixMs"), &field("startUnixMs"), 0)?;
    }
    if kind == Some("span_event") {
        non_empty(get("name"), &field("name"))?;
        if !get("name")
            .and_then(Value::as_str)
            .is_some_and(|n| EVENT_NAMES.contains(&n))
        {
            return Err(fail(
                &field("name"),
                format!("{prefix}.name is not a supported event name."),
            ));
        }
    }
    if let Some(links) = present(get("links")) {
        let Some(links) = links.as_array() else {
            return Err(fail(
                &field("links"),
                format!("{prefix}.links must be an array."),
            ));
        };
        for (i, link) in links.iter().enumerate() {
            let at = format!("{prefix}.links[{i}]");
            let Some(link) = link.as_object() else {
                return Err(fail(&at, format!("{at} must be an object.")));
            };
            non_empty(link.get("traceId"), &format!("{at}.traceId"))?;
            non_empty(link.get("spanId"), &format!("{at}.spanId"))?;
            if !link
                .get("relation")
                .and_then(Value::as_str)
                .is_some_and(|r| LINK_RELATIONS.contains(&r))
            {
                let name = format!("{at}.relation");
                return Err(fail(&name, format!("{name} is invalid.")));
            }
        }
    }
    if kind == Some("span_end") {
        finite(get("endUnixMs"), &field("endUnixMs"), 0)?;
        finite(get("durationMs"), &field("durationMs"), 0)?;
        let status = get("status").and_then(Value::as_object);
        if !status
            .and_then(|s| s.get("code"))
            .and_then(Value::as_str)
            .is_some_and(|c| STATUS_CODES.contains(&c))
        {
            return Err(fail(
                &field("status.code"),
                format!("{prefix}.status.code is invalid."),
            ));
        }
        if let Some(message) = status.and_then(|s| present(s.get("message"))) {
            if !message.is_string() {
                return Err(fail(
                    &field("status.message"),
                    format!("{prefix}.status.message must be a string."),
                ));
            }
        }
    }
    Ok(())
}

// Times.

/// Milliseconds since the epoch of an ISO-8601 date or date-time (`2023-11-14`,
/// `2023-11-14T22:13:20Z`, `2023-11-14T22:13:20.123+01:00`; without an offset, UTC), or
/// `None` when `text` is not one.
pub(crate) fn iso_ms(text: &str) -> Option<f64> {
    let bytes = text.as_bytes();
    let digits = |from: usize, len: usize| -> Option<i64> {
        let part = bytes.get(from..from + len)?;
        if !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(part).ok()?.parse().ok()
    };
    let (sign, at) = match bytes.first()? {
        b'+' => (1, 1),
        b'-' => (-1, 1),
        _ => (1, 0),
    };
    let year_len = if at == 1 { 6 } else { 4 };
    let year = sign * digits(at, year_len)?;
    let mut i = at + year_len;
    let expect = |i: usize, c: u8| bytes.get(i) == Some(&c);
    if !expect(i, b'-') {
        return None;
    }
    let month = digits(i + 1, 2)?;
    if !expect(i + 3, b'-') {
        return None;
    }
    let day = digits(i + 4, 2)?;
    i += 6;
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    let mut ms = days_from_civil(year, month, day) as f64 * 86_400_000.0;
    if i == bytes.len() {
        return Some(ms);
    }
    if !expect(i, b'T') {
        return None;
    }
    let hour = digits(i + 1, 2)?;
    if !expect(i + 3, b':') {
        return None;
    }
    let minute = digits(i + 4, 2)?;
    i += 6;
    let mut second = 0;
    let mut millis = 0.0;
    if expect(i, b':') {
        second = digits(i + 1, 2)?;
        i += 3;
        if expect(i, b'.') {
            let start = i + 1;
            let mut end = start;
            while bytes.get(end).is_some_and(u8::is_ascii_digit) {
                end += 1;
            }
            if end == start {
                return None;
            }
            let fraction: f64 = format!("0.{}", &text[start..end]).parse().ok()?;
            millis = (fraction * 1000.0).trunc();
            i = end;
        }
    }
    if hour > 24 || minute > 59 || second > 59 || (hour == 24 && (minute, second) != (0, 0)) {
        return None;
    }
    ms += ((hour * 60 + minute) * 60 + second) as f64 * 1000.0 + millis;
    match bytes.get(i) {
        None => Some(ms),
        Some(b'Z') if i + 1 == bytes.len() => Some(ms),
        Some(&c @ (b'+' | b'-')) => {
            let oh = digits(i + 1, 2)?;
            if !expect(i + 3, b':') || i + 6 != bytes.len() {
                return None;
            }
            let om = digits(i + 4, 2)?;
            if oh > 23 || om > 59 {
                return None;
            }
            let offset = ((oh * 60 + om) * 60_000) as f64;
            Some(if c == b'+' { ms - offset } else { ms + offset })
        }
        _ => None,
    }
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a proleptic Gregorian date.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

// The codec.

/// The future a [`RunMaterializer`] answers with: the codec's outer (trap or host) and inner
/// (typed) results.
pub type MaterializeFuture<'a> =
    Pin<Box<dyn Future<Output = anyhow::Result<Result<String, WitError>>> + Send + 'a>>;

/// A guest whose codec materializes runs (`codec.materialize-run`): [`Guest`](crate::Guest)
/// and [`DriverGuest`](crate::DriverGuest). The store reads runs back through it, so the rule
/// of what a run is stays the core's.
pub trait RunMaterializer: Send {
    /// OMA's `materializeRun` of `records` (a JSON list): the run as JSON, `null` for none.
    fn materialize_run<'a>(
        &'a mut self,
        records: &'a str,
        include_records: bool,
    ) -> MaterializeFuture<'a>;
}

impl<T: RunMaterializer + ?Sized> RunMaterializer for Box<T> {
    fn materialize_run<'a>(
        &'a mut self,
        records: &'a str,
        include_records: bool,
    ) -> MaterializeFuture<'a> {
        (**self).materialize_run(records, include_records)
    }
}

impl RunMaterializer for crate::Guest {
    fn materialize_run<'a>(
        &'a mut self,
        records: &'a str,
        include_records: bool,
    ) -> MaterializeFuture<'a> {
        Box::pin(crate::Guest::materialize_run(
            self,
            records,
            include_records,
        ))
    }
}

impl RunMaterializer for crate::DriverGuest {
    fn materialize_run<'a>(
        &'a mut self,
        records: &'a str,
        include_records: bool,
    ) -> MaterializeFuture<'a> {
        Box::pin(crate::DriverGuest::materialize_run(
            self,
            records,
            include_records,
        ))
    }
}

// The store.

struct Entry {
    record: Value,
    run_id: String,
    revision: u64,
    arrival: u64,
}

#[derive(Default)]
struct State {
    entries: Vec<Entry>,
    /// recordId -> (runId, the record's JSON).
    seen: HashMap<String, (String, String)>,
    /// `traceId:spanId` -> the recordId of the span's first end.
    first_end: HashMap<String, String>,
    revision: u64,
    arrival: u64,
    delete_epoch: u64,
}

/// A run's summary with the time it started, for ordering and filtering.
struct Summary {
    run_id: String,
    started_at: String,
    started_ms: f64,
    fields: Map<String, Value>,
}

impl Summary {
    fn strings(&self, key: &str) -> Vec<&str> {
        self.fields
            .get(key)
            .and_then(Value::as_array)
            .map(|items| items.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    }

    fn status(&self) -> Option<&str> {
        self.fields.get("status").and_then(Value::as_str)
    }
}

/// A query checked and normalized: each list deduplicated and sorted, times read.
struct Normalized {
    limit: usize,
    order: QueryOrder,
    after: Option<f64>,
    before: Option<f64>,
    run_ids: Option<Vec<String>>,
    status: Option<Vec<String>>,
    agent: Option<Vec<String>>,
    task_id: Option<Vec<String>>,
    model: Option<Vec<String>>,
    provider: Option<Vec<String>>,
}

fn string_list(
    value: &Option<Vec<String>>,
    field: &str,
) -> Result<Option<Vec<String>>, TraceStoreError> {
    let Some(values) = value else {
        return Ok(None);
    };
    if values.is_empty() || values.iter().any(String::is_empty) {
        return Err(fail(
            field,
            format!("{field} must contain non-empty strings."),
        ));
    }
    Ok(Some(
        values
            .iter()
            .cloned()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect(),
    ))
}

fn status_list(
    value: &Option<Vec<String>>,
    field: &str,
) -> Result<Option<Vec<String>>, TraceStoreError> {
    let values = string_list(value, field)?;
    if values
        .iter()
        .flatten()
        .any(|v| !STATUS_CODES.contains(&v.as_str()))
    {
        return Err(fail(
            field,
            format!("{field} contains an unsupported status."),
        ));
    }
    Ok(values)
}

fn time_of(value: &Option<String>, field: &str) -> Result<Option<f64>, TraceStoreError> {
    value
        .as_deref()
        .map(|text| {
            iso_ms(text).ok_or_else(|| {
                fail(
                    field,
                    format!("{field} must be a valid ISO-8601 timestamp."),
                )
            })
        })
        .transpose()
}

impl Normalized {
    fn new(query: &TraceQuery) -> Result<Normalized, TraceStoreError> {
        let limit = query.limit.unwrap_or(50);
        if !(1..=500).contains(&limit) {
            return Err(fail(
                "limit",
                "limit must be an integer from 1 through 500.".into(),
            ));
        }
        let after = time_of(&query.started_after, "startedAfter")?;
        let before = time_of(&query.started_before, "startedBefore")?;
        if let (Some(after), Some(before)) = (after, before) {
            if after >= before {
                return Err(fail(
                    "startedAfter",
                    "startedAfter must be before startedBefore.".into(),
                ));
            }
        }
        Ok(Normalized {
            limit: limit as usize,
            order: query.order.unwrap_or_default(),
            after,
            before,
            run_ids: string_list(&query.run_id, "runId")?,
            status: status_list(&query.status, "status")?,
            agent: string_list(&query.agent, "agent")?,
            task_id: string_list(&query.task_id, "taskId")?,
            model: string_list(&query.model, "model")?,
            provider: string_list(&query.provider, "provider")?,
        })
    }

    /// What a cursor is bound to: the query but its limit and cursor.
    fn identity(&self) -> String {
        serde_json::json!([
            self.run_ids,
            self.after,
            self.before,
            self.status,
            self.agent,
            self.task_id,
            self.model,
            self.provider,
            self.order.as_str()
        ])
        .to_string()
    }

    fn matches(&self, summary: &Summary) -> bool {
        let any_of = |key: &str, wanted: &Option<Vec<String>>| {
            wanted.as_ref().is_none_or(|wanted| {
                let actual = summary.strings(key);
                wanted.iter().any(|w| actual.contains(&w.as_str()))
            })
        };
        self.run_ids
            .as_ref()
            .is_none_or(|ids| ids.contains(&summary.run_id))
            && self.after.is_none_or(|after| summary.started_ms >= after)
            && self.before.is_none_or(|before| summary.started_ms < before)
            && self.status.as_ref().is_none_or(|wanted| {
                summary
                    .status()
                    .is_some_and(|s| wanted.iter().any(|w| w == s))
            })
            && any_of("agents", &self.agent)
            && any_of("taskIds", &self.task_id)
            && any_of("models", &self.model)
            && any_of("providers", &self.provider)
    }
}

fn compare_runs(a: &Summary, b: &Summary) -> std::cmp::Ordering {
    a.started_ms
        .total_cmp(&b.started_ms)
        .then_with(|| a.run_id.cmp(&b.run_id))
}

type Clock = Box<dyn Fn() -> f64 + Send + Sync>;
type DiagnosticCallback = Box<dyn Fn(&StoreDiagnostic) + Send + Sync>;

/// OMA's non-durable trace store. Thread-safe: share it in an [`Arc`] (a
/// [`TraceStoreExporter`] appends to it from a batching sink's threads).
///
/// [`append`](Self::append) and [`delete_run`](Self::delete_run) act at once; reading runs
/// back (`get_run`, `query_runs`, `delete`, `apply_retention`, `records`) materializes them
/// through the guest's codec, so those are `async`, as OMA's store methods are.
pub struct InMemoryTraceStore {
    state: Mutex<State>,
    codec: tokio::sync::Mutex<Box<dyn RunMaterializer>>,
    now: Clock,
    on_diagnostic: Option<DiagnosticCallback>,
    secret: RandomState,
}

impl std::fmt::Debug for InMemoryTraceStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InMemoryTraceStore").finish_non_exhaustive()
    }
}

fn wall_clock_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

impl InMemoryTraceStore {
    /// An empty store that reads runs back through `codec` (a guest of either world), with
    /// the wall clock for retention and no diagnostics callback.
    pub fn new(codec: impl RunMaterializer + 'static) -> Self {
        InMemoryTraceStore {
            state: Mutex::new(State::default()),
            codec: tokio::sync::Mutex::new(Box::new(codec)),
            now: Box::new(wall_clock_ms),
            on_diagnostic: None,
            secret: RandomState::new(),
        }
    }

    /// The clock retention reads (OMA's `now`), in milliseconds since the epoch.
    pub fn with_clock(mut self, now: impl Fn() -> f64 + Send + Sync + 'static) -> Self {
        self.now = Box::new(now);
        self
    }

    /// Hears of each record kept out (OMA's `onDiagnostic`); a panic in it is contained.
    pub fn with_diagnostics(
        mut self,
        on_diagnostic: impl Fn(&StoreDiagnostic) + Send + Sync + 'static,
    ) -> Self {
        self.on_diagnostic = Some(Box::new(on_diagnostic));
        self
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while the lock was held cannot have left the state half-changed: every
        // change is made after the checks, without calls out.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Keeps `records` (OMA's `TraceRecord` JSON): all or none, each `recordId` once, the first
    /// end of a span only. A record that is not of schema 2 is refused with OMA's message and
    /// nothing is kept.
    pub fn append(&self, records: &[Value]) -> Result<AppendResult, TraceStoreError> {
        for (index, record) in records.iter().enumerate() {
            check_record(record, index)?;
        }
        let mut diagnostics = Vec::new();
        let mut deduplicated = 0;
        let mut written = 0;
        {
            let mut state = self.lock();
            let mut seen = state.seen.clone();
            let mut ends = state.first_end.clone();
            let mut writes = Vec::new();
            for record in records {
                let text = |key: &str| record[key].as_str().unwrap_or_default().to_owned();
                let (record_id, run_id) = (text("recordId"), text("runId"));
                let fingerprint = record.to_string();
                let diagnostic = |code: StoreDiagnosticCode, message: &str| StoreDiagnostic {
                    code,
                    run_id: run_id.clone(),
                    trace_id: text("traceId"),
                    span_id: text("spanId"),
                    message: message.to_owned(),
                };
                if let Some((_, kept)) = seen.get(&record_id) {
                    deduplicated += 1;
                    if *kept != fingerprint {
                        diagnostics.push(diagnostic(
                            StoreDiagnosticCode::RecordIdCollision,
                            "A recordId already existed with a different payload; the first record was retained.",
                        ));
                    }
                    continue;
                }
                if record["recordType"] == "span_end" {
                    let span = format!("{}:{}", text("traceId"), text("spanId"));
                    if ends.contains_key(&span) {
                        deduplicated += 1;
                        diagnostics.push(diagnostic(
                            StoreDiagnosticCode::DuplicateSpanEnd,
                            "A duplicate span_end was ignored; the first accepted end remains authoritative.",
                        ));
                        seen.insert(record_id, (run_id, fingerprint));
                        continue;
                    }
                    ends.insert(span, record_id.clone());
                }
                seen.insert(record_id, (run_id.clone(), fingerprint));
                writes.push((record.clone(), run_id));
            }
            if !writes.is_empty() {
                state.revision += 1;
                let revision = state.revision;
                written = writes.len() as u64;
                for (record, run_id) in writes {
                    state.arrival += 1;
                    let arrival = state.arrival;
                    state.entries.push(Entry {
                        record,
                        run_id,
                        revision,
                        arrival,
                    });
                }
            }
            state.seen = seen;
            state.first_end = ends;
        }
        if let Some(callback) = &self.on_diagnostic {
            for diagnostic in &diagnostics {
                // Diagnostics are fail-open: a callback that panics changes nothing.
                let _ =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| callback(diagnostic)));
            }
        }
        Ok(AppendResult {
            written,
            deduplicated,
            diagnostics,
        })
    }

    /// [`append`](Self::append) of the records a run hands a sink; a record whose JSON does not
    /// parse is refused as OMA refuses a record it cannot serialize.
    pub fn append_records(&self, records: &[TraceRecord]) -> Result<AppendResult, TraceStoreError> {
        let values = records
            .iter()
            .enumerate()
            .map(|(i, record)| {
                serde_json::from_str(&record.json).map_err(|_| {
                    fail(
                        &format!("records[{i}]"),
                        format!("records[{i}] must be JSON-serializable."),
                    )
                })
            })
            .collect::<Result<Vec<Value>, _>>()?;
        self.append(&values)
    }

    async fn materialize(
        &self,
        records: Vec<Value>,
        include_records: bool,
    ) -> Result<Option<Map<String, Value>>, TraceStoreError> {
        let text = Value::Array(records).to_string();
        let answer = {
            let mut codec = self.codec.lock().await;
            codec.materialize_run(&text, include_records).await
        };
        let json = answer
            .map_err(|e| codec_failed(format!("the codec failed: {e}")))?
            .map_err(|e| codec_failed(format!("the codec refused a stored run: {}", e.message)))?;
        match serde_json::from_str(&json) {
            Ok(Value::Null) => Ok(None),
            Ok(Value::Object(run)) => Ok(Some(run)),
            _ => Err(codec_failed(
                "the codec answered a run that is not an object".into(),
            )),
        }
    }

    /// The run `run_id` as the codec materializes it (OMA's `StoredRun` JSON; with
    /// `include_records`, its records in order), or `None` when the store has none of it.
    pub async fn get_run(
        &self,
        run_id: &str,
        include_records: bool,
    ) -> Result<Option<Map<String, Value>>, TraceStoreError> {
        non_empty(Some(&Value::from(run_id)), "runId")?;
        let records: Vec<Value> = self
            .lock()
            .entries
            .iter()
            .filter(|e| e.run_id == run_id)
            .map(|e| e.record.clone())
            .collect();
        if records.is_empty() {
            return Ok(None);
        }
        self.materialize(records, include_records).await
    }

    /// The runs kept as of revision `snapshot`, summarized.
    async fn summaries(&self, snapshot: u64) -> Result<Vec<Summary>, TraceStoreError> {
        let groups: Vec<Vec<Value>> = {
            let state = self.lock();
            let mut order: Vec<&str> = Vec::new();
            let mut by_run: HashMap<&str, Vec<Value>> = HashMap::new();
            for entry in state.entries.iter().filter(|e| e.revision <= snapshot) {
                by_run
                    .entry(&entry.run_id)
                    .or_insert_with(|| {
                        order.push(&entry.run_id);
                        Vec::new()
                    })
                    .push(entry.record.clone());
            }
            order
                .into_iter()
                .filter_map(|run| by_run.remove(run))
                .collect()
        };
        let mut out = Vec::with_capacity(groups.len());
        for group in groups {
            let Some(mut fields) = self.materialize(group, false).await? else {
                continue;
            };
            fields.remove("spans");
            fields.remove("records");
            let run_id = fields
                .get("runId")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let started_at = fields
                .get("startedAt")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let started_ms = iso_ms(&started_at)
                .ok_or_else(|| codec_failed("the codec answered a run without startedAt".into()))?;
            out.push(Summary {
                run_id,
                started_at,
                started_ms,
                fields,
            });
        }
        Ok(out)
    }

    /// One page of run summaries (OMA's `queryRuns`): `next_cursor` when more follow. A
    /// cursor reads the store as it was at the first page, and fails once runs were deleted.
    pub async fn query_runs(&self, query: &TraceQuery) -> Result<RunPage, TraceStoreError> {
        let q = Normalized::new(query)?;
        let id = q.identity();
        let (mut snapshot, delete_epoch) = {
            let state = self.lock();
            (state.revision, state.delete_epoch)
        };
        let mut after = None;
        if let Some(cursor) = &query.cursor {
            let position = self.decode(cursor)?;
            if position.query != id || position.delete_epoch != delete_epoch {
                return Err(fail_with(
                    TraceStoreErrorCode::InvalidCursor,
                    "cursor",
                    "Cursor does not match this query or is no longer valid.".into(),
                ));
            }
            snapshot = position.snapshot_revision;
            after = Some(position);
        }
        let mut summaries: Vec<Summary> = self
            .summaries(snapshot)
            .await?
            .into_iter()
            .filter(|s| q.matches(s))
            .collect();
        summaries.sort_by(compare_runs);
        if q.order == QueryOrder::StartedDesc {
            summaries.reverse();
        }
        let mut start = 0;
        if let Some(after) = after {
            start = summaries
                .iter()
                .position(|s| s.started_at == after.started_at && s.run_id == after.run_id)
                .map(|i| i + 1)
                .ok_or_else(|| {
                    fail_with(
                        TraceStoreErrorCode::InvalidCursor,
                        "cursor",
                        "Cursor position is not present in the query snapshot.".into(),
                    )
                })?;
        }
        let end = (start + q.limit).min(summaries.len());
        let mut page = RunPage::default();
        if end < summaries.len() && end > start {
            let last = &summaries[end - 1];
            page.next_cursor = Some(self.encode(&Position {
                snapshot_revision: snapshot,
                delete_epoch,
                query: id,
                started_at: last.started_at.clone(),
                run_id: last.run_id.clone(),
            }));
        }
        page.items = summaries.drain(start..end).map(|s| s.fields).collect();
        Ok(page)
    }

    /// Deletes the run `run_id` (OMA's `deleteRun`).
    pub fn delete_run(&self, run_id: &str) -> Result<DeleteResult, TraceStoreError> {
        non_empty(Some(&Value::from(run_id)), "runId")?;
        Ok(self.delete_runs(&[run_id.to_owned()]))
    }

    /// Deletes the runs `query` matches (OMA's `delete`), oldest first; a query with a
    /// `limit`, `cursor` or `order` is refused.
    pub async fn delete(&self, query: &TraceQuery) -> Result<DeleteResult, TraceStoreError> {
        if query.cursor.is_some() || query.limit.is_some() || query.order.is_some() {
            return Err(fail(
                "query",
                "delete does not accept cursor, limit, or order.".into(),
            ));
        }
        let ids = self.doomed_by_query(query).await?;
        Ok(self.delete_runs(&ids))
    }

    /// The runs [`delete`](Self::delete) would delete, oldest first, checked as it checks them
    /// (the file store deletes them and writes the deletion under one lock).
    pub(super) async fn doomed_by_query(
        &self,
        query: &TraceQuery,
    ) -> Result<Vec<String>, TraceStoreError> {
        if query.cursor.is_some() || query.limit.is_some() || query.order.is_some() {
            return Err(fail(
                "query",
                "delete does not accept cursor, limit, or order.".into(),
            ));
        }
        let q = Normalized::new(&TraceQuery {
            limit: Some(500),
            ..query.clone()
        })?;
        let snapshot = self.lock().revision;
        let mut doomed: Vec<Summary> = self
            .summaries(snapshot)
            .await?
            .into_iter()
            .filter(|s| q.matches(s))
            .collect();
        doomed.sort_by(compare_runs);
        Ok(doomed.into_iter().map(|s| s.run_id).collect())
    }

    /// Applies `policy` (OMA's `applyRetention`) against the store's clock.
    pub async fn apply_retention(
        &self,
        policy: &RetentionPolicy,
    ) -> Result<DeleteResult, TraceStoreError> {
        let ids = self.doomed_by_policy(policy).await?;
        Ok(self.delete_runs(&ids))
    }

    /// The runs [`apply_retention`](Self::apply_retention) would delete, checked as it checks
    /// the policy.
    pub(super) async fn doomed_by_policy(
        &self,
        policy: &RetentionPolicy,
    ) -> Result<Vec<String>, TraceStoreError> {
        if policy.max_age_ms.is_none() && policy.max_runs.is_none() && policy.statuses.is_none() {
            return Err(fail(
                "policy",
                "Retention policy must set maxAgeMs, maxRuns, or statuses.".into(),
            ));
        }
        if let Some(age) = policy.max_age_ms {
            finite(Some(&Value::from(age)), "maxAgeMs", 0)?;
        }
        let statuses = status_list(&policy.statuses, "statuses")?;
        let snapshot = self.lock().revision;
        let mut summaries = self.summaries(snapshot).await?;
        summaries.sort_by(compare_runs);
        let scoped: Vec<&Summary> = summaries
            .iter()
            .filter(|s| {
                statuses.as_ref().is_none_or(|wanted| {
                    s.status().is_some_and(|st| wanted.iter().any(|w| w == st))
                })
            })
            .collect();
        let mut doomed = BTreeSet::new();
        if let Some(age) = policy.max_age_ms {
            let cutoff = (self.now)() - age;
            for s in &scoped {
                if s.started_ms < cutoff {
                    doomed.insert(s.run_id.clone());
                }
            }
        }
        if let Some(keep) = policy.max_runs {
            let keep = usize::try_from(keep).unwrap_or(usize::MAX);
            for s in scoped.iter().rev().skip(keep) {
                doomed.insert(s.run_id.clone());
            }
        } else if policy.max_age_ms.is_none() && statuses.is_some() {
            doomed.extend(scoped.iter().map(|s| s.run_id.clone()));
        }
        let ids: Vec<String> = summaries
            .iter()
            .filter(|s| doomed.contains(&s.run_id))
            .map(|s| s.run_id.clone())
            .collect();
        Ok(ids)
    }

    /// Every record kept, by run in the order runs started, each run's in order.
    pub async fn records(&self) -> Result<Vec<Value>, TraceStoreError> {
        let snapshot = self.lock().revision;
        let mut summaries = self.summaries(snapshot).await?;
        summaries.sort_by(compare_runs);
        let mut out = Vec::new();
        for summary in summaries {
            if let Some(run) = self.get_run(&summary.run_id, true).await? {
                if let Some(Value::Array(records)) = run.get("records") {
                    out.extend(records.iter().cloned());
                }
            }
        }
        Ok(out)
    }

    /// The store's revision: it moves on with every change.
    pub(super) fn revision(&self) -> u64 {
        let state = self.lock();
        state.revision + state.delete_epoch
    }

    /// Whether the store holds no record.
    pub(super) fn is_empty(&self) -> bool {
        self.lock().entries.is_empty()
    }

    /// Forgets every record (the file store replays its file again after a failed write);
    /// the revision moves on, so no earlier cursor stays valid.
    pub(super) fn reset(&self) {
        let mut state = self.lock();
        let revision = state.revision + 1;
        let delete_epoch = state.delete_epoch + 1;
        *state = State {
            revision,
            delete_epoch,
            ..State::default()
        };
    }

    /// Deletes the runs of `run_ids` that it holds.
    pub(super) fn delete_runs(&self, run_ids: &[String]) -> DeleteResult {
        let mut state = self.lock();
        let mut deleted: Vec<String> = Vec::new();
        for id in run_ids {
            if !deleted.contains(id) && state.entries.iter().any(|e| &e.run_id == id) {
                deleted.push(id.clone());
            }
        }
        if deleted.is_empty() {
            return DeleteResult::default();
        }
        let before = state.entries.len();
        state.entries.retain(|e| !deleted.contains(&e.run_id));
        state.seen.retain(|_, (run, _)| !deleted.contains(run));
        let mut kept: Vec<&Entry> = state.entries.iter().collect();
        kept.sort_by_key(|e| e.arrival);
        let mut first_end = HashMap::new();
        for entry in kept {
            if entry.record["recordType"] == "span_end" {
                let span = format!(
                    "{}:{}",
                    entry.record["traceId"].as_str().unwrap_or_default(),
                    entry.record["spanId"].as_str().unwrap_or_default()
                );
                first_end.entry(span).or_insert_with(|| {
                    entry.record["recordId"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned()
                });
            }
        }
        state.first_end = first_end;
        state.delete_epoch += 1;
        DeleteResult {
            runs_deleted: deleted.len() as u64,
            records_deleted: (before - state.entries.len()) as u64,
            run_ids: deleted,
        }
    }

    fn mac(&self, body: &str) -> String {
        let mut hasher = self.secret.build_hasher();
        hasher.write(body.as_bytes());
        format!("{:016x}", hasher.finish())
    }

    fn encode(&self, position: &Position) -> String {
        let json = serde_json::json!({
            "snapshotRevision": position.snapshot_revision,
            "deleteEpoch": position.delete_epoch,
            "query": position.query,
            "startedAt": position.started_at,
            "runId": position.run_id,
        })
        .to_string();
        let body: String = json.bytes().map(|b| format!("{b:02x}")).collect();
        format!("oma-ts1.{body}.{}", self.mac(&body))
    }

    fn decode(&self, cursor: &str) -> Result<Position, TraceStoreError> {
        let refuse = |message: &str| {
            fail_with(
                TraceStoreErrorCode::InvalidCursor,
                "cursor",
                message.to_owned(),
            )
        };
        if cursor.is_empty() {
            return Err(bad_cursor_type());
        }
        let signed = cursor
            .strip_prefix("oma-ts1.")
            .and_then(|rest| rest.rsplit_once('.'))
            .filter(|(body, mac)| !body.is_empty() && self.mac(body) == *mac);
        let Some((body, _)) = signed else {
            return Err(refuse("Cursor is invalid or has been tampered with."));
        };
        let payload = || -> Option<Position> {
            let bytes = (0..body.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(body.get(i..i + 2)?, 16).ok())
                .collect::<Option<Vec<u8>>>()?;
            let state: Value = serde_json::from_slice(&bytes).ok()?;
            Some(Position {
                snapshot_revision: state["snapshotRevision"].as_u64()?,
                delete_epoch: state["deleteEpoch"].as_u64()?,
                query: state["query"].as_str()?.to_owned(),
                started_at: state["startedAt"].as_str()?.to_owned(),
                run_id: state["runId"].as_str()?.to_owned(),
            })
        };
        payload().ok_or_else(|| refuse("Cursor payload is invalid."))
    }
}

/// Where a page ended, in a cursor.
struct Position {
    snapshot_revision: u64,
    delete_epoch: u64,
    query: String,
    started_at: String,
    run_id: String,
}

/// OMA's `TraceStoreExporter`: a [`TraceExporter`] appending each batch to an
/// [`InMemoryTraceStore`]. Exporting a batch twice is harmless: the store keeps one copy of each
/// `recordId`. A batch the store refuses fails for good (`STORE_UNSUPPORTED_SCHEMA_VERSION`,
/// `STORE_VALIDATION_FAILED`); an aborted export is retryable (`STORE_EXPORT_ABORTED`).
#[derive(Debug, Clone)]
pub struct TraceStoreExporter {
    store: Arc<InMemoryTraceStore>,
}

impl TraceStoreExporter {
    /// Appends to `store`.
    pub fn new(store: Arc<InMemoryTraceStore>) -> Self {
        TraceStoreExporter { store }
    }
}

impl TraceExporter for TraceStoreExporter {
    fn export(
        &self,
        records: &[TraceRecord],
        signal: &AbortSignal,
    ) -> Result<ExportResult, SinkError> {
        let answer = |status, code: &str| ExportResult {
            status,
            exported: 0,
            retry_after: None,
            code: Some(code.to_owned()),
        };
        if signal.is_aborted() {
            return Ok(answer(ExportStatus::Retryable, "STORE_EXPORT_ABORTED"));
        }
        Ok(match self.store.append_records(records) {
            Ok(_) => ExportResult::success(records.len() as u64),
            Err(e) if e.code == TraceStoreErrorCode::UnsupportedSchemaVersion => {
                answer(ExportStatus::Failure, "STORE_UNSUPPORTED_SCHEMA_VERSION")
            }
            Err(_) => answer(ExportStatus::Failure, "STORE_VALIDATION_FAILED"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::iso_ms;

    #[test]
    fn iso_times_read_as_javascript_reads_them() {
        assert_eq!(iso_ms("1970-01-01T00:00:00.000Z"), Some(0.0));
        assert_eq!(
            iso_ms("2023-11-14T22:13:20.000Z"),
            Some(1_700_000_000_000.0)
        );
        assert_eq!(iso_ms("2023-11-14T22:13:20Z"), Some(1_700_000_000_000.0));
        assert_eq!(
            iso_ms("2023-11-14T23:13:20+01:00"),
            Some(1_700_000_000_000.0)
        );
        assert_eq!(iso_ms("2023-11-14T22:13"), Some(1_699_999_980_000.0));
        assert_eq!(iso_ms("2023-11-14"), Some(1_699_920_000_000.0));
        assert_eq!(iso_ms("2024-02-29T00:00:00.5Z"), Some(1_709_164_800_500.0));
        for bad in [
            "soon",
            "",
            "2023-13-01",
            "2023-02-29",
            "2023-11-14T25:00",
            "2023-11-14Tx",
        ] {
            assert_eq!(iso_ms(bad), None, "{bad}");
        }
    }
}
