//! How one request is served, whatever the platform: [`serve`] reads the configuration's
//! result, routes the request, reads its body within the limit and the deadline, answers
//! `/healthz`, `/v1/validate` and `/v1/format`, and drives a `/v1/run` on the one step loop
//! ([`WasiRun`]), writing its result whole or as server-sent events. A binding gives it the
//! request and the response through [`Exchange`] and the provider calls through a
//! [`Transport`]: `crates/gateway` binds it to `wasi:http/incoming-handler`, `crates/fastly` to
//! Fastly Compute's `http-incoming`. Neither decides anything the other does not.

use oma_core::agent::before_run::{BeforeRunContext, ExternalKind};
use oma_core::agent::exchange::{
    AgentEvent, EvaluationRecord, HookAnswer, ProgressEvent, ToolOutcome,
};
use oma_core::agent::machine::RunMachine;
use oma_core::agent::outcome::RunOutcome;
use oma_core::agent::trace::TraceEvent;
use oma_core::message::{ToolResultContent, ToolUseBlock};
use oma_step::{Next, StepHost, Transport, WasiRun};

use crate::chat::{ChatMachine, ChatStep};
use crate::env::BadVariable;
use crate::limits::{self, Admitted, Counter, Refusal, Scope};
use crate::openai::{Completion, Writer};
use crate::trace::{self, RequestSpan};
use crate::{BodyVerdict, Head, HeadVerdict, Reply, Route, Settings, StartedRun};

/// One request and its response, as a platform offers them.
pub trait Exchange {
    /// What performs the run's provider calls.
    type Transport: Transport;

    /// The first value of the request header `name` (lowercase), if any.
    fn header(&self, name: &str) -> Option<String>;
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
    /// A random 64-bit number (for the ids and dates a format makes up, and a run's seed).
    fn random_u64(&self) -> u64;
    /// The whole request body: at most `limit` bytes ([`Reply::too_large`] past it), read
    /// before `deadline_at` (wall clock, ms; a `408` after it); `declared` is its
    /// `content-length`, already checked against the limit.
    fn read_body(
        &mut self,
        declared: Option<u64>,
        limit: u64,
        deadline_at: u64,
    ) -> Result<Vec<u8>, Reply>;
    /// Sends `reply` as the whole response (`content-type: application/json`, its length, its
    /// headers). Called at most once, and never after [`Exchange::open_events`].
    fn respond(&mut self, reply: &Reply);
    /// Sends the head of a `200` server-sent event stream (`content-type: text/event-stream`,
    /// `cache-control: no-cache`); false when the platform refused it.
    fn open_events(&mut self) -> bool;
    /// Writes `bytes` to the open stream; false when the caller went away.
    fn write_events(&mut self, bytes: &[u8]) -> bool;
    /// Ends the open stream.
    fn close_events(&mut self);
    /// The transport a run's provider calls go out on.
    fn transport(&mut self) -> Self::Transport;
    /// The host's store named `bucket` (`OMA_GATEWAY_LIMITS_BUCKET`), where every replica
    /// counts the per-token limits ([`crate::limits`]); an error when the platform links no
    /// such store or cannot open it (then a limited request is a `503`). None by default.
    fn limits_store(&mut self, bucket: &str) -> Result<Box<dyn Counter>, String> {
        Err(format!("this host has no store named {bucket:?}"))
    }
    /// Writes `line` (with its newline) to the host's log, where the request's log line goes.
    fn log(&mut self, line: &str);
}

/// Where this request's limits are counted.
enum Counts {
    /// The host's shared store.
    Shared(Box<dyn Counter>),
    /// This instance's memory ([`limits::with_instance_counts`]).
    Instance,
}

impl Counts {
    fn with<R>(&mut self, f: impl FnOnce(&mut dyn Counter) -> R) -> R {
        match self {
            Counts::Shared(counter) => f(counter.as_mut()),
            Counts::Instance => limits::with_instance_counts(|counts| f(counts)),
        }
    }
}

/// The limits of a request to `route` that comes with `token`: `Ok(None)` when nothing is
/// limited (no keys configured, a route that calls no provider, a key without limits), the
/// request's admission and where it is counted, or the reply that refuses it.
fn limit<X: Exchange>(
    settings: &Settings,
    route: Route,
    token: Option<&str>,
    now_ms: u64,
    exchange: &mut X,
) -> Result<Option<(Admitted, Counts)>, Reply> {
    let Some(shape) = limits::counted(&settings.keys, route, token) else {
        return Ok(None);
    };
    let mut counts = match &settings.limits_bucket {
        None => Counts::Instance,
        Some(bucket) => match exchange.limits_store(bucket) {
            Ok(counter) => Counts::Shared(counter),
            Err(error) => {
                return Err(limits::refusal_reply(&Refusal::Store(error), shape));
            }
        },
    };
    match counts.with(|counter| limits::admit(&settings.keys, token, now_ms, counter)) {
        Ok(Some(admitted)) => Ok(Some((admitted, counts))),
        Ok(None) => Ok(None),
        Err(refusal) => Err(limits::refusal_reply(&refusal, shape)),
    }
}

/// Where `settings` count limits, as `/healthz` says ([`limits::scope`]).
pub fn limits_scope(settings: &Settings) -> Scope {
    limits::scope(settings)
}

/// Answers one request (`method`, `path` with its query) with `settings` (the configuration as
/// read, or the variable that cannot be used: then every request is a `500` naming it);
/// returns the status it answered with.
pub fn serve<X: Exchange>(
    settings: Result<Settings, BadVariable>,
    method: &str,
    path: &str,
    exchange: &mut X,
) -> u16 {
    let started_ms = exchange.now_ms();
    let settings = match settings {
        Ok(settings) => settings,
        Err(bad) => return respond(exchange, Reply::bad_configuration(&bad)),
    };
    let authorization = exchange.header("authorization");
    let api_key = exchange.header("x-api-key");
    let accept = exchange.header("accept").unwrap_or_default();
    let content_length = exchange
        .header("content-length")
        .and_then(|v| Head::parse_content_length(&v));
    let head = Head {
        method,
        path,
        authorization: authorization.as_deref(),
        api_key: api_key.as_deref(),
        content_length,
    };
    let route = match crate::on_head(Ok(&settings), &head) {
        HeadVerdict::Reply(reply) => {
            // `/healthz` says where limits are counted.
            let reply = match crate::route(&settings, &head) {
                Ok(Route::Health) => limits::health(limits_scope(&settings)),
                _ => reply,
            };
            return respond(exchange, reply);
        }
        HeadVerdict::ReadBody(route) => route,
    };
    let token = crate::env::client_key(authorization.as_deref(), api_key.as_deref());
    let mut limited = match limit(&settings, route, token, started_ms, exchange) {
        Ok(limited) => limited,
        Err(reply) => return respond(exchange, reply),
    };
    let deadline_at = started_ms.saturating_add(settings.deadline_ms);
    let body = match exchange.read_body(content_length, settings.max_body_bytes, deadline_at) {
        Ok(body) => body,
        Err(reply) => return respond(exchange, reply),
    };
    let streaming = crate::wants_stream(&accept);
    let (now_ms, seed) = (exchange.now_ms(), exchange.random_u64());
    match crate::on_body(&settings, route, &body, streaming, now_ms, seed) {
        BodyVerdict::Reply(reply) => respond(exchange, reply),
        BodyVerdict::Chat(completion) => {
            let Completion {
                mut machine,
                mut writer,
            } = *completion;
            let mut transport = exchange.transport();
            // The usage the providers reported, counted once the calls are over and before
            // the answer's last bytes go out (a client's next request sees it).
            let mut done = |machine: &ChatMachine, now_ms: u64| {
                if let Some((admitted, counts)) = &mut limited {
                    let used = machine.tokens_used();
                    counts.with(|counter| limits::record(admitted, used, now_ms, counter));
                }
            };
            let status = chat(
                &settings,
                &mut machine,
                &mut writer,
                exchange,
                &mut transport,
                &mut done,
            );
            if let Some(url) = &settings.traces {
                let route = match writer {
                    Writer::OpenAi(_) => "/v1/chat/completions",
                    Writer::Anthropic(_) => "/v1/messages",
                };
                let request = RequestSpan {
                    name: &format!("POST {route}"),
                    route,
                    status,
                    started_ms,
                    ended_ms: exchange.now_ms(),
                };
                export_traces(exchange, url, &request, machine.calls());
            }
            status
        }
        BodyVerdict::Run(started) => {
            let StartedRun {
                machine,
                trace_reply,
            } = *started;
            let mut run = Run::new(machine, exchange.transport());
            let status = if streaming {
                stream(&mut run, exchange)
            } else {
                let outcome = run.finish();
                if let Some((admitted, counts)) = &mut limited {
                    let used = outcome.token_usage.all();
                    let now_ms = exchange.now_ms();
                    counts.with(|counter| limits::record(admitted, used, now_ms, counter));
                }
                let elapsed = exchange.now_ms().saturating_sub(started_ms);
                let reply = crate::run_reply(&outcome, run.sent, elapsed, settings.deadline_ms);
                let reply = if trace_reply {
                    crate::with_trace(reply, &run.host.traces)
                } else {
                    reply
                };
                respond(exchange, reply)
            };
            if let Some(url) = &settings.traces {
                let request = RequestSpan {
                    name: "POST /v1/run",
                    route: "/v1/run",
                    status,
                    started_ms,
                    ended_ms: exchange.now_ms(),
                };
                export_traces(exchange, url, &request, &run.host.traces);
            }
            status
        }
    }
}

/// Sends this request's traces (its span and one per event) to `url`, once it is answered.
fn export_traces<X: Exchange>(
    exchange: &mut X,
    url: &str,
    request: &RequestSpan<'_>,
    events: &[TraceEvent],
) {
    let traceparent = exchange.header("traceparent");
    let seed = exchange.random_u64();
    let outgoing = trace::request_export(url, traceparent.as_deref(), request, events, seed);
    export(exchange, &outgoing);
}

fn respond<X: Exchange>(exchange: &mut X, reply: Reply) -> u16 {
    exchange.respond(&reply);
    reply.status
}

/// A streamed run: the head goes out just before the first request to the provider (so that
/// input refused while formatting is still a `422`), then each event as it happens, then `done`.
fn stream<X: Exchange>(run: &mut Run<X::Transport>, exchange: &mut X) -> u16 {
    // None: not opened yet; Some(false): the platform refused the head.
    let mut opened: Option<bool> = None;
    let open = |opened: &mut Option<bool>, exchange: &mut X| {
        *opened.get_or_insert_with(|| exchange.open_events())
    };
    loop {
        let event = match run.next() {
            Next::Sending => {
                if !open(&mut opened, exchange) {
                    return 200;
                }
                continue;
            }
            Next::Event(event) => event,
            Next::Done(outcome) => {
                if opened.is_none() {
                    if let Some(reply) = crate::refusal(&outcome, run.sent) {
                        return respond(exchange, reply);
                    }
                }
                AgentEvent::Done(outcome)
            }
        };
        if !open(&mut opened, exchange) {
            return 200;
        }
        let over = matches!(event, AgentEvent::Done(_));
        let written = exchange.write_events(crate::sse_event(&event).as_bytes());
        // A caller that went away ends the run: nothing more is sent for it.
        if over || !written {
            break;
        }
    }
    exchange.close_events();
    200
}

/// Sends a trace export and reads its answer (bounded: the request's own timeout, and at most
/// 64 chunks of a reply nobody needs); what the collector says changes nothing but the log: an
/// export that was not taken is noted there ([`crate::export_dropped_line`]).
fn export<X: Exchange>(exchange: &mut X, outgoing: &oma_core::http::call::Outgoing) {
    use oma_core::http::call::CallAnswer;
    use oma_core::http::TransportFailureKind;
    let mut transport = exchange.transport();
    let status = match transport.send(outgoing) {
        CallAnswer::Head { status, .. } => {
            for _ in 0..64 {
                if !matches!(transport.receive(), CallAnswer::Chunk(_)) {
                    break;
                }
            }
            Ok(status)
        }
        CallAnswer::Response(response) => Ok(response.status),
        CallAnswer::Failure(failure) => Err(match failure.kind {
            TransportFailureKind::Refused => "the connection was refused",
            TransportFailureKind::Reset => "the connection broke",
            TransportFailureKind::TimedOut => "it timed out",
            TransportFailureKind::Denied => "the host refused to send it",
            TransportFailureKind::Other => "the request failed",
        }
        .to_owned()),
        _ => Err("the host gave no answer".to_owned()),
    };
    let reason = match status {
        Ok(status) if (200..300).contains(&status) => return,
        Ok(status) => format!("the collector answered {status}"),
        Err(reason) => reason,
    };
    exchange.log(&crate::export_dropped_line(&reason));
}

/// A `/v1/chat/completions` or `/v1/messages` request: its provider calls driven on the
/// exchange's transport, answered whole, or as the route's event stream whose head goes out just
/// before the first request is sent (what is refused before that is a whole reply).
fn chat<X: Exchange>(
    settings: &Settings,
    machine: &mut ChatMachine,
    writer: &mut Writer,
    exchange: &mut X,
    transport: &mut X::Transport,
    done: &mut dyn FnMut(&ChatMachine, u64),
) -> u16 {
    // None: not opened yet; Some(false): the platform refused the head or the caller left.
    let mut opened: Option<bool> = None;
    loop {
        let step = machine.poll(transport.now_ms());
        if matches!(step, ChatStep::Done(_)) {
            done(machine, transport.now_ms());
        }
        let answer = match step {
            ChatStep::Send(outgoing) => {
                if writer.stream() && opened.is_none() {
                    opened = Some(exchange.open_events());
                }
                if opened == Some(false) {
                    return 200;
                }
                transport.send(&outgoing)
            }
            ChatStep::Receive => transport.receive(),
            ChatStep::Wait(ms) => transport.wait(ms),
            ChatStep::Event(event) => {
                let text = writer.event(&event);
                if opened == Some(true)
                    && !text.is_empty()
                    && !exchange.write_events(text.as_bytes())
                {
                    // The caller went away: nothing more is sent for it.
                    exchange.close_events();
                    return 200;
                }
                continue;
            }
            ChatStep::Done(Ok((response, target))) if !writer.stream() => {
                return respond(exchange, writer.whole(&response, &target));
            }
            ChatStep::Done(Ok((response, target))) => {
                if opened.is_none() {
                    opened = Some(exchange.open_events());
                }
                if opened == Some(true) {
                    exchange.write_events(writer.end(&response, &target).as_bytes());
                    exchange.close_events();
                }
                return 200;
            }
            ChatStep::Done(Err(error)) => {
                let reply = writer.error(settings, error);
                if opened != Some(true) {
                    return respond(exchange, reply);
                }
                exchange.write_events(writer.failed(&reply).as_bytes());
                exchange.close_events();
                return 200;
            }
        };
        if let Err(error) = machine.handle(answer) {
            done(machine, transport.now_ms());
            let reply = writer.error(settings, error);
            if opened == Some(true) {
                exchange.write_events(writer.failed(&reply).as_bytes());
                exchange.close_events();
                return 200;
            }
            return respond(exchange, reply);
        }
    }
}

/// The gateway's answers to the steps only a world can perform: its agents have no tools, no
/// hook, no external backend and no reporting; a traced run's events are kept for its reply.
#[derive(Default)]
struct NoHost {
    traces: Vec<TraceEvent>,
}

impl StepHost for NoHost {
    // Neither a hook nor an external backend is configured; should one be asked for, it fails
    // rather than hangs.
    fn before_run(&mut self, _: String, _: BeforeRunContext, _: String) -> HookAnswer {
        HookAnswer::Failed(crate::NO_HOOK.into())
    }

    // A model that asks for a tool anyway is told so, as a failed tool.
    fn call_tool(&mut self, _: &str, _: ToolUseBlock) -> ToolOutcome {
        ToolOutcome {
            content: ToolResultContent::Text(crate::NO_TOOLS.into()),
            is_error: Some(true),
            gate: None,
        }
    }

    fn external(&mut self, _: &str, _: ExternalKind, _: String) -> Result<String, String> {
        Err(crate::NO_EXTERNAL.into())
    }

    fn progress(&mut self, _: ProgressEvent) {}

    fn evaluation(&mut self, _: EvaluationRecord) {}

    fn trace(&mut self, event: TraceEvent) {
        self.traces.push(event);
    }
}

/// A run on the step loop, and whether it sent anything to the provider.
struct Run<T: Transport> {
    run: WasiRun<T>,
    /// Whether a request was sent to the provider.
    sent: bool,
    host: NoHost,
}

impl<T: Transport> Run<T> {
    fn new(machine: RunMachine, transport: T) -> Self {
        Run {
            run: WasiRun::with_transport(machine, transport),
            sent: false,
            host: NoHost::default(),
        }
    }

    /// Runs to the end, ignoring events; the outcome (whether anything was sent is in
    /// `sent`, a traced run's events in `host`).
    fn finish(&mut self) -> RunOutcome {
        loop {
            match self.run.next(&mut self.host) {
                Next::Done(outcome) => return outcome,
                Next::Sending => self.sent = true,
                Next::Event(_) => {}
            }
        }
    }

    /// Performs steps until there is something to tell; [`Next::Sending`] only before the
    /// first request.
    fn next(&mut self) -> Next {
        loop {
            match self.run.next(&mut self.host) {
                Next::Sending if self.sent => continue,
                Next::Sending => {
                    self.sent = true;
                    return Next::Sending;
                }
                other => return other,
            }
        }
    }
}
