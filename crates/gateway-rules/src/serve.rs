//! The blocking loop of one request on a platform whose calls wait for their result (wasi:http
//! in `crates/gateway`, Fastly Compute in `crates/fastly`): [`serve`] polls the request's
//! [`RequestMachine`] and performs each step with the platform's request, response and store
//! ([`Exchange`]) and its HTTP client ([`Transport`]), until the machine has nothing left. The
//! loop moves bytes and time only: every decision is the machine's.

use oma_step::Transport;

use crate::request::{
    BodyFailure, BodyLimits, CountOps, ForgetOps, Input, Poll, RequestMachine, Step,
};
use crate::Reply;

/// One request and its response, as a platform offers them.
pub trait Exchange {
    /// What performs the request's HTTP (provider calls, the trace export).
    type Transport: Transport;

    /// The whole request body, read within `limits`, or why it could not be.
    fn read_body(&mut self, limits: &BodyLimits) -> Result<Vec<u8>, BodyFailure>;
    /// Sends `reply` as the whole response (its headers, and its `content-length`). Called at
    /// most once, and never after [`Exchange::open_events`].
    fn respond(&mut self, reply: &Reply);
    /// Sends the head of a `200` server-sent event stream ([`crate::STREAM_HEADERS`]); false
    /// when the platform refused it.
    fn open_events(&mut self) -> bool;
    /// Writes `bytes` to the open stream; false when the caller went away.
    fn write_events(&mut self, bytes: &[u8]) -> bool;
    /// Ends the open stream.
    fn close_events(&mut self);
    /// The transport the request's HTTP goes out on.
    fn transport(&mut self) -> Self::Transport;
    /// Performs `ops` on the host's store they name (`OMA_GATEWAY_LIMITS_BUCKET`, where every
    /// replica counts the per-token limits): the new count of each addition, in order, or why
    /// the store failed. A platform without such a store keeps this default, which fails.
    fn count(&mut self, ops: &CountOps) -> Result<Vec<u64>, String> {
        Err(format!("this host has no store named {:?}", ops.store))
    }
    /// Deletes the names of `ops` from the host's store; a failure changes nothing.
    fn forget(&mut self, ops: &ForgetOps) {
        let _ = ops;
    }
    /// Writes `line` (with its newline) to the host's log.
    fn log(&mut self, line: &str);
}

/// Serves one request: steps `machine` to its end on `exchange`; the status it answered with.
pub fn serve<X: Exchange>(mut machine: RequestMachine, exchange: &mut X) -> u16 {
    let mut transport = exchange.transport();
    loop {
        let step = match machine.poll(transport.now_ms()) {
            Poll::Step(step) => step,
            Poll::Finished(status) => return status,
            // Every answer is given before the next poll, so nothing can be due here.
            Poll::Waiting(_) => return 500,
        };
        let input = match step {
            Step::ReadBody(limits) => match exchange.read_body(&limits) {
                Ok(body) => Input::Body(body),
                Err(failure) => Input::BodyFailed(failure),
            },
            Step::Count(ops) => Input::Counted(exchange.count(&ops)),
            Step::Forget(ops) => {
                exchange.forget(&ops);
                continue;
            }
            Step::Respond(reply) => {
                exchange.respond(&reply);
                continue;
            }
            Step::Open => Input::Written(exchange.open_events()),
            Step::Write(text) => Input::Written(exchange.write_events(text.as_bytes())),
            Step::Close => {
                exchange.close_events();
                continue;
            }
            Step::Send(outgoing) => Input::Http(transport.send(&outgoing)),
            Step::Receive => Input::Http(transport.receive()),
            Step::Wait(ms) => Input::Http(transport.wait(ms)),
            Step::Log(line) => {
                exchange.log(&line);
                continue;
            }
        };
        // The machine asked for exactly this answer; a refusal would be a bug of the
        // platform's binding, and ending beats looping.
        if machine.handle(input).is_err() {
            return 500;
        }
    }
}
