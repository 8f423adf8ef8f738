//! The wasi:http side of the gateway: `wasi:http/incoming-handler`. It reads the request (head,
//! then the body within the limit and the deadline), lets the pure half of the gateway decide,
//! drives a run's machine on the wasi step loop ([`WasiRun`], the one the `component` world
//! uses), and writes the response: whole, or as server-sent events while the run goes on.

use exports::wasi::http::incoming_handler::Guest;
use wasip2::http::types::{
    Fields, IncomingBody, IncomingRequest, Method, OutgoingBody, OutgoingResponse, ResponseOutparam,
};
use wasip2::io::streams::{OutputStream, StreamError};

use super::{BodyVerdict, Head, HeadVerdict, Reply, Settings};
use oma_core::agent::before_run::{BeforeRunContext, ExternalKind};
use oma_core::agent::exchange::{
    AgentEvent, EvaluationRecord, HookAnswer, ProgressEvent, ToolOutcome,
};
use oma_core::agent::machine::RunMachine;
use oma_core::agent::outcome::RunOutcome;
use oma_core::message::{ToolResultContent, ToolUseBlock};
use oma_wasi::{self as wasi, Next, StepHost, WasiRun};

// The world `gateway` of `wit/world.wit`, bound here so that the component's type is that
// world: its WASI imports are the `wasip2` crate's bindings (which `oma-wasi` and this file
// call), only the `incoming-handler` export is generated.
wit_bindgen::generate!({
    world: "gateway",
    path: "../../wit",
    with: {
        "wasi:cli/environment@0.2.12": wasip2::cli::environment,
        "wasi:cli/stderr@0.2.12": wasip2::cli::stderr,
        "wasi:http/outgoing-handler@0.2.12": wasip2::http::outgoing_handler,
        "wasi:http/types@0.2.12": wasip2::http::types,
        "wasi:io/error@0.2.12": wasip2::io::error,
        "wasi:io/poll@0.2.12": wasip2::io::poll,
        "wasi:io/streams@0.2.12": wasip2::io::streams,
        "wasi:clocks/monotonic-clock@0.2.12": wasip2::clocks::monotonic_clock,
        "wasi:clocks/wall-clock@0.2.12": wasip2::clocks::wall_clock,
        "wasi:random/random@0.2.12": wasip2::random::random,
    },
});

/// The gateway's export.
struct Gateway;

export!(Gateway);

/// How much of a request body is read at a time.
const READ_CHUNK: u64 = 64 * 1024;

impl Guest for Gateway {
    fn handle(request: IncomingRequest, out: ResponseOutparam) {
        let started = monotonic_ms();
        let method = method_name(&request.method());
        let path = request.path_with_query().unwrap_or_default();
        let status = serve(&request, &method, &path, out);
        drop(request);
        log(
            &method,
            &path,
            status,
            monotonic_ms().saturating_sub(started),
        );
    }
}

/// Answers one request; returns the status it answered with.
fn serve(request: &IncomingRequest, method: &str, path: &str, out: ResponseOutparam) -> u16 {
    let started_ms = wasi::now_ms();
    let settings = match Settings::from_vars(wasip2::cli::environment::get_environment()) {
        Ok(settings) => settings,
        Err(bad) => return respond(out, Reply::bad_configuration(&bad)),
    };
    let headers = request.headers();
    let header = |name: &str| {
        headers
            .get(name)
            .into_iter()
            .next()
            .map(|value| String::from_utf8_lossy(&value).into_owned())
    };
    let authorization = header("authorization");
    let accept = header("accept").unwrap_or_default();
    let content_length = header("content-length").and_then(|v| Head::parse_content_length(&v));
    drop(headers);
    let head = Head {
        method,
        path,
        authorization: authorization.as_deref(),
        content_length,
    };
    let route = match super::on_head(Ok(&settings), &head) {
        HeadVerdict::Reply(reply) => return respond(out, reply),
        HeadVerdict::ReadBody(route) => route,
    };
    let deadline_at = started_ms.saturating_add(settings.deadline_ms);
    let body = match read_body(
        request,
        content_length,
        settings.max_body_bytes,
        deadline_at,
    ) {
        Ok(body) => body,
        Err(reply) => return respond(out, reply),
    };
    let streaming = super::wants_stream(&accept);
    let seed = wasi::random_u64();
    match super::on_body(&settings, route, &body, streaming, wasi::now_ms(), seed) {
        BodyVerdict::Reply(reply) => respond(out, reply),
        BodyVerdict::Run(machine) => {
            let run = Run::new(*machine);
            if streaming {
                stream(run, out)
            } else {
                let (outcome, sent) = run.finish();
                let elapsed = wasi::now_ms().saturating_sub(started_ms);
                respond(
                    out,
                    super::run_reply(&outcome, sent, elapsed, settings.deadline_ms),
                )
            }
        }
    }
}

/// The whole body, at most `limit` bytes, read before `deadline_at` (wall clock, ms); the
/// declared length (already checked against the limit) is allocated at once.
fn read_body(
    request: &IncomingRequest,
    declared: Option<u64>,
    limit: u64,
    deadline_at: u64,
) -> Result<Vec<u8>, Reply> {
    let body = request
        .consume()
        .map_err(|()| Reply::unreadable("the body was already taken"))?;
    let stream = body
        .stream()
        .map_err(|()| Reply::unreadable("the body stream was already taken"))?;
    let expected = declared.unwrap_or(0).min(limit);
    let mut bytes = Vec::with_capacity(usize::try_from(expected).unwrap_or(0));
    loop {
        let left = deadline_at.saturating_sub(wasi::now_ms());
        let readable = stream.subscribe();
        let timer =
            wasip2::clocks::monotonic_clock::subscribe_duration(left.saturating_mul(1_000_000));
        if left == 0 || !wasip2::io::poll::poll(&[&readable, &timer]).contains(&0) {
            return Err(Reply::body_timeout());
        }
        match stream.read(READ_CHUNK) {
            Ok(chunk) => {
                if bytes.len() as u64 + chunk.len() as u64 > limit {
                    return Err(Reply::too_large(limit));
                }
                bytes.extend_from_slice(&chunk);
            }
            Err(StreamError::Closed) => break,
            Err(StreamError::LastOperationFailed(_)) => {
                return Err(Reply::unreadable("the connection failed"))
            }
        }
    }
    drop(stream);
    drop(IncomingBody::finish(body));
    Ok(bytes)
}

/// Writes `reply` as the whole response; returns its status.
fn respond(out: ResponseOutparam, reply: Reply) -> u16 {
    let mut headers: Vec<(String, Vec<u8>)> = vec![(
        "content-length".into(),
        reply.body.len().to_string().into_bytes(),
    )];
    headers.extend(
        reply
            .all_headers()
            .into_iter()
            .map(|(name, value)| (name, value.into_bytes())),
    );
    let Some((body, stream)) = start_response(out, reply.status, &headers) else {
        return reply.status;
    };
    let _ = wasi::write_all(&stream, reply.body.as_bytes());
    drop(stream);
    let _ = OutgoingBody::finish(body, None);
    reply.status
}

/// Sends the response head; returns the body to write, or `None` when the host refused the
/// head (then an empty 500 went out instead).
fn start_response(
    out: ResponseOutparam,
    status: u16,
    headers: &[(String, Vec<u8>)],
) -> Option<(OutgoingBody, OutputStream)> {
    let fields = Fields::from_list(headers).unwrap_or_else(|_| Fields::new());
    let response = OutgoingResponse::new(fields);
    let _ = response.set_status_code(status);
    let body = response.body().ok()?;
    ResponseOutparam::set(out, Ok(response));
    let stream = body.write().ok()?;
    Some((body, stream))
}

/// A streamed run: the head goes out just before the first request to the provider (so that
/// input refused while formatting is still a `422`), then each event as it happens, then `done`.
fn stream(mut run: Run, out: ResponseOutparam) -> u16 {
    let mut out = Some(out);
    let mut writer: Option<(OutgoingBody, OutputStream)> = None;
    // Sends the head once; false when the host refused it (then nobody can be told anything,
    // and the run stops).
    let open = |out: &mut Option<ResponseOutparam>,
                writer: &mut Option<(OutgoingBody, OutputStream)>| {
        if writer.is_none() {
            let headers = super::STREAM_HEADERS
                .map(|(name, value)| (name.to_owned(), value.as_bytes().to_vec()));
            *writer = out
                .take()
                .and_then(|out| start_response(out, 200, &headers));
        }
        writer.is_some()
    };
    loop {
        let event = match run.next() {
            Next::Sending => {
                if !open(&mut out, &mut writer) {
                    break;
                }
                continue;
            }
            Next::Event(event) => event,
            Next::Done(outcome) => {
                if writer.is_none() {
                    if let Some(reply) = super::refusal(&outcome, run.sent) {
                        return match out.take() {
                            Some(out) => respond(out, reply),
                            None => reply.status,
                        };
                    }
                }
                AgentEvent::Done(outcome)
            }
        };
        if !open(&mut out, &mut writer) {
            break;
        }
        let over = matches!(event, AgentEvent::Done(_));
        let written = writer.as_ref().map_or(Ok(()), |(_, stream)| {
            wasi::write_all(stream, super::sse_event(&event).as_bytes())
        });
        // A caller that went away ends the run: nothing more is sent for it.
        if over || written.is_err() {
            break;
        }
    }
    if let Some((body, stream)) = writer {
        drop(stream);
        let _ = OutgoingBody::finish(body, None);
    }
    200
}

/// The gateway's answers to the steps only a world can perform: its agents have no tools, no
/// hook, no external backend and no reporting.
struct NoHost;

impl StepHost for NoHost {
    // Neither a hook nor an external backend is configured; should one be asked for, it fails
    // rather than hangs.
    fn before_run(&mut self, _: String, _: BeforeRunContext, _: String) -> HookAnswer {
        HookAnswer::Failed(super::NO_HOOK.into())
    }

    // A model that asks for a tool anyway is told so, as a failed tool.
    fn call_tool(&mut self, _: &str, _: ToolUseBlock) -> ToolOutcome {
        ToolOutcome {
            content: ToolResultContent::Text(super::NO_TOOLS.into()),
            is_error: true,
        }
    }

    fn external(&mut self, _: &str, _: ExternalKind, _: String) -> Result<String, String> {
        Err(super::NO_EXTERNAL.into())
    }

    fn progress(&mut self, _: ProgressEvent) {}

    fn evaluation(&mut self, _: EvaluationRecord) {}
}

/// A run on the wasi step loop, and whether it sent anything to the provider.
struct Run {
    run: WasiRun,
    /// Whether a request was sent to the provider.
    sent: bool,
}

impl Run {
    fn new(machine: RunMachine) -> Self {
        Run {
            run: WasiRun::new(machine),
            sent: false,
        }
    }

    /// Runs to the end, ignoring events; the outcome and whether anything was sent.
    fn finish(mut self) -> (RunOutcome, bool) {
        loop {
            match self.run.next(&mut NoHost) {
                Next::Done(outcome) => return (outcome, self.sent),
                Next::Sending => self.sent = true,
                Next::Event(_) => {}
            }
        }
    }

    /// Performs steps until there is something to tell; [`Next::Sending`] only before the
    /// first request.
    fn next(&mut self) -> Next {
        loop {
            match self.run.next(&mut NoHost) {
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

fn method_name(method: &Method) -> String {
    match method {
        Method::Get => "GET".into(),
        Method::Head => "HEAD".into(),
        Method::Post => "POST".into(),
        Method::Put => "PUT".into(),
        Method::Delete => "DELETE".into(),
        Method::Connect => "CONNECT".into(),
        Method::Options => "OPTIONS".into(),
        Method::Trace => "TRACE".into(),
        Method::Patch => "PATCH".into(),
        Method::Other(other) => other.clone(),
    }
}

fn monotonic_ms() -> u64 {
    wasip2::clocks::monotonic_clock::now() / 1_000_000
}

/// One line per request on stderr ([`super::log_line`]).
fn log(method: &str, path: &str, status: u16, ms: u64) {
    let line = super::log_line(method, path, status, ms);
    let stderr = wasip2::cli::stderr::get_stderr();
    let _ = stderr.blocking_write_and_flush(line.as_bytes());
}
