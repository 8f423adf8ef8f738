//! Bytes in arbitrary chunks through the AWS event-stream framing and the Bedrock stream
//! decoder: never a panic, and the same messages and result whatever the chunking.
//!
//! With an odd first byte the body is a list of events instead (segments split on 0xFF, each
//! an event-type byte and a JSON payload), framed with valid checksums, so the fuzzer reaches
//! the decoder's semantics and not only the framing checks.
#![no_main]

use libfuzzer_sys::fuzz_target;
use oma_component_fuzz::{adapter, chunks};
use oma_core::adapter::bedrock::eventstream::{encode, EventStreamDecoder, HeaderValue};
use oma_core::adapter::ResponseContext;

const KINDS: &[(&str, &str)] = &[
    ("event", "messageStart"),
    ("event", "contentBlockStart"),
    ("event", "contentBlockDelta"),
    ("event", "contentBlockStop"),
    ("event", "messageStop"),
    ("event", "metadata"),
    ("event", "somethingNew"),
    ("exception", "throttlingException"),
    ("error", "x"),
];

fn framed(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for segment in body.split(|&b| b == 0xFF) {
        let Some((&kind, payload)) = segment.split_first() else {
            continue;
        };
        let (message_type, event_type) = KINDS[usize::from(kind) % KINDS.len()];
        out.extend(encode(
            &[
                (":message-type", HeaderValue::String(message_type.into())),
                (":event-type", HeaderValue::String(event_type.into())),
                (":exception-type", HeaderValue::String(event_type.into())),
                (
                    ":content-type",
                    HeaderValue::String("application/json".into()),
                ),
            ],
            payload,
        ));
    }
    out
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let (head, body) = data.split_at(3);
    let body = if head[2] % 2 == 1 {
        framed(body)
    } else {
        body.to_vec()
    };
    let body = &body[..];
    let pieces = chunks(body, &[head[0], head[1]]);

    let frames = |pieces: &[&[u8]]| {
        let mut decoder = EventStreamDecoder::new();
        let mut messages = Vec::new();
        for piece in pieces {
            match decoder.feed(piece) {
                Ok(more) => messages.extend(more),
                Err(error) => return (messages, Some(error)),
            }
        }
        let end = decoder.finish().err();
        (messages, end)
    };
    let (one, many) = (frames(&[body]), frames(&pieces));
    assert_eq!(one.1, many.1);
    if one.1.is_none() {
        assert_eq!(one.0, many.0);
    }

    let bedrock = |pieces: &[&[u8]]| {
        let mut decoder = adapter(6).stream_decoder(&ResponseContext::default());
        let mut events = Vec::new();
        for piece in pieces {
            match decoder.feed(piece) {
                Ok(more) => events.extend(more),
                Err(error) => return (events, Some(error)),
            }
        }
        match decoder.finish() {
            Ok(more) => {
                events.extend(more);
                (events, None)
            }
            Err(error) => (events, Some(error)),
        }
    };
    let (one, many) = (bedrock(&[body]), bedrock(&pieces));
    assert_eq!(one.1, many.1);
    if one.1.is_none() {
        assert_eq!(one.0, many.0);
    }
});
