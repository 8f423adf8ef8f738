//! The HTTP side of a provider call: where a request may go, how an answer or a failure is
//! classified, when a failed call is tried again, and the one call as a state machine.
//!
//! Everything here but `wasi` is plain Rust with no I/O: [`check_egress`] decides before a
//! byte leaves; [`classify_status`] and [`TransportFailure::into_error`] decide after (OMA's
//! status, retryability and provider; see `docs/errors.md`); [`crate::retry`] holds OMA's
//! schedule, which the providers' adapters name their default policies in;
//! [`call::Call`] strings them together for one chat turn and says what it needs next (send,
//! read, wait), so any host can perform the I/O; [`display`] shows a request with its
//! credentials redacted. The `oma-wasi` crate (wasm32, the `component` and `gateway` worlds)
//! is the one place that touches the network, through wasi:http. Redirects are never followed: a 3xx is
//! an answer like any other.

pub mod call;
pub mod display;

use crate::adapter::ErrorDetail;
use crate::error::Error;
use crate::retry::{requested_wait, RequestedWait, RetryHints};

/// Where requests may go.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum EgressPolicy {
    /// Anywhere (the host may still refuse).
    #[default]
    Open,
    /// Loopback only: `localhost`, `127.0.0.0/8` and `[::1]`.
    Offline,
    /// Only these origins, e.g. `https://api.anthropic.com` (scheme, host and port).
    Allowlist(Vec<String>),
}

/// Bounds on one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The per-call timeout of one attempt, in milliseconds: connecting, the first byte,
    /// between bytes, and the whole response up to its last byte, streamed or not.
    pub timeout_ms: u64,
    /// The largest response body accepted, in bytes.
    pub max_response_bytes: usize,
    /// The most one call may take in all, first attempt to result, retries and waits included.
    pub deadline_ms: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout_ms: 120_000,
            max_response_bytes: 32 << 20,
            deadline_ms: 600_000,
        }
    }
}

/// A response as it came back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpResponse {
    /// The status code.
    pub status: u16,
    /// Header names (lowercase) and values.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl HttpResponse {
    /// The first value of a header, by lowercase name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A failed call: the error, and what the answer said about retrying it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The classified error.
    pub error: Error,
    /// The wait the provider asked for and its `x-should-retry` verdict.
    pub hints: RetryHints,
}

impl From<Error> for Failure {
    fn from(error: Error) -> Self {
        Failure {
            error,
            hints: RetryHints::default(),
        }
    }
}

/// Refuses a URL the policy does not allow, before anything is sent. The error names the
/// origin only.
pub fn check_egress(url: &str, policy: &EgressPolicy) -> Result<(), Error> {
    egress_url(url, policy).map(drop)
}

/// [`check_egress`], giving back the URL as parsed for the check: a transport that needs its
/// parts takes them from it instead of parsing the URL again ([`call::Outgoing::parsed`]).
pub fn egress_url(url: &str, policy: &EgressPolicy) -> Result<url::Url, Error> {
    let parsed = url::Url::parse(url).map_err(|_| Error::EgressDenied {
        message: "egress denied: the request URL does not parse".into(),
    })?;
    let origin = parsed.origin().ascii_serialization();
    let allowed = match policy {
        EgressPolicy::Open => true,
        EgressPolicy::Offline => match parsed.host() {
            Some(url::Host::Domain(domain)) => domain.eq_ignore_ascii_case("localhost"),
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            None => false,
        },
        EgressPolicy::Allowlist(origins) => origins
            .iter()
            .any(|allowed| allowed.trim_end_matches('/').eq_ignore_ascii_case(&origin)),
    };
    if allowed {
        Ok(parsed)
    } else {
        let rule = match policy {
            EgressPolicy::Offline => "the offline policy allows loopback only",
            _ => "the origin is not on the allowlist",
        };
        Err(Error::EgressDenied {
            message: format!("egress denied for {origin}: {rule}"),
        })
    }
}

/// Reads what a provider's error answer says from its headers and body
/// ([`crate::adapter::Adapter::error_detail`]).
pub type ErrorDetailFn<'a> = dyn Fn(&[(String, String)], &[u8]) -> ErrorDetail + 'a;

/// Classifies a response: `Ok` for 2xx, otherwise a provider error with the status and what
/// `error_detail` finds in the answer: the provider's message (else the start of the body), its
/// code and type. The message has `secrets` redacted before it is cut to 512 characters, so a
/// key across the cut leaves no prefix behind. The retry hints are the wait the provider asks
/// for (`retry-after-ms`, `retry-after`, else a wait in the body such as Gemini's
/// `RetryInfo`) and `x-should-retry`.
pub fn classify_status(
    provider: &str,
    response: &HttpResponse,
    error_detail: &ErrorDetailFn<'_>,
    secrets: &[&str],
) -> Result<(), Failure> {
    if (200..300).contains(&response.status) {
        return Ok(());
    }
    let mut detail = error_detail(&response.headers, &response.body);
    let message = detail
        .message
        .take()
        .unwrap_or_else(|| String::from_utf8_lossy(&response.body).into_owned());
    let wait = requested_wait(&response.headers)
        .or_else(|| detail.retry_delay_ms.map(RequestedWait::After));
    let should_retry = match response.header("x-should-retry").map(str::trim) {
        Some("true") => Some(true),
        Some("false") => Some(false),
        _ => None,
    };
    let bound = |text: &str| {
        crate::error::redact_and_bound(
            // A body can be megabytes; redaction only needs what could reach the cut.
            text.trim()
                .char_indices()
                .nth(512 + 4096)
                .map_or(text.trim(), |(end, _)| &text.trim()[..end]),
            secrets,
            512,
        )
    };
    let error = Error::Provider {
        provider: provider.to_string(),
        status: Some(response.status),
        message: bound(&message),
        code: detail.code.as_deref().map(&bound),
        error_type: detail.error_type.as_deref().map(&bound),
    };
    Err(Failure {
        error,
        hints: RetryHints { wait, should_retry },
    })
}

/// What a failure reported only as text says (wasmtime 48 reports a body that fails mid-read,
/// e.g. on a between-bytes timeout, as a host error without an HTTP error code): whether it is a
/// timeout, and its first line, shortened (the host's debug text may carry a backtrace).
pub fn describe_failure(detail: &str) -> (bool, String) {
    let first = detail.lines().next().unwrap_or_default().trim();
    let lower = first.to_ascii_lowercase();
    let timeout = lower.contains("timeout") || lower.contains("timed out");
    (timeout, shorten(first, 200))
}

/// At most `max` characters, with an ellipsis when cut.
fn shorten(text: &str, max: usize) -> String {
    let text = text.trim();
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// How a request failed before a whole answer arrived, as the host reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportFailureKind {
    /// The connection was refused.
    Refused,
    /// The connection broke (reset, closed early, a truncated body).
    Reset,
    /// A timeout passed: connecting, waiting for the head, or between bytes.
    TimedOut,
    /// The host refused to send the request (its own egress rules).
    Denied,
    /// Anything else the host could not do (DNS, TLS, an invalid request).
    Other,
}

/// A failure of the transport: its kind and the host's description of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransportFailure {
    /// What kind of failure it was.
    pub kind: TransportFailureKind,
    /// The host's description, shortened to its first line; may be empty.
    pub message: String,
}

impl TransportFailure {
    /// A failure of `kind` with the first line of `detail`.
    pub fn new(kind: TransportFailureKind, detail: &str) -> Self {
        let (_, line) = describe_failure(detail);
        TransportFailure {
            kind,
            message: line,
        }
    }

    /// A failure known only by its text: a timeout when the text says so, else `Reset`.
    pub fn from_text(detail: &str) -> Self {
        let (timeout, line) = describe_failure(detail);
        TransportFailure {
            kind: if timeout {
                TransportFailureKind::TimedOut
            } else {
                TransportFailureKind::Reset
            },
            message: line,
        }
    }

    /// The error OMA would see: a timeout is `LLMCallTimeoutError` (retryable), a host refusal
    /// an egress denial (terminal), everything else a provider error without status
    /// (retryable, as OMA treats a network error).
    pub fn into_error(self, provider: &str, timeout_ms: u64) -> Error {
        let provider_error = |message: String| Error::Provider {
            provider: provider.to_string(),
            status: None,
            message,
            code: None,
            error_type: None,
        };
        match self.kind {
            TransportFailureKind::TimedOut => Error::Timeout {
                provider: provider.to_string(),
                timeout_ms,
            },
            TransportFailureKind::Denied => Error::EgressDenied {
                message: "egress denied by the host".into(),
            },
            TransportFailureKind::Refused => provider_error("connection refused".into()),
            _ if self.message.is_empty() => provider_error("transport error".into()),
            _ => provider_error(format!("transport error: {}", self.message)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offline_allows_loopback_only() {
        for url in [
            "http://127.0.0.1:8080/v1/messages",
            "http://localhost/x",
            "http://[::1]:9/x",
            "http://127.9.9.9/",
        ] {
            assert_eq!(check_egress(url, &EgressPolicy::Offline), Ok(()), "{url}");
        }
        let err = check_egress(
            "https://api.anthropic.com/v1/messages",
            &EgressPolicy::Offline,
        )
        .unwrap_err();
        assert_eq!(err.name(), "EgressPolicyError");
        assert_eq!(err.code(), Some("EGRESS_POLICY_DENIED"));
        assert!(!err.retryable());
        assert_eq!(
            err.to_string(),
            "egress denied for https://api.anthropic.com: the offline policy allows loopback only"
        );
    }

    #[test]
    fn allowlist_matches_origins() {
        let policy = EgressPolicy::Allowlist(vec!["https://api.openai.com/".into()]);
        assert_eq!(
            check_egress("https://api.openai.com/v1/chat/completions", &policy),
            Ok(())
        );
        for url in [
            "http://api.openai.com/v1",
            "https://api.openai.com:8443/v1",
            "https://evil.example/v1?key=secret",
        ] {
            let err = check_egress(url, &policy).unwrap_err();
            assert!(!err.to_string().contains("secret"));
            assert!(!err.to_string().contains("/v1"), "{err}");
        }
    }

    /// A between-bytes timeout reached the guest as "transport error: connection read
    /// timeout" plus the host's backtrace, as a retryable provider error instead of a timeout.
    #[test]
    fn text_only_failures_are_classified_by_their_first_line() {
        let (timeout, line) =
            describe_failure("connection read timeout\nStack backtrace:\n   0: wasmtime::x\n");
        assert!(timeout);
        assert_eq!(line, "connection read timeout");
        let (timeout, line) = describe_failure("  connection reset by peer  ");
        assert!(!timeout);
        assert_eq!(line, "connection reset by peer");
        assert_eq!(describe_failure(""), (false, String::new()));
        assert!(describe_failure(&"x".repeat(5000)).1.chars().count() <= 201);
    }

    #[test]
    fn statuses_are_classified() {
        let response = |status, body: &str, retry_after: Option<&str>| HttpResponse {
            status,
            headers: retry_after
                .map(|v| vec![("retry-after".to_string(), v.to_string())])
                .unwrap_or_default(),
            body: body.as_bytes().to_vec(),
        };
        fn message(_headers: &[(String, String)], body: &[u8]) -> ErrorDetail {
            let v: serde_json::Value = crate::json::from_bytes(body).unwrap_or_default();
            crate::adapter::error_object_detail(&v["error"])
        }
        assert_eq!(
            classify_status("openai", &response(200, "{}", None), &message, &[]),
            Ok(())
        );
        let failure = classify_status(
            "openai",
            &response(429, r#"{"error":{"message":"slow down"}}"#, Some("3")),
            &message,
            &[],
        )
        .unwrap_err();
        assert_eq!(failure.hints.wait, Some(RequestedWait::After(3000)));
        assert_eq!(failure.error.to_string(), "429 slow down");
        assert!(failure.error.retryable());
        let failure = classify_status(
            "openai",
            &response(400, "bad video_url", None),
            &message,
            &[],
        )
        .unwrap_err();
        assert_eq!(failure.error.to_string(), "400 bad video_url");
        assert!(!failure.error.retryable());
        assert_eq!(failure.error.http_status(), Some(400));
        let long = "x".repeat(2000);
        let failure =
            classify_status("openai", &response(500, &long, None), &message, &[]).unwrap_err();
        assert!(failure.error.to_string().chars().count() < 600);
        assert!(failure.error.retryable());
    }

    /// The provider's code and type, the wait it asks for in a header or in the body, and
    /// `x-should-retry` come out of one classification; a key in a code is redacted.
    #[test]
    fn codes_waits_and_verdicts_are_classified() {
        let detail = |_: &[(String, String)], body: &[u8]| ErrorDetail {
            message: Some("slow down".into()),
            code: Some(String::from_utf8_lossy(body).into_owned()),
            error_type: Some("requests".into()),
            retry_delay_ms: Some(34_400),
        };
        let response = |headers: &[(&str, &str)], body: &str| HttpResponse {
            status: 429,
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
            body: body.as_bytes().to_vec(),
        };
        let failure = classify_status("gemini", &response(&[], "RESOURCE_EXHAUSTED"), &detail, &[])
            .unwrap_err();
        assert_eq!(failure.error.code(), Some("RESOURCE_EXHAUSTED"));
        assert_eq!(failure.error.error_type(), Some("requests"));
        assert_eq!(failure.hints.wait, Some(RequestedWait::After(34_400)));
        assert_eq!(failure.hints.should_retry, None);
        assert_eq!(
            failure.error.to_json()["error"]["type"],
            serde_json::json!("requests")
        );
        // A header's wait wins over the body's.
        let failure = classify_status(
            "gemini",
            &response(&[("retry-after", "2"), ("x-should-retry", "false")], "x"),
            &detail,
            &[],
        )
        .unwrap_err();
        assert_eq!(failure.hints.wait, Some(RequestedWait::After(2000)));
        assert_eq!(failure.hints.should_retry, Some(false));
        let failure = classify_status(
            "openai",
            &response(&[], "code-sk-secret-1234"),
            &detail,
            &["sk-secret-1234"],
        )
        .unwrap_err();
        assert_eq!(failure.error.code(), Some("code-[redacted]"));
    }

    /// A key that straddles the 512-character cut must not leave its prefix behind: redaction
    /// comes before the cut.
    #[test]
    fn a_key_across_the_cut_leaves_no_prefix() {
        let key = "sk-straddle-SECRET-0042";
        for offset in 500..512 {
            let body = format!("{}{key} and more", "x".repeat(offset));
            let response = HttpResponse {
                status: 401,
                headers: vec![],
                body: body.into_bytes(),
            };
            let failure =
                classify_status("openai", &response, &|_, _| ErrorDetail::default(), &[key])
                    .unwrap_err();
            let message = failure.error.to_string();
            assert!(!message.contains(&key[..4]), "offset {offset}: {message}");
        }
    }
}
