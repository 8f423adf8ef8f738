//! One request, from its head to its last byte: the machine every gateway host drives
//! (`docs/gateway.md#the-request-machine`). It holds the route's state, the chat or run machine
//! behind it, the request's counting against its key's limits and its traces, and decides
//! everything the gateway answers; the host only moves bytes and time in and out of it.
//!
//! The shape is the run and call machines' (after quinn-proto): [`RequestMachine::poll`] says
//! what is needed next at a given instant ([`Poll::Step`]: read the body, count on the shared
//! store, send this reply, open or write or close the event stream, send a provider request,
//! read more of its body, wait, write a log line; [`Poll::Waiting`] while an answer is due;
//! [`Poll::Finished`] with the status once nothing is left), [`RequestMachine::handle`] takes
//! what happened ([`Input`]), and [`RequestMachine::wake_at`] is the instant it next needs time
//! even if no answer comes. It reads no clock and no random source and performs no I/O: time
//! comes with each poll and randomness from the seed it is made with.
//!
//! A request goes, in order, through: the head (`500` for a configuration that cannot be used,
//! `404`, `401`, `405`, `413` for a declared length over the limit, `/healthz` and
//! `/v1/models` answered whole); the per-token limits of a listed key, counted in this
//! instance's memory or on the host's shared store ([`Step::Count`], then [`Step::Forget`] for
//! the first request of a minute), before the body is read; the body ([`Step::ReadBody`]); the
//! route's answer: a whole [`Step::Respond`], or a chat request's provider calls (with
//! fallbacks) or a `/v1/run`'s run, whose HTTP steps the host performs, answered whole or as an
//! event stream: a run's head ([`Step::Open`]) goes out just before its first request is sent,
//! a chat route's with its first event as soon as the provider's stream began;
//! the tokens used, counted before the answer's last bytes; then the request's log line and its
//! trace export. Steps that need an answer say so; the others are only delivered.
//!
//! Every answer the machine did not ask for is refused with a `SessionStateError` as the
//! reason, handed back unchanged, and nothing changes; no input makes it panic.

use std::collections::VecDeque;

use oma_core::agent::exchange::{AgentEvent, HookAnswer, ToolOutcome};
use oma_core::agent::machine::{Answer, Poll as RunPoll, RunMachine, Step as RunStep};
use oma_core::agent::trace::TraceEvent;
use oma_core::error::{Error, Refused};
use oma_core::http::call::{CallAnswer, Outgoing};
use oma_core::http::TransportFailureKind;
use oma_core::message::ToolResultContent;
use serde_json::Value;

use crate::chat::{ChatMachine, ChatStep};
use crate::env::BadVariable;
use crate::limits::{self, Admitted, Plan, Refusal, Shape};
use crate::openai::{Completion, Writer};
use crate::trace::{RequestSpan, RequestTrace};
use crate::{BodyVerdict, Head, HeadVerdict, Reply, Route, Settings, StartedRun};

/// A request's head as the host received it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestHead {
    /// The method, e.g. `POST`.
    pub method: String,
    /// The path, with its query if there is one.
    pub path: String,
    /// Header names (any case) and values, as received.
    pub headers: Vec<(String, String)>,
}

impl RequestHead {
    /// What the routes read of it.
    fn read(&self) -> Head<'_> {
        Head {
            method: &self.method,
            path: &self.path,
            authorization: self.header("authorization"),
            api_key: self.header("x-api-key"),
            content_length: self
                .header("content-length")
                .and_then(Head::parse_content_length),
            anthropic_version: self.header("anthropic-version"),
            anthropic_beta: self.header("anthropic-beta"),
            traceparent: self.header("traceparent"),
        }
    }

    /// The first value of the header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

/// How the host must read a request body ([`Step::ReadBody`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BodyLimits {
    /// The `content-length` the request declared, already checked against the limit (a host
    /// may allocate it at once).
    pub declared: Option<u64>,
    /// The most bytes the body may hold: stop reading past it ([`BodyFailure::TooLarge`]).
    pub max_bytes: u64,
    /// The instant (ms since the Unix epoch) by which the whole body must have arrived: stop
    /// waiting then ([`BodyFailure::TimedOut`]).
    pub deadline_at_ms: u64,
}

/// Why the host could not read a request body whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BodyFailure {
    /// It grew past [`BodyLimits::max_bytes`].
    TooLarge,
    /// It had not arrived by [`BodyLimits::deadline_at_ms`].
    TimedOut,
    /// The connection failed; the host's description (never a secret).
    Broken(String),
}

/// Additions to the shared store of the per-token limits, for the host to perform in order as
/// one batch that no other batch on the same `id` interleaves with; the answer is the new count
/// of each ([`Input::Counted`]). The store holds whole numbers under names; an absent name
/// counts 0, and adding 0 reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CountOps {
    /// The store: `OMA_GATEWAY_LIMITS_BUCKET`'s value.
    pub store: String,
    /// Whose counts these are: a digest of the client's token, never the token. Every name is
    /// this key's, so a store may keep one object per `id`.
    pub id: String,
    /// The name and the number to add, in order.
    pub add: Vec<(String, u64)>,
}

/// Names to delete from the shared store (the counts of the minute before, once a key's first
/// request of a minute is counted). No answer: a failure only keeps them longer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForgetOps {
    /// The store, as in [`CountOps::store`].
    pub store: String,
    /// Whose counts these are, as in [`CountOps::id`].
    pub id: String,
    /// The names to delete.
    pub names: Vec<String>,
}

/// What the request needs done, or has to deliver.
#[derive(Debug, PartialEq)]
pub enum Step {
    /// Read the whole request body within these limits; answer with [`Input::Body`] or
    /// [`Input::BodyFailed`].
    ReadBody(BodyLimits),
    /// Perform these additions on the shared store; answer with [`Input::Counted`].
    Count(CountOps),
    /// Delete these names from the shared store. No answer.
    Forget(ForgetOps),
    /// Send this as the whole response (the host adds `content-length`). No answer.
    Respond(Reply),
    /// Send the head of a `200` stream of server-sent events, with [`crate::STREAM_HEADERS`];
    /// answer with [`Input::Written`] (false: the platform refused it).
    Open,
    /// Write this text to the open stream; answer with [`Input::Written`] (false: the caller
    /// went away).
    Write(String),
    /// End the open stream. No answer.
    Close,
    /// Send this HTTP request; answer with [`Input::Http`]: a whole response, or a head (then
    /// chunks as asked), or a failure.
    Send(Outgoing),
    /// Read more of the body of the response in flight; answer with [`Input::Http`]: a chunk,
    /// the end, or a failure.
    Receive,
    /// Wait this many milliseconds (a retry's pause); answer with [`Input::Http`] `Waited`.
    Wait(u64),
    /// Write this line (with its newline) to the host's log. No answer.
    Log(String),
}

/// What [`RequestMachine::poll`] found.
#[derive(Debug, PartialEq)]
pub enum Poll {
    /// Perform (or deliver) this step.
    Step(Step),
    /// An answer is due: nothing to do until it arrives; the instant by which the machine
    /// would need it, when there is one ([`RequestMachine::wake_at`]).
    Waiting(Option<u64>),
    /// Nothing is left: the request was answered with this status. Every later poll says the
    /// same.
    Finished(u16),
}

/// What happened: the answer to the step handed out last.
#[derive(Debug, PartialEq)]
pub enum Input {
    /// The whole request body, to [`Step::ReadBody`].
    Body(Vec<u8>),
    /// Why it could not be read, to [`Step::ReadBody`].
    BodyFailed(BodyFailure),
    /// The store's new counts, one per addition in order, or why the store failed (the host's
    /// description, never shown to the client), to [`Step::Count`].
    Counted(Result<Vec<u64>, String>),
    /// An HTTP answer, to [`Step::Send`], [`Step::Receive`] or [`Step::Wait`].
    Http(CallAnswer),
    /// Whether the head or the text went out, to [`Step::Open`] or [`Step::Write`].
    Written(bool),
}

/// The answer a handed-out step waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Due {
    /// The body, or why it could not be read.
    Body,
    /// The store's counts that admit the request or refuse it.
    Admission,
    /// The store's counts after the tokens used were added (they change nothing).
    Usage,
    /// The answer to a provider call's step.
    Http,
    /// Whether the stream's head went out.
    Opened,
    /// Whether a piece of the stream went out.
    Written,
    /// The answer to the trace export's request.
    Export,
}

impl Due {
    fn what(self) -> &'static str {
        match self {
            Due::Body => "the request body",
            Due::Admission | Due::Usage => "the store's counts",
            Due::Http => "a provider call's HTTP answer",
            Due::Opened | Due::Written => "whether the stream's bytes went out",
            Due::Export => "the trace export's HTTP answer",
        }
    }
}

/// Where the request is.
enum Stage {
    /// Nothing decided yet.
    Head,
    /// The admission's counts were asked of the shared store.
    Counting {
        route: Route,
        plan: Box<Plan>,
        shape: Shape,
        store: String,
        counts: Option<Result<Vec<u64>, String>>,
    },
    /// The body was asked for.
    Reading {
        route: Route,
        body: Option<Result<Vec<u8>, BodyFailure>>,
    },
    /// A chat route's provider calls.
    Chat(Box<ChatStage>),
    /// A `/v1/run`.
    Run(Box<RunStage>),
    /// The answer is out: the log line, then the trace export.
    Finishing(Box<Finishing>),
    /// Nothing is left.
    Over(u16),
}

/// `/v1/chat/completions` or `/v1/messages` in flight.
struct ChatStage {
    route: Route,
    machine: ChatMachine,
    writer: Writer,
    /// How many of the machine's dropped-field notes are in the log.
    drops_logged: usize,
}

/// A `/v1/run` in flight.
struct RunStage {
    machine: RunMachine,
    streaming: bool,
    /// Whether the reply holds the run's trace events (`"trace": true`).
    trace_reply: bool,
    /// Whether the reply holds the run's trace records (`"records": true`).
    records_reply: bool,
    /// Whether a request was handed out to be sent.
    sent: bool,
    /// The run's trace events, for the reply.
    traces: Vec<TraceEvent>,
    /// The run's trace records (OMA's record JSON, in order), for the reply and the export.
    records: Vec<Value>,
    /// The request whose sending waits for the stream's head.
    held: Option<Outgoing>,
}

/// The event stream's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stream {
    /// No head went out.
    Unopened,
    /// Its head went out.
    Open,
}

/// After the answer: the log line, then the export.
struct Finishing {
    status: u16,
    logged: bool,
    export: Export,
}

/// The trace export of a request that reached a chat or a run.
enum Export {
    /// Nothing to export (no endpoint, or a request that started nothing), or it is over.
    None,
    /// To make and send: the route and the trace records of what the request did.
    Ready {
        route: &'static str,
        records: Vec<Value>,
    },
    /// Sent; its answer is due.
    Sent,
    /// Its head came with this status; its body is read (at most [`EXPORT_CHUNKS`] chunks of
    /// a reply nobody needs).
    Reading { status: u16, chunks: u32 },
    /// Its answer came: the status, or why it failed.
    Answered(Result<u16, &'static str>),
}

/// The most chunks of a collector's reply that are read.
const EXPORT_CHUNKS: u32 = 64;

/// A request admitted under its key's limits, and where its tokens are counted.
struct Counted {
    admitted: Admitted,
    /// The shared store; `None`: this instance's memory.
    store: Option<String>,
}

/// One request. See the module documentation.
pub struct RequestMachine {
    settings: Result<Settings, BadVariable>,
    head: RequestHead,
    started_ms: u64,
    seed: u64,
    stage: Stage,
    /// Steps decided and not yet handed out, each with the answer it waits for.
    queue: VecDeque<(Step, Option<Due>)>,
    /// The answer due for the step handed out last.
    due: Option<Due>,
    stream: Stream,
    counted: Option<Counted>,
}

impl std::fmt::Debug for RequestMachine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The settings hold keys: only where the request is.
        f.debug_struct("RequestMachine")
            .field("method", &self.head.method)
            .field("due", &self.due)
            .finish_non_exhaustive()
    }
}

impl RequestMachine {
    /// The machine of one request: the configuration as read (or the variable that cannot be
    /// used: then the answer is a `500` naming it), its head, the instant it began (ms since
    /// the Unix epoch) and a random seed (the ids and dates a format makes up, a run's random
    /// draws, the export's span ids). Nothing is decided until the first poll.
    pub fn new(
        settings: Result<Settings, BadVariable>,
        head: RequestHead,
        started_ms: u64,
        seed: u64,
    ) -> RequestMachine {
        RequestMachine {
            settings,
            head,
            started_ms,
            seed,
            stage: Stage::Head,
            queue: VecDeque::new(),
            due: None,
            stream: Stream::Unopened,
            counted: None,
        }
    }

    /// What the request needs at `now_ms` (ms since the Unix epoch): a step, the instant by
    /// which a due answer is needed, or its status once nothing is left.
    pub fn poll(&mut self, now_ms: u64) -> Poll {
        loop {
            if self.due.is_some() {
                return Poll::Waiting(self.wake_at());
            }
            if let Some((step, due)) = self.queue.pop_front() {
                self.due = due;
                return Poll::Step(step);
            }
            if let Some(status) = self.advance(now_ms) {
                return Poll::Finished(status);
            }
        }
    }

    /// The instant (ms since the Unix epoch) the machine next needs a poll even if no answer
    /// comes: the body's deadline while it is read, the provider call's or the run's while an
    /// HTTP answer is due; `None` otherwise.
    pub fn wake_at(&self) -> Option<u64> {
        match (self.due?, &self.stage) {
            (Due::Body, _) => Some(self.body_deadline()),
            (Due::Http, Stage::Chat(chat)) => chat.machine.wake_at(),
            (Due::Http, Stage::Run(run)) => run.machine.wake_at(),
            _ => None,
        }
    }

    /// Takes the answer to the step handed out last. An input the machine did not ask for is
    /// handed back with a `SessionStateError` as the reason, and nothing changes.
    pub fn handle(&mut self, input: Input) -> Result<(), Refused<Input>> {
        let Some(due) = self.due else {
            return Err(Refused::new(
                input,
                "unexpected input: the request waits for no answer".into(),
            ));
        };
        match (due, input) {
            // A store that fails after the answer changes nothing for it.
            (Due::Usage, Input::Counted(_)) => {}
            (Due::Opened, Input::Written(true)) => self.stream = Stream::Open,
            (Due::Opened | Due::Written, Input::Written(written)) => {
                if !written {
                    self.gone();
                }
            }
            (due, input) => self.hand_to_stage(due, input)?,
        }
        self.due = None;
        Ok(())
    }

    /// Hands `input`, due as `due`, to the stage that waits for it.
    fn hand_to_stage(&mut self, due: Due, input: Input) -> Result<(), Refused<Input>> {
        match (due, input, &mut self.stage) {
            (Due::Body, Input::Body(bytes), Stage::Reading { body, .. }) => *body = Some(Ok(bytes)),
            (Due::Body, Input::BodyFailed(failure), Stage::Reading { body, .. }) => {
                *body = Some(Err(failure))
            }
            (Due::Admission, Input::Counted(result), Stage::Counting { counts, .. }) => {
                *counts = Some(result)
            }
            (Due::Http, Input::Http(answer), Stage::Chat(chat)) => chat
                .machine
                .handle(answer)
                .map_err(|refused| refused.map(Input::Http))?,
            (Due::Http, Input::Http(answer), Stage::Run(run)) => run
                .machine
                .handle(Answer::Http(answer))
                .map_err(|refused| refused.map(http_input))?,
            (Due::Export, Input::Http(answer), Stage::Finishing(finishing)) => finishing
                .export
                .take(answer)
                .map_err(|answer| Refused::new(Input::Http(answer), unexpected(due)))?,
            (due, input, _) => return Err(Refused::new(input, unexpected(due))),
        }
        Ok(())
    }

    fn settings(&self) -> Option<&Settings> {
        self.settings.as_ref().ok()
    }

    fn body_deadline(&self) -> u64 {
        let deadline = self.settings().map_or(0, |s| s.deadline_ms);
        self.started_ms.saturating_add(deadline)
    }

    fn push(&mut self, step: Step, due: Option<Due>) {
        self.queue.push_back((step, due));
    }

    /// Decides what comes next when nothing is queued or due; the status once nothing is left.
    fn advance(&mut self, now_ms: u64) -> Option<u16> {
        match std::mem::replace(&mut self.stage, Stage::Over(500)) {
            Stage::Head => self.on_head(now_ms),
            Stage::Counting {
                route,
                plan,
                shape,
                store,
                counts: Some(counts),
            } => self.on_counts(route, *plan, shape, store, counts),
            Stage::Reading {
                route,
                body: Some(body),
            } => self.on_body(route, body, now_ms),
            Stage::Chat(chat) => self.step_chat(chat, now_ms),
            Stage::Run(run) => self.step_run(run, now_ms),
            Stage::Finishing(finishing) => return self.finish(finishing, now_ms),
            Stage::Over(status) => {
                self.stage = Stage::Over(status);
                return Some(status);
            }
            // An answer is due whenever these are left without one; should one be polled
            // without it, the request cannot go on.
            Stage::Counting { .. } | Stage::Reading { .. } => {
                self.stage = Stage::Over(500);
                return Some(500);
            }
        }
        None
    }

    /// Answers with `reply`; then the request finishes.
    fn answer(&mut self, reply: Reply, export: Export) {
        let status = reply.status;
        self.push(Step::Respond(reply), None);
        self.finishing(status, export);
    }

    fn finishing(&mut self, status: u16, export: Export) {
        self.stage = Stage::Finishing(Box::new(Finishing {
            status,
            logged: false,
            export,
        }));
    }

    /// The head: answered at once, or counted against its key's limits, then its body read.
    fn on_head(&mut self, now_ms: u64) {
        let head = self.head.read();
        let route = match crate::on_head(self.settings.as_ref(), &head) {
            HeadVerdict::Reply(reply) => return self.answer(reply, Export::None),
            HeadVerdict::ReadBody(route) => route,
        };
        let Ok(settings) = &self.settings else {
            return;
        };
        let token = crate::env::client_key(head.authorization, head.api_key);
        let counted = limits::counted(&settings.keys, route, token);
        let plan = limits::plan(&settings.keys, token, now_ms);
        let (Some(shape), Some(plan)) = (counted, plan) else {
            return self.read_body(route);
        };
        let Some(store) = settings.limits_bucket.clone() else {
            // No shared store: this instance's memory.
            let counts = limits::with_instance_counts(|counts| limits::execute(&plan, counts));
            let verdict = counts
                .map_err(Refusal::Store)
                .and_then(|counts| limits::decide(plan, &counts));
            return match verdict {
                Ok(admitted) => {
                    self.counted = Some(Counted {
                        admitted,
                        store: None,
                    });
                    self.read_body(route)
                }
                Err(refusal) => self.answer(limits::refusal_reply(&refusal, shape), Export::None),
            };
        };
        let ops = CountOps {
            store: store.clone(),
            id: plan.id().to_owned(),
            add: plan.adds.clone(),
        };
        self.push(Step::Count(ops), Some(Due::Admission));
        self.stage = Stage::Counting {
            route,
            plan: Box::new(plan),
            shape,
            store,
            counts: None,
        };
    }

    /// The shared store's counts: admitted (the minute before forgotten on its first request),
    /// or refused.
    fn on_counts(
        &mut self,
        route: Route,
        plan: Plan,
        shape: Shape,
        store: String,
        counts: Result<Vec<u64>, String>,
    ) {
        let forget = ForgetOps {
            store: store.clone(),
            id: plan.id().to_owned(),
            names: plan.forget.clone(),
        };
        let verdict = counts.map_err(Refusal::Store).and_then(|counts| {
            let forgets = plan.forgets(&counts);
            limits::decide(plan, &counts).map(|admitted| (admitted, forgets))
        });
        match verdict {
            Ok((admitted, forgets)) => {
                if forgets {
                    self.push(Step::Forget(forget), None);
                }
                self.counted = Some(Counted {
                    admitted,
                    store: Some(store),
                });
                self.read_body(route);
            }
            Err(refusal) => self.answer(limits::refusal_reply(&refusal, shape), Export::None),
        }
    }

    fn read_body(&mut self, route: Route) {
        let limits = BodyLimits {
            declared: self
                .head
                .header("content-length")
                .and_then(Head::parse_content_length),
            max_bytes: self.settings().map_or(0, |s| s.max_body_bytes),
            deadline_at_ms: self.body_deadline(),
        };
        self.push(Step::ReadBody(limits), Some(Due::Body));
        self.stage = Stage::Reading { route, body: None };
    }

    /// The whole body (or why it could not be read): the route's reply, or its chat or run.
    fn on_body(&mut self, route: Route, body: Result<Vec<u8>, BodyFailure>, now_ms: u64) {
        let Ok(settings) = &self.settings else {
            return;
        };
        // The limit holds whatever the host read.
        let body = body.and_then(|body| {
            if body.len() as u64 > settings.max_body_bytes {
                Err(BodyFailure::TooLarge)
            } else {
                Ok(body)
            }
        });
        let body = match body {
            Ok(body) => body,
            Err(failure) => {
                let reply = match failure {
                    BodyFailure::TooLarge => Reply::too_large(settings.max_body_bytes),
                    BodyFailure::TimedOut => Reply::body_timeout(),
                    BodyFailure::Broken(reason) => Reply::unreadable(&reason),
                };
                return self.answer(reply, Export::None);
            }
        };
        let streaming =
            route == Route::Run && crate::wants_stream(self.head.header("accept").unwrap_or(""));
        let head = self.head.read();
        match crate::on_body(settings, route, &head, &body, streaming, now_ms, self.seed) {
            BodyVerdict::Reply(reply) => self.answer(reply, Export::None),
            BodyVerdict::Chat(completion) => {
                let Completion { machine, writer } = *completion;
                self.stage = Stage::Chat(Box::new(ChatStage {
                    route,
                    machine,
                    writer,
                    drops_logged: 0,
                }));
            }
            BodyVerdict::Run(started) => {
                let StartedRun {
                    machine,
                    trace_reply,
                    records_reply,
                } = *started;
                self.stage = Stage::Run(Box::new(RunStage {
                    machine,
                    streaming,
                    trace_reply,
                    records_reply,
                    sent: false,
                    traces: Vec::new(),
                    records: Vec::new(),
                    held: None,
                }));
            }
        }
    }

    /// The export of a request that reached a chat or a run, when traces are exported, with
    /// the trace records of what it did.
    fn export(&self, route: Route, records: Vec<Value>) -> Export {
        match self.settings().and_then(|s| s.traces.as_ref()) {
            Some(_) => Export::Ready {
                route: route_path(route),
                records,
            },
            None => Export::None,
        }
    }

    /// The export of a chat request: the records of its provider calls, in the request's trace.
    fn chat_export(&self, chat: &ChatStage) -> Export {
        if self.settings().and_then(|s| s.traces.as_ref()).is_none() {
            return Export::None;
        }
        let records = chat.machine.records(&self.trace().parent());
        self.export(chat.route, records)
    }

    /// The request's trace: the client's (`traceparent`) or a new one, and the request's span.
    fn trace(&self) -> RequestTrace {
        RequestTrace::of(self.head.header("traceparent"), self.seed)
    }

    /// Counts the `tokens` an admitted request used, in this instance's memory or as an
    /// addition to the shared store, before the answer's last bytes go out (the client's next
    /// request sees it).
    fn count_usage(&mut self, tokens: u64, now_ms: u64) {
        let Some(counted) = self.counted.take() else {
            return;
        };
        match counted.store {
            None => limits::with_instance_counts(|counts| {
                limits::record(&counted.admitted, tokens, now_ms, counts)
            }),
            Some(store) => {
                let add = limits::usage(&counted.admitted, tokens, now_ms);
                if !add.is_empty() {
                    let id = counted.admitted.id().to_owned();
                    self.push(Step::Count(CountOps { store, id, add }), Some(Due::Usage));
                }
            }
        }
    }

    /// Sends `outgoing`, after the stream's head when the answer is a run's stream not yet
    /// opened.
    fn send(&mut self, outgoing: Outgoing, streaming: bool) -> Option<Outgoing> {
        if streaming && self.stream == Stream::Unopened {
            self.push(Step::Open, Some(Due::Opened));
            return Some(outgoing);
        }
        self.push(Step::Send(outgoing), Some(Due::Http));
        None
    }

    /// Writes `text` to the stream, opening it first if it is not.
    fn write(&mut self, text: String) {
        if self.stream == Stream::Unopened {
            self.push(Step::Open, Some(Due::Opened));
        }
        self.push(Step::Write(text), Some(Due::Written));
    }

    /// Writes the stream's last `text` and ends it: the answer is out, a `200`.
    fn end_stream(&mut self, text: String, export: Export) {
        self.write(text);
        self.push(Step::Close, None);
        self.finishing(200, export);
    }

    /// The caller went away, or the platform refused the head: nothing more is written or sent
    /// for this request; an open stream is ended, and the request finishes as a `200`.
    fn gone(&mut self) {
        self.queue.retain(|(step, _)| {
            !matches!(
                step,
                Step::Open | Step::Write(_) | Step::Close | Step::Send(_)
            )
        });
        if self.stream == Stream::Open {
            self.push(Step::Close, None);
        }
        let export = match std::mem::replace(&mut self.stage, Stage::Over(200)) {
            Stage::Chat(chat) => self.chat_export(&chat),
            Stage::Run(run) => self.export(Route::Run, run.records),
            Stage::Finishing(finishing) => finishing.export,
            _ => Export::None,
        };
        self.finishing(200, export);
    }

    /// The next step of a chat request's provider calls.
    ///
    /// A streamed answer's head and first event (Anthropic's `message_start`, OpenAI's chunk with
    /// the role) go out as soon as the provider's stream began ([`ChatMachine::began`]): never
    /// before, so that a failure before it (a refusal, a provider's error status after its
    /// retries and fallbacks, a time-out) is a whole reply with its own status; each piece then
    /// goes out as it is decoded.
    fn step_chat(&mut self, mut chat: Box<ChatStage>, now_ms: u64) {
        let streaming = chat.writer.stream();
        let step = chat.machine.poll(now_ms);
        // A target tried with fields dropped is named in the log before its request goes out.
        for (target, fields) in &chat.machine.dropped()[chat.drops_logged..] {
            self.push(
                Step::Log(crate::dropped_line(&target.label(), fields)),
                None,
            );
        }
        chat.drops_logged = chat.machine.dropped().len();
        let result = match step {
            ChatStep::Send(outgoing) => {
                self.push(Step::Send(outgoing), Some(Due::Http));
                self.stage = Stage::Chat(chat);
                return;
            }
            ChatStep::Receive => {
                if streaming && !chat.writer.started() && chat.machine.began() {
                    // The pieces of the bytes read so far are out: the stream begins before
                    // the next bytes are asked for (the call asks again at the next poll).
                    let text = chat.writer.begin();
                    self.write(text);
                    self.stage = Stage::Chat(chat);
                    return;
                }
                self.push(Step::Receive, Some(Due::Http));
                self.stage = Stage::Chat(chat);
                return;
            }
            ChatStep::Wait(ms) => {
                self.push(Step::Wait(ms), Some(Due::Http));
                self.stage = Stage::Chat(chat);
                return;
            }
            ChatStep::Event(event) => {
                let text = chat.writer.event(&event);
                if streaming && !text.is_empty() {
                    self.write(text);
                }
                self.stage = Stage::Chat(chat);
                return;
            }
            ChatStep::Done(result) => result,
        };
        self.count_usage(chat.machine.tokens_used(), now_ms);
        let export = self.chat_export(&chat);
        let Ok(settings) = &self.settings else {
            return;
        };
        match result {
            Ok((response, target)) if !streaming => {
                let mut reply = chat.writer.whole(&response, &target);
                let dropped = chat.machine.dropped().iter().find(|(t, _)| *t == target);
                if let Some((_, fields)) = dropped {
                    reply
                        .headers
                        .push((crate::DROPPED_HEADER, fields.join(", ")));
                }
                self.answer(reply, export);
            }
            Ok((response, target)) => {
                let text = chat.writer.end(&response, &target);
                self.end_stream(text, export);
            }
            Err(error) => {
                let reply = chat.writer.error(settings, error);
                if self.stream == Stream::Open {
                    let text = chat.writer.failed(&reply);
                    self.end_stream(text, export);
                } else {
                    self.answer(reply, export);
                }
            }
        }
    }

    /// The next step of a `/v1/run`: its HTTP steps to the host, its events to the stream
    /// when it is one, and what a gateway run never hands out (tools, a hook, an external
    /// backend, a host's validator or function) answered here.
    fn step_run(&mut self, mut run: Box<RunStage>, now_ms: u64) {
        if let Some(outgoing) = run.held.take() {
            self.push(Step::Send(outgoing), Some(Due::Http));
            self.stage = Stage::Run(run);
            return;
        }
        let outcome = loop {
            let step = match run.machine.poll(now_ms) {
                RunPoll::Step(step) => step,
                RunPoll::Finished(outcome) => break *outcome,
                // Every answer is given before the next poll, so nothing can be due here;
                // should it be, the run cannot go on.
                RunPoll::Waiting(_) | RunPoll::Over => {
                    let export = self.export(Route::Run, std::mem::take(&mut run.records));
                    return self.answer(broken_run(), export);
                }
            };
            let answer = match step {
                RunStep::Send(outgoing) => {
                    run.sent = true;
                    run.held = self.send(outgoing, run.streaming);
                    self.stage = Stage::Run(run);
                    return;
                }
                RunStep::Receive => {
                    self.push(Step::Receive, Some(Due::Http));
                    self.stage = Stage::Run(run);
                    return;
                }
                RunStep::Wait(ms) => {
                    self.push(Step::Wait(ms), Some(Due::Http));
                    self.stage = Stage::Run(run);
                    return;
                }
                RunStep::Event(event) if run.streaming => {
                    self.write(crate::sse_event(&event));
                    self.stage = Stage::Run(run);
                    return;
                }
                RunStep::Trace(event) => {
                    run.traces.push(*event);
                    continue;
                }
                RunStep::Records(records) => {
                    run.records
                        .extend(records.into_iter().map(|observed| observed.record));
                    continue;
                }
                RunStep::Event(_) | RunStep::Progress(_) | RunStep::Evaluation(_) => continue,
                // What a gateway run never hands to its host is answered here: it has no hook,
                // no tools, no external backend, no validator of its own and no caller's
                // function.
                RunStep::BeforeRun { .. } => {
                    Answer::Hook(HookAnswer::Failed(crate::NO_HOOK.into()))
                }
                // A model that asks for a tool anyway is told so, as a failed tool.
                RunStep::CallTool(call) => Answer::Tool {
                    id: call.id,
                    outcome: ToolOutcome {
                        content: ToolResultContent::Text(crate::NO_TOOLS.into()),
                        is_error: Some(true),
                        gate: None,
                    },
                },
                RunStep::External { .. } => Answer::External(Err(crate::NO_EXTERNAL.into())),
                // The gateway's schemas are checked by the core's validator; none asks the
                // host.
                RunStep::Validate(_) => {
                    Answer::Validated(Err(oma_core::agent::structured::NO_HOST_VALIDATOR.into()))
                }
                // The `custom` strategy and `onLoopDetected` functions are refused before a
                // run starts; should one be asked for, the run fails rather than waits.
                RunStep::Compress { .. } => Answer::Compressed(Err(Error::InvalidRequest {
                    message: crate::NO_COMPRESS.into(),
                })),
                RunStep::DecideLoop(_) => Answer::LoopDecision(Err(crate::NO_LOOP_DECISION.into())),
                RunStep::CallModel(_) => Answer::Model(Err(Error::InvalidRequest {
                    message: crate::NO_ADAPTER.into(),
                })),
            };
            if run.machine.handle(answer).is_err() {
                let export = self.export(Route::Run, std::mem::take(&mut run.records));
                return self.answer(broken_run(), export);
            }
        };
        let Ok(settings) = &self.settings else {
            return;
        };
        let deadline_ms = settings.deadline_ms;
        self.count_usage(outcome.token_usage.all(), now_ms);
        let RunStage {
            streaming,
            trace_reply,
            records_reply,
            sent,
            traces,
            records,
            ..
        } = *run;
        if streaming {
            if self.stream == Stream::Unopened {
                if let Some(reply) = crate::refusal(&outcome, sent) {
                    let export = self.export(Route::Run, records);
                    return self.answer(reply, export);
                }
            }
            let export = self.export(Route::Run, records);
            return self.end_stream(crate::sse_event(&AgentEvent::Done(outcome)), export);
        }
        let elapsed = now_ms.saturating_sub(self.started_ms);
        let reply = crate::run_reply(&outcome, sent, elapsed, deadline_ms);
        let reply = if trace_reply {
            crate::with_trace(reply, &traces)
        } else {
            reply
        };
        let reply = if records_reply {
            crate::with_records(reply, &records)
        } else {
            reply
        };
        let export = self.export(Route::Run, records);
        self.answer(reply, export);
    }

    /// After the answer: the log line (its duration up to now), then the trace export and,
    /// when the collector did not take it, a line saying so.
    fn finish(&mut self, mut finishing: Box<Finishing>, now_ms: u64) -> Option<u16> {
        let status = finishing.status;
        if !finishing.logged {
            finishing.logged = true;
            let elapsed = now_ms.saturating_sub(self.started_ms);
            let line = crate::log_line(&self.head.method, &self.head.path, status, elapsed);
            self.push(Step::Log(line), None);
            self.stage = Stage::Finishing(finishing);
            return None;
        }
        match std::mem::replace(&mut finishing.export, Export::None) {
            Export::Ready { route, records } => {
                if let Some(url) = self.settings().and_then(|s| s.traces.clone()) {
                    let name = format!("POST {route}");
                    let request = RequestSpan {
                        name: &name,
                        route,
                        status,
                        started_ms: self.started_ms,
                        ended_ms: now_ms,
                    };
                    let outgoing =
                        crate::trace::request_export(&url, &self.trace(), &request, &records);
                    self.push(Step::Send(outgoing), Some(Due::Export));
                    finishing.export = Export::Sent;
                }
            }
            Export::Reading { status, chunks } => {
                self.push(Step::Receive, Some(Due::Export));
                finishing.export = Export::Reading { status, chunks };
            }
            Export::Answered(result) => {
                let reason = match result {
                    Ok(status) if (200..300).contains(&status) => None,
                    Ok(status) => Some(format!("the collector answered {status}")),
                    Err(reason) => Some(reason.to_owned()),
                };
                if let Some(reason) = reason {
                    self.push(Step::Log(crate::export_dropped_line(&reason)), None);
                }
            }
            Export::None | Export::Sent => {
                self.stage = Stage::Over(status);
                return Some(status);
            }
        }
        self.stage = Stage::Finishing(finishing);
        None
    }
}

impl Export {
    /// Takes the answer to the export's request or to a read of its body; the answer back when
    /// it is not one of those.
    fn take(&mut self, answer: CallAnswer) -> Result<(), CallAnswer> {
        let next = match (&*self, answer) {
            (Export::Sent, CallAnswer::Head { status, .. }) => {
                Export::Reading { status, chunks: 0 }
            }
            (Export::Sent, CallAnswer::Response(response)) => Export::Answered(Ok(response.status)),
            (Export::Sent, CallAnswer::Failure(failure)) => {
                Export::Answered(Err(failure_reason(failure.kind)))
            }
            (&Export::Reading { status, chunks }, CallAnswer::Chunk(_))
                if chunks + 1 < EXPORT_CHUNKS =>
            {
                Export::Reading {
                    status,
                    chunks: chunks + 1,
                }
            }
            // The end of the reply, a failure while reading it, or enough of it: its status is
            // what counts.
            (
                &Export::Reading { status, .. },
                CallAnswer::Chunk(_) | CallAnswer::End | CallAnswer::Failure(_),
            ) => Export::Answered(Ok(status)),
            (_, answer) => return Err(answer),
        };
        *self = next;
        Ok(())
    }
}

/// How an export that was not taken failed, for the log.
fn failure_reason(kind: TransportFailureKind) -> &'static str {
    match kind {
        TransportFailureKind::Refused => "the connection was refused",
        TransportFailureKind::Reset => "the connection broke",
        TransportFailureKind::TimedOut => "it timed out",
        TransportFailureKind::Denied => "the host refused to send it",
        TransportFailureKind::Other => "the request failed",
    }
}

/// The refusal's reason for an input that is not the `due` one.
fn unexpected(due: Due) -> String {
    format!("unexpected input: the request waits for {}", due.what())
}

/// The HTTP answer a refusal of the run machine hands back.
fn http_input(answer: Answer) -> Input {
    match answer {
        Answer::Http(answer) => Input::Http(answer),
        // The machine hands back what it was given, which was HTTP.
        _ => Input::Http(CallAnswer::End),
    }
}

/// The path of a route whose body starts a chat or a run.
fn route_path(route: Route) -> &'static str {
    match route {
        Route::ChatCompletions => "/v1/chat/completions",
        Route::Messages => "/v1/messages",
        Route::CountTokens => "/v1/messages/count_tokens",
        _ => "/v1/run",
    }
}

/// The reply when a run could not go on (a machine that refused what it asked for, or waits
/// for what it never handed out): a failure of the gateway itself.
fn broken_run() -> Reply {
    Reply::error(
        500,
        "Error",
        Some("INTERNAL"),
        "the run ended without a result",
    )
}
