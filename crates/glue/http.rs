//! The HTTP a host performs for a world that does no I/O, between the `wire` interface's types
//! and the core's: the request to send (`outgoing-request`), and the response, its head or the
//! failure that came back. Shared by a `driver` session's steps (`crates/glue/driver.rs`) and a
//! gateway request's (`crates/routes`).

use std::sync::Arc;

use oma_core::http::call::{CallAnswer, Outgoing};
use oma_core::http::{HttpResponse, TransportFailure, TransportFailureKind};

use super::wit::wire;

/// The request to send, as the host gets it.
pub(crate) fn to_wit_outgoing(outgoing: Outgoing) -> wire::OutgoingRequest {
    wire::OutgoingRequest {
        method: outgoing.method,
        url: outgoing.url,
        headers: outgoing.headers,
        // Moved when this is the call's last attempt (the usual case: no retries configured);
        // copied only while the call keeps the body for a retry.
        body: Arc::try_unwrap(outgoing.body).unwrap_or_else(|shared| (*shared).clone()),
        timeout_ms: outgoing.timeout_ms,
        stream: outgoing.stream,
        attempt: outgoing.attempt,
    }
}

/// A whole response, as the call takes it.
pub(crate) fn from_wit_response(response: wire::Response) -> CallAnswer {
    CallAnswer::Response(HttpResponse {
        status: response.status,
        headers: response.headers,
        body: response.body.into_bytes(),
    })
}

/// The head of a response whose body follows, as the call takes it.
pub(crate) fn from_wit_head(head: wire::ResponseHead) -> CallAnswer {
    CallAnswer::Head {
        status: head.status,
        headers: head.headers,
    }
}

/// A failed request, as the call takes it.
pub(crate) fn from_wit_failure(failure: wire::TransportFailure) -> CallAnswer {
    let kind = match failure.kind {
        wire::TransportFailureKind::Refused => TransportFailureKind::Refused,
        wire::TransportFailureKind::Reset => TransportFailureKind::Reset,
        wire::TransportFailureKind::TimedOut => TransportFailureKind::TimedOut,
        wire::TransportFailureKind::Denied => TransportFailureKind::Denied,
        wire::TransportFailureKind::Other => TransportFailureKind::Other,
    };
    CallAnswer::Failure(TransportFailure::new(kind, &failure.message))
}
