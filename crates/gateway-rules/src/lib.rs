//! The gateway's rules (`docs/gateway.md`): OMA's validation, wire formats and runs behind an
//! HTTP API, as plain Rust that every gateway host shares.
//!
//! Everything here is pure. One request is one [`request::RequestMachine`]: it is polled for
//! what it needs next (read the body, count on a store, send a reply or a stream's pieces, send a
//! provider request, write a log line) and told what happened, and it decides everything the
//! gateway answers, from the pieces below: [`route`] decides from a request's head, [`validate`]
//! and [`format()`] answer from its body, [`start_run`] makes the run's [`RunMachine`] (the same
//! machine every world drives), the chat routes' [`chat::ChatMachine`] makes their provider
//! calls (each client field passed, mapped or refused per target by [`fields`]' table), [`limits`] counts them, and [`run_reply`] / [`sse_event`] turn what the run produced
//! into the response.
//!
//! `oma_gateway.wasm`, `oma_routes.wasm` and `oma_fastly.wasm` are built from this crate and
//! drive the machine, and nothing else decides what they answer: the `wasi:http/proxy` gateway
//! (`crates/gateway`, `oma_gateway.wasm`) and the Fastly Compute layer (`crates/fastly`) through
//! the blocking loop [`serve::serve`], each giving it a platform's request, response and
//! transport; and the `routes` world (`crates/routes`, `oma_routes.wasm`), which hands its steps
//! to a host that serves HTTP itself (the Cloudflare Worker gateway).

#![deny(missing_docs)]
// The machines hand a refused answer back by value (`Refused<A>`), as the core's do: a misuse
// path whose `Ok` side is empty, and boxing it would only move the cost to every caller.
#![allow(clippy::result_large_err)]

pub mod anthropic;
pub mod chat;
pub mod env;
pub mod fields;
pub mod limits;
pub mod nested;
pub mod openai;
pub mod request;
pub mod serve;
pub mod trace;

use serde_json::{json, Value};

use oma_core::adapter::{self, ChatRequest, IdSource, Sampling};
use oma_core::agent::config::AgentSettings;
use oma_core::agent::entry;
use oma_core::agent::evaluation::RunInput;
use oma_core::agent::exchange::AgentEvent;
use oma_core::agent::machine::RunMachine;
use oma_core::agent::observability::options::{RecordOptions, TraceParent};
use oma_core::agent::outcome::outcome_json;
use oma_core::agent::outcome::RunOutcome;
use oma_core::agent::outcome::{ErrorInfo, StatusCode};
use oma_core::agent::trace::{TraceEvent, TraceOptions};
use oma_core::agent::turn::Event;
use oma_core::error::Error;
use oma_core::http::call::CallOptions;
use oma_core::http::display::render_request;
use oma_core::http::Limits;
use oma_core::json;
use oma_core::json::object::{Object, ShapeError};
use oma_core::retry::RetryPolicy;
use oma_core::validate::validate_messages;

pub use env::Settings;

/// The agent name runs carry (in results and errors).
pub const AGENT_NAME: &str = "gateway";

/// A whole response: status, headers (beyond `content-type: application/json`) and a JSON body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// Extra headers, e.g. `allow` for a 405.
    pub headers: Vec<(&'static str, String)>,
    /// The JSON body.
    pub body: String,
}

impl Reply {
    fn json(status: u16, body: &Value) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: body.to_string(),
        }
    }

    /// An error response: `{"error": {"name", "code", "message", "retryable"}}`.
    pub fn error(status: u16, name: &str, code: Option<&str>, message: &str) -> Reply {
        let mut inner = json!({ "name": name });
        if let Some(code) = code {
            inner["code"] = json!(code);
        }
        inner["message"] = json!(message);
        inner["retryable"] = json!(matches!(status, 500..=599));
        Reply::json(status, &json!({ "error": inner }))
    }

    /// An OMA error as a response with `status`.
    pub fn of_error(status: u16, error: &Error) -> Reply {
        let mut value = error.to_json();
        // The gateway's error shape has no provider-failure fields: a 422 is the caller's to fix.
        // An `UnsupportedContentBlockError` keeps its own `provider`, the adapter that refused
        // the block (with `blockType`), as OMA's class carries it.
        if let Some(inner) = value.get_mut("error").and_then(Value::as_object_mut) {
            inner.remove("httpStatus");
            if error.block_type().is_none() {
                inner.remove("provider");
            }
        }
        Reply::json(status, &value)
    }

    /// Every header of the response: `content-type: application/json`, then the extra ones
    /// (the host adds `content-length`).
    pub fn all_headers(&self) -> Vec<(String, String)> {
        let mut headers = vec![("content-type".to_owned(), "application/json".to_owned())];
        headers.extend(
            self.headers
                .iter()
                .map(|(name, value)| ((*name).to_owned(), value.clone())),
        );
        headers
    }

    fn with_header(mut self, name: &'static str, value: &str) -> Reply {
        self.headers.push((name, value.to_owned()));
        self
    }

    /// `500`: a variable of the configuration cannot be used (named, its value never shown).
    pub fn bad_configuration(bad: &env::BadVariable) -> Reply {
        Reply::error(
            500,
            "Error",
            Some("CONFIGURATION"),
            &format!(
                "the gateway is misconfigured: {} must be {}",
                bad.name, bad.expected
            ),
        )
    }

    /// `413`: the body is larger than the limit.
    pub fn too_large(limit: u64) -> Reply {
        Reply::error(
            413,
            "Error",
            Some("PAYLOAD_TOO_LARGE"),
            &format!("the request body is larger than the limit of {limit} bytes"),
        )
    }

    /// `400`: the body could not be read whole.
    pub fn unreadable(reason: &str) -> Reply {
        Reply::error(
            400,
            "Error",
            Some("BAD_REQUEST"),
            &format!("the request body could not be read: {reason}"),
        )
    }

    /// `408`: the body did not arrive whole within the deadline.
    pub fn body_timeout() -> Reply {
        Reply::error(
            408,
            "Error",
            Some("REQUEST_TIMEOUT"),
            "the request body did not arrive within the gateway's deadline",
        )
    }

    /// `504`: the deadline passed.
    pub fn deadline(deadline_ms: u64) -> Reply {
        Reply::error(
            504,
            "LLMCallTimeoutError",
            Some("LLM_CALL_TIMEOUT"),
            &format!("the request took longer than the gateway's deadline of {deadline_ms} ms"),
        )
    }
}

/// The routes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// `GET /healthz`.
    Health,
    /// `POST /v1/validate`.
    Validate,
    /// `POST /v1/format`.
    Format,
    /// `POST /v1/run`.
    Run,
    /// `POST /v1/chat/completions` (OpenAI-compatible, [`openai`]).
    ChatCompletions,
    /// `GET /v1/models` (OpenAI-compatible: the configured models, [`openai::models`]).
    Models,
    /// `POST /v1/messages` (Anthropic-compatible, [`anthropic`]).
    Messages,
    /// `POST /v1/messages/count_tokens` (Anthropic-compatible: a request's input tokens,
    /// [`anthropic::start`]).
    CountTokens,
}

/// What [`route`] reads of a request.
#[derive(Clone, Copy, Debug, Default)]
pub struct Head<'a> {
    /// The method, e.g. `POST`.
    pub method: &'a str,
    /// The path, with or without a query.
    pub path: &'a str,
    /// The `authorization` header.
    pub authorization: Option<&'a str>,
    /// The `x-api-key` header (what Anthropic's clients send their key in).
    pub api_key: Option<&'a str>,
    /// The `content-length` header, when it is a number.
    pub content_length: Option<u64>,
    /// The `anthropic-version` header: Anthropic's clients send it, and `/v1/models` answers
    /// them in Anthropic's shape.
    pub anthropic_version: Option<&'a str>,
    /// The `anthropic-beta` header, sent on to Anthropic targets (the field table's
    /// `anthropic-beta` row decides the others: [`fields::apply_markers_and_betas`]).
    pub anthropic_beta: Option<&'a str>,
    /// The W3C `traceparent` header: the trace the request's records and spans continue
    /// ([`trace::RequestTrace`]).
    pub traceparent: Option<&'a str>,
}

impl Head<'_> {
    /// The value of a `content-length` header as the gateway reads it: a number, surrounding
    /// blanks allowed; anything else counts as no declared length.
    pub fn parse_content_length(value: &str) -> Option<u64> {
        value.trim().parse().ok()
    }
}

/// Whether an `accept` header asks for a stream of server-sent events.
pub fn wants_stream(accept: &str) -> bool {
    accept
        .split(',')
        .any(|kind| kind.trim().starts_with("text/event-stream"))
}

/// The headers of a streamed run's `200` head.
pub const STREAM_HEADERS: [(&str, &str); 2] = [
    ("content-type", "text/event-stream"),
    ("cache-control", "no-cache"),
];

/// What the head of a request decides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeadVerdict {
    /// The whole answer (health, or a refusal).
    Reply(Reply),
    /// Read the body, then answer this route.
    ReadBody(Route),
}

/// The answer a request's head decides, given the configuration as read (`500` when it cannot
/// be used): `GET /healthz` is answered here, refusals are [`route`]'s; any other route reads
/// its body.
pub fn on_head(settings: Result<&Settings, &env::BadVariable>, head: &Head) -> HeadVerdict {
    let settings = match settings {
        Ok(settings) => settings,
        Err(bad) => return HeadVerdict::Reply(Reply::bad_configuration(bad)),
    };
    match route(settings, head) {
        Err(reply) => HeadVerdict::Reply(reply),
        // `/healthz` says where limits are counted.
        Ok(Route::Health) => HeadVerdict::Reply(limits::health(limits::scope(settings))),
        Ok(Route::Models) => HeadVerdict::Reply(models(settings, head)),
        Ok(route) => HeadVerdict::ReadBody(route),
    }
}

/// `GET /v1/models`: Anthropic's list when the client sends `anthropic-version` (Anthropic's
/// clients do), else OpenAI's.
fn models(settings: &Settings, head: &Head) -> Reply {
    match head.anthropic_version {
        Some(_) => anthropic::models(settings),
        None => openai::models(settings),
    }
}

/// What a request's body comes to.
pub enum BodyVerdict {
    /// The whole answer.
    Reply(Reply),
    /// The run of `/v1/run`, to drive.
    Run(Box<StartedRun>),
    /// The provider calls of `/v1/chat/completions`, to drive, and how to answer.
    Chat(Box<openai::Completion>),
}

/// The answer to `route` with its whole body: `/v1/validate` and `/v1/format` answer here,
/// `/v1/run` starts its run ([`start_run`]; streamed when `streaming`), the chat routes their
/// provider calls (the Anthropic ones read `head`'s path and headers). `now_ms` and `seed` feed
/// what a format makes up and the run's random draws.
pub fn on_body(
    settings: &Settings,
    route: Route,
    head: &Head,
    body: &[u8],
    streaming: bool,
    now_ms: u64,
    seed: u64,
) -> BodyVerdict {
    match route {
        Route::Health => BodyVerdict::Reply(health()),
        Route::Models => BodyVerdict::Reply(models(settings, head)),
        Route::Validate => BodyVerdict::Reply(validate(settings, body)),
        Route::Format => BodyVerdict::Reply(format(settings, body, now_ms, seed)),
        Route::Run => match start_run(
            settings,
            body,
            streaming,
            seed,
            &trace::RequestTrace::of(head.traceparent, seed).parent(),
        ) {
            Ok(run) => BodyVerdict::Run(Box::new(run)),
            Err(reply) => BodyVerdict::Reply(reply),
        },
        Route::ChatCompletions => match openai::start(settings, body, now_ms, seed) {
            Ok(completion) => BodyVerdict::Chat(Box::new(completion)),
            Err(reply) => BodyVerdict::Reply(reply),
        },
        Route::Messages | Route::CountTokens => {
            let count = route == Route::CountTokens;
            match anthropic::start(settings, body, head, count, now_ms, seed) {
                Ok(completion) => BodyVerdict::Chat(Box::new(completion)),
                Err(reply) => BodyVerdict::Reply(reply),
            }
        }
    }
}

/// The hook's failure when a run asks for one: the gateway runs no hooks.
pub const NO_HOOK: &str = "the gateway runs no hooks";
/// The failed tool result a model that asks for a tool anyway gets.
pub const NO_TOOLS: &str = "no tools are available through the gateway";
/// The failure when a run asks for an external backend.
pub const NO_EXTERNAL: &str = "the gateway has no external backend";
/// The failure should a run ask for the `custom` context strategy's function (refused before a
/// run starts).
pub const NO_COMPRESS: &str = "contextStrategy \"custom\" is not available in a gateway run";
/// The failure should a run ask for an LLM adapter of its own (a request cannot name one: an
/// `adapter` field is an unknown field, refused before a run starts).
pub const NO_ADAPTER: &str = "an LLM adapter of one's own is not available in a gateway run";
/// The failure should a run ask for an `onLoopDetected` function (refused before a run starts).
pub const NO_LOOP_DECISION: &str =
    "loopDetection.onLoopDetected as a function is not available in a gateway run";

/// The log line for one request, with its newline: method, path without its query (control
/// characters shown as `?`, at most 200 characters), status, duration. Nothing else of the
/// request: a key never reaches a log line.
pub fn log_line(method: &str, path: &str, status: u16, ms: u64) -> String {
    let path = path.split(['?', '#']).next().unwrap_or("");
    let path: String = path
        .chars()
        .take(200)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    let method: String = method
        .chars()
        .take(16)
        .filter(|c| !c.is_control())
        .collect();
    format!("oma-gateway: {method} {path} {status} {ms}ms\n")
}

/// The header of a whole chat answer that names the client's fields dropped for the target that
/// answered, as `OMA_GATEWAY_DROP_PARAMS` allowed (`seed, logprobs`).
pub const DROPPED_HEADER: &str = "oma-dropped-params";

/// The log line naming the client's fields dropped for `target` (`<provider>/<model>`), as
/// `OMA_GATEWAY_DROP_PARAMS` allowed, written before the target is sent the request.
pub fn dropped_line(target: &str, fields: &[String]) -> String {
    let target: String = target
        .chars()
        .take(200)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    format!(
        "oma-gateway: dropped for {target} (OMA_GATEWAY_DROP_PARAMS): {}\n",
        fields.join(", ")
    )
}

/// The log line of a trace export that did not reach the collector (`reason`: the collector's
/// status, or how the request failed), with its newline: written to the host's log beside the
/// request's own line, so that dropped exports are counted there.
pub fn export_dropped_line(reason: &str) -> String {
    format!("oma-gateway: trace export dropped: {reason}\n")
}

/// The route of a request, or the response that refuses it, in this order: `404` for no route,
/// `401` without the token (`/healthz` is open), `405` (with `allow`) for another method, `413`
/// when the declared length is above the limit.
pub fn route(settings: &Settings, head: &Head) -> Result<Route, Reply> {
    let path = head.path.split(['?', '#']).next().unwrap_or("");
    let (route, method) = match path {
        "/healthz" => (Route::Health, "GET"),
        "/v1/validate" => (Route::Validate, "POST"),
        "/v1/format" => (Route::Format, "POST"),
        "/v1/run" => (Route::Run, "POST"),
        "/v1/chat/completions" => (Route::ChatCompletions, "POST"),
        "/v1/models" => (Route::Models, "GET"),
        "/v1/messages" => (Route::Messages, "POST"),
        "/v1/messages/count_tokens" => (Route::CountTokens, "POST"),
        _ => {
            return Err(Reply::error(
                404,
                "Error",
                Some("NOT_FOUND"),
                "no such route: the gateway answers GET /healthz, POST /v1/validate, \
                 POST /v1/format, POST /v1/run, POST /v1/chat/completions, GET /v1/models, \
                 POST /v1/messages and POST /v1/messages/count_tokens",
            ))
        }
    };
    // Each route refuses in its own error shape: OpenAI's for the OpenAI-compatible routes,
    // Anthropic's for the Anthropic-compatible ones (and `/v1/models` asked by an Anthropic
    // client). A request without the token learns nothing more than that (no method is named to
    // it), so the token is checked first.
    let anthropic = matches!(route, Route::Messages | Route::CountTokens)
        || (route == Route::Models && head.anthropic_version.is_some());
    let openai = !anthropic && matches!(route, Route::ChatCompletions | Route::Models);
    if route != Route::Health && !settings.authorized_either(head.authorization, head.api_key) {
        let message = "a token is required: send `authorization: Bearer <token>` or \
                       `x-api-key: <token>`";
        let reply = if anthropic {
            anthropic::error_reply(401, "authentication_error", message)
        } else if openai {
            openai::error_reply(
                401,
                "authentication_error",
                Some("invalid_api_key"),
                message,
            )
        } else {
            Reply::error(401, "Error", Some("UNAUTHORIZED"), message)
        };
        return Err(reply.with_header("www-authenticate", "Bearer"));
    }
    if !head.method.eq_ignore_ascii_case(method) {
        let message = format!("{path} answers {method} only");
        let reply = if anthropic {
            anthropic::error_reply(405, "invalid_request_error", &message)
        } else if openai {
            openai::error_reply(
                405,
                "invalid_request_error",
                Some("method_not_allowed"),
                &message,
            )
        } else {
            Reply::error(405, "Error", Some("METHOD_NOT_ALLOWED"), &message)
        };
        return Err(reply.with_header("allow", method));
    }
    if head
        .content_length
        .is_some_and(|length| length > settings.max_body_bytes)
    {
        return Err(Reply::too_large(settings.max_body_bytes));
    }
    Ok(route)
}

/// `GET /healthz`.
pub fn health() -> Reply {
    Reply::json(200, &json!({ "status": "ok" }))
}

/// The body as JSON; `400` when it is not.
fn parse_body(body: &[u8]) -> Result<Value, Reply> {
    oma_core::json::from_bytes(body).map_err(|e| match e {
        // Counted before parsing: well under the byte limit, but too many values to parse.
        oma_core::json::BytesError::TooLarge(why) => Reply::error(
            413,
            "Error",
            Some("PAYLOAD_TOO_LARGE"),
            &format!("the request body is too large: {why}"),
        ),
        e => Reply::error(
            400,
            "Error",
            Some("MALFORMED_JSON"),
            &format!("the request body is not JSON: {e}"),
        ),
    })
}

/// The refusal of a request for `error`, with `status`. Every refusal of a request's body goes
/// through here: its message may quote what the client sent (a field, a provider name, a block
/// type), so it is redacted of every configured secret. A client that sends a key it guessed
/// gets `[redacted]` back, never a confirmation (found by the `gateway_requests` fuzz target).
fn refuse(settings: &Settings, status: u16, error: Error) -> Reply {
    Reply::of_error(status, &error.redact(&secret_refs(&settings.all_secrets())))
}

/// `POST /v1/validate`: an OMA message list, answered with the validated list (`200`) or the
/// first rule it breaks (`422`, redacted of `settings`' secrets).
pub fn validate(settings: &Settings, body: &[u8]) -> Reply {
    let value = match parse_body(body) {
        Ok(value) => value,
        Err(reply) => return reply,
    };
    let checked = json::messages_from_value(value).and_then(|messages| {
        validate_messages(&messages)?;
        Ok(json::messages_to_json(&messages))
    });
    match checked {
        Ok(text) => Reply {
            status: 200,
            headers: Vec::new(),
            body: text,
        },
        Err(error) => refuse(settings, 422, error),
    }
}

/// The fields `/v1/format` takes.
struct FormatBody {
    provider: String,
    model: String,
    messages: Value,
    system: Option<String>,
    max_tokens: Option<u32>,
    temperature: Option<f64>,
}

impl FormatBody {
    fn read(mut o: Object) -> Result<Self, ShapeError> {
        let body = FormatBody {
            provider: o.required_string("provider")?,
            model: o.required_string("model")?,
            // A `null` list is the shape guard's to refuse, with OMA's message.
            messages: o.required_or_null("messages")?,
            system: o.string("system")?,
            max_tokens: o.u32("maxTokens")?,
            temperature: o.f64("temperature")?,
        };
        o.finish()?;
        Ok(body)
    }
}

/// The fields `/v1/run` takes.
struct RunBody {
    provider: String,
    model: String,
    messages: Option<Value>,
    prompt: Option<String>,
    system: Option<String>,
    max_turns: Option<u32>,
    max_token_budget: Option<u64>,
    max_tokens: Option<u32>,
    temperature: Option<f64>,
    /// OMA's `loopDetection`.
    loop_detection: Option<oma_core::agent::loop_detect::LoopDetection>,
    /// OMA's context options (every strategy but `custom`, which needs the caller's code).
    context: oma_core::agent::context::ContextOptions,
    /// Return OMA's trace events of the run with its result (`"trace": true`).
    trace: bool,
    /// Return OMA's trace records of the run with its result (`"records": true`).
    records: bool,
    /// OMA's `outputSchema`, as a JSON Schema the core validates.
    output_schema: Option<oma_core::agent::structured::OutputSchema>,
}

impl RunBody {
    fn read(mut o: Object) -> Result<Self, ShapeError> {
        let body = RunBody {
            provider: o.required_string("provider")?,
            model: o.required_string("model")?,
            messages: o.take("messages"),
            prompt: o.string("prompt")?,
            system: o.string("system")?,
            max_turns: o.u32("maxTurns")?,
            max_token_budget: o.u64("maxTokenBudget")?,
            max_tokens: o.u32("maxTokens")?,
            temperature: o.f64("temperature")?,
            loop_detection: match o.object("loopDetection")? {
                Some(object) => Some(oma_core::agent::loop_detect::LoopDetection::from_object(
                    object,
                )?),
                None => None,
            },
            context: oma_core::agent::context::ContextOptions::from_config(&mut o)?,
            trace: o.bool("trace")?.unwrap_or(false),
            records: o.bool("records")?.unwrap_or(false),
            output_schema: match o.take("outputSchema") {
                None | Some(Value::Null) => None,
                Some(schema) => Some(
                    oma_core::agent::structured::OutputSchema::new(schema, false).map_err(
                        |why| o.invalid("outputSchema", &format!("is not a JSON Schema: {why}")),
                    )?,
                ),
            },
        };
        // OMA's `onLoopDetected` function and `custom` strategy are the caller's code; an HTTP
        // caller cannot answer them in the middle of a run, as it cannot answer tools.
        if body.loop_detection.is_some_and(|detection| {
            detection.action == oma_core::agent::loop_detect::LoopAction::Ask
        }) {
            return Err(o.invalid(
                "loopDetection.onLoopDetected",
                "must be \"warn\" or \"terminate\" in a gateway run (a function cannot be called over HTTP)",
            ));
        }
        // OMA's `custom` strategy is the caller's function; an HTTP caller cannot answer it in
        // the middle of a run, as it cannot answer tools.
        if body.context.strategy == Some(oma_core::agent::context::ContextStrategy::Custom) {
            return Err(o.invalid(
                "contextStrategy.type",
                "\"custom\" needs a function in the caller's process, which a gateway run cannot call; use \"sliding-window\", \"summarize\" or \"compact\"",
            ));
        }
        o.finish()?;
        Ok(body)
    }
}

/// The request's fields, or `400` (not JSON) / `422` (another shape, naming the fields it was
/// given: redacted by [`refuse`]).
fn fields<T>(
    settings: &Settings,
    body: &[u8],
    read: fn(Object) -> Result<T, ShapeError>,
) -> Result<T, Reply> {
    let value = parse_body(body)?;
    Object::strict(value).and_then(read).map_err(|e| {
        let error = Error::InvalidRequest {
            message: format!("the request is not valid: {e}"),
        };
        refuse(settings, 422, error)
    })
}

/// `POST /v1/format`: the request the gateway would send for these messages, credentials
/// shown as `[redacted]`; `422` for invalid or unsupported content. `now_ms` and `seed` feed
/// what a format makes up (SigV4 dates, Gemini ids).
pub fn format(settings: &Settings, body: &[u8], now_ms: u64, seed: u64) -> Reply {
    let fields = match fields(settings, body, FormatBody::read) {
        Ok(fields) => fields,
        Err(reply) => return reply,
    };
    let provider = settings.provider(&fields.provider);
    let formatted = (|| {
        let messages = json::messages_from_value(fields.messages)?;
        validate_messages(&messages)?;
        let ids = IdSource {
            epoch_ms: now_ms,
            seed,
        };
        let adapter =
            adapter::for_provider(&fields.provider, provider.endpoint.base_url.as_deref(), ids)?;
        let request = ChatRequest {
            model: fields.model,
            system_prompt: fields.system,
            messages,
            sampling: Sampling {
                max_tokens: fields.max_tokens,
                temperature: fields.temperature,
                ..Sampling::default()
            },
            ..ChatRequest::default()
        };
        let endpoint = adapter::Endpoint {
            timestamp: Some(adapter::amz_timestamp(now_ms / 1000)),
            ..provider.endpoint.clone()
        };
        let http = adapter.format(&request, &endpoint)?;
        render_request(&http, &settings.all_secrets())
    })();
    match formatted {
        Ok(text) => Reply {
            status: 200,
            headers: Vec::new(),
            body: text,
        },
        Err(error) => refuse(settings, 422, error),
    }
}

fn secret_refs(secrets: &[String]) -> Vec<&str> {
    secrets.iter().map(String::as_str).collect()
}

/// A `/v1/run` ready to drive ([`start_run`]).
#[derive(Debug)]
pub struct StartedRun {
    /// The run. It is traced the legacy way when the request asked for its trace events, and
    /// makes OMA's trace records when it asked for them or when traces are exported
    /// (`OTEL_EXPORTER_OTLP_*`: the export is read from them).
    pub machine: RunMachine,
    /// Whether the reply holds the run's trace events (`"trace": true`, [`with_trace`]).
    pub trace_reply: bool,
    /// Whether the reply holds the run's trace records (`"records": true`, [`with_records`]).
    pub records_reply: bool,
}

/// `POST /v1/run`: the run's machine, with the environment's endpoint, the gateway's deadline
/// and retries, and no tools or hook; or the response that refuses the request (`400`, `422`
/// for invalid input, `403` for a provider the environment does not configure), before
/// anything is sent. With `streaming`, the provider is asked for a stream. Its trace records,
/// when it makes them, continue `parent` (the request's span).
pub fn start_run(
    settings: &Settings,
    body: &[u8],
    streaming: bool,
    seed: u64,
    parent: &TraceParent,
) -> Result<StartedRun, Reply> {
    let fields = fields(settings, body, RunBody::read)?;
    let (trace, records) = (fields.trace, fields.records);
    for (asked, field, what) in [(trace, "trace", "events"), (records, "records", "records")] {
        if asked && streaming {
            return Err(refuse(
                settings,
                422,
                Error::InvalidRequest {
                    message: format!(
                        "the request is not valid: `{field}` returns the trace {what} with the \
                         run's result; ask for it without `accept: text/event-stream`"
                    ),
                },
            ));
        }
    }
    let input = match (fields.messages, fields.prompt) {
        (Some(messages), None) => RunInput::Messages(
            json::messages_from_value(messages).map_err(|e| refuse(settings, 422, e))?,
        ),
        (None, Some(prompt)) => RunInput::Text(prompt),
        _ => {
            return Err(refuse(
                settings,
                422,
                Error::InvalidRequest {
                    message: "the request is not valid: give exactly one of `messages` (an OMA \
                              message list) and `prompt` (a string)"
                        .into(),
                },
            ))
        }
    };
    let provider = settings.provider(&fields.provider);
    let configured = provider.configured();
    let egress = settings.egress_for(&provider);
    let name = fields.provider.clone();
    let agent = AgentSettings {
        name: AGENT_NAME.into(),
        model: fields.model,
        provider: fields.provider,
        endpoint: provider.endpoint,
        system_prompt: fields.system,
        sampling: Sampling {
            max_tokens: fields.max_tokens,
            temperature: fields.temperature,
            ..Sampling::default()
        },
        max_turns: fields.max_turns,
        token_budget: fields.max_token_budget,
        loop_detection: fields.loop_detection,
        context: fields.context,
        output_schema: fields.output_schema,
        deadline_ms: Some(settings.deadline_ms),
        call: CallOptions {
            retry: settings
                .max_retries
                .map(|n| RetryPolicy::from_oma(i64::from(n), None, None)),
            limits: Limits {
                deadline_ms: settings.deadline_ms,
                ..Limits::default()
            },
            egress,
        },
        ..AgentSettings::default()
    };
    // An unknown provider is the caller's mistake (422, from `into_spec`), found before the
    // configuration is.
    let (spec, history) = agent.into_spec().map_err(|e| refuse(settings, 422, e))?;
    if settings.egress.is_none() && !configured {
        return Err(refuse(
            settings,
            403,
            Error::EgressDenied {
                message: format!(
                    "egress denied: the provider {name:?} is not configured on this gateway (its \
                     key or base URL is not set)"
                ),
            },
        ));
    }
    let agent = entry::Agent::new(spec, history).map_err(|e| refuse(settings, 422, e))?;
    let machine = agent
        .start(input, streaming, seed)
        .map_err(|e| refuse(settings, 422, e))?;
    // A made-up run id and agent span per run (the gateway has no caller's ids).
    let machine = if trace {
        machine.with_trace(TraceOptions::default())
    } else {
        machine
    };
    let machine = if records || settings.traces.is_some() {
        machine
            .with_records(RecordOptions {
                parent: Some(parent.clone()),
                ..RecordOptions::default()
            })
            .map_err(|e| refuse(settings, 422, e))?
    } else {
        machine
    };
    Ok(StartedRun {
        machine,
        trace_reply: trace,
        records_reply: records,
    })
}

/// A `200` run reply with `name` added as `values`; any other reply as it is.
fn with_list(reply: Reply, name: &str, values: Vec<Value>) -> Reply {
    if reply.status != 200 || values.is_empty() {
        return reply;
    }
    let Ok(Value::Object(mut body)) = oma_core::json::parse_value(&reply.body) else {
        return reply;
    };
    body.insert(name.into(), Value::Array(values));
    Reply::json(200, &Value::Object(body))
}

/// A `200` run reply with the run's trace events as OMA has them (OMA's `TraceEvent` JSON, in
/// order) added as `trace`; any other reply as it is.
pub fn with_trace(reply: Reply, traces: &[TraceEvent]) -> Reply {
    with_list(
        reply,
        "trace",
        traces.iter().map(TraceEvent::to_json).collect(),
    )
}

/// A `200` run reply with the run's trace records (OMA's `TraceRecord` JSON, in the order they
/// were made: what a sink of OMA's would receive, and what the OTLP export is read from) added
/// as `records`; any other reply as it is.
pub fn with_records(reply: Reply, records: &[Value]) -> Reply {
    with_list(reply, "records", records.to_vec())
}

/// The response a run's outcome makes when nothing may be streamed yet: `422` when it failed
/// on content before `sent` anything, `403` when the egress policy refused it, `504` when the
/// gateway's deadline passed (`elapsed_ms` since the request began), else `200` with OMA's
/// `AgentRunResult`.
pub fn run_reply(outcome: &RunOutcome, sent: bool, elapsed_ms: u64, deadline_ms: u64) -> Reply {
    if let Some(reply) = refusal(outcome, sent) {
        return reply;
    }
    if let Some(failure) = outcome.failure() {
        if failure.status.code == StatusCode::Timeout && elapsed_ms >= deadline_ms {
            return Reply::deadline(deadline_ms);
        }
    }
    Reply::json(200, &outcome_json(outcome))
}

/// The response for a run that failed before it `sent` anything, because of its input
/// (`422`: an invalid message, content or a tool result the format cannot carry, or a request
/// the format refuses, such as a model that would change the provider's URL path) or the egress
/// policy (`403`); `None` for any other outcome.
pub fn refusal(outcome: &RunOutcome, sent: bool) -> Option<Reply> {
    let failure = outcome.failure()?;
    if sent || outcome.budget_exceeded() {
        return None;
    }
    let info = &failure.error_info;
    let status = match info.name.as_str() {
        "InvalidMessageError"
        | "UnsupportedContentBlockError"
        | "UnsupportedToolResultContentError" => 422,
        // OMA's plain `Error` that cannot be retried: a request the format refused (a host's
        // failure is retryable).
        "Error" if !info.retryable && info.code.is_none() => 422,
        "EgressPolicyError" => 403,
        _ => return None,
    };
    Some(info_reply(status, info))
}

fn info_reply(status: u16, info: &ErrorInfo) -> Reply {
    let mut inner = json!({ "name": info.name });
    if let Some(code) = &info.code {
        inner["code"] = json!(code);
    }
    inner["message"] = json!(info.message);
    inner["retryable"] = json!(info.retryable);
    Reply::json(status, &json!({ "error": inner }))
}

/// A run event as one server-sent event: `event: <type>` and `data: <JSON>` (`text_delta`,
/// `reasoning_delta`, `text`, `tool_use`, `tool_result`, `budget_exceeded`, `loop_detected`,
/// `done`).
pub fn sse_event(event: &AgentEvent) -> String {
    let (name, data) = match event {
        AgentEvent::TextDelta(text) => ("text_delta", json!(text)),
        AgentEvent::ReasoningDelta(text) => ("reasoning_delta", json!(text)),
        AgentEvent::Turn(Event::Text(text)) => ("text", json!(text)),
        AgentEvent::Turn(Event::ToolUse(call)) => ("tool_use", json!(call)),
        AgentEvent::Turn(Event::ToolResult(result)) => ("tool_result", json!(result)),
        AgentEvent::Turn(Event::BudgetExceeded(exceeded)) => {
            ("budget_exceeded", exceeded.to_json())
        }
        AgentEvent::Turn(Event::LoopDetected(info)) => ("loop_detected", info.to_json()),
        AgentEvent::Done(outcome) => ("done", outcome_json(outcome)),
    };
    // JSON text has no raw newline, so one `data:` line carries it.
    format!("event: {name}\ndata: {data}\n\n")
}

#[cfg(test)]
mod answer_tests;
#[cfg(test)]
mod fields_tests;
#[cfg(test)]
mod openai_tests;
#[cfg(test)]
mod request_tests;
#[cfg(test)]
mod tests;
