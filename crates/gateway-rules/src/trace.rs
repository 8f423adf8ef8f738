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
//! The spans are made from one model: the core's trace events (OMA's `onTrace` events,
//! [`TraceEvent`]). A chat request's provider calls are recorded as `llm_call` events by
//! [`crate::chat::ChatMachine`]; a `/v1/run` is traced by the run machine itself, failed calls
//! included, and its `agent`, `llm_call` and `tool_call` events become spans under the request's
//! ([`span_of`]: `invoke_agent <agent>`, `chat <model>`, `execute_tool <tool>`). A span's id is
//! derived from its event's id, so that the parent an event names is the span it belongs to.

use serde_json::{json, Value};

use oma_core::http::call::Outgoing;
use oma_core::message::TokenUsage;
use oma_core::rng::Rng;

use crate::env::BadVariable;
use oma_core::agent::trace::{TraceData, TraceEvent};

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

/// The usage attributes of a span: the input tokens with the prompt cache's counted in (the
/// semantic conventions count every input token there; Anthropic and Bedrock leave the cache's
/// out of theirs), the output tokens, and the cache's counts when the provider reported any
/// (tokens read from it whoever counted them: OpenAI and Gemini count them in their input).
fn usage_attributes(tokens: &TokenUsage, attributes: &mut Vec<Value>) {
    attributes.push(int("gen_ai.usage.input_tokens", tokens.all_input()));
    attributes.push(int("gen_ai.usage.output_tokens", tokens.output_tokens));
    if tokens.cache_creation_input_tokens > 0 {
        attributes.push(int(
            "gen_ai.usage.cache_creation.input_tokens",
            tokens.cache_creation_input_tokens,
        ));
    }
    if tokens.cache_read() > 0 {
        attributes.push(int(
            "gen_ai.usage.cache_read.input_tokens",
            tokens.cache_read(),
        ));
    }
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

fn boolean(key: &str, value: bool) -> Value {
    json!({"key": key, "value": {"boolValue": value}})
}

/// The 16-hex-digit OTLP span id of an event's id: an id that is one already as it is, a UUID
/// (the core's ids) its last 16 digits, anything else (an id a caller chose) a 64-bit FNV-1a
/// hash of it; never all zeros, which OTLP reads as no span.
pub fn span_id_of(id: &str) -> String {
    if is_hex(id, 16) {
        return id.to_owned();
    }
    let digits: String = id.chars().filter(|c| *c != '-').collect();
    if is_hex(&digits, 32) && is_hex(&digits[16..], 16) {
        return digits[16..].to_owned();
    }
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in id.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hex(hash.max(1), 16)
}

/// The OTLP span of one trace event in `trace_id`, under `parent` when the event names no
/// parent (the gateway request's span): in OpenTelemetry's GenAI conventions, with names,
/// models, counts and error classes only, never a message, a tool's input or output, or a gate's
/// reason.
pub fn span_of(event: &TraceEvent, trace_id: &str, parent: &str) -> Value {
    let mut attributes = Vec::new();
    let mut status = json!({"code": 0});
    let (name, kind) = match &event.data {
        TraceData::LlmCall {
            model,
            phase,
            turn,
            tokens,
            provider,
            response_model,
            error,
        } => {
            attributes.push(string("gen_ai.operation.name", "chat"));
            if let Some(provider) = provider {
                attributes.push(string("gen_ai.provider.name", provider));
            }
            attributes.push(string("gen_ai.request.model", model));
            if let Some(answered) = response_model {
                attributes.push(string("gen_ai.response.model", answered));
            }
            match error {
                None => usage_attributes(tokens, &mut attributes),
                Some(class) => {
                    attributes.push(string("error.type", class));
                    status = json!({"code": 2});
                }
            }
            attributes.push(string("oma.phase", phase.word()));
            attributes.push(int("oma.turn", u64::from(*turn)));
            (format!("chat {model}"), 3)
        }
        TraceData::ToolCall {
            tool,
            is_error,
            gate,
            ..
        } => {
            attributes.push(string("gen_ai.operation.name", "execute_tool"));
            attributes.push(string("gen_ai.tool.name", tool));
            if *is_error {
                attributes.push(string("error.type", "tool_error"));
                status = json!({"code": 2});
            }
            if let Some(gate) = gate {
                attributes.push(boolean("oma.tool.gated", true));
                attributes.push(string("oma.tool.gate_action", &gate.action));
            }
            (format!("execute_tool {tool}"), 1)
        }
        TraceData::Agent {
            turns,
            tokens,
            tool_calls,
        } => {
            attributes.push(string("gen_ai.operation.name", "invoke_agent"));
            attributes.push(string("gen_ai.agent.name", &event.agent));
            usage_attributes(tokens, &mut attributes);
            attributes.push(string("oma.run_id", &event.run_id));
            attributes.push(int("oma.turns", u64::from(*turns)));
            attributes.push(int("oma.tool_calls", u64::from(*tool_calls)));
            (format!("invoke_agent {}", event.agent), 1)
        }
    };
    if let Some(task) = &event.task_id {
        attributes.push(string("oma.task_id", task));
    }
    let parent = event
        .parent_id
        .as_deref()
        .map_or_else(|| parent.to_owned(), span_id_of);
    json!({
        "traceId": trace_id,
        "spanId": span_id_of(&event.span_id),
        "parentSpanId": parent,
        "name": name,
        "kind": kind,
        "startTimeUnixNano": nanos(event.start_ms),
        "endTimeUnixNano": nanos(event.end_ms.max(event.start_ms)),
        "attributes": attributes,
        "status": status,
    })
}

/// The OTLP/HTTP JSON body (`ExportTraceServiceRequest`) of one request: its span (kind
/// server) and one span per trace event of what it did ([`span_of`]).
pub fn export_body(
    context: &TraceContext,
    request: &RequestSpan<'_>,
    events: &[TraceEvent],
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
    spans.extend(
        events
            .iter()
            .map(|event| span_of(event, &context.trace_id, &request_id)),
    );
    json!({"resourceSpans": [{
        "resource": {"attributes": [string("service.name", "oma-gateway")]},
        "scopeSpans": [{"scope": {"name": "oma-gateway"}, "spans": spans}],
    }]})
    .to_string()
}

/// The export of one answered request to `url`: the OTLP body of `request` and its `events`
/// ([`export_body`]) in the client's trace when its `traceparent` is one, ids drawn from
/// `seed`. Every host sends it after the response and ignores its answer: the wasi:http
/// gateway and Fastly on their own HTTP, the Worker with `ctx.waitUntil`.
pub fn request_export(
    url: &str,
    traceparent: Option<&str>,
    request: &RequestSpan<'_>,
    events: &[TraceEvent],
    seed: u64,
) -> Outgoing {
    let mut rng = Rng::new(seed);
    let context = TraceContext::from_traceparent(traceparent, &mut rng);
    export_request(url, export_body(&context, request, events, &mut rng))
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
