//! OpenTelemetry traces of the gateway's requests (`docs/gateway.md#traces`): with
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as it is) or `OTEL_EXPORTER_OTLP_ENDPOINT` (then
//! `<endpoint>/v1/traces`) set, each request that reaches a provider is exported as OTLP/HTTP
//! JSON once the client has its whole answer: a span for the gateway request (kind server) and
//! one span per span of OMA's trace records of what it did. A W3C `traceparent` from the client
//! is honoured: its trace id is kept and the request's span is its child.
//!
//! One model: the spans are read from OMA's trace records (schema v2,
//! `docs/observability.md`), the records a sink would receive for the same run. A `/v1/run`'s
//! records are the run machine's (its `oma.run` span is the request span's child, then the
//! agent's `invoke_agent` span over its `chat` and `execute_tool` spans, with their events); a
//! chat request's are made here for its provider calls ([`crate::chat::ChatMachine::records`]:
//! a `chat` span per call, fallbacks included). Each record span becomes one OTLP span with
//! OMA's trace and span ids, parent, name and times, read as OMA's OpenTelemetry adapter reads
//! records ([`spans_of`]): its kind (`llm` a client span, the rest internal), its status, its
//! events (`oma.<name>`), its error (`error.type`, `oma.error.*`, an `exception` event), the
//! record's identity (`oma.run.id`, `oma.span.id`, ...), the attributes on OMA's list of safe
//! ones, and the GenAI semantic conventions' names derived from them. Records already passed the
//! capture policy and OMA's sensitive-data processing, and no content attribute (a prompt, a
//! tool's input or output, metadata) and no message crosses into a span.

use serde_json::{json, Map, Value};

use oma_core::agent::observability::options::TraceParent;
use oma_core::http::call::Outgoing;
use oma_core::rng::Rng;

use crate::env::BadVariable;

/// The URL traces are exported to, from the environment's OpenTelemetry variables
/// (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, then `OTEL_EXPORTER_OTLP_ENDPOINT`); `None` when
/// neither is set, the variable that is no http(s) URL otherwise.
pub fn endpoint_of(
    traces: Option<&str>,
    base: Option<&str>,
) -> Result<Option<String>, BadVariable> {
    let (url, name) = match (traces, base) {
        (Some(traces), _) => (traces.to_owned(), "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
        (None, Some(base)) => (
            format!("{}/v1/traces", base.trim_end_matches('/')),
            "OTEL_EXPORTER_OTLP_ENDPOINT",
        ),
        (None, None) => return Ok(None),
    };
    let bad = BadVariable {
        name,
        expected: "an http or https URL",
    };
    let parsed = url::Url::parse(&url).map_err(|_| bad.clone())?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad);
    }
    Ok(Some(url))
}

/// The trace a request belongs to: the client's (`traceparent`) or a new one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceContext {
    /// 32 lowercase hex digits.
    pub trace_id: String,
    /// The client's span, the parent of the request's span, when it sent one.
    pub parent_span_id: Option<String>,
}

fn hex(bytes: u64, digits: usize) -> String {
    format!("{bytes:0digits$x}")
}

fn is_hex(text: &str, len: usize) -> bool {
    text.len() == len
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        && text.bytes().any(|b| b != b'0')
}

impl TraceContext {
    /// The context of a W3C `traceparent` header (`00-<trace id>-<span id>-<flags>`), or a new
    /// trace from `rng` when there is none or it is malformed.
    pub fn from_traceparent(header: Option<&str>, rng: &mut Rng) -> TraceContext {
        let parsed = header.and_then(|value| {
            let mut parts = value.trim().split('-');
            let (version, trace, span, flags) =
                (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
            (version.len() == 2
                && version != "ff"
                && is_hex(trace, 32)
                && is_hex(span, 16)
                && flags.len() == 2)
                .then(|| TraceContext {
                    trace_id: trace.to_owned(),
                    parent_span_id: Some(span.to_owned()),
                })
        });
        parsed.unwrap_or_else(|| TraceContext {
            trace_id: format!("{}{}", hex(rng.next_u64() | 1, 16), hex(rng.next_u64(), 16)),
            parent_span_id: None,
        })
    }
}

/// The trace of one request: its context (the client's trace, or a new one) and the id of the
/// request's own span, the parent of the spans of what it did. Drawn from the request's seed,
/// so that the run made when the body arrives and the export made after the answer name the
/// same span.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestTrace {
    /// The trace, and the client's span when it sent one.
    pub context: TraceContext,
    /// The request's span: 16 lowercase hex digits.
    pub span_id: String,
}

/// Mixed into a request's seed for its trace's ids.
const EXPORT_IDS: u64 = 0x6f74_6c70_6578_7074;

impl RequestTrace {
    /// The trace of the request with the `traceparent` header (if any) and the seed `seed`.
    pub fn of(traceparent: Option<&str>, seed: u64) -> RequestTrace {
        let mut rng = Rng::new(Rng::new(seed ^ EXPORT_IDS).next_u64());
        let context = TraceContext::from_traceparent(traceparent, &mut rng);
        let span_id = hex(rng.next_u64() | 1, 16);
        RequestTrace { context, span_id }
    }

    /// The span records of what the request did continue: the request's.
    pub fn parent(&self) -> TraceParent {
        TraceParent {
            trace_id: self.context.trace_id.clone(),
            span_id: self.span_id.clone(),
        }
    }
}

fn string(key: &str, value: &str) -> Value {
    json!({"key": key, "value": {"stringValue": value}})
}

fn int(key: &str, value: u64) -> Value {
    // OTLP JSON writes 64-bit integers as strings.
    json!({"key": key, "value": {"intValue": value.to_string()}})
}

fn nanos(ms: u64) -> String {
    (u128::from(ms) * 1_000_000).to_string()
}

/// What a request's trace records besides its attempts.
#[derive(Clone, Debug)]
pub struct RequestSpan<'a> {
    /// `POST /v1/chat/completions` or `POST /v1/messages`.
    pub name: &'a str,
    /// The route, e.g. `/v1/chat/completions`.
    pub route: &'a str,
    /// The status answered.
    pub status: u16,
    /// When the request began and ended (ms since the Unix epoch).
    pub started_ms: u64,
    /// When it ended.
    pub ended_ms: u64,
}

/// The `oma.*` attributes OMA's OpenTelemetry adapter lets into a span or an event (besides
/// the token counts, `oma.usage.*_tokens`): names, models, counts, statuses and ids, never
/// content.
const SAFE_ATTRIBUTES: &[&str] = &[
    "oma.agent.attempt",
    "oma.agent.name",
    "oma.agent.tool_calls",
    "oma.agent.turns",
    "oma.approval.approved",
    "oma.callback.name",
    "oma.checkpoint.mode",
    "oma.consensus.accepted",
    "oma.consensus.round",
    "oma.consensus.rounds",
    "oma.consensus.scope",
    "oma.consensus.verdict",
    "oma.cost.amount",
    "oma.cost.currency",
    "oma.cost.price_version",
    "oma.cost.source",
    "oma.environment",
    "oma.llm.model",
    "oma.llm.provider",
    "oma.llm.response_model",
    "oma.llm.turn",
    "oma.model",
    "oma.phase",
    "oma.plan.approved",
    "oma.plan.task_count",
    "oma.provider",
    "oma.release",
    "oma.request.id",
    "oma.retry.attempt",
    "oma.retry.delay_ms",
    "oma.retry.max_attempts",
    "oma.status",
    "oma.stream.type",
    "oma.task.id",
    "oma.task.retries",
    "oma.tenant.id",
    "oma.tool.is_error",
    "oma.tool.name",
    "oma.ttft.ms",
];

/// Whether a record's attribute `key` may be exported: a token count, or a name on OMA's list
/// (`SAFE_ATTRIBUTES`). Everything else (a tool's input or output, metadata, anything a
/// record may carry that OMA's adapter does not know) stays out.
pub fn is_exported_attribute(key: &str) -> bool {
    let tokens =
        key.starts_with("oma.usage.") && (key.ends_with("_tokens") || key.ends_with(".tokens"));
    tokens || SAFE_ATTRIBUTES.contains(&key)
}

/// A span's attributes while it is built: names to record values, in the order first set (a
/// later value of a name replaces the earlier one in its place).
type Attributes = Map<String, Value>;

/// An attribute value of a record as an OTLP `AnyValue`: strings, booleans, integers (as
/// strings), doubles, and arrays of them; `None` for what OTLP cannot carry (null, an object).
fn any_value(value: &Value) -> Option<Value> {
    Some(match value {
        Value::String(text) => json!({"stringValue": text}),
        Value::Bool(flag) => json!({"boolValue": flag}),
        Value::Number(number) => match (number.as_i64(), number.as_u64()) {
            (Some(n), _) => json!({"intValue": n.to_string()}),
            (None, Some(n)) => json!({"intValue": n.to_string()}),
            (None, None) => json!({"doubleValue": number.as_f64()?}),
        },
        Value::Array(items) => {
            let values: Vec<Value> = items.iter().filter_map(any_value).collect();
            json!({"arrayValue": {"values": values}})
        }
        Value::Null | Value::Object(_) => return None,
    })
}

/// Attributes as OTLP's `KeyValue` list, in order.
fn key_values(attributes: &Attributes) -> Vec<Value> {
    attributes
        .iter()
        .filter_map(|(key, value)| Some(json!({"key": key, "value": any_value(value)?})))
        .collect()
}

fn text<'a>(record: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    record.get(key).and_then(Value::as_str)
}

fn number(record: &Map<String, Value>, key: &str) -> Option<u64> {
    record.get(key).and_then(Value::as_u64)
}

/// What identifies a record on the span or event made from it: OMA's schema version, the
/// record's id, sequence and type, the run and attempt, and OMA's ids of the trace, the span
/// and its parent.
fn identity(record: &Map<String, Value>, into: &mut Attributes) {
    into.insert("oma.schema.version".into(), Value::from(2));
    for (from, to) in [
        ("recordId", "oma.record.id"),
        ("sequence", "oma.record.sequence"),
        ("recordType", "oma.record.type"),
        ("runId", "oma.run.id"),
        ("attempt", "oma.run.attempt"),
        ("traceId", "oma.trace.id"),
        ("spanId", "oma.span.id"),
        ("parentSpanId", "oma.parent_span.id"),
    ] {
        if let Some(value) = record.get(from).filter(|v| !v.is_null()) {
            into.insert(to.into(), value.clone());
        }
    }
}

/// The exported attributes of a record's own `attributes` ([`is_exported_attribute`]).
fn exported(record: &Map<String, Value>, into: &mut Attributes) {
    if let Some(Value::Object(attributes)) = record.get("attributes") {
        for (key, value) in attributes {
            if is_exported_attribute(key) {
                into.insert(key.clone(), value.clone());
            }
        }
    }
}

/// The first of `keys` that holds a number.
fn first_number(attributes: &Attributes, keys: &[&str]) -> Option<Value> {
    keys.iter()
        .find_map(|key| attributes.get(*key).filter(|v| v.is_number()).cloned())
}

/// The first of `keys` that holds a non-empty string.
fn first_text(attributes: &Attributes, keys: &[&str]) -> Option<Value> {
    keys.iter().find_map(|key| {
        attributes
            .get(*key)
            .filter(|v| v.as_str().is_some_and(|s| !s.is_empty()))
            .cloned()
    })
}

/// The GenAI semantic conventions' attributes a span of `kind` carries, read from its OMA
/// attributes: the operation, provider, models, token counts, tool and time to the first
/// chunk. The input tokens count every input token, the prompt cache's included, as the
/// conventions count them (Anthropic and Bedrock, and so OMA's `oma.usage.input_tokens`, count
/// the cache's apart); the cache's counts are also given on their own, its reads whoever
/// counted them (`oma.usage.cached_input_tokens`: those OpenAI and Gemini count in their input).
fn gen_ai(kind: &str, attributes: &mut Attributes) {
    let operation = match kind {
        "llm" => Some("chat"),
        "agent" => Some("invoke_agent"),
        "tool" => Some("execute_tool"),
        _ => None,
    };
    if let Some(operation) = operation {
        attributes.insert("gen_ai.operation.name".into(), Value::from(operation));
    }
    let derived = [
        (
            "gen_ai.provider.name",
            first_text(attributes, &["oma.llm.provider", "oma.provider"]),
        ),
        (
            "gen_ai.request.model",
            first_text(attributes, &["oma.llm.model", "oma.model"]),
        ),
        (
            "gen_ai.response.model",
            first_text(attributes, &["oma.llm.response_model"]),
        ),
    ];
    for (key, value) in derived {
        if let Some(value) = value {
            attributes.insert(key.into(), value);
        }
    }
    let cache_read = first_number(
        attributes,
        &[
            "oma.usage.cache_read_input_tokens",
            "oma.usage.cache_read.input_tokens",
        ],
    );
    // Tokens read from the cache that the provider counts in its input (OpenAI's and
    // Gemini's), counted in the cache's reads and not again in the input.
    let cached = first_number(attributes, &["oma.usage.cached_input_tokens"]);
    let cache_read = match (cache_read, cached.as_ref().and_then(Value::as_u64)) {
        (read, None | Some(0)) => read,
        (read, Some(cached)) => Some(Value::from(
            read.as_ref()
                .and_then(Value::as_u64)
                .unwrap_or(0)
                .saturating_add(cached),
        )),
    };
    let read_apart = first_number(
        attributes,
        &[
            "oma.usage.cache_read_input_tokens",
            "oma.usage.cache_read.input_tokens",
        ],
    );
    let cache_creation = first_number(
        attributes,
        &[
            "oma.usage.cache_creation_input_tokens",
            "oma.usage.cache_creation.input_tokens",
        ],
    );
    if let Some(input) = first_number(attributes, &["oma.usage.input_tokens"]) {
        let all = [Some(&input), read_apart.as_ref(), cache_creation.as_ref()]
            .into_iter()
            .flatten()
            .filter_map(Value::as_u64)
            .fold(0, u64::saturating_add);
        let value = if input.is_u64() {
            Value::from(all)
        } else {
            input
        };
        attributes.insert("gen_ai.usage.input_tokens".into(), value);
    }
    let counts = [
        (
            "gen_ai.usage.output_tokens",
            first_number(attributes, &["oma.usage.output_tokens"]),
        ),
        ("gen_ai.usage.cache_read.input_tokens", cache_read),
        ("gen_ai.usage.cache_creation.input_tokens", cache_creation),
        (
            "gen_ai.usage.reasoning.output_tokens",
            first_number(
                attributes,
                &[
                    "oma.usage.reasoning_output_tokens",
                    "oma.usage.reasoning.output_tokens",
                ],
            ),
        ),
    ];
    for (key, value) in counts {
        if let Some(value) = value {
            attributes.insert(key.into(), value);
        }
    }
    if kind == "tool" {
        if let Some(tool) = first_text(attributes, &["oma.tool.name"]) {
            attributes.insert("gen_ai.tool.name".into(), tool);
        }
    }
    if let Some(ms) = attributes.get("oma.ttft.ms").and_then(Value::as_f64) {
        attributes.insert(
            "gen_ai.response.time_to_first_chunk".into(),
            Value::from(ms / 1000.0),
        );
    }
}

/// The attributes of a span as its start or end record says: the record's identity, OMA's
/// span kind, its exported attributes and their GenAI names.
fn span_attributes(record: &Map<String, Value>, into: &mut Attributes) {
    identity(record, into);
    let kind = text(record, "kind").unwrap_or_default();
    into.insert("oma.span.kind".into(), Value::from(kind));
    exported(record, into);
    gen_ai(kind, into);
}

/// A span's OTLP status from its record's (`{"code", "message"?}`): an error for `error`,
/// `timeout` and `budget_exhausted` (its message `oma.<code>` when the record gave one: the
/// record's message is never exported), unset otherwise (a success, a cancellation, a
/// refusal, a skip), as OpenTelemetry leaves a successful span.
fn status_of(status: Option<&Value>) -> Value {
    let code = status
        .and_then(|s| s.get("code"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let has_message = status
        .and_then(|s| s.get("message"))
        .and_then(Value::as_str)
        .is_some_and(|m| !m.is_empty());
    match code {
        "error" | "timeout" | "budget_exhausted" if has_message => {
            json!({"code": 2, "message": format!("oma.{code}")})
        }
        "error" | "timeout" | "budget_exhausted" => json!({"code": 2}),
        _ => json!({"code": 0}),
    }
}

/// A failed span's error (`{"kind", "code"?, "name"?, "message"?, ...}`) as attributes:
/// `error.type` (its code, else its kind) and `oma.error.*`; never its message.
fn error_attributes(error: &Map<String, Value>) -> Attributes {
    let mut attributes = Attributes::new();
    let kind = error.get("kind").cloned().unwrap_or(Value::from("unknown"));
    let code = error.get("code").filter(|v| v.is_string()).cloned();
    attributes.insert("error.type".into(), code.clone().unwrap_or(kind.clone()));
    attributes.insert("oma.error.kind".into(), kind);
    for (from, to) in [
        ("code", "oma.error.code"),
        ("name", "oma.error.name"),
        ("retryable", "oma.error.retryable"),
        ("httpStatus", "oma.error.http_status"),
        ("provider", "oma.error.provider"),
        ("attempt", "oma.error.attempt"),
    ] {
        if let Some(value) = error.get(from).filter(|v| !v.is_null()) {
            attributes.insert(to.into(), value.clone());
        }
    }
    attributes
}

/// One record span being gathered: its first start, its first end, its events, in order.
#[derive(Default)]
struct Gathered<'a> {
    trace_id: &'a str,
    span_id: &'a str,
    start: Option<&'a Map<String, Value>>,
    end: Option<&'a Map<String, Value>>,
    events: Vec<&'a Map<String, Value>>,
}

fn event(name: &str, time_ms: u64, attributes: &Attributes) -> Value {
    json!({
        "timeUnixNano": nanos(time_ms),
        "name": name,
        "attributes": key_values(attributes),
    })
}

/// The OTLP spans of OMA's trace records (OMA's record JSON, in the order they were made): one
/// per record span that has a start or an end, in the order the spans began, with OMA's trace
/// and span ids and parent, its name and kind (`llm` a client span, the rest internal), its
/// times, status, attributes and events, as OMA's OpenTelemetry adapter makes them. A span
/// whose end never came (a run that broke off) ends at `closed_ms`, marked
/// `oma.record.incomplete`, its status unset; an end without its start makes the span alone,
/// marked the same way. A record that is not OMA's (no object, no ids) is left out.
pub fn spans_of(records: &[Value], closed_ms: u64) -> Vec<Value> {
    let mut gathered: Vec<Gathered<'_>> = Vec::new();
    for record in records {
        let Value::Object(record) = record else {
            continue;
        };
        let (Some(trace_id), Some(span_id)) = (text(record, "traceId"), text(record, "spanId"))
        else {
            continue;
        };
        let at = match gathered
            .iter()
            .position(|g| g.trace_id == trace_id && g.span_id == span_id)
        {
            Some(at) => at,
            None => {
                gathered.push(Gathered {
                    trace_id,
                    span_id,
                    ..Gathered::default()
                });
                gathered.len() - 1
            }
        };
        let span = &mut gathered[at];
        match text(record, "recordType") {
            Some("span_start") if span.start.is_none() => span.start = Some(record),
            Some("span_end") if span.end.is_none() => span.end = Some(record),
            Some("span_event") => span.events.push(record),
            _ => {}
        }
    }
    gathered
        .iter()
        .filter_map(|g| span_of(g, &gathered, closed_ms))
        .collect()
}

/// The OTLP links of a span's records (`links`: `{"traceId", "spanId", "relation",
/// "attributes"?}`), each once: the span it names (resolved when it is one of `known`), its
/// relation and target as attributes, and its exported attributes.
fn links_of(records: &[&Map<String, Value>], known: &[Gathered<'_>]) -> Vec<Value> {
    let mut seen: Vec<(&str, &str, &str)> = Vec::new();
    let mut links = Vec::new();
    for record in records {
        let Some(Value::Array(list)) = record.get("links") else {
            continue;
        };
        for link in list {
            let Value::Object(link) = link else {
                continue;
            };
            let (Some(trace_id), Some(span_id)) = (text(link, "traceId"), text(link, "spanId"))
            else {
                continue;
            };
            let relation = text(link, "relation").unwrap_or_default();
            if seen.contains(&(trace_id, span_id, relation)) {
                continue;
            }
            seen.push((trace_id, span_id, relation));
            let resolved = known
                .iter()
                .any(|g| g.trace_id == trace_id && g.span_id == span_id);
            let mut attributes = Attributes::new();
            attributes.insert("oma.link.relation".into(), Value::from(relation));
            attributes.insert("oma.link.resolved".into(), Value::from(resolved));
            attributes.insert("oma.link.target.trace_id".into(), Value::from(trace_id));
            attributes.insert("oma.link.target.span_id".into(), Value::from(span_id));
            exported(link, &mut attributes);
            links.push(json!({
                "traceId": trace_id,
                "spanId": span_id,
                "attributes": key_values(&attributes),
            }));
        }
    }
    links
}

/// The OTLP span of one gathered record span ([`spans_of`]), among `known`.
fn span_of(gathered: &Gathered<'_>, known: &[Gathered<'_>], closed_ms: u64) -> Option<Value> {
    let first = gathered.start.or(gathered.end)?;
    let start_ms = number(first, "startUnixMs").unwrap_or_default();
    let mut attributes = Attributes::new();
    span_attributes(first, &mut attributes);
    let incomplete = gathered.start.is_none() || gathered.end.is_none();
    if incomplete {
        attributes.insert("oma.record.incomplete".into(), Value::from(true));
    }
    let mut events = Vec::new();
    for record in &gathered.events {
        let Some(name) = text(record, "name") else {
            continue;
        };
        let time_ms = number(record, "timestampUnixMs").unwrap_or(start_ms);
        let mut own = Attributes::new();
        identity(record, &mut own);
        exported(record, &mut own);
        own.insert("oma.event.name".into(), Value::from(name));
        events.push(event(&format!("oma.{name}"), time_ms, &own));
        if name == "first_chunk" {
            let seconds = time_ms.saturating_sub(start_ms) as f64 / 1000.0;
            attributes.insert(
                "gen_ai.response.time_to_first_chunk".into(),
                Value::from(seconds),
            );
            attributes.insert(
                "oma.ttft.ms".into(),
                Value::from(time_ms.saturating_sub(start_ms)),
            );
        }
    }
    let (end_ms, status) = match gathered.end {
        Some(end) => {
            span_attributes(end, &mut attributes);
            if let Some(code) = end.get("status").and_then(|s| s.get("code")) {
                attributes.insert("oma.status".into(), code.clone());
            }
            let end_ms = number(end, "endUnixMs").unwrap_or(start_ms);
            if let Some(Value::Object(error)) = end.get("error") {
                let error = error_attributes(error);
                for (key, value) in &error {
                    attributes.insert(key.clone(), value.clone());
                }
                events.push(event("exception", end_ms, &error));
            }
            (end_ms, status_of(end.get("status")))
        }
        None => (closed_ms, json!({"code": 0})),
    };
    let kind = if text(first, "kind") == Some("llm") {
        3
    } else {
        1
    };
    let sources: Vec<&Map<String, Value>> =
        [Some(first), gathered.end].into_iter().flatten().collect();
    let links = links_of(&sources, known);
    let mut span = json!({
        "traceId": gathered.trace_id,
        "spanId": gathered.span_id,
        "name": text(first, "name").unwrap_or_default(),
        "kind": kind,
        "startTimeUnixNano": nanos(start_ms),
        "endTimeUnixNano": nanos(end_ms.max(start_ms)),
        "attributes": key_values(&attributes),
        "events": events,
        "links": links,
        "status": status,
    });
    if let Some(parent) = text(first, "parentSpanId") {
        span["parentSpanId"] = Value::from(parent);
    }
    Some(span)
}

/// The OTLP/HTTP JSON body (`ExportTraceServiceRequest`) of one request: its span (kind
/// server) and the spans of the records of what it did ([`spans_of`]).
pub fn export_body(trace: &RequestTrace, request: &RequestSpan<'_>, records: &[Value]) -> String {
    let mut request_span = json!({
        "traceId": trace.context.trace_id,
        "spanId": trace.span_id,
        "name": request.name,
        "kind": 2,
        "startTimeUnixNano": nanos(request.started_ms),
        "endTimeUnixNano": nanos(request.ended_ms.max(request.started_ms)),
        "attributes": [
            string("http.request.method", "POST"),
            string("http.route", request.route),
            int("http.response.status_code", u64::from(request.status)),
        ],
        "status": {"code": if request.status >= 500 { 2 } else { 0 }},
    });
    if let Some(parent) = &trace.context.parent_span_id {
        request_span["parentSpanId"] = json!(parent);
    }
    let mut spans = vec![request_span];
    spans.extend(spans_of(records, request.ended_ms));
    json!({"resourceSpans": [{
        "resource": {"attributes": [string("service.name", "oma-gateway")]},
        "scopeSpans": [{"scope": {"name": "oma-gateway"}, "spans": spans}],
    }]})
    .to_string()
}

/// The export of one answered request to `url`: the OTLP body of `request` in `trace` and the
/// `records` of what it did ([`export_body`]). Every host sends it after the response and
/// ignores its answer: the wasi:http gateway and Fastly on their own HTTP, the Worker with
/// `ctx.waitUntil`.
pub fn request_export(
    url: &str,
    trace: &RequestTrace,
    request: &RequestSpan<'_>,
    records: &[Value],
) -> Outgoing {
    export_request(url, export_body(trace, request, records))
}

/// The export request of `body` to `url`, with a short timeout: a collector that is slow or
/// gone costs the instance at most that, never the client.
pub fn export_request(url: &str, body: String) -> Outgoing {
    Outgoing {
        method: "POST".into(),
        url: url.to_owned(),
        headers: vec![("content-type".into(), "application/json".into())],
        body: std::sync::Arc::new(body),
        timeout_ms: EXPORT_TIMEOUT_MS,
        stream: false,
        attempt: 1,
        parsed: None,
    }
}

/// How long an export may take.
pub const EXPORT_TIMEOUT_MS: u64 = 2_000;

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

    /// A record of `span` (under `parent`) numbered `sequence`, with `body`'s keys.
    fn record(sequence: u64, span: &str, parent: Option<&str>, body: Value) -> Value {
        let mut record = json!({
            "schemaVersion": 2, "recordId": format!("r{sequence}"), "sequence": sequence,
            "timestampUnixMs": 1000 + sequence, "runId": "run-1", "attempt": 1,
            "traceId": TRACE, "spanId": span,
        });
        if let Some(parent) = parent {
            record["parentSpanId"] = json!(parent);
        }
        record
            .as_object_mut()
            .unwrap()
            .extend(body.as_object().unwrap().clone());
        record
    }

    fn attribute(item: &Value, key: &str) -> Value {
        item["attributes"]
            .as_array()
            .expect("attributes")
            .iter()
            .find(|a| a["key"] == key)
            .map_or(Value::Null, |a| a["value"].clone())
    }

    fn by_id<'a>(spans: &'a [Value], id: &str) -> &'a Value {
        spans.iter().find(|s| s["spanId"] == id).expect("the span")
    }

    /// Records become spans as OMA's OpenTelemetry adapter reads them: OMA's ids and parents,
    /// kinds, statuses, events and errors; the attributes on OMA's list and their GenAI names;
    /// content and metadata never.
    #[test]
    fn records_become_spans_as_omas_adapter_reads_them() {
        let (run, llm, tool) = ("000000000000000a", "000000000000000b", "000000000000000c");
        let records = vec![
            record(
                1,
                run,
                Some("00000000000000ff"),
                json!({"recordType": "span_start",
                "kind": "run", "name": "oma.run", "startUnixMs": 1000,
                "attributes": {"oma.run.id": "run-1", "oma.meta.customer": "acme"}}),
            ),
            record(
                2,
                llm,
                Some(run),
                json!({"recordType": "span_start", "kind": "llm",
                "name": "chat", "startUnixMs": 1000,
                "attributes": {"oma.llm.model": "m", "oma.llm.provider": "anthropic",
                               "oma.llm.turn": 1, "oma.tags": ["a", "b"]}}),
            ),
            record(
                3,
                llm,
                Some(run),
                json!({"recordType": "span_event", "name": "first_chunk",
                "timestampUnixMs": 1250, "attributes": {"oma.ttft.ms": 250}}),
            ),
            record(
                4,
                llm,
                Some(run),
                json!({"recordType": "span_end", "kind": "llm",
                "name": "chat", "startUnixMs": 1000, "endUnixMs": 1400, "durationMs": 400,
                "status": {"code": "ok"},
                "attributes": {"oma.llm.model": "m", "oma.llm.provider": "anthropic",
                               "oma.usage.input_tokens": 12, "oma.usage.output_tokens": 4,
                               "oma.usage.cache_read_input_tokens": 100,
                               "oma.llm.response_model": "m-1", "oma.status": "ok"}}),
            ),
            record(
                5,
                tool,
                Some(run),
                json!({"recordType": "span_start", "kind": "tool",
                "name": "execute_tool", "startUnixMs": 1400,
                "links": [{"traceId": TRACE, "spanId": llm, "relation": "caused_by"}],
                "attributes": {"oma.tool.name": "lookup", "oma.tool.input": "{\"q\":\"private\"}"}}),
            ),
            record(
                6,
                tool,
                Some(run),
                json!({"recordType": "span_end", "kind": "tool",
                "name": "execute_tool", "startUnixMs": 1400, "endUnixMs": 1500, "durationMs": 100,
                "status": {"code": "error", "message": "private failure"},
                "error": {"kind": "tool", "name": "Error", "message": "private failure",
                          "retryable": true},
                "attributes": {"oma.tool.name": "lookup", "oma.tool.is_error": true,
                               "oma.tool.output": "private output", "oma.status": "error"}}),
            ),
            // An event of a span never started nor ended: no span.
            record(
                7,
                "000000000000000d",
                Some(run),
                json!({"recordType": "span_event",
                "name": "loop_detected", "attributes": {}}),
            ),
            json!("not a record"),
            json!({"recordType": "span_start"}),
        ];
        let spans = spans_of(&records, 2000);
        let body = serde_json::to_string(&spans).unwrap();
        for private in [
            "private",
            "acme",
            "oma.tool.input",
            "oma.tool.output",
            "oma.meta",
        ] {
            assert!(!body.contains(private), "{private} in {body}");
        }
        let names: Vec<&str> = spans.iter().map(|s| s["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["oma.run", "chat", "execute_tool"]);

        // The run never ended: it ends with the export, incomplete, its status unset.
        let root = by_id(&spans, run);
        assert_eq!(root["parentSpanId"], "00000000000000ff");
        assert_eq!(root["kind"], 1);
        assert_eq!(root["endTimeUnixNano"], "2000000000");
        assert_eq!(
            attribute(root, "oma.record.incomplete"),
            json!({"boolValue": true})
        );
        assert_eq!(root["status"], json!({"code": 0}));
        assert_eq!(
            attribute(root, "oma.run.id"),
            json!({"stringValue": "run-1"})
        );

        let chat = by_id(&spans, llm);
        assert_eq!(
            (chat["kind"].clone(), chat["traceId"].clone()),
            (json!(3), json!(TRACE))
        );
        assert_eq!(chat["startTimeUnixNano"], "1000000000");
        assert_eq!(chat["endTimeUnixNano"], "1400000000");
        assert_eq!(chat["status"], json!({"code": 0}));
        assert_eq!(attribute(chat, "oma.record.incomplete"), Value::Null);
        for (key, value) in [
            ("gen_ai.operation.name", json!({"stringValue": "chat"})),
            ("gen_ai.provider.name", json!({"stringValue": "anthropic"})),
            ("gen_ai.request.model", json!({"stringValue": "m"})),
            ("gen_ai.response.model", json!({"stringValue": "m-1"})),
            ("gen_ai.usage.input_tokens", json!({"intValue": "112"})),
            ("gen_ai.usage.output_tokens", json!({"intValue": "4"})),
            (
                "gen_ai.usage.cache_read.input_tokens",
                json!({"intValue": "100"}),
            ),
            (
                "gen_ai.response.time_to_first_chunk",
                json!({"doubleValue": 0.25}),
            ),
            ("oma.ttft.ms", json!({"intValue": "250"})),
            ("oma.usage.input_tokens", json!({"intValue": "12"})),
            ("oma.llm.turn", json!({"intValue": "1"})),
            ("oma.span.kind", json!({"stringValue": "llm"})),
            ("oma.record.type", json!({"stringValue": "span_end"})),
            ("oma.record.sequence", json!({"intValue": "4"})),
            ("oma.parent_span.id", json!({"stringValue": run})),
            ("oma.status", json!({"stringValue": "ok"})),
        ] {
            assert_eq!(attribute(chat, key), value, "{key}");
        }
        // Not on OMA's list: left out, whatever its value.
        assert_eq!(attribute(chat, "oma.tags"), Value::Null);
        let first = &chat["events"][0];
        assert_eq!(first["name"], "oma.first_chunk");
        assert_eq!(first["timeUnixNano"], "1250000000");
        assert_eq!(attribute(first, "oma.ttft.ms"), json!({"intValue": "250"}));
        assert_eq!(
            attribute(first, "oma.event.name"),
            json!({"stringValue": "first_chunk"})
        );

        let failed = by_id(&spans, tool);
        assert_eq!(failed["status"], json!({"code": 2, "message": "oma.error"}));
        assert_eq!(
            attribute(failed, "error.type"),
            json!({"stringValue": "tool"})
        );
        assert_eq!(
            attribute(failed, "oma.error.retryable"),
            json!({"boolValue": true})
        );
        assert_eq!(
            attribute(failed, "gen_ai.tool.name"),
            json!({"stringValue": "lookup"})
        );
        assert_eq!(
            attribute(failed, "oma.tool.is_error"),
            json!({"boolValue": true})
        );
        assert_eq!(failed["events"][0]["name"], "exception");
        assert_eq!(failed["events"][0]["timeUnixNano"], "1500000000");
        let link = &failed["links"][0];
        assert_eq!(
            (link["traceId"].clone(), link["spanId"].clone()),
            (json!(TRACE), json!(llm))
        );
        assert_eq!(
            attribute(link, "oma.link.resolved"),
            json!({"boolValue": true})
        );
        assert_eq!(
            attribute(link, "oma.link.relation"),
            json!({"stringValue": "caused_by"})
        );
    }

    /// An end whose start was lost makes its span alone, marked incomplete.
    #[test]
    fn an_end_without_its_start_is_a_span_of_its_own() {
        let end = record(
            2,
            "000000000000000b",
            None,
            json!({"recordType": "span_end",
            "kind": "agent", "name": "invoke_agent", "startUnixMs": 10, "endUnixMs": 30,
            "status": {"code": "timeout"}, "attributes": {"oma.agent.name": "a"}}),
        );
        let spans = spans_of(&[end], 99);
        assert_eq!(spans.len(), 1);
        assert_eq!(spans[0]["endTimeUnixNano"], "30000000");
        assert_eq!(spans[0]["status"], json!({"code": 2}));
        assert_eq!(
            attribute(&spans[0], "oma.record.incomplete"),
            json!({"boolValue": true})
        );
        assert_eq!(
            attribute(&spans[0], "gen_ai.operation.name"),
            json!({"stringValue": "invoke_agent"})
        );
        assert!(spans[0].get("parentSpanId").is_none());
    }

    /// Reads from the cache that the provider counts in its input (OpenAI's) count as the
    /// cache's reads and not again in the input.
    #[test]
    fn cached_input_tokens_are_cache_reads_within_the_input() {
        let end = record(
            1,
            "000000000000000b",
            None,
            json!({"recordType": "span_end",
            "kind": "llm", "name": "chat", "startUnixMs": 10, "endUnixMs": 30,
            "status": {"code": "ok"},
            "attributes": {"oma.usage.input_tokens": 100, "oma.usage.cached_input_tokens": 40,
                           "oma.usage.output_tokens": 5}}),
        );
        let span = &spans_of(&[end], 99)[0];
        assert_eq!(
            attribute(span, "gen_ai.usage.input_tokens"),
            json!({"intValue": "100"})
        );
        assert_eq!(
            attribute(span, "gen_ai.usage.cache_read.input_tokens"),
            json!({"intValue": "40"})
        );
        assert_eq!(
            attribute(span, "oma.usage.cached_input_tokens"),
            json!({"intValue": "40"})
        );
    }

    /// A request's trace is the client's when its `traceparent` is well formed (the request's
    /// span its child), a new one otherwise; the same seed names the same span, so the records
    /// made when the body arrives and the export made after the answer agree.
    #[test]
    fn a_request_continues_its_clients_trace() {
        let header = format!("00-{TRACE}-00f067aa0ba902b7-01");
        let trace = RequestTrace::of(Some(&header), 7);
        assert_eq!(trace.context.trace_id, TRACE);
        assert_eq!(
            trace.context.parent_span_id.as_deref(),
            Some("00f067aa0ba902b7")
        );
        assert_eq!(trace, RequestTrace::of(Some(&header), 7));
        assert_eq!(trace.parent().trace_id, TRACE);
        assert_eq!(trace.parent().span_id, trace.span_id);
        assert!(is_hex(&trace.span_id, 16));
        for bad in [
            None,
            Some("00-00000000000000000000000000000000-00f067aa0ba902b7-01"),
            Some("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
            Some("x"),
        ] {
            let fresh = RequestTrace::of(bad, 7);
            assert!(is_hex(&fresh.context.trace_id, 32) && fresh.context.trace_id != TRACE);
            assert_eq!(fresh.context.parent_span_id, None);
        }
        assert_ne!(
            RequestTrace::of(None, 7).span_id,
            RequestTrace::of(None, 8).span_id
        );
    }
}
