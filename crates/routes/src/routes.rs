//! The `routes` export: each `request` resource is one [`RequestMachine`] of the gateway's rules
//! (`oma-gateway-rules`, the crate `oma_gateway.wasm` drives too), its steps and inputs
//! converted to and from the `gateway-types` interface. Nothing is decided here.

use std::cell::RefCell;

use oma_gateway_rules::request::{
    BodyFailure, BodyLimits, CountOps, ForgetOps, Input, Poll, RequestHead, RequestMachine, Step,
};
use oma_gateway_rules::{Reply, Settings, STREAM_HEADERS};

use super::exports::oma::agent::gateway_types as gt;
use super::exports::oma::agent::routes as rt;
use super::http::{from_wit_failure, from_wit_head, from_wit_response, to_wit_outgoing};
use super::wit::types as wit;
use super::Component;
use oma_core::http::call::CallAnswer;

impl rt::Guest for Component {
    type Request = RequestResource;

    fn log_line(method: String, path: String, status: u16, duration_ms: u64) -> String {
        oma_gateway_rules::log_line(&method, &path, status, duration_ms)
    }
}

/// A `request` resource.
pub struct RequestResource {
    machine: RefCell<RequestMachine>,
}

impl rt::GuestRequest for RequestResource {
    fn new(
        environment: Vec<(String, String)>,
        head: gt::RequestHead,
        now_ms: u64,
        seed: u64,
    ) -> Self {
        let head = RequestHead {
            method: head.method,
            path: head.path,
            headers: head.headers,
        };
        let settings = Settings::from_vars(environment);
        RequestResource {
            machine: RefCell::new(RequestMachine::new(settings, head, now_ms, seed)),
        }
    }

    fn next(&self, now_ms: u64) -> gt::Poll {
        match self.machine.borrow_mut().poll(now_ms) {
            Poll::Step(step) => gt::Poll::Step(to_wit_step(step)),
            Poll::Waiting(wake_at) => gt::Poll::Waiting(wake_at),
            Poll::Finished(status) => gt::Poll::Finished(status),
        }
    }

    fn answer(&self, input: gt::Input) -> Result<(), wit::Error> {
        self.machine
            .borrow_mut()
            .handle(from_wit_input(input))
            .map_err(|refused| refused.reason.into())
    }
}

fn to_wit_step(step: Step) -> gt::Step {
    match step {
        Step::ReadBody(BodyLimits {
            declared,
            max_bytes,
            deadline_at_ms,
        }) => gt::Step::ReadBody(gt::BodyLimits {
            declared,
            max_bytes,
            deadline_at_ms,
        }),
        Step::Count(CountOps { store, id, add }) => {
            gt::Step::Count(gt::CountOps { store, id, add })
        }
        Step::Forget(ForgetOps { store, id, names }) => {
            gt::Step::Forget(gt::ForgetOps { store, id, names })
        }
        Step::Respond(reply) => gt::Step::Respond(to_wit_reply(reply)),
        Step::Open => gt::Step::OpenStream(
            STREAM_HEADERS
                .iter()
                .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
                .collect(),
        ),
        Step::Write(text) => gt::Step::Write(text),
        Step::Close => gt::Step::CloseStream,
        Step::Send(outgoing) => gt::Step::Send(to_wit_outgoing(outgoing)),
        Step::Receive => gt::Step::Receive,
        Step::Wait(ms) => gt::Step::Wait(ms),
        Step::Log(line) => gt::Step::Log(line),
    }
}

fn to_wit_reply(reply: Reply) -> gt::Reply {
    gt::Reply {
        status: reply.status,
        headers: reply.all_headers(),
        body: reply.body,
    }
}

fn from_wit_input(input: gt::Input) -> Input {
    match input {
        gt::Input::Body(bytes) => Input::Body(bytes),
        gt::Input::BodyFailed(failure) => Input::BodyFailed(match failure {
            gt::BodyFailure::TooLarge => BodyFailure::TooLarge,
            gt::BodyFailure::TimedOut => BodyFailure::TimedOut,
            gt::BodyFailure::Broken(reason) => BodyFailure::Broken(reason),
        }),
        gt::Input::Counted(counts) => Input::Counted(counts),
        gt::Input::Response(response) => Input::Http(from_wit_response(response)),
        gt::Input::Head(head) => Input::Http(from_wit_head(head)),
        gt::Input::Chunk(bytes) => Input::Http(CallAnswer::Chunk(bytes)),
        gt::Input::End => Input::Http(CallAnswer::End),
        gt::Input::Failure(failure) => Input::Http(from_wit_failure(failure)),
        gt::Input::Waited => Input::Http(CallAnswer::Waited),
        gt::Input::Written(written) => Input::Written(written),
    }
}
