//! OMA's in-memory evaluation store (`InMemoryEvalStore`, docs/evaluation.md): records checked
//! on append with OMA's codes, fields and messages, appended all or nothing per batch and
//! deduplicated by record id, queried newest (or oldest) first in pages whose cursors hold a
//! snapshot of the store, deleted by query or by a retention policy. It is the runner's
//! [`EvalRecordStore`], so [`run_eval_set`](super::run_eval_set) can write to it.
//!
//! Queries, deletions and policies are OMA's JSON keys (`EvalQuery`, `EvalDeleteQuery`,
//! `EvalRetentionPolicy`), checked key by key: an unknown key is refused by name.

use std::collections::hash_map::RandomState;
use std::collections::HashSet;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Map, Value};

use super::runner::EvalRecordStore;
use crate::observability::iso_ms;

/// The record schema major the store takes.
pub const EVAL_STORE_SCHEMA_MAJOR: u64 = 1;

const STATUSES: &[&str] = &["scored", "scorer_error", "target_error", "skipped"];
const SOURCES: &[&str] = &["offline", "online"];
const ERROR_KINDS: &[&str] = &[
    "provider",
    "tool",
    "framework",
    "callback",
    "validation",
    "timeout",
    "cancellation",
    "budget",
    "store",
    "exporter",
    "unknown",
];
const QUERY_KEYS: &[&str] = &[
    "evalRunId",
    "runId",
    "evalSetName",
    "scorer",
    "source",
    "status",
    "after",
    "before",
    "limit",
    "cursor",
    "order",
];
const DELETE_KEYS: &[&str] = &["evalRunId", "evalSetName", "before"];
const POLICY_KEYS: &[&str] = &["maxAgeMs", "maxRecords", "sources"];
const CURSOR_PREFIX: &str = "oma-es1.";

/// What kind of refusal an [`EvalStoreError`] is (OMA's codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvalStoreErrorCode {
    /// A record, query, deletion or policy OMA refuses.
    InvalidArgument,
    /// A cursor this store did not make for this query and snapshot.
    InvalidCursor,
    /// A record of another schema major.
    UnsupportedSchemaVersion,
}

impl EvalStoreErrorCode {
    /// OMA's spelling: `INVALID_ARGUMENT`, `INVALID_CURSOR`, `UNSUPPORTED_SCHEMA_VERSION`.
    pub fn as_str(self) -> &'static str {
        match self {
            EvalStoreErrorCode::InvalidArgument => "INVALID_ARGUMENT",
            EvalStoreErrorCode::InvalidCursor => "INVALID_CURSOR",
            EvalStoreErrorCode::UnsupportedSchemaVersion => "UNSUPPORTED_SCHEMA_VERSION",
        }
    }
}

/// A store refusal (OMA's `EvalStoreError`): nothing was kept, deleted or answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvalStoreError {
    /// The kind of refusal.
    pub code: EvalStoreErrorCode,
    /// The field refused (`records[0].score`, `limit`, `cursor`).
    pub field: String,
    /// OMA's message.
    pub message: String,
}

impl std::fmt::Display for EvalStoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl std::error::Error for EvalStoreError {}

fn invalid(field: &str, message: String) -> EvalStoreError {
    EvalStoreError {
        code: EvalStoreErrorCode::InvalidArgument,
        field: field.to_string(),
        message,
    }
}

fn bad_cursor(message: &str) -> EvalStoreError {
    EvalStoreError {
        code: EvalStoreErrorCode::InvalidCursor,
        field: "cursor".into(),
        message: message.into(),
    }
}

/// What an append did (OMA's `AppendResult`; this store has no diagnostics to give).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EvalAppendResult {
    /// Records kept.
    pub written: u64,
    /// Records skipped because their record id was kept already.
    pub deduplicated: u64,
}

/// What a deletion or a retention policy removed (OMA's `DeleteResult`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvalDeleteResult {
    /// Distinct eval runs with records removed.
    pub runs_deleted: u64,
    /// Records removed.
    pub records_deleted: u64,
    /// Those eval runs, in the order of their oldest removed record.
    pub run_ids: Vec<String>,
}

/// One page of a query (OMA's `EvalPage`).
#[derive(Debug, Clone, PartialEq)]
pub struct EvalPage {
    /// The records, as they were appended.
    pub items: Vec<Value>,
    /// The cursor of the next page, when there is one.
    pub next_cursor: Option<String>,
}

// Record checks, with OMA's messages.

fn object<'a>(
    value: Option<&'a Value>,
    field: &str,
) -> Result<&'a Map<String, Value>, EvalStoreError> {
    value
        .and_then(Value::as_object)
        .ok_or_else(|| invalid(field, format!("{field} must be an object.")))
}

fn non_empty<'a>(value: Option<&'a Value>, field: &str) -> Result<&'a str, EvalStoreError> {
    match value.and_then(Value::as_str) {
        Some(text) if !text.is_empty() => Ok(text),
        _ => Err(invalid(
            field,
            format!("{field} must be a non-empty string."),
        )),
    }
}

fn optional_string(value: Option<&Value>, field: &str) -> Result<(), EvalStoreError> {
    match value {
        Some(v) if !v.is_string() => Err(invalid(field, format!("{field} must be a string."))),
        _ => Ok(()),
    }
}

fn optional_bool(value: Option<&Value>, field: &str) -> Result<(), EvalStoreError> {
    match value {
        Some(v) if !v.is_boolean() => Err(invalid(field, format!("{field} must be a boolean."))),
        _ => Ok(()),
    }
}

fn at_least(value: Option<&Value>, field: &str, least: u32) -> Result<f64, EvalStoreError> {
    match value.and_then(Value::as_f64) {
        Some(n) if n.is_finite() && n >= f64::from(least) => Ok(n),
        _ => Err(invalid(
            field,
            format!("{field} must be a finite number >= {least}."),
        )),
    }
}

fn integer(value: Option<&Value>, field: &str, least: u32) -> Result<f64, EvalStoreError> {
    let n = at_least(value, field, least)?;
    if n.fract() != 0.0 {
        return Err(invalid(field, format!("{field} must be an integer.")));
    }
    Ok(n)
}

fn attributes(value: Option<&Value>, field: &str) -> Result<(), EvalStoreError> {
    for (key, child) in object(value, field)? {
        if !super::is_trace_attribute(child) {
            return Err(invalid(
                &format!("{field}.{key}"),
                format!("{field}.{key} is not a supported trace attribute."),
            ));
        }
    }
    Ok(())
}

fn one_of(value: Option<&Value>, allowed: &[&str]) -> bool {
    value
        .and_then(Value::as_str)
        .is_some_and(|v| allowed.contains(&v))
}

/// Refuses (with OMA's code, field and message) what is not an evaluation record of schema 1;
/// `index` is the record's place in the appended list.
fn check_record(record: &Value, index: usize) -> Result<(), EvalStoreError> {
    let at = format!("records[{index}]");
    let map = object(Some(record), &at)?;
    let get = |key: &str| map.get(key);
    let schema = get("schemaVersion");
    if schema.and_then(Value::as_f64) != Some(EVAL_STORE_SCHEMA_MAJOR as f64) {
        let field = format!("{at}.schemaVersion");
        return Err(match schema.and_then(Value::as_f64) {
            Some(n) => EvalStoreError {
                code: EvalStoreErrorCode::UnsupportedSchemaVersion,
                field,
                message: format!(
                    "Unsupported EvalRecord schema major {}; supported major is {EVAL_STORE_SCHEMA_MAJOR}.",
                    crate::number::js_number(n)
                ),
            },
            None => invalid(
                &field,
                format!("{field} must be {EVAL_STORE_SCHEMA_MAJOR}."),
            ),
        });
    }
    non_empty(get("recordId"), &format!("{at}.recordId"))?;
    non_empty(get("evalRunId"), &format!("{at}.evalRunId"))?;
    if !one_of(get("source"), SOURCES) {
        return Err(invalid(
            &format!("{at}.source"),
            format!("{at}.source is invalid."),
        ));
    }
    integer(get("timestampUnixMs"), &format!("{at}.timestampUnixMs"), 0)?;
    if let Some(set) = get("evalSet") {
        let set = object(Some(set), &format!("{at}.evalSet"))?;
        non_empty(set.get("name"), &format!("{at}.evalSet.name"))?;
        non_empty(set.get("version"), &format!("{at}.evalSet.version"))?;
    }
    optional_string(get("caseId"), &format!("{at}.caseId"))?;
    if let Some(repeat) = get("repeat") {
        integer(Some(repeat), &format!("{at}.repeat"), 1)?;
    }
    let scorer = object(get("scorer"), &format!("{at}.scorer"))?;
    non_empty(scorer.get("name"), &format!("{at}.scorer.name"))?;
    optional_string(scorer.get("version"), &format!("{at}.scorer.version"))?;
    if !one_of(get("status"), STATUSES) {
        return Err(invalid(
            &format!("{at}.status"),
            format!("{at}.status is invalid."),
        ));
    }
    if let Some(score) = get("score") {
        let field = format!("{at}.score");
        if at_least(Some(score), &field, 0)? > 1.0 {
            return Err(invalid(&field, format!("{field} must be <= 1.")));
        }
    }
    optional_bool(get("pass"), &format!("{at}.pass"))?;
    optional_string(get("reason"), &format!("{at}.reason"))?;
    if let Some(details) = get("details") {
        attributes(Some(details), &format!("{at}.details"))?;
    }
    if let Some(run_ref) = get("runRef") {
        let run_ref = object(Some(run_ref), &format!("{at}.runRef"))?;
        non_empty(run_ref.get("runId"), &format!("{at}.runRef.runId"))?;
        integer(run_ref.get("attempt"), &format!("{at}.runRef.attempt"), 1)?;
        non_empty(run_ref.get("traceId"), &format!("{at}.runRef.traceId"))?;
        non_empty(
            run_ref.get("rootSpanId"),
            &format!("{at}.runRef.rootSpanId"),
        )?;
    }
    attributes(get("metadata"), &format!("{at}.metadata"))?;
    if let Some(usage) = get("usage") {
        let usage = object(Some(usage), &format!("{at}.usage"))?;
        if let Some(tokens) = usage.get("tokens") {
            let tokens = object(Some(tokens), &format!("{at}.usage.tokens"))?;
            for key in ["input_tokens", "output_tokens"] {
                integer(tokens.get(key), &format!("{at}.usage.tokens.{key}"), 0)?;
            }
        }
        if let Some(cost) = usage.get("cost") {
            let cost = object(Some(cost), &format!("{at}.usage.cost"))?;
            at_least(cost.get("amount"), &format!("{at}.usage.cost.amount"), 0)?;
            non_empty(cost.get("currency"), &format!("{at}.usage.cost.currency"))?;
        }
        if let Some(duration) = usage.get("durationMs") {
            at_least(Some(duration), &format!("{at}.usage.durationMs"), 0)?;
        }
    }
    if let Some(error) = get("error") {
        let error = object(Some(error), &format!("{at}.error"))?;
        if !one_of(error.get("kind"), ERROR_KINDS) {
            return Err(invalid(
                &format!("{at}.error.kind"),
                format!("{at}.error.kind is invalid."),
            ));
        }
        for key in ["code", "name", "message", "provider"] {
            optional_string(error.get(key), &format!("{at}.error.{key}"))?;
        }
        optional_bool(error.get("retryable"), &format!("{at}.error.retryable"))?;
        if let Some(status) = error.get("httpStatus") {
            integer(Some(status), &format!("{at}.error.httpStatus"), 0)?;
        }
        if let Some(attempt) = error.get("attempt") {
            integer(Some(attempt), &format!("{at}.error.attempt"), 1)?;
        }
    }
    if let Some(payload) = get("payload") {
        let payload = object(Some(payload), &format!("{at}.payload"))?;
        for key in ["input", "output", "expected"] {
            optional_string(payload.get(key), &format!("{at}.payload.{key}"))?;
        }
    }
    Ok(())
}

// Query, deletion and policy readers.

/// A list of names: one string or a non-empty array of non-empty strings, sorted and deduplicated.
fn names(value: Option<&Value>, field: &str) -> Result<Option<Vec<String>>, EvalStoreError> {
    let Some(value) = value else {
        return Ok(None);
    };
    let refused = || invalid(field, format!("{field} must contain non-empty strings."));
    let mut list: Vec<String> = match value {
        Value::String(text) if !text.is_empty() => vec![text.clone()],
        Value::Array(items) if !items.is_empty() => items
            .iter()
            .map(|item| match item.as_str() {
                Some(text) if !text.is_empty() => Ok(text.to_string()),
                _ => Err(refused()),
            })
            .collect::<Result<_, _>>()?,
        _ => return Err(refused()),
    };
    list.sort();
    list.dedup();
    Ok(Some(list))
}

/// Like [`names`], but only an array.
fn name_array(value: Option<&Value>, field: &str) -> Result<Option<Vec<String>>, EvalStoreError> {
    match value {
        Some(v) if !v.is_array() => Err(invalid(
            field,
            format!("{field} must be an array of non-empty strings."),
        )),
        _ => names(value, field),
    }
}

fn names_of(
    value: Option<&Value>,
    field: &str,
    allowed: &[&str],
    what: &str,
) -> Result<Option<Vec<String>>, EvalStoreError> {
    let list = name_array(value, field)?;
    if list
        .iter()
        .flatten()
        .any(|item| !allowed.contains(&item.as_str()))
    {
        return Err(invalid(
            field,
            format!("{field} contains an unsupported {what}."),
        ));
    }
    Ok(list)
}

fn date(value: Option<&Value>, field: &str) -> Result<Option<f64>, EvalStoreError> {
    let Some(value) = value else {
        return Ok(None);
    };
    match value.as_str().filter(|t| !t.is_empty()).and_then(iso_ms) {
        Some(ms) => Ok(Some(ms)),
        None => Err(invalid(
            field,
            format!("{field} must be a valid ISO-8601 timestamp."),
        )),
    }
}

fn known_keys<'a>(
    value: &'a Value,
    what: &str,
    keys: &[&str],
    of: &str,
) -> Result<&'a Map<String, Value>, EvalStoreError> {
    let map = object(Some(value), what)?;
    if let Some(key) = map.keys().find(|key| !keys.contains(&key.as_str())) {
        return Err(invalid(key, format!("{key} is not a field of {of}.")));
    }
    Ok(map)
}

/// What a query selects, with its order; its JSON is the cursor's query identity.
struct Filter {
    eval_run_ids: Option<Vec<String>>,
    run_ids: Option<Vec<String>>,
    eval_set_name: Option<String>,
    scorers: Option<Vec<String>>,
    source: Option<String>,
    statuses: Option<Vec<String>>,
    after_ms: Option<f64>,
    before_ms: Option<f64>,
    ascending: bool,
}

impl Filter {
    fn identity(&self) -> String {
        json!([
            self.eval_run_ids,
            self.run_ids,
            self.eval_set_name,
            self.scorers,
            self.source,
            self.statuses,
            self.after_ms,
            self.before_ms,
            self.ascending
        ])
        .to_string()
    }

    fn matches(&self, record: &Kept) -> bool {
        let r = &record.record;
        let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
        let within = |list: &Option<Vec<String>>, v: Option<String>| {
            list.as_ref()
                .is_none_or(|list| v.is_some_and(|v| list.contains(&v)))
        };
        within(&self.eval_run_ids, Some(record.eval_run_id.clone()))
            && within(&self.run_ids, text(r.pointer("/runRef/runId")))
            && self
                .eval_set_name
                .as_ref()
                .is_none_or(|name| text(r.pointer("/evalSet/name")).as_ref() == Some(name))
            && within(&self.scorers, text(r.pointer("/scorer/name")))
            && self
                .source
                .as_ref()
                .is_none_or(|s| text(r.get("source")).as_ref() == Some(s))
            && within(&self.statuses, text(r.get("status")))
            && self.after_ms.is_none_or(|after| record.time >= after)
            && self.before_ms.is_none_or(|before| record.time < before)
    }
}

fn read_query(query: &Value) -> Result<(Filter, usize), EvalStoreError> {
    let map = known_keys(query, "query", QUERY_KEYS, "an evaluation query")?;
    let limit = match map.get("limit").filter(|v| !v.is_null()) {
        None => 100,
        Some(v) => match v.as_f64() {
            Some(n) if n.fract() == 0.0 && (1.0..=1000.0).contains(&n) => n as usize,
            _ => {
                return Err(invalid(
                    "limit",
                    "limit must be an integer from 1 through 1000.".into(),
                ))
            }
        },
    };
    let ascending = match map.get("order") {
        None => false,
        Some(v) if v == "time_asc" => true,
        Some(v) if v == "time_desc" => false,
        Some(_) => {
            return Err(invalid(
                "order",
                "order must be time_asc or time_desc.".into(),
            ))
        }
    };
    let after_ms = date(map.get("after"), "after")?;
    let before_ms = date(map.get("before"), "before")?;
    if let (Some(after), Some(before)) = (after_ms, before_ms) {
        if after >= before {
            return Err(invalid("after", "after must be before before.".into()));
        }
    }
    let eval_set_name = match map.get("evalSetName") {
        Some(v) => Some(non_empty(Some(v), "evalSetName")?.to_string()),
        None => None,
    };
    let source = match map.get("source") {
        Some(v) if one_of(Some(v), SOURCES) => v.as_str().map(str::to_string),
        Some(_) => {
            return Err(invalid(
                "source",
                "source must be offline or online.".into(),
            ))
        }
        None => None,
    };
    let filter = Filter {
        eval_run_ids: names(map.get("evalRunId"), "evalRunId")?,
        run_ids: names(map.get("runId"), "runId")?,
        eval_set_name,
        scorers: name_array(map.get("scorer"), "scorer")?,
        source,
        statuses: names_of(map.get("status"), "status", STATUSES, "status")?,
        after_ms,
        before_ms,
        ascending,
    };
    Ok((filter, limit))
}

// The store.

/// A kept record, with what the store orders and filters by.
struct Kept {
    record: Value,
    record_id: String,
    eval_run_id: String,
    time: f64,
    revision: u64,
}

fn by_time(a: &Kept, b: &Kept) -> std::cmp::Ordering {
    a.time
        .total_cmp(&b.time)
        .then_with(|| a.record_id.cmp(&b.record_id))
}

#[derive(Default)]
struct State {
    kept: Vec<Kept>,
    ids: HashSet<String>,
    /// Raised by every append that keeps something; a cursor sees what was kept up to its own.
    revision: u64,
    /// Raised by every removal; a cursor from before one is refused.
    epoch: u64,
}

/// What a cursor holds: the snapshot, the query it pages and the last record it gave.
struct CursorState {
    revision: u64,
    epoch: u64,
    query: String,
    time: f64,
    record_id: String,
}

/// The clock retention's `maxAgeMs` reads: milliseconds since the Unix epoch.
pub type EvalStoreClock = Box<dyn Fn() -> f64 + Send + Sync>;

/// OMA's `InMemoryEvalStore`: evaluation records in memory, for tests and short local runs
/// (nothing survives the process). Safe to share between threads.
pub struct InMemoryEvalStore {
    state: Mutex<State>,
    max_records: Option<u64>,
    now: EvalStoreClock,
    secret: RandomState,
}

impl Default for InMemoryEvalStore {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for InMemoryEvalStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InMemoryEvalStore")
            .field("records", &self.lock().kept.len())
            .field("max_records", &self.max_records)
            .finish()
    }
}

impl InMemoryEvalStore {
    /// An empty store without a capacity, whose retention reads the system clock.
    pub fn new() -> Self {
        InMemoryEvalStore {
            state: Mutex::new(State::default()),
            max_records: None,
            now: Box::new(|| {
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0.0, |d| d.as_millis() as f64)
            }),
            secret: RandomState::new(),
        }
    }

    /// The same store holding at most `max_records` records (OMA's `maxRecords` option): an
    /// append that would go past it is refused whole.
    pub fn with_max_records(mut self, max_records: u64) -> Self {
        self.max_records = Some(max_records);
        self
    }

    /// The same store with `now` as the clock retention reads (OMA's `now` option).
    pub fn with_clock(mut self, now: impl Fn() -> f64 + Send + Sync + 'static) -> Self {
        self.now = Box::new(now);
        self
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps a batch of OMA's evaluation records, all or none, skipping record ids kept
    /// already; the first record refused refuses the batch.
    pub fn append(&self, records: &[Value]) -> Result<EvalAppendResult, EvalStoreError> {
        for (index, record) in records.iter().enumerate() {
            check_record(record, index)?;
        }
        let mut state = self.lock();
        let mut staged = HashSet::new();
        let mut writes = Vec::new();
        let mut deduplicated = 0;
        for record in records {
            let id = record["recordId"].as_str().unwrap_or_default();
            if state.ids.contains(id) || !staged.insert(id) {
                deduplicated += 1;
                continue;
            }
            writes.push(record);
        }
        if let Some(max) = self.max_records {
            if (state.kept.len() + writes.len()) as u64 > max {
                return Err(invalid(
                    "records",
                    format!(
                        "append would exceed the InMemoryEvalStore maxRecords capacity of {max}."
                    ),
                ));
            }
        }
        if !writes.is_empty() {
            state.revision += 1;
        }
        let revision = state.revision;
        for record in &writes {
            let record_id = record["recordId"].as_str().unwrap_or_default().to_string();
            state.ids.insert(record_id.clone());
            state.kept.push(Kept {
                record: (*record).clone(),
                record_id,
                eval_run_id: record["evalRunId"].as_str().unwrap_or_default().into(),
                time: record["timestampUnixMs"].as_f64().unwrap_or_default(),
                revision,
            });
        }
        Ok(EvalAppendResult {
            written: writes.len() as u64,
            deduplicated,
        })
    }

    /// One page of the records `query` (OMA's `EvalQuery` keys) selects, newest first unless
    /// `order` is `time_asc`; equal times are ordered by record id.
    pub fn query(&self, query: &Value) -> Result<EvalPage, EvalStoreError> {
        let (filter, limit) = read_query(query)?;
        let identity = filter.identity();
        let state = self.lock();
        let mut revision = state.revision;
        let mut after = None;
        if let Some(cursor) = query.get("cursor") {
            let cursor = self.open(cursor)?;
            if cursor.query != identity || cursor.epoch != state.epoch {
                return Err(bad_cursor(
                    "Cursor does not match this query or is no longer valid.",
                ));
            }
            revision = cursor.revision;
            after = Some(cursor);
        }
        let mut selected: Vec<&Kept> = state
            .kept
            .iter()
            .filter(|k| k.revision <= revision && filter.matches(k))
            .collect();
        selected.sort_by(|a, b| {
            let order = by_time(a, b);
            if filter.ascending {
                order
            } else {
                order.reverse()
            }
        });
        let start = match &after {
            None => 0,
            Some(at) => {
                selected
                    .iter()
                    .position(|k| k.time == at.time && k.record_id == at.record_id)
                    .ok_or_else(|| {
                        bad_cursor("Cursor position is not present in the query snapshot.")
                    })?
                    + 1
            }
        };
        let items: Vec<&Kept> = selected.iter().skip(start).take(limit).copied().collect();
        let next_cursor = match items.last() {
            Some(last) if start + items.len() < selected.len() => Some(self.close(&CursorState {
                revision,
                epoch: state.epoch,
                query: identity,
                time: last.time,
                record_id: last.record_id.clone(),
            })),
            _ => None,
        };
        Ok(EvalPage {
            items: items.iter().map(|k| k.record.clone()).collect(),
            next_cursor,
        })
    }

    /// Removes the records of the eval runs, eval set, or older than `before` that `query`
    /// (OMA's `EvalDeleteQuery` keys) names; every key given must match.
    pub fn delete(&self, query: &Value) -> Result<EvalDeleteResult, EvalStoreError> {
        let map = known_keys(query, "query", DELETE_KEYS, "an evaluation delete query")?;
        let runs = names(map.get("evalRunId"), "evalRunId")?;
        let set = match map.get("evalSetName") {
            Some(v) => Some(non_empty(Some(v), "evalSetName")?),
            None => None,
        };
        let before = date(map.get("before"), "before")?;
        let mut state = self.lock();
        let doomed: HashSet<usize> = state
            .kept
            .iter()
            .enumerate()
            .filter(|(_, k)| {
                runs.as_ref()
                    .is_none_or(|runs| runs.contains(&k.eval_run_id))
                    && set.is_none_or(|set| k.record.pointer("/evalSet/name") == Some(&json!(set)))
                    && before.is_none_or(|before| k.time < before)
            })
            .map(|(i, _)| i)
            .collect();
        Ok(remove(&mut state, &doomed))
    }

    /// Applies OMA's `EvalRetentionPolicy`: removes, among the records of `sources` (all when
    /// absent), those older than `maxAgeMs` and those beyond the newest `maxRecords`; with
    /// `sources` alone, all of theirs.
    pub fn apply_retention(&self, policy: &Value) -> Result<EvalDeleteResult, EvalStoreError> {
        let map = known_keys(policy, "policy", POLICY_KEYS, "a retention policy")?;
        if map.is_empty() {
            return Err(invalid(
                "policy",
                "Retention policy must set maxAgeMs, maxRecords, or sources.".into(),
            ));
        }
        let max_age = match map.get("maxAgeMs") {
            Some(v) => Some(at_least(Some(v), "maxAgeMs", 0)?),
            None => None,
        };
        let max_records = match map.get("maxRecords") {
            Some(v) => Some(integer(Some(v), "maxRecords", 0)?),
            None => None,
        };
        let sources = names_of(map.get("sources"), "sources", SOURCES, "source")?;
        let cutoff = max_age.map(|age| (self.now)() - age);
        let mut state = self.lock();
        let mut scoped: Vec<usize> = (0..state.kept.len())
            .filter(|&i| {
                sources.as_ref().is_none_or(|sources| {
                    state.kept[i].record["source"]
                        .as_str()
                        .is_some_and(|s| sources.iter().any(|x| x == s))
                })
            })
            .collect();
        let mut doomed = HashSet::new();
        if let Some(cutoff) = cutoff {
            doomed.extend(
                scoped
                    .iter()
                    .copied()
                    .filter(|&i| state.kept[i].time < cutoff),
            );
        }
        match max_records {
            Some(max) => {
                scoped.sort_by(|&a, &b| by_time(&state.kept[b], &state.kept[a]));
                doomed.extend(scoped.iter().skip(max as usize));
            }
            None if max_age.is_none() => doomed.extend(scoped),
            None => {}
        }
        Ok(remove(&mut state, &doomed))
    }

    /// Whether the store keeps no record.
    pub(crate) fn is_empty(&self) -> bool {
        self.lock().kept.is_empty()
    }

    /// Forgets every record (a file store replays its file again after a failed write).
    pub(crate) fn reset(&self) {
        let mut state = self.lock();
        let epoch = state.epoch + 1;
        *state = State::default();
        state.epoch = epoch;
    }

    /// Removes the records of `ids` (a file store's delete batch, replayed).
    pub(crate) fn delete_record_ids(&self, ids: &[String]) -> EvalDeleteResult {
        let ids: HashSet<&str> = ids.iter().map(String::as_str).collect();
        let mut state = self.lock();
        let doomed: HashSet<usize> = state
            .kept
            .iter()
            .enumerate()
            .filter(|(_, k)| ids.contains(k.record_id.as_str()))
            .map(|(i, _)| i)
            .collect();
        remove(&mut state, &doomed)
    }

    /// The ids of the records kept, in the order they were appended (a file store's delete
    /// batch names what a deletion removed, without copying the records).
    pub(crate) fn record_ids(&self) -> Vec<String> {
        self.lock()
            .kept
            .iter()
            .map(|k| k.record_id.clone())
            .collect()
    }

    /// The ids of the records kept, as a set.
    pub(crate) fn record_id_set(&self) -> HashSet<String> {
        self.lock().ids.clone()
    }

    /// The records kept, in the order they were appended.
    pub fn records(&self) -> Vec<Value> {
        self.lock().kept.iter().map(|k| k.record.clone()).collect()
    }

    fn seal(&self, body: &str) -> String {
        let mut hasher = self.secret.build_hasher();
        hasher.write(body.as_bytes());
        format!("{:016x}", hasher.finish())
    }

    fn close(&self, cursor: &CursorState) -> String {
        let body: String = json!({
            "revision": cursor.revision, "epoch": cursor.epoch, "query": cursor.query,
            "timestampUnixMs": cursor.time, "recordId": cursor.record_id,
        })
        .to_string()
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect();
        format!("{CURSOR_PREFIX}{body}.{}", self.seal(&body))
    }

    fn open(&self, cursor: &Value) -> Result<CursorState, EvalStoreError> {
        let text = match cursor.as_str() {
            Some(text) if !text.is_empty() => text,
            _ => return Err(bad_cursor("cursor must be an opaque non-empty string.")),
        };
        let tampered = || bad_cursor("Cursor is invalid or has been tampered with.");
        let (body, seal) = text
            .strip_prefix(CURSOR_PREFIX)
            .and_then(|rest| rest.split_once('.'))
            .ok_or_else(tampered)?;
        if seal != self.seal(body) {
            return Err(tampered());
        }
        let payload = || bad_cursor("Cursor payload is invalid.");
        let bytes: Option<Vec<u8>> = (0..body.len())
            .step_by(2)
            .map(|i| {
                body.get(i..i + 2)
                    .and_then(|pair| u8::from_str_radix(pair, 16).ok())
            })
            .collect();
        let state: Value = bytes
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .ok_or_else(payload)?;
        let read = || {
            Some(CursorState {
                revision: state["revision"].as_u64()?,
                epoch: state["epoch"].as_u64()?,
                query: state["query"].as_str()?.to_string(),
                time: state["timestampUnixMs"].as_f64()?,
                record_id: state["recordId"].as_str()?.to_string(),
            })
        };
        read().ok_or_else(payload)
    }
}

/// Removes the records at `doomed` and reports their eval runs, oldest record first.
fn remove(state: &mut State, doomed: &HashSet<usize>) -> EvalDeleteResult {
    if doomed.is_empty() {
        return EvalDeleteResult {
            runs_deleted: 0,
            records_deleted: 0,
            run_ids: Vec::new(),
        };
    }
    let mut gone = Vec::new();
    let mut kept = Vec::new();
    for (i, k) in std::mem::take(&mut state.kept).into_iter().enumerate() {
        if doomed.contains(&i) {
            state.ids.remove(&k.record_id);
            gone.push(k);
        } else {
            kept.push(k);
        }
    }
    state.kept = kept;
    state.epoch += 1;
    gone.sort_by(by_time);
    let mut run_ids: Vec<String> = Vec::new();
    for k in &gone {
        if !run_ids.contains(&k.eval_run_id) {
            run_ids.push(k.eval_run_id.clone());
        }
    }
    EvalDeleteResult {
        runs_deleted: run_ids.len() as u64,
        records_deleted: gone.len() as u64,
        run_ids,
    }
}

impl EvalRecordStore for InMemoryEvalStore {
    fn append(&self, records: &[Value]) -> Result<(), String> {
        InMemoryEvalStore::append(self, records)
            .map(|_| ())
            .map_err(|e| e.message)
    }
}
