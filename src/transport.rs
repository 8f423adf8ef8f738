//! HTTP over wasi-http: the only module that touches the network.
//!
//! What is decided before a byte leaves: the egress policy ([`check_egress`]). What is decided
//! after: how an answer or a failure is classified ([`classify_status`], per `behaviour.md`
//! §6.3), so the retry policy and the run result see OMA's status, retryability and provider.
//! Those parts are plain Rust; only [`send`] and [`send_streaming`] (wasm32) do I/O, through
//! `wstd`. Redirects are never followed: a 3xx is an answer like any other.

use crate::agent::retry::parse_retry_after;
use crate::error::Error;

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
    /// The per-call timeout: connecting, the first byte, and between bytes, in milliseconds.
    pub timeout_ms: u64,
    /// The largest response body accepted, in bytes.
    pub max_response_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout_ms: 120_000,
            max_response_bytes: 32 << 20,
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

/// A failed call: the error, and how long the provider asked us to wait before retrying.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The classified error.
    pub error: Error,
    /// The provider's `retry-after`, in milliseconds.
    pub retry_after_ms: Option<u64>,
}

impl From<Error> for Failure {
    fn from(error: Error) -> Self {
        Failure {
            error,
            retry_after_ms: None,
        }
    }
}

/// Refuses a URL the policy does not allow, before anything is sent. The error names the
/// origin only.
pub fn check_egress(url: &str, policy: &EgressPolicy) -> Result<(), Error> {
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
        Ok(())
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

/// Classifies a response: `Ok` for 2xx, otherwise a provider error with the status, the
/// provider's own message when `error_message` finds one in the body (else the start of the
/// body), and the `retry-after` delay.
pub fn classify_status(
    provider: &str,
    response: &HttpResponse,
    error_message: &dyn Fn(&[u8]) -> Option<String>,
) -> Result<(), Failure> {
    if (200..300).contains(&response.status) {
        return Ok(());
    }
    let message = error_message(&response.body)
        .unwrap_or_else(|| String::from_utf8_lossy(&response.body).into_owned());
    Err(Failure {
        error: Error::Provider {
            provider: provider.to_string(),
            status: Some(response.status),
            message: shorten(&message, 512),
        },
        retry_after_ms: response.header("retry-after").and_then(parse_retry_after),
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

#[cfg(target_arch = "wasm32")]
pub use io::{pause, random_unit, send, start, Incoming};

/// The wasi-http side, on the synchronous wasi:http and wasi:io calls: a response body can stay
/// in flight between two exported calls (a stream's `next`), which an async runtime scoped to
/// one call cannot offer.
#[cfg(target_arch = "wasm32")]
mod io {
    use super::{Failure, HttpResponse, Limits};
    use crate::adapter::HttpRequest;
    use crate::error::Error;
    use wasip2::http::outgoing_handler;
    use wasip2::http::types::{
        ErrorCode, Fields, IncomingBody, Method, OutgoingBody, OutgoingRequest, RequestOptions,
        Scheme,
    };
    use wasip2::io::streams::{InputStream, StreamError};

    const READ_CHUNK: u64 = 64 * 1024;

    /// A response whose head has arrived and whose body is read chunk by chunk.
    pub struct Incoming {
        /// The status and headers; the body stays empty here.
        pub head: HttpResponse,
        // Field order is drop order: the stream must go before the body it belongs to.
        stream: InputStream,
        _body: IncomingBody,
        received: usize,
        limits: Limits,
        provider: String,
        done: bool,
    }

    impl Incoming {
        /// The next chunk of the body, `None` at its end. Blocks until bytes arrive.
        pub fn next_chunk(&mut self) -> Result<Option<Vec<u8>>, Error> {
            if self.done {
                return Ok(None);
            }
            match self.stream.blocking_read(READ_CHUNK) {
                Ok(bytes) => {
                    self.received += bytes.len();
                    if self.received > self.limits.max_response_bytes {
                        self.done = true;
                        return Err(transport_error(
                            &self.provider,
                            format!(
                                "response body exceeds the limit of {} bytes",
                                self.limits.max_response_bytes
                            ),
                        ));
                    }
                    Ok(Some(bytes))
                }
                Err(StreamError::Closed) => {
                    self.done = true;
                    Ok(None)
                }
                Err(StreamError::LastOperationFailed(e)) => {
                    self.done = true;
                    let code = wasip2::http::types::http_error_code(&e);
                    Err(classify_code(
                        &self.provider,
                        &self.limits,
                        code,
                        e.to_debug_string(),
                    ))
                }
            }
        }

        /// Reads the rest of the body.
        pub fn read_to_end(mut self) -> Result<HttpResponse, Error> {
            let mut body = Vec::new();
            while let Some(chunk) = self.next_chunk()? {
                body.extend_from_slice(&chunk);
            }
            Ok(HttpResponse {
                body,
                ..self.head.clone()
            })
        }
    }

    /// Sends a request and reads the whole response.
    pub fn send(
        provider: &str,
        request: &HttpRequest,
        limits: &Limits,
    ) -> Result<HttpResponse, Failure> {
        Ok(start(provider, request, limits)?.read_to_end()?)
    }

    /// Sends a request and waits for the response head. Redirects are not followed.
    pub fn start(
        provider: &str,
        request: &HttpRequest,
        limits: &Limits,
    ) -> Result<Incoming, Failure> {
        let fail = |message: String| Failure::from(transport_error(provider, message));
        let url = url::Url::parse(&request.url)
            .map_err(|_| fail("the request URL does not parse".into()))?;
        let mut entries: Vec<(String, Vec<u8>)> = request
            .headers
            .iter()
            .map(|(n, v)| (n.clone(), v.as_bytes().to_vec()))
            .collect();
        entries.push((
            "content-length".into(),
            request.body.len().to_string().into_bytes(),
        ));
        let headers = Fields::from_list(&entries)
            .map_err(|e| fail(format!("invalid request header: {e:?}")))?;
        let outgoing = OutgoingRequest::new(headers);
        let method = match request.method.as_str() {
            "GET" => Method::Get,
            "POST" => Method::Post,
            other => Method::Other(other.to_string()),
        };
        let scheme = match url.scheme() {
            "http" => Scheme::Http,
            "https" => Scheme::Https,
            other => Scheme::Other(other.to_string()),
        };
        let authority = match url.port() {
            Some(port) => format!("{}:{port}", url.host_str().unwrap_or_default()),
            None => url.host_str().unwrap_or_default().to_string(),
        };
        let path = match url.query() {
            Some(query) => format!("{}?{query}", url.path()),
            None => url.path().to_string(),
        };
        let set = |ok: Result<(), ()>, what: &str| {
            ok.map_err(|()| fail(format!("invalid request {what}")))
        };
        set(outgoing.set_method(&method), "method")?;
        set(outgoing.set_scheme(Some(&scheme)), "scheme")?;
        set(outgoing.set_authority(Some(&authority)), "authority")?;
        set(outgoing.set_path_with_query(Some(&path)), "path")?;
        let body = outgoing
            .body()
            .map_err(|()| fail("request body taken twice".into()))?;

        let options = RequestOptions::new();
        let nanos = limits.timeout_ms.saturating_mul(1_000_000);
        // A host that does not support a timeout keeps its own; that is not an error.
        let _ = options.set_connect_timeout(Some(nanos));
        let _ = options.set_first_byte_timeout(Some(nanos));
        let _ = options.set_between_bytes_timeout(Some(nanos));

        let future = outgoing_handler::handle(outgoing, Some(options)).map_err(|code| {
            Failure::from(classify_code(provider, limits, Some(code), String::new()))
        })?;
        // The host reads the body while we write it; a write failure means the request failed,
        // and the response future says why.
        write_body(body, &request.body);
        future.subscribe().block();
        let response = match future.get() {
            Some(Ok(Ok(response))) => response,
            Some(Ok(Err(code))) => {
                return Err(classify_code(provider, limits, Some(code), String::new()).into())
            }
            _ => return Err(fail("the response was lost".into())),
        };
        let status = response.status();
        let head_headers = response
            .headers()
            .entries()
            .into_iter()
            .map(|(n, v)| {
                (
                    n.to_ascii_lowercase(),
                    String::from_utf8_lossy(&v).into_owned(),
                )
            })
            .collect();
        let body = response
            .consume()
            .map_err(|()| fail("response body taken twice".into()))?;
        let stream = body
            .stream()
            .map_err(|()| fail("response body stream taken twice".into()))?;
        Ok(Incoming {
            head: HttpResponse {
                status,
                headers: head_headers,
                body: Vec::new(),
            },
            stream,
            _body: body,
            received: 0,
            limits: *limits,
            provider: provider.to_string(),
            done: false,
        })
    }

    fn write_body(body: OutgoingBody, bytes: &[u8]) {
        if let Ok(out) = body.write() {
            let mut rest = bytes;
            while !rest.is_empty() {
                out.subscribe().block();
                let Ok(permit) = out.check_write() else { break };
                let n = (permit as usize).min(rest.len());
                if n == 0 {
                    continue;
                }
                if out.write(&rest[..n]).is_err() {
                    break;
                }
                rest = &rest[n..];
            }
            let _ = out.blocking_flush();
        }
        let _ = OutgoingBody::finish(body, None);
    }

    /// Sleeps for `ms` milliseconds (between retries).
    pub fn pause(ms: u64) {
        wasip2::clocks::monotonic_clock::subscribe_duration(ms.saturating_mul(1_000_000)).block();
    }

    /// A random number in `[0, 1]`, for retry jitter.
    pub fn random_unit() -> f64 {
        (wasip2::random::random::get_random_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn transport_error(provider: &str, message: String) -> Error {
        Error::Provider {
            provider: provider.to_string(),
            status: None,
            message,
        }
    }

    /// Maps a wasi-http failure: timeouts to `LLMCallTimeoutError`, a host refusal to an egress
    /// denial, everything else to a retryable provider error without status.
    fn classify_code(
        provider: &str,
        limits: &Limits,
        code: Option<ErrorCode>,
        detail: String,
    ) -> Error {
        match code {
            Some(
                ErrorCode::ConnectionTimeout
                | ErrorCode::ConnectionReadTimeout
                | ErrorCode::ConnectionWriteTimeout
                | ErrorCode::HttpResponseTimeout,
            ) => Error::Timeout {
                provider: provider.to_string(),
                timeout_ms: limits.timeout_ms,
            },
            Some(ErrorCode::HttpRequestDenied) => Error::EgressDenied {
                message: "egress denied by the host".into(),
            },
            Some(ErrorCode::ConnectionRefused) => {
                transport_error(provider, "connection refused".into())
            }
            Some(code) => transport_error(provider, format!("transport error: {code:?}")),
            None => match super::describe_failure(&detail) {
                (true, _) => Error::Timeout {
                    provider: provider.to_string(),
                    timeout_ms: limits.timeout_ms,
                },
                (false, line) if line.is_empty() => {
                    transport_error(provider, "transport error".into())
                }
                (false, line) => transport_error(provider, format!("transport error: {line}")),
            },
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
        fn message(body: &[u8]) -> Option<String> {
            let v: serde_json::Value = serde_json::from_slice(body).ok()?;
            Some(v["error"]["message"].as_str()?.to_string())
        }
        assert_eq!(
            classify_status("openai", &response(200, "{}", None), &message),
            Ok(())
        );
        let failure = classify_status(
            "openai",
            &response(429, r#"{"error":{"message":"slow down"}}"#, Some("3")),
            &message,
        )
        .unwrap_err();
        assert_eq!(failure.retry_after_ms, Some(3000));
        assert_eq!(failure.error.to_string(), "429 slow down");
        assert!(failure.error.retryable());
        let failure =
            classify_status("openai", &response(400, "bad video_url", None), &message).unwrap_err();
        assert_eq!(failure.error.to_string(), "400 bad video_url");
        assert!(!failure.error.retryable());
        assert_eq!(failure.error.http_status(), Some(400));
        let long = "x".repeat(2000);
        let failure = classify_status("openai", &response(500, &long, None), &message).unwrap_err();
        assert!(failure.error.to_string().chars().count() < 600);
        assert!(failure.error.retryable());
    }
}
