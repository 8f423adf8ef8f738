//! The `component` world (`oma_component.wasm`): the codec, single provider calls over
//! wasi:http, and the agent runtime whose runs reach the host through the `host` imports.
//! wit-bindgen glue and the wasi:http driver of the run machine; nothing else.
//!
//! Built for `wasm32-unknown-unknown` and made a component by `oma-guest-build`, like the other
//! worlds: its WASI calls go through the `wasip2` crate (in `oma-wasi`), never through the
//! standard library, so the artifact imports exactly the world `component` of `wit/world.wit`
//! and no stdio, environment or exit.
//!
//! Built for wasm32 only: natively the crate is empty, so that the workspace builds and tests
//! everywhere. The glue it shares with the other worlds is included from `crates/glue/` by
//! `#[path]`: wit-bindgen generates each world its own Rust types for the same WIT interfaces
//! (the `component` world imports them, the `portable`
//! world exports them), so the conversions must be compiled once
//! against each set of bindings, and `with` remapping does not reach exported interfaces.

// Natively the crate is empty, so the crate docs' links to its wasm32 items cannot resolve
// there; `cargo doc --target wasm32-unknown-unknown` resolves them.
#![cfg_attr(not(target_arch = "wasm32"), allow(rustdoc::broken_intra_doc_links))]
#![cfg(target_arch = "wasm32")]

use std::cell::RefCell;

mod agent;
#[path = "../crates/glue/codec.rs"]
mod codec;
#[path = "../crates/glue/convert.rs"]
mod convert;
#[path = "../crates/glue/run.rs"]
mod run;

use oma_core::adapter as a;
use oma_core::http::call::Call;
use oma_wasi::{self as wasi, CallEvent, HttpIo};

use convert::*;

// The world's WASI imports are the `wasip2` crate's bindings (`oma-wasi` calls them), so they
// are not generated again here: one set of Rust types for wasi:http whichever crate uses it.
wit_bindgen::generate!({
    world: "component",
    path: "wit",
    with: {
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

/// The data interfaces as this world sees them (imports), for the shared glue.
mod wit {
    pub use super::oma::agent::{exchange, outcome, types, wire};
}

use exports::oma::agent::provider as p;
use oma::agent::types as wit_types;
use oma::agent::wire;

struct Component;

export!(Component);

/// Milliseconds since the Unix epoch, from the host's wall clock.
fn now_ms() -> u64 {
    wasi::now_ms()
}

/// A random seed from the host (the time is not needed where the host has randomness).
fn random_seed(_now_ms: u64) -> u64 {
    wasi::random_u64()
}

/// A call of `request` to `endpoint`, formatted now (a format or egress failure is its
/// result). The call keeps the adapter it reads the answer with.
fn new_call(
    request: &a::ChatRequest,
    endpoint: wire::Endpoint,
    options: wire::CallOptions,
) -> Result<Call, wit_types::Error> {
    let now = endpoint.now_ms.unwrap_or_else(now_ms);
    let ids = a::IdSource {
        epoch_ms: now,
        seed: wasi::random_u64(),
    };
    let adapter = adapter_for(&endpoint, ids)?;
    let endpoint = from_wit_endpoint(endpoint, now);
    Ok(Call::new(
        adapter,
        request,
        &endpoint,
        from_wit_options(options),
        wasi::random_u64(),
    ))
}

impl p::Guest for Component {
    type ChatStream = Stream;

    fn chat(
        request: wire::ChatRequest,
        endpoint: wire::Endpoint,
        options: wire::CallOptions,
    ) -> Result<wire::LlmResponse, wit_types::Error> {
        let mut request = from_wit_request(request)?;
        request.stream = false;
        let mut call = new_call(&request, endpoint, options)?;
        let mut io = HttpIo::default();
        loop {
            match io.step(&mut call) {
                Some(CallEvent::Done(result)) => return Ok(to_wit_response(result?)),
                // A whole answer has no pieces; should one come, it is part of the result.
                Some(CallEvent::Event(_)) | None => {}
            }
        }
    }

    fn stream_chat(
        request: wire::ChatRequest,
        endpoint: wire::Endpoint,
        options: wire::CallOptions,
    ) -> Result<p::ChatStream, wit_types::Error> {
        let mut request = from_wit_request(request)?;
        request.stream = true;
        let mut call = new_call(&request, endpoint, options)?;
        let mut io = HttpIo::default();
        // Everything up to the response head (format, egress, retries) fails this call; the
        // body's failures come from `next`.
        let mut first = Vec::new();
        loop {
            if call.accepted() {
                break;
            }
            match io.step(&mut call) {
                Some(CallEvent::Done(Err(error))) => return Err(error.into()),
                Some(event) => {
                    first.push(event);
                    if matches!(first.last(), Some(CallEvent::Done(_))) {
                        break;
                    }
                }
                None => {}
            }
        }
        Ok(p::ChatStream::new(Stream(RefCell::new(StreamState {
            call,
            io,
            pending: first.into(),
            over: false,
        }))))
    }
}

struct StreamState {
    /// The call, with the adapter it reads the stream with.
    call: Call,
    io: HttpIo,
    pending: std::collections::VecDeque<CallEvent>,
    over: bool,
}

/// A streamed turn, held by the host as a `chat-stream` resource.
struct Stream(RefCell<StreamState>);

impl p::GuestChatStream for Stream {
    fn next(&self) -> Result<Option<p::StreamEvent>, wit_types::Error> {
        let mut state = self.0.borrow_mut();
        let state = &mut *state;
        loop {
            if state.over {
                return Ok(None);
            }
            let event = match state.pending.pop_front() {
                Some(event) => Some(event),
                None => state.io.step(&mut state.call),
            };
            let event = match event {
                Some(CallEvent::Event(event)) => event,
                Some(CallEvent::Done(Ok(response))) => {
                    state.over = true;
                    a::StreamEvent::Done(response)
                }
                Some(CallEvent::Done(Err(error))) => {
                    state.over = true;
                    return Err(error.into());
                }
                None => continue,
            };
            return Ok(Some(match event {
                a::StreamEvent::Text(text) => p::StreamEvent::Text(text),
                a::StreamEvent::Reasoning(text) => p::StreamEvent::Reasoning(text),
                a::StreamEvent::ToolUse(call) => p::StreamEvent::ToolUse(to_wit_tool_use(call)),
                a::StreamEvent::Done(response) => p::StreamEvent::Done(to_wit_response(response)),
                // The WIT stream has no place for these: `done`'s response carries the
                // signatures, the redacted blocks and the usage.
                a::StreamEvent::ReasoningSignature(_)
                | a::StreamEvent::RedactedReasoning(_)
                | a::StreamEvent::Usage(_) => continue,
            }));
        }
    }
}
