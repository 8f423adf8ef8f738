//! OpenTelemetry traces of the chat routes (`/v1/chat/completions`, `/v1/messages`): with
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as it is) or `OTEL_EXPORTER_OTLP_ENDPOINT` (then
//! `<endpoint>/v1/traces`) set, each request is exported as OTLP/HTTP JSON once the client has
//! its whole answer: a parent span for the gateway request (kind server) and one span per
//! provider call (kind client), failed calls and fallbacks included, in OpenTelemetry's GenAI
//! semantic conventions (`chat <model>`, `gen_ai.operation.name`, `gen_ai.provider.name`,
//! `gen_ai.request.model`, `gen_ai.response.model`, `gen_ai.usage.input_tokens`,
//! `gen_ai.usage.output_tokens`, `error.type` on failure). A W3C `traceparent` from the client is
//! honoured: its trace id is kept and the request's span is its child. No message content and
//! no key is ever in a span: the attributes are names, models, counts and error classes.
//!
//! The spans are built from the attempts [`crate::chat::ChatMachine`] records (what was tried,
//! when, with what outcome), so that the trace and the answer come from one record.

use serde_json::{json, Value};

use oma_core::http::call::Outgoing;
use oma_core::rng::Rng;

use crate::chat::Attempt;
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

/// The OTLP/HTTP JSON body (`ExportTraceServiceRequest`) of one request: its span and one span
/// per provider call.
pub fn export_body(
    context: &TraceContext,
    request: &RequestSpan<'_>,
    attempts: &[Attempt],
    rng: &mut Rng,
) -> String {
    let request_id = hex(rng.next_u64() | 1, 16);
    let mut request_span = json!({
        "traceId": context.trace_id,
        "spanId": request_id,
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
    if let Some(parent) = &context.parent_span_id {
        request_span["parentSpanId"] = json!(parent);
    }
    let mut spans = vec![request_span];
    for attempt in attempts {
        let mut attributes = vec![
            string("gen_ai.operation.name", "chat"),
            string("gen_ai.provider.name", &attempt.target.provider),
            string("gen_ai.request.model", &attempt.target.model),
        ];
        if let Some(model) = &attempt.response_model {
            attributes.push(string("gen_ai.response.model", model));
        }
        if let Some((input, output)) = attempt.usage {
            attributes.push(int("gen_ai.usage.input_tokens", input));
            attributes.push(int("gen_ai.usage.output_tokens", output));
        }
        let mut status = json!({"code": 0});
        if let Some(error) = &attempt.error {
            // The error's class, never its message (which may quote the provider's answer).
            let kind = match error.http_status() {
                Some(code) => code.to_string(),
                None => error.name().to_owned(),
            };
            attributes.push(string("error.type", &kind));
            status = json!({"code": 2});
        }
        spans.push(json!({
            "traceId": context.trace_id,
            "spanId": hex(rng.next_u64() | 1, 16),
            "parentSpanId": request_id,
            "name": format!("chat {}", attempt.target.model),
            "kind": 3,
            "startTimeUnixNano": nanos(attempt.started_ms),
            "endTimeUnixNano": nanos(attempt.ended_ms.max(attempt.started_ms)),
            "attributes": attributes,
            "status": status,
        }));
    }
    json!({"resourceSpans": [{
        "resource": {"attributes": [string("service.name", "oma-gateway")]},
        "scopeSpans": [{"scope": {"name": "oma-gateway"}, "spans": spans}],
    }]})
    .to_string()
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
    }
}

/// How long an export may take.
pub const EXPORT_TIMEOUT_MS: u64 = 2_000;
