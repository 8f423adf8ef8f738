//! The `routes` export: the gateway's HTTP rules (`oma-gateway-rules`, the crate the gateway
//! builds on) for hosts that serve HTTP themselves. A `request` holds the configuration and the
//! head and answers in two steps; a `run` is a [`RunMachine`] stepped like a driver session (the
//! same conversions), which answers inside what a gateway run never hands out (tools, the
//! hook, external backends, progress) as the gateway does, and remembers what the gateway
//! needs to answer: whether anything was sent, the last event's server-sent text, the outcome.

use std::cell::RefCell;

use oma_core::agent::exchange::{AgentEvent, HookAnswer, ToolOutcome};
use oma_core::agent::machine::{Answer, Poll, RunMachine, Step};
use oma_core::agent::outcome::{outcome_json, RunOutcome};
use oma_core::agent::trace::TraceEvent;
use oma_core::message::ToolResultContent;

use super::driver::{from_wit_answer, session_error, to_wit_outgoing, to_wit_step, to_wit_waiting};
use super::exports::oma::agent::driver as dr;
use super::exports::oma::agent::routes as rt;
use super::wit::types as wit;
use super::Component;
use oma_core::adapter::StreamEvent;
use oma_core::error::Error;
use oma_core::message::LlmResponse;
use oma_gateway_rules::chat::{ChatStep, Target};
use oma_gateway_rules::limits::{self, Admitted, Plan, Refusal, Shape};
use oma_gateway_rules::openai::Completion;
use oma_gateway_rules::trace::{request_export, RequestSpan};
use oma_gateway_rules::{
    self as rules, env::BadVariable, BodyVerdict, Head, HeadVerdict, Route, Settings,
};

impl rt::Guest for Component {
    type Request = RequestResource;
    type Run = RunResource;

    fn log_line(method: String, path: String, status: u16, duration_ms: u64) -> String {
        rules::log_line(&method, &path, status, duration_ms)
    }

    fn export_dropped_line(reason: String) -> String {
        rules::export_dropped_line(&reason)
    }
}

fn to_wit_reply(reply: rules::Reply) -> rt::Reply {
    rt::Reply {
        status: reply.status,
        headers: reply.all_headers(),
        body: reply.body,
    }
}

/// A `request` resource.
pub struct RequestResource {
    settings: Result<Settings, BadVariable>,
    head: rt::RequestHead,
    started_ms: u64,
    /// The route whose body may be given, once `head` said to read it.
    reading: RefCell<Option<Route>>,
    /// Where the request is in its counting against its key's limits.
    limit: RefCell<Limit>,
}

/// A request's counting against its key's limits (`limits`, `counted`).
enum Limit {
    /// `limits` was not called.
    Unasked,
    /// `limits` handed out these operations; `counted` takes their counts.
    Counting(Box<Plan>, Shape, String),
    /// Admitted (or no limit applies): what to count after the answer, if anything.
    Settled(Option<Counted>),
    /// Refused: nothing more for this request.
    Refused,
}

/// An admitted request whose usage is counted after its answer.
#[derive(Clone)]
struct Counted {
    admitted: Admitted,
    /// The shared store it is counted in; `None`: the component's memory.
    store: Option<String>,
}

/// The operations of `adds` (and `forget`) on `store` for the key of `id`.
fn count_ops(store: &str, id: &str, add: Vec<(String, u64)>, forget: Vec<String>) -> rt::CountOps {
    rt::CountOps {
        store: store.to_owned(),
        id: id.to_owned(),
        add,
        forget,
    }
}

impl RequestResource {
    /// The first value of the header `name` (any case).
    fn header(&self, name: &str) -> Option<&str> {
        self.head
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    /// The client's key, as the gateway reads it.
    fn token(&self) -> Option<&str> {
        rules::env::client_key(self.header("authorization"), self.header("x-api-key"))
    }
}

impl rt::GuestRequest for RequestResource {
    fn new(environment: Vec<(String, String)>, head: rt::RequestHead, now_ms: u64) -> Self {
        RequestResource {
            settings: Settings::from_vars(environment),
            head,
            started_ms: now_ms,
            reading: RefCell::new(None),
            limit: RefCell::new(Limit::Unasked),
        }
    }

    fn head(&self) -> rt::HeadVerdict {
        let head = Head {
            method: &self.head.method,
            path: &self.head.path,
            authorization: self.header("authorization"),
            api_key: self.header("x-api-key"),
            content_length: self
                .header("content-length")
                .and_then(Head::parse_content_length),
        };
        match rules::on_head(self.settings.as_ref(), &head) {
            HeadVerdict::Reply(reply) => {
                // `/healthz` says where limits are counted, as the gateway's does.
                let reply = match &self.settings {
                    Ok(settings) if rules::route(settings, &head) == Ok(Route::Health) => {
                        limits::health(limits::scope(settings))
                    }
                    _ => reply,
                };
                rt::HeadVerdict::Reply(to_wit_reply(reply))
            }
            HeadVerdict::ReadBody(route) => {
                *self.reading.borrow_mut() = Some(route);
                let settings = self.settings.as_ref().ok();
                let (max_bytes, deadline_ms) =
                    settings.map_or((0, 0), |s| (s.max_body_bytes, s.deadline_ms));
                rt::HeadVerdict::ReadBody(rt::BodyLimits {
                    max_bytes,
                    deadline_at_ms: self.started_ms.saturating_add(deadline_ms),
                })
            }
        }
    }

    fn body_failed(&self, failure: rt::BodyFailure) -> rt::Reply {
        let limit = self.settings.as_ref().map_or(0, |s| s.max_body_bytes);
        to_wit_reply(match failure {
            rt::BodyFailure::TooLarge => rules::Reply::too_large(limit),
            rt::BodyFailure::TimedOut => rules::Reply::body_timeout(),
            rt::BodyFailure::Broken(reason) => rules::Reply::unreadable(&reason),
        })
    }

    fn limits(&self, now_ms: u64) -> Result<rt::LimitsVerdict, wit::Error> {
        let (Some(route), Ok(settings)) = (*self.reading.borrow(), &self.settings) else {
            return Err(session_error(
                "unexpected limits: the head did not say to read a body, or it was given already",
            ));
        };
        let mut limit = self.limit.borrow_mut();
        if !matches!(*limit, Limit::Unasked) {
            return Err(session_error(
                "unexpected limits: they were counted already",
            ));
        }
        let token = self.token();
        let counted = limits::counted(&settings.keys, route, token);
        let (Some(shape), Some(plan)) = (counted, limits::plan(&settings.keys, token, now_ms))
        else {
            *limit = Limit::Settled(None);
            return Ok(rt::LimitsVerdict::Pass);
        };
        let Some(store) = &settings.limits_bucket else {
            // No shared store: this instance's memory.
            let counts = limits::with_instance_counts(|counts| limits::execute(&plan, counts));
            let verdict = counts
                .map_err(Refusal::Store)
                .and_then(|counts| limits::decide(plan, &counts));
            return Ok(match verdict {
                Ok(admitted) => {
                    *limit = Limit::Settled(Some(Counted {
                        admitted,
                        store: None,
                    }));
                    rt::LimitsVerdict::Pass
                }
                Err(refusal) => {
                    *limit = Limit::Refused;
                    *self.reading.borrow_mut() = None;
                    rt::LimitsVerdict::Reply(to_wit_reply(limits::refusal_reply(&refusal, shape)))
                }
            });
        };
        let ops = count_ops(store, plan.id(), plan.adds.clone(), plan.forget.clone());
        *limit = Limit::Counting(Box::new(plan), shape, store.clone());
        Ok(rt::LimitsVerdict::Count(ops))
    }

    fn counted(&self, counts: Result<Vec<u64>, String>) -> Result<Option<rt::Reply>, wit::Error> {
        let mut limit = self.limit.borrow_mut();
        let (plan, shape, store) = match std::mem::replace(&mut *limit, Limit::Refused) {
            Limit::Counting(plan, shape, store) => (plan, shape, store),
            other => {
                *limit = other;
                return Err(session_error(
                    "unexpected counts: `limits` did not hand out operations, or their counts \
                     were given already",
                ));
            }
        };
        match counts
            .map_err(Refusal::Store)
            .and_then(|counts| limits::decide(*plan, &counts))
        {
            Ok(admitted) => {
                *limit = Limit::Settled(Some(Counted {
                    admitted,
                    store: Some(store),
                }));
                Ok(None)
            }
            Err(refusal) => {
                *self.reading.borrow_mut() = None;
                Ok(Some(to_wit_reply(limits::refusal_reply(&refusal, shape))))
            }
        }
    }

    fn body(&self, body: Vec<u8>, now_ms: u64, seed: u64) -> Result<rt::BodyVerdict, wit::Error> {
        let (Some(route), Ok(settings)) = (*self.reading.borrow(), &self.settings) else {
            return Err(session_error(
                "unexpected body: the head did not say to read one, or it was given already",
            ));
        };
        let counted = match &*self.limit.borrow() {
            Limit::Settled(counted) => counted.clone(),
            Limit::Unasked if limits::counted(&settings.keys, route, self.token()).is_none() => {
                None
            }
            _ => {
                return Err(session_error(
                    "unexpected body: a limit applies to this request and it was not admitted; \
                     call `limits` (and `counted` with the store's counts) first",
                ))
            }
        };
        *self.reading.borrow_mut() = None;
        let streaming =
            route == Route::Run && rules::wants_stream(self.header("accept").unwrap_or(""));
        let export = settings.traces.as_ref().map(|url| Export {
            url: url.clone(),
            traceparent: self.header("traceparent").map(str::to_owned),
            route: route_path(route),
            seed: oma_core::rng::Rng::new(seed ^ EXPORT_IDS).next_u64(),
        });
        Ok(
            match rules::on_body(settings, route, &body, streaming, now_ms, seed) {
                BodyVerdict::Reply(reply) => rt::BodyVerdict::Reply(to_wit_reply(reply)),
                BodyVerdict::Chat(completion) => rt::BodyVerdict::Run(rt::Run::new(RunResource {
                    state: RefCell::new(RunState {
                        streaming: completion.writer.stream(),
                        machine: Machine::Chat(Box::new(ChatRun {
                            completion: *completion,
                            settings: settings.clone(),
                            result: None,
                        })),
                        sent: false,
                        event_text: None,
                        outcome: None,
                        started_ms: self.started_ms,
                        deadline_ms: settings.deadline_ms,
                        traces: Vec::new(),
                        trace_reply: false,
                        export,
                        counted,
                    }),
                })),
                BodyVerdict::Run(started) => rt::BodyVerdict::Run(rt::Run::new(RunResource {
                    state: RefCell::new(RunState {
                        machine: Machine::Agent(Box::new(started.machine)),
                        streaming,
                        sent: false,
                        event_text: None,
                        outcome: None,
                        started_ms: self.started_ms,
                        deadline_ms: settings.deadline_ms,
                        traces: Vec::new(),
                        trace_reply: started.trace_reply,
                        export,
                        counted,
                    }),
                })),
            },
        )
    }
}

/// A `run` resource: one run of `/v1/run`.
pub struct RunResource {
    state: RefCell<RunState>,
}

/// What a `run` steps: an agent run (`/v1/run`) or a chat request's provider calls
/// (`/v1/chat/completions`).
enum Machine {
    Agent(Box<RunMachine>),
    Chat(Box<ChatRun>),
}

/// A chat request in a `run`: its machine, how it answers, and its result once over.
struct ChatRun {
    completion: Completion,
    settings: Settings,
    result: Option<Result<(LlmResponse, Target), Error>>,
}

struct RunState {
    machine: Machine,
    streaming: bool,
    /// Whether a request was handed out to be sent.
    sent: bool,
    /// The server-sent text of the event the last `next` handed out.
    event_text: Option<String>,
    /// The outcome, once `finished` was given.
    outcome: Option<RunOutcome>,
    started_ms: u64,
    deadline_ms: u64,
    /// The trace events of a traced run (`"trace": true`, or traces exported).
    traces: Vec<TraceEvent>,
    /// Whether the reply holds them.
    trace_reply: bool,
    /// Where the request's traces go, until they are handed out.
    export: Option<Export>,
    /// The admitted request whose usage is counted, until it is.
    counted: Option<Counted>,
}

/// What a request's trace export needs besides its events.
struct Export {
    /// The OTLP traces URL.
    url: String,
    /// The client's `traceparent`, if it sent one.
    traceparent: Option<String>,
    /// The request's route.
    route: &'static str,
    /// The span ids' seed.
    seed: u64,
}

/// Mixed into a request's seed for its export's ids.
const EXPORT_IDS: u64 = 0x6f74_6c70_6578_7074;

/// The path of a route whose body starts a run.
fn route_path(route: Route) -> &'static str {
    match route {
        Route::ChatCompletions => "/v1/chat/completions",
        Route::Messages => "/v1/messages",
        _ => "/v1/run",
    }
}

/// The gateway's own answer to a step it performs inside, as the gateway's handler does; `None`
/// for what the host performs or delivers.
fn inside(step: &Step) -> Option<Option<Answer>> {
    Some(match step {
        Step::BeforeRun { .. } => Some(Answer::Hook(HookAnswer::Failed(rules::NO_HOOK.into()))),
        Step::CallTool(call) => Some(Answer::Tool {
            id: call.id.clone(),
            outcome: ToolOutcome {
                content: ToolResultContent::Text(rules::NO_TOOLS.into()),
                is_error: Some(true),
                gate: None,
            },
        }),
        Step::External { .. } => Some(Answer::External(Err(rules::NO_EXTERNAL.into()))),
        // The gateway's schemas are checked by the core's validator; none asks the host.
        Step::Validate(_) => Some(Answer::Validated(Err(
            oma_core::agent::structured::NO_HOST_VALIDATOR.into(),
        ))),
        // The gateway refuses the `custom` strategy before a run starts; should one get here,
        // it fails rather than waits.
        Step::Compress { .. } => Some(Answer::Compressed(Err(
            oma_core::error::Error::InvalidRequest {
                message: "contextStrategy \"custom\" is not available in a gateway run".into(),
            },
        ))),
        Step::DecideLoop(_) => Some(Answer::LoopDecision(Err(
            "loopDetection.onLoopDetected as a function is not available in a gateway run".into(),
        ))),
        // A gateway request cannot name an adapter; should a run ask, it fails rather than
        // waits.
        Step::CallModel(_) => Some(Answer::Model(Err(oma_core::error::Error::InvalidRequest {
            message: "an LLM adapter of one's own is not available in a gateway run".into(),
        }))),
        Step::Progress(_) | Step::Evaluation(_) => None,
        // A trace event is kept by `next` for the reply and the export before this is asked.
        Step::Trace(_) | Step::Send(_) | Step::Receive | Step::Wait(_) | Step::Event(_) => {
            return None
        }
    })
}

impl rt::GuestRun for RunResource {
    fn streaming(&self) -> bool {
        self.state.borrow().streaming
    }

    fn stream_headers(&self) -> Vec<(String, String)> {
        rules::STREAM_HEADERS
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect()
    }

    fn next(&self, now_ms: u64) -> Result<dr::Poll, wit::Error> {
        let mut guard = self.state.borrow_mut();
        let state = &mut *guard;
        state.event_text = None;
        if state.outcome.is_some() {
            return Err(session_error("the run is over: its result was given"));
        }
        let machine = match &mut state.machine {
            Machine::Agent(machine) => machine,
            Machine::Chat(chat) => {
                return next_chat(chat, &mut state.sent, &mut state.event_text, now_ms)
            }
        };
        loop {
            let step = match machine.poll(now_ms) {
                Poll::Step(step) => step,
                Poll::Waiting(due) => return Ok(to_wit_waiting(due, machine.wake_at())),
                Poll::Finished(outcome) => {
                    let report = dr::RunReport::Json(outcome_json(&outcome).to_string());
                    state.outcome = Some(*outcome);
                    return Ok(dr::Poll::Finished(report));
                }
                Poll::Over => return Err(session_error("the run is over: its result was given")),
            };
            if let Step::Trace(event) = step {
                state.traces.push(*event);
                continue;
            }
            match inside(&step) {
                Some(Some(answer)) => {
                    machine
                        .handle(answer)
                        .map_err(|refused| wit::Error::from(refused.reason))?;
                    continue;
                }
                Some(None) => continue,
                None => {}
            }
            match &step {
                Step::Send(_) => state.sent = true,
                Step::Event(event) => state.event_text = Some(rules::sse_event(event)),
                _ => {}
            }
            return Ok(dr::Poll::Step(to_wit_step(step, true)));
        }
    }

    fn answer(&self, answer: dr::Answer) -> Result<(), wit::Error> {
        let mut state = self.state.borrow_mut();
        if state.outcome.is_some() {
            return Err(session_error(
                "unexpected answer: the run is over, nothing is waiting",
            ));
        }
        let answer = from_wit_answer(answer)?;
        match &mut state.machine {
            Machine::Agent(machine) => machine
                .handle(answer)
                .map_err(|refused| refused.reason.into()),
            Machine::Chat(chat) => match answer {
                Answer::Http(answer) if chat.result.is_none() => chat
                    .completion
                    .machine
                    .handle(answer)
                    .map_err(wit::Error::from),
                _ => Err(session_error(
                    "unexpected answer: a chat request takes HTTP answers only, while it runs",
                )),
            },
        }
    }

    fn event_text(&self) -> Option<String> {
        self.state.borrow().event_text.clone()
    }

    fn end(&self, now_ms: u64) -> Result<rt::RunEnd, wit::Error> {
        let mut guard = self.state.borrow_mut();
        let state = &mut *guard;
        if let Machine::Chat(chat) = &mut state.machine {
            return end_chat(chat, state.sent);
        }
        let Some(outcome) = &state.outcome else {
            return Err(session_error(
                "the run is not over: step it until `next` gives `finished`",
            ));
        };
        if state.streaming {
            if let Some(reply) = rules::refusal(outcome, state.sent) {
                return Ok(rt::RunEnd::Reply(to_wit_reply(reply)));
            }
            return Ok(rt::RunEnd::LastEvent(rules::sse_event(&AgentEvent::Done(
                outcome.clone(),
            ))));
        }
        let elapsed = now_ms.saturating_sub(state.started_ms);
        let reply = rules::run_reply(outcome, state.sent, elapsed, state.deadline_ms);
        let reply = if state.trace_reply {
            rules::with_trace(reply, &state.traces)
        } else {
            reply
        };
        Ok(rt::RunEnd::Reply(to_wit_reply(reply)))
    }

    fn count_usage(&self, now_ms: u64) -> Result<Option<rt::CountOps>, wit::Error> {
        let mut guard = self.state.borrow_mut();
        let state = &mut *guard;
        let used = match &state.machine {
            Machine::Chat(chat) if chat.result.is_some() => chat.completion.machine.tokens_used(),
            // A streamed run counts its request, not its tokens (as the gateway's).
            Machine::Agent(_) => match &state.outcome {
                Some(_) if state.streaming => 0,
                Some(outcome) => outcome.token_usage.all(),
                None => {
                    return Err(session_error(
                        "the run is not over: step it until `next` gives `finished`",
                    ))
                }
            },
            _ => {
                return Err(session_error(
                    "the run is not over: step it until `next` gives `finished`",
                ))
            }
        };
        let Some(counted) = state.counted.take() else {
            return Ok(None);
        };
        let adds = limits::usage(&counted.admitted, used, now_ms);
        match &counted.store {
            _ if adds.is_empty() => Ok(None),
            Some(store) => Ok(Some(count_ops(
                store,
                counted.admitted.id(),
                adds,
                Vec::new(),
            ))),
            None => {
                limits::with_instance_counts(|counts| {
                    limits::record(&counted.admitted, used, now_ms, counts)
                });
                Ok(None)
            }
        }
    }

    fn export_traces(&self, status: u16, now_ms: u64) -> Option<dr::OutgoingRequest> {
        let mut guard = self.state.borrow_mut();
        let state = &mut *guard;
        let export = state.export.take()?;
        let events = match &state.machine {
            Machine::Agent(_) => state.traces.as_slice(),
            Machine::Chat(chat) => chat.completion.machine.calls(),
        };
        let name = format!("POST {}", export.route);
        let request = RequestSpan {
            name: &name,
            route: export.route,
            status,
            started_ms: state.started_ms,
            ended_ms: now_ms,
        };
        let outgoing = request_export(
            &export.url,
            export.traceparent.as_deref(),
            &request,
            events,
            export.seed,
        );
        Some(to_wit_outgoing(outgoing))
    }
}

/// The next step of a chat request: its HTTP steps as a session's, each piece of a streamed
/// answer as an `event` step whose server-sent text is OpenAI's chunk, then `finished` with the
/// answer's JSON.
fn next_chat(
    chat: &mut ChatRun,
    sent: &mut bool,
    event_text: &mut Option<String>,
    now_ms: u64,
) -> Result<dr::Poll, wit::Error> {
    if chat.result.is_some() {
        return Err(session_error("the run is over: its result was given"));
    }
    loop {
        let step = match chat.completion.machine.poll(now_ms) {
            ChatStep::Send(outgoing) => {
                *sent = true;
                Step::Send(outgoing)
            }
            ChatStep::Receive => Step::Receive,
            ChatStep::Wait(ms) => Step::Wait(ms),
            ChatStep::Event(event) => {
                let text = chat.completion.writer.event(&event);
                if text.is_empty() {
                    continue;
                }
                let delta = match event {
                    StreamEvent::Text(text) => text,
                    _ => String::new(),
                };
                *event_text = Some(text);
                Step::Event(AgentEvent::TextDelta(delta))
            }
            ChatStep::Done(result) => {
                let report = match &result {
                    Ok((response, target)) => chat.completion.writer.whole(response, target),
                    Err(error) => chat.completion.writer.error(&chat.settings, error.clone()),
                };
                chat.result = Some(result);
                return Ok(dr::Poll::Finished(dr::RunReport::Json(report.body)));
            }
        };
        return Ok(dr::Poll::Step(to_wit_step(step, true)));
    }
}

/// How a chat request ends: the whole answer (`chat.completion` or Anthropic's `message`) or its
/// refusal, or for a stream the last events (or the error as an event once the stream began).
fn end_chat(chat: &mut ChatRun, sent: bool) -> Result<rt::RunEnd, wit::Error> {
    let Some(result) = &chat.result else {
        return Err(session_error(
            "the run is not over: step it until `next` gives `finished`",
        ));
    };
    let writer = &mut chat.completion.writer;
    Ok(match result {
        Ok((response, target)) if !writer.stream() => {
            rt::RunEnd::Reply(to_wit_reply(writer.whole(response, target)))
        }
        Ok((response, target)) => rt::RunEnd::LastEvent(writer.end(response, target)),
        Err(error) => {
            let reply = writer.error(&chat.settings, error.clone());
            if writer.stream() && sent {
                rt::RunEnd::LastEvent(writer.failed(&reply))
            } else {
                rt::RunEnd::Reply(to_wit_reply(reply))
            }
        }
    })
}
