//! The call machine by value: what it asks for, how it takes each answer, and how it refuses
//! answers it did not ask for.

use super::*;
use crate::adapter::anthropic::Anthropic;
use crate::adapter::{Credentials, Endpoint};
use crate::http::TransportFailureKind;
use crate::message::{ContentBlock, LlmMessage, MediaSource, VideoBlock};

const KEY: &str = "sk-call-SECRET-4411";
const NOW: u64 = 1_796_036_400_000;

fn request(stream: bool) -> ChatRequest {
    ChatRequest {
        model: "claude-x".into(),
        messages: vec![LlmMessage::user_text("hi")],
        stream,
        ..ChatRequest::default()
    }
}

fn endpoint() -> Endpoint {
    Endpoint {
        credentials: Credentials::ApiKey(KEY.into()),
        ..Endpoint::default()
    }
}

fn options(max_attempts: u32) -> CallOptions {
    CallOptions {
        retry: Some(RetryPolicy {
            max_attempts,
            base_delay_ms: 100,
            backoff: 2.0,
            ..RetryPolicy::default()
        }),
        ..CallOptions::default()
    }
}

fn reply(text: &str) -> String {
    format!(
        r#"{{"id":"msg_1","type":"message","role":"assistant","model":"claude-x",
            "content":[{{"type":"text","text":"{text}"}}],"stop_reason":"end_turn",
            "usage":{{"input_tokens":3,"output_tokens":2}}}}"#
    )
}

fn response(status: u16, body: &str) -> CallAnswer {
    CallAnswer::Response(HttpResponse {
        status,
        headers: vec![("content-type".into(), "application/json".into())],
        body: body.as_bytes().to_vec(),
    })
}

fn call(request: &ChatRequest, options: CallOptions) -> Call {
    Call::new(Box::new(Anthropic), request, &endpoint(), options, 1)
}

fn expect_send(call: &mut Call) -> Outgoing {
    match call.poll(NOW) {
        CallPoll::Step(CallStep::Send(outgoing)) => outgoing,
        other => panic!("expected a send, got {other:?}"),
    }
}

fn expect_done(call: &mut Call) -> Result<LlmResponse, Error> {
    match call.poll(NOW) {
        CallPoll::Finished(result) => result,
        other => panic!("expected the result, got {other:?}"),
    }
}

#[test]
fn a_whole_response_is_parsed() {
    let request = request(false);
    let mut call = call(&request, options(1));
    let outgoing = expect_send(&mut call);
    assert_eq!(outgoing.url, "https://api.anthropic.com/v1/messages");
    // The URL as the egress check parsed it, for the transport: the same URL.
    assert_eq!(
        outgoing.parsed.as_deref().map(url::Url::as_str),
        Some(outgoing.url.as_str())
    );
    assert_eq!(outgoing.attempt, 1);
    assert!(!outgoing.stream);
    let body: serde_json::Value = serde_json::from_str(&outgoing.body).expect("JSON body");
    assert_eq!(body["model"], "claude-x");
    assert_eq!(
        call.poll(NOW),
        CallPoll::Waiting,
        "nothing more until the answer"
    );
    assert!(call.awaits_answer());
    call.handle(response(200, &reply("hello")))
        .expect("the answer was due");
    let parsed = expect_done(&mut call).expect("a response");
    assert_eq!(parsed.content.len(), 1);
    assert_eq!(call.poll(NOW), CallPoll::Over, "the result is given once");
}

#[test]
fn retryable_failures_wait_then_send_the_same_request_again() {
    let request = request(false);
    let mut call = call(&request, options(3));
    let first = expect_send(&mut call);
    call.handle(response(503, "busy")).expect("due");
    let CallPoll::Step(CallStep::Wait(ms)) = call.poll(NOW) else {
        panic!("expected a wait");
    };
    assert!((50..=100).contains(&ms), "equal jitter of 100 ms: {ms}");
    assert_eq!(
        call.poll(NOW),
        CallPoll::Waiting,
        "the wait must be answered"
    );
    call.handle(CallAnswer::Waited).expect("due");
    let second = expect_send(&mut call);
    assert_eq!(second.attempt, 2);
    assert_eq!(second.body, first.body);
    let (Some(first_url), Some(second_url)) = (&first.parsed, &second.parsed) else {
        panic!("every attempt carries its parsed URL");
    };
    assert!(Arc::ptr_eq(first_url, second_url), "parsed once");
    call.handle(CallAnswer::Failure(TransportFailure::new(
        TransportFailureKind::TimedOut,
        "slow",
    )))
    .expect("due");
    let CallPoll::Step(CallStep::Wait(ms)) = call.poll(NOW) else {
        panic!("a timeout is retried");
    };
    assert!((100..=200).contains(&ms), "{ms}");
    call.handle(CallAnswer::Waited).expect("due");
    assert_eq!(expect_send(&mut call).attempt, 3);
    call.handle(response(200, &reply("ok"))).expect("due");
    assert!(expect_done(&mut call).is_ok());
}

#[test]
fn retry_after_raises_the_wait() {
    let request = request(false);
    let mut call = call(&request, options(2));
    expect_send(&mut call);
    let limited = CallAnswer::Response(HttpResponse {
        status: 429,
        headers: vec![("Retry-After".into(), "2".into())],
        body: br#"{"type":"error","error":{"type":"rate_limit_error","message":"slow"}}"#.to_vec(),
    });
    call.handle(limited).expect("due");
    assert_eq!(call.poll(NOW), CallPoll::Step(CallStep::Wait(2000)));
}

/// `retry-after` as an HTTP date waits until that time, counted from the poll that hands the
/// wait out; `retry-after-ms` wins over `retry-after`; a wait longer than what is left of the
/// deadline is not waited for: the call ends with the provider's error, not a timeout.
#[test]
fn requested_waits_are_honoured_up_to_the_deadline() {
    let request = request(false);
    let limited = |headers: &[(&str, &str)]| {
        CallAnswer::Response(HttpResponse {
            status: 429,
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
            body: br#"{"type":"error","error":{"type":"rate_limit_error","message":"slow"}}"#
                .to_vec(),
        })
    };
    // NOW is 2026-11-30T11:00:00Z; the date is 3 s later.
    let mut call = self::call(&request, options(2));
    expect_send(&mut call);
    call.handle(limited(&[("retry-after", "Mon, 30 Nov 2026 11:00:03 GMT")]))
        .expect("due");
    assert_eq!(
        call.poll(NOW + 1_000),
        CallPoll::Step(CallStep::Wait(2_000))
    );

    let mut call = self::call(&request, options(2));
    expect_send(&mut call);
    call.handle(limited(&[("retry-after", "1"), ("retry-after-ms", "250")]))
        .expect("due");
    assert_eq!(call.poll(NOW), CallPoll::Step(CallStep::Wait(250)));

    // 40 s asked for, 30 s of the deadline left: the 429 at once.
    let options = CallOptions {
        limits: Limits {
            deadline_ms: 30_000,
            ..Limits::default()
        },
        ..options(3)
    };
    let mut call = call_of(&request, options);
    expect_send(&mut call);
    call.handle(limited(&[("retry-after", "40")])).expect("due");
    let error = expect_done(&mut call).expect_err("not waited for");
    assert_eq!(error.name(), "ProviderError");
    assert_eq!(error.http_status(), Some(429));
    assert_eq!(error.code(), Some("rate_limit_error"));
}

/// Without a policy of its own a call gets its provider's default: Anthropic's SDK retries
/// twice, after 0.5 s and 1 s (up to a quarter less).
#[test]
fn a_call_without_a_policy_gets_the_providers_default() {
    let request = request(false);
    let mut call = call_of(&request, CallOptions::default());
    for (attempt, range) in [(1, 375..=500), (2, 750..=1000)] {
        assert_eq!(expect_send(&mut call).attempt, attempt);
        call.handle(response(500, "oops")).expect("due");
        let CallPoll::Step(CallStep::Wait(ms)) = call.poll(NOW) else {
            panic!("attempt {attempt} is retried");
        };
        assert!(range.contains(&ms), "{attempt}: {ms}");
        call.handle(CallAnswer::Waited).expect("due");
    }
    assert_eq!(expect_send(&mut call).attempt, 3);
    call.handle(response(500, "oops")).expect("due");
    assert_eq!(
        expect_done(&mut call)
            .expect_err("3 attempts")
            .http_status(),
        Some(500)
    );
}

#[test]
fn terminal_errors_and_exhausted_attempts_end_the_call() {
    let request = request(false);
    let mut call = call(&request, options(5));
    expect_send(&mut call);
    call.handle(response(400, "bad request")).expect("due");
    let error = expect_done(&mut call).expect_err("a 400 is terminal");
    assert_eq!(error.http_status(), Some(400));
    assert!(!error.retryable());

    let mut call = call_with_one_attempt(&request);
    expect_send(&mut call);
    call.handle(CallAnswer::Failure(TransportFailure::new(
        TransportFailureKind::Denied,
        "",
    )))
    .expect("due");
    assert_eq!(
        expect_done(&mut call).expect_err("denied").name(),
        "EgressPolicyError"
    );
}

fn call_with_one_attempt(request: &ChatRequest) -> Call {
    call(request, options(1))
}

#[test]
fn nothing_is_sent_when_formatting_or_egress_fails() {
    let mut video = request(false);
    video.messages = vec![LlmMessage {
        role: crate::message::Role::User,
        content: vec![ContentBlock::Video(VideoBlock {
            source: MediaSource::Url {
                media_type: "video/mp4".into(),
                url: "https://example.com/a.mp4".into(),
            },
        })],
    }];
    let mut call = call(&video, options(3));
    let error = expect_done(&mut call).expect_err("video on Anthropic");
    assert_eq!(error.name(), "UnsupportedContentBlockError");
    assert_eq!(call.poll(NOW), CallPoll::Over);

    let request = request(false);
    let offline = CallOptions {
        egress: EgressPolicy::Offline,
        ..options(3)
    };
    let mut call = call_of(&request, offline);
    assert_eq!(
        expect_done(&mut call).expect_err("not loopback").name(),
        "EgressPolicyError"
    );
}

fn call_of(request: &ChatRequest, options: CallOptions) -> Call {
    call(request, options)
}

/// An Anthropic stream of one text turn, `hello world`.
fn stream_body() -> String {
    [
        r#"{"type":"message_start","message":{"id":"m","model":"claude-x","usage":{"input_tokens":3,"output_tokens":1}}}"#,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hello "}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"world"}}"#,
        r#"{"type":"content_block_stop","index":0}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}"#,
        r#"{"type":"message_stop"}"#,
    ]
    .iter()
    .map(|event| format!("data: {event}\n\n"))
    .collect()
}

#[test]
fn a_stream_delivers_its_pieces_whatever_the_chunking() {
    let request = request(true);
    let body = stream_body();
    for size in [1, 7, 64, body.len()] {
        let mut call = call(&request, options(1));
        assert!(expect_send(&mut call).stream);
        call.handle(CallAnswer::Head {
            status: 200,
            headers: vec![],
        })
        .expect("due");
        assert!(call.accepted());
        let mut texts = String::new();
        let mut chunks = body.as_bytes().chunks(size);
        let result = loop {
            match call.poll(NOW) {
                CallPoll::Step(CallStep::Receive) => {
                    let answer = match chunks.next() {
                        Some(chunk) => CallAnswer::Chunk(chunk.to_vec()),
                        None => CallAnswer::End,
                    };
                    call.handle(answer).expect("due");
                }
                CallPoll::Step(CallStep::Event(StreamEvent::Text(text))) => texts.push_str(&text),
                CallPoll::Step(CallStep::Event(StreamEvent::Usage(_))) => {}
                CallPoll::Finished(result) => break result,
                other => panic!("unexpected {other:?}"),
            }
        };
        assert_eq!(texts, "hello world", "chunks of {size}");
        assert_eq!(result.expect("complete").usage.output_tokens, 2);
    }
}

#[test]
fn a_stream_cut_short_fails_and_is_not_sent_again() {
    let request = request(true);
    let mut call = call(&request, options(3));
    expect_send(&mut call);
    let head = CallAnswer::Head {
        status: 200,
        headers: vec![],
    };
    call.handle(head).expect("due");
    let body = stream_body();
    call.handle(CallAnswer::Chunk(
        body.as_bytes()[..body.len() / 2].to_vec(),
    ))
    .expect("due");
    while let CallPoll::Step(CallStep::Event(_)) = call.poll(NOW) {}
    call.handle(CallAnswer::End).expect("due");
    let error = loop {
        match call.poll(NOW) {
            CallPoll::Finished(result) => break result.expect_err("cut short"),
            CallPoll::Step(CallStep::Event(_)) => {}
            other => panic!("unexpected {other:?}"),
        }
    };
    assert_eq!(error.name(), "ProviderError");
    assert!(
        call.poll(NOW) == CallPoll::Over,
        "no second attempt after an accepted stream"
    );
}

#[test]
fn an_error_head_on_a_stream_is_read_and_retried() {
    let request = request(true);
    let mut call = call(&request, options(2));
    expect_send(&mut call);
    let head = CallAnswer::Head {
        status: 500,
        headers: vec![],
    };
    call.handle(head).expect("due");
    assert!(!call.accepted());
    assert_eq!(call.poll(NOW), CallPoll::Step(CallStep::Receive));
    call.handle(CallAnswer::Chunk(b"oops".to_vec()))
        .expect("due");
    call.handle(CallAnswer::End).expect("due");
    assert!(matches!(call.poll(NOW), CallPoll::Step(CallStep::Wait(_))));
}

#[test]
fn answers_that_were_not_asked_for_are_refused_and_change_nothing() {
    let request = request(false);
    let mut call = call(&request, options(1));
    // Before anything was handed out: the send is due, not an answer.
    let refused = call
        .handle(CallAnswer::Chunk(b"x".to_vec()))
        .expect_err("nothing asked yet");
    assert_eq!(refused.reason.name(), "SessionStateError");
    expect_send(&mut call);
    for wrong in [
        CallAnswer::Chunk(b"x".to_vec()),
        CallAnswer::End,
        CallAnswer::Waited,
    ] {
        let error = call.handle(wrong).expect_err("not due");
        assert_eq!(error.reason.code(), Some("SESSION_STATE"));
        assert!(error.to_string().contains("HTTP response"), "{error}");
    }
    call.handle(response(200, &reply("fine")))
        .expect("the right answer still works");
    let late = call
        .handle(response(200, &reply("again")))
        .expect_err("a second answer");
    assert_eq!(late.reason.name(), "SessionStateError");
    assert!(expect_done(&mut call).is_ok());
    assert!(call.handle(CallAnswer::End).is_err());
}

#[test]
fn bodies_past_the_limit_fail_and_echoed_keys_are_redacted() {
    let request = request(false);
    let small = CallOptions {
        limits: Limits {
            timeout_ms: 1000,
            max_response_bytes: 16,
            deadline_ms: 60_000,
        },
        ..options(1)
    };
    let mut call = call(&request, small);
    assert_eq!(expect_send(&mut call).timeout_ms, 1000);
    call.handle(response(200, &reply("far too long")))
        .expect("due");
    let error = expect_done(&mut call).expect_err("over the limit");
    assert!(error.to_string().contains("exceeds the limit"), "{error}");

    let mut call = call_with_one_attempt(&request);
    expect_send(&mut call);
    let echo = format!(r#"{{"type":"error","error":{{"type":"x","message":"bad key {KEY}"}}}}"#);
    call.handle(response(401, &echo)).expect("due");
    let error = expect_done(&mut call).expect_err("401");
    assert!(!error.to_string().contains(KEY), "{error}");
    assert!(error.to_string().contains("[redacted]"), "{error}");
}

#[test]
fn absurd_statuses_and_headers_are_provider_errors_never_panics() {
    let request = request(false);
    for status in [0, 1, 99, 101, 304, 999, 1000, u16::MAX] {
        let mut call = call_with_one_attempt(&request);
        expect_send(&mut call);
        let answer = CallAnswer::Response(HttpResponse {
            status,
            headers: vec![
                ("retry-after".into(), "9".repeat(400)),
                ("\u{0}weird".into(), "\u{7f}".into()),
            ],
            body: vec![0xff, 0xfe, 0x00],
        });
        call.handle(answer).expect("due");
        let error = expect_done(&mut call).expect_err("not a 2xx");
        assert_eq!(error.http_status(), Some(status));
    }
    // A retry-after of absurd size is past any deadline: the call ends with the 429 at once.
    let mut call = call(&request, options(2));
    expect_send(&mut call);
    let answer = CallAnswer::Response(HttpResponse {
        status: 429,
        headers: vec![("retry-after".into(), "9".repeat(400))],
        body: Vec::new(),
    });
    call.handle(answer).expect("due");
    let error = expect_done(&mut call).expect_err("no time to wait that long");
    assert_eq!(error.http_status(), Some(429));
}

#[test]
fn a_call_past_its_deadline_ends_however_its_bytes_trickle() {
    let request = request(true);
    let short = CallOptions {
        limits: Limits {
            timeout_ms: 5_000,
            deadline_ms: 1_000,
            ..Limits::default()
        },
        ..options(1)
    };
    let mut call = call_of(&request, short.clone());
    let CallPoll::Step(CallStep::Send(outgoing)) = call.poll(NOW) else {
        panic!("expected a send");
    };
    assert_eq!(outgoing.timeout_ms, 1_000, "no step outlives the deadline");
    call.handle(CallAnswer::Head {
        status: 200,
        headers: vec![],
    })
    .expect("due");
    // A keep-alive comment a second, forever.
    let mut now = NOW;
    let error = loop {
        now += 400;
        match call.poll(now) {
            CallPoll::Step(CallStep::Receive) => call
                .handle(CallAnswer::Chunk(b": keep-alive\n\n".to_vec()))
                .expect("due"),
            CallPoll::Finished(result) => break result.expect_err("past the deadline"),
            other => panic!("unexpected {other:?}"),
        }
        assert!(now < NOW + 10_000, "the deadline did not end the call");
    };
    assert_eq!(error.name(), "LLMCallTimeoutError");
    assert_eq!(
        error.to_string(),
        "LLM call exceeded per-call timeout of 1000ms"
    );

    // A retry whose wait would end past the deadline is not waited for.
    let mut call = call_of(
        &request_plain(),
        CallOptions {
            retry: Some(RetryPolicy {
                max_attempts: 5,
                base_delay_ms: 5_000,
                backoff: 2.0,
                ..RetryPolicy::default()
            }),
            ..short
        },
    );
    call.poll(NOW);
    call.handle(response(503, "busy")).expect("due");
    let error = match call.poll(NOW + 10) {
        CallPoll::Finished(result) => result.expect_err("no time left to wait"),
        other => panic!("unexpected {other:?}"),
    };
    assert_eq!(error.http_status(), Some(503), "the last attempt's error");
}

/// The per-call timeout bounds a whole attempt: a stream of keep-alives that never ends is cut
/// by it (not only by the call's much longer deadline), and the error names it.
#[test]
fn an_endless_stream_of_keep_alives_ends_by_the_timeout() {
    let request = request(true);
    let limits = Limits {
        timeout_ms: 1_000,
        deadline_ms: 600_000,
        ..Limits::default()
    };
    let mut call = call_of(
        &request,
        CallOptions {
            limits,
            ..options(3)
        },
    );
    let CallPoll::Step(CallStep::Send(outgoing)) = call.poll(NOW) else {
        panic!("expected a send");
    };
    assert_eq!(outgoing.timeout_ms, 1_000);
    call.handle(CallAnswer::Head {
        status: 200,
        headers: vec![],
    })
    .expect("due");
    let mut now = NOW;
    let error = loop {
        now += 100;
        match call.poll(now) {
            CallPoll::Step(CallStep::Receive) => call
                .handle(CallAnswer::Chunk(b": keep-alive\n\n".to_vec()))
                .expect("due"),
            CallPoll::Finished(result) => break result.expect_err("past the timeout"),
            other => panic!("unexpected {other:?}"),
        }
        assert!(now < NOW + 5_000, "the timeout did not end the stream");
    };
    assert_eq!(now, NOW + 1_000, "ended at the first poll past the timeout");
    assert_eq!(
        error.to_string(),
        "LLM call exceeded per-call timeout of 1000ms"
    );
}

/// A transport timeout names the limit that fired: the call's deadline when what was left of it
/// cut the attempt's timeout (OMA's `callTimeoutMs` under a longer `timeoutMs`), else the
/// timeout itself.
#[test]
fn a_transport_timeout_names_the_limit_that_fired() {
    let timed_out = || {
        CallAnswer::Failure(TransportFailure {
            kind: TransportFailureKind::TimedOut,
            message: "timed out".into(),
        })
    };
    for (timeout_ms, deadline_ms, named) in
        [(120_000, 400, 400), (1_500, 300, 300), (250, 10_000, 250)]
    {
        let limits = Limits {
            timeout_ms,
            deadline_ms,
            ..Limits::default()
        };
        let mut call = call_of(
            &request(true),
            CallOptions {
                limits,
                ..options(1)
            },
        );
        let CallPoll::Step(CallStep::Send(outgoing)) = call.poll(NOW) else {
            panic!("expected a send");
        };
        assert_eq!(outgoing.timeout_ms, timeout_ms.min(deadline_ms));
        call.handle(timed_out()).expect("due");
        let error = match call.poll(NOW + named) {
            CallPoll::Finished(result) => result.expect_err("timed out"),
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(
            error.to_string(),
            format!("LLM call exceeded per-call timeout of {named}ms"),
            "timeout {timeout_ms}, deadline {deadline_ms}"
        );
    }
}

fn request_plain() -> ChatRequest {
    request(false)
}

#[test]
fn answers_that_arrived_but_cannot_be_used_are_not_asked_again() {
    let request = request(false);
    // A 2xx that does not parse, a redirect, and a body over the limit: one attempt each.
    for (status, body, limit) in [
        (200, "{not json".to_owned(), 1 << 20),
        (302, String::new(), 1 << 20),
        (200, reply("far too long for the limit"), 16),
    ] {
        let options = CallOptions {
            limits: Limits {
                max_response_bytes: limit,
                ..Limits::default()
            },
            ..options(5)
        };
        let mut call = call_of(&request, options);
        expect_send(&mut call);
        call.handle(response(status, &body)).expect("due");
        let error = expect_done(&mut call).expect_err("unusable");
        assert!(
            !matches!(call.poll(NOW), CallPoll::Step(CallStep::Wait(_))),
            "{status}: {error}"
        );
        if status == 302 {
            assert!(!error.retryable());
        }
    }
    // A URL that is not http(s) is refused before anything is sent.
    let odd = Endpoint {
        base_url: Some("ftp://example.com".into()),
        ..endpoint()
    };
    let mut call = Call::new(Box::new(Anthropic), &request, &odd, options(3), 1);
    let error = expect_done(&mut call).expect_err("refused");
    assert_eq!(error.to_string(), "the request URL must be http or https");
}

#[test]
fn the_last_attempt_hands_its_body_over_and_earlier_ones_share_it() {
    let request = request(false);
    // One attempt: the call lets go of the body, so taking it copies nothing.
    let mut single = call_with_one_attempt(&request);
    let outgoing = expect_send(&mut single);
    assert_eq!(std::sync::Arc::strong_count(&outgoing.body), 1);
    assert!(outgoing.body.contains("\"messages\""), "{}", outgoing.body);
    // Two attempts: the first is shared with the call, which sends it again after a failure;
    // the second, the last, is handed over with the same bytes.
    let mut call = call(&request, options(2));
    let first = expect_send(&mut call);
    assert_eq!(std::sync::Arc::strong_count(&first.body), 2);
    let answer = CallAnswer::Response(HttpResponse {
        status: 500,
        headers: Vec::new(),
        body: Vec::new(),
    });
    call.handle(answer).expect("due");
    assert!(matches!(call.poll(NOW), CallPoll::Step(CallStep::Wait(_))));
    call.handle(CallAnswer::Waited).expect("due");
    let second = expect_send(&mut call);
    assert_eq!(second.attempt, 2);
    assert_eq!(*second.body, *first.body);
    drop(first);
    assert_eq!(std::sync::Arc::strong_count(&second.body), 1);
}

/// Hosts ask for `identity`; a body encoded anyway is refused at its head, before a byte of it
/// is read or inflated: a 2xx is not asked for again, an error status is retried as its status
/// says, and a key echoed in the header is redacted.
#[test]
fn encoded_bodies_are_refused_at_the_head() {
    let encoded = |status: u16, value: &str| CallAnswer::Head {
        status,
        headers: vec![("Content-Encoding".into(), value.into())],
    };
    for stream in [false, true] {
        let request = request(stream);
        let mut call = call(&request, options(3));
        expect_send(&mut call);
        call.handle(encoded(200, "gzip")).expect("due");
        let error = expect_done(&mut call).expect_err("encoded");
        assert_eq!(
            error.to_string(),
            "200 the response body is content-encoded (gzip); only identity is accepted"
        );
        assert!(!error.retryable());
        assert_eq!(call.poll(NOW), CallPoll::Over, "nothing more is read");
    }
    // `identity`, in any case, and an empty value are plain bodies.
    let request = request(false);
    for value in ["identity", " Identity ", ""] {
        let mut call = call_with_one_attempt(&request);
        expect_send(&mut call);
        let answer = CallAnswer::Response(HttpResponse {
            status: 200,
            headers: vec![("content-encoding".into(), value.into())],
            body: reply("plain").into_bytes(),
        });
        call.handle(answer).expect("due");
        assert!(expect_done(&mut call).is_ok(), "{value:?}");
    }
    // A 503 that is encoded is retried like any 503.
    let mut call = call(&request, options(2));
    expect_send(&mut call);
    call.handle(encoded(503, "br")).expect("due");
    assert!(matches!(call.poll(NOW), CallPoll::Step(CallStep::Wait(_))));
    // A key in the header never reaches the error; a long value is not echoed at all.
    for value in [KEY.to_owned(), format!("gzip, {}", "x".repeat(100))] {
        let mut call = call_with_one_attempt(&request);
        expect_send(&mut call);
        call.handle(encoded(200, &value)).expect("due");
        let error = expect_done(&mut call).expect_err("encoded").to_string();
        assert!(!error.contains(KEY) && !error.contains("xxxx"), "{error}");
    }
}

/// Waiting and finished are told apart, and `wake_at` says by when the answer that is due
/// comes: the attempt's timeout while a request is out, the wait's end during a retry wait,
/// nothing once a step is ready or the call is over.
#[test]
fn waiting_is_bounded_by_wake_at_and_finished_is_given_once() {
    let request = request(false);
    let limits = Limits {
        timeout_ms: 2_000,
        deadline_ms: 60_000,
        ..Limits::default()
    };
    let mut call = call_of(
        &request,
        CallOptions {
            limits,
            ..options(2)
        },
    );
    assert_eq!(call.wake_at(), None, "nothing is out before the first poll");
    let outgoing = expect_send(&mut call);
    assert_eq!(outgoing.timeout_ms, 2_000);
    assert_eq!(call.wake_at(), Some(NOW + 2_000), "the attempt's timeout");
    assert_eq!(call.poll(NOW + 10), CallPoll::Waiting);
    call.handle(response(503, "busy")).expect("due");
    assert_eq!(call.wake_at(), None, "a step is ready");
    let CallPoll::Step(CallStep::Wait(ms)) = call.poll(NOW + 100) else {
        panic!("expected a wait");
    };
    assert_eq!(call.wake_at(), Some(NOW + 100 + ms), "the wait's end");
    assert_eq!(call.poll(NOW + 100), CallPoll::Waiting);
    call.handle(CallAnswer::Waited).expect("due");
    let later = NOW + 100 + ms;
    let CallPoll::Step(CallStep::Send(second)) = call.poll(later) else {
        panic!("expected the second attempt");
    };
    assert_eq!(second.attempt, 2);
    assert_eq!(call.wake_at(), Some(later + 2_000));
    call.handle(response(200, &reply("ok"))).expect("due");
    assert!(matches!(call.poll(later), CallPoll::Finished(Ok(_))));
    assert_eq!(call.wake_at(), None);
    assert_eq!(call.poll(later), CallPoll::Over);
    assert_eq!(call.poll(later + 1), CallPoll::Over, "over stays over");
}

/// The call reads its answers with what it kept of the request: a Gemini call makes up the
/// same tool-call ids as the adapter reading the body for that request (they depend on the
/// request's message count), and names the request's model.
#[test]
fn the_call_reads_answers_with_what_it_kept_of_the_request() {
    use crate::adapter::gemini::Gemini;
    use crate::adapter::ResponseContext;
    let gemini = Gemini::with_ids(NOW, 7);
    let mut request = request(false);
    request.model = "gemini-x".into();
    request.messages.push(LlmMessage::user_text("and again"));
    let body = r#"{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{}}}]},
        "finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":1}}"#;
    let expected = gemini
        .parse(&ResponseContext::of(&request), body.as_bytes())
        .expect("a Gemini body");
    let endpoint = Endpoint {
        base_url: Some("https://generativelanguage.googleapis.com".into()),
        ..endpoint()
    };
    let mut call = Call::new(Box::new(gemini), &request, &endpoint, options(1), 1);
    expect_send(&mut call);
    call.handle(response(200, body)).expect("due");
    let parsed = expect_done(&mut call).expect("parsed by the call");
    assert_eq!(parsed, expected);
    assert_eq!(parsed.model, "gemini-x");
    // Another message count, other ids: the count is what the call kept.
    request.messages.push(LlmMessage::user_text("once more"));
    let other = gemini
        .parse(&ResponseContext::of(&request), body.as_bytes())
        .expect("a Gemini body");
    assert_ne!(other.content, parsed.content);
}

#[test]
fn a_counting_call_answers_the_providers_count() {
    let request = request(true);
    let mut call = Call::count(Box::new(Anthropic), &request, &endpoint(), options(1), 1);
    let outgoing = expect_send(&mut call);
    assert_eq!(
        outgoing.url,
        "https://api.anthropic.com/v1/messages/count_tokens"
    );
    assert!(!outgoing.stream, "a count is never streamed");
    call.handle(response(200, r#"{"input_tokens":2095}"#))
        .expect("due");
    let counted = expect_done(&mut call).expect("a count");
    assert_eq!(counted.usage, crate::message::TokenUsage::new(2095, 0));
    assert_eq!(
        (counted.model.as_str(), counted.content.len()),
        ("claude-x", 0)
    );

    // A provider with no counter: finished at once, nothing sent.
    let openai = crate::adapter::for_provider("openai", None, Default::default()).unwrap();
    let mut call = Call::count(openai, &request, &endpoint(), options(1), 1);
    let error = expect_done(&mut call).expect_err("no counter");
    assert!(error.to_string().contains("no token counter"), "{error}");
}

#[test]
fn a_prepared_request_is_sent_as_made_and_read_with_the_adapter() {
    let http = HttpRequest::post_json("https://api.anthropic.com/v1/messages".into(), "{}".into());
    let prepared = Prepared {
        request: Ok(http),
        context: ResponseContext {
            model: "claude-x".into(),
            message_count: 1,
        },
        stream: false,
        count: false,
    };
    let mut call = Call::prepared(Box::new(Anthropic), prepared, &endpoint(), options(1), 1);
    let outgoing = expect_send(&mut call);
    assert_eq!(outgoing.body.as_str(), "{}");
    call.handle(response(200, &reply("made"))).expect("due");
    let answered = expect_done(&mut call).expect("parsed");
    assert_eq!(answered.content.len(), 1);

    // Egress is checked as for any call: nothing is sent where the policy says no.
    let prepared = Prepared {
        request: Ok(HttpRequest::post_json(
            "https://elsewhere.example/v1".into(),
            "{}".into(),
        )),
        context: ResponseContext::default(),
        stream: false,
        count: false,
    };
    let denied = CallOptions {
        egress: EgressPolicy::Allowlist(vec!["https://api.anthropic.com".into()]),
        ..options(1)
    };
    let mut call = Call::prepared(Box::new(Anthropic), prepared, &endpoint(), denied, 1);
    assert!(expect_done(&mut call).is_err());
}

#[test]
fn an_answered_call_finishes_at_once_and_sends_nothing() {
    let known = LlmResponse {
        id: String::new(),
        content: Vec::new(),
        model: "m".into(),
        stop_reason: String::new(),
        usage: crate::message::TokenUsage::new(7, 0),
        stop_sequence: None,
    };
    let mut call = Call::answered(Box::new(Anthropic), known.clone());
    assert_eq!(expect_done(&mut call), Ok(known));
    assert_eq!(call.poll(NOW), CallPoll::Over);
}
