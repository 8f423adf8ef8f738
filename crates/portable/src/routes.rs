//! The `routes` export: the gateway's HTTP rules ([`super::rules`], the gateway crate's own
//! code) for hosts that serve HTTP themselves. A `request` holds the configuration and the head
//! and answers in two steps; a `run` is a [`RunMachine`] stepped like a driver session (the
//! same conversions), which answers inside what a gateway run never hands out (tools, the
//! hook, external backends, progress) as the gateway does, and remembers what the gateway
//! needs to answer: whether anything was sent, the last event's server-sent text, the outcome.

use std::cell::RefCell;

use oma_core::agent::exchange::{AgentEvent, HookAnswer, ToolOutcome};
use oma_core::agent::machine::{Answer, Poll, RunMachine, Step};
use oma_core::agent::outcome::{outcome_json, RunOutcome};
use oma_core::message::ToolResultContent;

use super::driver::{from_wit_answer, session_error, to_wit_step, to_wit_waiting};
use super::exports::oma::agent::driver as dr;
use super::exports::oma::agent::routes as rt;
use super::rules::{self, env::BadVariable, BodyVerdict, Head, HeadVerdict, Route, Settings};
use super::wit::types as wit;
use super::Component;

impl rt::Guest for Component {
    type Request = RequestResource;
    type Run = RunResource;

    fn log_line(method: String, path: String, status: u16, duration_ms: u64) -> String {
        rules::log_line(&method, &path, status, duration_ms)
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
}

impl rt::GuestRequest for RequestResource {
    fn new(environment: Vec<(String, String)>, head: rt::RequestHead, now_ms: u64) -> Self {
        RequestResource {
            settings: Settings::from_vars(environment),
            head,
            started_ms: now_ms,
            reading: RefCell::new(None),
        }
    }

    fn head(&self) -> rt::HeadVerdict {
        let head = Head {
            method: &self.head.method,
            path: &self.head.path,
            authorization: self.header("authorization"),
            content_length: self
                .header("content-length")
                .and_then(Head::parse_content_length),
        };
        match rules::on_head(self.settings.as_ref(), &head) {
            HeadVerdict::Reply(reply) => rt::HeadVerdict::Reply(to_wit_reply(reply)),
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

    fn body(&self, body: Vec<u8>, now_ms: u64, seed: u64) -> Result<rt::BodyVerdict, wit::Error> {
        let (Some(route), Ok(settings)) = (self.reading.borrow_mut().take(), &self.settings) else {
            return Err(session_error(
                "unexpected body: the head did not say to read one, or it was given already",
            ));
        };
        let streaming =
            route == Route::Run && rules::wants_stream(self.header("accept").unwrap_or(""));
        Ok(
            match rules::on_body(settings, route, &body, streaming, now_ms, seed) {
                BodyVerdict::Reply(reply) => rt::BodyVerdict::Reply(to_wit_reply(reply)),
                BodyVerdict::Run(machine) => rt::BodyVerdict::Run(rt::Run::new(RunResource {
                    state: RefCell::new(RunState {
                        machine: *machine,
                        streaming,
                        sent: false,
                        event_text: None,
                        outcome: None,
                        started_ms: self.started_ms,
                        deadline_ms: settings.deadline_ms,
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

struct RunState {
    machine: RunMachine,
    streaming: bool,
    /// Whether a request was handed out to be sent.
    sent: bool,
    /// The server-sent text of the event the last `next` handed out.
    event_text: Option<String>,
    /// The outcome, once `finished` was given.
    outcome: Option<RunOutcome>,
    started_ms: u64,
    deadline_ms: u64,
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
                is_error: true,
            },
        }),
        Step::External { .. } => Some(Answer::External(Err(rules::NO_EXTERNAL.into()))),
        Step::Progress(_) | Step::Evaluation(_) | Step::Trace(_) => None,
        Step::Send(_) | Step::Receive | Step::Wait(_) | Step::Event(_) => return None,
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
        let mut state = self.state.borrow_mut();
        state.event_text = None;
        if state.outcome.is_some() {
            return Err(session_error("the run is over: its result was given"));
        }
        loop {
            let step = match state.machine.poll(now_ms) {
                Poll::Step(step) => step,
                Poll::Waiting(due) => return Ok(to_wit_waiting(due, state.machine.wake_at())),
                Poll::Finished(outcome) => {
                    let report = dr::RunReport::Json(outcome_json(&outcome).to_string());
                    state.outcome = Some(*outcome);
                    return Ok(dr::Poll::Finished(report));
                }
                Poll::Over => return Err(session_error("the run is over: its result was given")),
            };
            match inside(&step) {
                Some(Some(answer)) => {
                    state
                        .machine
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
        state
            .machine
            .handle(answer)
            .map_err(|refused| refused.reason.into())
    }

    fn event_text(&self) -> Option<String> {
        self.state.borrow().event_text.clone()
    }

    fn end(&self, now_ms: u64) -> Result<rt::RunEnd, wit::Error> {
        let state = self.state.borrow();
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
        Ok(rt::RunEnd::Reply(to_wit_reply(rules::run_reply(
            outcome,
            state.sent,
            elapsed,
            state.deadline_ms,
        ))))
    }
}
